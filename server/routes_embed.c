/* Embeddings: OpenAI's POST /v1/embeddings and llama-server's /embedding.
 * Each input (a string, or a list of token ids) is one engine job that
 * prefills without generating (job_params.embed); the jobs run beside any
 * others in the same slots. Their vectors come back on the engine thread,
 * are kept here; once the last one is in (a uv_async per request) the
 * answer is printed on a worker and the loop only sends it. The inputs are
 * checked and tokenized on a worker too (server/offload.c): neither a huge
 * input nor a huge answer (2048 wide vectors: tens of MB of JSON) holds up
 * the loop, which only submits the jobs and sends the bytes. Pooling:
 * --pooling, else the model's pooling_type, else the last token's state;
 * every vector has length 1. */
#include "server/routes.h"
#include "server/errors.h"
#include "server/offload.h"
#include "server/prompt.h"
#include "server/request_json.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define EMBED_MAX_INPUTS 2048   /* as OpenAI's API */

typedef struct embed_req embed_req;

typedef struct embed_item {
    embed_req *r;
    int index;
    uint64_t job;
} embed_item;

struct embed_req {
    server *s;
    http_req *req;            /* NULL once the client left or was answered */
    uv_async_t async;         /* the engine thread's "all in" */
    uv_work_t fmt;            /* the answer printed off the loop */
    char *text;               /* that answer, NULL when out of memory */
    pthread_mutex_t mu;
    int n, n_embd, pending;   /* inputs, dimensions, DONE events still owed */
    int n_tokens;             /* usage */
    bool llama, base64, failed, shutdown;
    embed_item *items;
    float *vec;               /* n * n_embd */
};

static void req_free(uv_handle_t *h) {
    embed_req *r = h->data;
    pthread_mutex_destroy(&r->mu);
    free(r->items);
    free(r->vec);
    free(r->text);
    free(r);
}

/* Engine thread. */
static void on_event(void *user, const job_event *ev) {
    if (ev->type != JOB_EV_DONE) return;
    embed_item *it = user;
    embed_req *r = it->r;
    pthread_mutex_lock(&r->mu);
    if (ev->embedding && ev->n_embd == r->n_embd)
        memcpy(r->vec + (size_t)it->index * r->n_embd, ev->embedding, sizeof(float) * (size_t)r->n_embd);
    else {
        r->failed = true;
        r->shutdown |= ev->finish == FINISH_SHUTDOWN;
    }
    bool last = --r->pending == 0;
    pthread_mutex_unlock(&r->mu);
    if (last) uv_async_send(&r->async);
}

static void on_closed(void *arg) {   /* the client left: the jobs are not wanted */
    embed_req *r = arg;
    r->req = NULL;
    for (int i = 0; i < r->n && r->s->engine; i++)   /* no engine: shut down, every job has ended */
        if (r->items[i].job) engine_cancel(r->s->engine, r->items[i].job);
}

static char *base64_floats(const float *v, int n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = (size_t)n * 4;
    unsigned char *b = malloc(len ? len : 1);
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!b || !out) { free(b); free(out); return NULL; }
    for (int i = 0; i < n; i++) {   /* little-endian float32, as numpy's frombuffer reads it */
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) b[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < len ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < len ? b[i + 2] : 0);
        out[o++] = tab[w >> 18 & 63];
        out[o++] = tab[w >> 12 & 63];
        out[o++] = i + 1 < len ? tab[w >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? tab[w & 63] : '=';
    }
    out[o] = 0;
    free(b);
    return out;
}

static cJSON *vector_json(const embed_req *r, int i) {
    const float *v = r->vec + (size_t)i * r->n_embd;
    if (r->base64) {
        char *s = base64_floats(v, r->n_embd);
        cJSON *j = s ? cJSON_CreateString(s) : NULL;
        free(s);
        return j;
    }
    return cJSON_CreateFloatArray(v, r->n_embd);
}

