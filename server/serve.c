/* `hearth serve`: flags, then listen at once (GET /health answers 503
 * while the model loads on a thread), load, create the engine, serve, and
 * on SIGINT/SIGTERM stop accepting, end every generation, let the answers
 * go out, and exit 0. */
#include "server/commands.h"
#include "server/cli_args.h"
#include "server/access_log.h"
#include "server/gen.h"
#include "engine/text/chat_template.h"
#include "runtime/pool.h"
#include "engine/synth/synth_model.h"
#include "engine/text/tokenizer.h"
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHUTDOWN_GRACE_MS 5000   /* answers still going out get this long */

typedef struct serve_state {
    server s;
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    uv_async_t loaded;
    uv_timer_t progress, drain;
    pthread_t loader;
    bool loading;
    model *m;                 /* from the loader thread */
    char load_err[512];
    double t_load;
    int exit_code;
    double t_stop;
    bool finished;
    char *api_key_storage;    /* the strings api_keys point into */
    char demo_path[1024];
} serve_state;

static void usage(void) {
    printf("usage: hearth serve [-m MODEL.gguf] [flags]\n"
           "OpenAI-compatible HTTP server (also llama.cpp's /completion, /infill, /tokenize, ...).\n"
           "  -m, --model PATH          GGUF model (default: the built-in demo model)\n"
           "  --host ADDR               address to listen on (default 127.0.0.1)\n"
           "  --port N                  TCP port (default 8080; 0 picks a free one)\n"
           "  -np, --parallel N         slots: requests generated at once (default 4)\n"
           "  -c, --ctx-size N          context length per slot (default 4096, at most the model's)\n"
           "  -t, --threads N           compute threads (default: physical cores)\n"
           "  -b, --batch N             tokens per engine step (default 512)\n"
           "  --batch-decoding N        tokens per step while any request is generating, so a\n"
           "                            long prompt beside it does not stall it (default 6)\n"
           "  --queue N                 requests waiting for a slot before 503 (default 64)\n"
           "  --api-key KEY[,KEY...]    require a bearer token (GET /health stays open)\n"
           "  --api-key-file FILE       accepted tokens, one per line\n"
           "  --alias NAME              model name in /v1/models (default: the file name)\n"
           "  --cors-origin ORIGIN      Access-Control-Allow-Origin for browsers\n"
           "  --no-webui                no chat page at / (404)\n"
           "  --chat-template NAME      chatml, llama3, llama2, mistral, gemma, phi3, zephyr\n"
           "                            (default: matched from the model's own template)\n"
           "  --log-format text|json    access log lines on stderr (default text)\n"
           "  --prompt-cache PATH|off   prompt-state database (default: in the user's cache folder)\n"
           "  --prompt-cache-size SIZE  its size cap, e.g. 4G (default 4G)\n"
           "  --max-body SIZE           largest request body (default 16M)\n"
           "  -to, --timeout SECONDS    close a connection that sends and receives nothing this\n"
           "                            long (default 300; a request waiting for tokens is not idle)\n"
           "  --sse-keepalive SECONDS   SSE comment after this much silence (default 5, 0: never)\n");
}

/* "4G", "512M", "100k", "123": bytes; false if malformed. */
static bool parse_size(const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || x < 0) return false;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1048576.0; end++; break;
    case 'G': mul = 1073741824.0; end++; break;
    case 'T': mul = 1099511627776.0; end++; break;
    default: return false;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end || x * mul > 1.8e19) return false;
    *out = (uint64_t)(x * mul);
    return true;
}

