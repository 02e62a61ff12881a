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
 * resident KV shares the longest prefix with its prompt; then, when the
 * prompt has full blocks of B tokens beyond that prefix, the longest run of
 * them stored in the sqlite cache is copied into the slot (prompt_cache.h).
 * Only the rest is prefilled. As prefill completes blocks, they are copied
 * out to the cache's writer thread, once per block across all streams. */
#include "engine/sched/engine.h"
#include "engine/sched/grammar_tokens.h"
#include "engine/model/backend.h"
#include "runtime/pool.h"
#include "engine/text/stop_text.h"
#include "engine/text/tokenizer.h"
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

typedef struct job {
    uint64_t id;
    int32_t *prompt;
    int n_prompt;
    job_params params;
    char *stop_copy[ENGINE_MAX_STOP];
    grammar *grammar;         /* params.grammar's copy */
    job_event_fn fn;
    void *user;
    atomic_bool cancelled;
    struct job *next;         /* queue link */
} job;

typedef enum { SLOT_FREE, SLOT_PREFILL, SLOT_GENERATE } slot_state;

typedef struct slot {
    int id;
    slot_state state;
    job *job;
    int32_t *tokens;          /* the tokens whose KV is resident, n_past of them */
    int n_past;
    int n_prefilled;          /* prompt tokens evaluated (or reused) so far */
    int n_cached;
    int n_generated;
    int32_t next_token;       /* sampled, to be fed next step */
    sampler *smp;
    grammar_sampler *gs;      /* the job's grammar, or NULL */
    detok_stream detok;
    stop_text stop;
    uint64_t last_used;       /* step of last use, for LRU */
    uint64_t admitted;        /* admission order: oldest prefill first */
    double t_start, t_first;
    int n_stored;             /* prompt blocks handed to the cache (or found there) */
    block_key store_key;      /* the key of block n_stored - 1 */
    int64_t stamp;            /* the job's use stamp in the cache (LRU) */
    float *embd;              /* n_embd: an embedding job's pooled sum or row */
} slot;

struct engine {
    const model *m;
    engine_config cfg;
    const backend *be;        /* the model's: runs the plan, holds the KV cache */
    backend_state *bs;
    kv_cache *kv;             /* the backend's, for the prompt cache's block copies */
    hpool *pool;
    float *logits;            /* one row per slot at most */
    float *work;              /* sampler's copy of a row */
    char *piece;              /* one token's text: tokenizer_max_piece + 4 bytes, never cut */
    size_t piece_cap;
    slot *slots;
    /* batch buffers */
    int32_t *b_tok, *b_pos, *b_slot;
    uint8_t *b_want;
    int *b_row_slot;          /* which slot each logits row belongs to */
    uint8_t *b_want_embd;     /* rows whose hidden state an embedding job pools */
    float *b_embd;            /* their states, n_embd each, in batch order */

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *queue_head, *queue_tail;
    int queue_len;
    int n_claimed;            /* slots holding a job (under mu): queue_max counts jobs past the free ones */
    bool stopping;
    uint64_t next_job_id;
    uint64_t step, admissions;
    slot_info *published;     /* the slot table as of the last step */
    engine_stats stats;

    grammar_vocab *gv;        /* the vocabulary's trie, built for the first grammar job */
    prompt_cache *pc;         /* NULL: off */
    int block;                /* B, tokens per stored block */
    block_key root;           /* the parent of every prompt's first block */
    atomic_bool forget;       /* engine_cache_clear: drop the free slots' resident prefixes */
};

/* ---- events --------------------------------------------------------------- */
static void emit(job *j, job_event *ev) {
    ev->job_id = j->id;
    j->fn(j->user, ev);
}

static void job_free(job *j) {
    if (!j) return;
    free((void *)j->params.sampling.logit_bias);
    free((void *)j->params.sampling.dry_breakers);
    grammar_free(j->grammar);
    free(j->prompt);
    for (int i = 0; i < ENGINE_MAX_STOP; i++) free(j->stop_copy[i]);
    free(j);
}

static void finish_unstarted(job *j, finish_reason why) {
    job_event ev = { .type = JOB_EV_DONE, .slot = -1, .finish = why, .n_prompt = j->n_prompt, .text = "" };
    emit(j, &ev);
    job_free(j);
}

