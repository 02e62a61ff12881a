/* Matmul kernels against the scalar oracle (formats.c), for every path this
 * CPU can run and every format:
 *  - kern_matmul == format_dot_q8 / format_dot_f32 per output, within a tight
 *    tolerance and (the x86 paths follow the oracle's accumulation order)
 *    bit for bit; M in {1,2,3,5,6,7,16,33}, K and N with tails, pools of 1, 2, 3;
 *  - batch invariance: row m through M=1 and through any M, and through any
 *    thread count, bit-identical;
 *  - planted controls: a kernel that drops the last block, and a packed
 *    weight with two nibbles swapped, must fail the same check;
 *  - fused calls (kern_matmul_n) == one call per weight, bit for bit;
 *  - kern_get_row == format_dequantize_row, packed or not;
 *  - a path's own activation quantizer == act_quantize_row, byte for byte;
 *  - preparing a weight leaves the bytes it was made from intact;
 *  - the pool's worker id reaches a table's rows kernel: a table whose rows
 *    record the id, on 2 threads, sees ids 0 and 1 and gives the wrapped
 *    path's outputs (control: on 1 thread the same check sees only 0);
 *  - the SME2 path (aarch64, where the probe allows it): every block format,
 *    M in {1,2,3,7,16,17,33,64}, K and N with tails, 1-4 of 4 pool workers
 *    on SME beside NEON workers: SME2 == NEON == oracle bit for bit, from
 *    the same packed bytes as the NEON path's; and the
 *    matrix unit really ran (its tile and GEMV counters moved; control: with
 *    no SME workers they must not);
 *  - path names, forcing and the HEARTH_KERNELS names. */
#include "tests/test.h"
#include "tests/block_scales.h"
#include "kernels/kernels.h"
#include "kernels/kern_path.h"
#include "kernels/kern_table.h"
#include "kernels/kern_sme.h"
#include "runtime/pool.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

/* ---- deterministic random numbers ---------------------------------------- */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static float rng_normal(void) {
    double u = (rng_u32() + 0.5) / 4294967296.0, v = (rng_u32() + 0.5) / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static const int all_types[] = { FMT_Q4_0, FMT_Q8_0, FMT_Q4_K, FMT_Q6_K, FMT_Q5_0, FMT_Q4_1,
                                 FMT_Q5_1, FMT_Q5_K, FMT_F32, FMT_F16, FMT_BF16 };
#define N_TYPES (int)(sizeof all_types / sizeof all_types[0])

/* ---- weights ------------------------------------------------------------- */

/* A random fp16 scale: finite, varied magnitude and sign. */
static fp16_t rand_scale(bool allow_negative) {
    float v = ldexpf(1.0f + (float)(rng_u32() % 1000) / 1000.0f, -(int)(rng_u32() % 8) - 4);
    if (allow_negative && (rng_u32() & 1)) v = -v;
    return f32_to_fp16(v);
}

/* Random weight bytes: every quant bit random (so extremes like -128, 15, 63
 * all occur), the fp16 scale fields finite. Half the rows instead come from
 * quantizing normal floats, the way real weights are made. */
static uint8_t *make_weight(int type, int64_t K, int64_t N) {
    size_t rb = format_row_bytes(type, K);
    uint8_t *data = malloc(rb * (size_t)N);
    float *tmp = malloc(sizeof(float) * (size_t)K);
    for (int64_t n = 0; n < N; n++) {
        uint8_t *row = data + rb * (size_t)n;
        if (n % 2 == 1 || type == FMT_F32 || type == FMT_F16 || type == FMT_BF16) {
            for (int64_t k = 0; k < K; k++) tmp[k] = rng_normal() * (n % 3 == 0 ? 0.01f : 1.0f);
            format_quantize_row(type, tmp, row, K);
            continue;
        }
        for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)rng_u32();
        const format_info *f = format_get(type);
        for (int64_t b = 0; b < K / f->block_elems; b++) {
            uint8_t *blk = row + (size_t)b * f->block_bytes;
            fp16_t s0 = rand_scale(true), s1 = rand_scale(true);
            block_set_scales(type, blk, s0, s1);
        }
    }
    free(tmp);
    return data;
}

/* ---- the oracle ---------------------------------------------------------- */

