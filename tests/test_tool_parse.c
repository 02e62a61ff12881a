/* The chat output parser (server/tool_parse.h) on every format: whole
 * answers, the same text fed in two pieces cut at every byte and one byte
 * at a time (the events must add up to the whole answer's), broken calls
 * given back as content, limits, detection from template sources, and
 * random bytes (no crash, every byte accounted for). */
#include "server/tool_parse.h"
#include "tests/test.h"
#include <cjson/cJSON.h>
#include <stdbool.h>

#define DS_CALLS_B "<\xEF\xBD\x9Ctool\xE2\x96\x81""calls\xE2\x96\x81""begin\xEF\xBD\x9C>"
#define DS_CALLS_E "<\xEF\xBD\x9Ctool\xE2\x96\x81""calls\xE2\x96\x81""end\xEF\xBD\x9C>"
#define DS_CALL_B "<\xEF\xBD\x9Ctool\xE2\x96\x81""call\xE2\x96\x81""begin\xEF\xBD\x9C>"
#define DS_CALL_E "<\xEF\xBD\x9Ctool\xE2\x96\x81""call\xE2\x96\x81""end\xEF\xBD\x9C>"
#define DS_SEP "<\xEF\xBD\x9Ctool\xE2\x96\x81sep\xEF\xBD\x9C>"

typedef struct {
    const char *what;
    tool_format fmt;
    bool tools, reasoning, think_open;
    bool whole_only;   /* broken after the call was reported: streaming cannot take it back */
    const char *in;
    const char *content, *reasoning_text;
    int n_calls;
    const char *calls[4][3];   /* name, arguments (JSON), id or NULL */
} tcase;

