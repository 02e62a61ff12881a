/* Complete answers in the HTTP server: the headers every answer carries
 * (Content-Type, Connection: close where the request asked for it, the
 * CORS origin the server was started with, the handler's own), and an
 * answer queued at once from the handler or later from a resumed
 * connection. */
#include "server/http_priv.h"
#include <stdlib.h>
#include <string.h>

void http_answer_headers(http_req *r, struct MHD_Response *resp, const char *ctype) {
    if (ctype) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (r->must_close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (r->h->cors) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, r->h->cors);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    for (int i = 0; i < r->n_hdr; i++) MHD_add_response_header(resp, r->hk[i], r->hv[i]);
}

enum MHD_Result http_queue_pending(http_req *r) {
    struct MHD_Response *resp = r->pending;
    r->pending = NULL;
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ok;
}

void http_add_header(http_req *r, const char *name, const char *value) {
    if (r->n_hdr >= MAX_HEADERS) return;
    char *k = strdup(name), *v = strdup(value);
    if (!k || !v) { free(k); free(v); return; }
    r->hk[r->n_hdr] = k;
    r->hv[r->n_hdr++] = v;
}

void http_respond(http_req *r, int status, const char *ctype, const char *body, size_t len) {
    if (r->answered || r->gone) return;
    r->answered = true;
    r->status = status;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) { r->failed = true; http_resume(r); return; }
    http_answer_headers(r, resp, ctype);
    r->pending = resp;
    if (r->in_handler && !r->suspended) {
        if (http_queue_pending(r) != MHD_YES) r->failed = true;
    } else {
        http_resume(r);
    }
}

void http_defer(http_req *r) {
    if (!r->answered && !r->gone) http_suspend(r);
}
