/* Load on the batch engine, in process (no HTTP): S concurrent streams of
 * generated tokens from distinct prompts, for S in 1, 2, 4, 8, each on an
 * engine with S slots, the configurations taking turns run by run. Prints
 * the aggregate generated tok/s (min / median / max over runs, and the
 * median of its ratios to the 1-stream rate of the same round), TTFT
 * and inter-token latency percentiles from per-token timestamps taken in
 * the event callback. Then the mixed cases: 4 streams generating while a
 * long prompt is prefilled beside them, and their inter-token p99 during
 * that prefill against the same round's single-stream median (see
 * run_mixed for the two kinds).
 * Not a test: run it by hand.
 *   build/tests/bench_engine [-m MODEL.gguf] [-r RUNS] [-n TOKENS] [-t THREADS]
 *                            [-b BATCH] [-d ROWS_WHILE_GENERATING] [-s 1,2,4,8] [-p PROMPT] [-l LONG_PROMPT] */
#include "engine/sched/engine.h"
#include "tests/bench_util.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STREAMS 64
#define MAX_RUNS 32

/* Nearest-rank percentile of v[0..n) (sorts v). */
static double percentile(double *v, int n, double p) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int k = (int)ceil(p / 100.0 * n) - 1;
    return v[k < 0 ? 0 : k];
}

/* One stream: its submit time and a timestamp per generated token. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double t_submit;
    double *t_tok;
    int cap, n_tok;
    bool done;
    finish_reason finish;
    uint64_t id;
} stream;

static void on_event(void *user, const job_event *ev) {
    stream *s = user;
    double t = now_ms();
    pthread_mutex_lock(&s->mu);
    if (ev->type == JOB_EV_TOKEN && s->n_tok < s->cap) s->t_tok[s->n_tok++] = t;
    if (ev->type == JOB_EV_TOKEN || ev->type == JOB_EV_DONE) pthread_cond_broadcast(&s->cv);
    if (ev->type == JOB_EV_DONE) { s->done = true; s->finish = ev->finish; }
    pthread_mutex_unlock(&s->mu);
}

static int stream_init(stream *s, int cap) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->cap = cap;
    s->t_tok = malloc((size_t)cap * sizeof *s->t_tok);
    return s->t_tok ? 0 : -1;
}

static void stream_free(stream *s) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->t_tok);
}

/* Wait until the stream is done or has at least n tokens. */
static void stream_wait(stream *s, int n) {
    pthread_mutex_lock(&s->mu);
    while (!s->done && s->n_tok < n) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

/* Every prompt of the run is new (no prefix reuse): a fresh seed each time. */
static uint32_t prompt_seed = 1;

static int32_t *make_prompt(int n, int n_vocab) {
    int32_t *p = malloc((size_t)n * sizeof *p);
    if (!p) return NULL;
    uint32_t x = prompt_seed++ * 2654435761u;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = 1 + (int32_t)((x >> 8) % (uint32_t)(n_vocab - 1));
    }
    return p;
}

static int submit(engine *e, stream *s, int n_prompt, int max_tokens) {
    job_params p;
    job_params_default(&p);
    p.sampling.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    p.cache_prompt = false;
    int32_t *prompt = make_prompt(n_prompt, engine_model(e)->p.n_vocab);
    if (!prompt) return -1;
    s->t_submit = now_ms();
    int rc = engine_submit(e, prompt, n_prompt, &p, on_event, s, &s->id);
    free(prompt);
    if (rc) fprintf(stderr, "engine_submit: %d\n", rc);
    return rc;
}

static int batch_decoding = -1;   /* -d: engine default when negative */

static engine *make_engine(const model *m, int slots, int n_ctx, int batch, int threads) {
    engine_config c;
    engine_config_default(&c);
    c.n_slots = slots;
    c.n_ctx = n_ctx;
    c.n_batch = batch;
    c.n_threads = threads;
    if (batch_decoding >= 0) c.n_batch_decoding = batch_decoding;
    c.prompt_cache = NULL;
    char err[256];
    engine *e = engine_create(m, &c, err, sizeof err);
    if (!e) fprintf(stderr, "engine_create: %s\n", err);
    return e;
}

