/* What the AVX2 and AVX-512 row ops share (both files are compiled with
 * AVX2): the last steps of op_rmsnorm's sum. */
#ifndef HEARTH_OPS_X86_H
#define HEARTH_OPS_X86_H

#include <immintrin.h>
#include <math.h>

/* h8: lane l holds part[l] + part[l + 8]. Adds 4, 2, 1 lanes apart, as
 * op_rmsnorm does, and returns 1 / sqrt(sum / n + eps). */
static inline float rms_scale8(__m256 h8, int n, float eps) {
    __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    __m128 h1 = _mm_add_ss(h2, _mm_movehdup_ps(h2));
    return 1.0f / sqrtf(_mm_cvtss_f32(h1) / (float)n + eps);
}

#endif
