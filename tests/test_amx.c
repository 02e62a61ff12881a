/* The AMX tile path (kernels/kern_amx.c):
 *  - the OS permission refused (forced) leaves the path unavailable, the
 *    selection falls back to AVX-512 with HEARTH_KERNELS=amx, and says why;
 *  - the live-config check: a config loaded with a wrong colsb, and one
 *    whose colsb was lost (a compiler dropping the stores), must fail it,
 *    and then the rows fall back (same bits, no tile run counted);
 *  - the GEMM == the AVX-512 path == the oracle, bit for bit: every block
 *    format, M in {16, 17, 31, 32, 33, 64, 100, 512}, K with odd block
 *    counts, N with tails, the output range split as 1 and 2 threads split
 *    it, and a row alone (M = 1), in M = 7 and in M = 64 the same.
 * Where the CPU has no AMX the GEMM runs on amx_ops.h's scalar model of the
 * tiles (kern_amx.c built with KERN_AMX_EMULATE); where it has, on the tiles
 * too, through kern_matmul. */
#include "tests/test.h"
#include "tests/block_scales.h"
#include "tests/rng.h"
#include "kernels/kernels.h"
#include "kernels/kern_path.h"
#include "kernels/kern_table.h"
#include "kernels/kern_amx.h"
#include "runtime/pool.h"

#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

static const int tile_types[] = { FMT_Q4_0, FMT_Q8_0, FMT_Q4_1, FMT_Q5_0, FMT_Q5_1, FMT_Q4_K, FMT_Q5_K, FMT_Q6_K };
#define N_TILE_TYPES (int)(sizeof tile_types / sizeof tile_types[0])

/* Half the rows quantized from normal floats, half random bits (every
 * extreme quant) with finite fp16 scales of both signs. */
static uint8_t *make_weight(int type, int64_t K, int64_t N) {
    size_t rb = format_row_bytes(type, K);
    uint8_t *data = malloc(rb * (size_t)N);
    float *tmp = malloc(sizeof(float) * (size_t)K);
    const format_info *f = format_get(type);
    for (int64_t n = 0; n < N; n++) {
        uint8_t *row = data + rb * (size_t)n;
        if (n % 2) {
            for (int64_t k = 0; k < K; k++) tmp[k] = rng_normal() * (n % 3 == 0 ? 0.01f : 1.0f);
            format_quantize_row(type, tmp, row, K);
            continue;
        }
        for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)rng_u32();
        for (int64_t b = 0; b < K / f->block_elems; b++) {
            uint8_t *blk = row + (size_t)b * f->block_bytes;
            float v0 = ldexpf(1.0f + (float)(rng_u32() % 1000) / 1000.0f, -(int)(rng_u32() % 8) - 4);
            fp16_t s0 = f32_to_fp16(rng_u32() & 1 ? -v0 : v0), s1 = f32_to_fp16(v0 * 0.5f);
            block_set_scales(type, blk, s0, s1);
        }
    }
    free(tmp);
    return data;
}

/* ---- permission and fallback ------------------------------------------------ */

static void test_permission(void) {
    char why[200] = "";
    CHECK(amx_request_permission(true, why, sizeof why) == -1);
    CHECKF(strstr(why, "refused") != NULL, "reason: %s", why);

    /* A process whose request is refused: no amx table, the probe picks the
     * best other path, and a forced HEARTH_KERNELS=amx is an error (exit 2
     * from kernels_select), not a quiet vector run. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("HEARTH_AMX_DENY", "1", 1);
        int bad = 0;
        bad |= kernels_path_available(KPATH_AMX) << 0;
        bad |= (kern_table_get(KPATH_AMX) != NULL) << 1;
        kern_path_id sel = kernels_select();
        bad |= (sel == KPATH_AMX) << 2;
        bad |= (kernels_path_available(KPATH_AVX512) && sel != KPATH_AVX512) << 3;
        bad |= (strcmp(kernels_amx_status(), "usable") == 0) << 4;
        if (bad) _exit(bad);
        setenv("HEARTH_KERNELS", "amx", 1);
        kernels_select();
        _exit(0);   /* not reached when the refusal is an error */
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 2, "refused permission: child status %d (want exit 2)", status);
    printf("amx: %s\n", kernels_amx_status());
}

/* ---- one GEMM shape ------------------------------------------------------------ */

static hpool *pools[3];
/* Set while the planted lost-colsb config is in force: the tiles must not run. */
static bool expect_fallback;
static kern_scratch scratch;

enum { M_MAX = 512 };
static const int Ms[] = { 16, 17, 31, 32, 33, 64, 100, 512 };

