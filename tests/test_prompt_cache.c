/* The prompt-state cache: the block codec, the sqlite store, and the
 * engine with both, bit for bit at temperature 0:
 * - generation after an in-memory hit, a sqlite hit in the same process and
 *   a sqlite hit after a restart == generation from a fresh prefill, also
 *   when a hit ends inside a block and when the resident prefix ends inside
 *   one and the store continues it;
 * - a hand-made row under the right key with other tokens (a collision) is
 *   never used, while the same row with the right tokens is (the control);
 * - a corrupt, truncated or foreign file is moved aside and rebuilt;
 * - a read-only folder or a full disk turns the cache off, serving goes on;
 * - kill -9 during writes leaves a database that opens and answers;
 * - a changed model file gets no hits; two identical prompts at once are
 *   stored once; LRU eviction under a small cap; clear;
 * - the same invariants on a sliding-window model (the gemma3 fixture, its
 *   local layers kept as rings), and a resident prefix whose window the
 *   ring has moved past: started over from the store, still == fresh. */
#include "tests/engine_run.h"
#include "engine/cache/block_codec.h"
#include "engine/cache/prompt_cache.h"
#include "engine/synth/synth_model.h"
#include "engine/model/forward.h"
#include "engine/model/backend.h"
#include "kernels/kernels.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define B 16          /* tokens per block in these tests */
#define N_GEN 24
/* What a run of P (100 prompt tokens, 24 generated of which 23 are fed)
 * stores: 7 full blocks (the 7th holds generated tokens), the prompt's
 * partial block (positions 96..99) and the job's (112..122). P again
 * restores all but its last position. */
#define P_ENTRIES 9
#define P_RESTORED 99

/* ---- running jobs ------------------------------------------------------------ */
static job_params greedy(void) {
    job_params p;
    job_params_default(&p);
    p.sampling.temperature = 0;
    p.max_tokens = N_GEN;
    p.ignore_eos = true;
    return p;
}

/* Runs a prompt to the end; returns the generated tokens in *out. */
static void gen(engine *e, const int32_t *prompt, int n, engine_run *out) {
    job_params p = greedy();
    engine_run_submit(e, out, prompt, n, &p);
    engine_run_wait(out);
    engine_run_destroy(out);
}

static engine *make_engine(const model *m, int slots, int batch, const char *cache, uint64_t cap) {
    engine_config c = test_engine_config(slots, 256, batch);
    c.prompt_cache = cache;
    c.prompt_cache_bytes = cap;
    c.prompt_cache_block = B;
    return test_engine_create(m, &c);
}

static bool same(const engine_run *a, const engine_run *b) {
    return a->n_tokens == b->n_tokens && a->n_tokens > 0 &&
           !memcmp(a->tokens, b->tokens, sizeof(int32_t) * (size_t)a->n_tokens);
}

/* Generation from a fresh prefill, with no cache at all. */
static void fresh(const model *m, const int32_t *prompt, int n, engine_run *out) {
    engine *e = make_engine(m, 1, 64, NULL, 0);
    gen(e, prompt, n, out);
    engine_destroy(e);
}

static prompt_cache_stats stats_of(engine *e) {
    prompt_cache_stats s;
    engine_cache_sync(e);
    engine_cache_stats(e, &s);
    return s;
}

static char tmpdir[] = "/tmp/hearth-test-pc-XXXXXX";

/* A path in the test folder; valid for the next 63 calls. */
static const char *tpath(const char *name) {
    static char buf[64][512];
    static int k;
    char *b = buf[k++ & 63];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static void rm_db(const char *path) {
    char p[600];
    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path); unlink(p);
    snprintf(p, sizeof p, "%s-shm", path); unlink(p);
    for (int i = 1; i < 5; i++) {
        snprintf(p, sizeof p, "%s.corrupt.%d", path, i); unlink(p);
        snprintf(p, sizeof p, "%s.corrupt.%d-wal", path, i); unlink(p);
    }
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* The prompts: P has 6 full blocks and a tail of 4. */
static int32_t P[100], Q[100], P2[70], R[60], P3[96];

static void make_prompts(int n_vocab) {
    for (int i = 0; i < 100; i++) P[i] = (i * 31 + 7) % n_vocab;
    for (int i = 0; i < 100; i++) Q[i] = (i * 17 + 100) % n_vocab;
    /* P2: P's first 40 tokens (2.5 blocks), then others */
    memcpy(P2, P, 40 * sizeof *P);
    for (int i = 40; i < 70; i++) P2[i] = (i * 7 + 3) % n_vocab;
    /* R: P's first 40 tokens, then others: leaves a resident prefix ending mid-block */
    memcpy(R, P, 40 * sizeof *P);
    for (int i = 40; i < 60; i++) R[i] = (i * 11 + 5) % n_vocab;
    /* P3: exactly 6 blocks */
    memcpy(P3, P, 96 * sizeof *P);
}

/* ---- the codec ----------------------------------------------------------------- */
static void test_codec(void) {
    /* the reference value of XXH64 over no bytes, seed 0 */
    CHECK(hash64("", 0, 0) == 0xEF46DB3751D8E999ull);
    CHECK(hash64("a", 1, 0) != hash64("b", 1, 0) && hash64("a", 1, 0) != hash64("a", 1, 1));

    uint8_t fp[16];
    for (int i = 0; i < 16; i++) fp[i] = (uint8_t)(i * 7);
    int32_t toks[12];
    for (int i = 0; i < 12; i++) toks[i] = i * 1000 + 3;
    block_shape s = { 12, 4, 3, 5 };
    size_t n = block_blob_size(&s);
    CHECK(n == BLOCK_HEADER_BYTES + 12 * 4 + block_kv_bytes(&s) + 8 && block_kv_bytes(&s) == 3 * 2 * 4 * 5 * 2);
    uint8_t *blob = malloc(n);
    uint8_t *kv = block_encode(blob, n, fp, &s, toks);
    CHECK(kv != NULL);
    for (size_t i = 0; i < block_kv_bytes(&s); i++) kv[i] = (uint8_t)(i * 13 + 1);
    block_seal(blob, n);
    block_view v;
    CHECK(block_decode(blob, n, &v) == 0);   /* the control for every rejection below */
    CHECK(!memcmp(v.fingerprint, fp, 16) && v.shape.n_tokens == 12 && v.shape.n_block == 4);
    CHECK(block_tokens_equal(&v, toks, 12) && !block_tokens_equal(&v, toks, 11) && block_token(&v, 5) == 5003);
    CHECK(v.kv == kv && v.kv_bytes == block_kv_bytes(&s));
    int32_t other[12];
    memcpy(other, toks, sizeof toks);
    other[0] = 4;
    CHECK(!block_tokens_equal(&v, other, 12));

    /* every single flipped bit and every truncation is rejected */
    int accepted = 0;
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            blob[i] ^= (uint8_t)(1 << bit);
            accepted += block_decode(blob, n, &v) == 0;
            blob[i] ^= (uint8_t)(1 << bit);
        }
    }
    CHECKF(accepted == 0, "%d corrupted blobs accepted", accepted);
    accepted = 0;
    for (size_t k = 0; k < n; k++) accepted += block_decode(blob, k, &v) == 0;
    CHECK(accepted == 0);
    CHECK(block_decode(blob, n, &v) == 0);
    /* a header lying about its sizes, with a checksum to match */
    uint32_t huge = 0xffffffffu;
    memcpy(blob + 24, &huge, 4);
    block_seal(blob, n);
    CHECK(block_decode(blob, n, &v) != 0);
    /* shapes out of bounds have no size */
    block_shape bad1 = { 3, 4, 1, 1 }, bad2 = { 4, 0, 1, 1 }, bad3 = { 4, 4, 1, BLOCK_MAX_KV_DIM + 1 };
    CHECK(block_blob_size(&bad1) == 0 && block_blob_size(&bad2) == 0 && block_blob_size(&bad3) == 0);
    CHECK(block_encode(blob, n - 1, fp, &s, toks) == NULL);
    free(blob);

    /* keys: a function of the parent and the tokens */
    block_key r, a, b, c;
    block_key_root(fp, &r);
    a = r; block_key_next(&a, toks, 4);
    b = r; block_key_next(&b, toks, 4);
    c = r; block_key_next(&c, other, 4);
    CHECK(!memcmp(a.b, b.b, 16) && memcmp(a.b, c.b, 16) && memcmp(a.b, r.b, 16));
    block_key_next(&a, toks + 4, 4);
    block_key_next(&c, toks + 4, 4);
    CHECK(memcmp(a.b, c.b, 16));   /* same block after different parents */
}

