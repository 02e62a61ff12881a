/* Reading request fields with checks (see request_json.h). */
#include "server/request_json.h"
#include "engine/text/tokenizer.h"
#include "engine/sample/json_schema.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const cJSON *jf_get(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

bool jf_bool(const cJSON *o, const char *key, bool *out, api_error *e) {
    const cJSON *v = jf_get(o, key);
    if (!v) return true;
    if (!cJSON_IsBool(v)) return api_fail(e, 400, key, "invalid_type", "'%s' must be true or false", key);
    *out = cJSON_IsTrue(v);
    return true;
}

bool jf_num(const cJSON *o, const char *key, double lo, double hi, double *out, api_error *e) {
    const cJSON *v = jf_get(o, key);
    if (!v) return true;
    if (!cJSON_IsNumber(v)) return api_fail(e, 400, key, "invalid_type", "'%s' must be a number", key);
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi)
        return api_fail(e, 400, key, "invalid_value", "'%s' must be between %g and %g, got %g", key, lo, hi, d);
    *out = d;
    return true;
}

bool jf_int(const cJSON *o, const char *key, long long lo, long long hi, long long *out, api_error *e) {
    const cJSON *v = jf_get(o, key);
    if (!v) return true;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!cJSON_IsNumber(v) || !isfinite(d) || d != floor(d))
        return api_fail(e, 400, key, "invalid_type", "'%s' must be an integer", key);
    if (d < (double)lo || d > (double)hi)
        return api_fail(e, 400, key, "invalid_value", "'%s' must be between %lld and %lld, got %.17g", key, lo, hi, d);
    *out = (long long)d;
    return true;
}

bool jf_str(const cJSON *o, const char *key, const char **out, api_error *e) {
    const cJSON *v = jf_get(o, key);
    if (!v) return true;
    if (!cJSON_IsString(v)) return api_fail(e, 400, key, "invalid_type", "'%s' must be a string", key);
    *out = v->valuestring;
    return true;
}

/* ---- model --------------------------------------------------------------------- */
bool model_name_matches(const server *s, const char *name) {
    if (!strcmp(name, s->model_id)) return true;
    if (s->model && s->model->name && !strcmp(name, s->model->name)) return true;
    if (!s->model_file) return false;
    size_t n = strlen(name), f = strlen(s->model_file);
    if (!strcmp(name, s->model_file)) return true;
    return f > 5 && n == f - 5 && !strcmp(s->model_file + n, ".gguf") && !strncmp(name, s->model_file, n);
}

bool check_model_field(const server *s, const cJSON *body, api_error *e) {
    const char *m = NULL;
    if (!jf_str(body, "model", &m, e)) return false;
    if (!m || !*m || model_name_matches(s, m)) return true;
    return api_fail(e, 404, "model", "model_not_found", "The model '%.200s' does not exist; this server serves '%.200s'",
                    m, s->model_id);
}

/* ---- pieces of the sampling fields -------------------------------------------------- */
static bool parse_stop(const cJSON *b, gen_opts *o, api_error *e) {
    const cJSON *v = jf_get(b, "stop");
    if (!v) return true;
    o->jp.n_stop = 0;
    if (cJSON_IsString(v)) {
        if (*v->valuestring) o->jp.stop[o->jp.n_stop++] = v->valuestring;
        return true;
    }
    if (!cJSON_IsArray(v)) return api_fail(e, 400, "stop", "invalid_type", "'stop' must be a string or a list of strings");
    if (cJSON_GetArraySize(v) > ENGINE_MAX_STOP)
        return api_fail(e, 400, "stop", "invalid_value", "'stop' may hold at most %d strings", ENGINE_MAX_STOP);
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsString(it)) return api_fail(e, 400, "stop", "invalid_type", "'stop' must be a string or a list of strings");
        if (*it->valuestring) o->jp.stop[o->jp.n_stop++] = it->valuestring;
    }
    return true;
}