/* Samples pooled over the runs of one configuration. */
typedef struct {
    double agg[MAX_RUNS], e2e[MAX_RUNS], gap50[MAX_RUNS];   /* gap50: the run's inter-token median */
    double *ttft, *gap, *gap_steady;   /* gap_steady: gaps ending in the all-generating window */
    int n_ttft, n_gap, n_steady;
} load_result;

/* One run of S streams submitted together. The aggregate rate counts the
 * tokens in the window where all S streams generate (from the last first
 * token to the first last token), so prefill and the ragged end stay out. */
static int run_streams(engine *e, int S, int n_prompt, int n_gen, load_result *r, int run) {
    stream st[MAX_STREAMS];
    int rc = 0;
    for (int i = 0; i < S; i++) rc |= stream_init(&st[i], n_gen);
    double t0 = now_ms();
    int n_sub = 0;
    while (n_sub < S && !rc && !(rc = submit(e, &st[n_sub], n_prompt, n_gen))) n_sub++;
    for (int i = 0; i < n_sub; i++) stream_wait(&st[i], n_gen + 1);   /* until done */
    double lo = 0, hi = INFINITY, end = 0;
    int total = 0;
    for (int i = 0; i < S && !rc; i++) {
        if (st[i].n_tok < 2) { fprintf(stderr, "stream %d produced %d tokens\n", i, st[i].n_tok); rc = -1; break; }
        lo = fmax(lo, st[i].t_tok[0]);
        hi = fmin(hi, st[i].t_tok[st[i].n_tok - 1]);
        end = fmax(end, st[i].t_tok[st[i].n_tok - 1]);
        total += st[i].n_tok;
    }
    if (!rc && r) {
        int in_window = 0, first_gap = r->n_gap;
        for (int i = 0; i < S; i++) {
            r->ttft[r->n_ttft++] = st[i].t_tok[0] - st[i].t_submit;
            for (int k = 0; k < st[i].n_tok; k++) {
                bool in = st[i].t_tok[k] > lo && st[i].t_tok[k] <= hi;
                in_window += in;
                if (k == 0) continue;
                r->gap[r->n_gap++] = st[i].t_tok[k] - st[i].t_tok[k - 1];
                if (in) r->gap_steady[r->n_steady++] = st[i].t_tok[k] - st[i].t_tok[k - 1];
            }
        }
        r->agg[run] = hi > lo ? in_window / (hi - lo) * 1e3 : NAN;
        r->e2e[run] = total / (end - t0) * 1e3;
        double *mine = malloc((size_t)(r->n_gap - first_gap + 1) * sizeof *mine);
        if (mine) memcpy(mine, r->gap + first_gap, (size_t)(r->n_gap - first_gap) * sizeof *mine);
        r->gap50[run] = mine ? median(mine, r->n_gap - first_gap) : NAN;
        free(mine);
    }
    for (int i = 0; i < S; i++) stream_free(&st[i]);
    return rc;
}

/* The mixed case, one run: 4 streams generate; once each has a few tokens a
 * long prompt is submitted; the streams' inter-token gaps that end while it
 * prefills (until its first token) are collected. Two kinds:
 *  - the streams: each generates its n_gen tokens and ends, so the
 *    gaps are those of ordinary streams (contexts of prompt + n_gen) that
 *    fall inside the prefill;
 *  - until_prefilled: the streams generate until the prompt is prefilled
 *    and are then cancelled, so they cover all of it, their contexts growing
 *    by one token a step (to about 1300 for a 2000-token prompt): a harder
 *    case, whose attention reads several times the cache. */
typedef struct { double p50, p99, max, prefill_ms; int n_gaps; bool covered; } mixed_result;

