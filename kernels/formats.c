/* Weight formats: the scalar reference (the oracle every fast path is
 * tested against, and the decoder for real GGUF files).
 *
 * Block layouts are ggml's on-disk ones (see formats.h). Element order
 * inside each block:
 *   Q4_0/Q4_1   element j < 16: low nibble of qs[j]; j >= 16: high nibble of qs[j-16].
 *   Q5_0/Q5_1   as Q4_x for the low 4 bits; bit 4 of element j is bit j of qh
 *               read as a little-endian u32.
 *   Q8_0        qs[j].
 *   Q4_K        8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min
 *               packed in scales[12]. Sub-blocks 2p and 2p+1 share
 *               qs[32p .. 32p+31]: 2p the low nibbles, 2p+1 the high ones.
 *               value = d*sc*q - dmin*m.
 *   Q5_K        Q4_K plus bit 4 of element l of sub-block j = bit j of qh[l].
 *   Q6_K        two halves of 128; in half h, element 32g+l (g = 0..3) takes
 *               its low 4 bits from ql[64h + l + 32*(g&1)] (low nibble for
 *               g < 2, high for g >= 2) and its high 2 bits from bits 2g..2g+1
 *               of qh[32h + l]; scale int8 scales[i/16]; value = d*sc*(q-32).
 *
 * Floating point: every multiply-add that defines a result is written as an
 * explicit fmaf() so the value does not depend on whether the compiler
 * contracts a*b+c (gcc does on aarch64, not on x86 without -mfma). Fast
 * paths must use fused multiply-adds at the same places.
 *
 * Dot products with act_q8 activations (format_dot_q8) are defined per
 * 32-element activation block b, blocks in order, acc starting at 0.0f:
 *   isum_b = integer dot of the block's weight quants with x[b].qs (int32,
 *            exact; the ranges below never overflow and stay below 2^24,
 *            so (float)isum_b is exact too)
 *   Q8_0, Q4_0, Q5_0   acc = fmaf(d_w * x.d, (float)isum_b, acc)
 *                      (weight quants signed: q, q-8, q-16)
 *   Q4_1, Q5_1         acc = fmaf(d_w * x.d, (float)isum_b, acc)
 *                      acc = fmaf(m_w * x.d, (float)x.sum, acc)
 *                      (weight quants unsigned 0..15 / 0..31)
 *   Q4_K, Q5_K         block b is sub-block j = b % 8 of super-block b / 8:
 *                      acc = fmaf(d * x.d, (float)(sc_j * isum_b), acc)
 *                      acc = fmaf(dmin * x.d, (float)(-(m_j * x.sum)), acc)
 *   Q6_K               block b covers the 16-element sub-blocks 2k, 2k+1
 *                      (k = b % 8); isum_b = sc[2k] * dot(first 16) +
 *                      sc[2k+1] * dot(last 16), quants q-32 signed:
 *                      acc = fmaf(d * x.d, (float)isum_b, acc)
 * d_w, m_w, d, dmin are the block's fp16 fields as float; the products
 * d_w * x.d etc. are single float multiplies.
 *
 * format_dot_f32: acc = fmaf(w[i], x[i], acc) for i in order, w[i] the
 * dequantized weight (quantized formats are dequantized block by block). */
#include "kernels/formats.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q4_k) == 144, "block_q4_k layout");
_Static_assert(sizeof(block_q5_k) == 176, "block_q5_k layout");
_Static_assert(sizeof(block_q6_k) == 210, "block_q6_k layout");
_Static_assert(sizeof(act_q8) == 40, "act_q8 layout");

/* ---- type table ---------------------------------------------------------- */

static const format_info supported[FMT_COUNT_MAX] = {
    [FMT_F32]  = { "F32",  1,    4,                  false },
    [FMT_F16]  = { "F16",  1,    2,                  false },
    [FMT_BF16] = { "BF16", 1,    2,                  false },
    [FMT_Q8_0] = { "Q8_0", QK,   sizeof(block_q8_0), true },
    [FMT_Q4_0] = { "Q4_0", QK,   sizeof(block_q4_0), true },
    [FMT_Q4_1] = { "Q4_1", QK,   sizeof(block_q4_1), true },
    [FMT_Q5_0] = { "Q5_0", QK,   sizeof(block_q5_0), true },
    [FMT_Q5_1] = { "Q5_1", QK,   sizeof(block_q5_1), true },
    [FMT_Q4_K] = { "Q4_K", QK_K, sizeof(block_q4_k), true },
    [FMT_Q5_K] = { "Q5_K", QK_K, sizeof(block_q5_k), true },
    [FMT_Q6_K] = { "Q6_K", QK_K, sizeof(block_q6_k), true },
};

