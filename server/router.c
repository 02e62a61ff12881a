/* The HTTP handler: finds the endpoint, then checks in order the method,
 * the API key, the body size, the server's state and the JSON body, and
 * answers an OpenAI error object for the first thing wrong. */
#include "server/routes.h"
#include "server/errors.h"
#include "server/utf8.h"
#include "server/model_set.h"
#include "server/offload.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>

typedef void (*route_fn)(server *s, http_req *r, const cJSON *body);

typedef struct route {
    const char *path;
    bool prefix;              /* path is a prefix: /v1/models/{id} */
    const char *methods;      /* "POST", "GET", "GET DELETE" */
    route_fn fn;
    const char *name;         /* the endpoint label in metrics and logs */
    bool open;                /* served without an API key */
    bool needs_model;         /* runs on the model it names (else the default), once loaded */
} route;

static const route routes[] = {
    { "/v1/chat/completions", false, "POST", route_chat, "chat", false, true },
    { "/chat/completions", false, "POST", route_chat, "chat", false, true },
    { "/v1/completions", false, "POST", route_completions, "completions", false, true },
    { "/completions", false, "POST", route_completions, "completions", false, true },
    { "/completion", false, "POST", route_completion, "completion", false, true },
    { "/infill", false, "POST", route_infill, "infill", false, true },
    { "/v1/embeddings", false, "POST", route_embeddings, "embeddings", false, true },
    { "/embeddings", false, "POST", route_embeddings, "embeddings", false, true },
    { "/embedding", false, "POST", route_embedding, "embedding", false, true },
    { "/tokenize", false, "POST", route_tokenize, "tokenize", false, true },
    { "/detokenize", false, "POST", route_detokenize, "detokenize", false, true },
    { "/apply-template", false, "POST", route_apply_template, "apply-template", false, true },
    { "/v1/models", false, "GET", route_models, "models", false, false },
    { "/models", false, "GET", route_models, "models", false, false },
    { "/v1/models/", true, "GET", route_model, "models", false, false },
    { "/models/", true, "GET", route_model, "models", false, false },
    { "/health", false, "GET", route_health, "health", true, false },
    { "/v1/health", false, "GET", route_health, "health", true, false },
    { "/props", false, "GET", route_props, "props", false, true },
    { "/slots", false, "GET", route_slots, "slots", false, true },
    { "/metrics", false, "GET", route_metrics, "metrics", false, true },
    { "/cache", false, "GET DELETE", route_cache, "cache", false, true },
    { "/", false, "GET", route_webui, "webui", true, false },
    { "/webui/", true, "GET", route_webui, "webui", true, false },
};

static const route *find_route(const char *path) {
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        const route *rt = &routes[i];
        if (rt->prefix ? !strncmp(path, rt->path, strlen(rt->path)) && path[strlen(rt->path)] : !strcmp(path, rt->path))
            return rt;
    }
    return NULL;
}

static bool method_ok(const route *rt, const char *m) {
    if (!strcmp(m, "HEAD")) m = "GET";
    size_t n = strlen(m);
    for (const char *p = rt->methods; *p;) {
        size_t k = strcspn(p, " ");
        if (k == n && !strncmp(p, m, n)) return true;
        p += k + (p[k] == ' ');
    }
    return false;
}

/* Same time whatever matches: no early exit on the first differing byte. */
static bool key_equal(const char *given, size_t n, const char *key) {
    size_t k = strlen(key);
    unsigned char d = n != k;
    for (size_t i = 0; i < k; i++) d |= (unsigned char)(key[i] ^ (i < n ? given[i] : 0));
    return d == 0;
}

static bool auth_ok(const server *s, const http_req *r) {
    const char *h = http_header(r, "Authorization"), *key = NULL;
    if (h && !strncasecmp(h, "Bearer ", 7)) {
        key = h + 7;
        while (*key == ' ') key++;
    } else {
        key = http_header(r, "X-Api-Key");
    }
    if (!key) return false;
    size_t n = strlen(key);
    while (n && (key[n - 1] == ' ' || key[n - 1] == '\t')) n--;
    bool ok = false;
    for (int i = 0; i < s->o.n_api_keys; i++) ok |= key_equal(key, n, s->o.api_keys[i]);
    return ok;
}

/* ollama's keep_alive: seconds as a number, or "30s", "5m", "1h"; < 0 for ever. */
static bool parse_keep_alive(const cJSON *v, double *out) {
    if (cJSON_IsNumber(v)) { *out = v->valuedouble; return isfinite(*out); }
    if (!cJSON_IsString(v)) return false;
    char *end;
    double x = strtod(v->valuestring, &end);
    if (end == v->valuestring || !isfinite(x)) return false;
    double unit = !*end ? 1 : !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600 : 0;
    if (!unit) return false;
    *out = x * unit;
    return true;
}

