/* Building prompts (see prompt.h). */
#include "server/prompt.h"
#include "server/request_json.h"
#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- chat --------------------------------------------------------------------- */
/* Text parts of a content list, joined; NULL with e. */
static char *join_parts(const cJSON *content, int i, api_error *e) {
    size_t len = 0;
    const cJSON *p;
    int j = 0;
    cJSON_ArrayForEach(p, content) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        char param[96];
        snprintf(param, sizeof param, "messages[%d].content[%d]", i, j);
        if (!cJSON_IsObject(p) || !cJSON_IsString(type)) {
            api_fail(e, 400, param, "invalid_type", "%s must be an object with a 'type'", param);
            return NULL;
        }
        if (strcmp(type->valuestring, "text")) {
            api_fail(e, 400, param, "unsupported_value", "%s: only text content is supported, not '%.40s'", param,
                     type->valuestring);
            return NULL;
        }
        if (!cJSON_IsString(text)) {
            api_fail(e, 400, param, "invalid_type", "%s.text must be a string", param);
            return NULL;
        }
        len += strlen(text->valuestring);
        j++;
    }
    char *out = malloc(len + 1), *w = out;
    if (!out) { api_fail(e, 500, NULL, NULL, "out of memory"); return NULL; }
    cJSON_ArrayForEach(p, content) {
        const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        size_t n = strlen(t);
        memcpy(w, t, n);
        w += n;
    }
    *w = 0;
    return out;
}

char *prompt_render_chat(const server *s, const cJSON *msgs, api_error *e) {
    if (!msgs || cJSON_IsNull(msgs)) { api_fail(e, 400, "messages", "missing_field", "'messages' is required"); return NULL; }
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
        api_fail(e, 400, "messages", "invalid_type", "'messages' must be a non-empty list");
        return NULL;
    }
    int n = cJSON_GetArraySize(msgs);
    chat_msg *m = calloc((size_t)n, sizeof *m);
    char **owned = calloc((size_t)n, sizeof *owned);
    char *out = NULL;
    if (!m || !owned) { api_fail(e, 500, NULL, NULL, "out of memory"); goto done; }
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, msgs) {
        char param[64];
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(it)) { api_fail(e, 400, param, "invalid_type", "%s must be an object", param); goto done; }
        snprintf(param, sizeof param, "messages[%d].role", i);
        if (!cJSON_IsString(role)) { api_fail(e, 400, param, "invalid_type", "%s must be a string", param); goto done; }
        const char *r = role->valuestring;
        if (!strcmp(r, "developer")) r = "system";   /* OpenAI's newer name for it */
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
            api_fail(e, 400, param, "invalid_value", "%s: unknown role '%.40s'", param, r);
            goto done;
        }
        m[i].role = r;
        snprintf(param, sizeof param, "messages[%d].content", i);
        if (!content || cJSON_IsNull(content)) m[i].content = "";
        else if (cJSON_IsString(content)) m[i].content = content->valuestring;
        else if (cJSON_IsArray(content)) {
            if (!(owned[i] = join_parts(content, i, e))) goto done;
            m[i].content = owned[i];
        } else {
            api_fail(e, 400, param, "invalid_type", "%s must be a string or a list of text parts", param);
            goto done;
        }
        i++;
    }
    const tokenizer *t = s->model->tok;
    const char *bos = tokenizer_token_text(t, tokenizer_bos(t)), *eos = tokenizer_token_text(t, tokenizer_eos(t));
    char err[256];
    out = chat_template_render(s->tpl, m, n, true, bos ? bos : "", eos ? eos : "", err, sizeof err);
    if (!out) api_fail(e, 400, "messages", "invalid_value", "%s", err);
done:
    if (owned) for (int k = 0; k < n; k++) free(owned[k]);
    free(owned);
    free(m);
    return out;
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
