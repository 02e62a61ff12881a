/* n choices of one prompt on the batch engine, in process (no HTTP): the
 * later choices taking the first one's prefill (job_params.prefill_from,
 * what the server does for OpenAI's n) against every choice prefilling the
 * prompt itself (what it did before). Runs the two in turns A-B-B-A, each
 * on a fresh prompt with nothing cached, and prints for each the time until
 * every choice has its first token and until every choice is done (min /
 * median / max over runs), and the median of the per-round ratios.
 * Not a test: run it by hand.
 *   build/tests/bench_choices -m MODEL.gguf [-n CHOICES] [-p PROMPT] [-g TOKENS] [-r ROUNDS] [-t THREADS] */
#include "engine/sched/engine.h"
#include "tests/bench_util.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CHOICES 16
#define MAX_RUNS 64

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double t_first, t_done;
    bool done;
} choice;

static void on_event(void *user, const job_event *ev) {
    choice *c = user;
    double t = now_ms();
    pthread_mutex_lock(&c->mu);
    if (ev->type == JOB_EV_TOKEN && !c->t_first) c->t_first = t;
    if (ev->type == JOB_EV_DONE) { c->done = true; c->t_done = t; pthread_cond_broadcast(&c->cv); }
    pthread_mutex_unlock(&c->mu);
}

/* One request of n choices on a fresh prompt: the ms until every choice
 * has its first token (*ttft) and until all are done (*total). */
static int run_once(engine *e, int n, int n_prompt, int gen, bool share, uint32_t seed, double *ttft, double *total) {
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)n_prompt);
    if (!prompt) return -1;
    int n_vocab = engine_model(e)->p.n_vocab;
    uint32_t x = seed * 2654435761u;
    for (int i = 0; i < n_prompt; i++) {
        x = x * 1664525u + 1013904223u;
        prompt[i] = 1 + (int32_t)((x >> 8) % (uint32_t)(n_vocab - 1));
    }
    choice c[MAX_CHOICES];
    uint64_t first = 0;
    double t0 = now_ms();
    int rc = 0;
    for (int i = 0; i < n; i++) {
        memset(&c[i], 0, sizeof c[i]);
        pthread_mutex_init(&c[i].mu, NULL);
        pthread_cond_init(&c[i].cv, NULL);
        job_params p;
        job_params_default(&p);
        p.sampling.temperature = 0.8f;
        p.sampling.seed = 1000 + (uint64_t)i;
        p.max_tokens = gen;
        p.ignore_eos = true;
        p.cache_prompt = false;
        p.prefill_from = share && i ? first : 0;
        uint64_t id;
        if (engine_submit(e, prompt, n_prompt, &p, on_event, &c[i], &id)) { c[i].done = true; rc = -1; }
        if (!i) first = id;
    }
    double last_first = 0, last_done = 0;
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&c[i].mu);
        while (!c[i].done) pthread_cond_wait(&c[i].cv, &c[i].mu);
        pthread_mutex_unlock(&c[i].mu);
        if (c[i].t_first > last_first) last_first = c[i].t_first;
        if (c[i].t_done > last_done) last_done = c[i].t_done;
        pthread_mutex_destroy(&c[i].mu);
        pthread_cond_destroy(&c[i].cv);
    }
    free(prompt);
    *ttft = last_first - t0;
    *total = last_done - t0;
    return rc;
}

static void report(const char *what, double *v, int n) {
    double s[MAX_RUNS];
    memcpy(s, v, sizeof *v * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    printf("  %-28s min %8.1f  median %8.1f  max %8.1f ms\n", what, s[0], median(s, n), s[n - 1]);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int n = 4, n_prompt = 512, gen = 16, rounds = 4, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m")) path = argv[i + 1];
        else if (!strcmp(argv[i], "-n")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-p")) n_prompt = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-g")) gen = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
    }
    if (!path || n < 2 || n > MAX_CHOICES || n_prompt < 2 || gen < 1 || rounds < 1 || 2 * rounds > MAX_RUNS) {
        fprintf(stderr, "usage: bench_choices -m MODEL.gguf [-n 2..16] [-p PROMPT] [-g TOKENS] [-r ROUNDS<=32] [-t THREADS]\n");
        return 2;
    }
    char err[512];
    kernels_select();
    model *m = model_load(path, err, sizeof err);
    if (!m) { fprintf(stderr, "%s\n", err); return 1; }
    engine_config c;
    engine_config_default(&c);
    c.n_slots = n;
    c.n_ctx = n_prompt + gen + 8;
    if (threads > 0) c.n_threads = threads;
    c.prompt_cache = NULL;
    engine *e = engine_create(m, &c, err, sizeof err);
    if (!e) { fprintf(stderr, "engine_create: %s\n", err); model_free(m); return 1; }
    printf("%s: n=%d choices, %d-token prompt, %d tokens each, %d threads, rounds of A-B-B-A\n", path, n, n_prompt,
           gen, c.n_threads > 0 ? c.n_threads : 0);
    double tt[2][MAX_RUNS], to[2][MAX_RUNS], r_tt[MAX_RUNS], r_to[MAX_RUNS];
    int k[2] = { 0, 0 };
    uint32_t seed = 1;
    double warm_a, warm_b;
    run_once(e, n, n_prompt, gen, true, seed++, &warm_a, &warm_b);   /* warm-up, not counted */
    for (int r = 0; r < rounds; r++) {
        const bool order[4] = { true, false, false, true };   /* A = shared, B = each its own */
        double a_tt = 0, a_to = 0, b_tt = 0, b_to = 0;
        for (int i = 0; i < 4; i++) {
            int mode = order[i] ? 0 : 1;
            double t1, t2;
            if (run_once(e, n, n_prompt, gen, order[i], seed++, &t1, &t2)) { fprintf(stderr, "submit failed\n"); return 1; }
            tt[mode][k[mode]] = t1;
            to[mode][k[mode]++] = t2;
            if (mode) { b_tt += t1; b_to += t2; } else { a_tt += t1; a_to += t2; }
        }
        r_tt[r] = a_tt / b_tt;
        r_to[r] = a_to / b_to;
    }
    printf("shared prefill (prefill_from):\n");
    report("every first token", tt[0], k[0]);
    report("every choice done", to[0], k[0]);
    printf("each choice prefills:\n");
    report("every first token", tt[1], k[1]);
    report("every choice done", to[1], k[1]);
    printf("ratio shared / each (median of %d rounds): first token %.3f, done %.3f\n", rounds,
           median(r_tt, rounds), median(r_to, rounds));
    engine_destroy(e);
    model_free(m);
    return 0;
}
