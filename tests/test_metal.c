/* The Metal backend through the CPU emulator of its dispatch layer:
 * - every shader against the CPU oracle (kernels/ops.c, formats.c,
 *   attention.c) over shapes with tails: widths and K not multiples of the
 *   lanes or the tiles, odd row counts. Bit for bit where the shader keeps the
 *   oracle's order (rmsnorm, the activation prepass, rope, the GLUs, the KV
 *   store, bias, soft-cap); the GEMVs and attention add in another order and
 *   are held to a stated tolerance;
 * - planted controls: a removed barrier, a skipped prepass and a wrong tile
 *   offset each give a wrong result the check sees;
 * - whole models: stories260K's greedy ids through metal-emu equal the CPU
 *   backend's; quantized fixtures teacher-forced within the fixtures'
 *   tolerance; batch invariance (a sequence alone == beside others, chunked
 *   == one shot) bit for bit within metal-emu, and resumed == fresh through
 *   the engine's prompt cache. */
#include "tests/test.h"
#include "metal/dispatch.h"
#include "metal/shaders/args.h"
#include "kernels/formats.h"
#include "kernels/ops.h"
#include "kernels/attention.h"
#include "engine/model/backend.h"
#include "engine/model/model.h"
#include "engine/sched/generate.h"
#include "engine/text/tokenizer.h"
#include "runtime/pool.h"
#include "tests/engine_run.h"
#include <cjson/cJSON.h>
#include <unistd.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void md_emu_add_kernels(md_device *d, const void *table);
extern const char test_planted_kernels[];   /* metal_test_kernels.cpp (an emu::KernelEntry table) */

/* Under a sanitizer (a debug build) the emulator is tens of times slower:
 * the large-vocabulary fixtures and the engine runs are left to the
 * release suite; the shaders, the controls and stories260K still run. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static md_device *dev;
static hpool *pool;

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_state = 0x1234567;
static float frand(void) {   /* in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}
static void fill(float *x, size_t n, float scale) { for (size_t i = 0; i < n; i++) x[i] = frand() * scale; }

static md_buffer *buf_from(const void *data, size_t bytes) {
    md_buffer *b = md_buffer_new(dev, bytes);
    if (data) memcpy(md_buffer_contents(b), data, bytes);
    return b;
}

static int commit(md_cmd *c) {
    char err[256];
    int rc = md_cmd_commit_wait(c, err, sizeof err);
    CHECKF(rc == 0, "commit: %s", err);
    return rc;
}

static void dispatch(md_cmd *c, const char *name, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t tx) {
    md_pipeline *p = md_pipeline_get(dev, name);
    CHECKF(p != NULL, "no kernel %s", name);
    const uint32_t g[3] = { gx, gy, gz }, t[3] = { tx, 1, 1 };
    md_dispatch(c, p, g, t);
}

static bool same_bits(const float *a, const float *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) {
            printf("  %s: element %zu: %.9g vs %.9g\n", what, i, a[i], b[i]);
            return false;
        }
    return true;
}

/* ---- rmsnorm ---------------------------------------------------------------- */

static void test_rmsnorm(void) {
    static const int widths[] = { 1, 15, 16, 17, 33, 64, 100, 257 };
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        int w = widths[wi], rows = 5;
        float *x = malloc(sizeof(float) * w * rows), *g = malloc(sizeof(float) * w);
        float *want = malloc(sizeof(float) * w * rows), *add0 = malloc(sizeof(float) * w * rows);
        fill(x, (size_t)w * rows, 3.0f); fill(g, (size_t)w, 1.0f); fill(add0, (size_t)w * rows, 1.0f);
        int index[5] = { 4, 0, 2, 2, 1 };   /* through an index (the LOGITS rows) */
        md_buffer *bx = buf_from(x, sizeof(float) * w * rows), *bg = buf_from(g, sizeof(float) * w);
        md_buffer *by = md_buffer_new(dev, sizeof(float) * w * rows), *badd = buf_from(add0, sizeof(float) * w * rows);
        md_buffer *bi = buf_from(index, sizeof index);
        for (int mode = 0; mode < 2; mode++) {
            md_rms_args a = { w, rows, w, w, mode == 0, mode == 1, 1e-5f };
            md_cmd *c = md_cmd_begin(dev);
            md_set_buffer(c, 0, bx, 0); md_set_buffer(c, 1, bg, 0); md_set_buffer(c, 2, by, 0);
            md_set_buffer(c, 3, badd, 0); md_set_buffer(c, 4, bi, 0); md_set_bytes(c, 5, &a, sizeof a);
            dispatch(c, "rmsnorm_f32", (uint32_t)rows, 1, 1, MD_SIMD);
            commit(c);
            for (int r = 0; r < rows; r++) op_rmsnorm(want + r * w, x + (mode ? index[r] : r) * w, g, w, 1e-5f);
            CHECKF(same_bits(md_buffer_contents(by), want, (size_t)w * rows, "rmsnorm"), "rmsnorm width %d mode %d", w, mode);
            if (mode == 0) {
                for (int i = 0; i < w * rows; i++) add0[i] += want[i];
                CHECKF(same_bits(md_buffer_contents(badd), add0, (size_t)w * rows, "rmsnorm add"), "rmsnorm + add width %d", w);
            }
        }
        md_buffer_free(bx); md_buffer_free(bg); md_buffer_free(by); md_buffer_free(badd); md_buffer_free(bi);
        free(x); free(g); free(want); free(add0);
    }
}

