/* The tokenizer common to both models: the vocabulary read from GGUF
 * metadata, special tokens and their ids, splitting text at special tokens,
 * decoding and the streaming detokenizer. The merging itself lives in
 * tok_spm.c (SentencePiece) and tok_bpe.c (byte-level BPE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>

#include "engine/text/tok_internal.h"
#include "engine/gguf/gguf.h"

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
static int build_map(tokenizer *t) {
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

/* ---- loading ---------------------------------------------------------- */

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* An id from metadata, or -1 when missing or out of range. */
static int32_t meta_id(const gguf_file *g, const char *key, int n_vocab) {
    int64_t v;
    if (!gguf_get_i64(g, key, &v) || v < 0 || v >= n_vocab) return -1;
    return (int32_t)v;
}

/* The first of the texts (NULL-terminated list) that is a special token of
 * the vocabulary: an ordinary word that happens to read "</s>" (Qwen has
 * one) is not. */
static int32_t find_any(const tokenizer *t, const char *const *texts) {
    for (; *texts; texts++) {
        int32_t id = tokenizer_find(t, *texts);
        if (id >= 0 && t->type[id] != TT_NORMAL) return id;
    }
    return -1;
}

static bool is_byte_token_text(const char *s, uint32_t len, unsigned *byte) {
    static const char hex[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return false;
    const char *hi = memchr(hex, s[3], 16), *lo = memchr(hex, s[4], 16);
    if (!hi || !lo) return false;
    *byte = (unsigned)((hi - hex) * 16 + (lo - hex));
    return true;
}

/* Bytes that token id stands for in decoded text, written to dst when not
 * NULL; returns the count. Control, unknown and unused tokens give none. */
static size_t decode_piece(const tokenizer *t, int32_t id, char *dst) {
    const char *s = tok_text(t, id);
    uint32_t len = t->text_len[id];
    unsigned byte;
    switch (t->type[id]) {
    case TT_USER:
        if (dst) memcpy(dst, s, len);
        return len;
    case TT_BYTE:
        if (is_byte_token_text(s, len, &byte)) {
            if (dst) *dst = (char)byte;
            return 1;
        }
        break;          /* a malformed byte token decodes as normal text */
    case TT_NORMAL:
        break;
    default:
        return 0;
    }
    size_t n = 0;
    if (t->kind == TOK_SPM) {
        /* U+2581 (E2 96 81) is SentencePiece's space */
        for (uint32_t i = 0; i < len; i++) {
            if (i + 2 < len && (unsigned char)s[i] == 0xE2 && (unsigned char)s[i + 1] == 0x96 &&
                (unsigned char)s[i + 2] == 0x81) {
                if (dst) dst[n] = ' ';
                n++;
                i += 2;
            } else {
                if (dst) dst[n] = s[i];
                n++;
            }
        }
        return n;
    }
    /* byte-level BPE: each code point stands for one byte; any other
     * character (not produced by the mapping) is kept as it is */
    for (uint32_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        int b = -1, cl = 1;
        if (c < 0x80) {
            b = bpe_cp_to_byte(c);
        } else if ((c & 0xE0) == 0xC0 && i + 1 < len && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
            cl = 2;
            b = bpe_cp_to_byte(((uint32_t)(c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F));
        }
        if (b >= 0) {
            if (dst) dst[n] = (char)b;
            n++;
        } else {
            if (dst) memcpy(dst + n, s + i, (size_t)cl);
            n += (size_t)cl;
        }
        i += (uint32_t)cl;
    }
    return n;
}

static int build_pieces(tokenizer *t) {
    size_t total = 0;
    t->piece_off = malloc((size_t)t->n_vocab * sizeof *t->piece_off);
    t->piece_len = malloc((size_t)t->n_vocab * sizeof *t->piece_len);
    if (!t->piece_off || !t->piece_len) return -1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t n = decode_piece(t, id, NULL);
        bool raw = t->type[id] == TT_CONTROL || t->type[id] == TT_UNKNOWN;    /* rendered as text */
        size_t longest = raw && t->text_len[id] > n ? t->text_len[id] : n;
        if (longest > t->max_piece) t->max_piece = longest;
        t->piece_off[id] = (uint32_t)total;
        t->piece_len[id] = (uint32_t)n;
        total += n;
        if (total > UINT32_MAX) return -1;
    }
    t->piece = malloc(total ? total : 1);
    if (!t->piece) return -1;
    for (int32_t id = 0; id < t->n_vocab; id++) decode_piece(t, id, t->piece + t->piece_off[id]);
    return 0;
}

/* Tokens that split raw text before the model's own pass: user-defined
 * ones always, control and unknown ones when parse_special. */
static bool is_splitting_type(int type) {
    return type == TT_USER || type == TT_CONTROL || type == TT_UNKNOWN;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int build_specials(tokenizer *t) {
    /* sort key: first byte, then longest first, then id */
    uint64_t *key = malloc((size_t)t->n_vocab * sizeof *key);
    if (!key) return -1;
    size_t n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        uint32_t len = t->text_len[id];
        if (!is_splitting_type(t->type[id]) || len == 0 || len > 0xFFFFFF) continue;
        uint64_t first = (unsigned char)tok_text(t, id)[0];
        key[n++] = first << 56 | (uint64_t)(0xFFFFFF - len) << 32 | (uint32_t)id;
    }
    qsort(key, n, sizeof *key, cmp_u64);
    t->special = malloc((n ? n : 1) * sizeof *t->special);
    if (!t->special) {
        free(key);
        return -1;
    }
    memset(t->special_start, 0, sizeof t->special_start);
    for (size_t i = 0; i < n; i++) {
        t->special[i] = (int32_t)(uint32_t)key[i];
        t->special_start[(key[i] >> 56) + 1]++;
    }
    for (int c = 0; c < 256; c++) t->special_start[c + 1] += t->special_start[c];
    free(key);
    return 0;
}

static int read_vocab(tokenizer *t, const gguf_file *g, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING) {
        seterr(err, errlen, "tokenizer: no tokenizer.ggml.tokens string array");
        return -1;
    }
    if (kv->arr_n == 0 || kv->arr_n > INT32_MAX / 4) {
        seterr(err, errlen, "tokenizer: bad vocabulary size %llu", (unsigned long long)kv->arr_n);
        return -1;
    }
    int n = (int)kv->arr_n;
    t->n_vocab = n;
    gguf_str *s = malloc((size_t)n * sizeof *s);
    if (!s) goto oom;
    if (!gguf_arr_strings(kv, s)) {
        free(s);
        seterr(err, errlen, "tokenizer: malformed tokenizer.ggml.tokens");
        return -1;
    }
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].len > UINT32_MAX / 2) { total = SIZE_MAX; break; }
        total += s[i].len + 1;
    }
    if (total > UINT32_MAX) {
        free(s);
        seterr(err, errlen, "tokenizer: vocabulary text too large");
        return -1;
    }
    t->text = malloc(total);
    t->text_off = malloc((size_t)n * sizeof *t->text_off);
    t->text_len = malloc((size_t)n * sizeof *t->text_len);
    t->score = calloc((size_t)n, sizeof *t->score);
    t->type = malloc((size_t)n);
    t->eog = calloc((size_t)n, 1);
    t->strip = calloc((size_t)n, 1);
    if (!t->text || !t->text_off || !t->text_len || !t->score || !t->type || !t->eog || !t->strip) {
        free(s);
        goto oom;
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(t->text + off, s[i].ptr, s[i].len);
        t->text[off + s[i].len] = 0;
        t->text_off[i] = (uint32_t)off;
        t->text_len[i] = (uint32_t)s[i].len;
        off += s[i].len + 1;
    }
    free(s);

    memset(t->type, TT_NORMAL, (size_t)n);
    kv = gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (kv && kv->type == GGUF_TYPE_ARRAY && kv->arr_n == (uint64_t)n) {
        for (int i = 0; i < n; i++) {
            int64_t v;
            if (gguf_arr_i64(kv, (uint64_t)i, &v) && v >= TT_NORMAL && v <= TT_BYTE) t->type[i] = (uint8_t)v;
        }
    }
    kv = gguf_find_kv(g, "tokenizer.ggml.scores");
    if (kv && kv->type == GGUF_TYPE_ARRAY && kv->arr_n == (uint64_t)n) {
        for (int i = 0; i < n; i++) {
            double v;
            if (gguf_arr_f64(kv, (uint64_t)i, &v) && isfinite(v)) t->score[i] = (float)v;
        }
    }
    if (build_map(t)) goto oom;
    return 0;
