/* OpenAI answer shapes: chat.completion(.chunk) and text_completion,
 * whole or as SSE chunks (see fmt.h). */
#include "server/fmt.h"
#include "server/gen_group.h"
#include "server/errors.h"
#include "server/utf8.h"
#include "engine/text/tokenizer.h"
#include <stdlib.h>
#include <string.h>

#ifndef HEARTH_VERSION
#define HEARTH_VERSION "unknown"
#endif

void fmt_token_piece(const server *s, int32_t id, cJSON **text, cJSON **bytes) {
    char buf[1024];
    size_t n = tokenizer_token_bytes(s->model->tok, id, true, buf, sizeof buf);
    if (n > sizeof buf) n = sizeof buf;
    *text = utf8_json_string(buf, n);
    if (!bytes) return;
    *bytes = cJSON_CreateArray();
    for (size_t i = 0; i < n && *bytes; i++) cJSON_AddItemToArray(*bytes, cJSON_CreateNumber((unsigned char)buf[i]));
}

/* One {id?, token, logprob, bytes} entry; shared by the chat and the llama.cpp
 * shapes, which differ only in whether the id leads. */
static cJSON *logprob_entry(const gen *g, int32_t id, double logprob, bool with_id) {
    cJSON *o = cJSON_CreateObject(), *text, *bytes;
    fmt_token_piece(g->s, id, &text, &bytes);
    if (with_id) cJSON_AddNumberToObject(o, "id", id);
    cJSON_AddItemToObject(o, "token", text);
    cJSON_AddNumberToObject(o, "logprob", logprob);
    cJSON_AddItemToObject(o, "bytes", bytes);
    return o;
}

cJSON *fmt_token_logprobs(const gen *g, const job_event *ev, bool with_id) {
    cJSON *o = logprob_entry(g, ev->token, ev->logprob, with_id);
    cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
    for (int i = 0; i < ev->n_top; i++)
        cJSON_AddItemToArray(top, logprob_entry(g, ev->top[i].id, ev->top[i].logprob, with_id));
    return o;
}

cJSON *fmt_usage(const gen *g) {
    int prompt, completion, cached;   /* a group's sums (gen_group.h) */
    gen_usage_counts(g, &prompt, &completion, &cached);
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", completion);
    cJSON_AddNumberToObject(u, "total_tokens", prompt + completion);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", cached);
    return u;
}

cJSON *fmt_timings(const gen *g) {
    cJSON *t = cJSON_CreateObject();
    int pn = g->n_prompt - g->n_cached;
    cJSON_AddNumberToObject(t, "cache_n", g->n_cached);
    cJSON_AddNumberToObject(t, "prompt_n", pn);
    cJSON_AddNumberToObject(t, "prompt_ms", g->t_prompt_ms);
    cJSON_AddNumberToObject(t, "prompt_per_token_ms", pn > 0 ? g->t_prompt_ms / pn : 0);
    cJSON_AddNumberToObject(t, "prompt_per_second", g->t_prompt_ms > 0 ? 1e3 * pn / g->t_prompt_ms : 0);
    cJSON_AddNumberToObject(t, "predicted_n", g->n_gen);
    cJSON_AddNumberToObject(t, "predicted_ms", g->t_gen_ms);
    cJSON_AddNumberToObject(t, "predicted_per_token_ms", g->n_gen > 0 ? g->t_gen_ms / g->n_gen : 0);
    cJSON_AddNumberToObject(t, "predicted_per_second", g->t_gen_ms > 0 ? 1e3 * g->n_gen / g->t_gen_ms : 0);
    return t;
}

static cJSON *head(const gen *g, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", g->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)g->created);
    cJSON_AddStringToObject(o, "model", g->s->model_id);
    cJSON_AddStringToObject(o, "system_fingerprint", "hearth-" HEARTH_VERSION);
    return o;
}

static void add_text(cJSON *o, const char *key, const char *text, size_t len) {
    cJSON *v = utf8_json_string(text, len);
    if (v) cJSON_AddItemToObject(o, key, v);
}

