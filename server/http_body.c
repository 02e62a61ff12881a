/* Reading a request's body in the HTTP server: the framing a proxy in
 * front may read differently is refused; a declared length over the limit
 * is answered at once or read and dropped; every body held counts against
 * one budget for all requests together; the headers hook may answer
 * before any of it is read. The body's accessors of http.h are here. */
#include "server/http_priv.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Counts n more body bytes of r against the global budget; false past it. */
static bool budget_take(http_req *r, size_t upto) {
    http_server *h = r->h;
    if (upto <= r->counted) return true;
    size_t more = upto - r->counted;
    if (h->body_inflight + more > h->cfg.body_budget) return false;
    h->body_inflight += more;
    r->counted = upto;
    return true;
}

static bool body_append(http_req *r, const char *data, size_t n) {
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1) cap *= 2;
        char *nb = realloc(r->body, cap);
        if (!nb) return false;
        r->body = nb;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = 0;
    return true;
}

typedef struct { int n_cl, n_host, n_te; const char *cl; bool cl_differ; } hdr_count;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    hdr_count *k = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (k->n_cl++ && value && k->cl && strcmp(value, k->cl)) k->cl_differ = true;
        if (!k->cl) k->cl = value;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_HOST)) {
        k->n_host++;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        k->n_te++;
    }
    return MHD_YES;
}

/* The request-smuggling shapes a proxy in front may read differently from
 * us: refused whatever libmicrohttpd would make of them. */
static const char *framing_error(struct MHD_Connection *c, const char *version) {
    hdr_count k = { 0 };
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &k);
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (k.n_te && k.n_cl) return "Content-Length together with Transfer-Encoding";
    if (k.n_te > 1 || (te && strcasecmp(te, "chunked"))) return "a Transfer-Encoding other than chunked";
    if (k.cl_differ) return "differing Content-Length headers";
    bool http11 = version && !strcmp(version, MHD_HTTP_VERSION_1_1);
    if (k.n_host > 1) return "more than one Host header";
    if (http11 && !k.n_host) return "no Host header (HTTP/1.1 requires one)";
    return NULL;
}

/* The headers are in: framing, the budget for a declared body, then the
 * headers hook, which may answer before any body is read. */
void http_headers_in(http_server *h, http_req *r, struct MHD_Connection *c, const char *version) {
    r->framing_err = framing_error(c, version);
    if (r->framing_err) r->must_close = true;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    bool body = te != NULL;
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        bool bad = errno || end == cl;
        body = bad || n > 0;
        if (bad || n > h->cfg.max_body) {
            r->too_large = true;
            /* answer now when the client waits for "100 Continue" or
             * the body is not worth reading; else read and drop it, so
             * the client is not cut off mid-send and sees the answer */
            const char *ex = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
            if ((ex && !strcasecmp(ex, "100-continue")) || bad || n > DRAIN_MAX) { r->must_close = true; http_dispatch(r); return; }
        } else if (!budget_take(r, (size_t)n)) {
            r->over_budget = true;
        }
    }
    if (h->cfg.headers) {
        bool was = r->must_close;
        r->must_close = was || body;   /* an answer now leaves the body unread: the connection ends */
        r->in_handler = true;
        h->cfg.headers(h->cfg.ud, r);
        r->in_handler = false;
        if (r->answered || r->failed) {
            r->dispatched = true;   /* the body, if any, is not read */
            return;
        }
        r->must_close = was;
    }
    if (r->over_budget || r->framing_err) { r->must_close = true; http_dispatch(r); }
}

enum MHD_Result http_body_upload(http_req *r, const char *data, size_t n) {
    http_server *h = r->h;
    if (r->dispatched) return MHD_YES;
    r->seen += n;
    if (!r->too_large && r->len + n > h->cfg.max_body) {
        r->too_large = true;
        free(r->body);
        r->body = NULL;
        r->len = r->cap = 0;
    }
    if (r->too_large) {
        if (r->seen > DRAIN_MAX) http_dispatch(r);
        return MHD_YES;
    }
    if (!budget_take(r, r->len + n)) {   /* a body without a length, past the budget: answer now */
        r->over_budget = r->must_close = true;
        free(r->body);
        r->body = NULL;
        r->len = r->cap = 0;
        http_dispatch(r);
        return MHD_YES;
    }
    if (!body_append(r, data, n)) return MHD_NO;
    return MHD_YES;
}

bool http_body_done(http_req *r) { return r->body || body_append(r, "", 0); }

/* ---- accessors ---------------------------------------------------------------- */
const char *http_body(const http_req *r, size_t *len) {
    if (len) *len = r->len;
    return r->body ? r->body : "";
}
char *http_take_body(http_req *r, size_t *len) {
    char *b = r->body;
    *len = r->taken = r->len;
    r->body = NULL;
    r->len = r->cap = 0;
    return b;
}
void http_give_body(http_req *r, char *body, size_t len) {
    free(r->body);
    r->body = body;
    r->len = r->cap = len;
}
size_t http_body_size(const http_req *r) { return r->body ? r->len : r->taken; }
bool http_body_too_large(const http_req *r) { return r->too_large; }
bool http_body_over_budget(const http_req *r) { return r->over_budget; }
const char *http_framing_error(const http_req *r) { return r->framing_err; }
