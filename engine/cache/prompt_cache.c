/* The prompt-state cache on disk (see prompt_cache.h).
 *
 * Two connections to one WAL database: the writer thread's, which does
 * every write, and the engine thread's, which only reads (a WAL reader
 * never waits for the writer). Blocks reach the writer through a queue
 * bounded in bytes; when it is full a store is dropped, so the engine
 * thread never waits on the disk. A store is a copy of the KV rows made by
 * the engine thread; the writer checksums and inserts it.
 *
 * Schema: a small row per block in `blocks`, its blob in `block_data`
 * under the same id. Apart, because sqlite rewrites a whole record on
 * UPDATE: marking a block used must not read and rewrite megabytes. A
 * trigger deletes the blob with its row, whatever deletes the row. The
 * unique (fp, key) index makes the same block stored twice (two streams,
 * two processes) one row. last_used is a
 * stamp the engine takes once per request and gives to every full block of
 * its prompt (stored, restored or found stored), so a block is never older
 * than a block that continues it; the LRU index orders eviction by stamp,
 * the deepest block first on a tie, since a chain is only usable from its
 * first block. The blob is read with incremental blob I/O straight into a
 * reusable buffer.
 *
 * This file opens and closes the cache and takes stores and the calls any
 * thread makes; the writer thread is prompt_cache_writer.c, the lookups and
 * the read-ahead thread prompt_cache_read.c, their shared structs
 * prompt_cache_internal.h. */
#include "engine/cache/prompt_cache_internal.h"
#include "engine/cache/shm_guard.h"
#include "engine/model/model.h"
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("hearth: warning: prompt cache: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- opening ------------------------------------------------------------- */
typedef enum { OPEN_OK, OPEN_BAD_FILE, OPEN_FAIL } open_result;

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Looks at the file before sqlite does: it must be empty, missing, or an
 * sqlite database whose header agrees with its size. The size check is
 * skipped while a WAL exists (a checkpoint cut short is repaired from it). */
static open_result precheck_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? OPEN_OK : OPEN_FAIL;
    uint8_t h[100];
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {   /* a folder is a mistake, not garbage */
        fclose(f);
        return OPEN_FAIL;
    }
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (st.st_size == 0) return OPEN_OK;
    if (n < sizeof h || memcmp(h, "SQLite format 3", 16)) return OPEN_BAD_FILE;
    uint32_t page = (uint32_t)h[16] << 8 | h[17];
    if (page == 1) page = 65536;
    uint32_t pages = be32(h + 28);
    bool size_valid = pages && be32(h + 24) == be32(h + 92);
    char wal[PATH_MAX + 8];
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct stat ws;
    bool has_wal = stat(wal, &ws) == 0 && ws.st_size > 0;
    if (size_valid && !has_wal && (uint64_t)pages * page > (uint64_t)st.st_size) return OPEN_BAD_FILE;
    return OPEN_OK;
}

/* Renames the file (and its WAL) to PATH.corrupt.N and drops its -shm. */
static void move_aside(const char *path) {
    char aside[PATH_MAX + 32], a[PATH_MAX + 40], b[PATH_MAX + 40];
    for (int i = 1; i < 1000; i++) {
        snprintf(aside, sizeof aside, "%s.corrupt.%d", path, i);
        if (access(aside, F_OK) != 0) break;
    }
    if (rename(path, aside)) {
        warn("cannot move %s aside: %s", path, strerror(errno));
        return;
    }
    snprintf(a, sizeof a, "%s-wal", path);
    snprintf(b, sizeof b, "%s-wal", aside);
    rename(a, b);
    snprintf(a, sizeof a, "%s-shm", path);
    unlink(a);
    warn("%s was corrupt or not hearth's: moved to %s", path, aside);
}

static int prep(sqlite3 *db, const char *sql, sqlite3_stmt **st) {
    return sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
}

