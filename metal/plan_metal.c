/* The Metal backend: the plan the CPU executor runs, encoded as dispatches of
 * metal/shaders into one command buffer per engine step, over the weights in
 * GGUF's layout (the model's page-aligned copy, wrapped, not copied) and the
 * same fp16 KV cache (wrapped too, so the prompt cache reads and writes it
 * directly). Two tables share this file: "metal" over host_metal.m (macOS)
 * and "metal-emu" over the CPU emulator (metal/emu). EMBED and ROPE_ANGLES
 * run on the CPU while the step is encoded (they write shared memory before
 * the commit); every other step is one or two dispatches. */
#include "metal/plan_metal.h"
#include "metal/dispatch.h"
#include "metal/shaders/args.h"
#include "engine/model/plan.h"
#include "kernels/kern_table.h"
#include "kernels/ops.h"
#include "runtime/pool.h"
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- load: nothing is repacked; the formats the shaders read ---------------- */

static bool format_ok(int type) {
    return type == FMT_F32 || type == FMT_F16 || type == FMT_Q8_0 || type == FMT_Q4_0;
}

static int check_matrix(hweight *w, void *ctx) {
    (void)ctx;
    return format_ok(w->type) ? 0 : -1 - w->type;
}

static int metal_prepare(model *m, const model_options *o, char *err, size_t errlen) {
    (void)o;
    int rc = model_for_each_matrix(m, check_matrix, NULL);
    if (rc) {
        snprintf(err, errlen, "metal: no shader for weight format %s yet (F32, F16, Q8_0, Q4_0 have one)",
                 format_name(-1 - rc));
        return -1;
    }
    /* the CPU half of the pass (EMBED, ROPE_ANGLES) is scalar code */
    m->kern = kern_table_get(KPATH_SCALAR);
    return m->kern ? 0 : -1;
}

static void metal_release(model *m) { (void)m; }

static const char *metal_kernels_name(const model *m) {
    (void)m;
    return "metal shaders";
}

/* ---- per-model state ------------------------------------------------------------ */

enum { P_RMS, P_ACT, P_GEMV_F32, P_GEMV_F16, P_GEMV_Q8_0, P_GEMV_Q4_0, P_GLU, P_BIAS, P_SOFTCAP,
       P_ROPE, P_KV, P_ATT, P_COUNT };
static const char *const pipeline_names[P_COUNT] = {
    "rmsnorm_f32", "act_quant_q8", "gemv_f32", "gemv_f16", "gemv_q8_0", "gemv_q4_0", "glu_f32",
    "bias_add_f32", "softcap_f32", "rope_f32", "kv_store_f16", "attention_f16",
};

struct backend_state {
    const model *m;
    const plan *plan;
    kv_cache kv;
    int max_batch, n_ctx;
    md_device *dev;
    md_pipeline *pl[P_COUNT];
    md_buffer *weights;       /* m->weights_copy, wrapped */
    md_buffer *vecs;          /* the steps' norm weights and biases, copied once */
    size_t *vec_off;          /* [n_steps]: each step's vector in vecs */
    md_buffer *arena;         /* the plan's buffers */
    size_t buf_off[BUF_COUNT];
    md_buffer *act;           /* the prepass's act_q8 blocks */
    md_buffer *kvbuf;         /* kv.k and kv.v, wrapped (one mapping) */
    size_t v_off;             /* of kv.v in it */
    md_buffer *rows;          /* int [4][max_batch]: pos, slot, rows wanting logits, rows wanting embeddings */
    md_buffer *logits;        /* [max_batch][n_vocab] */
    md_buffer *embd;          /* [max_batch][n_embd] */
};

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static void metal_destroy(backend_state *s) {
    if (!s) return;
    md_buffer_free(s->weights); md_buffer_free(s->vecs); md_buffer_free(s->arena); md_buffer_free(s->act);
    md_buffer_free(s->kvbuf); md_buffer_free(s->rows); md_buffer_free(s->logits); md_buffer_free(s->embd);
    md_device_destroy(s->dev);
    kv_cache_free(&s->kv);
    free(s->vec_off);
    free(s);
}

/* Floats of a step's vector in vecs (0: none there). */
static int vec_len(const plan_step *st) {
    if (!st->vec) return 0;
    switch (st->op) {
    case STEP_RMSNORM: case STEP_BIAS: return st->out_w[0];
    case STEP_HEAD_NORM: return st->head_dim;
    case STEP_LOGITS: return st->in_w;
    default: return 0;   /* ROPE_ANGLES' factors are read on the CPU */
    }
}

