/* The CPU backend: weights repacked for one kernel table at load, and an
 * executor that runs the plan as a loop over its steps, each calling that
 * table's kernels. Nothing here knows an architecture: what differs between
 * models is in the steps and their parameters (plan.c). */
#include "engine/model/backend.h"
#include "engine/model/plan.h"
#include "kernels/kern_table.h"
#include "runtime/pages.h"
#include "runtime/pool.h"
#include <math.h>
#include <stdio.h>
#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- load: the kernel table and the weights in its layout ----------------- */

static bool cpu_available(void) { return true; }

static int prepare_matrix(hweight *w, void *ctx) { return kern_prepare_weight(ctx, w); }
static int release_matrix(hweight *w, void *ctx) { (void)ctx; kern_release_weight(w); return 0; }

static void cpu_release(model *m) {
    model_for_each_matrix(m, release_matrix, NULL);
}

static int cpu_prepare(model *m, const model_options *o, char *err, size_t errlen) {
    kern_path_id id = o && o->kernels >= 0 ? (kern_path_id)o->kernels : kernels_current();
    m->kern = kern_table_get(id);
    if (!m->kern) {
        snprintf(err, errlen, "kernel path %s cannot run on this CPU or build", kernels_path_name(id));
        return -1;
    }
    if (model_for_each_matrix(m, prepare_matrix, (void *)m->kern)) {
        cpu_release(m);
        snprintf(err, errlen, "out of memory repacking the weights");
        return -1;
    }
    return 0;
}

static const char *cpu_kernels_name(const model *m) { return m->kern ? m->kern->name : "none"; }

/* ---- per-model state: the KV cache and one arena ----------------------------- */

struct backend_state {
    const model *m;
    const plan *plan;
    const kern_table *kt;
    hpool *pool;
    kv_cache kv;
    int max_batch, n_ctx, max_threads;
    /* one page-aligned allocation; each plan buffer at its offset */
    uint8_t *arena;
    size_t arena_bytes;
    float *buf[BUF_COUNT];
    float *scores;            /* [max_threads][ATTN_GROUP_MAX][n_ctx] */
    int *run, n_runs;         /* [max_batch + 1]: attention's runs of rows (attention_runs) */
    kern_scratch scratch;
};

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The arena's layout, computed twice: once to size it (base NULL), once to
 * hand out the pointers. */
static size_t lay_out(backend_state *s, uint8_t *base) {
    const plan *p = s->plan;
    size_t off = 0, B = (size_t)s->max_batch;
    for (int b = 0; b < BUF_COUNT; b++) {
        size_t n = align64(B * (size_t)p->buf_w[b] * sizeof(float));
        s->buf[b] = base && n ? (float *)(base + off) : NULL;
        off += n;
    }
    size_t n = align64((size_t)s->max_threads * ATTN_GROUP_MAX * (size_t)s->n_ctx * sizeof(float));
    s->scores = base ? (float *)(base + off) : NULL;
    off += n;
    s->run = base ? (int *)(base + off) : NULL;
    off += align64((B + 1) * sizeof(int));
    s->scratch.size = kern_scratch_bytes(s->max_batch, p->max_n_in);
    s->scratch.buf = base ? base + off : NULL;
    off += align64(s->scratch.size);
    return off;
}

static void cpu_destroy(backend_state *s) {
    if (!s) return;
    kv_cache_free(&s->kv);
    pages_free(s->arena, s->arena_bytes);
    free(s);
}

static backend_state *cpu_create(const model *m, const backend_config *c) {
    if (!m->plan || !m->kern || c->max_batch < 1 || c->n_ctx < 1 || c->n_slots < 1) return NULL;
    backend_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    *s = (backend_state){ .m = m, .plan = m->plan, .kt = m->kern, .pool = c->pool, .max_batch = c->max_batch,
                          .n_ctx = c->n_ctx, .max_threads = c->pool ? pool_threads(c->pool) : 1 };
    /* sliding-window layers as rings sized for this state's batches */
    if (kv_cache_init_window(&s->kv, m, c->n_slots, c->n_ctx, c->max_batch)) { free(s); return NULL; }
    s->arena_bytes = pages_round(lay_out(s, NULL));
    if (!(s->arena = pages_alloc(s->arena_bytes))) { cpu_destroy(s); return NULL; }
    lay_out(s, s->arena);
    return s;
}

