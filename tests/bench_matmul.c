/* Matmul speed per format and path, on random weights:
 *   GEMV (M=1): GB/s of weight bytes streamed (the decode bound);
 *   GEMM (M=512 by default): GOPS (2*M*K*N / s) (the prefill bound);
 * each over repeated runs (min / median / max time), with the scalar path
 * measured in the same run as the baseline ratio (on a smaller N: it is slow).
 *
 *   bench_matmul [-t threads] [-r reps] [-f Q4_0,Q8_0,...] [-p avx512,avx2]
 *                [-k n_in] [-n n_out] [-m M] [--gemv-only | --gemm-only] [--no-scalar]
 *                [--cpu-time]   (one thread, timed by its CPU time: for shared machines)
 *
 * The GEMV weight is n_out x n_in (default 4096 x 32768, well past the L3) so
 * the figure is memory bandwidth, not cache. */
#include "kernels/kernels.h"
#include "kernels/kern_path.h"
#include "kernels/kern_table.h"
#include "runtime/pool.h"
#include "tests/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng >> 32); }

/* --cpu-time (with -t 1): the calling thread's CPU time, so a figure taken on
 * a machine shared with other jobs counts only the time this thread ran. */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Random quant bytes with small finite fp16 scales: as fast as memset and
 * every bit pattern a kernel can meet. */