/* ---- GEMV and the prepass ------------------------------------------------------ */

/* |y - want| <= 1e-5 * sum |w x| + 1e-6: float sums of the same products in another order */
static bool gemv_close(const float *y, const float *want, const float *mag, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (!(fabsf(y[i] - want[i]) <= 1e-5f * mag[i] + 1e-6f)) {
            printf("  %s: row %d: %.9g vs %.9g (scale %g)\n", what, i, y[i], want[i], mag[i]);
            return false;
        }
    return true;
}

/* Runs W (type, n_out x n_in) on M rows of x through the shader; planted:
 * 1 skips the prepass, 2 uses the wrong-tile kernel. */
static void run_gemv(int type, const void *wdata, size_t row_bytes, int n_in, int n_out, int M, const float *x,
                     float *y, int planted, float *add) {
    bool act = type == FMT_Q8_0 || type == FMT_Q4_0;
    md_buffer *bw = buf_from(wdata, row_bytes * (size_t)n_out), *bx = buf_from(x, sizeof(float) * n_in * M);
    md_buffer *bact = md_buffer_new(dev, sizeof(act_q8) * (size_t)(n_in / QK) * M + 1);
    md_buffer *by = md_buffer_new(dev, sizeof(float) * n_out * M);
    md_cmd *c = md_cmd_begin(dev);
    if (act && planted != 1) {
        md_act_args aa = { n_in, M };
        md_set_buffer(c, 0, bx, 0); md_set_buffer(c, 1, bact, 0); md_set_bytes(c, 2, &aa, sizeof aa);
        dispatch(c, "act_quant_q8", (uint32_t)((M * (n_in / QK) + 63) / 64), 1, 1, 64);
    }
    md_gemv_args a = { n_in, n_out, M, (int)row_bytes, add != NULL };
    md_buffer *badd = add ? buf_from(add, sizeof(float) * n_out * M) : NULL;
    md_set_buffer(c, 0, bw, 0); md_set_buffer(c, 1, act ? bact : bx, 0); md_set_buffer(c, 2, by, 0);
    md_set_buffer(c, 3, badd ? badd : by, 0); md_set_bytes(c, 4, &a, sizeof a);
    const char *name = planted == 2 ? "gemv_f32_bad_tile" : type == FMT_F32 ? "gemv_f32" : type == FMT_F16 ? "gemv_f16"
                     : type == FMT_Q8_0 ? "gemv_q8_0" : "gemv_q4_0";
    uint32_t groups = (uint32_t)((n_out + MD_GEMV_SG * MD_GEMV_ROWS - 1) / (MD_GEMV_SG * MD_GEMV_ROWS));
    const uint32_t g[3] = { groups, (uint32_t)M, 1 }, t[3] = { MD_GEMV_SG * MD_SIMD, 1, 1 };
    md_dispatch(c, md_pipeline_get(dev, name), g, t);
    commit(c);
    memcpy(y, md_buffer_contents(by), sizeof(float) * n_out * M);
    if (add) memcpy(add, md_buffer_contents(badd), sizeof(float) * n_out * M);
    md_buffer_free(badd);
    md_buffer_free(bw); md_buffer_free(bx); md_buffer_free(bact); md_buffer_free(by);
}

