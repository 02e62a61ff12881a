/* The AVX-512 versions of ops.c's row steps (compiled with -mavx512f
 * -mf16c; only called after the CPU probe). Each gives what its scalar
 * version gives: rope and the fp16 store bit for bit, SwiGLU within 1e-6
 * relative (its exp is vexp16). Tails go through masked loads or the scalar
 * code. */
#include "kernels/ops.h"
#include "kernels/vec_exp.h"
#include "kernels/ops_x86.h"

/* SwiGLU: op_swiglu 16 lanes at a time, exp(-g) by vexp16. vexp16 takes any
 * input here: -g above 88 overflows to inf through scalef (silu -> -0),
 * below -87.3 gives 0 (silu -> g). */
void op_swiglu_avx512(float *out, const float *gate, const float *up, int n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __m512 g = _mm512_maskz_loadu_ps(k, gate + i), u = _mm512_maskz_loadu_ps(k, up + i);
        __m512 e = vexp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
        _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u));
    }
}

/* op_rmsnorm's order: lane l sums the squares of elements l, l + 16, ...;
 * then halves are added, 8, 4, 2, 1 lanes apart. */
void op_rmsnorm_avx512(float *out, const float *x, const float *weight, int n, float eps) {
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        acc = _mm512_mask3_fmadd_ps(v, v, acc, k);   /* lanes past n keep their sum */
    }
    __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(acc), 1)));
    float scale = rms_scale8(h8, n, eps);
    const __m512 vs = _mm512_set1_ps(scale);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs);
        _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, weight + i)));
    }
}

static inline __m512 neg(__m512 v) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u)));
}

/* Per pair: a' = fmaf(x0, c, -(x1 * s)), b' = fmaf(x0, s, x1 * c). */
void op_rope_apply_avx512(float *x, int n_heads, int head_dim, int n_rot, bool neox, const float *cs) {
    const int half = n_rot / 2;
    if (neox) {
        for (int i = 0; i < half; i += 16) {
            __mmask16 k = (__mmask16)(half - i >= 16 ? 0xffff : (1u << (half - i)) - 1);
            __m512 c = _mm512_maskz_loadu_ps(k, cs + i), s = _mm512_maskz_loadu_ps(k, cs + half + i);
            for (int h = 0; h < n_heads; h++) {
                float *head = x + (size_t)h * head_dim;
                __m512 x0 = _mm512_maskz_loadu_ps(k, head + i), x1 = _mm512_maskz_loadu_ps(k, head + half + i);
                _mm512_mask_storeu_ps(head + i, k, _mm512_fmadd_ps(x0, c, neg(_mm512_mul_ps(x1, s))));
                _mm512_mask_storeu_ps(head + half + i, k, _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c)));
            }
        }
        return;
    }
    /* Adjacent pairs: 8 pairs per vector. With x0 in both lanes of a pair
     * (A) and x1 in both (B), both results are fma(A, t1, B * t2) where
     * t1 = (c, s) and t2 = (-s, c): -(x1 * s) is x1 * -s exactly. */
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int j = 0; j < n_rot; j += 16) {
        int pairs = (n_rot - j) / 2 < 8 ? (n_rot - j) / 2 : 8;
        __mmask16 kp = (__mmask16)((1u << pairs) - 1), k = (__mmask16)((1u << (2 * pairs)) - 1);
        __m512 c = _mm512_maskz_loadu_ps(kp, cs + j / 2), s = _mm512_maskz_loadu_ps(kp, cs + half + j / 2);
        __m512 t1 = _mm512_permutex2var_ps(c, lo, s), t2 = _mm512_permutex2var_ps(neg(s), lo, c);
        for (int h = 0; h < n_heads; h++) {
            float *p = x + (size_t)h * head_dim + j;
            __m512 v = _mm512_maskz_loadu_ps(k, p);
            __m512 r = _mm512_fmadd_ps(_mm512_moveldup_ps(v), t1, _mm512_mul_ps(_mm512_movehdup_ps(v), t2));
            _mm512_mask_storeu_ps(p, k, r);
        }
    }
}

void op_to_fp16_avx512(fp16_t *dst, const float *src, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *)(dst + i), h);
    }
    for (; i < n; i++) dst[i] = f32_to_fp16(src[i]);
}

/* op_geglu's steps 16 lanes at a time: vexp16 is exp_poly in every lane
 * (the clamp keeps its input in range). */
void op_geglu_avx512(float *out, const float *gate, const float *up, int n) {
    const __m512 one = _mm512_set1_ps(1.0f), a = _mm512_set1_ps(OP_GELU_A), c = _mm512_set1_ps(-OP_GELU_2C);
    const __m512 lo = _mm512_set1_ps(-OP_GELU_ZMAX), hi = _mm512_set1_ps(OP_GELU_ZMAX);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __m512 g = _mm512_maskz_loadu_ps(k, gate + i), u = _mm512_maskz_loadu_ps(k, up + i);
        __m512 z = _mm512_mul_ps(_mm512_fmadd_ps(_mm512_mul_ps(_mm512_mul_ps(a, g), g), g, g), c);
        z = _mm512_min_ps(_mm512_max_ps(z, lo), hi);   /* NaN -> lo, as fmaxf */
        __m512 e = vexp16(z);
        _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u));
    }
}