/* Keys from "a,b" and from a file of one per line ('#' starts a comment). */
static bool load_keys(serve_state *st, const char *list, const char *file) {
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

static int parse_flags(serve_state *st, int argc, char **argv) {
    server_opts *o = &st->s.o;
    o->host = "127.0.0.1";
    o->port = 8080;
    o->n_parallel = 4;
    o->n_ctx = 4096;
    o->n_batch = 512;
    o->n_batch_decoding = 6;
    o->n_threads = pool_default_threads();
    o->queue_max = 64;
    o->max_body = 16u << 20;
    o->timeout_s = 300;
    o->keepalive_s = 5;
    o->prompt_cache_bytes = 4ull << 30;
    const char *v, *keys = NULL, *key_file = NULL;
    for (int i = 1; i < argc; i++) {
#define VAL(s, l) if (arg_is(argc, argv, &i, s, l, &v)) { if (!v) return 2;
#define END }
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(); return 0; }
        if (!strcmp(argv[i], "--no-webui")) { o->no_webui = true; continue; }
        VAL("-m", "--model") o->model_path = v; END
        else VAL("--host", NULL) o->host = v; END
        else VAL("--port", NULL) if (!arg_int("--port", v, 0, 65535, &o->port)) return 2; END
        else VAL("-np", "--parallel") if (!arg_int("--parallel", v, 1, 256, &o->n_parallel)) return 2; END
        else VAL("-c", "--ctx-size") if (!arg_int("--ctx-size", v, 16, 1 << 22, &o->n_ctx)) return 2; END
        else VAL("-t", "--threads") if (!arg_int("--threads", v, 1, 1024, &o->n_threads)) return 2; END
        else VAL("-b", "--batch") if (!arg_int("--batch", v, 1, 1 << 20, &o->n_batch)) return 2; END
        else VAL("--batch-decoding", NULL)
            if (!arg_int("--batch-decoding", v, 1, 1 << 20, &o->n_batch_decoding)) return 2; END
        else VAL("--queue", NULL) if (!arg_int("--queue", v, 0, 1 << 20, &o->queue_max)) return 2; END
        else VAL("--api-key", NULL) keys = v; END
        else VAL("--api-key-file", NULL) key_file = v; END
        else VAL("--alias", NULL) o->alias = v; END
        else VAL("--cors-origin", NULL) o->cors_origin = v; END
        else VAL("--chat-template", NULL)
            if (chat_template_from_name(v) < 0) {
                fprintf(stderr, "hearth serve: unknown chat template '%s' (chatml, llama3, llama2, mistral, gemma, phi3, zephyr)\n", v);
                return 2;
            }
            o->chat_template = v;
        END
        else VAL("--log-format", NULL)
            if (strcmp(v, "text") && strcmp(v, "json")) { fprintf(stderr, "hearth serve: --log-format wants text or json\n"); return 2; }
            o->log_json = !strcmp(v, "json");
        END
        else VAL("--prompt-cache", NULL) o->prompt_cache = v; END
        else VAL("--prompt-cache-size", NULL)
            if (!parse_size(v, &o->prompt_cache_bytes)) { fprintf(stderr, "hearth serve: --prompt-cache-size: bad size '%s'\n", v); return 2; }
        END
        else VAL("--max-body", NULL)
            uint64_t b;
            if (!parse_size(v, &b) || b < 1024 || b > (1ull << 32)) { fprintf(stderr, "hearth serve: --max-body wants a size from 1K to 4G\n"); return 2; }
            o->max_body = (size_t)b;
        END
        else VAL("-to", "--timeout") if (!arg_int("--timeout", v, 1, 86400, &o->timeout_s)) return 2; END
        else VAL("--sse-keepalive", NULL)
            float k;
            if (!arg_float("--sse-keepalive", v, &k) || k < 0) return 2;
            o->keepalive_s = k;
        END
        else { fprintf(stderr, "hearth serve: unknown flag '%s' (hearth serve --help lists them)\n", argv[i]); return 2; }
#undef VAL
#undef END
    }
    if ((keys || key_file) && !load_keys(st, keys, key_file)) return 2;
    return -1;
}

/* ---- loading ------------------------------------------------------------------ */
static void *loader_main(void *arg) {
    serve_state *st = arg;
    st->m = model_load(st->s.o.model_path, st->load_err, sizeof st->load_err);
    uv_async_send(&st->loaded);
    return NULL;
}

static void on_progress(uv_timer_t *t) {
    serve_state *st = t->data;
    fprintf(stderr, "\rhearth: loading %s ... %.1f s", st->s.model_file, (srv_now_ms() - st->t_load) / 1e3);
}