static bool weight_inside(const model *m, const hweight *w) {
    const uint8_t *base = m->weights_copy;
    return base && w->data >= base && w->data + w->row_bytes * (size_t)w->n_out <= base + m->weights_copy_bytes;
}

static backend_state *metal_create(const model *m, const backend_config *c) {
    if (!m->plan || c->max_batch < 1 || c->n_ctx < 1 || c->n_slots < 1) return NULL;
    backend_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->m = m; s->plan = m->plan; s->max_batch = c->max_batch; s->n_ctx = c->n_ctx;
    const plan *p = s->plan;
    char err[256];
    if (kv_cache_init_window(&s->kv, m, c->n_slots, c->n_ctx, c->max_batch)) { free(s); return NULL; }
    if (!(s->dev = md_device_create(c->pool, err, sizeof err))) goto fail;
    for (int i = 0; i < P_COUNT; i++)
        if (!(s->pl[i] = md_pipeline_get(s->dev, pipeline_names[i]))) goto fail;
    /* every matrix lives in the model's one page-aligned copy */
    for (int i = 0; i < p->n_steps; i++)
        for (int o = 0; o < PLAN_MAX_OUT; o++)
            if (p->steps[i].w[o] && !weight_inside(m, p->steps[i].w[o])) goto fail;
    if (!(s->weights = md_buffer_wrap(s->dev, m->weights_copy, m->weights_copy_bytes))) goto fail;
    size_t vbytes = 0;
    if (!(s->vec_off = calloc((size_t)p->n_steps, sizeof *s->vec_off))) goto fail;
    for (int i = 0; i < p->n_steps; i++) {
        s->vec_off[i] = vbytes;
        vbytes += align256((size_t)vec_len(&p->steps[i]) * sizeof(float));
    }
    if (!(s->vecs = md_buffer_new(s->dev, vbytes ? vbytes : 4))) goto fail;
    for (int i = 0; i < p->n_steps; i++)
        if (vec_len(&p->steps[i]))
            memcpy((uint8_t *)md_buffer_contents(s->vecs) + s->vec_off[i], p->steps[i].vec,
                   (size_t)vec_len(&p->steps[i]) * sizeof(float));
    size_t B = (size_t)c->max_batch, off = 0;
    for (int b = 0; b < BUF_COUNT; b++) {
        s->buf_off[b] = off;
        off += align256(B * (size_t)p->buf_w[b] * sizeof(float));
    }
    if (!(s->arena = md_buffer_new(s->dev, off))) goto fail;
    if (!(s->act = md_buffer_new(s->dev, B * (size_t)(p->max_n_in / QK + 1) * sizeof(act_q8)))) goto fail;
    s->v_off = (size_t)((uint8_t *)s->kv.v - (uint8_t *)s->kv.k);
    if (!(s->kvbuf = md_buffer_wrap(s->dev, s->kv.k, s->kv.map_bytes))) goto fail;
    if (!(s->rows = md_buffer_new(s->dev, 4 * B * sizeof(int)))) goto fail;
    if (!(s->logits = md_buffer_new(s->dev, B * (size_t)m->p.n_vocab * sizeof(float)))) goto fail;
    if (!(s->embd = md_buffer_new(s->dev, B * (size_t)m->p.n_embd * sizeof(float)))) goto fail;
    return s;
fail:
    metal_destroy(s);
    return NULL;
}

static kv_cache *metal_kv(backend_state *s) { return &s->kv; }

/* ---- encoding ---------------------------------------------------------------------- */

typedef struct enc {
    backend_state *s;
    md_cmd *c;
    const fwd_batch *b;
    int n_logits, n_embd;     /* rows wanting each */
} enc;

static float *host_row(backend_state *s, plan_buf b, int w, int i) {
    return (float *)((uint8_t *)md_buffer_contents(s->arena) + s->buf_off[b]) + (size_t)i * (size_t)w;
}

static void bind_buf(enc *E, int index, plan_buf b) {
    md_set_buffer(E->c, index, E->s->arena, E->s->buf_off[b == BUF_NONE ? BUF_X : b]);
}

static void dispatch1(enc *E, int pl, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t tx) {
    const uint32_t g[3] = { gx, gy, gz }, t[3] = { tx, 1, 1 };
    md_dispatch(E->c, E->s->pl[pl], g, t);
}

static uint32_t ceil_div(int64_t a, int64_t b) { return (uint32_t)((a + b - 1) / b); }