typedef struct {
    int type;
    int64_t K, N;
    int M;
    const uint8_t *w;
    const float *x;
    act_q8 *xq;         /* M rows of K/QK blocks (integer formats) */
    float *ref;         /* M x N */
    float *bound;       /* M x N: sum |w_k x_k|, for the tolerance */
} oracle;

static void oracle_build(oracle *o, int type, int64_t K, int64_t N, int M, const uint8_t *w, const float *x) {
    *o = (oracle){ type, K, N, M, w, x, NULL, NULL, NULL };
    const format_info *f = format_get(type);
    size_t rb = format_row_bytes(type, K);
    int64_t nb = K / QK;
    o->xq = malloc(sizeof(act_q8) * (size_t)(M * nb + 1));
    o->ref = malloc(sizeof(float) * (size_t)(M * N));
    o->bound = malloc(sizeof(float) * (size_t)(M * N));
    float *wd = malloc(sizeof(float) * (size_t)K), *xd = malloc(sizeof(float) * (size_t)K);
    for (int m = 0; m < M; m++) act_quantize_row(x + m * K, o->xq + m * nb, K);
    for (int64_t n = 0; n < N; n++) {
        format_dequantize_row(type, w + rb * (size_t)n, wd, K);
        for (int m = 0; m < M; m++) {
            const act_q8 *q = o->xq + m * nb;
            for (int64_t k = 0; k < K; k++)
                xd[k] = f->uses_act_q8 ? q[k / QK].d * (float)q[k / QK].qs[k % QK] : x[m * K + k];
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += fabs((double)wd[k] * xd[k]);
            o->bound[m * N + n] = (float)s;
            o->ref[m * N + n] = f->uses_act_q8 ? format_dot_q8(type, w + rb * (size_t)n, q, K)
                                               : format_dot_f32(type, w + rb * (size_t)n, x + m * K, K);
        }
    }
    free(wd);
    free(xd);
}

static void oracle_free(oracle *o) {
    free(o->xq);
    free(o->ref);
    free(o->bound);
}

/* Outputs of rows [0, M) off the oracle by more than a tight tolerance
 * (float rounding of K terms), and those not bit-identical. */
static int oracle_misses(const oracle *o, const float *y, int M, int *not_exact) {
    int bad = 0, inexact = 0;
    for (int m = 0; m < M; m++)
        for (int64_t n = 0; n < o->N; n++) {
            float r = o->ref[m * o->N + n], v = y[m * o->N + n];
            float tol = 2.0f * (float)(o->K / 16 + 4) * FLT_EPSILON * o->bound[m * o->N + n] + 1e-30f;
            if (!(fabsf(v - r) <= tol)) bad++;
            if (memcmp(&v, &r, sizeof v) != 0) inexact++;
        }
    if (not_exact) *not_exact = inexact;
    return bad;
}

/* The planted wrong kernel: the oracle's dot without the last block. */
static void wrong_kernel_drop_last(const oracle *o, float *y) {
    const format_info *f = format_get(o->type);
    size_t rb = format_row_bytes(o->type, o->K);
    int64_t nb = o->K / QK, k2 = o->K - f->block_elems;
    for (int m = 0; m < o->M; m++)
        for (int64_t n = 0; n < o->N; n++)
            y[m * o->N + n] = k2 == 0 ? 0.0f
                : f->uses_act_q8 ? format_dot_q8(o->type, o->w + rb * (size_t)n, o->xq + m * nb, k2)
                                 : format_dot_f32(o->type, o->w + rb * (size_t)n, o->x + m * o->K, k2);
}

/* ---- one shape through one path ------------------------------------------ */

static hpool *pools[4];
static kern_scratch scratch;

static const int Ms[] = { 1, 2, 3, 5, 6, 7, 16, 33 };
#define M_MAX 33

static int64_t k_list(int type, int i) {
    static const int64_t small[] = { 32, 96, 288 }, kq[] = { 256, 512, 768 }, fl[] = { 1, 7, 288 };
    if (type == FMT_Q4_K || type == FMT_Q5_K || type == FMT_Q6_K) return kq[i];
    if (type == FMT_F32 || type == FMT_F16 || type == FMT_BF16) return fl[i];
    return small[i];
}
static const int64_t Ns[] = { 1, 5, 17, 67 };

/* Does `id` pack `type` (i.e. run its own kernel rather than the fallback)? */
static bool path_packs(kern_path_id id, int type) {
    const kern_path *p = kern_path_get(id);
    return p && p->packs(type);
}

