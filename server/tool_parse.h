/* The model's chat output split into reasoning, content and tool calls.
 *
 * Pure functions over text: no server state. A tool_parser is fed the text
 * as the model writes it and reports what it can already say: content and
 * reasoning fragments, a tool call (its index, name and any id the model
 * wrote), then the call's argument fragments. Text that may still turn out
 * to be the start of a tool call or a closing </think> is held back until
 * decided. The formats are those of the common families:
 *   hermes    <tool_call>{"name": .., "arguments": {..}}</tool_call>  (Qwen, Hermes)
 *   llama3    {"name": .., "parameters": {..}} alone, or after <|python_tag|>
 *   mistral   [TOOL_CALLS][{"name": .., "arguments": {..}}, ..]  and  [TOOL_CALLS]name[CALL_ID]id[ARGS]{..}
 *   harmony   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{..}<|call|>  (gpt-oss;
 *             the analysis channel is reasoning, final is content)
 *   deepseek  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{..}\n```<｜tool▁call▁end｜>..
 *             (R1 / V3), and NAME<｜tool▁sep｜>{..} (V3.1)
 *   granite   <|tool_call|>[{"name": .., "arguments": {..}}]  (Granite, Phi-4-mini with <|/tool_call|>)
 *   generic   the whole answer one JSON value: a call, a list of calls or {"tool_calls": [..]}
 * A call that does not parse is given back as content, as the model wrote it. */
#ifndef HEARTH_TOOL_PARSE_H
#define HEARTH_TOOL_PARSE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    TOOL_FMT_GENERIC = 0, TOOL_FMT_HERMES, TOOL_FMT_LLAMA3, TOOL_FMT_MISTRAL, TOOL_FMT_HARMONY,
    TOOL_FMT_DEEPSEEK, TOOL_FMT_GRANITE, TOOL_FMT_COUNT
} tool_format;

/* The format a chat template's source writes tool calls in (llama-server's
 * detection by the markers the template spells); has_token (may be NULL)
 * says whether the vocabulary holds a token, for a model with no template. */
typedef bool (*tool_has_token_fn)(void *user, const char *text);
tool_format tool_format_detect(const char *template_src, tool_has_token_fn has_token, void *user);
const char *tool_format_name(tool_format f);
/* The rendered prompt ends inside an opened <think> (DeepSeek-R1, Qwen3
 * thinking templates), so the answer begins with reasoning. */
bool tool_prompt_opens_think(const char *prompt, size_t len);

typedef struct tool_parse_opts {
    tool_format fmt;
    bool tools;          /* find tool calls */
    bool reasoning;      /* <think>..</think> and harmony's analysis are reasoning, not content */
    bool think_open;     /* the prompt opened <think> (tool_prompt_opens_think) */
    bool hold_calls;     /* report a call only once whole (a whole answer: a broken call is content) */
    int max_calls;       /* calls reported at most (parallel_tool_calls false: 1); 0: no limit */
} tool_parse_opts;

typedef enum { TP_CONTENT, TP_REASONING, TP_CALL, TP_ARGS } tp_kind;

typedef struct tp_event {
    tp_kind kind;
    int index;           /* TP_CALL, TP_ARGS: which call, from 0 */
    const char *text;    /* CONTENT, REASONING, ARGS: the fragment; CALL: the name */
    size_t len;
    const char *id;      /* TP_CALL: the id the model wrote, or NULL */
} tp_event;

typedef void (*tp_emit_fn)(void *user, const tp_event *ev);

typedef struct tool_parser tool_parser;

tool_parser *tool_parser_new(const tool_parse_opts *o, tp_emit_fn fn, void *user);
/* false without memory (the parser is then unusable). */
bool tool_parser_feed(tool_parser *p, const char *text, size_t len);
/* The output ended: what was held back is decided and reported. */
bool tool_parser_finish(tool_parser *p);
int tool_parser_n_calls(const tool_parser *p);
void tool_parser_free(tool_parser *p);

/* A whole answer at once. */
typedef struct tool_call { char *name, *arguments, *id; } tool_call;
typedef struct tool_parse_result {
    char *content, *reasoning;   /* NUL-terminated, never NULL after success */
    size_t content_len, reasoning_len;
    tool_call *calls;
    int n_calls;
} tool_parse_result;

bool tool_parse_all(const tool_parse_opts *o, const char *text, size_t len, tool_parse_result *r);
void tool_parse_result_free(tool_parse_result *r);

#endif
