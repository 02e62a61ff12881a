/* Private to kernels/: what one CPU path provides, the activations a matmul
 * prepares once, and the packed weight layout the x86 paths read.
 *
 * Packed layout ("panels"). Rows are grouped in panels of KP_ROWS = 16 so
 * that one 32-bit lane of a 512-bit vector holds one output row: a weight
 * vector is 16 rows x 4 consecutive k (int8, for vpdpbusd) or 16 rows x 1 k
 * (float), and one broadcast of 4 activation bytes (or 1 float) feeds all 16
 * rows. Each panel takes panel_bytes (padded to 64): in the plain variant
 * its own contiguous range, the quants of every k-unit, then the scales of
 * every k-unit (so vector loads stay 64-byte aligned); see "pairs
 * interleaved" below for the other. Missing rows of the last panels are zero.
 *
 * A k-unit is a block of 32 (Q4_0 .. Q8_0), a super-block of 256 (K-quants)
 * or one column (F32/F16/BF16). Inside a unit, per 32-k block:
 *   nibbles (256 B): 4 chunks c of 64 bytes; byte 4r+i of chunk c has the
 *           low nibble q[r][8c+i] and the high nibble q[r][8c+4+i];
 *   bit planes (64 B each): 8 little-endian uint64 j; bit 4r+i of word j
 *           is one bit of q[r][4j+i] (bit 4 for Q5, bits 4 and 5 for Q6_K);
 *   bytes (512 B, Q8_0): 8 chunks j; byte 4r+i = q[r][4j+i] ^ 0x80.
 * So every weight is stored unsigned (the format's offset, 8/16/32/128, is
 * applied through the activation sums), which is what vpdpbusd takes.
 *
 * Q6_K's two high bits take one of two forms (kpack.q6_crumbs, chosen by the
 * path that packs): two bit planes as above (bits 4 and 5), or "crumbs":
 * 2 x 64 B, H0 then H1, where bits 2t..2t+1 of byte 4r+i of H_h are bits 4..5
 * of q[r][4(4h+t)+i]. One crumb vector feeds four weight vectors through a
 * shift and an and, cheaper on x86 than four mask-register loads.
 *
 * Pairs interleaved (kpack.pairs_interleaved, chosen by the path that packs,
 * the AVX-512 one). A work item is a pair of panels, and a tile that reads
 * both panels would otherwise walk four streams at once: the quants and the
 * scales of each panel, a panel apart. With this variant the pair's region
 * holds, unit after unit: panel 0's quants, panel 1's quants, panel 0's
 * scales, panel 1's scales, so a tile reads one forward stream. Measured
 * with the Q4_0 tile's arithmetic on a 1 GiB stream (2 threads): about 35
 * GB/s over four streams against 48 over one, the same as a plain read; the
 * four streams alone, without the arithmetic, read 47. The paths that read
 * one panel per tile (AVX2, NEON) keep the panels apart.
 *
 * Scales per unit (fp16 as in the file, so nothing is lost and get_row can
 * rebuild the original blocks exactly):
 *   Q4_0, Q5_0, Q8_0: d[16];   Q4_1, Q5_1: d[16], m[16];
 *   Q4_K, Q5_K: d[16], dmin[16], sc[8][16], mn[8][16] (6-bit values in bytes);
 *   Q6_K: d[16], sc[16][16] (int8).
 */
#ifndef HEARTH_KERN_PATH_H
#define HEARTH_KERN_PATH_H

#include "kernels/kernels.h"

#define KP_ROWS 16          /* rows in a panel */
#define KP_UNIT_ROWS 32     /* rows in one work item handed to a thread (2 panels) */

typedef struct kpack {
    int type;
    int64_t n_in, n_out;
    int64_t n_panels;       /* even: work items are whole pairs of panels */
    int64_t units;          /* k-units per row */
    size_t q_bytes;         /* quant bytes of one unit of one panel */
    size_t s_bytes;         /* scale bytes of one unit of one panel */
    size_t panel_bytes;     /* units * (q_bytes + s_bytes), rounded up to 64 */
    bool q6_crumbs;         /* Q6_K high bits as crumbs, not planes */
    bool pairs_interleaved; /* the two panels of a pair unit by unit (see above) */
    uint8_t *data;          /* n_panels * panel_bytes, 64-byte aligned */
    size_t alloc_bytes;
} kpack;

