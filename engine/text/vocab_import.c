/* Vocabularies from elsewhere, written as GGUF tokenizer.* metadata:
 * a Hugging Face tokenizer.json (byte-level BPE), or the tokenizer keys of
 * another GGUF file. Used to build test and demo models with real vocabularies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>

#include <cjson/cJSON.h>

#include "engine/text/tokenizer.h"
#include "engine/text/tok_internal.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"

#define MAX_VOCAB (1 << 24)

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The whole file, NUL-terminated; NULL if it cannot be read. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *p = realloc(buf, cap * 2);
        if (!p) { free(buf); buf = NULL; break; }
        buf = p;
        cap *= 2;
    }
    if (buf && ferror(f)) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = 0; *len = n; }
    return buf;
}

/* Whether a pre_tokenizer / decoder tree has a ByteLevel step. */
static bool has_byte_level(const cJSON *node) {
    if (!cJSON_IsObject(node)) return false;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(node, "type");
    if (cJSON_IsString(type) && strcmp(type->valuestring, "ByteLevel") == 0) return true;
    static const char *const lists[] = {"pretokenizers", "decoders", "processors"};
    for (size_t i = 0; i < 3; i++) {
        const cJSON *e, *arr = cJSON_GetObjectItemCaseSensitive(node, lists[i]);
        cJSON_ArrayForEach(e, arr) if (has_byte_level(e)) return true;
    }
    return false;
}

