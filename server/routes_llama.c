/* llama.cpp's native endpoints: POST /completion, /infill, /tokenize,
 * /detokenize and /apply-template, in the shapes editor plugins send. */
#include "server/routes.h"
#include "server/errors.h"
#include "server/fmt.h"
#include "server/gen.h"
#include "server/prompt.h"
#include "server/request_json.h"
#include "server/utf8.h"
#include "engine/text/tokenizer.h"
#include <stdlib.h>
#include <string.h>

static void start(server *s, http_req *r, gen_opts *o, int32_t *ids, int n, bool truncated) {
    cJSON *settings = fmt_settings(s, o);   /* now, while the stop strings live */
    gen *g = gen_create(s, r, GEN_LLAMA, &fmt_llama, o);
    if (g) {
        g->settings = settings;
        settings = NULL;
        g->truncated = truncated;
        gen_submit(g, ids, n);
    }
    cJSON_Delete(settings);
    free(ids);
}

/* llama.cpp ignores "model" on its own endpoints; so does hearth. */
void route_completion(server *s, http_req *r, const cJSON *body) {
    api_error e;
    gen_opts o;
    gen_opts_init(&o);
    int32_t *ids = NULL;
    int n = -1;
    if (!parse_gen_opts(s, body, GEN_LLAMA, &o, &e)) goto fail;
    n = prompt_from_field(s, cJSON_GetObjectItemCaseSensitive(body, "prompt"), false, &ids, NULL, &e);
    if (n < 0 || !prompt_fits(s, n, "prompt", &e)) goto fail;
    start(s, r, &o, ids, n, false);
    return;
fail:
    free(ids);
    gen_opts_free(&o);
    api_error_respond(r, &e);
}

/* As llama.vim and llama.vscode call it: input_prefix, input_suffix,
 * input_extra, prompt (the text before the cursor on its line), n_predict
 * (0 only warms the cache), n_indent, samplers, response_fields, ... */
void route_infill(server *s, http_req *r, const cJSON *body) {
    api_error e;
    gen_opts o;
    gen_opts_init(&o);
    int32_t *ids = NULL;
    int n = -1;
    fim_input in = { .trim = true, .param = "input_suffix" };
    if (!parse_gen_opts(s, body, GEN_LLAMA, &o, &e) || !jf_str(body, "input_prefix", &in.prefix, &e) ||
        !jf_str(body, "input_suffix", &in.suffix, &e) || !jf_str(body, "prompt", &in.middle, &e))
        goto fail;
    in.extra = jf_get(body, "input_extra");
    if (in.extra && !cJSON_IsArray(in.extra)) {
        api_fail(&e, 400, "input_extra", "invalid_type", "'input_extra' must be a list of {filename, text}");
        goto fail;
    }
    in.n_predict = o.jp.max_tokens;
    bool cut;
    n = prompt_fim(s, &in, &ids, &cut, &e);
    if (n < 0 || !prompt_fits(s, n, "input_prefix", &e)) goto fail;
    start(s, r, &o, ids, n, cut);
    return;
fail:
    free(ids);
    gen_opts_free(&o);
    api_error_respond(r, &e);
}

/* Reads only the model, so it may run off the loop (router.c does for large bodies). */
cJSON *tokenize_answer(const server *s, const cJSON *body, api_error *e) {
    const char *content = NULL;
    bool add_special = false, parse_special = true, with_pieces = false;
    if (!jf_str(body, "content", &content, e) || !jf_bool(body, "add_special", &add_special, e) ||
        !jf_bool(body, "parse_special", &parse_special, e) || !jf_bool(body, "with_pieces", &with_pieces, e))
        return NULL;
    if (!content) { api_fail(e, 400, "content", "missing_field", "'content' is required"); return NULL; }
    int32_t *ids;
    int n = prompt_tokenize(s, content, strlen(content), add_special, parse_special, &ids, e);
    if (n < 0) return NULL;
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(o, "tokens");
    for (int i = 0; i < n; i++) {
        if (!with_pieces) { cJSON_AddItemToArray(toks, cJSON_CreateNumber(ids[i])); continue; }
        char buf[1024];
        size_t len = tokenizer_token_bytes(s->model->tok, ids[i], true, buf, sizeof buf);
        if (len > sizeof buf) len = sizeof buf;
        cJSON *t = cJSON_CreateObject(), *piece, *bytes;
        cJSON_AddNumberToObject(t, "id", ids[i]);
        if (utf8_valid(buf, len) && !memchr(buf, 0, len)) {
            cJSON_AddItemToObject(t, "piece", utf8_json_string(buf, len));
        } else {   /* part of a character: its bytes, as llama.cpp does */
            fmt_token_piece(s, ids[i], &piece, &bytes);
            cJSON_Delete(piece);
            cJSON_AddItemToObject(t, "piece", bytes);
        }
        cJSON_AddItemToArray(toks, t);
    }
    free(ids);
    return o;
}

/* Reads only the model, like tokenize_answer. */
cJSON *detokenize_answer(const server *s, const cJSON *body, api_error *e) {
    const cJSON *t = jf_get(body, "tokens");
    if (!t) { api_fail(e, 400, "tokens", "missing_field", "'tokens' is required"); return NULL; }
    if (!cJSON_IsArray(t)) { api_fail(e, 400, "tokens", "invalid_type", "'tokens' must be a list of token ids"); return NULL; }
    int n = cJSON_GetArraySize(t), n_vocab = tokenizer_n_vocab(s->model->tok), i = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    if (!ids) { api_fail(e, 500, NULL, NULL, "out of memory"); return NULL; }
    const cJSON *it;
    cJSON_ArrayForEach(it, t) {
        double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (d < 0 || d >= n_vocab || d != (double)(int32_t)d) {   /* range first: the cast of 1e10 is undefined */
            free(ids);
            api_fail(e, 400, "tokens", "invalid_value", "tokens[%d] is not a token id below %d", i, n_vocab);
            return NULL;
        }
        ids[i++] = (int32_t)d;
    }
    size_t len;
    char *text = tokenizer_decode(s->model->tok, ids, n, true, &len);
    free(ids);
    if (!text) { api_fail(e, 500, NULL, NULL, "out of memory"); return NULL; }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "content", utf8_json_string(text, len));
    free(text);
    return o;
}

static void respond_answer(http_req *r, cJSON *o, const api_error *e) {
    if (o) respond_json(r, 200, o);
    else api_error_respond(r, e);
}

void route_tokenize(server *s, http_req *r, const cJSON *body) {
    api_error e = { 0 };
    respond_answer(r, tokenize_answer(s, body, &e), &e);
}

void route_detokenize(server *s, http_req *r, const cJSON *body) {
    api_error e = { 0 };
    respond_answer(r, detokenize_answer(s, body, &e), &e);
}

void route_apply_template(server *s, http_req *r, const cJSON *body) {
    api_error e;
    char *text = prompt_render_chat(s, body, &e);
    if (!text) { api_error_respond(r, &e); return; }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "prompt", utf8_json_string(text, strlen(text)));
    free(text);
    respond_json(r, 200, o);
}