/* ---- invariants through the engine ----------------------------------------------- */
/* n_changed: tokens from position 50 on the control changes (a sliding-
 * window model sees an early token through its global layers alone, which
 * one token may not sway at greedy). */
static void test_invariants(const model *m, int n_changed) {
    const char *db = tpath("inv.db");
    rm_db(db);
    engine_run ref_p, ref_p2, ref_p3, ref_changed;
    fresh(m, P, 100, &ref_p);
    fresh(m, P2, 70, &ref_p2);
    fresh(m, P3, 96, &ref_p3);
    /* planted control: the output is sensitive to one token of the prefix */
    int32_t changed[100];
    memcpy(changed, P, sizeof P);
    for (int i = 50; i < 50 + n_changed; i++) changed[i] = (changed[i] + 1) % m->p.n_vocab;
    fresh(m, changed, 100, &ref_changed);
    CHECKF(ref_p.n_tokens == N_GEN && !same(&ref_p, &ref_changed), "control: %d tokens, same %d", ref_p.n_tokens, same(&ref_p, &ref_changed));

    engine *e = make_engine(m, 1, 64, db, 1 << 30);
    engine_run r;
    gen(e, P, 100, &r);
    CHECK(r.n_cached == 0);
    CHECKF(same(&ref_p, &r), "cold run through the cache differs from a fresh prefill");
    prompt_cache_stats s = stats_of(e);
    CHECKF(s.enabled && s.entries == P_ENTRIES && s.blocks_stored == P_ENTRIES && s.blocks_queued == P_ENTRIES,
           "entries %llu stored %llu queued %llu", (unsigned long long)s.entries,
           (unsigned long long)s.blocks_stored, (unsigned long long)s.blocks_queued);

    /* in-memory hit */
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == 99, "in-memory hit reused %d", r.n_cached);
    CHECKF(same(&ref_p, &r), "after an in-memory hit: differs from a fresh prefill");

    /* sqlite hit in the same process: Q takes the only slot first */
    engine_run rq;
    gen(e, Q, 100, &rq);
    CHECK(rq.n_cached == 0);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == P_RESTORED, "sqlite hit restored %d", r.n_cached);
    CHECKF(same(&ref_p, &r), "after a sqlite hit: differs from a fresh prefill");
    s = stats_of(e);
    CHECK(s.hits >= 1 && s.tokens_restored >= 96);

    /* a sqlite hit that ends inside the prompt's third block: 2 blocks, then prefill */
    gen(e, Q, 100, &rq);
    gen(e, P2, 70, &r);
    CHECKF(r.n_cached == 32, "mid-block hit restored %d", r.n_cached);
    CHECKF(same(&ref_p2, &r), "after a hit ending mid-block: differs from a fresh prefill");

    /* a resident prefix ending inside block 2 (R shares 40 tokens with P),
     * continued from the store: block 2 from position 40, then blocks 3..5 */
    engine_run rr;
    gen(e, R, 60, &rr);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == P_RESTORED, "resident 40 + stored blocks gave %d", r.n_cached);
    CHECKF(same(&ref_p, &r), "resident prefix continued from the store differs from a fresh prefill");

    /* a prompt of exactly 6 blocks: all restored but the last position */
    gen(e, Q, 100, &rq);
    gen(e, P3, 96, &r);
    CHECKF(r.n_cached == 95, "whole-block prompt restored %d", r.n_cached);
    CHECK(same(&ref_p3, &r));

    /* cache_prompt false: no reuse at all */
    job_params np = greedy();
    np.cache_prompt = false;
    engine_run rn;
    engine_run_submit(e, &rn, P, 100, &np);
    engine_run_wait(&rn);
    engine_run_destroy(&rn);
    CHECK(rn.n_cached == 0 && same(&ref_p, &rn));
    engine_destroy(e);

    /* after a restart: a new engine on the same file */
    e = make_engine(m, 2, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == P_RESTORED, "after a restart restored %d", r.n_cached);
    CHECKF(same(&ref_p, &r), "after a restart and a sqlite hit: differs from a fresh prefill");
    s = stats_of(e);
    CHECK(s.hits == 1 && s.misses == 0 && s.entries >= P_ENTRIES);

    /* clear: the stored blocks and the resident prefix are forgotten */
    CHECK(engine_cache_clear(e) == 0);
    prompt_cache_stats c0;
    engine_cache_stats(e, &c0);
    CHECK(c0.entries == 0);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == 0, "after a clear reused %d", r.n_cached);
    CHECK(same(&ref_p, &r));
    s = stats_of(e);
    CHECKF(s.entries == P_ENTRIES, "after a clear and a run: %llu entries", (unsigned long long)s.entries);
    engine_destroy(e);
    engine_run_destroy(&ref_p); engine_run_destroy(&ref_p2); engine_run_destroy(&ref_p3); engine_run_destroy(&ref_changed);
    rm_db(db);
}

