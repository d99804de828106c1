#ifndef DARKROOM_CZEROMQ_SHIM_H
#define DARKROOM_CZEROMQ_SHIM_H
#include <errno.h>
#include <zmq.h>

// libzmq defines some error numbers as sums of macros and only when the
// platform lacks them; these accessors give Swift one stable spelling.
static inline int darkroom_zmq_eterm(void) { return ETERM; }
static inline int darkroom_zmq_efsm(void) { return EFSM; }
static inline int darkroom_zmq_enocompatproto(void) { return ENOCOMPATPROTO; }
static inline int darkroom_zmq_emthread(void) { return EMTHREAD; }
static inline int darkroom_zmq_ehostunreach(void) { return EHOSTUNREACH; }
static inline int darkroom_zmq_enotsock(void) { return ENOTSOCK; }
static inline int darkroom_zmq_enotsup(void) { return ENOTSUP; }
static inline int darkroom_zmq_eprotonosupport(void) { return EPROTONOSUPPORT; }
static inline int darkroom_zmq_eaddrinuse(void) { return EADDRINUSE; }
static inline int darkroom_zmq_eaddrnotavail(void) { return EADDRNOTAVAIL; }
static inline int darkroom_zmq_emsgsize(void) { return EMSGSIZE; }

// Option setters with a fixed C type, so Swift never chooses the width of an
// option value: libzmq rejects an option whose length does not match exactly.
static inline int darkroom_zmq_setsockopt_int(void *socket, int option, int value) {
    return zmq_setsockopt(socket, option, &value, sizeof value);
}
static inline int darkroom_zmq_setsockopt_int64(void *socket, int option, int64_t value) {
    return zmq_setsockopt(socket, option, &value, sizeof value);
}
static inline int darkroom_zmq_getsockopt_int(void *socket, int option, int *value) {
    size_t size = sizeof *value;
    return zmq_getsockopt(socket, option, value, &size);
}
static inline int darkroom_zmq_getsockopt_int64(void *socket, int option, int64_t *value) {
    size_t size = sizeof *value;
    return zmq_getsockopt(socket, option, value, &size);
}

// Sends `data` (`size` bytes) as one frame without copying it: libzmq owns
// the bytes from here on and calls `release(data, hint)` once it has sent
// them (from its I/O thread) or dropped them. `*taken` says whether it took
// them: 0 only when libzmq could not make the message, and then the caller
// still owns `data`. Interrupted sends are retried here, because a message
// that failed is closed, which releases the bytes.
typedef void (*darkroom_zmq_release_fn)(void *data, void *hint);
static inline int darkroom_zmq_send_owned(void *socket, void *data, size_t size, darkroom_zmq_release_fn release,
                                          void *hint, int flags, int *taken) {
    zmq_msg_t msg;
    *taken = 0;
    if (zmq_msg_init_data(&msg, data, size, release, hint) != 0) return -1;
    *taken = 1;
    int rc;
    do { rc = zmq_msg_send(&msg, socket, flags); } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        int saved = errno;
        zmq_msg_close(&msg);
        errno = saved;
    }
    return rc;
}

#endif