static bool is_bad_file(int rc) {
    rc &= 0xff;
    return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

/* Transient: another process holds the lock, or one blob is too big. */
bool pc_is_transient(int rc) {
    rc &= 0xff;
    return rc == SQLITE_BUSY || rc == SQLITE_LOCKED || rc == SQLITE_TOOBIG;
}

static int pragma_int(sqlite3 *db, const char *sql, int64_t *out) {
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc) return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) { *out = sqlite3_column_int64(st, 0); rc = SQLITE_OK; }
    else if (rc == SQLITE_DONE) { *out = 0; rc = SQLITE_OK; }
    sqlite3_finalize(st);
    return rc;
}

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS blocks("
    " id INTEGER PRIMARY KEY,"
    " fp BLOB NOT NULL,"          /* model fingerprint, 16 bytes */
    " key BLOB NOT NULL,"         /* chained hash of the prefix, 16 bytes */
    " n_tokens INTEGER NOT NULL," /* prefix length the block ends */
    " bytes INTEGER NOT NULL,"    /* length of its blob */
    " last_used INTEGER NOT NULL," /* LRU: the stamp of the last request that used it */
    " parent BLOB);"              /* a partial block: the key of the full block before it */
    "CREATE TABLE IF NOT EXISTS block_data(id INTEGER PRIMARY KEY, data BLOB NOT NULL);"
    "CREATE UNIQUE INDEX IF NOT EXISTS blocks_key ON blocks(fp, key);"
    "CREATE INDEX IF NOT EXISTS blocks_lru ON blocks(last_used, n_tokens DESC);"
    "CREATE INDEX IF NOT EXISTS blocks_parent ON blocks(fp, parent, n_tokens) WHERE parent IS NOT NULL;"
    "CREATE TRIGGER IF NOT EXISTS blocks_gone AFTER DELETE ON blocks"
    " BEGIN DELETE FROM block_data WHERE id = old.id; END;";

static void reader_close(pc_reader *rd) {
    sqlite3_finalize(rd->q_find); sqlite3_finalize(rd->q_has); sqlite3_finalize(rd->q_tails);
    sqlite3_close(rd->db);
    free(rd->scratch);
    memset(rd, 0, sizeof *rd);
}

static int reader_open(prompt_cache *pc, pc_reader *rd) {
    int rc;
    if ((rc = sqlite3_open_v2(pc->path, &rd->db, SQLITE_OPEN_READWRITE, NULL))) return rc;
    sqlite3_busy_timeout(rd->db, READER_BUSY_MS);
    if ((rc = sqlite3_exec(rd->db, "PRAGMA query_only=1", 0, 0, 0)) ||
        (rc = prep(rd->db, "SELECT id, bytes FROM blocks WHERE fp = ?1 AND key = ?2", &rd->q_find)) ||
        (rc = prep(rd->db, "SELECT 1 FROM blocks WHERE fp = ?1 AND key = ?2", &rd->q_has)) ||
        (rc = prep(rd->db, "SELECT id, bytes, n_tokens, key FROM blocks WHERE fp = ?1 AND parent = ?2 "
                           "AND n_tokens > ?3 AND n_tokens <= ?4 ORDER BY n_tokens DESC LIMIT " TAIL_CANDIDATES_STR,
                   &rd->q_tails))) return rc;
    return SQLITE_OK;
}

static void writer_finalize(prompt_cache *pc) {
    sqlite3_stmt **w[] = { &pc->w_ins, &pc->w_ins_data, &pc->w_touch, &pc->w_del, &pc->w_total,
                           &pc->w_oldest, &pc->w_del_id, &pc->w_clear };
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) { sqlite3_finalize(*w[i]); *w[i] = NULL; }
    reader_close(&pc->rd);
    reader_close(&pc->ra);
    sqlite3_close(pc->wdb);
    pc->wdb = NULL;
}

/* Steps a statement that returns one row of two integers. */
int pc_two_ints(sqlite3_stmt *st, uint64_t *a, uint64_t *b) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *a = (uint64_t)sqlite3_column_int64(st, 0);
        *b = (uint64_t)sqlite3_column_int64(st, 1);
        rc = SQLITE_OK;
    }
    sqlite3_reset(st);
    return rc;
}

