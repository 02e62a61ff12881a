/* The demo model's GGUF bytes, built into the binary from
 * engine/synth/demo/stories260K.gguf (see engine/synth/demo/LICENSE.md). */
#ifndef HEARTH_DEMO_DATA_H
#define HEARTH_DEMO_DATA_H

#include <stddef.h>

extern const unsigned char demo_gguf[];
extern const size_t demo_gguf_size;

#endif
