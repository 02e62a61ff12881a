/* The scalar path: the reference dot products of formats.c, one output at a
 * time, on the original GGUF layout. It is the oracle the fast paths are
 * tested against and the fallback for any format a fast path lacks. */
#include "kernels/kern_path.h"

static bool scalar_packs(int type) { (void)type; return false; }

static void scalar_rows(const hweight *w, const kern_act *a, float *y, int64_t n0, int64_t n1, int worker) {
    (void)worker;
    const format_info *f = format_get(w->type);
    int64_t K = a->n_in, N = w->n_out, nb = K / QK;
    /* m innermost: the weight row stays in cache for every activation row. */
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = w->data + (size_t)n * w->row_bytes;
        for (int m = 0; m < a->M; m++) {
            y[(size_t)m * N + n] = f->uses_act_q8
                ? format_dot_q8(w->type, row, a->q + (size_t)m * nb, K)
                : format_dot_f32(w->type, row, a->x + (size_t)m * K, K);
        }
    }
}

const kern_path kern_path_scalar = {
    .name = "scalar",
    .packs = scalar_packs,
    .rows = scalar_rows,
    .quantize = NULL,
};
