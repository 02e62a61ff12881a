/* The engine's queue and slots: a job's events and its end, the choice of
 * a slot for a new job (the longest resident prefix), admission (reused
 * prefix, stored blocks, sampling set-up) and release, and the schedule at
 * the top of every step that ends cancelled jobs and admits queued ones. */
#include "engine/sched/engine_internal.h"
#include "engine/sched/grammar_tokens.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- events --------------------------------------------------------------- */
void job_emit(job *j, job_event *ev) {
    ev->job_id = j->id;
    j->fn(j->user, ev);
}

void job_free(job *j) {
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
    job_emit(j, &ev);
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

void slot_set_job(engine *e, slot *sl, job *j) {
    pthread_mutex_lock(&e->mu);
    e->n_claimed += (j != NULL) - (sl->job != NULL);
    sl->job = j;
    pthread_mutex_unlock(&e->mu);
}

void slot_release(engine *e, slot *sl) {
    job *j = sl->job;
    prompt_cache_fetch_end(sl->fetch);   /* a restore cut short: the positions so far stay valid */
    sl->fetch = NULL;
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


/* Set up the job already claimed by a slot: reuse the resident prefix, then
 * stored blocks, set up sampling. */
/* Logits rows for prompt logprobs, allocated for the first job that wants
 * them, not at start: with a large vocabulary they are tens of MB. */
static int logits_room(engine *e) {
    int want = e->cfg.n_slots + PROMPT_ROWS;
    if (e->logit_rows >= want) return 0;
    float *l = realloc(e->logits, sizeof(float) * (size_t)want * (size_t)e->m->p.n_vocab);
    if (!l) return -1;
    e->logits = l;
    e->logit_rows = want;
    return 0;
}

static int slot_admit(engine *e, slot *sl) {
    job *j = sl->job;
    /* prompt logprobs need every prompt row's logits: nothing is reused */
    bool reuse_ok = j->params.cache_prompt && !j->params.prompt_logprobs;
    int reuse = reuse_ok ? common_prefix(sl->tokens, sl->n_past, j->prompt, j->n_prompt) : 0;
    if (j->params.prompt_logprobs && logits_room(e)) return -1;
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
    detok_init(&sl->detok, e->m->tok, j->params.render_special);
    sl->detok.at_start = false;   /* generated text continues the prompt */
    sl->n_past = reuse;
    sl->n_prefilled = 0;
    sl->n_cached = 0;
    sl->n_generated = 0;
    sl->n_stored = INT_MAX;       /* nothing to store before the prefill */
    sl->t_start = now_ms();
    sl->t_first = 0;
    sl->admitted = e->admissions++;
    memcpy(sl->tokens, j->prompt, sizeof(int32_t) * (size_t)j->n_prompt);
    /* only now that nothing can fail: the restore overwrites resident KV,
     * read on the cache's thread while the other slots step on */
    if (reuse_ok && slot_restore_begin(e, sl, reuse)) {
        sl->state = SLOT_RESTORE;
        return 0;
    }
    slot_admit_finish(e, sl);
    return 0;
}

void slot_admit_finish(engine *e, slot *sl) {
    job *j = sl->job;
    int reuse = sl->n_past;
    if (reuse >= j->n_prompt) reuse = j->n_prompt - 1;
    sl->n_stored = 0;
    sl->store_key = e->root;
    sl->stamp = prompt_cache_stamp(e->pc);
    sl->state = SLOT_PREFILL;
    sl->n_past = reuse;
    sl->n_prefilled = reuse;
    sl->n_cached = reuse;
    pthread_mutex_lock(&e->mu);
    e->stats.cached_tokens += (uint64_t)reuse;
    pthread_mutex_unlock(&e->mu);
    /* an earlier job of the same prompt (ids only grow, so a chain of them
     * ends at a job that prefills) */
    if (j->params.prefill_from && j->params.prefill_from < j->id && !j->params.prompt_logprobs &&
        j->params.embed == EMBED_OFF) {
        sl->state = SLOT_WAIT;   /* engine_share_resolve decides, once every claimed slot is admitted */
        sl->wait_job = j->params.prefill_from;
        sl->wait_on = -1;
    }
}

/* ---- the schedule ------------------------------------------------------------- */
void engine_schedule(engine *e) {
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
        if (sl->state == SLOT_RESTORE) continue;   /* started once its blocks are in */
        job_event ev = { .type = JOB_EV_STARTED, .slot = sl->id, .n_prompt = j->n_prompt,
                         .n_cached = sl->n_cached, .text = "" };
        job_emit(j, &ev);
    }
    /* restores whose blocks came in */
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        if (sl->state != SLOT_RESTORE || !slot_restore_poll(e, sl)) continue;
        slot_admit_finish(e, sl);
        job_event ev = { .type = JOB_EV_STARTED, .slot = sl->id, .n_prompt = sl->job->n_prompt,
                         .n_cached = sl->n_cached, .text = "" };
        job_emit(sl->job, &ev);
    }
    engine_share_resolve(e, false);
}