/* A conversation resumed after a restart prefills only its new tokens:
 * the positions past the last full block of the previous turn (prompt and
 * answer) come from the store as a partial block, and the result equals a
 * fresh prefill bit for bit; a turn that differs inside that partial block
 * gets the full blocks only (the control). */
static int64_t db_int(const char *db, const char *sql) {
    sqlite3 *h;
    int64_t v = -1;
    if (sqlite3_open(db, &h) == SQLITE_OK) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return v;
}

static void test_resume_conversation(const model *m) {
    const char *db = tpath("conv.db");
    rm_db(db);
    engine_run r1, r2, r3, ref, r;
    engine *e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r1);
    engine_destroy(e);
    /* turn 2: P, its answer, 10 new tokens; 123 positions were evaluated */
    int32_t conv[200];
    int n = 0;
    memcpy(conv, P, sizeof P);
    n = 100;
    memcpy(conv + n, r1.tokens, sizeof(int32_t) * N_GEN);
    n += N_GEN;
    for (int i = 0; i < 10; i++, n++) conv[n] = (n * 29 + 3) % m->p.n_vocab;
    fresh(m, conv, n, &ref);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, conv, n, &r2);
    engine_destroy(e);
    CHECKF(r2.n_cached == 100 + N_GEN - 1, "turn 2 after a restart restored %d of %d", r2.n_cached, n);
    CHECKF(same(&ref, &r2), "turn 2 resumed after a restart differs from a fresh prefill");
    engine_run_destroy(&ref);
    /* turn 3: the same again, over turn 2's partial block */
    int n2 = n;
    memcpy(conv + n, r2.tokens, sizeof(int32_t) * N_GEN);
    n += N_GEN;
    for (int i = 0; i < 5; i++, n++) conv[n] = (n * 13 + 1) % m->p.n_vocab;
    fresh(m, conv, n, &ref);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, conv, n, &r3);
    engine_destroy(e);
    CHECKF(r3.n_cached == n2 + N_GEN - 1, "turn 3 after a restart restored %d of %d", r3.n_cached, n);
    CHECKF(same(&ref, &r3), "turn 3 resumed after a restart differs from a fresh prefill");
    engine_run_destroy(&ref);
    /* control: turn 2 with a token changed at 118, inside the partial block 112..122 */
    n = 100 + N_GEN + 10;
    memcpy(conv, P, sizeof P);
    memcpy(conv + 100, r1.tokens, sizeof(int32_t) * N_GEN);
    conv[118] = (conv[118] + 1) % m->p.n_vocab;
    fresh(m, conv, n, &ref);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, conv, n, &r);
    engine_destroy(e);
    CHECKF(r.n_cached == 112, "a turn differing inside the partial block restored %d (want the full blocks, 112)", r.n_cached);
    CHECKF(same(&ref, &r), "control turn differs from a fresh prefill");
    engine_run_destroy(&ref);
    engine_run_destroy(&r1); engine_run_destroy(&r2); engine_run_destroy(&r3);
    rm_db(db);

    /* a database of schema 1 (full blocks only) is upgraded in place: its blocks keep */
    engine_run ref_p;
    fresh(m, P, 100, &ref_p);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    engine_destroy(e);
    sqlite3 *h;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK &&
          sqlite3_exec(h, "DELETE FROM blocks WHERE parent IS NOT NULL; DROP INDEX blocks_parent; "
                          "ALTER TABLE blocks DROP COLUMN parent; PRAGMA user_version=1;", 0, 0, 0) == SQLITE_OK);
    sqlite3_close(h);
    CHECK(db_int(db, "PRAGMA user_version") == 1);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    engine_destroy(e);
    CHECKF(r.n_cached == 96 && same(&ref_p, &r), "schema 1 upgraded: restored %d (want its 6 full blocks)", r.n_cached);
    CHECK(db_int(db, "PRAGMA user_version") == 2);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    engine_destroy(e);
    CHECKF(r.n_cached == P_RESTORED && same(&ref_p, &r), "after the upgrade: restored %d", r.n_cached);
    engine_run_destroy(&ref_p);
    rm_db(db);
}

/* Stored blocks are read on the cache's reader thread while the other
 * slots step on: with every read slowed down (100 ms), a stream already
 * generating gets tokens between a restoring job's submission and its
 * STARTED event, and the restored job equals a fresh prefill. The control
 * (HEARTH_PROMPT_CACHE_SYNC_READS: the engine waits for each read) gets
 * none in that time. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int a_tokens;             /* the stream's tokens so far */
    int at_submit, at_started;
    bool b_started;
    double t_submit, t_started;
} ra_watch;

static ra_watch watch;

static double test_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void ra_stream_event(void *user, const job_event *ev) {
    engine_run_event(user, ev);
    if (ev->type != JOB_EV_TOKEN) return;
    pthread_mutex_lock(&watch.mu);
    watch.a_tokens++;
    pthread_cond_broadcast(&watch.cv);
    pthread_mutex_unlock(&watch.mu);
}

static void ra_restore_event(void *user, const job_event *ev) {
    if (ev->type == JOB_EV_STARTED) {
        pthread_mutex_lock(&watch.mu);
        watch.at_started = watch.a_tokens;
        watch.t_started = test_now_ms();
        watch.b_started = true;
        pthread_mutex_unlock(&watch.mu);
    }
    engine_run_event(user, ev);
}