static void test_gemv(void) {
    static const int types[] = { FMT_F32, FMT_F16, FMT_Q8_0, FMT_Q4_0 };
    static const int n_ins[] = { 32, 96, 288, 1056 };   /* 1, 3, 9, 33 blocks: lanes with none, tails */
    static const int n_outs[] = { 1, 3, 7, 8, 9, 33 };
    static const int Ms[] = { 1, 3 };
    for (size_t ti = 0; ti < 4; ti++)
        for (size_t ki = 0; ki < 4; ki++)
            for (size_t ni = 0; ni < 6; ni++)
                for (size_t mi = 0; mi < 2; mi++) {
                    int type = types[ti], K = n_ins[ki], N = n_outs[ni], M = Ms[mi];
                    if (type == FMT_F32 || type == FMT_F16) K += (int)ki;   /* float formats: any K */
                    size_t rb = format_row_bytes(type, K);
                    float *wf = malloc(sizeof(float) * K * N), *x = malloc(sizeof(float) * K * M);
                    uint8_t *w = malloc(rb * N);
                    fill(wf, (size_t)K * N, 1.0f); fill(x, (size_t)K * M, 2.0f);
                    for (int n = 0; n < N; n++) format_quantize_row(type, wf + n * K, w + rb * n, K);
                    float *y = malloc(sizeof(float) * N * M), *want = malloc(sizeof(float) * N * M);
                    float *mag = malloc(sizeof(float) * N * M), *deq = malloc(sizeof(float) * K);
                    act_q8 *xa = malloc(sizeof(act_q8) * (K / QK + 1));
                    for (int m = 0; m < M; m++) {
                        bool act = type == FMT_Q8_0 || type == FMT_Q4_0;
                        if (act) act_quantize_row(x + m * K, xa, K);
                        for (int n = 0; n < N; n++) {
                            want[m * N + n] = act ? format_dot_q8(type, w + rb * n, xa, K) : format_dot_f32(type, w + rb * n, x + m * K, K);
                            format_dequantize_row(type, w + rb * n, deq, K);
                            float s = 0;
                            for (int k = 0; k < K; k++) s += fabsf(deq[k] * x[m * K + k]);
                            mag[m * N + n] = s;
                        }
                    }
                    run_gemv(type, w, rb, K, N, M, x, y, 0, NULL);
                    char what[64];
                    snprintf(what, sizeof what, "gemv %s K=%d N=%d M=%d", format_name(type), K, N, M);
                    CHECKF(gemv_close(y, want, mag, N * M, what), "%s", what);
                    /* the residual add folded in == the GEMV, then the add (bit for bit) */
                    float *add = malloc(sizeof(float) * N * M), *sum = malloc(sizeof(float) * N * M);
                    fill(add, (size_t)N * M, 4.0f);
                    for (int i = 0; i < N * M; i++) sum[i] = add[i] + y[i];
                    float *y2 = malloc(sizeof(float) * N * M);
                    run_gemv(type, w, rb, K, N, M, x, y2, 0, add);
                    CHECKF(same_bits(y2, y, (size_t)N * M, "gemv + add: y") && same_bits(add, sum, (size_t)N * M, "gemv + add"),
                           "%s: the fused residual add differs from the unfused one", what);
                    free(add); free(sum); free(y2);
                    /* planted controls, once a type: no prepass; a wrong tile offset */
                    if (ki == 2 && ni == 5 && mi == 1 && (type == FMT_Q8_0 || type == FMT_Q4_0)) {
                        run_gemv(type, w, rb, K, N, M, x, y, 1, NULL);
                        CHECKF(!gemv_close(y, want, mag, N * M, "control (expected)"), "%s: skipping the prepass went unseen", what);
                    }
                    if (ki == 2 && ni == 5 && mi == 1 && type == FMT_F32) {
                        run_gemv(type, w, rb, K, N, M, x, y, 2, NULL);
                        CHECKF(!gemv_close(y, want, mag, N * M, "control (expected)"), "%s: a wrong tile offset went unseen", what);
                    }
                    free(wf); free(x); free(w); free(y); free(want); free(mag); free(deq); free(xa);
                }
    /* the prepass itself: bit for bit act_quantize_row (zeros, ties, a block of one value) */
    int K = 160, M = 3;
    float *x = malloc(sizeof(float) * K * M);
    fill(x, (size_t)K * M, 5.0f);
    for (int i = 0; i < 32; i++) x[32 + i] = 0.0f;
    for (int i = 0; i < 32; i++) x[64 + i] = (float)(i - 16) * 0.5f;
    md_buffer *bx = buf_from(x, sizeof(float) * K * M), *bact = md_buffer_new(dev, sizeof(act_q8) * (K / QK) * M);
    md_act_args aa = { K, M };
    md_cmd *c = md_cmd_begin(dev);
    md_set_buffer(c, 0, bx, 0); md_set_buffer(c, 1, bact, 0); md_set_bytes(c, 2, &aa, sizeof aa);
    dispatch(c, "act_quant_q8", (uint32_t)((M * (K / QK) + 63) / 64), 1, 1, 64);
    commit(c);
    act_q8 *want = malloc(sizeof(act_q8) * (K / QK) * M);
    for (int m = 0; m < M; m++) act_quantize_row(x + m * K, want + m * (K / QK), K);
    CHECKF(!memcmp(md_buffer_contents(bact), want, sizeof(act_q8) * (K / QK) * M), "act_quant_q8 differs from act_quantize_row");
    md_buffer_free(bx); md_buffer_free(bact); free(x); free(want);
}