#define MAX_LOGIT_BIAS 1024

/* 0, 1 past the cap (counted after text entries are tokenized, so one
 * long text cannot make every sampling step walk a huge list), -1 out of memory */
static int bias_add(gen_opts *o, int *cap, int32_t id, float bias) {
    if (o->jp.sampling.n_logit_bias >= MAX_LOGIT_BIAS) return 1;
    if (o->jp.sampling.n_logit_bias == *cap) {
        int c = *cap ? *cap * 2 : 16;
        logit_bias_entry *nb = realloc(o->bias, sizeof *nb * (size_t)c);
        if (!nb) return -1;
        o->bias = nb;
        *cap = c;
    }
    o->bias[o->jp.sampling.n_logit_bias].id = id;
    o->bias[o->jp.sampling.n_logit_bias++].bias = bias;
    return 0;
}

static bool bias_fail(api_error *e, int rc) {
    if (rc > 0)
        return api_fail(e, 400, "logit_bias", "invalid_value", "logit_bias: at most %d entries (text entries count "
                        "one per token)", MAX_LOGIT_BIAS);
    return api_fail(e, 500, NULL, NULL, "out of memory");
}

static bool bias_value(const cJSON *v, float *out) {
    if (cJSON_IsFalse(v)) { *out = -INFINITY; return true; }   /* llama.cpp: false bans */
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return false;
    *out = (float)v->valuedouble;
    return true;
}

/* OpenAI: {"token id": bias}; llama.cpp also: [[id or text, bias or false], ...]. */
static bool parse_logit_bias(const server *s, const cJSON *b, gen_opts *o, api_error *e) {
    const cJSON *v = jf_get(b, "logit_bias");
    if (!v) return true;
    /* a cap on entries, so one request cannot make every sampling step walk a huge list */
    if (cJSON_GetArraySize(v) > MAX_LOGIT_BIAS)
        return api_fail(e, 400, "logit_bias", "invalid_value", "logit_bias: at most %d entries", MAX_LOGIT_BIAS);
    int n_vocab = s->model->p.n_vocab, cap = 0;
    const cJSON *it;
    if (cJSON_IsObject(v)) {
        cJSON_ArrayForEach(it, v) {
            char *end;
            errno = 0;
            long id = strtol(it->string, &end, 10);
            float bias;
            if (errno || end == it->string || *end || id < 0 || id >= n_vocab)
                return api_fail(e, 400, "logit_bias", "invalid_value", "logit_bias: '%.40s' is not a token id below %d",
                                it->string, n_vocab);
            if (!bias_value(it, &bias))
                return api_fail(e, 400, "logit_bias", "invalid_type", "logit_bias: the bias of %ld must be a number", id);
            int rc = bias_add(o, &cap, (int32_t)id, bias);
            if (rc) return bias_fail(e, rc);
        }
    } else if (cJSON_IsArray(v)) {
        cJSON_ArrayForEach(it, v) {
            const cJSON *k = cJSON_GetArrayItem(it, 0), *bv = cJSON_GetArrayItem(it, 1);
            float bias;
            if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !bias_value(bv, &bias))
                return api_fail(e, 400, "logit_bias", "invalid_type", "logit_bias: each entry must be [token, bias]");
            if (cJSON_IsString(k)) {
                int32_t *ids = NULL;
                int n = tokenizer_encode(s->model->tok, k->valuestring, strlen(k->valuestring), false, false, &ids);
                for (int i = 0; i < n; i++) {
                    int rc = bias_add(o, &cap, ids[i], bias);
                    if (rc) { free(ids); return bias_fail(e, rc); }
                }
                free(ids);
                if (n < 0) return api_fail(e, 500, NULL, NULL, "out of memory");
            } else if (cJSON_IsNumber(k) && k->valuedouble == floor(k->valuedouble) && k->valuedouble >= 0 &&
                       k->valuedouble < n_vocab) {
                int rc = bias_add(o, &cap, (int32_t)k->valuedouble, bias);
                if (rc) return bias_fail(e, rc);
            } else {
                return api_fail(e, 400, "logit_bias", "invalid_value", "logit_bias: tokens must be ids below %d or text",
                                n_vocab);
            }
        }
    } else {
        return api_fail(e, 400, "logit_bias", "invalid_type", "'logit_bias' must be an object of token id -> bias");
    }
    o->jp.sampling.logit_bias = o->bias;
    return true;
}

