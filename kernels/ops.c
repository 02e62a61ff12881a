/* Non-matmul steps of the forward pass, scalar (and the SwiGLU dispatch). Sums run sequentially in
 * float with explicit fmaf() so results do not depend on the compiler's
 * choice to contract a*b+c. */
#include "kernels/ops.h"
#include "kernels/kern_table.h"
#include "kernels/vec_exp.h"

#include <math.h>

/* out = x / sqrt(mean(x^2) + eps) * weight; out may alias x. The sum of
 * squares runs in OP_LANES partial sums (element i into lane i % OP_LANES),
 * then halves are added pairwise, lane l + w into lane l for w = 8, 4, 2, 1:
 * the order one 16-lane vector gives, so the vector versions match this one
 * bit for bit. */
void op_rmsnorm(float *out, const float *x, const float *weight, int n, float eps) {
    float part[OP_LANES] = {0};
    for (int i = 0; i < n; i++) part[i % OP_LANES] = fmaf(x[i], x[i], part[i % OP_LANES]);
    for (int w = OP_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) part[l] += part[l + w];
    float scale = 1.0f / sqrtf(part[0] / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * weight[i];
}

op_rmsnorm_fn op_rmsnorm_for(int kern_path) {
    const kern_table *t = kern_table_of((kern_path_id)kern_path);
    return t ? t->rmsnorm : op_rmsnorm;
}

/* The pair (i, n_rot/2 + i) or (2i, 2i+1) of each head turns by
 * theta_i = pos * base^(-2i/n_rot) / freq_factors[i]. Dimensions past n_rot
 * are left alone. The angle is computed in double: pos * freq loses too
 * much in float at long positions. */
void op_rope_angles(float *cs, int n_rot, int pos, float base, const float *freq_factors) {
    int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        double theta = (double)pos * pow((double)base, -2.0 * i / (double)n_rot);
        if (freq_factors) theta /= (double)freq_factors[i];
        cs[i] = (float)cos(theta);
        cs[half + i] = (float)sin(theta);
    }
}

void op_rope_apply(float *x, int n_heads, int head_dim, int n_rot, bool neox, const float *cs) {
    int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *head = x + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float c = cs[i], s = cs[half + i];
            int a = neox ? i : 2 * i;
            int b = neox ? i + half : 2 * i + 1;
            float x0 = head[a], x1 = head[b];
            head[a] = fmaf(x0, c, -(x1 * s));
            head[b] = fmaf(x0, s, x1 * c);
        }
    }
}

op_rope_apply_fn op_rope_apply_for(int kern_path) {
    const kern_table *t = kern_table_of((kern_path_id)kern_path);
    return t ? t->rope : op_rope_apply;
}

void op_to_fp16(fp16_t *dst, const float *src, int n) {
    for (int i = 0; i < n; i++) dst[i] = f32_to_fp16(src[i]);
}

op_to_fp16_fn op_to_fp16_for(int kern_path) {
    const kern_table *t = kern_table_of((kern_path_id)kern_path);
    return t ? t->to_fp16 : op_to_fp16;
}

/* In place, max-subtracted so exp never overflows. */
void op_softmax(float *x, int n) {
    if (n <= 0) return;
    float max = x[0];
    for (int i = 1; i < n; i++) max = fmaxf(max, x[i]);
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

/* out = silu(gate) * up, silu(g) = g / (1 + exp(-g)); out may alias either. */
void op_swiglu(float *out, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

op_swiglu_fn op_swiglu_for(int kern_path) {
    const kern_table *t = kern_table_of((kern_path_id)kern_path);
    return t ? t->glu[KERN_GLU_SILU] : op_swiglu;
}

/* exp(x) for x in [-87, 88] by vec_exp.h's steps (vexp4/8/16 with every
 * lane in range): n = round(x log2 e) to nearest even, r = x - n ln2 in two
 * fused steps, the Taylor polynomial to r^6 by fused multiply-adds, times
 * 2^n (exact: the result is a normal number). */
static float exp_poly(float x) {
    float n = rintf(x * VEXP_LOG2E);
    float r = fmaf(-n, VEXP_LN2_HI, x);
    r = fmaf(-n, VEXP_LN2_LO, r);
    float p = 1.0f / 720;
    p = fmaf(p, r, 1.0f / 120);
    p = fmaf(p, r, 1.0f / 24);
    p = fmaf(p, r, 1.0f / 6);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    return ldexpf(p, (int)n);
}

void op_geglu(float *out, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        float z = fmaf(OP_GELU_A * g * g, g, g) * -OP_GELU_2C;
        z = fminf(fmaxf(z, -OP_GELU_ZMAX), OP_GELU_ZMAX);   /* a NaN gate gives -80 here, NaN below */
        out[i] = g / (1.0f + exp_poly(z)) * up[i];
    }
}

op_swiglu_fn op_geglu_for(int kern_path) {
    const kern_table *t = kern_table_of((kern_path_id)kern_path);
    return t ? t->glu[KERN_GLU_GELU_TANH] : op_geglu;
}

void op_scale(float *x, float s, int n) {
    for (int i = 0; i < n; i++) x[i] *= s;
}

void op_softcap(float *x, float cap, int n) {
    for (int i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

/* out += a (the residual add). */
void op_add(float *out, const float *a, int n) {
    for (int i = 0; i < n; i++) out[i] += a[i];
}
