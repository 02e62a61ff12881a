/* The SME2 path: the NEON path's panels (kern_path.h, plain variant, Q6_K
 * high bits as planes) computed on the streaming matrix unit by the pool
 * workers below sme_workers(); the other workers, and the float formats,
 * run the NEON rows. Called only after the probe said SME2 with a 512-bit
 * streaming vector (SME_SVL_BYTES), the length the code below assumes.
 *
 * One 64-byte chunk of a panel's 32-k block is 16 rows x 4 k (one 32-bit
 * lane a row), which is exactly one operand of a 4-way int8 outer product:
 *  - GEMM (M > 1): USMOPA (unsigned weight bytes x signed activation bytes)
 *    of that chunk against 16 activation rows x the same 4 k accumulates a
 *    16 x 16 int32 ZA tile; 8 of them give one block's exact sums. Up to 4
 *    blocks are in flight in ZA0-ZA3 (2 for Q6_K, whose two 16-element
 *    halves take a tile each). The activations are laid out as 16-row x
 *    4-k vectors (the transpose the operand needs) once per matmul call on
 *    each SME worker (kern_act.id), kept for the call's later rows calls.
 *  - GEMV (M = 1): the streaming SDOT by element multiplies the chunk by 4
 *    activation bytes replicated in every 128-bit segment (the 16 lanes
 *    are the 16 rows), the NEON tile's vdotq_laneq four times as wide. The
 *    nibbles are expanded in registers (AND / LSR), so it reads the packed
 *    half bytes; their value needs no table (LUTI4) since the format's
 *    offset is applied through the activation sums.
 * Weights stay unsigned; the offset (8, 16, 128, Q6_K's 32 per half) is
 * added as the activation-side constant act_extra holds, so each block's
 * int32 sum is the NEON path's integer, and fold() below folds it into the
 * float accumulators with NEON's operations in NEON's order (one multiply,
 * one fused multiply-add per term, blocks in order). The bits equal the
 * NEON path's and the scalar oracle's whatever M, split or worker. */
#include "kernels/kern_sme.h"
#include "runtime/pool.h"
#include "runtime/thread_scratch.h"

#include <arm_sme.h>
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SINLINE static inline __attribute__((always_inline))
#define STREAMING __arm_streaming

uint64_t sme_svl_bytes(void) { return svcntsb(); }

/* ---- workers and counters ------------------------------------------------ */

static _Atomic int workers = -1;
static _Atomic uint64_t tile_runs, gemv_runs;

uint64_t sme_tile_runs(void) { return atomic_load_explicit(&tile_runs, memory_order_relaxed); }
uint64_t sme_gemv_runs(void) { return atomic_load_explicit(&gemv_runs, memory_order_relaxed); }

static void workers_init(void) {
    int cores = pool_default_threads();
    int n = cores - 1 < 2 ? cores - 1 : 2;
    if (n < 1) n = 1;
    const char *e = getenv("HEARTH_SME_WORKERS");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end || v < 0 || v > 1024)
            fprintf(stderr, "hearth: HEARTH_SME_WORKERS=%s is not a count 0..1024; using %d\n", e, n);
        else
            n = (int)v;
    }
    int unset = -1;
    atomic_compare_exchange_strong(&workers, &unset, n);
}

int sme_workers(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, workers_init);
    return atomic_load(&workers);
}

void sme_set_workers(int n) {
    sme_workers();   /* the environment is read first, so it cannot override this later */
    atomic_store(&workers, n < 0 ? 0 : n);
}

/* ---- per-thread scratch: the transposed activations ------------------------ */

/* Its tag is the matmul call id whose activations it holds (0: nothing),
 * which that call's later rows calls on this thread reuse. */
static thread_scratch_slot scratch_slot;

/* ---- streaming helpers ------------------------------------------------------ */

/* kern_path.h's format facts, callable from streaming code. */
SINLINE int blocks_per_unit(int fmt) __arm_streaming_compatible {
    return fmt == FMT_Q4_K || fmt == FMT_Q5_K || fmt == FMT_Q6_K ? 8 : 1;
}
SINLINE int qbytes32(int fmt) __arm_streaming_compatible {
    return fmt == FMT_Q8_0 ? 512 : fmt == FMT_Q6_K ? 384
         : fmt == FMT_Q5_0 || fmt == FMT_Q5_1 || fmt == FMT_Q5_K ? 320 : 256;
}