/* The model a request names ("model"; else the default) answers it: now,
 * or once it is loaded. Takes body. */
static void dispatch(server *s, const route *rt, http_req *r, cJSON *body) {
    model_set *set = s->set;
    model_entry *e = model_set_default(set);
    const cJSON *name = body ? cJSON_GetObjectItemCaseSensitive(body, "model") : NULL;
    if (cJSON_IsString(name) && *name->valuestring) {
        model_entry *named = model_set_find(set, name->valuestring);
        if (!named && rt->needs_model) {
            respond_error(r, 404, "model", "model_not_found", "The model '%.200s' does not exist; this server serves %s",
                          name->valuestring, model_set_names(set));
            cJSON_Delete(body);
            return;
        }
        if (named) e = named;
    }
    if (!rt->needs_model) {
        rt->fn(&e->s, r, body);
        cJSON_Delete(body);
        return;
    }
    const cJSON *ka = body ? cJSON_GetObjectItemCaseSensitive(body, "keep_alive") : NULL;
    double keep_alive = -1;
    if (ka && !cJSON_IsNull(ka) && !parse_keep_alive(ka, &keep_alive)) {
        respond_error(r, 400, "keep_alive", "invalid_value",
                      "'keep_alive' must be seconds, or a duration such as \"30s\", \"5m\" or \"1h\" (negative: for ever)");
        cJSON_Delete(body);
        return;
    }
    model_set_dispatch(set, e, rt->fn, r, body, keep_alive < 0 ? -1 : keep_alive, ka && !cJSON_IsNull(ka));
}

/* The headers a preflight may allow: the ones the browser asks for (the
 * SDKs send x-stainless-*, openai-*, authorization, content-type), when
 * they are a plain list of header names; else the ones hearth reads. */
static const char *preflight_headers(const http_req *r) {
    const char *want = http_header(r, "Access-Control-Request-Headers");
    size_t n = want ? strlen(want) : 0;
    bool plain = n > 0 && n < 1024;
    for (size_t i = 0; plain && i < n; i++) {
        unsigned char c = (unsigned char)want[i];
        plain = isalnum(c) || c == '-' || c == '_' || c == ',' || c == ' ';
    }
    return plain ? want : "Authorization, Content-Type, X-Api-Key";
}

/* A \u0000 escape: cJSON would end the string there, cutting what follows
 * silently, so it is refused instead. Backslashes occur only in strings
 * of valid JSON; an escaped backslash is skipped with its pair. */
static bool has_nul_escape(const char *b, size_t len) {
    for (const char *p = memchr(b, '\\', len); p; p = memchr(p, '\\', len - (size_t)(p - b))) {
        size_t left = len - (size_t)(p - b);
        if (left >= 6 && p[1] == 'u' && !memcmp(p + 2, "0000", 4)) return true;
        p += left >= 2 ? 2 : 1;
        if (p >= b + len) break;
    }
    return false;
}

/* name (host[:port], [v6]:port) without the port, lowercased, in out; false if too long */
static bool host_name(const char *h, char *out, size_t cap) {
    size_t n;
    if (h[0] == '[') { const char *e = strchr(h, ']'); n = e ? (size_t)(e - h) + 1 : strlen(h); }
    else n = strcspn(h, ":");
    if (n == 0 || n >= cap) return false;
    for (size_t i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)h[i]);
    out[n] = 0;
    return true;
}

static bool in_list(const char *name, const char *list) {
    for (const char *p = list; p && *p;) {
        p += strspn(p, ", ");
        size_t k = strcspn(p, ", ");
        if (k && strlen(name) == k && !strncasecmp(p, name, k)) return true;
        p += k;
    }
    return false;
}

/* DNS rebinding: a page whose name resolves to 127.0.0.1 reaches us with
 * its own name as Host. A server on loopback or one address answers only
 * that address, local names and --allowed-hosts; one on 0.0.0.0 / :: any
 * name unless --allowed-hosts narrows it. No Host (HTTP/1.0) passes. */
static bool host_ok(const server *s, const http_req *r) {
    const char *h = http_header(r, "Host"), *allow = s->o.allowed_hosts;
    if (!h || (allow && !strcmp(allow, "*"))) return true;
    const char *listen = s->o.host && *s->o.host ? s->o.host : "127.0.0.1";
    bool wildcard = !strcmp(listen, "0.0.0.0") || !strcmp(listen, "::") || !strcmp(listen, "[::]");
    if (wildcard && !allow) return true;
    char name[256], lhost[260];
    if (!host_name(h, name, sizeof name)) return false;
    snprintf(lhost, sizeof lhost, strchr(listen, ':') && listen[0] != '[' ? "[%s]" : "%s", listen);
    const char *local[] = { "localhost", "127.0.0.1", "[::1]", lhost };
    for (size_t i = 0; i < sizeof local / sizeof *local; i++) if (!strcasecmp(name, local[i])) return true;
    size_t n = strlen(name);
    if (n > 10 && !strcmp(name + n - 10, ".localhost")) return true;   /* RFC 6761: always loopback */
    return in_list(name, allow);
}

