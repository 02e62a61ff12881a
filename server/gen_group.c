/* Several generations answering one request (see gen_group.h). */
#include "server/gen_group.h"
#include "server/errors.h"
#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct gen_group {
    server *s;
    http_req *req;            /* NULL once the request is over */
    int n, n_added, n_finished, n_alive;
    gen **m;                  /* by index */
    bool *shares;             /* a later choice of an earlier member's prompt */
    cJSON *answer;            /* whole answers: the first one, the others' choices moved in */
    bool failed, closing;
};

gen_group *gen_group_new(server *s, http_req *r, int n) {
    gen_group *grp = calloc(1, sizeof *grp);
    if (grp) {
        grp->m = calloc((size_t)n, sizeof *grp->m);
        grp->shares = calloc((size_t)n, sizeof *grp->shares);
    }
    if (!grp || !grp->m || !grp->shares) {
        if (grp) { free(grp->m); free(grp->shares); }
        free(grp);
        return NULL;
    }
    grp->s = s;
    grp->req = r;
    grp->n = n;
    return grp;
}

static void group_free(gen_group *grp) {
    cJSON_Delete(grp->answer);
    free(grp->m);
    free(grp->shares);
    free(grp);
}

/* The request is over: each member hears it as a lone gen would. */
static void group_closed(void *arg) {
    gen_group *grp = arg;
    for (int i = 0; i < grp->n_added; i++)
        if (grp->m[i]) { gen_set_tokens(grp->m[i]); break; }
    grp->req = NULL;
    grp->closing = true;
    for (int i = 0; i < grp->n_added; i++)
        if (grp->m[i]) gen_req_closed(grp->m[i]);   /* may free the member */
    grp->closing = false;
    if (!grp->n_alive) group_free(grp);
}

void gen_group_add(gen_group *grp, gen *g, int index, bool shares_prompt) {
    assert(index == grp->n_added && index < grp->n);
    g->grp = grp;
    g->index = index;
    if (index > 0 && grp->m[0]) {   /* one completion: every chunk of every choice has the same id */
        memcpy(g->id, grp->m[0]->id, sizeof g->id);
        g->created = grp->m[0]->created;
    }
    grp->m[index] = g;
    grp->shares[index] = shares_prompt;
    grp->n_added++;
    grp->n_alive++;
    http_on_close(grp->req, group_closed, grp);
}

void gen_group_abort(gen_group *grp, bool respond) {
    http_req *r = grp->req;
    http_on_close(r, NULL, NULL);
    grp->closing = true;
    for (int i = 0; i < grp->n_added; i++) gen_req_closed(grp->m[i]);   /* not submitted: freed now */
    group_free(grp);
    if (respond) respond_error(r, 500, NULL, NULL, "out of memory");
}

void gen_group_release(gen *g) {
    gen_group *grp = g->grp;
    grp->m[g->index] = NULL;
    if (--grp->n_alive == 0 && !grp->closing && !grp->req) group_free(grp);
}

void gen_usage_counts(const gen *g, int *prompt, int *completion, int *cached) {
    *prompt = *completion = *cached = 0;
    const gen_group *grp = g->grp;
    for (int i = 0; i < (grp ? grp->n_added : 1); i++) {
        const gen *m = grp ? grp->m[i] : g;
        if (!m) continue;
        if (!grp || !grp->shares[i]) { *prompt += m->n_prompt; *cached += m->n_cached; }
        *completion += m->n_gen;
    }
}

void gen_set_tokens(gen *g) {
    http_req *r = g->grp ? g->grp->req : g->req;
    if (!r) return;
    int p, c, k;
    gen_usage_counts(g, &p, &c, &k);
    http_set_tokens(r, p, c);
}

bool gen_stream_last(gen *g) {
    return !g->grp || ++g->grp->n_finished == g->grp->n;
}

static int choice_index(const cJSON *c) {
    const cJSON *i = cJSON_GetObjectItemCaseSensitive(c, "index");
    return cJSON_IsNumber(i) ? i->valueint : 0;
}

static int by_index(const void *a, const void *b) {
    return choice_index(*(cJSON *const *)a) - choice_index(*(cJSON *const *)b);
}

/* The choices in index order. */
static void sort_choices(cJSON *choices, int n) {
    cJSON **v = calloc((size_t)n, sizeof *v);
    if (!v) return;   /* out of memory: the order they finished in */
    int k = 0;
    while (choices->child && k < n) v[k++] = cJSON_DetachItemViaPointer(choices, choices->child);
    qsort(v, (size_t)k, sizeof *v, by_index);
    for (int i = 0; i < k; i++) cJSON_AddItemToArray(choices, v[i]);
    free(v);
}

void gen_answer(gen *g, cJSON *o) {
    gen_group *grp = g->grp;
    if (!grp) {
        respond_json(g->req, 200, o);
        g->ended = true;
        return;
    }
    g->ended = true;
    if (grp->failed || !grp->req) { cJSON_Delete(o); return; }
    if (!grp->answer) {
        grp->answer = o;
    } else {
        cJSON *to = cJSON_GetObjectItemCaseSensitive(grp->answer, "choices");
        cJSON *from = cJSON_GetObjectItemCaseSensitive(o, "choices");
        while (to && from && from->child) cJSON_AddItemToArray(to, cJSON_DetachItemViaPointer(from, from->child));
        cJSON_Delete(o);
    }
    if (++grp->n_finished < grp->n) return;
    cJSON *a = grp->answer;
    grp->answer = NULL;
    cJSON *choices = cJSON_GetObjectItemCaseSensitive(a, "choices");
    if (choices) sort_choices(choices, cJSON_GetArraySize(choices));
    cJSON *u = cJSON_GetObjectItemCaseSensitive(a, "usage");
    if (u) {
        int p, c, k;
        gen_usage_counts(g, &p, &c, &k);
        cJSON_ReplaceItemInObjectCaseSensitive(u, "prompt_tokens", cJSON_CreateNumber(p));
        cJSON_ReplaceItemInObjectCaseSensitive(u, "completion_tokens", cJSON_CreateNumber(c));
        cJSON_ReplaceItemInObjectCaseSensitive(u, "total_tokens", cJSON_CreateNumber(p + c));
        cJSON *d = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details");
        if (d) cJSON_ReplaceItemInObjectCaseSensitive(d, "cached_tokens", cJSON_CreateNumber(k));
    }
    respond_json(grp->req, 200, a);
}

void gen_group_fail(gen *g, const api_error *e) {
    gen_group *grp = g->grp;
    if (grp->failed || !grp->req) return;
    grp->failed = true;
    bool streaming = false;
    for (int i = 0; i < grp->n_added; i++) {
        gen *m = grp->m[i];
        if (!m) continue;
        streaming |= m->stream_started;
        m->ended = true;
        if (m->in_engine) engine_cancel(grp->s->engine, m->job);
    }
    if (streaming) {
        cJSON *j = api_error_json(e);
        char *text = j ? cJSON_PrintUnformatted(j) : NULL;
        cJSON_Delete(j);
        if (text) {
            http_stream_write(grp->req, "data: ", 6);
            http_stream_write(grp->req, text, strlen(text));
            http_stream_write(grp->req, "\n\n", 2);
        }
        free(text);
        http_stream_end(grp->req);
    } else {
        api_error_respond(grp->req, e);
    }
}
