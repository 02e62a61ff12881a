/* The NEON path (aarch64 with dotprod): called only after the probe said the
 * CPU has dotprod; the i8mm GEMM only when it also has i8mm.
 *
 * It reads the panel layout of kern_path.h, which suits NEON as it is: the
 * 16 bytes at offset 16g of a 64-byte chunk are rows 4g..4g+3 x 4 k, so
 *  - GEMV (sdot): vdotq_laneq_s32 multiplies them by 4 activation bytes
 *    taken from one 32-bit lane, one int32 lane per output row;
 *  - GEMM (i8mm smmla): zipping the 32-bit lanes of the low-nibble vector
 *    (k 8c..8c+3) with the high-nibble one (k 8c+4..8c+7) gives 2 rows x 8 k,
 *    the operand vmmlaq_s32 takes, against 2 activation rows x 8 k; the
 *    result is 2 weight rows x 2 activation rows.
 * Weight quants are unsigned (0..63, so they are also valid int8), Q8_0's
 * are stored q ^ 0x80 and flipped back to signed; the format's offset is
 * applied through the activation sums, as on x86.
 *
 * Per 32-k block the integer sums are exact, whatever the instruction or
 * order. They are folded into the float accumulators by fold(), one lane at
 * a time with exactly the operations formats.c defines (same multiplies,
 * same fused multiply-adds, blocks in order). GEMV and GEMM share fold(), so
 * every output is bit-identical to the scalar oracle whatever M, the tile,
 * or whether i8mm ran it (batch invariance). */
#include "kernels/kern_path.h"

#include <arm_neon.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
/* The file is built for dotprod only (armv8.2-a+dotprod): the i8mm code is
 * these functions alone, so the compiler cannot put an i8mm instruction into
 * the sdot tiles that dotprod-only cores (Cortex-A55, Neoverse N1) run. */
#define I8MM __attribute__((target("+i8mm")))

static bool is_float(int fmt) { return fmt == FMT_F32 || fmt == FMT_F16 || fmt == FMT_BF16; }

/* ---- unpacking ----------------------------------------------------------- */

/* ORs `bit` into the bytes of v[0..3] whose bit is set in the 64-bit plane
 * word at p: bit 16g + l of the word belongs to lane l of v[g]. */
INLINE void add_plane(uint8x16_t v[4], const uint8_t *p, uint8_t bit) {
    static const uint8_t sel[4][16] = {
        { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1 },
        { 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3 },
        { 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5 },
        { 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7 },
    };
    static const uint8_t mask[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
    uint8x8_t w8 = vld1_u8(p);
    uint8x16_t word = vcombine_u8(w8, w8), m = vld1q_u8(mask), b = vdupq_n_u8(bit);
    for (int g = 0; g < 4; g++) {
        uint8x16_t t = vqtbl1q_u8(word, vld1q_u8(sel[g]));
        v[g] = vorrq_u8(v[g], vandq_u8(vtstq_u8(t, m), b));
    }
}

/* Weights of chunk c (k 8c..8c+7) of one 32-k block starting at qb, signed:
 * lo[g] has k 8c..8c+3 of rows 4g..4g+3 (4 bytes a row), hi[g] k 8c+4..8c+7. */
INLINE void unpack(const uint8_t *qb, int c, int fmt, int8x16_t lo[4], int8x16_t hi[4]) {
    if (fmt == FMT_Q8_0) {       /* chunks 2c and 2c+1 of 4 k each */
        const uint8x16_t flip = vdupq_n_u8(0x80);
        for (int g = 0; g < 4; g++) {
            lo[g] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(qb + 128 * c + 16 * g), flip));
            hi[g] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(qb + 128 * c + 64 + 16 * g), flip));
        }
        return;
    }
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    uint8x16_t l[4], h[4];
    for (int g = 0; g < 4; g++) {
        uint8x16_t v = vld1q_u8(qb + 64 * c + 16 * g);
        l[g] = vandq_u8(v, m4);
        h[g] = vshrq_n_u8(v, 4);
    }
    /* Plane word j covers k 4j..4j+3: word 2c the low nibbles, 2c+1 the high. */
    if (fmt == FMT_Q5_0 || fmt == FMT_Q5_1 || fmt == FMT_Q5_K || fmt == FMT_Q6_K) {
        add_plane(l, qb + 256 + 16 * c, 16);
        add_plane(h, qb + 256 + 16 * c + 8, 16);
    }
    if (fmt == FMT_Q6_K) {
        add_plane(l, qb + 320 + 16 * c, 32);
        add_plane(h, qb + 320 + 16 * c + 8, 32);
    }
    for (int g = 0; g < 4; g++) {
        lo[g] = vreinterpretq_s8_u8(l[g]);
        hi[g] = vreinterpretq_s8_u8(h[g]);
    }
}