static void add_finish(cJSON *o, const char *finish) {
    if (finish) cJSON_AddStringToObject(o, "finish_reason", finish);
    else cJSON_AddNullToObject(o, "finish_reason");
}

/* A chunk's choice c ends the same way in chat and completions: logprobs (or
 * null), finish_reason, then the usage placeholder; returns the chunk o. */
static cJSON *chunk_end(const gen *g, cJSON *o, cJSON *choices, cJSON *c, cJSON *logprobs, const char *finish) {
    if (logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs);
    else cJSON_AddNullToObject(c, "logprobs");
    add_finish(c, finish);
    cJSON_AddItemToArray(choices, c);
    if (g->o.include_usage) cJSON_AddNullToObject(o, "usage");
    return o;
}

/* ---- chat ------------------------------------------------------------------ */
/* {token, logprob, bytes, top_logprobs: [...]} for one token event. */
static cJSON *chat_logprob(const gen *g, const job_event *ev) { return fmt_token_logprobs(g, ev, false); }

cJSON *fmt_chat_chunk(const gen *g, cJSON *delta, cJSON *logprobs, const char *finish) {
    cJSON *o = head(g, "chat.completion.chunk"), *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", g->index);
    cJSON_AddItemToObject(c, "delta", delta);
    return chunk_end(g, o, choices, c, logprobs, finish);
}

static void chat_start(gen *g) {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "role", "assistant");
    cJSON_AddStringToObject(d, "content", "");
    gen_sse_json(g, fmt_chat_chunk(g, d, NULL, NULL));
}

static void chat_token(gen *g, const char *text, size_t len, const job_event *ev) {
    cJSON *lp = g->o.logprobs && ev ? chat_logprob(g, ev) : NULL;
    if (!g->stream_started) {   /* whole answer: keep the logprobs */
        if (!lp) return;
        if (!g->acc) g->acc = cJSON_CreateArray();
        cJSON_AddItemToArray(g->acc, lp);
        return;
    }
    cJSON *lps = NULL;
    if (lp) {
        lps = cJSON_CreateObject();
        cJSON_AddItemToArray(cJSON_AddArrayToObject(lps, "content"), lp);
    }
    if (g->o.parse_chat) { fmt_chat_parsed_token(g, text, len, lps); return; }
    cJSON *d = cJSON_CreateObject();
    add_text(d, "content", text, len);
    gen_sse_json(g, fmt_chat_chunk(g, d, lps, NULL));
}

static void chat_finish(gen *g) {
    const char *finish = gen_finish_oai(g);
    /* a model that stopped to call tools: "tool_calls" (cut short: "length") */
    if (g->stream_started) {
        if (g->o.parse_chat && fmt_chat_parsed_end(g) > 0 && !strcmp(finish, "stop")) finish = "tool_calls";
        gen_sse_json(g, fmt_chat_chunk(g, cJSON_CreateObject(), NULL, finish));
        if (!gen_stream_last(g)) return;   /* other choices still running */
        if (g->o.include_usage) {
            cJSON *o = head(g, "chat.completion.chunk");
            cJSON_AddArrayToObject(o, "choices");
            cJSON_AddItemToObject(o, "usage", fmt_usage(g));
            cJSON_AddItemToObject(o, "timings", fmt_timings(g));
            gen_sse_json(g, o);
        }
        gen_sse_raw(g, "[DONE]");
        gen_stream_end(g);
        return;
    }
    cJSON *o = head(g, "chat.completion"), *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject(), *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", g->index);
    cJSON_AddStringToObject(m, "role", "assistant");
    if (!g->o.parse_chat) add_text(m, "content", g->text ? g->text : "", g->text_len);
    else if (fmt_chat_parsed_message(g, m) > 0 && !strcmp(finish, "stop")) finish = "tool_calls";
    cJSON_AddItemToObject(c, "message", m);
    if (g->o.logprobs) {
        cJSON *lp = cJSON_CreateObject();
        cJSON_AddItemToObject(lp, "content", g->acc ? g->acc : cJSON_CreateArray());
        g->acc = NULL;
        cJSON_AddItemToObject(c, "logprobs", lp);
    } else {
        cJSON_AddNullToObject(c, "logprobs");
    }
    add_finish(c, finish);
    cJSON_AddItemToArray(choices, c);
    cJSON_AddItemToObject(o, "usage", fmt_usage(g));
    cJSON_AddItemToObject(o, "timings", fmt_timings(g));
    gen_answer(g, o);
}