/* llama.cpp's "samplers": which stages run. hearth keeps its own order, and
 * a stage left out is turned off (temperature 1, top_k 0, top_p 1, ...). */
enum { ST_NONE, ST_TOP_K, ST_TOP_P, ST_MIN_P, ST_TEMP, ST_PENALTIES, ST_TYPICAL, ST_XTC, ST_DRY, ST_SIGMA, ST_COUNT };
static const struct { const char *name; char c; int stage; } sampler_names[] = {
    { "top_k", 'k', ST_TOP_K }, { "top_p", 'p', ST_TOP_P }, { "min_p", 'm', ST_MIN_P },
    { "temperature", 't', ST_TEMP }, { "temp", 0, ST_TEMP }, { "penalties", 'e', ST_PENALTIES },
    { "typ_p", 'y', ST_TYPICAL }, { "typical_p", 0, ST_TYPICAL }, { "xtc", 'x', ST_XTC }, { "dry", 'd', ST_DRY },
    { "top_n_sigma", 's', ST_SIGMA }, { "infill", 'i', ST_NONE },   /* infill: hearth's /infill needs no stage */
};

static int sampler_stage(const char *name, size_t n) {
    for (size_t i = 0; i < sizeof sampler_names / sizeof *sampler_names; i++)
        if (strlen(sampler_names[i].name) == n && !strncmp(sampler_names[i].name, name, n)) return sampler_names[i].stage;
    return -1;
}

static bool parse_samplers(const cJSON *b, gen_opts *o, api_error *e) {
    const cJSON *v = jf_get(b, "samplers");
    if (!v) return true;
    bool on[ST_COUNT] = { 0 };
    if (cJSON_IsArray(v)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, v) {
            int st = cJSON_IsString(it) ? sampler_stage(it->valuestring, strlen(it->valuestring)) : -1;
            if (st < 0) return api_fail(e, 400, "samplers", "invalid_value", "samplers: unknown sampler %s",
                                        cJSON_IsString(it) ? it->valuestring : "(not a string)");
            on[st] = true;
        }
    } else if (cJSON_IsString(v)) {
        const char *p = v->valuestring;
        if (strchr(p, ';') || sampler_stage(p, strlen(p)) >= 0) {   /* "top_k;top_p;..." */
            while (*p) {
                size_t n = strcspn(p, ";");
                int st = sampler_stage(p, n);
                if (st < 0) return api_fail(e, 400, "samplers", "invalid_value", "samplers: unknown sampler '%.*s'", (int)(n > 40 ? 40 : n), p);
                on[st] = true;
                p += n + (p[n] == ';');
            }
        } else {   /* llama.cpp's letters, "edkypmxt" */
            for (; *p; p++) {
                int st = -1;
                for (size_t i = 0; i < sizeof sampler_names / sizeof *sampler_names; i++)
                    if (sampler_names[i].c == *p) st = sampler_names[i].stage;
                if (st < 0) return api_fail(e, 400, "samplers", "invalid_value", "samplers: unknown sampler letter '%c'", *p);
                on[st] = true;
            }
        }
    } else {
        return api_fail(e, 400, "samplers", "invalid_type", "'samplers' must be a list of sampler names");
    }
    sampler_params *sp = &o->jp.sampling;
    if (!on[ST_TOP_K]) sp->top_k = 0;
    if (!on[ST_TOP_P]) sp->top_p = 1.0f;
    if (!on[ST_MIN_P]) sp->min_p = 0.0f;
    if (!on[ST_TEMP]) sp->temperature = 1.0f;
    if (!on[ST_PENALTIES]) { sp->repeat_penalty = 1.0f; sp->presence_penalty = 0; sp->frequency_penalty = 0; }
    if (!on[ST_TYPICAL]) sp->typical_p = 1.0f;
    if (!on[ST_XTC]) sp->xtc_probability = 0.0f;
    if (!on[ST_DRY]) sp->dry_multiplier = 0.0f;
    if (!on[ST_SIGMA]) sp->top_n_sigma = -1.0f;
    return true;
}

