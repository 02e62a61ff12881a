/* The chat route's formatter for parsed answers (server/fmt_tools.c) on
 * canned model output, through the functions the route calls: a stream's
 * chunks (delta.content, delta.reasoning_content, delta.tool_calls with
 * index, id, type and name first, then argument fragments) rebuilt as an
 * OpenAI client does, against the whole answer's message (content null with
 * only calls, reasoning_content, tool_calls); ids the same in both, nine
 * letters and digits for Mistral. gen_sse_json and fmt_chat_chunk (gen.c,
 * fmt_oai.c) are stood in for here: they only carry the delta. */
#include "server/fmt.h"
#include "tests/test.h"
#include <ctype.h>

static cJSON *chunks;   /* the deltas sent */

void gen_sse_json(gen *g, cJSON *o) {
    (void)g;
    cJSON_AddItemToArray(chunks, o);
}

cJSON *fmt_chat_chunk(const gen *g, cJSON *delta, cJSON *logprobs, const char *finish) {
    (void)g; (void)finish;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "delta", delta);
    if (logprobs) cJSON_AddItemToObject(o, "logprobs", logprobs);
    return o;
}

/* What the openai client rebuilds from the deltas. */
static cJSON *rebuild(void) {
    cJSON *m = cJSON_CreateObject(), *calls = cJSON_CreateArray();
    char content[4096] = "", reasoning[4096] = "";
    const cJSON *c;
    cJSON_ArrayForEach(c, chunks) {
        const cJSON *d = cJSON_GetObjectItem(c, "delta"), *v;
        if ((v = cJSON_GetObjectItem(d, "content"))) strncat(content, v->valuestring, sizeof content - strlen(content) - 1);
        if ((v = cJSON_GetObjectItem(d, "reasoning_content"))) strncat(reasoning, v->valuestring, sizeof reasoning - strlen(reasoning) - 1);
        const cJSON *tc;
        cJSON_ArrayForEach(tc, cJSON_GetObjectItem(d, "tool_calls")) {
            int i = cJSON_GetObjectItem(tc, "index")->valueint;
            const cJSON *f = cJSON_GetObjectItem(tc, "function"), *id = cJSON_GetObjectItem(tc, "id");
            if (id) {
                CHECK(i == cJSON_GetArraySize(calls));   /* a new call: the next index, with its name */
                CHECK(cJSON_IsString(cJSON_GetObjectItem(f, "name")) && !strcmp(cJSON_GetObjectItem(tc, "type")->valuestring, "function"));
                cJSON_AddItemToArray(calls, cJSON_Duplicate(tc, true));
                cJSON_DeleteItemFromObject(cJSON_GetArrayItem(calls, i), "index");
                continue;
            }
            CHECK(i == cJSON_GetArraySize(calls) - 1 && !cJSON_GetObjectItem(f, "name"));
            cJSON *af = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(calls, i), "function"), "arguments");
            char *joined = malloc(strlen(af->valuestring) + strlen(cJSON_GetObjectItem(f, "arguments")->valuestring) + 1);
            strcpy(joined, af->valuestring);
            strcat(joined, cJSON_GetObjectItem(f, "arguments")->valuestring);
            cJSON_SetValuestring(af, joined);
            free(joined);
        }
    }
    if (cJSON_GetArraySize(calls) && !*content) cJSON_AddNullToObject(m, "content");
    else cJSON_AddStringToObject(m, "content", content);
    if (*reasoning) cJSON_AddStringToObject(m, "reasoning_content", reasoning);
    if (cJSON_GetArraySize(calls)) cJSON_AddItemToObject(m, "tool_calls", calls);
    else cJSON_Delete(calls);
    return m;
}

static void setup(gen *g, tool_format fmt, const char *text) {
    memset(g, 0, sizeof *g);
    snprintf(g->id, sizeof g->id, "chatcmpl-test%d", (int)fmt);
    g->o.parse_chat = true;
    g->o.tp = (tool_parse_opts){ .fmt = fmt, .tools = true, .reasoning = true };
    g->text = (char *)text;
    g->text_len = strlen(text);
    atomic_init(&g->lost, false);
}