/* One attempt at opening: OPEN_BAD_FILE means move it aside and retry. */
static open_result open_db(prompt_cache *pc, const char **why, int *why_rc) {
    open_result pre = precheck_file(pc->path);
    if (pre != OPEN_OK) { *why = "unreadable file"; *why_rc = SQLITE_CANTOPEN; return pre; }
    int rc = sqlite3_open_v2(pc->path, &pc->wdb, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    int64_t app = 0, ver = 0, n_schema = 0;
    sqlite3_stmt *scan = NULL;
    *why = "open";
    if (rc) goto fail;
    sqlite3_busy_timeout(pc->wdb, WRITER_BUSY_MS);
    /* read-only questions first: another application's database must not
     * be changed (not even its journal mode) before it is set aside */
    *why = "read the header";
    if ((rc = pragma_int(pc->wdb, "SELECT count(*) FROM sqlite_schema", &n_schema))) goto fail;
    if ((rc = pragma_int(pc->wdb, "PRAGMA application_id", &app))) goto fail;
    if ((rc = pragma_int(pc->wdb, "PRAGMA user_version", &ver))) goto fail;
    if (n_schema > 0 && (app != APP_ID || (ver != SCHEMA_VERSION && ver != 1))) { *why = "foreign database"; return OPEN_BAD_FILE; }
    if (n_schema == 0) {
        /* a new file: large pages suit blobs of megabytes; incremental
         * vacuum lets a clear give the space back. Both only take effect
         * before the first table. */
        *why = "create";
        if ((rc = sqlite3_exec(pc->wdb, "PRAGMA page_size=65536; PRAGMA auto_vacuum=INCREMENTAL;", 0, 0, 0))) goto fail;
    }
    *why = "set WAL mode";
    if ((rc = sqlite3_exec(pc->wdb, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                                    "PRAGMA journal_size_limit=67108864;", 0, 0, 0))) goto fail;
    if (n_schema == 0) {
        char sql[1024];
        snprintf(sql, sizeof sql, "BEGIN IMMEDIATE; %s PRAGMA application_id=%d; PRAGMA user_version=%d; COMMIT;",
                 schema_sql, APP_ID, SCHEMA_VERSION);
        *why = "create the schema";
        rc = sqlite3_exec(pc->wdb, sql, 0, 0, 0);
        if (rc) { sqlite3_exec(pc->wdb, "ROLLBACK", 0, 0, 0); goto fail; }
    }
    if (n_schema > 0 && ver == 1) {
        /* version 1 had full blocks only: their rows keep, partial ones get a parent */
        *why = "upgrade the schema";
        char sql[512];
        snprintf(sql, sizeof sql, "BEGIN IMMEDIATE; ALTER TABLE blocks ADD COLUMN parent BLOB; "
                 "CREATE INDEX IF NOT EXISTS blocks_parent ON blocks(fp, parent, n_tokens) WHERE parent IS NOT NULL; "
                 "PRAGMA user_version=%d; COMMIT;", SCHEMA_VERSION);
        rc = sqlite3_exec(pc->wdb, sql, 0, 0, 0);
        if (rc) { sqlite3_exec(pc->wdb, "ROLLBACK", 0, 0, 0); goto fail; }
    }
    /* the statements double as the schema check: a table with other
     * columns fails to prepare */
    *why = "schema";
    if ((rc = prep(pc->wdb, "INSERT OR IGNORE INTO blocks(fp, key, n_tokens, bytes, last_used, parent) "
                            "VALUES(?1, ?2, ?3, ?4, ?5, ?6)", &pc->w_ins)) ||
        (rc = prep(pc->wdb, "INSERT OR REPLACE INTO block_data(id, data) VALUES(?1, ?2)", &pc->w_ins_data)) ||
        (rc = prep(pc->wdb, "UPDATE blocks SET last_used = max(last_used, ?3) WHERE fp = ?1 AND key = ?2",
                   &pc->w_touch)) ||
        (rc = prep(pc->wdb, "DELETE FROM blocks WHERE fp = ?1 AND key = ?2", &pc->w_del)) ||
        (rc = prep(pc->wdb, "SELECT count(*), coalesce(sum(bytes), 0) FROM blocks", &pc->w_total)) ||
        (rc = prep(pc->wdb, "SELECT id, bytes FROM blocks ORDER BY last_used, n_tokens DESC LIMIT 1", &pc->w_oldest)) ||
        (rc = prep(pc->wdb, "DELETE FROM blocks WHERE id = ?1", &pc->w_del_id)) ||
        (rc = prep(pc->wdb, "DELETE FROM blocks", &pc->w_clear))) {
        if ((rc & 0xff) == SQLITE_ERROR) { *why = "foreign schema"; return OPEN_BAD_FILE; }
        goto fail;
    }
    /* walk the leaf pages of both tables once (a few MB for a full cache,
     * not the blobs' overflow pages): a damaged tree shows here rather
     * than mid-serving */
    *why = "scan";
    if ((rc = sqlite3_prepare_v2(pc->wdb, "SELECT (SELECT count(*) FROM block_data), "
                                 "(SELECT count(*) FROM blocks NOT INDEXED)", -1, &scan, NULL))) goto fail;
    uint64_t n_data = 0, n_rows = 0;
    rc = pc_two_ints(scan, &n_data, &n_rows);
    sqlite3_finalize(scan);
    if (rc) goto fail;
    if ((rc = pc_two_ints(pc->w_total, &pc->st.entries, &pc->st.bytes))) goto fail;
    int64_t last = 0;
    if ((rc = pragma_int(pc->wdb, "SELECT coalesce(max(last_used), 0) FROM blocks", &last))) goto fail;
    atomic_store(&pc->next_stamp, last + 1);

    *why = "open the reader";
    if ((rc = reader_open(pc, &pc->rd)) || (rc = reader_open(pc, &pc->ra))) goto fail;
    pc->max_blob = (size_t)sqlite3_limit(pc->wdb, SQLITE_LIMIT_LENGTH, -1);
    return OPEN_OK;
fail:
    *why_rc = rc;
    return is_bad_file(rc) ? OPEN_BAD_FILE : OPEN_FAIL;
}


prompt_cache *prompt_cache_open(const prompt_cache_config *c) {
    if (!c->path || !*c->path || c->n_layer < 1 || c->kv_dim < 1 || c->block_tokens < 1) return NULL;
    if (strlen(c->path) > PATH_MAX - 32) {   /* room for -wal and .corrupt.N beside it */
        warn("path too long: turned off");
        return NULL;
    }
    prompt_cache *pc = calloc(1, sizeof *pc);
    if (!pc || !(pc->path = strdup(c->path))) { free(pc); warn("out of memory"); return NULL; }
    shm_guard_install();   /* a truncated -shm must not kill the process (SIGBUS) */
    memcpy(pc->fp, c->fingerprint, 16);
    pc->n_layer = (uint32_t)c->n_layer;
    pc->kv_dim = (uint32_t)c->kv_dim;
    pc->B = (uint32_t)c->block_tokens;
    pc->max_bytes = c->max_bytes;
    pc->queue_cap = c->max_bytes < QUEUE_MAX_BYTES ? c->max_bytes : QUEUE_MAX_BYTES;
    pc->st.enabled = true;
    pc->st.max_bytes = c->max_bytes;
    atomic_init(&pc->off, false);
    atomic_init(&pc->clear_pending, 0);
    atomic_init(&pc->next_stamp, 1);
    pthread_mutex_init(&pc->mu, NULL);
    pthread_cond_init(&pc->work_cv, NULL);
    pthread_cond_init(&pc->idle_cv, NULL);
    pthread_mutex_init(&pc->ra_mu, NULL);
    pthread_cond_init(&pc->ra_cv, NULL);
    pthread_cond_init(&pc->got_cv, NULL);
    const char *delay = getenv("HEARTH_PROMPT_CACHE_READ_DELAY_MS"), *sync = getenv("HEARTH_PROMPT_CACHE_SYNC_READS");
    pc->read_delay_ms = delay ? atoi(delay) : 0;
    pc->sync_reads = sync && !strcmp(sync, "1");

    const char *why = "";
    int rc = 0;
    open_result r = open_db(pc, &why, &rc);
    if (r == OPEN_BAD_FILE) {
        /* corrupt, truncated, foreign: set it aside and start afresh, once */
        writer_finalize(pc);
        memset(&pc->st, 0, sizeof pc->st);
        pc->st.enabled = true;
        pc->st.max_bytes = c->max_bytes;
        move_aside(pc->path);
        r = open_db(pc, &why, &rc);
    }
    if (r != OPEN_OK) {
        warn("cannot use %s (%s: %s): turned off, serving goes on", pc->path, why,
             rc ? sqlite3_errstr(rc) : "bad file");
        prompt_cache_close(pc);
        return NULL;
    }
    if (pthread_create(&pc->writer, NULL, pc_writer_main, pc)) {
        warn("cannot start the writer thread: turned off");
        prompt_cache_close(pc);
        return NULL;
    }
    pc->writer_started = true;
    if (pthread_create(&pc->reader, NULL, pc_reader_main, pc)) {
        warn("cannot start the reader thread: turned off");
        prompt_cache_close(pc);
        return NULL;
    }
    pc->reader_started = true;
    return pc;
}

void pc_item_free(pc_item *it) {
    if (!it) return;
    free(it->blob);
    free(it);
}

/* Frees the queue (not the in-flight batch). Caller holds mu. */
static void drop_queue_locked(prompt_cache *pc, bool count) {
    while (pc->head) {
        pc_item *it = pc->head;
        pc->head = it->next;
        if (count && it->kind == IT_STORE) pc->st.blocks_dropped++;
        if (it->kind == IT_CLEAR) atomic_fetch_sub(&pc->clear_pending, 1);
        pc->q_bytes -= it->size;
        pc->q_len--;
        pc_item_free(it);
    }
    pc->tail = NULL;
}

void prompt_cache_close(prompt_cache *pc) {
    if (!pc) return;
    if (pc->reader_started) {   /* the engine ended every fetch; queued ones are skipped */
        pthread_mutex_lock(&pc->ra_mu);
        pc->ra_stopping = true;
        pthread_cond_broadcast(&pc->ra_cv);
        pthread_mutex_unlock(&pc->ra_mu);
        pthread_join(pc->reader, NULL);
    }
    if (pc->writer_started) {
        pthread_mutex_lock(&pc->mu);
        pc->stopping = true;
        pthread_cond_broadcast(&pc->work_cv);
        pthread_mutex_unlock(&pc->mu);
        pthread_join(pc->writer, NULL);
    }
    drop_queue_locked(pc, false);
    writer_finalize(pc);
    pthread_mutex_destroy(&pc->mu);
    pthread_cond_destroy(&pc->work_cv);
    pthread_cond_destroy(&pc->idle_cv);
    pthread_mutex_destroy(&pc->ra_mu);
    pthread_cond_destroy(&pc->ra_cv);
    pthread_cond_destroy(&pc->got_cv);
    free(pc->path);
    free(pc);
}

/* An error that is not transient (or any error, with `always`) turns the
 * cache off for this process; a corrupt file is also moved aside, so the
 * next start builds a new one. */
void pc_fail(prompt_cache *pc, int rc, const char *what, bool always) {
    bool shm = shm_guard_tripped();   /* the -shm file was damaged: the database itself is fine */
    if (pc_is_transient(rc) && !always && !shm) return;
    pthread_mutex_lock(&pc->mu);
    if (!atomic_load(&pc->off)) {
        atomic_store(&pc->off, true);
        pc->st.enabled = false;
        if (shm) warn("%s-shm was truncated or damaged while serving; turned off, serving goes on", pc->path);
        else warn("%s: %s: %s; turned off, serving goes on", pc->path, what, sqlite3_errstr(rc));
        if (is_bad_file(rc) && !shm) move_aside(pc->path);
        drop_queue_locked(pc, true);
        pthread_cond_broadcast(&pc->idle_cv);
    }
    pthread_mutex_unlock(&pc->mu);
}

bool prompt_cache_enabled(prompt_cache *pc) { return pc && !atomic_load(&pc->off); }


int64_t prompt_cache_stamp(prompt_cache *pc) {
    return pc ? atomic_fetch_add(&pc->next_stamp, 1) : 0;
}

void prompt_cache_touch(prompt_cache *pc, const block_key *k, int64_t stamp) {
    if (pc_usable(pc)) pc_post_small(pc, IT_TOUCH, k, stamp);
}

void prompt_cache_note_lookup(prompt_cache *pc, int blocks, int tokens) {
    if (!pc) return;
    pthread_mutex_lock(&pc->mu);
    if (blocks > 0) pc->st.hits++; else pc->st.misses++;
    pc->st.tokens_restored += (uint64_t)(tokens > 0 ? tokens : 0);
    pthread_mutex_unlock(&pc->mu);
}

static bool key_in(const pc_item *it, item_kind kind, const block_key *k) {
    for (; it; it = it->next)
        if (it->kind == kind && !memcmp(it->key.b, k->b, 16)) return true;
    return false;
}

/* Whether the row exists; a failed read counts as no. */
static bool stored(prompt_cache *pc, const block_key *k) {
    sqlite3_stmt *q = pc->rd.q_has;
    pc_bind_key(q, pc, k);
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE && !pc_is_transient(rc) && (rc & 0xff) != SQLITE_ERROR)
        pc_fail(pc, rc, "read", false);
    return rc == SQLITE_ROW;
}

