/* The AVX2 path (x86-64 with AVX2, FMA, F16C): called only after the probe
 * said yes. Same panel layout as the AVX-512 path (kern_path.h); a 256-bit
 * vector holds half a panel (8 rows), so a chunk of 64 bytes is two vectors.
 *
 * Without vpdpbusd the int8 dot is vpmaddubsw (unsigned x signed byte pairs
 * to saturating int16) then vpmaddwd by ones (to int32). Int16 sums are
 * added before the widening only as far as they cannot saturate: pairs of
 * 4-bit quants (15 * 127 * 2) eight deep, 5-bit four deep, 6-bit two deep;
 * Q8_0 uses the sign trick (|w| unsigned, sign moved to the activation).
 * The float part is exactly that of formats.c, as in the AVX-512 path, so
 * results are bit-identical to the scalar oracle. */
#include "kernels/kern_path.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define MR_MAX 2


INLINE __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

INLINE uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 32 bits -> 32 bytes: byte i is `val` where bit i is set, else 0. */
INLINE __m256i expand_bits(uint32_t bits, __m256i val) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x(0x8040201008040201ll);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int32_t)bits), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel);
    return _mm256_and_si256(v, val);
}

INLINE __m256 load_ph8(const void *p) { return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)p)); }

/* Weight vectors of chunk c, half h (rows 8h..8h+7) of a 32-k block: lo has
 * k 8c..8c+3, hi k 8c+4..8c+7. Unsigned bytes; for Q8_0 signed (q). */
INLINE void unpack(const uint8_t *qb, int c, int h, int fmt, __m256i *lo, __m256i *hi) {
    if (fmt == FMT_Q8_0) {
        const __m256i flip = _mm256_set1_epi8((char)0x80);
        *lo = _mm256_xor_si256(_mm256_load_si256((const __m256i *)(qb + 128 * c + 32 * h)), flip);
        *hi = _mm256_xor_si256(_mm256_load_si256((const __m256i *)(qb + 128 * c + 64 + 32 * h)), flip);
        return;
    }
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i v = _mm256_load_si256((const __m256i *)(qb + 64 * c + 32 * h));
    *lo = _mm256_and_si256(v, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if (fmt == FMT_Q6_K) {
        /* Crumbs (kern_path.h): bits 2t..2t+1 of H hold bits 4..5 of vector 4h'+t. */
        const __m256i m30 = _mm256_set1_epi8(0x30);
        __m256i H = _mm256_load_si256((const __m256i *)(qb + 256 + 64 * (c / 2) + 32 * h));
        __m256i hl = (c & 1) ? H : _mm256_slli_epi16(H, 4);
        __m256i hh = (c & 1) ? _mm256_srli_epi16(H, 2) : _mm256_slli_epi16(H, 2);
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(hl, m30));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(hh, m30));
        return;
    }
    if (fmt == FMT_Q5_0 || fmt == FMT_Q5_1 || fmt == FMT_Q5_K) {
        const __m256i b4 = _mm256_set1_epi8(16);
        *lo = _mm256_or_si256(*lo, expand_bits(load_u32(qb + 256 + 16 * c + 4 * h), b4));
        *hi = _mm256_or_si256(*hi, expand_bits(load_u32(qb + 256 + 16 * c + 8 + 4 * h), b4));
    }
}

/* Products of one weight vector with a broadcast activation, as int16 pairs. */
INLINE __m256i mul_pairs(__m256i w, __m256i a, int fmt) {
    if (fmt == FMT_Q8_0) return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_maddubs_epi16(w, a);
}

/* How many int16 pair sums may be added before widening (see the top). */
INLINE int depth16(int fmt) {
    switch (fmt) {
    case FMT_Q8_0: return 1;
    case FMT_Q6_K: return 2;
    case FMT_Q5_0: case FMT_Q5_1: case FMT_Q5_K: return 4;
    default: return 8;
    }
}