/* ---- integer block sums -------------------------------------------------- */

/* sdot: acc[m][g] += chunks [c0, c1) . activations, rows 4g..4g+3 in lanes. */
INLINE void dot_sdot(int32x4_t acc[2][4], const uint8_t *qb, const act_q8 *const xb[2], int MR,
                     int fmt, int c0, int c1) {
    for (int c = c0; c < c1; c++) {
        int8x16_t lo[4], hi[4];
        unpack(qb, c, fmt, lo, hi);
        for (int m = 0; m < MR; m++) {
            /* k 8c..8c+7 are 32-bit lanes 2(c%2), 2(c%2)+1 of the half c/2. */
            int8x16_t av = vld1q_s8(xb[m]->qs + 16 * (c / 2));
            for (int g = 0; g < 4; g++) {
                if (c % 2 == 0) {
                    acc[m][g] = vdotq_laneq_s32(acc[m][g], lo[g], av, 0);
                    acc[m][g] = vdotq_laneq_s32(acc[m][g], hi[g], av, 1);
                } else {
                    acc[m][g] = vdotq_laneq_s32(acc[m][g], lo[g], av, 2);
                    acc[m][g] = vdotq_laneq_s32(acc[m][g], hi[g], av, 3);
                }
            }
        }
    }
}

/* i8mm: acc[g][h] += chunks [c0, c1) . activations of rows x0, x1, as
 * [row 4g+2h . x0, row 4g+2h . x1, row 4g+2h+1 . x0, row 4g+2h+1 . x1]. */
I8MM INLINE void dot_mmla(int32x4_t acc[4][2], const uint8_t *qb, const act_q8 *x0, const act_q8 *x1,
                     int fmt, int c0, int c1) {
    for (int c = c0; c < c1; c++) {
        int8x16_t lo[4], hi[4];
        unpack(qb, c, fmt, lo, hi);
        int8x16_t av = vcombine_s8(vld1_s8(x0->qs + 8 * c), vld1_s8(x1->qs + 8 * c));
        for (int g = 0; g < 4; g++) {
            int32x4_t l = vreinterpretq_s32_s8(lo[g]), h = vreinterpretq_s32_s8(hi[g]);
            acc[g][0] = vmmlaq_s32(acc[g][0], vreinterpretq_s8_s32(vzip1q_s32(l, h)), av);
            acc[g][1] = vmmlaq_s32(acc[g][1], vreinterpretq_s8_s32(vzip2q_s32(l, h)), av);
        }
    }
}

/* ---- the float fold ------------------------------------------------------- */

/* Per-lane weight-side values of one block: d, the second fp16 field (m or
 * dmin), and the integer sub-block scales (K-quants: sc, mn; Q6_K: the two
 * 16-element scales sc, sc2). */
typedef struct { float32x4_t d, e; int32x4_t sc, sc2, mn; } wvals;
/* Per-lane activation-side values: x.d and x.sum. */
typedef struct { float32x4_t d; int32x4_t sum; } xvals;

