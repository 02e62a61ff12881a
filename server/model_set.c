/* The served models and their lifetimes (see model_set.h). A load runs
 * model_load and engine_create on a thread of its own and hands both to the
 * loop through a uv_async; an unload runs engine_destroy and model_free the
 * same way, so neither stalls the loop or another model's streams. Requests
 * for a model that is not ready are suspended in its queue and run in
 * order when it is. */
#include "server/model_set.h"
#include "server/errors.h"
#include "server/gen.h"
#include "server/request_json.h"
#include "server/tool_parse.h"
#include "engine/text/chat_template.h"
#include "server/prompt.h"
#include "engine/text/tokenizer.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REAPER_MS 250

struct model_wait {
    model_entry *e;
    model_route_fn fn;
    http_req *r;
    cJSON *body;
    model_wait *next;
};

const char *model_state_name(model_state st) {
    static const char *const names[] = { "unloaded", "loading", "loaded", "unloading" };
    return names[st];
}

/* ---- building the set ---------------------------------------------------------- */
static int add_entry(model_set *set, const server *proto, const char *path, const char *alias) {
    model_entry *e = &set->e[set->n];
    memset(e, 0, sizeof *e);
    e->s = *proto;
    e->s.model = NULL;
    e->s.engine = NULL;
    e->s.gens = NULL;
    e->s.set = set;
    e->set = set;
    e->keep_alive_s = -1;
    e->path = strdup(path);
    const char *base = strrchr(path, '/');
    e->s.model_file = strdup(base ? base + 1 : path);
    e->s.model_id = alias ? strdup(alias) : strdup(e->s.model_file);
    if (!e->path || !e->s.model_file || !e->s.model_id) return -1;
    size_t n = strlen(e->s.model_id);
    if (!alias && n > 5 && !strcmp(e->s.model_id + n - 5, ".gguf")) e->s.model_id[n - 5] = 0;
    struct stat st;
    e->bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    for (int i = 0; i < set->n; i++)
        if (!strcmp(set->e[i].s.model_id, e->s.model_id) || !strcmp(set->e[i].path, e->path)) {
            free(e->path); free(e->s.model_file); free(e->s.model_id);   /* the same model twice: once */
            return 0;
        }
    set->n++;
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .gguf files of dir, sorted (malloc'd list of malloc'd paths). */
static char **dir_models(const char *dir, int *n, char *err, size_t errlen) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) { snprintf(err, errlen, "--models-dir %s: cannot open it", dir); return NULL; }
    char **list = NULL;
    int cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".gguf")) continue;
        if (*n == cap) {
            char **t = realloc(list, sizeof *list * (size_t)(cap = cap ? cap * 2 : 16));
            if (!t) break;
            list = t;
        }
        size_t plen = strlen(dir) + len + 2;
        if (!(list[*n] = malloc(plen))) break;
        snprintf(list[*n], plen, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(list[*n], &st) || !S_ISREG(st.st_mode)) { free(list[*n]); continue; }
        ++*n;
    }
    closedir(d);
    if (*n) qsort(list, (size_t)*n, sizeof *list, by_name);
    return list;
}

int model_set_init(model_set *set, const server *proto, struct hpool *pool, char *err, size_t errlen) {
    memset(set, 0, sizeof *set);
    set->pool = pool;
    set->max_loaded = proto->o.max_loaded;
    set->max_bytes = proto->o.models_memory;
    int n_dir = 0;
    char **dir = proto->o.models_dir ? dir_models(proto->o.models_dir, &n_dir, err, errlen) : NULL;
    if (proto->o.models_dir && !dir && n_dir == 0 && *err) return -1;
    int n_paths = 0;
    for (const char *p = proto->o.model_path; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "") n_paths++;
    set->e = calloc((size_t)(n_paths + n_dir + 1), sizeof *set->e);
    int rc = set->e ? 0 : -1;
    int k = 0;
    for (const char *p = proto->o.model_path; rc == 0 && p && *p; k++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *path = strndup(p, len);
        /* --alias names the first model; the others go by their file names */
        rc = path ? add_entry(set, proto, path, k == 0 ? proto->o.alias : NULL) : -1;
        free(path);
        p = nl ? nl + 1 : p + len;
    }
    for (int i = 0; i < n_dir; i++) {
        if (rc == 0) rc = add_entry(set, proto, dir[i], NULL);
        free(dir[i]);
    }
    free(dir);
    if (rc) { snprintf(err, errlen, "out of memory"); return -1; }
    if (set->n == 0) { snprintf(err, errlen, "no model to serve (--models-dir %s holds no .gguf file)", proto->o.models_dir); return -1; }
    for (int i = 0; i < set->n; i++) set->e[i].keep_alive_s = i == 0 ? -1 : proto->o.keep_alive_s;
    return 0;
}

