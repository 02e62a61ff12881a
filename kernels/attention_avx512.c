/* Attention with AVX-512 (compiled with -mavx512f -mf16c; only called after
 * the CPU probe) for up to ATTN_GROUP_MAX query heads that share one KV head
 * (grouped-query attention): each key and value row is converted from fp16
 * once and used by every head of the group. Head dimensions that are a
 * multiple of 16 (up to 256) stay in vectors; others go head by head to the
 * AVX2 version.
 *
 * Scores take 16 keys at a time: each key's q.k is left as 16 partial sums,
 * and one transpose-and-add tree turns the 16 vectors into the 16 scores, in
 * key order. The softmax's exp is vexp16 (vec_exp.h), and the weights are
 * left unnormalized until the end: out = (sum_t e_t v_t) / sum_t e_t. */
#include "kernels/attention.h"
#include "kernels/vec_exp.h"
#include <immintrin.h>
#include <math.h>

#define MAX_VEC 16   /* hd <= 256 */
#define INLINE static inline __attribute__((always_inline))

INLINE __m512 load16_f16(const fp16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* r[j] = sum of the lanes of v[j], for 16 vectors. */
INLINE __m512 hsum16x16(const __m512 v[16]) {
    __m512 u[8], w[4], x[2];
    for (int i = 0; i < 8; i++)   /* per 128-bit lane: keys 2i, 2i+1 interleaved, 2 partials each */
        u[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++) {  /* per 128-bit lane: keys 4i..4i+3, one partial each */
        __m512d a = _mm512_castps_pd(u[2 * i]), b = _mm512_castps_pd(u[2 * i + 1]);
        w[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    for (int i = 0; i < 2; i++)    /* lanes: keys 8i..8i+3 (two halves), keys 8i+4..8i+7 (two halves) */
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xee));
    return _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], 0x88), _mm512_shuffle_f32x4(x[0], x[1], 0xdd));
}

/* A slot's keys and values are read once per token, from memory: without
 * prefetching, each head's short rows waited on memory (a cold 150-position
 * head took 4x its in-cache time). Keys are fetched this many rows ahead;
 * each value row while its key is scored, so the weighted sum finds it in
 * cache. Only rows of the head are named (an address past it is not one a
 * C program may form). */
#define KEY_PREFETCH 24

