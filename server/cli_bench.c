/* `hearth bench`: prompt processing (ppN) and generation (tgN) speed on one
 * slot, like llama-bench, next to the memory bandwidth measured in the same
 * run, so decode speed reads as a fraction of its bound
 * (bandwidth / weight bytes read per token). */
#include "server/commands.h"
#include "server/cli_args.h"
#include "engine/sched/generate.h"
#include "runtime/pool.h"
#include "engine/synth/demo_model.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 16
#define TG_PROMPT 8            /* tokens evaluated before a tgN run */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct { double min, med, max; } stats3;

static stats3 summarize(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    stats3 s = { v[0], n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[n - 1] };
    return s;
}

/* "1,2,4" into out[]; returns the count or -1 (message printed). */
static int parse_int_list(const char *flag, const char *v, int lo, int hi, int *out) {
    if (!v) return -1;
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == MAX_LIST) { fprintf(stderr, "hearth: %s takes at most %d values\n", flag, MAX_LIST); return -1; }
        if (!arg_int(flag, tok, lo, hi, &out[n])) return -1;
        n++;
    }
    if (!n) { fprintf(stderr, "hearth: %s needs at least one value\n", flag); return -1; }
    return n;
}

static double rss_mib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, resident = 0;
    int ok = fscanf(f, "%lu %lu", &size, &resident) == 2;
    fclose(f);
    return ok ? (double)resident * (double)sysconf(_SC_PAGESIZE) / (1 << 20) : 0;
}

/* ---- read bandwidth --------------------------------------------------- */

/* Vector accumulators keep the loop bound by memory, not by the adds. */
typedef unsigned long long v2u64 __attribute__((vector_size(16)));

#define BW_CHUNK (64 * 1024)   /* bytes per pool item */

typedef struct {
    v2u64 *buf;
    v2u64 (*sums)[4];          /* per worker, 64 bytes apart: no false sharing */
} bw_job;

static void bw_read(void *ctx, int64_t begin, int64_t end, int worker) {
    bw_job *j = ctx;
    const v2u64 *p = j->buf + begin * (BW_CHUNK / sizeof(v2u64));
    const v2u64 *e = j->buf + end * (BW_CHUNK / sizeof(v2u64));
    v2u64 a = {0, 0}, b = {0, 0}, c = {0, 0}, d = {0, 0};
    for (; p < e; p += 4) { a += p[0]; b += p[1]; c += p[2]; d += p[3]; }
    j->sums[worker][0] += a + b + c + d;
}

/* GB/s of one streaming read of the whole buffer with the pool's threads. */
static double bw_pass(hpool *pool, bw_job *j, size_t bytes) {
    double t0 = now_s();
    pool_run(pool, bw_read, j, (int64_t)(bytes / BW_CHUNK), 16);
    return (double)bytes / (now_s() - t0) / 1e9;   /* the sums stored in j keep the reads alive */
}

/* ---- model runs ------------------------------------------------------- */

typedef struct {
    const char *test;          /* "pp512", "tg128" */
    int threads;
    stats3 tps, bw;            /* bw: read GB/s, one pass before each timed run (tg only) */
    double bound;              /* tokens/s bound, 0 when none applies */
} result;

/* Deterministic token ids that avoid 0 (often a special token). */
static void fill_tokens(int32_t *t, int n, int n_vocab, uint32_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = 1 + (int32_t)((seed >> 8) % (uint32_t)(n_vocab - 1));
    }
}

/* One ppN run: a fresh prefill of n tokens, in chunks of the batch size. */
static double run_pp(generator *g, const int32_t *toks, int n) {
    gen_reset(g);
    double t0 = now_s();
    if (!gen_eval(g, toks, n, NULL)) return -1;
    return n / (now_s() - t0);
}

/* One tgN run: n single-token steps after a short prompt. */
static double run_tg(generator *g, const int32_t *toks, int n) {
    gen_reset(g);
    if (!gen_eval(g, toks, TG_PROMPT, NULL)) return -1;
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        if (!gen_eval(g, &toks[TG_PROMPT + i], 1, NULL)) return -1;
    return n / (now_s() - t0);
}

static void usage(void) {
    fprintf(stderr,
        "usage: hearth bench -m MODEL.gguf [options]\n"
        "  -m, --model PATH       GGUF model (default: the built-in demo model)\n"
        "  -p, --n-prompt N,...   prompt lengths for ppN tests (default 512; 0 skips)\n"
        "  -n, --n-gen N,...      generated tokens for tgN tests (default 128; 0 skips)\n"
        "  -r, --repetitions N    timed runs per test, after one warm-up (default 5)\n"
        "  -t, --threads N,...    thread counts (default 1 and the physical cores)\n"
        "  -b, --batch-size N     prefill chunk (default 512)\n"
        "  --kernels P,...        kernel paths to compare, e.g. avx512,scalar (default: the probed one)\n"
        "  --backend NAME         what runs the model: auto (the best here, default), cpu, metal-emu (--version lists them)\n"
        "  --bw-mib N             buffer for the bandwidth read, MiB (default 1024)\n");
}

