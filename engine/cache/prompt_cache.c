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
 * reusable buffer. */
#include "engine/cache/prompt_cache.h"
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

#define APP_ID 0x48525448          /* "HRTH" in PRAGMA application_id */
#define SCHEMA_VERSION 2           /* PRAGMA user_version (1: no parent column; migrated) */
#define QUEUE_MAX_BYTES (256ull << 20)
#define QUEUE_MAX_ITEMS 4096
#define BATCH_MAX_BYTES (64ull << 20)   /* one write transaction */
#define WRITER_BUSY_MS 5000        /* another process holding the write lock */
#define READER_BUSY_MS 100
#define TAIL_CANDIDATES_STR "8"    /* partial blocks after one parent tried per lookup, longest first */

typedef enum { IT_STORE, IT_TOUCH, IT_DELETE, IT_CLEAR } item_kind;

struct pc_item {
    item_kind kind;
    struct pc_item *next;
    block_key key;
    uint32_t n_tokens;
    bool has_parent;          /* STORE of a partial block: parent is the key before it */
    block_key parent;
    int64_t stamp;            /* STORE, TOUCH: the request's use stamp */
    size_t size;              /* blob bytes (STORE) */
    uint8_t *blob;
};

/* A read-only connection and what its lookups need: one per thread. */
typedef struct pc_reader {
    sqlite3 *db;
    sqlite3_stmt *q_find, *q_has, *q_tails;
    uint8_t *scratch;         /* the last block read */
    size_t scratch_cap;
} pc_reader;

struct prompt_cache {
    char *path;
    uint8_t fp[16];
    uint32_t n_layer, kv_dim, B;
    uint64_t max_bytes;
    uint64_t queue_cap;
    size_t max_blob;          /* sqlite's length limit */

    pc_reader rd;             /* the engine thread's read connection */
    pc_reader ra;             /* the read-ahead thread's */

    /* the writer's connection: used by the writer thread only */
    sqlite3 *wdb;
    sqlite3_stmt *w_ins, *w_ins_data, *w_touch, *w_del, *w_total, *w_oldest, *w_del_id, *w_clear;

    pthread_t writer;
    bool writer_started;
    pthread_mutex_t mu;       /* guards everything below */
    pthread_cond_t work_cv, idle_cv;
    pc_item *head, *tail;     /* the queue */
    pc_item *inflight;        /* the batch the writer is writing */
    uint64_t q_bytes;         /* bytes of queued and in-flight blobs */
    int q_len;
    bool stopping, busy;
    prompt_cache_stats st;
    atomic_bool off;
    atomic_int clear_pending;
    atomic_llong next_stamp;  /* above every stamp stored when opened */

    /* read-ahead: one thread reads the blocks admissions ask for (pc_fetch) */
    pthread_t reader;
    bool reader_started;
    pthread_mutex_t ra_mu;    /* guards the fetch queue and every fetch's shared part */
    pthread_cond_t ra_cv;     /* the thread: a fetch queued, room in one, stopping */
    pthread_cond_t got_cv;    /* sync_reads: a block read, a fetch done */
    pc_fetch *ra_head, *ra_tail;
    bool ra_stopping;
    int read_delay_ms;        /* HEARTH_PROMPT_CACHE_READ_DELAY_MS: tests slow each read */
    bool sync_reads;          /* HEARTH_PROMPT_CACHE_SYNC_READS=1: fetch_next waits (tests' control) */
};

/* A block the read-ahead thread read, waiting for the engine. */
typedef struct pc_got {
    struct pc_got *next;
    uint8_t *buf;             /* the blob, which v points into */
    block_view v;
} pc_got;

#define READ_AHEAD 2          /* blocks read and not yet taken, per fetch */

