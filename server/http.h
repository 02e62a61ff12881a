/* HTTP through libmicrohttpd, driven from a libuv loop.
 *
 * MHD runs with no threads of its own: its descriptors are watched with
 * uv_poll and its timeout with a uv_timer, and MHD_run_from_select is called
 * from the loop. A request reaches the handler once, with its whole body.
 * The handler answers at once (http_respond), later (http_defer, then
 * http_respond from any loop callback), or as a stream (http_stream_*).
 * A request waiting for data is suspended in MHD; the loop then watches its
 * socket itself, so a client that leaves is noticed at once (on_close). */
#ifndef HEARTH_HTTP_H
#define HEARTH_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct http_server http_server;
typedef struct http_req http_req;

/* Called once per request, when its body is complete (or the body was over
 * the limit: http_body_too_large, or over the global budget:
 * http_body_over_budget). The headers hook (http_config.headers) is called
 * before, once the headers are in and before any body is read: if it
 * answers, the body is never read and the connection closes after the
 * answer (authentication, Host, Content-Type and framing are checked there). */
typedef void (*http_handler_fn)(void *ud, http_req *r);
/* Called when a request is over (answered, or the client left): logging. */
typedef void (*http_done_fn)(void *ud, http_req *r);

typedef struct http_config {
    const char *host;         /* numeric address or name; default 127.0.0.1 */
    int port;                 /* 0: an ephemeral port (see http_port) */
    size_t max_body;          /* bytes; larger bodies get the handler with too_large set */
    size_t body_budget;       /* bytes of request bodies held at once, all requests together
                                 (0: 4 x max_body); past it the handler sees over_budget */
    unsigned timeout_s;       /* close a connection idle this long (0: 300); MHD does not time
                                 out a suspended one, so a request waiting for tokens is not idle */
    unsigned max_conns;       /* connections open at once (0: 960, the most select sets allow) */
    unsigned per_client;      /* connections one client address may hold (0: no limit) */
    unsigned busy_timeout_s;  /* idle timeout once 3/4 of max_conns are open, until under half
                                 again (0: timeout_s), so idle connections cannot crowd others out */
    const char *cors_origin;  /* Access-Control-Allow-Origin on every answer, or NULL */
    http_handler_fn handler;
    http_handler_fn headers;  /* or NULL: see above */
    http_done_fn done;
    void *ud;
} http_config;

http_server *http_start(uv_loop_t *loop, const http_config *c, char *err, size_t errlen);
int http_port(const http_server *h);
/* Stops accepting connections; requests in progress go on. */
void http_stop_accepting(http_server *h);
/* Requests received and not yet over. */
int http_active(const http_server *h);
/* Ends every connection and frees the server; run the loop afterwards so
 * the handles finish closing. */
void http_close(http_server *h);

/* ---- the request ---------------------------------------------------------- */
const char *http_method(const http_req *r);
const char *http_path(const http_req *r);
const char *http_header(const http_req *r, const char *name);   /* NULL if absent */
const char *http_body(const http_req *r, size_t *len);          /* NUL-terminated */
/* The body's buffer, now the caller's (free it), NUL-terminated; the
 * request has none after. http_give_body hands it back. */
char *http_take_body(http_req *r, size_t *len);
void http_give_body(http_req *r, char *body, size_t len);
/* The body's length as received, also once taken. */
size_t http_body_size(const http_req *r);
bool http_body_too_large(const http_req *r);
bool http_body_over_budget(const http_req *r);
/* Why the request's framing is refused (Content-Length with Transfer-Encoding,
 * differing Content-Lengths, an unknown Transfer-Encoding, HTTP/1.1 without
 * exactly one Host), or NULL. Answer 400: the connection is closed after. */
const char *http_framing_error(const http_req *r);
/* The answer to r ends its connection (Connection: close). */
void http_close_after(http_req *r);
const char *http_client_addr(const http_req *r);
uint64_t http_start_ns(const http_req *r);                      /* uv_hrtime at arrival */
int http_status(const http_req *r);                            /* as answered; 499: client left */

/* What the access log and metrics report about the request. */
void http_set_route(http_req *r, const char *route);           /* static string */
const char *http_route(const http_req *r);
void http_set_tokens(http_req *r, int n_prompt, int n_generated);
void http_get_tokens(const http_req *r, int *n_prompt, int *n_generated);

/* Called once when the request is over for whatever reason, or as soon as
 * the client is seen gone; r must not be used after it. */
void http_on_close(http_req *r, void (*fn)(void *arg), void *arg);

/* ---- answers ---------------------------------------------------------------- */
/* A header for the next answer (copied; at most 8). */
void http_add_header(http_req *r, const char *name, const char *value);
/* A complete answer (body copied). In the handler or after http_defer. */
void http_respond(http_req *r, int status, const char *content_type, const char *body, size_t len);
/* The handler answers later: suspends the connection and watches the client. */
void http_defer(http_req *r);
/* A streamed answer of unknown length (chunked), started in the handler. */
void http_stream_start(http_req *r, int status, const char *content_type);
void http_stream_write(http_req *r, const char *data, size_t len);
void http_stream_end(http_req *r);
/* Nanoseconds (uv_hrtime) of the last stream write. */
uint64_t http_stream_last_write(const http_req *r);

#endif
