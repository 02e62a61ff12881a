/* Attention with NEON (aarch64; dispatched for the NEON kernel path) for up
 * to ATTN_GROUP_MAX query heads that share one KV head (grouped-query
 * attention): each fp16 key and value element is converted once and used by
 * every head of the group. Head dimensions that are a multiple of 4 stay in
 * vectors; others go head by head to the scalar oracle.
 *
 * Scores take 4 keys at a time, so each q vector loaded serves 4 keys: each
 * key's q.k is left as 4 partial sums and two rounds of pairwise adds turn
 * the 4 vectors into the 4 scores, in key order. The softmax's exp is vexp4
 * (vec_exp.h), and the weights are left unnormalized until the end:
 * out = (sum_t e_t v_t) / sum_t e_t.
 *
 * The value pass goes over the columns in chunks small enough that the G
 * heads' accumulators stay in the 32 vector registers (G * W of them), all
 * keys per chunk: 4 heads of 128 would be 128 vectors, and accumulators in
 * memory cost a load and a store per multiply-add. Each value element is
 * still converted once, and nothing is sized by the head dimension, so it
 * has no upper limit. */
#include "kernels/attention.h"
#include "kernels/vec_exp.h"
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

/* the cache holds IEEE binary16 bits; the conversion is base AArch64 SIMD */
INLINE float32x4_t load4_f16(const fp16_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

/* lane j = sum of the lanes of v[j], for 4 vectors */
INLINE float32x4_t hsum4x4(const float32x4_t v[4]) {
    return vpaddq_f32(vpaddq_f32(v[0], v[1]), vpaddq_f32(v[2], v[3]));
}

/* Scaled scores of keys t0..t0+3 for G heads, the heads' maxima updated.
 * Past n_pos (cnt < 4) the last live key is read again: its lanes repeat a
 * live score, so they leave the max alone, and they are not stored. */
INLINE void scores4(const float *q, int G, const fp16_t *k, size_t stride, int n_pos, int t0, int hd,
                    float32x4_t vscale, float *scores, float32x4_t vmax[]) {
    const int cnt = n_pos - t0 < 4 ? n_pos - t0 : 4;
    const fp16_t *kt[4];
    for (int j = 0; j < 4; j++) kt[j] = k + (size_t)(t0 + (j < cnt ? j : cnt - 1)) * stride;
    float32x4_t acc[ATTN_GROUP_MAX][4];
    for (int g = 0; g < G; g++)
        for (int j = 0; j < 4; j++) acc[g][j] = vdupq_n_f32(0.0f);
    for (int d = 0; d < hd; d += 4) {
        float32x4_t kc[4];
        for (int j = 0; j < 4; j++) kc[j] = load4_f16(kt[j] + d);
        for (int g = 0; g < G; g++) {
            float32x4_t qv = vld1q_f32(q + g * hd + d);
            for (int j = 0; j < 4; j++) acc[g][j] = vfmaq_f32(acc[g][j], qv, kc[j]);
        }
    }
    for (int g = 0; g < G; g++) {
        float32x4_t s = vmulq_f32(hsum4x4(acc[g]), vscale);
        vmax[g] = vmaxnmq_f32(vmax[g], s);   /* maxNum, as fmaxf in op_softmax */
        float *dst = scores + (size_t)g * n_pos + t0;
        if (cnt == 4) {
            vst1q_f32(dst, s);
        } else {
            float tmp[4];
            vst1q_f32(tmp, s);
            memcpy(dst, tmp, sizeof(float) * (size_t)cnt);
        }
    }
}

/* Columns 4c0 .. 4(c0+W)-1 of out for G heads: sum over every key of the
 * weight times the value row, then times 1/sum. Weights come 4 keys to a
 * vector per head and are applied by lane. */
INLINE void values_chunk(int G, int W, const fp16_t *v, size_t stride, int n_pos, int hd, int c0,
                         const float *scores, const float *inv, float *out) {
    float32x4_t acc[ATTN_GROUP_MAX][8];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < W; c++) acc[g][c] = vdupq_n_f32(0.0f);
    const fp16_t *vt = v + 4 * c0;
    int t = 0;
    for (; t + 4 <= n_pos; t += 4) {
        float32x4_t w[ATTN_GROUP_MAX];
        for (int g = 0; g < G; g++) w[g] = vld1q_f32(scores + (size_t)g * n_pos + t);
#define KEY(j)                                                                               \
        for (int c = 0; c < W; c++) {                                                        \
            float32x4_t vc = load4_f16(vt + (size_t)(j) * stride + 4 * c);                   \
            for (int g = 0; g < G; g++) acc[g][c] = vfmaq_laneq_f32(acc[g][c], vc, w[g], j); \
        }
        KEY(0) KEY(1) KEY(2) KEY(3)   /* the lane must be a constant */
#undef KEY
        vt += 4 * stride;
    }
    for (; t < n_pos; t++, vt += stride) {
        float32x4_t w[ATTN_GROUP_MAX];
        for (int g = 0; g < G; g++) w[g] = vld1q_dup_f32(scores + (size_t)g * n_pos + t);
        for (int c = 0; c < W; c++) {
            float32x4_t vc = load4_f16(vt + 4 * c);
            for (int g = 0; g < G; g++) acc[g][c] = vfmaq_f32(acc[g][c], w[g], vc);
        }
    }
    for (int g = 0; g < G; g++) {
        const float32x4_t vinv = vdupq_n_f32(inv[g]);
        for (int c = 0; c < W; c++) vst1q_f32(out + g * hd + 4 * (c0 + c), vmulq_f32(acc[g][c], vinv));
    }
}