/* The first Split regex of the pre-tokenizer, or NULL. */
static const char *split_regex(const cJSON *node) {
    if (!cJSON_IsObject(node)) return NULL;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(node, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    if (cJSON_IsString(re)) return re->valuestring;
    const cJSON *e, *arr = cJSON_GetObjectItemCaseSensitive(node, "pretokenizers");
    cJSON_ArrayForEach(e, arr) {
        const char *r = split_regex(e);
        if (r) return r;
    }
    return NULL;
}

/* A pre-tokenizer name for the regex when the caller gives none. */
static const char *guess_pre(const cJSON *root) {
    const char *re = split_regex(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
    if (!re) return "default";
    if (strstr(re, "\\p{N}{1,3}")) return "llama-bpe";
    if (strstr(re, "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+")) return "qwen2";
    return "default";
}

/* The BOS that the post-processor puts before a single text, or NULL. */
static const char *template_bos(const cJSON *node) {
    if (!cJSON_IsObject(node)) return NULL;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(node, "single");
    const cJSON *first = cJSON_IsArray(single) ? cJSON_GetArrayItem(single, 0) : NULL;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(first, "SpecialToken");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(st, "id");
    if (cJSON_IsString(id)) return id->valuestring;
    const cJSON *e, *arr = cJSON_GetObjectItemCaseSensitive(node, "processors");
    cJSON_ArrayForEach(e, arr) {
        const char *b = template_bos(e);
        if (b) return b;
    }
    return NULL;
}

/* tokenizer_config.json token entries are a string or {"content": ...}. */
static const char *config_token(const cJSON *cfg, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The tokenizer_config.json beside a *tokenizer.json, parsed, or NULL. */
static cJSON *load_config(const char *json_path) {
    static const char suffix[] = "tokenizer.json";
    size_t n = strlen(json_path), ls = sizeof suffix - 1;
    if (n < ls || strcmp(json_path + n - ls, suffix) != 0) return NULL;
    char *path = malloc(n + 8);
    if (!path) return NULL;
    memcpy(path, json_path, n - 5);
    strcpy(path + n - 5, "_config.json");
    size_t len;
    char *text = read_file(path, &len);
    free(path);
    if (!text) return NULL;
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    free(text);
    return cfg;
}

typedef struct {
    int n;
    const char **text;
    size_t *len;
    int32_t *type;
} vocab;

static int32_t vocab_find(const vocab *v, const char *s) {
    if (!s) return -1;
    size_t n = strlen(s);
    for (int i = v->n - 1; i >= 0; i--)        /* added tokens sit at the end */
        if (v->text[i] && v->len[i] == n && memcmp(v->text[i], s, n) == 0) return i;
    return -1;
}

static int32_t vocab_find_any(const vocab *v, const char *const *texts) {
    for (; *texts; texts++) {
        int32_t id = vocab_find(v, *texts);
        if (id >= 0 && v->type[id] != TT_NORMAL) return id;
    }
    return -1;
}

/* "a b" for each merge, given as "a b" strings or [a, b] pairs; the strings
 * point into the JSON or into *arena. */
static int collect_merges(const cJSON *merges, const char ***out, size_t **lens, uint64_t *n_out, char **arena) {
    int n = cJSON_GetArraySize(merges);
    size_t need = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2) {
            const cJSON *a = cJSON_GetArrayItem(m, 0), *b = cJSON_GetArrayItem(m, 1);
            if (cJSON_IsString(a) && cJSON_IsString(b)) need += strlen(a->valuestring) + strlen(b->valuestring) + 2;
        }
    }
    *out = malloc((size_t)(n ? n : 1) * sizeof **out);
    *lens = malloc((size_t)(n ? n : 1) * sizeof **lens);
    *arena = malloc(need ? need : 1);
    if (!*out || !*lens || !*arena) return -1;
    uint64_t k = 0;
    size_t used = 0;
    cJSON_ArrayForEach(m, merges) {
        if (cJSON_IsString(m)) {
            (*out)[k] = m->valuestring;
            (*lens)[k++] = strlen(m->valuestring);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2) {
            const cJSON *a = cJSON_GetArrayItem(m, 0), *b = cJSON_GetArrayItem(m, 1);
            if (!cJSON_IsString(a) || !cJSON_IsString(b)) continue;
            char *p = *arena + used;
            int len = sprintf(p, "%s %s", a->valuestring, b->valuestring);
            (*out)[k] = p;
            (*lens)[k++] = (size_t)len;
            used += (size_t)len + 1;
        }
    }
    *n_out = k;
    return 0;
}

int vocab_from_tokenizer_json(const char *json_path, const char *pre,
                              gguf_writer *w, int *n_vocab_out, char *err, size_t errlen) {
    size_t len;
    char *text = read_file(json_path, &len);
    if (!text) return fail(err, errlen, "cannot read %s", json_path);
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root) return fail(err, errlen, "%s: not valid JSON", json_path);

    int rc = -1;
    cJSON *cfg = NULL;
    vocab v = {0};
    const char **merges = NULL;
    size_t *merge_lens = NULL;
    char *arena = NULL, *pads = NULL;

    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vmap = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *jmerges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE") != 0 || !cJSON_IsObject(vmap) ||
        !cJSON_IsArray(jmerges)) {
        fail(err, errlen, "%s: not a BPE tokenizer (model.type, vocab, merges)", json_path);
        goto done;
    }
    if (!has_byte_level(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer")) &&
        !has_byte_level(cJSON_GetObjectItemCaseSensitive(root, "decoder"))) {
        fail(err, errlen, "%s: only byte-level BPE tokenizers are supported", json_path);
        goto done;
    }

    /* ids: the model's vocab plus the added tokens, gaps filled with unused pads */
    int max_id = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, vmap) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= MAX_VOCAB) {
            fail(err, errlen, "%s: bad id for token in model.vocab", json_path);
            goto done;
        }
        if (e->valueint > max_id) max_id = e->valueint;
    }
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= MAX_VOCAB) {
            fail(err, errlen, "%s: bad id in added_tokens", json_path);
            goto done;
        }
        if (id->valueint > max_id) max_id = id->valueint;
    }
    if (max_id < 0) {
        fail(err, errlen, "%s: empty vocabulary", json_path);
        goto done;
    }
    v.n = max_id + 1;
    v.text = calloc((size_t)v.n, sizeof *v.text);
    v.len = calloc((size_t)v.n, sizeof *v.len);
    v.type = calloc((size_t)v.n, sizeof *v.type);
    if (!v.text || !v.len || !v.type) goto oom;
    cJSON_ArrayForEach(e, vmap) {
        v.text[e->valueint] = e->string;
        v.len[e->valueint] = strlen(e->string);
        v.type[e->valueint] = TT_NORMAL;
    }
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsString(content)) continue;
        v.text[id->valueint] = content->valuestring;
        v.len[id->valueint] = strlen(content->valuestring);
        v.type[id->valueint] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) ? TT_CONTROL : TT_USER;
    }
    int n_pad = 0;
    for (int i = 0; i < v.n; i++) n_pad += !v.text[i];
    if (n_pad) {
        pads = malloc((size_t)n_pad * 20);
        if (!pads) goto oom;
        char *p = pads;
        for (int i = 0; i < v.n; i++) {
            if (v.text[i]) continue;
            int k = snprintf(p, 20, "[PAD%d]", i);
            v.text[i] = p;
            v.len[i] = (size_t)k;
            v.type[i] = TT_UNUSED;
            p += k + 1;
        }
    }

    uint64_t n_merges;
    if (collect_merges(jmerges, &merges, &merge_lens, &n_merges, &arena)) goto oom;

    /* special ids: tokenizer_config.json beside the file when there is one,
     * else the post-processor's BOS and the usual end-of-text names */
    static const char *const eos_texts[] = {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>",
                                            "</s>", "<eos>", NULL};
    cfg = load_config(json_path);
    const char *bos_text = template_bos(cJSON_GetObjectItemCaseSensitive(root, "post_processor"));
    bool add_bos = bos_text != NULL, add_eos = false;
    int32_t bos = vocab_find(&v, bos_text), eos = vocab_find_any(&v, eos_texts), pad = -1;
    if (cfg) {
        const cJSON *b;
        if (config_token(cfg, "bos_token")) bos = vocab_find(&v, config_token(cfg, "bos_token"));
        if (config_token(cfg, "eos_token")) eos = vocab_find(&v, config_token(cfg, "eos_token"));
        pad = vocab_find(&v, config_token(cfg, "pad_token"));
        if (cJSON_IsBool(b = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token"))) add_bos = cJSON_IsTrue(b);
        if (cJSON_IsBool(b = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token"))) add_eos = cJSON_IsTrue(b);
    }

    gw_kv_str(w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(w, "tokenizer.ggml.pre", pre ? pre : guess_pre(root));
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", v.text, v.len, (uint64_t)v.n);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", v.type, (uint64_t)v.n);
    gw_kv_arr_str(w, "tokenizer.ggml.merges", merges, merge_lens, n_merges);
    if (bos >= 0) gw_kv_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0) gw_kv_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (pad >= 0) gw_kv_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)pad);
    gw_kv_bool(w, "tokenizer.ggml.add_bos_token", add_bos && bos >= 0);
    gw_kv_bool(w, "tokenizer.ggml.add_eos_token", add_eos && eos >= 0);
    if (n_vocab_out) *n_vocab_out = v.n;
    rc = 0;
    goto done;
oom:
    fail(err, errlen, "%s: out of memory", json_path);
done:
    free(v.text);
    free(v.len);
    free(v.type);
    free(pads);
    free(merges);
    free(merge_lens);
    free(arena);
    cJSON_Delete(cfg);
    cJSON_Delete(root);
    return rc;
}

