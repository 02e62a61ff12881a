/* One generation request between HTTP and the engine (see gen.h). */
#include "server/gen.h"
#include "server/gen_group.h"
#include "server/errors.h"
#include "engine/text/tokenizer.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* An engine event copied off the engine thread. */
typedef struct ev_node {
    struct ev_node *next;
    gen *g;
    job_event ev;
    char *text;               /* ev.text points here while it is handled */
    char *stop_word;
} ev_node;

double srv_now_ms(void) { return (double)uv_hrtime() / 1e6; }

/* ---- lifetime --------------------------------------------------------------- */
static void gen_destroy(gen *g) {
    if (g->grp) gen_group_release(g);
    server *s = g->s;
    if (g->prev) g->prev->next = g->next; else s->gens = g->next;
    if (g->next) g->next->prev = g->prev;
    gen_opts_free(&g->o);
    cJSON_Delete(g->response_fields);
    cJSON_Delete(g->settings);
    cJSON_Delete(g->acc);
    cJSON_Delete(g->pending_lp);
    tool_parser_free(g->tp);
    if (g->done_node) free(g->done_node->text), free(g->done_node->stop_word);
    free(g->done_node);
    free(g->stop_word);
    free(g->text);
    free(g->toks);
    free(g->echo);
    free(g->hold);
    free(g);
}

/* The HTTP request is over, or its client left. */
void gen_req_closed(gen *g) {
    if (g->in_engine && !g->grp) gen_set_tokens(g);   /* the log counts what a cancel cut short */
    g->req = NULL;
    if (g->in_engine) engine_cancel(g->s->engine, g->job);   /* DONE comes by the next step */
    else gen_destroy(g);
}

static void on_req_closed(void *arg) { gen_req_closed(arg); }

gen *gen_create(server *s, http_req *r, gen_kind kind, const gen_fmt *fmt, gen_opts *o) {
    gen *g = calloc(1, sizeof *g);
    ev_node *done = calloc(1, sizeof *done);
    cJSON *rf = o->response_fields ? cJSON_Duplicate(o->response_fields, true) : NULL;
    if (!g || !done || (o->response_fields && !rf)) {
        free(g);
        free(done);
        cJSON_Delete(rf);
        gen_opts_free(o);
        respond_error(r, 500, NULL, NULL, "out of memory");
        return NULL;
    }
    g->s = s;
    g->req = r;
    g->fmt = fmt;
    g->kind = kind;
    g->o = *o;
    g->o.response_fields = NULL;
    g->response_fields = rf;
    g->done_node = done;
    g->slot = -1;
    g->created = (long)time(NULL);
    g->t0 = (double)http_start_ns(r) / 1e6;
    atomic_init(&g->lost, false);
    const char *prefix = kind == GEN_CHAT ? "chatcmpl-" : "cmpl-";
    snprintf(g->id, sizeof g->id, "%s%016" PRIx64 "%08" PRIx64, prefix,
             (uint64_t)uv_hrtime() ^ ((uint64_t)(uintptr_t)g << 16), ++s->next_id);
    g->next = s->gens;
    if (s->gens) s->gens->prev = g;
    s->gens = g;
    http_on_close(r, on_req_closed, g);
    if (g->o.ignored[0]) http_add_header(r, "X-Hearth-Ignored", g->o.ignored);
    return g;
}

/* ---- the engine thread's side -------------------------------------------------- */
static void on_engine_event(void *user, const job_event *ev) {
    gen *g = user;
    server *s = g->s;
    ev_node *n = ev->type == JOB_EV_DONE ? g->done_node : malloc(sizeof *n);
    if (!n) { atomic_store(&g->lost, true); return; }
    n->next = NULL;
    n->g = g;
    n->ev = *ev;
    n->text = NULL;
    n->stop_word = NULL;
    if (ev->text_len) {
        n->text = malloc(ev->text_len + 1);
        if (n->text) {
            memcpy(n->text, ev->text, ev->text_len);
            n->text[ev->text_len] = 0;
        } else {
            atomic_store(&g->lost, true);
            n->ev.text_len = 0;
        }
    }
    if (ev->stop_word && !(n->stop_word = strdup(ev->stop_word))) atomic_store(&g->lost, true);
    n->ev.text = NULL;
    n->ev.stop_word = NULL;
    pthread_mutex_lock(&s->ev_mu);
    if (s->ev_tail) s->ev_tail->next = n; else s->ev_head = n;
    s->ev_tail = n;
    pthread_mutex_unlock(&s->ev_mu);
    uv_async_send(&s->ev_async);
}

