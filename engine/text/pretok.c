/* Pre-tokenizers of byte-level BPE vocabularies. Each tokenizer.ggml.pre
 * name stands for a list of regexes applied in turn (each cuts the pieces of
 * the one before; what lies between two matches is a piece too) and a few
 * rules (BOS by default, whole-token pieces kept). The regexes say what
 * llama.cpp's do, compiled once per tokenizer by PCRE2 with Unicode
 * properties and JIT. Where llama.cpp's own engine reads a class narrowly,
 * the regex here says so explicitly (its \p{S} leaves out '~'). */
#include <stdio.h>
#include <string.h>

#include "engine/text/pretok.h"

/* ---- the regexes ------------------------------------------------------ */

/* GPT-2: contractions, letter runs, digit runs, other runs, each with one
 * leading space; whitespace not before a non-space */
#define R_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* contractions in either case */
#define R_CONTRACT "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
/* Llama 3: a letter run with one leading non-letter, digits in threes,
 * other runs taking the line breaks after them */
#define R_LLAMA3 R_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen 2: the same with single digits */
#define R_QWEN2 R_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* cased words: upper-case letters then lower-case ones, or the reverse
 * (a letter that is not a-z / not A-Z: other scripts count as both) */
#define R_UPPER "(?:(?=\\p{L})[^a-z])"
#define R_LOWER "(?:(?=\\p{L})[^A-Z])"
#define R_TEKKEN "[^\\r\\n\\p{L}\\p{N}]?" R_UPPER "*" R_LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" R_UPPER "+" R_LOWER "*" \
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_GPT4O "[^\\r\\n\\p{L}\\p{N}]?" R_UPPER "*" R_LOWER "+" R_CONTRACT "?" \
    "|[^\\r\\n\\p{L}\\p{N}]?" R_UPPER "+" R_LOWER "*" R_CONTRACT "?" \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_SEED_CODER R_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define R_BAILING "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"

/* DeepSeek LLM: the cased letters of its tokenizer.json, its ASCII and
 * full-width punctuation, and the CJK and Hangul blocks, as code points */
#define R_DS_LETTERS "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+"
#define R_DS_PUNCT "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+"
#define R_DS_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
/* DeepSeek V3: ASCII punctuation starting a word; symbols (\p{S} without
 * '~', see above) and punctuation runs */
#define R_S_NO_TILDE "(?:(?!~)[\\p{P}\\p{S}])"
#define R_NOT_LPS "(?:~|[^\\r\\n\\p{L}\\p{P}\\p{S}])"
#define R_DS3 "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|" R_NOT_LPS "?[\\p{L}\\p{M}]+" \
    "| ?" R_S_NO_TILDE "+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* BLOOM, Poro, Viking: runs of anything but spaces and sentence punctuation */
#define R_BLOOM " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"

typedef struct {
    const char *names;          /* '|'-separated tokenizer.ggml.pre values */
    const char *re[PRETOK_MAX_RE];
    bool ignore_merges, add_bos, no_default_bos;
} pretok_def;

static const pretok_def defs[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", R_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false, false, false},
    {"gpt-2|mpt|jais|gpt2|phi-2|olmo|jina-es|jina-de|jina-v1-en|jina-v2-es|jina-v2-de|jina-v2-code|"
     "roberta-bpe|gigachat|a.x-4.0|mellum|trillion|granite-docling|exaone4", {R_GPT2}, false, false, false},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2", {R_LLAMA3}, true, true, false},
    {"dbrx|smaug-bpe", {R_LLAMA3}, false, false, false},
    {"chatglm-bpe|chatglm4|glm4", {R_LLAMA3}, false, false, true},
    {"qwen2|deepseek-r1-qwen|kormo|megrez|stablelm2|hunyuan|grok-2", {R_QWEN2}, false, false, false},
    /* digits one by one first, then the GPT-2 rules on what is between */
    {"starcoder|refact|exaone|command-r|smollm|codeshell|minerva-7b|minerva", {"\\p{N}", R_GPT2}, false, false, false},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", R_GPT2, "[0-9][0-9][0-9]"}, false, false, false},
    {"deepseek-llm", {"[\\r\\n]", R_DS_LETTERS, R_DS_PUNCT, "\\s+$", R_DS_CJK, "\\p{N}+"}, false, false, false},
    {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", R_DS_CJK, "\\p{N}"}, false, false, false},
    {"deepseek-v3", {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+", R_DS3}, false, false, false},
    {"bloom|poro-chat|gpt3-finnish|poro", {R_BLOOM}, false, false, false},
    {"viking", {R_BLOOM, "\\p{N}"}, false, false, false},
    {"tekken", {R_TEKKEN}, true, true, false},
    {"gpt-4o|llama4|minimax-m2", {R_GPT4O}, false, false, false},
    {"chameleon", {"<sentinel:[0-9]+>", "IMGIMG[A-I]{1,4}Z", "[\\t\\n]|    |  ", "\\p{N}",
                   "[\\p{P}!-/:-@\\[-`{-~]", R_GPT2}, false, true, false},
    {"seed-coder", {R_SEED_CODER}, false, false, false},
    {"bailingmoe|bailingmoe2|llada-moe", {R_BAILING}, false, false, false},
};

enum { N_DEFS = sizeof defs / sizeof defs[0] };

static const pretok_def *find_def(const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < N_DEFS; i++) {
        for (const char *p = defs[i].names; *p;) {
            const char *e = strchr(p, '|');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len == n && memcmp(p, name, n) == 0) return &defs[i];
            p += len + (e != NULL);
        }
    }
    return NULL;
}

bool pretok_known(const char *name) { return find_def(name) != NULL; }

bool pretok_adds_bos(const char *name) {
    const pretok_def *d = find_def(name);
    return d && d->add_bos;
}

/* The k-th name of def d (its length in *len), or NULL. */
static const char *def_name(const pretok_def *d, int k, size_t *len) {
    const char *p = d->names;
    for (; k > 0 && p; k--) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p) return NULL;
    const char *e = strchr(p, '|');
    *len = e ? (size_t)(e - p) : strlen(p);
    return p;
}