/* A JSON body must say so: a page may POST text/plain to a local server
 * without a CORS preflight; application/json needs one. */
static bool json_type_ok(const http_req *r) {
    const char *ct = http_header(r, "Content-Type");
    if (!ct) return false;
    while (*ct == ' ') ct++;
    size_t n = strcspn(ct, "; \t");
    return n == 16 && !strncasecmp(ct, "application/json", 16);
}

/* Everything that needs no body, in order; answers and returns false on the
 * first thing wrong. Run from the headers hook (so a refused body is never
 * read) and again with the body (route_request), where it passes. */
static bool precheck(server *s, http_req *r, const route *rt) {
    const char *m = http_method(r), *path = http_path(r);
    const char *why = http_framing_error(r);
    if (why) {
        http_close_after(r);
        respond_error(r, 400, NULL, "bad_request", "Malformed request: %s", why);
        return false;
    }
    if (!host_ok(s, r)) {
        respond_error(r, 403, NULL, "host_not_allowed", "Host '%.80s' is not allowed (see --allowed-hosts)",
                      http_header(r, "Host"));
        return false;
    }
    if (!strcmp(m, "OPTIONS")) {   /* CORS preflight, on every path */
        if (s->o.cors_origin) {    /* else no Allow-*: a page elsewhere must not drive this server */
            http_add_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
            http_add_header(r, "Access-Control-Allow-Headers", preflight_headers(r));
            http_add_header(r, "Access-Control-Max-Age", "86400");
        }
        http_respond(r, 204, NULL, "", 0);
        return false;
    }
    if (!rt) {
        respond_error(r, 404, NULL, "not_found", "Not found: %.200s", path);
        return false;
    }
    if (!method_ok(rt, m)) {
        char allow[32];
        snprintf(allow, sizeof allow, "%s", rt->methods);
        for (char *p = allow; *p; p++) if (*p == ' ') *p = ',';
        http_add_header(r, "Allow", allow);
        respond_error(r, 405, NULL, "method_not_allowed", "%.16s is not allowed on %.200s (use %s)", m, path, rt->methods);
        return false;
    }
    if (!rt->open && s->o.n_api_keys > 0 && !auth_ok(s, r)) {
        http_add_header(r, "WWW-Authenticate", "Bearer");
        respond_error(r, 401, NULL, "invalid_api_key", "Invalid or missing API key (send Authorization: Bearer KEY)");
        return false;
    }
    if (!strcmp(m, "POST") && !json_type_ok(r) && !http_body_too_large(r)) {   /* too large: 413 says more */
        respond_error(r, 415, NULL, "unsupported_media_type", "The request body must be sent as Content-Type: application/json");
        return false;
    }
    if (http_body_over_budget(r)) {
        http_add_header(r, "Retry-After", "1");
        respond_error(r, 503, NULL, "server_busy", "Too many request bodies are being received at once; retry later");
        return false;
    }
    return true;
}

/* ---- the body, parsed off the loop when it is large ------------------------------- */

/* Each JSON value costs a cJSON node (64 bytes) on top of its text: a body
 * of "1,1,1,..." would cost 32 times its size. The nodes are counted before
 * the parse so one request's tree stays under JSON_MAX_VALUES x 64 bytes. */
#define JSON_MAX_VALUES ((size_t)2 << 20)

enum { PARSE_OK, PARSE_UTF8, PARSE_NUL, PARSE_JSON, PARSE_NOT_OBJECT, PARSE_TOO_MANY };

/* At least the number of values in b (commas and openings outside strings, plus one). */
static size_t json_values_bound(const char *b, size_t len) {
    size_t n = 1;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char c = b[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == ',' || c == '[' || c == '{') {
            n++;
        }
    }
    return n;
}

/* The whole body checked and parsed; no server state is touched, so it runs on any thread. */
static int parse_body(const char *b, size_t len, cJSON **out, size_t *at) {
    *out = NULL;
    if (!utf8_valid(b, len) || memchr(b, 0, len)) return PARSE_UTF8;
    if (has_nul_escape(b, len)) return PARSE_NUL;
    if (json_values_bound(b, len) > JSON_MAX_VALUES) return PARSE_TOO_MANY;
    const char *end = NULL;
    cJSON *body = cJSON_ParseWithOpts(b, &end, true);
    if (!body) {
        *at = end && end >= b ? (size_t)(end - b) : 0;
        return PARSE_JSON;
    }
    if (!cJSON_IsObject(body)) { cJSON_Delete(body); return PARSE_NOT_OBJECT; }
    *out = body;
    return PARSE_OK;
}

