/* Weight formats and scalar ops: the oracle's own checks.
 *  - fp16/bf16 conversions, exhaustively (every half value, every rounding
 *    boundary between neighbouring halves);
 *  - hand-decoded bytes for one block of each quantized format;
 *  - quantize -> dequantize error bounds per format on awkward data, with a
 *    planted wrong decoder that the same check must reject;
 *  - dot products against double-precision sums over the dequantized values;
 *  - rmsnorm, rope, softmax, swiglu, add against naive double code;
 *  - GeGLU (tanh GELU) against double code, and every path's GeGLU against
 *    op_geglu bit for bit; the logit soft-cap and scale. */
#include "tests/test.h"
#include "tests/rng.h"
#include "kernels/formats.h"
#include "kernels/ops.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdint.h>

static const int quant_types[] = { FMT_Q8_0, FMT_Q4_0, FMT_Q4_1, FMT_Q5_0, FMT_Q5_1,
                                   FMT_Q4_K, FMT_Q5_K, FMT_Q6_K };
static const int all_types[] = { FMT_F32, FMT_F16, FMT_BF16, FMT_Q8_0, FMT_Q4_0, FMT_Q4_1,
                                 FMT_Q5_0, FMT_Q5_1, FMT_Q4_K, FMT_Q5_K, FMT_Q6_K };
#define N_QUANT (int)(sizeof quant_types / sizeof quant_types[0])
#define N_ALL (int)(sizeof all_types / sizeof all_types[0])

/* ---- type table ---------------------------------------------------------- */

static void test_type_table(void) {
    for (int i = 0; i < N_ALL; i++) {
        const format_info *f = format_get(all_types[i]);
        CHECKF(f != NULL, "type %d", all_types[i]);
        if (!f) continue;
        CHECK(strcmp(f->name, format_name(all_types[i])) == 0);
        CHECK(format_row_bytes(all_types[i], 512) == (size_t)(512 / f->block_elems) * f->block_bytes);
    }
    CHECK(format_row_bytes(FMT_Q4_K, 512) == 288);
    CHECK(format_row_bytes(FMT_Q6_K, 256) == 210);
    CHECK(format_row_bytes(FMT_Q8_0, 64) == 68);
    CHECK(format_row_bytes(FMT_F16, 7) == 14);
    CHECK(format_row_bytes(FMT_Q4_K, 288) == 0);   /* not a multiple of 256 */
    CHECK(format_row_bytes(FMT_Q4_0, 33) == 0);
    CHECK(format_row_bytes(FMT_Q2_K, 256) == 0);   /* unsupported */
    CHECK(format_get(FMT_Q2_K) == NULL);
    CHECK(format_get(FMT_Q8_1) == NULL);
    CHECK(format_get(-1) == NULL);
    CHECK(format_get(1000) == NULL);
    CHECK(strcmp(format_name(FMT_Q3_K), "Q3_K") == 0);
    CHECK(strcmp(format_name(16), "IQ2_XXS") == 0);
    CHECK(strcmp(format_name(23), "IQ4_XS") == 0);
    CHECK(strcmp(format_name(FMT_BF16), "BF16") == 0);
    CHECK(strcmp(format_name(77), "type 77") == 0);
    CHECK(format_get(FMT_F16)->uses_act_q8 == false);
    CHECK(format_get(FMT_Q6_K)->uses_act_q8 == true);
}

/* ---- fp16 / bf16 --------------------------------------------------------- */

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* IEEE binary16 decoded from its fields in double: an independent oracle. */
static double half_value(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v = exp == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, exp - 25);
    return sign ? -v : v;
}

static void test_fp16(void) {
    int bad_decode = 0, bad_roundtrip = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_f32((fp16_t)h);
        int exp = (h >> 10) & 31;
        if (exp == 31) {
            if ((h & 1023) == 0) {
                if (!isinf(f) || (f < 0) != (h >> 15)) bad_decode++;
                if (f32_to_fp16(f) != h) bad_roundtrip++;
            } else {
                /* NaN stays NaN, keeps its sign, comes back quiet. */
                fp16_t back = f32_to_fp16(f);
                if (!isnan(f)) bad_decode++;
                if ((back & 0x7c00) != 0x7c00 || !(back & 0x200) || (back & 0x8000) != (h & 0x8000))
                    bad_nan++;
                if ((h & 0x200) && back != h) bad_nan++;   /* quiet NaN payload survives */
            }
            continue;
        }
        if ((double)f != half_value((uint16_t)h) || !!signbit(f) != (int)(h >> 15)) bad_decode++;
        if (f32_to_fp16(f) != h) bad_roundtrip++;
    }
    CHECKF(bad_decode == 0, "%d halves decoded wrong", bad_decode);
    CHECKF(bad_roundtrip == 0, "%d halves did not round-trip", bad_roundtrip);
    CHECKF(bad_nan == 0, "%d NaNs mishandled", bad_nan);

    /* Rounding: between each pair of neighbouring finite halves, the exact
     * midpoint goes to the even one and anything off it to the nearer. */
    int bad_round = 0;
    for (uint32_t h = 0; h < 0x7bff; h++) {
        for (int neg = 0; neg < 2; neg++) {
            uint16_t a = (uint16_t)(h | (uint32_t)neg << 15), b = (uint16_t)(a + 1);
            float mid = (float)((half_value(a) + half_value(b)) / 2);   /* exact in float */
            uint16_t even = (h & 1) ? b : a;
            if (f32_to_fp16(mid) != even) bad_round++;
            if (f32_to_fp16(nextafterf(mid, 0.0f)) != a) bad_round++;
            if (f32_to_fp16(nextafterf(mid, neg ? -INFINITY : INFINITY)) != b) bad_round++;
        }
    }
    CHECKF(bad_round == 0, "%d fp16 rounding boundaries wrong", bad_round);
    /* The boundaries at the ends of the range. */
    CHECK(f32_to_fp16(65520.0f) == 0x7c00);                         /* tie past max -> inf */
    CHECK(f32_to_fp16(nextafterf(65520.0f, 0.0f)) == 0x7bff);
    CHECK(f32_to_fp16(-1e30f) == 0xfc00);
    CHECK(f32_to_fp16(ldexpf(1.0f, -25)) == 0x0000);                /* tie -> even (0) */
    CHECK(f32_to_fp16(nextafterf(ldexpf(1.0f, -25), 1.0f)) == 0x0001);
    CHECK(f32_to_fp16(-ldexpf(1.0f, -26)) == 0x8000);               /* signed zero */
    CHECK(f32_to_fp16(ldexpf(1.5f, -24)) == 0x0002);                /* 1.5 ulp: tie -> 2 */
    CHECK(f32_to_fp16(ldexpf(1023.5f, -24)) == 0x0400);             /* carries into the normals */
    CHECK(f32_to_fp16(1.0f) == 0x3c00 && f32_to_fp16(-2.0f) == 0xc000);
    CHECK(f32_to_fp16(1.0f / 3.0f) == 0x3555);

    /* bf16: every value round-trips; neighbours' midpoints round to even. */
    int bad_bf = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = bf16_to_f32((bf16_t)h);
        if (f32_bits(f) != h << 16) bad_bf++;
        if (isnan(f)) {
            bf16_t back = f32_to_bf16(f);
            if (!isnan(bf16_to_f32(back)) || (back & 0x8000) != (h & 0x8000)) bad_bf++;
        } else if (f32_to_bf16(f) != h) bad_bf++;
        if ((h & 0x7fff) < 0x7f7f) {     /* h and h+1 both finite */
            uint32_t mid = h << 16 | 0x8000;
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            if (f32_to_bf16(bits_f32(mid)) != even) bad_bf++;
            if (f32_to_bf16(bits_f32(mid - 1)) != h) bad_bf++;
            if (f32_to_bf16(bits_f32(mid + 1)) != h + 1) bad_bf++;
        }
    }
    CHECKF(bad_bf == 0, "%d bf16 conversions wrong", bad_bf);
    CHECK(f32_to_bf16(bits_f32(0x7f7fffff)) == 0x7f80);   /* FLT_MAX rounds to inf */
    CHECK(isnan(bf16_to_f32(f32_to_bf16(bits_f32(0x7f800001)))));   /* low-payload NaN stays NaN */
}