/* Tokens the stream got while the restoring job waited for its blocks. */
static int tokens_during_restore(const model *m, const char *db, bool sync, engine_run *b) {
    setenv("HEARTH_PROMPT_CACHE_READ_DELAY_MS", "100", 1);
    if (sync) setenv("HEARTH_PROMPT_CACHE_SYNC_READS", "1", 1);
    /* a long context: the stream must outlive the restore even when this thread is slow to submit */
    engine_config c = test_engine_config(2, 2048, 64);
    c.prompt_cache = db;
    c.prompt_cache_bytes = 1 << 30;
    c.prompt_cache_block = B;
    engine *e = test_engine_create(m, &c);
    unsetenv("HEARTH_PROMPT_CACHE_READ_DELAY_MS");
    unsetenv("HEARTH_PROMPT_CACHE_SYNC_READS");
    pthread_mutex_init(&watch.mu, NULL);
    pthread_cond_init(&watch.cv, NULL);
    watch.a_tokens = watch.at_submit = watch.at_started = 0;
    watch.b_started = false;
    int32_t a_prompt[8];
    for (int i = 0; i < 8; i++) a_prompt[i] = (i * 41 + 11) % m->p.n_vocab;
    job_params pa = greedy();
    pa.max_tokens = -1;    /* generating throughout the restore, cancelled after it */
    pa.cache_prompt = false;
    engine_run a;
    engine_run_init(&a);
    uint64_t a_id, id;
    CHECK(engine_submit(e, a_prompt, 8, &pa, ra_stream_event, &a, &a_id) == ENGINE_OK);
    pthread_mutex_lock(&watch.mu);
    while (watch.a_tokens < 2) pthread_cond_wait(&watch.cv, &watch.mu);
    watch.at_submit = watch.a_tokens;
    watch.t_submit = test_now_ms();
    pthread_mutex_unlock(&watch.mu);
    pthread_mutex_lock(&a.mu);
    CHECKF(!a.done, "the stream ended before the restoring job was submitted");
    pthread_mutex_unlock(&a.mu);
    job_params pb = greedy();
    engine_run_init(b);
    CHECK(engine_submit(e, P, 100, &pb, ra_restore_event, b, &id) == ENGINE_OK);
    engine_run_wait(b);
    engine_run_destroy(b);
    engine_cancel(e, a_id);
    engine_run_wait(&a);
    engine_run_destroy(&a);
    engine_destroy(e);
    pthread_mutex_destroy(&watch.mu);
    pthread_cond_destroy(&watch.cv);
    CHECK(watch.b_started);
    printf("restore: %d tokens in %.0f ms (%s)\n", watch.at_started - watch.at_submit, watch.t_started - watch.t_submit,
           sync ? "control" : "read ahead");
    return watch.at_started - watch.at_submit;
}

static void test_read_ahead(const model *m) {
    const char *db = tpath("ahead.db");
    rm_db(db);
    engine_run ref, r;
    fresh(m, P, 100, &ref);
    engine *e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    engine_destroy(e);
    int ahead = tokens_during_restore(m, db, false, &r);
    CHECKF(r.n_cached == P_RESTORED && same(&ref, &r), "read ahead: restored %d, same %d", r.n_cached, same(&ref, &r));
    CHECKF(ahead >= 2, "the stream got %d tokens while 7 blocks were read (100 ms each)", ahead);
    int sync = tokens_during_restore(m, db, true, &r);
    CHECKF(r.n_cached == P_RESTORED && same(&ref, &r), "control: restored %d", r.n_cached);
    CHECKF(sync <= 1, "control (the engine waits for the reads): the stream got %d tokens meanwhile", sync);
    printf("read ahead: the stream got %d tokens while 7 slowed reads ran, %d with the engine waiting on them\n", ahead, sync);
    engine_run_destroy(&ref);
    rm_db(db);
}

/* A sliding-window model (window 8; the engine's ring holds 8 + 64
 * positions): after P (100 prompt tokens and 24 generated), a prompt sharing
 * only P's first 30 tokens cannot continue from the slot (its local layers
 * no longer hold positions 22..29), so it starts over: from the store's
 * first block when there is one, from nothing without a store. */
static void test_window_resume(const model *m) {
    const char *db = tpath("swa.db");
    rm_db(db);
    int32_t S[70];
    memcpy(S, P, 30 * sizeof *P);
    for (int i = 30; i < 70; i++) S[i] = (i * 13 + 9) % m->p.n_vocab;
    engine_run ref_s, r;
    fresh(m, S, 70, &ref_s);
    for (int with_store = 0; with_store < 2; with_store++) {
        engine *e = make_engine(m, 1, 64, with_store ? db : NULL, 1 << 30);
        gen(e, P, 100, &r);
        gen(e, S, 70, &r);
        CHECKF(r.n_cached == (with_store ? 16 : 0), "window resume (store %d): reused %d", with_store, r.n_cached);
        CHECKF(same(&ref_s, &r), "window resume (store %d): differs from a fresh prefill", with_store);
        /* and a prefix the ring still holds is reused as it is */
        gen(e, S, 70, &r);
        CHECKF(r.n_cached == 69 && same(&ref_s, &r), "window resume (store %d): resident reuse %d", with_store, r.n_cached);
        engine_destroy(e);
    }
    engine_run_destroy(&ref_s);
    rm_db(db);
}

/* ---- two streams, one store ------------------------------------------------------ */
static void test_two_streams(const model *m) {
    const char *db = tpath("two.db");
    rm_db(db);
    engine_run ref;
    fresh(m, P, 100, &ref);
    /* a small step budget keeps both in prefill together */
    engine *e = make_engine(m, 2, 8, db, 1 << 30);
    job_params p = greedy();
    engine_run a, b;
    engine_run_submit(e, &a, P, 100, &p);
    engine_run_submit(e, &b, P, 100, &p);
    engine_run_wait(&a); engine_run_wait(&b);
    engine_run_destroy(&a); engine_run_destroy(&b);
    CHECK(same(&ref, &a) && same(&ref, &b));
    prompt_cache_stats s = stats_of(e);
    CHECKF(s.entries == P_ENTRIES && s.blocks_queued == P_ENTRIES && s.blocks_stored == P_ENTRIES,
           "two identical streams: %llu entries, %llu queued, %llu stored", (unsigned long long)s.entries,
           (unsigned long long)s.blocks_queued, (unsigned long long)s.blocks_stored);
    /* control: two different prompts at once are both stored */
    int32_t other[100];
    memcpy(other, P, sizeof P);
    other[0] = (other[0] + 1) % m->p.n_vocab;
    engine_run_submit(e, &a, Q, 100, &p);
    engine_run_submit(e, &b, other, 100, &p);
    engine_run_wait(&a); engine_run_wait(&b);
    engine_run_destroy(&a); engine_run_destroy(&b);
    s = stats_of(e);
    CHECK(s.entries == 3 * P_ENTRIES && s.blocks_queued == 3 * P_ENTRIES);
    engine_destroy(e);
    engine_run_destroy(&ref);
    rm_db(db);
}

