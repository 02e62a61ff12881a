/* The AMX int8 tile path: the AVX-512 path's panels (kern_path.h), the same
 * resident copy, multiplied on the tile engine when a batch has at least
 * AMX_M_MIN rows; smaller batches and the float formats run the AVX-512
 * rows. Called only after the probe said yes (AMX-TILE, AMX-INT8, the OS
 * permission) and only on a thread whose tile config was just loaded and
 * read back equal (amx_config_live); otherwise the AVX-512 rows run, which
 * give the same bits.
 *
 * Same bits as the AVX-512 path and the oracle: a TDPBSSD over one 32-k
 * block (K = 32 per tile multiply, never 64) gives each output's exact int32
 * block sum; the weights are expanded to signed bytes (q - offset), whose
 * sum with the activations is the AVX-512 path's offset plus unsigned sum,
 * the same integer. The block sums are then folded into the float
 * accumulators with the AVX-512 path's operations, blocks in order. Q6_K's
 * scales cover 16 elements: two K = 16 multiplies per block.
 *
 * Work: per panel of 16 output rows, the weight quants of every k-block are
 * expanded once into this thread's scratch (B tiles: 8 rows of 16 columns x
 * 4 k, 512 bytes a block), then every 16 activation rows (A tiles read in
 * place from the quantized activations, one row's blocks to the next is the
 * stride) run over all blocks with 16 float accumulators in registers. The
 * last A tile of a batch whose M is not a multiple of 16 starts at M - 16:
 * its overlapping rows are computed again, to the same values. Even and odd
 * blocks use different tiles, so one block's multiply overlaps the previous
 * one's fold.
 *
 * Tiles: 0, 1 C (16 x 16 int32); 2, 3 A (16 rows x 32 bytes); 4, 5 B (8 rows
 * x 64 bytes); 6 A of 16 bytes, 7 B of 4 rows (Q6_K's halves).
 *
 * Built twice: here for the library, and with KERN_AMX_EMULATE for the
 * tests (amx_ops.h's scalar model of the tiles, names suffixed _emu), so the
 * layout and the fold are checked on machines without AMX. */
#include "kernels/kern_amx.h"
#include "kernels/kern_avx512_unpack.h"
#include "runtime/thread_scratch.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef KERN_AMX_EMULATE
#define AMX_NAME(x) x##_emu
#else
#define AMX_NAME(x) x
#endif

#ifndef KERN_AMX_EMULATE
static void set_tile(amx_cfg *c, int t, int rows, int colsb) {
    c->b[16 + 2 * t] = (uint8_t)colsb;
    c->b[17 + 2 * t] = (uint8_t)(colsb >> 8);
    c->b[48 + t] = (uint8_t)rows;
}

void amx_config_build(amx_cfg *c) {
    memset(c, 0, sizeof *c);
    c->b[0] = 1;                                  /* palette 1 */
    set_tile(c, 0, 16, 64);
    set_tile(c, 1, 16, 64);
    set_tile(c, 2, 16, 32);
    set_tile(c, 3, 16, 32);
    set_tile(c, 4, 8, 64);
    set_tile(c, 5, 8, 64);
    set_tile(c, 6, 16, 16);
    set_tile(c, 7, 4, 64);
}

/* Measured (bench_matmul -t 2 -k 2048 -n 2048, M = 512, against the AVX-512
 * rows on one 16-core Xeon with AMX): Q4_0 565 vs 457 GOPS, Q8_0 716 vs 558,
 * Q5_0 730 vs 486, Q6_K 405 vs 350, Q5_K 371 vs 358; but Q4_1 476 vs 494 and
 * Q4_K 361 vs 423: those two stay on the AVX-512 rows. */
bool amx_tiles_format(int type) {
    switch (type) {
    case FMT_Q4_0: case FMT_Q5_0: case FMT_Q5_1: case FMT_Q8_0: case FMT_Q5_K: case FMT_Q6_K:
        return true;
    default:
        return false;
    }
}
#else
void amx_emu_set_drop_colsb(bool on) { amx_emu_drop_colsb = on; }
#endif

/* Whether a rows call of this format and batch runs on tiles. The model
 * takes every block format from one full A tile up, so the tests check the
 * tile code of all of them at every M. */
bool AMX_NAME(amx_tiles_take)(int type, int M) {
#ifdef KERN_AMX_EMULATE
    return M >= AMX_TILE_M && type != FMT_F32 && type != FMT_F16 && type != FMT_BF16;
#else
    return M >= AMX_M_MIN && amx_tiles_format(type);
#endif
}

bool AMX_NAME(amx_config_live)(const amx_cfg *want, const amx_cfg *load) {
    amx_cfg back;
    AMX_LDTILECFG(load);
    AMX_STTILECFG(&back);
    bool ok = memcmp(&back, want, sizeof back) == 0;
    if (!ok) AMX_RELEASE();
    return ok;
}

