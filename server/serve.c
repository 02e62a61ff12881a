/* `hearth serve`: flags, then listen at once (GET /health answers 503
 * while the model loads on a thread), load, create the engine, serve, and
 * on SIGINT/SIGTERM stop accepting, end every generation, let the answers
 * go out, and exit 0. Its settings come from config/config.c's table. */
#include "server/commands.h"
#include "config/config.h"
#include "server/access_log.h"
#include "server/log_out.h"
#include "server/gen.h"
#include "server/model_set.h"
#include "server/offload.h"
#include "engine/text/chat_template.h"
#include "server/reasoning.h"
#include "server/tool_parse.h"
#include "runtime/pool.h"
#include "engine/synth/demo_model.h"
#include "engine/text/tokenizer.h"
#include <assert.h>
#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHUTDOWN_GRACE_MS 5000   /* answers still going out get this long */

typedef struct serve_state {
    server s;                 /* the server: options, loop, HTTP, metrics; s.set its models */
    metrics metrics;
    model_set set;
    hpool *pool;              /* every model's engine runs on it */
    uv_loop_t loop;
    uv_signal_t sigint, sigterm, sighup, sigquit;
    uv_timer_t drain;
    int exit_code;
    double t_stop;
    bool finished;
    char *api_key_storage;    /* the strings api_keys point into */
    char demo_path[1024];
    config cfg;               /* the loaded settings; server_opts' strings point into it */
} serve_state;

static void usage(void) {
    printf("usage: hearth serve [-m MODEL.gguf] [flags]\n"
           "OpenAI-compatible HTTP server (also llama.cpp's /completion, /infill, /tokenize, ...).\n");
    config_print_flags(stdout);
    printf("\nSettings also come from a JSON config file (--config FILE, else $HEARTH_CONFIG,\n"
           "else ~/.config/hearth/config.json) and HEARTH_* variables, below the flags:\n"
           "`hearth config --help` lists them, `hearth config` shows the result.\n");
}

/* Where each setting of config/config.c's table lands in server_opts; the
 * setting's type says the field's: a string or path is a const char *, an
 * integer an int, a number a double, a size a uint64_t, a switch a bool. */
static const struct binding { const char *key; size_t off; } bindings[] = {
    { "model", offsetof(server_opts, model_path) },
    { "models-dir", offsetof(server_opts, models_dir) },
    { "max-loaded", offsetof(server_opts, max_loaded) },
    { "models-memory", offsetof(server_opts, models_memory) },
    { "keep-alive", offsetof(server_opts, keep_alive_s) },
    { "host", offsetof(server_opts, host) },
    { "port", offsetof(server_opts, port) },
    { "parallel", offsetof(server_opts, n_parallel) },
    { "ctx-size", offsetof(server_opts, n_ctx) },
    { "threads", offsetof(server_opts, n_threads) },
    { "batch", offsetof(server_opts, n_batch) },
    { "batch-decoding", offsetof(server_opts, n_batch_decoding) },
    { "queue", offsetof(server_opts, queue_max) },
    { "api-key", offsetof(server_opts, api_key_list) },
    { "api-key-file", offsetof(server_opts, api_key_file) },
    { "alias", offsetof(server_opts, alias) },
    { "cors-origin", offsetof(server_opts, cors_origin) },
    { "chat-template", offsetof(server_opts, chat_template) },
    { "reasoning-format", offsetof(server_opts, reasoning_name) },
    { "chat-template-file", offsetof(server_opts, chat_template_file) },
    { "log-format", offsetof(server_opts, log_format) },
    { "backend", offsetof(server_opts, backend) },
    { "pooling", offsetof(server_opts, pooling) },
    { "prompt-cache", offsetof(server_opts, prompt_cache) },
    { "prompt-cache-size", offsetof(server_opts, prompt_cache_bytes) },
    { "max-body", offsetof(server_opts, max_body) },
    { "timeout", offsetof(server_opts, timeout_s) },
    { "max-connections", offsetof(server_opts, max_conns) },
    { "connections-per-client", offsetof(server_opts, per_client) },
    { "timeout-busy", offsetof(server_opts, busy_timeout_s) },
    { "sse-keepalive", offsetof(server_opts, keepalive_s) },
    { "metrics-compat", offsetof(server_opts, metrics_compat) },
    { "no-webui", offsetof(server_opts, no_webui) },
    { "allowed-hosts", offsetof(server_opts, allowed_hosts) },
};

