/* The fixed-slot batch engine. It runs on its own thread: admits jobs
 * into N slots, packs one batch per step (one token per generating slot,
 * then prompt chunks up to the budget), runs the plan once over it and
 * samples per slot. Events go back through a callback that must not
 * block (the server queues them and wakes its loop). */
#ifndef HEARTH_ENGINE_H
#define HEARTH_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "engine/model/model.h"
#include "engine/sample/sampler.h"
#include "engine/cache/prompt_cache.h"
#include "engine/sample/grammar.h"

typedef struct engine engine;

typedef struct engine_config {
    int n_slots;              /* -np, default 4 */
    int n_ctx;                /* per slot, default 4096 */
    int n_batch;              /* token budget per step, default 512 */
    int n_batch_decoding;     /* rows per step (generated + prompt tokens, at least one
                               * prompt token) while any slot is generating, default 6:
                               * keeps inter-token latency near one decode step while
                               * a long prompt prefills alongside */
    int n_threads;            /* default: physical cores */
    struct hpool *pool;       /* run on this pool (shared with other engines; not
                               * owned), or NULL: the engine makes its own of n_threads */
    int queue_max;            /* waiting jobs, default 64 */
    const char *prompt_cache; /* sqlite path, or NULL / "off" */
    uint64_t prompt_cache_bytes;
    int prompt_cache_block;   /* tokens per stored block, default 256 (PROMPT_CACHE_BLOCK_TOKENS) */
} engine_config;

void engine_config_default(engine_config *c);

/* Takes ownership of nothing; m must outlive the engine. Starts the engine thread. */
engine *engine_create(const model *m, const engine_config *c, char *err, size_t errlen);
/* Cancels every job (each gets its DONE event), joins the thread. */
void engine_destroy(engine *e);

typedef enum {
    FINISH_NONE = 0, FINISH_STOP, FINISH_LENGTH, FINISH_CANCELLED,
    FINISH_TIMEOUT, FINISH_SHUTDOWN, FINISH_ERROR
} finish_reason;
const char *finish_reason_name(finish_reason f);   /* "stop", "length", ... */

#define ENGINE_MAX_STOP 256   /* llama-server sets no cap; a bound keeps a job small */
#define ENGINE_MAX_TOP_LOGPROBS 20

/* An embedding job's pooling of the prompt's final hidden states (after
 * output_norm): their mean, the first (CLS) or the last token's. */
typedef enum { EMBED_OFF = 0, EMBED_MEAN, EMBED_CLS, EMBED_LAST } embed_pooling;

typedef struct job_params {
    sampler_params sampling;
    embed_pooling embed;      /* not EMBED_OFF: no generation; DONE carries the pooled,
                                 L2-normalized embedding (mean and CLS: no prefix reuse) */
    int max_tokens;           /* -1: until the context is full */
    int n_top_logprobs;       /* 0..ENGINE_MAX_TOP_LOGPROBS */
    bool logprobs;            /* report the chosen token's logprob */
    int id_slot;              /* -1: any */
    bool cache_prompt;        /* reuse resident / stored prompt state */
    double t_max_predict_ms;  /* 0: no limit */
    bool ignore_eos;
    bool render_special;      /* event text spells control tokens (tool-call and channel markers) */
    int n_stop;
    const char *stop[ENGINE_MAX_STOP];   /* copied at submit */
    const grammar *grammar;   /* NULL: none; else every token is one the grammar allows (copied at submit) */
    /* Several choices of one prompt share its prefill: a job naming an
     * earlier job of the same prompt (its id) that holds a slot takes that
     * job's KV for the prompt but its last token, copied into its own slot
     * (waiting while the other prefills it), instead of computing it. The
     * same numbers as its own prefill, bit for bit. 0: none. */
    uint64_t prefill_from;
    /* Every prompt token after the first gets a JOB_EV_PROMPT event, before
     * the first TOKEN: its logprob given the tokens before it and the
     * n_top_logprobs best there (the prompt is evaluated whole: no reuse). */
    bool prompt_logprobs;
} job_params;

void job_params_default(job_params *p);

typedef enum { JOB_EV_STARTED, JOB_EV_TOKEN, JOB_EV_DONE, JOB_EV_PROMPT } job_event_type;

typedef struct job_event {
    job_event_type type;
    uint64_t job_id;
    int slot;
    /* TOKEN: the token, and the text released with it: complete UTF-8,
     * never part of a stop string (held back text comes out later or never).
     * PROMPT: the prompt's token at position pos (1 .. n_prompt - 1), no text,
     * with its logprob and top alternatives as for TOKEN. */
    int32_t token;
    int pos;
    const char *text;         /* valid during the callback only */
    size_t text_len;
    float logprob;
    int n_top;
    token_logprob top[ENGINE_MAX_TOP_LOGPROBS];
    /* STARTED (admitted to a slot, prefill begins) and DONE: */
    int n_prompt, n_cached, n_generated;
    double t_prompt_ms, t_gen_ms;
    finish_reason finish;     /* DONE; its text (if any) is the tail released at the end */
    const char *stop_word;    /* DONE with a stop string: which one */
    const float *embedding;   /* DONE of an embedding job: n_embd floats (valid during the callback), or NULL */
    int n_embd;
} job_event;

typedef void (*job_event_fn)(void *user, const job_event *ev);

enum { ENGINE_OK = 0, ENGINE_QUEUE_FULL = -1, ENGINE_PROMPT_TOO_LONG = -2,
       ENGINE_BAD_SLOT = -3, ENGINE_NOMEM = -4, ENGINE_STOPPED = -5,
       ENGINE_BAD_TOKEN = -6 /* a prompt id outside the vocabulary */ };

/* Thread-safe. Copies the prompt. Events arrive on the engine thread; the
 * last one for a job is JOB_EV_DONE, after which `user` is never used again. */
int engine_submit(engine *e, const int32_t *prompt, int n_prompt, const job_params *p,
                  job_event_fn fn, void *user, uint64_t *job_id);
/* Thread-safe, asynchronous: the job ends (DONE, FINISH_CANCELLED) by the next step. */
void engine_cancel(engine *e, uint64_t job_id);

typedef struct slot_info {
    int id;
    bool busy;
    bool prefilling;
    uint64_t job_id;
    int n_ctx, n_past;        /* resident tokens */
    int n_prompt, n_generated;
} slot_info;

typedef struct engine_stats {
    int n_slots, slots_busy, queue_depth;
    uint64_t kv_cells_used, kv_cells_total, kv_bytes;
    uint64_t prompt_tokens, generated_tokens, cached_tokens;
    uint64_t shared_tokens;   /* prompt tokens copied from another choice's slot (prefill_from) */
    uint64_t steps;
} engine_stats;

int engine_slots(engine *e, slot_info *out, int max);   /* returns n_slots */
void engine_get_stats(engine *e, engine_stats *out);
const model *engine_model(const engine *e);

/* The prompt-state cache (sqlite) behind GET/DELETE /cache and /metrics.
 * Thread-safe. Stats: fills *out (all zero when the cache is off) and
 * returns 0, or -1 when the cache is off. Clear: forgets every stored block
 * and every slot's resident prefix, so the next request prefills from
 * scratch; 0, or -1 when the cache is off. Sync: waits until every block
 * handed to the writer so far is written (tests, benchmarks). */
int engine_cache_stats(engine *e, prompt_cache_stats *out);
int engine_cache_clear(engine *e);
void engine_cache_sync(engine *e);
int engine_n_ctx(const engine *e);

#endif