static void test_shape(kern_path_id id, int type, int64_t K, int64_t N) {
    uint8_t *wdata = make_weight(type, K, N);
    size_t rb = format_row_bytes(type, K);
    uint8_t *wcopy = malloc(rb * (size_t)N);
    memcpy(wcopy, wdata, rb * (size_t)N);
    float *x = malloc(sizeof(float) * (size_t)(M_MAX * K));
    for (int64_t i = 0; i < M_MAX * K; i++) x[i] = rng_normal() * ((i / K) % 4 == 3 ? 100.0f : 1.0f);
    if (K >= 32) memset(x + 5 * K, 0, sizeof(float) * 32);   /* an all-zero activation block */

    oracle o;
    oracle_build(&o, type, K, N, M_MAX, wdata, x);

    CHECK(kernels_force(id));
    hweight w = { .type = type, .n_in = K, .n_out = N, .data = wdata, .row_bytes = rb };
    CHECK(kern_prepare_weight(kern_table_get(id), &w) == 0);
    bool packed = w.packed != NULL;
    CHECKF(packed == path_packs(id, type), "%s %s K=%lld: packed=%d", kernels_path_name(id),
           format_name(type), (long long)K, packed);
    CHECKF(memcmp(wdata, wcopy, rb * (size_t)N) == 0, "%s: preparing changed the source bytes", format_name(type));

    float *yall = malloc(sizeof(float) * (size_t)(M_MAX * N));
    float *y = malloc(sizeof(float) * (size_t)(M_MAX * N));
    int inexact = 0;
    /* The full batch on one thread is the reference for invariance. */
    kern_matmul(&w, M_MAX, x, yall, &scratch, pools[1]);
    int bad = oracle_misses(&o, yall, M_MAX, &inexact);
    CHECKF(bad == 0, "%s %s K=%lld N=%lld M=%d: %d outputs off the oracle", kernels_path_name(id),
           format_name(type), (long long)K, (long long)N, M_MAX, bad);
    CHECKF(inexact == 0, "%s %s K=%lld N=%lld: %d outputs not bit-identical to the oracle",
           kernels_path_name(id), format_name(type), (long long)K, (long long)N, inexact);

    for (int t = 1; t <= 3; t++)
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            int M = Ms[mi];
            for (int64_t i = 0; i < M * N; i++) y[i] = NAN;
            kern_matmul(&w, M, x, y, &scratch, pools[t]);
            CHECKF(memcmp(y, yall, sizeof(float) * (size_t)(M * N)) == 0,
                   "%s %s K=%lld N=%lld M=%d threads=%d: not batch invariant", kernels_path_name(id),
                   format_name(type), (long long)K, (long long)N, M, t);
        }
    /* Each row alone (M=1, from its own offset) == its row in the batch. */
    int row_diff = 0;
    for (int m = 0; m < M_MAX; m++) {
        kern_matmul(&w, 1, x + m * K, y, &scratch, pools[2]);
        row_diff += memcmp(y, yall + m * N, sizeof(float) * (size_t)N) != 0;
    }
    CHECKF(row_diff == 0, "%s %s: %d rows differ alone vs in the batch", kernels_path_name(id), format_name(type), row_diff);

    /* kern_get_row == the reference dequantizer, from whichever layout is kept. */
    float *r1 = malloc(sizeof(float) * (size_t)K), *r2 = malloc(sizeof(float) * (size_t)K);
    int row_bad = 0;
    for (int64_t n = 0; n < N; n++) {
        kern_get_row(&w, n, r1);
        format_dequantize_row(type, wdata + rb * (size_t)n, r2, K);
        row_bad += memcmp(r1, r2, sizeof(float) * (size_t)K) != 0;
    }
    CHECKF(row_bad == 0, "%s %s: %d rows of kern_get_row differ", kernels_path_name(id), format_name(type), row_bad);

    /* Planted controls: the same check must catch a wrong kernel. */
    wrong_kernel_drop_last(&o, y);
    CHECKF(oracle_misses(&o, y, M_MAX, NULL) > 0, "%s K=%lld: dropped-block control not caught",
           format_name(type), (long long)K);
    if (packed && type != FMT_F32 && type != FMT_F16 && type != FMT_BF16) {
        /* Swap the nibbles of every quant byte of the first k-unit of the
         * first panel (all its rows, so a zero scale cannot hide it). */
        kpack *p = w.packed;
        for (size_t i = 0; i < p->q_bytes; i++) {
            uint8_t *q = p->data + i;
            *q = (uint8_t)(*q << 4 | *q >> 4);
        }
        kern_matmul(&w, M_MAX, x, y, &scratch, pools[2]);
        CHECKF(oracle_misses(&o, y, M_MAX, NULL) > 0, "%s %s: swapped-nibble control not caught",
               kernels_path_name(id), format_name(type));
    }

    kern_release_weight(&w);
    CHECK(w.packed == NULL);
    free(r1); free(r2);
    free(y); free(yall); free(x);
    oracle_free(&o);
    free(wdata); free(wcopy);
}