/* Stores setting s's value v (already checked by config_load) into o. */
static void bind_value(server_opts *o, const config_setting *s, size_t off, const char *v) {
    char *field = (char *)o + off;
    switch (s->type) {
    case CFG_STRING: case CFG_PATH: memcpy(field, &v, sizeof v); break;
    case CFG_INT: { int x = (int)config_int(v); memcpy(field, &x, sizeof x); break; }
    case CFG_NUMBER: { double x = config_number(v); memcpy(field, &x, sizeof x); break; }
    case CFG_SIZE: { uint64_t x = config_size(v); memcpy(field, &x, sizeof x); break; }
    case CFG_BOOL: { bool x = config_bool(v); memcpy(field, &x, sizeof x); break; }
    }
}

/* Keys from "a,b" and from a file of one per line ('#' starts a comment). */
static bool load_keys(serve_state *st, const char *list, const char *file) {
    if (list && !list[strspn(list, ", \t\r\n")]) {   /* "", "," or spaces would turn auth off */
        fprintf(stderr, "hearth serve: --api-key '%s' holds no key (leave it out to serve without one)\n", list);
        return false;
    }
    size_t cap = (list ? strlen(list) : 0) + 2;
    char *text = NULL;
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) { fprintf(stderr, "hearth serve: --api-key-file %s: %s\n", file, strerror(errno)); return false; }
        size_t n = 0, c = 4096;
        text = malloc(c);
        for (size_t k; text && (k = fread(text + n, 1, c - n - 1, f)) > 0;) {
            n += k;
            if (n + 1 == c) { char *t = realloc(text, c *= 2); if (!t) { free(text); text = NULL; } else text = t; }
            if (n > (1u << 20)) break;
        }
        fclose(f);
        if (!text) { fprintf(stderr, "hearth serve: out of memory\n"); return false; }
        text[n] = 0;
        cap += n;
    }
    char *all = malloc(cap + 1);
    if (!all) { free(text); return false; }
    snprintf(all, cap + 1, "%s\n%s", list ? list : "", text ? text : "");
    free(text);
    for (char *p = all; *p; p++) if (*p == ',' && list && p < all + strlen(list)) *p = '\n';
    int n = 0;
    for (char *p = all; *p; p++) n += *p == '\n';
    st->s.o.api_keys = calloc((size_t)n + 2, sizeof *st->s.o.api_keys);
    if (!st->s.o.api_keys) { free(all); return false; }
    for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n")) {
        char *hash = line[0] == '#' ? line : NULL;
        if (hash) continue;
        while (isspace((unsigned char)*line)) line++;
        size_t len = strlen(line);
        while (len && isspace((unsigned char)line[len - 1])) line[--len] = 0;
        if (len) st->s.o.api_keys[st->s.o.n_api_keys++] = line;
    }
    st->api_key_storage = all;
    if (file && !st->s.o.n_api_keys) {
        fprintf(stderr, "hearth serve: --api-key-file %s holds no key\n", file);
        return false;
    }
    return true;
}

/* Reads the configuration layers into the options: -1 to go on, else the
 * exit status (0 after --help, 2 for a bad setting or an unknown flag). */