/* ---- elementwise, rope, KV store -------------------------------------------------- */

static void test_elementwise(void) {
    int w = 333, n = 3, N = w * n;
    float *g = malloc(sizeof(float) * N), *u = malloc(sizeof(float) * N), *want = malloc(sizeof(float) * N);
    fill(g, (size_t)N, 12.0f); fill(u, (size_t)N, 2.0f);
    g[0] = NAN; g[1] = 200.0f; g[2] = -200.0f;
    md_buffer *bg = buf_from(g, sizeof(float) * N), *bu = buf_from(u, sizeof(float) * N), *bo = md_buffer_new(dev, sizeof(float) * N);
    for (int act = 0; act < 2; act++) {
        md_ew_args a = { w, n, act, 0.0f };
        md_cmd *c = md_cmd_begin(dev);
        md_set_buffer(c, 0, bg, 0); md_set_buffer(c, 1, bu, 0); md_set_buffer(c, 2, bo, 0); md_set_bytes(c, 3, &a, sizeof a);
        dispatch(c, "glu_f32", (uint32_t)((N + 255) / 256), 1, 1, 256);
        commit(c);
        (act ? op_geglu : op_swiglu)(want, g, u, N);
        CHECKF(same_bits(md_buffer_contents(bo), want, (size_t)N, act ? "geglu" : "swiglu"), "%s differs", act ? "geglu" : "swiglu");
    }
    /* bias, then the soft-cap, in place */
    float *bias = malloc(sizeof(float) * w);
    fill(bias, (size_t)w, 1.0f);
    md_buffer *bb = buf_from(bias, sizeof(float) * w), *bx = buf_from(u, sizeof(float) * N);
    md_ew_args a = { w, n, 0, 3.5f };
    md_cmd *c = md_cmd_begin(dev);
    md_set_buffer(c, 0, bx, 0); md_set_buffer(c, 1, bb, 0); md_set_bytes(c, 2, &a, sizeof a);
    dispatch(c, "bias_add_f32", (uint32_t)((N + 255) / 256), 1, 1, 256);
    md_set_buffer(c, 0, bx, 0); md_set_bytes(c, 1, &a, sizeof a);
    dispatch(c, "softcap_f32", (uint32_t)((N + 255) / 256), 1, 1, 256);
    commit(c);
    memcpy(want, u, sizeof(float) * N);
    for (int r = 0; r < n; r++) op_add(want + r * w, bias, w);
    op_softcap(want, 3.5f, N);
    CHECKF(same_bits(md_buffer_contents(bx), want, (size_t)N, "bias + softcap"), "bias + soft-cap differ");
    md_buffer_free(bg); md_buffer_free(bu); md_buffer_free(bo); md_buffer_free(bb); md_buffer_free(bx);
    free(g); free(u); free(want); free(bias);
}

static void test_rope(void) {
    static const struct { int n_head, head_dim, n_rot, neox; } cases[] = { { 3, 8, 8, 0 }, { 2, 64, 64, 1 }, { 5, 12, 6, 1 }, { 1, 128, 100, 0 } };
    for (size_t ci = 0; ci < 4; ci++) {
        int H = cases[ci].n_head, hd = cases[ci].head_dim, nr = cases[ci].n_rot, n = 3, W = H * hd;
        float *x = malloc(sizeof(float) * W * n), *cs = malloc(sizeof(float) * nr * n), *want = malloc(sizeof(float) * W * n);
        fill(x, (size_t)W * n, 2.0f);
        for (int r = 0; r < n; r++) op_rope_angles(cs + r * nr, nr, 17 * r + 3, 10000.0f, NULL);
        memcpy(want, x, sizeof(float) * W * n);
        for (int r = 0; r < n; r++) op_rope_apply(want + r * W, H, hd, nr, cases[ci].neox, cs + r * nr);
        md_buffer *bx = buf_from(x, sizeof(float) * W * n), *bc = buf_from(cs, sizeof(float) * nr * n);
        md_rope_args a = { n, H, hd, nr, cases[ci].neox, W, nr };
        md_cmd *c = md_cmd_begin(dev);
        md_set_buffer(c, 0, bx, 0); md_set_buffer(c, 1, bc, 0); md_set_bytes(c, 2, &a, sizeof a);
        uint32_t tx = nr / 2 < 32 ? (uint32_t)nr / 2 : 32;
        dispatch(c, "rope_f32", (uint32_t)((nr / 2 + tx - 1) / tx), (uint32_t)H, (uint32_t)n, tx);
        commit(c);
        CHECKF(same_bits(md_buffer_contents(bx), want, (size_t)W * n, "rope"), "rope case %zu differs", ci);
        md_buffer_free(bx); md_buffer_free(bc); free(x); free(cs); free(want);
    }
}