oom:
    seterr(err, errlen, "tokenizer: out of memory");
    return -1;
}

static void read_specials(tokenizer *t, const gguf_file *g, const char *pre) {
    static const char *const bos_texts[] = {"<s>", "<|begin_of_text|>", "<bos>", NULL};
    static const char *const eos_texts[] = {"</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", NULL};
    static const char *const unk_texts[] = {"<unk>", NULL};
    static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                            "<EOT>", "<｜end▁of▁sentence｜>", NULL};
    static const char *const eom_texts[] = {"<|eom_id|>", NULL};
    static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                            "<|endoftext|>", "</s>", "<|end_of_text|>", "<|eom_id|>",
                                            "<EOT>", "<｜end▁of▁sentence｜>", NULL};
    static const char *const pre_texts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>",
                                            "▁<PRE>", "<｜fim▁begin｜>", NULL};
    static const char *const suf_texts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>",
                                            "▁<SUF>", "<｜fim▁hole｜>", NULL};
    static const char *const mid_texts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>",
                                            "▁<MID>", "<｜fim▁end｜>", NULL};
    int n = t->n_vocab;
    const gguf_kv *bos_kv = gguf_find_kv(g, "tokenizer.ggml.bos_token_id");
    const gguf_kv *eos_kv = gguf_find_kv(g, "tokenizer.ggml.eos_token_id");
    const gguf_kv *unk_kv = gguf_find_kv(g, "tokenizer.ggml.unknown_token_id");
    /* a key present with an out-of-range value (e.g. 0xFFFFFFFF) means "none" */
    t->bos = bos_kv ? meta_id(g, "tokenizer.ggml.bos_token_id", n) : find_any(t, bos_texts);
    t->eos = eos_kv ? meta_id(g, "tokenizer.ggml.eos_token_id", n) : find_any(t, eos_texts);
    t->unk = unk_kv ? meta_id(g, "tokenizer.ggml.unknown_token_id", n)
                    : (t->kind == TOK_SPM ? find_any(t, unk_texts) : -1);
    t->pad = meta_id(g, "tokenizer.ggml.padding_token_id", n);
    t->eot = gguf_find_kv(g, "tokenizer.ggml.eot_token_id") ? meta_id(g, "tokenizer.ggml.eot_token_id", n)
                                                           : find_any(t, eot_texts);
    t->eom = gguf_find_kv(g, "tokenizer.ggml.eom_token_id") ? meta_id(g, "tokenizer.ggml.eom_token_id", n)
                                                           : find_any(t, eom_texts);

    t->fim_pre = meta_id(g, "tokenizer.ggml.fim_pre_token_id", n);
    if (t->fim_pre < 0) t->fim_pre = meta_id(g, "tokenizer.ggml.prefix_token_id", n);
    if (t->fim_pre < 0) t->fim_pre = find_any(t, pre_texts);
    t->fim_suf = meta_id(g, "tokenizer.ggml.fim_suf_token_id", n);
    if (t->fim_suf < 0) t->fim_suf = meta_id(g, "tokenizer.ggml.suffix_token_id", n);
    if (t->fim_suf < 0) t->fim_suf = find_any(t, suf_texts);
    t->fim_mid = meta_id(g, "tokenizer.ggml.fim_mid_token_id", n);
    if (t->fim_mid < 0) t->fim_mid = meta_id(g, "tokenizer.ggml.middle_token_id", n);
    if (t->fim_mid < 0) t->fim_mid = find_any(t, mid_texts);

    bool b;
    t->add_bos = gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) ? b
               : (t->kind == TOK_SPM || bpe_pre_adds_bos(pre));
    t->add_eos = gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b) ? b : false;
    t->add_space_prefix = gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b) ? b : t->kind == TOK_SPM;

    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
    if (t->eom >= 0) t->eog[t->eom] = 1;
    for (const char *const *p = eog_texts; *p; p++) {
        const char *one[] = {*p, NULL};
        int32_t id = find_any(t, one);
        if (id >= 0) t->eog[id] = 1;
    }
}