static int parse_flags(serve_state *st, int argc, char **argv) {
    server_opts *o = &st->s.o;
    char err[1280];
    int rc = config_load(&st->cfg, argc, argv, err, sizeof err);
    if (rc) { fprintf(stderr, "hearth serve: %s\n", err); return 2; }
    if (st->cfg.help) { usage(); return 0; }
    if (st->cfg.n_rest) {
        fprintf(stderr, "hearth serve: unknown flag '%s' (hearth serve --help lists them)\n", st->cfg.rest[0]);
        return 2;
    }
    for (const config_setting *s = config_settings; s->key; s++) {
        const struct binding *b = NULL;
        for (size_t i = 0; i < sizeof bindings / sizeof bindings[0] && !b; i++)
            if (!strcmp(bindings[i].key, s->key)) b = &bindings[i];
        assert(b && "every setting has a place in server_opts");
        if (!b) return 2;
        const char *v = config_get(&st->cfg, s->key);
        if (v) bind_value(o, s, b->off, v);
    }
    /* what the table cannot say: a computed default, a derived field, a name to look up */
    if (!o->n_threads) o->n_threads = pool_default_threads();
    o->log_json = !strcmp(o->log_format, "json");
    o->reasoning_format = reasoning_format_from_name(o->reasoning_name);
    if (o->chat_template && !chat_template_builtin(o->chat_template) && access(o->chat_template, R_OK)) {
        fprintf(stderr, "hearth serve: --chat-template '%s' is neither a built-in template (%s) nor a readable file\n",
                o->chat_template, chat_template_builtin_names());
        return 2;
    }
    if (o->chat_template_file && access(o->chat_template_file, R_OK)) {
        fprintf(stderr, "hearth serve: --chat-template-file: cannot read '%s'\n", o->chat_template_file);
        return 2;
    }
    if ((o->api_key_list || o->api_key_file) && !load_keys(st, o->api_key_list, o->api_key_file)) return 2;
    return -1;
}

static void begin_shutdown(serve_state *st);

static void on_fatal(void *ud) {   /* the default model did not load at start */
    serve_state *st = ud;
    st->exit_code = 1;
    begin_shutdown(st);
}

/* ---- stopping --------------------------------------------------------------------- */
static void finish(serve_state *st) {
    if (st->finished) return;
    st->finished = true;
    server *s = &st->s;
    uv_timer_stop(&st->drain);
    http_close(s->http);
    s->http = NULL;
    model_set_close(&st->set);
    uv_close((uv_handle_t *)&st->drain, NULL);
    uv_close((uv_handle_t *)&st->sigint, NULL);
    uv_close((uv_handle_t *)&st->sigterm, NULL);
    uv_close((uv_handle_t *)&st->sighup, NULL);
    uv_close((uv_handle_t *)&st->sigquit, NULL);
}

/* Waits for the last answers to go out (and for a model still loading). */
static void on_drain(uv_timer_t *t) {
    serve_state *st = t->data;
    if (model_set_busy(&st->set)) return;
    bool late = srv_now_ms() - st->t_stop > SHUTDOWN_GRACE_MS;
    if (http_active(st->s.http) > 0 && !late) return;
    finish(st);
}

static void begin_shutdown(serve_state *st) {
    server *s = &st->s;
    if (s->stopping) return;
    s->stopping = true;
    st->t_stop = srv_now_ms();
    fprintf(stderr, "hearth: shutting down\n");
    http_stop_accepting(s->http);
    if (s->set) model_set_shutdown(s->set);   /* every job gets its DONE, every answer its end */
    uv_timer_start(&st->drain, on_drain, 0, 20);
}

static void on_signal(uv_signal_t *sig, int signum) {
    serve_state *st = sig->data;
    if (st->s.stopping && !model_set_busy(&st->set)) {   /* a second signal: do not wait */
        fprintf(stderr, "hearth: signal %d again: closing now\n", signum);
        finish(st);
        return;
    }
    begin_shutdown(st);
}