/* KV store into a full layer and a ring layer, then attention over both
 * against attn_head_scalar (GQA 6/2, windows, chunk boundaries). */
static void test_kv_attention(void) {
    const int H = 6, Hkv = 2, hd = 40, S = 2, span_full = 600, R = 37;
    for (int ring = 0; ring < 2; ring++) {
        int span = ring ? 2 * R : span_full, window = ring ? R - 5 : 0;
        static const int lens[] = { 1, 31, 33, 300, 513 };
        int n_lens = ring ? 3 : 5;
        size_t cache_elems = (size_t)S * Hkv * span * hd + 64;
        uint16_t *kc = calloc(cache_elems, 2), *vc = calloc(cache_elems, 2);
        md_buffer *bk = md_buffer_wrap(dev, kc, cache_elems * 2), *bv = md_buffer_wrap(dev, vc, cache_elems * 2);
        for (int li = 0; li < n_lens; li++) {
            int L = lens[li] + (ring ? 40 : 0);   /* past the ring's size */
            int slot = li % S;
            /* fill positions [0, L) of the slot in batches of 7 rows, as a model would */
            float *k = malloc(sizeof(float) * Hkv * hd * 7), *v = malloc(sizeof(float) * Hkv * hd * 7);
            for (int p0 = 0; p0 < L; p0 += 7) {
                int n = L - p0 < 7 ? L - p0 : 7;
                if (ring) n = 1;   /* a ring keeps window + batch: one row at a time here */
                int pos[7], sl[7];
                for (int r = 0; r < n; r++) { pos[r] = p0 + r; sl[r] = slot; }
                fill(k, (size_t)Hkv * hd * n, 1.5f); fill(v, (size_t)Hkv * hd * n, 1.0f);
                md_buffer *bkk = buf_from(k, sizeof(float) * Hkv * hd * n), *bvv = buf_from(v, sizeof(float) * Hkv * hd * n);
                md_buffer *bp = buf_from(pos, sizeof(int) * n), *bs = buf_from(sl, sizeof(int) * n);
                md_kv_args a = { n, H, Hkv, hd, Hkv * hd, Hkv * hd, H * hd, 0, span, ring ? R : 0, window, 0.1f };
                md_cmd *c = md_cmd_begin(dev);
                md_set_buffer(c, 0, bkk, 0); md_set_buffer(c, 1, bvv, 0); md_set_buffer(c, 2, bk, 0); md_set_buffer(c, 3, bv, 0);
                md_set_buffer(c, 4, bp, 0); md_set_buffer(c, 5, bs, 0); md_set_bytes(c, 6, &a, sizeof a);
                dispatch(c, "kv_store_f16", 1, (uint32_t)Hkv, (uint32_t)n, (uint32_t)hd);
                commit(c);
                for (int r = 0; r < n; r++)
                    for (int h = 0; h < Hkv; h++) {
                        int pp = ring ? pos[r] % R : pos[r];
                        size_t at = (((size_t)slot * Hkv + h) * span + pp) * hd;
                        bool ok = true;
                        for (int d = 0; d < hd; d++) {
                            ok &= kc[at + d] == f32_to_fp16(k[(r * Hkv + h) * hd + d]) && vc[at + d] == f32_to_fp16(v[(r * Hkv + h) * hd + d]);
                            if (ring) ok &= kc[at + d + (size_t)R * hd] == kc[at + d] && vc[at + d + (size_t)R * hd] == vc[at + d];
                        }
                        CHECKF(ok, "kv store ring %d pos %d head %d", ring, pos[r], h);
                    }
                md_buffer_free(bkk); md_buffer_free(bvv); md_buffer_free(bp); md_buffer_free(bs);
            }
            free(k); free(v);
            /* attention of rows at the last positions */
            int n = 3, pos[3] = { L - 1, L > 2 ? L - 2 : L - 1, L > 5 ? L - 5 : 0 }, sl[3] = { slot, slot, slot };
            float *q = malloc(sizeof(float) * H * hd * n), *want = malloc(sizeof(float) * H * hd * n);
            float *scores = malloc(sizeof(float) * (L + 1));
            fill(q, (size_t)H * hd * n, 1.0f);
            for (int r = 0; r < n; r++)
                for (int h = 0; h < H; h++) {
                    int kvh = h / (H / Hkv), start = window && pos[r] + 1 > window ? pos[r] + 1 - window : 0;
                    int first = ring ? start % R : start;
                    size_t at = (((size_t)slot * Hkv + kvh) * span + first) * hd;
                    attn_head_scalar(q + (r * H + h) * hd, kc + at, vc + at, (size_t)hd, pos[r] + 1 - start, hd, 0.1f, scores,
                                     want + (r * H + h) * hd);
                }
            md_buffer *bq = buf_from(q, sizeof(float) * H * hd * n), *bo = md_buffer_new(dev, sizeof(float) * H * hd * n);
            md_buffer *bp = buf_from(pos, sizeof pos), *bs = buf_from(sl, sizeof sl);
            md_kv_args a = { n, H, Hkv, hd, Hkv * hd, Hkv * hd, H * hd, 0, span, ring ? R : 0, window, 0.1f };
            md_cmd *c = md_cmd_begin(dev);
            md_set_buffer(c, 0, bq, 0); md_set_buffer(c, 1, bk, 0); md_set_buffer(c, 2, bv, 0); md_set_buffer(c, 3, bo, 0);
            md_set_buffer(c, 4, bp, 0); md_set_buffer(c, 5, bs, 0); md_set_bytes(c, 6, &a, sizeof a);
            md_set_threadgroup_memory(c, 0, MD_ATT_CHUNK * sizeof(float));
            dispatch(c, "attention_f16", (uint32_t)H, (uint32_t)n, 1, MD_SIMD);
            commit(c);
            const float *got = md_buffer_contents(bo);
            float worst = 0;
            for (int i = 0; i < H * hd * n; i++) worst = fmaxf(worst, fabsf(got[i] - want[i]));
            /* outputs are convex combinations of values in [-1, 1]: 1e-5 is a few ulps of their sums */
            CHECKF(worst <= 1e-5f, "attention ring %d over %d positions: worst diff %g", ring, L, worst);
            md_buffer_free(bq); md_buffer_free(bo); md_buffer_free(bp); md_buffer_free(bs);
            free(q); free(want); free(scores);
        }
        md_buffer_free(bk); md_buffer_free(bv); free(kc); free(vc);
    }
}