/* ---- slots ------------------------------------------------------------------ */
static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* The free slot with the longest common prefix with the prompt, else the
 * least recently used free slot. -1 if none is free (or the pinned one is busy). */
static int choose_slot(engine *e, const job *j) {
    if (j->params.id_slot >= 0)
        return e->slots[j->params.id_slot].state == SLOT_FREE ? j->params.id_slot : -1;
    int best = -1, best_prefix = -1;
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        if (sl->state != SLOT_FREE) continue;
        int p = j->params.cache_prompt ? common_prefix(sl->tokens, sl->n_past, j->prompt, j->n_prompt) : 0;
        if (p > best_prefix || (p == best_prefix && sl->last_used < e->slots[best].last_used)) {
            best = s;
            best_prefix = p;
        }
    }
    return best;
}

/* sl->job is written under the lock: engine_cancel reads it from other threads. */
static void slot_set_job(engine *e, slot *sl, job *j) {
    pthread_mutex_lock(&e->mu);
    e->n_claimed += (j != NULL) - (sl->job != NULL);
    sl->job = j;
    pthread_mutex_unlock(&e->mu);
}

static void slot_release(engine *e, slot *sl) {
    job *j = sl->job;
    sampler_free(sl->smp);
    sl->smp = NULL;
    grammar_sampler_free(sl->gs);
    sl->gs = NULL;
    stop_text_free(&sl->stop);
    slot_set_job(e, sl, NULL);
    job_free(j);
    sl->state = SLOT_FREE;
    sl->last_used = e->step;
}

static void slot_finish(engine *e, slot *sl, finish_reason why, int stop_index) {
    job *j = sl->job;
    char tail[64];
    size_t n_tail = detok_flush(&sl->detok, tail, sizeof tail);
    const char *out = "";
    size_t out_len = 0;
    if (why != FINISH_STOP || stop_index < 0) {
        if (n_tail) stop_text_push(&sl->stop, tail, n_tail, &out, &out_len);
        const char *rest;
        size_t n_rest;
        stop_text_flush(&sl->stop, &rest, &n_rest);
        /* push returned the released part; the flush is what was held */
        char *joined = malloc(out_len + n_rest + 1);
        if (joined) {
            memcpy(joined, out, out_len);
            memcpy(joined + out_len, rest, n_rest);
            joined[out_len + n_rest] = 0;
        }
        job_event ev = { .type = JOB_EV_DONE, .slot = sl->id, .finish = why,
                         .text = joined ? joined : "", .text_len = joined ? out_len + n_rest : 0 };
        ev.n_prompt = j->n_prompt; ev.n_cached = sl->n_cached; ev.n_generated = sl->n_generated;
        double t = now_ms();
        ev.t_prompt_ms = (sl->t_first ? sl->t_first : t) - sl->t_start;
        ev.t_gen_ms = sl->t_first ? t - sl->t_first : 0;
        emit(j, &ev);
        free(joined);
    } else {
        job_event ev = { .type = JOB_EV_DONE, .slot = sl->id, .finish = why, .text = "",
                         .stop_word = sl->stop.stops[stop_index] };
        ev.n_prompt = j->n_prompt; ev.n_cached = sl->n_cached; ev.n_generated = sl->n_generated;
        double t = now_ms();
        ev.t_prompt_ms = (sl->t_first ? sl->t_first : t) - sl->t_start;
        ev.t_gen_ms = sl->t_first ? t - sl->t_first : 0;
        emit(j, &ev);
    }
    slot_release(e, sl);
}

/* Copies the longest run of the prompt's stored blocks that starts at or
 * before position `have` (the resident prefix) into the slot's KV; returns
 * how many leading positions now hold the prompt's state. Positions before
 * `have` are left alone: a block that starts inside the resident prefix is
 * copied from there on. Runs on the engine thread: ~8 MB read per block of
 * 256 tokens for a 1B model, far less than prefilling it. */