/* Bytes from one unit's quants (or float column) of a panel to the next. */
static inline size_t kp_unit_stride(const kpack *p) {
    return p->pairs_interleaved ? 2 * (p->q_bytes + p->s_bytes) : p->q_bytes;
}
static inline const uint8_t *kp_quants(const kpack *p, int64_t panel, int64_t unit) {
    if (p->pairs_interleaved)
        return p->data + (size_t)(panel & ~(int64_t)1) * p->panel_bytes + (size_t)unit * kp_unit_stride(p)
               + (size_t)(panel & 1) * p->q_bytes;
    return p->data + (size_t)panel * p->panel_bytes + (size_t)unit * p->q_bytes;
}
static inline const uint8_t *kp_scales(const kpack *p, int64_t panel, int64_t unit) {
    if (p->pairs_interleaved)
        return kp_quants(p, panel & ~(int64_t)1, unit) + 2 * p->q_bytes + (size_t)(panel & 1) * p->s_bytes;
    return p->data + (size_t)panel * p->panel_bytes + (size_t)p->units * p->q_bytes + (size_t)unit * p->s_bytes;
}

/* Activations as one matmul prepared them: M rows of n_in. */
typedef struct kern_act {
    int M;
    int64_t n_in;
    const float *x;         /* float rows (F32/F16/BF16 weights) */
    const act_q8 *q;        /* M * (n_in / QK) blocks, row-major (integer formats) */
    const int32_t *slo;     /* same shape: sum of qs[0..15] of each block (Q6_K's
                             * scales cover 16 elements, so its offset needs it) */
    const struct act_extra *ext;   /* same shape, see below */
    uint64_t id;            /* unique per kern_matmul_n call (0: none), so a path may
                             * keep what it derives from these activations for the
                             * call's later rows calls on the same thread */
} kern_act;

/* Per activation block, what the packed kernels would otherwise rebuild from
 * scalars in every tile, computed once per matmul for the weight's format:
 *   off0: -offset * sum (Q4_0: 8, Q5_0: 16, Q8_0: 128 (unsigned weights));
 *         Q6_K: -32 * sum of qs[0..15];
 *   off1: Q6_K: -32 * sum of qs[16..31]; else 0;
 *   fs:   (float)sum (Q4_1, Q5_1), (float)-sum (Q4_K, Q5_K), else 0. */
typedef struct act_extra {
    int32_t off0, off1;
    float fs;
    int32_t pad;
} act_extra;

/* The act_extra of nb activation blocks for a weight of `type` (slo: the
 * blocks' half sums), as kern_matmul fills them. */
void kern_act_extra(int type, const act_q8 *q, const int32_t *slo, act_extra *e, int64_t nb);

typedef struct kern_path {
    const char *name;
    /* True if this path computes `type` from the panel layout; other types
     * run the scalar code on the original layout. */
    bool (*packs)(int type);
    /* y[m * n_out + n] for every m < M and n in [n0, n1); n0 is a multiple of
     * KP_UNIT_ROWS. The weight is packed (or, for the scalar path, not).
     * worker: the pool worker running it (0 .. threads - 1), so a path can
     * hand some workers one unit and the rest another. */
    void (*rows)(const hweight *w, const kern_act *a, float *y, int64_t n0, int64_t n1, int worker);
    /* Optional: act_quantize_row for one row, bit-identical to it, plus the
     * half-block sums. NULL: the reference is used. */
    void (*quantize)(const float *x, act_q8 *q, int32_t *slo, int64_t n);
    /* Layout variants this path reads: Q6_K high bits as crumbs; the two
     * panels of a pair interleaved unit by unit. */
    bool q6_crumbs;
    bool pairs_interleaved;
} kern_path;

extern const kern_path kern_path_scalar;
#if defined(__x86_64__)
extern const kern_path kern_path_avx2;
extern const kern_path kern_path_avx512;
/* The AVX-512 activation quantizer (the AMX path's too). */
void kern_avx512_quantize(const float *x, act_q8 *q, int32_t *slo, int64_t n);
#endif
#if defined(__aarch64__)
/* kernels/kern_neon.c (always built on aarch64). Not weak: a weak reference
 * does not pull an object out of a static library, so the path would be
 * silently missing from every test and binary. */
extern const kern_path kern_path_neon;
/* The NEON activation quantizer (the SME2 path's too). */
void kern_neon_quantize(const float *x, act_q8 *q, int32_t *slo, int64_t n);
/* The probe's answer for i8mm (SMMLA): the NEON path runs its GEMM with it
 * only when this says yes. */
bool kernels_cpu_has_i8mm(void);
#endif

/* The matmul part of a path's kernel table, or NULL when this build has none. */
const kern_path *kern_path_get(kern_path_id id);
/* What the CPU probe says of a path (kernels/cpu_features.c). */
bool kernels_cpu_can(kern_path_id p);

/* Pack w (from w->data) in a path's layout variants; NULL on allocation
 * failure or for a type or shape the layout does not take. */
kpack *kern_pack(const hweight *w, bool q6_crumbs, bool pairs_interleaved);
void kern_pack_free(kpack *p);


