/* SentencePiece-style encoding (tokenizer.ggml.model = llama), the way
 * llama.cpp does it: spaces become U+2581, the text is cut into UTF-8
 * characters, and the adjacent pair whose joined text is the highest-scoring
 * token is merged until no pair is a token. A character left over that is
 * not a token is written as its <0xNN> byte tokens, or as unknown. */
#include <stdlib.h>
#include <string.h>

#include "engine/text/tok_internal.h"

typedef struct {
    uint32_t start, n;      /* bytes in the escaped text; n = 0 once merged away */
    int32_t prev, next;
} spm_sym;

typedef struct {
    const tokenizer *t;
    const char *text;
    spm_sym *sym;
    tok_heap heap;
} spm_state;

/* Only ordinary and user-defined tokens can be formed from text: a control
 * token such as <s> or a byte token such as <0x0A> must not be. */
static int32_t text_token(const tokenizer *t, const char *s, size_t n) {
    int32_t id = tok_lookup(t, s, n);
    if (id < 0 || (t->type[id] != TT_NORMAL && t->type[id] != TT_USER)) return -1;
    return id;
}

static void try_pair(spm_state *st, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t n = st->sym[l].n + st->sym[r].n;   /* adjacent symbols are contiguous */
    int32_t id = text_token(st->t, st->text + st->sym[l].start, n);
    if (id < 0) return;
    tok_cand c = {.key = -(double)st->t->score[id], .left = l, .right = r, .check = (int32_t)n};
    tok_heap_push(&st->heap, c);
}

void spm_encode(const tokenizer *t, const char *s, size_t len, bool space_prefix, tok_vec *out) {
    if (len == 0) return;
    if (len > (INT32_MAX - 3) / 3) { out->oom = true; return; }    /* symbol indices are int32 */
    /* escape: optional leading space, then every ' ' as U+2581 */
    char *text = malloc(3 * len + 3);
    if (!text) { out->oom = true; return; }
    size_t n = 0;
    if (space_prefix) { memcpy(text, "\xE2\x96\x81", 3); n = 3; }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') { memcpy(text + n, "\xE2\x96\x81", 3); n += 3; }
        else text[n++] = s[i];
    }
    spm_sym *sym = malloc(n * sizeof *sym);
    if (!sym) {
        free(text);
        out->oom = true;
        return;
    }

    spm_state st = {.t = t, .text = text, .sym = sym};
    int32_t ns = 0;
    for (size_t i = 0; i < n;) {
        /* a character is its lead byte and the continuation bytes that
         * follow, so broken UTF-8 never swallows part of an escaped space */
        size_t want = (size_t)tok_utf8_len((unsigned char)text[i]), cl = 1;
        while (cl < want && i + cl < n && ((unsigned char)text[i + cl] & 0xC0) == 0x80) cl++;
        sym[ns] = (spm_sym){.start = (uint32_t)i, .n = (uint32_t)cl, .prev = ns - 1, .next = ns + 1};
        ns++;
        i += cl;
    }
    if (ns) sym[ns - 1].next = -1;
    for (int32_t i = 1; i < ns; i++) try_pair(&st, i - 1, i);

    tok_cand c;
    while (tok_heap_pop(&st.heap, &c)) {
        spm_sym *l = &sym[c.left], *r = &sym[c.right];
        /* stale: one side was merged into something else since */
        if (l->n == 0 || r->n == 0 || l->n + r->n != (uint32_t)c.check) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = c.left;
        try_pair(&st, l->prev, c.left);
        try_pair(&st, c.left, l->next);
    }
    if (st.heap.oom) out->oom = true;

    for (int32_t i = ns ? 0 : -1; i >= 0; i = sym[i].next) {
        int32_t id = text_token(t, text + sym[i].start, sym[i].n);
        if (id >= 0) {
            tok_vec_push(out, id);
            continue;
        }
        /* byte fallback when every byte has its <0xNN> token, else one unknown */
        bool bytes = true;
        for (uint32_t k = 0; k < sym[i].n; k++)
            if (t->byte_tok[(unsigned char)text[sym[i].start + k]] < 0) bytes = false;
        if (bytes) {
            for (uint32_t k = 0; k < sym[i].n; k++)
                tok_vec_push(out, t->byte_tok[(unsigned char)text[sym[i].start + k]]);
        } else if (t->unk >= 0) {
            tok_vec_push(out, t->unk);
        }
    }
    free(st.heap.v);
    free(text);
    free(sym);
}