/* ---- the emulator's own controls ------------------------------------------------------ */

static void test_planted_barrier(void) {
    int T = 256, G = 8, N = T * G;
    float *x = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = (float)i;
    md_buffer *bx = buf_from(x, sizeof(float) * N), *by = md_buffer_new(dev, sizeof(float) * N);
    for (int planted = 0; planted < 2; planted++) {
        md_cmd *c = md_cmd_begin(dev);
        md_set_buffer(c, 0, bx, 0); md_set_buffer(c, 1, by, 0); md_set_threadgroup_memory(c, 0, sizeof(float) * T);
        dispatch(c, planted ? "reverse_tg_no_barrier" : "reverse_tg", (uint32_t)G, 1, 1, (uint32_t)T);
        commit(c);
        const float *y = md_buffer_contents(by);
        int wrong = 0;
        for (int g = 0; g < G; g++)
            for (int t = 0; t < T; t++) wrong += !(y[g * T + t] == x[g * T + T - 1 - t]);
        if (planted) CHECKF(wrong > 0, "control: a removed barrier went unseen");
        else CHECKF(wrong == 0, "reverse_tg: %d wrong", wrong);
    }
    md_buffer_free(bx); md_buffer_free(by); free(x);
}

/* ---- whole models ----------------------------------------------------------------------- */

static model *load(const char *rel, const char *backend) {
    char err[512];
    model_options o = { backend, -1 };
    model *m = model_load_opts(test_path(rel), &o, err, sizeof err);
    CHECKF(m != NULL, "%s on %s: %s", rel, backend, err);
    return m;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

/* Greedy continuation of prompt for n steps on one generator. */
static void greedy(const model *m, const int32_t *prompt, int n_prompt, int n, int32_t *out) {
    generator *g = gen_new(m, 256, 16, pool);
    const float *l = gen_eval(g, prompt, n_prompt, NULL);
    for (int i = 0; i < n && l; i++) {
        out[i] = argmax(l, m->p.n_vocab);
        l = gen_eval(g, &out[i], 1, NULL);
    }
    CHECK(l != NULL);
    gen_free(g);
}

static void test_stories(void) {
    model *cpu = load("models/stories260K.gguf", "cpu"), *emu = load("models/stories260K.gguf", "metal-emu");
    if (!cpu || !emu) { model_free(cpu); model_free(emu); return; }
    int32_t *ids = NULL, a[60], b[60];
    const int n = SANITIZED ? 20 : 60;
    int n_prompt = tokenizer_encode(cpu->tok, "Once upon a time", 16, true, false, &ids);
    greedy(cpu, ids, n_prompt, n, a);
    greedy(emu, ids, n_prompt, n, b);
    int same = 0;
    while (same < n && a[same] == b[same]) same++;
    CHECKF(same == n, "stories260K: metal-emu's greedy ids leave the CPU's at step %d", same);
    printf("  stories260K: %d/%d greedy ids equal to the CPU backend's\n", same, n);
    free(ids);
    model_free(cpu); model_free(emu);
}

/* Teacher-forced through metal-emu: each reference step's top logits within
 * the fixtures' tolerance (0.04 * max|ref| + 0.1), argmax right where the
 * reference gap is clear; at most max_steps steps of each case. */
static int json_ints(const cJSON *a, int32_t **out) {
    int n = cJSON_GetArraySize(a);
    *out = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) (*out)[i] = cJSON_GetArrayItem(a, i)->valueint;
    return n;
}

