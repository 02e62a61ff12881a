/* A loaded model: hyperparameters from GGUF metadata, weights (repacked by
 * the kernels, or copied), and the plan parameters that make one forward
 * pass serve every supported architecture (llama, qwen2, qwen3, gemma3,
 * phi3); the plan built from them, and the backend that runs it. The file
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
struct backend;
struct kern_table;
struct plan;

typedef enum { ARCH_LLAMA = 0, ARCH_QWEN2, ARCH_QWEN3, ARCH_GEMMA3, ARCH_PHI3, ARCH_COUNT } model_arch;

/* The gated FFN's activation: silu(gate) * up, or gelu_tanh(gate) * up. */
typedef enum { GLU_SWIGLU = 0, GLU_GEGLU } glu_kind;

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
    float embd_scale;         /* token embeddings are multiplied by this (gemma3: sqrt(n_embd)), else 1 */
    float attn_scale;         /* attention score scale: 1/sqrt(head_dim) unless the model says otherwise */
    bool post_norms;          /* gemma3: RMS norm of the attention and FFN outputs before each residual add */
    glu_kind glu;             /* the FFN's gate activation */
    int swa_window;           /* local layers attend to the last swa_window positions (their own
                                 included); 0 = no sliding window. Which layers: layer_weights.local */
    float rope_base_swa;      /* rope base of the local layers (gemma3 rope.freq_base_swa) */
    float rope_attn_factor;   /* rope cos and sin times this (phi3 longrope rope.scaling.attn_factor), else 1 */
    int n_ctx_orig;           /* longrope: short factors for contexts up to this, long ones beyond */
    float final_softcap;      /* logits = cap * tanh(logits / cap) when > 0 (final_logit_softcapping) */
    int pooling;              /* embeddings: the GGUF's pooling_type (1 mean, 2 cls, 3 last), else 3:
                                 last token, as for decoder models (not a step of the plan) */
} model_params;

typedef struct layer_weights {
    hweight wq, wk, wv, wo, w_gate, w_up, w_down;
    float *attn_norm, *ffn_norm;          /* n_embd */
    float *q_norm, *k_norm;               /* head_dim, or NULL */
    float *bq, *bk, *bv;                  /* or NULL */
    float *post_attn_norm, *post_ffn_norm; /* n_embd, when post_norms */
    bool local;                           /* a sliding-window layer (swa_window, rope_base_swa) */
} layer_weights;

typedef struct model {
    model_params p;
    hweight tok_embd, output;
    float *output_norm;
    float *rope_freqs;                    /* n_rot/2 factors, or NULL */
    float *rope_short, *rope_long;        /* longrope: n_rot/2 factors each (model_rope_factors), or NULL */
    layer_weights *layers;
    struct tokenizer *tok;
    char *name;                           /* general.name or the file's base name */
    char *chat_template;                  /* tokenizer.chat_template, or NULL */
    uint64_t weight_bytes;                /* bytes of all weight tensors */
    uint64_t file_size;                   /* of the file as loaded */
    uint8_t file_id[16];                  /* its header and sampled weights (the prompt cache's fingerprint) */
    void *weights_copy;                   /* the matrices no kernel repacked, copied out of the file */
    size_t weights_copy_bytes;            /* its page-aligned mapping */
    const struct backend *backend;        /* the one that prepared the weights and runs the plan */
    const struct kern_table *kern;        /* the CPU backend's kernels for this model */
    struct plan *plan;                    /* the forward pass as steps, built at load */
} model;

/* How to load: which backend ("auto" or NULL: the best here; "cpu") and,
 * for the CPU backend, which kernel path (a kern_path_id; -1: the one
 * kernels_select() chose, the probe or HEARTH_KERNELS). */
typedef struct model_options {
    const char *backend;
    int kernels;
} model_options;

/* NULL with a one-line error naming what is wrong (unsupported
 * architecture, tensor type, missing tensor, shape mismatch, ...). */
model *model_load(const char *path, char *err, size_t errlen);   /* default options */
model *model_load_opts(const char *path, const model_options *o, char *err, size_t errlen);
/* Calls fn on every matrix the matmul reads (not the token embedding):
 * stops at and returns the first non-zero result. */
int model_for_each_matrix(model *m, int (*fn)(hweight *w, void *ctx), void *ctx);
void model_free(model *m);
const char *model_arch_name(model_arch a);
/* Bytes of weights read for one decoded token (every matrix once, one embedding row). */
uint64_t model_bytes_per_token(const model *m);
/* The rope frequency factors a pass with n_ctx positions per slot uses:
 * rope_freqs, else longrope's short factors up to n_ctx_orig and its long
 * ones beyond (as llama.cpp chooses by context size), else NULL. */
const float *model_rope_factors(const model *m, int n_ctx);

#endif