/* ---- both layout variants round-trip ----------------------------------- */

/* Every format through kern_pack in every layout variant (Q6_K planes for
 * NEON, crumbs for x86; panels apart or pairs interleaved), whatever path
 * this CPU runs: the packed bytes must give back every row exactly. */
static void test_layouts(void) {
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int variant = 0; variant < 4; variant++) {
            int type = all_types[ti], crumbs = variant & 1, inter = variant >> 1;
            int64_t K = k_list(type, 2), N = 37;
            uint8_t *data = make_weight(type, K, N);
            hweight w = { .type = type, .n_in = K, .n_out = N, .data = data, .row_bytes = format_row_bytes(type, K) };
            w.packed = kern_pack(&w, crumbs, inter);
            CHECK(w.packed != NULL);
            float *r1 = malloc(sizeof(float) * (size_t)K), *r2 = malloc(sizeof(float) * (size_t)K);
            int bad = 0;
            for (int64_t n = 0; w.packed && n < N; n++) {
                kern_get_row(&w, n, r1);
                format_dequantize_row(type, data + w.row_bytes * (size_t)n, r2, K);
                bad += memcmp(r1, r2, sizeof(float) * (size_t)K) != 0;
            }
            CHECKF(bad == 0, "%s crumbs=%d interleaved=%d: %d rows differ after packing",
                   format_name(type), crumbs, inter, bad);
            /* Where an interleaved pair puts each part: one forward stream
             * (the speed-up is measured, the layout is what is checked). */
            const kpack *pk = w.packed;
            if (pk && inter && pk->units > 1) {
                size_t qb = pk->q_bytes, sb = pk->s_bytes;
                CHECK(kp_quants(pk, 1, 0) == kp_quants(pk, 0, 0) + qb);
                CHECK(kp_quants(pk, 0, 1) == kp_quants(pk, 0, 0) + 2 * (qb + sb));
                if (sb) {
                    CHECK(kp_scales(pk, 0, 0) == kp_quants(pk, 0, 0) + 2 * qb);
                    CHECK(kp_scales(pk, 1, 1) == kp_quants(pk, 0, 1) + 2 * qb + sb);
                    CHECK((uintptr_t)kp_scales(pk, 1, 1) % 32 == 0);   /* aligned fp16 loads */
                }
                CHECK((uintptr_t)kp_quants(pk, 1, 1) % (qb < 64 ? qb : 64) == 0);   /* F16/BF16 columns: 32 B */
            }
            kern_pack_free(w.packed);
            free(r1); free(r2); free(data);
        }
}

/* ---- activation quantizer ------------------------------------------------ */

static void test_quantizer(kern_path_id id) {
    const kern_path *p = kern_path_get(id);
    if (!p || !p->quantize) return;
    enum { K = 1024 };
    static float x[K];
    static act_q8 a[K / QK], b[K / QK];
    static int32_t slo[K / QK];
    int bad = 0, bad_slo = 0;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < K; i++) {
            x[i] = rng_normal() * ldexpf(1.0f, (int)(rng_u32() % 40) - 20);
            if (round % 7 == 0 && i % 5 == 0) x[i] = 0.0f;
            if (round % 11 == 0 && i % 32 < 31) x[i] = 0.0f;               /* one nonzero value */
            if (round % 13 == 0) x[i] = (float)((int)(rng_u32() % 255) - 127) * 0.5f; /* ties at .5 */
        }
        if (round % 17 == 0) memset(x, 0, sizeof x);
        act_quantize_row(x, a, K);
        memset(b, 0x55, sizeof b);
        p->quantize(x, b, slo, K);
        for (int j = 0; j < K / QK; j++) {
            bad += memcmp(&a[j], &b[j], sizeof a[j]) != 0;
            int32_t s = 0;
            for (int l = 0; l < 16; l++) s += a[j].qs[l];
            bad_slo += s != slo[j];
        }
    }
    CHECKF(bad == 0, "%s quantizer: %d blocks differ from act_quantize_row", p->name, bad);
    CHECKF(bad_slo == 0, "%s quantizer: %d half sums wrong", p->name, bad_slo);
}