/* ---- hand-decoded blocks ------------------------------------------------- */

static void dequant(int type, const void *blk, float *y) {
    format_dequantize_row(type, blk, y, format_get(type)->block_elems);
}

static void test_known_blocks(void) {
    float y[QK_K];

    block_q8_0 q8 = { .d = 0x3800 };              /* 0.5 */
    q8.qs[0] = 3; q8.qs[5] = -128; q8.qs[31] = 127;
    dequant(FMT_Q8_0, &q8, y);
    CHECK(y[0] == 1.5f && y[5] == -64.0f && y[31] == 63.5f && y[1] == 0.0f);

    block_q4_0 q40 = { .d = 0x4000 };             /* 2.0 */
    q40.qs[0] = 0x1f; q40.qs[3] = 0x80;
    dequant(FMT_Q4_0, &q40, y);
    CHECK(y[0] == 14.0f);    /* low nibble 15: (15-8)*2 */
    CHECK(y[16] == -14.0f);  /* high nibble 1 of qs[0]: element 16 */
    CHECK(y[3] == -16.0f && y[19] == 0.0f);
    CHECK(y[1] == -16.0f);   /* nibble 0 */

    block_q4_1 q41 = { .d = 0x3c00, .m = 0xc000 };   /* 1.0, -2.0 */
    q41.qs[2] = 0xa5;
    dequant(FMT_Q4_1, &q41, y);
    CHECK(y[2] == 3.0f && y[18] == 8.0f && y[0] == -2.0f);

    /* qh = 0x80020002 little-endian: bits 1, 17, 31. */
    block_q5_0 q50 = { .d = 0x3c00, .qh = { 0x02, 0x00, 0x02, 0x80 } };
    q50.qs[1] = 0x3c; q50.qs[15] = 0x70;
    dequant(FMT_Q5_0, &q50, y);
    CHECK(y[1] == 12.0f);    /* 12 | 16 -> 28 - 16 */
    CHECK(y[17] == 3.0f);    /* 3 | 16 -> 19 - 16 */
    CHECK(y[15] == -16.0f);  /* 0, bit 15 clear */
    CHECK(y[31] == 7.0f);    /* 7 | 16 -> 23 - 16 */
    CHECK(y[0] == -16.0f);

    block_q5_1 q51 = { .d = 0x3800, .m = 0x3c00, .qh = { 0x01, 0x00, 0x01, 0x00 } };
    q51.qs[0] = 0xf1;
    dequant(FMT_Q5_1, &q51, y);
    CHECK(y[0] == 9.5f);     /* (1|16) * 0.5 + 1 */
    CHECK(y[16] == 16.5f);   /* (15|16) * 0.5 + 1 */
    CHECK(y[1] == 1.0f);

    /* Q4_K: sub-block 1 has sc 3, m 4 (bytes 1 and 5, low 6 bits);
     * sub-block 5 has sc 0x11, m 0x22: low nibbles from byte 9, high bits
     * from the top 2 bits of bytes 1 (sc) and 5 (m). */
    block_q4_k q4k = { .d = 0x3c00, .dmin = 0x3800 };   /* 1.0, 0.5 */
    q4k.scales[1] = 0x43; q4k.scales[5] = 0x84; q4k.scales[9] = 0x21;
    q4k.qs[2] = 0x96;    /* sub-block 0 (low) q 6, sub-block 1 (high) q 9, element 2 */
    q4k.qs[71] = 0xb0;   /* pair 2: sub-block 5 element 7 gets 11 */
    dequant(FMT_Q4_K, &q4k, y);
    CHECK(y[32 + 2] == 25.0f);         /* 1*3*9 - 0.5*4 */
    CHECK(y[32 + 0] == -2.0f);         /* q 0 */
    CHECK(y[160 + 7] == 170.0f);       /* 1*17*11 - 0.5*34 */
    CHECK(y[128 + 7] == 0.0f);         /* sub-block 4: sc 0, m 0 */
    CHECK(y[2] == 0.0f);               /* sub-block 0: sc 0, m 0 */

    block_q5_k q5k = { .d = 0x3c00, .dmin = 0x3800 };
    memcpy(q5k.scales, q4k.scales, 12);
    memcpy(q5k.qs, q4k.qs, sizeof q5k.qs);
    q5k.qh[2] = 0x02;    /* bit 1: sub-block 1, element 2 */
    q5k.qh[7] = 0x20;    /* bit 5: sub-block 5, element 7 */
    dequant(FMT_Q5_K, &q5k, y);
    CHECK(y[32 + 2] == 73.0f);         /* 3*25 - 2 */
    CHECK(y[160 + 7] == 442.0f);       /* 17*27 - 17 */
    CHECK(y[32 + 3] == -2.0f);

    block_q6_k q6k = { .d = 0x3400 };   /* 0.25 */
    q6k.ql[66] = 0x05; q6k.qh[34] = 0x02; q6k.scales[8] = -4;   /* element 130 */
    q6k.ql[72] = 0xc0; q6k.qh[40] = 0x30; q6k.scales[12] = 3;   /* element 200 */
    q6k.ql[36] = 0x10; q6k.qh[4] = 0x40; q6k.scales[6] = 2;     /* element 100 */
    dequant(FMT_Q6_K, &q6k, y);
    CHECK(y[130] == -5.0f);            /* q 5|2<<4 = 37 -> 5; 0.25*-4*5 */
    CHECK(y[200] == 21.0f);            /* q 12|3<<4 = 60 -> 28; 0.25*3*28 */
    CHECK(y[100] == -7.5f);            /* q 1|1<<4 = 17 -> -15; 0.25*2*-15 */
    CHECK(y[131] == 32.0f);            /* q 0 -> -32; 0.25*-4*-32 */
    CHECK(y[0] == 0.0f);               /* scale 0 */
}

