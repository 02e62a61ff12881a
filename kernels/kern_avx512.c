/* The avx512 path (being written): nothing packed yet, so every format runs the scalar code. */
#include "kern_path.h"

static bool avx512_packs(int type) { (void)type; return false; }

const kern_path kern_path_avx512 = {
    .name = "avx512",
    .packs = avx512_packs,
    .rows = NULL,
    .quantize = NULL,
};
