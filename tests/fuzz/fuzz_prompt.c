/* libFuzzer target: a request body through the server's own code for every
 * endpoint that takes one, from the router's checks (UTF-8, no NUL, JSON to
 * the end, an object) through the route: field checks, then the prompt
 * (messages -> chat template -> tokens, or a prompt field: text, token ids,
 * a mix, one prompt in a list; fill-in-the-middle for suffix and /infill).
 * It links router.c (the model set a stub of one loaded model; the embedding routes stubs), offload.c, routes_oai.c, routes_llama.c, prompt.c, fmt_*.c and
 * request_json.c as they are; the HTTP layer and the generation (gen.c) are
 * stubs that record what a route did. The server (vocabulary, chat template,
 * context, batch) is picked by a hash of the body, so a body replays the
 * same way; the vocabularies are fuzz_vocabs.h's four.
 *
 * Checks, for each endpoint:
 *   - the route either answers once or submits one generation, never both,
 *     never neither, and with the answer shape of its endpoint;
 *   - every answer body is valid UTF-8 JSON; an error is 4xx (500 only for
 *     out of memory) with a non-empty message on one line;
 *   - a submitted prompt has 1 .. n_ctx-1 tokens, every id inside the
 *     vocabulary; a chat prompt starts with BOS when the vocabulary adds it;
 *     a prompt of token ids is submitted as given;
 *   - /tokenize gives ids inside the vocabulary; /detokenize accepts only
 *     ids inside it; /apply-template answers a prompt string.
 * ASan/LSan see any leak or bad access on the way (the fuzzer's per-input
 * leak check). */
#include "tests/fuzz/fuzz_vocabs.h"
#include "engine/text/chat_template.h"
#include "engine/model/model.h"
#include "server/fmt.h"
#include "server/gen.h"
#include "server/gen_group.h"
#include "server/routes.h"
#include "server/model_set.h"
#include "server/request_json.h"
#include "server/utf8.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the HTTP request: what a route reads and what it answered -------------- */
struct http_req {
    const char *path;
    const char *body;
    size_t len;
    int n_answers;
    int status;
    char *answer;             /* the body answered (copied) */
    gen *g;                   /* the generation submitted (a group's first member) */
    int32_t *ids;             /* its prompt (copied) */
    int n_ids;
    bool group;               /* n > 1 or a list of prompts: several members */
    gen **more;               /* the group's other members */
    int n_more;
};

const char *http_method(const http_req *r) { (void)r; return "POST"; }
const char *http_path(const http_req *r) { return r->path; }
/* a JSON body from a local client, as a real one sends it */
const char *http_header(const http_req *r, const char *name) {
    (void)r;
    return !strcasecmp(name, "Content-Type") ? "application/json" : !strcasecmp(name, "Host") ? "127.0.0.1:8080" : NULL;
}
const char *http_body(const http_req *r, size_t *len) { *len = r->len; return r->body; }
bool http_body_too_large(const http_req *r) { (void)r; return false; }
bool http_body_over_budget(const http_req *r) { (void)r; return false; }
const char *http_framing_error(const http_req *r) { (void)r; return NULL; }
void http_close_after(http_req *r) { (void)r; }
/* router.c and offload.c run large bodies and prompts on libuv's workers: refused here, so they run inline */
int uv_queue_work(uv_loop_t *loop, uv_work_t *req, uv_work_cb work, uv_after_work_cb done) {
    (void)loop; (void)req; (void)work; (void)done;
    return -1;
}
char *http_take_body(http_req *r, size_t *len) { (void)r; *len = 0; return NULL; }
size_t http_body_size(const http_req *r) { return r->len; }
void http_give_body(http_req *r, char *body, size_t len) { (void)r; (void)body; (void)len; }
void http_defer(http_req *r) { (void)r; }
void http_on_close(http_req *r, void (*fn)(void *arg), void *arg) { (void)r; (void)fn; (void)arg; }
void http_set_route(http_req *r, const char *route) { (void)r; (void)route; }
void http_add_header(http_req *r, const char *name, const char *value) { (void)r; (void)name; (void)value; }

