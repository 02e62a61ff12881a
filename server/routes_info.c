/* Endpoints that describe the server: /v1/models, /health, /props, /slots,
 * /metrics and the prompt cache (/cache). */
#include "server/routes.h"
#include "server/errors.h"
#include "server/fmt.h"
#include "server/gen.h"
#include "server/model_set.h"
#include "server/request_json.h"
#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"
#include "server/utf8.h"
#include <stdlib.h>
#include <string.h>

#ifndef HEARTH_VERSION
#define HEARTH_VERSION "unknown"
#endif

static cJSON *model_object(const server *s) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->created);
    cJSON_AddStringToObject(m, "owned_by", "hearth");
    if (s->model) {
        cJSON *meta = cJSON_AddObjectToObject(m, "meta");
        cJSON_AddStringToObject(meta, "name", s->model->name ? s->model->name : "");
        cJSON_AddStringToObject(meta, "architecture", model_arch_name(s->model->p.arch));
        cJSON_AddNumberToObject(meta, "n_vocab", s->model->p.n_vocab);
        cJSON_AddNumberToObject(meta, "n_ctx_train", s->model->p.n_ctx_train);
        cJSON_AddNumberToObject(meta, "n_embd", s->model->p.n_embd);
        cJSON_AddNumberToObject(meta, "size", (double)s->model->weight_bytes);
    }
    return m;
}

/* A served model with its state ("loaded", "loading", "unloaded", "unloading"). */
static cJSON *entry_object(const model_entry *e) {
    cJSON *m = model_object(&e->s);
    cJSON *st = cJSON_AddObjectToObject(m, "status");
    cJSON_AddStringToObject(st, "value", model_state_name(e->state));
    if (e->last_error[0]) cJSON_AddStringToObject(st, "error", e->last_error);
    return m;
}

void route_models(server *s, http_req *r, const cJSON *body) {
    (void)body;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    for (int i = 0; i < s->set->n; i++) cJSON_AddItemToArray(data, entry_object(&s->set->e[i]));
    respond_json(r, 200, o);
}

void route_model(server *s, http_req *r, const cJSON *body) {
    (void)body;
    const char *id = http_path(r) + strlen(strncmp(http_path(r), "/v1/", 4) ? "/models/" : "/v1/models/");
    const model_entry *e = model_set_find(s->set, id);
    if (!e) {
        respond_error(r, 404, "model", "model_not_found", "The model '%.200s' does not exist; this server serves %s",
                      id, model_set_names(s->set));
        return;
    }
    respond_json(r, 200, entry_object(e));
}

void route_health(server *s, http_req *r, const cJSON *body) {
    (void)body;
    if (!s->set->started_once) {   /* the default model is not in yet */
        respond_error(r, 503, NULL, "loading", "Loading model");
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "ok");
    respond_json(r, 200, o);
}

/* llama-server's slot object: {id, id_task, n_ctx, speculative,
 * is_processing, params, prompt, next_token}, with hearth's own state,
 * n_past, n_prompt_tokens and n_decoded beside them. si NULL: the defaults
 * /props shows. */
static cJSON *slot_object(const server *s, const slot_info *si) {
    const gen *g = NULL;
    for (const gen *it = si && si->busy ? s->gens : NULL; it && !g; it = it->next)
        if (it->in_engine && it->job == si->job_id) g = it;
    gen_opts d;
    gen_opts_init(&d);
    d.jp.sampling.seed = UINT32_MAX;   /* llama-server's "a random seed" */
    const gen_opts *o = g ? &g->o : &d;
    bool busy = si && si->busy;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "id", si ? si->id : 0);
    cJSON_AddNumberToObject(j, "id_task", busy ? (double)si->job_id : -1);
    cJSON_AddNumberToObject(j, "n_ctx", si ? si->n_ctx : s->n_ctx);
    cJSON_AddBoolToObject(j, "speculative", false);
    cJSON_AddBoolToObject(j, "is_processing", busy);
    cJSON_AddItemToObject(j, "params", fmt_settings(s, o));
    cJSON_AddStringToObject(j, "prompt", "");
    cJSON *nt = cJSON_AddObjectToObject(j, "next_token");
    int n_dec = busy ? si->n_generated : 0;
    cJSON_AddBoolToObject(nt, "has_next_token", busy);
    cJSON_AddBoolToObject(nt, "has_new_line", g && g->text_len && memchr(g->text, '\n', g->text_len));
    cJSON_AddNumberToObject(nt, "n_remain", o->jp.max_tokens < 0 ? -1 : o->jp.max_tokens - n_dec);
    cJSON_AddNumberToObject(nt, "n_decoded", n_dec);
    cJSON_AddStringToObject(nt, "stopping_word", "");
    if (si) {
        cJSON_AddStringToObject(j, "state", !si->busy ? "idle" : si->prefilling ? "prefill" : "generate");
        cJSON_AddNumberToObject(j, "n_past", si->n_past);
        cJSON_AddNumberToObject(j, "n_prompt_tokens", si->n_prompt);
        cJSON_AddNumberToObject(j, "n_decoded", si->n_generated);
    }
    gen_opts_free(&d);
    return j;
}

