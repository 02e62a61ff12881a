/* POST /v1/chat/completions and POST /v1/completions. */
#include "server/routes.h"
#include "server/fmt.h"
#include "server/gen.h"
#include "server/gen_group.h"
#include "server/offload.h"
#include "server/prompt.h"
#include "server/request_json.h"
#include "server/reasoning.h"
#include "server/tool_request.h"
#include "engine/sample/json_schema.h"
#include <stdlib.h>
#include <string.h>

/* A copy of o for one more choice: its own logit bias and DRY breakers. */
static bool opts_dup(const gen_opts *o, gen_opts *c) {
    *c = *o;
    c->bias = NULL;
    c->dry_ids = NULL;
    int nb = o->jp.sampling.n_logit_bias, nd = o->jp.sampling.n_dry_breakers;
    if (o->bias && nb > 0) {
        if (!(c->bias = malloc(sizeof *c->bias * (size_t)nb))) return false;
        memcpy(c->bias, o->bias, sizeof *c->bias * (size_t)nb);
        c->jp.sampling.logit_bias = c->bias;
    }
    if (o->dry_ids && nd > 0) {
        if (!(c->dry_ids = malloc(sizeof *c->dry_ids * (size_t)nd))) { free(c->bias); return false; }
        memcpy(c->dry_ids, o->dry_ids, sizeof *c->dry_ids * (size_t)nd);
        c->jp.sampling.dry_breakers = c->dry_ids;
    }
    return true;
}

/* One generation per prompt and choice (OpenAI's order: prompt by prompt,
 * its n choices together; choice k of a prompt samples with seed + k and
 * shares the prefill of choice 0).
 * Takes over o, and ids[i] / echo[i] stay the caller's. */
static void start(server *s, http_req *r, gen_kind kind, const gen_fmt *fmt, gen_opts *o,
                  int n_prompts, int32_t *const *ids, const int *lens, char *const *echo) {
    int per = o->n_choices > 1 ? o->n_choices : 1, total = n_prompts * per;
    gen_group *grp = total > 1 ? gen_group_new(s, r, total) : NULL;
    gen **m = calloc((size_t)total, sizeof *m);
    if ((total > 1 && !grp) || !m) {
        free(m);
        if (grp) gen_group_abort(grp, true);
        else respond_error(r, 500, NULL, NULL, "out of memory");
        gen_opts_free(o);
        return;
    }
    for (int i = 0; i < total; i++) {
        bool last = i + 1 == total;   /* the last choice takes o itself */
        gen_opts c;
        bool ok = last ? (c = *o, true) : opts_dup(o, &c);
        const char *src = echo[i / per];
        char *e = ok && src ? strdup(src) : NULL;
        if (!ok || (src && !e)) {   /* out of memory before a gen took c */
            if (ok) gen_opts_free(&c);
            goto oom;
        }
        c.jp.sampling.seed = o->jp.sampling.seed + (uint64_t)(i % per);
        gen *g = gen_create(s, r, kind, fmt, &c);   /* on failure it answered 500 and freed c */
        if (!g) {
            free(e);
            if (!last) gen_opts_free(o);
            if (grp) gen_group_abort(grp, false);
            free(m);
            return;
        }
        g->echo = e;
        if (grp) gen_group_add(grp, g, i, i % per > 0);
        m[i] = g;
        continue;
    oom:
        if (!last) gen_opts_free(o);
        if (grp) gen_group_abort(grp, true);
        else respond_error(r, 500, NULL, NULL, "out of memory");
        free(m);
        return;
    }
    for (int i = 0; i < total; i++) {
        /* a prompt's later choices take its first choice's prefill (the engine copies the KV) */
        if (i % per) m[i]->o.jp.prefill_from = m[i - i % per]->job;
        gen_submit(m[i], ids[i / per], lens[i / per]);
        if (m[i]->ended) break;   /* it failed: the answer is the error; the rest are not run */
    }
    free(m);
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

/* The bytes of every string in the messages: the rendered prompt holds
 * them all, so more than the context can take is refused before rendering. */
static size_t messages_text_bytes(const cJSON *v) {
    size_t n = 0;
    for (; v; v = v->next) {
        if (cJSON_IsString(v)) n += strlen(v->valuestring);
        if (v->child) n += messages_text_bytes(v->child);
    }
    return n;
}

/* Everything before the generation, off the loop: options, tools, the
 * template and the tokens. Chat's message texts are sized against the
 * context before the template runs. */
static bool chat_prep(const server *s, const cJSON *body, route_prep *p) {
    api_error *e = &p->e;
    gen_opts *o = &p->o;
    chat_tools t = { 0 };
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages");
    bool ok = false;
    char *text = NULL;
    if (!check_model_field(s, body, e) || !parse_gen_opts(s, body, GEN_CHAT, o, e) ||
        !chat_tools_parse(body, s->o.reasoning_format, &t, e) || (cJSON_IsArray(msgs) && !chat_messages_check_tools(msgs, e)) ||
        !prompt_text_may_fit(s, cJSON_IsArray(msgs) ? messages_text_bytes(msgs->child) : 0, "messages", e))
        goto out;
    cJSON *tb = template_body(body, &t);
    text = prompt_render_chat(s, tb ? tb : body, e);
    cJSON_Delete(tb);
    if (!text) goto out;
    output_parsing(s, &t, text, o);
    if (!force_calls(&t, o, e)) goto out;
    p->n_prompts = 1;
    p->lens[0] = prompt_text_may_fit(s, strlen(text), "messages", e) ? prompt_tokenize(s, text, strlen(text), true, true, &p->ids[0], e) : -1;
    ok = p->lens[0] >= 0 && prompt_fits(s, p->lens[0], "messages", e);
out:
    free(text);
    chat_tools_free(&t);
    return ok;
}

/* On the loop: the generations, from what prep made (takes p->o). */
static void chat_go(server *s, http_req *r, const cJSON *body, route_prep *p) {
    (void)body;   /* still alive: p->o's stop strings point into it */
    char *no_echo = NULL;
    start(s, r, GEN_CHAT, &fmt_chat, &p->o, 1, p->ids, p->lens, &no_echo);
}

void route_chat(server *s, http_req *r, const cJSON *body) { offload_route(s, r, body, chat_prep, chat_go); }

/* A list of prompts: texts, or token-id lists, more than one. */
static bool prompt_list(const cJSON *p) {
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) < 2) return false;
    bool texts = true, lists = true;
    const cJSON *it;
    cJSON_ArrayForEach(it, p) {
        texts &= cJSON_IsString(it);
        lists &= cJSON_IsArray(it);
    }
    return texts || lists;
}

