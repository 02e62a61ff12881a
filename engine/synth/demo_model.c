/* The demo model (see demo_model.h): the GGUF bytes compiled in from
 * engine/synth/demo/stories260K.gguf, offered to the GGUF reader as a
 * built-in file, so it loads from memory like any mapped file. */
#include "engine/synth/demo_model.h"
#include "engine/synth/demo_data.h"
#include "engine/gguf/gguf.h"

#include <stdio.h>

#define DEMO_NAME "stories260K.gguf"

int demo_model_path(char *buf, size_t cap, char *err, size_t errlen) {
    if (gguf_register_builtin(DEMO_NAME, demo_gguf, demo_gguf_size)) {
        snprintf(err, errlen, "cannot register the built-in demo model");
        return -1;
    }
    int n = snprintf(buf, cap, "%s%s", GGUF_BUILTIN_PREFIX, DEMO_NAME);
    if (n < 0 || (size_t)n >= cap) {
        snprintf(err, errlen, "no room for the demo model's path");
        return -1;
    }
    return 0;
}