/* Names of every GGUF type id (including ones hearth cannot run). */
static const char *const type_names[] = {
    [0] = "F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [4] = "Q4_2",
    [5] = "Q4_3", [6] = "Q5_0", [7] = "Q5_1", [8] = "Q8_0", [9] = "Q8_1",
    [10] = "Q2_K", [11] = "Q3_K", [12] = "Q4_K", [13] = "Q5_K", [14] = "Q6_K",
    [15] = "Q8_K", [16] = "IQ2_XXS", [17] = "IQ2_XS", [18] = "IQ3_XXS",
    [19] = "IQ1_S", [20] = "IQ4_NL", [21] = "IQ3_S", [22] = "IQ2_S",
    [23] = "IQ4_XS", [24] = "I8", [25] = "I16", [26] = "I32", [27] = "I64",
    [28] = "F64", [29] = "IQ1_M", [30] = "BF16", [31] = "Q4_0_4_4",
    [32] = "Q4_0_4_8", [33] = "Q4_0_8_8", [34] = "TQ1_0", [35] = "TQ2_0",
    [36] = "IQ4_NL_4_4", [37] = "IQ4_NL_4_8", [38] = "IQ4_NL_8_8", [39] = "MXFP4",
};

const format_info *format_get(int type) {
    if (type < 0 || type >= FMT_COUNT_MAX || !supported[type].name) return NULL;
    return &supported[type];
}

const char *format_name(int type) {
    int n_names = (int)(sizeof type_names / sizeof type_names[0]);
    if (type >= 0 && type < n_names && type_names[type]) return type_names[type];
    static _Thread_local char buf[24];
    snprintf(buf, sizeof buf, "type %d", type);
    return buf;
}

size_t format_row_bytes(int type, int64_t n) {
    const format_info *f = format_get(type);
    if (!f || n < 0 || n % f->block_elems) return 0;
    return (size_t)(n / f->block_elems) * f->block_bytes;
}

/* ---- fp16 / bf16 --------------------------------------------------------- */

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float fp16_to_f32(fp16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f)                      /* inf / NaN: keep the payload */
        return bits_f32(sign | 0x7f800000 | (mant << 13));
    if (exp == 0) {                       /* zero / subnormal: mant * 2^-24, exact */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

/* Shift right by `shift` (1..31) rounding to nearest, ties to even. */
static uint32_t shift_round_even(uint32_t v, int shift) {
    uint32_t kept = v >> shift;
    uint32_t rest = v & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1))) kept++;
    return kept;
}

fp16_t f32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7fffffff;
    if (x > 0x7f800000)                   /* NaN: quiet, keep the top payload bits */
        return sign | 0x7e00 | (uint16_t)((x >> 13) & 0x3ff);
    if (x >= 0x477ff000) return sign | 0x7c00;   /* >= 65520 rounds to inf */
    if (x >= 0x38800000) {                /* normal half: rebias the exponent */
        /* The carry of a round-up moves into the exponent, as it should. */
        return sign | (uint16_t)shift_round_even(x - (112u << 23), 13);
    }
    if (x <= 0x33000000) return sign;     /* <= 2^-25 (half the least subnormal): zero */
    /* Subnormal half: value = mant24 * 2^(e-150) = h * 2^-24. */
    uint32_t mant = (x & 0x7fffff) | 0x800000;
    int shift = 126 - (int)(x >> 23);     /* 14..24 */
    return sign | (uint16_t)shift_round_even(mant, shift);
}

float bf16_to_f32(bf16_t h) { return bits_f32((uint32_t)h << 16); }

