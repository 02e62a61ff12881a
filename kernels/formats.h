/* Weight formats as GGUF stores them: type ids, block layouts, and the
 * scalar reference for each (dequantize, quantize, dot products).
 * The block layouts are the on-disk ones; nothing here reorders them. */
#ifndef HEARTH_FORMATS_H
#define HEARTH_FORMATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* GGUF tensor type ids (the numbers are the file format's). */
enum {
    FMT_F32 = 0, FMT_F16 = 1, FMT_Q4_0 = 2, FMT_Q4_1 = 3,
    FMT_Q5_0 = 6, FMT_Q5_1 = 7, FMT_Q8_0 = 8, FMT_Q8_1 = 9,
    FMT_Q2_K = 10, FMT_Q3_K = 11, FMT_Q4_K = 12, FMT_Q5_K = 13,
    FMT_Q6_K = 14, FMT_Q8_K = 15, FMT_BF16 = 30,
    FMT_COUNT_MAX = 64
};

#define QK 32      /* elements in a small block (Q4_0 .. Q8_0) and in an activation block */
#define QK_K 256   /* elements in a K-quant super-block */

typedef uint16_t fp16_t;
typedef uint16_t bf16_t;

typedef struct { fp16_t d; uint8_t qs[QK / 2]; } block_q4_0;                 /* 18 bytes */
typedef struct { fp16_t d, m; uint8_t qs[QK / 2]; } block_q4_1;              /* 20 bytes */
typedef struct { fp16_t d; uint8_t qh[4]; uint8_t qs[QK / 2]; } block_q5_0;  /* 22 bytes */
typedef struct { fp16_t d, m; uint8_t qh[4]; uint8_t qs[QK / 2]; } block_q5_1; /* 24 bytes */
typedef struct { fp16_t d; int8_t qs[QK]; } block_q8_0;                      /* 34 bytes */
typedef struct { fp16_t d, dmin; uint8_t scales[12]; uint8_t qs[QK_K / 2]; } block_q4_k;               /* 144 */
typedef struct { fp16_t d, dmin; uint8_t scales[12]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_k; /* 176 */
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; fp16_t d; } block_q6_k; /* 210 */

/* Activations quantized for integer dot products (W x A8): blocks of 32
 * int8 with a float scale and the sum of the quants (for formats with a
 * min/offset term). One layout serves every weight format. */
typedef struct { float d; int32_t sum; int8_t qs[QK]; } act_q8;             /* 40 bytes */

typedef struct {
    const char *name;     /* "Q4_K" */
    int block_elems;      /* elements per block */
    size_t block_bytes;   /* bytes per block */
    bool uses_act_q8;     /* dot products take act_q8 activations (else float) */
} format_info;

/* NULL for a type hearth does not support (the caller names it in the error). */
const format_info *format_get(int type);
/* Name for any type id, supported or not ("type 17" style for unknown ids). */
const char *format_name(int type);
/* Bytes of one row of n elements; 0 when n is not a multiple of the block size. */
size_t format_row_bytes(int type, int64_t n);

/* fp16 / bf16 conversions (exact, round-to-nearest-even). */
float fp16_to_f32(fp16_t h);
fp16_t f32_to_fp16(float f);
float bf16_to_f32(bf16_t h);
bf16_t f32_to_bf16(float f);

/* Scalar reference: n must be a multiple of the format's block size. */
void format_dequantize_row(int type, const void *src, float *dst, int64_t n);
void format_quantize_row(int type, const float *src, void *dst, int64_t n);

/* Activation quantization (n multiple of QK). */
void act_quantize_row(const float *x, act_q8 *out, int64_t n);

/* Reference dot products of one weight row with one activation row.
 * For formats with uses_act_q8 the activations are act_q8 blocks,
 * otherwise float. The order of accumulation here is the definition the
 * fast paths are tested against. */
float format_dot_q8(int type, const void *w_row, const act_q8 *x, int64_t n);
float format_dot_f32(int type, const void *w_row, const float *x, int64_t n);

#endif
