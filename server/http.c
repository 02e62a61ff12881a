/* HTTP through libmicrohttpd, driven from the libuv loop (see http.h).
 *
 * One table maps each descriptor to one uv_poll handle (libuv allows only
 * one per descriptor). A descriptor is watched for what MHD asked in its
 * last fd sets, or, for the socket of a suspended request, for the client
 * hanging up. Poll callbacks only note readiness; a check handle (after
 * each poll phase) runs MHD once over what was noted, then re-reads MHD's
 * fd sets and timeout. MHD's connection notifications drop a descriptor's
 * handle before MHD closes it, so a reused descriptor never inherits a
 * stale registration. */
#include "server/http.h"
#include "server/log_out.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

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

static void drive(http_server *h);
static void on_idle(uv_idle_t *i) { (void)i; }

/* A run is due: the check handle does it after this loop iteration's polling. */
static void kick(http_server *h) {
    if (h->dirty || h->closed) return;
    h->dirty = true;
    uv_idle_start(&h->idle, on_idle);
}

/* ---- the descriptor table ----------------------------------------------- */
static void on_handle_closed(uv_handle_t *hd) {
    fd_watch *w = hd->data;
    http_server *h = w->h;
    free(w);
    if (--h->n_closing == 0 && h->closed) free(h);
}

static void watch_drop(http_server *h, int fd) {
    if (fd < 0 || fd >= h->n_w || !h->w[fd]) return;
    fd_watch *w = h->w[fd];
    h->w[fd] = NULL;
    if (fd < FD_SETSIZE) { FD_CLR(fd, &h->rs); FD_CLR(fd, &h->ws); FD_CLR(fd, &h->es); }
    uv_poll_stop(&w->poll);
    h->n_closing++;
    uv_close((uv_handle_t *)&w->poll, on_handle_closed);
}

static void on_poll(uv_poll_t *p, int status, int events);
static void tune_timeouts(http_server *h);

static fd_watch *watch_get(http_server *h, int fd) {
    if (fd < 0) return NULL;
    if (fd >= h->n_w) {
        int n = h->n_w ? h->n_w : 64;
        while (n <= fd) n *= 2;
        fd_watch **nw = realloc(h->w, sizeof *nw * (size_t)n);
        if (!nw) return NULL;
        memset(nw + h->n_w, 0, sizeof *nw * (size_t)(n - h->n_w));
        h->w = nw;
        h->n_w = n;
    }
    if (h->w[fd]) return h->w[fd];
    fd_watch *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    if (uv_poll_init(h->loop, &w->poll, fd)) { free(w); return NULL; }
    w->poll.data = w;
    w->h = h;
    w->fd = fd;
    h->w[fd] = w;
    return w;
}

/* Re-read MHD's fd sets and make each handle watch what is wanted now. */
static void sync_watchers(http_server *h) {
    fd_set rs, ws, es;
    FD_ZERO(&rs); FD_ZERO(&ws); FD_ZERO(&es);
    MHD_socket max = -1;
    if (h->d) MHD_get_fdset2(h->d, &rs, &ws, &es, &max, FD_SETSIZE);
    int top = max + 1 > h->n_w ? max + 1 : h->n_w;
    for (int fd = 0; fd < top; fd++) {
        fd_watch *w = fd < h->n_w ? h->w[fd] : NULL;
        int ev = 0;
        if (fd <= max && FD_ISSET(fd, &rs)) ev |= UV_READABLE;
        if (fd <= max && FD_ISSET(fd, &ws)) ev |= UV_WRITABLE;
        if (w && w->peer) ev |= w->peer_data ? UV_DISCONNECT : UV_READABLE | UV_DISCONNECT;
        if (fd == h->listen_fd && h->accept_paused) ev &= ~UV_READABLE;
        if (!ev) { if (w) watch_drop(h, fd); continue; }
        if (!w && !(w = watch_get(h, fd))) continue;   /* no memory: MHD's timeout still runs it */
        if (w->events != ev) {
            uv_poll_start(&w->poll, ev, on_poll);
            w->events = ev;
        }
    }
}