/* One block into acc, lane by lane, as format_dot_q8 does it. isum is the
 * block's integer dot (with the offset applied); Q6_K passes its two halves
 * in isum and isum2. */
INLINE float32x4_t fold(float32x4_t acc, int fmt, int32x4_t isum, int32x4_t isum2,
                        const wvals *w, const xvals *x) {
    switch (fmt) {
    case FMT_Q6_K: {
        int32x4_t i = vmlaq_s32(vmulq_s32(w->sc, isum), w->sc2, isum2);
        return vfmaq_f32(acc, vmulq_f32(w->d, x->d), vcvtq_f32_s32(i));
    }
    case FMT_Q4_K: case FMT_Q5_K:
        /* fmaf(d * x.d, (float)(sc * isum), acc); fmaf(dmin * x.d, (float)(-(m * x.sum)), acc) */
        acc = vfmaq_f32(acc, vmulq_f32(w->d, x->d), vcvtq_f32_s32(vmulq_s32(w->sc, isum)));
        return vfmaq_f32(acc, vmulq_f32(w->e, x->d), vcvtq_f32_s32(vmulq_s32(w->mn, vnegq_s32(x->sum))));
    case FMT_Q4_1: case FMT_Q5_1:
        acc = vfmaq_f32(acc, vmulq_f32(w->d, x->d), vcvtq_f32_s32(isum));
        return vfmaq_f32(acc, vmulq_f32(w->e, x->d), vcvtq_f32_s32(x->sum));
    default:   /* Q4_0, Q5_0, Q8_0 */
        return vfmaq_f32(acc, vmulq_f32(w->d, x->d), vcvtq_f32_s32(isum));
    }
}

/* The offset a format's unsigned quants carry (q-8, q-16; Q8_0 is flipped
 * back to signed at unpacking, K-quants and Q4_1/Q5_1 have none). */
INLINE int32_t quant_offset(int fmt) { return fmt == FMT_Q4_0 ? 8 : fmt == FMT_Q5_0 ? 16 : 0; }

INLINE float32x4_t load_f16x4(const uint8_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}

INLINE void widen_u8(const uint8_t *p, int32x4_t out[4]) {
    uint8x16_t v = vld1q_u8(p);
    uint16x8_t a = vmovl_u8(vget_low_u8(v)), b = vmovl_u8(vget_high_u8(v));
    out[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(a)));
    out[1] = vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(a)));
    out[2] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(b)));
    out[3] = vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(b)));
}

INLINE void widen_s8(const uint8_t *p, int32x4_t out[4]) {
    int8x16_t v = vreinterpretq_s8_u8(vld1q_u8(p));
    int16x8_t a = vmovl_s8(vget_low_s8(v)), b = vmovl_s8(vget_high_s8(v));
    out[0] = vmovl_s16(vget_low_s16(a));
    out[1] = vmovl_s16(vget_high_s16(a));
    out[2] = vmovl_s16(vget_low_s16(b));
    out[3] = vmovl_s16(vget_high_s16(b));
}

/* The weight-side values of block bi of a unit whose scales start at s,
 * rows 4g..4g+3 in w[g]; d and e come from the caller (per unit). */
INLINE void load_wvals(const uint8_t *s, int bi, int fmt, const float32x4_t d[4], const float32x4_t e[4],
                       wvals w[4]) {
    int32x4_t sc[4], sc2[4], mn[4];
    for (int g = 0; g < 4; g++) sc[g] = sc2[g] = mn[g] = vdupq_n_s32(0);
    if (fmt == FMT_Q4_K || fmt == FMT_Q5_K) {
        widen_u8(s + 64 + 16 * bi, sc);
        widen_u8(s + 192 + 16 * bi, mn);
    } else if (fmt == FMT_Q6_K) {
        widen_s8(s + 32 + 32 * bi, sc);
        widen_s8(s + 48 + 32 * bi, sc2);
    }
    for (int g = 0; g < 4; g++) w[g] = (wvals){ d[g], e[g], sc[g], sc2[g], mn[g] };
}

