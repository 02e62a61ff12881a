/* Streamed answers in the HTTP server (chunked, of unknown length): the
 * writes go to the request's output buffer, MHD's content reader takes
 * from it and suspends the connection while it is empty; a client that
 * stops reading is dropped once OUT_MAX bytes wait for it. */
#include "server/http_priv.h"
#include <stdlib.h>
#include <string.h>

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    http_req *r = cls;
    if (r->gone) return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t avail = r->out_len - r->out_off;
    if (avail) {
        size_t n = avail < max ? avail : max;
        memcpy(buf, r->out + r->out_off, n);
        r->out_off += n;
        if (r->out_off == r->out_len) r->out_off = r->out_len = 0;
        return (ssize_t)n;
    }
    if (r->out_end) return MHD_CONTENT_READER_END_OF_STREAM;
    http_suspend(r);   /* resumed by the next write */
    return 0;
}

void http_stream_start(http_req *r, int status, const char *ctype) {
    if (r->answered || r->gone) return;
    r->answered = true;
    r->status = status;
    r->streaming = true;
    r->last_write = uv_hrtime();
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, r, NULL);
    if (!resp) { r->failed = true; return; }
    http_answer_headers(r, resp, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    if (!r->in_handler || r->suspended) {   /* started later (a body parsed off the loop): queued when resumed */
        r->pending = resp;
        http_resume(r);
        return;
    }
    if (MHD_queue_response(r->conn, (unsigned)status, resp) != MHD_YES) r->failed = true;
    MHD_destroy_response(resp);
}

void http_stream_write(http_req *r, const char *data, size_t len) {
    if (!r->streaming || r->out_end || r->gone || !len) return;
    if (r->out_off && r->out_off * 2 >= r->out_len) {   /* reclaim what was sent */
        memmove(r->out, r->out + r->out_off, r->out_len - r->out_off);
        r->out_len -= r->out_off;
        r->out_off = 0;
    }
    if (r->out_len - r->out_off + len > OUT_MAX) {   /* the client stopped reading: drop it, do not hold more */
        r->gone = true;
        http_resume(r);
        return;
    }
    if (r->out_len + len > r->out_cap) {
        size_t cap = r->out_cap ? r->out_cap : 4096;
        while (cap < r->out_len + len) cap *= 2;
        char *nb = realloc(r->out, cap);
        if (!nb) { r->gone = true; http_resume(r); return; }   /* cannot keep up: drop the client */
        r->out = nb;
        r->out_cap = cap;
    }
    memcpy(r->out + r->out_len, data, len);
    r->out_len += len;
    r->last_write = uv_hrtime();
    http_resume(r);
}

void http_stream_end(http_req *r) {
    if (!r->streaming) return;
    r->out_end = true;
    http_resume(r);
}

uint64_t http_stream_last_write(const http_req *r) { return r->last_write; }
