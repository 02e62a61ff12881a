/* What every backend's forward pass shares: the numerics version and the
 * batch it runs (the KV cache it reads and writes is kv_cache.h). */
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
#include "engine/model/kv_cache.h"

/* One batch: token i goes to slot[i] at position pos[i]; rows with
 * want_logits[i] get a row of logits (in batch order). Tokens of one slot
 * appear in position order. */
typedef struct fwd_batch {
    int n;
    const int32_t *token, *pos, *slot;
    const uint8_t *want_logits;
    const uint8_t *want_embd; /* rows whose final hidden state (after output_norm) is wanted, or NULL */
    float *embd;              /* n_embd floats per such row, in batch order (embeddings) */
} fwd_batch;

#endif
