/* Non-matmul steps of the forward pass, scalar. */
#ifndef HEARTH_OPS_H
#define HEARTH_OPS_H

#include <stdint.h>
#include <stdbool.h>

void op_rmsnorm(float *out, const float *x, const float *weight, int n, float eps);
/* Rotate pairs in place. neox: pairs (i, i + n_rot/2); else adjacent (2i, 2i+1).
 * freq_factors (may be NULL) divide each pair's frequency, as in Llama 3 rope_freqs. */
void op_rope(float *x, int n_heads, int head_dim, int n_rot, int pos, float base,
             bool neox, const float *freq_factors);
void op_softmax(float *x, int n);
void op_swiglu(float *out, const float *gate, const float *up, int n);
/* The same through the selected kernel path's vector exp (AVX-512), else
 * op_swiglu itself. Relative error within 1e-6 of op_swiglu's. */
typedef void (*op_swiglu_fn)(float *out, const float *gate, const float *up, int n);
#if defined(__x86_64__)
void op_swiglu_avx512(float *out, const float *gate, const float *up, int n);
#endif
op_swiglu_fn op_swiglu_for(int kern_path);   /* a kern_path_id */
void op_add(float *out, const float *a, int n);

#endif
