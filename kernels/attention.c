/* Attention per head: the scalar oracle and the dispatch (see attention.h). */
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "kernels/kern_table.h"
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
    const kern_table *t = kern_table_of(p);
    return t ? t->attention : attn_group_scalar;
}