bf16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (bf16_t)((x >> 16) | 0x40);  /* quiet NaN */
    return (bf16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

/* ---- small helpers ------------------------------------------------------- */

static float half(fp16_t h) { return fp16_to_f32(h); }

/* An fp16 scale, saturated to the largest finite half. */
static fp16_t scale_to_fp16(float d) {
    if (d > 65504.0f) d = 65504.0f;
    if (d < -65504.0f) d = -65504.0f;
    return f32_to_fp16(d);
}

/* Nearest integer (ties to even) clamped to [lo, hi]; NaN gives lo. */
static int nearest_clamped(float v, int lo, int hi) {
    if (!(v >= (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)lrintf(v);
}

static float inverse_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

/* The value of largest magnitude (with its sign), and its magnitude. */
static float signed_absmax(const float *x, int n, float *amax_out) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    }
    if (amax_out) *amax_out = amax;
    return max;
}

static uint32_t read_u32_le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void write_u32_le(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

/* Quant j (0..31) of a 32-element nibble block: low nibbles first. */
static int nibble_at(const uint8_t *qs, int j) {
    return j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
}

static void pack_nibbles(uint8_t *qs, const uint8_t q[QK]) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
}

/* Q4_K / Q5_K: 6-bit scale and min of sub-block j from the 12 packed bytes.
 * Bytes 0-3: scales 0-3 (low 6 bits) + bits 4-5 of scales 4-7 (top 2 bits);
 * bytes 4-7: mins 0-3 + bits 4-5 of mins 4-7; bytes 8-11: low nibbles of
 * scales 4-7 (low nibble) and mins 4-7 (high nibble). */
static void kq_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

static void kq_pack_scale_min(uint8_t *s, const uint8_t sc[8], const uint8_t m[8]) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | (m[j + 4] & 0xf) << 4);
    }
}

/* Quant (0..15 or 0..31) of element l of sub-block j of a Q4_K/Q5_K block. */
static int q4k_quant(const uint8_t *qs, int j, int l) {
    uint8_t byte = qs[32 * (j / 2) + l];
    return (j & 1) ? byte >> 4 : byte & 0xf;
}

static int q5k_quant(const block_q5_k *b, int j, int l) {
    return q4k_quant(b->qs, j, l) | ((b->qh[l] >> j) & 1) << 4;
}

/* Quant (0..63, offset 32) of element i (0..255) of a Q6_K block. */
static int q6k_quant(const block_q6_k *b, int i) {
    int h = i / 128, g = (i % 128) / 32, l = i % 32;
    uint8_t lo_byte = b->ql[64 * h + l + 32 * (g & 1)];
    int lo = g < 2 ? lo_byte & 0xf : lo_byte >> 4;
    int hi = (b->qh[32 * h + l] >> (2 * g)) & 3;
    return lo | hi << 4;
}

static void q6k_store(block_q6_k *b, int i, int q) {
    int h = i / 128, g = (i % 128) / 32, l = i % 32;
    uint8_t *lo_byte = &b->ql[64 * h + l + 32 * (g & 1)];
    if (g < 2) *lo_byte = (uint8_t)((*lo_byte & 0xf0) | (q & 0xf));
    else       *lo_byte = (uint8_t)((*lo_byte & 0x0f) | (q & 0xf) << 4);
    b->qh[32 * h + l] |= (uint8_t)(((q >> 4) & 3) << (2 * g));
}

/* ---- dequantize: one block ----------------------------------------------- */

static void dequant_q8_0(const block_q8_0 *b, float *y) {
    float d = half(b->d);
    for (int j = 0; j < QK; j++) y[j] = (float)b->qs[j] * d;
}

static void dequant_q4_0(const block_q4_0 *b, float *y) {
    float d = half(b->d);
    for (int j = 0; j < QK; j++) y[j] = (float)(nibble_at(b->qs, j) - 8) * d;
}

static void dequant_q4_1(const block_q4_1 *b, float *y) {
    float d = half(b->d), m = half(b->m);
    for (int j = 0; j < QK; j++) y[j] = fmaf((float)nibble_at(b->qs, j), d, m);
}

static void dequant_q5_0(const block_q5_0 *b, float *y) {
    float d = half(b->d);
    uint32_t qh = read_u32_le(b->qh);
    for (int j = 0; j < QK; j++) {
        int q = nibble_at(b->qs, j) | (int)((qh >> j) & 1) << 4;
        y[j] = (float)(q - 16) * d;
    }
}

static void dequant_q5_1(const block_q5_1 *b, float *y) {
    float d = half(b->d), m = half(b->m);
    uint32_t qh = read_u32_le(b->qh);
    for (int j = 0; j < QK; j++) {
        int q = nibble_at(b->qs, j) | (int)((qh >> j) & 1) << 4;
        y[j] = fmaf((float)q, d, m);
    }
}

/* Q4_K and Q5_K share their scales, mins and low nibbles; Q5_K adds a fifth
 * bit from qh (NULL for Q4_K). One body, so the two cannot drift; inline so
 * each caller's constant qh folds the test away. */
