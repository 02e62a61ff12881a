/* The model writer: a GGUF of any supported architecture, shape and
 * format mix with random weights (deterministic from a seed), with a
 * vocabulary taken from a tokenizer.json, a vocab-only GGUF, or a small
 * built-in SentencePiece-style one. Tests and benchmarks use it. */
#ifndef HEARTH_SYNTH_MODEL_H
#define HEARTH_SYNTH_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "engine/model/model.h"

typedef struct synth_spec {
    model_arch arch;
    int n_embd, n_layer, n_head, n_head_kv, n_ff;
    int head_dim;             /* 0: n_embd / n_head */
    int n_vocab;              /* built-in vocabulary size (ignored with an imported one) */
    int n_ctx;                /* context_length metadata */
    float rope_base;          /* 0: the architecture's default */
    const char *mix;          /* "F32","F16","BF16","Q8_0","Q4_0","Q4_1","Q5_0","Q5_1","Q4_K_M","Q5_K_M","Q6_K" */
    int tied;                 /* 1: no output.weight */
    const char *embd_type;    /* token_embd's format ("Q8_0", any of formats.h's names), or NULL for
                                 the mix's: llama.cpp's Q4_0 files of 896-wide models have a tied Q8_0 one */
    uint64_t seed;
    const char *name;         /* general.name */
    const char *vocab_json;   /* tokenizer.json path, or NULL */
    const char *vocab_pre;    /* pre-tokenizer for vocab_json ("llama-bpe", "qwen2", ...) */
    const char *vocab_gguf;   /* vocab-only GGUF path, or NULL */
    const char *chat_template;/* Jinja source to embed, or NULL */
} synth_spec;

void synth_spec_default(synth_spec *s);
/* Shapes by name: "tiny", "llama-1b", "qwen2-0.5b"; 0 or -1 if unknown. */
int synth_spec_preset(synth_spec *s, const char *name);

int synth_model_write(const synth_spec *s, const char *path, char *err, size_t errlen);

#endif