static const tcase cases[] = {
    { "plain text", TOOL_FMT_HERMES, true, true, false, false, "Hello there, friend.", "Hello there, friend.", "", 0, {{0}} },
    { "hermes one call", TOOL_FMT_HERMES, true, true, false, false,
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
      "", "", 1, {{ "get_weather", "{\"city\":\"Paris\",\"days\":3}", NULL }} },
    { "hermes text then two calls", TOOL_FMT_HERMES, true, true, false, false,
      "Let me check.\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, 2, {\"y\": null}]}}\n</tool_call>\n"
      "<tool_call>\n{\"arguments\": {\"q\": \"s\\\"t\"}, \"name\": \"b\"}\n</tool_call>",
      "Let me check.", "", 2, {{ "a", "{\"x\":[1,2,{\"y\":null}]}", NULL }, { "b", "{\"q\":\"s\\\"t\"}", NULL }} },
    { "qwen3 think then call", TOOL_FMT_HERMES, true, true, false, false,
      "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {}}\n</tool_call>",
      "", "The user wants weather.", 1, {{ "w", "{}", NULL }} },
    { "think, reasoning off", TOOL_FMT_HERMES, false, false, false, false, "<think>a</think>b", "<think>a</think>b", "", 0, {{0}} },
    { "think opened by the prompt", TOOL_FMT_GENERIC, false, true, true, false, "I ponder.</think>\n\nThe answer is 4.",
      "The answer is 4.", "I ponder.", 0, {{0}} },
    { "think never closed", TOOL_FMT_GENERIC, false, true, false, false, "<think>still thinking", "", "still thinking", 0, {{0}} },
    { "arguments as a string", TOOL_FMT_HERMES, true, false, false, false,
      "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", "", "", 1, {{ "f", "{\"a\":1}", NULL }} },
    { "hermes broken JSON is content", TOOL_FMT_HERMES, true, false, false, true,
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": tru}}</tool_call> ok",
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": tru}}</tool_call> ok", "", 0, {{0}} },
    { "hermes object without a name is content", TOOL_FMT_HERMES, true, false, false, false,
      "<tool_call>{\"x\": 1}</tool_call>", "<tool_call>{\"x\": 1}</tool_call>", "", 0, {{0}} },
    { "hermes cut short", TOOL_FMT_HERMES, true, false, false, false, "Hi <tool_call>{\"name\": \"f\", \"argu",
      "Hi <tool_call>{\"name\": \"f\", \"argu", "", 0, {{0}} },
    { "tools off: markers are text", TOOL_FMT_HERMES, false, false, false, false, "<tool_call>{\"name\":\"f\"}</tool_call>",
      "<tool_call>{\"name\":\"f\"}</tool_call>", "", 0, {{0}} },
    { "qwen3-coder XML parameters", TOOL_FMT_HERMES, true, false, false, false,
      "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
      "Checking.", "", 1, {{ "get_weather", "{\"city\":\"San Francisco\",\"days\":3}", NULL }} },
    { "function tag with JSON", TOOL_FMT_HERMES, true, false, false, false,
      "<tool_call><function=f>{\"a\": 1}</function></tool_call>", "", "", 1, {{ "f", "{\"a\":1}", NULL }} },
    { "XML parameters broken is content", TOOL_FMT_HERMES, true, false, false, false,
      "<tool_call><function=f><parameter=a>1</function></tool_call>",
      "<tool_call><function=f><parameter=a>1</function></tool_call>", "", 0, {{0}} },
    { "llama3 bare JSON", TOOL_FMT_LLAMA3, true, false, false, false,
      "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}", "", "", 1, {{ "get_time", "{\"tz\":\"UTC\"}", NULL }} },
    { "llama3 python_tag, two calls", TOOL_FMT_LLAMA3, true, false, false, false,
      "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"n\": -1.5e3}}; {\"name\": \"b\", \"parameters\": {}}", "", "", 2,
      {{ "a", "{\"n\":-1.5e3}", NULL }, { "b", "{}", NULL }} },
    { "llama3 plain JSON answer is content", TOOL_FMT_LLAMA3, true, false, false, false, "{\"answer\": 42}", "{\"answer\": 42}", "", 0, {{0}} },
    { "mistral list with ids", TOOL_FMT_MISTRAL, true, false, false, false,
      "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"k\": 1}, \"id\": \"abc123def\"}, {\"name\": \"b\", \"arguments\": {}}]",
      "", "", 2, {{ "a", "{\"k\":1}", "abc123def" }, { "b", "{}", NULL }} },
    { "mistral name[ARGS]", TOOL_FMT_MISTRAL, true, false, false, false,
      "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]other[CALL_ID]X1y2Z3w4v[ARGS]{\"a\": [true]}",
      "", "", 2, {{ "get_weather", "{\"city\":\"Oslo\"}", NULL }, { "other", "{\"a\":[true]}", "X1y2Z3w4v" }} },
    { "deepseek r1", TOOL_FMT_DEEPSEEK, true, true, true, false,
      "Need the weather.</think>\n\n" DS_CALLS_B DS_CALL_B "function" DS_SEP "get_weather\n```json\n{\"location\": \"Tokyo\"}\n```"
      DS_CALL_E "\n" DS_CALL_B "function" DS_SEP "get_time\n```json\n{}\n```" DS_CALL_E DS_CALLS_E,
      "", "Need the weather.", 2, {{ "get_weather", "{\"location\":\"Tokyo\"}", NULL }, { "get_time", "{}", NULL }} },
    { "deepseek v3.1", TOOL_FMT_DEEPSEEK, true, false, false, false,
      "Sure." DS_CALLS_B DS_CALL_B "search" DS_SEP "{\"q\": \"x\"}" DS_CALL_E DS_CALLS_E, "Sure.", "", 1,
      {{ "search", "{\"q\":\"x\"}", NULL }} },
    { "harmony analysis, call", TOOL_FMT_HARMONY, true, true, false, false,
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
      "<|constrain|>json<|message|>{\"location\":\"SF\"}<|call|>",
      "", "Need weather.", 1, {{ "get_weather", "{\"location\":\"SF\"}", NULL }} },
    { "harmony final", TOOL_FMT_HARMONY, false, true, false, false,
      "<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>",
      "Hello!", "hmm", 0, {{0}} },
    { "harmony recipient before the channel", TOOL_FMT_HARMONY, true, false, false, false,
      "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{\"id\": 7}<|call|>", "", "", 1,
      {{ "lookup", "{\"id\":7}", NULL }} },
    { "granite list", TOOL_FMT_GRANITE, true, false, false, false,
      "<|tool_call|>[{\"name\": \"f\", \"arguments\": {\"a\": \"b\"}}]", "", "", 1, {{ "f", "{\"a\":\"b\"}", NULL }} },
    { "phi-4 list closed", TOOL_FMT_GRANITE, true, false, false, false,
      "<|tool_call|>[{\"name\": \"f\", \"arguments\": {}}]<|/tool_call|>", "", "", 1, {{ "f", "{}", NULL }} },
    { "phi-4-mini objects, each closed", TOOL_FMT_GRANITE, true, false, false, false,
      "<|tool_call|>{\"name\": \"f\", \"arguments\": {\"a\": 1}}<|/tool_call|><|tool_call|>{\"name\": \"g\", \"arguments\": {}}<|/tool_call|>",
      "", "", 2, {{ "f", "{\"a\":1}", NULL }, { "g", "{}", NULL }} },
    { "generic tool_calls wrapper", TOOL_FMT_GENERIC, true, false, false, false,
      "{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"c1\"}, {\"name\": \"b\", \"arguments\": {}}]}",
      "", "", 2, {{ "a", "{\"x\":1}", "c1" }, { "b", "{}", NULL }} },
    { "generic list", TOOL_FMT_GENERIC, true, false, false, false,
      "[{\"name\": \"a\", \"arguments\": {}}]", "", "", 1, {{ "a", "{}", NULL }} },
    { "generic text", TOOL_FMT_GENERIC, true, false, false, false, "  No tools needed.", "  No tools needed.", "", 0, {{0}} },
    { "marker prefix that is not one", TOOL_FMT_HERMES, true, false, false, false, "a <tool x", "a <tool x", "", 0, {{0}} },
};

