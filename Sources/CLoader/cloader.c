#include "CLoader.h"

#include <dlfcn.h>
#include <stdio.h>

const char *dr_load_library(const char *library, const char *soname, const char *package, const dr_symbol *symbols,
                            size_t count, char *text, size_t size) {
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        snprintf(text, size, "%s could not be loaded (%s; install the package that provides %s, %s)", library,
                 why != NULL ? why : soname, soname, package);
        return text;
    }
    for (size_t i = 0; i < count; i++) {
        *symbols[i].slot = dlsym(handle, symbols[i].name);
        if (*symbols[i].slot == NULL) {
            snprintf(text, size, "%s could not be used: %s has no %s", library, soname, symbols[i].name);
            return text;
        }
    }
    return NULL;
}