/* The panel layout's pointers (plain variant), for streaming code, which
 * must not call the non-streaming helpers of kern_path.h. */
typedef struct {
    const uint8_t *data;
    size_t panel_bytes, q_bytes, s_bytes;
    int64_t units;
} panels;

SINLINE const uint8_t *pq(const panels *p, int64_t pan, int64_t u) STREAMING {
    return p->data + (size_t)pan * p->panel_bytes + (size_t)u * p->q_bytes;
}
SINLINE const uint8_t *ps(const panels *p, int64_t pan, int64_t u) STREAMING {
    return p->data + (size_t)pan * p->panel_bytes + (size_t)p->units * p->q_bytes + (size_t)u * p->s_bytes;
}

/* The bit-plane expansion: byte l of a 64-bit plane word broadcast takes
 * byte l / 8 of the word (PC_IDX, made once per kernel call) and tests bit
 * l % 8 (PC_BIT, rebuilt where used: the compiler hoists it). */
#define PC_IDX svlsr_n_u8_x(svptrue_b8(), svindex_u8(0, 1), 3)
#define PC_BIT svlsl_u8_x(svptrue_b8(), svdup_n_u8(1), svand_n_u8_x(svptrue_b8(), svindex_u8(0, 1), 7))

SINLINE svuint8_t plane_setup(void) STREAMING { return PC_IDX; }

/* v | (bit where the plane word at p has a 1 for that byte). */
SINLINE svuint8_t add_plane(svuint8_t v, const uint8_t *p, uint8_t bit, svuint8_t pc) STREAMING {
    svbool_t pt = svptrue_b8();
    uint64_t word;
    __builtin_memcpy(&word, p, 8);
    svuint8_t w = svtbl_u8(svreinterpret_u8_u64(svdup_n_u64(word)), pc);
    svbool_t on = svcmpne_n_u8(pt, svand_u8_x(pt, w, PC_BIT), 0);
    return svorr_n_u8_m(on, v, bit);
}

/* The weights of k-group j (k 4j..4j+3, 16 rows x 4 bytes) of the 32-k
 * block at q, unsigned as stored (Q8_0: q + 128). */
SINLINE svuint8_t group(const uint8_t *q, int j, int fmt, svuint8_t pc) STREAMING {
    svbool_t pt = svptrue_b8();
    if (fmt == FMT_Q8_0) return svld1_u8(pt, q + 64 * j);
    svuint8_t v = svld1_u8(pt, q + 64 * (j / 2));
    v = j % 2 ? svlsr_n_u8_x(pt, v, 4) : svand_n_u8_x(pt, v, 0x0f);
    if (fmt == FMT_Q5_0 || fmt == FMT_Q5_1 || fmt == FMT_Q5_K || fmt == FMT_Q6_K) v = add_plane(v, q + 256 + 8 * j, 16, pc);
    if (fmt == FMT_Q6_K) v = add_plane(v, q + 320 + 8 * j, 32, pc);
    return v;
}

/* Per-unit fp16 fields of the 16 rows at s as floats. */
SINLINE svfloat32_t load_h(const uint8_t *s) STREAMING {
    svbool_t p = svptrue_b32();
    return svcvt_f32_f16_x(p, svreinterpret_f16_u32(svld1uh_u32(p, (const uint16_t *)(const void *)s)));
}

/* The weight-side values of one block (kern_neon.c's wvals). */
SINLINE void load_wv(const uint8_t *s, int bi, int fmt, svfloat32_t *d, svfloat32_t *e, svint32_t *sc,
                     svint32_t *sc2, svint32_t *mn) STREAMING {
    svbool_t p = svptrue_b32();
    bool has_e = fmt == FMT_Q4_1 || fmt == FMT_Q5_1 || fmt == FMT_Q4_K || fmt == FMT_Q5_K;
    *d = load_h(s);
    *e = has_e ? load_h(s + 32) : *d;
    *sc = *sc2 = *mn = svdup_n_s32(0);
    if (fmt == FMT_Q4_K || fmt == FMT_Q5_K) {
        *sc = svreinterpret_s32_u32(svld1ub_u32(p, s + 64 + 16 * bi));
        *mn = svreinterpret_s32_u32(svld1ub_u32(p, s + 192 + 16 * bi));
    } else if (fmt == FMT_Q6_K) {
        *sc = svld1sb_s32(p, (const int8_t *)(s + 32 + 32 * bi));
        *sc2 = svld1sb_s32(p, (const int8_t *)(s + 48 + 32 * bi));
    }
}

