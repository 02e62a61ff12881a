/* The demo model used when no model is given: stories260K, a small real
 * trained model (TinyStories, MIT) built into the binary, so a fresh install
 * tells a short story with nothing downloaded. */
#ifndef HEARTH_DEMO_MODEL_H
#define HEARTH_DEMO_MODEL_H

#include <stddef.h>

/* What to tell the user when the demo model is used. */
#define DEMO_MODEL_NOTE "the built-in demo model stories260K (a 260K-parameter TinyStories model: " \
                        "it tells short stories in simple English; give -m MODEL.gguf for a real model)"

/* The path model_load opens the demo model by (a built-in file, see
 * gguf_register_builtin), written to buf. 0, or -1 with err. */
int demo_model_path(char *buf, size_t cap, char *err, size_t errlen);

#endif