/* ---- a bigger shape: several register tiles and many k blocks ------------ */

static void test_big(kern_path_id id, int type) {
    int64_t K = type == FMT_F32 || type == FMT_F16 || type == FMT_BF16 ? 1024 : 2048, N = 200;
    int M = 21;
    uint8_t *wdata = make_weight(type, K, N);
    float *x = malloc(sizeof(float) * (size_t)(M * K));
    for (int64_t i = 0; i < M * K; i++) x[i] = rng_normal();
    oracle o;
    oracle_build(&o, type, K, N, M, wdata, x);
    CHECK(kernels_force(id));
    hweight w = { .type = type, .n_in = K, .n_out = N, .data = wdata, .row_bytes = format_row_bytes(type, K) };
    CHECK(kern_prepare_weight(kern_table_get(id), &w) == 0);
    float *y = malloc(sizeof(float) * (size_t)(M * N));
    kern_matmul(&w, M, x, y, &scratch, pools[2]);
    int inexact;
    int bad = oracle_misses(&o, y, M, &inexact);
    CHECKF(bad == 0 && inexact == 0, "%s %s big: %d off, %d not exact", kernels_path_name(id), format_name(type), bad, inexact);
    kern_release_weight(&w);
    free(y); free(x); free(wdata);
    oracle_free(&o);
}

/* ---- fused calls ---------------------------------------------------------- */

/* kern_matmul_n over weights of mixed formats that share one input (as q|k|v
 * or gate|up of a K-quant mix do) == each weight through kern_matmul, bit for
 * bit, at every M and thread count. The sets mix formats whose activation
 * extras differ (Q4_K vs Q6_K, Q4_0 vs Q8_0) and a float weight, and sizes
 * whose work items do not divide evenly, so a block of the fused job spans
 * two weights. */
static void test_fused(kern_path_id id) {
    static const int sets[][3] = {
        { FMT_Q4_K, FMT_Q4_K, FMT_Q6_K }, { FMT_Q4_0, FMT_Q8_0, FMT_F16 }, { FMT_Q6_K, FMT_Q5_K, FMT_Q5_1 },
    };
    static const int64_t Nf[3] = { 67, 32, 45 };
    const int64_t K = 512;
    CHECK(kernels_force(id));
    float *x = malloc(sizeof(float) * (size_t)(M_MAX * K));
    for (int64_t i = 0; i < M_MAX * K; i++) x[i] = rng_normal();
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        for (int count = 2; count <= 3; count++) {
            hweight w[3];
            uint8_t *data[3];
            float *want[3], *got[3];
            for (int i = 0; i < count; i++) {
                data[i] = make_weight(sets[si][i], K, Nf[i]);
                w[i] = (hweight){ .type = sets[si][i], .n_in = K, .n_out = Nf[i], .data = data[i],
                                  .row_bytes = format_row_bytes(sets[si][i], K) };
                CHECK(kern_prepare_weight(kern_table_get(id), &w[i]) == 0);
                want[i] = malloc(sizeof(float) * (size_t)(M_MAX * Nf[i]));
                got[i] = malloc(sizeof(float) * (size_t)(M_MAX * Nf[i]));
            }
            const hweight *ws[3] = { &w[0], &w[1], &w[2] };
            for (int t = 1; t <= 3; t++)
                for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                    int M = Ms[mi], diff = 0;
                    for (int i = 0; i < count; i++) {
                        kern_matmul(&w[i], M, x, want[i], &scratch, pools[t]);
                        for (int64_t j = 0; j < M * Nf[i]; j++) got[i][j] = NAN;
                    }
                    kern_matmul_n(count, ws, M, x, got, &scratch, pools[t]);
                    for (int i = 0; i < count; i++)
                        diff += memcmp(got[i], want[i], sizeof(float) * (size_t)(M * Nf[i])) != 0;
                    CHECKF(diff == 0, "%s fused %s+%s%s%s M=%d threads=%d: %d outputs differ from single calls",
                           kernels_path_name(id), format_name(sets[si][0]), format_name(sets[si][1]),
                           count == 3 ? "+" : "", count == 3 ? format_name(sets[si][2]) : "", M, t, diff);
                }
            for (int i = 0; i < count; i++) {
                kern_release_weight(&w[i]);
                free(data[i]); free(want[i]); free(got[i]);
            }
        }
    }
    free(x);
}

