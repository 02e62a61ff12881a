/* The CPU executor of the plan: one forward pass over a batch of tokens
 * drawn from any number of slots, each with its own KV cache. */
#ifndef HEARTH_FORWARD_H
#define HEARTH_FORWARD_H

/* Bumped whenever a change alters what the forward pass computes (a sum's
 * order, a conversion): saved prompt state from other numerics must not be
 * resumed as if it were this pass's own (see prompt_cache_fingerprint).
 * 2: rmsnorm sums in 16 lanes. */
#define FORWARD_NUMERICS 2

#include <stdint.h>
#include <stdbool.h>
#include "engine/model/model.h"

struct hpool;

/* Per-slot, per-layer KV cache, fp16. n_ctx is per slot. Each KV head keeps
 * its positions contiguous ([layer][slot][kv_head][pos][head_dim]), so
 * attention, which reads one KV head over every position, streams forward
 * instead of taking head_dim values out of every kv_dim-wide row. */
typedef struct kv_cache {
    int n_slots, n_ctx, n_layer, n_head_kv, head_dim, kv_dim;
    uint16_t *k, *v;
} kv_cache;

int kv_cache_init(kv_cache *kv, const model *m, int n_slots, int n_ctx);
void kv_cache_free(kv_cache *kv);
uint64_t kv_cache_bytes(const kv_cache *kv);
/* Copy positions [0, n) of slot src into slot dst (prefix reuse). */
void kv_cache_copy(kv_cache *kv, int dst, int src, int n);
/* head_dim fp16 values of (layer, slot, KV head, pos); the next position's
 * follow them. */
uint16_t *kv_k_head(kv_cache *kv, int layer, int slot, int head, int pos);
uint16_t *kv_v_head(kv_cache *kv, int layer, int slot, int head, int pos);
/* Positions [pos, pos + n) of (layer, slot) as rows of kv_dim values (every
 * head of a position together), the prompt cache's block layout: out of the
 * cache into k and v, or from k and v into it (any alignment: byte copies). */
void kv_rows_get(const kv_cache *kv, int layer, int slot, int pos, int n, void *k, void *v);
void kv_rows_put(kv_cache *kv, int layer, int slot, int pos, int n, const void *k, const void *v);

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