static int slot_restore(engine *e, slot *sl, int have) {
    job *j = sl->job;
    int B = e->block, n_full = j->n_prompt / B;
    int want = j->n_prompt - 1;   /* the last prompt token is evaluated anyway, for its logits */
    int first = have / B;         /* the first block not wholly resident */
    if (!e->pc || have >= want || first >= n_full) return have;
    block_key k = e->root;
    for (int i = 0; i < first; i++) block_key_next(&k, j->prompt + (size_t)i * B, B);
    size_t row = (size_t)e->kv->kv_dim * sizeof(uint16_t);
    int start = have, blocks = 0;
    for (int i = first; i < n_full && have < want; i++) {
        block_key_next(&k, j->prompt + (size_t)i * B, B);
        block_view v;
        if (prompt_cache_lookup(e->pc, &k, j->prompt, (i + 1) * B, &v)) break;
        /* v.kv: per layer, B rows of K then B rows of V; the lookup checked
         * the geometry and that v's prefix is exactly prompt[0, (i+1)B) */
        size_t off = (size_t)(have - i * B), n = (size_t)B - off;
        for (int l = 0; l < e->kv->n_layer; l++) {
            const uint8_t *K = v.kv + (size_t)l * 2 * B * row, *V = K + (size_t)B * row;
            kv_rows_put(e->kv, l, sl->id, i * B + (int)off, (int)n, K + off * row, V + off * row);
        }
        have = (i + 1) * B;   /* slot_store touches it with the job's stamp */
        blocks++;
    }
    prompt_cache_note_lookup(e->pc, blocks, have - start);
    return have;
}

/* Hands the prompt's full blocks evaluated so far, and not yet stored by
 * anyone, to the cache's writer: their KV rows are copied out now, since
 * the slot will be overwritten. Blocks already stored or queued (restored,
 * or the same prompt in another stream) are only touched: every block of
 * the prompt then carries this job's stamp, so LRU never evicts a block
 * before one that continues it. When the queue is full the rest of the
 * prompt is given up, as later blocks are useless without this one. */
static void slot_store(engine *e, slot *sl) {
    job *j = sl->job;
    if (!e->pc || !j->params.cache_prompt) return;
    int B = e->block;
    int done = sl->n_prefilled < j->n_prompt ? sl->n_prefilled : j->n_prompt;
    size_t row = (size_t)e->kv->kv_dim * sizeof(uint16_t), rows = (size_t)B * row;
    while (sl->n_stored < done / B) {
        int i = sl->n_stored;
        block_key_next(&sl->store_key, j->prompt + (size_t)i * B, B);
        pc_item *it;
        uint8_t *dst;
        int r = prompt_cache_store_begin(e->pc, &sl->store_key, j->prompt, (i + 1) * B, sl->stamp, &it, &dst);
        if (r < 0) { sl->n_stored = INT_MAX; return; }
        if (r == 0) prompt_cache_touch(e->pc, &sl->store_key, sl->stamp);
        if (r > 0) {
            for (int l = 0; l < e->kv->n_layer; l++)
                kv_rows_get(e->kv, l, sl->id, i * B, B, dst + (size_t)l * 2 * rows, dst + (size_t)l * 2 * rows + rows);
            prompt_cache_store_commit(e->pc, it);
        }
        sl->n_stored++;
    }
}

/* Set up the job already claimed by a slot: reuse the resident prefix, then
 * stored blocks, set up sampling. */