/* ---- eviction through the engine: a chain loses its deepest blocks first ---- */
static void test_engine_lru(const model *m) {
    const char *db = tpath("elru.db");
    rm_db(db);
    engine_run ref_p, ref_q, r;
    fresh(m, P, 100, &ref_p);
    fresh(m, Q, 100, &ref_q);
    /* room for all that Q stores, P's first two blocks and half its third */
    uint32_t L = (uint32_t)m->p.n_layer, D = (uint32_t)(m->p.n_head_kv * m->p.head_dim);
    uint64_t q_bytes = 0;
    for (uint32_t i = 1; i <= 7; i++) q_bytes += block_blob_size(&(block_shape){ i * B, B, L, D });
    q_bytes += block_blob_size(&(block_shape){ 100, 4, L, D }) + block_blob_size(&(block_shape){ 123, 11, L, D });
    uint64_t cap = q_bytes + block_blob_size(&(block_shape){ B, B, L, D }) +
                   block_blob_size(&(block_shape){ 2 * B, B, L, D }) + block_blob_size(&(block_shape){ 3 * B, B, L, D }) / 2;
    engine *e = make_engine(m, 1, 64, db, cap);
    gen(e, P, 100, &r);
    engine_cache_sync(e);
    gen(e, Q, 100, &r);
    prompt_cache_stats s = stats_of(e);
    CHECKF(s.evictions == P_ENTRIES - 2 && s.entries == P_ENTRIES + 2 && s.blocks_dropped == 0,
           "evictions %llu entries %llu dropped %llu",
           (unsigned long long)s.evictions, (unsigned long long)s.entries, (unsigned long long)s.blocks_dropped);
    engine_destroy(e);
    /* after a restart: Q whole, P's first two blocks */
    e = make_engine(m, 1, 64, db, cap);
    gen(e, Q, 100, &r);
    CHECKF(r.n_cached == P_RESTORED && same(&ref_q, &r), "the newer prompt after eviction: %d", r.n_cached);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == 32 && same(&ref_p, &r), "the older prompt after eviction: %d (want its first 2 blocks)",
           r.n_cached);
    engine_destroy(e);
    engine_run_destroy(&ref_p); engine_run_destroy(&ref_q);
    rm_db(db);
}

/* ---- a changed model file ----------------------------------------------------------- */
static model *write_model(const char *path, uint64_t seed) {
    synth_spec s;
    synth_spec_default(&s);
    s.n_embd = 128; s.n_ff = 256; s.n_layer = 2; s.mix = "Q8_0"; s.seed = seed;
    char err[512];
    CHECKF(synth_model_write(&s, path, err, sizeof err) == 0, "%s", err);
    model *m = model_load(path, err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    return m;
}

static void test_changed_model(void) {
    char err_buf[512];
    const char *db = tpath("changed.db"), *mp = tpath("changed.gguf");
    rm_db(db);
    model *m = write_model(mp, 5);
    if (!m) return;
    engine *e = make_engine(m, 1, 64, db, 1 << 30);
    engine_run r;
    gen(e, P, 100, &r);
    engine_destroy(e);
    uint8_t fa[16], fb[16];
    prompt_cache_fingerprint(m, B, fa);
    model_free(m);

    /* the same file again: hits (the control) */
    m = write_model(mp, 5);
    if (!m) return;
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == P_RESTORED, "same model file, restored %d", r.n_cached);
    engine_destroy(e);
    model_free(m);

    /* other weights, same shape and metadata: no hits */
    m = write_model(mp, 6);
    if (!m) return;
    prompt_cache_fingerprint(m, B, fb);
    CHECK(memcmp(fa, fb, 16) != 0);
    engine_run ref;
    fresh(m, P, 100, &ref);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == 0, "changed model file, restored %d", r.n_cached);
    CHECK(same(&ref, &r));
    prompt_cache_stats s = stats_of(e);
    CHECK(s.hits == 0 && s.misses == 1);
    engine_destroy(e);
    /* another block size is another fingerprint too */
    prompt_cache_fingerprint(m, B * 2, fa);
    CHECK(memcmp(fa, fb, 16) != 0);
    /* and a model loaded for another kernel path (attention's sums differ
     * between paths); the same file for the same path is the control */
    for (int p = 0; p < KPATH_COUNT; p++) {
        if (!kernels_path_available((kern_path_id)p)) continue;
        model_options o = { NULL, p };
        model *mp2 = model_load_opts(mp, &o, err_buf, sizeof err_buf);
        CHECKF(mp2 != NULL, "%s", err_buf);
        if (!mp2) continue;
        prompt_cache_fingerprint(mp2, B, fa);
        if (mp2->kern == m->kern) CHECK(memcmp(fa, fb, 16) == 0);
        else CHECKF(memcmp(fa, fb, 16) != 0, "path %s has the fingerprint of %s",
                    kernels_path_name((kern_path_id)p), m->backend->kernels_name(m));
        model_free(mp2);
    }
    model_free(m);
    engine_run_destroy(&ref);
    unlink(mp);
    rm_db(db);
}

/* ---- a collision: a row under the right key with other tokens ------------------------ */
/* Inserts by hand, under P's first key, a block ending `tokens` (B of them)
 * with KV of 1.0 everywhere; `break_sum` spoils its checksum. */
static void insert_by_hand(const model *m, const char *db, const int32_t *tokens, bool break_sum) {
    uint8_t fp[16];
    prompt_cache_fingerprint(m, B, fp);
    block_key k;
    block_key_root(fp, &k);
    block_key_next(&k, P, B);
    block_shape s = { B, B, (uint32_t)m->p.n_layer, (uint32_t)(m->p.n_head_kv * m->p.head_dim) };
    size_t n = block_blob_size(&s);
    uint8_t *blob = malloc(n);
    uint8_t *kv = block_encode(blob, n, fp, &s, tokens);
    for (size_t i = 0; i < block_kv_bytes(&s); i += 2) { kv[i] = 0x00; kv[i + 1] = 0x3c; }
    block_seal(blob, n);
    if (break_sum) blob[n - 1] ^= 1;
    sqlite3 *h;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK);
    sqlite3_busy_timeout(h, 2000);
    sqlite3_stmt *st;
    CHECK(sqlite3_exec(h, "BEGIN", 0, 0, 0) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(h, "INSERT OR REPLACE INTO blocks(fp, key, n_tokens, bytes, last_used) "
                                "VALUES(?1, ?2, ?3, ?4, 1)", -1, &st, NULL) == SQLITE_OK);
    sqlite3_bind_blob(st, 1, fp, 16, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, k.b, 16, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, B);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)n);
    CHECK(sqlite3_step(st) == SQLITE_DONE);
    sqlite3_finalize(st);
    CHECK(sqlite3_prepare_v2(h, "INSERT OR REPLACE INTO block_data(id, data) VALUES(?1, ?2)", -1, &st, NULL) ==
          SQLITE_OK);
    sqlite3_bind_int64(st, 1, sqlite3_last_insert_rowid(h));
    sqlite3_bind_blob(st, 2, blob, (int)n, SQLITE_STATIC);
    CHECK(sqlite3_step(st) == SQLITE_DONE);
    sqlite3_finalize(st);
    CHECK(sqlite3_exec(h, "COMMIT", 0, 0, 0) == SQLITE_OK);
    sqlite3_close(h);
    free(blob);
}