static int run_mixed(engine *e, int n_streams, int n_prompt, int n_long, int max_gen, bool until_prefilled,
                     mixed_result *out) {
    stream st[MAX_STREAMS], lng;
    int rc = stream_init(&lng, 1);
    for (int i = 0; i < n_streams; i++) rc |= stream_init(&st[i], max_gen);
    int n_sub = 0;
    while (n_sub < n_streams && !rc && !(rc = submit(e, &st[n_sub], n_prompt, max_gen))) n_sub++;
    for (int i = 0; i < n_sub && !rc; i++) stream_wait(&st[i], 4);
    if (!rc) rc = submit(e, &lng, n_long, 1);
    if (!rc) stream_wait(&lng, 2);   /* until done: its one token ends the prefill */
    if (until_prefilled)
        for (int i = 0; i < n_sub; i++) engine_cancel(e, st[i].id);
    for (int i = 0; i < n_sub; i++) stream_wait(&st[i], max_gen + 1);
    if (!rc && lng.n_tok == 1) {
        double lo = lng.t_submit, hi = lng.t_tok[0];
        double *gaps = malloc((size_t)n_streams * max_gen * sizeof *gaps);
        int n = 0;
        out->covered = true;
        for (int i = 0; gaps && i < n_streams; i++) {
            /* a stream that ran out of tokens before the prefill ended does not cover it */
            if (st[i].finish != FINISH_CANCELLED) out->covered = false;
            for (int k = 1; k < st[i].n_tok; k++)
                if (st[i].t_tok[k] > lo && st[i].t_tok[k] <= hi) gaps[n++] = st[i].t_tok[k] - st[i].t_tok[k - 1];
        }
        out->n_gaps = n;
        out->prefill_ms = hi - lo;
        out->p50 = percentile(gaps, n, 50);
        out->p99 = percentile(gaps, n, 99);
        out->max = n ? gaps[n - 1] : NAN;
        if (!gaps || n == 0) rc = -1;
        free(gaps);
    } else if (!rc) {
        rc = -1;
    }
    for (int i = 0; i < n_streams; i++) stream_free(&st[i]);
    stream_free(&lng);
    return rc;
}

/* One table of mixed runs against the same rounds' single-stream medians;
 * returns the median over rounds of p99 / single-stream median. */
static double mixed_table(const char *title, const mixed_result *mr, const double *base, int runs, bool until_prefilled) {
    printf("\n%s\n"
           "| run | gaps | inter-token p50 ms | p99 | max | single-stream median ms | p99 / single-stream median | prefill ms |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|\n", title);
    double p99s[MAX_RUNS], rel[MAX_RUNS];
    for (int k = 0; k < runs; k++) {
        p99s[k] = mr[k].p99;
        rel[k] = mr[k].p99 / base[k];
        printf("| %d | %d%s | %.1f | %.1f | %.1f | %.1f | %.2fx | %.0f |\n", k + 1, mr[k].n_gaps,
               until_prefilled && !mr[k].covered ? " (streams ended early)" : "", mr[k].p50, mr[k].p99, mr[k].max,
               base[k], rel[k], mr[k].prefill_ms);
    }
    double med = median(p99s, runs);
    printf("inter-token p99 during the prefill: min %.1f / median %.1f / max %.1f ms\n", p99s[0], med, p99s[runs - 1]);
    return median(rel, runs);
}

