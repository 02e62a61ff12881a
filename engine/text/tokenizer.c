/* Encoding text: raw runs between special tokens go to the model's encoder
 * (tok_spm.c or tok_bpe.c); special tokens become their ids. And the
 * tokenizer's small accessors. Loading is in tok_vocab.c, decoding in
 * tok_decode.c. */
#include <stdlib.h>
#include <string.h>
#include <limits.h>

#include "engine/text/tok_internal.h"

/* ---- encoding --------------------------------------------------------- */

static void encode_raw(const tokenizer *t, const char *s, size_t len, bool after_special, tok_vec *out) {
    if (t->kind == TOK_SPM) spm_encode(t, s, len, t->add_space_prefix && after_special, out);
    else bpe_encode(t, s, len, out);
}

/* isspace() in the C locale, whatever the process locale is. */
static bool is_c_space(char c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* The longest special token allowed here that starts at s, or -1. */
static int32_t match_special(const tokenizer *t, const char *s, size_t avail, bool parse_special) {
    unsigned c = (unsigned char)s[0];
    for (uint32_t k = t->special_start[c]; k < t->special_start[c + 1]; k++) {
        int32_t id = t->special[k];
        if (!parse_special && t->type[id] != TT_USER) continue;
        uint32_t n = t->text_len[id];
        if (n <= avail && memcmp(s, tok_text(t, id), n) == 0) return id;
    }
    return -1;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len,
                     bool add_special, bool parse_special, int32_t **out) {
    tok_vec v = {0};
    *out = NULL;
    if (!text) len = 0;
    if (add_special && t->add_bos && t->bos >= 0) tok_vec_push(&v, t->bos);
    /* raw text runs between special tokens are encoded separately;
     * SentencePiece adds its space prefix at the start and after each special */
    bool after_special = true;
    size_t raw = 0;
    for (size_t i = 0; i < len;) {
        int32_t id = match_special(t, text + i, len - i, parse_special);
        if (id < 0) { i++; continue; }
        size_t end = i;
        if (t->strip[id] & TOK_LSTRIP)
            while (end > raw && is_c_space(text[end - 1])) end--;
        if (end > raw) encode_raw(t, text + raw, end - raw, after_special, &v);
        tok_vec_push(&v, id);
        after_special = true;
        i += t->text_len[id];
        if (t->strip[id] & TOK_RSTRIP)
            while (i < len && is_c_space(text[i])) i++;
        raw = i;
    }
    if (len > raw) encode_raw(t, text + raw, len - raw, after_special, &v);
    if (add_special && t->add_eos && t->eos >= 0) tok_vec_push(&v, t->eos);
    if (!v.v) {                 /* no tokens: still hand back an array */
        v.v = malloc(sizeof *v.v);
        if (!v.v) v.oom = true;
    }
    if (v.oom || v.n > INT_MAX) {
        free(v.v);
        return -1;
    }
    *out = v.v;
    return (int)v.n;
}

/* ---- accessors -------------------------------------------------------- */

int tokenizer_n_vocab(const tokenizer *t) { return t->n_vocab; }
int32_t tokenizer_bos(const tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const tokenizer *t) { return t->eos; }
int32_t tokenizer_eot(const tokenizer *t) { return t->eot; }
bool tokenizer_add_bos(const tokenizer *t) { return t->add_bos && t->bos >= 0; }
bool tokenizer_add_eos(const tokenizer *t) { return t->add_eos && t->eos >= 0; }
int32_t tokenizer_fim_pre(const tokenizer *t) { return t->fim_pre; }
int32_t tokenizer_fim_suf(const tokenizer *t) { return t->fim_suf; }
int32_t tokenizer_fim_mid(const tokenizer *t) { return t->fim_mid; }
size_t tokenizer_max_piece(const tokenizer *t) { return t->max_piece; }


bool tokenizer_is_eog(const tokenizer *t, int32_t id) { return tok_valid_id(t, id) && t->eog[id]; }
bool tokenizer_is_control(const tokenizer *t, int32_t id) { return tok_valid_id(t, id) && t->type[id] == TT_CONTROL; }

int32_t tokenizer_find(const tokenizer *t, const char *text) {
    return text ? tok_lookup(t, text, strlen(text)) : -1;
}

const char *tokenizer_token_text(const tokenizer *t, int32_t id) {
    return tok_valid_id(t, id) ? tok_text(t, id) : NULL;
}