/* ---- the grid each block's bytes describe -------------------------------- */
/* For element i of a row: decoded value = step * q - offset with q in
 * [qmin, qmax]. Read straight from the bytes, independently of formats.c. */
typedef struct { double step, offset; int qmin, qmax; } grid;

static void k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    /* 6-bit fields: j < 4 in bytes j, j+4; j >= 4 split over bytes j+4 (low
     * nibbles) and the top two bits of bytes j-4 (scale) and j (min). */
    if (j < 4) { *sc = s[j] & 63; *m = s[j + 4] & 63; }
    else {
        *sc = (s[j + 4] & 15) + 16 * (s[j - 4] >> 6);
        *m = (s[j + 4] >> 4) + 16 * (s[j] >> 6);
    }
}

static grid grid_at(int type, const void *row, int64_t i) {
    const uint8_t *p = row;
    grid g = { 0, 0, 0, 0 };
    switch (type) {
    case FMT_Q8_0: { const block_q8_0 *b = (const block_q8_0 *)p + i / QK;
        g = (grid){ fp16_to_f32(b->d), 0, -127, 127 }; break; }
    case FMT_Q4_0: { const block_q4_0 *b = (const block_q4_0 *)p + i / QK;
        g = (grid){ fp16_to_f32(b->d), 0, -8, 7 }; break; }
    case FMT_Q5_0: { const block_q5_0 *b = (const block_q5_0 *)p + i / QK;
        g = (grid){ fp16_to_f32(b->d), 0, -16, 15 }; break; }
    case FMT_Q4_1: { const block_q4_1 *b = (const block_q4_1 *)p + i / QK;
        g = (grid){ fp16_to_f32(b->d), -fp16_to_f32(b->m), 0, 15 }; break; }
    case FMT_Q5_1: { const block_q5_1 *b = (const block_q5_1 *)p + i / QK;
        g = (grid){ fp16_to_f32(b->d), -fp16_to_f32(b->m), 0, 31 }; break; }
    case FMT_Q4_K: case FMT_Q5_K: {
        const uint8_t *scales; float d, dmin;
        if (type == FMT_Q4_K) { const block_q4_k *b = (const block_q4_k *)p + i / QK_K;
            scales = b->scales; d = fp16_to_f32(b->d); dmin = fp16_to_f32(b->dmin); }
        else { const block_q5_k *b = (const block_q5_k *)p + i / QK_K;
            scales = b->scales; d = fp16_to_f32(b->d); dmin = fp16_to_f32(b->dmin); }
        int sc, m;
        k_scale_min(scales, (int)(i % QK_K) / 32, &sc, &m);
        g = (grid){ (double)d * sc, (double)dmin * m, 0, type == FMT_Q4_K ? 15 : 31 };
        break;
    }
    case FMT_Q6_K: { const block_q6_k *b = (const block_q6_k *)p + i / QK_K;
        g = (grid){ (double)fp16_to_f32(b->d) * b->scales[(i % QK_K) / 16], 0, -32, 31 }; break; }
    }
    return g;
}

/* Quantization error check for a row: every element must be decoded to a
 * point of its block's grid, and to the nearest one — within half a step
 * (+ fp16 slack for the offset) — unless x lies beyond the grid's end and
 * was clamped there (then within `clamp_steps` steps: 1 for Q4_0/Q5_0,
 * whose grids are one step short on the positive side, and the fp16
 * rounding of d for the others). Returns the number of violations;
 * *rel_rms gets sqrt(sum err^2 / sum x^2). */
static int check_grid_error(int type, const float *x, const void *q, const float *y,
                            int64_t n, double *rel_rms) {
    int bad = 0;
    double se = 0, sx = 0;
    for (int64_t i = 0; i < n; i++) {
        grid g = grid_at(type, q, i);
        double err = fabs((double)y[i] - x[i]);
        se += err * err; sx += (double)x[i] * x[i];
        double step = fabs(g.step);
        /* float rounding in the decode/encode: a few ulps of the values */
        double slack = 1e-6 * (fabs(x[i]) + fabs(g.offset) + step * g.qmax) + 1e-30;
        if (type == FMT_Q4_1 || type == FMT_Q5_1) slack += fabs(g.offset) * ldexp(1, -11);
        /* a scale in fp16's subnormal range is rounded by up to 2^-25
         * (absolute), which moves the grid's far end by that per step */
        if (type != FMT_Q4_K && type != FMT_Q5_K && type != FMT_Q6_K)
            slack += (g.qmax - g.qmin + 2) * ldexp(1, -25);
        if (step == 0) {             /* a degenerate grid holds one value */
            if (fabs(y[i] + g.offset) > slack) bad++;
            continue;
        }
        double qd = (y[i] + g.offset) / g.step;   /* must be an integer in range */
        if (fabs(qd - nearbyint(qd)) > 1e-3 || nearbyint(qd) < g.qmin || nearbyint(qd) > g.qmax) {
            bad++;
            continue;
        }
        double xq = (x[i] + g.offset) / g.step;   /* x in grid units */
        bool beyond = xq > g.qmax + 0.5 || xq < g.qmin - 0.5;
        if (!beyond) {
            if (err > 0.5 * step * (1 + 1e-5) + slack) bad++;
        } else {
            bool at_end = nearbyint(qd) == (xq > 0 ? g.qmax : g.qmin);
            double limit = (type == FMT_Q4_0 || type == FMT_Q5_0) ? step * 1.01
                         : (type == FMT_Q4_K || type == FMT_Q5_K || type == FMT_Q6_K) ? INFINITY
                         : step * 0.51;
            if (!at_end || err > limit + slack) bad++;
        }
    }
    *rel_rms = sx > 0 ? sqrt(se / sx) : sqrt(se);
    return bad;
}

