/* exp(x) for x <= 0 (softmax after subtracting the max), 4, 8 or 16 lanes at
 * a time: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2 is exact
 * enough), exp(r) by its Taylor series to r^6 (relative error below 2e-7),
 * times 2^n. Inputs below -87.3 give 0 (expf would give a denormal or 0; the
 * difference is far below what a softmax weight can carry). NaN stays NaN.
 * Include from a file compiled for AVX2+FMA (vexp8), AVX-512F (vexp16) or
 * aarch64 (vexp4, NEON). */
#ifndef HEARTH_VEC_EXP_H
#define HEARTH_VEC_EXP_H

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#define VEXP_LOG2E 1.44269504088896341f
#define VEXP_LN2_HI 0.693359375f
#define VEXP_LN2_LO (-2.12194440e-4f)
#define VEXP_MIN (-87.3f)

/* exp(r) by Horner on the Taylor terms to r^6, written once for every
 * width so the coefficients and the order of the steps cannot drift
 * between paths: MADD(a, b, c) is the fused a * b + c, SET(v) a splat of v.
 * A macro, as C has no function over the three vector types; it expands to
 * the same chain of intrinsics as before, nothing more. */
#define VEXP_POLY(MADD, SET, r)                                                             \
    MADD(MADD(MADD(MADD(MADD(MADD(SET(1.0f / 720), (r), SET(1.0f / 120)), (r), SET(1.0f / 24)), \
                        (r), SET(1.0f / 6)),                                                \
                   (r), SET(0.5f)),                                                         \
              (r), SET(1.0f)),                                                              \
         (r), SET(1.0f))

#if defined(__AVX2__) && defined(__FMA__)
static inline __m256 vexp8(__m256 x) {
    const __m256 x0 = x;
    __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(VEXP_MIN), _CMP_NLT_UQ);   /* x >= min or NaN */
    x = _mm256_max_ps(x, _mm256_set1_ps(VEXP_MIN));   /* NaN -> min: masked out below */
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(VEXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VEXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VEXP_LN2_LO), r);
    __m256 p = VEXP_POLY(_mm256_fmadd_ps, _mm256_set1_ps, r);
    /* 2^n through the exponent field; n >= -126 here, so it is a normal number */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    y = _mm256_and_ps(y, keep);
    return _mm256_blendv_ps(y, x0, _mm256_cmp_ps(x0, x0, _CMP_UNORD_Q));
}
#endif

#if defined(__AVX512F__)
static inline __m512 vexp16(__m512 x) {
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(VEXP_MIN), _CMP_NLT_UQ);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(VEXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VEXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VEXP_LN2_LO), r);
    __m512 p = VEXP_POLY(_mm512_fmadd_ps, _mm512_set1_ps, r);
    return _mm512_maskz_scalef_ps(keep, p, n);   /* p * 2^n; NaN lanes keep NaN */
}
#endif

#if defined(__aarch64__)
#define VEXP_NEON_MADD(a, b, c) vfmaq_f32((c), (a), (b))   /* c + a * b, fused */
static inline float32x4_t vexp4(float32x4_t x) {
    const float32x4_t x0 = x;
    uint32x4_t keep = vmvnq_u32(vcltq_f32(x, vdupq_n_f32(VEXP_MIN)));   /* x >= min or NaN */
    x = vmaxnmq_f32(x, vdupq_n_f32(VEXP_MIN));   /* NaN -> min (maxNum): masked out below */
    float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(VEXP_LOG2E)));   /* to nearest, ties even */
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(VEXP_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(VEXP_LN2_LO));
    float32x4_t p = VEXP_POLY(VEXP_NEON_MADD, vdupq_n_f32, r);
    /* 2^n through the exponent field; n is whole and >= -126, so the
     * conversion is exact and 2^n a normal number */
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    y = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(y), keep));
    return vbslq_f32(vceqq_f32(x0, x0), y, x0);   /* NaN lanes: x0 */
}
#endif

#endif