void http_respond(http_req *r, int status, const char *content_type, const char *body, size_t len) {
    (void)content_type;
    if (r->n_answers++ || r->g) {
        fprintf(stderr, "%s: a second answer (%d)\n", r->path, status);
        abort();
    }
    r->status = status;
    r->answer = malloc(len + 1);
    memcpy(r->answer, body, len);
    r->answer[len] = 0;
    if (strlen(r->answer) != len) { fprintf(stderr, "%s: a NUL in the answer\n", r->path); abort(); }
}

/* ---- the generation: gen.c's gen_create and gen_submit, minus the engine ---- */
uint64_t uv_hrtime(void) {   /* request_json.c seeds requests without a seed from it */
    static uint64_t t;
    return t += 1000;
}
gen *gen_create(server *s, http_req *r, gen_kind kind, const gen_fmt *fmt, gen_opts *o) {
    const gen_fmt *want = kind == GEN_CHAT ? &fmt_chat : kind == GEN_COMPLETION ? &fmt_completion : &fmt_llama;
    if (r->n_answers || (r->g && !r->group) || fmt != want) {
        fprintf(stderr, "%s: gen_create after an answer, twice, or with another kind's format\n", r->path);
        abort();
    }
    gen *g = calloc(1, sizeof *g);
    g->s = s;
    g->req = r;
    g->fmt = fmt;
    g->kind = kind;
    g->o = *o;   /* takes over o, as gen.c does */
    g->o.response_fields = NULL;
    g->response_fields = o->response_fields ? cJSON_Duplicate(o->response_fields, true) : NULL;
    if (!r->g) {
        r->g = g;
    } else {
        gen **m = realloc(r->more, sizeof *m * (size_t)(r->n_more + 1));
        if (!m) abort();
        r->more = m;
        r->more[r->n_more++] = g;
    }
    return g;
}

void gen_submit(gen *g, const int32_t *prompt, int n_prompt) {
    http_req *r = g->req;
    if (g != r->g) {   /* a later member of a group: its prompt must fit and stay in the vocabulary */
        if (n_prompt <= 0 || n_prompt >= g->s->n_ctx) { fprintf(stderr, "%s: a member's prompt of %d tokens\n", r->path, n_prompt); abort(); }
        for (int i = 0; i < n_prompt; i++)
            if (prompt[i] < 0 || prompt[i] >= g->s->model->p.n_vocab) { fprintf(stderr, "%s: a member's id outside the vocabulary\n", r->path); abort(); }
        return;
    }
    if (r->ids || n_prompt < 0) { fprintf(stderr, "%s: gen_submit twice or with %d tokens\n", r->path, n_prompt); abort(); }
    r->ids = malloc(sizeof *prompt * (size_t)(n_prompt ? n_prompt : 1));
    if (n_prompt) memcpy(r->ids, prompt, sizeof *prompt * (size_t)n_prompt);
    r->n_ids = n_prompt;
}

/* gen.c's gen_destroy, for what a route can have filled */
static void gen_free(gen *g) {
    gen_opts_free(&g->o);
    cJSON_Delete(g->response_fields);
    cJSON_Delete(g->settings);
    free(g->echo);
    free(g);
}

/* gen_group.c's, for what a route does before any member runs */
gen_group *gen_group_new(server *s, http_req *r, int n) {
    (void)s;
    if (n < 2 || r->group || r->g) { fprintf(stderr, "%s: a group of %d\n", r->path, n); abort(); }
    r->group = true;
    return (gen_group *)r;
}
void gen_group_add(gen_group *grp, gen *g, int index, bool shares_prompt) {
    (void)grp; (void)g; (void)index; (void)shares_prompt;
}
void gen_group_abort(gen_group *grp, bool respond) {
    http_req *r = (http_req *)grp;
    if (r->g) gen_free(r->g);
    for (int i = 0; i < r->n_more; i++) gen_free(r->more[i]);
    free(r->more);
    r->g = NULL;
    r->more = NULL;
    r->n_more = 0;
    static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
    if (respond) http_respond(r, 500, "application/json", oom, sizeof oom - 1);
}

