/* Chat answers through the output parser (server/tool_parse.h): a stream's
 * chunks as delta.content, delta.reasoning_content and delta.tool_calls
 * (index, id, type and name first, then the arguments in fragments); a whole
 * answer's message with content (null when there are only calls),
 * reasoning_content and tool_calls. */
#include "server/fmt.h"
#include "server/utf8.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A call's id when the model wrote none: the same in a stream and in a whole
 * answer (derived from the answer's id and the call's index). Mistral's
 * templates take nine letters and digits; the others OpenAI's call_ form. */
static void call_id(const gen *g, int index, char *out, size_t cap) {
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t h = 1469598103934665603ull;
    for (const char *p = g->id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h ^= (uint64_t)(index + 1) * 0x9E3779B97F4A7C15ull;
    bool mistral = g->o.tp.fmt == TOOL_FMT_MISTRAL;
    size_t n = mistral ? 9 : 24, at = 0;
    if (!mistral) at = (size_t)snprintf(out, cap, "call_");
    for (size_t i = 0; i < n && at + 1 < cap; i++) {
        h ^= h >> 29;
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 32;
        out[at++] = abc[h % (sizeof abc - 1)];
    }
    out[at < cap ? at : cap - 1] = 0;
}

static void add_text(cJSON *o, const char *key, const char *text, size_t len) {
    cJSON *v = utf8_json_string(text, len);
    if (v) cJSON_AddItemToObject(o, key, v);
}

/* {"index": i, ...} inside delta.tool_calls */
static cJSON *call_delta(cJSON *delta, int index) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", index);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(delta, "tool_calls"), c);
    return c;
}

static void on_event(void *user, const tp_event *ev) {
    gen *g = user;
    cJSON *d = cJSON_CreateObject();
    char id[48];
    switch (ev->kind) {
    case TP_CONTENT: add_text(d, "content", ev->text, ev->len); break;
    case TP_REASONING: add_text(d, "reasoning_content", ev->text, ev->len); break;
    case TP_CALL: {
        cJSON *c = call_delta(d, ev->index);
        if (ev->id) snprintf(id, sizeof id, "%.47s", ev->id);
        else call_id(g, ev->index, id, sizeof id);
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
        cJSON *f = cJSON_AddObjectToObject(c, "function");
        add_text(f, "name", ev->text, ev->len);
        cJSON_AddStringToObject(f, "arguments", "");
        break;
    }
    case TP_ARGS:
        add_text(cJSON_AddObjectToObject(call_delta(d, ev->index), "function"), "arguments", ev->text, ev->len);
        break;
    }
    cJSON *lp = g->pending_lp;
    g->pending_lp = NULL;
    gen_sse_json(g, fmt_chat_chunk(g, d, lp, NULL));
}

void fmt_chat_parsed_token(gen *g, const char *text, size_t len, cJSON *logprobs) {
    if (!g->tp) {
        g->o.tp.hold_calls = false;
        if (!(g->tp = tool_parser_new(&g->o.tp, on_event, g))) {
            cJSON_Delete(logprobs);
            atomic_store(&g->lost, true);
            return;
        }
    }
    cJSON_Delete(g->pending_lp);
    g->pending_lp = logprobs;
    if (!tool_parser_feed(g->tp, text, len)) atomic_store(&g->lost, true);
    if (g->pending_lp) {   /* held back: the token's logprobs go out on their own */
        cJSON *lp = g->pending_lp;
        g->pending_lp = NULL;
        gen_sse_json(g, fmt_chat_chunk(g, cJSON_CreateObject(), lp, NULL));
    }
}

int fmt_chat_parsed_end(gen *g) {
    if (!g->tp) return 0;
    if (!tool_parser_finish(g->tp)) atomic_store(&g->lost, true);
    return tool_parser_n_calls(g->tp);
}

int fmt_chat_parsed_message(gen *g, cJSON *m) {
    tool_parse_opts o = g->o.tp;
    o.hold_calls = true;
    tool_parse_result r;
    if (!tool_parse_all(&o, g->text ? g->text : "", g->text_len, &r)) {
        atomic_store(&g->lost, true);
        cJSON_AddStringToObject(m, "content", "");
        return 0;
    }
    if (r.n_calls && !r.content_len) cJSON_AddNullToObject(m, "content");
    else add_text(m, "content", r.content, r.content_len);
    if (r.reasoning_len) add_text(m, "reasoning_content", r.reasoning, r.reasoning_len);
    if (r.n_calls) {
        cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls");
        for (int i = 0; i < r.n_calls; i++) {
            char id[48];
            if (r.calls[i].id) snprintf(id, sizeof id, "%.47s", r.calls[i].id);
            else call_id(g, i, id, sizeof id);
            cJSON *c = cJSON_CreateObject(), *f;
            cJSON_AddStringToObject(c, "id", id);
            cJSON_AddStringToObject(c, "type", "function");
            f = cJSON_AddObjectToObject(c, "function");
            add_text(f, "name", r.calls[i].name, strlen(r.calls[i].name));
            add_text(f, "arguments", r.calls[i].arguments, strlen(r.calls[i].arguments));
            cJSON_AddItemToArray(calls, c);
        }
    }
    int n = r.n_calls;
    tool_parse_result_free(&r);
    return n;
}
