/* Building prompts (see prompt.h). */
#include "server/prompt.h"
#include "server/request_json.h"
#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- chat --------------------------------------------------------------------- */
/* Messages reach the template in the shapes HF templates expect (what
 * llama-server passes): a list of text parts becomes one string joined with
 * "\n"; a null content is "" (null kept beside tool_calls, which some
 * templates test for, or "" where the template cannot take it); tool_calls' arguments given as a JSON string (OpenAI's
 * shape) become the object templates iterate or tojson; "developer" is
 * "system" unless the template knows the role. Everything else passes as given. */
static bool norm_content(cJSON *m, int i, bool has_calls, api_error *e) {
    cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    char param[96];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (!content || cJSON_IsNull(content)) {
        cJSON *v = has_calls ? cJSON_CreateNull() : cJSON_CreateString("");
        if (!v) return api_fail(e, 500, NULL, NULL, "out of memory");
        if (content) cJSON_ReplaceItemInObjectCaseSensitive(m, "content", v);
        else cJSON_AddItemToObject(m, "content", v);
        return true;
    }
    if (cJSON_IsString(content)) return true;
    if (!cJSON_IsArray(content))
        return api_fail(e, 400, param, "invalid_type", "%s must be a string or a list of text parts", param);
    size_t len = 0;
    int j = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        snprintf(param, sizeof param, "messages[%d].content[%d]", i, j);
        if (!cJSON_IsObject(p) || !cJSON_IsString(type))
            return api_fail(e, 400, param, "invalid_type", "%s must be an object with a 'type'", param);
        if (strcmp(type->valuestring, "text"))
            return api_fail(e, 400, param, "unsupported_value", "%s: only text content is supported, not '%.40s'", param,
                            type->valuestring);
        if (!cJSON_IsString(text)) return api_fail(e, 400, param, "invalid_type", "%s.text must be a string", param);
        len += strlen(text->valuestring) + 1;
        j++;
    }
    char *out = malloc(len + 1), *w = out;
    if (!out) return api_fail(e, 500, NULL, NULL, "out of memory");
    cJSON_ArrayForEach(p, content) {
        const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        size_t n = strlen(t);
        if (w != out) *w++ = '\n';
        memcpy(w, t, n);
        w += n;
    }
    *w = 0;
    cJSON *v = cJSON_CreateString(out);
    free(out);
    if (!v) return api_fail(e, 500, NULL, NULL, "out of memory");
    cJSON_ReplaceItemInObjectCaseSensitive(m, "content", v);
    return true;
}

static bool norm_tool_calls(cJSON *m, int i, api_error *e) {
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    char param[96];
    snprintf(param, sizeof param, "messages[%d].tool_calls", i);
    if (!calls || cJSON_IsNull(calls)) { cJSON_DeleteItemFromObjectCaseSensitive(m, "tool_calls"); return true; }
    if (!cJSON_IsArray(calls)) return api_fail(e, 400, param, "invalid_type", "%s must be a list", param);
    int j = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d]", i, j++);
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        if (!cJSON_IsObject(c) || !cJSON_IsObject(fn) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name")))
            return api_fail(e, 400, param, "invalid_type", "%s must be {\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}", param);
        cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (cJSON_IsString(args)) {
            cJSON *parsed = cJSON_Parse(args->valuestring);
            if (parsed) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", parsed);   /* not JSON: the string as given */
        } else if (!args || cJSON_IsNull(args)) {
            cJSON *o = cJSON_CreateObject();
            if (!o) return api_fail(e, 500, NULL, NULL, "out of memory");
            if (args) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", o);
            else cJSON_AddItemToObject(fn, "arguments", o);
        }
        if (!cJSON_GetObjectItemCaseSensitive(c, "type")) cJSON_AddStringToObject(c, "type", "function");
    }
    return true;
}

