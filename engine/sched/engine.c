/* The fixed-slot batch engine (see engine.h).
 *
 * One thread owns the model, the KV cache and the slots. Each step it
 * (1) ends cancelled jobs and admits queued ones into free slots,
 * (2) packs one batch: a token for every generating slot, then prompt
 *     chunks of prefilling slots, oldest first, up to the token budget,
 * (3) runs the plan once over the batch, and
 * (4) samples each slot that asked for logits and sends its events.
 * The lock guards only the queue, the cancel flags and the published slot
 * table; compute and callbacks run without it.
 *
 * Prompt state is reused twice over. A new job goes to the free slot whose
 * resident KV shares the longest prefix with its prompt; then the longest
 * run of stored blocks of B tokens beyond that prefix, and the partial
 * block stored after them, are read from the sqlite cache on its reader
 * thread (prompt_cache.h) and copied into the slot as they come, the slot
 * waiting (SLOT_RESTORE) while the others step on. Only the rest is
 * prefilled. As prefill completes blocks, they are copied
 * out to the cache's writer thread, once per block across all streams.
 *
 * The parts live in engine_*.c (engine_internal.h lists them). */
#include "engine/sched/engine_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void engine_config_default(engine_config *c) {
    memset(c, 0, sizeof *c);
    c->n_slots = 4;
    c->n_ctx = 4096;
    c->n_batch = 512;
    c->n_batch_decoding = 6;
    c->n_threads = pool_default_threads();
    c->queue_max = 64;
    c->prompt_cache_bytes = 4ull << 30;
    c->prompt_cache_block = PROMPT_CACHE_BLOCK_TOKENS;
}

const char *finish_reason_name(finish_reason f) {
    switch (f) {
    case FINISH_STOP: return "stop";
    case FINISH_LENGTH: return "length";
    case FINISH_CANCELLED: return "cancelled";
    case FINISH_TIMEOUT: return "length";   /* t_max_predict_ms: reported like a length cut */
    case FINISH_SHUTDOWN: return "shutdown";
    case FINISH_ERROR: return "error";
    default: return "none";
    }
}

void engine_publish(engine *e) {
    pthread_mutex_lock(&e->mu);
    int busy = 0;
    uint64_t cells = 0;
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        slot_info *si = &e->published[s];
        si->id = s;
        si->busy = sl->state != SLOT_FREE;
        si->prefilling = sl->state == SLOT_PREFILL || sl->state == SLOT_WAIT || sl->state == SLOT_RESTORE;
        si->job_id = sl->job ? sl->job->id : 0;
        si->n_ctx = e->cfg.n_ctx;
        si->n_past = sl->n_past;
        si->n_prompt = sl->job ? sl->job->n_prompt : 0;
        si->n_generated = sl->n_generated;
        busy += si->busy;
        cells += (uint64_t)sl->n_past;
    }
    e->stats.slots_busy = busy;
    e->stats.queue_depth = e->queue_len;
    e->stats.kv_cells_used = cells;
    e->stats.steps = e->step;
    pthread_mutex_unlock(&e->mu);
}

static bool any_active(const engine *e) {
    for (int s = 0; s < e->cfg.n_slots; s++) if (e->slots[s].state != SLOT_FREE) return true;
    return false;
}

/* Only slots whose stored blocks are being read (and slots waiting on
 * them): no step to run until a block comes in. */
static bool only_restoring(const engine *e) {
    bool restoring = false;
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot_state st = e->slots[s].state;
        if (st == SLOT_PREFILL || st == SLOT_GENERATE) return false;
        restoring |= st == SLOT_RESTORE;
    }
    return restoring;
}

static void *engine_main(void *arg) {
    engine *e = arg;
    for (;;) {
        engine_schedule(e);
        engine_publish(e);
        if (!any_active(e)) {
            pthread_mutex_lock(&e->mu);
            while (!e->stopping && !e->queue_head) pthread_cond_wait(&e->cv, &e->mu);
            bool stop = e->stopping && !e->queue_head;
            pthread_mutex_unlock(&e->mu);
            if (stop) break;
            continue;
        }
        if (only_restoring(e)) {
            /* woken by the reader, a submission or a cancel; the timeout
             * bounds what a missed wake-up could cost */
            pthread_mutex_lock(&e->mu);
            if (!e->stopping && !e->restore_ready) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 20 * 1000000L;
                if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
                pthread_cond_timedwait(&e->cv, &e->mu, &ts);
            }
            e->restore_ready = false;
            pthread_mutex_unlock(&e->mu);
            continue;
        }
        engine_step(e);
    }
    engine_publish(e);
    return NULL;
}

