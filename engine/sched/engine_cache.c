/* The engine's side of the prompt cache (engine/cache/prompt_cache.h): at
 * admission, the prompt's stored blocks, then the partial block stored
 * after them, are copied into the slot's KV; as a slot evaluates positions
 * (prompt or generated), each completed block's KV is copied out to the
 * cache's writer, and so is the partial block at the prompt's end and at
 * the job's end. */
#include "engine/sched/engine_internal.h"
#include <limits.h>

/* Copies rows [from, to) of a stored block whose first position is `base`
 * into the slot's KV. */
static void put_rows(engine *e, slot *sl, const block_view *v, int base, int from, int to) {
    size_t row = (size_t)e->kv->kv_dim * sizeof(uint16_t), nb = v->shape.n_block;
    size_t off = (size_t)(from - base);
    /* v->kv: per layer, n_block rows of K then n_block rows of V */
    for (int l = 0; l < e->kv->n_layer; l++) {
        const uint8_t *K = v->kv + (size_t)l * 2 * nb * row, *V = K + nb * row;
        kv_rows_put(e->kv, l, sl->id, from, to - from, K + off * row, V + off * row);
    }
}

/* Copies the longest run of the prompt's stored blocks that starts at or
 * before position `have` (the resident prefix) into the slot's KV, then the
 * longest stored partial block after them; returns how many leading
 * positions now hold the prompt's state. Positions before `have` are left
 * alone: a block that starts inside the resident prefix is copied from
 * there on. Runs on the engine thread: ~8 MB read per block of 256 tokens
 * for a 1B model, far less than prefilling it. */
int slot_restore(engine *e, slot *sl, int have) {
    job *j = sl->job;
    int B = e->block, n_full = j->n_prompt / B;
    int want = j->n_prompt - 1;   /* the last prompt token is evaluated anyway, for its logits */
    int first = have / B;         /* the first block not wholly resident */
    if (!e->pc || have >= want) return have;
    block_key k = e->root;        /* the chain of blocks [0, have / B) */
    for (int i = 0; i < first; i++) block_key_next(&k, j->prompt + (size_t)i * B, B);
    int start = have, blocks = 0;
    for (int i = first; i < n_full && have < want; i++) {
        block_key next = k;
        block_key_next(&next, j->prompt + (size_t)i * B, B);
        block_view v;
        /* the lookup checked the geometry and that v's prefix is exactly prompt[0, (i+1)B) */
        if (prompt_cache_lookup(e->pc, &next, j->prompt, (i + 1) * B, &v)) break;
        put_rows(e, sl, &v, i * B, have, (i + 1) * B);
        have = (i + 1) * B;   /* slot_store touches it with the job's stamp */
        k = next;
        blocks++;
    }
    /* the partial block after them: a previous turn's end, or this prompt's */
    block_view v;
    int base = have / B * B;
    if (have < want && !prompt_cache_lookup_tail(e->pc, &k, j->prompt, j->n_prompt, base, have, &v)) {
        int end = (int)v.shape.n_tokens;
        put_rows(e, sl, &v, base, have, end);
        have = end;
        blocks++;
    }
    prompt_cache_note_lookup(e->pc, blocks, have - start);
    return have;
}

/* Hands the slot's blocks evaluated so far (prompt and generated tokens),
 * and not yet stored by anyone, to the cache's writer: their KV rows are
 * copied out now, while the slot (and a sliding-window layer's ring) still
 * holds them. Blocks already stored or queued (restored, or the same
 * prompt in another stream) are only touched: every block of the job then
 * carries its stamp, so LRU never evicts a block before one that continues
 * it. When the queue is full the rest is given up, as later blocks are
 * useless without this one. With `tail`, the positions past the last full
 * block go too, as a partial block: once the prompt is evaluated (the same
 * prompt again) and when the job ends (its continuation). */
void slot_store(engine *e, slot *sl, bool tail) {
    job *j = sl->job;
    if (!e->pc || !j || !j->params.cache_prompt || sl->n_stored == INT_MAX) return;
    int B = e->block, done = sl->n_past;
    size_t row = (size_t)e->kv->kv_dim * sizeof(uint16_t);
    while (sl->n_stored < done / B) {
        int i = sl->n_stored;
        block_key_next(&sl->store_key, sl->tokens + (size_t)i * B, B);
        pc_item *it;
        uint8_t *dst;
        int r = prompt_cache_store_begin(e->pc, &sl->store_key, sl->tokens, (i + 1) * B, sl->stamp, &it, &dst);
        if (r < 0) { sl->n_stored = INT_MAX; return; }
        if (r == 0) prompt_cache_touch(e->pc, &sl->store_key, sl->stamp);
        if (r > 0) {
            size_t rows = (size_t)B * row;
            for (int l = 0; l < e->kv->n_layer; l++)
                kv_rows_get(e->kv, l, sl->id, i * B, B, dst + (size_t)l * 2 * rows, dst + (size_t)l * 2 * rows + rows);
            prompt_cache_store_commit(e->pc, it);
        }
        sl->n_stored++;
    }
    int base = done / B * B, n = done - base;
    if (!tail || n == 0) return;
    block_key k = sl->store_key;   /* the chain of blocks [0, base / B) */
    block_key_next(&k, sl->tokens + base, n);
    pc_item *it;
    uint8_t *dst;
    int r = prompt_cache_store_tail_begin(e->pc, &sl->store_key, &k, sl->tokens, done, n, sl->stamp, &it, &dst);
    if (r == 0) prompt_cache_touch(e->pc, &k, sl->stamp);
    if (r > 0) {
        size_t rows = (size_t)n * row;
        for (int l = 0; l < e->kv->n_layer; l++)
            kv_rows_get(e->kv, l, sl->id, base, n, dst + (size_t)l * 2 * rows, dst + (size_t)l * 2 * rows + rows);
        prompt_cache_store_commit(e->pc, it);
    }
}