model_entry *model_set_default(model_set *set) { return &set->e[0]; }

model_entry *model_set_find(model_set *set, const char *name) {
    for (int i = 0; i < set->n; i++)
        if (model_name_matches(&set->e[i].s, name)) return &set->e[i];
    return NULL;
}

const char *model_set_names(const model_set *set) {
    static char buf[1024];
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < set->n && at + 4 < sizeof buf; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s'%s'", i ? ", " : "", set->e[i].s.model_id);
    return buf;
}

/* ---- loading and unloading, on a thread -------------------------------------------- */
static void pump(model_set *set);

static void *load_thread(void *arg) {
    model_entry *e = arg;
    char err[512] = "";
    model_options mo = { e->s.o.backend, -1 };
    e->loaded = model_load_opts(e->path, &mo, err, sizeof err);
    if (e->loaded) {
        server *s = &e->s;
        s->n_ctx = s->o.n_ctx < e->loaded->p.n_ctx_train ? s->o.n_ctx : e->loaded->p.n_ctx_train;
        engine_config c;
        engine_config_default(&c);
        c.n_slots = s->o.n_parallel;
        c.n_ctx = s->n_ctx;
        c.n_batch = s->o.n_batch;
        c.n_batch_decoding = s->o.n_batch_decoding;
        c.n_threads = s->o.n_threads;
        c.queue_max = s->o.queue_max;
        c.pool = e->set->pool;
        c.prompt_cache_bytes = s->o.prompt_cache_bytes;
        /* one prompt-state database per model: the first keeps the plain name */
        char pc_path[1100], base[1024];
        const char *pc = NULL;
        if (!s->o.prompt_cache) pc = prompt_cache_default_path(base, sizeof base) ? NULL : base;
        else if (strcmp(s->o.prompt_cache, "off")) pc = s->o.prompt_cache;
        if (pc && e != &e->set->e[0]) {
            snprintf(pc_path, sizeof pc_path, "%s.%s", pc, s->model_id);
            pc = pc_path;
        }
        c.prompt_cache = pc;
        e->tpl = prompt_load_template(&s->o, e->loaded, &e->tpl_what, err, sizeof err);
        e->started = e->tpl ? engine_create(e->loaded, &c, err, sizeof err) : NULL;
        if (!e->started) {
            model_free(e->loaded);
            e->loaded = NULL;
            chat_template_free(e->tpl);
            e->tpl = NULL;
        }
    }
    snprintf(e->last_error, sizeof e->last_error, "%s", e->loaded ? "" : err);
    uv_async_send(&e->thread_done);
    return NULL;
}

static void *unload_thread(void *arg) {
    model_entry *e = arg;
    engine_destroy(e->started);
    model_free(e->loaded);
    chat_template_free(e->tpl);
    e->started = NULL;
    e->loaded = NULL;
    e->tpl = NULL;
    uv_async_send(&e->thread_done);
    return NULL;
}

static void answer_waiting(model_entry *e, int status, const char *code, const char *msg) {
    while (e->waiting) {
        model_wait *w = e->waiting;
        e->waiting = w->next;
        http_on_close(w->r, NULL, NULL);
        respond_error(w->r, status, "model", code, "%s", msg);
        cJSON_Delete(w->body);
        free(w);
    }
}

static void run_waiting(model_entry *e) {
    while (e->waiting && e->state == MODEL_READY) {
        model_wait *w = e->waiting;
        e->waiting = w->next;
        http_on_close(w->r, NULL, NULL);
        e->last_used_ms = srv_now_ms();
        w->fn(&e->s, w->r, w->body);
        cJSON_Delete(w->body);
        free(w);
    }
}

static bool has_token(void *tok, const char *text) { return tokenizer_find(tok, text) >= 0; }