/* The AVX-512 tiles prefetch this far ahead in each panel's quant stream. The
 * hardware prefetcher keeps only a short distance ahead of demand, so once a
 * few activation rows make a tile compute-heavy (M = 4: prefill chunks beside
 * generating slots), memory and arithmetic stop overlapping and the two costs
 * add up. Measured (bench_matmul, Q4_0 65536 x 2048, AVX-512, one thread):
 * M=4 4.1 -> 2.6 ms, M=1 unchanged; the AVX2 tiles are compute-bound at M=4
 * and gained nothing. Prefetching past the end of the buffer is harmless (a
 * prefetch never faults). */
#define KP_PREFETCH_BYTES 4096

/* K-quants carry per-super-block scales and mins. */
static inline bool kp_is_kquant(int fmt) { return fmt == FMT_Q4_K || fmt == FMT_Q5_K || fmt == FMT_Q6_K; }

/* Quant bytes of one 32-k block of a panel: nibbles 256, plus a bit plane
 * (64) for Q5, two (128) for Q6_K, or 512 plain bytes for Q8_0. */
static inline int kp_qbytes32(int fmt) {
    switch (fmt) {
    case FMT_Q8_0: return 512;
    case FMT_Q5_0: case FMT_Q5_1: case FMT_Q5_K: return 320;
    case FMT_Q6_K: return 384;
    default: return 256;
    }
}

/* The activations of a tile's rows m0 .. m0+MR-1: each row's q8 blocks and
 * their extras. Every x86 tile starts this way; inline, once per tile, so it
 * adds nothing to the inner loops. */
static inline void kp_tile_rows(const kern_act *a, int m0, int MR, const act_q8 **xr, const act_extra **ext) {
    const int64_t nb = a->n_in / QK;
    for (int m = 0; m < MR; m++) {
        xr[m] = a->q + (size_t)(m0 + m) * nb;
        ext[m] = a->ext + (size_t)(m0 + m) * nb;
    }
}

/* The float rows m0 .. m0+MR-1 of a tile of a float format. */
static inline void kp_tile_xrows(const kern_act *a, int m0, int MR, const float **xr) {
    for (int m = 0; m < MR; m++) xr[m] = a->x + (size_t)(m0 + m) * a->n_in;
}

/* Float weights take the tiles' float loop, the rest the integer one. */
static inline bool kp_is_float(int fmt) { return fmt == FMT_F32 || fmt == FMT_F16 || fmt == FMT_BF16; }

/* An activation block's scale d from its amax and the factor id the lanes
 * multiply by, as act_quantize_row computes them; one place, so every
 * path's quantizer stays bit-identical to the reference. */
static inline float kp_act_scale(float amax, float *id) {
    float d = amax / 127.0f;
    *id = d != 0.0f ? 1.0f / d : 0.0f;
    return d;
}

/* Block b's scale, quant sum and half sum (s0: quants 0-15, s1: 16-31). */
static inline void kp_act_store(act_q8 *q, int32_t *slo, int64_t b, float d, int32_t s0, int32_t s1) {
    q[b].d = d;
    q[b].sum = s0 + s1;
    slo[b] = s0;
}

/* Every format the panel layout holds; each SIMD path computes all of them. */
static inline bool kp_packs_all(int type) {
    switch (type) {
    case FMT_Q4_0: case FMT_Q4_1: case FMT_Q5_0: case FMT_Q5_1: case FMT_Q8_0:
    case FMT_Q4_K: case FMT_Q5_K: case FMT_Q6_K: case FMT_F32: case FMT_F16: case FMT_BF16:
        return true;
    default:
        return false;
    }
}

/* Defines a path's `rows` entry: a switch on the weight's type that calls
 * FN(w, a, y, n0, n1, FMT) with FMT a constant, so an always-inline FN is
 * specialised once per format. */
#define KP_DEFINE_ROWS(NAME, FN) \
    static void NAME(const hweight *w, const kern_act *a, float *y, int64_t n0, int64_t n1, int worker) { \
        (void)worker; \
        switch (w->type) { \
        case FMT_Q4_0: FN(w, a, y, n0, n1, FMT_Q4_0); break; \
        case FMT_Q4_1: FN(w, a, y, n0, n1, FMT_Q4_1); break; \
        case FMT_Q5_0: FN(w, a, y, n0, n1, FMT_Q5_0); break; \
        case FMT_Q5_1: FN(w, a, y, n0, n1, FMT_Q5_1); break; \
        case FMT_Q8_0: FN(w, a, y, n0, n1, FMT_Q8_0); break; \
        case FMT_Q4_K: FN(w, a, y, n0, n1, FMT_Q4_K); break; \
        case FMT_Q5_K: FN(w, a, y, n0, n1, FMT_Q5_K); break; \
        case FMT_Q6_K: FN(w, a, y, n0, n1, FMT_Q6_K); break; \
        case FMT_F32: FN(w, a, y, n0, n1, FMT_F32); break; \
        case FMT_F16: FN(w, a, y, n0, n1, FMT_F16); break; \
        case FMT_BF16: FN(w, a, y, n0, n1, FMT_BF16); break; \
        default: break; \
        } \
    }

#endif