/* One block into acc, lane by lane, with kern_neon.c's fold(): the same
 * multiplies and fused multiply-adds in the same order. xd, xsum: the
 * activation row's block scale and sum. */
SINLINE svfloat32_t fold(svfloat32_t acc, int fmt, svint32_t isum, svint32_t isum2, svfloat32_t d, svfloat32_t e,
                         svint32_t sc, svint32_t sc2, svint32_t mn, float xd, int32_t xsum) STREAMING {
    svbool_t p = svptrue_b32();
    svfloat32_t vxd = svdup_n_f32(xd);
    switch (fmt) {
    case FMT_Q6_K: {
        svint32_t i = svmla_s32_x(p, svmul_s32_x(p, sc, isum), sc2, isum2);
        return svmla_f32_x(p, acc, svmul_f32_x(p, d, vxd), svcvt_f32_s32_x(p, i));
    }
    case FMT_Q4_K: case FMT_Q5_K:
        acc = svmla_f32_x(p, acc, svmul_f32_x(p, d, vxd), svcvt_f32_s32_x(p, svmul_s32_x(p, sc, isum)));
        return svmla_f32_x(p, acc, svmul_f32_x(p, e, vxd),
                           svcvt_f32_s32_x(p, svmul_s32_x(p, mn, svdup_n_s32(-xsum))));
    case FMT_Q4_1: case FMT_Q5_1:
        acc = svmla_f32_x(p, acc, svmul_f32_x(p, d, vxd), svcvt_f32_s32_x(p, isum));
        return svmla_f32_x(p, acc, svmul_f32_x(p, e, vxd), svcvt_f32_s32_x(p, svdup_n_s32(xsum)));
    default:   /* Q4_0, Q5_0, Q8_0 */
        return svmla_f32_x(p, acc, svmul_f32_x(p, d, vxd), svcvt_f32_s32_x(p, isum));
    }
}

/* ---- GEMV: M = 1, streaming SDOT ---------------------------------------------- */

/* isum += groups [j0, j1) of the block at q . the activation block x. */
SINLINE svint32_t dot_groups(svint32_t isum, const uint8_t *q, const act_q8 *x, int fmt, int j0, int j1,
                             svuint8_t pc) STREAMING {
    svbool_t pt = svptrue_b8();
    for (int j = j0; j < j1; j += 2) {
        /* k 4j .. 4j+7 are 32-bit elements (j % 4), (j % 4) + 1 of the quadword j / 4. */
        svint8_t av = svld1rq_s8(pt, x->qs + 16 * (j / 4));
        svuint8_t w0 = group(q, j, fmt, pc), w1 = group(q, j + 1, fmt, pc);
        if (fmt == FMT_Q8_0) {   /* signed for SDOT: q = stored ^ 0x80 */
            w0 = sveor_n_u8_x(pt, w0, 0x80);
            w1 = sveor_n_u8_x(pt, w1, 0x80);
        }
        if (j % 4 == 0) {
            isum = svdot_lane_s32(isum, svreinterpret_s8_u8(w0), av, 0);
            isum = svdot_lane_s32(isum, svreinterpret_s8_u8(w1), av, 1);
        } else {
            isum = svdot_lane_s32(isum, svreinterpret_s8_u8(w0), av, 2);
            isum = svdot_lane_s32(isum, svreinterpret_s8_u8(w1), av, 3);
        }
    }
    return isum;
}

