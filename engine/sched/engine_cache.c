/* The engine's side of the prompt cache (engine/cache/prompt_cache.h): at
 * admission, the prompt's stored blocks, then the partial block stored
 * after them, are read on the cache's reader thread and copied into the
 * slot's KV as they come, while the other slots step on; as a slot evaluates positions
 * (prompt or generated), each completed block's KV is copied out to the
 * cache's writer, and so is the partial block at the prompt's end and at
 * the job's end. */
#include "engine/sched/engine_internal.h"
#include <assert.h>
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

/* The engine thread's wake-up: a block was read, or a fetch is done. */
static void restore_wake(void *arg) {
    engine *e = arg;
    pthread_mutex_lock(&e->mu);
    e->restore_ready = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* Starts reading the longest run of the prompt's stored blocks that starts
 * at or before position `have` (the resident prefix), then the longest
 * stored partial block after them, on the cache's reader thread; true when
 * the slot is to wait for it (SLOT_RESTORE), false when nothing can be read. */
bool slot_restore_begin(engine *e, slot *sl, int have) {
    job *j = sl->job;
    int B = e->block;
    if (!e->pc || have >= j->n_prompt - 1) return false;   /* the last prompt token is evaluated anyway */
    block_key k = e->root;   /* the chain of blocks [0, have / B) */
    for (int i = 0; i < have / B; i++) block_key_next(&k, j->prompt + (size_t)i * B, B);
    sl->fetch = prompt_cache_fetch_begin(e->pc, &k, j->prompt, j->n_prompt, have, restore_wake, e);
    sl->restore_from = have;
    sl->restore_blocks = 0;
    return sl->fetch != NULL;
}

/* Copies the blocks read so far into the slot's KV (a memory copy: the
 * reads were on the reader thread), from sl->n_past on; true once the
 * fetch is done, with sl->n_past the positions that hold the prompt's state.
 * Positions before the resident prefix's end are left alone: a block that
 * starts inside it is copied from there on. */
bool slot_restore_poll(engine *e, slot *sl) {
    block_view v;
    int r;
    while ((r = prompt_cache_fetch_next(sl->fetch, &v)) == 1) {
        /* the lookup checked the geometry and that v's prefix is exactly the prompt's */
        int end = (int)v.shape.n_tokens, base = end - (int)v.shape.n_block;
        assert(base <= sl->n_past && end > sl->n_past);
        put_rows(e, sl, &v, base, sl->n_past, end);
        sl->n_past = end;   /* slot_store touches the full ones with the job's stamp */
        sl->restore_blocks++;
    }
    if (r == 0) return false;
    prompt_cache_fetch_end(sl->fetch);
    sl->fetch = NULL;
    prompt_cache_note_lookup(e->pc, sl->restore_blocks, sl->n_past - sl->restore_from);
    return true;
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
