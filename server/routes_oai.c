/* POST /v1/chat/completions and POST /v1/completions. */
#include "server/routes.h"
#include "server/fmt.h"
#include "server/gen.h"
#include "server/prompt.h"
#include "server/request_json.h"
#include "server/reasoning.h"
#include "server/tool_request.h"
#include "engine/sample/json_schema.h"
#include <stdlib.h>
#include <string.h>

/* Parse, check, and hand the prompt to a new generation. */
static void start(server *s, http_req *r, gen_kind kind, const gen_fmt *fmt, gen_opts *o,
                  int32_t *ids, int n, char *echo) {
    gen *g = gen_create(s, r, kind, fmt, o);
    if (g) {
        g->echo = echo;
        echo = NULL;
        gen_submit(g, ids, n);
    }
    free(echo);
    free(ids);
}

/* How the answer is read back: tool calls in the model's format when tools
 * are offered, reasoning unless --reasoning-format none; harmony's channels
 * always (its markers are never content). */
static void output_parsing(const server *s, const chat_tools *t, const char *prompt, gen_opts *o) {
    tool_parse_opts *tp = &o->tp;
    tp->fmt = (tool_format)s->tool_fmt;
    tp->tools = t->tools != NULL;
    tp->reasoning = t->reasoning != REASONING_NONE;
    tp->think_open = tp->reasoning && tool_prompt_opens_think(prompt, strlen(prompt));
    tp->max_calls = t->parallel ? 0 : 1;
    o->parse_chat = tp->tools || tp->reasoning || tp->fmt == TOOL_FMT_HARMONY;
    o->jp.render_special = tp->tools || tp->fmt == TOOL_FMT_HARMONY;   /* markers such as [TOOL_CALLS] are control tokens */
}

/* tool_choice required or named: the answer is held to the calls' JSON schema
 * by the grammar sampler (a list of calls when parallel calls are allowed)
 * and read back as a JSON answer, whatever the model's own format. */
static bool force_calls(const chat_tools *t, gen_opts *o, api_error *e) {
    if (!t->tools || (t->choice != TOOL_CHOICE_REQUIRED && t->choice != TOOL_CHOICE_NAMED)) return true;
    if (o->grammar)
        return api_fail(e, 400, "tool_choice", "invalid_value",
                        "a forced 'tool_choice' cannot be combined with 'grammar', 'json_schema' or 'response_format'");
    cJSON *schema = tool_call_schema(t);
    char err[256] = "out of memory";
    o->grammar = schema ? grammar_from_json_schema(schema, true, err, sizeof err) : NULL;   /* strict: only the declared arguments */
    cJSON_Delete(schema);
    if (!o->grammar) return api_fail(e, 400, "tools", "invalid_value", "%s", err);
    o->jp.grammar = o->grammar;
    o->tp.fmt = TOOL_FMT_GENERIC;
    o->tp.reasoning = o->tp.think_open = false;
    return true;
}

/* The body the template sees: chat_template_kwargs with the top-level
 * enable_thinking and reasoning_effort folded in (t->kwargs), the other
 * fields by reference. NULL when the body serves as it is. */
static cJSON *template_body(const cJSON *body, const chat_tools *t) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(body, "chat_template_kwargs");
    if (!t->kwargs || (k && cJSON_Compare(k, t->kwargs, true))) return NULL;
    cJSON *b = cJSON_CreateObject();
    const cJSON *it;
    for (it = body->child; b && it; it = it->next)
        if (strcmp(it->string, "chat_template_kwargs")) cJSON_AddItemReferenceToObject(b, it->string, (cJSON *)it);
    if (b) cJSON_AddItemReferenceToObject(b, "chat_template_kwargs", t->kwargs);
    return b;
}

void route_chat(server *s, http_req *r, const cJSON *body) {
    api_error e;
    gen_opts o;
    gen_opts_init(&o);
    chat_tools t = { 0 };
    int32_t *ids = NULL;
    char *text = NULL;
    int n = -1;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages");
    if (!check_model_field(s, body, &e) || !parse_gen_opts(s, body, GEN_CHAT, &o, &e) ||
        !chat_tools_parse(body, s->o.reasoning_format, &t, &e) || (cJSON_IsArray(msgs) && !chat_messages_check_tools(msgs, &e)))
        goto fail;
    cJSON *tb = template_body(body, &t);
    text = prompt_render_chat(s, tb ? tb : body, &e);
    cJSON_Delete(tb);
    if (!text) goto fail;
    output_parsing(s, &t, text, &o);
    if (!force_calls(&t, &o, &e)) { free(text); goto fail; }
    n = prompt_text_may_fit(s, strlen(text), "messages", &e) ? prompt_tokenize(s, text, strlen(text), true, true, &ids, &e) : -1;
    free(text);
    if (n < 0 || !prompt_fits(s, n, "messages", &e)) goto fail;
    chat_tools_free(&t);
    start(s, r, GEN_CHAT, &fmt_chat, &o, ids, n, NULL);
    return;
fail:
    chat_tools_free(&t);
    free(ids);
    gen_opts_free(&o);
    api_error_respond(r, &e);
}

void route_completions(server *s, http_req *r, const cJSON *body) {
    api_error e;
    gen_opts o;
    gen_opts_init(&o);
    int32_t *ids = NULL;
    char *echo = NULL;
    int n = -1;
    const char *suffix = NULL;
    if (!check_model_field(s, body, &e) || !parse_gen_opts(s, body, GEN_COMPLETION, &o, &e) ||
        !jf_str(body, "suffix", &suffix, &e))
        goto fail;
    if (suffix && *suffix) {   /* fill in the middle: the prompt is the text before */
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "prompt");
        if (p && !cJSON_IsString(p)) {
            api_fail(&e, 400, "prompt", "invalid_type", "with 'suffix', 'prompt' must be a string");
            goto fail;
        }
        fim_input in = { .prefix = p ? p->valuestring : "", .suffix = suffix, .param = "suffix" };
        bool cut;
        n = prompt_fim(s, &in, &ids, &cut, &e);
        if (n >= 0 && o.echo && !(echo = strdup(in.prefix))) { api_fail(&e, 500, NULL, NULL, "out of memory"); goto fail; }
    } else {
        n = prompt_from_field(s, cJSON_GetObjectItemCaseSensitive(body, "prompt"), true, &ids, o.echo ? &echo : NULL, &e);
    }
    if (n < 0 || !prompt_fits(s, n, "prompt", &e)) goto fail;
    start(s, r, GEN_COMPLETION, &fmt_completion, &o, ids, n, echo);
    return;
fail:
    free(ids);
    free(echo);
    gen_opts_free(&o);
    api_error_respond(r, &e);
}