/* ---- the worker id reaches the kernel -------------------------------------- */

/* A matmul path that records which pool workers ran its rows, then computes
 * them with a real path (same packing rules, so the same layout), or, on a
 * CPU with no packing path (cortex-a53), writes zeros (the ids are what is
 * checked there). The first worker in waits (bounded) for the other to
 * take a block, so a 2-thread run cannot be finished by one worker alone
 * before the other wakes. */
static const kern_path *rec_inner;
static atomic_int rec_calls[3];   /* [0], [1]: per worker id; [2]: any id out of range */
static int rec_threads;

static bool rec_packs(int type) { return rec_inner ? rec_inner->packs(type) : type == FMT_Q4_0; }

static void rec_rows(const hweight *w, const kern_act *a, float *y, int64_t n0, int64_t n1, int worker) {
    atomic_fetch_add(&rec_calls[worker >= 0 && worker < 2 && worker < rec_threads ? worker : 2], 1);
    if (rec_threads > 1 && (worker == 0 || worker == 1)) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do clock_gettime(CLOCK_MONOTONIC, &t);
        while (!atomic_load(&rec_calls[1 - worker]) && t.tv_sec - t0.tv_sec < 10);
    }
    if (rec_inner) rec_inner->rows(w, a, y, n0, n1, worker);
    else for (int m = 0; m < a->M; m++) memset(y + (size_t)m * w->n_out + n0, 0, sizeof(float) * (size_t)(n1 - n0));
}

/* 1 when a run on `threads` workers showed the kernel ids 0 and 1 and none out of range. */
static int worker_ids_seen(const kern_table *t, const hweight *src, const float *x, float *y, int threads) {
    hweight w = *src;
    CHECK(kern_prepare_weight(t, &w) == 0);
    CHECK(w.packed && w.packed_path == t->matmul);
    for (int i = 0; i < 3; i++) atomic_store(&rec_calls[i], 0);
    rec_threads = threads;
    kern_matmul(&w, 2, x, y, &scratch, pools[threads]);
    kern_release_weight(&w);
    return atomic_load(&rec_calls[0]) > 0 && atomic_load(&rec_calls[1]) > 0 && atomic_load(&rec_calls[2]) == 0;
}

static void test_worker_ids(void) {
    kern_path_id inner = KPATH_COUNT;
    for (int p = KPATH_COUNT - 1; p > KPATH_SCALAR; p--)
        if (kernels_path_available((kern_path_id)p) && path_packs((kern_path_id)p, FMT_Q4_0)) inner = (kern_path_id)p;
    const kern_table *base = kern_table_get(inner == KPATH_COUNT ? KPATH_SCALAR : inner);
    rec_inner = inner == KPATH_COUNT ? NULL : base->matmul;
    kern_path rec = *base->matmul;
    rec.name = "recorder";
    rec.packs = rec_packs;
    rec.rows = rec_rows;
    kern_table t = *base;
    t.matmul = &rec;

    const int64_t K = 256, N = 64 * KP_UNIT_ROWS;   /* many units: more blocks than workers */
    uint8_t *data = make_weight(FMT_Q4_0, K, N);
    hweight w = { .type = FMT_Q4_0, .n_in = K, .n_out = N, .data = data, .row_bytes = format_row_bytes(FMT_Q4_0, K) };
    float *x = malloc(sizeof(float) * (size_t)(2 * K));
    float *want = malloc(sizeof(float) * (size_t)(2 * N)), *got = malloc(sizeof(float) * (size_t)(2 * N));
    for (int64_t i = 0; i < 2 * K; i++) x[i] = rng_normal();
    hweight ref = w;
    CHECK(kern_prepare_weight(base, &ref) == 0);
    kern_matmul(&ref, 2, x, want, &scratch, pools[2]);
    kern_release_weight(&ref);
    if (!rec_inner) memset(want, 0, sizeof(float) * (size_t)(2 * N));

    CHECKF(worker_ids_seen(&t, &w, x, got, 2), "2 threads: the rows kernel saw worker 0 %d times, 1 %d times, "
           "out of range %d", atomic_load(&rec_calls[0]), atomic_load(&rec_calls[1]), atomic_load(&rec_calls[2]));
    CHECK(memcmp(got, want, sizeof(float) * (size_t)(2 * N)) == 0);
    /* planted control: one worker cannot show both ids, so the check must fail */
    CHECKF(!worker_ids_seen(&t, &w, x, got, 1), "control: 1 thread passed the two-worker check");
    CHECK(atomic_load(&rec_calls[0]) > 0 && atomic_load(&rec_calls[2]) == 0);
    free(data); free(x); free(want); free(got);
}

