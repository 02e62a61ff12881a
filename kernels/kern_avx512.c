/* The AVX-512 VNNI path (x86-64 with F, BW, VL, DQ, VNNI): called only after
 * the probe said yes. It reads the panel layout of kern_path.h: one 32-bit
 * lane per output row, so a vpdpbusd multiplies 16 rows x 4 k of unsigned
 * weight quants by 4 activation bytes broadcast to every lane.
 *
 * A register tile is MR activation rows x 2 panels (32 output rows): each
 * weight vector, once unpacked, feeds MR rows, and each broadcast feeds 32.
 * Per 32-k block the integer sums are exact; they are then folded into the
 * float accumulators with exactly the operations formats.c defines for
 * format_dot_q8 / format_dot_f32 (same multiplies, same fused multiply-adds,
 * blocks in order), so every output is bit-identical to the scalar oracle,
 * whatever M, the tile, or the thread split. */
#include "kernels/kern_path.h"
#include "kernels/kern_avx512_unpack.h"

#include <immintrin.h>
#include <string.h>

/* Activation rows in one register tile: 6 for the block formats (12 integer
 * and 12 float accumulators), 4 for the K-quants and Q6_K, whose extra scale
 * vectors would not fit beside 6. A batch is cut into tiles as equal as
 * possible (M = 6 is one tile, not 4 + 2), because a small tile pays for
 * unpacking the weights again with little arithmetic to show for it. */
#define MR_MAX 6
INLINE int mr_limit(int fmt) { return kp_is_kquant(fmt) ? 4 : MR_MAX; }

INLINE __m512i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* acc[m][p] += weights of chunks [c0, c1) . activations, for MR rows and
 * the two panels whose block quants start at q0 and q1. */
INLINE void dot_chunks(__m512i acc[MR_MAX][2], const uint8_t *q0, const uint8_t *q1,
                       const act_q8 *const xb[MR_MAX], int MR, int fmt, int c0, int c1) {
    for (int c = c0; c < c1; c++) {
        __m512i w0l, w0h, w1l, w1h;
        unpack(q0, c, fmt, &w0l, &w0h);
        unpack(q1, c, fmt, &w1l, &w1h);
        for (int m = 0; m < MR; m++) {
            __m512i al = bcast4(xb[m]->qs + 8 * c), ah = bcast4(xb[m]->qs + 8 * c + 4);
            acc[m][0] = _mm512_dpbusd_epi32(acc[m][0], w0l, al);
            acc[m][1] = _mm512_dpbusd_epi32(acc[m][1], w1l, al);
            acc[m][0] = _mm512_dpbusd_epi32(acc[m][0], w0h, ah);
            acc[m][1] = _mm512_dpbusd_epi32(acc[m][1], w1h, ah);
        }
    }
}

/* Stores MR x 32 outputs: rows [nrow, nrow + 32) clipped to N. */
INLINE void store_tile(__m512 acc[MR_MAX][2], int MR, float *y, int64_t N, int m0, int64_t nrow) {
    for (int p = 0; p < 2; p++) {
        int64_t left = N - (nrow + 16 * p);
        if (left <= 0) break;
        __mmask16 k = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        for (int m = 0; m < MR; m++)
            _mm512_mask_storeu_ps(y + (size_t)(m0 + m) * N + nrow + 16 * p, k, acc[m][p]);
    }
}

/* Prefetches what the tile reads KP_PREFETCH_BYTES after this unit: one
 * stream when the pair is interleaved, else each panel's quants. */
INLINE void prefetch_unit(const kpack *pk, const uint8_t *qu0, const uint8_t *qu1) {
    if (pk->pairs_interleaved) {
        for (size_t o = 0; o < kp_unit_stride(pk); o += 64)
            _mm_prefetch((const char *)qu0 + KP_PREFETCH_BYTES + o, _MM_HINT_T0);
        return;
    }
    for (size_t o = 0; o < pk->q_bytes; o += 64) {
        _mm_prefetch((const char *)qu0 + KP_PREFETCH_BYTES + o, _MM_HINT_T0);
        _mm_prefetch((const char *)qu1 + KP_PREFETCH_BYTES + o, _MM_HINT_T0);
    }
}

