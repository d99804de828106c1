#ifndef DARKROOM_CCURL_SHIM_H
#define DARKROOM_CCURL_SHIM_H
// libcurl, for downloading the http:// and https:// sources of
// `darkroom submit` (Debian's libcurl4-openssl-dev). Only DarkroomFetch uses
// it; every handle is made, driven and freed on one thread there.
#include <curl/curl.h>

// Once per process, before the first handle: libcurl's own set-up (and
// OpenSSL's). CURL_GLOBAL_DEFAULT is a macro expression Swift cannot import.
static inline CURLcode darkroom_curl_global_init(void) {
    return curl_global_init(CURL_GLOBAL_DEFAULT);
}

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call: these fix one argument type each. Each returns libcurl's code.
static inline CURLcode darkroom_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode darkroom_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

// libcurl copies the string (since 7.17.0), so it need not outlive the call.
static inline CURLcode darkroom_curl_set_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

// For CURLOPT_WRITEDATA, CURLOPT_PRIVATE and CURLOPT_ERRORBUFFER: the
// pointer must stay valid for as long as the handle may use it.
static inline CURLcode darkroom_curl_set_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode darkroom_curl_set_write_function(CURL *handle, curl_write_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

static inline CURLcode darkroom_curl_get_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode darkroom_curl_get_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode darkroom_curl_get_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

// The result of a finished transfer, from the union in CURLMsg.
static inline CURLcode darkroom_curl_message_result(const CURLMsg *message) {
    return message->data.result;
}

#endif