/* The tokens that end a DRY repeat: those whose text holds one of the
 * breaker strings (llama.cpp's defaults: newline, colon, quote, asterisk),
 * found as llama.cpp does, with one pass over the vocabulary per request
 * that turns DRY on. */
static bool dry_breaker_ids(const server *s, const char *const *brk, int n_brk, int32_t **out, int *n_out) {
    int nv = s->model->p.n_vocab, n = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)(nv > 0 ? nv : 1));
    if (!ids) return false;
    char piece[512];
    for (int32_t t = 0; t < nv; t++) {
        size_t len = tokenizer_token_bytes(s->model->tok, t, false, piece, sizeof piece - 1);
        piece[len < sizeof piece ? len : sizeof piece - 1] = 0;
        for (int i = 0; i < n_brk; i++)
            if (*brk[i] && strstr(piece, brk[i])) { ids[n++] = t; break; }
    }
    *out = ids;
    *n_out = n;
    return true;
}

static bool parse_dry(const server *s, const cJSON *b, gen_opts *o, api_error *e) {
    sampler_params *sp = &o->jp.sampling;
    double d;
    long long n;
#define NUM(key, lo, hi, field) \
    do { d = (double)(field); if (!jf_num(b, key, lo, hi, &d, e)) return false; (field) = (float)d; } while (0)
    NUM("dry_multiplier", 0, 1e6, sp->dry_multiplier);
    NUM("dry_base", 1, 1e6, sp->dry_base);
#undef NUM
    n = sp->dry_allowed_length;
    if (!jf_int(b, "dry_allowed_length", 0, INT_MAX, &n, e)) return false;
    sp->dry_allowed_length = (int)n;
    n = sp->dry_penalty_last_n;
    if (!jf_int(b, "dry_penalty_last_n", -1, INT_MAX, &n, e)) return false;
    sp->dry_penalty_last_n = (int)n;
    const cJSON *v = jf_get(b, "dry_sequence_breakers"), *it;
    const char *mine[ENGINE_MAX_STOP];
    int n_mine = 0;
    if (v) {
        if (!cJSON_IsArray(v)) return api_fail(e, 400, "dry_sequence_breakers", "invalid_type", "'dry_sequence_breakers' must be a list of strings");
        cJSON_ArrayForEach(it, v) {
            if (!cJSON_IsString(it)) return api_fail(e, 400, "dry_sequence_breakers", "invalid_type", "'dry_sequence_breakers' must be a list of strings");
            if (n_mine == ENGINE_MAX_STOP)
                return api_fail(e, 400, "dry_sequence_breakers", "invalid_value", "'dry_sequence_breakers' may hold at most %d strings", ENGINE_MAX_STOP);
            mine[n_mine++] = it->valuestring;
        }
    }
    if (!(sp->dry_multiplier > 0)) return true;
    if (v) {   /* the request's own breakers, owned by o */
        if (!dry_breaker_ids(s, mine, n_mine, &o->dry_ids, &sp->n_dry_breakers)) return api_fail(e, 500, NULL, NULL, "out of memory");
        sp->dry_breakers = o->dry_ids;
        return true;
    }
    static const char *const defaults[] = { "\n", ":", "\"", "*" };
    if (!dry_breaker_ids(s, defaults, 4, &o->dry_ids, &sp->n_dry_breakers)) return api_fail(e, 500, NULL, NULL, "out of memory");
    sp->dry_breakers = o->dry_ids;
    return true;
}

