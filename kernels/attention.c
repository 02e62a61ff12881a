/* Attention per head: the scalar oracle and the dispatch (see attention.h). */
#include "kernels/attention.h"
#include "kernels/ops.h"
#include <math.h>
#include <string.h>

void attn_head_scalar(const float *q, const fp16_t *k, const fp16_t *v, size_t stride,
                      int n_pos, int hd, float scale, float *scores, float *out) {
    for (int t = 0; t < n_pos; t++) {
        const fp16_t *kt = k + (size_t)t * stride;
        float s = 0.0f;
        for (int d = 0; d < hd; d++) s = fmaf(q[d], fp16_to_f32(kt[d]), s);
        scores[t] = s * scale;
    }
    op_softmax(scores, n_pos);
    memset(out, 0, sizeof(float) * (size_t)hd);
    for (int t = 0; t < n_pos; t++) {
        const fp16_t *vt = v + (size_t)t * stride;
        for (int d = 0; d < hd; d++) out[d] = fmaf(scores[t], fp16_to_f32(vt[d]), out[d]);
    }
}

void attn_group_scalar(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                       int n_pos, int hd, float scale, float *scores, float *out) {
    for (int g = 0; g < G; g++) attn_head_scalar(q + g * hd, k, v, stride, n_pos, hd, scale, scores, out + g * hd);
}

attn_group_fn attn_group_for(kern_path_id p) {
#if defined(__x86_64__)
    if (p == KPATH_AVX2) return attn_group_f16c;
    if (p == KPATH_AVX512) return attn_group_avx512;
#endif
#if defined(__aarch64__)
    if (p == KPATH_NEON) return attn_group_neon;
#endif
    (void)p;
    return attn_group_scalar;
}