static cJSON *answer(const embed_req *r) {
    if (r->llama) {   /* llama-server: [{index, embedding: [vector]}] */
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; arr && i < r->n; i++) {
            cJSON *o = cJSON_CreateObject(), *outer = cJSON_CreateArray();
            cJSON_AddNumberToObject(o, "index", i);
            cJSON_AddItemToArray(outer, vector_json(r, i));
            cJSON_AddItemToObject(o, "embedding", outer);
            cJSON_AddItemToArray(arr, o);
        }
        return arr;
    }
    cJSON *o = cJSON_CreateObject(), *data = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "object", "list");
    for (int i = 0; i < r->n; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "object", "embedding");
        cJSON_AddNumberToObject(d, "index", i);
        cJSON_AddItemToObject(d, "embedding", vector_json(r, i));
        cJSON_AddItemToArray(data, d);
    }
    cJSON_AddItemToObject(o, "data", data);
    cJSON_AddStringToObject(o, "model", r->s->model_id ? r->s->model_id : "");
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", r->n_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", r->n_tokens);
    cJSON_AddItemToObject(o, "usage", u);
    return o;
}

/* A worker: the whole answer printed; the vectors are not needed after. */
static void fmt_work(uv_work_t *w) {
    embed_req *r = w->data;
    cJSON *a = answer(r);
    r->text = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    free(r->vec);
    r->vec = NULL;
}

static void client_left(void *arg) { ((embed_req *)arg)->req = NULL; }

static void req_end(embed_req *r) {
    r->s->n_held--;   /* every job has ended: the model may be unloaded */
    uv_close((uv_handle_t *)&r->async, req_free);
}

/* Loop thread: the answer printed; only its bytes are sent here. */
static void fmt_done(uv_work_t *w, int status) {
    embed_req *r = w->data;
    if (r->req) {
        http_req *q = r->req;
        http_on_close(q, NULL, NULL);
        r->req = NULL;
        if (status) respond_error(q, 503, NULL, "shutting_down", "The server is shutting down");
        else if (!r->text) respond_json(q, 200, NULL);   /* its 500 "out of memory" */
        else {
            http_set_tokens(q, r->n_tokens, 0);
            http_respond(q, 200, "application/json", r->text, strlen(r->text));
        }
    }
    req_end(r);
}

/* An answer this many floats wide or wider is a large job (offload.h). */
#define EMBED_LARGE_FLOATS (16 << 10)

/* Loop thread: every job has ended. */
static void on_all_in(uv_async_t *a) {
    embed_req *r = a->data;
    if (r->req && !r->failed) {   /* the jobs are over: a client leaving now only drops the answer */
        http_on_close(r->req, client_left, r);
        r->fmt.data = r;
        bool large = (size_t)r->n * (size_t)r->n_embd >= EMBED_LARGE_FLOATS;
        if (!r->s->loop || offload_queue(r->s->loop, &r->fmt, fmt_work, fmt_done, large)) {
            fmt_work(&r->fmt);   /* no worker: here */
            fmt_done(&r->fmt, 0);
        }
        return;
    }
    if (r->req) {
        http_req *q = r->req;
        http_on_close(q, NULL, NULL);
        r->req = NULL;
        if (r->shutdown) respond_error(q, 503, NULL, "shutting_down", "The server is shutting down");
        else respond_error(q, 500, NULL, NULL, "the embedding could not be computed");
    }
    req_end(r);
}

/* ---- the request ------------------------------------------------------------ */
typedef struct {
    int32_t **toks;
    int *n;
    int count;
} inputs;

static void inputs_free(inputs *in) {
    for (int i = 0; i < in->count; i++) free(in->toks[i]);
    free(in->toks);
    free(in->n);
}

/* One list of token ids, each checked against the vocabulary. */
static int token_list(const server *s, const cJSON *arr, int32_t **out, const char *param, api_error *e) {
    int n = cJSON_GetArraySize(arr);
    if (n == 0) return api_fail(e, 400, param, "invalid_value", "'%s' holds an empty list of token ids", param), -1;
    *out = malloc(sizeof(int32_t) * (size_t)n);
    if (!*out) return api_fail(e, 500, NULL, NULL, "out of memory"), -1;
    int i = 0;
    for (const cJSON *t = arr->child; t; t = t->next, i++) {
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (d < 0 || d >= s->model->p.n_vocab || d != (double)(int32_t)d)
            return api_fail(e, 400, param, "invalid_value", "'%s' holds %s, not a token id of this model (0..%d)", param,
                            cJSON_IsNumber(t) ? "a number out of range" : "a value that is not a number",
                            s->model->p.n_vocab - 1), -1;
        (*out)[i] = (int32_t)d;
    }
    return n;
}

