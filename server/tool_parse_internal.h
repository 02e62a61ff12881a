/* The chat output parser's insides, shared by tool_parse.c (the machine,
 * text, reasoning and JSON calls) and tool_formats.c (the formats with
 * markers of their own: Mistral, DeepSeek, harmony, <function=...>). */
#ifndef HEARTH_TOOL_PARSE_INTERNAL_H
#define HEARTH_TOOL_PARSE_INTERNAL_H

#include "server/tool_parse.h"
#include "server/tool_json.h"
#include <stdbool.h>
#include <stddef.h>

#define MAX_NAME 256   /* a function name or harmony header longer than this is not one */

typedef enum {
    M_START, M_THINK, M_AFTER_THINK, M_CONTENT_START, M_TEXT, M_BARE, M_AFTER_CALL,
    M_OBJ, M_CLOSE, M_ARR, M_ARR_ELEM, M_ARR_SEP, M_MIS, M_MIS_NAME, M_MIS_ID, M_ARGS,
    M_DS_NEXT, M_DS_HEAD, M_DS_NAME, M_DS_FENCE, M_DS_FENCE_END, M_DS_END,
    M_H_TEXT, M_H_HEAD, M_H_BODY, M_FN_NAME, M_FN_BODY, M_FN_END
} mode;

enum { K_OTHER, K_NAME, K_ARGS, K_ID };
enum { H_CONTENT, H_REASONING, H_CALL };

struct tool_parser {
    tool_parse_opts o;
    tp_emit_fn fn;
    void *user;
    char *buf;
    size_t len, cap, pos;
    size_t seg;               /* where the current call's text began (given back if it breaks) */
    mode m, after;            /* after: where an object or raw arguments lead once complete */
    bool bare_ok;             /* a bare JSON call may still begin the content */
    bool in_array;            /* the objects are elements of a list of calls */
    bool oom;
    bool think_begun;         /* reasoning text has begun (leading whitespace skipped) */
    bool call_open;           /* seg..pos is a call (or harmony header) not yet decided */
    int n_calls;
    /* the current call */
    bool announced, suppressed, streaming;
    char *name, *id;
    size_t args_sent;
    json_scan js;
    size_t obj_start, key_start, val_start;
    int key_kind, val_kind;
    bool val_active;
    size_t args_s, args_e;    /* the arguments value's raw span in an object */
    bool have_name;
    int h_kind;               /* harmony: what the body is */
    const char *close_mark;   /* the marker that may close a call ("</tool_call>") */
};

#define DS_CALLS_BEGIN "<\xEF\xBD\x9Ctool\xE2\x96\x81""calls\xE2\x96\x81""begin\xEF\xBD\x9C>"
#define DS_CALLS_END "<\xEF\xBD\x9Ctool\xE2\x96\x81""calls\xE2\x96\x81""end\xEF\xBD\x9C>"
#define DS_CALL_BEGIN "<\xEF\xBD\x9Ctool\xE2\x96\x81""call\xE2\x96\x81""begin\xEF\xBD\x9C>"
#define DS_CALL_END "<\xEF\xBD\x9Ctool\xE2\x96\x81""call\xE2\x96\x81""end\xEF\xBD\x9C>"
#define DS_SEP "<\xEF\xBD\x9Ctool\xE2\x96\x81sep\xEF\xBD\x9C>"

/* text helpers (tool_parse.c) */
const char *tp_find_bytes(const char *h, size_t hn, const char *n, size_t nn);
bool tp_is_ws(char c);
/* Earliest whole marker in buf[from..len): its offset (len if none) and
 * index in *which (-1). *hold: where a tail that may begin a marker starts. */
size_t tp_find_mark(const tool_parser *p, size_t from, const char *const *marks, int *which, size_t *hold);
/* 1: lit is at pos; 0: the text so far is a proper prefix of it; -1: it is not there. */
int tp_match_at(const tool_parser *p, const char *lit);
bool tp_skip_ws(tool_parser *p);
char *tp_dup_range(const char *s, size_t n);
char *tp_take_name(tool_parser *p, size_t a, size_t b);
/* events */
void tp_emit(tool_parser *p, tp_kind k, const char *t, size_t n);
void tp_reset_call(tool_parser *p);
void tp_announce(tool_parser *p);
void tp_whole_call(tool_parser *p, const char *args, size_t n);
void tp_call_failed(tool_parser *p);
void tp_call_done(tool_parser *p);
/* raw JSON arguments, streamed once the name is known; then `after` */
void tp_begin_args(tool_parser *p, mode after);
/* the formats' states (tool_formats.c) */
void tp_step_function(tool_parser *p);
void tp_step_mistral(tool_parser *p);
void tp_step_deepseek(tool_parser *p);
void tp_step_harmony(tool_parser *p);
/* harmony: the message body ended at `at` (a call held whole is reported) */
void tp_h_body_end(tool_parser *p, size_t at);

#endif