/* acc[m][h] += integer dot of chunks [c0, c1) for MR rows, both halves of
 * one panel. */
INLINE void dot_chunks(__m256i acc[MR_MAX][2], const uint8_t *qb, const act_q8 *const xb[MR_MAX],
                       int MR, int fmt, int c0, int c1) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int depth = depth16(fmt);
    for (int h = 0; h < 2; h++) {
        __m256i s16[MR_MAX];
        int n16 = 0;
        for (int c = c0; c < c1; c++) {
            __m256i wl, wh;
            unpack(qb, c, h, fmt, &wl, &wh);
            for (int m = 0; m < MR; m++) {
                __m256i pl = mul_pairs(wl, bcast4(xb[m]->qs + 8 * c), fmt);
                __m256i ph = mul_pairs(wh, bcast4(xb[m]->qs + 8 * c + 4), fmt);
                if (depth == 1) {
                    acc[m][h] = _mm256_add_epi32(acc[m][h], _mm256_madd_epi16(pl, ones));
                    acc[m][h] = _mm256_add_epi32(acc[m][h], _mm256_madd_epi16(ph, ones));
                    continue;
                }
                __m256i p = _mm256_add_epi16(pl, ph);
                s16[m] = n16 == 0 ? p : _mm256_add_epi16(s16[m], p);
            }
            if (depth == 1) continue;
            n16 += 2;
            if (n16 == depth || c == c1 - 1) {
                for (int m = 0; m < MR; m++) acc[m][h] = _mm256_add_epi32(acc[m][h], _mm256_madd_epi16(s16[m], ones));
                n16 = 0;
            }
        }
    }
}

INLINE void store_tile(__m256 acc[MR_MAX][2], int MR, float *y, int64_t N, int m0, int64_t nrow) {
    for (int h = 0; h < 2; h++) {
        int64_t left = N - (nrow + 8 * h);
        if (left <= 0) break;
        for (int m = 0; m < MR; m++) {
            float *dst = y + (size_t)(m0 + m) * N + nrow + 8 * h;
            if (left >= 8) { _mm256_storeu_ps(dst, acc[m][h]); continue; }
            float tmp[8];
            _mm256_storeu_ps(tmp, acc[m][h]);
            memcpy(dst, tmp, sizeof(float) * (size_t)left);
        }
    }
}