INLINE void prefetch_row(const fp16_t *p, int hd) {
    for (int o = 0; o < 2 * hd; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

INLINE __mmask16 live_mask(int cnt) { return (__mmask16)(cnt >= 16 ? 0xffff : (1u << cnt) - 1); }

/* G heads (a compile-time constant after inlining) of nv vectors each. */
INLINE void group(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                  int n_pos, int nv, float scale, float *scores, float *out) {
    const int hd = 16 * nv;
    const __m512 vscale = _mm512_set1_ps(scale);
    __m512 vmax[ATTN_GROUP_MAX];
    for (int g = 0; g < G; g++) vmax[g] = _mm512_set1_ps(-INFINITY);

    /* The query stays in registers (16 vectors at G = 4, hd = 64): read
     * from memory, it cost a load per multiply-add, which the load ports
     * could not keep up with. */
    __m512 qv[ATTN_GROUP_MAX][MAX_VEC];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < nv; c++) qv[g][c] = _mm512_loadu_ps(q + g * hd + 16 * c);

    /* scores of every head and their max */
    for (int t0 = 0; t0 < n_pos; t0 += 16) {
        int cnt = n_pos - t0 < 16 ? n_pos - t0 : 16;
        __m512 part[ATTN_GROUP_MAX][16];
        for (int j = 0; j < 16; j++) {
            __m512 acc[ATTN_GROUP_MAX];
            for (int g = 0; g < G; g++) acc[g] = _mm512_setzero_ps();
            if (j < cnt) {
                const fp16_t *kt = k + (size_t)(t0 + j) * stride;
                if (t0 + j + KEY_PREFETCH < n_pos) prefetch_row(kt + KEY_PREFETCH * stride, hd);
                prefetch_row(v + (size_t)(t0 + j) * stride, hd);
                for (int c = 0; c < nv; c++) {
                    __m512 kc = load16_f16(kt + 16 * c);
                    for (int g = 0; g < G; g++) acc[g] = _mm512_fmadd_ps(qv[g][c], kc, acc[g]);
                }
            }
            for (int g = 0; g < G; g++) part[g][j] = acc[g];
        }
        __mmask16 live = live_mask(cnt);
        for (int g = 0; g < G; g++) {
            __m512 s = _mm512_mul_ps(hsum16x16(part[g]), vscale);
            _mm512_mask_storeu_ps(scores + (size_t)g * n_pos + t0, live, s);
            vmax[g] = _mm512_mask_max_ps(vmax[g], live, vmax[g], s);
        }
    }

    /* e_t = exp(s_t - max) per head, and 1 / sum */
    float inv[ATTN_GROUP_MAX];
    for (int g = 0; g < G; g++) {
        float *sc = scores + (size_t)g * n_pos;
        const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax[g]));
        __m512 vsum = _mm512_setzero_ps();
        for (int t0 = 0; t0 < n_pos; t0 += 16) {
            __mmask16 live = live_mask(n_pos - t0);
            __m512 e = _mm512_maskz_mov_ps(live, vexp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, sc + t0), mx)));
            _mm512_mask_storeu_ps(sc + t0, live, e);
            vsum = _mm512_add_ps(vsum, e);
        }
        inv[g] = 1.0f / _mm512_reduce_add_ps(vsum);
    }

    /* out = sum_t e_t v_t per head, each value row converted once */
    __m512 acc[ATTN_GROUP_MAX][MAX_VEC];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < nv; c++) acc[g][c] = _mm512_setzero_ps();
    for (int t = 0; t < n_pos; t++) {
        const fp16_t *vt = v + (size_t)t * stride;
        __m512 w[ATTN_GROUP_MAX];
        for (int g = 0; g < G; g++) w[g] = _mm512_set1_ps(scores[(size_t)g * n_pos + t]);
        for (int c = 0; c < nv; c++) {
            __m512 vc = load16_f16(vt + 16 * c);
            for (int g = 0; g < G; g++) acc[g][c] = _mm512_fmadd_ps(w[g], vc, acc[g][c]);
        }
    }
    for (int g = 0; g < G; g++) {
        const __m512 vinv = _mm512_set1_ps(inv[g]);
        for (int c = 0; c < nv; c++) _mm512_storeu_ps(out + g * hd + 16 * c, _mm512_mul_ps(acc[g][c], vinv));
    }
}

/* The common head sizes get their own unrolled copy. */
INLINE void group_g(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                    int n_pos, int nv, float scale, float *scores, float *out) {
    switch (G) {
    case 1: group(q, 1, k, v, stride, n_pos, nv, scale, scores, out); break;
    case 2: group(q, 2, k, v, stride, n_pos, nv, scale, scores, out); break;
    case 3: group(q, 3, k, v, stride, n_pos, nv, scale, scores, out); break;
    default: group(q, 4, k, v, stride, n_pos, nv, scale, scores, out); break;
    }
}

void attn_group_avx512(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                       int n_pos, int hd, float scale, float *scores, float *out) {
    if (hd % 16 != 0 || hd > 16 * MAX_VEC) {
        for (int g = 0; g < G; g++)
            attn_head_f16c(q + g * hd, k, v, stride, n_pos, hd, scale, scores, out + g * hd);
        return;
    }
    switch (hd / 16) {
    case 4: group_g(q, G, k, v, stride, n_pos, 4, scale, scores, out); break;
    case 8: group_g(q, G, k, v, stride, n_pos, 8, scale, scores, out); break;
    default: group_g(q, G, k, v, stride, n_pos, hd / 16, scale, scores, out); break;
    }
}
