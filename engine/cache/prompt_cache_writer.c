/* The prompt cache's writer thread (see prompt_cache.c for the design):
 * it takes batches off the queue the engine fills and writes each in one
 * transaction, evicting the least recently used blocks past the size cap.
 * The queue's enqueue side, which the engine thread calls, is here too. */
#include "engine/cache/prompt_cache_internal.h"
#include "engine/cache/block_codec.h"
#include "engine/cache/shm_guard.h"
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- the writer ------------------------------------------------------------ */
void pc_bind_key(sqlite3_stmt *st, const prompt_cache *pc, const block_key *k) {
    sqlite3_bind_blob(st, 1, pc->fp, 16, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, k->b, 16, SQLITE_TRANSIENT);
}

/* Runs a statement that returns no rows; SQLITE_OK or the error. */
int pc_run(sqlite3_stmt *st) {
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* Writes one batch in one transaction; counts what it did into *res (which
 * means nothing unless it returns SQLITE_OK). */
typedef struct { uint64_t stored, evicted; bool cleared; } batch_result;

static int write_batch(prompt_cache *pc, pc_item *batch, batch_result *res) {
    sqlite3 *db = pc->wdb;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", 0, 0, 0);
    if (rc) return rc;
    for (pc_item *it = batch; it && !rc; it = it->next) {
        switch (it->kind) {
        case IT_STORE:
            pc_bind_key(pc->w_ins, pc, &it->key);
            sqlite3_bind_int64(pc->w_ins, 3, it->n_tokens);
            sqlite3_bind_int64(pc->w_ins, 4, (sqlite3_int64)it->size);
            sqlite3_bind_int64(pc->w_ins, 5, it->stamp);
            if (it->has_parent) sqlite3_bind_blob(pc->w_ins, 6, it->parent.b, 16, SQLITE_TRANSIENT);
            else sqlite3_bind_null(pc->w_ins, 6);
            rc = pc_run(pc->w_ins);
            if (rc || sqlite3_changes(db) != 1) break;   /* an error, or stored already */
            sqlite3_bind_int64(pc->w_ins_data, 1, sqlite3_last_insert_rowid(db));
            sqlite3_bind_blob64(pc->w_ins_data, 2, it->blob, it->size, SQLITE_STATIC);
            rc = pc_run(pc->w_ins_data);
            if (!rc) res->stored++;
            break;
        case IT_TOUCH:
            pc_bind_key(pc->w_touch, pc, &it->key);
            sqlite3_bind_int64(pc->w_touch, 3, it->stamp);
            rc = pc_run(pc->w_touch);
            break;
        case IT_DELETE:
            pc_bind_key(pc->w_del, pc, &it->key);
            rc = pc_run(pc->w_del);
            break;
        case IT_CLEAR:
            rc = pc_run(pc->w_clear);
            res->cleared = true;
            break;
        }
    }
    /* evict least recently used blocks down to the cap */
    uint64_t entries = 0, bytes = 0;
    if (!rc) rc = pc_two_ints(pc->w_total, &entries, &bytes);
    while (!rc && bytes > pc->max_bytes) {
        rc = sqlite3_step(pc->w_oldest);
        if (rc != SQLITE_ROW) { sqlite3_reset(pc->w_oldest); rc = rc == SQLITE_DONE ? SQLITE_OK : rc; break; }
        int64_t id = sqlite3_column_int64(pc->w_oldest, 0), b = sqlite3_column_int64(pc->w_oldest, 1);
        sqlite3_reset(pc->w_oldest);
        sqlite3_bind_int64(pc->w_del_id, 1, id);
        rc = pc_run(pc->w_del_id);
        bytes = (uint64_t)b < bytes ? bytes - (uint64_t)b : 0;
        entries -= entries > 0;
        res->evicted++;
    }
    if (!rc) rc = sqlite3_exec(db, "COMMIT", 0, 0, 0);
    if (rc) {
        sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
        return rc;
    }
    pthread_mutex_lock(&pc->mu);
    pc->st.entries = entries;
    pc->st.bytes = bytes;
    pthread_mutex_unlock(&pc->mu);
    if (res->cleared) {
        /* give the space back: free pages to the file system, the WAL to zero */
        sqlite3_exec(db, "PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);", 0, 0, 0);
    }
    return SQLITE_OK;
}

void *pc_writer_main(void *arg) {
    prompt_cache *pc = arg;
    pthread_mutex_lock(&pc->mu);
    for (;;) {
        while (!pc->head && !pc->stopping) pthread_cond_wait(&pc->work_cv, &pc->mu);
        if (!pc->head) break;   /* stopping, and everything is written */
        /* take a batch off the queue, up to BATCH_MAX_BYTES */
        pc_item *batch = pc->head, *last = batch;
        uint64_t bytes = batch->size;
        while (last->next && bytes + last->next->size <= BATCH_MAX_BYTES) {
            last = last->next;
            bytes += last->size;
        }
        pc->head = last->next;
        if (!pc->head) pc->tail = NULL;
        last->next = NULL;
        pc->inflight = batch;
        pc->busy = true;
        pthread_mutex_unlock(&pc->mu);

        /* checksums outside the transaction, which they would only lengthen */
        int n_clear = 0;
        for (pc_item *it = batch; it; it = it->next) {
            if (it->kind == IT_STORE) block_seal(it->blob, it->size);
            n_clear += it->kind == IT_CLEAR;
        }
        batch_result res = { 0, 0, false };
        int rc = atomic_load(&pc->off) ? SQLITE_OK : write_batch(pc, batch, &res);
        if (shm_guard_tripped()) rc = SQLITE_IOERR;   /* whatever it wrote went to zero pages */
        /* a lost write costs a store; a lost clear would bring deleted
         * blocks back, so the cache stops instead */
        if (rc) pc_fail(pc, rc, "write", n_clear > 0);

        pthread_mutex_lock(&pc->mu);
        if (!rc) {
            pc->st.blocks_stored += res.stored;
            pc->st.evictions += res.evicted;
        }
        for (pc_item *it = batch; it;) {
            pc_item *next = it->next;
            if (rc && it->kind == IT_STORE) pc->st.blocks_dropped++;
            pc->q_bytes -= it->size;
            pc->q_len--;
            pc_item_free(it);
            it = next;
        }
        pc->inflight = NULL;
        pc->busy = false;
        atomic_fetch_sub(&pc->clear_pending, n_clear);
        pthread_cond_broadcast(&pc->idle_cv);
    }
    pthread_mutex_unlock(&pc->mu);
    return NULL;
}

/* Appends an item; false (and frees it) when the cache is off. Caller holds mu. */
bool pc_enqueue_locked(prompt_cache *pc, pc_item *it) {
    if (atomic_load(&pc->off)) {
        pc->q_bytes -= it->size;
        pc->q_len--;
        pc_item_free(it);
        return false;
    }
    it->next = NULL;
    if (pc->tail) pc->tail->next = it; else pc->head = it;
    pc->tail = it;
    pthread_cond_signal(&pc->work_cv);
    return true;
}

/* A small item (touch, delete); dropped when the queue is full. */
void pc_post_small(prompt_cache *pc, item_kind kind, const block_key *k, int64_t stamp) {
    pc_item *it = calloc(1, sizeof *it);
    if (!it) return;
    it->kind = kind;
    it->key = *k;
    it->stamp = stamp;
    pthread_mutex_lock(&pc->mu);
    if (pc->q_len >= QUEUE_MAX_ITEMS) {
        free(it);
    } else {
        pc->q_len++;
        pc_enqueue_locked(pc, it);
    }
    pthread_mutex_unlock(&pc->mu);
}