static inline void dequant_kq(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, float d, float dmin,
                              float *y) {
    for (int j = 0; j < 8; j++) {
        int sc, m;
        kq_scale_min(scales, j, &sc, &m);
        float step = d * (float)sc, offset = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            int q = q4k_quant(qs, j, l) | (qh ? ((qh[l] >> j) & 1) << 4 : 0);
            y[32 * j + l] = fmaf(step, (float)q, -offset);
        }
    }
}

static void dequant_q4_k(const block_q4_k *b, float *y) {
    dequant_kq(b->scales, b->qs, NULL, half(b->d), half(b->dmin), y);
}

static void dequant_q5_k(const block_q5_k *b, float *y) {
    dequant_kq(b->scales, b->qs, b->qh, half(b->d), half(b->dmin), y);
}

static void dequant_q6_k(const block_q6_k *b, float *y) {
    float d = half(b->d);
    for (int i = 0; i < QK_K; i++) {
        float step = d * (float)b->scales[i / 16];
        y[i] = step * (float)(q6k_quant(b, i) - 32);
    }
}

/* Dequantize block `bi` of a row of a quantized format into y. */
static void dequant_block(int type, const void *row, int64_t bi, float *y) {
    const uint8_t *p = (const uint8_t *)row;
    switch (type) {
    case FMT_Q8_0: dequant_q8_0((const block_q8_0 *)p + bi, y); break;
    case FMT_Q4_0: dequant_q4_0((const block_q4_0 *)p + bi, y); break;
    case FMT_Q4_1: dequant_q4_1((const block_q4_1 *)p + bi, y); break;
    case FMT_Q5_0: dequant_q5_0((const block_q5_0 *)p + bi, y); break;
    case FMT_Q5_1: dequant_q5_1((const block_q5_1 *)p + bi, y); break;
    case FMT_Q4_K: dequant_q4_k((const block_q4_k *)p + bi, y); break;
    case FMT_Q5_K: dequant_q5_k((const block_q5_k *)p + bi, y); break;
    case FMT_Q6_K: dequant_q6_k((const block_q6_k *)p + bi, y); break;
    default: break;
    }
}

void format_dequantize_row(int type, const void *src, float *dst, int64_t n) {
    const format_info *f = format_get(type);
    if (!f || n % f->block_elems) {      /* misuse: make it visible */
        for (int64_t i = 0; i < n; i++) dst[i] = NAN;
        return;
    }
    switch (type) {
    case FMT_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case FMT_F16: {
        const fp16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_f32(h[i]);
        return;
    }
    case FMT_BF16: {
        const bf16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(h[i]);
        return;
    }
    default:
        for (int64_t bi = 0; bi < n / f->block_elems; bi++)
            dequant_block(type, src, bi, dst + bi * f->block_elems);
    }
}

/* ---- quantize: one block ------------------------------------------------- */
/* Each quantizer picks its scales, stores them as the format does (fp16,
 * 6-bit, int8), and then rounds every element to the nearest point of the
 * grid the *stored* scales describe, so the decoded error is exactly the
 * rounding error of that grid (plus clamping at the grid's ends). */

static void quant_q8_0(const float *x, block_q8_0 *b) {
    float amax;
    signed_absmax(x, QK, &amax);
    b->d = scale_to_fp16(amax / 127.0f);
    float id = inverse_or_zero(half(b->d));
    for (int j = 0; j < QK; j++) b->qs[j] = (int8_t)nearest_clamped(x[j] * id, -127, 127);
}

/* Q4_0 / Q5_0: the value of largest magnitude maps to the most negative
 * quant (-8 / -16), which uses the asymmetric range fully. */
static void quant_q4_0(const float *x, block_q4_0 *b) {
    float max = signed_absmax(x, QK, NULL);
    b->d = scale_to_fp16(max / -8.0f);
    float id = inverse_or_zero(half(b->d));
    uint8_t q[QK];
    for (int j = 0; j < QK; j++) q[j] = (uint8_t)(nearest_clamped(x[j] * id, -8, 7) + 8);
    pack_nibbles(b->qs, q);
}