/* llama.cpp's other sampling fields: typical, XTC, top-n-sigma, mirostat. */
static bool parse_llama_samplers(const cJSON *b, gen_opts *o, api_error *e) {
    sampler_params *sp = &o->jp.sampling;
    double d;
    long long n;
#define NUM(key, lo, hi, field) \
    do { d = (double)(field); if (!jf_num(b, key, lo, hi, &d, e)) return false; (field) = (float)d; } while (0)
    NUM("typical_p", 0, 1, sp->typical_p);
    NUM("typ_p", 0, 1, sp->typical_p);
    NUM("xtc_probability", 0, 1, sp->xtc_probability);
    NUM("xtc_threshold", 0, 1, sp->xtc_threshold);
    NUM("top_n_sigma", -1e6, 1e6, sp->top_n_sigma);
    NUM("mirostat_tau", 0, 1e6, sp->mirostat_tau);
    NUM("mirostat_eta", 0, 1e6, sp->mirostat_eta);
#undef NUM
    n = sp->mirostat;
    if (!jf_int(b, "mirostat", 0, 2, &n, e)) return false;
    sp->mirostat = (int)n;
    return true;
}

/* Fields llama-server takes that hearth does not act on: accepted, and
 * named in the X-Hearth-Ignored answer header when not at their neutral value. */
static bool parse_ignored(const cJSON *b, gen_opts *o, api_error *e) {
    static const struct { const char *key; double neutral; } nums[] = {
        { "tfs_z", 1 }, { "dynatemp_range", 0 }, { "dynatemp_exponent", 1 }, { "min_keep", 0 },
        { "n_keep", 0 }, { "n_discard", 0 },
    };
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        const cJSON *v = jf_get(b, nums[i].key);
        if (!v) continue;
        if (!cJSON_IsNumber(v)) return api_fail(e, 400, nums[i].key, "invalid_type", "'%s' must be a number", nums[i].key);
        if (v->valuedouble == nums[i].neutral || (!strcmp(nums[i].key, "n_keep") && v->valuedouble == -1)) continue;
        size_t used = strlen(o->ignored);
        snprintf(o->ignored + used, sizeof o->ignored - used, "%s%s", used ? ", " : "", nums[i].key);
    }
    return true;
}

/* Fields hearth cannot act on at all: a 400 that names them. */
static bool parse_unsupported(const cJSON *b, gen_kind kind, api_error *e) {
    static const char *const lists[] = { "tools", "functions", "lora", "image_data", "multimodal_data" };
    for (size_t i = kind == GEN_CHAT; i < sizeof lists / sizeof *lists; i++) {   /* chat: tools in tool_request.c */
        const cJSON *v = jf_get(b, lists[i]);
        if (v && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0))
            return api_fail(e, 400, lists[i], "unsupported_value", "'%s' is not supported by this server", lists[i]);
    }
    const cJSON *v = jf_get(b, "tool_choice");
    if (v && kind != GEN_CHAT && !(cJSON_IsString(v) && (!strcmp(v->valuestring, "none") || !strcmp(v->valuestring, "auto"))))
        return api_fail(e, 400, "tool_choice", "unsupported_value", "'tool_choice' is not supported by this server");
    return true;
}

/* Constrained output: llama.cpp's "grammar" (GBNF) and "json_schema", and
 * OpenAI's response_format (json_object, json_schema). At most one of them;
 * a bad grammar or schema is a 400 with the parser's message. The source
 * sizes are capped by the compilers, so this stays cheap on the loop. */