static int count_rows(const char *db) {
    sqlite3 *h;
    int n = -1;
    if (sqlite3_open(db, &h) == SQLITE_OK) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(h, "SELECT (SELECT count(*) FROM blocks) + (SELECT count(*) FROM block_data)",
                               -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return n;
}

static void test_collision(const model *m) {
    const char *db = tpath("collide.db");
    rm_db(db);
    engine_run ref, r;
    fresh(m, P, 100, &ref);
    engine *e = make_engine(m, 1, 64, db, 1 << 30);   /* creates the schema */
    engine_destroy(e);

    /* other tokens under P's key: never used */
    insert_by_hand(m, db, Q, false);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == 0, "a block of other tokens was used (%d restored)", r.n_cached);
    CHECKF(same(&ref, &r), "collision guard: output differs from a fresh prefill");
    engine_destroy(e);

    /* control: P's own tokens with the same made-up KV are used */
    insert_by_hand(m, db, P, false);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached >= B, "the hand-made row with the right tokens was not found (%d)", r.n_cached);
    engine_destroy(e);

    /* the right tokens but a broken checksum: not used, and deleted */
    rm_db(db);
    e = make_engine(m, 1, 64, db, 1 << 30);
    engine_destroy(e);
    insert_by_hand(m, db, P, true);
    CHECK(count_rows(db) == 2);   /* its row and its blob */
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == 0, "a block with a bad checksum was used (%d)", r.n_cached);
    CHECK(same(&ref, &r));
    engine_destroy(e);
    CHECKF(count_rows(db) == 2 * P_ENTRIES, "%d rows and blobs after the bad one went and P was stored", count_rows(db));

    /* a row whose blob is missing: not used, deleted */
    rm_db(db);
    e = make_engine(m, 1, 64, db, 1 << 30);
    engine_destroy(e);
    insert_by_hand(m, db, P, false);
    sqlite3 *h;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK && sqlite3_exec(h, "DELETE FROM block_data", 0, 0, 0) == SQLITE_OK);
    sqlite3_close(h);
    CHECK(count_rows(db) == 1);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == 0 && same(&ref, &r), "a row without its blob: %d", r.n_cached);
    engine_destroy(e);
    CHECK(count_rows(db) == 2 * P_ENTRIES);
    /* the bad row went, and P was stored in its place on the next run */
    e = make_engine(m, 1, 64, db, 1 << 30);
    engine_run q;
    gen(e, Q, 100, &q);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == P_RESTORED, "after the bad row was replaced: %d", r.n_cached);
    CHECK(same(&ref, &r));
    engine_destroy(e);
    engine_run_destroy(&ref);
    rm_db(db);
}

/* ---- corrupt and foreign files ------------------------------------------------------- */
static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite(p, 1, n, f);
    fclose(f);
}

/* Opens an engine on a damaged file: it must be set aside (when `aside`),
 * rebuilt, and work: a cold run stores, a restart hits. */
static void expect_rebuilt(const model *m, const char *db, const engine_run *ref, bool aside, const char *what) {
    char moved[600];
    snprintf(moved, sizeof moved, "%s.corrupt.1", db);
    engine *e = make_engine(m, 1, 64, db, 1 << 30);
    prompt_cache_stats s;
    CHECKF(engine_cache_stats(e, &s) == 0 && s.enabled, "%s: cache off", what);
    CHECKF(exists(moved) == aside, "%s: moved aside: %d", what, exists(moved));
    engine_run r;
    gen(e, P, 100, &r);
    CHECKF(same(ref, &r), "%s: output differs", what);
    s = stats_of(e);
    CHECKF(s.entries == P_ENTRIES, "%s: %llu entries after a run", what, (unsigned long long)s.entries);
    engine_destroy(e);
    e = make_engine(m, 1, 64, db, 1 << 30);
    gen(e, P, 100, &r);
    CHECKF(r.n_cached == P_RESTORED && same(ref, &r), "%s: no hit after the rebuild (%d)", what, r.n_cached);
    engine_destroy(e);
    rm_db(db);
}

static void test_corrupt(const model *m) {
    const char *db = tpath("bad.db");
    rm_db(db);
    engine_run ref;
    fresh(m, P, 100, &ref);

    /* garbage bytes */
    uint8_t junk[8192];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 131 + 17);
    write_file(db, junk, sizeof junk);
    expect_rebuilt(m, db, &ref, true, "garbage file");

    /* garbage that starts like sqlite */
    memcpy(junk, "SQLite format 3", 16);
    write_file(db, junk, sizeof junk);
    expect_rebuilt(m, db, &ref, true, "garbage with an sqlite header");

    /* a database of another application */
    sqlite3 *h;
    CHECK(sqlite3_open(db, &h) == SQLITE_OK);
    CHECK(sqlite3_exec(h, "CREATE TABLE users(name TEXT); INSERT INTO users VALUES('ada');", 0, 0, 0) == SQLITE_OK);
    sqlite3_close(h);
    expect_rebuilt(m, db, &ref, true, "another application's database");
    /* ... which was set aside intact */
    rm_db(db);
    CHECK(sqlite3_open(db, &h) == SQLITE_OK);
    CHECK(sqlite3_exec(h, "CREATE TABLE blocks(x); INSERT INTO blocks VALUES(1);", 0, 0, 0) == SQLITE_OK);
    sqlite3_close(h);
    expect_rebuilt(m, db, &ref, true, "a foreign table named blocks");

    /* a truncated database: made by the cache, then cut in half */
    engine *e = make_engine(m, 1, 64, db, 1 << 30);
    engine_run r;
    gen(e, P, 100, &r);
    gen(e, Q, 100, &r);
    engine_destroy(e);
    struct stat st;
    CHECK(stat(db, &st) == 0 && st.st_size > 65536);
    CHECK(truncate(db, st.st_size / 2) == 0);
    expect_rebuilt(m, db, &ref, true, "truncated database");

    /* an empty file is simply a new database */
    write_file(db, "", 0);
    expect_rebuilt(m, db, &ref, false, "empty file");

    /* a folder where the file should be: cache off, serving goes on */
    rm_db(db);
    CHECK(mkdir(db, 0755) == 0);
    e = make_engine(m, 1, 64, db, 1 << 30);
    prompt_cache_stats s;
    CHECK(engine_cache_stats(e, &s) == -1 && !s.enabled);
    gen(e, P, 100, &r);
    CHECK(same(&ref, &r));
    engine_destroy(e);
    rmdir(db);
    engine_run_destroy(&ref);
}

