/* One step of the engine: pack a batch (a token for every generating slot,
 * then prompt chunks, oldest first, up to the budget), run the plan once over
 * it, advance the slots, hand completed prompt blocks to the cache, pool
 * embedding rows and sample every slot that asked for logits. */
#include "engine/sched/engine_internal.h"

/* Pack the batch: generating slots first, then prompt chunks, oldest first. */
static int pack_batch(engine *e, int *n_rows) {
    int n = 0, rows = 0, budget = e->cfg.n_batch, extra = 0;   /* extra: rows past one per slot */
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        if (sl->state != SLOT_GENERATE) continue;
        e->b_tok[n] = sl->next_token;
        e->b_pos[n] = sl->n_past;
        e->b_slot[n] = s;
        e->b_want[n] = 1;
        e->b_want_embd[n] = 0;
        e->b_row_pos[rows] = sl->n_past;
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
        embed_pooling pool = old->job->params.embed;
        bool every = old->job->params.prompt_logprobs && pool == EMBED_OFF;   /* logits for every row */
        if (every && chunk > 1 + PROMPT_ROWS - extra) chunk = 1 + PROMPT_ROWS - extra;
        if (every) extra += chunk - 1;
        for (int i = 0; i < chunk; i++) {
            int p = old->n_prefilled + i;
            e->b_tok[n] = old->job->prompt[p];
            e->b_pos[n] = p;
            e->b_slot[n] = old->id;
            bool last = p == old->job->n_prompt - 1;
            e->b_want[n] = (last || every) && pool == EMBED_OFF;
            e->b_want_embd[n] = pool == EMBED_MEAN || (pool == EMBED_CLS && p == 0) || (pool == EMBED_LAST && last);
            if (e->b_want[n]) {
                e->b_row_pos[rows] = p;
                e->b_row_slot[rows++] = old->id;
            }
            n++;
        }
        budget -= chunk;
    }
    *n_rows = rows;
    return n;
}

void engine_step(engine *e) {
    int n_rows;
    int n = pack_batch(e, &n_rows);
    if (!n) { engine_share_resolve(e, true); return; }   /* only waiting slots (cannot happen): let them prefill */
    fwd_batch b = { n, e->b_tok, e->b_pos, e->b_slot, e->b_want, e->b_want_embd, e->b_embd };
    if (e->be->run(e->bs, &b, e->logits)) {
        for (int s = 0; s < e->cfg.n_slots; s++)
            if (e->slots[s].state != SLOT_FREE) slot_finish(e, &e->slots[s], FINISH_ERROR, -1);
        return;
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
     * end a job (its KV stays resident either way); a prompt evaluated to
     * its end gives its partial last block too */
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        if (sl->state == SLOT_PREFILL || sl->state == SLOT_GENERATE)
            slot_store(e, sl, sl->state == SLOT_PREFILL && sl->n_prefilled == sl->job->n_prompt);
    }
    engine_share_resolve(e, false);   /* before sampling may end the job they take from */
    engine_embed_rows(e, &b);
    for (int r = 0; r < n_rows; r++) {
        slot *sl = &e->slots[e->b_row_slot[r]];
        const float *row = e->logits + (size_t)r * e->m->p.n_vocab;
        if (sl->state == SLOT_FREE) continue;
        if (sl->state == SLOT_PREFILL && e->b_row_pos[r] < sl->job->n_prompt - 1) slot_prompt_logprob(e, sl, e->b_row_pos[r], row);
        else slot_sample(e, sl, row);
    }
    pthread_mutex_lock(&e->mu);
    e->stats.prompt_tokens += prompt_tokens;
    e->stats.generated_tokens += generated;
    pthread_mutex_unlock(&e->mu);
}