struct pc_fetch {
    prompt_cache *pc;
    int32_t *tokens;          /* the prompt's copy */
    int n_tokens;
    int have;                 /* the thread's: positions found so far */
    block_key k;              /* the thread's: the chain of blocks [0, have / B) */
    void (*wake)(void *);
    void *wake_arg;
    pc_got *cur;              /* the engine's: the block handed out last */
    struct pc_fetch *next;    /* the queue */
    /* under ra_mu */
    pc_got *head, *tail;
    int n_ready, refs;        /* refs: the engine's and the thread's */
    bool done, cancelled;
};

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
static bool is_transient(int rc) {
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
static int two_ints(sqlite3_stmt *st, uint64_t *a, uint64_t *b) {
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
    rc = two_ints(scan, &n_data, &n_rows);
    sqlite3_finalize(scan);
    if (rc) goto fail;
    if ((rc = two_ints(pc->w_total, &pc->st.entries, &pc->st.bytes))) goto fail;
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

static void *writer_main(void *arg);
static void *reader_main(void *arg);

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
    if (pthread_create(&pc->writer, NULL, writer_main, pc)) {
        warn("cannot start the writer thread: turned off");
        prompt_cache_close(pc);
        return NULL;
    }
    pc->writer_started = true;
    if (pthread_create(&pc->reader, NULL, reader_main, pc)) {
        warn("cannot start the reader thread: turned off");
        prompt_cache_close(pc);
        return NULL;
    }
    pc->reader_started = true;
    return pc;
}

static void item_free(pc_item *it) {
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
        item_free(it);
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
static void cache_fail(prompt_cache *pc, int rc, const char *what, bool always) {
    bool shm = shm_guard_tripped();   /* the -shm file was damaged: the database itself is fine */
    if (is_transient(rc) && !always && !shm) return;
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

/* ---- the writer ------------------------------------------------------------ */
static void bind_key(sqlite3_stmt *st, const prompt_cache *pc, const block_key *k) {
    sqlite3_bind_blob(st, 1, pc->fp, 16, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, k->b, 16, SQLITE_TRANSIENT);
}

/* Runs a statement that returns no rows; SQLITE_OK or the error. */
static int run(sqlite3_stmt *st) {
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
            bind_key(pc->w_ins, pc, &it->key);
            sqlite3_bind_int64(pc->w_ins, 3, it->n_tokens);
            sqlite3_bind_int64(pc->w_ins, 4, (sqlite3_int64)it->size);
            sqlite3_bind_int64(pc->w_ins, 5, it->stamp);
            if (it->has_parent) sqlite3_bind_blob(pc->w_ins, 6, it->parent.b, 16, SQLITE_TRANSIENT);
            else sqlite3_bind_null(pc->w_ins, 6);
            rc = run(pc->w_ins);
            if (rc || sqlite3_changes(db) != 1) break;   /* an error, or stored already */
            sqlite3_bind_int64(pc->w_ins_data, 1, sqlite3_last_insert_rowid(db));
            sqlite3_bind_blob64(pc->w_ins_data, 2, it->blob, it->size, SQLITE_STATIC);
            rc = run(pc->w_ins_data);
            if (!rc) res->stored++;
            break;
        case IT_TOUCH:
            bind_key(pc->w_touch, pc, &it->key);
            sqlite3_bind_int64(pc->w_touch, 3, it->stamp);
            rc = run(pc->w_touch);
            break;
        case IT_DELETE:
            bind_key(pc->w_del, pc, &it->key);
            rc = run(pc->w_del);
            break;
        case IT_CLEAR:
            rc = run(pc->w_clear);
            res->cleared = true;
            break;
        }
    }
    /* evict least recently used blocks down to the cap */
    uint64_t entries = 0, bytes = 0;
    if (!rc) rc = two_ints(pc->w_total, &entries, &bytes);
    while (!rc && bytes > pc->max_bytes) {
        rc = sqlite3_step(pc->w_oldest);
        if (rc != SQLITE_ROW) { sqlite3_reset(pc->w_oldest); rc = rc == SQLITE_DONE ? SQLITE_OK : rc; break; }
        int64_t id = sqlite3_column_int64(pc->w_oldest, 0), b = sqlite3_column_int64(pc->w_oldest, 1);
        sqlite3_reset(pc->w_oldest);
        sqlite3_bind_int64(pc->w_del_id, 1, id);
        rc = run(pc->w_del_id);
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

static void *writer_main(void *arg) {
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
        if (rc) cache_fail(pc, rc, "write", n_clear > 0);

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
            item_free(it);
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
static bool enqueue_locked(prompt_cache *pc, pc_item *it) {
    if (atomic_load(&pc->off)) {
        pc->q_bytes -= it->size;
        pc->q_len--;
        item_free(it);
        return false;
    }
    it->next = NULL;
    if (pc->tail) pc->tail->next = it; else pc->head = it;
    pc->tail = it;
    pthread_cond_signal(&pc->work_cv);
    return true;
}

/* A small item (touch, delete); dropped when the queue is full. */
static void post_small(prompt_cache *pc, item_kind kind, const block_key *k, int64_t stamp) {
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
        enqueue_locked(pc, it);
    }
    pthread_mutex_unlock(&pc->mu);
}

/* ---- the engine thread ------------------------------------------------------ */
static bool usable(prompt_cache *pc) {
    if (pc && shm_guard_tripped() && !atomic_load(&pc->off)) cache_fail(pc, SQLITE_IOERR, "-shm", true);
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
    if (!usable(pc) || start < 0 || have < start || have >= n_tokens) return -1;
    sqlite3_stmt *q = rd->q_tails;
    bind_key(q, pc, parent);
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
    if (rc && !is_transient(rc) && (rc & 0xff) != SQLITE_ERROR) cache_fail(pc, rc, "read", false);
    for (int i = 0; i < n_dead; i++) post_small(pc, IT_DELETE, &dead[i], 0);
    return result;
}

static int lookup(prompt_cache *pc, pc_reader *rd, const block_key *k, const int32_t *tokens, int n_tokens,
                  block_view *out) {
    if (!usable(pc) || n_tokens < (int)pc->B) return -1;
    block_shape s = { (uint32_t)n_tokens, pc->B, pc->n_layer, pc->kv_dim };
    size_t want = block_blob_size(&s);
    if (!want || want > (size_t)INT_MAX) return -1;
    sqlite3_stmt *q = rd->q_find;
    bind_key(q, pc, k);
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
    if (rc && !is_transient(rc) && (rc & 0xff) != SQLITE_ERROR) cache_fail(pc, rc, "read", false);
    if (bad) post_small(pc, IT_DELETE, k, 0);
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

static void *reader_main(void *arg) {
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
    if (!usable(pc) || have >= n_tokens - 1) return NULL;
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

int64_t prompt_cache_stamp(prompt_cache *pc) {
    return pc ? atomic_fetch_add(&pc->next_stamp, 1) : 0;
}

void prompt_cache_touch(prompt_cache *pc, const block_key *k, int64_t stamp) {
    if (usable(pc)) post_small(pc, IT_TOUCH, k, stamp);
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
    bind_key(q, pc, k);
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE && !is_transient(rc) && (rc & 0xff) != SQLITE_ERROR)
        cache_fail(pc, rc, "read", false);
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
    if (!it || !it->blob) { item_free(it); return -1; }
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
    if (!room) { item_free(it); return -1; }
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
    if (enqueue_locked(pc, it)) pc->st.blocks_queued++;
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
    bool ok = enqueue_locked(pc, it);
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
