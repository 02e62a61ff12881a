/* The CPU executor of the plan. One pass over a batch of tokens from any
 * slots, read top to bottom like llama2.c's forward(): every architecture
 * is the same sequence of steps, switched by the plan's parameters. */
#include "engine/model/forward.h"
#include "runtime/pool.h"
#include "kernels/ops.h"
#include "kernels/attention.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct fwd_arena {
    int max_batch, n_ctx, max_threads;
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2, *xo;
    float *scores;            /* [max_threads][ATTN_GROUP_MAX][n_ctx] */
    float *rope;              /* [max_batch][n_rot]: each row's rope cos and sin, once per pass */
    float *rope_swa;          /* the same for the local layers' base (swa_window models) */
    int *run, n_runs;         /* [max_batch + 1]: attention's runs of rows (attention_runs) */
    kern_scratch scratch;
};

static int imax(int a, int b) { return a > b ? a : b; }

fwd_arena *fwd_arena_new(const model *m, int max_batch, int n_ctx, int max_threads) {
    const model_params *p = &m->p;
    fwd_arena *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->max_batch = max_batch;
    a->n_ctx = n_ctx;
    a->max_threads = max_threads < 1 ? 1 : max_threads;
    size_t B = (size_t)max_batch;
    int q_dim = p->n_head * p->head_dim, kv_dim = p->n_head_kv * p->head_dim;
    int wide = imax(p->n_embd, q_dim);
    a->x = malloc(B * p->n_embd * sizeof(float));
    a->xb = malloc(B * wide * sizeof(float));
    a->q = malloc(B * q_dim * sizeof(float));
    a->k = malloc(B * kv_dim * sizeof(float));
    a->v = malloc(B * kv_dim * sizeof(float));
    a->att = malloc(B * q_dim * sizeof(float));
    a->hb = malloc(B * p->n_ff * sizeof(float));
    a->hb2 = malloc(B * imax(p->n_ff, wide) * sizeof(float));
    a->xo = malloc(B * p->n_embd * sizeof(float));
    a->scores = malloc((size_t)a->max_threads * ATTN_GROUP_MAX * n_ctx * sizeof(float));
    a->rope = malloc(B * imax(p->n_rot, 1) * sizeof(float));
    a->rope_swa = malloc(B * imax(p->n_rot, 1) * sizeof(float));
    a->run = malloc((B + 1) * sizeof(int));
    a->scratch.size = kern_scratch_bytes(max_batch, imax(imax(p->n_embd, p->n_ff), q_dim));
    a->scratch.buf = malloc(a->scratch.size ? a->scratch.size : 1);
    if (!a->x || !a->xb || !a->q || !a->k || !a->v || !a->att || !a->hb || !a->hb2 ||
        !a->xo || !a->scores || !a->rope || !a->rope_swa || !a->run || !a->scratch.buf) {
        fwd_arena_free(a);
        return NULL;
    }
    return a;
}

void fwd_arena_free(fwd_arena *a) {
    if (!a) return;
    free(a->x); free(a->xb); free(a->q); free(a->k); free(a->v); free(a->att);
    free(a->hb); free(a->hb2); free(a->xo); free(a->scores); free(a->rope); free(a->rope_swa); free(a->run); free(a->scratch.buf);
    free(a);
}

/* ---- attention ----------------------------------------------------------
 * One work item per (run of rows, KV head, up to ATTN_GROUP_MAX of the query
 * heads that share it), so a key or value row is converted once for those
 * heads. A run is up to ATTN_RUN_MAX rows of one slot at consecutive
 * positions (a prompt chunk): each row's keys and values are the last row's
 * plus one, so the rows after the first find them in this core's cache
 * instead of memory. Each row reads its slot's cache up to its own position,
 * computed by the same call whatever else is in the batch, so its result
 * does not depend on the rest of the batch. On a local (sliding-window)
 * layer a row reads only its last `window` positions, its own included. */
#define ATTN_RUN_MAX 16

typedef struct {
    const model *m;
    kv_cache *kv;
    fwd_arena *a;
    const fwd_batch *b;
    int layer;
    int chunks;               /* items per (run, KV head) */
    int window;               /* positions a row attends to, 0 = all before it */
    attn_group_fn attend;
} attn_job;

