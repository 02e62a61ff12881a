/* The engine's insides, shared by its files (engine/sched/engine*.c) and
 * by nothing else: the job, the slot and the engine's state, and the
 * functions one part of a step calls in another.
 *
 *   engine.c        the public API, the engine thread's loop, the slot table
 *   engine_slots.c  the queue and the slots: admission, release, cancellation
 *   engine_step.c   one step: pack a batch, run it, hand its rows on
 *   engine_sample.c a slot's next token and its TOKEN / DONE events
 *   engine_embed.c  an embedding job's pooling
 *   engine_cache.c  the prompt cache: restore stored blocks, store new ones and partial ones
 *   engine_share.c  choices of one prompt sharing its prefill (prefill_from) */
#ifndef HEARTH_ENGINE_INTERNAL_H
#define HEARTH_ENGINE_INTERNAL_H

#include "engine/sched/engine.h"
#include "engine/model/backend.h"
#include "engine/text/stop_text.h"
#include "engine/text/tokenizer.h"
#include "runtime/pool.h"
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

typedef struct job {
    uint64_t id;
    int32_t *prompt;
    int n_prompt;
    job_params params;
    char *stop_copy[ENGINE_MAX_STOP];
    grammar *grammar;         /* params.grammar's copy */
    job_event_fn fn;
    void *user;
    atomic_bool cancelled;
    struct job *next;         /* queue link */
} job;

/* SLOT_WAIT: admitted, waiting for the slot of the job it shares its
 * prefill with (prefill_from) to evaluate the shared prompt.
 * SLOT_RESTORE: admitted, its stored blocks being read (slot->fetch). */
typedef enum { SLOT_FREE, SLOT_PREFILL, SLOT_GENERATE, SLOT_WAIT, SLOT_RESTORE } slot_state;

typedef struct slot {
    int id;
    slot_state state;
    job *job;
    int32_t *tokens;          /* the tokens whose KV is resident, n_past of them */
    int n_past;
    int n_prefilled;          /* prompt tokens evaluated (or reused) so far */
    int n_cached;
    int n_generated;
    int32_t next_token;       /* sampled, to be fed next step */
    sampler *smp;
    grammar_sampler *gs;      /* the job's grammar, or NULL */
    detok_stream detok;
    stop_text stop;
    uint64_t last_used;       /* step of last use, for LRU */
    uint64_t admitted;        /* admission order: oldest prefill first */
    double t_start, t_first;
    int n_stored;             /* prompt blocks handed to the cache (or found there) */
    block_key store_key;      /* the key of block n_stored - 1 */
    int64_t stamp;            /* the job's use stamp in the cache (LRU) */
    float *embd;              /* n_embd: an embedding job's pooled sum or row */
    int wait_on;              /* SLOT_WAIT: the slot whose job (wait_job) evaluates the shared prompt */
    uint64_t wait_job;
    int n_share;              /* SLOT_WAIT: the positions it takes from there */
    pc_fetch *fetch;          /* SLOT_RESTORE: the blocks being read */
    int restore_from, restore_blocks;
} slot;

struct engine {
    const model *m;
    engine_config cfg;
    const backend *be;        /* the model's: runs the plan, holds the KV cache */
    backend_state *bs;
    kv_cache *kv;             /* the backend's, for the prompt cache's block copies */
    hpool *pool;
    float *logits;            /* one row per slot, and PROMPT_ROWS more once a job wants prompt logprobs */
    int logit_rows;           /* rows logits holds */
    float *work;              /* sampler's copy of a row */
    char *piece;              /* one token's text: tokenizer_max_piece + 4 bytes, never cut */
    size_t piece_cap;
    slot *slots;
    /* batch buffers */
    int32_t *b_tok, *b_pos, *b_slot;
    uint8_t *b_want;
    int *b_row_slot;          /* which slot each logits row belongs to */
    int *b_row_pos;           /* and its position */
    uint8_t *b_want_embd;     /* rows whose hidden state an embedding job pools */
    float *b_embd;            /* their states, n_embd each, in batch order */

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *queue_head, *queue_tail;
    int queue_len;
    int n_claimed;            /* slots holding a job (under mu): queue_max counts jobs past the free ones */
    bool stopping;
    uint64_t next_job_id;
    uint64_t step, admissions;
    slot_info *published;     /* the slot table as of the last step */
    engine_stats stats;

    grammar_vocab *gv;        /* the vocabulary's trie, built for the first grammar job */
    prompt_cache *pc;         /* NULL: off */
    int block;                /* B, tokens per stored block */
    block_key root;           /* the parent of every prompt's first block */
    atomic_bool forget;       /* engine_cache_clear: drop the free slots' resident prefixes */
    bool restore_ready;       /* under mu: the reader thread has something for a SLOT_RESTORE slot */
};

/* engine_slots.c */
void job_emit(job *j, job_event *ev);
void job_free(job *j);
/* sl->job is written under the lock: engine_cancel reads it from other threads. */
void slot_set_job(engine *e, slot *sl, job *j);
void slot_release(engine *e, slot *sl);
/* End cancelled jobs, admit queued ones. Callbacks run after the lock is dropped. */
void engine_schedule(engine *e);
/* The rest of an admission once the restore is done: prefill from sl->n_past. */
void slot_admit_finish(engine *e, slot *sl);

/* engine_step.c: one step over the active slots (at least one) */
void engine_step(engine *e);

/* Rows of logits beyond one per slot, for jobs that want every prompt
 * row's (prompt logprobs): such a prompt goes in chunks of at most this
 * many rows more than one. */
#define PROMPT_ROWS 64

/* engine_sample.c */
void slot_finish(engine *e, slot *sl, finish_reason why, int stop_index);
/* The row of prompt position pos (< n_prompt - 1): a PROMPT event with the
 * logprobs of the prompt's next token. */
void slot_prompt_logprob(engine *e, slot *sl, int pos, const float *row);
/* Sample the next token for a slot from its logits row and send it. */
void slot_sample(engine *e, slot *sl, const float *row);

/* engine_embed.c */
void engine_embed_rows(engine *e, const fwd_batch *b);

/* engine_share.c: waiting slots take the shared prompt's KV, or prefill by
 * themselves (force: all of them). After admissions and after each step's
 * forward pass, before any job of the step can end. */
void engine_share_resolve(engine *e, bool force);

/* engine_cache.c */
bool slot_restore_begin(engine *e, slot *sl, int have);
bool slot_restore_poll(engine *e, slot *sl);
/* tail: the positions past the last full block too (the prompt or the job is done) */
void slot_store(engine *e, slot *sl, bool tail);

/* engine.c: the slot table and stats that other threads read */
void engine_publish(engine *e);

#endif