static int slot_admit(engine *e, slot *sl) {
    job *j = sl->job;
    int reuse = j->params.cache_prompt ? common_prefix(sl->tokens, sl->n_past, j->prompt, j->n_prompt) : 0;
    if (reuse >= j->n_prompt) reuse = j->n_prompt - 1;   /* the last prompt token gives the logits */
    sl->smp = sampler_new(&j->params.sampling, e->m->p.n_vocab);
    const char *stops[ENGINE_MAX_STOP];
    for (int i = 0; i < j->params.n_stop; i++) stops[i] = j->stop_copy[i];
    if (j->grammar && !grammar_mask_disabled()) {   /* the vocabulary's trie once, on first use (tens of ms) */
        if (!e->gv) e->gv = grammar_vocab_from_tokenizer(e->m->tok);
        sl->gs = e->gv ? grammar_sampler_new(j->grammar, e->gv, !j->params.ignore_eos) : NULL;
    }
    if (!sl->smp || (j->grammar && !grammar_mask_disabled() && !sl->gs) || stop_text_init(&sl->stop, stops, j->params.n_stop)) {
        sampler_free(sl->smp);
        sl->smp = NULL;
        grammar_sampler_free(sl->gs);
        sl->gs = NULL;
        return -1;
    }
    for (int i = 0; i < j->n_prompt; i++) sampler_accept(sl->smp, j->prompt[i]);
    /* a sliding-window layer may no longer hold the window before the
     * shared prefix's end: then start over (from the store, if it has it) */
    if (!kv_can_resume(e->kv, sl->id, sl->n_past, reuse)) reuse = 0;
    /* only now that nothing can fail: the restore overwrites resident KV */
    if (j->params.cache_prompt) reuse = slot_restore(e, sl, reuse);
    if (reuse >= j->n_prompt) reuse = j->n_prompt - 1;
    sl->n_stored = 0;
    sl->store_key = e->root;
    sl->stamp = prompt_cache_stamp(e->pc);
    detok_init(&sl->detok, e->m->tok, j->params.render_special);
    sl->detok.at_start = false;   /* generated text continues the prompt */
    sl->state = SLOT_PREFILL;
    sl->n_past = reuse;
    sl->n_prefilled = reuse;
    sl->n_cached = reuse;
    sl->n_generated = 0;
    sl->t_start = now_ms();
    sl->t_first = 0;
    sl->admitted = e->admissions++;
    memcpy(sl->tokens, j->prompt, sizeof(int32_t) * (size_t)j->n_prompt);
    pthread_mutex_lock(&e->mu);
    e->stats.cached_tokens += (uint64_t)reuse;
    pthread_mutex_unlock(&e->mu);
    return 0;
}

/* ---- embedding jobs --------------------------------------------------------- */
/* The hidden states of this step's embedding rows go into their slots (a
 * mean's sum in position order, whatever the chunks: the same bits alone or
 * batched); a slot whose prompt is done gets its pooled, L2-normalized
 * embedding in its DONE event. */
static void embed_rows(engine *e, const fwd_batch *b) {
    int E = e->m->p.n_embd;
    for (int i = 0, k = 0; i < b->n; i++) {
        if (!b->want_embd[i]) continue;
        slot *sl = &e->slots[b->slot[i]];
        const float *row = b->embd + (size_t)k++ * E;
        if (sl->job->params.embed != EMBED_MEAN || b->pos[i] == 0) memcpy(sl->embd, row, sizeof(float) * (size_t)E);
        else for (int d = 0; d < E; d++) sl->embd[d] += row[d];
    }
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        if (sl->state != SLOT_PREFILL || sl->job->params.embed == EMBED_OFF || sl->n_prefilled < sl->job->n_prompt)
            continue;
        job *j = sl->job;
        if (j->params.embed == EMBED_MEAN)
            for (int d = 0; d < E; d++) sl->embd[d] /= (float)j->n_prompt;
        double ss = 0;
        for (int d = 0; d < E; d++) ss += (double)sl->embd[d] * sl->embd[d];
        float inv = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
        for (int d = 0; d < E; d++) sl->embd[d] *= inv;
        job_event ev = { .type = JOB_EV_DONE, .slot = sl->id, .finish = FINISH_STOP, .text = "",
                         .embedding = sl->embd, .n_embd = E };
        ev.n_prompt = j->n_prompt; ev.n_cached = sl->n_cached;
        ev.t_prompt_ms = now_ms() - sl->t_start;
        emit(j, &ev);
        slot_release(e, sl);
    }
}

