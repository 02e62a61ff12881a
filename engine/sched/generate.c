/* One sequence on slot 0 (see generate.h). */
#include "engine/sched/generate.h"
#include <stdlib.h>
#include <string.h>

generator *gen_new(const model *m, int n_ctx, int max_batch, struct hpool *pool) {
    generator *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->m = m;
    g->pool = pool;
    g->max_batch = max_batch;
    g->n_ctx = n_ctx;
    backend_config bc = { .n_slots = 1, .n_ctx = n_ctx, .max_batch = max_batch, .pool = pool };
    if (!(g->bs = m->backend->create(m, &bc))) goto fail;
    g->logits = malloc((size_t)max_batch * m->p.n_vocab * sizeof(float));
    g->tok = malloc((size_t)max_batch * sizeof(int32_t));
    g->pos = malloc((size_t)max_batch * sizeof(int32_t));
    g->slot = calloc((size_t)max_batch, sizeof(int32_t));
    g->want = calloc((size_t)max_batch, 1);
    if (!g->logits || !g->tok || !g->pos || !g->slot || !g->want) goto fail;
    return g;
fail:
    gen_free(g);
    return NULL;
}

void gen_free(generator *g) {
    if (!g) return;
    if (g->bs) g->m->backend->destroy(g->bs);
    free(g->logits); free(g->tok); free(g->pos); free(g->slot); free(g->want);
    free(g);
}

void gen_reset(generator *g) { g->n_past = 0; }

const float *gen_eval(generator *g, const int32_t *tokens, int n, float *all_logits) {
    int n_vocab = g->m->p.n_vocab;
    if (n <= 0 || g->n_past + n > g->n_ctx) return NULL;
    for (int done = 0; done < n;) {
        int chunk = n - done < g->max_batch ? n - done : g->max_batch;
        for (int i = 0; i < chunk; i++) {
            g->tok[i] = tokens[done + i];
            g->pos[i] = g->n_past + i;
            g->want[i] = all_logits || done + i == n - 1;
        }
        fwd_batch b = { chunk, g->tok, g->pos, g->slot, g->want, NULL, NULL };
        if (g->m->backend->run(g->bs, &b, g->logits)) return NULL;
        int n_rows = 0;
        for (int i = 0; i < chunk; i++) n_rows += g->want[i];
        if (all_logits)
            memcpy(all_logits + (size_t)done * n_vocab, g->logits, (size_t)n_rows * n_vocab * sizeof(float));
        if (all_logits && n_rows > 1)   /* keep the last row first for the return value */
            memmove(g->logits, g->logits + (size_t)(n_rows - 1) * n_vocab, (size_t)n_vocab * sizeof(float));
        g->n_past += chunk;
        done += chunk;
    }
    return g->logits;
}
