/* Private to the AVX-512 kernels (kern_avx512.c, kern_amx.c): a panel's
 * quants (kern_path.h) unpacked into 64-byte weight vectors of unsigned
 * quants, 16 rows x 4 k each, as vpdpbusd takes them and as the rows of an
 * AMX B tile are laid out; and the fp16 scale loads. Include only from a
 * file compiled with the AVX-512 flags. */
#ifndef HEARTH_KERN_AVX512_UNPACK_H
#define HEARTH_KERN_AVX512_UNPACK_H

#include "kernels/kern_path.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE __mmask64 load_mask(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return _cvtu64_mask64(v);
}

INLINE __m512 load_ph(const void *p) { return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)p)); }

/* Weight vectors of chunk c (k 8c..8c+7) of one 32-k block: lo has k 8c..8c+3
 * of the 16 rows, hi k 8c+4..8c+7, as unsigned bytes. */
INLINE void unpack(const uint8_t *qb, int c, int fmt, __m512i *lo, __m512i *hi) {
    if (fmt == FMT_Q8_0) {
        *lo = _mm512_load_si512(qb + 128 * c);
        *hi = _mm512_load_si512(qb + 128 * c + 64);
        return;
    }
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i v = _mm512_load_si512(qb + 64 * c);
    if (fmt == FMT_Q6_K) {
        /* Crumbs: bits 2t..2t+1 of H hold bits 4..5 of vector 4h+t. Move them
         * to bits 4..5, keep those, and merge with the nibble:
         * ternlog 0xEC is (A & C) | B. */
        const __m512i m30 = _mm512_set1_epi8(0x30);
        __m512i H = _mm512_load_si512(qb + 256 + 64 * (c / 2));
        __m512i hl = (c & 1) ? H : _mm512_slli_epi16(H, 4);
        __m512i hh = (c & 1) ? _mm512_srli_epi16(H, 2) : _mm512_slli_epi16(H, 2);
        *lo = _mm512_ternarylogic_epi32(v, _mm512_and_si512(hl, m30), m4, 0xec);
        *hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), _mm512_and_si512(hh, m30), m4, 0xec);
        return;
    }
    *lo = _mm512_and_si512(v, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    if (fmt == FMT_Q5_0 || fmt == FMT_Q5_1 || fmt == FMT_Q5_K) {
        const __m512i b4 = _mm512_set1_epi8(16);
        *lo = _mm512_mask_add_epi8(*lo, load_mask(qb + 256 + 16 * c), *lo, b4);
        *hi = _mm512_mask_add_epi8(*hi, load_mask(qb + 256 + 16 * c + 8), *hi, b4);
    }
}

#endif