/* ---- answers ----------------------------------------------------------------------- */
void gen_sse_raw(gen *g, const char *data) {
    if (!g->req || g->ended) return;
    char head[] = "data: ";
    http_stream_write(g->req, head, sizeof head - 1);
    http_stream_write(g->req, data, strlen(data));
    http_stream_write(g->req, "\n\n", 2);
}

void gen_sse_json(gen *g, cJSON *o) {
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) { atomic_store(&g->lost, true); return; }
    gen_sse_raw(g, text);
    free(text);
}

void gen_stream_end(gen *g) {
    if (g->req && !g->ended) http_stream_end(g->req);
    g->ended = true;
}

void gen_fail(gen *g, int status, const char *code, const char *msg) {
    if (!g->req || g->ended) return;
    api_error e = { .status = status, .code = code };
    snprintf(e.message, sizeof e.message, "%s", msg);
    if (g->grp) { gen_group_fail(g, &e); return; }
    if (g->stream_started) {
        gen_sse_json(g, api_error_json(&e));
        gen_stream_end(g);
    } else {
        api_error_respond(g->req, &e);
        g->ended = true;
    }
}

const char *gen_finish_oai(const gen *g) {
    if (g->indent_stop) return "length";
    return g->finish == FINISH_STOP ? "stop" : "length";
}

const char *gen_stop_type(const gen *g) {
    if (g->indent_stop || g->finish == FINISH_LENGTH || g->finish == FINISH_TIMEOUT) return "limit";
    if (g->finish == FINISH_STOP) return g->stop_word ? "word" : "eos";
    return "none";
}

void gen_submit(gen *g, const int32_t *prompt, int n_prompt) {
    server *s = g->s;
    if (g->o.warmup) g->o.jp.max_tokens = 0;
    int rc = engine_submit(s->engine, prompt, n_prompt, &g->o.jp, on_engine_event, g, &g->job);
    if (rc != ENGINE_OK) {
        api_error e = { 0 };
        switch (rc) {
        case ENGINE_QUEUE_FULL:
            api_fail(&e, 503, NULL, "queue_full", "the server is busy: %d requests are already waiting; retry later",
                     s->o.queue_max);
            break;
        case ENGINE_PROMPT_TOO_LONG:
            api_fail(&e, 400, "prompt", "context_length_exceeded",
                     "the prompt has %d tokens; a slot's context holds %d", n_prompt, s->n_ctx);
            break;
        case ENGINE_BAD_TOKEN:
            api_fail(&e, 400, "prompt", "invalid_value", "the prompt holds a token id outside the vocabulary (%d ids)",
                     s->model->p.n_vocab);
            break;
        case ENGINE_BAD_SLOT:
            api_fail(&e, 400, "id_slot", NULL, "id_slot must be -1 or a slot id below %d", s->o.n_parallel);
            break;
        case ENGINE_STOPPED:
            api_fail(&e, 503, NULL, "shutting_down", "the server is shutting down");
            break;
        default:
            api_fail(&e, 500, NULL, NULL, "out of memory");
        }
        if (g->grp) gen_group_fail(g, &e);
        else api_error_respond(g->req, &e);
        g->ended = true;
        return;
    }
    g->in_engine = true;
    g->n_prompt = n_prompt;
    g->prompt0 = prompt[0];
    if (g->o.echo && g->o.logprobs && g->echo)   /* the prompt's text offsets are read against its decoded bytes */
        for (int i = 0; i < n_prompt; i++) {
            char buf[1024];
            size_t n = tokenizer_token_bytes(s->model->tok, prompt[i], false, buf, sizeof buf);
            g->prompt_bytes += n < sizeof buf ? n : sizeof buf;
        }
    gen_opts_free(&g->o);   /* the engine copied the logit bias */
    if (g->grp && g->index > 0) {   /* the first member started the answer */
        g->stream_started = g->o.stream;
        if (g->stream_started && g->fmt->start) g->fmt->start(g);
        return;
    }
    if (g->o.stream) {
        http_stream_start(g->req, 200, "text/event-stream");
        g->stream_started = true;
        if (g->fmt->start) g->fmt->start(g);
    } else {
        http_defer(g->req);
    }
}