/* ---- the command ------------------------------------------------------------------- */
int cmd_serve(int argc, char **argv) {
    serve_state *st = calloc(1, sizeof *st);
    if (!st) { fprintf(stderr, "hearth serve: out of memory\n"); return 1; }
    server *s = &st->s;
    int rc = parse_flags(st, argc, argv);
    if (rc >= 0) goto out;
    rc = 1;
    if (!s->o.model_path && !s->o.models_dir) {
        char err[512];
        if (demo_model_path(st->demo_path, sizeof st->demo_path, err, sizeof err)) {
            fprintf(stderr, "hearth: %s\n", err);
            goto out;
        }
        fprintf(stderr, "hearth: no --model given: serving " DEMO_MODEL_NOTE "\n");
        s->o.model_path = st->demo_path;
    }
    s->created = (long)time(NULL);
    metrics_init(&st->metrics);
    s->metrics = &st->metrics;
    signal(SIGPIPE, SIG_IGN);

    char workers[8];   /* request bodies parsed and prompts made off the loop (offload.h) */
    snprintf(workers, sizeof workers, "%d", OFFLOAD_WORKERS);
    setenv("UV_THREADPOOL_SIZE", workers, 1);   /* the lanes count on it */
    if (uv_loop_init(&st->loop)) goto out;
    s->loop = &st->loop;
    http_config hc = { .host = s->o.host, .port = s->o.port, .max_body = (size_t)s->o.max_body,
                       .timeout_s = (unsigned)s->o.timeout_s, .max_conns = (unsigned)s->o.max_conns,
                       .per_client = (unsigned)s->o.per_client, .busy_timeout_s = (unsigned)s->o.busy_timeout_s,
                       .cors_origin = s->o.cors_origin,
                       .handler = route_request, .headers = route_headers, .done = access_log, .ud = s };
    char err[512] = "";
    s->http = http_start(&st->loop, &hc, err, sizeof err);
    if (!s->http) {
        fprintf(stderr, "hearth: %s\n", err);
        goto loop_out;
    }
    kernels_select();
    st->pool = pool_create(s->o.n_threads);
    if (!st->pool || model_set_init(&st->set, s, st->pool, err, sizeof err)) {
        fprintf(stderr, "hearth: %s\n", *err ? err : "out of memory");
        http_close(s->http);
        goto loop_out;
    }
    s->set = &st->set;
    st->set.on_fatal = on_fatal;
    st->set.ud = st;
    bool v6 = strchr(s->o.host, ':') != NULL;
    fprintf(stderr, "hearth: listening on http://%s%s%s:%d\n", v6 ? "[" : "", s->o.host, v6 ? "]" : "", http_port(s->http));

    uv_signal_init(&st->loop, &st->sigint);
    uv_signal_init(&st->loop, &st->sigterm);
    uv_signal_init(&st->loop, &st->sighup);
    uv_signal_init(&st->loop, &st->sigquit);
    st->sigint.data = st->sigterm.data = st->sighup.data = st->sigquit.data = st;
    /* SIGHUP (the terminal went away) and SIGQUIT end like SIGTERM: every
     * stream gets its last event instead of being cut by the default action */
    uv_signal_start(&st->sigint, on_signal, SIGINT);
    uv_signal_start(&st->sigterm, on_signal, SIGTERM);
    uv_signal_start(&st->sighup, on_signal, SIGHUP);
    uv_signal_start(&st->sigquit, on_signal, SIGQUIT);
    uv_timer_init(&st->loop, &st->drain);
    st->drain.data = st;
    if (model_set_start(&st->set)) {
        fprintf(stderr, "hearth serve: cannot set up the event queues\n");
        st->exit_code = 1;
        begin_shutdown(st);
    }
    log_out_start();   /* from here the access log never waits on stderr */
    uv_run(&st->loop, UV_RUN_DEFAULT);
    log_out_stop();
    rc = st->exit_code;
loop_out:
    if (uv_loop_close(&st->loop) == UV_EBUSY) {
        uv_run(&st->loop, UV_RUN_DEFAULT);
        uv_loop_close(&st->loop);
    }
    model_set_free(&st->set);
    pool_destroy(st->pool);
out:
    free(s->o.api_keys);
    free(st->api_key_storage);
    config_free(&st->cfg);
    free(st);
    return rc;
}
