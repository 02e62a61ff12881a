/* Attention per head with F16C conversions and FMA, 8 lanes at a time
 * (compiled with -mavx2 -mfma -mf16c; only called after the CPU probe).
 * Head dimensions that are not a multiple of 8 finish with a scalar tail. */
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "kernels/vec_exp.h"
#include <immintrin.h>
#include <math.h>
#include <string.h>

static float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static __m256 load8_f16(const fp16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* op_softmax with vexp8: max, exp(x - max) and its sum, then x / sum. */
static void softmax8(float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = fmaxf(mx, x[i]);
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 vsum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = vexp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx));
        _mm256_storeu_ps(x + i, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    float sum = hsum8(vsum);
    if (i < n) {   /* the tail through one padded vector */
        float tail[8] = { 0 };
        for (int j = i; j < n; j++) tail[j - i] = x[j] - mx;
        __m256 e = vexp8(_mm256_loadu_ps(tail));
        _mm256_storeu_ps(tail, e);
        for (int j = i; j < n; j++) { x[j] = tail[j - i]; sum += tail[j - i]; }
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) x[j] *= inv;
}

void attn_head_f16c(const float *q, const fp16_t *k, const fp16_t *v, size_t stride,
                    int n_pos, int hd, float scale, float *scores, float *out) {
    int hd8 = hd & ~7;
    for (int t = 0; t < n_pos; t++) {
        const fp16_t *kt = k + (size_t)t * stride;
        __m256 acc = _mm256_setzero_ps();
        for (int d = 0; d < hd8; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8_f16(kt + d), acc);
        float s = hsum8(acc);
        for (int d = hd8; d < hd; d++) s = fmaf(q[d], fp16_to_f32(kt[d]), s);
        scores[t] = s * scale;
    }
    softmax8(scores, n_pos);
    memset(out, 0, sizeof(float) * (size_t)hd);
    for (int t = 0; t < n_pos; t++) {
        const fp16_t *vt = v + (size_t)t * stride;
        __m256 w = _mm256_set1_ps(scores[t]);
        for (int d = 0; d < hd8; d += 8)
            _mm256_storeu_ps(out + d, _mm256_fmadd_ps(w, load8_f16(vt + d), _mm256_loadu_ps(out + d)));
        for (int d = hd8; d < hd; d++) out[d] = fmaf(scores[t], fp16_to_f32(vt[d]), out[d]);
    }
}

void attn_group_f16c(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                     int n_pos, int hd, float scale, float *scores, float *out) {
    for (int g = 0; g < G; g++) attn_head_f16c(q + g * hd, k, v, stride, n_pos, hd, scale, scores, out + g * hd);
}