/* The first position row i attends to. */
static int attn_start(const attn_job *J, int i) {
    int pos = J->b->pos[i];
    return J->window && pos + 1 > J->window ? pos + 1 - J->window : 0;
}

/* Cuts the batch into runs: a->run[r] is the first row of run r, and
 * a->run[n_runs] = b->n. */
static int attention_runs(fwd_arena *a, const fwd_batch *b) {
    int n_runs = 0;
    for (int i = 0; i < b->n; i++) {
        bool extends = i > 0 && i - a->run[n_runs - 1] < ATTN_RUN_MAX && b->slot[i] == b->slot[i - 1] &&
                       b->pos[i] == b->pos[i - 1] + 1;
        if (!extends) a->run[n_runs++] = i;
    }
    a->run[n_runs] = b->n;
    return n_runs;
}

/* The next item's first key and value rows, fetched while this item runs:
 * the kernels prefetch ahead within a head, but each head's rows start in a
 * region of their own, cold at its first rows. */
#define ATTN_START_ROWS 16

static void prefetch_item_start(const attn_job *J, int64_t it, int per_run) {
    int i = J->a->run[it / per_run], kvh = (int)(it % per_run) / J->chunks, hd = J->m->p.head_dim;
    int start = attn_start(J, i), n_pos = J->b->pos[i] + 1 - start;
    int rows = n_pos < ATTN_START_ROWS ? n_pos : ATTN_START_ROWS;
    const char *k = (const char *)kv_k_head(J->kv, J->layer, J->b->slot[i], kvh, start);
    const char *v = (const char *)kv_v_head(J->kv, J->layer, J->b->slot[i], kvh, start);
    for (size_t o = 0; o < (size_t)rows * hd * sizeof(uint16_t); o += 64) {
        __builtin_prefetch(k + o);
        __builtin_prefetch(v + o);
    }
}

static void attention_items(void *ctx, int64_t begin, int64_t end, int worker) {
    const attn_job *J = ctx;
    const model_params *p = &J->m->p;
    int hd = p->head_dim, q_dim = p->n_head * hd;
    int group = p->n_head / p->n_head_kv;
    float scale = p->attn_scale;
    float *scores = J->a->scores + (size_t)worker * ATTN_GROUP_MAX * J->a->n_ctx;
    int per_run = p->n_head_kv * J->chunks;
    for (int64_t it = begin; it < end; it++) {
        int run = (int)(it / per_run), r = (int)(it % per_run);
        int kvh = r / J->chunks, h0 = kvh * group + (r % J->chunks) * ATTN_GROUP_MAX;
        int G = kvh * group + group - h0;
        if (G > ATTN_GROUP_MAX) G = ATTN_GROUP_MAX;
        int slot = J->b->slot[J->a->run[run]];
        if (it + 1 < end) prefetch_item_start(J, it + 1, per_run);
        for (int i = J->a->run[run]; i < J->a->run[run + 1]; i++) {
            const float *q = J->a->q + (size_t)i * q_dim + (size_t)h0 * hd;
            float *out = J->a->att + (size_t)i * q_dim + (size_t)h0 * hd;
            int start = attn_start(J, i);
            const uint16_t *k = kv_k_head(J->kv, J->layer, slot, kvh, start);
            const uint16_t *v = kv_v_head(J->kv, J->layer, slot, kvh, start);
            J->attend(q, G, k, v, (size_t)hd, J->b->pos[i] + 1 - start, hd, scale, scores, out);
        }
    }
}

/* ---- the gated activation (SwiGLU, GeGLU): a pool job over pieces of rows -- */
#define GLU_PIECE 2048

typedef struct {
    float *h;
    const float *up;
    int n_ff, pieces;
    op_swiglu_fn fn;          /* op_swiglu or op_geglu, the path's version */
} glu_job;

static void glu_items(void *ctx, int64_t begin, int64_t end, int worker) {
    (void)worker;
    const glu_job *J = ctx;
    for (int64_t it = begin; it < end; it++) {
        int64_t i = it / J->pieces, c0 = it % J->pieces * GLU_PIECE;
        int len = (int)(J->n_ff - c0 < GLU_PIECE ? J->n_ff - c0 : GLU_PIECE);
        float *h = J->h + (size_t)i * J->n_ff + c0;
        J->fn(h, h, J->up + (size_t)i * J->n_ff + c0, len);
    }
}