static void quant_q5_0(const float *x, block_q5_0 *b) {
    float max = signed_absmax(x, QK, NULL);
    b->d = scale_to_fp16(max / -16.0f);
    float id = inverse_or_zero(half(b->d));
    uint8_t q[QK];
    uint32_t qh = 0;
    for (int j = 0; j < QK; j++) {
        int v = nearest_clamped(x[j] * id, -16, 15) + 16;
        q[j] = (uint8_t)(v & 0xf);
        qh |= (uint32_t)(v >> 4) << j;
    }
    pack_nibbles(b->qs, q);
    write_u32_le(b->qh, qh);
}

/* Q4_1 / Q5_1: min and range of the block; the step is computed from the
 * stored (rounded) min so the top of the range is still reached. */
static void min_step(const float *x, int nmax, fp16_t *d_out, fp16_t *m_out) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < QK; j++) { lo = fminf(lo, x[j]); hi = fmaxf(hi, x[j]); }
    *m_out = scale_to_fp16(lo);
    *d_out = scale_to_fp16((hi - half(*m_out)) / (float)nmax);
}

static void quant_q4_1(const float *x, block_q4_1 *b) {
    min_step(x, 15, &b->d, &b->m);
    float id = inverse_or_zero(half(b->d)), m = half(b->m);
    uint8_t q[QK];
    for (int j = 0; j < QK; j++) q[j] = (uint8_t)nearest_clamped((x[j] - m) * id, 0, 15);
    pack_nibbles(b->qs, q);
}

static void quant_q5_1(const float *x, block_q5_1 *b) {
    min_step(x, 31, &b->d, &b->m);
    float id = inverse_or_zero(half(b->d)), m = half(b->m);
    uint8_t q[QK];
    uint32_t qh = 0;
    for (int j = 0; j < QK; j++) {
        int v = nearest_clamped((x[j] - m) * id, 0, 31);
        q[j] = (uint8_t)(v & 0xf);
        qh |= (uint32_t)(v >> 4) << j;
    }
    pack_nibbles(b->qs, q);
    write_u32_le(b->qh, qh);
}

/* K-quants: per sub-block, search for the step s and offset o >= 0 of the
 * grid {s*q - o : q = 0..nmax} that minimise the squared error. Candidates
 * stretch the [min(x,0), max(x)] range a little either way; each is then
 * refined by a least-squares fit of (s, o) to its quants. n <= QK. */
static void fit_step_offset(const float *x, int n, int nmax, float *step, float *offset) {
    float lo = 0.0f, hi = x[0];
    for (int i = 0; i < n; i++) { lo = fminf(lo, x[i]); hi = fmaxf(hi, x[i]); }
    *offset = -lo;
    if (hi <= lo) { *step = 0.0f; return; }   /* constant (<= 0) sub-block */
    *step = (hi - lo) / (float)nmax;
    double best_err = INFINITY;
    for (int k = -5; k <= 10; k++) {
        float s = (hi - lo) / ((float)nmax + 0.1f * (float)k);
        float is = 1.0f / s;
        double sq = 0, sx = 0, sqq = 0, sqx = 0;
        int q[QK];
        for (int i = 0; i < n; i++) {
            q[i] = nearest_clamped((x[i] - lo) * is, 0, nmax);
            sq += q[i]; sx += x[i]; sqq += (double)q[i] * q[i]; sqx += (double)q[i] * x[i];
        }
        /* Least squares for x ~ s*q + c (c = -offset), with c kept <= 0. */
        double det = n * sqq - sq * sq;
        double fs, fc;
        if (det > 0) {
            fs = (n * sqx - sq * sx) / det;
            fc = (sx - fs * sq) / n;
        } else { fs = s; fc = lo; }
        if (fc > 0) { fc = 0; fs = sqq > 0 ? sqx / sqq : s; }
        if (!(fs > 0)) continue;
        double err = 0;
        for (int i = 0; i < n; i++) {
            double qq = nearbyint((x[i] - fc) / fs);
            if (qq < 0) qq = 0;
            if (qq > nmax) qq = nmax;
            double e = fs * qq + fc - x[i];
            err += e * e;
        }
        if (err < best_err) { best_err = err; *step = (float)fs; *offset = (float)-fc; }
    }
}

/* Super-block scales for Q4_K/Q5_K: d and dmin as fp16, 6-bit sc and m per
 * sub-block. Fills step/offset with the values the stored fields decode to. */
