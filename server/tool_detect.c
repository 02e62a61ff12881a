/* Which tool-call format a model writes, judged from its chat template's
 * source (the markers the template spells out, as llama-server's chat-format
 * detection does) or its vocabulary; and the whole-answer form of the
 * parser (see tool_parse.h). */
#include "server/tool_parse.h"
#include <stdlib.h>
#include <string.h>

static const char *const names[TOOL_FMT_COUNT] = {
    "generic", "hermes", "llama3", "mistral", "harmony", "deepseek", "granite",
};

const char *tool_format_name(tool_format f) { return f >= 0 && f < TOOL_FMT_COUNT ? names[f] : "generic"; }

/* The markers, most specific first: a template may mention several. */
static const struct { const char *mark; tool_format f; } marks[] = {
    { "<|channel|>", TOOL_FMT_HARMONY },
    { "<\xEF\xBD\x9Ctool\xE2\x96\x81""calls\xE2\x96\x81""begin\xEF\xBD\x9C>", TOOL_FMT_DEEPSEEK },
    { "<\xEF\xBD\x9Ctool\xE2\x96\x81""call\xE2\x96\x81""begin\xEF\xBD\x9C>", TOOL_FMT_DEEPSEEK },
    { "[TOOL_CALLS]", TOOL_FMT_MISTRAL },
    { "<tool_call>", TOOL_FMT_HERMES },
    { "<|tool_call|>", TOOL_FMT_GRANITE },
    { "<|python_tag|>", TOOL_FMT_LLAMA3 },
};

tool_format tool_format_detect(const char *src, tool_has_token_fn has_token, void *user) {
    int n = (int)(sizeof marks / sizeof marks[0]);
    if (src && *src) {
        for (int i = 0; i < n; i++)
            if (strstr(src, marks[i].mark)) return marks[i].f;
        if (strstr(src, "<|start_header_id|>") && strstr(src, "ipython")) return TOOL_FMT_LLAMA3;
        return TOOL_FMT_GENERIC;
    }
    if (has_token)
        for (int i = 0; i < n; i++)
            if (has_token(user, marks[i].mark)) return marks[i].f;
    return TOOL_FMT_GENERIC;
}

bool tool_prompt_opens_think(const char *prompt, size_t len) {
    while (len && (prompt[len - 1] == ' ' || prompt[len - 1] == '\n' || prompt[len - 1] == '\r' || prompt[len - 1] == '\t'))
        len--;
    return len >= 7 && !memcmp(prompt + len - 7, "<think>", 7);
}

/* ---- the whole answer ------------------------------------------------------------ */
typedef struct {
    tool_parse_result *r;
    size_t content_cap, reasoning_cap;
    int calls_cap;
    bool oom;
} collect;

static bool put(char **s, size_t *len, size_t *cap, const char *t, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 64;
        while (c < *len + n + 1) c *= 2;
        char *ns = realloc(*s, c);
        if (!ns) return false;
        *s = ns;
        *cap = c;
    }
    memcpy(*s + *len, t, n);
    *len += n;
    (*s)[*len] = 0;
    return true;
}

static void on_event(void *user, const tp_event *ev) {
    collect *c = user;
    tool_parse_result *r = c->r;
    if (c->oom) return;
    switch (ev->kind) {
    case TP_CONTENT: c->oom = !put(&r->content, &r->content_len, &c->content_cap, ev->text, ev->len); break;
    case TP_REASONING: c->oom = !put(&r->reasoning, &r->reasoning_len, &c->reasoning_cap, ev->text, ev->len); break;
    case TP_CALL: {
        if (r->n_calls == c->calls_cap) {
            int nc = c->calls_cap ? c->calls_cap * 2 : 4;
            tool_call *n = realloc(r->calls, sizeof *n * (size_t)nc);
            if (!n) { c->oom = true; return; }
            r->calls = n;
            c->calls_cap = nc;
        }
        tool_call *t = &r->calls[r->n_calls++];
        t->name = strndup(ev->text, ev->len);
        t->id = ev->id ? strdup(ev->id) : NULL;
        t->arguments = strdup("");
        c->oom = !t->name || !t->arguments || (ev->id && !t->id);
        break;
    }
    case TP_ARGS: {
        tool_call *t = &r->calls[ev->index];
        size_t len = strlen(t->arguments), cap = len + 1;
        c->oom = !put(&t->arguments, &len, &cap, ev->text, ev->len);
        break;
    }
    }
}

bool tool_parse_all(const tool_parse_opts *o, const char *text, size_t len, tool_parse_result *r) {
    memset(r, 0, sizeof *r);
    collect c = { .r = r };
    tool_parser *p = tool_parser_new(o, on_event, &c);
    bool ok = p && tool_parser_feed(p, text, len) && tool_parser_finish(p);
    tool_parser_free(p);
    ok = ok && !c.oom && put(&r->content, &r->content_len, &c.content_cap, "", 0) &&
         put(&r->reasoning, &r->reasoning_len, &c.reasoning_cap, "", 0);
    if (!ok) tool_parse_result_free(r);
    return ok;
}

void tool_parse_result_free(tool_parse_result *r) {
    for (int i = 0; i < r->n_calls; i++) free(r->calls[i].name), free(r->calls[i].arguments), free(r->calls[i].id);
    free(r->calls);
    free(r->content);
    free(r->reasoning);
    memset(r, 0, sizeof *r);
}
