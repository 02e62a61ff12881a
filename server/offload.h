/* A route's heavy half off the loop: what a request asks before it can be
 * answered or queued (field checks, logit_bias expansion, the chat template,
 * tokenization, detokenization, printing a large answer) runs on one of
 * libuv's worker threads; the loop then answers or starts the generation.
 *
 * prep runs on a worker (or inline when no worker takes it) and may read
 * only the server's model, template and options, which stay loaded while a
 * job is out (server.offloaded pins the model). It fills p and returns
 * true, or returns false with p->e. go runs on the loop with the request
 * still open and the server not stopping: it answers r or starts a
 * generation, taking p->o (always) and any buffer it sets to NULL. The
 * body lives until go returns; routes whose go needs nothing of it set
 * p->body_done in prep so that it is freed on the worker. */
#ifndef HEARTH_OFFLOAD_H
#define HEARTH_OFFLOAD_H

#include <cjson/cJSON.h>
#include "server/errors.h"
#include "server/gen.h"
#include "server/server.h"

/* A request body this large or larger is a large job: its prep may take
 * long. At most OFFLOAD_LARGE_MAX large jobs run at once, on the
 * OFFLOAD_WORKERS of libuv's pool (serve sets UV_THREADPOOL_SIZE), so a
 * worker is always free for small requests; the rest wait their turn. */
#define OFFLOAD_LARGE_BYTES ((size_t)64 << 10)
#define OFFLOAD_WORKERS 3
#define OFFLOAD_LARGE_MAX (OFFLOAD_WORKERS - 1)

/* uv_queue_work through those lanes (loop thread only); 0, or uv's error. */
int offload_queue(uv_loop_t *loop, uv_work_t *w, uv_work_cb work, uv_after_work_cb done, bool large);

typedef struct route_prep {
    api_error e;
    gen_opts o;                        /* generation routes: taken by go */
    int n_prompts;
    int32_t *ids[GEN_MAX_PROMPTS];     /* the prompts, freed after go */
    int lens[GEN_MAX_PROMPTS];
    char *echo[GEN_MAX_PROMPTS];       /* completions' echo texts, freed after go */
    bool truncated;                    /* infill: the input was cut to fit */
    char *answer;                      /* an answer printed in full (JSON), freed after go */
    size_t answer_len;
    bool body_done;                    /* go does not read the body */
    void *data;                        /* a route's own result, freed with data_free unless go took it */
    void (*data_free)(void *);
} route_prep;

typedef bool (*route_prep_fn)(const server *s, const cJSON *body, route_prep *p);
typedef void (*route_go_fn)(server *s, http_req *r, const cJSON *body, route_prep *p);

/* Runs prep off the loop, then go on the loop; answers p->e when prep
 * fails. Takes the members of body (the caller's root is left empty). */
void offload_route(server *s, http_req *r, const cJSON *body, route_prep_fn prep, route_go_fn go);

/* For prep: p->answer printed from answer (deleted here), body_done set;
 * false with a 500 when out of memory. */
bool offload_print(route_prep *p, cJSON *answer);
/* go for routes whose prep printed the whole answer: 200 with p->answer. */
void offload_answer(server *s, http_req *r, const cJSON *body, route_prep *p);

#endif