/* Relative RMS error bounds on Gaussian-like data (K-quants: the grids are
 * searched, so only the quality of the whole row has a bound). */
static double rms_bound(int type) {
    switch (type) {
    case FMT_Q8_0: return 0.008;
    case FMT_Q4_0: case FMT_Q4_1: return 0.10;
    case FMT_Q5_0: case FMT_Q5_1: return 0.055;
    case FMT_Q4_K: return 0.085;
    case FMT_Q5_K: return 0.045;
    case FMT_Q6_K: return 0.022;
    }
    return 0;
}

/* Q4_0 decoded with the nibbles swapped (element j < 16 from the high
 * nibble): a deliberately wrong decoder. */
static void wrong_q4_0(const block_q4_0 *b, float *y, int64_t n) {
    for (int64_t k = 0; k < n / QK; k++) {
        float d = fp16_to_f32(b[k].d);
        for (int j = 0; j < 16; j++) {
            y[k * QK + j] = (float)((b[k].qs[j] >> 4) - 8) * d;
            y[k * QK + j + 16] = (float)((b[k].qs[j] & 15) - 8) * d;
        }
    }
}

/* Q4_K decoded with the upper four sub-blocks' scale and min swapped. */
static void wrong_q4_k(const block_q4_k *b, float *y, int64_t n) {
    format_dequantize_row(FMT_Q4_K, b, y, n);
    for (int64_t k = 0; k < n / QK_K; k++) {
        for (int j = 4; j < 8; j++) {
            int sc, m;
            k_scale_min(b[k].scales, j, &sc, &m);
            for (int l = 0; l < 32; l++) {
                uint8_t byte = b[k].qs[32 * (j / 2) + l];
                int q = (j & 1) ? byte >> 4 : byte & 15;
                y[k * QK_K + 32 * j + l] = fp16_to_f32(b[k].d) * m * q - fp16_to_f32(b[k].dmin) * sc;
            }
        }
    }
}

enum { ROW = 1024 };

/* Rows of awkward data: Gaussian at odd magnitudes, all zeros, constants,
 * a block with one outlier, mixed signs/magnitudes per block, tiny values
 * near the fp16 subnormals. */
static int make_case(int c, float *x) {
    switch (c) {
    case 0: for (int i = 0; i < ROW; i++) x[i] = rng_normal(); return 1;
    case 1: for (int i = 0; i < ROW; i++) x[i] = 0.00123f * rng_normal(); return 1;
    case 2: for (int i = 0; i < ROW; i++) x[i] = 317.0f * rng_normal(); return 1;
    case 3: for (int i = 0; i < ROW; i++) x[i] = 0.0f; return 0;
    case 4: for (int i = 0; i < ROW; i++) x[i] = 0.75f; return 0;
    case 5: for (int i = 0; i < ROW; i++) x[i] = -2.5f; return 0;
    case 6: for (int i = 0; i < ROW; i++) x[i] = rng_normal();
            x[37] = 100.0f; x[300] = -80.0f; return 0;       /* outliers: no RMS bound */
    case 7: for (int i = 0; i < ROW; i++)                     /* magnitude varies per 32 */
                x[i] = rng_normal() * powf(10.0f, (float)((i / 32) % 5) - 2.0f);
            return 0;
    case 8: for (int i = 0; i < ROW; i++) x[i] = 1e-6f * rng_normal(); return 0;
    case 9: for (int i = 0; i < ROW; i++) x[i] = 3.0f + 0.5f * rng_normal(); return 1;  /* offset */
    }
    return 0;
}
#define N_CASES 10

static void test_roundtrip(void) {
    static float x[ROW], y[ROW];
    static uint8_t q[ROW * 4];
    for (int t = 0; t < N_QUANT; t++) {
        int type = quant_types[t];
        for (int c = 0; c < N_CASES; c++) {
            int rms_checked = make_case(c, x);
            memset(q, 0xa5, sizeof q);
            format_quantize_row(type, x, q, ROW);
            format_dequantize_row(type, q, y, ROW);
            double rel;
            int bad = check_grid_error(type, x, q, y, ROW, &rel);
            CHECKF(bad == 0, "%s case %d: %d elements off their nearest grid point",
                   format_name(type), c, bad);
            if (rms_checked)
                CHECKF(rel <= rms_bound(type), "%s case %d: rel rms %.4f > %.4f",
                       format_name(type), c, rel, rms_bound(type));
            int finite = 1;
            for (int i = 0; i < ROW; i++) finite &= isfinite(y[i]);
            CHECKF(finite, "%s case %d: non-finite output", format_name(type), c);
            if (c == 3) {   /* zeros decode to exact zeros */
                int zeros = 1;
                for (int i = 0; i < ROW; i++) zeros &= y[i] == 0.0f;
                CHECKF(zeros, "%s: zero row", format_name(type));
            }
            if (c == 4 || c == 5) {   /* constants come back within fp16 rounding */
                double worst = 0;
                for (int i = 0; i < ROW; i++) worst = fmax(worst, fabs((double)y[i] - x[i]));
                CHECKF(worst <= fabs(x[0]) * 0.01, "%s constant %g: err %g",
                       format_name(type), x[0], worst);
            }
        }
    }
    /* Q8_0: d is amax/127 rounded to fp16. */
    make_case(0, x);
    format_quantize_row(FMT_Q8_0, x, q, ROW);
    int bad_d = 0;
    for (int b = 0; b < ROW / QK; b++) {
        float amax = 0;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[b * QK + j]));
        if (((block_q8_0 *)q)[b].d != f32_to_fp16(amax / 127.0f)) bad_d++;
    }
    CHECK(bad_d == 0);

    /* The float formats: within half an ulp of their precision. */
    for (int c = 0; c < N_CASES; c++) {
        make_case(c, x);
        for (int t = 0; t < 3; t++) {
            int type = (int[]){ FMT_F32, FMT_F16, FMT_BF16 }[t];
            format_quantize_row(type, x, q, ROW);
            format_dequantize_row(type, q, y, ROW);
            int bad = 0;
            for (int i = 0; i < ROW; i++) {
                double err = fabs((double)y[i] - x[i]);
                double bound = type == FMT_F32 ? 0 : type == FMT_BF16 ? fabs(x[i]) * ldexp(1, -8)
                             : fmax(fabs(x[i]) * ldexp(1, -11), ldexp(1, -25));
                if (err > bound) bad++;
            }
            CHECKF(bad == 0, "%s case %d: %d elements beyond half an ulp", format_name(type), c, bad);
        }
    }

    /* Planted controls: the same check must catch a wrong decoder. */
    make_case(0, x);
    format_quantize_row(FMT_Q4_0, x, q, ROW);
    wrong_q4_0((const block_q4_0 *)q, y, ROW);
    double rel;
    int bad = check_grid_error(FMT_Q4_0, x, q, y, ROW, &rel);
    CHECKF(bad > ROW / 2 && rel > rms_bound(FMT_Q4_0), "swapped nibbles not caught: %d bad, rms %.3f", bad, rel);
    format_quantize_row(FMT_Q4_K, x, q, ROW);
    wrong_q4_k((const block_q4_k *)q, y, ROW);
    bad = check_grid_error(FMT_Q4_K, x, q, y, ROW, &rel);
    CHECKF(bad > 0 && rel > rms_bound(FMT_Q4_K), "swapped scale/min not caught: %d bad, rms %.3f", bad, rel);
}

