/* The backends of this build and the choice among them (see backend.h). */
#include "engine/model/backend.h"
#include <string.h>

/* Best first: "auto" takes the first that can run here. */
static const backend *const backends[] = { &backend_cpu };
#define N_BACKENDS (sizeof backends / sizeof backends[0])

const backend *backend_find(const char *name) {
    bool any = !name || !*name || !strcmp(name, "auto");
    for (size_t i = 0; i < N_BACKENDS; i++)
        if ((any || !strcmp(name, backends[i]->name)) && backends[i]->available()) return backends[i];
    return NULL;
}

const char *backend_names(void) { return "cpu"; }
