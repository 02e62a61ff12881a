/* The CPU executor of the plan: one forward pass over a batch of tokens
 * drawn from any number of slots, each with its own KV cache. */
#ifndef HEARTH_FORWARD_H
#define HEARTH_FORWARD_H

#include <stdint.h>
#include <stdbool.h>
#include "model.h"

struct hpool;

/* Per-slot, per-layer KV cache, fp16. n_ctx is per slot. */
typedef struct kv_cache {
    int n_slots, n_ctx, n_layer, kv_dim;
    uint16_t *k, *v;     /* [layer][slot][pos][kv_dim] */
} kv_cache;

int kv_cache_init(kv_cache *kv, const model *m, int n_slots, int n_ctx);
void kv_cache_free(kv_cache *kv);
uint64_t kv_cache_bytes(const kv_cache *kv);
/* Copy positions [0, n) of slot src into slot dst (prefix reuse). */
void kv_cache_copy(kv_cache *kv, int dst, int src, int n);
/* Row of kv_dim fp16 values for (layer, slot, pos). */
uint16_t *kv_k_at(kv_cache *kv, int layer, int slot, int pos);
uint16_t *kv_v_at(kv_cache *kv, int layer, int slot, int pos);

/* One batch: token i goes to slot[i] at position pos[i]; rows with
 * want_logits[i] get a row of logits (in batch order). Tokens of one slot
 * appear in position order. */
typedef struct fwd_batch {
    int n;
    const int32_t *token, *pos, *slot;
    const uint8_t *want_logits;
} fwd_batch;

/* Activation arena sized once for the largest batch: no allocation in a step. */
typedef struct fwd_arena fwd_arena;
/* max_threads: the most pool workers that will run a step. */
fwd_arena *fwd_arena_new(const model *m, int max_batch, int n_ctx, int max_threads);
void fwd_arena_free(fwd_arena *a);

/* Runs the plan; logits gets one n_vocab row per wanted row. 0 or -1 (bad batch). */
int forward(const model *m, kv_cache *kv, fwd_arena *a, const fwd_batch *b,
            float *logits, struct hpool *pool);

#endif