/* ---- activations --------------------------------------------------------- */

static void test_act_quantize(void) {
    static float x[ROW];
    static act_q8 a[ROW / QK];
    for (int i = 0; i < ROW; i++) x[i] = rng_normal() * powf(3.0f, (float)((i / 32) % 7) - 3.0f);
    for (int j = 0; j < QK; j++) x[64 + j] = 0.0f;     /* block 2: all zero */
    x[200] = -1e4f;                                    /* block 6: an outlier */
    act_quantize_row(x, a, ROW);
    int bad = 0;
    for (int b = 0; b < ROW / QK; b++) {
        float amax = 0;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[b * QK + j]));
        if (a[b].d != amax / 127.0f) bad++;
        int sum = 0, hit_end = 0;
        for (int j = 0; j < QK; j++) {
            double err = fabs((double)a[b].qs[j] * a[b].d - x[b * QK + j]);
            if (err > 0.5 * a[b].d * (1 + 1e-5)) bad++;
            if (a[b].qs[j] < -127) bad++;
            sum += a[b].qs[j];
            hit_end |= abs(a[b].qs[j]) == 127;
        }
        if (sum != a[b].sum) bad++;
        if (amax > 0 && !hit_end) bad++;
    }
    CHECKF(bad == 0, "%d act_q8 violations", bad);
    CHECK(a[2].d == 0.0f && a[2].sum == 0 && a[2].qs[0] == 0 && a[2].qs[31] == 0);
    CHECK(a[6].qs[200 - 192] == -127);
}

/* ---- dot products -------------------------------------------------------- */

static void test_dots(void) {
    enum { N = 1024 };
    static float w[N], x[N], wd[N], xd[N], wrong[N];
    static uint8_t q[N * 4];
    static act_q8 a[N / QK];
    for (int rep = 0; rep < 3; rep++) {
        float wscale = rep == 2 ? 0.02f : 1.0f;
        for (int i = 0; i < N; i++) {
            w[i] = wscale * (rng_normal() + (rep == 1 ? 0.7f : 0.0f));   /* rep 1: offset weights */
            x[i] = rng_normal() * (rep == 2 ? 30.0f : 1.0f);
        }
        act_quantize_row(x, a, N);
        for (int i = 0; i < N; i++) xd[i] = a[i / QK].d * (float)a[i / QK].qs[i % QK];
        for (int t = 0; t < N_ALL; t++) {
            int type = all_types[t];
            const format_info *f = format_get(type);
            format_quantize_row(type, w, q, N);
            format_dequantize_row(type, q, wd, N);

            /* Reference in double; the tolerance scales with the sum of
             * |terms| including the offset terms the formula adds. */
            double ref_f = 0, mag_f = 0, ref_q = 0, mag_q = 0;
            for (int i = 0; i < N; i++) {
                double off = f->uses_act_q8 ? fabs(grid_at(type, q, i).offset) : 0;
                ref_f += (double)wd[i] * x[i];
                mag_f += fabs((double)wd[i] * x[i]);
                ref_q += (double)wd[i] * xd[i];
                mag_q += (fabs((double)wd[i]) + 2 * off) * fabs(xd[i]);
            }
            float dot_f = format_dot_f32(type, q, x, N);
            CHECKF(fabs(dot_f - ref_f) <= 1e-5 * mag_f, "%s dot_f32 %.7g vs %.7g",
                   format_name(type), dot_f, ref_f);
            if (!f->uses_act_q8) {
                CHECK(isnan(format_dot_q8(type, q, a, N)));
                continue;
            }
            float dot_q = format_dot_q8(type, q, a, N);
            CHECKF(fabs(dot_q - ref_q) <= 1e-5 * mag_q, "%s dot_q8 %.7g vs %.7g (tol %.3g)",
                   format_name(type), dot_q, ref_q, 1e-5 * mag_q);
            /* The two dots agree to the activation quantization's error. */
            CHECKF(fabs(dot_q - dot_f) <= 0.02 * mag_f, "%s dot_q8 %.5g vs dot_f32 %.5g",
                   format_name(type), dot_q, dot_f);
        }

        /* Planted control: against a reference over a wrong decoding the
         * same check fails. */
        format_quantize_row(FMT_Q4_0, w, q, N);
        wrong_q4_0((const block_q4_0 *)q, wrong, N);
        double ref_wrong = 0, mag = 0;
        for (int i = 0; i < N; i++) {
            ref_wrong += (double)wrong[i] * xd[i];
            mag += fabs((double)wrong[i] * xd[i]);
        }
        float dot_q = format_dot_q8(FMT_Q4_0, q, a, N);
        CHECKF(fabs(dot_q - ref_wrong) > 1e-5 * mag, "wrong Q4_0 reference not caught");
    }

    /* Exact small case: integer-valued weights and activations, so every
     * product and sum is exact and the dot must equal the integer sum. */
    for (int i = 0; i < N; i++) {
        w[i] = (float)((int)(rng_u32() % 15) - 8);   /* Q4_0 grid with d = 1 */
        x[i] = (float)((int)(rng_u32() % 255) - 127);
    }
    w[0] = -8; x[0] = 127;    /* pin d = 1 for every block */
    for (int b = 0; b < N / QK; b++) { w[b * QK] = -8; x[b * QK] = 127; }
    act_quantize_row(x, a, N);
    format_quantize_row(FMT_Q4_0, w, q, N);
    double exact = 0;
    for (int i = 0; i < N; i++) exact += (double)w[i] * x[i];
    CHECKF(format_dot_q8(FMT_Q4_0, q, a, N) == (float)exact, "Q4_0 exact dot");
    /* Q8_0 likewise: integer weights with 127 in every block give d = 1. */
    for (int i = 0; i < N; i++) w[i] = (float)((int)(rng_u32() % 255) - 127);
    for (int b = 0; b < N / QK; b++) w[b * QK + 1] = 127;
    format_quantize_row(FMT_Q8_0, w, q, N);
    exact = 0;
    for (int i = 0; i < N; i++) exact += (double)w[i] * x[i];
    CHECK(fabs(exact) < 16777216.0);   /* every partial sum is exact in float */
    CHECKF(format_dot_q8(FMT_Q8_0, q, a, N) == (float)exact, "Q8_0 exact dot");
}