typedef struct parse_job {
    uv_work_t work;
    server *s;
    http_req *r;              /* NULL once the client left */
    const route *rt;
    char *b;                  /* the body, taken from the request (owned) */
    size_t len, at;
    cJSON *body;
    int rc;
} parse_job;

/* On the loop, parsed: the answer for a bad body, or the route. */
static void finish_parse(parse_job *j) {
    http_req *r = j->r;
    switch (j->rc) {
    case PARSE_UTF8: respond_error(r, 400, NULL, "invalid_utf8", "The request body is not valid UTF-8 JSON"); return;
    case PARSE_NUL:
        respond_error(r, 400, NULL, "invalid_json", "The request body holds \\u0000: strings may not contain NUL");
        return;
    case PARSE_JSON:
        respond_error(r, 400, NULL, "invalid_json", "The request body is not valid JSON (at byte %zu)", j->at);
        return;
    case PARSE_NOT_OBJECT: respond_error(r, 400, NULL, "invalid_json", "The request body must be a JSON object"); return;
    case PARSE_TOO_MANY:
        respond_error(r, 413, NULL, "request_too_large", "The request body holds more than %zu JSON values", JSON_MAX_VALUES);
        return;
    default: break;
    }
    if (j->s->stopping) {
        respond_error(r, 503, NULL, "shutting_down", "The server is shutting down");
        cJSON_Delete(j->body);
    } else {
        dispatch(j->s, j->rt, r, j->body);   /* takes the body */
    }
}

static void parse_client_left(void *arg) { ((parse_job *)arg)->r = NULL; }

static void parse_work(uv_work_t *w) {
    parse_job *j = w->data;
    j->rc = parse_body(j->b, j->len, &j->body, &j->at);
}

static void parse_done(uv_work_t *w, int status) {
    parse_job *j = w->data;
    free(j->b);
    j->b = NULL;
    if (j->r) http_on_close(j->r, NULL, NULL);
    if (!j->r || status) {   /* the client left, or the work was cancelled at shutdown */
        if (j->r) respond_error(j->r, 503, NULL, "shutting_down", "The server is shutting down");
        cJSON_Delete(j->body);
    } else {
        finish_parse(j);
    }
    free(j);
}

/* A large body: the UTF-8 check and the JSON parse run on libuv's worker
 * threads, so the loop goes on serving everyone else meanwhile; the route
 * runs on the loop when they are done. false: do it here instead. */
static bool parse_off_loop(server *s, http_req *r, const route *rt) {
    parse_job *j = calloc(1, sizeof *j);
    if (!j) return false;
    j->s = s; j->r = r; j->rt = rt;
    j->b = http_take_body(r, &j->len);
    j->work.data = j;
    if (!j->b || offload_queue(s->loop, &j->work, parse_work, parse_done, true)) {
        if (j->b) http_give_body(r, j->b, j->len);
        free(j);
        return false;
    }
    http_defer(r);
    http_on_close(r, parse_client_left, j);
    return true;
}

void route_headers(void *ud, http_req *r) {
    server *s = ud;
    const route *rt = find_route(http_path(r));
    http_set_route(r, rt ? rt->name : "other");
    precheck(s, r, rt);
}

void route_request(void *ud, http_req *r) {
    server *s = ud;
    const char *m = http_method(r);
    const route *rt = find_route(http_path(r));
    http_set_route(r, rt ? rt->name : "other");
    if (!precheck(s, r, rt)) return;
    if (http_body_too_large(r)) {
        respond_error(r, 413, NULL, "request_too_large", "The request body is larger than %zu bytes", s->o.max_body);
        return;
    }
    if (s->stopping) {
        respond_error(r, 503, NULL, "shutting_down", "The server is shutting down");
        return;
    }
    if (strcmp(m, "POST")) {
        dispatch(s, rt, r, NULL);
        return;
    }
    size_t len;
    http_body(r, &len);
    if (len >= OFFLOAD_LARGE_BYTES && s->loop && parse_off_loop(s, r, rt)) return;
    parse_job j = { .s = s, .r = r, .rt = rt };
    j.b = (char *)http_body(r, &j.len);
    j.rc = parse_body(j.b, j.len, &j.body, &j.at);
    j.b = NULL;   /* still the request's */
    finish_parse(&j);
}
