#ifndef DARKROOM_CMALLOC_SHIM_H
#define DARKROOM_CMALLOC_SHIM_H
// glibc's malloc controls (mallopt, malloc_trim), which Swift's Glibc
// module does not import: <malloc.h> is not part of it.
#include <malloc.h>
#endif
