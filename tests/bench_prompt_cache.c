/* Time to first token with the prompt-state cache, in process (no HTTP):
 *  1. one long prompt (default 2048 tokens): cold (empty cache), again with
 *     the prefix resident in the slot (in-memory hit), and on a new engine
 *     over the same database (a restart: sqlite hit);
 *  2. a chat of T turns, each adding ~100 tokens (the previous answer and
 *     a new user message): per turn, cold (cache_prompt off), resumed from
 *     sqlite after a restart (a new engine every turn, on the database the
 *     earlier turns wrote) and in-memory (one engine throughout, its
 *     resident prefix only).
 * Prints min / median / max over the runs and the ratio cold / cached, and
 * checks that every cached generation equals the cold one.
 * Not a test: run it by hand.
 *   build/tests/bench_prompt_cache MODEL.gguf [-t THREADS] [-n PROMPT_TOKENS]
 *       [-r RUNS] [-k HIT_REPEATS] [-T TURNS] [-u TURN_TOKENS] [-B BLOCK] [--db PATH] */
#include "engine/sched/engine.h"
#include "tests/bench_util.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 256
#define ANSWER 16               /* tokens generated per chat turn */

typedef struct { double v[MAX_SAMPLES]; int n; } samples;

static void add(samples *s, double x) { if (s->n < MAX_SAMPLES) s->v[s->n++] = x; }

static double med(samples *s) { return median(s->v, s->n); }

static void print_row(const char *name, samples *s, double cold_median, int n_cached) {
    double m = med(s);
    printf("  %-26s %9.1f %9.1f %9.1f   %7d", name, s->v[0], m, s->v[s->n - 1], n_cached);
    if (cold_median > 0) printf("   %8.1fx", cold_median / m);
    printf("\n");
}

/* One request: submit time, first token time, tokens, n_cached. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double t_submit, t_first;
    int32_t tokens[ANSWER];
    int n_tokens, n_cached;
    bool done;
} req;

static void on_event(void *user, const job_event *ev) {
    req *r = user;
    double t = now_ms();
    pthread_mutex_lock(&r->mu);
    if (ev->type == JOB_EV_TOKEN) {
        if (!r->t_first) r->t_first = t;
        if (r->n_tokens < ANSWER) r->tokens[r->n_tokens++] = ev->token;
    }
    if (ev->type == JOB_EV_DONE) {
        r->n_cached = ev->n_cached;
        r->done = true;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

/* Runs one request to the end; returns its TTFT in ms (negative on failure). */
static double ttft(engine *e, const int32_t *prompt, int n, int n_gen, bool cache, req *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    job_params p;
    job_params_default(&p);
    p.sampling.temperature = 0;
    p.max_tokens = n_gen;
    p.ignore_eos = true;
    p.cache_prompt = cache;
    uint64_t id;
    r->t_submit = now_ms();
    if (engine_submit(e, prompt, n, &p, on_event, r, &id) != ENGINE_OK) return -1;
    pthread_mutex_lock(&r->mu);
    while (!r->done) pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    return r->t_first ? r->t_first - r->t_submit : -1;
}

static int n_threads = 2, n_ctx = 4096, block = PROMPT_CACHE_BLOCK_TOKENS;
static const char *db_path = "/tmp/hearth-bench-prompt-cache.db";

static engine *make(const model *m, bool with_cache) {
    engine_config c;
    engine_config_default(&c);
    c.n_slots = 1;
    c.n_ctx = n_ctx;
    c.n_batch = 512;
    c.n_threads = n_threads;
    c.prompt_cache = with_cache ? db_path : NULL;
    c.prompt_cache_block = block;
    char err[256];
    engine *e = engine_create(m, &c, err, sizeof err);
    if (!e) fprintf(stderr, "bench_prompt_cache: %s\n", err);
    return e;
}

static void rm_db(void) {
    char p[600];
    unlink(db_path);
    snprintf(p, sizeof p, "%s-wal", db_path); unlink(p);
    snprintf(p, sizeof p, "%s-shm", db_path); unlink(p);
}