/* ---- the step ------------------------------------------------------------- */
/* End cancelled jobs, admit queued ones. Callbacks run after the lock is dropped. */
static void schedule(engine *e) {
    job *dropped = NULL;
    pthread_mutex_lock(&e->mu);
    /* read under the lock once: engine_destroy sets it from another thread */
    bool stopping = e->stopping;
    /* cancelled jobs still in the queue */
    for (job **pp = &e->queue_head; *pp;) {
        job *j = *pp;
        if (atomic_load(&j->cancelled) || stopping) {
            *pp = j->next;
            e->queue_len--;
            j->next = dropped;
            dropped = j;
        } else {
            pp = &j->next;
        }
    }
    e->queue_tail = NULL;
    for (job *j = e->queue_head; j; j = j->next) e->queue_tail = j;
    pthread_mutex_unlock(&e->mu);
    while (dropped) {
        job *j = dropped;
        dropped = j->next;
        finish_unstarted(j, stopping ? FINISH_SHUTDOWN : FINISH_CANCELLED);
    }

    /* cancelled or shut-down jobs in slots */
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        if (sl->state == SLOT_FREE) continue;
        if (stopping) slot_finish(e, sl, FINISH_SHUTDOWN, -1);
        else if (atomic_load(&sl->job->cancelled)) slot_finish(e, sl, FINISH_CANCELLED, -1);
    }
    if (stopping) return;
    if (atomic_exchange(&e->forget, false))
        for (int s = 0; s < e->cfg.n_slots; s++)
            if (e->slots[s].state == SLOT_FREE) e->slots[s].n_past = 0;

    /* admit in arrival order; a job pinned to a busy slot waits without blocking others */
    pthread_mutex_lock(&e->mu);
    for (job **pp = &e->queue_head; *pp;) {
        job *j = *pp;
        int s = choose_slot(e, j);
        if (s < 0) { pp = &j->next; continue; }
        *pp = j->next;
        e->queue_len--;
        /* claim the slot now so the next job picks another one */
        e->slots[s].state = SLOT_PREFILL;
        e->slots[s].job = j;
        e->n_claimed++;
        j->next = NULL;
    }
    e->queue_tail = NULL;
    for (job *j = e->queue_head; j; j = j->next) e->queue_tail = j;
    pthread_mutex_unlock(&e->mu);

    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        if (sl->state != SLOT_PREFILL || sl->smp) continue;   /* newly claimed */
        job *j = sl->job;
        if (slot_admit(e, sl)) {
            sl->state = SLOT_FREE;
            slot_set_job(e, sl, NULL);
            finish_unstarted(j, FINISH_ERROR);
            continue;
        }
        job_event ev = { .type = JOB_EV_STARTED, .slot = sl->id, .n_prompt = j->n_prompt,
                         .n_cached = sl->n_cached, .text = "" };
        emit(j, &ev);
    }
}

/* Pack the batch: generating slots first, then prompt chunks, oldest first. */
static int pack_batch(engine *e, int *n_rows) {
    int n = 0, rows = 0, budget = e->cfg.n_batch;
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        if (sl->state != SLOT_GENERATE) continue;
        e->b_tok[n] = sl->next_token;
        e->b_pos[n] = sl->n_past;
        e->b_slot[n] = s;
        e->b_want[n] = 1;
        e->b_want_embd[n] = 0;
        e->b_row_slot[rows++] = s;
        n++;
    }
    budget -= n;
    /* While streams are generating, a step holds at most n_batch_decoding
     * rows in all, so their next token is not held up by a long prefill; at
     * least one prompt token goes in, so a prefill always moves on. */
    if (n > 0 && e->cfg.n_batch_decoding > 0) {
        int room = e->cfg.n_batch_decoding - n;
        if (room < 1) room = 1;
        if (budget > room) budget = room;
    }
    for (;;) {   /* oldest prefilling slot first */
        slot *old = NULL;
        for (int s = 0; s < e->cfg.n_slots; s++) {
            slot *sl = &e->slots[s];
            bool packed = false;
            for (int i = 0; i < n && !packed; i++) packed = e->b_slot[i] == s;
            if (sl->state == SLOT_PREFILL && !packed && (!old || sl->admitted < old->admitted)) old = sl;
        }
        if (!old || budget <= 0) break;
        int left = old->job->n_prompt - old->n_prefilled;
        int chunk = left < budget ? left : budget;
        for (int i = 0; i < chunk; i++) {
            int p = old->n_prefilled + i;
            e->b_tok[n] = old->job->prompt[p];
            e->b_pos[n] = p;
            e->b_slot[n] = old->id;
            embed_pooling pool = old->job->params.embed;
            bool last = p == old->job->n_prompt - 1;
            e->b_want[n] = last && pool == EMBED_OFF;
            e->b_want_embd[n] = pool == EMBED_MEAN || (pool == EMBED_CLS && p == 0) || (pool == EMBED_LAST && last);
            if (e->b_want[n]) e->b_row_slot[rows++] = old->id;
            n++;
        }
        budget -= chunk;
    }
    *n_rows = rows;
    return n;
}