/* ---- suspension and the client watch ------------------------------------- */
static int conn_fd(const http_req *r) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

static void suspend(http_req *r) {
    if (r->suspended) return;
    MHD_suspend_connection(r->conn);
    r->suspended = true;
    fd_watch *w = watch_get(r->h, conn_fd(r));
    if (w) { w->peer = r; w->peer_data = false; }
    kick(r->h);
}

static void unwatch_peer(http_req *r) {
    http_server *h = r->h;
    int fd = conn_fd(r);
    if (fd >= 0 && fd < h->n_w && h->w[fd] && h->w[fd]->peer == r) h->w[fd]->peer = NULL;
}

static void resume(http_req *r) {
    if (!r->suspended) return;
    unwatch_peer(r);
    r->suspended = false;
    MHD_resume_connection(r->conn);
    kick(r->h);
}

static void call_on_close(http_req *r) {
    void (*fn)(void *) = r->on_close;
    r->on_close = NULL;
    if (fn) fn(r->close_arg);
}

/* The client of a suspended request left: tell the owner now, then let MHD
 * find the dead socket and end the request. */
static void peer_gone(http_req *r) {
    r->gone = true;
    call_on_close(r);
    resume(r);
}

static bool peer_closed(int fd) {
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

/* At the descriptor limit every accept fails at once and the listening
 * socket stays readable: the loop would spin on it. Probe with a dup. */
static bool out_of_fds(int fd) {
    int t = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (t >= 0) { close(t); return false; }
    return errno == EMFILE || errno == ENFILE;
}

static void on_accept_timer(uv_timer_t *t) {
    http_server *h = t->data;
    h->accept_paused = false;   /* the next readiness probes again */
    sync_watchers(h);
}

/* Stop watching the listening socket for a while; connections already open
 * are served meanwhile. Logged once per episode, not per attempt. */
static void pause_accept(http_server *h) {
    if (!h->accept_paused && !h->accept_pauses++)
        log_out_printf("hearth: out of file descriptors (raise ulimit -n): not accepting new connections "
                       "until some close; open ones are served");
    h->accept_paused = true;
    sync_watchers(h);
    uv_timer_start(&h->accept_timer, on_accept_timer, 250, 0);
}

static void on_poll(uv_poll_t *p, int status, int events) {
    fd_watch *w = p->data;
    http_server *h = w->h;
    if (w->fd == h->listen_fd && (events & UV_READABLE) && out_of_fds(w->fd)) {
        pause_accept(h);
        return;
    }
    if (w->peer) {
        http_req *r = w->peer;
        if (status < 0 || (events & UV_DISCONNECT) || ((events & UV_READABLE) && peer_closed(w->fd)))
            peer_gone(r);
        else if (events & UV_READABLE)
            w->peer_data = true;   /* e.g. a pipelined request: leave it for MHD */
        kick(h);
        return;
    }
    if (status < 0) events = w->events & (UV_READABLE | UV_WRITABLE);   /* MHD finds the error */
    if (w->fd < FD_SETSIZE) {
        if (events & (UV_READABLE | UV_DISCONNECT)) FD_SET(w->fd, &h->rs);
        if (events & UV_WRITABLE) FD_SET(w->fd, &h->ws);
    }
    kick(h);
}

/* ---- running MHD ---------------------------------------------------------- */
static void on_timer(uv_timer_t *t) { drive(t->data); }

static void on_check(uv_check_t *c) {
    http_server *h = c->data;
    if (h->dirty) drive(h);
}

static void drive(http_server *h) {
    h->dirty = false;
    uv_idle_stop(&h->idle);
    if (!h->d) return;
    fd_set rs = h->rs, ws = h->ws, es = h->es;
    FD_ZERO(&h->rs); FD_ZERO(&h->ws); FD_ZERO(&h->es);
    MHD_run_from_select(h->d, &rs, &ws, &es);
    tune_timeouts(h);
    sync_watchers(h);
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(h->d, &ms) == MHD_YES)
        uv_timer_start(&h->timer, on_timer, ms > 3600000 ? 3600000 : (uint64_t)ms, 0);
    else
        uv_timer_stop(&h->timer);
}

