/* A loaded model: hyperparameters from GGUF metadata, weights (repacked by
 * the kernels, or copied), and the plan parameters that make one forward
 * pass serve every supported architecture (llama, qwen2, qwen3). The file
 * is read once and closed: nothing here points into it, so it may be
 * replaced, rewritten or truncated while the model runs. */
#ifndef HEARTH_MODEL_H
#define HEARTH_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "engine/gguf/gguf.h"
#include "kernels/kernels.h"

struct tokenizer;

typedef enum { ARCH_LLAMA = 0, ARCH_QWEN2, ARCH_QWEN3, ARCH_COUNT } model_arch;

/* Everything in which architectures differ is a parameter of the plan. */
typedef struct model_params {
    model_arch arch;
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_ctx_train;
    int n_rot;                /* rotary dims per head */
    float rms_eps;
    float rope_base;
    bool rope_neox;           /* pairs (i, i + n_rot/2) instead of (2i, 2i+1) */
    bool qkv_bias;            /* qwen2 */
    bool qk_norm;             /* qwen3: RMS norm of each q/k head */
    bool tied_embeddings;     /* output.weight absent: reuse token_embd */
} model_params;

typedef struct layer_weights {
    hweight wq, wk, wv, wo, w_gate, w_up, w_down;
    float *attn_norm, *ffn_norm;          /* n_embd */
    float *q_norm, *k_norm;               /* head_dim, or NULL */
    float *bq, *bk, *bv;                  /* or NULL */
} layer_weights;

typedef struct model {
    model_params p;
    hweight tok_embd, output;
    float *output_norm;
    float *rope_freqs;                    /* n_rot/2 factors, or NULL */
    layer_weights *layers;
    struct tokenizer *tok;
    char *name;                           /* general.name or the file's base name */
    char *chat_template;                  /* tokenizer.chat_template, or NULL */
    uint64_t weight_bytes;                /* bytes of all weight tensors */
    uint64_t file_size;                   /* of the file as loaded */
    uint8_t file_id[16];                  /* its header and sampled weights (the prompt cache's fingerprint) */
    void *weights_copy;                   /* the matrices no kernel repacked, copied out of the file */
} model;

/* NULL with a one-line error naming what is wrong (unsupported
 * architecture, tensor type, missing tensor, shape mismatch, ...). */
model *model_load(const char *path, char *err, size_t errlen);
void model_free(model *m);
const char *model_arch_name(model_arch a);
/* Bytes of weights read for one decoded token (every matrix once, one embedding row). */
uint64_t model_bytes_per_token(const model *m);

#endif