/* ---- public API ------------------------------------------------------------ */
engine *engine_create(const model *m, const engine_config *c, char *err, size_t errlen) {
    engine *e = calloc(1, sizeof *e);
    if (!e) { snprintf(err, errlen, "out of memory"); return NULL; }
    e->m = m;
    e->cfg = *c;
    if (e->cfg.n_slots < 1 || e->cfg.n_slots > 256 || e->cfg.n_ctx < 8 || e->cfg.n_batch < 1 || e->cfg.queue_max < 0) {
        snprintf(err, errlen, "bad engine configuration (slots 1..256, ctx >= 8, batch >= 1)");
        free(e);
        return NULL;
    }
    if (e->cfg.n_batch < e->cfg.n_slots) e->cfg.n_batch = e->cfg.n_slots;   /* room for one token per slot */
    if (e->cfg.n_threads < 1) e->cfg.n_threads = 1;
    int S = e->cfg.n_slots, B = e->cfg.n_batch, V = m->p.n_vocab;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    /* a shared pool is the caller's; its size sets the arena's worker count */
    e->pool = c->pool ? c->pool : pool_create(e->cfg.n_threads);
    if (c->pool) e->cfg.n_threads = pool_threads(c->pool);
    e->be = m->backend;
    backend_config bc = { .n_slots = S, .n_ctx = e->cfg.n_ctx, .max_batch = B, .pool = e->pool };
    if (!e->pool || !(e->bs = e->be->create(m, &bc))) {
        snprintf(err, errlen, "cannot allocate the KV cache and activations (%d slots x %d tokens)", S, e->cfg.n_ctx);
        goto fail;
    }
    e->kv = e->be->kv(e->bs);
    e->logits = malloc(sizeof(float) * (size_t)S * V);
    e->logit_rows = S;
    e->work = malloc(sizeof(float) * (size_t)V);
    e->piece_cap = tokenizer_max_piece(m->tok) + 4;   /* sized from the vocabulary: no piece is cut */
    e->piece = malloc(e->piece_cap);
    e->slots = calloc((size_t)S, sizeof *e->slots);
    e->published = calloc((size_t)S, sizeof *e->published);
    e->b_tok = malloc(sizeof(int32_t) * (size_t)B);
    e->b_pos = malloc(sizeof(int32_t) * (size_t)B);
    e->b_slot = malloc(sizeof(int32_t) * (size_t)B);
    e->b_want = malloc((size_t)B);
    e->b_row_slot = malloc(sizeof(int) * (size_t)B);
    e->b_row_pos = malloc(sizeof(int) * (size_t)B);
    e->b_want_embd = calloc((size_t)B, 1);
    e->b_embd = malloc(sizeof(float) * (size_t)B * (size_t)m->p.n_embd);
    if (!e->logits || !e->work || !e->piece || !e->slots || !e->published || !e->b_tok ||
        !e->b_pos || !e->b_slot || !e->b_want || !e->b_row_slot || !e->b_row_pos || !e->b_want_embd || !e->b_embd) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (int s = 0; s < S; s++) {
        e->slots[s].id = s;
        e->slots[s].tokens = malloc(sizeof(int32_t) * (size_t)e->cfg.n_ctx);
        e->slots[s].embd = malloc(sizeof(float) * (size_t)m->p.n_embd);
        if (!e->slots[s].tokens || !e->slots[s].embd) { snprintf(err, errlen, "out of memory"); goto fail; }
    }
    e->stats.n_slots = S;
    e->stats.kv_cells_total = (uint64_t)S * e->cfg.n_ctx;
    e->stats.kv_bytes = kv_cache_bytes(e->kv);
    e->next_job_id = 1;
    atomic_init(&e->forget, false);
    e->block = e->cfg.prompt_cache_block > 0 ? e->cfg.prompt_cache_block : PROMPT_CACHE_BLOCK_TOKENS;
    if (e->cfg.prompt_cache && *e->cfg.prompt_cache && strcmp(e->cfg.prompt_cache, "off") &&
        e->cfg.prompt_cache_bytes > 0) {
        prompt_cache_config pcc = { .path = e->cfg.prompt_cache, .n_layer = e->kv->n_layer, .kv_dim = e->kv->kv_dim,
                                    .block_tokens = e->block, .max_bytes = e->cfg.prompt_cache_bytes };
        prompt_cache_fingerprint(m, e->block, pcc.fingerprint);
        /* longrope: the factors follow the context size, and the KV with them */
        if (model_rope_factors(m, e->cfg.n_ctx) != model_rope_factors(m, 0)) pcc.fingerprint[15] ^= 0x80;
        block_key_root(pcc.fingerprint, &e->root);
        e->pc = prompt_cache_open(&pcc);   /* NULL: off; it said why on stderr */
    }
    e->cfg.prompt_cache = NULL;            /* the caller's string: not kept */
    engine_publish(e);
    if (pthread_create(&e->thread, NULL, engine_main, e)) {
        snprintf(err, errlen, "cannot start the engine thread");
        goto fail;
    }
    return e;
fail:
    e->thread = 0;
    prompt_cache_close(e->pc);
    if (e->bs) e->be->destroy(e->bs);
    if (!c->pool) pool_destroy(e->pool);
    if (e->slots) for (int s = 0; s < S; s++) free(e->slots[s].tokens), free(e->slots[s].embd);
    free(e->slots); free(e->published); free(e->logits); free(e->work); free(e->piece);
    free(e->b_tok); free(e->b_pos); free(e->b_slot); free(e->b_want); free(e->b_row_slot); free(e->b_row_pos); free(e->b_want_embd); free(e->b_embd);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
    return NULL;
}