static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* Whether the metadata string at key, lowercased, contains any of the
 * NULL-terminated needles. */
static bool meta_contains(const gguf_file *g, const char *key, const char *const *needles) {
    gguf_str s;
    if (!gguf_get_str(g, key, &s)) return false;
    for (; *needles; needles++) {
        size_t n = strlen(*needles);
        for (uint64_t i = 0; n <= s.len && i <= s.len - n; i++) {
            size_t k = 0;
            while (k < n && ascii_lower(s.ptr[i + k]) == (*needles)[k]) k++;
            if (k == n) return true;
        }
    }
    return false;
}

static void set_strip(tokenizer *t, const char *text, uint8_t bit, bool on) {
    int32_t id = tokenizer_find(t, text);
    if (id < 0) return;
    t->strip[id] = on ? (uint8_t)(t->strip[id] | bit) : (uint8_t)(t->strip[id] & ~bit);
}

/* Whitespace stripping around special tokens is not stored in GGUF: it
 * follows the model, the way llama.cpp decides it. Phi-3's special tokens
 * (other than <s>, <unk> and <|endoftext|>) eat the whitespace after them;
 * the <mask> of some encoders eats the whitespace before it. */
static void read_strip_rules(tokenizer *t, const gguf_file *g) {
    static const char *const mask_pre[] = {"jina-v2-de", "jina-v2-es", "jina-v2-code", NULL};
    static const char *const mask_arch[] = {"nomic-bert-moe", "jina-bert-v3", NULL};
    static const char *const phi3[] = {"phi-3", "phi3", NULL};
    static const char *const modern_bert[] = {"modern-bert", NULL};
    if (meta_contains(g, "tokenizer.ggml.pre", mask_pre) || meta_contains(g, "general.architecture", mask_arch)) {
        set_strip(t, "<mask>", TOK_LSTRIP, true);
    } else if (meta_contains(g, "general.name", phi3)) {
        for (int32_t id = 0; id < t->n_vocab; id++)
            if (is_splitting_type(t->type[id])) t->strip[id] |= TOK_RSTRIP;
        set_strip(t, "</s>", TOK_RSTRIP, true);
        set_strip(t, "<unk>", TOK_RSTRIP, false);
        set_strip(t, "<s>", TOK_RSTRIP, false);
        set_strip(t, "<|endoftext|>", TOK_RSTRIP, false);
    } else if (meta_contains(g, "general.name", modern_bert)) {
        set_strip(t, "[MASK]", TOK_LSTRIP, true);
    }
}