static bool parse_grammar(const cJSON *b, gen_opts *o, api_error *e) {
    const cJSON *gr = jf_get(b, "grammar"), *js = jf_get(b, "json_schema"), *rf = jf_get(b, "response_format");
    if (gr && !cJSON_IsString(gr)) return api_fail(e, 400, "grammar", "invalid_type", "'grammar' must be a string (GBNF)");
    if (gr && !*gr->valuestring) gr = NULL;
    if (js && !cJSON_IsObject(js) && !cJSON_IsBool(js))
        return api_fail(e, 400, "json_schema", "invalid_type", "'json_schema' must be a JSON schema object");
    if (js && cJSON_IsObject(js) && !js->child) js = NULL;   /* {}: no constraint, as llama.cpp */
    const char *param = gr ? "grammar" : js ? "json_schema" : "response_format";
    const cJSON *schema = js;
    bool strict = false, any_object = false;
    if (rf) {
        const cJSON *t = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        if (!cJSON_IsString(t))
            return api_fail(e, 400, "response_format", "invalid_type", "'response_format' must be an object with a 'type'");
        if (!strcmp(t->valuestring, "text")) rf = NULL;
        else if (gr || js)
            return api_fail(e, 400, "response_format", "invalid_value", "give one of 'grammar', 'json_schema' and 'response_format'");
        else if (!strcmp(t->valuestring, "json_object")) {
            schema = jf_get(rf, "schema");   /* llama-server also takes a schema here */
            any_object = !schema;
        } else if (!strcmp(t->valuestring, "json_schema")) {
            const cJSON *w = jf_get(rf, "json_schema");
            if (!cJSON_IsObject(w))
                return api_fail(e, 400, "response_format", "invalid_value", "response_format json_schema needs a 'json_schema' object");
            schema = jf_get(w, "schema");
            const cJSON *st = jf_get(w, "strict");
            if (st && !cJSON_IsBool(st))
                return api_fail(e, 400, "response_format", "invalid_type", "'response_format.json_schema.strict' must be true or false");
            strict = cJSON_IsTrue(st);
            if (!schema) any_object = true;
        } else {
            return api_fail(e, 400, "response_format", "invalid_value",
                            "'response_format.type' must be 'text', 'json_object' or 'json_schema', not '%.40s'", t->valuestring);
        }
    }
    if (gr && js) return api_fail(e, 400, "grammar", "invalid_value", "give one of 'grammar' and 'json_schema'");
    if (!gr && !schema && !any_object) return true;
    char err[256];
    if (gr) o->grammar = grammar_parse(gr->valuestring, strlen(gr->valuestring), err, sizeof err);
    else if (any_object) o->grammar = grammar_json_object(err, sizeof err);
    else o->grammar = grammar_from_json_schema(schema, strict, err, sizeof err);
    if (!o->grammar) return api_fail(e, 400, param, "invalid_value", "%s", err);
    o->jp.grammar = o->grammar;
    return true;
}

/* The length limit: max_completion_tokens / max_tokens (OpenAI: at least 1,
 * or -1 as llama.cpp's clients send for "until the context or a stop", or 0
 * on /v1/completions with echo: the prompt is only scored) or
 * n_predict (llama.cpp: -1 unlimited, 0 warms the cache only). */
static bool parse_length(const server *s, const cJSON *b, gen_kind kind, gen_opts *o, api_error *e) {
    const char *keys[3] = { "n_predict", "max_tokens", "max_completion_tokens" };
    for (int i = 0; i < 3; i++) {   /* later keys win */
        const char *k = keys[i];
        if (kind != GEN_CHAT && i == 2) continue;
        if (!jf_get(b, k)) continue;
        bool oai = i > 0;
        long long n = -1;
        if (!jf_int(b, k, oai ? -1 : -2, INT_MAX, &n, e)) return false;
        /* /v1/completions with echo: 0 scores the prompt (prompt logprobs), as OpenAI's legacy API allowed */
        bool scoring = kind == GEN_COMPLETION && i == 1 && cJSON_IsTrue(jf_get(b, "echo"));
        if (oai && n == 0 && !scoring)
            return api_fail(e, 400, k, "invalid_value", "'%s' must be at least 1 (or -1: until the context is full; 0 with echo)", k);
        if (n > s->n_ctx)
            return api_fail(e, 400, k, "context_length_exceeded",
                            "'%s' is %lld but a slot's context holds %d tokens (prompt included)", k, n, s->n_ctx);
        o->jp.max_tokens = n < 0 ? -1 : (int)n;
        o->warmup = n == 0;
    }
    return true;
}