SINLINE void gemv_fmt(const panels *pk, const kern_act *a, float *y, int64_t N, int64_t pan0, int64_t pan1,
                      int fmt) STREAMING {
    const int bpu = blocks_per_unit(fmt), qb = qbytes32(fmt);
    const svuint8_t pc = plane_setup();
    for (int64_t pan = pan0; pan < pan1; pan++) {
        svfloat32_t acc = svdup_n_f32(0.0f);
        for (int64_t u = 0; u < pk->units; u++) {
            const uint8_t *s = ps(pk, pan, u), *qu = pq(pk, pan, u);
            for (int bi = 0; bi < bpu; bi++) {
                const int64_t b = u * bpu + bi;
                const act_q8 *x = a->q + b;
                const act_extra *ex = a->ext + b;
                const uint8_t *q = qu + qb * bi;
                svfloat32_t d, e;
                svint32_t sc, sc2, mn, ia, ib;
                load_wv(s, bi, fmt, &d, &e, &sc, &sc2, &mn);
                if (fmt == FMT_Q6_K) {
                    ia = dot_groups(svdup_n_s32(ex->off0), q, x, fmt, 0, 4, pc);
                    ib = dot_groups(svdup_n_s32(ex->off1), q, x, fmt, 4, 8, pc);
                } else {
                    /* Q8_0's flipped weights carry no offset; the others' is off0 */
                    ia = dot_groups(svdup_n_s32(fmt == FMT_Q8_0 ? 0 : ex->off0), q, x, fmt, 0, 8, pc);
                    ib = ia;
                }
                acc = fold(acc, fmt, ia, ib, d, e, sc, sc2, mn, x->d, x->sum);
            }
        }
        int64_t left = N - pan * KP_ROWS;
        svst1_f32(svwhilelt_b32_s64(0, left < 16 ? left : 16), y + pan * KP_ROWS, acc);
    }
}

__arm_locally_streaming static void gemv(const panels *pk, const kern_act *a, float *y, int64_t N, int64_t pan0,
                                         int64_t pan1, int fmt) {
    switch (fmt) {
    case FMT_Q4_0: gemv_fmt(pk, a, y, N, pan0, pan1, FMT_Q4_0); break;
    case FMT_Q4_1: gemv_fmt(pk, a, y, N, pan0, pan1, FMT_Q4_1); break;
    case FMT_Q5_0: gemv_fmt(pk, a, y, N, pan0, pan1, FMT_Q5_0); break;
    case FMT_Q5_1: gemv_fmt(pk, a, y, N, pan0, pan1, FMT_Q5_1); break;
    case FMT_Q8_0: gemv_fmt(pk, a, y, N, pan0, pan1, FMT_Q8_0); break;
    case FMT_Q4_K: gemv_fmt(pk, a, y, N, pan0, pan1, FMT_Q4_K); break;
    case FMT_Q5_K: gemv_fmt(pk, a, y, N, pan0, pan1, FMT_Q5_K); break;
    case FMT_Q6_K: gemv_fmt(pk, a, y, N, pan0, pan1, FMT_Q6_K); break;
    default: break;
    }
}

/* ---- GEMM: M > 1, SMOPA tiles ------------------------------------------------- */

/* The activations of 16-row tile t, block b, k-group j: 64 bytes, byte 4m+i
 * = qs[4j+i] of row 16t+m (0 past M). Made once per matmul call and worker. */
static void transpose_acts(const kern_act *a, uint8_t *xt, int tiles) {
    const int64_t nb = a->n_in / QK;
    for (int t = 0; t < tiles; t++)
        for (int64_t b = 0; b < nb; b++) {
            uint32_t *dst = (uint32_t *)(void *)(xt + ((size_t)t * (size_t)nb + (size_t)b) * 512);
            for (int m = 0; m < 16; m++) {
                int row = 16 * t + m;
                uint32_t w[8] = { 0 };
                if (row < a->M) memcpy(w, a->q[(size_t)row * (size_t)nb + (size_t)b].qs, 32);
                for (int j = 0; j < 8; j++) dst[16 * j + m] = w[j];
            }
        }
}

/* ZA tile T += groups [J0, J1) of the block at Q x the transposed block XB. */
#define MOPA(T, Q, XB, J0, J1)                                                                \
    do {                                                                                      \
        for (int j_ = (J0); j_ < (J1); j_++)                                                  \
            svusmopa_za32_u8_m((T), pt, pt, group((Q), j_, fmt, pc),                          \
                               svld1_s8(pt, (const int8_t *)(XB) + 64 * j_));                 \
    } while (0)

/* Folds ZA tile T (block b's sums; Q6_K: its halves in T and T2) into the
 * float accumulators acc (16 rows of 16, one per activation row m: the
 * vertical slice m of the tile is that row's 16 outputs). */