static void test_fixture(const char *file, int max_cases, int max_steps) {
    char *json = test_read_file(test_path("fixtures/reference.json"), NULL);
    if (!json) { SKIP("fixtures/reference.json not found under %s", test_shared_dir()); return; }
    cJSON *root = cJSON_Parse(json);
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/%s", file);
    model *m = load(rel, "metal-emu");
    for (int ci = 0, done = 0; m && ci < cJSON_GetArraySize(root) && done < max_cases; ci++) {
        const cJSON *c = cJSON_GetArrayItem(root, ci);
        if (strcmp(cJSON_GetObjectItem(c, "model")->valuestring, file)) continue;
        done++;
        int32_t *prompt, *tokens;
        int n_prompt = json_ints(cJSON_GetObjectItem(c, "prompt_tokens"), &prompt);
        int n_tokens = json_ints(cJSON_GetObjectItem(c, "tokens"), &tokens);
        if (n_tokens > max_steps) n_tokens = max_steps;
        const cJSON *steps = cJSON_GetObjectItem(c, "steps");
        generator *g = gen_new(m, 256, 32, pool);
        const float *l = gen_eval(g, prompt, n_prompt, NULL);
        int bad = 0, wrong_argmax = 0;
        double worst = 0;
        for (int i = 0; i < n_tokens && l; i++) {
            const cJSON *top = cJSON_GetObjectItem(cJSON_GetArrayItem(steps, i), "top");
            double scale = 0;
            for (int k = 0; k < cJSON_GetArraySize(top); k++)
                scale = fmax(scale, fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(top, k), 1)->valuedouble));
            double tol = 0.04 * scale + 0.1;
            for (int k = 0; k < cJSON_GetArraySize(top); k++) {
                const cJSON *e = cJSON_GetArrayItem(top, k);
                double d = fabs(l[cJSON_GetArrayItem(e, 0)->valueint] - cJSON_GetArrayItem(e, 1)->valuedouble);
                worst = fmax(worst, d / tol);
                bad += d > tol;
            }
            double gap = cJSON_GetArrayItem(cJSON_GetArrayItem(top, 0), 1)->valuedouble -
                         cJSON_GetArrayItem(cJSON_GetArrayItem(top, 1), 1)->valuedouble;
            if (gap > 2 * tol && argmax(l, m->p.n_vocab) != tokens[i]) wrong_argmax++;
            l = gen_eval(g, &tokens[i], 1, NULL);
        }
        CHECKF(l != NULL, "%s: evaluation failed", file);
        CHECKF(bad == 0 && wrong_argmax == 0, "%s case %d: %d logits outside tolerance, %d clear argmaxes wrong", file, ci, bad,
               wrong_argmax);
        printf("  %-24s case %2d: %d steps teacher-forced, worst logit diff %.0f%% of tolerance\n", file, ci, n_tokens, 100 * worst);
        gen_free(g);
        free(prompt); free(tokens);
    }
    model_free(m);
    cJSON_Delete(root);
    free(json);
}

/* ---- the engine on metal-emu ------------------------------------------------------------ */

static void engine_gen(engine *e, const int32_t *prompt, int n, int max_tokens, engine_run *out) {
    job_params p;
    job_params_default(&p);
    p.sampling.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    engine_run_submit(e, out, prompt, n, &p);
}

static bool same_run(const engine_run *a, const engine_run *b) {
    return a->n_tokens == b->n_tokens && a->n_tokens > 0 && !memcmp(a->tokens, b->tokens, sizeof(int32_t) * (size_t)a->n_tokens);
}

/* alone == beside three others (bit for bit: the same ids over a long run),
 * and resumed through the prompt cache (resident, then sqlite after the
 * slot was reused) == a fresh prefill */