/* ---- tiles ---------------------------------------------------------------- */

/* Stores 16 outputs of one activation row, clipped to `left`. */
INLINE void store16(float *dst, const float32x4_t v[4], int64_t left) {
    if (left >= 16) {
        for (int g = 0; g < 4; g++) vst1q_f32(dst + 4 * g, v[g]);
        return;
    }
    float tmp[16];
    for (int g = 0; g < 4; g++) vst1q_f32(tmp + 4 * g, v[g]);
    memcpy(dst, tmp, sizeof(float) * (size_t)left);
}

/* Per-unit d and e (m / dmin) of the 16 rows of a panel. */
INLINE void load_de(const uint8_t *s, int fmt, float32x4_t d[4], float32x4_t e[4]) {
    bool has_e = fmt == FMT_Q4_1 || fmt == FMT_Q5_1 || fmt == FMT_Q4_K || fmt == FMT_Q5_K;
    for (int g = 0; g < 4; g++) {
        d[g] = load_f16x4(s + 8 * g);
        e[g] = has_e ? load_f16x4(s + 32 + 8 * g) : d[g];
    }
}

/* sdot tile: MR (1 or 2) activation rows from m0 x the 16 rows of panel pan. */
INLINE void tile_sdot(const kpack *pk, int64_t pan, const kern_act *a, int m0, int MR, int fmt,
                      float *y, int64_t N) {
    const int64_t nb = a->n_in / QK;
    const int bpu = kp_is_kquant(fmt) ? 8 : 1, qb = kp_qbytes32(fmt);
    const int32_t off = quant_offset(fmt);
    float32x4_t acc[2][4];
    for (int m = 0; m < MR; m++)
        for (int g = 0; g < 4; g++) acc[m][g] = vdupq_n_f32(0.0f);

    for (int64_t u = 0; u < pk->units; u++) {
        const uint8_t *s = kp_scales(pk, pan, u), *qu = kp_quants(pk, pan, u);
        float32x4_t d[4], e[4];
        load_de(s, fmt, d, e);
        for (int bi = 0; bi < bpu; bi++) {
            const int64_t b = u * bpu + bi;
            const uint8_t *q = qu + qb * bi;
            const act_q8 *xb[2];
            xvals xv[2];
            for (int m = 0; m < MR; m++) {
                xb[m] = a->q + (size_t)(m0 + m) * nb + b;
                xv[m] = (xvals){ vdupq_n_f32(xb[m]->d), vdupq_n_s32(xb[m]->sum) };
            }
            wvals wv[4];
            load_wvals(s, bi, fmt, d, e, wv);
            int32x4_t ia[2][4], ib[2][4];
            if (fmt == FMT_Q6_K) {
                /* isum = sc[2k] * dot(first 16) + sc[2k+1] * dot(last 16), quants q-32. */
                for (int m = 0; m < MR; m++) {
                    const int32_t slo = a->slo[(size_t)(m0 + m) * nb + b];
                    for (int g = 0; g < 4; g++) {
                        ia[m][g] = vdupq_n_s32(-32 * slo);
                        ib[m][g] = vdupq_n_s32(-32 * (xb[m]->sum - slo));
                    }
                }
                dot_sdot(ia, q, xb, MR, fmt, 0, 2);
                dot_sdot(ib, q, xb, MR, fmt, 2, 4);
            } else {
                for (int m = 0; m < MR; m++)
                    for (int g = 0; g < 4; g++) ia[m][g] = ib[m][g] = vdupq_n_s32(-off * xb[m]->sum);
                dot_sdot(ia, q, xb, MR, fmt, 0, 4);
            }
            for (int m = 0; m < MR; m++)
                for (int g = 0; g < 4; g++) acc[m][g] = fold(acc[m][g], fmt, ia[m][g], ib[m][g], &wv[g], &xv[m]);
        }
    }
    for (int m = 0; m < MR; m++) store16(y + (size_t)(m0 + m) * N + pan * KP_ROWS, acc[m], N - pan * KP_ROWS);
}