/* One tile of an integer format: MR rows from m0, panels pan and pan+1. */
INLINE void tile_int(const kpack *pk, int64_t pan, const kern_act *a, int m0, int MR, int fmt,
                     float *y, int64_t N) {
    const int bpu = kp_is_kquant(fmt) ? 8 : 1;
    const int qb = kp_qbytes32(fmt);
    const act_q8 *xr[MR_MAX];
    const act_extra *ext[MR_MAX];
    kp_tile_rows(a, m0, MR, xr, ext);
    __m512 acc[MR_MAX][2];
    for (int m = 0; m < MR; m++) acc[m][0] = acc[m][1] = _mm512_setzero_ps();

    for (int64_t u = 0; u < pk->units; u++) {
        const uint8_t *s0 = kp_scales(pk, pan, u), *s1 = kp_scales(pk, pan + 1, u);
        const uint8_t *qu0 = kp_quants(pk, pan, u), *qu1 = kp_quants(pk, pan + 1, u);
        /* Only the first tile of a pair reads it from memory: the later
         * tiles of a large batch find it in cache (prefetching there cost
         * about 4% of a 512-row GEMM). */
        if (m0 == 0) prefetch_unit(pk, qu0, qu1);
        /* d of every row; m (Q4_1/Q5_1) or dmin (Q4_K/Q5_K) */
        __m512 d0 = load_ph(s0), d1 = load_ph(s1), e0 = d0, e1 = d1;
        if (fmt == FMT_Q4_1 || fmt == FMT_Q5_1 || fmt == FMT_Q4_K || fmt == FMT_Q5_K) {
            e0 = load_ph(s0 + 32);
            e1 = load_ph(s1 + 32);
        }
        for (int bi = 0; bi < bpu; bi++) {
            const int64_t b = u * bpu + bi;
            const uint8_t *q0 = qu0 + qb * bi, *q1 = qu1 + qb * bi;
            const act_q8 *xb[MR_MAX];
            for (int m = 0; m < MR; m++) xb[m] = xr[m] + b;
            __m512i ia[MR_MAX][2];

            if (fmt == FMT_Q6_K) {
                /* isum = sc[2k] * dot(first 16) + sc[2k+1] * dot(last 16), quants q-32.
                 * Every product and the sum are integers below 2^24, so the
                 * float arithmetic here is exact and equals (float)isum. */
                for (int m = 0; m < MR; m++) ia[m][0] = ia[m][1] = _mm512_set1_epi32(ext[m][b].off0);
                dot_chunks(ia, q0, q1, xb, MR, fmt, 0, 2);
                __m512 sa0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(s0 + 32 + 32 * bi)))),
                       sa1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(s1 + 32 + 32 * bi)))),
                       sb0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(s0 + 48 + 32 * bi)))),
                       sb1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(s1 + 48 + 32 * bi))));
                __m512 lo[MR_MAX][2];
                for (int m = 0; m < MR; m++) {
                    lo[m][0] = _mm512_mul_ps(_mm512_cvtepi32_ps(ia[m][0]), sa0);
                    lo[m][1] = _mm512_mul_ps(_mm512_cvtepi32_ps(ia[m][1]), sa1);
                    ia[m][0] = ia[m][1] = _mm512_set1_epi32(ext[m][b].off1);
                }
                dot_chunks(ia, q0, q1, xb, MR, fmt, 2, 4);
                for (int m = 0; m < MR; m++) {
                    __m512 da = _mm512_set1_ps(xb[m]->d);
                    __m512 i0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[m][0]), sb0, lo[m][0]);
                    __m512 i1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[m][1]), sb1, lo[m][1]);
                    acc[m][0] = _mm512_fmadd_ps(_mm512_mul_ps(d0, da), i0, acc[m][0]);
                    acc[m][1] = _mm512_fmadd_ps(_mm512_mul_ps(d1, da), i1, acc[m][1]);
                }
                continue;
            }

            /* The format's offset (q-8, q-16, q-128) through the block sum. */
            for (int m = 0; m < MR; m++)
                ia[m][0] = ia[m][1] = (fmt == FMT_Q4_0 || fmt == FMT_Q5_0 || fmt == FMT_Q8_0)
                    ? _mm512_set1_epi32(ext[m][b].off0) : _mm512_setzero_si512();
            dot_chunks(ia, q0, q1, xb, MR, fmt, 0, 4);

            if (fmt == FMT_Q4_K || fmt == FMT_Q5_K) {
                /* acc = fmaf(d * x.d, (float)(sc * isum), acc);
                 * acc = fmaf(dmin * x.d, (float)(-(m * x.sum)), acc).
                 * sc, m <= 63, |isum| < 2^17, |sum| < 2^12: both products are
                 * integers below 2^24, exact as float multiplies. */
                __m512 sc0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(s0 + 64 + 16 * bi)))),
                       sc1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(s1 + 64 + 16 * bi)))),
                       mn0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(s0 + 192 + 16 * bi)))),
                       mn1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(s1 + 192 + 16 * bi))));
                for (int m = 0; m < MR; m++) {
                    __m512 da = _mm512_set1_ps(xb[m]->d), ns = _mm512_set1_ps(ext[m][b].fs);
                    acc[m][0] = _mm512_fmadd_ps(_mm512_mul_ps(d0, da), _mm512_mul_ps(_mm512_cvtepi32_ps(ia[m][0]), sc0), acc[m][0]);
                    acc[m][1] = _mm512_fmadd_ps(_mm512_mul_ps(d1, da), _mm512_mul_ps(_mm512_cvtepi32_ps(ia[m][1]), sc1), acc[m][1]);
                    acc[m][0] = _mm512_fmadd_ps(_mm512_mul_ps(e0, da), _mm512_mul_ps(mn0, ns), acc[m][0]);
                    acc[m][1] = _mm512_fmadd_ps(_mm512_mul_ps(e1, da), _mm512_mul_ps(mn1, ns), acc[m][1]);
                }
                continue;
            }
            /* Q4_0, Q5_0, Q8_0: acc = fmaf(d * x.d, (float)isum, acc);
             * Q4_1, Q5_1 also acc = fmaf(m * x.d, (float)x.sum, acc). */
            for (int m = 0; m < MR; m++) {
                __m512 da = _mm512_set1_ps(xb[m]->d);
                acc[m][0] = _mm512_fmadd_ps(_mm512_mul_ps(d0, da), _mm512_cvtepi32_ps(ia[m][0]), acc[m][0]);
                acc[m][1] = _mm512_fmadd_ps(_mm512_mul_ps(d1, da), _mm512_cvtepi32_ps(ia[m][1]), acc[m][1]);
                if (fmt == FMT_Q4_1 || fmt == FMT_Q5_1) {
                    __m512 s = _mm512_set1_ps(ext[m][b].fs);
                    acc[m][0] = _mm512_fmadd_ps(_mm512_mul_ps(e0, da), s, acc[m][0]);
                    acc[m][1] = _mm512_fmadd_ps(_mm512_mul_ps(e1, da), s, acc[m][1]);
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
    __m512 acc[MR_MAX][2];
    for (int m = 0; m < MR; m++) acc[m][0] = acc[m][1] = _mm512_setzero_ps();
    const uint8_t *p0 = kp_quants(pk, pan, 0), *p1 = kp_quants(pk, pan + 1, 0);
    const size_t st = kp_unit_stride(pk);   /* one column of a panel to the next */
    for (int64_t k = 0; k < K; k++) {
        const uint8_t *c0 = p0 + st * (size_t)k, *c1 = p1 + st * (size_t)k;
        __m512 w0, w1;
        if (fmt == FMT_F32) {
            w0 = _mm512_load_ps(c0);
            w1 = _mm512_load_ps(c1);
        } else if (fmt == FMT_F16) {
            w0 = load_ph(c0);
            w1 = load_ph(c1);
        } else {   /* BF16: the high half of a float */
            w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_load_si256((const __m256i *)c0)), 16));
            w1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_load_si256((const __m256i *)c1)), 16));
        }
        for (int m = 0; m < MR; m++) {
            __m512 xv = _mm512_set1_ps(xr[m][k]);
            acc[m][0] = _mm512_fmadd_ps(w0, xv, acc[m][0]);
            acc[m][1] = _mm512_fmadd_ps(w1, xv, acc[m][1]);
        }
    }
    store_tile(acc, MR, y, N, m0, pan * KP_ROWS);
}