/* Reached only from a running generation (fmt_*.c's answers) or GET routes. */
static void never(const char *what) {
    fprintf(stderr, "fuzz: %s called\n", what);
    abort();
}
void gen_fail(gen *g, int status, const char *code, const char *msg) { (void)g; (void)status; (void)code; (void)msg; never("gen_fail"); }
void gen_sse_json(gen *g, cJSON *o) { (void)g; (void)o; never("gen_sse_json"); }
void gen_sse_raw(gen *g, const char *data) { (void)g; (void)data; never("gen_sse_raw"); }
void gen_stream_end(gen *g) { (void)g; never("gen_stream_end"); }
void gen_answer(gen *g, cJSON *o) { (void)g; cJSON_Delete(o); never("gen_answer"); }
bool gen_stream_last(gen *g) { (void)g; never("gen_stream_last"); return true; }
void gen_usage_counts(const gen *g, int *prompt, int *completion, int *cached) {
    (void)g; *prompt = *completion = *cached = 0; never("gen_usage_counts");
}
/* routes_embed.c queues engine jobs: not linked here; its routes answer an empty object */
void route_embeddings(server *s, http_req *r, const cJSON *body) { (void)s; (void)body; http_respond(r, 200, "application/json", "{}", 2); }
void route_embedding(server *s, http_req *r, const cJSON *body) { (void)s; (void)body; http_respond(r, 200, "application/json", "{}", 2); }
const char *gen_finish_oai(const gen *g) { (void)g; never("gen_finish_oai"); return ""; }
const char *gen_stop_type(const gen *g) { (void)g; never("gen_stop_type"); return ""; }
#define GET_ROUTE(name) \
    void name(server *s, http_req *r, const cJSON *body) { (void)s; (void)r; (void)body; never(#name); }
GET_ROUTE(route_models)
GET_ROUTE(route_model)
GET_ROUTE(route_health)
GET_ROUTE(route_props)
GET_ROUTE(route_slots)
GET_ROUTE(route_metrics)
GET_ROUTE(route_cache)

/* ---- the servers ------------------------------------------------------------------ */
static model models[FUZZ_N_VOCABS];
/* One served model: the router's model_set, with the model always loaded. */
static model_set set;
static model_entry entry;
#define srv (entry.s)

model_entry *model_set_default(model_set *ms) { return &ms->e[0]; }
model_entry *model_set_find(model_set *ms, const char *name) {
    return model_name_matches(&ms->e[0].s, name) ? &ms->e[0] : NULL;
}
const char *model_set_names(const model_set *ms) { return ms->e[0].s.model_id; }
void model_set_dispatch(model_set *ms, model_entry *e, model_route_fn fn, http_req *r, cJSON *body,
                        double keep_alive_s, bool keep_alive_given) {
    (void)ms; (void)keep_alive_s; (void)keep_alive_given;
    fn(&e->s, r, body);
    cJSON_Delete(body);
}
static const char *const tpl_names[] = { "chatml", "llama3", "llama2", "mistral", "gemma", "phi3", "phi4", "zephyr" };
#define N_TPL (sizeof tpl_names / sizeof *tpl_names)
static chat_template *tpls[N_TPL];
static _Alignas(64) char engine_stand_in[64];   /* the router only checks that there is an engine */

static void setup(void) {
    if (srv.engine) return;
    fuzz_load_vocabs();
    for (size_t i = 0; i < N_TPL; i++) {
        char err[256];
        if (!(tpls[i] = chat_template_load(chat_template_builtin(tpl_names[i]), "<s>", "</s>", err, sizeof err))) {
            fprintf(stderr, "%s: %s\n", tpl_names[i], err);
            abort();
        }
    }
    for (int i = 0; i < FUZZ_N_VOCABS; i++) {
        models[i].tok = fuzz_vocabs[i];
        models[i].p.n_vocab = tokenizer_n_vocab(fuzz_vocabs[i]);
        models[i].name = (char *)fuzz_vocab_names[i];
    }
    srv.engine = (engine *)engine_stand_in;
    set.e = &entry;
    set.n = 1;
    srv.set = &set;
    srv.model_id = (char *)"fuzz-model";
    srv.model_file = (char *)"fuzz-model.gguf";
    srv.o.n_parallel = 4;
    srv.o.max_body = 16u << 20;
}

/* FNV-1a: the server for this body */
static uint32_t hash(const uint8_t *d, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ d[i]) * 16777619u;
    return h;
}

/* ---- checks ------------------------------------------------------------------------- */
static void fail(const http_req *r, const char *why) {
    fprintf(stderr, "%s: %s (vocabulary %s, template %s, n_ctx %d, n_batch %d)\nanswer %d: %s\n", r->path, why,
            srv.model->name, srv.tpl_name, srv.n_ctx, srv.o.n_batch, r->status,
            r->answer ? r->answer : "(none)");
    abort();
}

static bool is_vocab_id(double d) {
    return d >= 0 && d < srv.model->p.n_vocab && d == floor(d);
}

/* An error answer: {"error": {"message": one line, "type": ..., "code": ...}}. */
static void check_error(const http_req *r, const cJSON *a) {
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(a, "error");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(err, "message");
    if (!cJSON_IsString(msg) || !*msg->valuestring) fail(r, "an error without a message");
    for (const unsigned char *c = (const unsigned char *)msg->valuestring; *c; c++)
        if (*c < 0x20 || *c == 0x7f) fail(r, "an error message with a control character");
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "type")) ||
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(err, "code")))
        fail(r, "an error without a type or code");
    if (r->status >= 400 && r->status <= 499) return;
    if (r->status == 500 && strstr(msg->valuestring, "memory")) return;
    fail(r, "an error status other than 4xx (or 500 for memory)");
}