/* ---- the layer -------------------------------------------------------- */
static void add_bias(float *x, const float *bias, int n_rows, int dim) {
    if (!bias) return;
    for (int i = 0; i < n_rows; i++) op_add(x + (size_t)i * dim, bias, dim);
}

static void head_norms(float *x, const float *w, int n_rows, int n_heads, int hd, float eps) {
    if (!w) return;
    op_rmsnorm_fn norm = op_rmsnorm_for(kernels_current());
    for (int i = 0; i < n_rows * n_heads; i++) norm(x + (size_t)i * hd, x + (size_t)i * hd, w, hd, eps);
}

/* gemma3's post-norms: a block's output normalized before the residual add. */
static void post_norm(float *x, const float *w, int n_rows, int dim, float eps) {
    if (!w) return;
    op_rmsnorm_fn norm = op_rmsnorm_for(kernels_current());
    for (int i = 0; i < n_rows; i++) norm(x + (size_t)i * dim, x + (size_t)i * dim, w, dim, eps);
}

static void layer_forward(const model *m, kv_cache *kv, fwd_arena *a, const fwd_batch *b,
                          int il, hpool *pool) {
    const model_params *p = &m->p;
    const layer_weights *lw = &m->layers[il];
    int n = b->n, E = p->n_embd, hd = p->head_dim;
    int q_dim = p->n_head * hd, kv_dim = p->n_head_kv * hd;

    op_rmsnorm_fn norm = op_rmsnorm_for(kernels_current());

    /* attention block */
    for (int i = 0; i < n; i++) norm(a->xb + (size_t)i * E, a->x + (size_t)i * E, lw->attn_norm, E, p->rms_eps);
    /* q, k and v read the same input: one job, activations quantized once */
    const hweight *qkv[3] = { &lw->wq, &lw->wk, &lw->wv };
    float *const qkv_out[3] = { a->q, a->k, a->v };
    kern_matmul_n(3, qkv, n, a->xb, qkv_out, &a->scratch, pool);
    add_bias(a->q, lw->bq, n, q_dim);
    add_bias(a->k, lw->bk, n, kv_dim);
    add_bias(a->v, lw->bv, n, kv_dim);
    head_norms(a->q, lw->q_norm, n, p->n_head, hd, p->rms_eps);
    head_norms(a->k, lw->k_norm, n, p->n_head_kv, hd, p->rms_eps);
    op_rope_apply_fn rope = op_rope_apply_for(kernels_current());
    op_to_fp16_fn to_fp16 = op_to_fp16_for(kernels_current());
    const float *angles = lw->local ? a->rope_swa : a->rope;   /* local layers: rope_base_swa */
    for (int i = 0; i < n; i++) {
        float *q = a->q + (size_t)i * q_dim, *k = a->k + (size_t)i * kv_dim, *v = a->v + (size_t)i * kv_dim;
        const float *cs = angles + (size_t)i * p->n_rot;
        rope(q, p->n_head, hd, p->n_rot, p->rope_neox, cs);
        rope(k, p->n_head_kv, hd, p->n_rot, p->rope_neox, cs);
        for (int h = 0; h < p->n_head_kv; h++) {
            to_fp16(kv_k_head(kv, il, b->slot[i], h, b->pos[i]), k + h * hd, hd);
            to_fp16(kv_v_head(kv, il, b->slot[i], h, b->pos[i]), v + h * hd, hd);
            kv_mirror(kv, il, b->slot[i], h, b->pos[i]);
        }
    }
    int group = p->n_head / p->n_head_kv;
    attn_job J = { m, kv, a, b, il, (group + ATTN_GROUP_MAX - 1) / ATTN_GROUP_MAX,
                   lw->local ? p->swa_window : 0, attn_group_for(kernels_current()) };
    pool_run(pool, attention_items, &J, (int64_t)a->n_runs * p->n_head_kv * J.chunks, 1);
    kern_matmul(&lw->wo, n, a->att, a->xb, &a->scratch, pool);
    post_norm(a->xb, lw->post_attn_norm, n, E, p->rms_eps);
    for (int i = 0; i < n; i++) op_add(a->x + (size_t)i * E, a->xb + (size_t)i * E, E);

    /* feed-forward block */
    for (int i = 0; i < n; i++) norm(a->xb + (size_t)i * E, a->x + (size_t)i * E, lw->ffn_norm, E, p->rms_eps);
    const hweight *gate_up[2] = { &lw->w_gate, &lw->w_up };
    float *const gate_up_out[2] = { a->hb, a->hb2 };
    kern_matmul_n(2, gate_up, n, a->xb, gate_up_out, &a->scratch, pool);
    glu_job gj = { a->hb, a->hb2, p->n_ff, (p->n_ff + GLU_PIECE - 1) / GLU_PIECE,
                   p->glu == GLU_GEGLU ? op_geglu_for(kernels_current()) : op_swiglu_for(kernels_current()) };
    pool_run(pool, glu_items, &gj, (int64_t)n * gj.pieces, 2);
    kern_matmul(&lw->w_down, n, a->hb, a->xb, &a->scratch, pool);
    post_norm(a->xb, lw->post_ffn_norm, n, E, p->rms_eps);
    for (int i = 0; i < n; i++) op_add(a->x + (size_t)i * E, a->xb + (size_t)i * E, E);
}