/* Rows calls that ran on tiles (the tests' control that the path is taken). */
static _Atomic uint64_t tile_runs;
uint64_t AMX_NAME(amx_tile_runs)(void) { return atomic_load_explicit(&tile_runs, memory_order_relaxed); }

/* ---- per-thread scratch: the expanded B tiles of one panel, the C tiles --- */

static thread_scratch_slot scratch_slot;

/* ---- the GEMM ------------------------------------------------------------- */

/* What makes a format's quants signed: q - offset, the offset the AVX-512
 * path applies through the activation sums. */
INLINE int w_offset(int fmt) {
    switch (fmt) {
    case FMT_Q4_0: return 8;
    case FMT_Q5_0: return 16;
    case FMT_Q8_0: return 128;
    case FMT_Q6_K: return 32;
    default: return 0;
    }
}

/* Panel pan's quants as B tiles, block after block (512 bytes each): row g
 * of a block holds k 4g..4g+3 of its 16 output rows, which is the order
 * unpack() gives (chunk c: rows 2c and 2c + 1). */
INLINE void expand_panel(const kpack *pk, int64_t pan, int fmt, uint8_t *bx) {
    const int bpu = kp_is_kquant(fmt) ? 8 : 1, qb = kp_qbytes32(fmt);
    const __m512i off = _mm512_set1_epi8((char)w_offset(fmt));
    for (int64_t u = 0; u < pk->units; u++) {
        const uint8_t *qu = kp_quants(pk, pan, u);
        for (int bi = 0; bi < bpu; bi++) {
            uint8_t *d = bx + (size_t)512 * (size_t)(u * bpu + bi);
            for (int c = 0; c < 4; c++) {
                __m512i lo, hi;
                unpack(qu + qb * bi, c, fmt, &lo, &hi);
                _mm512_store_si512(d + 128 * c, _mm512_sub_epi8(lo, off));
                _mm512_store_si512(d + 128 * c + 64, _mm512_sub_epi8(hi, off));
            }
        }
    }
}

/* Block b's int32 sums (cb: 16 rows of 16) folded into acc, as the AVX-512
 * path folds them. s: the unit's scales; bi: the block in the unit. */
INLINE void fold(__m512 acc[AMX_TILE_M], int fmt, const uint8_t *s, int bi, const int32_t *cb,
                 const act_q8 *xr, const act_extra *er, int64_t nb, int64_t b) {
    const __m512 d = load_ph(s);
    if (fmt == FMT_Q6_K) {
        __m512 sa = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(s + 32 + 32 * bi))));
        __m512 sb = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(s + 48 + 32 * bi))));
        for (int r = 0; r < AMX_TILE_M; r++) {
            __m512 da = _mm512_set1_ps(xr[(size_t)r * nb + b].d);
            __m512 lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb + 16 * r)), sa);
            __m512 i = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb + 256 + 16 * r)), sb, lo);
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), i, acc[r]);
        }
        return;
    }
    if (fmt == FMT_Q4_K || fmt == FMT_Q5_K) {
        const __m512 e = load_ph(s + 32);
        __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(s + 64 + 16 * bi))));
        __m512 mn = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(s + 192 + 16 * bi))));
        for (int r = 0; r < AMX_TILE_M; r++) {
            __m512 da = _mm512_set1_ps(xr[(size_t)r * nb + b].d), ns = _mm512_set1_ps(er[(size_t)r * nb + b].fs);
            __m512 ia = _mm512_cvtepi32_ps(_mm512_load_si512(cb + 16 * r));
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_mul_ps(ia, sc), acc[r]);
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(e, da), _mm512_mul_ps(mn, ns), acc[r]);
        }
        return;
    }
    const bool has_m = fmt == FMT_Q4_1 || fmt == FMT_Q5_1;
    const __m512 e = has_m ? load_ph(s + 32) : d;
    for (int r = 0; r < AMX_TILE_M; r++) {
        __m512 da = _mm512_set1_ps(xr[(size_t)r * nb + b].d);
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(_mm512_load_si512(cb + 16 * r)), acc[r]);
        if (has_m) acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(e, da), _mm512_set1_ps(er[(size_t)r * nb + b].fs), acc[r]);
    }
}

