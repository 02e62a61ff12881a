/* libFuzzer target: model output through the chat output parser
 * (server/tool_parse.c) and the incremental JSON validator. Byte 0 picks
 * the format and options, byte 1 how the text is cut into pieces; the rest
 * is the text. Checks: calls are reported with indices 0, 1, 2... and
 * arguments only for the latest one; with tools and reasoning off (and not
 * harmony) the content is the text byte for byte; cut into pieces or whole,
 * a held parse (tool_parse_all) gives the same content, reasoning and calls
 * as the streamed one when no call broke after it was reported (checked by
 * comparing with hold on both sides); json_scan never reads past a byte it
 * rejected. */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "server/tool_parse.h"
#include "server/tool_json.h"

typedef struct {
    char *content, *reasoning;
    size_t nc, nr, cap_c, cap_r;
    int n_calls;
    size_t args_len;
} sink;

static void put(char **b, size_t *n, size_t *cap, const char *t, size_t len) {
    if (*n + len + 1 > *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        while (c < *n + len + 1) c *= 2;
        *b = realloc(*b, c);
        if (!*b) abort();
        *cap = c;
    }
    memcpy(*b + *n, t, len);
    *n += len;
}

static void on_ev(void *u, const tp_event *ev) {
    sink *s = u;
    switch (ev->kind) {
    case TP_CONTENT: put(&s->content, &s->nc, &s->cap_c, ev->text, ev->len); break;
    case TP_REASONING: put(&s->reasoning, &s->nr, &s->cap_r, ev->text, ev->len); break;
    case TP_CALL:
        if (ev->index != s->n_calls || !ev->len || strlen(ev->text) != ev->len) abort();
        s->n_calls++;
        break;
    case TP_ARGS:
        if (ev->index != s->n_calls - 1 || !ev->len) abort();
        s->args_len += ev->len;
        break;
    }
}

static void run(const tool_parse_opts *o, const uint8_t *t, size_t n, unsigned cut, sink *s) {
    memset(s, 0, sizeof *s);
    tool_parser *p = tool_parser_new(o, on_ev, s);
    if (!p) abort();
    size_t at = 0, step = 1 + cut % 17;
    while (at < n) {
        size_t k = n - at < step ? n - at : step;
        if (!tool_parser_feed(p, (const char *)t + at, k)) abort();
        at += k;
        step = 1 + (step * 7 + cut) % 23;
    }
    if (!tool_parser_finish(p)) abort();
    tool_parser_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    uint8_t opt = data[0], cut = data[1];
    const uint8_t *t = data + 2;
    size_t n = size - 2;
    tool_parse_opts o = {
        .fmt = (tool_format)(opt % TOOL_FMT_COUNT), .tools = (opt & 8) != 0, .reasoning = (opt & 16) != 0,
        .think_open = (opt & 32) != 0, .hold_calls = (opt & 64) != 0, .max_calls = (opt & 128) ? 1 : 0,
    };
    sink a, b;
    run(&o, t, n, cut, &a);
    if (!o.tools && !o.reasoning && o.fmt != TOOL_FMT_HARMONY && (a.nc != n || (n && memcmp(a.content, t, n)))) abort();
    if (o.hold_calls) {   /* held: how the text is cut changes nothing */
        run(&o, t, n, cut + 5, &b);
        if (a.nc != b.nc || a.nr != b.nr || a.n_calls != b.n_calls || a.args_len != b.args_len ||
            (a.nc && memcmp(a.content, b.content, a.nc)) || (a.nr && memcmp(a.reasoning, b.reasoning, a.nr)))
            abort();
        tool_parse_result r;
        if (!tool_parse_all(&o, (const char *)t, n, &r)) abort();
        if (r.content_len != a.nc || r.reasoning_len != a.nr || r.n_calls != a.n_calls) abort();
        tool_parse_result_free(&r);
        free(b.content);
        free(b.reasoning);
    }
    free(a.content);
    free(a.reasoning);
    json_scan js;
    json_scan_init(&js);
    for (size_t i = 0; i < n; i++) {
        int rc = json_scan_byte(&js, t[i]);
        if (rc == JSCAN_DONE && js.depth != 0) abort();
        if (rc != JSCAN_MORE) break;
        if (js.depth < 0 || js.depth > JSCAN_MAX_DEPTH) abort();
    }
    return 0;
}
