/* The prompt cache's reads (see prompt_cache.c for the design): the engine
 * thread's lookups of full and partial blocks, and the read-ahead thread
 * that reads the blocks an admission will restore while the engine steps
 * other slots. */
#include "engine/cache/prompt_cache_internal.h"
#include "engine/cache/block_codec.h"
#include "engine/cache/shm_guard.h"
#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the engine thread ------------------------------------------------------ */
bool pc_usable(prompt_cache *pc) {
    if (pc && shm_guard_tripped() && !atomic_load(&pc->off)) pc_fail(pc, SQLITE_IOERR, "-shm", true);
    return pc && !atomic_load(&pc->off) && atomic_load(&pc->clear_pending) == 0;
}

/* Reads row id's blob (`want` bytes) into the scratch buffer and decodes
 * it as a block of n_block positions ending tokens[0, n_tokens): 0 and the
 * view; 1 when it is another prefix (a collision: never used); 2 when it
 * is damaged (delete it); -1 on a read error (*rc says which). */
static int read_block(prompt_cache *pc, pc_reader *rd, sqlite3_int64 id, size_t want, uint32_t n_block,
                      const int32_t *tokens, int n_tokens, block_view *out, int *rc_out) {
    *rc_out = SQLITE_OK;
    if (rd->scratch_cap < want || !rd->scratch) {
        uint8_t *p = realloc(rd->scratch, want);
        if (!p) return 1;
        rd->scratch = p;
        rd->scratch_cap = want;
    }
    sqlite3_blob *b = NULL;
    int rc = sqlite3_blob_open(rd->db, "main", "block_data", "data", id, 0, &b);
    if (rc == SQLITE_OK && sqlite3_blob_bytes(b) != (int)want) rc = SQLITE_MISMATCH;
    if (rc == SQLITE_OK) rc = sqlite3_blob_read(b, rd->scratch, (int)want, 0);
    sqlite3_blob_close(b);
    if (rc == SQLITE_ERROR || rc == SQLITE_MISMATCH) return 2;   /* no blob for the row, or one of another size */
    if (rc) { *rc_out = rc; return -1; }
    block_view v;
    if (block_decode(rd->scratch, want, &v) || memcmp(v.fingerprint, pc->fp, 16) || v.shape.n_block != n_block ||
        v.shape.n_layer != pc->n_layer || v.shape.kv_dim != pc->kv_dim)
        return 2;   /* damaged: delete it so the block can be stored again */
    if (v.shape.n_tokens != (uint32_t)n_tokens || !block_tokens_equal(&v, tokens, (uint32_t)n_tokens))
        return 1;   /* another prefix under the same key (a collision): never used */
    *out = v;
    return 0;
}

/* Whether the stored prefix of row id (n_tokens of them) is tokens[0, n):
 * only its token part is read, so the candidates that are not the prompt's
 * cost a few kB each, not their KV. */
static bool tokens_match(pc_reader *rd, sqlite3_int64 id, const int32_t *tokens, uint32_t n) {
    size_t bytes = (size_t)n * 4;
    if (rd->scratch_cap < bytes || !rd->scratch) {
        uint8_t *p = realloc(rd->scratch, bytes);
        if (!p) return false;
        rd->scratch = p;
        rd->scratch_cap = bytes;
    }
    sqlite3_blob *b = NULL;
    int rc = sqlite3_blob_open(rd->db, "main", "block_data", "data", id, 0, &b);
    if (rc == SQLITE_OK && (size_t)sqlite3_blob_bytes(b) < BLOCK_HEADER_BYTES + bytes) rc = SQLITE_MISMATCH;
    if (rc == SQLITE_OK) rc = sqlite3_blob_read(b, rd->scratch, (int)bytes, BLOCK_HEADER_BYTES);
    sqlite3_blob_close(b);
    if (rc) return false;   /* the full read that follows a match reports errors */
    block_view v = { .tokens = rd->scratch };
    v.shape.n_tokens = n;
    return block_tokens_equal(&v, tokens, n);
}

