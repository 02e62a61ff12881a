/* plan_build: the forward pass of every supported architecture as one list
 * of steps, read top to bottom like llama2.c's forward(); and the plan's
 * printing and shape check. */
#include "engine/model/plan.h"
#include "engine/model/model.h"
#include <stdlib.h>
#include <string.h>

static const char *op_names[STEP_COUNT] = {
    "embed", "rope_angles", "rmsnorm", "matmul_n", "matmul", "bias", "head_norm",
    "rope", "kv_store", "attention", "glu", "logits",
};
static const char *buf_names[BUF_COUNT] = { "x", "xb", "q", "k", "v", "att", "hb", "hb2", "rope", "rope_swa", "xo" };

const char *plan_op_name(step_op op) { return (unsigned)op < STEP_COUNT ? op_names[op] : "?"; }
const char *plan_buf_name(plan_buf b) { return (unsigned)b < BUF_COUNT ? buf_names[b] : "-"; }

typedef struct {
    plan *p;
    int layer;
    bool failed;
} builder;

/* A new step with nothing set; NULL (and the builder failed) when out of memory. */
static plan_step *emit(builder *B, step_op op) {
    plan *p = B->p;
    if (p->n_steps == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        plan_step *s = realloc(p->steps, sizeof *s * (size_t)cap);
        if (!s) { B->failed = true; return NULL; }
        p->steps = s;
        p->cap = cap;
    }
    plan_step *s = &p->steps[p->n_steps++];
    *s = (plan_step){ .op = op, .layer = B->layer, .in = BUF_NONE, .in2 = BUF_NONE, .add = BUF_NONE,
                      .n_out = 1, .out = { BUF_NONE, BUF_NONE, BUF_NONE }, .scale = 1.0f };
    return s;
}

static void rmsnorm(builder *B, plan_buf in, plan_buf out, plan_buf add, const float *w, const char *name,
                    int width, float eps) {
    plan_step *s = emit(B, STEP_RMSNORM);
    if (!s) return;
    s->in = in; s->in_w = width;
    s->out[0] = out; s->out_w[0] = width;
    s->add = add;
    s->vec = w; s->vec_name = name;
    s->eps = eps;
}

static void matmul(builder *B, plan_buf in, const hweight *w, plan_buf out, plan_buf add) {
    plan_step *s = emit(B, STEP_MATMUL);
    if (!s) return;
    s->in = in; s->in_w = (int)w->n_in;
    s->w[0] = w;
    s->out[0] = out; s->out_w[0] = (int)w->n_out;
    s->add = add;
}

/* Several matrices that read the same input: one step. */
static void matmul_n(builder *B, plan_buf in, int n, const hweight *const *w, const plan_buf *out) {
    plan_step *s = emit(B, STEP_MATMUL_N);
    if (!s) return;
    s->in = in; s->in_w = (int)w[0]->n_in;
    s->n_out = n;
    for (int i = 0; i < n; i++) {
        s->w[i] = w[i];
        s->out[i] = out[i];
        s->out_w[i] = (int)w[i]->n_out;
    }
}

static void bias(builder *B, plan_buf buf, const float *b, const char *name, int width) {
    if (!b) return;
    plan_step *s = emit(B, STEP_BIAS);
    if (!s) return;
    s->out[0] = buf; s->out_w[0] = width;
    s->vec = b; s->vec_name = name;
}

static void head_norm(builder *B, plan_buf buf, const float *w, const char *name, int n_heads, int hd, float eps) {
    if (!w) return;
    plan_step *s = emit(B, STEP_HEAD_NORM);
    if (!s) return;
    s->out[0] = buf; s->out_w[0] = n_heads * hd;
    s->n_head = n_heads; s->head_dim = hd;
    s->vec = w; s->vec_name = name;
    s->eps = eps;
}

