/* A slot's next token and its events: the pick (grammar_pick: the sampler
 * under the slot's grammar), the TOKEN event with its
 * logprobs and released text, and the DONE event that ends a job. */
#include "engine/sched/engine_internal.h"
#include "engine/sample/grammar_pick.h"
#include <stdlib.h>
#include <string.h>

void slot_finish(engine *e, slot *sl, finish_reason why, int stop_index) {
    job *j = sl->job;
    /* what the slot evaluated, to its last position, for a later turn (a
     * failed step leaves no KV worth keeping) */
    if (why != FINISH_ERROR && sl->state != SLOT_WAIT && sl->state != SLOT_RESTORE) slot_store(e, sl, true);
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
        job_emit(j, &ev);
        free(joined);
    } else {
        job_event ev = { .type = JOB_EV_DONE, .slot = sl->id, .finish = why, .text = "",
                         .stop_word = sl->stop.stops[stop_index] };
        ev.n_prompt = j->n_prompt; ev.n_cached = sl->n_cached; ev.n_generated = sl->n_generated;
        double t = now_ms();
        ev.t_prompt_ms = (sl->t_first ? sl->t_first : t) - sl->t_start;
        ev.t_gen_ms = sl->t_first ? t - sl->t_first : 0;
        job_emit(j, &ev);
    }
    slot_release(e, sl);
}


/* Logprobs of a row (the event's token and the n_top_logprobs best) into ev. */
static void event_logprobs(engine *e, const job *j, const float *row, job_event *ev) {
    int n_vocab = e->m->p.n_vocab;
    ev->logprob = logprob_of(row, n_vocab, ev->token);
    ev->n_top = j->params.n_top_logprobs;
    if (ev->n_top > ENGINE_MAX_TOP_LOGPROBS) ev->n_top = ENGINE_MAX_TOP_LOGPROBS;
    if (ev->n_top > 0) logprob_top(row, n_vocab, ev->n_top, ev->top);
}

void slot_prompt_logprob(engine *e, slot *sl, int pos, const float *row) {
    job *j = sl->job;
    job_event ev = { .type = JOB_EV_PROMPT, .slot = sl->id, .token = j->prompt[pos + 1], .pos = pos + 1, .text = "" };
    event_logprobs(e, j, row, &ev);
    ev.n_prompt = j->n_prompt; ev.n_cached = sl->n_cached;
    job_emit(j, &ev);
}

void slot_sample(engine *e, slot *sl, const float *row) {
    job *j = sl->job;
    if (j->params.max_tokens == 0) {   /* prefill only: the prompt is in the KV, nothing is sampled */
        if (!sl->t_first) sl->t_first = now_ms();
        slot_finish(e, sl, FINISH_LENGTH, -1);
        return;
    }
    int32_t tok = grammar_pick(sl->smp, sl->gs, row, e->work, e->m->p.n_vocab, true);
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
    if (j->params.logprobs || j->params.n_top_logprobs > 0) event_logprobs(e, j, row, &ev);
    bool eog = !j->params.ignore_eos && tokenizer_is_eog(e->m->tok, tok);
    int stop_hit = -1;
    if (!eog) {
        size_t n = detok_push(&sl->detok, tok, e->piece, e->piece_cap);
        stop_hit = stop_text_push(&sl->stop, e->piece, n, &ev.text, &ev.text_len);
    }
    ev.n_prompt = j->n_prompt; ev.n_cached = sl->n_cached; ev.n_generated = sl->n_generated;
    job_emit(j, &ev);

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