/* The chat template, the tool-call format, and the line that says the model is in. */
static void model_ready(model_entry *e) {
    server *s = &e->s;
    model *m = s->model;
    if (s->n_ctx < s->o.n_ctx)
        fprintf(stderr, "hearth: --ctx-size %d is more than %s was trained for: using %d per slot\n",
                s->o.n_ctx, s->model_id, s->n_ctx);
    s->tpl = e->tpl;
    s->tpl_name = e->tpl_what;
    s->tool_fmt = tool_format_detect(chat_template_source(s->tpl), has_token, m->tok);
    engine_stats es;
    engine_get_stats(s->engine, &es);
    fprintf(stderr, "hearth: model %s loaded (%s, %.1f MiB) in %.1f s; %d slots x %d tokens, KV %.1f MiB; chat template %s\n",
            s->model_id, model_arch_name(m->p.arch), m->weight_bytes / 1048576.0, (srv_now_ms() - e->t_load) / 1e3,
            s->o.n_parallel, s->n_ctx, es.kv_bytes / 1048576.0, s->tpl_name);
}

static void on_thread_done(uv_async_t *a) {
    model_entry *e = a->data;
    pthread_join(e->thread, NULL);
    e->thread_running = false;
    uv_close((uv_handle_t *)&e->thread_done, NULL);
    server *s = &e->s;
    if (e->state == MODEL_LOADING) {
        if (!e->loaded) {
            fprintf(stderr, "hearth: model %s did not load: %s\n", s->model_id, e->last_error);
            e->state = MODEL_UNLOADED;
            char msg[700];
            snprintf(msg, sizeof msg, "The model '%.100s' could not be loaded: %.500s", s->model_id, e->last_error);
            answer_waiting(e, 500, "model_load_failed", msg);
            if (e == &e->set->e[0] && !e->set->started_once && e->set->on_fatal) e->set->on_fatal(e->set->ud);
        } else {
            s->model = e->loaded;
            s->engine = e->started;
            model_ready(e);
            if (e == &e->set->e[0]) e->set->started_once = true;
            engine_stats es;
            engine_get_stats(s->engine, &es);
            e->bytes = s->model->weight_bytes + es.kv_bytes;
            e->state = MODEL_READY;
            e->last_used_ms = srv_now_ms();
            if (e->set->stopping) model_set_shutdown(e->set);
            else run_waiting(e);
        }
    } else if (e->state == MODEL_UNLOADING) {
        fprintf(stderr, "hearth: model %s unloaded\n", s->model_id);
        e->state = MODEL_UNLOADED;
    }
    pump(e->set);
}

static bool start_thread(model_entry *e, void *(*fn)(void *)) {
    if (uv_async_init(e->s.loop, &e->thread_done, on_thread_done)) return false;
    e->thread_done.data = e;
    if (pthread_create(&e->thread, NULL, fn, e)) {
        uv_close((uv_handle_t *)&e->thread_done, NULL);
        return false;
    }
    e->thread_running = true;
    return true;
}

static void start_load(model_entry *e) {
    fprintf(stderr, "hearth: loading model %s (%s)\n", e->s.model_id, e->path);
    e->state = MODEL_LOADING;
    e->t_load = srv_now_ms();
    if (!start_thread(e, load_thread)) {
        e->state = MODEL_UNLOADED;
        answer_waiting(e, 500, "model_load_failed", "cannot start a thread to load the model");
    }
}

static bool idle(const model_entry *e) {
    return e->state == MODEL_READY && !e->s.gens && !e->s.n_held && !e->waiting && !e->s.offloaded;
}

static void start_unload(model_entry *e) {
    if (!idle(e)) return;
    e->state = MODEL_UNLOADING;
    e->s.model = NULL;   /* routes see it gone; the thread frees it */
    e->s.engine = NULL;
    e->s.tpl = NULL;
    if (!start_thread(e, unload_thread)) {   /* keep it loaded */
        e->s.model = e->loaded;
        e->s.engine = e->started;
        e->s.tpl = e->tpl;
        e->state = MODEL_READY;
    }
}

/* Loads what requests wait for, making room by unloading the least
 * recently used idle models when a limit would be passed. */
static void pump(model_set *set) {
    if (set->stopping) return;
    for (int i = 0; i < set->n; i++) {
        model_entry *e = &set->e[i];
        if (!e->waiting || e->state != MODEL_UNLOADED) continue;
        for (;;) {
            int loaded = 0;
            uint64_t bytes = 0;
            for (int j = 0; j < set->n; j++)
                if (set->e[j].state != MODEL_UNLOADED) { loaded++; bytes += set->e[j].bytes; }
            bool room = (!set->max_loaded || loaded < set->max_loaded) &&
                        (!set->max_bytes || loaded == 0 || bytes + e->bytes <= set->max_bytes);
            if (room) { start_load(e); break; }
            model_entry *lru = NULL;
            for (int j = 0; j < set->n; j++)
                if (idle(&set->e[j]) && (!lru || set->e[j].last_used_ms < lru->last_used_ms)) lru = &set->e[j];
            if (!lru) break;        /* every loaded model is busy: wait for one to finish */
            fprintf(stderr, "hearth: unloading model %s to make room for %s\n", lru->s.model_id, e->s.model_id);
            start_unload(lru);
            break;                  /* its thread's end pumps again */
        }
    }
}