static bool add_input(const server *s, inputs *in, const cJSON *v, const char *param, api_error *e) {
    if (in->count >= EMBED_MAX_INPUTS)
        return api_fail(e, 400, param, "invalid_value", "'%s' holds more than %d inputs", param, EMBED_MAX_INPUTS);
    int32_t *ids = NULL;
    int n;
    if (cJSON_IsString(v)) {
        if (!prompt_text_may_fit(s, strlen(v->valuestring), param, e)) return false;
        n = prompt_tokenize(s, v->valuestring, strlen(v->valuestring), true, true, &ids, e);
    } else {
        n = token_list(s, v, &ids, param, e);
    }
    if (n < 0) { free(ids); return false; }
    if (n == 0) { free(ids); return api_fail(e, 400, param, "invalid_value", "'%s' holds an empty input", param); }
    if (!prompt_fits(s, n, param, e)) { free(ids); return false; }
    in->toks[in->count] = ids;
    in->n[in->count++] = n;
    return true;
}

/* A string, a list of strings, a list of token ids, or a list of lists of token ids. */
static bool parse_inputs(const server *s, const cJSON *v, const char *param, inputs *in, api_error *e) {
    memset(in, 0, sizeof *in);
    if (!v || cJSON_IsNull(v)) return api_fail(e, 400, param, "missing_field", "'%s' is required", param);
    int cap = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
    if (cJSON_IsArray(v) && cap == 0) return api_fail(e, 400, param, "invalid_value", "'%s' must not be empty", param);
    bool ids = cJSON_IsArray(v) && cJSON_IsNumber(v->child);   /* one list of token ids */
    if (ids || !cJSON_IsArray(v)) cap = 1;
    if (cap > EMBED_MAX_INPUTS)
        return api_fail(e, 400, param, "invalid_value", "'%s' holds more than %d inputs", param, EMBED_MAX_INPUTS);
    in->toks = calloc((size_t)cap, sizeof *in->toks);
    in->n = calloc((size_t)cap, sizeof *in->n);
    if (!in->toks || !in->n) return api_fail(e, 500, NULL, NULL, "out of memory");
    if (cJSON_IsString(v) || ids) return add_input(s, in, v, param, e);
    if (!cJSON_IsArray(v))
        return api_fail(e, 400, param, "invalid_type", "'%s' must be a string, a list of strings, a list of token ids "
                        "or a list of lists of token ids", param);
    for (const cJSON *it = v->child; it; it = it->next) {
        if (!cJSON_IsString(it) && !cJSON_IsArray(it))
            return api_fail(e, 400, param, "invalid_type", "'%s' must be a list of strings or of lists of token ids "
                            "(item %d is neither)", param, in->count);
        if (!add_input(s, in, it, param, e)) return false;
    }
    return true;
}

static embed_pooling pooling_of(const server *s) {
    const char *p = s->o.pooling;
    int k = !p || !strcmp(p, "model") ? s->model->p.pooling : !strcmp(p, "mean") ? 1 : !strcmp(p, "cls") ? 2 : 3;
    return k == 1 ? EMBED_MEAN : k == 2 ? EMBED_CLS : EMBED_LAST;
}

/* What the worker hands the loop: the tokenized inputs and the options. */
typedef struct {
    inputs in;
    bool llama, base64;
} embed_prep;

static void embed_prep_free(void *arg) {
    embed_prep *ep = arg;
    inputs_free(&ep->in);
    free(ep);
}

