/* SwiGLU with AVX-512 (compiled with -mavx512f; only called after the CPU
 * probe): op_swiglu 16 lanes at a time, exp(-g) by vexp16. vexp16 takes any
 * input here: -g above 88 overflows to inf through scalef (silu -> -0), below
 * -87.3 gives 0 (silu -> g). The tail goes through masked loads. */
#include "ops.h"
#include "vec_exp.h"
#include <immintrin.h>

void op_swiglu_avx512(float *out, const float *gate, const float *up, int n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = (__mmask16)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __m512 g = _mm512_maskz_loadu_ps(k, gate + i), u = _mm512_maskz_loadu_ps(k, up + i);
        __m512 e = vexp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
        _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u));
    }
}