static int lookup_tail(prompt_cache *pc, pc_reader *rd, const block_key *parent, const int32_t *tokens, int n_tokens,
                       int start, int have, block_view *out) {
    if (!pc_usable(pc) || start < 0 || have < start || have >= n_tokens) return -1;
    sqlite3_stmt *q = rd->q_tails;
    pc_bind_key(q, pc, parent);
    sqlite3_bind_int64(q, 3, have);
    sqlite3_bind_int64(q, 4, n_tokens);
    int rc = SQLITE_OK, result = -1;
    block_key dead[8];
    int n_dead = 0;
    while (result < 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        sqlite3_int64 id = sqlite3_column_int64(q, 0), len = sqlite3_column_int64(q, 1);
        sqlite3_int64 end = sqlite3_column_int64(q, 2);
        const void *key = sqlite3_column_blob(q, 3);
        bool keyed = key && sqlite3_column_bytes(q, 3) == 16;
        int64_t n_block = end - start;
        block_shape s = { (uint32_t)end, (uint32_t)n_block, pc->n_layer, pc->kv_dim };
        size_t want = n_block >= 1 && n_block < (int64_t)pc->B ? block_blob_size(&s) : 0;
        int r = 2;
        if (want && want <= (size_t)INT_MAX && len == (sqlite3_int64)want) {
            if (!tokens_match(rd, id, tokens, (uint32_t)end)) continue;   /* another conversation's */
            r = read_block(pc, rd, id, want, (uint32_t)n_block, tokens, (int)end, out, &rc);
            if (r < 0) break;
        }
        if (r == 0) result = 0;
        else if (r == 2 && keyed && n_dead < 8) memcpy(dead[n_dead++].b, key, 16);
    }
    if (result == 0 || rc == SQLITE_DONE) rc = SQLITE_OK;
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (rc && !pc_is_transient(rc) && (rc & 0xff) != SQLITE_ERROR) pc_fail(pc, rc, "read", false);
    for (int i = 0; i < n_dead; i++) pc_post_small(pc, IT_DELETE, &dead[i], 0);
    return result;
}