static void test_engine(void) {
    model *m = load("models/stories260K.gguf", "metal-emu");
    if (!m) return;
    int32_t A[90], Bp[40], C[70], D[9], Q[90];
    for (int i = 0; i < 90; i++) { A[i] = 1 + (i * 7 + 3) % 500; Q[i] = 1 + (i * 13 + 5) % 500; }
    for (int i = 0; i < 70; i++) C[i] = 1 + (i * 31 + 1) % 500;
    for (int i = 0; i < 40; i++) Bp[i] = 1 + (i * 17 + 2) % 500;
    for (int i = 0; i < 9; i++) D[i] = 1 + i * 41;
    engine_config c = test_engine_config(4, 256, 64);
    engine *e = test_engine_create(m, &c);
    engine_run ref, r[4];
    const int G = SANITIZED ? 12 : 40;   /* tokens generated for A */
    engine_gen(e, A, 90, G, &ref);
    engine_run_wait(&ref);
    engine_destroy(e);
    c = test_engine_config(4, 256, 16);
    e = test_engine_create(m, &c);
    engine_gen(e, Bp, 40, G * 3 / 4, &r[1]);
    engine_gen(e, C, 70, G / 3, &r[2]);
    usleep(5000);
    engine_gen(e, A, 90, G, &r[0]);
    engine_gen(e, D, 9, G * 5 / 4, &r[3]);
    for (int i = 0; i < 4; i++) engine_run_wait(&r[i]);
    CHECKF(same_run(&ref, &r[0]), "metal-emu: alone and beside three others differ");
    CHECK(r[1].n_tokens == G * 3 / 4 && r[2].n_tokens == G / 3 && r[3].n_tokens == G * 5 / 4);
    engine_destroy(e);
    for (int i = 0; i < 4; i++) engine_run_destroy(&r[i]);

    char db[256];
    snprintf(db, sizeof db, "/tmp/hearth_test_metal_%d.db", (int)getpid());
    c = test_engine_config(1, 256, 64);
    c.prompt_cache = db;
    c.prompt_cache_bytes = 1 << 26;
    c.prompt_cache_block = 16;
    e = test_engine_create(m, &c);
    engine_run a1, a2, q, a3;
    engine_gen(e, A, 90, G, &a1); engine_run_wait(&a1);
    engine_gen(e, A, 90, G, &a2); engine_run_wait(&a2);
    CHECKF(a2.n_cached > 0 && same_run(&ref, &a2), "metal-emu: resumed from the resident prefix (%d cached) differs", a2.n_cached);
    engine_gen(e, Q, 90, 4, &q); engine_run_wait(&q);
    engine_gen(e, A, 90, G, &a3); engine_run_wait(&a3);
    CHECKF(a3.n_cached >= 80 && same_run(&ref, &a3), "metal-emu: resumed from sqlite (%d cached) differs", a3.n_cached);
    CHECKF(same_run(&ref, &a1), "metal-emu: the cold run differs");
    /* planted control: another prompt gives other ids */
    CHECK(!same_run(&ref, &q));
    printf("  engine on metal-emu: alone == beside 3 others; resumed (%d resident, %d from sqlite) == fresh\n", a2.n_cached, a3.n_cached);
    engine_destroy(e);
    engine_run_destroy(&ref); engine_run_destroy(&a1); engine_run_destroy(&a2); engine_run_destroy(&q); engine_run_destroy(&a3);
    static const char *const suffix[] = { "", "-wal", "-shm" };
    for (int i = 0; i < 3; i++) {
        char f[300];
        snprintf(f, sizeof f, "%s%s", db, suffix[i]);
        unlink(f);
    }
    model_free(m);
}

int main(void) {
    pool = pool_create(2);
    char err[256];
    dev = md_device_create(pool, err, sizeof err);
    CHECKF(dev != NULL, "device: %s", err);
    if (!dev) return test_summary("metal");
    md_emu_add_kernels(dev, test_planted_kernels);
    test_rmsnorm();
    test_gemv();
    test_elementwise();
    test_rope();
    test_kv_attention();
    test_planted_barrier();
    test_stories();
    if (!SANITIZED) {
        test_fixture("llama3-tiny-Q4_0.gguf", 1, 12);
        test_fixture("qwen2-tiny-Q8_0.gguf", 1, 12);
        test_fixture("gemma3-tiny-Q8_0.gguf", 1, 8);
        test_engine();
    } else {
        printf("  sanitized build: the large-vocabulary fixtures and the engine checks run in the release suite only\n");
    }
    md_device_destroy(dev);
    pool_destroy(pool);
    return test_summary("metal");
}
