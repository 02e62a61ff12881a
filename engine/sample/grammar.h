/* Grammar-constrained sampling: GBNF (llama.cpp's `grammar` syntax) parsed
 * to rules once per request, an incremental matcher over the bytes of the
 * accepted text, and the set of vocabulary tokens that may come next.
 *
 *   grammar_parse       text -> rules (grammar_parse.c), errors with line:column
 *   grammar_matcher     a set of pushdown stacks over code points, advanced
 *                       byte by byte (grammar_match.c)
 *   grammar_vocab       every token's bytes in one trie (grammar_vocab.c)
 *   grammar_sampler     matcher + vocabulary: is this token possible, the full
 *                       mask of possible tokens, accept a token (grammar_vocab.c)
 *
 * Every structure is bounded (rule count, elements, nesting, stacks, cached
 * states), so a hostile grammar is an error or a slower step, never a hang. */
#ifndef HEARTH_GRAMMAR_H
#define HEARTH_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on one grammar. */
#define GRAMMAR_MAX_TEXT      (1u << 20)   /* bytes of GBNF source */
#define GRAMMAR_MAX_RULES     20000
#define GRAMMAR_MAX_ELEMS     (1u << 19)   /* elements after repetitions are expanded */
#define GRAMMAR_MAX_NESTING   64           /* parentheses */
#define GRAMMAR_MAX_REPEAT    10000        /* m and n of {m,n} */
#define GRAMMAR_MAX_TOKEN_BYTES 1024       /* longer tokens are never possible (none are this long in practice) */

typedef struct grammar grammar;

/* The rules of GBNF text (len bytes); NULL with "line L, column C: what" in err.
 * The start rule is `root`. */
grammar *grammar_parse(const char *text, size_t len, char *err, size_t errlen);
grammar *grammar_clone(const grammar *g);
void grammar_free(grammar *g);
int grammar_n_rules(const grammar *g);

/* ---- the matcher ------------------------------------------------------------ */
typedef struct grammar_matcher grammar_matcher;

/* g must outlive the matcher. NULL without memory. */
grammar_matcher *grammar_matcher_new(const grammar *g);
void grammar_matcher_free(grammar_matcher *m);
/* Advance over n bytes; false (and the state unchanged) when the grammar
 * cannot take them. A token may end inside a UTF-8 character. */
bool grammar_matcher_accept(grammar_matcher *m, const char *s, size_t n);
/* The text so far is a complete sentence of the grammar. */
bool grammar_matcher_can_end(const grammar_matcher *m);
/* Complete, and nothing may follow. */
bool grammar_matcher_done(const grammar_matcher *m);

/* States for walking many candidates from one point: an id valid until the
 * next grammar_matcher_accept / _set_state (the table may be rebuilt then). */
#define GM_DEAD (-1)
int32_t gm_current(const grammar_matcher *m);
int32_t gm_step(grammar_matcher *m, int32_t state, uint8_t byte);   /* GM_DEAD if impossible */
bool gm_can_end(const grammar_matcher *m, int32_t state);
void gm_set_state(grammar_matcher *m, int32_t state);
/* Bumps whenever state ids are renumbered (caches keyed by id must drop). */
uint64_t gm_epoch(const grammar_matcher *m);
/* Drop cached states if the table is large; call between tokens. */
void gm_trim(grammar_matcher *m);

/* ---- the vocabulary --------------------------------------------------------- */
typedef struct grammar_vocab grammar_vocab;

enum { GV_TEXT = 0, GV_EOG = 1, GV_NEVER = 2 };
/* Token id's bytes and kind (GV_TEXT: its bytes are matched; GV_EOG: allowed
 * when the grammar can end; GV_NEVER: control tokens, never allowed). */
grammar_vocab *grammar_vocab_new(int n_vocab, const char *const *bytes, const size_t *lens, const uint8_t *kind);
void grammar_vocab_free(grammar_vocab *v);
int grammar_vocab_n(const grammar_vocab *v);
size_t grammar_vocab_trie_nodes(const grammar_vocab *v);

/* ---- sampling ------------------------------------------------------------------ */
typedef struct grammar_sampler grammar_sampler;

/* Owns a clone of g; v must outlive it. allow_eog false: EOG tokens are
 * never possible (ignore_eos). */
grammar_sampler *grammar_sampler_new(const grammar *g, const grammar_vocab *v, bool allow_eog);
void grammar_sampler_free(grammar_sampler *s);
/* May token id come next? (the fast path: one token's bytes) */
bool grammar_sampler_allows(grammar_sampler *s, int32_t id);
/* Every possible token as a bitmap of n_vocab bits, valid until the next call
 * on s; *n_allowed gets the count. Cached per matcher state. */
const uint64_t *grammar_sampler_mask(grammar_sampler *s, int *n_allowed);
/* logits[i] = -inf for every token the mask leaves out. */
void grammar_mask_apply(const uint64_t *mask, float *logits, int n_vocab);
/* Take token id (which must be allowed); false if it was not. */
bool grammar_sampler_accept(grammar_sampler *s, int32_t id);
bool grammar_sampler_done(const grammar_sampler *s);
/* How many times the full mask was asked for (cached or not). */
uint64_t grammar_sampler_n_masks(const grammar_sampler *s);
const grammar_matcher *grammar_sampler_matcher(const grammar_sampler *s);

/* For tests only: with the mask off, jobs with a grammar sample as if they
 * had none (the planted control of the tests that check outputs parse). */
void grammar_set_mask_disabled(bool off);
bool grammar_mask_disabled(void);
/* For tests only: matchers made after this keep every unfinished UTF-8
 * character's bits (the oracle of the merged whole partial states), and how
 * many states a matcher holds (the control that the merging is taken). */
void gm_set_merge_disabled(bool off);
uint32_t gm_n_states(const grammar_matcher *m);
/* For tests only: matchers made after this compute every byte's transition
 * on its own (the oracle of the byte classes that share one), and how many
 * transitions a matcher has computed (the control that they are shared). */
void gm_set_share_disabled(bool off);
uint64_t gm_n_computed(const grammar_matcher *m);

#endif
