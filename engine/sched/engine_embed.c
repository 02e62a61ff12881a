/* An embedding job's pooling: no generation, the prompt's final hidden
 * states (mean, CLS or last) pooled and L2-normalized into its DONE event. */
#include "engine/sched/engine_internal.h"
#include <math.h>
#include <string.h>

/* The hidden states of this step's embedding rows go into their slots (a
 * mean's sum in position order, whatever the chunks: the same bits alone or
 * batched); a slot whose prompt is done gets its pooled, L2-normalized
 * embedding in its DONE event. */
void engine_embed_rows(engine *e, const fwd_batch *b) {
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
        job_emit(j, &ev);
        slot_release(e, sl);
    }
}