static void begin_shutdown(serve_state *st);

static int start_engine(serve_state *st) {
    server *s = &st->s;
    model *m = st->m;
    s->model = m;
    s->n_ctx = s->o.n_ctx < m->p.n_ctx_train ? s->o.n_ctx : m->p.n_ctx_train;
    if (s->n_ctx < s->o.n_ctx)
        fprintf(stderr, "hearth: --ctx-size %d is more than the model was trained for: using %d per slot\n",
                s->o.n_ctx, s->n_ctx);
    if (s->o.chat_template) {
        s->tpl = chat_template_from_name(s->o.chat_template);
    } else {
        s->tpl = chat_template_detect(m->chat_template);
        if (s->tpl < 0) {
            fprintf(stderr, "hearth: warning: %s; chat requests use chatml (--chat-template picks another)\n",
                    m->chat_template ? "the model's chat template is not one hearth knows" : "the model has no chat template");
            s->tpl = 0;
        }
    }
    engine_config c;
    engine_config_default(&c);
    c.n_slots = s->o.n_parallel;
    c.n_ctx = s->n_ctx;
    c.n_batch = s->o.n_batch;
    c.n_batch_decoding = s->o.n_batch_decoding;
    c.n_threads = s->o.n_threads;
    c.queue_max = s->o.queue_max;
    c.prompt_cache_bytes = s->o.prompt_cache_bytes;
    char pc_path[1024];
    if (!s->o.prompt_cache) c.prompt_cache = prompt_cache_default_path(pc_path, sizeof pc_path) ? NULL : pc_path;
    else c.prompt_cache = strcmp(s->o.prompt_cache, "off") ? s->o.prompt_cache : NULL;
    char err[512];
    s->engine = engine_create(m, &c, err, sizeof err);
    if (!s->engine) { fprintf(stderr, "hearth: %s\n", err); return -1; }
    engine_stats es;
    engine_get_stats(s->engine, &es);
    fprintf(stderr, "hearth: model %s loaded (%s, %.1f MiB) in %.1f s; %d slots x %d tokens, KV %.1f MiB; "
            "chat template %s; prompt cache %s\n",
            m->name ? m->name : s->model_file, model_arch_name(m->p.arch), m->weight_bytes / 1048576.0,
            (srv_now_ms() - st->t_load) / 1e3, s->o.n_parallel, s->n_ctx, es.kv_bytes / 1048576.0,
            chat_template_name(s->tpl), c.prompt_cache ? c.prompt_cache : "off");
    return 0;
}

static void on_loaded(uv_async_t *a) {
    serve_state *st = a->data;
    pthread_join(st->loader, NULL);
    st->loading = false;
    uv_close((uv_handle_t *)&st->loaded, NULL);
    if (uv_is_active((uv_handle_t *)&st->progress)) { uv_timer_stop(&st->progress); fputc('\n', stderr); }
    if (!st->m) {
        fprintf(stderr, "hearth: %s\n", st->load_err);
        st->exit_code = 1;
        begin_shutdown(st);
        return;
    }
    if (st->s.stopping) return;   /* the drain timer frees the model */
    if (start_engine(st)) {
        st->exit_code = 1;
        begin_shutdown(st);
    }
}

/* ---- stopping --------------------------------------------------------------------- */
static void finish(serve_state *st) {
    if (st->finished) return;
    st->finished = true;
    server *s = &st->s;
    uv_timer_stop(&st->drain);
    http_close(s->http);
    s->http = NULL;
    gen_events_close(s);
    uv_close((uv_handle_t *)&st->drain, NULL);
    uv_close((uv_handle_t *)&st->progress, NULL);
    uv_close((uv_handle_t *)&st->sigint, NULL);
    uv_close((uv_handle_t *)&st->sigterm, NULL);
}

/* Waits for the last answers to go out (and for a model still loading). */
static void on_drain(uv_timer_t *t) {
    serve_state *st = t->data;
    if (st->loading) return;
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
    if (s->engine) {
        engine_destroy(s->engine);   /* every job gets its DONE (shutdown) */
        gen_events_drain(s);         /* ... and every answer its end */
        s->engine = NULL;
    }
    uv_timer_start(&st->drain, on_drain, 0, 20);
}

