/* Private to engine/cache/prompt_cache*.c: the cache's structs and the
 * functions its three threads' files share (prompt_cache.c: opening,
 * closing, stores and the calls of any thread; prompt_cache_writer.c: the
 * writer thread and its queue; prompt_cache_read.c: lookups and the
 * read-ahead thread). */
#ifndef HEARTH_PROMPT_CACHE_INTERNAL_H
#define HEARTH_PROMPT_CACHE_INTERNAL_H

#include "engine/cache/prompt_cache.h"
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

/* prompt_cache.c */
/* Turns the cache off after a failure (`always`: also when it is transient). */
void pc_fail(prompt_cache *pc, int rc, const char *what, bool always);
bool pc_is_transient(int rc);
void pc_item_free(pc_item *it);
/* The two integer columns of st's one row. */
int pc_two_ints(sqlite3_stmt *st, uint64_t *a, uint64_t *b);

/* prompt_cache_writer.c */
void *pc_writer_main(void *arg);
void pc_bind_key(sqlite3_stmt *st, const prompt_cache *pc, const block_key *k);
/* Steps st to its end: SQLITE_OK or the error. */
int pc_run(sqlite3_stmt *st);
bool pc_enqueue_locked(prompt_cache *pc, pc_item *it);
void pc_post_small(prompt_cache *pc, item_kind kind, const block_key *k, int64_t stamp);

/* prompt_cache_read.c */
void *pc_reader_main(void *arg);
/* False when the cache is off (and turns it off if the -shm guard tripped). */
bool pc_usable(prompt_cache *pc);

#endif
