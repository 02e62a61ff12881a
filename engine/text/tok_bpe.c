/* Byte-level BPE (tokenizer.ggml.model = gpt2). The text is first cut into
 * pre-tokens by the pre-tokenizer named by tokenizer.ggml.pre (pretok.c).
 * Each byte of a pre-token starts as the token of its
 * byte-level character, and the adjacent pair with the lowest merge rank is
 * merged until no pair is in the merge list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/text/tok_internal.h"
#include "engine/gguf/gguf.h"

/* ---- merges ------------------------------------------------------------ */

static uint32_t pair_hash(int32_t a, int32_t b) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    return (uint32_t)((k * 0x9E3779B97F4A7C15ull) >> 32);
}

static const bpe_merge *merge_find(const tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (uint32_t i = pair_hash(a, b) & t->merges_mask;; i = (i + 1) & t->merges_mask) {
        if (t->merges[i].key == key) return &t->merges[i];
        if (t->merges[i].key == 0) return NULL;
    }
}

/* Each "a b" of tokenizer.ggml.merges, ranked by position; a merge whose
 * parts or result are not tokens can never apply and is dropped. */
static int load_merges(tokenizer *t, const gguf_file *g, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find_kv(g, "tokenizer.ggml.merges");
    if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING || kv->arr_n > INT32_MAX / 4) {
        snprintf(err, errlen, "tokenizer: gpt2 model without a tokenizer.ggml.merges string array");
        return -1;
    }
    uint32_t cap = 16;
    while (cap < kv->arr_n * 2) cap *= 2;
    gguf_str *s = malloc((kv->arr_n ? kv->arr_n : 1) * sizeof *s);
    t->merges = calloc(cap, sizeof *t->merges);
    if (!s || !t->merges) {
        free(s);
        snprintf(err, errlen, "tokenizer: out of memory");
        return -1;
    }
    t->merges_mask = cap - 1;
    if (!gguf_arr_strings(kv, s)) {
        free(s);
        snprintf(err, errlen, "tokenizer: malformed tokenizer.ggml.merges");
        return -1;
    }
    char *joined = NULL;
    size_t jcap = 0;
    for (uint64_t r = 0; r < kv->arr_n; r++) {
        const char *m = s[r].ptr;
        size_t len = s[r].len;
        /* the separator is the first space after the first byte */
        const char *sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        if (!sp) continue;
        size_t la = (size_t)(sp - m), lb = len - la - 1;
        if (la + lb > jcap) {
            free(joined);
            jcap = (la + lb) * 2;
            joined = malloc(jcap);
            if (!joined) {
                free(s);
                snprintf(err, errlen, "tokenizer: out of memory");
                return -1;
            }
        }
        memcpy(joined, m, la);
        memcpy(joined + la, sp + 1, lb);
        int32_t a = tok_lookup(t, m, la), b = tok_lookup(t, sp + 1, lb), ab = tok_lookup(t, joined, la + lb);
        if (a < 0 || b < 0 || ab < 0) continue;
        uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
        uint32_t i = pair_hash(a, b) & t->merges_mask;
        while (t->merges[i].key && t->merges[i].key != key) i = (i + 1) & t->merges_mask;
        if (t->merges[i].key) continue;          /* the first (lowest) rank stays */
        t->merges[i] = (bpe_merge){.key = key, .rank = (int32_t)r, .id = ab};
    }
    free(joined);
    free(s);
    return 0;
}

int bpe_init(tokenizer *t, const gguf_file *g, const char *pre, char *err, size_t errlen) {
    if (pretok_init(&t->pre, pre, err, errlen)) return -1;
    for (int b = 0; b < 256; b++) {
        char c[2];
        t->byte_sym[b] = tok_lookup(t, c, (size_t)tok_byte_char((unsigned)b, c));
    }
    return load_merges(t, g, err, errlen);
}

void bpe_free(tokenizer *t) {
    pretok_free(&t->pre);
    free(t->merges);
}

/* ---- encoding ------------------------------------------------------------ */

typedef struct {
    int32_t id, prev, next;     /* id -1: a byte with no token; -2: merged away */
} bpe_sym;