static cJSON *norm_messages(const server *s, const cJSON *msgs, api_error *e) {
    if (!msgs || cJSON_IsNull(msgs)) { api_fail(e, 400, "messages", "missing_field", "'messages' is required"); return NULL; }
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
        api_fail(e, 400, "messages", "invalid_type", "'messages' must be a non-empty list");
        return NULL;
    }
    cJSON *out = cJSON_Duplicate(msgs, true);
    if (!out) { api_fail(e, 500, NULL, NULL, "out of memory"); return NULL; }
    const char *src = chat_template_source(s->tpl);
    bool knows_developer = src && strstr(src, "developer");
    int i = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, out) {
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(m)) { api_fail(e, 400, param, "invalid_type", "%s must be an object", param); goto fail; }
        cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        snprintf(param, sizeof param, "messages[%d].role", i);
        if (!cJSON_IsString(role)) { api_fail(e, 400, param, "invalid_type", "%s must be a string", param); goto fail; }
        const char *r = role->valuestring;
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool") &&
            strcmp(r, "developer")) {
            api_fail(e, 400, param, "invalid_value", "%s: unknown role '%.40s'", param, r);
            goto fail;
        }
        if (!strcmp(r, "developer") && !knows_developer) cJSON_SetValuestring(role, "system");
        bool calls = cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(m, "tool_calls"));
        if (!norm_content(m, i, calls, e) || !norm_tool_calls(m, i, e)) goto fail;
        i++;
    }
    return out;
fail:
    cJSON_Delete(out);
    return NULL;
}

static bool strip_eq(const char *hay, size_t at, const char *needle, size_t n) {
    return !memcmp(hay + at, needle, n);
}

/* A final assistant message is continued, not closed (HF's
 * continue_final_message): render without the generation prompt and cut
 * the text right after that message's content. When the content is empty or
 * the template does not show it, render the rest with the generation prompt
 * and append the content (llama-server's prefill). */
static char *render_prefill(const server *s, cJSON *msgs, const cJSON *tools, const cJSON *kw, char *err, size_t errlen) {
    cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(last, "content");
    const char *content = cJSON_IsString(c) ? c->valuestring : "";
    size_t a = 0, n = strlen(content);
    while (a < n && isspace((unsigned char)content[a])) a++;
    while (n > a && isspace((unsigned char)content[n - 1])) n--;
    if (n > a) {
        char *full = chat_template_apply(s->tpl, msgs, tools, kw, false, err, errlen);
        if (!full) return NULL;
        size_t flen = strlen(full);
        for (size_t at = flen >= n - a ? flen - (n - a) + 1 : 0; at-- > 0;)
            if (strip_eq(full, at, content + a, n - a)) {
                /* keep trailing spacing when the template kept it */
                size_t keep = strlen(content + a);
                size_t end = at + (n - a);
                if (at + keep <= flen && !memcmp(full + at, content + a, keep)) end = at + keep;
                full[end] = 0;
                return full;
            }
        free(full);
    }
    cJSON *rest = cJSON_DetachItemViaPointer(msgs, last);
    char *out = chat_template_apply(s->tpl, msgs, tools, kw, true, err, errlen);
    cJSON_AddItemToArray(msgs, rest);
    if (!out) return NULL;
    size_t on = strlen(out), cn = strlen(content);
    char *r = realloc(out, on + cn + 1);
    if (!r) { free(out); snprintf(err, errlen, "out of memory"); return NULL; }
    memcpy(r + on, content, cn + 1);
    return r;
}

/* Null contents (beside tool_calls) made ""; whether there were any. */
static bool nulls_to_empty(cJSON *msgs) {
    bool any = false;
    cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsNull(c)) {
            cJSON *v = cJSON_CreateString("");
            if (v && cJSON_ReplaceItemInObjectCaseSensitive(m, "content", v)) any = true;
            else cJSON_Delete(v);
        }
    }
    return any;
}

