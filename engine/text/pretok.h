/* Pre-tokenizers of byte-level BPE vocabularies: the regexes and rules that
 * each tokenizer.ggml.pre name stands for (as llama.cpp applies them), and
 * the driver that cuts text into the pieces BPE then merges. */
#ifndef HEARTH_PRETOK_H
#define HEARTH_PRETOK_H

#include <stddef.h>
#include <stdbool.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define PRETOK_MAX_RE 6

typedef struct pretok {
    pcre2_code *re[PRETOK_MAX_RE];  /* applied in turn, each to the pieces of the one before */
    int n_re;
    bool ignore_merges;             /* a piece that is a whole token is kept as it is */
    bool add_bos;                   /* BOS by default (the metadata may say otherwise) */
    bool no_default_bos;            /* no BOS found by its text: only the metadata's id */
} pretok;

/* Compile the pre-tokenizer named `name` into p. 0, or -1 with a one-line
 * error naming it and the known names. */
int pretok_init(pretok *p, const char *name, char *err, size_t errlen);
void pretok_free(pretok *p);

/* Whether name is known (and so what pretok_init would accept). */
bool pretok_known(const char *name);
/* Whether the pre-tokenizer adds BOS by default (llama-bpe, tekken, ...). */
bool pretok_adds_bos(const char *name);

/* Cut s[0..len) into pieces and call fn on each, in order: the matches of
 * each regex and the gaps between them are pieces of the next (invalid
 * UTF-8 matches nothing but stays in a gap). md needs one pair of offsets.
 * The pieces together are s exactly. */
typedef void (*pretok_fn)(void *ctx, const char *piece, size_t n);
void pretok_split(const pretok *p, pcre2_match_data *md, const char *s, size_t len,
                  pretok_fn fn, void *ctx);

#endif
