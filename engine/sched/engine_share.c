/* Choices of one prompt sharing its prefill (job_params.prefill_from).
 *
 * A waiting slot (SLOT_WAIT) takes the shared prompt's KV from the slot of
 * the job it names once that slot has evaluated it: positions [0, n) with n
 * the common prefix, at most n_prompt - 1 (the last token is evaluated by
 * the waiting slot itself, for its own logits, as after a reused prefix),
 * so a choice computes exactly what it would alone. It prefills by itself
 * when that job is not in a slot, gives nothing it lacks, or its
 * sliding-window rings no longer hold the window before n (kv_can_resume). */
#include "engine/sched/engine_internal.h"

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

void engine_share_resolve(engine *e, bool force) {
    for (int s = 0; s < e->cfg.n_slots; s++) {
        slot *sl = &e->slots[s];
        if (sl->state != SLOT_WAIT) continue;
        job *j = sl->job;
        slot *src = NULL;
        for (int t = 0; t < e->cfg.n_slots && !src; t++)
            if (t != s && e->slots[t].job && e->slots[t].job->id == sl->wait_job) src = &e->slots[t];
        if (src && sl->wait_on < 0) {   /* first look: how much it can give */
            int n = common_prefix(src->job->prompt, src->job->n_prompt, j->prompt, j->n_prompt);
            sl->n_share = n < j->n_prompt - 1 ? n : j->n_prompt - 1;
            sl->wait_on = src->id;
        }
        if (force || !src || sl->n_share <= sl->n_prefilled) {
            sl->state = SLOT_PREFILL;
            continue;
        }
        if (src->state == SLOT_WAIT || src->state == SLOT_RESTORE ||
            (src->state == SLOT_PREFILL && src->n_prefilled < sl->n_share))
            continue;   /* not there yet */
        int n = sl->n_share;
        if (src->n_prefilled >= n && kv_can_resume(e->kv, src->id, src->n_past, n)) {
            kv_cache_copy(e->kv, sl->id, src->id, n);
            uint64_t got = (uint64_t)(n - sl->n_prefilled);
            sl->n_cached += (int)got;
            sl->n_past = sl->n_prefilled = n;
            pthread_mutex_lock(&e->mu);
            e->stats.shared_tokens += got;
            pthread_mutex_unlock(&e->mu);
        }
        sl->state = SLOT_PREFILL;
    }
}