/* Each row's rotation angles at one base, into `out`. */
static void rope_angles(builder *B, plan_buf out, const model_params *p, float base, const float *f,
                        const char *f_name, const float *f_long) {
    plan_step *s = emit(B, STEP_ROPE_ANGLES);
    if (!s) return;
    s->out[0] = out; s->out_w[0] = p->n_rot;
    s->n_rot = p->n_rot;
    s->base = base;
    s->vec = f; s->vec_name = f_name;
    s->vec_long = f_long; s->n_ctx_orig = p->n_ctx_orig;
    s->scale = p->rope_attn_factor;
}

static void rope(builder *B, plan_buf buf, plan_buf angles, const model_params *p, int n_heads) {
    plan_step *s = emit(B, STEP_ROPE);
    if (!s) return;
    s->in = angles; s->in_w = p->n_rot;
    s->out[0] = buf; s->out_w[0] = n_heads * p->head_dim;
    s->n_head = n_heads; s->head_dim = p->head_dim; s->n_rot = p->n_rot;
    s->neox = p->rope_neox;
}

/* One layer: the attention block, then the feed-forward block, each adding
 * its output to the residual stream x. */
static void layer(builder *B, const model *m, int il) {
    const model_params *p = &m->p;
    const layer_weights *lw = &m->layers[il];
    int E = p->n_embd, hd = p->head_dim;
    int q_dim = p->n_head * hd, kv_dim = p->n_head_kv * hd;
    B->layer = il;

    /* attention block */
    rmsnorm(B, BUF_X, BUF_XB, BUF_NONE, lw->attn_norm, "attn_norm", E, p->rms_eps);
    const hweight *qkv[3] = { &lw->wq, &lw->wk, &lw->wv };
    matmul_n(B, BUF_XB, 3, qkv, (plan_buf[]){ BUF_Q, BUF_K, BUF_V });
    bias(B, BUF_Q, lw->bq, "attn_q.bias", q_dim);
    bias(B, BUF_K, lw->bk, "attn_k.bias", kv_dim);
    bias(B, BUF_V, lw->bv, "attn_v.bias", kv_dim);
    head_norm(B, BUF_Q, lw->q_norm, "attn_q_norm", p->n_head, hd, p->rms_eps);
    head_norm(B, BUF_K, lw->k_norm, "attn_k_norm", p->n_head_kv, hd, p->rms_eps);
    plan_buf angles = lw->local ? BUF_ROPE_SWA : BUF_ROPE;   /* local layers: their own base */
    rope(B, BUF_Q, angles, p, p->n_head);
    rope(B, BUF_K, angles, p, p->n_head_kv);
    plan_step *s = emit(B, STEP_KV_STORE);
    if (s) {
        s->in = BUF_K; s->in_w = kv_dim;
        s->in2 = BUF_V; s->in2_w = kv_dim;
        s->n_head_kv = p->n_head_kv; s->head_dim = hd;
    }
    s = emit(B, STEP_ATTENTION);
    if (s) {
        s->in = BUF_Q; s->in_w = q_dim;
        s->out[0] = BUF_ATT; s->out_w[0] = q_dim;
        s->n_head = p->n_head; s->n_head_kv = p->n_head_kv; s->head_dim = hd;
        s->scale = p->attn_scale;
        s->window = lw->local ? p->swa_window : 0;
    }
    /* the output added to the stream, or (post-norms, gemma3) normed first */
    if (lw->post_attn_norm) {
        matmul(B, BUF_ATT, &lw->wo, BUF_XB, BUF_NONE);
        rmsnorm(B, BUF_XB, BUF_XB, BUF_X, lw->post_attn_norm, "post_attention_norm", E, p->rms_eps);
    } else {
        matmul(B, BUF_ATT, &lw->wo, BUF_XB, BUF_X);
    }

    /* feed-forward block */
    rmsnorm(B, BUF_X, BUF_XB, BUF_NONE, lw->ffn_norm, "ffn_norm", E, p->rms_eps);
    const hweight *gate_up[2] = { &lw->w_gate, &lw->w_up };
    matmul_n(B, BUF_XB, 2, gate_up, (plan_buf[]){ BUF_HB, BUF_HB2 });
    s = emit(B, STEP_GLU);
    if (s) {
        s->in = BUF_HB; s->in_w = p->n_ff;
        s->in2 = BUF_HB2; s->in2_w = p->n_ff;
        s->out[0] = BUF_HB; s->out_w[0] = p->n_ff;
        s->act = p->glu == GLU_GEGLU ? KERN_GLU_GELU_TANH : KERN_GLU_SILU;
    }
    if (lw->post_ffn_norm) {
        matmul(B, BUF_HB, &lw->w_down, BUF_XB, BUF_NONE);
        rmsnorm(B, BUF_XB, BUF_XB, BUF_X, lw->post_ffn_norm, "post_ffw_norm", E, p->rms_eps);
    } else {
        matmul(B, BUF_HB, &lw->w_down, BUF_XB, BUF_X);
    }
}