/* ---- collecting events ------------------------------------------------------------ */
typedef struct {
    char content[4096], reasoning[4096];
    size_t nc, nr;
    int n_calls;
    char name[8][300], args[8][2048], id[8][300];
    size_t na[8];
    bool bad;
} got;

static void on_ev(void *u, const tp_event *ev) {
    got *g = u;
    switch (ev->kind) {
    case TP_CONTENT:
        if (g->nc + ev->len >= sizeof g->content) { g->bad = true; return; }
        memcpy(g->content + g->nc, ev->text, ev->len), g->nc += ev->len;
        break;
    case TP_REASONING:
        if (g->nr + ev->len >= sizeof g->reasoning) { g->bad = true; return; }
        memcpy(g->reasoning + g->nr, ev->text, ev->len), g->nr += ev->len;
        break;
    case TP_CALL:
        if (ev->index != g->n_calls || g->n_calls >= 8 || ev->len >= 300) { g->bad = true; return; }
        memcpy(g->name[g->n_calls], ev->text, ev->len);
        g->name[g->n_calls][ev->len] = 0;
        snprintf(g->id[g->n_calls], 300, "%s", ev->id ? ev->id : "");
        g->na[g->n_calls] = 0;
        g->n_calls++;
        break;
    case TP_ARGS:
        if (ev->index != g->n_calls - 1 || g->na[ev->index] + ev->len >= 2048) { g->bad = true; return; }
        memcpy(g->args[ev->index] + g->na[ev->index], ev->text, ev->len);
        g->na[ev->index] += ev->len;
        break;
    }
    g->content[g->nc] = g->reasoning[g->nr] = 0;
    if (g->n_calls) g->args[g->n_calls - 1][g->na[g->n_calls - 1]] = 0;
}

static bool json_equal(const char *a, const char *b) {
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    bool eq = x && y && cJSON_Compare(x, y, true);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return eq;
}

/* Feeds c->in cut at the given points (sorted, n_cuts of them). */
static void run_cuts(const tcase *c, bool hold, const size_t *cuts, int n_cuts, got *g) {
    memset(g, 0, sizeof *g);
    tool_parse_opts o = { .fmt = c->fmt, .tools = c->tools, .reasoning = c->reasoning, .think_open = c->think_open,
                          .hold_calls = hold };
    tool_parser *p = tool_parser_new(&o, on_ev, g);
    size_t len = strlen(c->in), at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        CHECK(tool_parser_feed(p, c->in + at, to - at));
        at = to;
    }
    CHECK(tool_parser_finish(p));
    tool_parser_free(p);
}