/* The token ids a prompt field spells when it is ids only (one list, maybe
 * inside a list of one), else n = -1. */
static int id_prompt(const cJSON *p, bool oai, const cJSON **list) {
    if (!cJSON_IsArray(p) || !p->child) return -1;
    if (!p->child->next && (cJSON_IsArray(p->child) || (oai && cJSON_IsString(p->child)))) return id_prompt(p->child, oai, list);
    int n = 0;
    for (const cJSON *it = p->child; it; it = it->next, n++)
        if (!cJSON_IsNumber(it)) return -1;
    *list = p;
    return n;
}

static void check_submitted(const http_req *r, const cJSON *body) {
    const gen *g = r->g;
    const tokenizer *t = srv.model->tok;
    if (!r->ids) fail(r, "a generation created but not submitted");
    if (r->n_ids <= 0 || r->n_ids >= srv.n_ctx) fail(r, "a prompt that does not fit a slot");
    for (int i = 0; i < r->n_ids; i++)
        if (r->ids[i] < 0 || r->ids[i] >= srv.model->p.n_vocab) fail(r, "a prompt id outside the vocabulary");
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(body, "prompt"), *list = NULL;
    switch (g->kind) {
    case GEN_CHAT:
        if (strcmp(r->path, "/v1/chat/completions")) fail(r, "a chat generation from another endpoint");
        /* (a second BOS can follow: content spelling "<s><s>" is parsed, as llama.cpp does) */
        if (tokenizer_add_bos(t) && r->ids[0] != tokenizer_bos(t)) fail(r, "a chat prompt without BOS first");
        break;
    case GEN_COMPLETION:
        if (strcmp(r->path, "/v1/completions")) fail(r, "a completion from another endpoint");
        if (g->o.echo && !g->echo) fail(r, "echo without the prompt text");
        if (!g->o.echo && g->echo) fail(r, "the prompt text kept without echo");
        if (id_prompt(prompt, true, &list) >= 0) goto ids;
        break;
    case GEN_LLAMA:
        if (!g->settings) fail(r, "a llama.cpp generation without its generation_settings");
        if (!strcmp(r->path, "/completion") && id_prompt(prompt, false, &list) >= 0) goto ids;
        break;
    }
    return;
ids:   /* a prompt of token ids goes to the engine as given */
    if (cJSON_GetArraySize(list) != r->n_ids) fail(r, "a prompt of ids submitted with another length");
    int i = 0;
    for (const cJSON *it = list->child; it; it = it->next, i++)
        if (!is_vocab_id(it->valuedouble) || r->ids[i] != (int32_t)it->valuedouble) fail(r, "a prompt of ids changed");
}

