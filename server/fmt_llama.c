/* llama.cpp's answer shape for /completion and /infill, whole or as SSE
 * events (no "[DONE]" at the end, as llama.cpp does), see fmt.h. */
#include "server/fmt.h"
#include "server/errors.h"
#include "server/utf8.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A float as the short decimal it was written as (0.95, not 0.949999988). */
static double shortest(float f) {
    char b[32];
    snprintf(b, sizeof b, "%.7g", f);
    return strtod(b, NULL);
}

cJSON *fmt_settings(const server *s, const gen_opts *o) {
    const sampler_params *sp = &o->jp.sampling;
    cJSON *g = cJSON_CreateObject();
    cJSON_AddNumberToObject(g, "n_ctx", s->n_ctx);
    cJSON_AddNumberToObject(g, "n_predict", o->jp.max_tokens);
    cJSON_AddNumberToObject(g, "seed", (double)sp->seed);
    cJSON_AddNumberToObject(g, "temperature", shortest(sp->temperature));
    cJSON_AddNumberToObject(g, "top_k", sp->top_k);
    cJSON_AddNumberToObject(g, "top_p", shortest(sp->top_p));
    cJSON_AddNumberToObject(g, "min_p", shortest(sp->min_p));
    cJSON_AddNumberToObject(g, "repeat_last_n", sp->penalty_last_n);
    cJSON_AddNumberToObject(g, "repeat_penalty", shortest(sp->repeat_penalty));
    cJSON_AddNumberToObject(g, "presence_penalty", shortest(sp->presence_penalty));
    cJSON_AddNumberToObject(g, "frequency_penalty", shortest(sp->frequency_penalty));
    cJSON *stop = cJSON_AddArrayToObject(g, "stop");
    for (int i = 0; i < o->jp.n_stop; i++) cJSON_AddItemToArray(stop, utf8_json_string(o->jp.stop[i], strlen(o->jp.stop[i])));
    cJSON_AddBoolToObject(g, "ignore_eos", o->jp.ignore_eos);
    cJSON_AddNumberToObject(g, "n_probs", o->n_probs);
    cJSON_AddNumberToObject(g, "n_indent", o->n_indent);
    cJSON_AddBoolToObject(g, "stream", o->stream);
    cJSON_AddBoolToObject(g, "cache_prompt", o->jp.cache_prompt);
    cJSON_AddNumberToObject(g, "id_slot", o->jp.id_slot);
    cJSON_AddNumberToObject(g, "t_max_predict_ms", o->jp.t_max_predict_ms);
    /* the rest of llama-server's params, under its names */
    cJSON_AddNumberToObject(g, "max_tokens", o->jp.max_tokens);
    cJSON_AddNumberToObject(g, "typical_p", shortest(sp->typical_p > 0 && sp->typical_p < 1 ? sp->typical_p : 1.0f));
    cJSON_AddNumberToObject(g, "top_n_sigma", shortest(sp->top_n_sigma > 0 ? sp->top_n_sigma : -1.0f));
    cJSON_AddNumberToObject(g, "xtc_probability", shortest(sp->xtc_probability));
    cJSON_AddNumberToObject(g, "xtc_threshold", shortest(sp->xtc_threshold));
    cJSON_AddNumberToObject(g, "dry_multiplier", shortest(sp->dry_multiplier));
    cJSON_AddNumberToObject(g, "dry_base", shortest(sp->dry_base));
    cJSON_AddNumberToObject(g, "dry_allowed_length", sp->dry_allowed_length);
    cJSON_AddNumberToObject(g, "dry_penalty_last_n", sp->dry_penalty_last_n);
    if (!o->dry_ids) {   /* a request's own breakers are kept as token ids only */
        static const char *const breakers[] = { "\n", ":", "\"", "*" };
        cJSON_AddItemToObject(g, "dry_sequence_breakers", cJSON_CreateStringArray(breakers, 4));
    }
    cJSON_AddNumberToObject(g, "mirostat", sp->mirostat);
    cJSON_AddNumberToObject(g, "mirostat_tau", shortest(sp->mirostat_tau));
    cJSON_AddNumberToObject(g, "mirostat_eta", shortest(sp->mirostat_eta));
    cJSON_AddNumberToObject(g, "dynatemp_range", 0);
    cJSON_AddNumberToObject(g, "dynatemp_exponent", 1);
    cJSON_AddNumberToObject(g, "n_keep", 0);
    cJSON_AddNumberToObject(g, "n_discard", 0);
    cJSON_AddNumberToObject(g, "min_keep", 0);
    cJSON_AddStringToObject(g, "grammar", "");
    static const char *const order[] = { "penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p",
                                         "xtc", "temperature" };   /* hearth's fixed order */
    cJSON_AddItemToObject(g, "samplers", cJSON_CreateStringArray(order, 9));
    cJSON_AddBoolToObject(g, "timings_per_token", false);
    cJSON_AddBoolToObject(g, "post_sampling_probs", false);
    return g;
}