static int parse_list(const char *v, int *out, int max) {
    int n = 0;
    for (const char *p = v; *p && n < max;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > MAX_STREAMS) return -1;
        out[n++] = (int)x;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_engine [-m MODEL.gguf] [-r RUNS] [-n TOKENS] [-t THREADS] [-b BATCH] [-d ROWS]\n"
                    "                    [-s STREAMS,...] [-p PROMPT_TOKENS] [-l LONG_PROMPT_TOKENS (0: skip)]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *path = "/tmp/llama1b-q4_0.gguf";
    int runs = 3, n_gen = 128, threads = 2, batch = 512, n_prompt = 200, n_long = 2000;
    int S_list[16] = {1, 2, 4, 8}, n_S = 4;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        const char *a = argv[i], *v = argv[++i];
        if (!strcmp(a, "-m")) path = v;
        else if (!strcmp(a, "-r")) runs = atoi(v);
        else if (!strcmp(a, "-n")) n_gen = atoi(v);
        else if (!strcmp(a, "-t")) threads = atoi(v);
        else if (!strcmp(a, "-b")) batch = atoi(v);
        else if (!strcmp(a, "-d")) batch_decoding = atoi(v);   /* rows per step while generating */
        else if (!strcmp(a, "-p")) n_prompt = atoi(v);
        else if (!strcmp(a, "-l")) n_long = atoi(v);
        else if (!strcmp(a, "-s")) { if ((n_S = parse_list(v, S_list, 16)) <= 0) return usage(); }
        else return usage();
    }
    if (runs < 1 || runs > MAX_RUNS || n_gen < 2 || threads < 1 || batch < 1 || n_prompt < 1 || n_long < 0) return usage();

    kernels_select();
    char err[512];
    model *m = model_load(path, err, sizeof err);
    if (!m) { fprintf(stderr, "bench_engine: %s\n", err); return 1; }
    engine_config dc;
    engine_config_default(&dc);
    printf("model: %s (%s) | kernels: %s | %d threads, batch %d, %d rows per step while generating | "
           "%d-token prompts, %d generated tokens, %d runs\n", path, m->name, kernels_path_name(kernels_current()),
           threads, batch, batch_decoding >= 0 ? batch_decoding : dc.n_batch_decoding, n_prompt, n_gen, runs);

    /* The configurations take turns, run by run (1, 2, 4, 8 streams, then the
     * mixed case, then again), so each sees the same spread of the host's
     * memory bandwidth, which swings from minute to minute here; a ratio is
     * taken between the runs of one round and its median reported. */
    int rc = 0;
    engine *eng[16] = {0}, *emix = NULL;
    load_result res[16];
    memset(res, 0, sizeof res);
    int n_ctx_mix = (n_long > n_prompt ? n_long : n_prompt) + 64, max_gen_mix = n_ctx_mix - n_prompt - 1;
    for (int c = 0; c < n_S && !rc; c++) {
        int S = S_list[c];
        eng[c] = make_engine(m, S, n_prompt + n_gen + 8, batch, threads);
        res[c].ttft = malloc((size_t)runs * S * sizeof *res[c].ttft);
        res[c].gap = malloc((size_t)runs * S * n_gen * sizeof *res[c].gap);
        res[c].gap_steady = malloc((size_t)runs * S * n_gen * sizeof *res[c].gap_steady);
        if (!eng[c] || !res[c].ttft || !res[c].gap || !res[c].gap_steady) rc = -1;
        if (!rc) rc = run_streams(eng[c], S, n_prompt, 16, NULL, 0);   /* warm-up */
    }
    if (n_long > 0 && !rc) {
        /* 4 streams plus the long prompt's slot; the streams may generate
         * until the context is full, and are cancelled once it is prefilled. */
        if (!(emix = make_engine(m, 5, n_ctx_mix, batch, threads))) rc = -1;
        if (!rc) rc = run_streams(emix, 4, n_prompt, 16, NULL, 0);   /* warm-up */
    }
    mixed_result mr[MAX_RUNS], mr_long[MAX_RUNS];
    for (int k = 0; k < runs && !rc; k++) {
        for (int c = 0; c < n_S && !rc; c++) rc = run_streams(eng[c], S_list[c], n_prompt, n_gen, &res[c], k);
        if (emix && !rc) rc = run_mixed(emix, 4, n_prompt, n_long, n_gen, false, &mr[k]);
        if (emix && !rc) rc = run_mixed(emix, 4, n_prompt, n_long, max_gen_mix, true, &mr_long[k]);
        fprintf(stderr, "round %d of %d done\n", k + 1, runs);
    }

    int c1 = -1, c4 = -1;   /* the 1- and 4-stream configurations */
    for (int c = 0; c < n_S; c++) { if (S_list[c] == 1) c1 = c; if (S_list[c] == 4) c4 = c; }
    printf("\n| streams | agg tok/s min | median | max | x 1 stream (median of rounds) | end-to-end tok/s | TTFT p50 ms | p99 | inter-token p50 ms | p99 | p99 all generating |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int c = 0; c < n_S && !rc; c++) {
        load_result *r = &res[c];
        /* Runs where no moment had all S streams generating (the last
         * stream's first token came after the first stream's last one)
         * have no aggregate rate; the table shows "-" for them. */
        double agg[MAX_RUNS], e2e[MAX_RUNS], ratio[MAX_RUNS];
        int n_agg = 0, n_ratio = 0;
        for (int k = 0; k < runs; k++) {
            if (isnan(r->agg[k])) continue;
            agg[n_agg++] = r->agg[k];
            if (c1 >= 0 && !isnan(res[c1].agg[k])) ratio[n_ratio++] = r->agg[k] / res[c1].agg[k];
        }
        memcpy(e2e, r->e2e, sizeof e2e);
        double a50 = median(agg, n_agg), e50 = median(e2e, runs), x50 = median(ratio, n_ratio);
        char c_min[32] = "-", c_med[32] = "-", c_max[32] = "-", c_x[32] = "-", c_st[32] = "-";
        if (r->n_steady > 0) snprintf(c_st, sizeof c_st, "%.1f", percentile(r->gap_steady, r->n_steady, 99));
        if (n_agg > 0) {
            snprintf(c_min, sizeof c_min, "%.1f", agg[0]);
            snprintf(c_med, sizeof c_med, "%.1f", a50);
            snprintf(c_max, sizeof c_max, "%.1f", agg[n_agg - 1]);
        }
        if (n_ratio > 0) snprintf(c_x, sizeof c_x, "%.2fx", x50);
        printf("| %d | %s | %s | %s | %s | %.1f | %.0f | %.0f | %.1f | %.1f | %s |\n", S_list[c], c_min, c_med,
               c_max, c_x, e50, percentile(r->ttft, r->n_ttft, 50),
               percentile(r->ttft, r->n_ttft, 99), percentile(r->gap, r->n_gap, 50), percentile(r->gap, r->n_gap, 99), c_st);
        if (c == c4 && n_ratio > 0)
            printf("target at 4 streams (>= 3x the 1-stream rate and >= 90 tok/s): %.2fx, %.1f tok/s: %s\n",
                   x50, a50, x50 >= 3 && a50 >= 90 ? "met" : "NOT met");
    }

    if (emix && !rc) {
        double base[MAX_RUNS];
        for (int k = 0; k < runs; k++) base[k] = c1 >= 0 ? res[c1].gap50[k] : NAN;
        char title[512];
        snprintf(title, sizeof title, "4 streams of %d generated tokens while a %d-token prompt is prefilled beside them "
                 "(%d slots of %d tokens);\nthe single-stream median is that of the same round's 1-stream run:",
                 n_gen, n_long, 5, n_ctx_mix);
        double rmed = mixed_table(title, mr, base, runs, false);
        printf("target (p99 < 2x the single-stream median), median of rounds: %.2fx: %s\n", rmed,
               rmed < 2 ? "met" : "NOT met");
        snprintf(title, sizeof title, "The harder case: the 4 streams generate until the %d-token prompt is prefilled "
                 "(their contexts grow to about %d tokens):", n_long, n_prompt + n_long / 2);
        rmed = mixed_table(title, mr_long, base, runs, true);
        printf("p99 / single-stream median, median of rounds: %.2fx (%s 2x)\n", rmed, rmed < 2 ? "under" : "not under");
    }
    for (int c = 0; c < n_S; c++) {
        free(res[c].ttft);
        free(res[c].gap);
        free(res[c].gap_steady);
        if (eng[c]) engine_destroy(eng[c]);
    }
    if (emix) engine_destroy(emix);
    model_free(m);
    if (rc) fprintf(stderr, "bench_engine: failed\n");
    return rc ? 1 : 0;
}