/* ---- requests ---------------------------------------------------------------- */
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

static void dispatch(http_req *r) {
    r->dispatched = true;
    r->in_handler = true;
    r->h->cfg.handler(r->h->cfg.ud, r);
    r->in_handler = false;
}

static enum MHD_Result queue_pending(http_req *r) {
    struct MHD_Response *resp = r->pending;
    r->pending = NULL;
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ok;
}

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
static void headers_in(http_server *h, http_req *r, struct MHD_Connection *c, const char *version) {
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
            if ((ex && !strcasecmp(ex, "100-continue")) || bad || n > DRAIN_MAX) { r->must_close = true; dispatch(r); return; }
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
    if (r->over_budget || r->framing_err) { r->must_close = true; dispatch(r); }
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    http_server *h = cls;
    http_req *r = *con_cls;
    if (!r) {   /* headers are in */
        if (!(r = req_new(h, c, url, method))) return MHD_NO;
        *con_cls = r;
        headers_in(h, r, c, version);
        if (r->failed) return MHD_NO;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->dispatched) return MHD_YES;
        r->seen += n;
        if (!r->too_large && r->len + n > h->cfg.max_body) {
            r->too_large = true;
            free(r->body);
            r->body = NULL;
            r->len = r->cap = 0;
        }
        if (r->too_large) {
            if (r->seen > DRAIN_MAX) dispatch(r);
            return MHD_YES;
        }
        if (!budget_take(r, r->len + n)) {   /* a body without a length, past the budget: answer now */
            r->over_budget = r->must_close = true;
            free(r->body);
            r->body = NULL;
            r->len = r->cap = 0;
            dispatch(r);
            return MHD_YES;
        }
        if (!body_append(r, upload, n)) return MHD_NO;
        return MHD_YES;
    }
    if (r->gone || r->failed) return MHD_NO;
    if (!r->dispatched) {
        if (!r->body && !body_append(r, "", 0)) return MHD_NO;
        dispatch(r);
        if (r->failed) return MHD_NO;
        return MHD_YES;
    }
    if (r->pending) return queue_pending(r);
    /* resumed with nothing to send yet (should not happen): wait again */
    if (!r->answered) suspend(r);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c;
    http_server *h = cls;
    http_req *r = *con_cls;
    if (!r) return;
    *con_cls = NULL;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        r->gone = true;
        r->status = 499;   /* the client closed the request (nginx's code) */
    }
    unwatch_peer(r);
    call_on_close(r);
    if (h->cfg.done) h->cfg.done(h->cfg.ud, r);
    req_free(r);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
    http_server *h = cls;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) watch_drop(h, (int)ci->connect_fd);   /* new or closing: any handle on it is stale */
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        http_conn *k = calloc(1, sizeof *k);   /* no memory: it keeps the normal timeout */
        if (k) {
            *k = (http_conn){ .c = c, .next = h->conns };
            if (h->conns) h->conns->prev = k;
            h->conns = k;
        }
        *socket_ctx = k;
        h->n_conns++;
        h->busy_pending |= h->busy;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        http_conn *k = *socket_ctx;
        if (k) {
            if (k->prev) k->prev->next = k->next;
            else h->conns = k->next;
            if (k->next) k->next->prev = k->prev;
            free(k);
            *socket_ctx = NULL;
        }
        h->n_conns--;
    }
}

/* Near the connection limit every connection gets the shorter idle
 * timeout (a suspended one, waiting for tokens, is never idle), so that
 * idle ones cannot keep new clients out; under half the limit, the normal
 * one again. Run between MHD's runs, where its connection lists are whole. */
