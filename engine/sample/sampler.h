/* Turning logits into the next token: greedy, temperature, top_k, top_p,
 * min_p, penalties over a window, logit_bias, and llama.cpp's DRY,
 * top-n-sigma, locally typical, XTC and mirostat (1 and 2); seeded RNG. */
#ifndef HEARTH_SAMPLER_H
#define HEARTH_SAMPLER_H

#include <stdint.h>
#include <stdbool.h>

typedef struct { int32_t id; float bias; } logit_bias_entry;

typedef struct sampler_params {
    float temperature;        /* <= 0: greedy */
    int top_k;                /* <= 0: off */
    float top_p;              /* >= 1: off */
    float min_p;              /* <= 0: off */
    float repeat_penalty;     /* 1: off (llama.cpp semantics) */
    float presence_penalty;   /* 0: off (OpenAI semantics) */
    float frequency_penalty;  /* 0: off */
    int penalty_last_n;       /* window; 0 off, -1 whole history */
    uint64_t seed;
    /* llama.cpp's further samplers; each is off at 0 (or its neutral value) */
    float typical_p;          /* locally typical sampling: off <= 0 or >= 1 */
    float top_n_sigma;        /* keep logits >= max - n * stddev; off <= 0 */
    float xtc_probability;    /* XTC: chance per step of cutting the top choices; off <= 0 */
    float xtc_threshold;      /* ... those with p >= this (all but the least of them); off > 0.5 */
    int mirostat;             /* 0 off, 1 or 2: replaces top_k/typical/top_p/min_p/XTC */
    float mirostat_tau, mirostat_eta;   /* target surprise (bits) and learning rate */
    float dry_multiplier;     /* DRY repetition penalty: off <= 0 */
    float dry_base;           /* penalty = multiplier * base^(length - allowed_length) */
    int dry_allowed_length;   /* repeats this long go unpenalized */
    int dry_penalty_last_n;   /* history it looks at; -1 or 0: all (up to 65536 tokens) */
    int n_dry_breakers;
    const int32_t *dry_breakers;         /* ids that end a repeat (e.g. "\n"); copied by sampler_new
                                          * (and by engine_submit, as logit_bias is) */
    int n_logit_bias;
    const logit_bias_entry *logit_bias;  /* copied by sampler_new; -INFINITY bans */
} sampler_params;

void sampler_params_default(sampler_params *p);

typedef struct sampler sampler;
sampler *sampler_new(const sampler_params *p, int n_vocab);
void sampler_free(sampler *s);
/* Record a token in the penalty history (prompt tokens too, as llama.cpp does). */
void sampler_accept(sampler *s, int32_t token);
void sampler_reset(sampler *s);
/* Pick the next token. logits (n_vocab) may be modified. */
int32_t sampler_sample(sampler *s, float *logits);
/* The token sampler_sample would pick from logits with every token allow()
 * refuses set to -inf, asking allow() about only a few: greedy asks about
 * its best max_checks (64 at most) in order, top_k builds its heap asking
 * only about the tokens that would enter it (at most max_checks questions).
 * logits (n_vocab) may be modified. SAMPLER_LAZY_NO when not decided that
 * way (no top_k, or top_n_sigma or mirostat, which need every allowed token;
 * DRY with a negative base; too many questions; no allowed token above
 * -inf): the sampler's state is then as it was (no random number drawn) and
 * the caller masks. */
#define SAMPLER_LAZY_NO (-2)
typedef bool (*sampler_allow_fn)(void *ctx, int32_t id);
int32_t sampler_sample_lazy(sampler *s, float *logits, sampler_allow_fn allow, void *ctx, int max_checks);
/* The same token as sampler_sample for a greedy sampler without logit_bias
 * or active penalties, read from the row as it is (no copy, one pass that
 * does not wait on a compare per token); -1 for every other sampler. */
int32_t sampler_greedy(const sampler *s, const float *logits);
/* Added by the sampler: the first stages of sampler_sample (logit_bias,
 * the penalties of the current window, then DRY) applied in place; for
 * tests and for callers that want the adjusted logits. */
void sampler_apply_bias_penalties(const sampler *s, float *logits);

/* Log-probabilities under the model's own distribution (softmax of raw
 * logits): the chosen token's and the top n. */
typedef struct { int32_t id; float logprob; } token_logprob;
float logprob_of(const float *logits, int n_vocab, int32_t id);
void logprob_top(const float *logits, int n_vocab, int n, token_logprob *out);

#endif