/* A full block (parent NULL, n_block B) or a partial one after parent. */
static int store_begin(prompt_cache *pc, const block_key *k, const block_key *parent, const int32_t *tokens,
                       int n_tokens, int n_block, int64_t stamp, pc_item **item, uint8_t **kv) {
    *item = NULL;
    *kv = NULL;
    if (!pc || atomic_load(&pc->off) || n_block < 1 || n_block > (int)pc->B || n_tokens < n_block) return -1;
    block_shape s = { (uint32_t)n_tokens, (uint32_t)n_block, pc->n_layer, pc->kv_dim };
    size_t size = block_blob_size(&s);
    if (!size || size > pc->max_blob || size > pc->max_bytes) return -1;
    /* Already queued or being written? Then already stored? In this order:
     * the writer drops a key from the queue only after its commit, so a key
     * that is in neither place is really not stored. A damaged row about to
     * be deleted counts as not stored: this store follows the delete. */
    pthread_mutex_lock(&pc->mu);
    bool pending = key_in(pc->head, IT_STORE, k) || key_in(pc->inflight, IT_STORE, k);
    bool deleting = key_in(pc->head, IT_DELETE, k) || key_in(pc->inflight, IT_DELETE, k);
    bool room = pc->q_bytes + size <= pc->queue_cap && pc->q_len < QUEUE_MAX_ITEMS;
    if (!pending && !room) pc->st.blocks_dropped++;
    pthread_mutex_unlock(&pc->mu);
    if (pending) return 0;
    if (!room) return -1;
    if (atomic_load(&pc->clear_pending) == 0 && !deleting && stored(pc, k)) return 0;

    pc_item *it = calloc(1, sizeof *it);
    if (it) it->blob = malloc(size);
    if (!it || !it->blob) { pc_item_free(it); return -1; }
    it->kind = IT_STORE;
    it->key = *k;
    it->n_tokens = (uint32_t)n_tokens;
    it->has_parent = parent != NULL;
    if (parent) it->parent = *parent;
    it->stamp = stamp;
    it->size = size;
    /* reserve the room now: the copy the caller is about to make must not be wasted */
    pthread_mutex_lock(&pc->mu);
    room = pc->q_bytes + size <= pc->queue_cap && pc->q_len < QUEUE_MAX_ITEMS && !atomic_load(&pc->off);
    if (room) { pc->q_bytes += size; pc->q_len++; }
    else pc->st.blocks_dropped++;
    pthread_mutex_unlock(&pc->mu);
    if (!room) { pc_item_free(it); return -1; }
    *kv = block_encode(it->blob, size, pc->fp, &s, tokens);
    *item = it;
    return 1;
}

