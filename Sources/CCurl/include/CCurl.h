#ifndef DARKROOM_CCURL_H
#define DARKROOM_CCURL_H
// libcurl, for downloading the http:// and https:// sources of
// `darkroom submit` (Debian's libcurl4-openssl-dev). Only DarkroomFetch uses
// it; every handle is made, driven and freed on one thread there.
//
// The library is loaded when it is first needed (darkroom_curl_load), not
// when the program starts: libcurl brings a score of shared libraries with
// it (TLS, Kerberos, LDAP, SSH, compression), and mapping and relocating
// them and libmicrohttpd's (23 libraries in all) cost every darkroom
// process about a third of the CPU `darkroom --version` takes, though
// only a submit with a URL among its inputs downloads anything. The header
// still comes from libcurl's own, for its types and constants; its
// functions are called only through the darkroom_curl_* functions below,
// and the program does not link libcurl (a direct call would not link).
#include <curl/curl.h>

// Loads libcurl.so.4 and runs its global set-up (and OpenSSL's), once per
// process; later calls return the first call's answer at once. Returns
// NULL when libcurl is ready, or why it is not (the library missing, a
// function missing from it, or its set-up failing). Every other function
// here may be called only after it returned NULL.
const char *darkroom_curl_load(void);

CURL *darkroom_curl_easy_init(void);
void darkroom_curl_easy_cleanup(CURL *handle);
const char *darkroom_curl_easy_strerror(CURLcode code);

CURLM *darkroom_curl_multi_init(void);
CURLMcode darkroom_curl_multi_cleanup(CURLM *multi);
CURLMcode darkroom_curl_multi_add_handle(CURLM *multi, CURL *handle);
CURLMcode darkroom_curl_multi_remove_handle(CURLM *multi, CURL *handle);
CURLMcode darkroom_curl_multi_perform(CURLM *multi, int *running);
CURLMsg *darkroom_curl_multi_info_read(CURLM *multi, int *left);
CURLMcode darkroom_curl_multi_poll(CURLM *multi, int timeout_ms);
const char *darkroom_curl_multi_strerror(CURLMcode code);

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call: these fix one argument type each. Each returns libcurl's code.
CURLcode darkroom_curl_set_long(CURL *handle, CURLoption option, long value);
CURLcode darkroom_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value);
// libcurl copies the string (since 7.17.0), so it need not outlive the call.
CURLcode darkroom_curl_set_string(CURL *handle, CURLoption option, const char *value);
// For CURLOPT_WRITEDATA, CURLOPT_PRIVATE and CURLOPT_ERRORBUFFER: the
// pointer must stay valid for as long as the handle may use it.
CURLcode darkroom_curl_set_pointer(CURL *handle, CURLoption option, void *value);
CURLcode darkroom_curl_set_write_function(CURL *handle, curl_write_callback callback);
CURLcode darkroom_curl_get_long(CURL *handle, CURLINFO info, long *value);
CURLcode darkroom_curl_get_offset(CURL *handle, CURLINFO info, curl_off_t *value);
CURLcode darkroom_curl_get_pointer(CURL *handle, CURLINFO info, void **value);

// The result of a finished transfer, from the union in CURLMsg.
CURLcode darkroom_curl_message_result(const CURLMsg *message);

#endif