static kv_cache *cpu_kv(backend_state *s) { return &s->kv; }

/* ---- attention ----------------------------------------------------------
 * One work item per (run of rows, KV head, up to ATTN_GROUP_MAX of the query
 * heads that share it), so a key or value row is converted once for those
 * heads. A run is up to ATTN_RUN_MAX rows of one slot at consecutive
 * positions (a prompt chunk): each row's keys and values are the last row's
 * plus one, so the rows after the first find them in this core's cache
 * instead of memory. Each row reads its slot's cache up to its own position,
 * computed by the same call whatever else is in the batch, so its result
 * does not depend on the rest of the batch. On a sliding-window step a row
 * reads only its last `window` positions, its own included. */
#define ATTN_RUN_MAX 16

typedef struct {
    backend_state *s;
    const plan_step *st;
    const fwd_batch *b;
    const float *q;
    float *out;
    int chunks;               /* items per (run, KV head) */
} attn_job;

/* The first position row i attends to. */
static int attn_start(const attn_job *J, int i) {
    int pos = J->b->pos[i], w = J->st->window;
    return w && pos + 1 > w ? pos + 1 - w : 0;
}

/* Cuts the batch into runs: s->run[r] is the first row of run r, and
 * s->run[n_runs] = b->n. */
static int attention_runs(backend_state *s, const fwd_batch *b) {
    int n_runs = 0;
    for (int i = 0; i < b->n; i++) {
        bool extends = i > 0 && i - s->run[n_runs - 1] < ATTN_RUN_MAX && b->slot[i] == b->slot[i - 1] &&
                       b->pos[i] == b->pos[i - 1] + 1;
        if (!extends) s->run[n_runs++] = i;
    }
    s->run[n_runs] = b->n;
    return n_runs;
}

/* The next item's first key and value rows, fetched while this item runs:
 * the kernels prefetch ahead within a head, but each head's rows start in a
 * region of their own, cold at its first rows. */
#define ATTN_START_ROWS 16

static void prefetch_item_start(const attn_job *J, int64_t it, int per_run) {
    int i = J->s->run[it / per_run], kvh = (int)(it % per_run) / J->chunks, hd = J->st->head_dim;
    int start = attn_start(J, i), n_pos = J->b->pos[i] + 1 - start;
    int rows = n_pos < ATTN_START_ROWS ? n_pos : ATTN_START_ROWS;
    const char *k = (const char *)kv_k_head(&J->s->kv, J->st->layer, J->b->slot[i], kvh, start);
    const char *v = (const char *)kv_v_head(&J->s->kv, J->st->layer, J->b->slot[i], kvh, start);
    for (size_t o = 0; o < (size_t)rows * hd * sizeof(uint16_t); o += 64) {
        __builtin_prefetch(k + o);
        __builtin_prefetch(v + o);
    }
}

static void attention_items(void *ctx, int64_t begin, int64_t end, int worker) {
    const attn_job *J = ctx;
    const plan_step *st = J->st;
    int hd = st->head_dim, q_dim = st->n_head * hd;
    int group = st->n_head / st->n_head_kv;
    float *scores = J->s->scores + (size_t)worker * ATTN_GROUP_MAX * J->s->n_ctx;
    int per_run = st->n_head_kv * J->chunks;
    attn_group_fn attend = J->s->kt->attention;
    for (int64_t it = begin; it < end; it++) {
        int run = (int)(it / per_run), r = (int)(it % per_run);
        int kvh = r / J->chunks, h0 = kvh * group + (r % J->chunks) * ATTN_GROUP_MAX;
        int G = kvh * group + group - h0;
        if (G > ATTN_GROUP_MAX) G = ATTN_GROUP_MAX;
        int slot = J->b->slot[J->s->run[run]];
        if (it + 1 < end) prefetch_item_start(J, it + 1, per_run);
        for (int i = J->s->run[run]; i < J->s->run[run + 1]; i++) {
            const float *q = J->q + (size_t)i * q_dim + (size_t)h0 * hd;
            float *out = J->out + (size_t)i * q_dim + (size_t)h0 * hd;
            int start = attn_start(J, i);
            const uint16_t *k = kv_k_head(&J->s->kv, st->layer, slot, kvh, start);
            const uint16_t *v = kv_v_head(&J->s->kv, st->layer, slot, kvh, start);
            attend(q, G, k, v, (size_t)hd, J->b->pos[i] + 1 - start, hd, st->scale, scores, out);
        }
    }
}

