/* Attention of query heads over a slot's fp16 KV cache: the non-matmul hot
 * spot of prefill. A scalar oracle, two x86 paths (AVX2 with F16C, AVX-512)
 * and a NEON one, chosen by the selected kernel path. Each (token, head) is
 * computed on its own, so the result never depends on the rest of the
 * batch. */
#ifndef HEARTH_ATTENTION_H
#define HEARTH_ATTENTION_H

#include <stddef.h>
#include "kernels/formats.h"
#include "kernels/kernels.h"

/* Query heads that share one KV head and are computed in one call. */
#define ATTN_GROUP_MAX 4

/* out[hd] = sum_t softmax(scale * q.k_t)_t * v_t over t in [0, n_pos).
 * k_t = k + t * stride (fp16), likewise v. scores: n_pos floats of scratch. */
void attn_head_scalar(const float *q, const fp16_t *k, const fp16_t *v, size_t stride,
                      int n_pos, int hd, float scale, float *scores, float *out);
#if defined(__x86_64__)
void attn_head_f16c(const float *q, const fp16_t *k, const fp16_t *v, size_t stride,
                    int n_pos, int hd, float scale, float *scores, float *out);
#endif

/* The same for G <= ATTN_GROUP_MAX heads over one KV head: q and out hold
 * the G heads one after another (hd each); scores: G * n_pos floats. Head g's
 * result is what the path's single-head attention gives for it. */
typedef void (*attn_group_fn)(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                              int n_pos, int hd, float scale, float *scores, float *out);

void attn_group_scalar(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                       int n_pos, int hd, float scale, float *scores, float *out);
#if defined(__x86_64__)
void attn_group_f16c(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                     int n_pos, int hd, float scale, float *scores, float *out);
void attn_group_avx512(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                       int n_pos, int hd, float scale, float *scores, float *out);
#endif
#if defined(__aarch64__)
void attn_group_neon(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                     int n_pos, int hd, float scale, float *scores, float *out);
#endif

/* The implementation for a kernel path (the scalar one when the path has none). */
attn_group_fn attn_group_for(kern_path_id p);

#endif
