/* Decoding ids back to bytes, whole and streaming (the streaming
 * detokenizer never emits a partial UTF-8 character). */
#include <stdlib.h>
#include <string.h>

#include "engine/text/tok_internal.h"

/* ---- decoding --------------------------------------------------------- */

/* The decoded bytes of a token (pointer into the tokenizer, not copied). */
static const char *piece_of(const tokenizer *t, int32_t id, bool render_special, size_t *len) {
    if (!tok_valid_id(t, id)) { *len = 0; return ""; }
    int ty = t->type[id];
    if (render_special && (ty == TT_CONTROL || ty == TT_UNKNOWN)) {
        *len = t->text_len[id];
        return tok_text(t, id);
    }
    *len = t->piece_len[id];
    return t->piece + t->piece_off[id];
}

/* Returns the bytes copied: at most cap, so a piece longer than cap is cut. */
size_t tokenizer_token_bytes(const tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap) {
    size_t n;
    const char *p = piece_of(t, id, render_special, &n);
    if (n > cap) n = cap;
    if (n) memcpy(buf, p, n);
    return n;
}

/* The piece with SentencePiece's leading space dropped from the first one
 * that has any bytes (so right after a BOS that is not rendered), as
 * llama.cpp does: encoding added that space. */
static const char *piece_at(const tokenizer *t, int32_t id, bool render_special, bool *at_start, size_t *len) {
    const char *p = piece_of(t, id, render_special, len);
    if (!*at_start || *len == 0) return p;
    *at_start = false;
    if (t->kind == TOK_SPM && t->add_space_prefix && p[0] == ' ') {
        p++;
        (*len)--;
    }
    return p;
}

char *tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, bool render_special, size_t *out_len) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        piece_of(t, ids[i], render_special, &len);
        total += len;
    }
    char *s = malloc(total + 1);
    if (!s) {
        if (out_len) *out_len = 0;
        return NULL;
    }
    size_t k = 0;
    bool at_start = true;
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *p = piece_at(t, ids[i], render_special, &at_start, &len);
        memcpy(s + k, p, len);
        k += len;
    }
    s[k] = 0;
    if (out_len) *out_len = k;
    return s;
}

/* ---- streaming -------------------------------------------------------- */

void detok_init(detok_stream *s, const tokenizer *t, bool render_special) {
    memset(s, 0, sizeof *s);
    s->t = t;
    s->render_special = render_special;
    s->at_start = true;
}

/* How many bytes of b[0..n) are safe to emit: all but a trailing sequence
 * that is a valid start of a UTF-8 character still missing bytes. */
static size_t complete_prefix(const unsigned char *b, size_t n) {
    size_t lim = n > 4 ? n - 4 : 0;
    for (size_t j = n; j-- > lim;) {
        if ((b[j] & 0xC0) == 0x80) continue;       /* continuation: look further back */
        size_t need = b[j] >= 0xC2 && b[j] <= 0xDF ? 2 : b[j] >= 0xE0 && b[j] <= 0xEF ? 3
                    : b[j] >= 0xF0 && b[j] <= 0xF4 ? 4 : 1;
        return need > n - j ? j : n;
    }
    return n;
}

/* out gets the pending bytes of the last call and then the piece; a piece
 * that does not fit in cap is cut (see tokenizer_max_piece). */
size_t detok_push(detok_stream *s, int32_t id, char *out, size_t cap) {
    size_t len;
    const char *p = piece_at(s->t, id, s->render_special, &s->at_start, &len);
    size_t np = (size_t)s->n_pending;
    if (np > cap) np = cap;     /* cannot happen with any sane cap; keeps bounds */
    if (len > cap - np) len = cap - np;
    memcpy(out, s->pending, np);
    if (len) memcpy(out + np, p, len);
    size_t total = np + len;
    size_t k = complete_prefix((const unsigned char *)out, total);
    s->n_pending = (int)(total - k);
    memcpy(s->pending, out + k, total - k);
    return k;
}

size_t detok_flush(detok_stream *s, char *out, size_t cap) {
    size_t n = (size_t)s->n_pending;
    if (n > cap) n = cap;
    memcpy(out, s->pending, n);
    s->n_pending = 0;
    return n;
}