plan *plan_build(const model *m) {
    const model_params *p = &m->p;
    plan *pl = calloc(1, sizeof *pl);
    if (!pl) return NULL;
    builder B = { pl, -1, false };

    plan_step *s = emit(&B, STEP_EMBED);
    if (s) {
        s->w[0] = &m->tok_embd;
        s->out[0] = BUF_X; s->out_w[0] = p->n_embd;
        s->scale = p->embd_scale;
    }
    /* rope_freqs, else longrope's short factors (its long ones past n_ctx_orig) */
    if (m->rope_freqs) rope_angles(&B, BUF_ROPE, p, p->rope_base, m->rope_freqs, "rope_freqs", NULL);
    else rope_angles(&B, BUF_ROPE, p, p->rope_base, m->rope_short, m->rope_short ? "rope_factors_short" : NULL,
                     m->rope_long);
    if (p->swa_window) rope_angles(&B, BUF_ROPE_SWA, p, p->rope_base_swa, NULL, NULL, NULL);
    for (int il = 0; il < p->n_layer; il++) layer(&B, m, il);

    B.layer = -1;
    s = emit(&B, STEP_LOGITS);
    if (s) {
        s->in = BUF_X; s->in_w = p->n_embd;
        s->out[0] = BUF_XO; s->out_w[0] = p->n_embd;
        s->w[0] = &m->output;
        s->vec = m->output_norm; s->vec_name = "output_norm";
        s->eps = p->rms_eps;
        s->cap = p->final_softcap;
    }
    if (B.failed) { plan_free(pl); return NULL; }

    /* each buffer as wide as the widest row a step puts in it or reads from it */
    for (int i = 0; i < pl->n_steps; i++) {
        const plan_step *t = &pl->steps[i];
        if (t->in != BUF_NONE && t->in_w > pl->buf_w[t->in]) pl->buf_w[t->in] = t->in_w;
        if (t->in2 != BUF_NONE && t->in2_w > pl->buf_w[t->in2]) pl->buf_w[t->in2] = t->in2_w;
        for (int o = 0; o < t->n_out; o++)
            if (t->out[o] != BUF_NONE && t->out_w[o] > pl->buf_w[t->out[o]]) pl->buf_w[t->out[o]] = t->out_w[o];
        for (int o = 0; o < PLAN_MAX_OUT; o++)
            if (t->w[o] && t->op != STEP_EMBED && t->w[o]->n_in > pl->max_n_in) pl->max_n_in = t->w[o]->n_in;
    }
    return pl;
}

void plan_free(plan *p) {
    if (!p) return;
    free(p->steps);
    free(p);
}

/* ---- printing ----------------------------------------------------------- */

static void print_buf(FILE *f, plan_buf b, int w) {
    fprintf(f, "%s[%d]", plan_buf_name(b), w);
}