/* ---- text filters ---------------------------------------------------------------- */
static bool buf_put(char **p, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *np = realloc(*p, c);
        if (!np) return false;
        *p = np;
        *cap = c;
    }
    memcpy(*p + *len, s, n);
    *len += n;
    (*p)[*len] = 0;
    return true;
}

/* n_indent (llama.cpp's infill option): after the first newline, a line
 * that starts with less indentation than n_indent ends the generation; that
 * line is dropped. The indentation is held back until it is decided.
 * Returns false when the generation must stop; out gets what may go now. */
static bool indent_filter(gen *g, const char *text, size_t len, char **out, size_t *n_out, size_t *cap) {
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (g->ind_check) {
            if (c == ' ' || c == '\t') {
                if (!buf_put(&g->hold, &g->n_hold, &g->hold_cap, &c, 1)) atomic_store(&g->lost, true);
                continue;
            }
            if (c != '\n' && c != '\r' && (int)g->n_hold < g->o.n_indent) return false;
            if (g->n_hold && !buf_put(out, n_out, cap, g->hold, g->n_hold)) atomic_store(&g->lost, true);
            g->n_hold = 0;
            g->ind_check = false;
        }
        if (!buf_put(out, n_out, cap, &c, 1)) atomic_store(&g->lost, true);
        if (c == '\n') g->ind_check = true;
    }
    return true;
}

/* Released text (ev NULL: the tail at the end) through the filters to the format. */
static void emit_text(gen *g, const char *text, size_t len, const job_event *ev) {
    if (g->o.warmup || g->indent_stop || !g->req) return;
    char *f = NULL;
    size_t n_f = 0, cap = 0;
    if (g->o.n_indent > 0 && len) {
        if (!indent_filter(g, text, len, &f, &n_f, &cap)) {
            g->indent_stop = true;
            engine_cancel(g->s->engine, g->job);
        }
        text = f ? f : "";
        len = n_f;
    }
    if (len && !buf_put(&g->text, &g->text_len, &g->text_cap, text, len)) atomic_store(&g->lost, true);
    if (len || ev) g->fmt->token(g, text, len, ev);
    g->text_offset += len;
    free(f);
}

/* ---- events on the loop ------------------------------------------------------------ */
static void on_token(gen *g, const job_event *ev) {
    server *s = g->s;
    double t = srv_now_ms();
    if (!g->any_token) metrics_observe(&s->metrics->ttft, (t - g->t0) / 1e3);
    else metrics_observe(&s->metrics->itl, (t - g->t_last) / 1e3);
    g->any_token = true;
    g->t_last = t;
    g->n_gen = ev->n_generated;
    if (g->o.warmup || g->indent_stop) return;
    if (g->n_toks == g->toks_cap) {
        int c = g->toks_cap ? g->toks_cap * 2 : 64;
        int32_t *nt = realloc(g->toks, sizeof *nt * (size_t)c);
        if (!nt) { atomic_store(&g->lost, true); return; }
        g->toks = nt;
        g->toks_cap = c;
    }
    g->toks[g->n_toks++] = ev->token;
    emit_text(g, ev->text ? ev->text : "", ev->text_len, ev);
}