/* 16 activation rows from m0 x panel pan (16 outputs), over every block. */
INLINE void tile16(const kpack *pk, int64_t pan, const kern_act *a, int m0, int fmt, const uint8_t *bx,
                   int32_t *cb, float *y, int64_t N) {
    const int64_t nb = a->n_in / QK;
    const int bpu = kp_is_kquant(fmt) ? 8 : 1;
    const act_q8 *xr = a->q + (size_t)m0 * (size_t)nb;
    const act_extra *er = a->ext + (size_t)m0 * (size_t)nb;
    const int64_t xs = nb * (int64_t)sizeof(act_q8);    /* one activation row's block to the next */
    __m512 acc[AMX_TILE_M];
    for (int r = 0; r < AMX_TILE_M; r++) acc[r] = _mm512_setzero_ps();

    if (fmt == FMT_Q6_K) {
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *bt = bx + (size_t)512 * (size_t)b;
            AMX_ZERO(0);
            AMX_ZERO(1);
            AMX_LOAD(6, xr[b].qs, xs);
            AMX_LOAD(7, bt, 64);
            AMX_DPBSSD(0, 6, 7);
            AMX_LOAD(6, xr[b].qs + 16, xs);
            AMX_LOAD(7, bt + 256, 64);
            AMX_DPBSSD(1, 6, 7);
            AMX_STORE(0, cb, 64);
            AMX_STORE(1, cb + 256, 64);
            fold(acc, fmt, kp_scales(pk, pan, b / bpu), (int)(b % bpu), cb, xr, er, nb, b);
        }
    } else {
        for (int64_t b = 0; b < nb; b += 2) {
            const bool two = b + 1 < nb;
            const uint8_t *bt = bx + (size_t)512 * (size_t)b;
            AMX_ZERO(0);
            AMX_LOAD(2, xr[b].qs, xs);
            AMX_LOAD(4, bt, 64);
            AMX_DPBSSD(0, 2, 4);
            if (two) {
                AMX_ZERO(1);
                AMX_LOAD(3, xr[b + 1].qs, xs);
                AMX_LOAD(5, bt + 512, 64);
                AMX_DPBSSD(1, 3, 5);
            }
            AMX_STORE(0, cb, 64);
            fold(acc, fmt, kp_scales(pk, pan, b / bpu), (int)(b % bpu), cb, xr, er, nb, b);
            if (two) {
                AMX_STORE(1, cb + 256, 64);
                fold(acc, fmt, kp_scales(pk, pan, (b + 1) / bpu), (int)((b + 1) % bpu), cb + 256, xr, er, nb, b + 1);
            }
        }
    }
    int64_t left = N - pan * KP_ROWS;
    __mmask16 k = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    for (int r = 0; r < AMX_TILE_M; r++) _mm512_mask_storeu_ps(y + (size_t)(m0 + r) * (size_t)N + pan * KP_ROWS, k, acc[r]);
}

static bool config_live_here(void) {
    amx_cfg want, load;
    amx_config_build(&want);
    load = want;
    return AMX_NAME(amx_config_live)(&want, &load);
}

/* Output rows [n0, n1) for every activation row, on tiles; false (nothing
 * written) when this thread cannot run them. */
INLINE bool rows_fmt(const hweight *w, const kern_act *a, float *y, int64_t n0, int64_t n1, int fmt) {
    const kpack *pk = w->packed;
    const int64_t nb = a->n_in / QK;
    thread_scratch *sc = thread_scratch_get(&scratch_slot, (size_t)nb * 512 + 2048);
    uint8_t *bx = sc ? sc->buf : NULL;
    if (!bx || !config_live_here()) return false;
    int32_t *cb = (int32_t *)(bx + (size_t)nb * 512);
    for (int64_t pan = n0 / KP_ROWS; pan * KP_ROWS < n1; pan++) {
        expand_panel(pk, pan, fmt, bx);
        for (int m0 = 0; m0 < a->M; m0 += AMX_TILE_M)
            tile16(pk, pan, a, m0 + AMX_TILE_M <= a->M ? m0 : a->M - AMX_TILE_M, fmt, bx, cb, y, w->n_out);
    }
    AMX_RELEASE();
    atomic_fetch_add_explicit(&tile_runs, 1, memory_order_relaxed);
    return true;
}

static void amx_rows(const hweight *w, const kern_act *a, float *y, int64_t n0, int64_t n1, int worker) {
    bool done = false;
    if (AMX_NAME(amx_tiles_take)(w->type, a->M)) {
        switch (w->type) {
        case FMT_Q4_0: done = rows_fmt(w, a, y, n0, n1, FMT_Q4_0); break;
        case FMT_Q4_1: done = rows_fmt(w, a, y, n0, n1, FMT_Q4_1); break;
        case FMT_Q5_0: done = rows_fmt(w, a, y, n0, n1, FMT_Q5_0); break;
        case FMT_Q5_1: done = rows_fmt(w, a, y, n0, n1, FMT_Q5_1); break;
        case FMT_Q8_0: done = rows_fmt(w, a, y, n0, n1, FMT_Q8_0); break;
        case FMT_Q4_K: done = rows_fmt(w, a, y, n0, n1, FMT_Q4_K); break;
        case FMT_Q5_K: done = rows_fmt(w, a, y, n0, n1, FMT_Q5_K); break;
        case FMT_Q6_K: done = rows_fmt(w, a, y, n0, n1, FMT_Q6_K); break;
        default: break;
        }
    }
    if (!done) kern_path_avx512.rows(w, a, y, n0, n1, worker);
}

const kern_path AMX_NAME(kern_path_amx) = {
    .name = "amx",
    .packs = kp_packs_all,
    .rows = amx_rows,
    .quantize = kern_avx512_quantize,
    .q6_crumbs = true,          /* the AVX-512 path's panels, read as they are */
    .pairs_interleaved = true,
};