/* ---- ops ----------------------------------------------------------------- */

static double max_abs_diff(const float *a, const double *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

static void rope_ref(double *x, int n_heads, int head_dim, int n_rot, int pos, double base,
                     bool neox, const float *ff) {
    for (int h = 0; h < n_heads; h++) {
        for (int i = 0; i < n_rot / 2; i++) {
            double theta = pos * pow(base, -2.0 * i / n_rot) / (ff ? ff[i] : 1.0);
            int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
            double x0 = x[h * head_dim + a], x1 = x[h * head_dim + b];
            x[h * head_dim + a] = x0 * cos(theta) - x1 * sin(theta);
            x[h * head_dim + b] = x0 * sin(theta) + x1 * cos(theta);
        }
    }
}

static void test_ops(void) {
    enum { N = 4096 };
    static float x[N], w[N], out[N], g[N];
    static double ref[N];

    /* rmsnorm, also in place */
    for (int i = 0; i < N; i++) { x[i] = 3.0f * rng_normal() + 0.5f; w[i] = 1.0f + 0.1f * rng_normal(); }
    double ss = 0;
    for (int i = 0; i < N; i++) ss += (double)x[i] * x[i];
    double scale = 1.0 / sqrt(ss / N + 1e-5);
    for (int i = 0; i < N; i++) ref[i] = x[i] * scale * w[i];
    op_rmsnorm(out, x, w, N, 1e-5f);
    CHECKF(max_abs_diff(out, ref, N) <= 1e-5, "rmsnorm %g", max_abs_diff(out, ref, N));
    op_rmsnorm(x, x, w, N, 1e-5f);
    CHECK(memcmp(x, out, sizeof x) == 0);
    for (int i = 0; i < 64; i++) x[i] = 0.0f;
    op_rmsnorm(out, x, w, 64, 1e-6f);
    CHECK(out[0] == 0.0f && out[63] == 0.0f);

    /* rope: partial rotation (n_rot < head_dim), both pairings, with and
     * without frequency factors, at small and long positions */
    enum { HEADS = 3, HD = 16, ROT = 12 };
    float ff[ROT / 2];
    for (int i = 0; i < ROT / 2; i++) ff[i] = 1.0f + (float)i;
    for (int variant = 0; variant < 8; variant++) {
        bool neox = variant & 1;
        const float *factors = (variant & 2) ? ff : NULL;
        int pos = (variant & 4) ? 30000 : 17;
        float v[HEADS * HD];
        double vr[HEADS * HD];
        for (int i = 0; i < HEADS * HD; i++) vr[i] = v[i] = rng_normal();
        float before[HEADS * HD];
        memcpy(before, v, sizeof v);
        float cs[ROT];
        op_rope_angles(cs, ROT, pos, 10000.0f, factors);
        op_rope_apply(v, HEADS, HD, ROT, neox, cs);
        rope_ref(vr, HEADS, HD, ROT, pos, 10000.0, neox, factors);
        CHECKF(max_abs_diff(v, vr, HEADS * HD) <= 1e-5, "rope variant %d: %g", variant,
               max_abs_diff(v, vr, HEADS * HD));
        int untouched = 1;
        for (int h = 0; h < HEADS; h++)
            for (int i = ROT; i < HD; i++) untouched &= v[h * HD + i] == before[h * HD + i];
        CHECK(untouched);
        /* control: the other pairing must not pass the same check */
        double vo[HEADS * HD];
        for (int i = 0; i < HEADS * HD; i++) vo[i] = before[i];
        rope_ref(vo, HEADS, HD, ROT, pos, 10000.0, !neox, factors);
        CHECK(max_abs_diff(v, vo, HEADS * HD) > 1e-3);
    }
    float v0[HD];
    for (int i = 0; i < HD; i++) v0[i] = rng_normal();
    float v1[HD];
    memcpy(v1, v0, sizeof v0);
    float cs0[HD];
    op_rope_angles(cs0, HD, 0, 10000.0f, NULL);
    op_rope_apply(v1, 1, HD, HD, false, cs0);
    CHECK(memcmp(v0, v1, sizeof v0) == 0);   /* position 0 is the identity */

    /* softmax: large logits must not overflow */
    for (int i = 0; i < 1000; i++) x[i] = 50.0f * rng_normal() + (i == 7 ? 1000.0f : 0.0f);
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < 1000; i++) mx = fmax(mx, x[i]);
    for (int i = 0; i < 1000; i++) sum += exp(x[i] - mx);
    for (int i = 0; i < 1000; i++) ref[i] = exp(x[i] - mx) / sum;
    op_softmax(x, 1000);
    CHECKF(max_abs_diff(x, ref, 1000) <= 1e-6, "softmax %g", max_abs_diff(x, ref, 1000));
    for (int i = 0; i < 100; i++) x[i] = rng_normal() + (i % 5 == 0 ? -INFINITY : 0.0f);
    op_softmax(x, 100);
    double total = 0;
    for (int i = 0; i < 100; i++) total += x[i];
    CHECK(fabs(total - 1.0) < 1e-5 && x[0] == 0.0f && x[1] > 0.0f);

    /* swiglu */
    for (int i = 0; i < N; i++) { g[i] = 4.0f * rng_normal(); w[i] = rng_normal(); }
    g[0] = -100.0f; g[1] = 100.0f;
    for (int i = 0; i < N; i++) ref[i] = g[i] / (1.0 + exp(-(double)g[i])) * w[i];
    op_swiglu(out, g, w, N);
    double worst = 0;
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs(out[i] - ref[i]) / (fabs(ref[i]) + 1e-30));
    CHECKF(worst <= 1e-5, "swiglu rel %g", worst);
    /* every path's SwiGLU against op_swiglu, tails included (n = 1..N) */
    for (int p = 0; p < KPATH_COUNT; p++) {
        if (!kernels_path_available((kern_path_id)p)) continue;
        op_swiglu_fn f = op_swiglu_for(p);
        double pw = 0;
        for (int len = 1; len <= N; len += len < 40 ? 1 : 97) {
            float want[N], got[N];
            op_swiglu(want, g, w, len);
            for (int i = 0; i < N; i++) got[i] = NAN;
            f(got, g, w, len);
            for (int i = 0; i < len; i++) pw = fmax(pw, fabs(got[i] - want[i]) / (fabs(want[i]) + 1e-30));
            CHECKF(len == N || isnan(got[len]), "%s swiglu wrote past %d", kernels_path_name((kern_path_id)p), len);
        }
        CHECKF(pw <= 1e-6, "%s swiglu rel %g against op_swiglu", kernels_path_name((kern_path_id)p), pw);
    }

    /* every path's rmsnorm against op_rmsnorm, bit for bit: lengths 1..80
     * (tails) and 2048, values over many magnitudes, in place too */
    for (int p = 0; p < KPATH_COUNT; p++) {
        if (!kernels_path_available((kern_path_id)p)) continue;
        op_rmsnorm_fn f = op_rmsnorm_for(p);
        int bad_norm = 0;
        static float nx[2049], nw[2049], want[2049], got[2049];
        for (int i = 0; i < 2049; i++) { nx[i] = rng_normal() * ldexpf(1.0f, (int)(rng_u32() % 40) - 20); nw[i] = rng_normal(); }
        for (int len = 1; len <= 2048; len += len < 80 ? 1 : 1968) {
            op_rmsnorm(want, nx, nw, len, 1e-5f);
            got[len] = 7.0f;
            f(got, nx, nw, len, 1e-5f);
            bad_norm += memcmp(want, got, sizeof(float) * (size_t)len) != 0 || got[len] != 7.0f;
            memcpy(got, nx, sizeof(float) * (size_t)len);
            f(got, got, nw, len, 1e-5f);
            bad_norm += memcmp(want, got, sizeof(float) * (size_t)len) != 0;
        }
        CHECKF(bad_norm == 0, "%s rmsnorm: %d cases differ from op_rmsnorm", kernels_path_name((kern_path_id)p), bad_norm);
    }
    {   /* control: a plain sequential sum of squares is a different order,
         * which the comparison above would catch */
        static float nx[2048], nw[2048], want[2048], seq[2048];
        for (int i = 0; i < 2048; i++) { nx[i] = rng_normal() * (1.0f + (float)(i % 7)); nw[i] = 1.0f; }
        op_rmsnorm(want, nx, nw, 2048, 1e-5f);
        float ss = 0.0f;
        for (int i = 0; i < 2048; i++) ss = fmaf(nx[i], nx[i], ss);
        float sc = 1.0f / sqrtf(ss / 2048.0f + 1e-5f);
        for (int i = 0; i < 2048; i++) seq[i] = nx[i] * sc * nw[i];
        CHECK(memcmp(want, seq, sizeof want) != 0);
    }