const gen_fmt fmt_chat = { chat_start, chat_token, chat_finish, NULL };

/* ---- completions --------------------------------------------------------------- */
/* The legacy logprobs object: tokens, token_logprobs, top_logprobs, text_offset. */
static cJSON *cmpl_logprobs_new(void) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddArrayToObject(o, "tokens");
    cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON_AddArrayToObject(o, "top_logprobs");
    cJSON_AddArrayToObject(o, "text_offset");
    return o;
}

/* One entry: the token, its logprob and alternatives (ev NULL: null for
 * both, as for the prompt's first token), at text offset off. */
static void cmpl_logprobs_entry(const gen *g, cJSON *o, int32_t token, const job_event *ev, size_t off) {
    cJSON *text;
    fmt_token_piece(g->s, token, &text, NULL);
    cJSON_AddItemToArray(cJSON_GetObjectItem(o, "tokens"), text);
    cJSON_AddItemToArray(cJSON_GetObjectItem(o, "token_logprobs"), ev ? cJSON_CreateNumber(ev->logprob) : cJSON_CreateNull());
    cJSON *top = ev ? cJSON_CreateObject() : cJSON_CreateNull();
    for (int i = 0; ev && i < ev->n_top; i++) {
        char buf[1024];
        size_t n = tokenizer_token_bytes(g->s->model->tok, ev->top[i].id, true, buf, sizeof buf - 1);
        char *key = utf8_sanitize(buf, n < sizeof buf ? n : sizeof buf - 1, NULL);
        if (key) cJSON_AddNumberToObject(top, key, ev->top[i].logprob);
        free(key);
    }
    cJSON_AddItemToArray(cJSON_GetObjectItem(o, "top_logprobs"), top);
    cJSON_AddItemToArray(cJSON_GetObjectItem(o, "text_offset"), cJSON_CreateNumber((double)off));
}

static void cmpl_logprobs_add(const gen *g, cJSON *o, const job_event *ev) {
    cmpl_logprobs_entry(g, o, ev->token, ev, g->text_offset + (g->o.echo && g->echo ? strlen(g->echo) : 0));
}

static cJSON *cmpl_chunk(const gen *g, const char *text, size_t len, cJSON *logprobs, const char *finish) {
    cJSON *o = head(g, "text_completion"), *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    add_text(c, "text", text, len);
    cJSON_AddNumberToObject(c, "index", g->index);
    return chunk_end(g, o, choices, c, logprobs, finish);
}

/* ---- echo with logprobs: the prompt's tokens come first ---- */
static bool echo_logprobs(const gen *g) { return g->o.echo && g->echo && g->o.logprobs; }

/* The bytes a prompt token stands for in the echoed text. */
static size_t piece_len(const gen *g, int32_t id) {
    char buf[1024];
    size_t n = tokenizer_token_bytes(g->s->model->tok, id, false, buf, sizeof buf);
    return n < sizeof buf ? n : sizeof buf;
}

/* A prompt token's text offset: its decoded bytes before it, less what the
 * decoded prompt has beyond the echoed text at its start (SentencePiece's
 * added space), held to the echoed text. */
static size_t prompt_offset(const gen *g) {
    size_t n_echo = strlen(g->echo), skip = g->prompt_bytes > n_echo ? g->prompt_bytes - n_echo : 0;
    size_t off = g->prompt_off > skip ? g->prompt_off - skip : 0;
    return off < n_echo ? off : n_echo;
}