/* ids: the model's own only when the whole call is read first (streaming
 * reports a call before an id written after its arguments). */
static bool matches(const tcase *c, const got *g, bool hold) {
    if (g->bad || strcmp(g->content, c->content) || strcmp(g->reasoning, c->reasoning_text) || g->n_calls != c->n_calls)
        return false;
    for (int i = 0; i < c->n_calls; i++)
        if (strcmp(g->name[i], c->calls[i][0]) || !json_equal(g->args[i], c->calls[i][1]) ||
            (hold && strcmp(g->id[i], c->calls[i][2] ? c->calls[i][2] : "")))
            return false;
    return true;
}

static void test_cases(void) {
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const tcase *c = &cases[k];
        size_t len = strlen(c->in);
        for (int hold = c->whole_only; hold < 2; hold++) {
            got g;
            run_cuts(c, hold, NULL, 0, &g);
            CHECKF(matches(c, &g, hold), "%s (hold %d): content '%s' reasoning '%s' calls %d [%s %s]", c->what, hold,
                   g.content, g.reasoning, g.n_calls, g.n_calls ? g.name[0] : "", g.n_calls ? g.args[0] : "");
            int bad = 0;
            for (size_t cut = 1; cut < len; cut++) {   /* two pieces */
                run_cuts(c, hold, &cut, 1, &g);
                if (!matches(c, &g, hold)) bad++;
            }
            size_t *all = malloc(sizeof *all * (len ? len : 1));
            for (size_t i = 0; i + 1 < len; i++) all[i] = i + 1;
            run_cuts(c, hold, all, len ? (int)len - 1 : 0, &g);   /* byte by byte */
            if (!matches(c, &g, hold)) bad++;
            free(all);
            CHECKF(bad == 0, "%s (hold %d): %d splits differ", c->what, hold, bad);
        }
        tool_parse_opts o = { .fmt = c->fmt, .tools = c->tools, .reasoning = c->reasoning, .think_open = c->think_open,
                              .hold_calls = true };
        tool_parse_result r;
        CHECK(tool_parse_all(&o, c->in, len, &r));
        CHECKF(!strcmp(r.content, c->content) && r.n_calls == c->n_calls, "%s: tool_parse_all", c->what);
        for (int i = 0; i < r.n_calls && i < c->n_calls; i++)
            CHECKF(!strcmp(r.calls[i].name, c->calls[i][0]) && json_equal(r.calls[i].arguments, c->calls[i][1]),
                   "%s: tool_parse_all call %d", c->what, i);
        tool_parse_result_free(&r);
    }
}

/* Streaming: the name comes before the arguments are finished, and the
 * argument fragments are sent as they arrive (not all at the end). */