char *prompt_render_chat(const server *s, const cJSON *body, api_error *e) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(body, "chat_template_kwargs");
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(body, "add_generation_prompt");
    if (tools && !cJSON_IsNull(tools) && !cJSON_IsArray(tools)) {
        api_fail(e, 400, "tools", "invalid_type", "'tools' must be a list");
        return NULL;
    }
    if (kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw)) {
        api_fail(e, 400, "chat_template_kwargs", "invalid_type", "'chat_template_kwargs' must be an object");
        return NULL;
    }
    if (agp && !cJSON_IsBool(agp)) {
        api_fail(e, 400, "add_generation_prompt", "invalid_type", "'add_generation_prompt' must be a boolean");
        return NULL;
    }
    cJSON *msgs = norm_messages(s, cJSON_GetObjectItemCaseSensitive(body, "messages"), e);
    if (!msgs) return NULL;
    if (tools && cJSON_GetArraySize(tools) == 0) tools = NULL;
    /* tool_choice none: no tool may be called, so the template is not shown
     * any (OpenAI's meaning; the chat route reads no call back either) */
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(body, "tool_choice");
    if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) tools = NULL;
    char err[600];
    const cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(last, "role");
    bool prefill = !strcmp(role->valuestring, "assistant") && !cJSON_GetObjectItemCaseSensitive(last, "tool_calls");
    bool gen = !agp || cJSON_IsTrue(agp);
    char *out = prefill ? render_prefill(s, msgs, tools, kw, err, sizeof err)
                        : chat_template_apply(s->tpl, msgs, tools, kw, gen, err, sizeof err);
    if (!out && nulls_to_empty(msgs))   /* a template that cannot take a null content (minja's polyfill) */
        out = prefill ? render_prefill(s, msgs, tools, kw, err, sizeof err)
                      : chat_template_apply(s->tpl, msgs, tools, kw, gen, err, sizeof err);
    if (!out) api_fail(e, 400, "messages", "invalid_value", "%s", err);
    cJSON_Delete(msgs);
    return out;
}

/* ---- the template ---------------------------------------------------------------- */
chat_template *prompt_load_template(const server_opts *o, const model *m, const char **what, char *err, size_t errlen) {
    const char *name = o->chat_template_file ? o->chat_template_file : o->chat_template, *src = NULL;
    char *file = NULL, terr[512];
    if (name && (src = chat_template_builtin(name))) {
        *what = name;
    } else if (name) {
        FILE *f = fopen(name, "rb");
        size_t n = 0, cap = 0;
        for (int ch; f && (ch = fgetc(f)) != EOF;) {
            if (n + 1 >= cap) {
                char *q = realloc(file, cap = cap ? cap * 2 : 4096);
                if (!q) { free(file); file = NULL; break; }
                file = q;
            }
            file[n++] = (char)ch;
        }
        if (f) fclose(f);
        if (f && !file && n == 0) file = calloc(1, 1);
        if (!f || !file) { snprintf(err, errlen, "cannot read the chat template file %s", name); free(file); return NULL; }
        file[n] = 0;
        src = file;
        *what = name;
    } else if (m->chat_template) {
        src = m->chat_template;
        *what = "the model's own";
    } else {
        fprintf(stderr, "hearth: warning: the model has no chat template; chat requests use chatml (--chat-template picks another)\n");
        src = chat_template_builtin("chatml");
        *what = "chatml";
    }
    const tokenizer *t = m->tok;
    const char *bos = tokenizer_bos(t) >= 0 ? tokenizer_token_text(t, tokenizer_bos(t)) : NULL;
    const char *eos = tokenizer_eos(t) >= 0 ? tokenizer_token_text(t, tokenizer_eos(t)) : NULL;
    chat_template *tpl = chat_template_load(src, bos, eos, terr, sizeof terr);
    if (!tpl) snprintf(err, errlen, "%s%s: %s", name ? name : *what, name ? "" : " chat template", terr);
    free(file);
    return tpl;
}

/* ---- text and ids ------------------------------------------------------------------ */
int prompt_tokenize(const server *s, const char *text, size_t len, bool add_special, bool parse_special,
                    int32_t **out, api_error *e) {
    const tokenizer *t = s->model->tok;
    int n = tokenizer_encode(t, text, len, add_special, parse_special, out);
    if (n < 0) { api_fail(e, 500, NULL, NULL, "out of memory"); return -1; }
    /* a template that spells out BOS, tokenized with add_special: keep one */
    int32_t bos = tokenizer_bos(t);
    if (add_special && n >= 2 && bos >= 0 && (*out)[0] == bos && (*out)[1] == bos) {
        memmove(*out, *out + 1, sizeof **out * (size_t)(n - 1));
        n--;
    }
    return n;
}

typedef struct { int32_t *v; int n, cap; bool oom; } ids;

static void ids_push(ids *a, const int32_t *v, int n) {
    if (a->oom || n <= 0) return;
    if (a->n + n > a->cap) {
        int c = a->cap ? a->cap : 64;
        while (c < a->n + n) c *= 2;
        int32_t *nv = realloc(a->v, sizeof *nv * (size_t)c);
        if (!nv) { a->oom = true; return; }
        a->v = nv;
        a->cap = c;
    }
    memcpy(a->v + a->n, v, sizeof *v * (size_t)n);
    a->n += n;
}