static void enc_rmsnorm(enc *E, md_buffer *in, size_t in_off, int in_stride, size_t vec_off, md_buffer *out,
                        size_t out_off, int out_stride, int width, int rows, plan_buf add, int use_index, size_t index_off,
                        float eps) {
    backend_state *s = E->s;
    md_rms_args a = { width, rows, in_stride, out_stride, add != BUF_NONE, use_index, eps };
    md_set_buffer(E->c, 0, in, in_off);
    md_set_buffer(E->c, 1, s->vecs, vec_off);
    md_set_buffer(E->c, 2, out, out_off);
    bind_buf(E, 3, add);
    md_set_buffer(E->c, 4, s->rows, index_off);
    md_set_bytes(E->c, 5, &a, sizeof a);
    dispatch1(E, P_RMS, (uint32_t)rows, 1, 1, MD_SIMD);
}

static bool uses_act(int type) { return type == FMT_Q8_0 || type == FMT_Q4_0; }

/* y = w . x for M rows (x: a buffer of the arena or XO); add += y when given. */
static void enc_gemv(enc *E, const hweight *w, md_buffer *xbuf, size_t x_off, int M, md_buffer *ybuf, size_t y_off,
                     plan_buf add, bool act_ready) {
    backend_state *s = E->s;
    int pl = w->type == FMT_F32 ? P_GEMV_F32 : w->type == FMT_F16 ? P_GEMV_F16
           : w->type == FMT_Q8_0 ? P_GEMV_Q8_0 : P_GEMV_Q4_0;
    if (uses_act(w->type) && !act_ready) {
        md_act_args aa = { (int)w->n_in, M };
        md_set_buffer(E->c, 0, xbuf, x_off);
        md_set_buffer(E->c, 1, s->act, 0);
        md_set_bytes(E->c, 2, &aa, sizeof aa);
        dispatch1(E, P_ACT, ceil_div((int64_t)M * (w->n_in / QK), 64), 1, 1, 64);
    }
    md_gemv_args a = { (int)w->n_in, (int)w->n_out, M, (int)w->row_bytes, add != BUF_NONE };
    md_set_buffer(E->c, 0, s->weights, (size_t)(w->data - (const uint8_t *)s->m->weights_copy));
    if (uses_act(w->type)) md_set_buffer(E->c, 1, s->act, 0);
    else md_set_buffer(E->c, 1, xbuf, x_off);
    md_set_buffer(E->c, 2, ybuf, y_off);
    bind_buf(E, 3, add);
    md_set_bytes(E->c, 4, &a, sizeof a);
    const uint32_t g[3] = { ceil_div(w->n_out, MD_GEMV_SG * MD_GEMV_ROWS), (uint32_t)M, 1 };
    const uint32_t t[3] = { MD_GEMV_SG * MD_SIMD, 1, 1 };
    md_dispatch(E->c, s->pl[pl], g, t);
}

static md_kv_args kv_args(backend_state *s, const plan_step *st, int n) {
    const kv_layer *L = &s->kv.lay[st->layer];
    md_kv_args a = { n, st->n_head, st->n_head_kv, st->head_dim, st->in_w, st->in2_w, st->in_w,
                     0, L->span, L->ring, st->window, st->scale };
    return a;
}

static void bind_kv(enc *E, int k_index, const plan_step *st) {
    size_t off = E->s->kv.lay[st->layer].off * sizeof(uint16_t);
    md_set_buffer(E->c, k_index, E->s->kvbuf, off);
    md_set_buffer(E->c, k_index + 1, E->s->kvbuf, E->s->v_off + off);
}