/* ---- the SME2 path: workers split between SME and NEON ---------------------- */

#if defined(__aarch64__)
static void test_sme_split(void) {
    static const int types[] = { FMT_Q4_0, FMT_Q4_1, FMT_Q5_0, FMT_Q5_1, FMT_Q8_0, FMT_Q4_K, FMT_Q5_K, FMT_Q6_K };
    static const int Msme[] = { 1, 2, 3, 7, 16, 17, 33, 64 };
    enum { MS = 64 };
    const kern_table *sme = kern_table_get(KPATH_SME2), *neon = kern_table_get(KPATH_NEON);
    CHECK(sme && neon);
    if (!sme || !neon) return;
    hpool *pool4 = pool_create(4);
    kern_scratch sc = { NULL, kern_scratch_bytes(MS, 768) };
    sc.buf = malloc(sc.size);
    const int saved = sme_workers();
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int type = types[ti];
        /* K: 7 blocks (a tail after the 4 in flight) or 3 super-blocks; N: a panel tail */
        const int64_t K = kp_is_kquant(type) ? 768 : 224, N = 67;
        uint8_t *data = make_weight(type, K, N);
        float *x = malloc(sizeof(float) * (size_t)(MS * K));
        for (int64_t i = 0; i < MS * K; i++) x[i] = rng_normal();
        oracle o;
        oracle_build(&o, type, K, N, MS, data, x);
        hweight wn = { .type = type, .n_in = K, .n_out = N, .data = data, .row_bytes = format_row_bytes(type, K) };
        hweight ws = wn;
        CHECK(kern_prepare_weight(neon, &wn) == 0 && kern_prepare_weight(sme, &ws) == 0);
        CHECK(wn.packed && ws.packed && ws.packed_path == sme->matmul);
        /* one layout: the SME2 path packs exactly the NEON panels (no second form) */
        const kpack *pn = wn.packed, *psm = ws.packed;
        CHECKF(pn && psm && pn->panel_bytes == psm->panel_bytes && pn->n_panels == psm->n_panels &&
               memcmp(pn->data, psm->data, (size_t)pn->n_panels * pn->panel_bytes) == 0,
               "sme2 %s: packed bytes differ from the NEON path's", format_name(type));
        float *want = malloc(sizeof(float) * (size_t)(MS * N)), *got = malloc(sizeof(float) * (size_t)(MS * N));
        int inexact = 0;
        kern_matmul(&wn, MS, x, want, &sc, pool4);
        CHECKF(oracle_misses(&o, want, MS, &inexact) == 0 && inexact == 0, "neon %s: off the oracle", format_name(type));
        for (int sw = 1; sw <= 4; sw++) {
            sme_set_workers(sw);
            for (size_t mi = 0; mi < sizeof Msme / sizeof Msme[0]; mi++) {
                const int M = Msme[mi];
                kern_matmul(&wn, M, x, want, &sc, pool4);
                for (int64_t i = 0; i < M * N; i++) got[i] = NAN;
                uint64_t t0 = sme_tile_runs(), g0 = sme_gemv_runs();
                kern_matmul(&ws, M, x, got, &sc, pool4);
                CHECKF(memcmp(got, want, sizeof(float) * (size_t)(M * N)) == 0,
                       "sme2 %s K=%lld M=%d with %d SME workers of 4: differs from neon", format_name(type),
                       (long long)K, M, sw);
                /* every worker is an SME one: the unit must have run (with
                 * fewer, the NEON workers may take every block) */
                if (sw == 4)
                    CHECKF(M == 1 ? sme_gemv_runs() > g0 : sme_tile_runs() > t0,
                           "sme2 %s M=%d: no SME %s ran", format_name(type), M, M == 1 ? "GEMV panel" : "tile");
            }
        }
        /* Two calls of one shape on other activations: the second must not
         * reuse the first's transposed activations (kept per call only). */
        sme_set_workers(4);
        for (int round = 0; round < 2; round++) {
            const float *xr = x + (size_t)round * 17 * (size_t)K;
            kern_matmul(&wn, 17, xr, want, &sc, pool4);
            kern_matmul(&ws, 17, xr, got, &sc, pool4);
            CHECKF(memcmp(got, want, sizeof(float) * (size_t)(17 * N)) == 0,
                   "sme2 %s: call %d of the same shape on new activations differs from neon", format_name(type), round);
        }
        /* control: no SME workers, no tiles, and the same bits from NEON */
        sme_set_workers(0);
        uint64_t t0 = sme_tile_runs(), g0 = sme_gemv_runs();
        kern_matmul(&ws, 17, x, got, &sc, pool4);
        kern_matmul(&ws, 1, x, got + 17 * N, &sc, pool4);
        CHECKF(sme_tile_runs() == t0 && sme_gemv_runs() == g0, "control: SME counters moved with no SME workers");
        sme_set_workers(saved);
        kern_release_weight(&wn);
        kern_release_weight(&ws);
        oracle_free(&o);
        free(want); free(got); free(x); free(data);
    }
    free(sc.buf);
    pool_destroy(pool4);
}
#endif