static bool push_text(const server *s, ids *a, const char *text, bool add_special, bool parse_special, api_error *e) {
    int32_t *t = NULL;
    int n = prompt_tokenize(s, text, strlen(text), add_special, parse_special, &t, e);
    if (n < 0) return false;
    ids_push(a, t, n);
    free(t);
    return true;
}

/* The range first: casting a double outside int32_t's (1e10, inf) is undefined. */
static bool is_id(const cJSON *v, int n_vocab) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < n_vocab &&
           v->valuedouble == (double)(int32_t)v->valuedouble;
}

int prompt_from_field(const server *s, const cJSON *p, bool oai, int32_t **out, char **text, api_error *e) {
    const tokenizer *t = s->model->tok;
    int n_vocab = tokenizer_n_vocab(t);
    *out = NULL;
    if (text) *text = NULL;
    if (!p || cJSON_IsNull(p)) return api_fail(e, 400, "prompt", "missing_field", "'prompt' is required"), -1;
    if (cJSON_IsString(p)) {
        if (!prompt_text_may_fit(s, strlen(p->valuestring), "prompt", e)) return -1;
        if (text && !(*text = strdup(p->valuestring))) return api_fail(e, 500, NULL, NULL, "out of memory"), -1;
        return prompt_tokenize(s, p->valuestring, strlen(p->valuestring), true, true, out, e);
    }
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) == 0)
        return api_fail(e, 400, "prompt", "invalid_type", "'prompt' must be a string or a list of token ids"), -1;
    /* a list of one prompt */
    const cJSON *first = p->child;
    if (cJSON_GetArraySize(p) == 1 && (cJSON_IsArray(first) || (oai && cJSON_IsString(first))))
        return prompt_from_field(s, first, oai, out, text, e);
    ids a = { 0 };
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, p) {
        if (is_id(it, n_vocab)) {
            int32_t id = (int32_t)it->valuedouble;
            ids_push(&a, &id, 1);
        } else if (cJSON_IsString(it) && !oai) {   /* llama.cpp: text and ids mixed */
            if (!push_text(s, &a, it->valuestring, i == 0, true, e)) { free(a.v); return -1; }
        } else {
            free(a.v);
            if (cJSON_IsNumber(it))
                return api_fail(e, 400, "prompt", "invalid_value", "prompt[%d]: %.17g is not a token id below %d", i,
                                it->valuedouble, n_vocab), -1;
            return api_fail(e, 400, "prompt", "unsupported_value",
                            "'prompt' must be one prompt: text, or a list of token ids (batches are not supported)"), -1;
        }
        i++;
    }
    if (a.oom) { free(a.v); return api_fail(e, 500, NULL, NULL, "out of memory"), -1; }
    if (text) {
        size_t len;
        *text = tokenizer_decode(t, a.v, a.n, false, &len);
        if (!*text) { free(a.v); return api_fail(e, 500, NULL, NULL, "out of memory"), -1; }
    }
    *out = a.v;
    return a.n;
}