/* A seed for a request without one: 32 bits, as llama.cpp reports them. */
static uint64_t random_seed(void) {
    static uint64_t counter;
    uint64_t x = uv_hrtime() + (++counter) * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(x ^ (x >> 31));
}

/* llama-server keeps 32 bits of a seed (its type is uint32_t): a seed is
 * taken modulo 2^32 (a negative one in two's complement), and 2^32 - 1 --
 * which is also what -1 and 2^64 - 1 become -- asks for a random one. A seed
 * past 2^53 is read as the nearest double, as any JSON number is, and one
 * at or past 2^64 as 2^64 - 1. */
static bool parse_seed(const cJSON *b, sampler_params *sp, api_error *e) {
    const cJSON *v = jf_get(b, "seed");
    if (!v) { sp->seed = random_seed(); return true; }
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!isfinite(d) || d != floor(d) || d < -0x1p63)
        return api_fail(e, 400, "seed", "invalid_type", "'seed' must be an integer (at most 2^64 - 1)");
    uint64_t x = d >= 0x1p64 ? UINT64_MAX : d >= 0 ? (uint64_t)d : (uint64_t)(int64_t)d;
    uint32_t low = (uint32_t)x;
    sp->seed = low == UINT32_MAX ? random_seed() : low;
    return true;
}

