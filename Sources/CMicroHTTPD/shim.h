#ifndef DARKROOM_CMICROHTTPD_SHIM_H
#define DARKROOM_CMICROHTTPD_SHIM_H
// libmicrohttpd, for the metrics listener: a small embedded HTTP/1.1 server
// that parses requests, enforces limits and runs its own polling thread.
// microhttpd.h needs the system's socket types declared first.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

// MHD_start_daemon is variadic, which Swift cannot call; this fixes the one
// form the project uses: a listening socket made by the caller, the internal
// polling thread, and the limits that keep a client from holding the
// listener's memory or connections (total and per address, bytes per
// connection for the request line and headers, seconds a connection may sit
// idle). Returns NULL if the daemon could not start.
static inline struct MHD_Daemon *darkroom_mhd_start(unsigned int flags, MHD_socket listen_socket,
                                                    unsigned int connection_limit,
                                                    unsigned int per_address_limit,
                                                    size_t memory_limit,
                                                    unsigned int timeout_seconds,
                                                    MHD_AccessHandlerCallback handler, void *handler_context) {
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_context,
                            MHD_OPTION_LISTEN_SOCKET, listen_socket,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address_limit,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_END);
}

#endif