/* ---- fill in the middle ---------------------------------------------------------------- */
int prompt_fim(const server *s, const fim_input *in, int32_t **out, bool *truncated, api_error *e) {
    const tokenizer *t = s->model->tok;
    int32_t pre = tokenizer_fim_pre(t), suf = tokenizer_fim_suf(t), mid = tokenizer_fim_mid(t);
    *out = NULL;
    *truncated = false;
    if (pre < 0 || suf < 0 || mid < 0)
        return api_fail(e, 400, in->param, "unsupported_value",
                        "this model has no fill-in-the-middle tokens (tokenizer.ggml.fim_pre/suf/mid)"), -1;
    int32_t rep = tokenizer_find(t, "<|repo_name|>"), sep = tokenizer_find(t, "<|file_sep|>");
    ids extra = { 0 }, prefix = { 0 }, suffix = { 0 }, middle = { 0 }, all = { 0 };
    int rc = -1;
    if (in->extra && cJSON_GetArraySize(in->extra) > 0) {
        /* the repository-level layout of Qwen2.5-Coder; a plain separator otherwise */
        if (rep >= 0) {
            ids_push(&extra, &rep, 1);
            if (!push_text(s, &extra, "myproject\n", false, false, e)) goto out;
        }
        const cJSON *c;
        int i = 0;
        cJSON_ArrayForEach(c, in->extra) {
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "filename");
            if (!cJSON_IsObject(c) || !cJSON_IsString(text) || (fn && !cJSON_IsNull(fn) && !cJSON_IsString(fn))) {
                api_fail(e, 400, "input_extra", "invalid_type", "input_extra[%d] must be {\"filename\": string, \"text\": string}", i);
                goto out;
            }
            if (sep >= 0) {
                char name[600];
                snprintf(name, sizeof name, "%.512s\n", cJSON_IsString(fn) ? fn->valuestring : "tmp");
                ids_push(&extra, &sep, 1);
                if (!push_text(s, &extra, name, false, false, e)) goto out;
            } else if (!push_text(s, &extra, "\n\n--- snippet ---\n\n", false, false, e)) {
                goto out;
            }
            if (!push_text(s, &extra, text->valuestring, false, false, e)) goto out;
            i++;
        }
        if (sep >= 0) {
            ids_push(&extra, &sep, 1);
            if (!push_text(s, &extra, "filename\n", false, false, e)) goto out;
        }
    }
    if (!push_text(s, &prefix, in->prefix ? in->prefix : "", false, false, e) ||
        !push_text(s, &suffix, in->suffix ? in->suffix : "", false, false, e) ||
        !push_text(s, &middle, in->middle ? in->middle : "", false, false, e))
        goto out;
    int take_pre = prefix.n, take_suf = suffix.n, take_extra = extra.n;
    if (in->trim) {   /* llama.cpp's /infill budget: prefix:suffix 3:1 within a batch, extra fills the context */
        int nb = s->o.n_batch, np = in->n_predict > 0 ? in->n_predict : 0;
        if (take_pre > 3 * (nb / 4)) take_pre = 3 * (nb / 4);
        int room = nb / 4 - (2 + middle.n);
        if (take_suf > (room > 0 ? room : 0)) take_suf = room > 0 ? room : 0;
        room = s->n_ctx - nb - 2 * np;
        if (take_extra > (room > 0 ? room : 0)) take_extra = room > 0 ? room : 0;
        *truncated = take_pre < prefix.n || take_suf < suffix.n || take_extra < extra.n;
    }
    int32_t bos = tokenizer_bos(t);
    ids_push(&all, extra.v ? extra.v + (extra.n - take_extra) : NULL, take_extra);
    if (tokenizer_add_bos(t)) ids_push(&all, &bos, 1);
    ids_push(&all, &pre, 1);
    ids_push(&all, prefix.v ? prefix.v + (prefix.n - take_pre) : NULL, take_pre);
    ids_push(&all, middle.v, middle.n);
    ids_push(&all, &suf, 1);
    ids_push(&all, suffix.v, take_suf);
    ids_push(&all, &mid, 1);
    if (all.oom || extra.oom || prefix.oom || suffix.oom || middle.oom) {
        api_fail(e, 500, NULL, NULL, "out of memory");
        goto out;
    }
    *out = all.v;
    all.v = NULL;
    rc = all.n;
out:
    free(extra.v); free(prefix.v); free(suffix.v); free(middle.v); free(all.v);
    return rc;
}

bool prompt_text_may_fit(const server *s, size_t len, const char *param, api_error *e) {
    size_t most = (size_t)s->n_ctx * (tokenizer_max_piece(s->model->tok) + 1);
    if (len <= most) return true;
    return api_fail(e, 400, param, "context_length_exceeded",
                    "This model's maximum context length is %d tokens per slot; the prompt of %zu bytes is far longer",
                    s->n_ctx, len);
}

bool prompt_fits(const server *s, int n, const char *param, api_error *e) {
    if (n <= 0) return api_fail(e, 400, param, "invalid_value", "the prompt is empty");
    if (n >= s->n_ctx)
        return api_fail(e, 400, param, "context_length_exceeded",
                        "This model's maximum context length is %d tokens per slot; the prompt has %d tokens "
                        "(and at least one more is needed to generate)", s->n_ctx, n);
    return true;
}
