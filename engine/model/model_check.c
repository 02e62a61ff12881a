/* Hyperparameter bounds: every value the loader reads from metadata and
 * every product of them, in 64-bit. The limits sit far above any released
 * model (the largest have n_embd 16384-18432, 128 heads, head_dim 256,
 * n_ff 53248-73728, 256k tokens) and low enough that each buffer size
 * computed from them (batch rows x width, in int and size_t alike) fits. */
#include "engine/model/model_check.h"
#include <stdint.h>
#include <stdio.h>

#define MAX_EMBD (1 << 17)
#define MAX_LAYER 4096
#define MAX_HEAD 4096
#define MAX_HEAD_DIM 4096
#define MAX_FF (1 << 20)
#define MAX_WIDTH (1 << 20)          /* q_dim, kv_dim: one row of activations */
#define MAX_VOCAB (1 << 24)
#define MAX_CTX_TRAIN (1 << 24)
#define MAX_MATRIX (1ll << 36)       /* elements of one weight matrix */

typedef struct {
    char *err;
    size_t errlen;
    int failed;
} checker;

static void in_range(checker *c, const char *what, int64_t v, int64_t lo, int64_t hi) {
    if (c->failed || (v >= lo && v <= hi)) return;
    c->failed = 1;
    snprintf(c->err, c->errlen, "metadata: %s is %lld, outside [%lld, %lld]", what, (long long)v, (long long)lo,
             (long long)hi);
}

/* a * b, or INT64_MAX when that overflows (three sizes of up to 2^31 can) */
static int64_t mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

int model_check_params(const model_params *p, char *err, size_t errlen) {
    checker c = { err, errlen, 0 };
    in_range(&c, "embedding_length", p->n_embd, 1, MAX_EMBD);
    in_range(&c, "block_count", p->n_layer, 1, MAX_LAYER);
    in_range(&c, "head_count", p->n_head, 1, MAX_HEAD);
    in_range(&c, "head_count_kv", p->n_head_kv, 1, p->n_head);
    in_range(&c, "head dimension (key_length)", p->head_dim, 2, MAX_HEAD_DIM);
    in_range(&c, "rope.dimension_count", p->n_rot, 2, p->head_dim);
    in_range(&c, "feed_forward_length", p->n_ff, 1, MAX_FF);
    in_range(&c, "context_length", p->n_ctx_train, 1, MAX_CTX_TRAIN);
    int64_t q_dim = mul(p->n_head, p->head_dim), kv_dim = mul(p->n_head_kv, p->head_dim);
    in_range(&c, "head_count x key_length (q_dim)", q_dim, 1, MAX_WIDTH);
    in_range(&c, "head_count_kv x key_length (kv_dim)", kv_dim, 1, MAX_WIDTH);
    in_range(&c, "embedding_length x head_count x key_length", mul(p->n_embd, q_dim), 1, MAX_MATRIX);
    in_range(&c, "embedding_length x feed_forward_length", mul(p->n_embd, p->n_ff), 1, MAX_MATRIX);
    in_range(&c, "block_count x head_count_kv x key_length", mul(p->n_layer, kv_dim), 1, MAX_MATRIX);
    if (p->n_vocab) {
        in_range(&c, "vocabulary size", p->n_vocab, 1, MAX_VOCAB);
        in_range(&c, "vocabulary size x embedding_length", mul(p->n_vocab, p->n_embd), 1, MAX_MATRIX);
    }
    if (!c.failed && (p->n_head % p->n_head_kv || p->head_dim % 2 || p->n_rot % 2)) {
        c.failed = 1;
        snprintf(err, errlen, "metadata: head_count %d must be a multiple of head_count_kv %d, head dimension %d "
                 "and rope dimensions %d even", p->n_head, p->n_head_kv, p->head_dim, p->n_rot);
    }
    return c.failed ? -1 : 0;
}
