#ifndef DARKROOM_CSQLITE_SHIM_H
#define DARKROOM_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