void engine_destroy(engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    /* anything submitted after the thread's last look */
    engine_schedule(e);
    prompt_cache_close(e->pc);   /* writes what is queued, joins the writer */
    if (e->bs) e->be->destroy(e->bs);
    grammar_vocab_free(e->gv);
    if (!e->cfg.pool) pool_destroy(e->pool);
    for (int s = 0; s < e->cfg.n_slots; s++) free(e->slots[s].tokens), free(e->slots[s].embd);
    free(e->slots); free(e->published); free(e->logits); free(e->work); free(e->piece);
    free(e->b_tok); free(e->b_pos); free(e->b_slot); free(e->b_want); free(e->b_row_slot); free(e->b_row_pos); free(e->b_want_embd); free(e->b_embd);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

int engine_submit(engine *e, const int32_t *prompt, int n_prompt, const job_params *p,
                  job_event_fn fn, void *user, uint64_t *job_id) {
    if (n_prompt <= 0 || n_prompt >= e->cfg.n_ctx) return ENGINE_PROMPT_TOO_LONG;
    if (p->id_slot >= e->cfg.n_slots || p->id_slot < -1) return ENGINE_BAD_SLOT;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->m->p.n_vocab) return ENGINE_BAD_TOKEN;
    job *j = calloc(1, sizeof *j);
    if (!j) return ENGINE_NOMEM;
    j->prompt = malloc(sizeof(int32_t) * (size_t)n_prompt);
    if (!j->prompt) { free(j); return ENGINE_NOMEM; }
    memcpy(j->prompt, prompt, sizeof(int32_t) * (size_t)n_prompt);
    j->n_prompt = n_prompt;
    j->params = *p;
    j->params.sampling.logit_bias = NULL;   /* the caller's: job_free must not free them */
    j->params.sampling.dry_breakers = NULL;
    /* mean and CLS pooling read every prompt row's state: nothing may be reused */
    if (p->embed == EMBED_MEAN || p->embed == EMBED_CLS) j->params.cache_prompt = false;
    if (j->params.n_stop > ENGINE_MAX_STOP) j->params.n_stop = ENGINE_MAX_STOP;
    for (int i = 0; i < j->params.n_stop; i++) {
        j->stop_copy[i] = strdup(p->stop[i] ? p->stop[i] : "");
        if (!j->stop_copy[i]) { job_free(j); return ENGINE_NOMEM; }
        j->params.stop[i] = j->stop_copy[i];
    }
    if (p->grammar && !(j->grammar = grammar_clone(p->grammar))) { job_free(j); return ENGINE_NOMEM; }
    j->params.grammar = j->grammar;
    j->params.sampling.logit_bias = NULL;   /* copied below by value: the sampler copies at admission */
    j->params.sampling.n_logit_bias = 0;
    if (p->sampling.n_logit_bias > 0 && p->sampling.logit_bias) {
        logit_bias_entry *lb = malloc(sizeof *lb * (size_t)p->sampling.n_logit_bias);
        if (!lb) { job_free(j); return ENGINE_NOMEM; }
        memcpy(lb, p->sampling.logit_bias, sizeof *lb * (size_t)p->sampling.n_logit_bias);
        j->params.sampling.logit_bias = lb;
        j->params.sampling.n_logit_bias = p->sampling.n_logit_bias;
    }
    j->params.sampling.dry_breakers = NULL;   /* likewise DRY's breaker ids */
    j->params.sampling.n_dry_breakers = 0;
    if (p->sampling.n_dry_breakers > 0 && p->sampling.dry_breakers) {
        size_t bytes = sizeof(int32_t) * (size_t)p->sampling.n_dry_breakers;
        int32_t *db = malloc(bytes);
        if (!db) { job_free(j); return ENGINE_NOMEM; }
        memcpy(db, p->sampling.dry_breakers, bytes);
        j->params.sampling.dry_breakers = db;
        j->params.sampling.n_dry_breakers = p->sampling.n_dry_breakers;
    }
    j->fn = fn;
    j->user = user;
    atomic_init(&j->cancelled, false);
    pthread_mutex_lock(&e->mu);
    if (e->stopping) {
        pthread_mutex_unlock(&e->mu);
        job_free(j);
        return ENGINE_STOPPED;
    }
    /* queue_max is the waiting room: a job a free slot will take does not wait, so
     * --queue 0 means "no waiting", not "nothing" */
    if (e->queue_len >= e->cfg.queue_max + (e->cfg.n_slots - e->n_claimed)) {
        pthread_mutex_unlock(&e->mu);
        job_free(j);
        return ENGINE_QUEUE_FULL;
    }
    j->id = e->next_job_id++;
    if (e->queue_tail) e->queue_tail->next = j; else e->queue_head = j;
    e->queue_tail = j;
    e->queue_len++;
    e->stats.queue_depth = e->queue_len;
    if (job_id) *job_id = j->id;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return ENGINE_OK;
}

