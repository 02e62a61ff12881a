/* Byte-level BPE (tokenizer.ggml.model = gpt2). The text is first cut into
 * pre-tokens by the regexes named by tokenizer.ggml.pre (PCRE2, compiled
 * once per tokenizer). Each byte of a pre-token starts as the token of its
 * byte-level character, and the adjacent pair with the lowest merge rank is
 * merged until no pair is in the merge list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/text/tok_internal.h"
#include "engine/gguf/gguf.h"

/* ---- the byte-level mapping ------------------------------------------
 * Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves;
 * the other 68 bytes take the code points 256.. in byte order. */

uint32_t bpe_byte_to_cp(unsigned b) {
    if (b <= 0x20) return 256 + b;                  /* 33 of them */
    if (b >= 0x7F && b <= 0xA0) return 289 + (b - 0x7F);  /* 34 */
    if (b == 0xAD) return 323;
    return b;
}

int bpe_cp_to_byte(uint32_t cp) {
    if (cp < 256) return (cp <= 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) ? -1 : (int)cp;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 0x7F);
    if (cp == 323) return 0xAD;
    return -1;
}

/* UTF-8 of the byte-level character of b (1 or 2 bytes). */
static int byte_char(unsigned b, char *out) {
    uint32_t cp = bpe_byte_to_cp(b);
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* ---- pre-tokenizers ---------------------------------------------------- */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* contractions in either case, a letter run with one leading non-letter,
 * numbers cut into groups (llama3: up to 3 digits; qwen2: single digits) */
#define RE_CONTRACT "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3 RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct {
    const char *names;          /* '|'-separated tokenizer.ggml.pre values */
    const char *re[2];
    bool ignore_merges, add_bos;
} pre_def;

static const pre_def pre_defs[] = {
    {"default|gpt-2|gpt2|mpt|olmo|phi-2", {RE_GPT2, NULL}, false, false},
    {"llama3|llama-v3|llama-bpe|falcon3|pixtral", {RE_LLAMA3, NULL}, true, true},
    {"smaug-bpe", {RE_LLAMA3, NULL}, false, false},
    {"qwen2|deepseek-r1-qwen|megrez", {RE_QWEN2, NULL}, false, false},
    /* digits split one by one first, then the GPT-2 rules on what is between */
    {"smollm|starcoder|refact|command-r|codeshell|exaone|minerva", {"\\p{N}", RE_GPT2}, false, false},
};

static const pre_def *find_pre(const char *pre) {
    size_t n = strlen(pre);
    for (size_t i = 0; i < sizeof pre_defs / sizeof pre_defs[0]; i++) {
        for (const char *p = pre_defs[i].names; *p;) {
            const char *e = strchr(p, '|');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len == n && memcmp(p, pre, n) == 0) return &pre_defs[i];
            p += len + (e != NULL);
        }
    }
    return NULL;
}

bool bpe_pre_adds_bos(const char *pre) {
    const pre_def *d = find_pre(pre);
    return d && d->add_bos;
}

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
    const pre_def *d = find_pre(pre);
    if (!d) {
        snprintf(err, errlen, "tokenizer: unknown pre-tokenizer '%s'", pre);
        return -1;
    }
    t->ignore_merges = d->ignore_merges;
    for (int i = 0; i < 2 && d->re[i]; i++) {
        int code;
        PCRE2_SIZE off;
        t->re[i] = pcre2_compile((PCRE2_SPTR)d->re[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &off, NULL);
        if (!t->re[i]) {
            snprintf(err, errlen, "tokenizer: pre-tokenizer regex failed to compile (%d)", code);
            return -1;
        }
        t->n_re = i + 1;
        pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE);    /* the interpreter remains if JIT is absent */
    }
    for (int b = 0; b < 256; b++) {
        char c[2];
        t->byte_sym[b] = tok_lookup(t, c, (size_t)byte_char((unsigned)b, c));
    }
    return load_merges(t, g, err, errlen);
}

void bpe_free(tokenizer *t) {
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
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
    int n = byte_char(byte, c);
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
    if (t->ignore_merges) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) k += (size_t)byte_char(s[i], st->mapped + k);
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

/* Cut s by regex `level` into matches and the gaps between them (gaps are
 * kept: invalid UTF-8 matches nothing but must still be encoded); each piece
 * goes to the next regex, or to BPE after the last. */
static void split(bpe_state *st, int level, const char *s, size_t len) {
    if (len == 0) return;
    if (level == st->t->n_re) {
        bpe_word(st, (const unsigned char *)s, len);
        return;
    }
    size_t done = 0;
    while (done < len) {
        int rc = pcre2_match(st->t->re[level], (PCRE2_SPTR)s, len, done, 0, st->md, NULL);
        if (rc < 0) break;                      /* no match (or a match error): the rest is one gap */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
        size_t b = ov[0], e = ov[1];
        if (e <= b || e > len) break;           /* no pattern here matches empty */
        if (b > done) split(st, level + 1, s + done, b - done);
        split(st, level + 1, s + b, e - b);
        done = e;
    }
    if (done < len) split(st, level + 1, s + done, len - done);
}

void bpe_encode(const tokenizer *t, const char *s, size_t len, tok_vec *out) {
    bpe_state st = {.t = t, .out = out};
    st.md = pcre2_match_data_create(1, NULL);
    if (!st.md) { out->oom = true; return; }
    split(&st, 0, s, len);
    pcre2_match_data_free(st.md);
    free(st.sym);
    free(st.mapped);
    free(st.heap.v);
}
