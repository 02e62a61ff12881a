/* The state `hearth serve` shares between its parts: options, the model and
 * engine, the loop, the queue of engine events, metrics. Everything here is
 * touched from the loop thread only, except the event queue (see gen.c). */
#ifndef HEARTH_SERVER_H
#define HEARTH_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include "engine/sched/engine.h"
#include "server/http.h"
#include "server/metrics.h"

typedef struct server_opts {
    const char *model_path;   /* one path per line (-m given more than once); NULL: the demo model */
    const char *models_dir;   /* every .gguf in it is served too */
    int max_loaded;           /* 0: no limit */
    uint64_t models_memory;   /* 0: no limit */
    double keep_alive_s;      /* for models other than the first; < 0: for ever */
    const char *host;
    int port;
    int n_parallel, n_ctx, n_batch, n_batch_decoding, n_threads, queue_max;
    const char *alias;
    const char *cors_origin;
    const char *chat_template;           /* a built-in name or a file */
    const char *chat_template_file;
    const char *reasoning_name;          /* --reasoning-format */
    int reasoning_format;                /* derived from it (server/reasoning.h) */
    const char *log_format;              /* "text" or "json" */
    bool log_json;                       /* derived from log_format */
    bool no_webui;                       /* --no-webui: / answers 404 */
    const char *backend;                 /* "auto" or "cpu" */
    const char *pooling;                 /* embeddings: "model" (its pooling_type), "mean", "cls", "last" */
    const char *prompt_cache;            /* path, "off", or NULL for the default place */
    uint64_t prompt_cache_bytes;
    uint64_t max_body;
    int timeout_s;                       /* a connection idle this long is closed */
    int max_conns, per_client;           /* connections at once; per client address (0: any) */
    int busy_timeout_s;                  /* the idle timeout near max_conns */
    double keepalive_s;                  /* SSE comment after this much silence */
    bool metrics_compat;                 /* /metrics also has llamacpp:* names */
    const char *allowed_hosts;           /* more Host names, comma-separated, "*", or NULL */
    const char *api_key_list, *api_key_file;   /* as given; api_keys is what they hold */
    char **api_keys;
    int n_api_keys;
} server_opts;

typedef struct gen gen;
struct ev_node;
struct model_set;

typedef struct server {
    server_opts o;
    uv_loop_t *loop;
    http_server *http;
    model *model;             /* NULL while loading */
    engine *engine;           /* NULL while loading */
    int n_ctx;                /* per slot, after clamping to the model */
    struct chat_template *tpl;   /* parsed at load (engine/text/chat_template.h) */
    const char *tpl_name;     /* where it came from, for the log */
    int tool_fmt;             /* how the model writes tool calls (tool_format) */
    char *model_id;           /* the name /v1/models reports */
    char *model_file;         /* the file's base name */
    long created;             /* start time, for /v1/models */
    metrics *metrics;         /* the server's, shared by every model */
    bool stopping;
    struct model_set *set;    /* every model served, this one among them */

    /* engine events -> loop (filled on the engine thread) */
    pthread_mutex_t ev_mu;
    struct ev_node *ev_head, *ev_tail;
    uv_async_t ev_async;

    gen *gens;                /* live generations */
    int offloaded;            /* requests being prepared off the loop (offload.c): the model stays */
    int n_held;               /* other requests in flight (embeddings): like gens, they keep the model loaded */
    uv_timer_t keepalive;
    uint64_t next_id;
} server;

/* router.c: the HTTP handler */
void route_request(void *ud, http_req *r);
/* The headers hook (http_config.headers): refuses what needs no body to refuse. */
void route_headers(void *ud, http_req *r);

/* Milliseconds on the monotonic clock. */
double srv_now_ms(void);

#endif
