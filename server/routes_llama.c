/* llama.cpp's native endpoints: POST /completion, /infill, /tokenize,
 * /detokenize and /apply-template, in the shapes editor plugins send. */
#include "server/routes.h"
#include "server/errors.h"
#include "server/fmt.h"
#include "server/gen.h"
#include "server/offload.h"
#include "server/prompt.h"
#include "server/request_json.h"
#include "server/utf8.h"
#include "engine/text/tokenizer.h"
#include <stdlib.h>
#include <string.h>

/* The generation, on the loop: takes p->o; the prompt stays p's. */
static void start(server *s, http_req *r, const cJSON *body, route_prep *p) {
    (void)body;   /* still alive: p->o's stop strings point into it */
    cJSON *settings = fmt_settings(s, &p->o);
    gen *g = gen_create(s, r, GEN_LLAMA, &fmt_llama, &p->o);
    if (g) {
        g->settings = settings;
        settings = NULL;
        g->truncated = p->truncated;
        gen_submit(g, p->ids[0], p->lens[0]);
    }
    cJSON_Delete(settings);
}

/* llama.cpp ignores "model" on its own endpoints; so does hearth. */
static bool completion_prep(const server *s, const cJSON *body, route_prep *p) {
    api_error *e = &p->e;
    if (!parse_gen_opts(s, body, GEN_LLAMA, &p->o, e)) return false;
    p->n_prompts = 1;
    p->lens[0] = prompt_from_field(s, cJSON_GetObjectItemCaseSensitive(body, "prompt"), false, &p->ids[0], NULL, e);
    return p->lens[0] >= 0 && prompt_fits(s, p->lens[0], "prompt", e);
}

void route_completion(server *s, http_req *r, const cJSON *body) { offload_route(s, r, body, completion_prep, start); }

/* As llama.vim and llama.vscode call it: input_prefix, input_suffix,
 * input_extra, prompt (the text before the cursor on its line), n_predict
 * (0 only warms the cache), n_indent, samplers, response_fields, ... */
static bool infill_prep(const server *s, const cJSON *body, route_prep *p) {
    api_error *e = &p->e;
    fim_input in = { .trim = true, .param = "input_suffix" };
    if (!parse_gen_opts(s, body, GEN_LLAMA, &p->o, e) || !jf_str(body, "input_prefix", &in.prefix, e) ||
        !jf_str(body, "input_suffix", &in.suffix, e) || !jf_str(body, "prompt", &in.middle, e))
        return false;
    in.extra = jf_get(body, "input_extra");
    if (in.extra && !cJSON_IsArray(in.extra))
        return api_fail(e, 400, "input_extra", "invalid_type", "'input_extra' must be a list of {filename, text}");
    in.n_predict = p->o.jp.max_tokens;
    p->n_prompts = 1;
    p->lens[0] = prompt_fim(s, &in, &p->ids[0], &p->truncated, e);
    return p->lens[0] >= 0 && prompt_fits(s, p->lens[0], "input_prefix", e);
}

void route_infill(server *s, http_req *r, const cJSON *body) { offload_route(s, r, body, infill_prep, start); }

/* Caps on what one /tokenize or /detokenize may ask, so that its memory is
 * bounded by a small multiple of them (the answer is printed as it is
 * made, not built as a JSON tree): ids 4 bytes a token, the answer about
 * 8 bytes a token, pieces a few times their text. */
#define TOKENIZE_MAX_BYTES ((size_t)4 << 20)
#define DETOKENIZE_MAX_IDS (1 << 20)
#define DETOKENIZE_MAX_TEXT ((size_t)16 << 20)

typedef struct { char *p; size_t n, cap; bool oom; } outbuf;

static void out_put(outbuf *b, const char *s, size_t len) {
    if (b->oom) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = 0;
}

static void out_json(outbuf *b, cJSON *item) {   /* printed, then deleted */
    char *t = item ? cJSON_PrintUnformatted(item) : NULL;
    cJSON_Delete(item);
    if (!t) { b->oom = true; return; }
    out_put(b, t, strlen(t));
    free(t);
}

static bool out_take(outbuf *b, route_prep *p) {
    if (b->oom) { free(b->p); return api_fail(&p->e, 500, NULL, NULL, "out of memory"); }
    p->answer = b->p;
    p->answer_len = b->n;
    p->body_done = true;
    return true;
}

/* One token of a with_pieces answer: {"id":N,"piece":"text"} or, for part
 * of a character, its bytes as llama.cpp does. */
static cJSON *token_entry(const server *s, int32_t id, char *buf, size_t cap) {
    size_t len = tokenizer_token_bytes(s->model->tok, id, true, buf, cap);
    cJSON *t = cJSON_CreateObject(), *piece, *bytes;
    cJSON_AddNumberToObject(t, "id", id);
    if (utf8_valid(buf, len) && !memchr(buf, 0, len)) {
        cJSON_AddItemToObject(t, "piece", utf8_json_string(buf, len));
    } else {
        fmt_token_piece(s, id, &piece, &bytes);
        cJSON_Delete(piece);
        cJSON_AddItemToObject(t, "piece", bytes);
    }
    return t;
}