static void on_signal(uv_signal_t *sig, int signum) {
    serve_state *st = sig->data;
    if (st->s.stopping && !st->loading) {   /* a second signal: do not wait */
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
    if (!s->o.model_path) {
        char err[512];
        if (demo_model_path(st->demo_path, sizeof st->demo_path, err, sizeof err)) {
            fprintf(stderr, "hearth: %s\n", err);
            goto out;
        }
        fprintf(stderr, "hearth: no --model given: serving the built-in demo model (random weights, "
                        "it produces nonsense)\n");
        s->o.model_path = st->demo_path;
    }
    const char *base = strrchr(s->o.model_path, '/');
    s->model_file = strdup(base ? base + 1 : s->o.model_path);
    s->model_id = s->o.alias ? strdup(s->o.alias) : strdup(s->model_file);
    if (!s->model_file || !s->model_id) goto out;
    size_t n = strlen(s->model_id);
    if (!s->o.alias && n > 5 && !strcmp(s->model_id + n - 5, ".gguf")) s->model_id[n - 5] = 0;
    s->created = (long)time(NULL);
    metrics_init(&s->metrics);
    signal(SIGPIPE, SIG_IGN);

    if (uv_loop_init(&st->loop)) goto out;
    s->loop = &st->loop;
    if (gen_events_init(s)) { fprintf(stderr, "hearth serve: cannot set up the event queue\n"); goto loop_out; }
    http_config hc = { .host = s->o.host, .port = s->o.port, .max_body = s->o.max_body,
                       .timeout_s = (unsigned)s->o.timeout_s, .cors_origin = s->o.cors_origin,
                       .handler = route_request, .done = access_log, .ud = s };
    char err[512];
    s->http = http_start(&st->loop, &hc, err, sizeof err);
    if (!s->http) {
        fprintf(stderr, "hearth: %s\n", err);
        gen_events_close(s);
        goto loop_out;
    }
    bool v6 = strchr(s->o.host, ':') != NULL;
    fprintf(stderr, "hearth: listening on http://%s%s%s:%d\n", v6 ? "[" : "", s->o.host, v6 ? "]" : "", http_port(s->http));

    uv_signal_init(&st->loop, &st->sigint);
    uv_signal_init(&st->loop, &st->sigterm);
    st->sigint.data = st->sigterm.data = st;
    uv_signal_start(&st->sigint, on_signal, SIGINT);
    uv_signal_start(&st->sigterm, on_signal, SIGTERM);
    uv_timer_init(&st->loop, &st->drain);
    uv_timer_init(&st->loop, &st->progress);
    st->drain.data = st->progress.data = st;
    uv_async_init(&st->loop, &st->loaded, on_loaded);
    st->loaded.data = st;

    kernels_select();
    st->t_load = srv_now_ms();
    st->loading = true;
    if (pthread_create(&st->loader, NULL, loader_main, st)) {
        fprintf(stderr, "hearth: cannot start the loader thread\n");
        st->loading = false;
        uv_close((uv_handle_t *)&st->loaded, NULL);
        st->exit_code = 1;
        begin_shutdown(st);
    } else if (isatty(2)) {
        uv_timer_start(&st->progress, on_progress, 250, 250);
    }
    uv_run(&st->loop, UV_RUN_DEFAULT);
    rc = st->exit_code;
    if (s->engine) engine_destroy(s->engine);   /* not reached: shutdown destroys it */
    if (s->model) model_free(s->model);
    else if (st->m) model_free(st->m);
loop_out:
    if (uv_loop_close(&st->loop) == UV_EBUSY) {
        uv_run(&st->loop, UV_RUN_DEFAULT);
        uv_loop_close(&st->loop);
    }
out:
    free(s->model_file);
    free(s->model_id);
    free(s->o.api_keys);
    free(st->api_key_storage);
    free(st);
    return rc;
}