int cmd_bench(int argc, char **argv) {
    const char *model_path = NULL, *kernels_arg = NULL, *backend_name = "auto", *v;
    int pp[MAX_LIST] = {512}, tg[MAX_LIST] = {128}, th[MAX_LIST], n_pp = 1, n_tg = 1, n_th = 0;
    int reps = 5, batch = 512, bw_mib = 1024;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (arg_is(argc, argv, &i, "-m", "--model", &v)) { if (!(model_path = v)) return 2; }
        else if (arg_is(argc, argv, &i, "-p", "--n-prompt", &v)) { if ((n_pp = parse_int_list(a, v, 0, 1 << 20, pp)) < 0) return 2; }
        else if (arg_is(argc, argv, &i, "-n", "--n-gen", &v)) { if ((n_tg = parse_int_list(a, v, 0, 1 << 20, tg)) < 0) return 2; }
        else if (arg_is(argc, argv, &i, "-t", "--threads", &v)) { if ((n_th = parse_int_list(a, v, 1, 1024, th)) < 0) return 2; }
        else if (arg_is(argc, argv, &i, "-r", "--repetitions", &v)) { if (!arg_int(a, v, 1, 1000, &reps)) return 2; }
        else if (arg_is(argc, argv, &i, "-b", "--batch-size", &v)) { if (!arg_int(a, v, 1, 1 << 16, &batch)) return 2; }
        else if (arg_is(argc, argv, &i, "--bw-mib", NULL, &v)) { if (!arg_int(a, v, 1, 1 << 20, &bw_mib)) return 2; }
        else if (arg_is(argc, argv, &i, "--kernels", NULL, &v)) { if (!(kernels_arg = v)) return 2; }
        else if (arg_is(argc, argv, &i, "--backend", NULL, &v)) { if (!(backend_name = v)) return 2; }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
        else { fprintf(stderr, "hearth bench: unknown option '%s'\n", a); usage(); return 2; }
    }
    if (!n_th) {
        th[n_th++] = 1;
        if (pool_default_threads() > 1) th[n_th++] = pool_default_threads();
    }

    /* the kernel paths to compare; the first is the baseline of "x first" */
    kern_path_id paths[MAX_LIST];
    int n_paths = 0;
    if (!kernels_arg) {
        paths[n_paths++] = kernels_select();
    } else {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", kernels_arg);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && n_paths < MAX_LIST; tok = strtok_r(NULL, ",", &save)) {
            kern_path_id p = kernels_path_from_name(tok);
            if (p == KPATH_COUNT) { fprintf(stderr, "hearth bench: unknown kernel path '%s'\n", tok); return 2; }
            if (!kernels_path_available(p)) { fprintf(stderr, "hearth bench: %s kernels cannot run here: skipped\n", tok); continue; }
            paths[n_paths++] = p;
        }
        if (!n_paths) return 1;
    }

    char err[512], demo[1024];
    if (!model_path) {
        if (demo_model_path(demo, sizeof demo, err, sizeof err)) { fprintf(stderr, "hearth: %s\n", err); return 1; }
        model_path = demo;
    }
    const char *model_label = strrchr(model_path, '/') ? strrchr(model_path, '/') + 1 : model_path;

    printf("cpu: %s\n", kernels_cpu_summary());

    int max_pp = 0, max_tg = 0;
    for (int i = 0; i < n_pp; i++) if (pp[i] > max_pp) max_pp = pp[i];
    for (int i = 0; i < n_tg; i++) if (tg[i] > max_tg) max_tg = tg[i];
    int n_tok = max_pp > TG_PROMPT + max_tg ? max_pp : TG_PROMPT + max_tg;

    int n_res = n_th * (n_pp + n_tg);
    result *res = calloc((size_t)n_paths * n_res, sizeof *res);
    double *samples = malloc((size_t)reps * sizeof *samples);
    double *bw_samples = malloc((size_t)(reps + 1) * sizeof *bw_samples);
    size_t bw_bytes = (size_t)bw_mib << 20;
    int32_t *toks = malloc((size_t)n_tok * sizeof *toks);
    char (*names)[32] = calloc((size_t)(n_pp + n_tg), sizeof *names);
    if (!res || !samples || !bw_samples || !toks || !names) {
        fprintf(stderr, "hearth: out of memory\n");
        free(res); free(samples); free(bw_samples); free(toks); free(names);
        return 1;
    }
    for (int i = 0; i < n_pp; i++) snprintf(names[i], sizeof names[i], "pp%d", pp[i]);
    for (int i = 0; i < n_tg; i++) snprintf(names[n_pp + i], sizeof names[0], "tg%d", tg[i]);

    int rc = 0;
    for (int k = 0; k < n_paths && !rc; k++) {
        model_options mo = { backend_name, (int)paths[k] };   /* weights are repacked for the path */
        model *m = model_load_opts(model_path, &mo, err, sizeof err);
        if (!m) { fprintf(stderr, "hearth: %s\n", err); rc = 1; break; }
        uint64_t bpt = model_bytes_per_token(m);
        int n_ctx = n_tok + 1 < m->p.n_ctx_train ? n_tok + 1 : m->p.n_ctx_train;
        printf("\nmodel: %s (%s), %.1f MiB of weights, %.1f MiB read per token | kernels: %s | RSS after load: %.1f MiB\n",
               model_label, m->name, (double)m->weight_bytes / (1 << 20), (double)bpt / (1 << 20),
               m->backend->kernels_name(m), rss_mib());
        fflush(stdout);
        if (n_tok + 1 > n_ctx) { fprintf(stderr, "hearth bench: the tests need %d tokens; the model's context is %d\n", n_tok + 1, n_ctx); rc = 1; }
        fill_tokens(toks, n_tok, m->p.n_vocab, 12345);
        for (int t = 0; t < n_th && !rc; t++) {
            hpool *pool = pool_create(th[t]);
            generator *g = pool ? gen_new(m, n_ctx, batch, pool) : NULL;
            /* The bandwidth buffer exists only now (after the RSS was read);
             * one read pass goes right before each timed tg run, so the
             * bound is measured under the same load as the run it bounds. */
            bw_job bj = { aligned_alloc(64, bw_bytes), aligned_alloc(64, (size_t)th[t] * sizeof *bj.sums) };
            if (!g || !bj.buf || !bj.sums) { fprintf(stderr, "hearth: out of memory\n"); rc = 1; }
            else {
                memset(bj.buf, 1, bw_bytes);   /* fault every page in before timing */
                memset(bj.sums, 0, (size_t)th[t] * sizeof *bj.sums);
            }
            for (int i = 0; i < n_pp + n_tg && !rc; i++) {
                bool is_pp = i < n_pp;
                int n = is_pp ? pp[i] : tg[i - n_pp];
                if (n == 0) continue;
                for (int r = -1; r < reps && !rc; r++) {   /* r = -1: warm-up */
                    if (!is_pp) bw_samples[r + 1] = bw_pass(pool, &bj, bw_bytes);
                    double x = is_pp ? run_pp(g, toks, n) : run_tg(g, toks, n);
                    if (x < 0) { fprintf(stderr, "hearth bench: evaluation failed\n"); rc = 1; }
                    else if (r >= 0) samples[r] = x;
                }
                if (rc) break;
                result *o = &res[k * n_res + t * (n_pp + n_tg) + i];
                o->test = names[i];
                o->threads = th[t];
                o->tps = summarize(samples, reps);
                if (!is_pp) {   /* the warm-up's pass (index 0) is left out */
                    o->bw = summarize(bw_samples + 1, reps);
                    o->bound = o->bw.med * 1e9 / (double)bpt;
                }
            }
            free(bj.buf);
            free(bj.sums);
            gen_free(g);
            pool_destroy(pool);
        }
        model_free(m);
    }

    /* One table: each row with its bound and, when paths are compared, its ratio to the first path. */
    printf("\n| model | kernels | threads | test | t/s min | median | max | read GB/s | bound t/s | of bound |%s\n",
           n_paths > 1 ? " x first |" : "");
    printf("|---|---|---:|---|---:|---:|---:|---:|---:|---:|%s\n", n_paths > 1 ? "---:|" : "");
    for (int k = 0; k < n_paths; k++) {
        for (int i = 0; i < n_res; i++) {
            const result *o = &res[k * n_res + i];
            if (!o->test) continue;
            printf("| %s | %s | %d | %s | %.2f | %.2f | %.2f |", model_label, kernels_path_name(paths[k]),
                   o->threads, o->test, o->tps.min, o->tps.med, o->tps.max);
            if (o->bound > 0) printf(" %.1f | %.1f | %.0f%% |", o->bw.med, o->bound, 100 * o->tps.med / o->bound);
            else printf(" - | - | - |");
            if (n_paths > 1) {
                const result *base = &res[i];
                if (base->test && base->tps.med > 0) printf(" %.2fx |", o->tps.med / base->tps.med);
                else printf(" - |");
            }
            printf("\n");
        }
    }
    free(res);
    free(samples);
    free(bw_samples);
    free(toks);
    free(names);
    return rc;
}