/* Lanes [r, r, r', r'] of a per-row vector, rows 2h, 2h+1 of its four. */
INLINE float32x4_t zip_f(float32x4_t v, int h) { return h ? vzip2q_f32(v, v) : vzip1q_f32(v, v); }
INLINE int32x4_t zip_i(int32x4_t v, int h) { return h ? vzip2q_s32(v, v) : vzip1q_s32(v, v); }

/* i8mm tile: activation rows m0, m0+1 x the 16 rows of panel pan. Lanes of
 * acc[g][h] are (row 4g+2h, x0), (4g+2h, x1), (4g+2h+1, x0), (4g+2h+1, x1). */
I8MM INLINE void tile_mmla(const kpack *pk, int64_t pan, const kern_act *a, int m0, int fmt,
                      float *y, int64_t N) {
    const int64_t nb = a->n_in / QK;
    const int bpu = kp_is_kquant(fmt) ? 8 : 1, qb = kp_qbytes32(fmt);
    const int32_t off = quant_offset(fmt);
    float32x4_t acc[4][2];
    for (int g = 0; g < 4; g++) acc[g][0] = acc[g][1] = vdupq_n_f32(0.0f);
    const act_q8 *xr0 = a->q + (size_t)m0 * nb, *xr1 = xr0 + nb;
    const int32_t *slo0 = a->slo + (size_t)m0 * nb, *slo1 = slo0 + nb;

    for (int64_t u = 0; u < pk->units; u++) {
        const uint8_t *s = kp_scales(pk, pan, u), *qu = kp_quants(pk, pan, u);
        float32x4_t d[4], e[4];
        load_de(s, fmt, d, e);
        for (int bi = 0; bi < bpu; bi++) {
            const int64_t b = u * bpu + bi;
            const uint8_t *q = qu + qb * bi;
            const act_q8 *x0 = xr0 + b, *x1 = xr1 + b;
            const float xd[4] = { x0->d, x1->d, x0->d, x1->d };
            const int32_t xs[4] = { x0->sum, x1->sum, x0->sum, x1->sum };
            const xvals xv = { vld1q_f32(xd), vld1q_s32(xs) };
            wvals wv[4];
            load_wvals(s, bi, fmt, d, e, wv);
            int32x4_t ia[4][2], ib[4][2];
            if (fmt == FMT_Q6_K) {
                const int32_t lo[4] = { -32 * slo0[b], -32 * slo1[b], -32 * slo0[b], -32 * slo1[b] };
                const int32_t hi[4] = { -32 * (x0->sum - slo0[b]), -32 * (x1->sum - slo1[b]),
                                        -32 * (x0->sum - slo0[b]), -32 * (x1->sum - slo1[b]) };
                for (int g = 0; g < 4; g++) {
                    ia[g][0] = ia[g][1] = vld1q_s32(lo);
                    ib[g][0] = ib[g][1] = vld1q_s32(hi);
                }
                dot_mmla(ia, q, x0, x1, fmt, 0, 2);
                dot_mmla(ib, q, x0, x1, fmt, 2, 4);
            } else {
                int32x4_t o = vmulq_n_s32(xv.sum, -off);
                for (int g = 0; g < 4; g++) ia[g][0] = ia[g][1] = ib[g][0] = ib[g][1] = o;
                dot_mmla(ia, q, x0, x1, fmt, 0, 4);
            }
            for (int g = 0; g < 4; g++)
                for (int h = 0; h < 2; h++) {
                    const wvals wz = { zip_f(wv[g].d, h), zip_f(wv[g].e, h), zip_i(wv[g].sc, h),
                                       zip_i(wv[g].sc2, h), zip_i(wv[g].mn, h) };
                    acc[g][h] = fold(acc[g][h], fmt, ia[g][h], ib[g][h], &wz, &xv);
                }
        }
    }
    float32x4_t r0[4], r1[4];
    for (int g = 0; g < 4; g++) {
        r0[g] = vuzp1q_f32(acc[g][0], acc[g][1]);
        r1[g] = vuzp2q_f32(acc[g][0], acc[g][1]);
    }
    store16(y + (size_t)m0 * N + pan * KP_ROWS, r0, N - pan * KP_ROWS);
    store16(y + (size_t)(m0 + 1) * N + pan * KP_ROWS, r1, N - pan * KP_ROWS);
}