static void step_attention(backend_state *s, const plan_step *st, const fwd_batch *b) {
    int group = st->n_head / st->n_head_kv;
    attn_job J = { s, st, b, s->buf[st->in], s->buf[st->out[0]], (group + ATTN_GROUP_MAX - 1) / ATTN_GROUP_MAX };
    pool_run(s->pool, attention_items, &J, (int64_t)s->n_runs * st->n_head_kv * J.chunks, 1);
}

/* ---- GLU: a pool job over pieces of rows --------------------------------- */
#define GLU_PIECE 2048

typedef struct {
    float *out;
    const float *gate, *up;
    int width, pieces;
    op_swiglu_fn fn;
} glu_job;

static void glu_items(void *ctx, int64_t begin, int64_t end, int worker) {
    (void)worker;
    const glu_job *J = ctx;
    for (int64_t it = begin; it < end; it++) {
        int64_t i = it / J->pieces, c0 = it % J->pieces * GLU_PIECE;
        int len = (int)(J->width - c0 < GLU_PIECE ? J->width - c0 : GLU_PIECE);
        size_t at = (size_t)i * J->width + (size_t)c0;
        J->fn(J->out + at, J->gate + at, J->up + at, len);
    }
}

/* ---- the steps ------------------------------------------------------------- */

/* Row i of buffer b as a step of width w sees it: rows are packed at the
 * width of the step that writes them (plan_check holds readers to it), as
 * the matmul reads and writes them. */
static float *row(backend_state *s, plan_buf b, int w, int i) { return s->buf[b] + (size_t)i * (size_t)w; }

static void add_into(backend_state *s, const plan_step *st, int n) {
    if (st->add == BUF_NONE) return;
    int w = st->out_w[0];
    for (int i = 0; i < n; i++) op_add(row(s, st->add, w, i), row(s, st->out[0], w, i), w);
}

static void step_logits(backend_state *s, const plan_step *st, const fwd_batch *b, float *logits) {
    int E = st->in_w, n_out = 0;
    for (int i = 0, k = 0; b->want_embd && i < b->n; i++)   /* embeddings: the normed state itself */
        if (b->want_embd[i]) s->kt->rmsnorm(b->embd + (size_t)k++ * E, row(s, st->in, E, i), st->vec, E, st->eps);
    for (int i = 0; i < b->n; i++) {
        if (!b->want_logits || !b->want_logits[i]) continue;
        s->kt->rmsnorm(row(s, st->out[0], E, n_out), row(s, st->in, E, i), st->vec, E, st->eps);
        n_out++;
    }
    if (n_out) kern_matmul(st->w[0], n_out, s->buf[st->out[0]], logits, &s->scratch, s->pool);
    if (n_out && st->cap > 0) op_softcap(logits, st->cap, n_out * (int)st->w[0]->n_out);
}

