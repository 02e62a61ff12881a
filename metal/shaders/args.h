/* The constant arguments of hearth's Metal kernels, in the subset of C that
 * is also the Metal Shading Language (int, float): the plan encoder (C) and
 * the shaders (MSL, or C++ in the emulator) include this one definition. */
#ifndef HEARTH_METAL_ARGS_H
#define HEARTH_METAL_ARGS_H

#define MD_SIMD 32            /* threads of a simdgroup */
#define MD_GEMV_ROWS 4        /* output rows of one simdgroup in a GEMV */
#define MD_GEMV_SG 2          /* simdgroups of a GEMV threadgroup */
#define MD_ATT_CHUNK 256      /* positions of one attention chunk (threadgroup memory) */
#define MD_HEAD_DIM_MAX 256   /* attention: head_dim <= this */

/* rmsnorm: out row r = rmsnorm(in row (index ? index[r] : r)) * weight, then
 * add row r += out row r when has_add. */
typedef struct md_rms_args {
    int width, n_rows, in_stride, out_stride, has_add, use_index;
    float eps;
} md_rms_args;

/* y[m][n] = W row n . x row m (m < M, n < n_out); add[m][n] += y[m][n] when has_add. */
typedef struct md_gemv_args {
    int n_in, n_out, M, row_bytes, has_add;
} md_gemv_args;

/* the activation prepass: x rows of n_in floats into n_in/32 blocks each */
typedef struct md_act_args {
    int n_in, M;
} md_act_args;

/* elementwise: n rows of width */
typedef struct md_ew_args {
    int width, n, act;        /* act: 0 silu, 1 tanh GELU (GLU) */
    float cap;                /* soft-cap */
} md_ew_args;

typedef struct md_rope_args {
    int n, n_head, head_dim, n_rot, neox, row_w, cs_w;
} md_rope_args;

/* The KV cache of one layer: fp16 values at
 * off + ((slot * n_head_kv + head) * span + p) * head_dim, p = pos % ring
 * (ring 0: p = pos); a ring position is stored twice, at p and p + ring. */
typedef struct md_kv_args {
    int n, n_head, n_head_kv, head_dim, k_w, v_w, q_w;
    int off, span, ring, window;
    float scale;
} md_kv_args;

#endif