void engine_cancel(engine *e, uint64_t job_id) {
    pthread_mutex_lock(&e->mu);
    for (job *j = e->queue_head; j; j = j->next)
        if (j->id == job_id) atomic_store(&j->cancelled, true);
    /* jobs in slots (sl->job only changes under the lock) */
    for (int s = 0; s < e->cfg.n_slots; s++) {
        job *j = e->slots[s].job;
        if (j && j->id == job_id) atomic_store(&j->cancelled, true);
    }
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

int engine_slots(engine *e, slot_info *out, int max) {
    pthread_mutex_lock(&e->mu);
    int n = e->cfg.n_slots < max ? e->cfg.n_slots : max;
    memcpy(out, e->published, sizeof *out * (size_t)n);
    pthread_mutex_unlock(&e->mu);
    return e->cfg.n_slots;
}

void engine_get_stats(engine *e, engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    out->queue_depth = e->queue_len;
    pthread_mutex_unlock(&e->mu);
}

const model *engine_model(const engine *e) { return e->m; }
int engine_n_ctx(const engine *e) { return e->cfg.n_ctx; }

int engine_cache_stats(engine *e, prompt_cache_stats *out) {
    prompt_cache_get_stats(e->pc, out);
    return out->enabled ? 0 : -1;
}

int engine_cache_clear(engine *e) {
    atomic_store(&e->forget, true);   /* seen by the next engine_schedule(), before any admission */
    return prompt_cache_clear(e->pc);
}

void engine_cache_sync(engine *e) { prompt_cache_sync(e->pc); }