/* One tile of an integer format: MR rows from m0, one panel. */
INLINE void tile_int(const kpack *pk, int64_t pan, const kern_act *a, int m0, int MR, int fmt,
                     float *y, int64_t N) {
    const int bpu = kp_is_kquant(fmt) ? 8 : 1;
    const int qb = kp_qbytes32(fmt);
    const act_q8 *xr[MR_MAX];
    const act_extra *ext[MR_MAX];
    kp_tile_rows(a, m0, MR, xr, ext);
    __m256 acc[MR_MAX][2];
    for (int m = 0; m < MR; m++) acc[m][0] = acc[m][1] = _mm256_setzero_ps();

    for (int64_t u = 0; u < pk->units; u++) {
        const uint8_t *s = kp_scales(pk, pan, u), *qu = kp_quants(pk, pan, u);
        __m256 d[2] = { load_ph8(s), load_ph8(s + 16) }, e[2] = { d[0], d[1] };
        if (fmt == FMT_Q4_1 || fmt == FMT_Q5_1 || fmt == FMT_Q4_K || fmt == FMT_Q5_K) {
            e[0] = load_ph8(s + 32);
            e[1] = load_ph8(s + 48);
        }
        for (int bi = 0; bi < bpu; bi++) {
            const int64_t b = u * bpu + bi;
            const uint8_t *q = qu + qb * bi;
            const act_q8 *xb[MR_MAX];
            for (int m = 0; m < MR; m++) xb[m] = xr[m] + b;
            __m256i ia[MR_MAX][2];

            if (fmt == FMT_Q6_K) {
                /* Exact integer arithmetic in floats, as in the AVX-512 path. */
                for (int m = 0; m < MR; m++) ia[m][0] = ia[m][1] = _mm256_set1_epi32(ext[m][b].off0);
                dot_chunks(ia, q, xb, MR, fmt, 0, 2);
                __m256 sa[2], sb[2], lo[MR_MAX][2];
                for (int h = 0; h < 2; h++) {
                    sa[h] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(s + 32 + 32 * bi + 8 * h))));
                    sb[h] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(s + 48 + 32 * bi + 8 * h))));
                }
                for (int m = 0; m < MR; m++) {
                    for (int h = 0; h < 2; h++) lo[m][h] = _mm256_mul_ps(_mm256_cvtepi32_ps(ia[m][h]), sa[h]);
                    ia[m][0] = ia[m][1] = _mm256_set1_epi32(ext[m][b].off1);
                }
                dot_chunks(ia, q, xb, MR, fmt, 2, 4);
                for (int m = 0; m < MR; m++) {
                    __m256 da = _mm256_set1_ps(xb[m]->d);
                    for (int h = 0; h < 2; h++) {
                        __m256 i = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[m][h]), sb[h], lo[m][h]);
                        acc[m][h] = _mm256_fmadd_ps(_mm256_mul_ps(d[h], da), i, acc[m][h]);
                    }
                }
                continue;
            }

            /* Q8_0 is multiplied signed here, so it takes no offset. */
            for (int m = 0; m < MR; m++)
                ia[m][0] = ia[m][1] = (fmt == FMT_Q4_0 || fmt == FMT_Q5_0)
                    ? _mm256_set1_epi32(ext[m][b].off0) : _mm256_setzero_si256();
            dot_chunks(ia, q, xb, MR, fmt, 0, 4);

            if (fmt == FMT_Q4_K || fmt == FMT_Q5_K) {
                __m256 sc[2], mn[2];
                for (int h = 0; h < 2; h++) {
                    sc[h] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(s + 64 + 16 * bi + 8 * h))));
                    mn[h] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(s + 192 + 16 * bi + 8 * h))));
                }
                for (int m = 0; m < MR; m++) {
                    __m256 da = _mm256_set1_ps(xb[m]->d), ns = _mm256_set1_ps(ext[m][b].fs);
                    for (int h = 0; h < 2; h++) {
                        acc[m][h] = _mm256_fmadd_ps(_mm256_mul_ps(d[h], da), _mm256_mul_ps(_mm256_cvtepi32_ps(ia[m][h]), sc[h]), acc[m][h]);
                        acc[m][h] = _mm256_fmadd_ps(_mm256_mul_ps(e[h], da), _mm256_mul_ps(mn[h], ns), acc[m][h]);
                    }
                }
                continue;
            }
            for (int m = 0; m < MR; m++) {
                __m256 da = _mm256_set1_ps(xb[m]->d);
                for (int h = 0; h < 2; h++) {
                    acc[m][h] = _mm256_fmadd_ps(_mm256_mul_ps(d[h], da), _mm256_cvtepi32_ps(ia[m][h]), acc[m][h]);
                    if (fmt == FMT_Q4_1 || fmt == FMT_Q5_1)
                        acc[m][h] = _mm256_fmadd_ps(_mm256_mul_ps(e[h], da), _mm256_set1_ps(ext[m][b].fs), acc[m][h]);
                }
            }
        }
    }
    store_tile(acc, MR, y, N, m0, pan * KP_ROWS);
}