INLINE void tile(const kpack *pk, int64_t pan, const kern_act *a, int m0, int MR, int fmt, float *y, int64_t N) {
    if (kp_is_float(fmt)) tile_float(pk, pan, a, m0, MR, fmt, y, N);
    else tile_int(pk, pan, a, m0, MR, fmt, y, N);
}

/* Output rows [n0, n1): pairs of panels, each over all M in near-equal tiles. */
INLINE void rows_fmt(const hweight *w, const kern_act *a, float *y, int64_t n0, int64_t n1, int fmt) {
    const kpack *pk = w->packed;
    const int lim = mr_limit(fmt), tiles = (a->M + lim - 1) / lim;
    for (int64_t pan = n0 / KP_ROWS; pan * KP_ROWS < n1; pan += 2) {
        for (int t = 0, m0 = 0; t < tiles; t++) {
            int mr = a->M / tiles + (t < a->M % tiles);
            switch (mr) {
            case 6: tile(pk, pan, a, m0, 6, fmt, y, w->n_out); break;
            case 5: tile(pk, pan, a, m0, 5, fmt, y, w->n_out); break;
            case 4: tile(pk, pan, a, m0, 4, fmt, y, w->n_out); break;
            case 3: tile(pk, pan, a, m0, 3, fmt, y, w->n_out); break;
            case 2: tile(pk, pan, a, m0, 2, fmt, y, w->n_out); break;
            default: tile(pk, pan, a, m0, 1, fmt, y, w->n_out); break;
            }
            m0 += mr;
        }
    }
}

