/* The engine's side of the prompt cache (engine/cache/prompt_cache.h): at
 * admission, the prompt's stored blocks are copied into the slot's KV; as
 * prefill completes blocks, their KV is copied out to the cache's writer. */
#include "engine/sched/engine_internal.h"
#include <limits.h>

/* Copies the longest run of the prompt's stored blocks that starts at or
 * before position `have` (the resident prefix) into the slot's KV; returns
 * how many leading positions now hold the prompt's state. Positions before
 * `have` are left alone: a block that starts inside the resident prefix is
 * copied from there on. Runs on the engine thread: ~8 MB read per block of
 * 256 tokens for a 1B model, far less than prefilling it. */
int slot_restore(engine *e, slot *sl, int have) {
    job *j = sl->job;
    int B = e->block, n_full = j->n_prompt / B;
    int want = j->n_prompt - 1;   /* the last prompt token is evaluated anyway, for its logits */
    int first = have / B;         /* the first block not wholly resident */
    if (!e->pc || have >= want || first >= n_full) return have;
    block_key k = e->root;
    for (int i = 0; i < first; i++) block_key_next(&k, j->prompt + (size_t)i * B, B);
    size_t row = (size_t)e->kv->kv_dim * sizeof(uint16_t);
    int start = have, blocks = 0;
    for (int i = first; i < n_full && have < want; i++) {
        block_key_next(&k, j->prompt + (size_t)i * B, B);
        block_view v;
        if (prompt_cache_lookup(e->pc, &k, j->prompt, (i + 1) * B, &v)) break;
        /* v.kv: per layer, B rows of K then B rows of V; the lookup checked
         * the geometry and that v's prefix is exactly prompt[0, (i+1)B) */
        size_t off = (size_t)(have - i * B), n = (size_t)B - off;
        for (int l = 0; l < e->kv->n_layer; l++) {
            const uint8_t *K = v.kv + (size_t)l * 2 * B * row, *V = K + (size_t)B * row;
            kv_rows_put(e->kv, l, sl->id, i * B + (int)off, (int)n, K + off * row, V + off * row);
        }
        have = (i + 1) * B;   /* slot_store touches it with the job's stamp */
        blocks++;
    }
    prompt_cache_note_lookup(e->pc, blocks, have - start);
    return have;
}

/* Hands the prompt's full blocks evaluated so far, and not yet stored by
 * anyone, to the cache's writer: their KV rows are copied out now, since
 * the slot will be overwritten. Blocks already stored or queued (restored,
 * or the same prompt in another stream) are only touched: every block of
 * the prompt then carries this job's stamp, so LRU never evicts a block
 * before one that continues it. When the queue is full the rest of the
 * prompt is given up, as later blocks are useless without this one. */
void slot_store(engine *e, slot *sl) {
    job *j = sl->job;
    if (!e->pc || !j->params.cache_prompt) return;
    int B = e->block;
    int done = sl->n_prefilled < j->n_prompt ? sl->n_prefilled : j->n_prompt;
    size_t row = (size_t)e->kv->kv_dim * sizeof(uint16_t), rows = (size_t)B * row;
    while (sl->n_stored < done / B) {
        int i = sl->n_stored;
        block_key_next(&sl->store_key, j->prompt + (size_t)i * B, B);
        pc_item *it;
        uint8_t *dst;
        int r = prompt_cache_store_begin(e->pc, &sl->store_key, j->prompt, (i + 1) * B, sl->stamp, &it, &dst);
        if (r < 0) { sl->n_stored = INT_MAX; return; }
        if (r == 0) prompt_cache_touch(e->pc, &sl->store_key, sl->stamp);
        if (r > 0) {
            for (int l = 0; l < e->kv->n_layer; l++)
                kv_rows_get(e->kv, l, sl->id, i * B, B, dst + (size_t)l * 2 * rows, dst + (size_t)l * 2 * rows + rows);
            prompt_cache_store_commit(e->pc, it);
        }
        sl->n_stored++;
    }
}
