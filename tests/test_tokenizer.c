/* Tokenizers: llama.cpp's tokenizer test vectors for four vocabularies
 * (SentencePiece llama, GPT-2, Llama 3 and Qwen2 byte-level BPE), the
 * prompt tokens of the reference fixtures, special tokens and their ids,
 * decoding, streaming detokenization, and hostile input (random bytes,
 * invalid UTF-8, ids out of range). */
#include "tests/test.h"
#include "engine/text/tokenizer.h"
#include "engine/text/pretok.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"

#include <stdint.h>
#include <stdbool.h>
#include <cjson/cJSON.h>

/* ---- helpers ---- */


/* The file is closed right after loading: the tokenizer must keep nothing
 * that points into it. */
static tokenizer *load_gguf(const char *path) {
    gguf_file g;
    char err[256];
    if (gguf_open(path, &g, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    tokenizer *t = tokenizer_load(&g, err, sizeof err);
    if (!t) fprintf(stderr, "%s: %s\n", path, err);
    gguf_close(&g);
    return t;
}

static tokenizer *load_writer(gguf_writer *w) {
    uint8_t *buf;
    size_t size;
    char err[256];
    if (gguf_writer_to_buffer(w, &buf, &size, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    gguf_file g;
    tokenizer *t = NULL;
    if (gguf_open_memory(buf, size, &g, err, sizeof err) == 0) {
        t = tokenizer_load(&g, err, sizeof err);
        if (!t) fprintf(stderr, "tokenizer_load: %s\n", err);
        gguf_close(&g);
    } else {
        fprintf(stderr, "%s\n", err);
    }
    free(buf);
    return t;
}

static tokenizer *load_json(const char *path, const char *pre) {
    gguf_writer *w = gguf_writer_new();
    char err[256];
    int n = 0;
    tokenizer *t = NULL;
    if (vocab_from_tokenizer_json(path, pre, w, &n, err, sizeof err) == 0) t = load_writer(w);
    else fprintf(stderr, "vocab_from_tokenizer_json: %s\n", err);
    gguf_writer_free(w);
    CHECKF(!t || tokenizer_n_vocab(t) == n, "n_vocab %d vs %d", t ? tokenizer_n_vocab(t) : -1, n);
    return t;
}

static int encode(const tokenizer *t, const char *s, size_t len, bool add_special, bool parse_special, int32_t **ids) {
    int n = tokenizer_encode(t, s, len, add_special, parse_special, ids);
    CHECK(n >= 0 && *ids != NULL);
    return n;
}

static bool valid_utf8(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

static void print_ids(const char *what, const int32_t *ids, int n) {
    fprintf(stderr, "  %s:", what);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

/* ---- llama.cpp test vectors: cases in .inp, each followed by the line
 * __ggml_vocab_test__; .out has one line of ids per case ---- */

static void vocab_vectors(const tokenizer *t, const char *name) {
    char inp_rel[256], out_rel[256];
    snprintf(inp_rel, sizeof inp_rel, "models/tokenizer-tests/ggml-vocab-%s.gguf.inp", name);
    snprintf(out_rel, sizeof out_rel, "models/tokenizer-tests/ggml-vocab-%s.gguf.out", name);
    size_t in_len, out_len;
    char *in = test_read_file(test_path(inp_rel), &in_len), *out = test_read_file(test_path(out_rel), &out_len);
    if (!in || !out || !t) {
        SKIP("%s: test vectors or vocabulary missing", name);
        free(in);
        free(out);
        return;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *p = in, *o = out;
    int cases = 0, ok = 0;
    for (char *e; (e = strstr(p, sep)); p = e + strlen(sep)) {
        size_t len = (size_t)(e - p);
        char *eol = strchr(o, '\n');
        if (!eol) { CHECKF(false, "%s: .out has fewer lines than cases", name); break; }
        *eol = 0;
        int32_t want[1024];
        int nw = 0;
        for (char *q = o, *end; nw < 1024; q = end) {
            long v = strtol(q, &end, 10);
            if (end == q) break;
            want[nw++] = (int32_t)v;
        }
        o = eol + 1;
        cases++;

        int32_t *ids;
        int n = encode(t, p, len, false, false, &ids);
        bool same = n == nw && memcmp(ids, want, (size_t)n * sizeof *ids) == 0;
        size_t dl;
        char *dec = tokenizer_decode(t, ids, n, false, &dl);
        bool round = dec && dl == len && memcmp(dec, p, len) == 0;
        CHECKF(same, "%s case %d: ids differ for \"%.*s\"", name, cases, (int)len, p);
        CHECKF(round, "%s case %d: decode gives \"%s\" for \"%.*s\"", name, cases, dec ? dec : "(null)", (int)len, p);
        if (!same) {
            print_ids("want", want, nw);
            print_ids("got ", ids, n);
        }
        ok += same && round;
        free(dec);
        free(ids);
    }
    CHECKF(cases >= 30 && *o == 0, "%s: %d cases, .out lines left: %s", name, cases, *o ? "yes" : "no");
    printf("%s: %d/%d test vectors\n", name, ok, cases);
    free(in);
    free(out);
}

/* ---- prompt_tokens of the reference fixtures ---- */

static void reference_prompts(void) {
    size_t len;
    char *text = test_read_file(test_path("fixtures/reference.json"), &len);
    if (!text) { SKIP("fixtures/reference.json missing"); return; }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    CHECK(cJSON_IsArray(root));
    tokenizer *t = NULL;
    char cur[256] = "";
    int n_cases = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, root) {
        const char *model = cJSON_GetStringValue(cJSON_GetObjectItem(c, "model"));
        const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItem(c, "prompt"));
        const cJSON *want = cJSON_GetObjectItem(c, "prompt_tokens");
        if (!model || !prompt || !cJSON_IsArray(want)) { CHECK(false); continue; }
        if (strcmp(model, cur) != 0) {
            char rel[300];
            snprintf(rel, sizeof rel, "%s/%s", strcmp(model, "stories260K.gguf") == 0 ? "models" : "fixtures", model);
            tokenizer_free(t);
            t = load_gguf(test_path(rel));
            snprintf(cur, sizeof cur, "%s", model);
        }
        if (!t) { SKIP("%s: cannot load", model); continue; }
        bool add = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_special"));
        bool parse = cJSON_IsTrue(cJSON_GetObjectItem(c, "parse_special"));
        int32_t *ids;
        int n = encode(t, prompt, strlen(prompt), add, parse, &ids);
        int nw = cJSON_GetArraySize(want);
        bool same = n == nw;
        for (int i = 0; same && i < n; i++) same = ids[i] == (int32_t)cJSON_GetArrayItem(want, i)->valuedouble;
        CHECKF(same, "%s: prompt_tokens differ for \"%s\"", model, prompt);
        if (!same) print_ids("got", ids, n);
        /* with specials rendered, the prompt comes back (after BOS), except
         * where the model's special tokens ate whitespace (Phi-3) */
        size_t dl;
        char *dec = tokenizer_decode(t, ids, n, true, &dl);
        const char *bos_text = tokenizer_token_text(t, tokenizer_bos(t));
        size_t skip = n > 0 && ids[0] == tokenizer_bos(t) && bos_text ? strlen(bos_text) : 0;
        bool spm_bos = skip && dl > skip && dec[skip] == ' ';   /* "<s> Once": the space encoding added */
        if (strncmp(model, "phi3", 4) != 0)
            CHECKF(dec && strcmp(dec + skip + spm_bos, prompt) == 0, "%s: decode \"%s\"", model, dec ? dec : "");
        /* and the text after BOS decodes to what encodes back to the same ids */
        int nb = skip ? 1 : 0;
        size_t dl2;
        char *dec2 = tokenizer_decode(t, ids + nb, n - nb, true, &dl2);
        int32_t *again = NULL;
        int na = dec2 ? encode(t, dec2, dl2, add, true, &again) : -1;
        CHECKF(na == n && memcmp(again, ids, (size_t)n * sizeof *ids) == 0,
               "%s: decode \"%s\" does not encode back", model, dec2 ? dec2 : "");
        free(again);
        free(dec2);
        free(dec);
        free(ids);
        n_cases++;
    }
    tokenizer_free(t);
    CHECKF(n_cases == cJSON_GetArraySize(root) && n_cases >= 15, "%d reference cases", n_cases);
    cJSON_Delete(root);
}

/* ---- streaming: every chunk is whole characters, and all of them
 * together equal the plain decode ---- */

static void stream_check(const tokenizer *t, const char *text, size_t len, const char *what) {
    int32_t *ids;
    int n = encode(t, text, len, false, false, &ids);
    size_t dl;
    char *dec = tokenizer_decode(t, ids, n, false, &dl);
    char *acc = malloc(dl + 64), chunk[512];
    size_t k = 0;
    bool chunks_ok = true;
    detok_stream s;
    detok_init(&s, t, false);
    for (int i = 0; i < n; i++) {
        size_t m = detok_push(&s, ids[i], chunk, sizeof chunk);
        if (valid_utf8(dec, dl) && !valid_utf8(chunk, m)) chunks_ok = false;
        memcpy(acc + k, chunk, m);
        k += m;
    }
    k += detok_flush(&s, acc + k, 64);
    CHECKF(chunks_ok, "%s: a streamed chunk splits a character", what);
    CHECKF(k == dl && memcmp(acc, dec, dl) == 0, "%s: stream differs from decode", what);
    CHECKF(dl == len && memcmp(dec, text, len) == 0, "%s: decode(encode(x)) != x", what);
    free(acc);
    free(dec);
    free(ids);
}

static void streaming(const tokenizer *spm_small, const tokenizer *gpt2) {
    static const char text[] = "h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80!";
    if (spm_small) {
        /* 512 tokens: the accented letters, CJK and emoji are byte tokens */
        int32_t *ids;
        int n = encode(spm_small, text, strlen(text), false, false, &ids);
        int bytes = 0;
        for (int i = 0; i < n; i++) bytes += ids[i] >= 3 && ids[i] < 3 + 256;
        CHECKF(bytes >= 10, "stories260K: expected byte fallback, %d byte tokens", bytes);
        free(ids);
        stream_check(spm_small, text, strlen(text), "spm stream");
    }
    if (gpt2) stream_check(gpt2, text, strlen(text), "gpt2 stream");

    /* bytes pushed one token at a time: an incomplete char waits, an
     * invalid sequence goes out once it cannot complete */
    if (spm_small) {
        detok_stream s;
        char out[64];
        detok_init(&s, spm_small, false);
        int32_t e2 = 3 + 0xE2, x82 = 3 + 0x82, xac = 3 + 0xAC, ff = 3 + 0xFF, a = tokenizer_find(spm_small, "a");
        CHECK(detok_push(&s, e2, out, sizeof out) == 0);
        CHECK(detok_push(&s, x82, out, sizeof out) == 0);
        size_t m = detok_push(&s, xac, out, sizeof out);
        CHECK(m == 3 && memcmp(out, "\xE2\x82\xAC", 3) == 0);
        CHECK(detok_push(&s, e2, out, sizeof out) == 0);
        m = detok_push(&s, ff, out, sizeof out);            /* E2 FF: broken */
        CHECK(m == 2 && memcmp(out, "\xE2\xFF", 2) == 0);
        CHECK(a >= 0 && detok_push(&s, x82, out, sizeof out) == 1);  /* a stray continuation */
        CHECK(detok_push(&s, 3 + 0xF0, out, sizeof out) == 0);
        CHECK(detok_flush(&s, out, sizeof out) == 1 && (unsigned char)out[0] == 0xF0);
        CHECK(detok_flush(&s, out, sizeof out) == 0);
        CHECK(detok_push(&s, -1, out, sizeof out) == 0);
        CHECK(detok_push(&s, 1 << 30, out, sizeof out) == 0);
    }
}

/* ---- hostile input ---- */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static void random_bytes(const tokenizer *t, const char *name) {
    int bad_round = 0, bad_ids = 0, n_bytes = 0;
    /* the bytes this vocabulary can write at all (some byte-level BPE
     * vocabularies lack a few byte characters, e.g. GPT-NeoX's) */
    bool byte_ok[256];
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        int32_t *ids;
        int n = encode(t, &c, 1, false, false, &ids);
        size_t dl;
        char *dec = tokenizer_decode(t, ids, n, false, &dl);
        byte_ok[b] = dec && dl == 1 && dec[0] == c;
        n_bytes += byte_ok[b];
        free(dec);
        free(ids);
    }
    CHECKF(n_bytes >= 240, "%s: only %d bytes can be written", name, n_bytes);
    for (int it = 0; it < 300; it++) {
        char buf[400];
        size_t len = rnd() % sizeof buf;
        /* mostly bytes with the high bit set, some ASCII and spaces */
        for (size_t i = 0; i < len; i++) {
            uint32_t r = rnd();
            buf[i] = (char)(r % 3 == 0 ? ' ' + (r >> 8) % 95 : r % 7 == 0 ? ' ' : 0x80 | (r >> 8));
        }
        for (int mode = 0; mode < 2; mode++) {
            int32_t *ids;
            int n = encode(t, buf, len, mode, mode, &ids);
            for (int i = 0; i < n; i++) bad_ids += ids[i] < 0 || ids[i] >= tokenizer_n_vocab(t);
            size_t dl;
            char *dec = tokenizer_decode(t, ids, n, mode, &dl);
            CHECK(dec != NULL);
            /* U+2581 in the input comes back as a space in SentencePiece */
            bool writable = true;
            for (size_t i = 0; i < len; i++) writable &= byte_ok[(unsigned char)buf[i]];
            if (mode == 0 && writable && !memmem(buf, len, "\xE2\x96\x81", 3))
                bad_round += !(dec && dl == len && memcmp(dec, buf, len) == 0);
            free(dec);
            free(ids);
        }
    }
    CHECKF(bad_ids == 0, "%s: %d ids out of range", name, bad_ids);
    CHECKF(bad_round == 0, "%s: %d random strings did not round-trip", name, bad_round);

    /* ids out of range decode to nothing */
    int32_t junk[] = {-1, -1000, INT32_MIN, INT32_MAX, tokenizer_n_vocab(t), tokenizer_n_vocab(t) + 7};
    size_t dl;
    char *dec = tokenizer_decode(t, junk, 6, true, &dl);
    CHECK(dec && dl == 0 && dec[0] == 0);
    free(dec);
    char b[16];
    for (int i = 0; i < 6; i++) {
        CHECK(tokenizer_token_bytes(t, junk[i], true, b, sizeof b) == 0);
        CHECK(tokenizer_token_text(t, junk[i]) == NULL);
        CHECK(!tokenizer_is_eog(t, junk[i]) && !tokenizer_is_control(t, junk[i]));
    }
    /* no piece is longer than tokenizer_max_piece, and the longest is met */
    size_t longest = 0, maxp = tokenizer_max_piece(t);
    char *pb = malloc(maxp + 16);
    for (int32_t id = 0; id < tokenizer_n_vocab(t); id++) {
        size_t m = tokenizer_token_bytes(t, id, true, pb, maxp + 16);
        if (m > longest) longest = m;
        m = tokenizer_token_bytes(t, id, false, pb, maxp + 16);
        if (m > longest) longest = m;
    }
    free(pb);
    CHECKF(longest == maxp && maxp > 0, "%s: longest piece %zu, max_piece %zu", name, longest, maxp);
    /* random ids, valid or not, decode without harm */
    int32_t ids[500];
    for (int i = 0; i < 500; i++) ids[i] = (int32_t)(rnd() % ((uint32_t)tokenizer_n_vocab(t) + 2000)) - 1000;
    dec = tokenizer_decode(t, ids, 500, true, &dl);
    CHECK(dec != NULL && strlen(dec) <= dl);
    free(dec);
    dec = tokenizer_decode(t, NULL, 0, false, &dl);
    CHECK(dec && dl == 0);
    free(dec);
    int32_t *none;
    CHECK(tokenizer_encode(t, "", 0, false, false, &none) == 0 && none);
    free(none);

    /* long runs in one pre-token: no quadratic merge, no regex stack limit */
    size_t big = 100000;
    char *s = malloc(big);
    static const char fill[] = {'a', ' ', '7', '\n', '!'};
    for (size_t f = 0; f < sizeof fill; f++) {
        memset(s, fill[f], big);
        int32_t *v;
        int n = encode(t, s, big, false, false, &v);
        char *d = tokenizer_decode(t, v, n, false, &dl);
        CHECKF(n > 0 && d && dl == big && memcmp(d, s, big) == 0, "%s: run of '%c' did not round-trip", name, fill[f]);
        free(d);
        free(v);
    }
    free(s);
}

/* ---- special tokens, ids and flags ---- */

static bool contains(const int32_t *ids, int n, int32_t id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

static void specials_spm(const tokenizer *t) {
    CHECK(tokenizer_bos(t) == 1 && tokenizer_eos(t) == 2);
    CHECK(tokenizer_add_bos(t) && !tokenizer_add_eos(t));   /* stories260K has no add_bos key: SPM default */
    CHECK(tokenizer_is_eog(t, 2) && !tokenizer_is_eog(t, 1));
    CHECK(tokenizer_is_control(t, 1) && !tokenizer_is_control(t, 300));
    CHECK(tokenizer_fim_pre(t) < 0 && tokenizer_eot(t) < 0);
    char b[16];
    CHECK(tokenizer_token_bytes(t, 3 + '\n', false, b, sizeof b) == 1 && b[0] == '\n');
    CHECK(tokenizer_token_bytes(t, 1, false, b, sizeof b) == 0);
    CHECK(tokenizer_token_bytes(t, 1, true, b, sizeof b) == 3 && memcmp(b, "<s>", 3) == 0);

    int32_t *ids;
    int n = encode(t, "Once<s>upon", 11, true, true, &ids);
    CHECK(n >= 4 && ids[0] == 1 && contains(ids + 1, n - 1, 1));
    /* a space prefix again after the special token: "▁upon" */
    int32_t up = tokenizer_find(t, "\xE2\x96\x81upon");
    CHECK(up >= 0 && ids[n - 1] == up);
    free(ids);
    n = encode(t, "Once<s>upon", 11, true, false, &ids);
    CHECK(n > 1 && ids[0] == 1 && !contains(ids + 1, n - 1, 1));
    size_t dl;
    char *dec = tokenizer_decode(t, ids, n, false, &dl);
    CHECK(dec && strcmp(dec, "Once<s>upon") == 0);
    free(dec);
    dec = tokenizer_decode(t, ids, n, true, &dl);
    CHECK(dec && strcmp(dec, "<s> Once<s>upon") == 0);
    free(dec);
    free(ids);
    n = encode(t, "", 0, true, true, &ids);
    CHECK(n == 1 && ids[0] == 1);
    free(ids);
}

static void specials_qwen(const tokenizer *t) {
    int32_t im_start = tokenizer_find(t, "<|im_start|>"), im_end = tokenizer_find(t, "<|im_end|>");
    int32_t eot_text = tokenizer_find(t, "<|endoftext|>"), think = tokenizer_find(t, "<think>");
    CHECK(im_start == 151644 && im_end == 151645 && eot_text == 151643 && think >= 0);
    CHECK(!tokenizer_add_bos(t) && !tokenizer_add_eos(t));
    CHECK(tokenizer_eos(t) == im_end);
    CHECK(tokenizer_is_eog(t, im_end) && tokenizer_is_eog(t, eot_text) && !tokenizer_is_eog(t, im_start));
    CHECK(tokenizer_is_control(t, im_start) && !tokenizer_is_control(t, think));
    CHECK(tokenizer_fim_pre(t) == tokenizer_find(t, "<|fim_prefix|>") && tokenizer_fim_pre(t) >= 0);
    CHECK(tokenizer_fim_suf(t) == tokenizer_find(t, "<|fim_suffix|>") && tokenizer_fim_suf(t) >= 0);
    CHECK(tokenizer_fim_mid(t) == tokenizer_find(t, "<|fim_middle|>") && tokenizer_fim_mid(t) >= 0);

    static const char chat[] = "<|im_start|>user\nhi<think></think><|im_end|>";
    int32_t *ids;
    int n = encode(t, chat, strlen(chat), true, true, &ids);
    CHECK(n > 3 && ids[0] == im_start && ids[n - 1] == im_end && contains(ids, n, think));
    size_t dl;
    char *dec = tokenizer_decode(t, ids, n, true, &dl);
    CHECK(dec && strcmp(dec, chat) == 0);
    free(dec);
    dec = tokenizer_decode(t, ids, n, false, &dl);
    CHECK(dec && strcmp(dec, "user\nhi<think></think>") == 0);   /* user-defined tokens always decode */
    free(dec);
    free(ids);
    /* without parse_special, control tokens are plain text; user-defined
     * ones are still split out (as Hugging Face and llama.cpp do) */
    n = encode(t, chat, strlen(chat), true, false, &ids);
    CHECK(!contains(ids, n, im_start) && !contains(ids, n, im_end) && contains(ids, n, think));
    dec = tokenizer_decode(t, ids, n, false, &dl);
    CHECK(dec && strcmp(dec, chat) == 0);
    free(dec);
    free(ids);
}

static void specials_llama3(const tokenizer *t) {
    CHECK(tokenizer_bos(t) == 128000 && tokenizer_add_bos(t));
    CHECK(tokenizer_eos(t) == 128009);      /* from tokenizer_config.json */
    CHECK(tokenizer_is_eog(t, 128009) && tokenizer_is_eog(t, 128001) && !tokenizer_is_eog(t, 128000));
    CHECK(tokenizer_eot(t) == 128009);
    int32_t *ids;
    int n = encode(t, "<|start_header_id|>user<|end_header_id|>", 40, true, true, &ids);
    CHECK(n == 4 && ids[0] == 128000 && ids[1] == 128006 && ids[3] == 128007);
    free(ids);
    /* longest match first: "<|reserved_special_token_10|>" is not "_1" + "0|>" */
    int32_t r10 = tokenizer_find(t, "<|reserved_special_token_10|>");
    n = encode(t, "<|reserved_special_token_10|>", 29, false, true, &ids);
    CHECK(r10 > 0 && n == 1 && ids[0] == r10);
    free(ids);
    char b[32];
    int32_t hello = tokenizer_find(t, "\xC4\xA0hello");    /* "Ġhello" */
    CHECK(hello >= 0 && tokenizer_token_bytes(t, hello, false, b, sizeof b) == 6 && memcmp(b, " hello", 6) == 0);
    CHECK(tokenizer_token_bytes(t, hello, false, b, 3) == 3);   /* cut at cap */
}

static void specials_gpt2(const tokenizer *t) {
    CHECK(!tokenizer_add_bos(t) && tokenizer_eos(t) == 50256 && tokenizer_is_eog(t, 50256));
    CHECK(tokenizer_fim_pre(t) < 0);
    int32_t *ids;
    int n = encode(t, "a<|endoftext|>", 14, true, true, &ids);
    CHECK(n == 2 && ids[1] == 50256);
    free(ids);
}

/* ---- metadata handling ---- */

static void metadata(void) {
    char err[256];
    /* vocab_from_gguf: the copy tokenizes like the original */
    tokenizer *orig = load_gguf(test_path("models/ggml-vocab-gpt-2.gguf"));
    gguf_writer *w = gguf_writer_new();
    int nv = 0;
    CHECK(vocab_from_gguf(test_path("models/ggml-vocab-gpt-2.gguf"), w, &nv, err, sizeof err) == 0);
    CHECK(nv == 50257);
    tokenizer *copy = load_writer(w);
    gguf_writer_free(w);
    CHECK(orig && copy);
    if (orig && copy) {
        static const char s[] = "Hello world, it's 2024! \xF0\x9F\x98\x80";
        int32_t *a, *b;
        int na = encode(orig, s, strlen(s), true, true, &a), nb = encode(copy, s, strlen(s), true, true, &b);
        CHECK(na == nb && na > 0 && memcmp(a, b, (size_t)na * sizeof *a) == 0);
        free(a);
        free(b);
    }
    tokenizer_free(orig);
    tokenizer_free(copy);
    w = gguf_writer_new();
    CHECK(vocab_from_gguf("/nonexistent.gguf", w, &nv, err, sizeof err) == -1 && err[0]);
    CHECK(vocab_from_tokenizer_json("/nonexistent.json", NULL, w, &nv, err, sizeof err) == -1 && err[0]);
    gguf_writer_free(w);

    /* a hand-made vocabulary: errors, defaults */
    static const char *toks[] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "\xC4\xA0", "<|im_end|>"};
    size_t lens[8];
    for (int i = 0; i < 8; i++) lens[i] = strlen(toks[i]);
    int32_t types[8] = {2, 3, 3, 1, 1, 1, 1, 3};
    static const char *merges[] = {"a b", "broken", "x y", "\xC4\xA0 a"};
    size_t mlens[4] = {3, 6, 3, 3};
    for (int variant = 0; variant < 5; variant++) {
        w = gguf_writer_new();
        gw_kv_str(w, "tokenizer.ggml.model", variant == 1 ? "bert" : "gpt2");
        gw_kv_str(w, "tokenizer.ggml.pre", variant == 2 ? "no-such-pre" : "qwen2");
        if (variant != 3) gw_kv_arr_str(w, "tokenizer.ggml.tokens", toks, lens, 8);
        gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, 8);
        if (variant != 4) gw_kv_arr_str(w, "tokenizer.ggml.merges", merges, mlens, 4);
        gw_kv_u32(w, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
        uint8_t *buf;
        size_t size;
        gguf_file g;
        CHECK(gguf_writer_to_buffer(w, &buf, &size, err, sizeof err) == 0);
        gguf_writer_free(w);
        CHECK(gguf_open_memory(buf, size, &g, err, sizeof err) == 0);
        err[0] = 0;
        tokenizer *t = tokenizer_load(&g, err, sizeof err);
        if (variant == 0) {
            CHECKF(t != NULL, "%s", err);
            if (t) {
                int32_t *ids;
                int n = encode(t, "abab a", 6, true, true, &ids);
                /* no BOS for qwen2; "ab" merged; " a" has no token: byte 'Ġ' then 'a' */
                CHECK(n == 4 && ids[0] == 5 && ids[1] == 5 && ids[2] == 6 && ids[3] == 3);
                free(ids);
                CHECK(tokenizer_eos(t) == 2 && tokenizer_is_eog(t, 7));
                /* bytes with no token become unk only if there is one: none here */
                n = encode(t, "zz", 2, false, false, &ids);
                CHECK(n == 0);
                free(ids);
                tokenizer_free(t);
            }
        } else {
            CHECKF(t == NULL && err[0], "variant %d loaded", variant);
            tokenizer_free(t);
        }
        gguf_close(&g);
        free(buf);
    }
}

/* The vocabulary imported from tokenizer.json equals the one that
 * llama.cpp's converter wrote into the fixture GGUF of the same family. */
static void import_matches_gguf(const tokenizer *json, const char *gguf_rel, const char *name) {
    tokenizer *g = load_gguf(test_path(gguf_rel));
    if (!g || !json) {
        SKIP("%s: fixture or vocabulary missing", name);
        tokenizer_free(g);
        return;
    }
    int n = tokenizer_n_vocab(json), diff_text = 0, diff_type = 0;
    CHECK(n <= tokenizer_n_vocab(g));   /* the GGUF may pad the vocabulary */
    for (int32_t i = 0; i < n && i < tokenizer_n_vocab(g); i++) {
        diff_text += strcmp(tokenizer_token_text(json, i), tokenizer_token_text(g, i)) != 0;
        diff_type += tokenizer_is_control(json, i) != tokenizer_is_control(g, i);
    }
    CHECKF(diff_text == 0 && diff_type == 0, "%s: %d texts and %d types differ", name, diff_text, diff_type);
    CHECK(tokenizer_eos(json) == tokenizer_eos(g));
    CHECK(tokenizer_add_bos(json) == tokenizer_add_bos(g));
    static const char s[] = "<|im_start|>Hello, y'all! 3333 \xE6\x97\xA5\xE6\x9C\xAC\n\n  x<|eot_id|>";
    int32_t *a, *b;
    int na = encode(json, s, strlen(s), true, true, &a), nb = encode(g, s, strlen(s), true, true, &b);
    CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0);
    free(a);
    free(b);
    tokenizer_free(g);
}

/* A real vocabulary with random bytes changed: the reader or the loader
 * may refuse it, but whatever loads encodes and decodes without harm. */
static void hostile_vocab(void) {
    gguf_writer *w = gguf_writer_new();
    char err[256];
    uint8_t *good;
    size_t size;
    int nv;
    int ok = vocab_from_gguf(test_path("models/stories260K.gguf"), w, &nv, err, sizeof err) == 0 &&
             gguf_writer_to_buffer(w, &good, &size, err, sizeof err) == 0;
    gguf_writer_free(w);
    if (!ok) { SKIP("stories260K vocabulary: %s", err); return; }
    int loaded = 0;
    for (int it = 0; it < 400; it++) {
        uint8_t *buf = malloc(size);
        memcpy(buf, good, size);
        for (int k = 0, n = 1 + (int)(rnd() % 8); k < n; k++) buf[rnd() % size] ^= (uint8_t)(1u << (rnd() % 8));
        gguf_file g;
        if (gguf_open_memory(buf, size, &g, err, sizeof err) == 0) {
            tokenizer *t = tokenizer_load(&g, err, sizeof err);
            gguf_close(&g);
            if (t) {
                loaded++;
                static const char s[] = "Once upon a time <s> \xF0\x9F\x98\x80 \xFF";
                int32_t *ids;
                int n = tokenizer_encode(t, s, strlen(s), true, true, &ids);
                CHECK(n >= 0);
                size_t dl;
                char *d = tokenizer_decode(t, ids, n, true, &dl);
                CHECK(d != NULL);
                free(d);
                free(ids);
                tokenizer_free(t);
            }
        }
        free(buf);
    }
    CHECK(loaded > 0);
    free(good);
}

/* Phi-3's special tokens eat the whitespace after them (llama.cpp keys this
 * on general.name); the same vocabulary under no such name keeps it. */
static void strip_rules(void) {
    const char *path = test_path("models/tokenizer-tests/ggml-vocab-phi-3.gguf");
    tokenizer *named = load_gguf(path);
    gguf_writer *w = gguf_writer_new();
    char err[256];
    int nv;
    tokenizer *plain = vocab_from_gguf(path, w, &nv, err, sizeof err) == 0 ? load_writer(w) : NULL;
    gguf_writer_free(w);
    CHECK(named && plain);
    if (!named || !plain) { tokenizer_free(named); tokenizer_free(plain); return; }
    int32_t *a, *b, *c;
    static const char nl[] = "<|user|>\n Hi<|end|>\n", tight[] = "<|user|>Hi<|end|>";
    int na = encode(named, nl, strlen(nl), true, true, &a);
    int nb = encode(named, tight, strlen(tight), true, true, &b);
    int nc = encode(plain, nl, strlen(nl), true, true, &c);
    CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0);
    CHECK(nc > na);                 /* the newline and the space stay */
    /* <s> keeps what follows it: "<s> Hi" is not "<s>Hi" */
    free(a);
    free(b);
    na = encode(named, "<s> Hi", 6, false, true, &a);
    nb = encode(named, "<s>Hi", 5, false, true, &b);
    CHECK(na != nb || memcmp(a, b, (size_t)na * sizeof *a) != 0);
    free(a);
    free(b);
    free(c);
    tokenizer_free(named);
    tokenizer_free(plain);
}

/* Appends a piece and a '|' to the string ctx (512 bytes). */
static void join_piece(void *ctx, const char *piece, size_t n) {
    char *s = ctx;
    size_t k = strlen(s);
    if (k + n + 2 > 512) return;
    memcpy(s + k, piece, n);
    s[k + n] = '|';
    s[k + n + 1] = 0;
}

/* Pre-tokenizers by name: every one compiles; each splits sample text as
 * llama.cpp's regexes do (expected pieces checked against an independent
 * regex engine running llama.cpp's own patterns); an unknown name is an
 * error that names it and the known ones. */
static void pretokenizers(void) {
    static const char *const names[] = {
        "default", "gpt-2", "llama-bpe", "llama3", "qwen2", "deepseek-llm", "deepseek-coder",
        "deepseek-v3", "deepseek-r1-qwen", "falcon", "falcon3", "gpt-4o", "llama4", "tekken", "mpt",
        "starcoder", "refact", "command-r", "smollm", "chatglm-bpe", "chatglm4", "glm4", "bloom",
        "poro-chat", "poro", "gpt3-finnish", "viking", "jais", "chameleon", "exaone", "exaone4",
        "seed-coder", "olmo", "dbrx", "smaug-bpe", "codeshell", "minerva-7b", "stablelm2",
        "bailingmoe", "grok-2", "pixtral", "megrez", "phi-2",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        pretok p;
        char err[256] = "";
        CHECKF(pretok_known(names[i]) && pretok_init(&p, names[i], err, sizeof err) == 0,
               "pre-tokenizer %s: %s", names[i], err);
        pretok_free(&p);
    }
    static const struct { const char *name, *in, *want; } cases[] = {
    {"default", "Hello, world!! 12345 x~y", "Hello|,| world|!!| |123|45| x|~|y"},
    {"default", "a$b+c<d", "a|$|b|+|c|<|d"},
    {"deepseek-llm", "Hello World\nnew line  ", "Hello| World|\n|new| line|  "},
    {"deepseek-llm", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E and \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 12345", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E| and| |\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4| |12345"},
    {"deepseek-llm", "\xCE\xA9K ok\xEF\xBC\x9F\xEF\xBC\x81", "\xCE\xA9|K| ok|\xEF\xBC\x9F\xEF\xBC\x81"},
    {"deepseek-coder", "def f(x):\n    return x+1", "def| f|(|x|):|\n|   | return| x|+|1"},
    {"deepseek-coder", "\xE4\xB8\xAD\xE6\x96\x87""abc123", "\xE4\xB8\xAD\xE6\x96\x87|abc|1|2|3"},
    {"deepseek-v3", "1234567 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xB2\xE3\x82\x89\xE3\x81\x8C\xE3\x81\xAA", "123|456|7| |\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xB2\xE3\x82\x89\xE3\x81\x8C\xE3\x81\xAA"},
    {"deepseek-v3", "(hello) ~~tilde ~x", "(hello|)| |~|~tilde| |~x"},
    {"deepseek-v3", "don't stop.\n\n", "don|'t| stop|.\n\n"},
    {"falcon", "Hello, world!! 1234567", "Hello|,| world|!!| |123|456|7"},
    {"falcon", "a`b^c", "a|`|b|^|c"},
    {"gpt-4o", "HelloWorld iPhone McDonald's", "Hello|World| i|Phone| Mc|Donald's"},
    {"gpt-4o", "12345 x/\n\n", "123|45| x|/\n\n"},
    {"tekken", "HelloWorld iPhone don't", "Hello|World| i|Phone| don|'t"},
    {"tekken", "12345 x/\n\n", "1|2|3|4|5| x|/\n\n"},
    {"mpt", "Hello world  123", "Hello| world| | 123"},
    {"starcoder", "x1234 y", "x|1|2|3|4| y"},
    {"starcoder", "foo(bar)", "foo|(|bar|)"},
    {"refact", "a12b", "a|1|2|b"},
    {"chatglm4", "Hello 12345 world", "Hello| |123|45| world"},
    {"bloom", "Hello, world. How?Fine\xE2\x80\xA6 \xE3\x80\x82x", "Hello|,| world|.| How|?|Fine|\xE2\x80\xA6 \xE3\x80\x82|x"},
    {"poro-chat", "a.b,c", "a|.|b|,|c"},
    {"viking", "abc123 def", "abc|1|2|3| def"},
    {"jais", "it's 42", "it|'s| 42"},
    {"chameleon", "<sentinel:3>IMGIMGABZ x    y\t12!", "<|sentinel|:|3|>|IMGIMGABZ| x|    |y|\t|1|2|!"},
    {"chameleon", "a  b", "a|  |b"},
    {"exaone", "v2.0 ok", "v|2|.|0| ok"},
    {"seed-coder", "x = 12;\r\n  y", "x| =| |1|2|;|\r\n| | y"},
    {"seed-coder", "HELLO there", "HELLO| there"},
    };
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pretok p;
        char err[256], got[512] = "";
        if (pretok_init(&p, cases[i].name, err, sizeof err)) { CHECKF(false, "%s", err); continue; }
        pretok_split(&p, md, cases[i].in, strlen(cases[i].in), join_piece, got);
        size_t n = strlen(got);
        if (n) got[n - 1] = 0;          /* the last separator */
        CHECKF(strcmp(got, cases[i].want) == 0, "%s: \"%s\" split as \"%s\", want \"%s\"",
               cases[i].name, cases[i].in, got, cases[i].want);
        pretok_free(&p);
    }
    pcre2_match_data_free(md);

    char err[256];
    pretok p;
    CHECK(!pretok_known("no-such-pre") && pretok_init(&p, "no-such-pre", err, sizeof err) == -1);
    CHECKF(strstr(err, "'no-such-pre'") && strstr(err, "known: default, gpt-2") && strstr(err, "deepseek-llm") &&
           strlen(err) < sizeof err - 1 && strstr(err, "...)"), "unknown: %s", err);
    /* through the loader, as a model file would meet it */
    gguf_writer *w = gguf_writer_new();
    int nv;
    if (vocab_from_tokenizer_json(test_path("models/qwen3-tokenizer.json"), "no-such-pre", w, &nv, err, sizeof err) == 0) {
        uint8_t *buf;
        size_t size;
        gguf_file g;
        if (gguf_writer_to_buffer(w, &buf, &size, err, sizeof err) == 0) {
            if (gguf_open_memory(buf, size, &g, err, sizeof err) == 0) {
                tokenizer *t = tokenizer_load(&g, err, sizeof err);
                CHECKF(!t && strstr(err, "unknown pre-tokenizer 'no-such-pre' (known: "), "load: %s", t ? "loaded" : err);
                tokenizer_free(t);
                gguf_close(&g);
            }
            free(buf);
        }
    }
    gguf_writer_free(w);
}

int main(void) {
    tokenizer *spm = load_gguf(test_path("models/ggml-vocab-llama-spm.gguf"));
    tokenizer *gpt2 = load_gguf(test_path("models/ggml-vocab-gpt-2.gguf"));
    tokenizer *llama3 = load_json(test_path("models/llama3-tokenizer.json"), "llama-bpe");
    tokenizer *qwen = load_json(test_path("models/qwen3-tokenizer.json"), "qwen2");
    tokenizer *stories = load_gguf(test_path("models/stories260K.gguf"));
    CHECK(spm && gpt2 && llama3 && qwen && stories);

    vocab_vectors(spm, "llama-spm");
    vocab_vectors(gpt2, "gpt-2");
    vocab_vectors(llama3, "llama-bpe");
    vocab_vectors(qwen, "qwen2");
    /* vocabularies that come with their vectors (tokenizer-tests/) */
    static const char *const more[] = {"deepseek-llm", "mpt", "phi-3", "refact", "starcoder"};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/tokenizer-tests/ggml-vocab-%s.gguf", more[i]);
        tokenizer *t = load_gguf(test_path(rel));
        CHECKF(t != NULL, "%s: cannot load", rel);
        if (!t) continue;
        vocab_vectors(t, more[i]);
        random_bytes(t, more[i]);
        tokenizer_free(t);
    }
    strip_rules();
    pretokenizers();
    reference_prompts();
    import_matches_gguf(llama3, "fixtures/llama3-tiny-Q4_0.gguf", "llama3");
    import_matches_gguf(qwen, "fixtures/qwen3-tiny-Q4_K_M.gguf", "qwen3");

    if (stories) specials_spm(stories);
    if (qwen) specials_qwen(qwen);
    if (llama3) specials_llama3(llama3);
    if (gpt2) specials_gpt2(gpt2);
    streaming(stories, gpt2);

    const tokenizer *all[] = {spm, gpt2, llama3, qwen, stories};
    const char *names[] = {"llama-spm", "gpt-2", "llama-bpe", "qwen2", "stories260K"};
    for (int i = 0; i < 5; i++)
        if (all[i]) random_bytes(all[i], names[i]);
    metadata();
    hostile_vocab();

    tokenizer_free(spm);
    tokenizer_free(gpt2);
    tokenizer_free(llama3);
    tokenizer_free(qwen);
    tokenizer_free(stories);
    return test_summary("tokenizer");
}
