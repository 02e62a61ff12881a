/* A request's life in the HTTP server: created when its headers are in,
 * fed its body (http_body.c), handed to the handler once, answered, and
 * freed when MHD reports it over; and the accessors of http.h that read
 * what it holds. */
#include "server/http_priv.h"
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static http_req *req_new(http_server *h, struct MHD_Connection *c, const char *url, const char *method) {
    http_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->path = strdup(url ? url : "/");
    if (!r->path) { free(r); return NULL; }
    r->h = h;
    r->conn = c;
    snprintf(r->method, sizeof r->method, "%s", method ? method : "");
    r->t0 = uv_hrtime();
    r->route = "other";
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, r->addr, sizeof r->addr);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, r->addr, sizeof r->addr);
    }
    if (!r->addr[0]) snprintf(r->addr, sizeof r->addr, "-");
    r->next = h->reqs;
    if (h->reqs) h->reqs->prev = r;
    h->reqs = r;
    h->n_active++;
    return r;
}

static void req_free(http_req *r) {
    http_server *h = r->h;
    if (r->prev) r->prev->next = r->next; else h->reqs = r->next;
    if (r->next) r->next->prev = r->prev;
    h->n_active--;
    h->body_inflight -= r->counted;
    if (r->pending) MHD_destroy_response(r->pending);
    for (int i = 0; i < r->n_hdr; i++) { free(r->hk[i]); free(r->hv[i]); }
    free(r->path);
    free(r->body);
    free(r->out);
    free(r);
}

void http_dispatch(http_req *r) {
    r->dispatched = true;
    r->in_handler = true;
    r->h->cfg.handler(r->h->cfg.ud, r);
    r->in_handler = false;
}

/* MHD calls this once with the headers, once per piece of body, and then
 * whenever the connection is resumed, until an answer is queued. */
enum MHD_Result http_on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    http_server *h = cls;
    http_req *r = *con_cls;
    if (!r) {   /* headers are in */
        if (!(r = req_new(h, c, url, method))) return MHD_NO;
        *con_cls = r;
        http_headers_in(h, r, c, version);
        if (r->failed) return MHD_NO;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        return http_body_upload(r, upload, n);
    }
    if (r->gone || r->failed) return MHD_NO;
    if (!r->dispatched) {
        if (!http_body_done(r)) return MHD_NO;
        http_dispatch(r);
        if (r->failed) return MHD_NO;
        return MHD_YES;
    }
    if (r->pending) return http_queue_pending(r);
    /* resumed with nothing to send yet (should not happen): wait again */
    if (!r->answered) http_suspend(r);
    return MHD_YES;
}

void http_on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c;
    http_server *h = cls;
    http_req *r = *con_cls;
    if (!r) return;
    *con_cls = NULL;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        r->gone = true;
        r->status = 499;   /* the client closed the request (nginx's code) */
    }
    http_unwatch_peer(r);
    http_call_on_close(r);
    if (h->cfg.done) h->cfg.done(h->cfg.ud, r);
    req_free(r);
}

/* ---- accessors ---------------------------------------------------------------- */
const char *http_method(const http_req *r) { return r->method; }
const char *http_path(const http_req *r) { return r->path; }
const char *http_header(const http_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}
void http_close_after(http_req *r) { r->must_close = true; }
const char *http_client_addr(const http_req *r) { return r->addr; }
uint64_t http_start_ns(const http_req *r) { return r->t0; }
int http_status(const http_req *r) { return r->status; }
void http_set_route(http_req *r, const char *route) { r->route = route; }
const char *http_route(const http_req *r) { return r->route; }
void http_set_tokens(http_req *r, int n_prompt, int n_generated) { r->n_prompt = n_prompt; r->n_gen = n_generated; }
void http_get_tokens(const http_req *r, int *n_prompt, int *n_generated) { *n_prompt = r->n_prompt; *n_generated = r->n_gen; }
void http_on_close(http_req *r, void (*fn)(void *arg), void *arg) { r->on_close = fn; r->close_arg = arg; }