KP_DEFINE_ROWS(avx512_rows, rows_fmt)

/* act_quantize_row, bit for bit: amax of |x| ignoring NaN, d = amax / 127,
 * id = 1 / d (0 when d is 0), q = x * id rounded to nearest even and clamped
 * to +-127 (NaN -> -127, as nearest_clamped does), plus the half sums. */
void kern_avx512_quantize(const float *x, act_q8 *q, int32_t *slo, int64_t n) {
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
    for (int64_t b = 0; b < n / QK; b++) {
        __m512 v0 = _mm512_loadu_ps(x + QK * b), v1 = _mm512_loadu_ps(x + QK * b + 16);
        __m512 a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), absmask));
        __m512 a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), absmask));
        a0 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a0, a0, _CMP_ORD_Q), a0);
        a1 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a1, a1, _CMP_ORD_Q), a1);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        float id, d = kp_act_scale(amax, &id);
        __m512 vid = _mm512_set1_ps(id);
        /* max(v, -127) gives -127 for NaN (the second operand wins). */
        __m512i q0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, vid), lo), hi));
        __m512i q1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, vid), lo), hi));
        _mm_storeu_si128((__m128i *)q[b].qs, _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(q[b].qs + 16), _mm512_cvtepi32_epi8(q1));
        int32_t s0 = _mm512_reduce_add_epi32(q0);
        kp_act_store(q, slo, b, d, s0, _mm512_reduce_add_epi32(q1));
    }
}

const kern_path kern_path_avx512 = {
    .name = "avx512",
    .packs = kp_packs_all,
    .rows = avx512_rows,
    .quantize = kern_avx512_quantize,
    .q6_crumbs = true,
    .pairs_interleaved = true,
};