void plan_print(const plan *p, FILE *f) {
    for (int i = 0; i < p->n_steps; i++) {
        const plan_step *s = &p->steps[i];
        fprintf(f, "%4d ", i);
        if (s->layer >= 0) fprintf(f, "L%-3d ", s->layer);
        else fprintf(f, "     ");
        fprintf(f, "%-11s ", plan_op_name(s->op));
        if (s->in != BUF_NONE) print_buf(f, s->in, s->in_w);
        if (s->in2 != BUF_NONE) { fprintf(f, ", "); print_buf(f, s->in2, s->in2_w); }
        if (s->op == STEP_EMBED) fprintf(f, "token");
        if (s->op == STEP_ROPE_ANGLES) fprintf(f, "pos");
        fprintf(f, " -> ");
        if (s->op == STEP_KV_STORE) fprintf(f, "kv[layer %d]", s->layer);
        for (int o = 0; o < s->n_out; o++) {
            if (s->out[o] == BUF_NONE) continue;
            if (o) fprintf(f, " | ");
            print_buf(f, s->out[o], s->out_w[o]);
        }
        if (s->op == STEP_LOGITS) fprintf(f, " -> logits[%lld]", (long long)s->w[0]->n_out);
        if (s->add != BUF_NONE) fprintf(f, ", %s +=", plan_buf_name(s->add));
        for (int o = 0; o < PLAN_MAX_OUT; o++)
            if (s->w[o])
                fprintf(f, "%s %s %lldx%lld", o ? "," : "  w", format_name(s->w[o]->type),
                        (long long)s->w[o]->n_out, (long long)s->w[o]->n_in);
        if (s->vec_name) fprintf(f, "  %s", s->vec_name);
        switch (s->op) {
        case STEP_EMBED: if (s->scale != 1.0f) fprintf(f, "  scale %g", (double)s->scale); break;
        case STEP_ROPE_ANGLES:
            fprintf(f, "  base %g", (double)s->base);
            if (s->vec_long) fprintf(f, ", long factors past %d", s->n_ctx_orig);
            if (s->scale != 1.0f) fprintf(f, ", times %g", (double)s->scale);
            break;
        case STEP_RMSNORM: fprintf(f, "  eps %g", (double)s->eps); break;
        case STEP_LOGITS:
            fprintf(f, "  eps %g", (double)s->eps);
            if (s->cap > 0) fprintf(f, ", soft-cap %g", (double)s->cap);
            break;
        case STEP_HEAD_NORM: fprintf(f, "  %d heads x %d, eps %g", s->n_head, s->head_dim, (double)s->eps); break;
        case STEP_ROPE: fprintf(f, "  %d heads x %d, %d rotated, %s", s->n_head, s->head_dim, s->n_rot,
                                s->neox ? "neox" : "adjacent pairs"); break;
        case STEP_KV_STORE: fprintf(f, "  %d kv heads x %d, fp16", s->n_head_kv, s->head_dim); break;
        case STEP_ATTENTION:
            fprintf(f, "  %d heads over %d kv heads x %d, scale %g", s->n_head, s->n_head_kv, s->head_dim,
                    (double)s->scale);
            if (s->window) fprintf(f, ", window %d", s->window);
            break;
        case STEP_GLU: fprintf(f, "  %s", s->act == KERN_GLU_GELU_TANH ? "gelu_tanh" : "silu"); break;
        default: break;
        }
        fprintf(f, "\n");
    }
}

/* ---- the shape check ------------------------------------------------------ */

static int bad(char *err, size_t errlen, int i, const plan_step *s, const char *what) {
    snprintf(err, errlen, "step %d (%s, layer %d): %s", i, plan_op_name(s->op), s->layer, what);
    return -1;
}

/* Steps that read their output buffer before writing it (in place). */
static bool in_place(step_op op) { return op == STEP_BIAS || op == STEP_HEAD_NORM || op == STEP_ROPE; }