static bool tokenize_prep(const server *s, const cJSON *body, route_prep *p) {
    api_error *e = &p->e;
    const char *content = NULL;
    bool add_special = false, parse_special = true, with_pieces = false;
    if (!jf_str(body, "content", &content, e) || !jf_bool(body, "add_special", &add_special, e) ||
        !jf_bool(body, "parse_special", &parse_special, e) || !jf_bool(body, "with_pieces", &with_pieces, e))
        return false;
    if (!content) return api_fail(e, 400, "content", "missing_field", "'content' is required");
    size_t len = strlen(content);
    if (len > TOKENIZE_MAX_BYTES)
        return api_fail(e, 400, "content", "string_above_max_length", "'content' is %zu bytes; at most %zu may be tokenized at once",
                        len, TOKENIZE_MAX_BYTES);
    int32_t *ids;
    int n = prompt_tokenize(s, content, len, add_special, parse_special, &ids, e);
    if (n < 0) return false;
    size_t cap = tokenizer_max_piece(s->model->tok) + 4;   /* no piece cut */
    char *piece = with_pieces ? malloc(cap) : NULL;
    outbuf b = { .oom = with_pieces && !piece };
    out_put(&b, "{\"tokens\":[", 11);
    for (int i = 0; i < n && !b.oom; i++) {
        if (i) out_put(&b, ",", 1);
        if (with_pieces) {
            out_json(&b, token_entry(s, ids[i], piece, cap));
        } else {
            char num[16];
            out_put(&b, num, (size_t)snprintf(num, sizeof num, "%d", (int)ids[i]));
        }
    }
    out_put(&b, "]}", 2);
    free(piece);
    free(ids);
    return out_take(&b, p);
}

static bool detokenize_prep(const server *s, const cJSON *body, route_prep *p) {
    api_error *e = &p->e;
    const tokenizer *tok = s->model->tok;
    const cJSON *t = jf_get(body, "tokens");
    if (!t) return api_fail(e, 400, "tokens", "missing_field", "'tokens' is required");
    if (!cJSON_IsArray(t)) return api_fail(e, 400, "tokens", "invalid_type", "'tokens' must be a list of token ids");
    int n = cJSON_GetArraySize(t), n_vocab = tokenizer_n_vocab(tok), i = 0;
    if (n > DETOKENIZE_MAX_IDS)
        return api_fail(e, 400, "tokens", "array_above_max_length", "'tokens' holds %d ids; at most %d may be detokenized at once",
                        n, DETOKENIZE_MAX_IDS);
    size_t cap = tokenizer_max_piece(tok) + 4, total = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    char *piece = malloc(cap);
    if (!ids || !piece) { free(ids); free(piece); return api_fail(e, 500, NULL, NULL, "out of memory"); }
    const cJSON *it;
    cJSON_ArrayForEach(it, t) {
        double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (d < 0 || d >= n_vocab || d != (double)(int32_t)d) {   /* range first: the cast of 1e10 is undefined */
            free(ids);
            free(piece);
            return api_fail(e, 400, "tokens", "invalid_value", "tokens[%d] is not a token id below %d", i, n_vocab);
        }
        ids[i] = (int32_t)d;
        total += tokenizer_token_bytes(tok, ids[i++], true, piece, cap);
    }
    free(piece);
    if (total > DETOKENIZE_MAX_TEXT) {
        free(ids);
        return api_fail(e, 400, "tokens", "array_above_max_length", "the tokens decode to %zu bytes; at most %zu at once", total,
                        DETOKENIZE_MAX_TEXT);
    }
    size_t len;
    char *text = tokenizer_decode(tok, ids, n, true, &len);
    free(ids);
    if (!text) return api_fail(e, 500, NULL, NULL, "out of memory");
    outbuf b = { 0 };
    out_put(&b, "{\"content\":", 11);
    out_json(&b, utf8_json_string(text, len));
    out_put(&b, "}", 1);
    free(text);
    return out_take(&b, p);
}

void route_tokenize(server *s, http_req *r, const cJSON *body) { offload_route(s, r, body, tokenize_prep, offload_answer); }

void route_detokenize(server *s, http_req *r, const cJSON *body) { offload_route(s, r, body, detokenize_prep, offload_answer); }

/* The rendered prompt is bounded by the template interpreter (JINJA_MAX_OUTPUT). */
static bool apply_template_prep(const server *s, const cJSON *body, route_prep *p) {
    char *text = prompt_render_chat(s, body, &p->e);
    if (!text) return false;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "prompt", utf8_json_string(text, strlen(text)));
    free(text);
    return offload_print(p, o);
}

void route_apply_template(server *s, http_req *r, const cJSON *body) {
    offload_route(s, r, body, apply_template_prep, offload_answer);
}