/* On a worker: the fields and every input's tokens. */
static bool prep(const server *s, const cJSON *body, route_prep *rp, bool llama) {
    api_error *e = &rp->e;
    embed_prep *ep = calloc(1, sizeof *ep);
    if (!ep) return api_fail(e, 500, NULL, NULL, "out of memory");
    rp->data = ep;
    rp->data_free = embed_prep_free;
    ep->llama = llama;
    rp->body_done = true;   /* go needs only what is here */
    const char *param = "input";
    const cJSON *v = jf_get(body, "input");
    if (!v && llama && jf_get(body, "content")) v = jf_get(body, "content"), param = "content";
    const char *format = NULL;
    long long dims = 0;
    if (!parse_inputs(s, v, param, &ep->in, e) || !jf_str(body, "encoding_format", &format, e) ||
        !jf_int(body, "dimensions", 1, 1 << 20, &dims, e))
        return false;
    if (format && strcmp(format, "float") && strcmp(format, "base64"))
        return api_fail(e, 400, "encoding_format", "invalid_value", "'encoding_format' must be \"float\" or \"base64\"");
    if (dims && dims != s->model->p.n_embd)
        return api_fail(e, 400, "dimensions", "unsupported_value", "this model does not support 'dimensions': its "
                        "embeddings have %d dimensions, and it cannot shorten them", s->model->p.n_embd);
    ep->base64 = format && !strcmp(format, "base64");
    return true;
}

static bool prep_oai(const server *s, const cJSON *body, route_prep *rp) { return prep(s, body, rp, false); }
static bool prep_llama(const server *s, const cJSON *body, route_prep *rp) { return prep(s, body, rp, true); }

/* On the loop: one job per input. */
static void go(server *s, http_req *q, const cJSON *body, route_prep *rp) {
    (void)body;
    embed_prep *ep = rp->data;
    inputs *in = &ep->in;
    embed_req *r = calloc(1, sizeof *r);
    if (r) {
        r->items = calloc((size_t)in->count, sizeof *r->items);
        r->vec = malloc(sizeof(float) * (size_t)in->count * (size_t)s->model->p.n_embd);
    }
    if (!r || !r->items || !r->vec || uv_async_init(s->loop, &r->async, on_all_in)) {
        if (r) free(r->items), free(r->vec);
        free(r);
        respond_error(q, 500, NULL, NULL, "out of memory");
        return;
    }
    r->s = s;
    s->n_held++;   /* until on_all_in: an idle unload would end the jobs (503) */
    r->req = q;
    r->async.data = r;
    pthread_mutex_init(&r->mu, NULL);
    r->n = in->count;
    r->n_embd = s->model->p.n_embd;
    r->llama = ep->llama;
    r->base64 = ep->base64;
    r->pending = in->count + 1;   /* + 1: this function's, so no answer goes out while it submits */
    job_params p;
    job_params_default(&p);
    p.embed = pooling_of(s);
    int rc = ENGINE_OK;
    for (int i = 0; i < in->count; i++) {
        r->items[i].r = r;
        r->items[i].index = i;
        r->n_tokens += in->n[i];
        pthread_mutex_lock(&r->mu);
        if (rc == ENGINE_OK) rc = engine_submit(s->engine, in->toks[i], in->n[i], &p, on_event, &r->items[i], &r->items[i].job);
        if (rc != ENGINE_OK) r->pending--, r->failed = true;   /* never submitted: owes nothing */
        pthread_mutex_unlock(&r->mu);
    }
    if (rc != ENGINE_OK) {   /* answer now; the submitted jobs are cancelled and freed as they end */
        on_closed(r);
        if (rc == ENGINE_QUEUE_FULL)
            respond_error(q, 503, NULL, "queue_full", "The server is busy (the request queue is full); retry later");
        else respond_error(q, 500, NULL, NULL, "the embedding could not be queued");
    } else {
        http_defer(q);
        http_on_close(q, on_closed, r);
    }
    pthread_mutex_lock(&r->mu);
    bool last = --r->pending == 0;
    pthread_mutex_unlock(&r->mu);
    if (last) uv_async_send(&r->async);
}

void route_embeddings(server *s, http_req *r, const cJSON *body) { offload_route(s, r, body, prep_oai, go); }
void route_embedding(server *s, http_req *r, const cJSON *body) { offload_route(s, r, body, prep_llama, go); }