int main(void) {
    for (int t = 1; t <= 3; t++) pools[t] = pool_create(t);
    scratch.size = kern_scratch_bytes(M_MAX, 2048);
    scratch.buf = malloc(scratch.size);

    /* Names and selection. */
    for (int p = 0; p < KPATH_COUNT; p++)
        CHECK(kernels_path_from_name(kernels_path_name((kern_path_id)p)) == (kern_path_id)p);
    CHECK(kernels_path_from_name("nope") == KPATH_COUNT);
    CHECK(kernels_path_available(KPATH_SCALAR));
    CHECK(!kernels_force(KPATH_COUNT));
    kern_path_id best = kernels_select();
    CHECK(kernels_path_available(best));
    CHECK(kernels_current() == best);
    printf("cpu: %s; selected path: %s\n", kernels_cpu_summary(), kernels_path_name(best));
    test_layouts();
    test_worker_ids();
#if defined(__x86_64__)
    /* The AVX-512 tiles read both panels of a pair: they pack them interleaved. */
    CHECK(kern_path_avx512.pairs_interleaved && !kern_path_avx2.pairs_interleaved);
#endif

    for (int p = 0; p < KPATH_COUNT; p++) {
        kern_path_id id = (kern_path_id)p;
        if (!kernels_path_available(id)) { printf("path %s: not available here\n", kernels_path_name(id)); continue; }
        int before = test_fail_count;
        test_quantizer(id);
        test_fused(id);
        for (int ti = 0; ti < N_TYPES; ti++) {
            for (int ki = 0; ki < 3; ki++)
                for (size_t ni = 0; ni < sizeof Ns / sizeof Ns[0]; ni++)
                    test_shape(id, all_types[ti], k_list(all_types[ti], ki), Ns[ni]);
            test_big(id, all_types[ti]);
        }
        printf("path %s: %s\n", kernels_path_name(id), test_fail_count == before ? "ok" : "FAILED");
    }
#if defined(__aarch64__)
    /* Engagement: where the probe allows SME2, its tests above must have run
     * on the matrix unit, not a silent NEON fallback. */
    if (kernels_path_available(KPATH_SME2)) {
        printf("sme2: %llu tiles, %llu GEMV panels so far; %d SME workers\n", (unsigned long long)sme_tile_runs(),
               (unsigned long long)sme_gemv_runs(), sme_workers());
        CHECKF(sme_tile_runs() > 0 && sme_gemv_runs() > 0, "sme2 was available but no SME tile (%llu) or GEMV (%llu) ran",
               (unsigned long long)sme_tile_runs(), (unsigned long long)sme_gemv_runs());
        test_sme_split();
        printf("sme2 split: %s\n", test_fail_count == 0 ? "ok" : "FAILED");
    }
#endif

    kernels_select();
    free(scratch.buf);
    for (int t = 1; t <= 3; t++) pool_destroy(pools[t]);
    return test_summary("kernels");
}