int prompt_cache_store_begin(prompt_cache *pc, const block_key *k, const int32_t *tokens, int n_tokens,
                             int64_t stamp, pc_item **item, uint8_t **kv) {
    return store_begin(pc, k, NULL, tokens, n_tokens, pc ? (int)pc->B : 0, stamp, item, kv);
}

int prompt_cache_store_tail_begin(prompt_cache *pc, const block_key *parent, const block_key *k,
                                  const int32_t *tokens, int n_tokens, int n_block, int64_t stamp,
                                  pc_item **item, uint8_t **kv) {
    if (!pc || n_block >= (int)pc->B) { *item = NULL; *kv = NULL; return -1; }
    return store_begin(pc, k, parent, tokens, n_tokens, n_block, stamp, item, kv);
}

void prompt_cache_store_commit(prompt_cache *pc, pc_item *it) {
    if (!it) return;
    pthread_mutex_lock(&pc->mu);
    if (pc_enqueue_locked(pc, it)) pc->st.blocks_queued++;
    pthread_mutex_unlock(&pc->mu);
}

/* ---- any thread --------------------------------------------------------------- */
void prompt_cache_get_stats(prompt_cache *pc, prompt_cache_stats *out) {
    memset(out, 0, sizeof *out);
    if (!pc) return;
    pthread_mutex_lock(&pc->mu);
    *out = pc->st;
    out->enabled = !atomic_load(&pc->off);
    pthread_mutex_unlock(&pc->mu);
}

int prompt_cache_clear(prompt_cache *pc) {
    if (!pc || atomic_load(&pc->off)) return -1;
    pc_item *it = calloc(1, sizeof *it);
    if (!it) return -1;
    it->kind = IT_CLEAR;
    pthread_mutex_lock(&pc->mu);
    /* what is queued would only be deleted again */
    drop_queue_locked(pc, false);
    atomic_fetch_add(&pc->clear_pending, 1);
    pc->q_len++;
    bool ok = pc_enqueue_locked(pc, it);
    if (ok) {
        pc->st.entries = 0;
        pc->st.bytes = 0;
    } else {
        atomic_fetch_sub(&pc->clear_pending, 1);
    }
    pthread_mutex_unlock(&pc->mu);
    return ok ? 0 : -1;
}

void prompt_cache_sync(prompt_cache *pc) {
    if (!pc) return;
    pthread_mutex_lock(&pc->mu);
    while (pc->head || pc->busy) pthread_cond_wait(&pc->idle_cv, &pc->mu);
    pthread_mutex_unlock(&pc->mu);
}