/* G heads (a compile-time constant after inlining), hd a multiple of 4. */
INLINE void group(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                  int n_pos, int hd, float scale, float *scores, float *out) {
    /* scores of every head and their max */
    const float32x4_t vscale = vdupq_n_f32(scale);
    float32x4_t vmax[ATTN_GROUP_MAX];
    for (int g = 0; g < G; g++) vmax[g] = vdupq_n_f32(-INFINITY);
    for (int t0 = 0; t0 < n_pos; t0 += 4) scores4(q, G, k, stride, n_pos, t0, hd, vscale, scores, vmax);

    /* e_t = exp(s_t - max) per head, and 1 / sum */
    float inv[ATTN_GROUP_MAX];
    for (int g = 0; g < G; g++) {
        float *sc = scores + (size_t)g * n_pos;
        const float32x4_t mx = vdupq_n_f32(vmaxnmvq_f32(vmax[g]));
        float32x4_t vsum = vdupq_n_f32(0.0f);
        int t = 0;
        for (; t + 4 <= n_pos; t += 4) {
            float32x4_t e = vexp4(vsubq_f32(vld1q_f32(sc + t), mx));
            vst1q_f32(sc + t, e);
            vsum = vaddq_f32(vsum, e);
        }
        if (t < n_pos) {   /* the tail through one vector padded with -inf, whose exp is 0 */
            float tail[4] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY };
            memcpy(tail, sc + t, sizeof(float) * (size_t)(n_pos - t));
            float32x4_t e = vexp4(vsubq_f32(vld1q_f32(tail), mx));
            vst1q_f32(tail, e);
            memcpy(sc + t, tail, sizeof(float) * (size_t)(n_pos - t));
            vsum = vaddq_f32(vsum, e);
        }
        inv[g] = 1.0f / vaddvq_f32(vsum);
    }

    /* out = sum_t e_t v_t per head in column chunks of W vectors (G * W
     * accumulators); the rest in chunks of 4, 2, 1 */
    const int nv = hd / 4, W = G <= 2 ? 8 : 4;
    int c = 0;
    for (; c + W <= nv; c += W) {
        if (W == 8) values_chunk(G, 8, v, stride, n_pos, hd, c, scores, inv, out);
        else values_chunk(G, 4, v, stride, n_pos, hd, c, scores, inv, out);
    }
    if (nv - c >= 4) { values_chunk(G, 4, v, stride, n_pos, hd, c, scores, inv, out); c += 4; }
    if (nv - c >= 2) { values_chunk(G, 2, v, stride, n_pos, hd, c, scores, inv, out); c += 2; }
    if (nv - c >= 1) values_chunk(G, 1, v, stride, n_pos, hd, c, scores, inv, out);
}

void attn_group_neon(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                     int n_pos, int hd, float scale, float *scores, float *out) {
    if (hd % 4 != 0) {
        attn_group_scalar(q, G, k, v, stride, n_pos, hd, scale, scores, out);
        return;
    }
    if (n_pos <= 0) {   /* no keys: zeros, as the oracle gives */
        memset(out, 0, sizeof(float) * (size_t)G * (size_t)hd);
        return;
    }
    switch (G) {
    case 1: group(q, 1, k, v, stride, n_pos, hd, scale, scores, out); break;
    case 2: group(q, 2, k, v, stride, n_pos, hd, scale, scores, out); break;
    case 3: group(q, 3, k, v, stride, n_pos, hd, scale, scores, out); break;
    default: group(q, 4, k, v, stride, n_pos, hd, scale, scores, out); break;
    }
}
