/*
 * libcurl, loaded on first use. See include/CCurl.h for why and for the
 * contract.
 *
 * The function pointers are written once, inside pthread_once, before
 * darkroom_curl_load returns NULL to any thread; every caller calls
 * darkroom_curl_load first, and pthread_once orders those writes before
 * its return, so the pointers are never read while being written.
 */
#include <pthread.h>
#include <stdio.h>

#include "CCurl.h"
#include "CLoader.h"

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
    /* Each symbol by name; the first one missing is named. */
    const dr_symbol symbols[] = {
        { "curl_global_init", (void **)&curl.global_init },
        { "curl_easy_init", (void **)&curl.easy_init },
        { "curl_easy_cleanup", (void **)&curl.easy_cleanup },
        { "curl_easy_strerror", (void **)&curl.easy_strerror },
        { "curl_easy_setopt", (void **)&curl.easy_setopt },
        { "curl_easy_getinfo", (void **)&curl.easy_getinfo },
        { "curl_multi_init", (void **)&curl.multi_init },
        { "curl_multi_cleanup", (void **)&curl.multi_cleanup },
        { "curl_multi_add_handle", (void **)&curl.multi_add_handle },
        { "curl_multi_remove_handle", (void **)&curl.multi_remove_handle },
        { "curl_multi_perform", (void **)&curl.multi_perform },
        { "curl_multi_info_read", (void **)&curl.multi_info_read },
        { "curl_multi_poll", (void **)&curl.multi_poll },
        { "curl_multi_strerror", (void **)&curl.multi_strerror },
    };
    load_failure = dr_load_library("libcurl", LIBCURL_SONAME, "libcurl4 on Debian 12", symbols, sizeof symbols / sizeof symbols[0],
                                   load_failure_text, sizeof load_failure_text);
    if (load_failure != NULL) return;
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