/* Streams text in pieces of `piece` bytes, and answers it whole: the two must agree. */
static cJSON *check(tool_format fmt, const char *text, size_t piece, int want_calls) {
    gen g;
    setup(&g, fmt, text);
    chunks = cJSON_CreateArray();
    for (size_t at = 0, n = strlen(text); at < n; at += piece)
        fmt_chat_parsed_token(&g, text + at, n - at < piece ? n - at : piece, NULL);
    int n_stream = fmt_chat_parsed_end(&g);
    cJSON *streamed = rebuild();
    cJSON *whole = cJSON_CreateObject();
    int n_whole = fmt_chat_parsed_message(&g, whole);
    CHECKF(n_stream == want_calls && n_whole == want_calls, "calls: stream %d whole %d want %d", n_stream, n_whole, want_calls);
    char *a = cJSON_PrintUnformatted(streamed), *b = cJSON_PrintUnformatted(whole);
    CHECKF(cJSON_Compare(streamed, whole, true), "stream %s\n  whole %s", a, b);
    CHECK(!atomic_load(&g.lost));
    free(a);
    free(b);
    cJSON_Delete(streamed);
    cJSON_Delete(chunks);
    tool_parser_free(g.tp);
    cJSON_Delete(g.pending_lp);
    return whole;
}

int main(void) {
    const char *hermes = "<think>\nweather first\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                         "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    for (size_t piece = 1; piece < 12; piece++) cJSON_Delete(check(TOOL_FMT_HERMES, hermes, piece, 2));
    cJSON *m = check(TOOL_FMT_HERMES, hermes, 4, 2);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(m, "content")));
    CHECK(!strcmp(cJSON_GetObjectItem(m, "reasoning_content")->valuestring, "weather first"));
    const cJSON *calls = cJSON_GetObjectItem(m, "tool_calls");
    CHECK(cJSON_GetArraySize(calls) == 2);
    const cJSON *c0 = cJSON_GetArrayItem(calls, 0), *c1 = cJSON_GetArrayItem(calls, 1);
    const char *id0 = cJSON_GetObjectItem(c0, "id")->valuestring, *id1 = cJSON_GetObjectItem(c1, "id")->valuestring;
    CHECK(!strncmp(id0, "call_", 5) && strlen(id0) == 29 && strcmp(id0, id1));
    cJSON *args = cJSON_Parse(cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "function"), "arguments")->valuestring);
    CHECK(args && !strcmp(cJSON_GetObjectItem(args, "city")->valuestring, "Paris"));
    cJSON_Delete(args);
    cJSON_Delete(m);

    /* text and a call: content kept; Mistral's own id and a made one of nine characters */
    m = check(TOOL_FMT_MISTRAL, "Sure.[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]get_time[ARGS]{}", 3, 2);
    CHECK(!strcmp(cJSON_GetObjectItem(m, "content")->valuestring, "Sure."));
    calls = cJSON_GetObjectItem(m, "tool_calls");
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "id")->valuestring, "a1b2c3d4e"));
    const char *made = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 1), "id")->valuestring;
    bool alnum = strlen(made) == 9;
    for (const char *p = made; *p; p++) alnum = alnum && isalnum((unsigned char)*p);
    CHECKF(alnum, "mistral id '%s'", made);
    cJSON_Delete(m);

    /* no calls: plain content, no tool_calls key */
    m = check(TOOL_FMT_HERMES, "Just words, <tool and more.", 2, 0);
    CHECK(!strcmp(cJSON_GetObjectItem(m, "content")->valuestring, "Just words, <tool and more.") && !cJSON_GetObjectItem(m, "tool_calls"));
    cJSON_Delete(m);
    /* gpt-oss: analysis is reasoning, the call from its recipient */
    m = check(TOOL_FMT_HARMONY, "<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant<|channel|>commentary to=functions.lookup "
              "<|constrain|>json<|message|>{\"q\": \"x\"}<|call|>", 5, 1);
    CHECK(!strcmp(cJSON_GetObjectItem(m, "reasoning_content")->valuestring, "Look it up."));
    cJSON_Delete(m);
    return test_summary("fmt_tools");
}