/* The token the sampler picks, among those the grammar allows when there is
 * one: first unconstrained (usually allowed: no mask needed), else again
 * over the row with every impossible token at -inf. -1: none is possible. */
static int32_t slot_pick(engine *e, slot *sl, const float *row) {
    int n_vocab = e->m->p.n_vocab;
    int32_t tok = sampler_greedy(sl->smp, row);   /* the common case, without a copy */
    if (tok < 0) {
        memcpy(e->work, row, sizeof(float) * (size_t)n_vocab);
        tok = sampler_sample(sl->smp, e->work);
    }
    if (!sl->gs || grammar_sampler_allows(sl->gs, tok)) return tok;
    int n_allowed;
    const uint64_t *mask = grammar_sampler_mask(sl->gs, &n_allowed);
    if (!mask || !n_allowed) return -1;
    memcpy(e->work, row, sizeof(float) * (size_t)n_vocab);
    grammar_mask_apply(mask, e->work, n_vocab);
    tok = sampler_sample(sl->smp, e->work);
    if (!grammar_sampler_allows(sl->gs, tok)) {   /* the allowed logits were all NaN or -inf: the first allowed id */
        for (tok = 0; tok < n_vocab && !(mask[tok >> 6] >> (tok & 63) & 1); tok++) {}
        if (tok == n_vocab) return -1;
    }
    return tok;
}

/* Sample the next token for a slot from its logits row and send it. */
static void slot_sample(engine *e, slot *sl, const float *row) {
    job *j = sl->job;
    if (j->params.max_tokens == 0) {   /* prefill only: the prompt is in the KV, nothing is sampled */
        if (!sl->t_first) sl->t_first = now_ms();
        slot_finish(e, sl, FINISH_LENGTH, -1);
        return;
    }
    int n_vocab = e->m->p.n_vocab;
    int32_t tok = slot_pick(e, sl, row);
    if (tok < 0) {   /* the grammar allows nothing more: done if it can end here */
        slot_finish(e, sl, grammar_matcher_can_end(grammar_sampler_matcher(sl->gs)) ? FINISH_STOP : FINISH_ERROR, -1);
        return;
    }
    bool grammar_done = false;
    if (sl->gs) {
        grammar_sampler_accept(sl->gs, tok);
        grammar_done = grammar_sampler_done(sl->gs);
    }
    double t = now_ms();
    if (!sl->t_first) sl->t_first = t;
    sl->n_generated++;
    sampler_accept(sl->smp, tok);

    job_event ev = { .type = JOB_EV_TOKEN, .slot = sl->id, .token = tok, .text = "" };
    if (j->params.logprobs || j->params.n_top_logprobs > 0) {
        ev.logprob = logprob_of(row, n_vocab, tok);
        ev.n_top = j->params.n_top_logprobs;
        if (ev.n_top > ENGINE_MAX_TOP_LOGPROBS) ev.n_top = ENGINE_MAX_TOP_LOGPROBS;
        if (ev.n_top > 0) logprob_top(row, n_vocab, ev.n_top, ev.top);
    }
    bool eog = !j->params.ignore_eos && tokenizer_is_eog(e->m->tok, tok);
    int stop_hit = -1;
    if (!eog) {
        size_t n = detok_push(&sl->detok, tok, e->piece, e->piece_cap);
        stop_hit = stop_text_push(&sl->stop, e->piece, n, &ev.text, &ev.text_len);
    }
    ev.n_prompt = j->n_prompt; ev.n_cached = sl->n_cached; ev.n_generated = sl->n_generated;
    emit(j, &ev);

    sl->tokens[sl->n_past] = tok;   /* resident once fed; kept here for prefix reuse */
    sl->next_token = tok;
    sl->state = SLOT_GENERATE;
    if (stop_hit == STOP_TEXT_NOMEM) slot_finish(e, sl, FINISH_ERROR, -1);
    else if (eog || stop_hit >= 0 || grammar_done) slot_finish(e, sl, FINISH_STOP, stop_hit);
    else if (j->params.max_tokens >= 0 && sl->n_generated >= j->params.max_tokens) slot_finish(e, sl, FINISH_LENGTH, -1);
    else if (sl->n_past + 1 >= e->cfg.n_ctx) slot_finish(e, sl, FINISH_LENGTH, -1);
    else if (j->params.t_max_predict_ms > 0 && t - sl->t_first > j->params.t_max_predict_ms)
        slot_finish(e, sl, FINISH_TIMEOUT, -1);
}

