/* The AVX2 versions of ops.c's row steps (compiled with -mavx2 -mfma
 * -mf16c; only called after the CPU probe said so). Each gives what its
 * scalar version gives, bit for bit: rmsnorm's 16 lanes are two 8-lane
 * accumulators, rope the same multiplies and fused multiply-adds per
 * element, the fp16 store F16C's round to nearest even. Tails go through
 * masked loads and stores (the fp16 store's through f32_to_fp16). */
#include "kernels/ops.h"
#include "kernels/ops_x86.h"
#include "kernels/vec_exp.h"

/* Lanes [0, n) of 8 set (n may exceed 8). */
static inline __m256i lanes(int n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

/* op_rmsnorm's order: lanes 0-7 in lo, 8-15 in hi; then the halves are
 * added 8, 4, 2, 1 lanes apart. Lanes past n add 0 * 0, which leaves a
 * sum of squares as it was. */
void op_rmsnorm_avx2(float *out, const float *x, const float *weight, int n, float eps) {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __m256 a = _mm256_maskload_ps(x + i, lanes(n - i)), b = _mm256_maskload_ps(x + i + 8, lanes(n - i - 8));
        lo = _mm256_fmadd_ps(a, a, lo);
        hi = _mm256_fmadd_ps(b, b, hi);
    }
    float scale = rms_scale8(_mm256_add_ps(lo, hi), n, eps);
    const __m256 vs = _mm256_set1_ps(scale);
    for (int i = 0; i < n; i += 8) {
        __m256i k = lanes(n - i);
        __m256 v = _mm256_mul_ps(_mm256_maskload_ps(x + i, k), vs);
        _mm256_maskstore_ps(out + i, k, _mm256_mul_ps(v, _mm256_maskload_ps(weight + i, k)));
    }
}

static inline __m256 neg(__m256 v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }

/* Per pair: a' = fmaf(x0, c, -(x1 * s)), b' = fmaf(x0, s, x1 * c). */
void op_rope_apply_avx2(float *x, int n_heads, int head_dim, int n_rot, bool neox, const float *cs) {
    const int half = n_rot / 2;
    if (neox) {
        for (int i = 0; i < half; i += 8) {
            __m256i k = lanes(half - i);
            __m256 c = _mm256_maskload_ps(cs + i, k), s = _mm256_maskload_ps(cs + half + i, k);
            for (int h = 0; h < n_heads; h++) {
                float *head = x + (size_t)h * head_dim;
                __m256 x0 = _mm256_maskload_ps(head + i, k), x1 = _mm256_maskload_ps(head + half + i, k);
                _mm256_maskstore_ps(head + i, k, _mm256_fmadd_ps(x0, c, neg(_mm256_mul_ps(x1, s))));
                _mm256_maskstore_ps(head + half + i, k, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
            }
        }
        return;
    }
    /* Adjacent pairs, 4 per vector: with x0 in both lanes of a pair (A) and
     * x1 in both (B), both results are fma(A, t1, B * t2), t1 = (c, s),
     * t2 = (-s, c): -(x1 * s) is x1 * -s exactly. */
    for (int j = 0; j < n_rot; j += 8) {
        int pairs = (n_rot - j) / 2 < 4 ? (n_rot - j) / 2 : 4;
        __m128i kp = _mm256_castsi256_si128(lanes(pairs));
        __m128 c = _mm_maskload_ps(cs + j / 2, kp), s = _mm_maskload_ps(cs + half + j / 2, kp);
        /* (c0, s0, c1, s1 | c2, s2, c3, s3) and (-s0, c0, ... ) */
        __m256 t1 = _mm256_setr_m128(_mm_unpacklo_ps(c, s), _mm_unpackhi_ps(c, s));
        __m128 ns = _mm_xor_ps(s, _mm_set1_ps(-0.0f));
        __m256 t2 = _mm256_setr_m128(_mm_unpacklo_ps(ns, c), _mm_unpackhi_ps(ns, c));
        __m256i k = lanes(2 * pairs);
        for (int h = 0; h < n_heads; h++) {
            float *p = x + (size_t)h * head_dim + j;
            __m256 v = _mm256_maskload_ps(p, k);
            _mm256_maskstore_ps(p, k, _mm256_fmadd_ps(_mm256_moveldup_ps(v), t1, _mm256_mul_ps(_mm256_movehdup_ps(v), t2)));
        }
    }
}

void op_to_fp16_avx2(fp16_t *dst, const float *src, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = f32_to_fp16(src[i]);
}

/* op_geglu's steps 8 lanes at a time: vexp8 is exp_poly in every lane (the
 * clamp keeps its input in range). */
void op_geglu_avx2(float *out, const float *gate, const float *up, int n) {
    const __m256 one = _mm256_set1_ps(1.0f), a = _mm256_set1_ps(OP_GELU_A), c = _mm256_set1_ps(-OP_GELU_2C);
    const __m256 lo = _mm256_set1_ps(-OP_GELU_ZMAX), hi = _mm256_set1_ps(OP_GELU_ZMAX);
    for (int i = 0; i < n; i += 8) {
        __m256i k = lanes(n - i);
        __m256 g = _mm256_maskload_ps(gate + i, k), u = _mm256_maskload_ps(up + i, k);
        __m256 z = _mm256_mul_ps(_mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(a, g), g), g, g), c);
        z = _mm256_min_ps(_mm256_max_ps(z, lo), hi);   /* NaN -> lo, as fmaxf */
        __m256 e = vexp8(z);
        _mm256_maskstore_ps(out + i, k, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u));
    }
}
