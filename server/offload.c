/* Runs a route's heavy half on libuv's worker threads (see offload.h): the
 * loop only hands the request over and later answers or queues it, so one
 * large or slow request never holds up another client. */
#include "server/offload.h"
#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- the lanes ------------------------------------------------------------------- */
typedef struct lane_task {
    uv_work_t w;
    uv_loop_t *loop;
    uv_work_t *user;          /* the caller's request, run through w */
    uv_work_cb work;
    uv_after_work_cb done;
    struct lane_task *next;
} lane_task;

static int large_running;                 /* loop thread only */
static lane_task *waiting, **waiting_tail = &waiting;

static void lane_work(uv_work_t *w) {
    lane_task *t = w->data;
    t->work(t->user);
}

static void lane_done(uv_work_t *w, int status) {
    lane_task *t = w->data;
    large_running--;
    while (waiting && large_running < OFFLOAD_LARGE_MAX) {   /* the next in line */
        lane_task *n = waiting;
        if (!(waiting = n->next)) waiting_tail = &waiting;
        large_running++;
        if (uv_queue_work(n->loop, &n->w, lane_work, lane_done)) {   /* not taken: run it here */
            n->work(n->user);
            lane_done(&n->w, 0);
        }
    }
    t->done(t->user, status);
    free(t);
}

int offload_queue(uv_loop_t *loop, uv_work_t *w, uv_work_cb work, uv_after_work_cb done, bool large) {
    if (!large) return uv_queue_work(loop, w, work, done);
    lane_task *t = calloc(1, sizeof *t);
    if (!t) return UV_ENOMEM;
    *t = (lane_task){ .loop = loop, .user = w, .work = work, .done = done };
    t->w.data = t;
    if (large_running >= OFFLOAD_LARGE_MAX) {
        *waiting_tail = t;
        waiting_tail = &t->next;
        return 0;
    }
    int rc = uv_queue_work(loop, &t->w, lane_work, lane_done);
    if (rc) free(t);
    else large_running++;
    return rc;
}

/* ---- a route's two halves ------------------------------------------------------------ */
typedef struct job {
    uv_work_t work;
    server *s;
    http_req *r;              /* NULL once the client left */
    cJSON *body;              /* the request's members, moved here */
    route_prep_fn prep;
    route_go_fn go;
    bool ok;
    route_prep p;
} job;

static void prep_free(route_prep *p, bool opts) {
    if (opts) gen_opts_free(&p->o);
    for (int i = 0; i < GEN_MAX_PROMPTS; i++) {
        free(p->ids[i]);
        free(p->echo[i]);
    }
    free(p->answer);
    if (p->data && p->data_free) p->data_free(p->data);
}

static void client_left(void *arg) { ((job *)arg)->r = NULL; }

static void prep_work(uv_work_t *w) {
    job *j = w->data;
    j->ok = j->prep(j->s, j->body, &j->p);
    if (!j->ok || j->p.body_done) {   /* a large body is freed here too, not on the loop */
        cJSON_Delete(j->body);
        j->body = NULL;
    }
}

static void body_free_work(uv_work_t *w) { cJSON_Delete(((job *)w->data)->body); }
static void body_free_done(uv_work_t *w, int status) { (void)status; free(w->data); }

/* On the loop: the answer, the generation, or nothing if the client left. */
static void finish(job *j) {
    server *s = j->s;
    http_req *r = j->r;
    if (r && !s->stopping && j->ok) {
        j->go(s, r, j->body, &j->p);
        prep_free(&j->p, false);   /* go took the options */
    } else {
        if (r && s->stopping) respond_error(r, 503, NULL, "shutting_down", "The server is shutting down");
        else if (r) api_error_respond(r, &j->p.e);
        prep_free(&j->p, true);
    }
    if (j->body && s->loop && !offload_queue(s->loop, &j->work, body_free_work, body_free_done, false)) return;
    cJSON_Delete(j->body);
    free(j);
}

static void prep_done(uv_work_t *w, int status) {
    job *j = w->data;
    assert(j->s->offloaded > 0);
    j->s->offloaded--;
    if (j->r) http_on_close(j->r, NULL, NULL);
    if (status) {   /* cancelled before it ran */
        j->ok = false;
        api_fail(&j->p.e, 503, NULL, "shutting_down", "The server is shutting down");
    }
    finish(j);
}

void offload_route(server *s, http_req *r, const cJSON *body, route_prep_fn prep, route_go_fn go) {
    assert(body && prep && go);
    job *j = calloc(1, sizeof *j);
    cJSON *own = j ? cJSON_CreateObject() : NULL;
    if (!own) {
        free(j);
        respond_error(r, 500, NULL, NULL, "out of memory");
        return;
    }
    /* O(1): the members move, the caller deletes its empty root */
    own->child = body->child;
    ((cJSON *)body)->child = NULL;
    *j = (job){ .s = s, .r = r, .body = own, .prep = prep, .go = go };
    gen_opts_init(&j->p.o);
    j->work.data = j;
    if (s->loop && !offload_queue(s->loop, &j->work, prep_work, prep_done, http_body_size(r) >= OFFLOAD_LARGE_BYTES)) {
        s->offloaded++;
        http_defer(r);
        http_on_close(r, client_left, j);
        return;
    }
    prep_work(&j->work);   /* no worker: here, as before */
    finish(j);
}

bool offload_print(route_prep *p, cJSON *answer) {
    p->answer = answer ? cJSON_PrintUnformatted(answer) : NULL;
    cJSON_Delete(answer);
    if (!p->answer) return api_fail(&p->e, 500, NULL, NULL, "out of memory");
    p->answer_len = strlen(p->answer);
    p->body_done = true;
    return true;
}

void offload_answer(server *s, http_req *r, const cJSON *body, route_prep *p) {
    (void)s; (void)body;
    http_respond(r, 200, "application/json", p->answer, p->answer_len);
}