/* Every pair of activation rows of panel pan on i8mm (the odd row left to
 * the caller); out of line, since only an i8mm function may hold it. */
I8MM static void pairs_mmla(const kpack *pk, int64_t pan, const kern_act *a, int fmt, float *y, int64_t N) {
    for (int m = 0; m + 2 <= a->M; m += 2) {
        switch (fmt) {
        case FMT_Q4_0: tile_mmla(pk, pan, a, m, FMT_Q4_0, y, N); break;
        case FMT_Q4_1: tile_mmla(pk, pan, a, m, FMT_Q4_1, y, N); break;
        case FMT_Q5_0: tile_mmla(pk, pan, a, m, FMT_Q5_0, y, N); break;
        case FMT_Q5_1: tile_mmla(pk, pan, a, m, FMT_Q5_1, y, N); break;
        case FMT_Q8_0: tile_mmla(pk, pan, a, m, FMT_Q8_0, y, N); break;
        case FMT_Q4_K: tile_mmla(pk, pan, a, m, FMT_Q4_K, y, N); break;
        case FMT_Q5_K: tile_mmla(pk, pan, a, m, FMT_Q5_K, y, N); break;
        case FMT_Q6_K: tile_mmla(pk, pan, a, m, FMT_Q6_K, y, N); break;
        default: break;
        }
    }
}

/* Float formats: acc = fmaf(w[k], x[k], acc), k in order; MR (1..4) rows. */
INLINE void tile_float(const kpack *pk, int64_t pan, const kern_act *a, int m0, int MR, int fmt,
                       float *y, int64_t N) {
    const int64_t K = a->n_in;
    const float *xr[4];
    float32x4_t acc[4][4];
    for (int m = 0; m < MR; m++) {
        xr[m] = a->x + (size_t)(m0 + m) * K;
        for (int g = 0; g < 4; g++) acc[m][g] = vdupq_n_f32(0.0f);
    }
    const uint8_t *p = kp_quants(pk, pan, 0);   /* plain layout: columns q_bytes apart */
    for (int64_t k = 0; k < K; k++) {
        float32x4_t w[4];
        for (int g = 0; g < 4; g++) {
            if (fmt == FMT_F32) {
                w[g] = vld1q_f32((const float *)(const void *)(p + 64 * k + 16 * g));
            } else {
                uint16x4_t h = vld1_u16((const uint16_t *)(const void *)(p + 32 * k + 8 * g));
                w[g] = fmt == FMT_F16 ? vcvt_f32_f16(vreinterpret_f16_u16(h))
                                      : vreinterpretq_f32_u32(vshll_n_u16(h, 16));  /* BF16: high half */
            }
        }
        for (int m = 0; m < MR; m++)
            for (int g = 0; g < 4; g++) acc[m][g] = vfmaq_n_f32(acc[m][g], w[g], xr[m][k]);
    }
    for (int m = 0; m < MR; m++) store16(y + (size_t)(m0 + m) * N + pan * KP_ROWS, acc[m], N - pan * KP_ROWS);
}

/* ---- rows ------------------------------------------------------------------ */