static void kq_quantize_scales(const float *step, const float *offset, fp16_t *d_out,
                               fp16_t *dmin_out, uint8_t sc[8], uint8_t m[8],
                               float eff_step[8], float eff_offset[8]) {
    float max_step = 0, max_offset = 0;
    for (int j = 0; j < 8; j++) {
        max_step = fmaxf(max_step, step[j]);
        max_offset = fmaxf(max_offset, offset[j]);
    }
    *d_out = scale_to_fp16(max_step / 63.0f);
    *dmin_out = scale_to_fp16(max_offset / 63.0f);
    float d = half(*d_out), dmin = half(*dmin_out);
    float id = inverse_or_zero(d), idmin = inverse_or_zero(dmin);
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)nearest_clamped(step[j] * id, 0, 63);
        m[j] = (uint8_t)nearest_clamped(offset[j] * idmin, 0, 63);
        eff_step[j] = d * (float)sc[j];
        eff_offset[j] = dmin * (float)m[j];
    }
}

/* Nearest quant on the grid {step*q - offset : q = 0..nmax}. */
static int kq_nearest(float x, float step, float offset, int nmax) {
    if (step <= 0.0f) return 0;
    return nearest_clamped((x + offset) / step, 0, nmax);
}

/* Q4_K and Q5_K quantize alike: 8 sub-blocks of 32 on an asymmetric grid
 * with 6-bit scales and mins; Q5_K's grid has 32 steps and the fifth bit goes
 * to qh (NULL for Q4_K, whose quants fit the nibble). One body, so the two
 * cannot drift. */
static void quant_kq(const float *x, fp16_t *d, fp16_t *dmin, uint8_t scales[12], uint8_t *qs, uint8_t *qh) {
    const int nmax = qh ? 31 : 15;
    float step[8], offset[8], eff_step[8], eff_offset[8];
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) fit_step_offset(x + 32 * j, 32, nmax, &step[j], &offset[j]);
    kq_quantize_scales(step, offset, d, dmin, sc, m, eff_step, eff_offset);
    kq_pack_scale_min(scales, sc, m);
    memset(qs, 0, QK_K / 2);
    if (qh) memset(qh, 0, QK_K / 8);
    for (int j = 0; j < 8; j++) {
        for (int l = 0; l < 32; l++) {
            int q = kq_nearest(x[32 * j + l], eff_step[j], eff_offset[j], nmax);
            qs[32 * (j / 2) + l] |= (uint8_t)((j & 1) ? (q & 0xf) << 4 : (q & 0xf));
            if (qh) qh[l] |= (uint8_t)((q >> 4) << j);
        }
    }
}

static void quant_q4_k(const float *x, block_q4_k *b) { quant_kq(x, &b->d, &b->dmin, b->scales, b->qs, NULL); }

static void quant_q5_k(const float *x, block_q5_k *b) { quant_kq(x, &b->d, &b->dmin, b->scales, b->qs, b->qh); }

/* Q6_K: symmetric grid {s*q : q = -32..31} per 16 elements. Candidates put
 * the largest-magnitude value near -32; each is refined by least squares. */
static float fit_step_symmetric(const float *x, int n) {
    float amax, max = signed_absmax(x, n, &amax);
    if (amax == 0.0f) return 0.0f;
    float best_step = max / -32.0f;
    double best_err = INFINITY;
    for (int k = -6; k <= 6; k++) {
        float is = -(32.0f + 0.1f * (float)k) / max;
        double sqx = 0, sqq = 0;
        for (int i = 0; i < n; i++) {
            int q = nearest_clamped(x[i] * is, -32, 31);
            sqx += (double)q * x[i]; sqq += (double)q * q;
        }
        if (sqq == 0) continue;
        double s = sqx / sqq, err = 0;
        for (int i = 0; i < n; i++) {
            double q = nearbyint(x[i] / s);
            if (q < -32) q = -32;
            if (q > 31) q = 31;
            err += (s * q - x[i]) * (s * q - x[i]);
        }
        if (err < best_err) { best_err = err; best_step = (float)s; }
    }
    return best_step;
}

static void quant_q6_k(const float *x, block_q6_k *b) {
    float step[16];
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 16; j++) {
        step[j] = fit_step_symmetric(x + 16 * j, 16);
        if (fabsf(step[j]) > amax) { amax = fabsf(step[j]); max = step[j]; }
    }
    /* The largest step maps to scale -128 (the int8 range is asymmetric). */
    b->d = scale_to_fp16(max / -128.0f);
    float d = half(b->d), id = inverse_or_zero(d);
    for (int j = 0; j < 16; j++) b->scales[j] = (int8_t)nearest_clamped(step[j] * id, -128, 127);
    memset(b->ql, 0, sizeof b->ql);
    memset(b->qh, 0, sizeof b->qh);
    for (int i = 0; i < QK_K; i++) {
        float s = d * (float)b->scales[i / 16];
        int q = s != 0.0f ? nearest_clamped(x[i] / s, -32, 31) : 0;
        q6k_store(b, i, q + 32);
    }
}