bool parse_gen_opts(const server *s, const cJSON *b, gen_kind kind, gen_opts *o, api_error *e) {
    sampler_params *sp = &o->jp.sampling;
    double d;
    long long n;
    bool bv;

#define NUM(key, lo, hi, field) \
    do { d = (double)(field); if (!jf_num(b, key, lo, hi, &d, e)) return false; (field) = (float)d; } while (0)
    NUM("temperature", 0, 100, sp->temperature);
    NUM("top_p", 0, 1, sp->top_p);
    NUM("min_p", 0, 1, sp->min_p);
    NUM("presence_penalty", -2, 2, sp->presence_penalty);
    NUM("frequency_penalty", -2, 2, sp->frequency_penalty);
    NUM("repeat_penalty", 0, 10, sp->repeat_penalty);
    NUM("repetition_penalty", 0, 10, sp->repeat_penalty);
#undef NUM
    if (sp->repeat_penalty == 0) sp->repeat_penalty = 1.0f;   /* 0 means off, as 1 does */
    n = sp->top_k;
    if (!jf_int(b, "top_k", 0, INT_MAX, &n, e)) return false;
    sp->top_k = (int)n;
    n = sp->penalty_last_n;
    if (!jf_int(b, "repeat_last_n", -1, INT_MAX, &n, e) || !jf_int(b, "penalty_last_n", -1, INT_MAX, &n, e)) return false;
    sp->penalty_last_n = (int)n;
    if (!parse_seed(b, sp, e)) return false;
    o->seed_given = jf_get(b, "seed") != NULL;
    if (!parse_llama_samplers(b, o, e) || !parse_dry(s, b, o, e) || !parse_ignored(b, o, e)) return false;
    if (!parse_samplers(b, o, e)) return false;

    if (!jf_bool(b, "ignore_eos", &o->jp.ignore_eos, e)) return false;
    if (!jf_bool(b, "cache_prompt", &o->jp.cache_prompt, e)) return false;
    n = -1;
    if (!jf_int(b, "id_slot", -1, s->o.n_parallel - 1, &n, e)) return false;
    o->jp.id_slot = (int)n;
    d = 0;
    if (!jf_num(b, "t_max_predict_ms", 0, 1e12, &d, e) || !jf_num(b, "t_max_prompt_ms", -1, 1e12, &(double){0}, e))
        return false;
    o->jp.t_max_predict_ms = d;
    n = 1;
    if (kind != GEN_LLAMA && !jf_int(b, "n", 1, GEN_MAX_CHOICES, &n, e)) return false;
    o->n_choices = (int)n;
    long long best = n;   /* best_of: only as many as are returned (no ranking) */
    if (!jf_int(b, "best_of", 1, GEN_MAX_CHOICES, &best, e)) return false;
    if (best != n && best != 1) return api_fail(e, 400, "best_of", "unsupported_value", "'best_of' must be 1 or equal 'n'");
    if (!parse_length(s, b, kind, o, e)) return false;
    if (!parse_stop(b, o, e)) return false;
    if (!parse_logit_bias(s, b, o, e)) return false;
    if (!parse_unsupported(b, kind, e)) return false;
    if (!parse_grammar(b, o, e)) return false;

    if (!jf_bool(b, "stream", &o->stream, e)) return false;
    const cJSON *so = jf_get(b, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so)) return api_fail(e, 400, "stream_options", "invalid_type", "'stream_options' must be an object");
        if (!o->stream) return api_fail(e, 400, "stream_options", "invalid_value", "'stream_options' is only allowed with stream: true");
        bv = false;
        if (!jf_bool(so, "include_usage", &bv, e)) return api_fail(e, 400, "stream_options.include_usage", "invalid_type",
                                                                  "'stream_options.include_usage' must be true or false");
        o->include_usage = bv;
    }

    switch (kind) {
    case GEN_CHAT:
        if (!jf_bool(b, "logprobs", &o->logprobs, e)) return false;
        n = 0;
        if (!jf_int(b, "top_logprobs", 0, ENGINE_MAX_TOP_LOGPROBS, &n, e)) return false;
        if (n > 0 && !o->logprobs)
            return api_fail(e, 400, "top_logprobs", "invalid_value", "'top_logprobs' needs 'logprobs': true");
        o->n_probs = (int)n;
        break;
    case GEN_COMPLETION:
        n = -1;
        if (!jf_int(b, "logprobs", 0, ENGINE_MAX_TOP_LOGPROBS, &n, e)) return false;
        o->logprobs = n >= 0;
        o->n_probs = n > 0 ? (int)n : 0;
        if (!jf_bool(b, "echo", &o->echo, e)) return false;
        o->jp.prompt_logprobs = o->echo && o->logprobs;   /* the prompt's tokens get logprobs too */
        break;
    case GEN_LLAMA:
        n = 0;
        if (!jf_int(b, "n_probs", 0, ENGINE_MAX_TOP_LOGPROBS, &n, e)) return false;
        o->n_probs = (int)n;
        o->logprobs = n > 0;
        n = 0;
        if (!jf_int(b, "n_indent", 0, 1 << 16, &n, e)) return false;
        o->n_indent = (int)n;
        if (!jf_bool(b, "return_tokens", &o->return_tokens, e)) return false;
        const cJSON *rf = jf_get(b, "response_fields");
        if (rf) {
            const cJSON *it;
            if (!cJSON_IsArray(rf)) return api_fail(e, 400, "response_fields", "invalid_type", "'response_fields' must be a list of strings");
            cJSON_ArrayForEach(it, rf)
                if (!cJSON_IsString(it)) return api_fail(e, 400, "response_fields", "invalid_type", "'response_fields' must be a list of strings");
            o->response_fields = rf;
        }
        break;
    }
    o->jp.logprobs = o->logprobs;
    o->jp.n_top_logprobs = o->n_probs;
    return true;
}
