/* The NEON versions of ops.c's row steps (base Armv8-A; called for the
 * NEON kernel path). Each gives what its scalar version gives, bit for bit:
 * rmsnorm's 16 lanes are four 4-lane accumulators, rope the same multiplies
 * and fused multiply-adds per element (adjacent pairs through vld2q's
 * de-interleave), the fp16 store the hardware conversion, which rounds to
 * nearest even and keeps a NaN's top payload bits as f32_to_fp16 does.
 * Tails go through the scalar code's own per-element steps. */
#include "kernels/ops.h"
#include "kernels/vec_exp.h"
#include <arm_neon.h>
#include <math.h>

/* op_rmsnorm's order: lanes 0-3, 4-7, 8-11, 12-15 in a[0..3]; then lanes
 * 8 apart (a0 + a2, a1 + a3), 4 apart, 2, 1. */
void op_rmsnorm_neon(float *out, const float *x, const float *weight, int n, float eps) {
    float32x4_t a[4] = { vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0) };
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int v = 0; v < 4; v++) {
            float32x4_t xv = vld1q_f32(x + i + 4 * v);
            a[v] = vfmaq_f32(a[v], xv, xv);
        }
    float part[OP_LANES];
    for (int v = 0; v < 4; v++) vst1q_f32(part + 4 * v, a[v]);
    for (; i < n; i++) part[i % OP_LANES] = fmaf(x[i], x[i], part[i % OP_LANES]);
    float32x4_t h4 = vaddq_f32(vaddq_f32(vld1q_f32(part), vld1q_f32(part + 8)),
                               vaddq_f32(vld1q_f32(part + 4), vld1q_f32(part + 12)));
    float32x2_t h2 = vadd_f32(vget_low_f32(h4), vget_high_f32(h4));
    float sum = vget_lane_f32(h2, 0) + vget_lane_f32(h2, 1);
    float scale = 1.0f / sqrtf(sum / (float)n + eps);
    const float32x4_t vs = vdupq_n_f32(scale);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(out + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), vs), vld1q_f32(weight + i)));
    for (; i < n; i++) out[i] = x[i] * scale * weight[i];
}

/* Per pair: a' = fmaf(x0, c, -(x1 * s)), b' = fmaf(x0, s, x1 * c). */
static inline float32x4_t turn_a(float32x4_t x0, float32x4_t x1, float32x4_t c, float32x4_t s) {
    return vfmaq_f32(vnegq_f32(vmulq_f32(x1, s)), x0, c);
}
static inline float32x4_t turn_b(float32x4_t x0, float32x4_t x1, float32x4_t c, float32x4_t s) {
    return vfmaq_f32(vmulq_f32(x1, c), x0, s);
}

/* 4 pairs from pair i of each table; past `left` pairs, zeros (a tail). */
static inline void load_cs(const float *cs, int half, int i, int left, float32x4_t *c, float32x4_t *s) {
    if (left >= 4) {
        *c = vld1q_f32(cs + i);
        *s = vld1q_f32(cs + half + i);
        return;
    }
    float tc[4] = {0}, ts[4] = {0};
    for (int k = 0; k < left; k++) { tc[k] = cs[i + k]; ts[k] = cs[half + i + k]; }
    *c = vld1q_f32(tc);
    *s = vld1q_f32(ts);
}

void op_rope_apply_neon(float *x, int n_heads, int head_dim, int n_rot, bool neox, const float *cs) {
    const int half = n_rot / 2;
    for (int i = 0; i < half; i += 4) {
        int left = half - i;
        float32x4_t c, s;
        load_cs(cs, half, i, left, &c, &s);
        for (int h = 0; h < n_heads; h++) {
            float *head = x + (size_t)h * head_dim;
            if (neox) {
                float *pa = head + i, *pb = head + half + i;
                float ta[4] = {0}, tb[4] = {0};
                if (left < 4) {   /* a tail: through a zero-padded copy */
                    for (int k = 0; k < left; k++) { ta[k] = pa[k]; tb[k] = pb[k]; }
                    pa = ta; pb = tb;
                }
                float32x4_t x0 = vld1q_f32(pa), x1 = vld1q_f32(pb);
                vst1q_f32(pa, turn_a(x0, x1, c, s));
                vst1q_f32(pb, turn_b(x0, x1, c, s));
                if (left < 4)
                    for (int k = 0; k < left; k++) { head[i + k] = ta[k]; head[half + i + k] = tb[k]; }
            } else {
                float *p = head + 2 * i, t[8] = {0};
                if (left < 4) {
                    for (int k = 0; k < 2 * left; k++) t[k] = p[k];
                    p = t;
                }
                float32x4x2_t v = vld2q_f32(p), r;
                r.val[0] = turn_a(v.val[0], v.val[1], c, s);
                r.val[1] = turn_b(v.val[0], v.val[1], c, s);
                vst2q_f32(p, r);
                if (left < 4)
                    for (int k = 0; k < 2 * left; k++) head[2 * i + k] = t[k];
            }
        }
    }
}

void op_to_fp16_neon(fp16_t *dst, const float *src, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++) dst[i] = f32_to_fp16(src[i]);
}

/* op_geglu's steps 4 lanes at a time: vexp4 is exp_poly in every lane (the
 * clamp keeps its input in range; maxNum/minNum take a NaN to the bound as
 * fmaxf does). The tail goes through op_geglu. */
void op_geglu_neon(float *out, const float *gate, const float *up, int n) {
    const float32x4_t one = vdupq_n_f32(1.0f), a = vdupq_n_f32(OP_GELU_A), c = vdupq_n_f32(-OP_GELU_2C);
    const float32x4_t lo = vdupq_n_f32(-OP_GELU_ZMAX), hi = vdupq_n_f32(OP_GELU_ZMAX);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t g = vld1q_f32(gate + i), u = vld1q_f32(up + i);
        float32x4_t z = vmulq_f32(vfmaq_f32(g, vmulq_f32(vmulq_f32(a, g), g), g), c);
        z = vminnmq_f32(vmaxnmq_f32(z, lo), hi);
        float32x4_t e = vexp4(z);
        vst1q_f32(out + i, vmulq_f32(vdivq_f32(g, vaddq_f32(one, e)), u));
    }
    if (i < n) op_geglu(out + i, gate + i, up + i, n - i);
}
