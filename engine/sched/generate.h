/* One sequence on one slot: the simplest driver of the plan, used by
 * `hearth run`, `hearth bench` and the model tests. (The server uses the
 * batch engine, engine.h.) */
#ifndef HEARTH_GENERATE_H
#define HEARTH_GENERATE_H

#include <stdint.h>
#include "engine/model/model.h"
#include "engine/model/backend.h"

struct hpool;

typedef struct generator {
    const model *m;
    backend_state *bs;        /* the model's backend: its arena and KV cache */
    struct hpool *pool;
    int n_ctx;
    float *logits;            /* n_vocab: the last evaluated token's */
    int max_batch;
    int n_past;
    int32_t *tok, *pos, *slot;
    uint8_t *want;
} generator;

/* n_ctx: context length; max_batch: tokens per forward pass (prefill chunk). */
generator *gen_new(const model *m, int n_ctx, int max_batch, struct hpool *pool);
void gen_free(generator *g);
/* Append n tokens (in chunks of max_batch) and return the logits after the
 * last one, or NULL when the context is full or an id is out of range.
 * all_logits (may be NULL) receives n rows of n_vocab, one per token. */
const float *gen_eval(generator *g, const int32_t *tokens, int n, float *all_logits);
void gen_reset(generator *g);

#endif