static void on_reaper(uv_timer_t *t) {
    model_set *set = t->data;
    double now = srv_now_ms();
    for (int i = 0; i < set->n; i++) {
        model_entry *e = &set->e[i];
        if (e->state != MODEL_READY) continue;
        if (!idle(e)) { e->last_used_ms = now; continue; }
        if (e->keep_alive_s >= 0 && now - e->last_used_ms >= e->keep_alive_s * 1000) start_unload(e);
    }
    pump(set);
}

int model_set_start(model_set *set) {
    for (; set->n_started < set->n; set->n_started++)
        if (gen_events_init(&set->e[set->n_started].s)) return -1;
    uv_timer_init(set->e[0].s.loop, &set->reaper);
    set->reaper.data = set;
    set->reaper_started = true;
    uv_timer_start(&set->reaper, on_reaper, REAPER_MS, REAPER_MS);
    start_load(&set->e[0]);
    return 0;
}

/* ---- requests ------------------------------------------------------------------- */
static void on_wait_closed(void *arg) {   /* the client left while its model loaded */
    model_wait *w = arg;
    model_entry *e = w->e;
    for (model_wait **p = &e->waiting; *p; p = &(*p)->next)
        if (*p == w) { *p = w->next; break; }
    cJSON_Delete(w->body);
    free(w);
}

void model_set_dispatch(model_set *set, model_entry *e, model_route_fn fn, http_req *r, cJSON *body,
                        double keep_alive_s, bool keep_alive_given) {
    if (keep_alive_given) e->keep_alive_s = keep_alive_s;
    if (e->state == MODEL_READY && !e->waiting) {
        e->last_used_ms = srv_now_ms();
        fn(&e->s, r, body);
        cJSON_Delete(body);
        return;
    }
    model_wait *w = calloc(1, sizeof *w);
    if (!w) { cJSON_Delete(body); respond_error(r, 500, NULL, "out_of_memory", "Out of memory"); return; }
    *w = (model_wait){ e, fn, r, body, NULL };
    model_wait **tail = &e->waiting;
    while (*tail) tail = &(*tail)->next;
    *tail = w;
    http_on_close(r, on_wait_closed, w);
    http_defer(r);
    pump(set);
}

/* ---- stopping ------------------------------------------------------------------- */
void model_set_shutdown(model_set *set) {
    set->stopping = true;
    uv_timer_stop(&set->reaper);
    for (int i = 0; i < set->n; i++) {
        model_entry *e = &set->e[i];
        answer_waiting(e, 503, "shutting_down", "The server is shutting down");
        e->s.stopping = true;
        if (e->state == MODEL_READY && e->s.engine) {
            engine_destroy(e->s.engine);   /* every job gets its DONE (shutdown) */
            gen_events_drain(&e->s);       /* ... and every answer its end */
            e->s.engine = NULL;
            e->started = NULL;
        }
    }
}

bool model_set_busy(const model_set *set) {
    for (int i = 0; i < set->n; i++)
        if (set->e[i].thread_running) return true;
    return false;
}

void model_set_close(model_set *set) {
    for (int i = 0; i < set->n; i++) {   /* a second signal may not wait for a loader */
        model_entry *e = &set->e[i];
        if (!e->thread_running) continue;
        pthread_join(e->thread, NULL);
        e->thread_running = false;
        uv_close((uv_handle_t *)&e->thread_done, NULL);
    }
    if (set->reaper_started) uv_close((uv_handle_t *)&set->reaper, NULL);
    set->reaper_started = false;
    for (int i = 0; i < set->n_started; i++) gen_events_close(&set->e[i].s);
    set->n_started = 0;
}

void model_set_free(model_set *set) {
    for (int i = 0; i < set->n; i++) {
        model_entry *e = &set->e[i];
        if (e->s.engine) engine_destroy(e->s.engine);
        if (e->started && e->started != e->s.engine) engine_destroy(e->started);
        if (e->loaded) model_free(e->loaded);
        chat_template_free(e->tpl);
        free(e->path);
        free(e->s.model_file);
        free(e->s.model_id);
    }
    free(set->e);
    set->e = NULL;
    set->n = 0;
}