static void tune_timeouts(http_server *h) {
    unsigned lim = h->cfg.max_conns, normal = h->cfg.timeout_s, fast = h->cfg.busy_timeout_s;
    if (fast >= normal) return;
    bool busy = h->busy ? h->n_conns > lim / 2 : h->n_conns >= lim - lim / 4;
    if (busy == h->busy && !(busy && h->busy_pending)) return;
    if (busy != h->busy)
        log_out_printf("hearth: %u of %u connections open: idle ones now time out after %u s", h->n_conns, lim,
                       busy ? fast : normal);
    h->busy = busy;
    h->busy_pending = false;
    for (http_conn *k = h->conns; k; k = k->next) {
        if (k->busy_timeout == busy) continue;
        MHD_set_connection_option(k->c, MHD_CONNECTION_OPTION_TIMEOUT, busy ? fast : normal);
        k->busy_timeout = busy;
    }
}

/* ---- answers ---------------------------------------------------------------- */
static void add_headers(http_req *r, struct MHD_Response *resp, const char *ctype) {
    if (ctype) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (r->must_close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (r->h->cors) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, r->h->cors);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    for (int i = 0; i < r->n_hdr; i++) MHD_add_response_header(resp, r->hk[i], r->hv[i]);
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
    if (!resp) { r->failed = true; resume(r); return; }
    add_headers(r, resp, ctype);
    r->pending = resp;
    if (r->in_handler && !r->suspended) {
        if (queue_pending(r) != MHD_YES) r->failed = true;
    } else {
        resume(r);
    }
}

void http_defer(http_req *r) {
    if (!r->answered && !r->gone) suspend(r);
}

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
    suspend(r);   /* resumed by the next write */
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
    add_headers(r, resp, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    if (!r->in_handler || r->suspended) {   /* started later (a body parsed off the loop): queued when resumed */
        r->pending = resp;
        resume(r);
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
        resume(r);
        return;
    }
    if (r->out_len + len > r->out_cap) {
        size_t cap = r->out_cap ? r->out_cap : 4096;
        while (cap < r->out_len + len) cap *= 2;
        char *nb = realloc(r->out, cap);
        if (!nb) { r->gone = true; resume(r); return; }   /* cannot keep up: drop the client */
        r->out = nb;
        r->out_cap = cap;
    }
    memcpy(r->out + r->out_len, data, len);
    r->out_len += len;
    r->last_write = uv_hrtime();
    resume(r);
}

void http_stream_end(http_req *r) {
    if (!r->streaming) return;
    r->out_end = true;
    resume(r);
}

uint64_t http_stream_last_write(const http_req *r) { return r->last_write; }

/* ---- accessors ---------------------------------------------------------------- */
const char *http_method(const http_req *r) { return r->method; }
const char *http_path(const http_req *r) { return r->path; }
const char *http_header(const http_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}
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
void http_close_after(http_req *r) { r->must_close = true; }
const char *http_client_addr(const http_req *r) { return r->addr; }
uint64_t http_start_ns(const http_req *r) { return r->t0; }
int http_status(const http_req *r) { return r->status; }
void http_set_route(http_req *r, const char *route) { r->route = route; }
const char *http_route(const http_req *r) { return r->route; }
void http_set_tokens(http_req *r, int n_prompt, int n_generated) { r->n_prompt = n_prompt; r->n_gen = n_generated; }
void http_get_tokens(const http_req *r, int *n_prompt, int *n_generated) { *n_prompt = r->n_prompt; *n_generated = r->n_gen; }
void http_on_close(http_req *r, void (*fn)(void *arg), void *arg) { r->on_close = fn; r->close_arg = arg; }