/* Output rows [n0, n1), one panel at a time, over every activation row. */
INLINE void rows_fmt(const hweight *w, const kern_act *a, float *y, int64_t n0, int64_t n1, int fmt) {
    const kpack *pk = w->packed;
    const int64_t N = w->n_out;
    const int M = a->M;
    const bool mmla = !is_float(fmt) && M >= 2 && kernels_cpu_has_i8mm();
    for (int64_t pan = n0 / KP_ROWS; pan * KP_ROWS < n1; pan++) {
        int m = 0;
        if (is_float(fmt)) {
            for (; m + 4 <= M; m += 4) tile_float(pk, pan, a, m, 4, fmt, y, N);
            switch (M - m) {
            case 3: tile_float(pk, pan, a, m, 3, fmt, y, N); break;
            case 2: tile_float(pk, pan, a, m, 2, fmt, y, N); break;
            case 1: tile_float(pk, pan, a, m, 1, fmt, y, N); break;
            default: break;
            }
        } else if (mmla) {
            pairs_mmla(pk, pan, a, fmt, y, N);
            if (M % 2) tile_sdot(pk, pan, a, M - 1, 1, fmt, y, N);
        } else {
            for (; m + 2 <= M; m += 2) tile_sdot(pk, pan, a, m, 2, fmt, y, N);
            if (m < M) tile_sdot(pk, pan, a, m, 1, fmt, y, N);
        }
    }
}

KP_DEFINE_ROWS(neon_rows, rows_fmt)

/* ---- activation quantizer -------------------------------------------------- */

/* act_quantize_row, bit for bit: amax of |x| ignoring NaN (a NaN lane counts
 * as 0, found by compare, so even a signalling NaN cannot leak in), d =
 * amax / 127, id = 1 / d (0 when d is 0), q = x * id clamped to +-127 and
 * rounded to nearest even; NaN gives -127 as nearest_clamped does (maxnm
 * returns the number when one operand is a quiet NaN, and x * id is quiet). */
void kern_neon_quantize(const float *x, act_q8 *q, int32_t *slo, int64_t n) {
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f), zero = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n / QK; b++) {
        float32x4_t v[8];
        float32x4_t mx = zero;
        for (int i = 0; i < 8; i++) {
            v[i] = vld1q_f32(x + QK * b + 4 * i);
            float32x4_t av = vabsq_f32(v[i]);
            mx = vmaxq_f32(mx, vbslq_f32(vceqq_f32(av, av), av, zero));
        }
        float amax = vmaxvq_f32(mx);
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        int32x4_t qi[8];
        for (int i = 0; i < 8; i++)
            qi[i] = vcvtnq_s32_f32(vminq_f32(vmaxnmq_f32(vmulq_n_f32(v[i], id), lo), hi));
        /* int32 -> int8 (values are within +-127, so narrowing is exact). */
        for (int h = 0; h < 2; h++) {
            int16x8_t a = vcombine_s16(vmovn_s32(qi[4 * h]), vmovn_s32(qi[4 * h + 1]));
            int16x8_t c = vcombine_s16(vmovn_s32(qi[4 * h + 2]), vmovn_s32(qi[4 * h + 3]));
            vst1q_s8(q[b].qs + 16 * h, vcombine_s8(vmovn_s16(a), vmovn_s16(c)));
        }
        int32_t s0 = vaddvq_s32(vaddq_s32(vaddq_s32(qi[0], qi[1]), vaddq_s32(qi[2], qi[3])));
        int32_t s1 = vaddvq_s32(vaddq_s32(vaddq_s32(qi[4], qi[5]), vaddq_s32(qi[6], qi[7])));
        q[b].d = d;
        q[b].sum = s0 + s1;
        slo[b] = s0;
    }
}

const kern_path kern_path_neon = {
    .name = "neon",
    .packs = kp_packs_all,
    .rows = neon_rows,
    .quantize = kern_neon_quantize,
    .q6_crumbs = false,   /* Q6_K's high bits as two bit planes (add_plane) */
};