void format_quantize_row(int type, const float *src, void *dst, int64_t n) {
    const format_info *f = format_get(type);
    if (!f || n % f->block_elems) return;
    int64_t nb = n / f->block_elems;
    uint8_t *p = dst;
    switch (type) {
    case FMT_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case FMT_F16: for (int64_t i = 0; i < n; i++) ((fp16_t *)dst)[i] = f32_to_fp16(src[i]); break;
    case FMT_BF16: for (int64_t i = 0; i < n; i++) ((bf16_t *)dst)[i] = f32_to_bf16(src[i]); break;
    case FMT_Q8_0: for (int64_t i = 0; i < nb; i++) quant_q8_0(src + i * QK, (block_q8_0 *)p + i); break;
    case FMT_Q4_0: for (int64_t i = 0; i < nb; i++) quant_q4_0(src + i * QK, (block_q4_0 *)p + i); break;
    case FMT_Q4_1: for (int64_t i = 0; i < nb; i++) quant_q4_1(src + i * QK, (block_q4_1 *)p + i); break;
    case FMT_Q5_0: for (int64_t i = 0; i < nb; i++) quant_q5_0(src + i * QK, (block_q5_0 *)p + i); break;
    case FMT_Q5_1: for (int64_t i = 0; i < nb; i++) quant_q5_1(src + i * QK, (block_q5_1 *)p + i); break;
    case FMT_Q4_K: for (int64_t i = 0; i < nb; i++) quant_q4_k(src + i * QK_K, (block_q4_k *)p + i); break;
    case FMT_Q5_K: for (int64_t i = 0; i < nb; i++) quant_q5_k(src + i * QK_K, (block_q5_k *)p + i); break;
    case FMT_Q6_K: for (int64_t i = 0; i < nb; i++) quant_q6_k(src + i * QK_K, (block_q6_k *)p + i); break;
    default: break;
    }
}

/* ---- activations --------------------------------------------------------- */

/* d = amax/127, id = 1/d, q = round-half-even(x * id) clamped to +-127
 * (lrintf in the default rounding mode), sum = sum of q. */
void act_quantize_row(const float *x, act_q8 *out, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        float amax;
        signed_absmax(xb, QK, &amax);
        float d = amax / 127.0f;
        float id = inverse_or_zero(d);
        int32_t sum = 0;
        for (int j = 0; j < QK; j++) {
            int q = nearest_clamped(xb[j] * id, -127, 127);
            out[b].qs[j] = (int8_t)q;
            sum += q;
        }
        out[b].d = d;
        out[b].sum = sum;
    }
}

/* ---- dot products -------------------------------------------------------- */

static int32_t idot32(const int8_t *w, const int8_t *x) {
    int32_t s = 0;
    for (int j = 0; j < QK; j++) s += (int32_t)w[j] * x[j];
    return s;
}

/* Unpacks a 32-block's weight quants into int8 (signed or unsigned values). */
static void unpack_nibbles(const uint8_t *qs, uint32_t qh, int has_qh, int bias, int8_t q[QK]) {
    for (int j = 0; j < QK; j++) {
        int v = nibble_at(qs, j);
        if (has_qh) v |= (int)((qh >> j) & 1) << 4;
        q[j] = (int8_t)(v - bias);
    }
}

