/* One generation request between the HTTP side and the engine.
 *
 * A route parses the request into gen_opts, builds the prompt and calls
 * gen_submit. The engine's events (engine thread) are queued and handed to
 * the loop with uv_async_send; there each token goes through the filters
 * (warm-up, n_indent) and then to the answer's format (gen_fmt): SSE
 * chunks as they come, or one JSON answer at the end.
 *
 * A gen lives while the engine holds its job or the HTTP request is open;
 * whichever ends last frees it. A client that leaves cancels the job. */
#ifndef HEARTH_GEN_H
#define HEARTH_GEN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>
#include "server/server.h"
#include "server/tool_parse.h"

typedef enum { GEN_CHAT, GEN_COMPLETION, GEN_LLAMA } gen_kind;

#define GEN_MAX_CHOICES 16    /* OpenAI's n, per prompt */
#define GEN_MAX_PROMPTS 32    /* /v1/completions: prompts in one request */

typedef struct gen_opts {
    job_params jp;            /* jp.stop point into the request JSON (copied at submit) */
    logit_bias_entry *bias;   /* malloc'd; jp.sampling.logit_bias points here */
    grammar *grammar;         /* owned; jp.grammar points here (the engine copies it) */
    bool stream, include_usage;
    bool logprobs;            /* report each token's logprob */
    int n_probs;              /* and this many alternatives */
    bool echo;                /* completions: the prompt text comes first */
    int n_indent;             /* infill: stop at a line indented less than this */
    bool warmup;              /* n_predict 0: prefill only, no text */
    bool return_tokens;       /* llama: the token ids in the answer */
    const cJSON *response_fields;   /* llama: borrowed from the request */
    bool parse_chat;          /* chat: the text goes through the output parser (tools, reasoning) */
    tool_parse_opts tp;       /* its options (hold_calls is set for whole answers) */
    int32_t *dry_ids;         /* malloc'd when the request names its own DRY breakers */
    char ignored[160];        /* fields accepted but not acted on, for the X-Hearth-Ignored header */
    int n_choices;            /* OpenAI's n: choices per prompt (gen_group.h) */
    bool seed_given;          /* the request named its seed (choice k uses seed + k) */
} gen_opts;

void gen_opts_init(gen_opts *o);
void gen_opts_free(gen_opts *o);

typedef struct gen_fmt {
    /* streaming answers: right after the job is queued (e.g. the role chunk) */
    void (*start)(gen *g);
    /* text released by a token (ev: its event), or the tail at the end (ev NULL) */
    void (*token)(gen *g, const char *text, size_t len, const job_event *ev);
    /* the generation ended normally: answer, or end the stream */
    void (*finish)(gen *g);
    /* a prompt token's logprobs (echo with logprobs), before any token; may be NULL */
    void (*prompt)(gen *g, const job_event *ev);
} gen_fmt;

struct ev_node;

struct gen {
    server *s;
    http_req *req;            /* NULL once the request is over */
    const gen_fmt *fmt;
    gen_kind kind;
    gen_opts o;
    cJSON *response_fields;   /* a copy */
    cJSON *settings;          /* llama: generation_settings, built from the request */
    char id[48];
    long created;
    uint64_t job;
    bool in_engine;           /* the engine owes a DONE event */
    bool stream_started, ended;
    int slot;
    int n_prompt, n_cached, n_gen;
    double t_prompt_ms, t_gen_ms;
    finish_reason finish;
    char *stop_word;
    bool indent_stop;         /* ended by n_indent */
    char *text;               /* every byte released so far */
    size_t text_len, text_cap;
    int32_t *toks;            /* generated ids */
    int n_toks, toks_cap;
    cJSON *acc;               /* the format's accumulator (logprobs) */
    tool_parser *tp;          /* chat streams with parse_chat: the output parser */
    cJSON *pending_lp;        /* the logprobs of the token being parsed, for its first chunk */
    size_t text_offset;       /* completions: bytes before the next token */
    char *echo;               /* completions with echo: the prompt text */
    int32_t prompt0;          /* the prompt's first token (echo with logprobs: its entry has no logprob) */
    bool prompt_lp_begun;     /* echo with logprobs: the prompt's entries are under way in acc */
    bool echo_sent;           /* a stream's echo chunk went out */
    size_t prompt_off;        /* echo with logprobs: the decoded prompt bytes before the next token */
    size_t prompt_bytes;      /* and all of them (more than the echo's when a tokenizer added a space) */
    bool truncated;           /* infill: the input was cut to fit */
    double t0, t_last;        /* ms: arrival, last token */
    bool any_token;
    bool ind_check;           /* n_indent: at the start of a line */
    char *hold;               /* n_indent: the line's indentation so far */
    size_t n_hold, hold_cap;
    atomic_bool lost;         /* an event was lost (no memory) */
    struct ev_node *done_node;
    struct gen_group *grp;    /* NULL: the request's only generation */
    int index;                /* its choice index in the group */
    gen *next, *prev;
};

/* A generation answering r; NULL (and a 500 answer) without memory.
 * Takes over o (the caller must not free it). */
gen *gen_create(server *s, http_req *r, gen_kind kind, const gen_fmt *fmt, gen_opts *o);
/* Hands the prompt to the engine and starts the answer (the stream's
 * headers, or a deferred answer); on failure answers the error. */
void gen_submit(gen *g, const int32_t *prompt, int n_prompt);

/* The request is over (its client left, or it was answered): cancel or free. */
void gen_req_closed(gen *g);

/* Ends the answer with an error: an HTTP error, or an SSE error event. */
void gen_fail(gen *g, int status, const char *code, const char *msg);
/* One SSE event "data: JSON" (o is freed), or a raw one ("[DONE]"). */
void gen_sse_json(gen *g, cJSON *o);
void gen_sse_raw(gen *g, const char *data);
void gen_stream_end(gen *g);

/* "stop" or "length" (OpenAI); "eos", "word", "limit" (llama.cpp). */
const char *gen_finish_oai(const gen *g);
const char *gen_stop_type(const gen *g);

/* The event queue and the keep-alive timer (server start and stop). */
int gen_events_init(server *s);
void gen_events_drain(server *s);
void gen_events_close(server *s);

#endif