static int batch_valid(const model *m, const kv_cache *kv, const fwd_arena *a, const fwd_batch *b) {
    if (b->n <= 0 || b->n > a->max_batch || b->n > kv->max_batch) return 0;
    for (int i = 0; i < b->n; i++) {
        if (b->token[i] < 0 || b->token[i] >= m->p.n_vocab) return 0;
        if (b->slot[i] < 0 || b->slot[i] >= kv->n_slots) return 0;
        if (b->pos[i] < 0 || b->pos[i] >= kv->n_ctx || b->pos[i] >= a->n_ctx) return 0;
    }
    return 1;
}

int forward(const model *m, kv_cache *kv, fwd_arena *a, const fwd_batch *b,
            float *logits, hpool *pool) {
    if (!batch_valid(m, kv, a, b)) return -1;
    const model_params *p = &m->p;
    int E = p->n_embd;
    const float *factors = model_rope_factors(m, kv->n_ctx);
    for (int i = 0; i < b->n; i++) {
        kv_note_write(kv, b->slot[i], b->pos[i]);
        kern_get_row(&m->tok_embd, b->token[i], a->x + (size_t)i * E);
        if (p->embd_scale != 1.0f) op_scale(a->x + (size_t)i * E, p->embd_scale, E);
        float *cs = a->rope + (size_t)i * p->n_rot;
        op_rope_angles(cs, p->n_rot, b->pos[i], p->rope_base, factors);
        if (p->rope_attn_factor != 1.0f) op_scale(cs, p->rope_attn_factor, p->n_rot);
        if (p->swa_window) {   /* the local layers' angles: their own base, no factors */
            cs = a->rope_swa + (size_t)i * p->n_rot;
            op_rope_angles(cs, p->n_rot, b->pos[i], p->rope_base_swa, NULL);
            if (p->rope_attn_factor != 1.0f) op_scale(cs, p->rope_attn_factor, p->n_rot);
        }
    }
    a->n_runs = attention_runs(a, b);
    for (int il = 0; il < p->n_layer; il++) layer_forward(m, kv, a, b, il, pool);

    /* logits only for the rows that need them */
    op_rmsnorm_fn norm = op_rmsnorm_for(kernels_current());
    int n_out = 0;
    for (int i = 0; i < b->n; i++) {
        if (!b->want_logits || !b->want_logits[i]) continue;
        norm(a->xo + (size_t)n_out * E, a->x + (size_t)i * E, m->output_norm, E, p->rms_eps);
        n_out++;
    }
    if (n_out) kern_matmul(&m->output, n_out, a->xo, logits, &a->scratch, pool);
    if (n_out && p->final_softcap > 0) op_softcap(logits, p->final_softcap, n_out * p->n_vocab);
    return 0;
}