static int encode_step(enc *E, int i, bool *gpu_started) {
    backend_state *s = E->s;
    const plan_step *st = &s->plan->steps[i];
    const fwd_batch *b = E->b;
    int n = b->n, w = st->out_w[0];
    size_t rows_bytes = (size_t)s->max_batch * sizeof(int);
    switch (st->op) {
    case STEP_EMBED:
    case STEP_ROPE_ANGLES:
        /* on the CPU, into shared memory: only before any dispatch reads it */
        if (*gpu_started) return -1;
        for (int r = 0; r < n; r++) {
            float *x = host_row(s, st->out[0], w, r);
            if (st->op == STEP_EMBED) {
                kern_get_row(st->w[0], b->token[r], x);
                if (st->scale != 1.0f) op_scale(x, st->scale, w);
            } else {
                const float *f = st->vec_long && s->n_ctx > st->n_ctx_orig ? st->vec_long : st->vec;
                op_rope_angles(x, st->n_rot, b->pos[r], st->base, f);
                if (st->scale != 1.0f) op_scale(x, st->scale, st->n_rot);
            }
        }
        return 0;
    case STEP_RMSNORM:
        enc_rmsnorm(E, s->arena, s->buf_off[st->in], st->in_w, s->vec_off[i], s->arena, s->buf_off[st->out[0]], w, w, n,
                    st->add, 0, 0, st->eps);
        break;
    case STEP_MATMUL_N:
    {
        bool act_ready = false;   /* the activations quantized once for all of them */
        for (int o = 0; o < st->n_out; o++) {
            enc_gemv(E, st->w[o], s->arena, s->buf_off[st->in], n, s->arena, s->buf_off[st->out[o]], BUF_NONE, act_ready);
            act_ready |= uses_act(st->w[o]->type);
        }
        break;
    }
    case STEP_MATMUL:
        enc_gemv(E, st->w[0], s->arena, s->buf_off[st->in], n, s->arena, s->buf_off[st->out[0]], st->add, false);
        break;
    case STEP_BIAS: {
        md_ew_args a = { w, n, 0, 0.0f };
        bind_buf(E, 0, st->out[0]);
        md_set_buffer(E->c, 1, s->vecs, s->vec_off[i]);
        md_set_bytes(E->c, 2, &a, sizeof a);
        dispatch1(E, P_BIAS, ceil_div((int64_t)n * w, 256), 1, 1, 256);
        break;
    }
    case STEP_HEAD_NORM:
        enc_rmsnorm(E, s->arena, s->buf_off[st->out[0]], st->head_dim, s->vec_off[i], s->arena, s->buf_off[st->out[0]],
                    st->head_dim, st->head_dim, n * st->n_head, BUF_NONE, 0, 0, st->eps);
        break;
    case STEP_ROPE: {
        md_rope_args a = { n, st->n_head, st->head_dim, st->n_rot, st->neox, w, st->in_w };
        bind_buf(E, 0, st->out[0]);
        bind_buf(E, 1, st->in);
        md_set_bytes(E->c, 2, &a, sizeof a);
        uint32_t tx = st->n_rot / 2 < 32 ? (uint32_t)(st->n_rot / 2) : 32;
        const uint32_t g[3] = { ceil_div(st->n_rot / 2, tx), (uint32_t)st->n_head, (uint32_t)n }, t[3] = { tx, 1, 1 };
        md_dispatch(E->c, s->pl[P_ROPE], g, t);
        break;
    }
    case STEP_KV_STORE: {
        md_kv_args a = kv_args(s, st, n);
        a.k_w = st->in_w; a.v_w = st->in2_w;
        bind_buf(E, 0, st->in);
        bind_buf(E, 1, st->in2);
        bind_kv(E, 2, st);
        md_set_buffer(E->c, 4, s->rows, 0);
        md_set_buffer(E->c, 5, s->rows, rows_bytes);
        md_set_bytes(E->c, 6, &a, sizeof a);
        uint32_t tx = st->head_dim < 64 ? (uint32_t)st->head_dim : 64;
        const uint32_t g[3] = { ceil_div(st->head_dim, tx), (uint32_t)st->n_head_kv, (uint32_t)n }, t[3] = { tx, 1, 1 };
        md_dispatch(E->c, s->pl[P_KV], g, t);
        break;
    }
    case STEP_ATTENTION: {
        if (st->head_dim > MD_HEAD_DIM_MAX) return -1;
        md_kv_args a = kv_args(s, st, n);
        a.q_w = st->in_w;
        bind_buf(E, 0, st->in);
        bind_kv(E, 1, st);
        bind_buf(E, 3, st->out[0]);
        md_set_buffer(E->c, 4, s->rows, 0);
        md_set_buffer(E->c, 5, s->rows, rows_bytes);
        md_set_bytes(E->c, 6, &a, sizeof a);
        md_set_threadgroup_memory(E->c, 0, MD_ATT_CHUNK * sizeof(float));
        dispatch1(E, P_ATT, (uint32_t)st->n_head, (uint32_t)n, 1, MD_SIMD);
        break;
    }
    case STEP_GLU: {
        md_ew_args a = { w, n, st->act == KERN_GLU_GELU_TANH, 0.0f };
        bind_buf(E, 0, st->in);
        bind_buf(E, 1, st->in2);
        bind_buf(E, 2, st->out[0]);
        md_set_bytes(E->c, 3, &a, sizeof a);
        dispatch1(E, P_GLU, ceil_div((int64_t)n * w, 256), 1, 1, 256);
        break;
    }
    case STEP_LOGITS: {
        int E_w = st->in_w;
        if (E->n_embd)
            enc_rmsnorm(E, s->arena, s->buf_off[st->in], E_w, s->vec_off[i], s->embd, 0, E_w, E_w, E->n_embd,
                        BUF_NONE, 1, 3 * rows_bytes, st->eps);
        if (E->n_logits) {
            enc_rmsnorm(E, s->arena, s->buf_off[st->in], E_w, s->vec_off[i], s->arena, s->buf_off[st->out[0]], E_w, E_w,
                        E->n_logits, BUF_NONE, 1, 2 * rows_bytes, st->eps);
            enc_gemv(E, st->w[0], s->arena, s->buf_off[st->out[0]], E->n_logits, s->logits, 0, BUF_NONE, false);
            if (st->cap > 0) {
                md_ew_args a = { (int)st->w[0]->n_out, E->n_logits, 0, st->cap };
                md_set_buffer(E->c, 0, s->logits, 0);
                md_set_bytes(E->c, 1, &a, sizeof a);
                dispatch1(E, P_SOFTCAP, ceil_div((int64_t)E->n_logits * st->w[0]->n_out, 256), 1, 1, 256);
            }
        }
        break;
    }
    default:
        return -1;
    }
    *gpu_started = true;
    return 0;
}