/* Every tokenizer.* key, copied as stored (arrays get their header back). */
int vocab_from_gguf(const char *gguf_path, gguf_writer *w, int *n_vocab_out, char *err, size_t errlen) {
    gguf_file g;
    char e[256];
    if (gguf_open(gguf_path, &g, e, sizeof e)) return fail(err, errlen, "%s", e);
    const gguf_kv *tokens = gguf_find_kv(&g, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != GGUF_TYPE_ARRAY || tokens->arr_type != GGUF_TYPE_STRING ||
        tokens->arr_n == 0 || tokens->arr_n > MAX_VOCAB) {
        gguf_close(&g);
        return fail(err, errlen, "%s: no tokenizer.ggml.tokens", gguf_path);
    }
    int rc = 0;
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const gguf_kv *kv = &g.kv[i];
        if (strncmp(kv->key, "tokenizer.", 10) != 0) continue;
        if (kv->type != GGUF_TYPE_ARRAY) {
            gw_kv_encoded(w, kv->key, (uint32_t)kv->type, kv->data, kv->data_size);
            continue;
        }
        uint8_t *buf = malloc(12 + kv->data_size);
        if (!buf) { rc = fail(err, errlen, "%s: out of memory", gguf_path); break; }
        uint32_t at = (uint32_t)kv->arr_type;
        uint64_t n = kv->arr_n;
        for (int k = 0; k < 4; k++) buf[k] = (uint8_t)(at >> (8 * k));
        for (int k = 0; k < 8; k++) buf[4 + k] = (uint8_t)(n >> (8 * k));
        memcpy(buf + 12, kv->data, kv->data_size);
        gw_kv_encoded(w, kv->key, GGUF_TYPE_ARRAY, buf, 12 + kv->data_size);
        free(buf);
    }
    if (rc == 0 && n_vocab_out) *n_vocab_out = (int)tokens->arr_n;
    gguf_close(&g);
    return rc;
}
