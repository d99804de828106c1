#ifndef DARKROOM_CSQLITE_SHIM_H
#define DARKROOM_CSQLITE_SHIM_H
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast of -1 to a destructor pointer, which Swift cannot
// import; these wrappers make SQLite copy the bytes before the call returns.
// A zero-length value is bound from a static empty buffer, because SQLite
// binds NULL when it is given a null pointer.
static inline int darkroom_sqlite3_bind_text_copy(sqlite3_stmt *statement, int index,
                                                  const char *text, sqlite3_uint64 length) {
    static const char empty[1] = {0};
    if (length == 0 || text == 0) {
        return sqlite3_bind_text64(statement, index, empty, 0, SQLITE_TRANSIENT, SQLITE_UTF8);
    }
    return sqlite3_bind_text64(statement, index, text, length, SQLITE_TRANSIENT, SQLITE_UTF8);
}

static inline int darkroom_sqlite3_bind_blob_copy(sqlite3_stmt *statement, int index,
                                                  const void *bytes, sqlite3_uint64 length) {
    if (length == 0 || bytes == 0) {
        return sqlite3_bind_zeroblob(statement, index, 0);
    }
    return sqlite3_bind_blob64(statement, index, bytes, length, SQLITE_TRANSIENT);
}

// sqlite3_config is variadic too: this turns off SQLite's memory
// statistics (SQLITE_CONFIG_MEMSTATUS), which take a process-wide mutex
// around every allocation SQLite makes. Must run before SQLite initializes.
static inline int darkroom_sqlite3_config_memstatus(int on) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, on);
}

// sqlite3_db_config is variadic; this fixes the one form the project uses
// (an int setting with an optional int result).
static inline int darkroom_sqlite3_db_config_int(sqlite3 *db, int option, int value, int *result) {
    return sqlite3_db_config(db, option, value, result);
}

#endif
