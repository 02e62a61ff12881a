/* The HTTP server's insides, shared by its files and by nothing else:
 *   http.c          the server: start (MHD's options), stop accepting, close
 *   http_loop.c     MHD driven from the libuv loop: descriptor watches, the
 *                   runs, suspension and the watch on a suspended client
 *   http_conn.c     limits on connections: the descriptor limit, the busy
 *                   idle timeouts
 *   http_request.c  a request's life: MHD's access and completion callbacks,
 *                   the accessors
 *   http_body.c     reading the body: framing, size limits, the global budget
 *   http_answer.c   complete answers and the headers every answer carries
 *                   (CORS among them)
 *   http_stream.c   streamed answers and their output buffer
 * The public interface is http.h. */
#ifndef HEARTH_HTTP_PRIV_H
#define HEARTH_HTTP_PRIV_H

#include "server/http.h"
#include <microhttpd.h>
#include <sys/select.h>

#define DRAIN_MAX ((uint64_t)256 << 20)   /* read and drop at most this much of a too-large body */
#define MAX_HEADERS 8
#define CONN_MAX (FD_SETSIZE - 64)   /* MHD is driven with select sets: descriptors below FD_SETSIZE */
#define OUT_MAX ((size_t)256 << 10)   /* a stream's unsent bytes past the socket buffers: a client that stops reading is dropped past this */

typedef struct fd_watch {
    uv_poll_t poll;
    http_server *h;
    int fd;
    int events;               /* what the handle watches now */
    http_req *peer;           /* a suspended request whose client we watch */
    bool peer_data;           /* that client sent bytes: watch hang-ups only */
} fd_watch;

/* An open connection, for its idle timeout. */
typedef struct http_conn {
    struct MHD_Connection *c;
    struct http_conn *prev, *next;
    bool busy_timeout;        /* runs on cfg.busy_timeout_s */
} http_conn;

struct http_server {
    uv_loop_t *loop;
    struct MHD_Daemon *d;
    http_config cfg;
    char *cors;
    uv_timer_t timer;
    uv_timer_t accept_timer;  /* out of descriptors: accepting again after it */
    int listen_fd;
    bool accept_paused;
    unsigned accept_pauses;   /* episodes, for the log */
    uv_check_t check;
    uv_idle_t idle;           /* active while a run is due: keeps the loop from blocking */
    bool dirty;
    fd_set rs, ws, es;        /* readiness noted since the last run */
    fd_watch **w;             /* by descriptor */
    int n_w;
    int n_active;
    size_t body_inflight;     /* bytes of request bodies held now (counted per request) */
    int port;
    int n_closing;            /* handles whose close callback is still due */
    bool closed;
    http_req *reqs;           /* every live request */
    http_conn *conns;         /* every open connection */
    unsigned n_conns;
    bool busy;                /* near the connection limit: idle timeouts are short */
    bool busy_pending;        /* a connection opened since that is not on the short one yet */
};

struct http_req {
    http_server *h;
    struct MHD_Connection *conn;
    http_req *next, *prev;
    char method[16];
    char *path;
    char addr[64];
    char *body;
    size_t len, cap;
    size_t taken;             /* len when the body was taken (http_take_body) */
    uint64_t seen;            /* body bytes received, kept or not */
    bool too_large;
    bool over_budget;         /* the global body budget was spent */
    bool must_close;          /* Connection: close on the answer */
    const char *framing_err;  /* static text, or NULL */
    size_t counted;           /* bytes of this body in h->body_inflight */
    bool dispatched;          /* the handler has seen it */
    bool in_handler;
    bool suspended;
    bool answered;
    bool gone;                /* the client left */
    bool failed;              /* no memory for the answer: close */
    struct MHD_Response *pending;
    int status;
    char *hk[MAX_HEADERS], *hv[MAX_HEADERS];
    int n_hdr;
    /* stream */
    bool streaming, out_end;
    char *out;
    size_t out_len, out_off, out_cap;
    uint64_t last_write;
    /* bookkeeping */
    uint64_t t0;
    const char *route;
    int n_prompt, n_gen;
    void (*on_close)(void *arg);
    void *close_arg;
};

/* ---- http_loop.c ----------------------------------------------------------- */
/* Sets up the loop's handles and runs MHD once (the server is started). */
void http_loop_start(http_server *h);
/* Drops every watch and closes the handles; h is freed by the last close
 * callback (h->closed must be set). */
void http_loop_close(http_server *h);
/* A run is due: it happens after this loop iteration's polling. */
void http_kick(http_server *h);
/* Re-reads MHD's fd sets and makes each handle watch what is wanted now. */
void http_sync_watchers(http_server *h);
/* Drops fd's handle, if any, before MHD closes or reuses the descriptor. */
void http_watch_drop(http_server *h, int fd);
/* Suspends r in MHD and watches its client; resume undoes both. */
void http_suspend(http_req *r);
void http_resume(http_req *r);
void http_unwatch_peer(http_req *r);
/* Calls r's on_close hook once. */
void http_call_on_close(http_req *r);

/* ---- http_conn.c ----------------------------------------------------------- */
/* The listening socket is readable: true, with accepting paused for a while,
 * when the process is out of descriptors. */
bool http_accept_out_of_fds(http_server *h, int fd);
/* MHD's connection notification: the list of open connections. */
void http_on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                        enum MHD_ConnectionNotificationCode code);
/* Between MHD's runs: every connection on the idle timeout the count asks for. */
void http_tune_timeouts(http_server *h);

/* ---- http_request.c -------------------------------------------------------- */
enum MHD_Result http_on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls);
void http_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                       enum MHD_RequestTerminationCode toe);
/* Hands r to the handler (once). */
void http_dispatch(http_req *r);

/* ---- http_body.c ----------------------------------------------------------- */
/* The headers are in: framing, the declared length, then the headers hook. */
void http_headers_in(http_server *h, http_req *r, struct MHD_Connection *c, const char *version);
/* n more body bytes from MHD: kept, dropped past the limit, or answered at once. */
enum MHD_Result http_body_upload(http_req *r, const char *data, size_t n);
/* The body is complete: false if there is no memory for an empty one. */
bool http_body_done(http_req *r);

/* ---- http_answer.c --------------------------------------------------------- */
/* Content-Type, Connection: close, CORS and the handler's headers. */
void http_answer_headers(http_req *r, struct MHD_Response *resp, const char *ctype);
/* Queues the answer held in r->pending. */
enum MHD_Result http_queue_pending(http_req *r);

#endif