#define FOLD_TILE(T, T2, B)                                                                       \
    do {                                                                                          \
        const int64_t b_ = (B);                                                                   \
        const uint8_t *s_ = ps(pk, pan, b_ / bpu);                                                \
        svfloat32_t d_, e_;                                                                       \
        svint32_t sc_, sc2_, mn_;                                                                 \
        load_wv(s_, (int)(b_ % bpu), fmt, &d_, &e_, &sc_, &sc2_, &mn_);                           \
        for (int m_ = 0; m_ < mr; m_++) {                                                         \
            const act_q8 *x_ = xr + (size_t)m_ * (size_t)nb + (size_t)b_;                         \
            const act_extra *ex_ = er + (size_t)m_ * (size_t)nb + (size_t)b_;                     \
            svint32_t ia_ = svadd_n_s32_x(p32, svread_ver_za32_s32_m(zero, p32, (T), m_), ex_->off0); \
            svint32_t ib_ = ia_;                                                                  \
            if (fmt == FMT_Q6_K)                                                                  \
                ib_ = svadd_n_s32_x(p32, svread_ver_za32_s32_m(zero, p32, (T2), m_), ex_->off1);  \
            svfloat32_t v_ = svld1_f32(p32, acc + 16 * m_);                                       \
            svst1_f32(p32, acc + 16 * m_, fold(v_, fmt, ia_, ib_, d_, e_, sc_, sc2_, mn_, x_->d, x_->sum)); \
        }                                                                                         \
    } while (0)

/* Rows m0 .. m0+mr-1 (mr <= 16) x panel pan, every block; xtile: the tile's
 * transposed activations. acc: 256 floats of the caller's. */
SINLINE void gemm_tile(const panels *pk, int64_t pan, const kern_act *a, int m0, int mr, const uint8_t *xtile,
                       float *acc, float *y, int64_t N, int fmt) STREAMING __arm_inout("za") {
    const int64_t nb = a->n_in / QK;
    const int bpu = blocks_per_unit(fmt), qb = qbytes32(fmt);
    const svuint8_t pc = plane_setup();
    const svbool_t pt = svptrue_b8(), p32 = svptrue_b32();
    const svint32_t zero = svdup_n_s32(0);
    const act_q8 *xr = a->q + (size_t)m0 * (size_t)nb;
    const act_extra *er = a->ext + (size_t)m0 * (size_t)nb;
    for (int i = 0; i < 16 * 16; i += 16) svst1_f32(p32, acc + i, svdup_n_f32(0.0f));
#define QB(B) (pq(pk, pan, (B) / bpu) + (size_t)qb * (size_t)((B) % bpu))
#define XB(B) (xtile + (size_t)(B) * 512)
    int64_t b = 0;
    if (fmt == FMT_Q6_K) {
        /* two blocks in flight, a block's halves in a pair of tiles */
        for (; b + 2 <= nb; b += 2) {
            svzero_za();
            MOPA(0, QB(b), XB(b), 0, 4);
            MOPA(1, QB(b), XB(b), 4, 8);
            MOPA(2, QB(b + 1), XB(b + 1), 0, 4);
            MOPA(3, QB(b + 1), XB(b + 1), 4, 8);
            FOLD_TILE(0, 1, b);
            FOLD_TILE(2, 3, b + 1);
        }
        for (; b < nb; b++) {
            svzero_za();
            MOPA(0, QB(b), XB(b), 0, 4);
            MOPA(1, QB(b), XB(b), 4, 8);
            FOLD_TILE(0, 1, b);
        }
    } else {
        /* four blocks in flight, one per tile */
        for (; b + 4 <= nb; b += 4) {
            svzero_za();
            MOPA(0, QB(b), XB(b), 0, 8);
            MOPA(1, QB(b + 1), XB(b + 1), 0, 8);
            MOPA(2, QB(b + 2), XB(b + 2), 0, 8);
            MOPA(3, QB(b + 3), XB(b + 3), 0, 8);
            FOLD_TILE(0, 0, b);
            FOLD_TILE(1, 1, b + 1);
            FOLD_TILE(2, 2, b + 2);
            FOLD_TILE(3, 3, b + 3);
        }
        for (; b < nb; b++) {
            svzero_za();
            MOPA(0, QB(b), XB(b), 0, 8);
            FOLD_TILE(0, 0, b);
        }
    }
#undef QB
#undef XB
    int64_t left = N - pan * KP_ROWS;
    svbool_t keep = svwhilelt_b32_s64(0, left < 16 ? left : 16);
    for (int m = 0; m < mr; m++)
        svst1_f32(keep, y + (size_t)(m0 + m) * (size_t)N + pan * KP_ROWS, svld1_f32(p32, acc + 16 * m));
}