static int batch_valid(const backend_state *s, const fwd_batch *b) {
    if (b->n <= 0 || b->n > s->max_batch || b->n > s->kv.max_batch) return 0;
    for (int i = 0; i < b->n; i++) {
        if (b->token[i] < 0 || b->token[i] >= s->m->p.n_vocab) return 0;
        if (b->slot[i] < 0 || b->slot[i] >= s->kv.n_slots) return 0;
        if (b->pos[i] < 0 || b->pos[i] >= s->kv.n_ctx || b->pos[i] >= s->n_ctx) return 0;
        assert(i == 0 || b->slot[i] != b->slot[i - 1] || b->pos[i] > b->pos[i - 1]);
    }
    return 1;
}

static int metal_run(backend_state *s, const fwd_batch *b, float *logits) {
    if (!batch_valid(s, b)) return -1;
    int *rows = md_buffer_contents(s->rows), B = s->max_batch;
    enc E = { s, NULL, b, 0, 0 };
    for (int i = 0; i < b->n; i++) {
        kv_note_write(&s->kv, b->slot[i], b->pos[i]);
        rows[i] = b->pos[i];
        rows[B + i] = b->slot[i];
        if (b->want_logits && b->want_logits[i]) rows[2 * B + E.n_logits++] = i;
        if (b->want_embd && b->want_embd[i]) rows[3 * B + E.n_embd++] = i;
    }
    if (!(E.c = md_cmd_begin(s->dev))) return -1;
    bool gpu_started = false;
    for (int i = 0; i < s->plan->n_steps; i++)
        if (encode_step(&E, i, &gpu_started)) {
            fprintf(stderr, "metal: cannot encode step %d (%s)\n", i, plan_op_name(s->plan->steps[i].op));
            md_cmd_commit_wait(E.c, NULL, 0);
            return -1;
        }
    char err[256];
    if (md_cmd_commit_wait(E.c, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    /* read back only after the wait: the command buffer that wrote them */
    if (E.n_logits)
        memcpy(logits, md_buffer_contents(s->logits), (size_t)E.n_logits * (size_t)s->m->p.n_vocab * sizeof(float));
    if (E.n_embd)
        memcpy(b->embd, md_buffer_contents(s->embd), (size_t)E.n_embd * (size_t)s->m->p.n_embd * sizeof(float));
    return 0;
}

#ifdef HEARTH_METAL_EMU
static bool emu_available(void) { return true; }
const backend backend_metal_emu = {
    .name = "metal-emu",
    .available = emu_available,
    .prepare = metal_prepare,
    .release = metal_release,
    .create = metal_create,
    .destroy = metal_destroy,
    .run = metal_run,
    .kv = metal_kv,
    .kernels_name = metal_kernels_name,
};
#endif

#ifdef HEARTH_METAL
const backend backend_metal = {
    .name = "metal",
    .available = md_host_available,
    .prepare = metal_prepare,
    .release = metal_release,
    .create = metal_create,
    .destroy = metal_destroy,
    .run = metal_run,
    .kv = metal_kv,
    .kernels_name = metal_kernels_name,
};
#endif
