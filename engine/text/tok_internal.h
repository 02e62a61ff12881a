/* Private to the tokenizer files: the tokenizer's data (vocabulary, lookup
 * tables, special tokens, the BPE merges and pre-tokenizer) and the entry
 * points of the two encoders. */
#ifndef HEARTH_TOK_INTERNAL_H
#define HEARTH_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "engine/text/tokenizer.h"
#include "engine/text/tok_common.h"
#include "engine/text/pretok.h"

/* tokenizer.ggml.token_type values (as llama.cpp writes them). */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

enum { TOK_SPM, TOK_BPE };

/* A special token that eats the whitespace before (L) or after (R) it in raw text. */
enum { TOK_LSTRIP = 1, TOK_RSTRIP = 2 };

/* Text -> id, open addressing over the vocabulary's own strings. */
typedef struct {
    int32_t *slot;      /* token id or -1 */
    uint32_t mask;
} tok_map;

/* Byte-pair -> merge, open addressing keyed by the two token ids. */
typedef struct {
    uint64_t key;       /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank;
    int32_t id;         /* the merged token */
} bpe_merge;

struct tokenizer {
    int kind;                   /* TOK_SPM or TOK_BPE */
    int n_vocab;
    char *text;                 /* all token strings, each NUL-terminated */
    uint32_t *text_off, *text_len;
    char *piece;                /* decoded bytes of every token (no specials) */
    uint32_t *piece_off, *piece_len;
    size_t max_piece;           /* longest piece, rendered specials included */
    float *score;
    uint8_t *type;
    uint8_t *eog;               /* 1 for end-of-generation ids */
    uint8_t *strip;             /* TOK_LSTRIP/TOK_RSTRIP: whitespace a special token eats */
    tok_map map;

    int32_t bos, eos, eot, eom, unk, pad;
    int32_t fim_pre, fim_suf, fim_mid;
    bool add_bos, add_eos, add_space_prefix;

    /* Tokens matched in raw text before the model's own splitting:
     * per first byte, ids sorted longest first. */
    int32_t *special;           /* all candidates, grouped by first byte */
    uint32_t special_start[257];

    /* SPM */
    int32_t byte_tok[256];      /* <0xNN> tokens, -1 when absent */

    /* BPE */
    bpe_merge *merges;
    uint32_t merges_mask;
    int32_t byte_sym[256];      /* token of each byte's byte-level char */
    pretok pre;                 /* the pre-tokenizer: regexes and rules */
};

static inline const char *tok_text(const tokenizer *t, int32_t id) { return t->text + t->text_off[id]; }
static inline bool tok_valid_id(const tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab; }

/* Encoders of one raw fragment (no special tokens inside). */
void spm_encode(const tokenizer *t, const char *s, size_t len, bool space_prefix, tok_vec *out);
void bpe_encode(const tokenizer *t, const char *s, size_t len, tok_vec *out);

/* BPE set-up: merges table and pre-tokenizer; 0 or -1 with err. */
int bpe_init(tokenizer *t, const struct gguf_file *g, const char *pre, char *err, size_t errlen);
void bpe_free(tokenizer *t);

#endif
