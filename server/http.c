/* The HTTP server (see http.h): libmicrohttpd started with no threads of
 * its own, its limits and callbacks set, then driven from the libuv loop
 * (http_loop.c); stopping to accept, and closing. The other concerns have
 * files of their own, listed atop http_priv.h. */
#include "server/http_priv.h"
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
    h->d = MHD_start_daemon(flags, (uint16_t)c->port, NULL, NULL, http_on_access, h,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, http_on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, http_on_connection, h,
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
    http_loop_start(h);
    return h;
}

int http_port(const http_server *h) { return h->port; }
int http_active(const http_server *h) { return h->n_active; }

void http_stop_accepting(http_server *h) {
    if (!h->d) return;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_LISTEN_FD);
    if (di) http_watch_drop(h, (int)di->listen_fd);
    h->listen_fd = -1;
    MHD_socket s = MHD_quiesce_daemon(h->d);
    if (s != MHD_INVALID_SOCKET) close(s);
    http_kick(h);
}

void http_close(http_server *h) {
    if (!h) return;
    if (h->d) {
        /* MHD must not be stopped with suspended connections */
        for (http_req *r = h->reqs; r; r = r->next) {
            r->gone = true;
            http_call_on_close(r);
            http_resume(r);
        }
        fd_set rs, ws, es;
        FD_ZERO(&rs); FD_ZERO(&ws); FD_ZERO(&es);
        MHD_run_from_select(h->d, &rs, &ws, &es);
        /* drop the handles while their descriptors are still open */
        for (int fd = 0; fd < h->n_w; fd++) http_watch_drop(h, fd);
        MHD_stop_daemon(h->d);
        h->d = NULL;
    }
    h->closed = true;
    free(h->cors);
    h->cors = NULL;
    http_loop_close(h);
}