typedef struct {
    const kern_path *path;      /* the AMX rows to call directly (the model), or NULL: kern_matmul on KPATH_AMX */
    uint64_t (*runs)(void);
    bool (*take)(int type, int M);
} amx_under_test;

/* y = the AMX rows over [0, N) in `parts` pieces of whole work items. */
static void amx_rows_direct(const kern_path *p, const hweight *w, const kern_act *a, float *y, int parts) {
    int64_t items = (w->n_out + KP_UNIT_ROWS - 1) / KP_UNIT_ROWS, split = (items + 1) / 2;
    if (parts == 1 || items < 2) { p->rows(w, a, y, 0, w->n_out, 0); return; }
    int64_t mid = split * KP_UNIT_ROWS;
    p->rows(w, a, y, 0, mid, 0);
    p->rows(w, a, y, mid, w->n_out, 1);
}

static void test_shape(const amx_under_test *t, int type, int64_t K, int64_t N, int m_hi) {
    const int64_t nb = K / QK;
    uint8_t *wdata = make_weight(type, K, N);
    hweight w = { .type = type, .n_in = K, .n_out = N, .data = wdata, .row_bytes = format_row_bytes(type, K) };
    hweight wa = w;
    CHECK(kern_prepare_weight(kern_table_get(KPATH_AVX512), &w) == 0 && w.packed);
    if (!t->path) CHECK(kern_prepare_weight(kern_table_get(KPATH_AMX), &wa) == 0 && wa.packed);

    float *x = malloc(sizeof(float) * (size_t)(M_MAX * K));
    for (int64_t i = 0; i < M_MAX * K; i++) x[i] = rng_normal() * ((i / K) % 5 == 3 ? 50.0f : 1.0f);
    memset(x + 2 * K, 0, sizeof(float) * 32);    /* an all-zero activation block */
    act_q8 *q = malloc(sizeof(act_q8) * (size_t)(M_MAX * nb));
    int32_t *slo = malloc(sizeof(int32_t) * (size_t)(M_MAX * nb));
    act_extra *ext = malloc(sizeof(act_extra) * (size_t)(M_MAX * nb));
    for (int m = 0; m < M_MAX; m++) {
        kern_avx512_quantize(x + m * K, q + m * nb, slo + m * nb, K);
        kern_act_extra(type, q + m * nb, slo + m * nb, ext + m * nb, nb);
    }
    float *ref = malloc(sizeof(float) * (size_t)(M_MAX * N)), *y = malloc(sizeof(float) * (size_t)(M_MAX * N));
    float *alone = malloc(sizeof(float) * (size_t)(M_MAX * N));
    /* Each row alone on the AVX-512 path: what every batch must give. */
    for (int m = 0; m < m_hi; m++) kern_matmul(&w, 1, x + m * K, alone + m * N, &scratch, pools[1]);
    /* The oracle, for the rows it is cheap for. */
    int off_oracle = 0;
    for (int m = 0; m < m_hi; m += (m_hi > 100 ? 37 : 1))
        for (int64_t n = 0; n < N; n++) {
            float r = format_dot_q8(type, wdata + w.row_bytes * (size_t)n, q + m * nb, K);
            off_oracle += memcmp(&r, &alone[m * N + n], sizeof r) != 0;
        }
    CHECKF(off_oracle == 0, "%s K=%lld N=%lld: %d AVX-512 outputs differ from the oracle", format_name(type),
           (long long)K, (long long)N, off_oracle);

    for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
        int M = Ms[mi];
        if (M > m_hi) continue;
        kern_matmul(&w, M, x, ref, &scratch, pools[1]);
        CHECKF(memcmp(ref, alone, sizeof(float) * (size_t)(M * N)) == 0, "%s M=%d: AVX-512 not batch invariant",
               format_name(type), M);
        for (int threads = 1; threads <= 2; threads++) {
            for (int64_t i = 0; i < M_MAX * N; i++) y[i] = NAN;
            uint64_t runs0 = t->runs();
            if (t->path) {
                kern_act a = { .M = M, .n_in = K, .x = x, .q = q, .slo = slo, .ext = ext };
                amx_rows_direct(t->path, &w, &a, y, threads);
            } else {
                kern_matmul(&wa, M, x, y, &scratch, pools[threads]);
            }
            bool tiles = !expect_fallback && t->take(type, M);
            CHECKF(tiles ? t->runs() > runs0 : t->runs() == runs0, "%s M=%d: the tiles %s", format_name(type),
                   M, tiles ? "did not run" : "ran");
            CHECKF(memcmp(y, ref, sizeof(float) * (size_t)(M * N)) == 0,
                   "%s%s K=%lld N=%lld M=%d threads=%d: AMX differs from AVX-512", t->path ? "model " : "",
                   format_name(type), (long long)K, (long long)N, M, threads);
            int beyond = 0;    /* nothing written past row M */
            for (int64_t i = M * N; i < M_MAX * N; i++) beyond += !isnan(y[i]);
            CHECKF(beyond == 0, "%s M=%d: %d outputs written past the batch", format_name(type), M, beyond);
        }
    }
    /* Below one tile the AVX-512 rows run (no tile run), same bits. */
    if (m_hi >= 7) {
        uint64_t runs0 = t->runs();
        if (t->path) {
            kern_act a = { .M = 7, .n_in = K, .x = x, .q = q, .slo = slo, .ext = ext };
            amx_rows_direct(t->path, &w, &a, y, 1);
        } else {
            kern_matmul(&wa, 7, x, y, &scratch, pools[2]);
        }
        CHECK(t->runs() == runs0);
        CHECKF(memcmp(y, alone, sizeof(float) * (size_t)(7 * N)) == 0, "%s M=7 differs", format_name(type));
    }
    kern_release_weight(&w);
    kern_release_weight(&wa);
    free(alone); free(y); free(ref); free(ext); free(slo); free(q); free(x); free(wdata);
}