/* A special token's text for /props ("" when the model has none). */
static cJSON *token_text(const server *s, int32_t id) {
    const char *t = id >= 0 ? tokenizer_token_text(s->model->tok, id) : NULL;
    return utf8_json_string(t ? t : "", t ? strlen(t) : 0);
}

void route_props(server *s, http_req *r, const cJSON *body) {
    (void)body;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "default_generation_settings", slot_object(s, NULL));
    cJSON_AddNumberToObject(o, "total_slots", s->o.n_parallel);
    cJSON_AddNumberToObject(o, "n_ctx", s->n_ctx);
    cJSON_AddStringToObject(o, "model_path", s->o.model_path ? s->o.model_path : "");
    cJSON_AddStringToObject(o, "model_alias", s->model_id);
    cJSON_AddStringToObject(o, "chat_template", chat_template_source(s->tpl));   /* the Jinja source, as llama-server */
    cJSON_AddItemToObject(o, "bos_token", token_text(s, tokenizer_bos(s->model->tok)));
    cJSON_AddItemToObject(o, "eos_token", token_text(s, tokenizer_eos(s->model->tok)));
    cJSON_AddStringToObject(o, "build_info", "hearth " HEARTH_VERSION);
    cJSON *mod = cJSON_AddObjectToObject(o, "modalities");
    cJSON_AddBoolToObject(mod, "vision", false);
    cJSON_AddBoolToObject(mod, "audio", false);
    respond_json(r, 200, o);
}

void route_slots(server *s, http_req *r, const cJSON *body) {
    (void)body;
    int n = s->o.n_parallel;
    slot_info *si = calloc((size_t)n, sizeof *si);
    if (!si) { respond_error(r, 500, NULL, NULL, "out of memory"); return; }
    n = engine_slots(s->engine, si, n);
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n && i < s->o.n_parallel; i++) cJSON_AddItemToArray(a, slot_object(s, &si[i]));
    free(si);
    respond_json(r, 200, a);
}

void route_metrics(server *s, http_req *r, const cJSON *body) {
    (void)body;
    /* every loaded model's engine, each under its own label */
    model_set *set = s->set;
    metrics_model *ms = calloc((size_t)set->n, sizeof *ms);
    if (!ms) { respond_error(r, 500, NULL, NULL, "out of memory"); return; }
    int n = 0;
    for (int i = 0; i < set->n; i++) {
        const server *m = &set->e[i].s;
        if (set->e[i].state != MODEL_READY || !m->engine) continue;
        ms[n].id = m->model_id;
        engine_get_stats(m->engine, &ms[n].es);
        ms[n].have_pc = engine_cache_stats(m->engine, &ms[n].pc) == 0;
        n++;
    }
    char *text = metrics_render(s->metrics, ms, n, http_active(s->http), s->o.metrics_compat);
    free(ms);
    if (!text) { respond_error(r, 500, NULL, NULL, "out of memory"); return; }
    http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
    free(text);
}

void route_cache(server *s, http_req *r, const cJSON *body) {
    (void)body;
    prompt_cache_stats pc;
    bool on = engine_cache_stats(s->engine, &pc) == 0;
    if (!strcmp(http_method(r), "DELETE")) {
        if (!on) { respond_error(r, 400, NULL, "cache_off", "the prompt cache is off"); return; }
        engine_cache_clear(s->engine);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddBoolToObject(o, "cleared", true);
        respond_json(r, 200, o);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "enabled", on);
    if (on) {
        cJSON_AddNumberToObject(o, "entries", (double)pc.entries);
        cJSON_AddNumberToObject(o, "bytes", (double)pc.bytes);
        cJSON_AddNumberToObject(o, "max_bytes", (double)pc.max_bytes);
        cJSON_AddNumberToObject(o, "hits", (double)pc.hits);
        cJSON_AddNumberToObject(o, "misses", (double)pc.misses);
        cJSON_AddNumberToObject(o, "evictions", (double)pc.evictions);
        cJSON_AddNumberToObject(o, "tokens_restored", (double)pc.tokens_restored);
        cJSON_AddNumberToObject(o, "blocks_stored", (double)pc.blocks_stored);
        cJSON_AddNumberToObject(o, "blocks_dropped", (double)pc.blocks_dropped);
    }
    respond_json(r, 200, o);
}