/* One tile of a float format: acc = fmaf(w[k], x[k], acc), k in order. */
INLINE void tile_float(const kpack *pk, int64_t pan, const kern_act *a, int m0, int MR, int fmt,
                       float *y, int64_t N) {
    const int64_t K = a->n_in;
    const float *xr[MR_MAX];
    kp_tile_xrows(a, m0, MR, xr);
    __m256 acc[MR_MAX][2];
    for (int m = 0; m < MR; m++) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
    const uint8_t *p = kp_quants(pk, pan, 0);   /* plain layout: columns q_bytes apart */
    for (int64_t k = 0; k < K; k++) {
        __m256 w[2];
        for (int h = 0; h < 2; h++) {
            if (fmt == FMT_F32) w[h] = _mm256_load_ps((const float *)(p + 64 * k + 32 * h));
            else if (fmt == FMT_F16) w[h] = load_ph8(p + 32 * k + 16 * h);
            else w[h] = _mm256_castsi256_ps(_mm256_slli_epi32(
                    _mm256_cvtepu16_epi32(_mm_load_si128((const __m128i *)(p + 32 * k + 16 * h))), 16));
        }
        for (int m = 0; m < MR; m++) {
            __m256 xv = _mm256_set1_ps(xr[m][k]);
            acc[m][0] = _mm256_fmadd_ps(w[0], xv, acc[m][0]);
            acc[m][1] = _mm256_fmadd_ps(w[1], xv, acc[m][1]);
        }
    }
    store_tile(acc, MR, y, N, m0, pan * KP_ROWS);
}

INLINE void tile(const kpack *pk, int64_t pan, const kern_act *a, int m0, int MR, int fmt, float *y, int64_t N) {
    if (kp_is_float(fmt)) tile_float(pk, pan, a, m0, MR, fmt, y, N);
    else tile_int(pk, pan, a, m0, MR, fmt, y, N);
}

INLINE void rows_fmt(const hweight *w, const kern_act *a, float *y, int64_t n0, int64_t n1, int fmt) {
    const kpack *pk = w->packed;
    for (int64_t pan = n0 / KP_ROWS; pan * KP_ROWS < n1; pan++) {
        int m0 = 0;
        for (; m0 + MR_MAX <= a->M; m0 += MR_MAX) tile(pk, pan, a, m0, MR_MAX, fmt, y, w->n_out);
        if (a->M - m0 == 1) tile(pk, pan, a, m0, 1, fmt, y, w->n_out);
    }
}

KP_DEFINE_ROWS(avx2_rows, rows_fmt)

/* act_quantize_row bit for bit (see the AVX-512 version), 8 lanes at a time. */
static void avx2_quantize(const float *x, act_q8 *q, int32_t *slo, int64_t n) {
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / QK; b++) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + QK * b + 8 * i);
            __m256 a = _mm256_and_ps(v[i], absmask);
            /* max(a, m) returns m when a is NaN: NaN is skipped, as in the reference. */
            m = _mm256_max_ps(a, m);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        float amax = _mm_cvtss_f32(m4);
        float id, d = kp_act_scale(amax, &id);
        __m256 vid = _mm256_set1_ps(id);
        __m256i qi[4];
        for (int i = 0; i < 4; i++)
            qi[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[i], vid), lo), hi));
        /* int32 -> int8 (values fit): packs work per 128-bit lane, so fix the order. */
        __m256i p16a = _mm256_packs_epi32(qi[0], qi[1]), p16b = _mm256_packs_epi32(qi[2], qi[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)q[b].qs, p8);
        __m256i s01 = _mm256_add_epi32(qi[0], qi[1]), s23 = _mm256_add_epi32(qi[2], qi[3]);
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s01), _mm256_extracti128_si256(s01, 1));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
        int32_t s0 = _mm_cvtsi128_si32(t);
        __m128i u = _mm_add_epi32(_mm256_castsi256_si128(s23), _mm256_extracti128_si256(s23, 1));
        u = _mm_add_epi32(u, _mm_shuffle_epi32(u, 0x4e));
        u = _mm_add_epi32(u, _mm_shuffle_epi32(u, 0xb1));
        kp_act_store(q, slo, b, d, s0, _mm_cvtsi128_si32(u));
    }
}

const kern_path kern_path_avx2 = {
    .name = "avx2",
    .packs = kp_packs_all,
    .rows = avx2_rows,
    .quantize = avx2_quantize,
    .q6_crumbs = true,
};