static void publish(engine *e) {
    pthread_mutex_lock(&e->mu);
    int busy = 0;
    uint64_t cells = 0;
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        slot_info *si = &e->published[s];
        si->id = s;
        si->busy = sl->state != SLOT_FREE;
        si->prefilling = sl->state == SLOT_PREFILL;
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

static void *engine_main(void *arg) {
    engine *e = arg;
    for (;;) {
        schedule(e);
        publish(e);
        if (!any_active(e)) {
            pthread_mutex_lock(&e->mu);
            while (!e->stopping && !e->queue_head) pthread_cond_wait(&e->cv, &e->mu);
            bool stop = e->stopping && !e->queue_head;
            pthread_mutex_unlock(&e->mu);
            if (stop) break;
            continue;
        }
        int n_rows;
        int n = pack_batch(e, &n_rows);
        fwd_batch b = { n, e->b_tok, e->b_pos, e->b_slot, e->b_want, e->b_want_embd, e->b_embd };
        if (e->be->run(e->bs, &b, e->logits)) {
            for (int s = 0; s < e->cfg.n_slots; s++)
                if (e->slots[s].state != SLOT_FREE) slot_finish(e, &e->slots[s], FINISH_ERROR, -1);
            continue;
        }
        e->step++;
        uint64_t prompt_tokens = 0, generated = 0;
        /* advance positions */
        for (int i = 0; i < n; i++) {
            slot *sl = &e->slots[e->b_slot[i]];
            if (sl->state == SLOT_PREFILL) { sl->n_prefilled++; prompt_tokens++; }
            else generated++;
            sl->n_past++;
        }
        /* blocks completed by this step go to the cache, before sampling can
         * end a job (its KV stays resident either way) */
        for (int s = 0; s < e->cfg.n_slots; s++)
            if (e->slots[s].state == SLOT_PREFILL) slot_store(e, &e->slots[s]);
        embed_rows(e, &b);
        for (int r = 0; r < n_rows; r++) {
            slot *sl = &e->slots[e->b_row_slot[r]];
            if (sl->state == SLOT_FREE) continue;
            slot_sample(e, sl, e->logits + (size_t)r * e->m->p.n_vocab);
        }
        pthread_mutex_lock(&e->mu);
        e->stats.prompt_tokens += prompt_tokens;
        e->stats.generated_tokens += generated;
        pthread_mutex_unlock(&e->mu);
    }
    publish(e);
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
    e->b_want_embd = calloc((size_t)B, 1);
    e->b_embd = malloc(sizeof(float) * (size_t)B * (size_t)m->p.n_embd);
    if (!e->logits || !e->work || !e->piece || !e->slots || !e->published || !e->b_tok ||
        !e->b_pos || !e->b_slot || !e->b_want || !e->b_row_slot || !e->b_want_embd || !e->b_embd) {
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
    publish(e);
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
    free(e->b_tok); free(e->b_pos); free(e->b_slot); free(e->b_want); free(e->b_row_slot); free(e->b_want_embd); free(e->b_embd);
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
    schedule(e);
    prompt_cache_close(e->pc);   /* writes what is queued, joins the writer */
    if (e->bs) e->be->destroy(e->bs);
    grammar_vocab_free(e->gv);
    if (!e->cfg.pool) pool_destroy(e->pool);
    for (int s = 0; s < e->cfg.n_slots; s++) free(e->slots[s].tokens), free(e->slots[s].embd);
    free(e->slots); free(e->published); free(e->logits); free(e->work); free(e->piece);
    free(e->b_tok); free(e->b_pos); free(e->b_slot); free(e->b_want); free(e->b_row_slot); free(e->b_want_embd); free(e->b_embd);
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
    atomic_store(&e->forget, true);   /* seen by the next schedule(), before any admission */
    return prompt_cache_clear(e->pc);
}

void engine_cache_sync(engine *e) { prompt_cache_sync(e->pc); }