static uint8_t *random_weight(int type, int64_t K, int64_t N) {
    size_t rb = format_row_bytes(type, K), total = rb * (size_t)N;
    uint8_t *d = malloc(total);
    if (!d) return NULL;
    uint32_t *w = (uint32_t *)d;
    for (size_t i = 0; i < total / 4; i++) w[i] = rnd();
    const format_info *f = format_get(type);
    fp16_t s = f32_to_fp16(0.01f);
    if (type == FMT_F32) { float *x = (float *)d; for (size_t i = 0; i < total / 4; i++) x[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f; }
    if (type == FMT_F16) { fp16_t *x = (fp16_t *)d; for (size_t i = 0; i < total / 2; i++) x[i] = f32_to_fp16((float)(rnd() % 2001) / 1000.0f - 1.0f); }
    if (type == FMT_BF16) { bf16_t *x = (bf16_t *)d; for (size_t i = 0; i < total / 2; i++) x[i] = f32_to_bf16((float)(rnd() % 2001) / 1000.0f - 1.0f); }
    if (!f->uses_act_q8) return d;
    for (size_t b = 0; b < total / f->block_bytes; b++) {
        uint8_t *blk = d + b * f->block_bytes;
        switch (type) {
        case FMT_Q6_K: ((block_q6_k *)blk)->d = s; break;
        case FMT_Q4_1: ((block_q4_1 *)blk)->m = s; ((block_q4_1 *)blk)->d = s; break;
        case FMT_Q5_1: ((block_q5_1 *)blk)->m = s; ((block_q5_1 *)blk)->d = s; break;
        case FMT_Q4_K: ((block_q4_k *)blk)->dmin = s; ((block_q4_k *)blk)->d = s; break;
        case FMT_Q5_K: ((block_q5_k *)blk)->dmin = s; ((block_q5_k *)blk)->d = s; break;
        default: memcpy(blk, &s, 2); break;   /* d is the first field */
        }
    }
    return d;
}

typedef struct { double min, med, max; } stats;

/* Times `reps` runs of y = W x for M rows (after one warm-up run). */
static stats time_matmul(hweight *w, int M, const float *x, float *y, kern_scratch *s, hpool *pool, int reps) {
    double t[64];
    if (reps > 64) reps = 64;
    kern_matmul(w, M, x, y, s, pool);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        kern_matmul(w, M, x, y, s, pool);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return (stats){ t[0], t[reps / 2], t[reps - 1] };
}

static size_t weight_bytes(const hweight *w) {
    return w->packed ? ((kpack *)w->packed)->n_panels * ((kpack *)w->packed)->panel_bytes
                     : w->row_bytes * (size_t)w->n_out;
}

static bool in_list(const char *list, const char *name) {
    if (!list) return true;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
    return false;
}

int main(int argc, char **argv) {
    int threads = pool_default_threads(), reps = 5, M = 512;
    int64_t K = 4096, N = 32768, gK = 2048, gN = 8192;
    const char *formats = NULL, *paths = NULL;
    bool gemv = true, gemm = true, scalar = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-t") && v) { threads = atoi(v); i++; }
        else if (!strcmp(a, "-r") && v) { reps = atoi(v); i++; }
        else if (!strcmp(a, "-f") && v) { formats = v; i++; }
        else if (!strcmp(a, "-p") && v) { paths = v; i++; }
        else if (!strcmp(a, "-k") && v) { K = gK = atoll(v); i++; }
        else if (!strcmp(a, "-n") && v) { N = gN = atoll(v); i++; }
        else if (!strcmp(a, "-m") && v) { M = atoi(v); i++; }
        else if (!strcmp(a, "--gemv-only")) gemm = false;
        else if (!strcmp(a, "--gemm-only")) gemv = false;
        else if (!strcmp(a, "--no-scalar")) scalar = false;
        else if (!strcmp(a, "--cpu-time")) { bench_clock = CLOCK_THREAD_CPUTIME_ID; threads = 1; }
        else { fprintf(stderr, "usage: %s [-t threads] [-r reps] [-f formats] [-p paths] [-k n_in] [-n n_out] [-m M] [--gemv-only|--gemm-only] [--no-scalar] [--cpu-time]\n", argv[0]); return 2; }
    }
    if (reps < 1) reps = 1;
    if (M < 1) M = 1;
    hpool *pool = pool_create(threads);
    printf("cpu: %s\nthreads %d, reps %d; GEMV %lld x %lld; GEMM M=%d, %lld x %lld\n", kernels_cpu_summary(),
           threads, reps, (long long)N, (long long)K, M, (long long)gN, (long long)gK);

    static const int types[] = { FMT_Q4_0, FMT_Q8_0, FMT_Q4_K, FMT_Q6_K, FMT_Q5_0, FMT_Q4_1,
                                 FMT_Q5_1, FMT_Q5_K, FMT_F16, FMT_BF16, FMT_F32 };
    int64_t maxK = K > gK ? K : gK;
    kern_scratch s = { NULL, kern_scratch_bytes(M, maxK) };
    s.buf = malloc(s.size);
    float *x = malloc(sizeof(float) * (size_t)M * (size_t)maxK);
    float *y = malloc(sizeof(float) * (size_t)M * (size_t)(N > gN ? N : gN));
    for (int64_t i = 0; i < (int64_t)M * maxK; i++) x[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f;

    printf("%-5s %-7s %-6s %12s %12s %12s   %s\n", "fmt", "path", "test", "min", "median", "max", "x scalar");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int type = types[ti];
        if (!in_list(formats, format_name(type))) continue;
        for (int pass = 0; pass < 2; pass++) {
            bool is_gemv = pass == 0;
            if ((is_gemv && !gemv) || (!is_gemv && !gemm)) continue;
            int64_t k = is_gemv ? K : gK, n = is_gemv ? N : gN;
            int rows = is_gemv ? 1 : M;
            uint8_t *data = random_weight(type, k, n);
            if (!data) { fprintf(stderr, "out of memory\n"); return 1; }
            double base = 0;   /* the scalar figure (GB/s or GOPS) */
            for (int p = 0; p < KPATH_COUNT; p++) {
                kern_path_id id = (kern_path_id)p;
                if (!kernels_path_available(id) || !in_list(paths, kernels_path_name(id))) continue;
                if (id == KPATH_SCALAR && !scalar) continue;
                /* The scalar GEMM gets fewer rows: it is the slow oracle. */
                int64_t nn = id == KPATH_SCALAR && !is_gemv && n > 256 ? 256 : n;
                kernels_force(id);
                hweight w = { .type = type, .n_in = k, .n_out = nn, .data = data, .row_bytes = format_row_bytes(type, k) };
                double t0 = now();
                if (kern_prepare_weight(kern_table_get(id), &w) != 0) { fprintf(stderr, "prepare failed\n"); return 1; }
                double tprep = now() - t0;
                stats st = time_matmul(&w, rows, x, y, &s, pool, id == KPATH_SCALAR ? (reps < 3 ? reps : 3) : reps);
                double unit = is_gemv ? (double)weight_bytes(&w) / 1e9 : 2.0 * rows * (double)k * (double)nn / 1e9;
                double best = unit / st.min;
                if (id == KPATH_SCALAR) base = best;
                printf("%-5s %-7s %-6s %9.2f %s %9.2f %s %9.2f %s   %s", format_name(type), kernels_path_name(id),
                       is_gemv ? "gemv" : "gemm", unit / st.min, is_gemv ? "GB/s" : "GOPS", unit / st.med,
                       is_gemv ? "GB/s" : "GOPS", unit / st.max, is_gemv ? "GB/s" : "GOPS",
                       base > 0 && id != KPATH_SCALAR ? "" : "-");
                if (base > 0 && id != KPATH_SCALAR) printf("x%.1f", best / base);
                printf("  (%.2f ms", st.min * 1e3);
                if (w.packed) printf(", packed in %.0f ms", tprep * 1e3);
                printf(")\n");
                fflush(stdout);
                kern_release_weight(&w);
            }
            free(data);
        }
    }
    kernels_select();
    free(x); free(y); free(s.buf);
    pool_destroy(pool);
    return 0;
}