tokenizer *tokenizer_load(const gguf_file *g, char *err, size_t errlen) {
    gguf_str model, pre_s;
    if (!gguf_get_str(g, "tokenizer.ggml.model", &model)) {
        seterr(err, errlen, "tokenizer: no tokenizer.ggml.model");
        return NULL;
    }
    int kind;
    if (gguf_str_eq(model, "llama")) kind = TOK_SPM;
    else if (gguf_str_eq(model, "gpt2")) kind = TOK_BPE;
    else {
        seterr(err, errlen, "tokenizer: unsupported tokenizer model '%.*s'",
               (int)(model.len > 64 ? 64 : model.len), model.ptr);
        return NULL;
    }
    char pre[64] = "default";
    if (gguf_get_str(g, "tokenizer.ggml.pre", &pre_s)) {
        if (pre_s.len >= sizeof pre) {
            seterr(err, errlen, "tokenizer: unknown pre-tokenizer (name too long)");
            return NULL;
        }
        memcpy(pre, pre_s.ptr, pre_s.len);
        pre[pre_s.len] = 0;
    }

    tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        seterr(err, errlen, "tokenizer: out of memory");
        return NULL;
    }
    t->kind = kind;
    if (read_vocab(t, g, err, errlen)) goto fail;
    if (build_pieces(t) || build_specials(t)) {
        seterr(err, errlen, "tokenizer: out of memory");
        goto fail;
    }
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        int32_t id = tok_lookup(t, s, 6);
        t->byte_tok[b] = id >= 0 && t->type[id] == TT_BYTE ? id : -1;
    }
    if (kind == TOK_BPE && bpe_init(t, g, pre, err, errlen)) goto fail;
    read_specials(t, g, pre);
    read_strip_rules(t, g);
    return t;
fail:
    tokenizer_free(t);
    return NULL;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    bpe_free(t);
    free(t->text);
    free(t->text_off);
    free(t->text_len);
    free(t->piece);
    free(t->piece_off);
    free(t->piece_len);
    free(t->score);
    free(t->type);
    free(t->eog);
    free(t->strip);
    free(t->map.slot);
    free(t->special);
    free(t);
}

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

static bool valid_id(const tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab; }

bool tokenizer_is_eog(const tokenizer *t, int32_t id) { return valid_id(t, id) && t->eog[id]; }
bool tokenizer_is_control(const tokenizer *t, int32_t id) { return valid_id(t, id) && t->type[id] == TT_CONTROL; }

int32_t tokenizer_find(const tokenizer *t, const char *text) {
    return text ? tok_lookup(t, text, strlen(text)) : -1;
}

const char *tokenizer_token_text(const tokenizer *t, int32_t id) {
    return valid_id(t, id) ? tok_text(t, id) : NULL;
}

/* ---- decoding --------------------------------------------------------- */

/* The decoded bytes of a token (pointer into the tokenizer, not copied). */
static const char *piece_of(const tokenizer *t, int32_t id, bool render_special, size_t *len) {
    if (!valid_id(t, id)) { *len = 0; return ""; }
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