/* ---- faults in a child process -------------------------------------------------------- */
/* Runs fn in a child; true when it exited with 0. */
static bool in_child(int (*fn)(const model *, const engine_run *), const model *m, const engine_run *ref) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) _exit(fn(m, ref));
    int status;
    if (waitpid(pid, &status, 0) != pid) return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The user's ids when running as root, so that permissions apply. */
static int drop_root(void) {
    if (geteuid() != 0) return 0;
    return setgid(65534) || setuid(65534) ? -1 : 0;
}

static int child_readonly(const model *m, const engine_run *ref) {
    if (drop_root()) return 3;
    int bad = 0;
    const char *dbs[2] = { tpath("ro/new.db"), tpath("ro/cache.db") };   /* new; existing */
    for (int i = 0; i < 2; i++) {
        engine *e = make_engine(m, 1, 64, dbs[i], 1 << 30);
        if (!e) return 4;
        prompt_cache_stats s;
        if (engine_cache_stats(e, &s) == 0) {
            /* the existing file may open; its first write must then turn it off */
            engine_run r;
            gen(e, P, 100, &r);
            bad |= !same(ref, &r);
            s = stats_of(e);
            if (s.enabled) { fprintf(stderr, "read-only %d: cache still on\n", i); bad = 1; }
        }
        engine_run r;
        gen(e, P, 100, &r);
        bad |= !same(ref, &r);
        gen(e, Q, 100, &r);
        gen(e, P, 100, &r);
        bad |= !same(ref, &r);
        engine_destroy(e);
    }
    return bad;
}

static void test_readonly(const model *m) {
    const char *dir = tpath("ro"), *db = tpath("ro/cache.db");
    CHECK(mkdir(dir, 0755) == 0);
    engine_run ref;
    fresh(m, P, 100, &ref);
    engine *e = make_engine(m, 1, 64, db, 1 << 30);
    engine_run r;
    gen(e, P, 100, &r);
    engine_destroy(e);
    CHECK(exists(db));
    chmod(db, 0666);
    CHECK(chmod(dir, 0555) == 0);
    CHECKF(in_child(child_readonly, m, &ref), "read-only folder: the child failed");
    chmod(dir, 0755);
    rm_db(db);
    rmdir(dir);
    engine_run_destroy(&ref);
}

/* A full disk, made with a file size limit: writes fail with EFBIG. */
static int child_disk_full(const model *m, const engine_run *ref) {
    const char *db = tpath("full.db");
    engine *e = make_engine(m, 1, 64, db, 1 << 30);
    if (!e) return 4;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = { 1 << 20, 1 << 20 };
    if (setrlimit(RLIMIT_FSIZE, &rl)) return 5;
    int bad = 0;
    int32_t pr[200];
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < 200; i++) pr[i] = (i * 29 + round * 7 + 1) % m->p.n_vocab;
        engine_run r;
        gen(e, pr, 200, &r);
        engine_cache_sync(e);
        prompt_cache_stats s;
        if (engine_cache_stats(e, &s)) break;   /* turned off */
    }
    prompt_cache_stats s;
    if (engine_cache_stats(e, &s) == 0) { fprintf(stderr, "disk full: cache still on\n"); bad = 1; }
    engine_run r;
    gen(e, P, 100, &r);
    bad |= !same(ref, &r);
    engine_destroy(e);
    return bad;
}

static void test_disk_full(const model *m) {
    const char *db = tpath("full.db");
    rm_db(db);
    engine_run ref;
    fresh(m, P, 100, &ref);
    CHECKF(in_child(child_disk_full, m, &ref), "full disk: the child failed");
    rm_db(db);
    engine_run_destroy(&ref);
}

/* ---- the store alone: LRU, kill -9 ------------------------------------------------------- */
#define S_LAYERS 2
#define S_KVDIM 8

static int cur_kvdim;   /* of the store last opened */

static prompt_cache *open_store(const char *db, uint64_t cap, int kv_dim) {
    cur_kvdim = kv_dim;
    prompt_cache_config c = { .path = db, .n_layer = S_LAYERS, .kv_dim = kv_dim, .block_tokens = 4, .max_bytes = cap };
    for (int i = 0; i < 16; i++) c.fingerprint[i] = (uint8_t)(0xa0 + i);
    return prompt_cache_open(&c);
}

/* Chain `id`: blocks of 4 tokens each. */
static void chain_tokens(int id, int32_t *t, int n) {
    for (int i = 0; i < n; i++) t[i] = id * 1000 + i;
}

/* Stores chain `id`; with sync_each, waits for each block to be written
 * (a queue bounded by a small cap would otherwise drop the later ones). */
static void store_chain_sync(prompt_cache *pc, int id, int n_blocks, bool sync_each) {
    int32_t t[64];
    chain_tokens(id, t, n_blocks * 4);
    uint8_t fp[16];
    for (int i = 0; i < 16; i++) fp[i] = (uint8_t)(0xa0 + i);
    block_key k;
    block_key_root(fp, &k);
    int64_t stamp = prompt_cache_stamp(pc);
    for (int b = 0; b < n_blocks; b++) {
        block_key_next(&k, t + b * 4, 4);
        pc_item *it;
        uint8_t *kv;
        if (prompt_cache_store_begin(pc, &k, t, (b + 1) * 4, stamp, &it, &kv) != 1) continue;
        block_shape s = { (uint32_t)(b + 1) * 4, 4, S_LAYERS, (uint32_t)cur_kvdim };
        memset(kv, (id + b) & 0xff, block_kv_bytes(&s));   /* marks whose block it is */
        prompt_cache_store_commit(pc, it);
        if (sync_each) prompt_cache_sync(pc);
    }
}

static void store_chain(prompt_cache *pc, int id, int n_blocks) { store_chain_sync(pc, id, n_blocks, false); }

/* Blocks of chain `id` found, from the first. */
static int chain_hits(prompt_cache *pc, int id, int n_blocks) {
    int32_t t[64];
    chain_tokens(id, t, n_blocks * 4);
    uint8_t fp[16];
    for (int i = 0; i < 16; i++) fp[i] = (uint8_t)(0xa0 + i);
    block_key k;
    block_key_root(fp, &k);
    int n = 0;
    for (int b = 0; b < n_blocks; b++) {
        block_key_next(&k, t + b * 4, 4);
        block_view v;
        if (prompt_cache_lookup(pc, &k, t, (b + 1) * 4, &v)) break;
        if (v.kv[0] != (uint8_t)(id + b) || v.kv[v.kv_bytes - 1] != (uint8_t)(id + b)) break;
        n++;
    }
    return n;
}