static bool completions_prep(const server *s, const cJSON *body, route_prep *p) {
    api_error *e = &p->e;
    gen_opts *o = &p->o;
    const char *suffix = NULL;
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(body, "prompt");
    p->n_prompts = 1;
    if (!check_model_field(s, body, e) || !parse_gen_opts(s, body, GEN_COMPLETION, o, e) || !jf_str(body, "suffix", &suffix, e))
        return false;
    if (suffix && *suffix) {   /* fill in the middle: the prompt is the text before */
        if (pr && !cJSON_IsString(pr)) return api_fail(e, 400, "prompt", "invalid_type", "with 'suffix', 'prompt' must be a string");
        fim_input in = { .prefix = pr ? pr->valuestring : "", .suffix = suffix, .param = "suffix" };
        bool cut;
        p->lens[0] = prompt_fim(s, &in, &p->ids[0], &cut, e);
        if (p->lens[0] >= 0 && o->echo && !(p->echo[0] = strdup(in.prefix))) return api_fail(e, 500, NULL, NULL, "out of memory");
        return p->lens[0] >= 0 && prompt_fits(s, p->lens[0], "prompt", e);
    }
    if (!prompt_list(pr)) {
        p->lens[0] = prompt_from_field(s, pr, true, &p->ids[0], o->echo ? &p->echo[0] : NULL, e);
        return p->lens[0] >= 0 && prompt_fits(s, p->lens[0], "prompt", e);
    }
    int np = cJSON_GetArraySize(pr);   /* one choice (or n) per prompt, in order */
    if (np > GEN_MAX_PROMPTS || np * (o->n_choices > 1 ? o->n_choices : 1) > GEN_MAX_PROMPTS)
        return api_fail(e, 400, "prompt", "invalid_value", "at most %d prompts times 'n' in one request", GEN_MAX_PROMPTS);
    p->n_prompts = np;
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, pr) {
        p->lens[i] = prompt_from_field(s, it, true, &p->ids[i], o->echo ? &p->echo[i] : NULL, e);
        if (p->lens[i] < 0 || !prompt_fits(s, p->lens[i], "prompt", e)) return false;
        i++;
    }
    return true;
}

static void completions_go(server *s, http_req *r, const cJSON *body, route_prep *p) {
    (void)body;   /* still alive: p->o's stop strings point into it */
    start(s, r, GEN_COMPLETION, &fmt_completion, &p->o, p->n_prompts, p->ids, p->lens, p->echo);
}

void route_completions(server *s, http_req *r, const cJSON *body) {
    offload_route(s, r, body, completions_prep, completions_go);
}