typedef struct {
    const tokenizer *t;
    pcre2_match_data *md;
    bpe_sym *sym;
    size_t sym_cap;
    char *mapped;               /* a pre-token in byte-level characters */
    tok_heap heap;
    tok_vec *out;
} bpe_state;

static void try_pair(bpe_state *st, int32_t l, int32_t r) {
    if (l < 0 || r < 0 || st->sym[l].id < 0 || st->sym[r].id < 0) return;
    const bpe_merge *m = merge_find(st->t, st->sym[l].id, st->sym[r].id);
    if (!m) return;
    tok_heap_push(&st->heap, (tok_cand){.key = m->rank, .left = l, .right = r, .check = m->id});
}

/* A byte whose byte-level character is not in the vocabulary becomes the
 * tokens of that character's single bytes where those exist, else nothing
 * (as llama.cpp does). */
static void emit(bpe_state *st, int32_t id, unsigned char byte) {
    if (id >= 0) {
        tok_vec_push(st->out, id);
        return;
    }
    char c[2];
    int n = tok_byte_char(byte, c);
    for (int i = 0; i < n; i++) {
        int32_t one = tok_lookup(st->t, c + i, 1);
        if (one >= 0) tok_vec_push(st->out, one);
    }
}

static void bpe_word(bpe_state *st, const unsigned char *s, size_t n) {
    const tokenizer *t = st->t;
    if (n == 1) { emit(st, t->byte_sym[s[0]], s[0]); return; }
    if (n > INT32_MAX / 2) { st->out->oom = true; return; }   /* symbol indices are int32 */
    if (n > st->sym_cap) {
        free(st->sym);
        free(st->mapped);
        st->sym_cap = n * 2;
        st->sym = malloc(st->sym_cap * sizeof *st->sym);
        st->mapped = malloc(st->sym_cap * 2);
        if (!st->sym || !st->mapped) {
            st->sym_cap = 0;
            st->out->oom = true;
            return;
        }
    }
    if (t->pre.ignore_merges) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) k += (size_t)tok_byte_char(s[i], st->mapped + k);
        int32_t id = tok_lookup(t, st->mapped, k);
        if (id >= 0) { tok_vec_push(st->out, id); return; }
    }
    bpe_sym *sym = st->sym;
    for (size_t i = 0; i < n; i++)
        sym[i] = (bpe_sym){.id = t->byte_sym[s[i]], .prev = (int32_t)i - 1, .next = (int32_t)i + 1};
    sym[n - 1].next = -1;
    st->heap.n = 0;
    for (size_t i = 1; i < n; i++) try_pair(st, (int32_t)i - 1, (int32_t)i);
    tok_cand c;
    while (tok_heap_pop(&st->heap, &c)) {
        bpe_sym *l = &sym[c.left], *r = &sym[c.right];
        /* stale: a side was merged since, or the pair is no longer this one */
        if (l->id < 0 || r->id < 0 || l->next != c.right) continue;
        const bpe_merge *m = merge_find(t, l->id, r->id);
        if (!m || m->id != c.check || m->rank != (int32_t)c.key) continue;
        l->id = m->id;
        r->id = -2;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = c.left;
        try_pair(st, l->prev, c.left);
        try_pair(st, c.left, l->next);
    }
    if (st->heap.oom) st->out->oom = true;
    for (int32_t i = 0; i >= 0; i = sym[i].next) emit(st, sym[i].id, s[i]);
}

static void bpe_piece(void *ctx, const char *s, size_t n) {
    bpe_word(ctx, (const unsigned char *)s, n);
}

void bpe_encode(const tokenizer *t, const char *s, size_t len, tok_vec *out) {
    bpe_state st = {.t = t, .out = out};
    st.md = pcre2_match_data_create(1, NULL);
    if (!st.md) { out->oom = true; return; }
    pretok_split(&t->pre, st.md, s, len, bpe_piece, &st);
    pcre2_match_data_free(st.md);
    free(st.sym);
    free(st.mapped);
    free(st.heap.v);
}
