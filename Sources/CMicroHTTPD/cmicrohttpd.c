/*
 * libmicrohttpd, loaded on first use. See include/CMicroHTTPD.h for why and
 * for the contract.
 *
 * The function pointers are written once, inside pthread_once, before
 * darkroom_mhd_load returns NULL to any thread; every caller calls
 * darkroom_mhd_load first (a listener before it starts its daemon, and the
 * daemon's thread only runs after that), and pthread_once orders those
 * writes before its return.
 */
#include <pthread.h>
#include <stdio.h>

#include "CMicroHTTPD.h"
#include "CLoader.h"

#define LIBMICROHTTPD_SONAME "libmicrohttpd.so.12"

/* Each pointer has the type of the function libmicrohttpd's header declares. */
static struct {
    __typeof__(&MHD_start_daemon) start_daemon;
    __typeof__(&MHD_stop_daemon) stop_daemon;
    __typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
    __typeof__(&MHD_destroy_response) destroy_response;
    __typeof__(&MHD_add_response_header) add_response_header;
    __typeof__(&MHD_queue_response) queue_response;
} mhd;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_failure = "libmicrohttpd was not loaded";
static char load_failure_text[512];

static void load(void) {
    /* Each symbol by name; the first one missing is named. */
    const dr_symbol symbols[] = {
        { "MHD_start_daemon", (void **)&mhd.start_daemon },
        { "MHD_stop_daemon", (void **)&mhd.stop_daemon },
        { "MHD_create_response_from_buffer", (void **)&mhd.create_response_from_buffer },
        { "MHD_destroy_response", (void **)&mhd.destroy_response },
        { "MHD_add_response_header", (void **)&mhd.add_response_header },
        { "MHD_queue_response", (void **)&mhd.queue_response },
    };
    load_failure = dr_load_library("libmicrohttpd", LIBMICROHTTPD_SONAME, "libmicrohttpd12 on Debian 12", symbols, sizeof symbols / sizeof symbols[0],
                                   load_failure_text, sizeof load_failure_text);
    if (load_failure != NULL) return;
    /* Stays loaded for the life of the process (never dlclose'd). */
    load_failure = NULL;
}

const char *darkroom_mhd_load(void) {
    pthread_once(&load_once, load);
    return load_failure;
}

struct MHD_Daemon *darkroom_mhd_start(unsigned int flags, MHD_socket listen_socket,
                                      unsigned int connection_limit,
                                      unsigned int per_address_limit,
                                      size_t memory_limit,
                                      unsigned int timeout_seconds,
                                      MHD_AccessHandlerCallback handler, void *handler_context) {
    return mhd.start_daemon(flags, 0, NULL, NULL, handler, handler_context,
                            MHD_OPTION_LISTEN_SOCKET, listen_socket,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address_limit,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_END);
}

void darkroom_mhd_stop_daemon(struct MHD_Daemon *daemon) { mhd.stop_daemon(daemon); }

struct MHD_Response *darkroom_mhd_create_response_from_buffer(size_t size, void *buffer,
                                                              enum MHD_ResponseMemoryMode mode) {
    return mhd.create_response_from_buffer(size, buffer, mode);
}

void darkroom_mhd_destroy_response(struct MHD_Response *response) { mhd.destroy_response(response); }

enum MHD_Result darkroom_mhd_add_response_header(struct MHD_Response *response, const char *header,
                                                 const char *content) {
    return mhd.add_response_header(response, header, content);
}

enum MHD_Result darkroom_mhd_queue_response(struct MHD_Connection *connection, unsigned int status_code,
                                            struct MHD_Response *response) {
    return mhd.queue_response(connection, status_code, response);
}
