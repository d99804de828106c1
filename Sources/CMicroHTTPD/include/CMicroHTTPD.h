#ifndef DARKROOM_CMICROHTTPD_H
#define DARKROOM_CMICROHTTPD_H
// libmicrohttpd, for the metrics listener: a small embedded HTTP/1.1 server
// that parses requests, enforces limits and runs its own polling thread.
//
// The library is loaded when a listener first starts (darkroom_mhd_load),
// not when the program starts: it brings GnuTLS and the libraries GnuTLS
// needs, which every darkroom process would map and relocate though only
// a role started with --metrics serves HTTP (see CCurl.h for the cost). The header still
// comes from libmicrohttpd's own, for its types and constants; its
// functions are called only through the darkroom_mhd_* functions below,
// and the program does not link libmicrohttpd.
// microhttpd.h needs the system's socket types declared first.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

// Loads libmicrohttpd.so.12, once per process; later calls return the first
// call's answer at once. Returns NULL when it is ready, or why it is not.
// Every other function here may be called only after it returned NULL.
const char *darkroom_mhd_load(void);

// MHD_start_daemon is variadic, which Swift cannot call; this fixes the one
// form the project uses: a listening socket made by the caller, the internal
// polling thread, and the limits that keep a client from holding the
// listener's memory or connections (total and per address, bytes per
// connection for the request line and headers, seconds a connection may sit
// idle). Returns NULL if the daemon could not start.
struct MHD_Daemon *darkroom_mhd_start(unsigned int flags, MHD_socket listen_socket,
                                      unsigned int connection_limit,
                                      unsigned int per_address_limit,
                                      size_t memory_limit,
                                      unsigned int timeout_seconds,
                                      MHD_AccessHandlerCallback handler, void *handler_context);
void darkroom_mhd_stop_daemon(struct MHD_Daemon *daemon);

struct MHD_Response *darkroom_mhd_create_response_from_buffer(size_t size, void *buffer,
                                                              enum MHD_ResponseMemoryMode mode);
void darkroom_mhd_destroy_response(struct MHD_Response *response);
enum MHD_Result darkroom_mhd_add_response_header(struct MHD_Response *response, const char *header,
                                                 const char *content);
enum MHD_Result darkroom_mhd_queue_response(struct MHD_Connection *connection, unsigned int status_code,
                                            struct MHD_Response *response);

#endif
