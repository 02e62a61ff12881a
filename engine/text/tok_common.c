/* Helpers the tokenizer files share: the growable id array, the merge
 * candidate heap, text -> id lookup over the vocabulary, and the byte-level
 * mapping of GPT-2 style vocabularies. */
#include <stdlib.h>
#include <string.h>

#include "engine/text/tok_internal.h"

/* ---- small containers ----------------------------------------------- */

void tok_vec_push(tok_vec *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p) { v->oom = true; return; }
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = id;
}

static bool cand_less(const tok_cand *a, const tok_cand *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

void tok_heap_push(tok_heap *h, tok_cand c) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        tok_cand *p = realloc(h->v, cap * sizeof *p);
        if (!p) { h->oom = true; return; }
        h->v = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!cand_less(&c, &h->v[up])) break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = c;
}

bool tok_heap_pop(tok_heap *h, tok_cand *out) {
    if (h->n == 0) return false;
    *out = h->v[0];
    tok_cand last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && cand_less(&h->v[c + 1], &h->v[c])) c++;
        if (!cand_less(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return true;
}

/* ---- text -> id ------------------------------------------------------ */

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;               /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int32_t tok_lookup(const tokenizer *t, const char *s, size_t len) {
    uint32_t i = hash_bytes(s, len) & t->map.mask;
    for (;;) {
        int32_t id = t->map.slot[i];
        if (id < 0) return -1;
        if (t->text_len[id] == len && memcmp(tok_text(t, id), s, len) == 0) return id;
        i = (i + 1) & t->map.mask;
    }
}

/* The first id wins when two tokens share a text. */
int tok_build_map(tokenizer *t) {
    uint32_t cap = 16;
    while (cap < (uint32_t)t->n_vocab * 2u) cap *= 2;
    t->map.slot = malloc(cap * sizeof *t->map.slot);
    if (!t->map.slot) return -1;
    memset(t->map.slot, 0xff, cap * sizeof *t->map.slot);
    t->map.mask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *s = tok_text(t, id);
        uint32_t len = t->text_len[id];
        uint32_t i = hash_bytes(s, len) & t->map.mask;
        bool dup = false;
        while (t->map.slot[i] >= 0) {
            int32_t o = t->map.slot[i];
            if (t->text_len[o] == len && memcmp(tok_text(t, o), s, len) == 0) { dup = true; break; }
            i = (i + 1) & t->map.mask;
        }
        if (!dup) t->map.slot[i] = id;
    }
    return 0;
}

/* ---- the byte-level mapping ------------------------------------------
 * Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves;
 * the other 68 bytes take the code points 256.. in byte order. */

uint32_t tok_byte_to_cp(unsigned b) {
    if (b <= 0x20) return 256 + b;                  /* 33 of them */
    if (b >= 0x7F && b <= 0xA0) return 289 + (b - 0x7F);  /* 34 */
    if (b == 0xAD) return 323;
    return b;
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return (cp <= 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) ? -1 : (int)cp;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 0x7F);
    if (cp == 323) return 0xAD;
    return -1;
}

/* UTF-8 of the byte-level character of b (1 or 2 bytes). */
int tok_byte_char(unsigned b, char *out) {
    uint32_t cp = tok_byte_to_cp(b);
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}