/* "unknown pre-tokenizer 'x' (known: a, b, ...)": the first name of every
 * entry, then the second ones, and so on, cut with "..." where err ends. */
static void unknown_error(const char *name, char *err, size_t errlen) {
    if (!err || !errlen) return;
    int k = snprintf(err, errlen, "tokenizer: unknown pre-tokenizer '%.64s' (known:", name);
    size_t n = k < 0 ? 0 : (size_t)k;
    bool first = true, any = true;
    for (int pass = 0; any; pass++) {
        any = false;
        for (size_t i = 0; i < N_DEFS; i++) {
            size_t len;
            const char *p = def_name(&defs[i], pass, &len);
            if (!p) continue;
            any = true;
            if (n + len + 8 >= errlen) {            /* room for ", ...)" */
                if (n + 6 <= errlen) snprintf(err + n, errlen - n, " ...)");
                return;
            }
            n += (size_t)snprintf(err + n, errlen - n, "%s %.*s", first ? "" : ",", (int)len, p);
            first = false;
        }
    }
    if (n + 2 <= errlen) snprintf(err + n, errlen - n, ")");
}

int pretok_init(pretok *p, const char *name, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    const pretok_def *d = find_def(name);
    if (!d) {
        unknown_error(name, err, errlen);
        return -1;
    }
    p->ignore_merges = d->ignore_merges;
    p->add_bos = d->add_bos;
    p->no_default_bos = d->no_default_bos;
    for (int i = 0; i < PRETOK_MAX_RE && d->re[i]; i++) {
        int code;
        PCRE2_SIZE off;
        /* '$' is the end of the piece only, as in ECMAScript */
        p->re[i] = pcre2_compile((PCRE2_SPTR)d->re[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                                 &code, &off, NULL);
        if (!p->re[i]) {
            snprintf(err, errlen, "tokenizer: pre-tokenizer '%s' regex %d failed to compile (%d at %zu)",
                     name, i, code, (size_t)off);
            pretok_free(p);
            return -1;
        }
        p->n_re = i + 1;
        pcre2_jit_compile(p->re[i], PCRE2_JIT_COMPLETE);    /* the interpreter remains if JIT is absent */
    }
    return 0;
}

void pretok_free(pretok *p) {
    for (int i = 0; i < p->n_re; i++) pcre2_code_free(p->re[i]);
    p->n_re = 0;
}

/* ---- splitting ---------------------------------------------------------- */

typedef struct {
    const pretok *p;
    pcre2_match_data *md;
    pretok_fn fn;
    void *ctx;
} split_state;

static size_t utf8_step(const char *s, size_t i, size_t len) {
    size_t j = i + 1;
    while (j < len && ((unsigned char)s[j] & 0xC0) == 0x80 && j - i < 4) j++;
    return j;
}

/* Cut s by regex `level`; each match and each gap goes on to the next
 * regex, or to fn after the last. An empty match only marks a boundary. */
static void split(const split_state *st, int level, const char *s, size_t len) {
    if (len == 0) return;
    if (level == st->p->n_re) {
        st->fn(st->ctx, s, len);
        return;
    }
    size_t done = 0, from = 0;
    while (from < len) {
        int rc = pcre2_match(st->p->re[level], (PCRE2_SPTR)s, len, from, 0, st->md, NULL);
        if (rc < 0) break;                      /* no match (or a match error): the rest is one gap */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
        size_t b = ov[0], e = ov[1];
        if (b < from || e < b || e > len) break;
        if (b > done) split(st, level + 1, s + done, b - done);
        done = b;
        if (e > b) {
            split(st, level + 1, s + b, e - b);
            done = from = e;
        } else {
            from = utf8_step(s, b, len);
        }
    }
    if (done < len) split(st, level + 1, s + done, len - done);
}

void pretok_split(const pretok *p, pcre2_match_data *md, const char *s, size_t len,
                  pretok_fn fn, void *ctx) {
    split_state st = {p, md, fn, ctx};
    split(&st, 0, s, len);
}
