/* The backends of this build and the choice among them (see backend.h). */
#include "engine/model/backend.h"
#include "metal/plan_metal.h"
#include <string.h>

/* Best first: "auto" takes the first that can run here (the emulator is
 * never the best: it is for tests and for debugging a shader). */
static const backend *const backends[] = {
#ifdef HEARTH_METAL
    &backend_metal,
#endif
    &backend_cpu,
#ifdef HEARTH_METAL_EMU
    &backend_metal_emu,
#endif
};
#define N_BACKENDS (sizeof backends / sizeof backends[0])

const backend *backend_find(const char *name) {
    bool any = !name || !*name || !strcmp(name, "auto");
    for (size_t i = 0; i < N_BACKENDS; i++)
        if ((any || !strcmp(name, backends[i]->name)) && backends[i]->available()) return backends[i];
    return NULL;
}

const char *backend_names(void) {
#if defined(HEARTH_METAL) && defined(HEARTH_METAL_EMU)
    return "metal cpu metal-emu";
#elif defined(HEARTH_METAL)
    return "metal cpu";
#elif defined(HEARTH_METAL_EMU)
    return "cpu metal-emu";
#else
    return "cpu";
#endif
}