/* {id, token, logprob, bytes, top_logprobs: [{id, token, logprob, bytes}]} */
static cJSON *probs_entry(const gen *g, const job_event *ev) { return fmt_token_logprobs(g, ev, true); }

static void llama_token(gen *g, const char *text, size_t len, const job_event *ev) {
    cJSON *pe = g->o.n_probs > 0 && ev ? probs_entry(g, ev) : NULL;
    if (!g->stream_started) {
        if (!pe) return;
        if (!g->acc) g->acc = cJSON_CreateArray();
        cJSON_AddItemToArray(g->acc, pe);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", 0);
    cJSON_AddItemToObject(o, "content", utf8_json_string(text, len));
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
    if (ev) cJSON_AddItemToArray(toks, cJSON_CreateNumber(ev->token));
    cJSON_AddBoolToObject(o, "stop", false);
    cJSON_AddNumberToObject(o, "id_slot", g->slot);
    cJSON_AddNumberToObject(o, "tokens_predicted", g->n_gen);
    cJSON_AddNumberToObject(o, "tokens_evaluated", g->n_prompt);
    if (pe) cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "completion_probabilities"), pe);
    gen_sse_json(g, o);
}

/* llama.cpp's response_fields: keep only the listed paths ("timings/prompt_n"),
 * each under its path as the key. */
static cJSON *pick_fields(cJSON *full, const cJSON *fields) {
    cJSON *out = cJSON_CreateObject();
    const cJSON *f;
    cJSON_ArrayForEach(f, fields) {
        const char *path = f->valuestring;
        cJSON *cur = full;
        char key[256];
        const char *p = path;
        while (cur && *p) {
            size_t n = strcspn(p, "/");
            if (n >= sizeof key || !cJSON_IsObject(cur)) { cur = NULL; break; }
            memcpy(key, p, n);
            key[n] = 0;
            cur = cJSON_GetObjectItemCaseSensitive(cur, key);
            p += n + (p[n] == '/');
        }
        if (cur && *path) cJSON_AddItemToObject(out, path, cJSON_Duplicate(cur, true));
    }
    return out;
}

static void llama_finish(gen *g) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", 0);
    if (g->stream_started) cJSON_AddStringToObject(o, "content", "");
    else cJSON_AddItemToObject(o, "content", utf8_json_string(g->text ? g->text : "", g->text_len));
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
    if (g->o.return_tokens && !g->stream_started)
        for (int i = 0; i < g->n_toks; i++) cJSON_AddItemToArray(toks, cJSON_CreateNumber(g->toks[i]));
    cJSON_AddNumberToObject(o, "id_slot", g->slot);
    cJSON_AddBoolToObject(o, "stop", true);
    cJSON_AddStringToObject(o, "model", g->s->model_id);
    cJSON_AddNumberToObject(o, "tokens_predicted", g->n_gen);
    cJSON_AddNumberToObject(o, "tokens_evaluated", g->n_prompt);
    if (g->settings) { cJSON_AddItemToObject(o, "generation_settings", g->settings); g->settings = NULL; }
    cJSON_AddBoolToObject(o, "has_new_line", g->text_len && memchr(g->text, '\n', g->text_len));
    cJSON_AddBoolToObject(o, "truncated", g->truncated);
    cJSON_AddStringToObject(o, "stop_type", gen_stop_type(g));
    cJSON_AddItemToObject(o, "stopping_word", utf8_json_string(g->stop_word ? g->stop_word : "",
                                                               g->stop_word ? strlen(g->stop_word) : 0));
    cJSON_AddNumberToObject(o, "tokens_cached", g->n_prompt + g->n_gen);
    cJSON_AddItemToObject(o, "timings", fmt_timings(g));
    if (g->acc) { cJSON_AddItemToObject(o, "completion_probabilities", g->acc); g->acc = NULL; }
    if (g->response_fields) {
        cJSON *picked = pick_fields(o, g->response_fields);
        cJSON_Delete(o);
        o = picked;
    }
    if (g->stream_started) {
        gen_sse_json(g, o);
        gen_stream_end(g);
    } else {
        respond_json(g->req, 200, o);
        g->ended = true;
    }
}

const gen_fmt fmt_llama = { NULL, llama_token, llama_finish, NULL };