#if defined(__x86_64__)
    /* the comparisons below test a vector version, not the scalar one twice */
    if (kernels_path_available(KPATH_AVX512)) {
        CHECK(op_rope_apply_for(KPATH_AVX512) != op_rope_apply);
        CHECK(op_to_fp16_for(KPATH_AVX512) != op_to_fp16);
        CHECK(op_rmsnorm_for(KPATH_AVX512) != op_rmsnorm);
    }
    if (kernels_path_available(KPATH_AVX2)) {
        CHECK(op_rope_apply_for(KPATH_AVX2) != op_rope_apply);
        CHECK(op_to_fp16_for(KPATH_AVX2) != op_to_fp16);
        CHECK(op_rmsnorm_for(KPATH_AVX2) != op_rmsnorm);
    }
#endif
#if defined(__aarch64__)
    if (kernels_path_available(KPATH_NEON)) {
        CHECK(op_rope_apply_for(KPATH_NEON) != op_rope_apply);
        CHECK(op_to_fp16_for(KPATH_NEON) != op_to_fp16);
        CHECK(op_rmsnorm_for(KPATH_NEON) != op_rmsnorm);
    }
#endif
    /* every path's rope against op_rope_apply, bit for bit: both pairings,
     * n_rot from 2 to a full 128-wide head (vector tails), rotated and
     * untouched dimensions, long positions, frequency factors. A control
     * checks the comparison sees a one-ulp change. */
    for (int p = 0; p < KPATH_COUNT; p++) {
        if (!kernels_path_available((kern_path_id)p)) continue;
        op_rope_apply_fn f = op_rope_apply_for(p);
        int bad_rope = 0, cases = 0;
        enum { RH = 5, RHD = 128 };
        float ffr[RHD / 2];
        for (int i = 0; i < RHD / 2; i++) ffr[i] = 1.0f + 0.37f * (float)i;
        for (int rot = 2; rot <= RHD; rot += rot < 40 ? 2 : 22) {
            for (int variant = 0; variant < 4; variant++) {
                bool neox = variant & 1;
                float cs[RHD], want[RH * RHD], got[RH * RHD];
                op_rope_angles(cs, rot, (variant & 2) ? 123457 : 31, 500000.0f, (variant & 2) ? ffr : NULL);
                for (int i = 0; i < RH * RHD; i++) want[i] = got[i] = 3.0f * rng_normal();
                op_rope_apply(want, RH, RHD, rot, neox, cs);
                f(got, RH, RHD, rot, neox, cs);
                bad_rope += memcmp(want, got, sizeof want) != 0;
                cases++;
                if (rot == 64 && variant == 0) {   /* control */
                    uint32_t u;
                    memcpy(&u, &got[3], 4); u ^= 1; memcpy(&got[3], &u, 4);
                    CHECK(memcmp(want, got, sizeof want) != 0);
                }
            }
        }
        CHECKF(bad_rope == 0, "%s rope: %d of %d cases differ from op_rope_apply",
               kernels_path_name((kern_path_id)p), bad_rope, cases);
    }

    /* every path's fp16 store against f32_to_fp16, bit for bit: every
     * exponent (subnormal halves, overflow to inf, ties), infinities, NaNs
     * with payloads, signed zeros, and lengths 1..70 (tails) */
    {
        enum { NF = 4096 };
        static float fsrc[NF];
        for (int i = 0; i < NF; i++) {
            uint32_t bits = rng_u32();
            if (i % 4 == 1) bits = (bits & 0x80001fffu) | ((uint32_t)(96 + i % 50) << 23);  /* near halves' range */
            if (i % 4 == 2) bits = (bits & 0x807fe000u) | 0x1000u | ((uint32_t)(100 + i % 40) << 23);  /* exact ties */
            memcpy(&fsrc[i], &bits, 4);
        }
        const float specials[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65520.0f, 65519.99f,
                                   -65520.0f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 1e-10f };
        for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) fsrc[i] = specials[i];
        uint32_t snan = 0x7f800001u, qnan_payload = 0xffc12345u;
        memcpy(&fsrc[20], &snan, 4);
        memcpy(&fsrc[21], &qnan_payload, 4);
        for (int p = 0; p < KPATH_COUNT; p++) {
            if (!kernels_path_available((kern_path_id)p)) continue;
            op_to_fp16_fn f = op_to_fp16_for(p);
            static fp16_t want16[NF + 1], got16[NF + 1];
            int bad16 = 0;
            for (int i = 0; i < NF; i++) want16[i] = f32_to_fp16(fsrc[i]);
            f(got16, fsrc, NF);
            for (int i = 0; i < NF; i++) bad16 += want16[i] != got16[i];
            for (int len = 1; len <= 70; len++) {
                got16[len] = 0xabcd;
                f(got16, fsrc + 7, len);
                for (int i = 0; i < len; i++) bad16 += got16[i] != f32_to_fp16(fsrc[7 + i]);
                bad16 += got16[len] != 0xabcd;   /* nothing written past the end */
            }
            CHECKF(bad16 == 0, "%s fp16 store: %d values differ from f32_to_fp16", kernels_path_name((kern_path_id)p), bad16);
        }
    }

    /* add */
    for (int i = 0; i < N; i++) { x[i] = rng_normal(); w[i] = rng_normal(); out[i] = x[i]; }
    op_add(out, w, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += out[i] != x[i] + w[i];
    CHECK(bad == 0);
}