float format_dot_q8(int type, const void *w_row, const act_q8 *x, int64_t n) {
    const format_info *f = format_get(type);
    if (!f || !f->uses_act_q8 || n % f->block_elems) return NAN;
    int64_t nb = n / QK;    /* activation blocks */
    float acc = 0.0f;
    int8_t q[QK];
    switch (type) {
    case FMT_Q8_0: {
        const block_q8_0 *w = w_row;
        for (int64_t b = 0; b < nb; b++)
            acc = fmaf(half(w[b].d) * x[b].d, (float)idot32(w[b].qs, x[b].qs), acc);
        break;
    }
    case FMT_Q4_0: {
        const block_q4_0 *w = w_row;
        for (int64_t b = 0; b < nb; b++) {
            unpack_nibbles(w[b].qs, 0, 0, 8, q);
            acc = fmaf(half(w[b].d) * x[b].d, (float)idot32(q, x[b].qs), acc);
        }
        break;
    }
    case FMT_Q5_0: {
        const block_q5_0 *w = w_row;
        for (int64_t b = 0; b < nb; b++) {
            unpack_nibbles(w[b].qs, read_u32_le(w[b].qh), 1, 16, q);
            acc = fmaf(half(w[b].d) * x[b].d, (float)idot32(q, x[b].qs), acc);
        }
        break;
    }
    case FMT_Q4_1: {
        const block_q4_1 *w = w_row;
        for (int64_t b = 0; b < nb; b++) {
            unpack_nibbles(w[b].qs, 0, 0, 0, q);
            acc = fmaf(half(w[b].d) * x[b].d, (float)idot32(q, x[b].qs), acc);
            acc = fmaf(half(w[b].m) * x[b].d, (float)x[b].sum, acc);
        }
        break;
    }
    case FMT_Q5_1: {
        const block_q5_1 *w = w_row;
        for (int64_t b = 0; b < nb; b++) {
            unpack_nibbles(w[b].qs, read_u32_le(w[b].qh), 1, 0, q);
            acc = fmaf(half(w[b].d) * x[b].d, (float)idot32(q, x[b].qs), acc);
            acc = fmaf(half(w[b].m) * x[b].d, (float)x[b].sum, acc);
        }
        break;
    }
    case FMT_Q4_K:
    case FMT_Q5_K: {
        for (int64_t b = 0; b < nb; b++) {
            int64_t sb = b / 8;
            int j = (int)(b % 8), sc, m;
            const uint8_t *scales;
            float d, dmin;
            if (type == FMT_Q4_K) {
                const block_q4_k *w = (const block_q4_k *)w_row + sb;
                for (int l = 0; l < 32; l++) q[l] = (int8_t)q4k_quant(w->qs, j, l);
                scales = w->scales; d = half(w->d); dmin = half(w->dmin);
            } else {
                const block_q5_k *w = (const block_q5_k *)w_row + sb;
                for (int l = 0; l < 32; l++) q[l] = (int8_t)q5k_quant(w, j, l);
                scales = w->scales; d = half(w->d); dmin = half(w->dmin);
            }
            kq_scale_min(scales, j, &sc, &m);
            acc = fmaf(d * x[b].d, (float)(sc * idot32(q, x[b].qs)), acc);
            acc = fmaf(dmin * x[b].d, (float)(-(m * x[b].sum)), acc);
        }
        break;
    }
    case FMT_Q6_K: {
        for (int64_t b = 0; b < nb; b++) {
            const block_q6_k *w = (const block_q6_k *)w_row + b / 8;
            int k = (int)(b % 8);
            int32_t lo = 0, hi = 0;
            for (int l = 0; l < 16; l++) {
                lo += (q6k_quant(w, 32 * k + l) - 32) * x[b].qs[l];
                hi += (q6k_quant(w, 32 * k + 16 + l) - 32) * x[b].qs[16 + l];
            }
            int32_t isum = w->scales[2 * k] * lo + w->scales[2 * k + 1] * hi;
            acc = fmaf(half(w->d) * x[b].d, (float)isum, acc);
        }
        break;
    }
    default: return NAN;
    }
    return acc;
}

float format_dot_f32(int type, const void *w_row, const float *x, int64_t n) {
    const format_info *f = format_get(type);
    if (!f || n % f->block_elems) return NAN;
    float acc = 0.0f;
    switch (type) {
    case FMT_F32: {
        const float *w = w_row;
        for (int64_t i = 0; i < n; i++) acc = fmaf(w[i], x[i], acc);
        return acc;
    }
    case FMT_F16: {
        const fp16_t *w = w_row;
        for (int64_t i = 0; i < n; i++) acc = fmaf(fp16_to_f32(w[i]), x[i], acc);
        return acc;
    }
    case FMT_BF16: {
        const bf16_t *w = w_row;
        for (int64_t i = 0; i < n; i++) acc = fmaf(bf16_to_f32(w[i]), x[i], acc);
        return acc;
    }
    default: {
        float y[QK_K];
        int be = f->block_elems;
        for (int64_t bi = 0; bi < n / be; bi++) {
            dequant_block(type, w_row, bi, y);
            for (int j = 0; j < be; j++) acc = fmaf(y[j], x[bi * be + j], acc);
        }
        return acc;
    }
    }
}