static void touch_chain(prompt_cache *pc, int id, int n_blocks) {
    int32_t t[64];
    chain_tokens(id, t, n_blocks * 4);
    uint8_t fp[16];
    for (int i = 0; i < 16; i++) fp[i] = (uint8_t)(0xa0 + i);
    block_key k;
    block_key_root(fp, &k);
    int64_t stamp = prompt_cache_stamp(pc);
    for (int b = 0; b < n_blocks; b++) {
        block_key_next(&k, t + b * 4, 4);
        prompt_cache_touch(pc, &k, stamp);
    }
}

static void test_lru(void) {
    block_shape s4 = { 4, 4, S_LAYERS, S_KVDIM }, s8 = { 8, 4, S_LAYERS, S_KVDIM };
    uint64_t chain = block_blob_size(&s4) + block_blob_size(&s8);
    for (int touch = 0; touch < 2; touch++) {
        const char *db = tpath("lru.db");
        rm_db(db);
        prompt_cache *pc = open_store(db, 2 * chain, S_KVDIM);   /* room for two chains */
        CHECK(pc != NULL);
        if (!pc) return;
        store_chain(pc, 1, 2);
        prompt_cache_sync(pc);
        store_chain(pc, 2, 2);
        prompt_cache_sync(pc);
        CHECK(chain_hits(pc, 1, 2) == 2 && chain_hits(pc, 2, 2) == 2);
        if (touch) touch_chain(pc, 1, 2);   /* chain 1 used again: chain 2 is now the oldest */
        prompt_cache_sync(pc);
        store_chain(pc, 3, 2);
        prompt_cache_sync(pc);
        prompt_cache_stats st;
        prompt_cache_get_stats(pc, &st);
        CHECKF(st.evictions == 2 && st.entries == 4 && st.bytes <= 2 * chain,
               "evictions %llu entries %llu", (unsigned long long)st.evictions, (unsigned long long)st.entries);
        int h1 = chain_hits(pc, 1, 2), h2 = chain_hits(pc, 2, 2), h3 = chain_hits(pc, 3, 2);
        if (touch) CHECKF(h1 == 2 && h2 == 0 && h3 == 2, "LRU with a touch: %d %d %d", h1, h2, h3);
        else CHECKF(h1 == 0 && h2 == 2 && h3 == 2, "LRU without a touch (control): %d %d %d", h1, h2, h3);
        prompt_cache_close(pc);
        rm_db(db);
    }
    /* one chain bigger than the cap: its deepest block goes first */
    const char *db = tpath("lru.db");
    prompt_cache *pc = open_store(db, chain, S_KVDIM);
    if (pc) {
        store_chain_sync(pc, 4, 3, true);
        prompt_cache_stats st;
        prompt_cache_get_stats(pc, &st);
        CHECK(st.blocks_stored == 3 && st.evictions == 1 && st.blocks_dropped == 0);
        CHECK(chain_hits(pc, 4, 3) == 2);
        prompt_cache_close(pc);
    }
    rm_db(db);
}

#define KILL_KVDIM 512

static int child_writer(const char *db, int fd) {
    prompt_cache *pc = open_store(db, 1ull << 30, KILL_KVDIM);
    if (!pc) return 2;
    store_chain(pc, 1, 8);
    prompt_cache_sync(pc);
    if (write(fd, "x", 1) != 1) return 3;
    for (int id = 2;; id++) {   /* until killed */
        store_chain(pc, id, 8);
        if (id % 4 == 0) prompt_cache_sync(pc);
    }
}

static void test_kill9(void) {
    const char *db = tpath("kill.db");
    for (int round = 0; round < 3; round++) {
        rm_db(db);
        int fds[2];
        CHECK(pipe(fds) == 0);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            _exit(child_writer(db, fds[1]));
        }
        close(fds[1]);
        char c;
        CHECK(read(fds[0], &c, 1) == 1);   /* the first chain is committed */
        close(fds[0]);
        usleep(50000 + 100000 * round);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        char wal[600];
        snprintf(wal, sizeof wal, "%s-wal", db);
        struct stat ws;
        long wal_bytes = stat(wal, &ws) ? -1 : (long)ws.st_size;
        char moved[600];
        snprintf(moved, sizeof moved, "%s.corrupt.1", db);
        prompt_cache *pc = open_store(db, 1ull << 30, KILL_KVDIM);
        CHECKF(pc != NULL, "the database does not open after kill -9");
        if (!pc) continue;
        CHECK(!exists(moved));
        prompt_cache_stats st;
        prompt_cache_get_stats(pc, &st);
        CHECKF(st.enabled && st.entries >= 8, "after kill -9: %llu entries", (unsigned long long)st.entries);
        printf("kill -9 round %d: the WAL held %ld bytes; %llu blocks survived\n", round, wal_bytes,
               (unsigned long long)st.entries);
        CHECK(chain_hits(pc, 1, 8) == 8);
        /* and it takes writes */
        store_chain(pc, 99999, 2);
        prompt_cache_sync(pc);
        CHECK(chain_hits(pc, 99999, 2) == 2);
        prompt_cache_close(pc);
    }
    rm_db(db);
}

int main(void) {
    if (!mkdtemp(tmpdir)) return 1;
    chmod(tmpdir, 0755);   /* the read-only test's child runs as another user when we are root */
    kernels_select();
    test_codec();
    test_lru();
    test_kill9();

    char mp[512];
    snprintf(mp, sizeof mp, "%s", tpath("m.gguf"));
    model *m = write_model(mp, 5);
    if (m) {
        make_prompts(m->p.n_vocab);
        test_readonly(m);
        test_disk_full(m);
        test_invariants(m, 1);
        test_resume_conversation(m);
        test_read_ahead(m);
        test_two_streams(m);
        test_engine_lru(m);
        test_collision(m);
        test_corrupt(m);
        model_free(m);
        test_changed_model();
    }
    char err[512];
    const char *gemma = test_path("fixtures/gemma3-tiny-Q8_0.gguf");
    m = access(gemma, R_OK) ? NULL : model_load(gemma, err, sizeof err);
    if (!m) SKIP("fixtures/gemma3-tiny-Q8_0.gguf not loaded from %s", test_shared_dir());
    if (m) {
        make_prompts(m->p.n_vocab);
        kv_cache kv;
        CHECK(kv_cache_init_window(&kv, m, 1, 256, 64) == 0 && kv.ring == 72);   /* the engine's below */
        kv_cache_free(&kv);
        test_invariants(m, 4);
        test_resume_conversation(m);
        test_window_resume(m);
        model_free(m);
    }
    unlink(mp);
    if (rmdir(tmpdir)) fprintf(stderr, "note: %s not empty: %s\n", tmpdir, strerror(errno));
    return test_summary("prompt_cache");
}
