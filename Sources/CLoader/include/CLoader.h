/*
 * CLoader: a system library loaded on first use, for the shims that keep
 * a library (and what it brings) out of every command's start-up: CCurl,
 * CMicroHTTPD, CHEIF and CTIFF. Each keeps its own table of function
 * pointers, typed as the library's header declares them, and its own
 * once-only load; this fills the table and words what went wrong.
 */
#ifndef CLOADER_H
#define CLOADER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One function to look up: its name, and the table slot that takes its
   address (a function pointer, stored through void ** as dlsym's manual
   page does). */
typedef struct dr_symbol {
    const char *name;
    void **slot;
} dr_symbol;

/* Opens `soname` (RTLD_NOW | RTLD_LOCAL; never closed: the library stays
   for the life of the process) and stores each symbol's address in its
   slot. Returns NULL when every symbol was found. Otherwise returns
   `text`, in which it wrote why, naming the library as `library` and,
   when it cannot be opened, `package`, which provides it:
   "libtiff could not be loaded (...; install the package that provides
   libtiff.so.6, libtiff6 on Debian 12)" or "libtiff could not be used:
   libtiff.so.6 has no TIFFClose". */
const char *dr_load_library(const char *library, const char *soname, const char *package, const dr_symbol *symbols,
                            size_t count, char *text, size_t size);

#ifdef __cplusplus
}
#endif

#endif