static void test_streams_early(void) {
    got g;
    memset(&g, 0, sizeof g);
    tool_parse_opts o = { .fmt = TOOL_FMT_HERMES, .tools = true };
    tool_parser *p = tool_parser_new(&o, on_ev, &g);
    tool_parser_feed(p, "<tool_call>\n{\"name\": \"write\", \"arguments\": {\"text\": \"once upon", 62);
    CHECK(g.n_calls == 1 && !strcmp(g.name[0], "write"));
    CHECKF(!strcmp(g.args[0], "{\"text\": \"once upon"), "early args '%s'", g.args[0]);
    CHECK(g.nc == 0);
    tool_parser_feed(p, " a time\"}}\n</tool_call>", 23);
    tool_parser_finish(p);
    CHECK(!strcmp(g.args[0], "{\"text\": \"once upon a time\"}") && g.nc == 0);
    tool_parser_free(p);
    /* max_calls 1 (parallel_tool_calls false): the second is dropped */
    memset(&g, 0, sizeof g);
    o.max_calls = 1;
    p = tool_parser_new(&o, on_ev, &g);
    const char *two = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {\"z\": 1}}</tool_call>";
    tool_parser_feed(p, two, strlen(two));
    tool_parser_finish(p);
    CHECK(g.n_calls == 1 && !strcmp(g.name[0], "a") && !strcmp(g.args[0], "{}") && g.nc == 0);
    tool_parser_free(p);
    /* held-back text is not leaked: "<tool" waits, then turns out to be text */
    memset(&g, 0, sizeof g);
    o.max_calls = 0;
    p = tool_parser_new(&o, on_ev, &g);
    tool_parser_feed(p, "x <tool", 7);
    CHECK(!strcmp(g.content, "x"));
    tool_parser_feed(p, "box", 3);
    CHECK(!strcmp(g.content, "x <toolbox"));
    tool_parser_finish(p);
    tool_parser_free(p);
}

static void test_detect(void) {
    struct { const char *src; tool_format f; } d[] = {
        { "{%- if tools %}<tool_call>\\n{{ tool_call | tojson }}\\n</tool_call>{% endif %}", TOOL_FMT_HERMES },
        { "<|start_header_id|>ipython<|end_header_id|>", TOOL_FMT_LLAMA3 },
        { "{{- '<|python_tag|>' }}", TOOL_FMT_LLAMA3 },
        { "[AVAILABLE_TOOLS] [TOOL_CALLS]", TOOL_FMT_MISTRAL },
        { "<|start|>assistant<|channel|>final<|message|>", TOOL_FMT_HARMONY },
        { "{{'<\xEF\xBD\x9Ctool\xE2\x96\x81""calls\xE2\x96\x81""begin\xEF\xBD\x9C>'}}", TOOL_FMT_DEEPSEEK },
        { "<|tool_call|>", TOOL_FMT_GRANITE },
        { "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}", TOOL_FMT_GENERIC },
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        CHECKF(tool_format_detect(d[i].src, NULL, NULL) == d[i].f, "detect %zu: %s", i, tool_format_name(tool_format_detect(d[i].src, NULL, NULL)));
    CHECK(tool_format_detect(NULL, NULL, NULL) == TOOL_FMT_GENERIC);
    CHECK(tool_prompt_opens_think("<|Assistant|><think>\n", 21));
    CHECK(!tool_prompt_opens_think("<think>\n\n</think>\n\n", 19));
    CHECK(!tool_prompt_opens_think("", 0));
}

/* Random text built from the formats' pieces: never a crash, and with
 * tools off and reasoning off the content is the input, byte for byte. */
static void test_random(void) {
    got g;
    static const char *pieces[] = {
        "<tool_call>", "</tool_call>", "{", "}", "[", "]", "\"name\"", ":", "\"f\"", ",", "\"arguments\"", "\"", "\\",
        "<think>", "</think>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|channel|>", "<|message|>", "<|call|>", "<|end|>",
        "<|start|>", "to=functions.x", DS_CALLS_B, DS_CALL_B, DS_SEP, DS_CALL_E, DS_CALLS_E, "function", "\n", " ", "```json",
        "<|python_tag|>", ";", "<|tool_call|>", "1", "true", "analysis", "x", "\xE2\x96",
    };
    unsigned seed = 12345;
    char buf[600];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = 0;
        int k = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 40;
        for (int j = 0; j < k; j++) {
            const char *pc = pieces[((seed = seed * 1103515245u + 12345u) >> 16) % (sizeof pieces / sizeof pieces[0])];
            size_t l = strlen(pc);
            if (n + l >= sizeof buf) break;
            memcpy(buf + n, pc, l), n += l;
        }
        buf[n] = 0;
        for (int f = 0; f < TOOL_FMT_COUNT; f++) {
            tcase c = { .fmt = (tool_format)f, .tools = (iter & 1) != 0, .reasoning = (iter & 2) != 0, .in = buf };
            size_t cut = n / 2;
            run_cuts(&c, (iter & 4) != 0, &cut, 1, &g);
            CHECK(!g.bad);
            if (!c.tools && !c.reasoning && f != TOOL_FMT_HARMONY) CHECK(g.nc == n && !memcmp(g.content, buf, n));
        }
    }
}

int main(void) {
    test_cases();
    test_streams_early();
    test_detect();
    test_random();
    return test_summary("tool_parse");
}
