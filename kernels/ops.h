/* Non-matmul steps of the forward pass: the scalar versions, and for the
 * row steps the kernel path's vector versions (op_*_for: an entry of the
 * path's kernel table, kern_table.h, which an executor reads directly). */
#ifndef HEARTH_OPS_H
#define HEARTH_OPS_H

#include <stdint.h>
#include <stdbool.h>
#include "kernels/formats.h"

/* The lanes of op_rmsnorm's sum of squares (see ops.c). */
#define OP_LANES 16
void op_rmsnorm(float *out, const float *x, const float *weight, int n, float eps);
/* The same through the kernel path's vectors, bit for bit. */
typedef void (*op_rmsnorm_fn)(float *out, const float *x, const float *weight, int n, float eps);
op_rmsnorm_fn op_rmsnorm_for(int kern_path);   /* a kern_path_id */
/* Rotary position embedding in two steps, so a row's angles are computed
 * once per forward pass instead of once per layer and projection.
 * op_rope_angles: cs[i] = cos(theta_i), cs[n_rot/2 + i] = sin(theta_i) for
 * the position; freq_factors (may be NULL) divide each pair's frequency, as
 * in Llama 3 rope_freqs. op_rope_apply rotates pairs in place: neox pairs
 * (i, i + n_rot/2), else adjacent (2i, 2i+1). The vector version gives the
 * same bits (the same multiplies and fused multiply-adds per element). */
void op_rope_angles(float *cs, int n_rot, int pos, float base, const float *freq_factors);
void op_rope_apply(float *x, int n_heads, int head_dim, int n_rot, bool neox, const float *cs);
typedef void (*op_rope_apply_fn)(float *x, int n_heads, int head_dim, int n_rot, bool neox, const float *cs);
op_rope_apply_fn op_rope_apply_for(int kern_path);   /* a kern_path_id */
/* dst[i] = f32_to_fp16(src[i]): the KV cache's store; the vector version
 * (F16C, round to nearest even) gives the same bits, NaN payloads included. */
void op_to_fp16(fp16_t *dst, const float *src, int n);
typedef void (*op_to_fp16_fn)(fp16_t *dst, const float *src, int n);
op_to_fp16_fn op_to_fp16_for(int kern_path);
void op_softmax(float *x, int n);
void op_swiglu(float *out, const float *gate, const float *up, int n);
/* The same through the selected kernel path's vector exp (AVX-512), else
 * op_swiglu itself. Relative error within 1e-6 of op_swiglu's. */
typedef void (*op_swiglu_fn)(float *out, const float *gate, const float *up, int n);
#if defined(__x86_64__)
void op_swiglu_avx512(float *out, const float *gate, const float *up, int n);
void op_rmsnorm_avx512(float *out, const float *x, const float *weight, int n, float eps);
void op_rope_apply_avx512(float *x, int n_heads, int head_dim, int n_rot, bool neox, const float *cs);
void op_to_fp16_avx512(fp16_t *dst, const float *src, int n);
void op_rmsnorm_avx2(float *out, const float *x, const float *weight, int n, float eps);
void op_rope_apply_avx2(float *x, int n_heads, int head_dim, int n_rot, bool neox, const float *cs);
void op_to_fp16_avx2(fp16_t *dst, const float *src, int n);
#endif
#if defined(__aarch64__)
void op_rmsnorm_neon(float *out, const float *x, const float *weight, int n, float eps);
void op_rope_apply_neon(float *x, int n_heads, int head_dim, int n_rot, bool neox, const float *cs);
void op_to_fp16_neon(fp16_t *dst, const float *src, int n);
#endif
op_swiglu_fn op_swiglu_for(int kern_path);   /* a kern_path_id */
/* GeGLU (gemma): out = gelu_tanh(gate) * up, the tanh GELU written as
 * g / (1 + exp(-2 sqrt(2/pi) (g + 0.044715 g^3))) with the exponent clamped
 * to [-80, 80] (tanh is +-1 in float well before) and exp by vec_exp.h's
 * polynomial in scalar steps, so the vector versions (same type as
 * op_swiglu_fn) give the same bits. out may alias either input. */
void op_geglu(float *out, const float *gate, const float *up, int n);
#if defined(__x86_64__)
void op_geglu_avx512(float *out, const float *gate, const float *up, int n);
void op_geglu_avx2(float *out, const float *gate, const float *up, int n);
#endif
#if defined(__aarch64__)
void op_geglu_neon(float *out, const float *gate, const float *up, int n);
#endif
op_swiglu_fn op_geglu_for(int kern_path);   /* a kern_path_id */
/* The GeGLU's constants and its scalar exp, shared with the vector versions. */
#define OP_GELU_A 0.044715f
#define OP_GELU_2C 1.5957691216057308f   /* 2 sqrt(2 / pi) */
#define OP_GELU_ZMAX 80.0f
/* x *= s (gemma's embedding scale, rope's attention factor); cold, scalar. */
void op_scale(float *x, float s, int n);
/* x = cap * tanh(x / cap): the final logit soft-cap; cold (once per logit row), scalar. */
void op_softcap(float *x, float cap, int n);
void op_add(float *out, const float *a, int n);

#endif