static void test_gemm(const amx_under_test *t) {
    for (int ti = 0; ti < N_TILE_TYPES; ti++) {
        int type = tile_types[ti];
        bool kq = type == FMT_Q4_K || type == FMT_Q5_K || type == FMT_Q6_K;
        /* block counts 1-5, 9, 8, 24, 40: odd and even (the last block of an
         * odd count runs alone), and fewer blocks than a tile pair */
        const int64_t Ks_q[] = { 32, 64, 96, 128, 160, 288 }, Ks_k[] = { 256, 768, 1280 };
        const int64_t *Ks = kq ? Ks_k : Ks_q;
        const int nk = kq ? 3 : 6;
        const int64_t Ns[3] = { 17, 67, 32 };
        for (int ki = 0; ki < nk; ki++)
            for (int ni = 0; ni < 3; ni++)
                test_shape(t, type, Ks[ki], Ns[ni], ki == nk - 1 && ni == 1 ? 512 : 100);
    }
}

/* ---- the live-config check -------------------------------------------------------- */

static void test_config(bool (*live)(const amx_cfg *, const amx_cfg *), const char *what) {
    amx_cfg want, bad;
    amx_config_build(&want);
    CHECKF(live(&want, &want), "%s: the config did not read back", what);
    bad = want;
    bad.b[16 + 2 * 2] = 28;     /* tile 2 (an A tile): 28 bytes a row, not 32 */
    CHECKF(!live(&want, &bad), "%s: a wrong colsb passed the live check", what);
    CHECKF(live(&want, &want), "%s: the config did not read back after the control", what);
}

int main(void) {
    for (int t = 1; t <= 2; t++) pools[t] = pool_create(t);
    scratch.size = kern_scratch_bytes(M_MAX, 1280);
    scratch.buf = malloc(scratch.size);

    test_permission();
    if (!kernels_path_available(KPATH_AVX512)) {
        /* The model runs AVX-512 code around the tiles; nothing of the path can run here. */
        CHECK(!kernels_path_available(KPATH_AMX));
        printf("amx unavailable (no AVX-512): fallback checked\n");
    } else {
        test_config(amx_config_live_emu, "model");
        /* A config that loses its colsb on load: the rows fall back to the
         * AVX-512 ones (same bits) and no tile run is counted. */
        amx_emu_set_drop_colsb(true);
        amx_cfg want;
        amx_config_build(&want);
        CHECK(!amx_config_live_emu(&want, &want));
        amx_under_test model = { &kern_path_amx_emu, amx_tile_runs_emu, amx_tiles_take_emu };
        expect_fallback = true;
        test_shape(&model, FMT_Q4_0, 96, 17, 33);
        expect_fallback = false;
        amx_emu_set_drop_colsb(false);

        test_gemm(&model);

        if (kernels_path_available(KPATH_AMX)) {
            test_config(amx_config_live, "tiles");
            amx_under_test real = { NULL, amx_tile_runs, amx_tiles_take };
            test_gemm(&real);
            CHECK(kern_path_get(KPATH_AMX) == &kern_path_amx);
            printf("amx tiles: checked against the AVX-512 path and the model\n");
        } else {
            printf("amx unavailable: fallback checked\n");
        }
    }
    free(scratch.buf);
    for (int t = 1; t <= 2; t++) pool_destroy(pools[t]);
    return test_summary("amx");
}
