/* Attention per head with AVX-512 (compiled with -mavx512f -mf16c; only
 * called after the CPU probe). Head dimensions that are a multiple of 16 (up
 * to 256) stay in registers; others go to the AVX2 version.
 *
 * Scores take 16 keys at a time: each key's q.k is left as 16 partial sums,
 * and one transpose-and-add tree turns the 16 vectors into the 16 scores, in
 * key order. The softmax's exp is vexp16 (vec_exp.h), and the weights are
 * left unnormalized until the end: out = (sum_t e_t v_t) / sum_t e_t. */
#include "attention.h"
#include "vec_exp.h"
#include <immintrin.h>
#include <math.h>

#define MAX_VEC 16   /* hd <= 256 */

static inline __m512 load16_f16(const fp16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* r[j] = sum of the lanes of v[j], for 16 vectors. */
static inline __m512 hsum16x16(__m512 v[16]) {
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

void attn_head_avx512(const float *q, const fp16_t *k, const fp16_t *v, size_t stride,
                      int n_pos, int hd, float scale, float *scores, float *out) {
    if (hd % 16 != 0 || hd > 16 * MAX_VEC) {
        attn_head_f16c(q, k, v, stride, n_pos, hd, scale, scores, out);
        return;
    }
    const int nv = hd / 16;
    __m512 qv[MAX_VEC];
    for (int c = 0; c < nv; c++) qv[c] = _mm512_loadu_ps(q + 16 * c);
    const __m512 vscale = _mm512_set1_ps(scale);

    /* scores and their max */
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int t0 = 0; t0 < n_pos; t0 += 16) {
        int cnt = n_pos - t0 < 16 ? n_pos - t0 : 16;
        __m512 part[16];
        for (int j = 0; j < 16; j++) {
            __m512 acc = _mm512_setzero_ps();
            if (j < cnt) {
                const fp16_t *kt = k + (size_t)(t0 + j) * stride;
                for (int c = 0; c < nv; c++) acc = _mm512_fmadd_ps(qv[c], load16_f16(kt + 16 * c), acc);
            }
            part[j] = acc;
        }
        __mmask16 live = (__mmask16)(cnt == 16 ? 0xffff : (1u << cnt) - 1);
        __m512 s = _mm512_mul_ps(hsum16x16(part), vscale);
        _mm512_mask_storeu_ps(scores + t0, live, s);
        vmax = _mm512_mask_max_ps(vmax, live, vmax, s);
    }
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));

    /* e_t = exp(s_t - max), their sum */
    __m512 vsum = _mm512_setzero_ps();
    for (int t0 = 0; t0 < n_pos; t0 += 16) {
        int cnt = n_pos - t0 < 16 ? n_pos - t0 : 16;
        __mmask16 live = (__mmask16)(cnt == 16 ? 0xffff : (1u << cnt) - 1);
        __m512 e = vexp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, scores + t0), mx));
        e = _mm512_maskz_mov_ps(live, e);
        _mm512_mask_storeu_ps(scores + t0, live, e);
        vsum = _mm512_add_ps(vsum, e);
    }
    const float inv = 1.0f / _mm512_reduce_add_ps(vsum);

    /* out = sum_t e_t v_t, two interleaved accumulator sets to hide the FMA latency */
    __m512 acc0[MAX_VEC], acc1[MAX_VEC];
    for (int c = 0; c < nv; c++) acc0[c] = acc1[c] = _mm512_setzero_ps();
    int t = 0;
    for (; t + 1 < n_pos; t += 2) {
        const fp16_t *v0 = v + (size_t)t * stride, *v1 = v0 + stride;
        __m512 w0 = _mm512_set1_ps(scores[t]), w1 = _mm512_set1_ps(scores[t + 1]);
        for (int c = 0; c < nv; c++) {
            acc0[c] = _mm512_fmadd_ps(w0, load16_f16(v0 + 16 * c), acc0[c]);
            acc1[c] = _mm512_fmadd_ps(w1, load16_f16(v1 + 16 * c), acc1[c]);
        }
    }
    if (t < n_pos) {
        const fp16_t *v0 = v + (size_t)t * stride;
        __m512 w0 = _mm512_set1_ps(scores[t]);
        for (int c = 0; c < nv; c++) acc0[c] = _mm512_fmadd_ps(w0, load16_f16(v0 + 16 * c), acc0[c]);
    }
    const __m512 vinv = _mm512_set1_ps(inv);
    for (int c = 0; c < nv; c++) _mm512_storeu_ps(out + 16 * c, _mm512_mul_ps(_mm512_add_ps(acc0[c], acc1[c]), vinv));
}
