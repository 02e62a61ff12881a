/* The models one `hearth serve` serves: every -m and every .gguf of
 * --models-dir, the first being the default. Each model has a server view
 * of its own (model, engine, chat template, slots, KV, prompt cache), which
 * is what a route gets; the loop, the HTTP side and the compute pool are
 * shared. A model loads on first use, on a thread (the requests for it wait,
 * suspended); it stays loaded while used, and is unloaded, also on a thread,
 * after its keep-alive seconds with nothing to do, or least recently used
 * first when --max-loaded or --models-memory would be passed. Everything
 * here runs on the loop thread. */
#ifndef HEARTH_MODEL_SET_H
#define HEARTH_MODEL_SET_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "server/server.h"

struct hpool;

typedef enum { MODEL_UNLOADED, MODEL_LOADING, MODEL_READY, MODEL_UNLOADING } model_state;

typedef void (*model_route_fn)(server *s, http_req *r, const cJSON *body);

typedef struct model_wait model_wait;   /* a request suspended until its model is ready */

typedef struct model_entry {
    server s;                 /* this model's view; s.model and s.engine NULL unless ready */
    struct model_set *set;
    char *path;
    model_state state;
    double last_used_ms;      /* the last moment it had work */
    double keep_alive_s;      /* < 0: for ever */
    uint64_t bytes;           /* weights and KV once loaded, else the file's size */
    model_wait *waiting;      /* oldest first */
    char last_error[512];     /* of the last failed load, or "" */
    /* the thread that loads or unloads it */
    pthread_t thread;
    bool thread_running;
    uv_async_t thread_done;
    model *loaded;
    engine *started;
    struct chat_template *tpl;    /* parsed with the model, on its thread */
    const char *tpl_what;
    double t_load;
} model_entry;

typedef struct model_set {
    model_entry *e;
    int n;
    int max_loaded;           /* 0: no limit */
    uint64_t max_bytes;       /* 0: no limit */
    struct hpool *pool;       /* every engine's */
    uv_timer_t reaper;        /* unloads idle models, starts loads that waited for room */
    bool stopping;
    bool started_once;        /* the default model has been ready once */
    int n_started;            /* entries whose event queues are set up */
    bool reaper_started;
    void (*on_fatal)(void *ud);   /* the default model failed its first load */
    void *ud;
} model_set;

/* Builds the set from s->o (model paths one per line, models_dir): each
 * entry's server starts as a copy of *proto. 0, or -1 with err. */
int model_set_init(model_set *set, const server *proto, struct hpool *pool, char *err, size_t errlen);
/* Sets up the event queues and the reaper on the loop and starts loading
 * the default model; 0, or -1 (then model_set_close undoes it). */
int model_set_start(model_set *set);
model_entry *model_set_default(model_set *set);
/* The model a request names (its id, its GGUF name or its file name), or NULL. */
model_entry *model_set_find(model_set *set, const char *name);
/* "a, b, c": the ids, for a 404 (static buffer). */
const char *model_set_names(const model_set *set);
/* Runs fn for r on e's server now if e is ready, else suspends r until it
 * is (loading e if needed). Takes body. keep_alive_s (>= 0, or < 0 for
 * none given) replaces e's keep-alive from this request on. */
void model_set_dispatch(model_set *set, model_entry *e, model_route_fn fn, http_req *r, cJSON *body,
                        double keep_alive_s, bool keep_alive_given);
/* "loaded", "loading", "unloaded", "unloading". */
const char *model_state_name(model_state st);
/* Stop: answers waiting requests (503), destroys every engine (each job
 * gets its DONE) and drains the event queues. Models still loading finish
 * on their threads; model_set_busy says when none is. */
void model_set_shutdown(model_set *set);
bool model_set_busy(const model_set *set);
/* After the loop has stopped: frees everything. */
void model_set_close(model_set *set);   /* closes the handles (on the loop) */
void model_set_free(model_set *set);

#endif