/* Bits equal, or both NaN (a NaN's payload is not part of the contract). */
static bool same_float(float a, float b) {
    return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a);
}

static void test_geglu(void) {
    enum { N = 1024 };
    static float g[N + 1], u[N + 1], want[N + 1], got[N + 1];
    /* against the tanh GELU in double: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) */
    for (int i = 0; i < N; i++) { g[i] = 4.0f * rng_normal(); u[i] = rng_normal(); }
    g[0] = -30.0f; g[1] = 30.0f; g[2] = 0.0f; g[3] = -0.0f; g[4] = 1e-20f;
    op_geglu(got, g, u, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double x = g[i], ref = 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
        worst = fmax(worst, fabs(got[i] - ref) / (fabs(ref) + 1e-30 + 1e-7 * fabs(u[i])));
    }
    CHECKF(worst <= 2e-6, "geglu rel %g against double", worst);
    /* every path's GeGLU against op_geglu, bit for bit: lengths 1..N (tails),
     * magnitudes from subnormal to huge, infinities, NaN, signed zeros, in
     * place too; nothing written past n */
    for (int i = 0; i < N; i++) g[i] = rng_normal() * ldexpf(1.0f, (int)(rng_u32() % 60) - 30);
    const float odd[] = { NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 3e38f, -3e38f, 88.0f, -88.0f, -9.0f };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) g[7 + 13 * i] = odd[i];
    for (int p = 0; p < KPATH_COUNT; p++) {
        if (!kernels_path_available((kern_path_id)p)) continue;
        op_swiglu_fn f = op_geglu_for(p);
        int bad = 0;
        for (int len = 1; len <= N; len += len < 40 ? 1 : 89) {
            op_geglu(want, g, u, len);
            got[len] = 7.0f;
            f(got, g, u, len);
            for (int i = 0; i < len; i++) bad += !same_float(got[i], want[i]);
            bad += got[len] != 7.0f;
            memcpy(got, g, sizeof(float) * (size_t)len);
            f(got, got, u, len);
            for (int i = 0; i < len; i++) bad += !same_float(got[i], want[i]);
        }
        CHECKF(bad == 0, "%s geglu: %d values differ from op_geglu", kernels_path_name((kern_path_id)p), bad);
    }
    /* controls: the vector versions are not the scalar one, and a one-ulp
     * change is seen by the comparison */
#if defined(__x86_64__)
    if (kernels_path_available(KPATH_AVX512)) CHECK(op_geglu_for(KPATH_AVX512) != op_geglu);
    if (kernels_path_available(KPATH_AVX2)) CHECK(op_geglu_for(KPATH_AVX2) != op_geglu);
#endif
#if defined(__aarch64__)
    if (kernels_path_available(KPATH_NEON)) CHECK(op_geglu_for(KPATH_NEON) != op_geglu);
#endif
    op_geglu(want, g, u, N);
    memcpy(got, want, sizeof want);
    got[100] = nextafterf(got[100], INFINITY);
    CHECK(!same_float(got[100], want[100]));

    /* soft-cap and scale */
    float x[5] = { -100.0f, -1.0f, 0.0f, 2.5f, 1e6f };
    op_softcap(x, 30.0f, 5);
    double ref[5] = { -100.0, -1.0, 0.0, 2.5, 1e6 };
    for (int i = 0; i < 5; i++) CHECKF(fabs(x[i] - 30.0 * tanh(ref[i] / 30.0)) < 1e-4, "softcap %d", i);
    op_scale(x, 2.0f, 5);
    CHECK(fabs(x[4] - 60.0) < 1e-4 && x[2] == 0.0f);
}

int main(void) {
    test_type_table();
    test_fp16();
    test_known_blocks();
    test_roundtrip();
    test_act_quantize();
    test_dots();
    test_ops();
    test_geglu();
    return test_summary("formats");
}