SINLINE void gemm_fmt(const panels *pk, const kern_act *a, const uint8_t *xt, float *acc, float *y, int64_t N,
                      int64_t pan0, int64_t pan1, int fmt) STREAMING __arm_inout("za") {
    const int64_t nb = a->n_in / QK;
    for (int64_t pan = pan0; pan < pan1; pan++)
        for (int m0 = 0; m0 < a->M; m0 += 16)
            gemm_tile(pk, pan, a, m0, a->M - m0 < 16 ? a->M - m0 : 16, xt + (size_t)(m0 / 16) * (size_t)nb * 512,
                      acc, y, N, fmt);
}

__arm_locally_streaming __arm_new("za") static void gemm(const panels *pk, const kern_act *a, const uint8_t *xt,
                                                         float *acc, float *y, int64_t N, int64_t pan0,
                                                         int64_t pan1, int fmt) {
    switch (fmt) {
    case FMT_Q4_0: gemm_fmt(pk, a, xt, acc, y, N, pan0, pan1, FMT_Q4_0); break;
    case FMT_Q4_1: gemm_fmt(pk, a, xt, acc, y, N, pan0, pan1, FMT_Q4_1); break;
    case FMT_Q5_0: gemm_fmt(pk, a, xt, acc, y, N, pan0, pan1, FMT_Q5_0); break;
    case FMT_Q5_1: gemm_fmt(pk, a, xt, acc, y, N, pan0, pan1, FMT_Q5_1); break;
    case FMT_Q8_0: gemm_fmt(pk, a, xt, acc, y, N, pan0, pan1, FMT_Q8_0); break;
    case FMT_Q4_K: gemm_fmt(pk, a, xt, acc, y, N, pan0, pan1, FMT_Q4_K); break;
    case FMT_Q5_K: gemm_fmt(pk, a, xt, acc, y, N, pan0, pan1, FMT_Q5_K); break;
    case FMT_Q6_K: gemm_fmt(pk, a, xt, acc, y, N, pan0, pan1, FMT_Q6_K); break;
    default: break;
    }
}

/* ---- rows ---------------------------------------------------------------------- */

static bool sme_format(int type) {
    switch (type) {
    case FMT_Q4_0: case FMT_Q4_1: case FMT_Q5_0: case FMT_Q5_1: case FMT_Q8_0:
    case FMT_Q4_K: case FMT_Q5_K: case FMT_Q6_K:
        return true;
    default:
        return false;
    }
}

static void sme2_rows(const hweight *w, const kern_act *a, float *y, int64_t n0, int64_t n1, int worker) {
    const kpack *k = w->packed;
    if (worker < sme_workers() && sme_format(w->type) && a->M >= 1) {
        assert(!k->pairs_interleaved && !k->q6_crumbs);   /* the NEON layout */
        const panels pk = { k->data, k->panel_bytes, k->q_bytes, k->s_bytes, k->units };
        const int64_t pan0 = n0 / KP_ROWS, pan1 = (n1 + KP_ROWS - 1) / KP_ROWS;
        if (a->M == 1) {
            gemv(&pk, a, y, w->n_out, pan0, pan1, w->type);
            atomic_fetch_add_explicit(&gemv_runs, (uint64_t)(pan1 - pan0), memory_order_relaxed);
            return;
        }
        const int tiles = (a->M + 15) / 16;
        const size_t xt_bytes = (size_t)tiles * (size_t)(a->n_in / QK) * 512;
        thread_scratch *sc = thread_scratch_get(&scratch_slot, xt_bytes + 16 * 16 * sizeof(float));
        if (sc) {
            uint8_t *xt = sc->buf;
            /* once per matmul call and thread: the call's rows calls share the activations */
            if (a->id == 0 || sc->tag != a->id) transpose_acts(a, xt, tiles);
            sc->tag = a->id;
            gemm(&pk, a, xt, (float *)(void *)(xt + xt_bytes), y, w->n_out, pan0, pan1, w->type);
            atomic_fetch_add_explicit(&tile_runs, (uint64_t)((pan1 - pan0) * tiles), memory_order_relaxed);
            return;
        }
        /* no scratch: the NEON rows give the same bits */
    }
    kern_path_neon.rows(w, a, y, n0, n1, worker);
}

const kern_path kern_path_sme2 = {
    .name = "sme2",
    .packs = kp_packs_all,
    .rows = sme2_rows,
    .quantize = kern_neon_quantize,
    .q6_crumbs = false,      /* the NEON path's panels, read as they are */
    .pairs_interleaved = false,
};
