/* Loading a tokenizer from GGUF metadata: the vocabulary, the decoded
 * bytes of every token, the special tokens (matched in raw text) and their
 * ids, and the whitespace rules around them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>

#include "engine/text/tok_internal.h"
#include "engine/text/pretok.h"
#include "engine/gguf/gguf.h"

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
            b = tok_cp_to_byte(c);
        } else if ((c & 0xE0) == 0xC0 && i + 1 < len && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
            cl = 2;
            b = tok_cp_to_byte(((uint32_t)(c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F));
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
    if (tok_build_map(t)) goto oom;
    return 0;
oom:
    seterr(err, errlen, "tokenizer: out of memory");
    return -1;
}

static void read_specials(tokenizer *t, const gguf_file *g) {
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
    bool guess_bos = !(t->kind == TOK_BPE && t->pre.no_default_bos);
    t->bos = bos_kv ? meta_id(g, "tokenizer.ggml.bos_token_id", n) : guess_bos ? find_any(t, bos_texts) : -1;
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
               : (t->kind == TOK_SPM || (t->kind == TOK_BPE && t->pre.add_bos));
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
        /* a name too long to be known is cut: still unknown, and named */
        size_t n = pre_s.len < sizeof pre - 1 ? (size_t)pre_s.len : sizeof pre - 1;
        memcpy(pre, pre_s.ptr, n);
        pre[n] = 0;
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
    read_specials(t, g);
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

