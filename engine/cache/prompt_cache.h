/* The prompt-state cache on disk: blocks of B prompt positions' KV in a
 * sqlite database, so a conversation resumes after its slot was reused or
 * the server restarted.
 *
 * Block i of a prompt is keyed by the chain h_i = H(h_{i-1}, its B tokens),
 * rooted in a fingerprint of the model file and KV format; a changed model
 * file has another root and so finds nothing. The positions past a
 * sequence's last full block are stored too, as a partial block under
 * H(h_last, its tokens) with h_last as its parent: found by the parent and
 * the longest stored prefix, so a conversation resumed after a restart
 * prefills only its new tokens. Each stored block carries the
 * whole token prefix it ends, compared before the block is used (see
 * block_codec.h). One writer thread owns the writes (WAL, a bounded queue,
 * least-recently-used eviction under a size cap); admissions' reads run
 * ahead on a reader thread of the cache's own (pc_fetch), each through a
 * read-only connection.
 *
 * Faults never stop serving: a corrupt or foreign file is moved aside and
 * rebuilt; a full disk, a read-only directory or any other I/O error turns
 * the cache off with a warning on stderr. */
#ifndef HEARTH_PROMPT_CACHE_H
#define HEARTH_PROMPT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "engine/cache/block_codec.h"

struct model;

#define PROMPT_CACHE_BLOCK_TOKENS 256

typedef struct prompt_cache prompt_cache;

typedef struct prompt_cache_stats {
    bool enabled;
    uint64_t entries, bytes;        /* stored blocks and their blob bytes (all models) */
    uint64_t max_bytes;             /* the size cap */
    uint64_t hits, misses;          /* lookups (requests with full blocks beyond the resident
                                       prefix) that restored at least one block / none */
    uint64_t evictions;             /* blocks evicted by the size cap */
    uint64_t tokens_restored;       /* positions restored from the store */
    uint64_t blocks_queued;         /* blocks handed to the writer */
    uint64_t blocks_stored;         /* blocks the writer inserted */
    uint64_t blocks_dropped;        /* stores dropped: queue full, database busy */
} prompt_cache_stats;

typedef struct prompt_cache_config {
    const char *path;
    uint8_t fingerprint[16];
    int n_layer, kv_dim;            /* the KV geometry (fp16) */
    int block_tokens;               /* B */
    uint64_t max_bytes;
} prompt_cache_config;

/* The default file: $XDG_CACHE_HOME/hearth/prompt-cache.db (else
 * ~/.cache/hearth/..., ~/Library/Caches/hearth/... on macOS), creating the
 * folder. 0, or -1 when there is no home or the folder cannot be made. */
int prompt_cache_default_path(char *buf, size_t cap);

/* 16 bytes naming the model file's content and the KV format: the file
 * size, its header and metadata, evenly spaced samples of its tensor data,
 * n_layer, kv_dim, the KV type and B. Not the path or mtime: a copied file
 * keeps its cache. */
void prompt_cache_fingerprint(const struct model *m, int block_tokens, uint8_t out[16]);

/* Opens (or creates, or rebuilds) the store and starts the writer. NULL
 * when the cache cannot run; the reason went to stderr. */
prompt_cache *prompt_cache_open(const prompt_cache_config *c);
/* Writes what is queued, joins the writer, closes the database. */
void prompt_cache_close(prompt_cache *pc);

/* ---- the engine thread (one thread at a time) ---------------------------- */
/* Block k ending the prefix tokens[0, n_tokens): 0 and a view of it (valid
 * until the next call) when it is stored, intact, of this fingerprint and
 * geometry, and its stored prefix equals tokens; -1 otherwise. */
int prompt_cache_lookup(prompt_cache *pc, const block_key *k, const int32_t *tokens, int n_tokens,
                        block_view *out);
/* The partial block stored after the full blocks whose chain ends at
 * `parent` (the root for none) that is the longest stored prefix of
 * tokens[0, n_tokens) ending past `have`: its positions run from `start`
 * (the parent's end) to out->shape.n_tokens. 0 and a view (valid until the
 * next call); -1 when there is none. Up to 8 candidates are tried, their
 * prefixes compared before their KV is read. */
int prompt_cache_lookup_tail(prompt_cache *pc, const block_key *parent, const int32_t *tokens, int n_tokens,
                             int start, int have, block_view *out);
/* Read-ahead for an admission: the cache's reader thread reads the
 * prompt's stored blocks after position `have` (k: the chain of the
 * blocks [0, have / B)), then the partial block after them, as
 * prompt_cache_lookup and _lookup_tail would, and hands each over as soon
 * as it is read, at most 2 ahead of the engine. wake(arg) is called on
 * that thread after each block and at the end. NULL: nothing to read (the
 * cache is off, or no position is missing). */
typedef struct pc_fetch pc_fetch;
pc_fetch *prompt_cache_fetch_begin(prompt_cache *pc, const block_key *k, const int32_t *tokens, int n_tokens,
                                   int have, void (*wake)(void *), void *arg);
/* Never blocks: 1 and the next block in prompt order (valid until the next
 * call; its positions end at out->shape.n_tokens, its first is
 * n_tokens - n_block); 0 when none is read yet; -1 when all were handed out. */
int prompt_cache_fetch_next(pc_fetch *f, block_view *out);
/* Done with it, finished or not (the thread stops reading for it). */
void prompt_cache_fetch_end(pc_fetch *f);
/* A use stamp for one request, above every stamp before it: every full
 * block of its prompt is stored or touched with it, so a block is never
 * evicted before a block that continues it (see prompt_cache.c). */
int64_t prompt_cache_stamp(prompt_cache *pc);
/* Marks block k as used by the request with this stamp (LRU). */
void prompt_cache_touch(prompt_cache *pc, const block_key *k, int64_t stamp);
/* Counts one lookup of a request: restored `blocks` blocks, `tokens` positions. */
void prompt_cache_note_lookup(prompt_cache *pc, int blocks, int tokens);

/* Storing block k, which ends tokens[0, n_tokens), for the request with
 * this stamp:
 *   1: *kv is where its KV goes (n_layer x { K rows, V rows } of B x kv_dim
 *      fp16); fill it, then prompt_cache_store_commit(pc, *item);
 *   0: already stored or queued (touch it with the stamp);
 *  -1: not now (queue full, cache off, too big): later blocks of the same
 *      prompt are useless without this one. */
typedef struct pc_item pc_item;
int prompt_cache_store_begin(prompt_cache *pc, const block_key *k, const int32_t *tokens, int n_tokens,
                             int64_t stamp, pc_item **item, uint8_t **kv);
/* The same for a partial block: the last n_block (< B) positions of the
 * prefix tokens[0, n_tokens), stored under key k after the full block
 * whose key is `parent` (what prompt_cache_lookup_tail finds it by). */
int prompt_cache_store_tail_begin(prompt_cache *pc, const block_key *parent, const block_key *k,
                                  const int32_t *tokens, int n_tokens, int n_block, int64_t stamp,
                                  pc_item **item, uint8_t **kv);
void prompt_cache_store_commit(prompt_cache *pc, pc_item *item);

/* ---- any thread ---------------------------------------------------------- */
void prompt_cache_get_stats(prompt_cache *pc, prompt_cache_stats *out);
/* Forgets every block at once (lookups miss from now on); the writer
 * deletes them and shrinks the file. 0, or -1 when the cache is off. */
int prompt_cache_clear(prompt_cache *pc);
/* Waits until everything queued so far is written (or dropped). */
void prompt_cache_sync(prompt_cache *pc);
bool prompt_cache_enabled(prompt_cache *pc);

#endif