/* The prompt's first entry, which has no logprob (OpenAI gives null), once
 * and before any other. */
static void cmpl_prompt_begin(gen *g) {
    if (g->prompt_lp_begun || !echo_logprobs(g)) return;
    g->prompt_lp_begun = true;
    if (!g->acc) g->acc = cmpl_logprobs_new();
    cmpl_logprobs_entry(g, g->acc, g->prompt0, NULL, 0);
    g->prompt_off = piece_len(g, g->prompt0);
}

static void cmpl_prompt(gen *g, const job_event *ev) {
    if (!echo_logprobs(g)) return;
    cmpl_prompt_begin(g);
    cmpl_logprobs_entry(g, g->acc, ev->token, ev, prompt_offset(g));
    g->prompt_off += piece_len(g, ev->token);
}

/* A stream's echo chunk, with the prompt's logprobs when asked for: before
 * the first token's chunk, or the end. */
static void cmpl_echo(gen *g) {
    if (g->echo_sent || !g->o.echo || !g->echo) return;
    g->echo_sent = true;
    cJSON *l = NULL;
    if (g->o.logprobs) {
        cmpl_prompt_begin(g);
        l = g->acc;
        g->acc = NULL;
    }
    gen_sse_json(g, cmpl_chunk(g, g->echo, strlen(g->echo), l, NULL));
}

static void cmpl_start(gen *g) {
    if (!g->o.logprobs) cmpl_echo(g);   /* with logprobs it waits for the prompt's */
}

static void cmpl_token(gen *g, const char *text, size_t len, const job_event *ev) {
    bool lp = g->o.logprobs && ev;
    if (!g->stream_started) {
        if (!lp) return;
        cmpl_prompt_begin(g);
        if (!g->acc) g->acc = cmpl_logprobs_new();
        cmpl_logprobs_add(g, g->acc, ev);
        return;
    }
    cmpl_echo(g);
    cJSON *l = NULL;
    if (lp) {
        l = cmpl_logprobs_new();
        cmpl_logprobs_add(g, l, ev);
    }
    gen_sse_json(g, cmpl_chunk(g, text, len, l, NULL));
}

static void cmpl_finish(gen *g) {
    const char *finish = gen_finish_oai(g);
    if (g->stream_started) {
        cmpl_echo(g);
        gen_sse_json(g, cmpl_chunk(g, "", 0, NULL, finish));
        if (!gen_stream_last(g)) return;   /* other choices still running */
        if (g->o.include_usage) {
            cJSON *o = head(g, "text_completion");
            cJSON_AddArrayToObject(o, "choices");
            cJSON_AddItemToObject(o, "usage", fmt_usage(g));
            gen_sse_json(g, o);
        }
        gen_sse_raw(g, "[DONE]");
        gen_stream_end(g);
        return;
    }
    size_t n_echo = g->o.echo && g->echo ? strlen(g->echo) : 0;
    cmpl_prompt_begin(g);
    char *all = malloc(n_echo + g->text_len + 1);
    if (!all) { gen_fail(g, 500, NULL, "out of memory"); return; }
    if (n_echo) memcpy(all, g->echo, n_echo);
    if (g->text_len) memcpy(all + n_echo, g->text, g->text_len);
    cJSON *l = g->o.logprobs ? (g->acc ? g->acc : cmpl_logprobs_new()) : NULL;
    g->acc = NULL;
    cJSON *o = cmpl_chunk(g, all, n_echo + g->text_len, l, finish);
    free(all);
    cJSON_DeleteItemFromObject(o, "usage");
    cJSON_AddItemToObject(o, "usage", fmt_usage(g));
    cJSON_AddItemToObject(o, "timings", fmt_timings(g));
    gen_answer(g, o);
}

const gen_fmt fmt_completion = { cmpl_start, cmpl_token, cmpl_finish, cmpl_prompt };