static void step(backend_state *s, const plan_step *st, const fwd_batch *b, float *logits) {
    const kern_table *kt = s->kt;
    int n = b->n, w = st->out_w[0];
    switch (st->op) {
    case STEP_EMBED:
        for (int i = 0; i < n; i++) {
            float *x = row(s, st->out[0], w, i);
            kern_get_row(st->w[0], b->token[i], x);
            if (st->scale != 1.0f) op_scale(x, st->scale, w);
        }
        break;
    case STEP_ROPE_ANGLES: {
        /* longrope: the long factors when a slot's context passes the original one */
        const float *f = st->vec_long && s->n_ctx > st->n_ctx_orig ? st->vec_long : st->vec;
        for (int i = 0; i < n; i++) {
            float *cs = row(s, st->out[0], w, i);
            op_rope_angles(cs, st->n_rot, b->pos[i], st->base, f);
            if (st->scale != 1.0f) op_scale(cs, st->scale, st->n_rot);
        }
        break;
    }
    case STEP_RMSNORM:
        for (int i = 0; i < n; i++) kt->rmsnorm(row(s, st->out[0], w, i), row(s, st->in, st->in_w, i), st->vec, w, st->eps);
        add_into(s, st, n);
        break;
    case STEP_MATMUL_N: {
        float *outs[PLAN_MAX_OUT];
        for (int o = 0; o < st->n_out; o++) outs[o] = s->buf[st->out[o]];
        kern_matmul_n(st->n_out, st->w, n, s->buf[st->in], outs, &s->scratch, s->pool);
        break;
    }
    case STEP_MATMUL:
        kern_matmul(st->w[0], n, s->buf[st->in], s->buf[st->out[0]], &s->scratch, s->pool);
        add_into(s, st, n);
        break;
    case STEP_BIAS:
        for (int i = 0; i < n; i++) op_add(row(s, st->out[0], w, i), st->vec, w);
        break;
    case STEP_HEAD_NORM:
        for (int i = 0; i < n * st->n_head; i++) {
            float *x = s->buf[st->out[0]] + (size_t)i * st->head_dim;
            kt->rmsnorm(x, x, st->vec, st->head_dim, st->eps);
        }
        break;
    case STEP_ROPE:
        for (int i = 0; i < n; i++)
            kt->rope(row(s, st->out[0], w, i), st->n_head, st->head_dim, st->n_rot, st->neox, row(s, st->in, st->in_w, i));
        break;
    case STEP_KV_STORE:
        for (int i = 0; i < n; i++) {
            const float *k = row(s, st->in, st->in_w, i), *v = row(s, st->in2, st->in2_w, i);
            for (int h = 0; h < st->n_head_kv; h++) {
                kt->to_fp16(kv_k_head(&s->kv, st->layer, b->slot[i], h, b->pos[i]), k + h * st->head_dim, st->head_dim);
                kt->to_fp16(kv_v_head(&s->kv, st->layer, b->slot[i], h, b->pos[i]), v + h * st->head_dim, st->head_dim);
                kv_mirror(&s->kv, st->layer, b->slot[i], h, b->pos[i]);   /* a ring layer's twin */
            }
        }
        break;
    case STEP_ATTENTION:
        step_attention(s, st, b);
        break;
    case STEP_GLU: {
        glu_job J = { s->buf[st->out[0]], s->buf[st->in], s->buf[st->in2], w, (w + GLU_PIECE - 1) / GLU_PIECE, kt->glu[st->act] };
        pool_run(s->pool, glu_items, &J, (int64_t)n * J.pieces, 2);
        break;
    }
    case STEP_LOGITS:
        step_logits(s, st, b, logits);
        break;
    default:
        break;
    }
}

static int batch_valid(const backend_state *s, const fwd_batch *b) {
    if (b->n <= 0 || b->n > s->max_batch || b->n > s->kv.max_batch) return 0;
    for (int i = 0; i < b->n; i++) {
        if (b->token[i] < 0 || b->token[i] >= s->m->p.n_vocab) return 0;
        if (b->slot[i] < 0 || b->slot[i] >= s->kv.n_slots) return 0;
        if (b->pos[i] < 0 || b->pos[i] >= s->kv.n_ctx || b->pos[i] >= s->n_ctx) return 0;
        /* documented precondition: a slot's rows come in position order */
        assert(i == 0 || b->slot[i] != b->slot[i - 1] || b->pos[i] > b->pos[i - 1]);
    }
    return 1;
}

static int cpu_run(backend_state *s, const fwd_batch *b, float *logits) {
    if (!batch_valid(s, b)) return -1;
    for (int i = 0; i < b->n; i++) kv_note_write(&s->kv, b->slot[i], b->pos[i]);
    s->n_runs = attention_runs(s, b);
    for (int i = 0; i < s->plan->n_steps; i++) step(s, &s->plan->steps[i], b, logits);
    return 0;
}

const backend backend_cpu = {
    .name = "cpu",
    .available = cpu_available,
    .prepare = cpu_prepare,
    .release = cpu_release,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .run = cpu_run,
    .kv = cpu_kv,
    .kernels_name = cpu_kernels_name,
};
