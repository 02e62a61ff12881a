/* Limits on the HTTP server's connections: at the descriptor limit the
 * listening socket is left alone for a while instead of spinning the loop;
 * near the connection limit idle connections get a shorter timeout, so
 * that they cannot keep new clients out. MHD itself enforces the counts
 * (total and per client address), set in http.c. */
#include "server/http_priv.h"
#include "server/log_out.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- the descriptor limit -------------------------------------------------- */
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
    http_sync_watchers(h);
}

/* Stop watching the listening socket for a while; connections already open
 * are served meanwhile. Logged once per episode, not per attempt. */
static void pause_accept(http_server *h) {
    if (!h->accept_paused && !h->accept_pauses++)
        log_out_printf("hearth: out of file descriptors (raise ulimit -n): not accepting new connections "
                       "until some close; open ones are served");
    h->accept_paused = true;
    http_sync_watchers(h);
    uv_timer_start(&h->accept_timer, on_accept_timer, 250, 0);
}

bool http_accept_out_of_fds(http_server *h, int fd) {
    if (!out_of_fds(fd)) return false;
    pause_accept(h);
    return true;
}

/* ---- open connections and their idle timeout ------------------------------- */
void http_on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                        enum MHD_ConnectionNotificationCode code) {
    http_server *h = cls;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) http_watch_drop(h, (int)ci->connect_fd);   /* new or closing: any handle on it is stale */
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
void http_tune_timeouts(http_server *h) {
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