static void on_done(gen *g, const job_event *ev, const char *stop_word) {
    server *s = g->s;
    g->in_engine = false;
    g->finish = ev->finish;
    g->n_prompt = ev->n_prompt;
    g->n_cached = ev->n_cached;
    g->n_gen = g->o.warmup ? 0 : ev->n_generated;
    g->t_prompt_ms = ev->t_prompt_ms;
    g->t_gen_ms = ev->t_gen_ms;
    if (stop_word) g->stop_word = strdup(stop_word);
    s->metrics->prompt_tokens += (uint64_t)ev->n_prompt;
    s->metrics->generated_tokens += (uint64_t)ev->n_generated;
    s->metrics->cached_tokens += (uint64_t)ev->n_cached;
    s->metrics->prompt_seconds += ev->t_prompt_ms / 1e3;
    s->metrics->generated_seconds += ev->t_gen_ms / 1e3;
    metrics_observe(&s->metrics->duration, (srv_now_ms() - g->t0) / 1e3);
    if (!g->req) return;
    gen_set_tokens(g);
    bool normal = ev->finish == FINISH_STOP || ev->finish == FINISH_LENGTH || ev->finish == FINISH_TIMEOUT ||
                  (ev->finish == FINISH_CANCELLED && g->indent_stop);
    if (!normal) {
        if (ev->finish == FINISH_ERROR) gen_fail(g, 500, NULL, "the generation failed");
        else gen_fail(g, 503, "shutting_down", "the server is shutting down");
        return;
    }
    if (ev->text_len) emit_text(g, ev->text, ev->text_len, NULL);
    if (g->n_hold && !g->indent_stop && !g->o.warmup) {   /* trailing indentation, never decided */
        char *h = g->hold;
        size_t n = g->n_hold;
        g->hold = NULL;
        g->n_hold = g->hold_cap = 0;
        g->o.n_indent = 0;
        emit_text(g, h, n, NULL);
        free(h);
    }
    if (atomic_load(&g->lost)) { gen_fail(g, 500, NULL, "out of memory while generating"); return; }
    g->fmt->finish(g);
}

static void on_async(uv_async_t *a) { gen_events_drain(a->data); }

void gen_events_drain(server *s) {
    pthread_mutex_lock(&s->ev_mu);
    ev_node *n = s->ev_head;
    s->ev_head = s->ev_tail = NULL;
    pthread_mutex_unlock(&s->ev_mu);
    while (n) {
        ev_node *next = n->next;
        gen *g = n->g;
        n->ev.text = n->text;
        switch (n->ev.type) {
        case JOB_EV_STARTED:
            g->slot = n->ev.slot;
            g->n_cached = n->ev.n_cached;
            break;
        case JOB_EV_TOKEN:
            if (g->slot < 0) g->slot = n->ev.slot;
            on_token(g, &n->ev);
            break;
        case JOB_EV_DONE:
            on_done(g, &n->ev, n->stop_word);
            break;
        case JOB_EV_PROMPT:
            if (g->req && !g->ended && g->fmt->prompt) g->fmt->prompt(g, &n->ev);
            break;
        }
        free(n->text);
        free(n->stop_word);
        n->text = n->stop_word = NULL;
        if (n->ev.type != JOB_EV_DONE) free(n);
        else if (!g->req) gen_destroy(g);   /* frees the done node too */
        n = next;
    }
}

/* SSE comments while a stream is silent (a long prefill), so that clients
 * and proxies do not give up on it. */
static void on_keepalive(uv_timer_t *t) {
    server *s = t->data;
    uint64_t now = uv_hrtime(), quiet = (uint64_t)(s->o.keepalive_s * 1e9);
    for (gen *g = s->gens; g; g = g->next)
        if (g->req && g->stream_started && !g->ended && g->index == 0 && now - http_stream_last_write(g->req) >= quiet)
            http_stream_write(g->req, ": keep-alive\n\n", 14);
}

int gen_events_init(server *s) {
    if (pthread_mutex_init(&s->ev_mu, NULL)) return -1;
    if (uv_async_init(s->loop, &s->ev_async, on_async)) return -1;
    s->ev_async.data = s;
    uv_timer_init(s->loop, &s->keepalive);
    s->keepalive.data = s;
    if (s->o.keepalive_s > 0) {
        uint64_t every = (uint64_t)(s->o.keepalive_s * 1000 / 4);
        uv_timer_start(&s->keepalive, on_keepalive, every ? every : 1, every ? every : 1);
        uv_unref((uv_handle_t *)&s->keepalive);
    }
    return 0;
}

void gen_events_close(server *s) {
    gen_events_drain(s);
    uv_close((uv_handle_t *)&s->ev_async, NULL);
    uv_close((uv_handle_t *)&s->keepalive, NULL);
    /* generations left: the engine is gone, so no DONE will come */
    while (s->gens) {
        gen *g = s->gens;
        g->in_engine = false;
        if (g->req) http_on_close(g->req, NULL, NULL);
        gen_destroy(g);
    }
    pthread_mutex_destroy(&s->ev_mu);
}