static int lookup(prompt_cache *pc, pc_reader *rd, const block_key *k, const int32_t *tokens, int n_tokens,
                  block_view *out) {
    if (!pc_usable(pc) || n_tokens < (int)pc->B) return -1;
    block_shape s = { (uint32_t)n_tokens, pc->B, pc->n_layer, pc->kv_dim };
    size_t want = block_blob_size(&s);
    if (!want || want > (size_t)INT_MAX) return -1;
    sqlite3_stmt *q = rd->q_find;
    pc_bind_key(q, pc, k);
    int rc = sqlite3_step(q), result = -1;
    bool bad = false;
    if (rc == SQLITE_ROW) {
        /* the statement stays on its row while the blob is read: one read
         * transaction, so the row cannot change underneath */
        sqlite3_int64 id = sqlite3_column_int64(q, 0), len = sqlite3_column_int64(q, 1);
        rc = SQLITE_OK;
        if (len != (sqlite3_int64)want) {   /* the row says another size: not ours to use */
            bad = true;
        } else {
            int r = read_block(pc, rd, id, want, pc->B, tokens, n_tokens, out, &rc);
            result = r == 0 ? 0 : -1;
            bad = r == 2;
        }
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (rc && !pc_is_transient(rc) && (rc & 0xff) != SQLITE_ERROR) pc_fail(pc, rc, "read", false);
    if (bad) pc_post_small(pc, IT_DELETE, k, 0);
    return result;
}

int prompt_cache_lookup(prompt_cache *pc, const block_key *k, const int32_t *tokens, int n_tokens,
                        block_view *out) {
    return pc ? lookup(pc, &pc->rd, k, tokens, n_tokens, out) : -1;
}

int prompt_cache_lookup_tail(prompt_cache *pc, const block_key *parent, const int32_t *tokens, int n_tokens,
                             int start, int have, block_view *out) {
    return pc ? lookup_tail(pc, &pc->rd, parent, tokens, n_tokens, start, have, out) : -1;
}

/* ---- read-ahead ---------------------------------------------------------------- */
static void got_free(pc_got *g) {
    if (!g) return;
    free(g->buf);
    free(g);
}

/* Drops one reference; the last frees the fetch. Caller holds ra_mu. */
static void fetch_unref_locked(pc_fetch *f) {
    if (--f->refs > 0) return;
    for (pc_got *g = f->head; g;) {
        pc_got *n = g->next;
        got_free(g);
        g = n;
    }
    got_free(f->cur);
    free(f->tokens);
    free(f);
}

/* The thread's: waits for room in f; false once it was cancelled. */
static bool fetch_room(prompt_cache *pc, pc_fetch *f) {
    pthread_mutex_lock(&pc->ra_mu);
    while (!f->cancelled && f->n_ready >= READ_AHEAD) pthread_cond_wait(&pc->ra_cv, &pc->ra_mu);
    bool go = !f->cancelled;
    pthread_mutex_unlock(&pc->ra_mu);
    return go;
}

/* The thread's: hands the block just read (in the reader's scratch, which
 * it takes) to the engine. */
static void fetch_push(prompt_cache *pc, pc_fetch *f, const block_view *v) {
    pc_got *g = calloc(1, sizeof *g);
    if (!g) return;
    g->buf = pc->ra.scratch;
    g->v = *v;
    pc->ra.scratch = NULL;
    pc->ra.scratch_cap = 0;
    pthread_mutex_lock(&pc->ra_mu);
    if (f->tail) f->tail->next = g; else f->head = g;
    f->tail = g;
    f->n_ready++;
    pthread_cond_broadcast(&pc->got_cv);
    pthread_mutex_unlock(&pc->ra_mu);
    f->wake(f->wake_arg);
}

static void read_delay(const prompt_cache *pc) {
    if (pc->read_delay_ms > 0) usleep((useconds_t)pc->read_delay_ms * 1000);
}

/* The thread's: the prompt's stored blocks from f->have on, then the
 * partial block after them, each handed over as soon as it is read; at
 * most READ_AHEAD wait at a time. */
static void fetch_run(prompt_cache *pc, pc_fetch *f) {
    int B = (int)pc->B, want = f->n_tokens - 1, n_full = f->n_tokens / B;
    bool missed = false;
    for (int i = f->have / B; i < n_full && f->have < want; i++) {
        if (!fetch_room(pc, f)) return;
        block_key next = f->k;
        block_key_next(&next, f->tokens + (size_t)i * B, B);
        block_view v;
        read_delay(pc);
        if (lookup(pc, &pc->ra, &next, f->tokens, (i + 1) * B, &v)) { missed = true; break; }
        fetch_push(pc, f, &v);
        f->have = (i + 1) * B;
        f->k = next;
    }
    (void)missed;
    if (f->have >= want || !fetch_room(pc, f)) return;
    block_view v;
    read_delay(pc);
    if (!lookup_tail(pc, &pc->ra, &f->k, f->tokens, f->n_tokens, f->have / B * B, f->have, &v))
        fetch_push(pc, f, &v);
}

void *pc_reader_main(void *arg) {
    prompt_cache *pc = arg;
    pthread_mutex_lock(&pc->ra_mu);
    for (;;) {
        while (!pc->ra_head && !pc->ra_stopping) pthread_cond_wait(&pc->ra_cv, &pc->ra_mu);
        pc_fetch *f = pc->ra_head;
        if (!f) break;
        if (!(pc->ra_head = f->next)) pc->ra_tail = NULL;
        bool run = !f->cancelled;
        pthread_mutex_unlock(&pc->ra_mu);
        if (run) fetch_run(pc, f);
        pthread_mutex_lock(&pc->ra_mu);
        bool wake = !f->cancelled;
        void (*fn)(void *) = f->wake;
        void *fa = f->wake_arg;
        f->done = true;
        pthread_cond_broadcast(&pc->got_cv);
        fetch_unref_locked(f);
        if (wake) {   /* the engine still waits on it (and lives: close joins this thread first) */
            pthread_mutex_unlock(&pc->ra_mu);
            fn(fa);
            pthread_mutex_lock(&pc->ra_mu);
        }
    }
    pthread_mutex_unlock(&pc->ra_mu);
    return NULL;
}

pc_fetch *prompt_cache_fetch_begin(prompt_cache *pc, const block_key *k, const int32_t *tokens, int n_tokens,
                                   int have, void (*wake)(void *), void *arg) {
    assert(wake && have >= 0);
    if (!pc_usable(pc) || have >= n_tokens - 1) return NULL;
    pc_fetch *f = calloc(1, sizeof *f);
    if (f) f->tokens = malloc(sizeof(int32_t) * (size_t)n_tokens);
    if (!f || !f->tokens) { free(f); return NULL; }
    memcpy(f->tokens, tokens, sizeof(int32_t) * (size_t)n_tokens);
    f->pc = pc;
    f->n_tokens = n_tokens;
    f->have = have;
    f->k = *k;
    f->wake = wake;
    f->wake_arg = arg;
    f->refs = 2;
    pthread_mutex_lock(&pc->ra_mu);
    if (pc->ra_tail) pc->ra_tail->next = f; else pc->ra_head = f;
    pc->ra_tail = f;
    pthread_cond_broadcast(&pc->ra_cv);
    pthread_mutex_unlock(&pc->ra_mu);
    return f;
}

int prompt_cache_fetch_next(pc_fetch *f, block_view *out) {
    prompt_cache *pc = f->pc;
    pc_got *old = f->cur, *g;
    f->cur = NULL;
    pthread_mutex_lock(&pc->ra_mu);
    while (pc->sync_reads && !f->head && !f->done) pthread_cond_wait(&pc->got_cv, &pc->ra_mu);
    if ((g = f->head)) {
        if (!(f->head = g->next)) f->tail = NULL;
        f->n_ready--;
        pthread_cond_broadcast(&pc->ra_cv);   /* room for the next */
    }
    bool done = f->done;
    pthread_mutex_unlock(&pc->ra_mu);
    got_free(old);
    if (!g) return done ? -1 : 0;
    f->cur = g;
    *out = g->v;
    return 1;
}

void prompt_cache_fetch_end(pc_fetch *f) {
    if (!f) return;
    prompt_cache *pc = f->pc;
    pthread_mutex_lock(&pc->ra_mu);
    f->cancelled = true;
    pthread_cond_broadcast(&pc->ra_cv);
    fetch_unref_locked(f);
    pthread_mutex_unlock(&pc->ra_mu);
}