/* ---- the server ------------------------------------------------------------------ */
http_server *http_start(uv_loop_t *loop, const http_config *c, char *err, size_t errlen) {
    http_server *h = calloc(1, sizeof *h);
    if (!h) { snprintf(err, errlen, "out of memory"); return NULL; }
    h->loop = loop;
    h->cfg = *c;
    if (!h->cfg.body_budget) h->cfg.body_budget = 4 * c->max_body;
    if (c->cors_origin && *c->cors_origin && !(h->cors = strdup(c->cors_origin))) {
        free(h);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->cfg.cors_origin = NULL;
    FD_ZERO(&h->rs); FD_ZERO(&h->ws); FD_ZERO(&h->es);

    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", c->port);
    int gai = getaddrinfo(c->host && *c->host ? c->host : "127.0.0.1", port, &hints, &ai);
    if (gai || !ai) {
        snprintf(err, errlen, "cannot resolve host '%s': %s", c->host ? c->host : "", gai_strerror(gai));
        free(h->cors);
        free(h);
        return NULL;
    }
    unsigned flags = MHD_ALLOW_SUSPEND_RESUME;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    if (!h->cfg.timeout_s) h->cfg.timeout_s = 300;
    if (!h->cfg.busy_timeout_s) h->cfg.busy_timeout_s = h->cfg.timeout_s;
    if (!h->cfg.max_conns || h->cfg.max_conns > CONN_MAX) h->cfg.max_conns = CONN_MAX;
    errno = 0;
    h->d = MHD_start_daemon(flags, (uint16_t)c->port, NULL, NULL, on_access, h,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
                            MHD_OPTION_CONNECTION_TIMEOUT, h->cfg.timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, h->cfg.max_conns,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, h->cfg.per_client,
                            MHD_OPTION_END);
    int e = errno;
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", c->host ? c->host : "127.0.0.1", c->port,
                 e ? strerror(e) : "libmicrohttpd refused to start");
        free(h->cors);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : c->port;
    di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_LISTEN_FD);
    h->listen_fd = di ? (int)di->listen_fd : -1;
    uv_timer_init(loop, &h->timer);
    uv_timer_init(loop, &h->accept_timer);
    h->accept_timer.data = h;
    uv_check_init(loop, &h->check);
    uv_idle_init(loop, &h->idle);
    h->timer.data = h->check.data = h->idle.data = h;
    uv_check_start(&h->check, on_check);
    uv_unref((uv_handle_t *)&h->check);
    drive(h);
    return h;
}

int http_port(const http_server *h) { return h->port; }
int http_active(const http_server *h) { return h->n_active; }

void http_stop_accepting(http_server *h) {
    if (!h->d) return;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_LISTEN_FD);
    if (di) watch_drop(h, (int)di->listen_fd);
    h->listen_fd = -1;
    MHD_socket s = MHD_quiesce_daemon(h->d);
    if (s != MHD_INVALID_SOCKET) close(s);
    kick(h);
}

static void on_timer_closed(uv_handle_t *hd) {
    http_server *h = hd->data;
    if (--h->n_closing == 0 && h->closed) free(h);
}

void http_close(http_server *h) {
    if (!h) return;
    if (h->d) {
        /* MHD must not be stopped with suspended connections */
        for (http_req *r = h->reqs; r; r = r->next) {
            r->gone = true;
            call_on_close(r);
            resume(r);
        }
        fd_set rs, ws, es;
        FD_ZERO(&rs); FD_ZERO(&ws); FD_ZERO(&es);
        MHD_run_from_select(h->d, &rs, &ws, &es);
        /* drop the handles while their descriptors are still open */
        for (int fd = 0; fd < h->n_w; fd++) watch_drop(h, fd);
        MHD_stop_daemon(h->d);
        h->d = NULL;
    }
    h->closed = true;
    h->n_closing += 4;
    for (int fd = 0; fd < h->n_w; fd++) watch_drop(h, fd);
    free(h->w);
    h->w = NULL;
    h->n_w = 0;
    free(h->cors);
    h->cors = NULL;
    uv_close((uv_handle_t *)&h->timer, on_timer_closed);
    uv_close((uv_handle_t *)&h->accept_timer, on_timer_closed);
    uv_close((uv_handle_t *)&h->check, on_timer_closed);
    uv_close((uv_handle_t *)&h->idle, on_timer_closed);
}