static bool same_tokens(const req *a, const req *b) {
    return a->n_tokens == b->n_tokens && !memcmp(a->tokens, b->tokens, sizeof(int32_t) * (size_t)a->n_tokens);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    int n_prompt = 2048, runs = 3, repeats = 3, turns = 8, turn_tokens = 100;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-t") && v) { n_threads = atoi(v); i++; }
        else if (!strcmp(a, "-n") && v) { n_prompt = atoi(v); i++; }
        else if (!strcmp(a, "-r") && v) { runs = atoi(v); i++; }
        else if (!strcmp(a, "-k") && v) { repeats = atoi(v); i++; }
        else if (!strcmp(a, "-T") && v) { turns = atoi(v); i++; }
        else if (!strcmp(a, "-u") && v) { turn_tokens = atoi(v); i++; }
        else if (!strcmp(a, "-B") && v) { block = atoi(v); i++; }
        else if (!strcmp(a, "--db") && v) { db_path = v; i++; }
        else if (a[0] != '-' && !path) path = a;
        else { fprintf(stderr, "usage: bench_prompt_cache MODEL.gguf [-t THREADS] [-n PROMPT_TOKENS] [-r RUNS] "
                               "[-k HIT_REPEATS] [-T TURNS] [-u TURN_TOKENS] [-B BLOCK] [--db PATH]\n"); return 2; }
    }
    if (!path || n_prompt < 2 || runs < 1 || repeats < 1 || turns < 0 || turn_tokens <= ANSWER ||
        runs * repeats > MAX_SAMPLES) {
        fprintf(stderr, "usage: bench_prompt_cache MODEL.gguf [options] (see the source)\n");
        return 2;
    }
    int chat_len = turns * turn_tokens + ANSWER;
    n_ctx = (n_prompt > chat_len ? n_prompt : chat_len) + 64;
    kernels_select();
    char err[512];
    model *m = model_load(path, err, sizeof err);
    if (!m) { fprintf(stderr, "bench_prompt_cache: %s\n", err); return 1; }
    printf("model %s, %d threads, block %d tokens, database %s\n", m->name, n_threads, block, db_path);

    /* ---- one long prompt ---- */
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)n_ctx);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n_ctx; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        prompt[i] = (int32_t)(x % (uint64_t)m->p.n_vocab);
    }
    samples cold = { .n = 0 }, mem = { .n = 0 }, sq = { .n = 0 };
    int cached_mem = 0, cached_sq = 0, mismatches = 0;
    uint64_t db_bytes = 0, db_entries = 0;
    for (int r = 0; r < runs; r++) {
        rm_db();
        engine *e = make(m, true);
        if (!e) return 1;
        req ref, q;
        add(&cold, ttft(e, prompt, n_prompt, 1, true, &ref));
        for (int k = 0; k < repeats; k++) {
            add(&mem, ttft(e, prompt, n_prompt, 1, true, &q));
            cached_mem = q.n_cached;
            mismatches += !same_tokens(&ref, &q);
        }
        engine_cache_sync(e);
        prompt_cache_stats st;
        engine_cache_stats(e, &st);
        db_bytes = st.bytes;
        db_entries = st.entries;
        engine_destroy(e);
        for (int k = 0; k < repeats; k++) {   /* a restart before each */
            e = make(m, true);
            if (!e) return 1;
            add(&sq, ttft(e, prompt, n_prompt, 1, true, &q));
            cached_sq = q.n_cached;
            mismatches += !same_tokens(&ref, &q);
            engine_destroy(e);
        }
        fprintf(stderr, "  run %d/%d done\n", r + 1, runs);
    }
    double cold_med = med(&cold);
    printf("\nTTFT, %d-token prompt (ms)         min    median       max    cached   cold/cached\n", n_prompt);
    print_row("cold (empty cache)", &cold, 0, 0);
    print_row("in-memory hit", &mem, cold_med, cached_mem);
    print_row("sqlite hit after restart", &sq, cold_med, cached_sq);
    printf("  stored: %.1f MiB in %llu entries (%d full blocks and the partial ones)\n", (double)db_bytes / (1 << 20),
           (unsigned long long)db_entries, n_prompt / block);

    /* ---- a chat ---- */
    if (turns > 0) {
        printf("\nchat of %d turns, +%d tokens a turn (%d answer + %d user): TTFT ms\n", turns, turn_tokens,
               ANSWER, turn_tokens - ANSWER);
        printf("  turn  prompt      cold   in-memory (cached)      sqlite (cached)\n");
        rm_db();
        /* in-memory: the resident prefix alone (no database), so the sqlite
         * column is the only one that reads what earlier turns stored */
        engine *cold_e = make(m, false), *mem_e = make(m, false);
        if (!cold_e || !mem_e) return 1;
        int32_t *conv = malloc(sizeof(int32_t) * (size_t)n_ctx);
        int n = 0;
        double sum_cold = 0, sum_mem = 0, sum_sq = 0;
        for (int t = 0; t < turns; t++) {
            /* the user's new message (the previous answer is already in conv) */
            int user = t == 0 ? turn_tokens : turn_tokens - ANSWER;
            for (int i = 0; i < user; i++) conv[n + i] = prompt[(n + i * 7 + 1) % n_ctx];
            n += user;
            req rc, rm, rs;
            double tc = ttft(cold_e, conv, n, ANSWER, false, &rc);
            /* a restarted server: a new engine on the database of the earlier turns */
            engine *sq_e = make(m, true);
            if (!sq_e) return 1;
            double ts = ttft(sq_e, conv, n, ANSWER, true, &rs);
            engine_destroy(sq_e);
            double tm = ttft(mem_e, conv, n, ANSWER, true, &rm);
            mismatches += !same_tokens(&rc, &rm) + !same_tokens(&rc, &rs);
            printf("  %4d  %6d  %8.1f  %8.1f (%6d)  %8.1f (%6d)\n", t + 1, n, tc, tm, rm.n_cached, ts, rs.n_cached);
            sum_cold += tc; sum_mem += tm; sum_sq += ts;
            memcpy(conv + n, rc.tokens, sizeof(int32_t) * ANSWER);   /* the answer joins the conversation */
            n += ANSWER;
        }
        printf("  total          %8.1f  %8.1f           %8.1f\n", sum_cold, sum_mem, sum_sq);
        printf("  cold/cached    %8s  %8.1fx          %8.1fx\n", "", sum_cold / sum_mem, sum_cold / sum_sq);
        engine_destroy(cold_e);
        engine_destroy(mem_e);
        free(conv);
    }
    printf("\ngenerations differing from the cold one: %d%s\n", mismatches, mismatches ? "  <-- WRONG" : "");
    rm_db();
    free(prompt);
    model_free(m);
    return mismatches ? 1 : 0;
}
