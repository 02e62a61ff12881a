/* libmicrohttpd driven from the libuv loop (see http.h).
 *
 * One table maps each descriptor to one uv_poll handle (libuv allows only
 * one per descriptor). A descriptor is watched for what MHD asked in its
 * last fd sets, or, for the socket of a suspended request, for the client
 * hanging up. Poll callbacks only note readiness; a check handle (after
 * each poll phase) runs MHD once over what was noted, then re-reads MHD's
 * fd sets and timeout. MHD's connection notifications drop a descriptor's
 * handle before MHD closes it (http_conn.c), so a reused descriptor never
 * inherits a stale registration. */
#include "server/http_priv.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static void drive(http_server *h);
static void on_idle(uv_idle_t *i) { (void)i; }

void http_kick(http_server *h) {
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

void http_watch_drop(http_server *h, int fd) {
    if (fd < 0 || fd >= h->n_w || !h->w[fd]) return;
    fd_watch *w = h->w[fd];
    h->w[fd] = NULL;
    if (fd < FD_SETSIZE) { FD_CLR(fd, &h->rs); FD_CLR(fd, &h->ws); FD_CLR(fd, &h->es); }
    uv_poll_stop(&w->poll);
    h->n_closing++;
    uv_close((uv_handle_t *)&w->poll, on_handle_closed);
}

static void on_poll(uv_poll_t *p, int status, int events);

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

void http_sync_watchers(http_server *h) {
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
        if (!ev) { if (w) http_watch_drop(h, fd); continue; }
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

void http_suspend(http_req *r) {
    if (r->suspended) return;
    MHD_suspend_connection(r->conn);
    r->suspended = true;
    fd_watch *w = watch_get(r->h, conn_fd(r));
    if (w) { w->peer = r; w->peer_data = false; }
    http_kick(r->h);
}

void http_unwatch_peer(http_req *r) {
    http_server *h = r->h;
    int fd = conn_fd(r);
    if (fd >= 0 && fd < h->n_w && h->w[fd] && h->w[fd]->peer == r) h->w[fd]->peer = NULL;
}

void http_resume(http_req *r) {
    if (!r->suspended) return;
    http_unwatch_peer(r);
    r->suspended = false;
    MHD_resume_connection(r->conn);
    http_kick(r->h);
}

void http_call_on_close(http_req *r) {
    void (*fn)(void *) = r->on_close;
    r->on_close = NULL;
    if (fn) fn(r->close_arg);
}

/* The client of a suspended request left: tell the owner now, then let MHD
 * find the dead socket and end the request. */
static void peer_gone(http_req *r) {
    r->gone = true;
    http_call_on_close(r);
    http_resume(r);
}

static bool peer_closed(int fd) {
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void on_poll(uv_poll_t *p, int status, int events) {
    fd_watch *w = p->data;
    http_server *h = w->h;
    if (w->fd == h->listen_fd && (events & UV_READABLE) && http_accept_out_of_fds(h, w->fd)) return;
    if (w->peer) {
        http_req *r = w->peer;
        if (status < 0 || (events & UV_DISCONNECT) || ((events & UV_READABLE) && peer_closed(w->fd)))
            peer_gone(r);
        else if (events & UV_READABLE)
            w->peer_data = true;   /* e.g. a pipelined request: leave it for MHD */
        http_kick(h);
        return;
    }
    if (status < 0) events = w->events & (UV_READABLE | UV_WRITABLE);   /* MHD finds the error */
    if (w->fd < FD_SETSIZE) {
        if (events & (UV_READABLE | UV_DISCONNECT)) FD_SET(w->fd, &h->rs);
        if (events & UV_WRITABLE) FD_SET(w->fd, &h->ws);
    }
    http_kick(h);
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
    http_tune_timeouts(h);
    http_sync_watchers(h);
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(h->d, &ms) == MHD_YES)
        uv_timer_start(&h->timer, on_timer, ms > 3600000 ? 3600000 : (uint64_t)ms, 0);
    else
        uv_timer_stop(&h->timer);
}

/* ---- the handles' life ---------------------------------------------------- */
void http_loop_start(http_server *h) {
    uv_timer_init(h->loop, &h->timer);
    uv_timer_init(h->loop, &h->accept_timer);
    h->accept_timer.data = h;
    uv_check_init(h->loop, &h->check);
    uv_idle_init(h->loop, &h->idle);
    h->timer.data = h->check.data = h->idle.data = h;
    uv_check_start(&h->check, on_check);
    uv_unref((uv_handle_t *)&h->check);
    drive(h);
}

static void on_timer_closed(uv_handle_t *hd) {
    http_server *h = hd->data;
    if (--h->n_closing == 0 && h->closed) free(h);
}

void http_loop_close(http_server *h) {
    h->n_closing += 4;
    for (int fd = 0; fd < h->n_w; fd++) http_watch_drop(h, fd);
    free(h->w);
    h->w = NULL;
    h->n_w = 0;
    uv_close((uv_handle_t *)&h->timer, on_timer_closed);
    uv_close((uv_handle_t *)&h->accept_timer, on_timer_closed);
    uv_close((uv_handle_t *)&h->check, on_timer_closed);
    uv_close((uv_handle_t *)&h->idle, on_timer_closed);
}
