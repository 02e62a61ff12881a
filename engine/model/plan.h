/* The plan: a model's forward pass as data. plan_build turns the
 * hyperparameters and weights into a list of fused steps, once at load;
 * a backend runs the list over a batch of rows. Architectures differ only
 * by the steps and parameters plan_build emits, never by code paths in an
 * executor. Each step names the buffers it reads and writes (named regions
 * of one activation arena, each max_batch rows of a fixed width), its
 * weights and its parameters. */
#ifndef HEARTH_PLAN_H
#define HEARTH_PLAN_H

#include <stdbool.h>
#include <stdio.h>
#include "kernels/kernels.h"
#include "kernels/kern_table.h"

struct model;

/* The arena's buffers: each holds one row per batch row. */
typedef enum {
    BUF_NONE = -1,
    BUF_X = 0,        /* the residual stream */
    BUF_XB,           /* a normed copy of x, or a block's output before the residual add */
    BUF_Q, BUF_K, BUF_V,
    BUF_ATT,          /* attention's output, all query heads */
    BUF_HB, BUF_HB2,  /* feed-forward gate and up */
    BUF_ROPE,         /* each row's rope cos and sin */
    BUF_ROPE_SWA,     /* the same at the local (sliding-window) layers' base */
    BUF_XO,           /* the rows that want logits, normed */
    BUF_COUNT
} plan_buf;

typedef enum {
    STEP_EMBED,       /* out = token_embd[token] (times scale when not 1) */
    STEP_ROPE_ANGLES, /* out = cos, sin of each row's position (base, freq factors), times scale */
    STEP_RMSNORM,     /* out = rmsnorm(in) * vec, per row of width; add: add += out */
    STEP_MATMUL_N,    /* outs[i] = w[i] . in, the activations quantized once */
    STEP_MATMUL,      /* out = w . in; add: add += out */
    STEP_BIAS,        /* out += vec, per row */
    STEP_HEAD_NORM,   /* out = rmsnorm of each head_dim piece, in place */
    STEP_ROPE,        /* rotate the heads of out in place with the angles in `in` */
    STEP_KV_STORE,    /* the layer's KV cache at each row's slot and position = fp16(in, in2) */
    STEP_ATTENTION,   /* out = attention of in (queries) over the layer's cache (the last
                       * `window` positions of each row when window > 0) */
    STEP_GLU,         /* out = act(in) * in2 */
    STEP_LOGITS,      /* logits = w . rmsnorm(in) * vec for the rows that want them (through
                       * XO), then cap * tanh(logits / cap) when cap > 0 */
    STEP_COUNT
} step_op;

#define PLAN_MAX_OUT KERN_MAX_FUSED

typedef struct plan_step {
    step_op op;
    int layer;                      /* -1 outside the layers */
    plan_buf in, in2, add;          /* BUF_NONE when unused */
    int n_out;                      /* outputs: 1, or the fused matmul's count */
    plan_buf out[PLAN_MAX_OUT];
    int in_w, in2_w, out_w[PLAN_MAX_OUT];   /* floats per row read and written */
    const hweight *w[PLAN_MAX_OUT]; /* the matmuls' weights, EMBED's table */
    const float *vec;               /* norm weights, bias, rope freq factors (or NULL) */
    const char *vec_name;           /* for printing */
    const float *vec_long;          /* ROPE_ANGLES: factors for contexts past n_ctx_orig (longrope), or NULL */
    int n_ctx_orig;
    int n_head, n_head_kv, head_dim, n_rot;
    bool neox;
    float eps;                      /* RMSNORM, HEAD_NORM, LOGITS */
    float scale;                    /* EMBED's factor, ROPE_ANGLES' attention factor, ATTENTION's score scale */
    float base;                     /* ROPE_ANGLES */
    int window;                     /* ATTENTION: sliding window, 0 = every position before */
    float cap;                      /* LOGITS: soft-cap, 0 = none */
    kern_glu act;                   /* GLU */
} plan_step;

typedef struct plan {
    int n_steps, cap;
    plan_step *steps;
    int buf_w[BUF_COUNT];           /* floats per row of each buffer (0: unused) */
    int64_t max_n_in;               /* the widest matmul input (activation scratch) */
} plan;

/* NULL when out of memory. The plan points into m's weights: free it first. */
plan *plan_build(const struct model *m);
void plan_free(plan *p);

const char *plan_op_name(step_op op);
const char *plan_buf_name(plan_buf b);
/* One line a step, with shapes. */
void plan_print(const plan *p, FILE *out);
/* 0, or -1 with a message naming the first step whose widths do not match
 * its buffers or weights (what a step reads and writes). */
int plan_check(const plan *p, char *err, size_t errlen);

#endif
