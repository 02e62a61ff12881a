/* The avx2 path (being written): nothing packed yet, so every format runs the scalar code. */
#include "kern_path.h"

static bool avx2_packs(int type) { (void)type; return false; }

const kern_path kern_path_avx2 = {
    .name = "avx2",
    .packs = avx2_packs,
    .rows = NULL,
    .quantize = NULL,
};