int plan_check(const plan *p, char *err, size_t errlen) {
    /* the width each buffer's rows were last written at (0: not yet): rows
     * are packed at the writer's width, so every reader must use it */
    int written[BUF_COUNT] = {0};
    for (int i = 0; i < p->n_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (s->in != BUF_NONE && written[s->in] != s->in_w)
            return bad(err, errlen, i, s, "it reads its input at another width than it was written (or before)");
        if (s->in2 != BUF_NONE && written[s->in2] != s->in2_w)
            return bad(err, errlen, i, s, "it reads its second input at another width than it was written (or before)");
        if (in_place(s->op) && written[s->out[0]] != s->out_w[0])
            return bad(err, errlen, i, s, "it works in place on rows of another width (or not yet written)");
        if (s->add != BUF_NONE && written[s->add] != s->out_w[0])
            return bad(err, errlen, i, s, "it adds into rows of another width (or not yet written)");
        if (s->in != BUF_NONE && (s->in_w <= 0 || s->in_w > p->buf_w[s->in]))
            return bad(err, errlen, i, s, "its input is wider than its buffer");
        if (s->in2 != BUF_NONE && (s->in2_w <= 0 || s->in2_w > p->buf_w[s->in2]))
            return bad(err, errlen, i, s, "its second input is wider than its buffer");
        for (int o = 0; o < s->n_out; o++)
            if (s->out[o] != BUF_NONE && (s->out_w[o] <= 0 || s->out_w[o] > p->buf_w[s->out[o]]))
                return bad(err, errlen, i, s, "its output is wider than its buffer");
        if (s->add != BUF_NONE && s->out_w[0] != p->buf_w[s->add])
            return bad(err, errlen, i, s, "the buffer it adds into is not as wide as its output");
        switch (s->op) {
        case STEP_MATMUL: case STEP_MATMUL_N:
            for (int o = 0; o < s->n_out; o++) {
                if (!s->w[o] || s->w[o]->n_in != s->in_w) return bad(err, errlen, i, s, "a weight's n_in is not its input's width");
                if (s->w[o]->n_out != s->out_w[o]) return bad(err, errlen, i, s, "a weight's n_out is not its output's width");
            }
            break;
        case STEP_EMBED:
            if (!s->w[0] || s->w[0]->n_in != s->out_w[0]) return bad(err, errlen, i, s, "the table's rows are not the output's width");
            break;
        case STEP_LOGITS:
            if (!s->w[0] || s->w[0]->n_in != s->in_w || s->out_w[0] != s->in_w)
                return bad(err, errlen, i, s, "the output matrix does not read the stream's width");
            break;
        case STEP_RMSNORM:
            if (s->in_w != s->out_w[0]) return bad(err, errlen, i, s, "input and output widths differ");
            break;
        case STEP_HEAD_NORM: case STEP_ROPE:
            if (s->n_head * s->head_dim != s->out_w[0]) return bad(err, errlen, i, s, "heads x head_dim is not the buffer's width");
            if (s->op == STEP_ROPE && (s->n_rot > s->head_dim || s->in_w != s->n_rot))
                return bad(err, errlen, i, s, "the angles do not fit the rotated dims");
            break;
        case STEP_KV_STORE:
            if (s->n_head_kv * s->head_dim != s->in_w || s->in2_w != s->in_w)
                return bad(err, errlen, i, s, "kv heads x head_dim is not the K and V width");
            break;
        case STEP_ATTENTION:
            if (s->n_head * s->head_dim != s->in_w || s->out_w[0] != s->in_w || s->n_head_kv <= 0 ||
                s->n_head % s->n_head_kv)
                return bad(err, errlen, i, s, "query heads do not match the buffers or the kv heads");
            break;
        case STEP_GLU:
            if (s->in_w != s->in2_w || s->out_w[0] != s->in_w) return bad(err, errlen, i, s, "gate, up and output widths differ");
            break;
        default: break;
        }
        for (int o = 0; o < s->n_out; o++)
            if (s->out[o] != BUF_NONE) written[s->out[o]] = s->out_w[o];
    }
    return 0;
}
