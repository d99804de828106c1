/*
 * libcurl, loaded on first use. See include/CCurl.h for why and for the
 * contract.
 *
 * The function pointers are written once, inside pthread_once, before
 * darkroom_curl_load returns NULL to any thread; every caller calls
 * darkroom_curl_load first, and pthread_once orders those writes before
 * its return, so the pointers are never read while being written.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "CCurl.h"

#define LIBCURL_SONAME "libcurl.so.4"

/* Each pointer has the type of the function libcurl's header declares. */
static struct {
    __typeof__(&curl_global_init) global_init;
    __typeof__(&curl_easy_init) easy_init;
    __typeof__(&curl_easy_cleanup) easy_cleanup;
    __typeof__(&curl_easy_strerror) easy_strerror;
    __typeof__(&curl_easy_setopt) easy_setopt;
    __typeof__(&curl_easy_getinfo) easy_getinfo;
    __typeof__(&curl_multi_init) multi_init;
    __typeof__(&curl_multi_cleanup) multi_cleanup;
    __typeof__(&curl_multi_add_handle) multi_add_handle;
    __typeof__(&curl_multi_remove_handle) multi_remove_handle;
    __typeof__(&curl_multi_perform) multi_perform;
    __typeof__(&curl_multi_info_read) multi_info_read;
    __typeof__(&curl_multi_poll) multi_poll;
    __typeof__(&curl_multi_strerror) multi_strerror;
} curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_failure = "libcurl was not loaded";
static char load_failure_text[512];

static void load(void) {
    void *library = dlopen(LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *why = dlerror();
        snprintf(load_failure_text, sizeof load_failure_text,
                 "libcurl could not be loaded (%s; install the package that provides "
                 LIBCURL_SONAME ", libcurl4 on Debian 12)",
                 why != NULL ? why : LIBCURL_SONAME);
        load_failure = load_failure_text;
        return;
    }
    /* Each symbol by name; the first one missing is named. */
#define RESOLVE(field, name)                                                               \
    do {                                                                                   \
        *(void **)(&curl.field) = dlsym(library, name);                                    \
        if (curl.field == NULL) {                                                          \
            snprintf(load_failure_text, sizeof load_failure_text,                          \
                     "libcurl could not be used: %s has no %s", LIBCURL_SONAME, name);     \
            load_failure = load_failure_text;                                              \
            return;                                                                        \
        }                                                                                  \
    } while (0)
    RESOLVE(global_init, "curl_global_init");
    RESOLVE(easy_init, "curl_easy_init");
    RESOLVE(easy_cleanup, "curl_easy_cleanup");
    RESOLVE(easy_strerror, "curl_easy_strerror");
    RESOLVE(easy_setopt, "curl_easy_setopt");
    RESOLVE(easy_getinfo, "curl_easy_getinfo");
    RESOLVE(multi_init, "curl_multi_init");
    RESOLVE(multi_cleanup, "curl_multi_cleanup");
    RESOLVE(multi_add_handle, "curl_multi_add_handle");
    RESOLVE(multi_remove_handle, "curl_multi_remove_handle");
    RESOLVE(multi_perform, "curl_multi_perform");
    RESOLVE(multi_info_read, "curl_multi_info_read");
    RESOLVE(multi_poll, "curl_multi_poll");
    RESOLVE(multi_strerror, "curl_multi_strerror");
#undef RESOLVE
    /* The library stays loaded for the life of the process (never dlclose'd):
     * libcurl's and OpenSSL's global state is not meant to be torn down. */
    CURLcode code = curl.global_init(CURL_GLOBAL_DEFAULT);
    if (code != CURLE_OK) {
        snprintf(load_failure_text, sizeof load_failure_text,
                 "libcurl could not start: %s", curl.easy_strerror(code));
        load_failure = load_failure_text;
        return;
    }
    load_failure = NULL;
}

const char *darkroom_curl_load(void) {
    pthread_once(&load_once, load);
    return load_failure;
}

CURL *darkroom_curl_easy_init(void) { return curl.easy_init(); }
void darkroom_curl_easy_cleanup(CURL *handle) { curl.easy_cleanup(handle); }
const char *darkroom_curl_easy_strerror(CURLcode code) { return curl.easy_strerror(code); }

CURLM *darkroom_curl_multi_init(void) { return curl.multi_init(); }
CURLMcode darkroom_curl_multi_cleanup(CURLM *multi) { return curl.multi_cleanup(multi); }
CURLMcode darkroom_curl_multi_add_handle(CURLM *multi, CURL *handle) { return curl.multi_add_handle(multi, handle); }
CURLMcode darkroom_curl_multi_remove_handle(CURLM *multi, CURL *handle) { return curl.multi_remove_handle(multi, handle); }
CURLMcode darkroom_curl_multi_perform(CURLM *multi, int *running) { return curl.multi_perform(multi, running); }
CURLMsg *darkroom_curl_multi_info_read(CURLM *multi, int *left) { return curl.multi_info_read(multi, left); }
CURLMcode darkroom_curl_multi_poll(CURLM *multi, int timeout_ms) {
    return curl.multi_poll(multi, NULL, 0, timeout_ms, NULL);
}
const char *darkroom_curl_multi_strerror(CURLMcode code) { return curl.multi_strerror(code); }

CURLcode darkroom_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode darkroom_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode darkroom_curl_set_string(CURL *handle, CURLoption option, const char *value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode darkroom_curl_set_pointer(CURL *handle, CURLoption option, void *value) {
    return curl.easy_setopt(handle, option, value);
}
CURLcode darkroom_curl_set_write_function(CURL *handle, curl_write_callback callback) {
    return curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}
CURLcode darkroom_curl_get_long(CURL *handle, CURLINFO info, long *value) {
    return curl.easy_getinfo(handle, info, value);
}
CURLcode darkroom_curl_get_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl.easy_getinfo(handle, info, value);
}
CURLcode darkroom_curl_get_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl.easy_getinfo(handle, info, value);
}

CURLcode darkroom_curl_message_result(const CURLMsg *message) { return message->data.result; }
