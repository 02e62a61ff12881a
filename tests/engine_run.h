/* The engine tests' common set-up: an engine of a few slots on 2 threads,
 * and one job as a test watches it (its events collected under a lock, a
 * wait for its DONE). test_engine keeps a richer run of its own (holding
 * and cancelling from the callback) and shares the engine set-up. */
#ifndef HEARTH_TESTS_ENGINE_RUN_H
#define HEARTH_TESTS_ENGINE_RUN_H

#include "tests/test.h"
#include "engine/sched/engine.h"
#include <pthread.h>
#include <string.h>

#define ENGINE_RUN_MAX_TOKENS 256
#define ENGINE_RUN_MAX_EMBD 1024

typedef struct engine_run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    finish_reason finish;
    int n_prompt, n_cached, n_generated;
    int32_t tokens[ENGINE_RUN_MAX_TOKENS];   /* the TOKEN events' ids, the first ENGINE_RUN_MAX_TOKENS */
    int n_tokens;
    float embd[ENGINE_RUN_MAX_EMBD];         /* an embedding job's DONE */
    int n_embd;
} engine_run;

static inline void engine_run_event(void *user, const job_event *ev) {
    engine_run *r = user;
    pthread_mutex_lock(&r->mu);
    if (ev->type == JOB_EV_TOKEN && r->n_tokens < ENGINE_RUN_MAX_TOKENS) r->tokens[r->n_tokens++] = ev->token;
    if (ev->type == JOB_EV_DONE) {
        r->done = true;
        r->finish = ev->finish;
        r->n_prompt = ev->n_prompt;
        r->n_cached = ev->n_cached;
        r->n_generated = ev->n_generated;
        if (ev->embedding && ev->n_embd <= ENGINE_RUN_MAX_EMBD) {
            memcpy(r->embd, ev->embedding, sizeof(float) * (size_t)ev->n_embd);
            r->n_embd = ev->n_embd;
        }
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

static inline void engine_run_init(engine_run *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static inline void engine_run_wait(engine_run *r) {
    pthread_mutex_lock(&r->mu);
    while (!r->done) pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

static inline void engine_run_destroy(engine_run *r) {
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

/* Sets r up and submits the job; a refused job counts as a failure and as done. */
static inline void engine_run_submit(engine *e, engine_run *r, const int32_t *prompt, int n, const job_params *p) {
    engine_run_init(r);
    uint64_t id;
    int rc = engine_submit(e, prompt, n, p, engine_run_event, r, &id);
    CHECKF(rc == ENGINE_OK, "submit failed: %d", rc);
    if (rc) r->done = true;
}

/* The default configuration with these slots, context and batch, on 2 threads. */
static inline engine_config test_engine_config(int slots, int n_ctx, int batch) {
    engine_config c;
    engine_config_default(&c);
    c.n_slots = slots;
    c.n_ctx = n_ctx;
    c.n_batch = batch;
    c.n_threads = 2;
    return c;
}

static inline engine *test_engine_create(const model *m, const engine_config *c) {
    char err[256];
    engine *e = engine_create(m, c, err, sizeof err);
    CHECKF(e != NULL, "engine_create: %s", err);
    return e;
}

#endif