static void check_answer(const http_req *r, const cJSON *body) {
    if (!utf8_valid(r->answer, strlen(r->answer))) fail(r, "an answer that is not UTF-8");
    cJSON *a = cJSON_Parse(r->answer);
    if (!a) fail(r, "an answer that is not JSON");
    if (r->status != 200) {
        check_error(r, a);
        cJSON_Delete(a);
        return;
    }
    if (!strcmp(r->path, "/tokenize")) {
        const cJSON *toks = cJSON_GetObjectItemCaseSensitive(a, "tokens"), *it;
        if (!cJSON_IsArray(toks)) fail(r, "/tokenize without tokens");
        cJSON_ArrayForEach(it, toks) {
            const cJSON *id = cJSON_IsObject(it) ? cJSON_GetObjectItemCaseSensitive(it, "id") : it;
            if (!cJSON_IsNumber(id) || !is_vocab_id(id->valuedouble)) fail(r, "/tokenize: an id outside the vocabulary");
            if (cJSON_IsObject(it)) {
                const cJSON *piece = cJSON_GetObjectItemCaseSensitive(it, "piece"), *b;
                if (cJSON_IsArray(piece)) {
                    cJSON_ArrayForEach(b, piece)
                        if (!cJSON_IsNumber(b) || b->valuedouble < 0 || b->valuedouble > 255) fail(r, "/tokenize: a piece byte");
                } else if (!cJSON_IsString(piece)) {
                    fail(r, "/tokenize: a piece that is neither text nor bytes");
                }
            }
        }
    } else if (!strcmp(r->path, "/detokenize")) {
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(a, "content"))) fail(r, "/detokenize without content");
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(body, "tokens"))
            if (!cJSON_IsNumber(it) || !is_vocab_id(it->valuedouble)) fail(r, "/detokenize took an id outside the vocabulary");
    } else if (!strcmp(r->path, "/apply-template")) {
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(a, "prompt"))) fail(r, "/apply-template without a prompt");
    } else {
        fail(r, "a 200 answer from an endpoint that generates");
    }
    cJSON_Delete(a);
}

static const char *const paths[] = {
    "/v1/chat/completions", "/v1/completions", "/completion", "/infill",
    "/tokenize", "/detokenize", "/apply-template",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    uint32_t h = hash(data, size);
    static const int n_ctx[3] = {16, 256, 4096}, n_batch[3] = {4, 64, 512};
    srv.model = &models[h % FUZZ_N_VOCABS];
    srv.tpl = tpls[(h >> 2) % N_TPL];
    srv.tpl_name = tpl_names[(h >> 2) % N_TPL];
    srv.n_ctx = n_ctx[(h >> 8) % 3];
    srv.o.n_batch = n_batch[(h >> 10) % 3];

    /* http.c hands the body NUL-terminated */
    char *b = malloc(size + 1);
    memcpy(b, data, size);
    b[size] = 0;
    /* the body as the routes see it, for the checks */
    cJSON *body = utf8_valid(b, size) && !memchr(b, 0, size) ? cJSON_ParseWithOpts(b, NULL, true) : NULL;
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        http_req r = {.path = paths[i], .body = b, .len = size};
        route_request(&srv, &r);
        if (!r.n_answers == !r.g) fail(&r, r.g ? "an answer and a generation" : "no answer");
        if (r.g) check_submitted(&r, body);
        else check_answer(&r, body);
        if (r.g) gen_free(r.g);
        for (int k = 0; k < r.n_more; k++) gen_free(r.more[k]);
        free(r.more);
        free(r.ids);
        free(r.answer);
    }
    cJSON_Delete(body);
    free(b);
    return 0;
}
