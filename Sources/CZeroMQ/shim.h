#ifndef DARKROOM_CZEROMQ_SHIM_H
#define DARKROOM_CZEROMQ_SHIM_H
#include <zmq.h>
#endif
