/* Real vocabularies for the tokenizer fuzz targets, loaded once from the
 * shared folder (HEARTH_SHARED, else ../shared: tests/fuzz/run sets it).
 * A vocabulary that does not load stops the fuzzer: a target that quietly
 * fuzzed nothing would pass. */
#ifndef HEARTH_FUZZ_VOCABS_H
#define HEARTH_FUZZ_VOCABS_H

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "engine/text/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FUZZ_N_VOCABS = 4 };

static const char *const fuzz_vocab_names[FUZZ_N_VOCABS] = {
    "llama-spm", "gpt-2", "qwen2", "stories260K",
};
static const bool fuzz_vocab_spm[FUZZ_N_VOCABS] = {true, false, false, true};   /* else byte-level BPE */
static tokenizer *fuzz_vocabs[FUZZ_N_VOCABS];

static void fuzz_die(const char *what, const char *err) {
    fprintf(stderr, "fuzz: cannot load %s: %s (set HEARTH_SHARED to the folder with models/)\n", what, err);
    exit(1);
}

static tokenizer *fuzz_load_gguf(const char *path) {
    gguf_file g;
    char err[256];
    if (gguf_open(path, &g, err, sizeof err)) fuzz_die(path, err);
    tokenizer *t = tokenizer_load(&g, err, sizeof err);
    gguf_close(&g);
    if (!t) fuzz_die(path, err);
    return t;
}

/* tokenizer.json -> GGUF metadata in memory -> tokenizer. */
static tokenizer *fuzz_load_json(const char *path, const char *pre) {
    gguf_writer *w = gguf_writer_new();
    char err[256];
    int n = 0;
    uint8_t *buf = NULL;
    size_t size = 0;
    gguf_file g;
    if (vocab_from_tokenizer_json(path, pre, w, &n, err, sizeof err) ||
        gguf_writer_to_buffer(w, &buf, &size, err, sizeof err) || gguf_open_memory(buf, size, &g, err, sizeof err))
        fuzz_die(path, err);
    gguf_writer_free(w);
    tokenizer *t = tokenizer_load(&g, err, sizeof err);
    gguf_close(&g);
    free(buf);
    if (!t) fuzz_die(path, err);
    return t;
}

static void fuzz_load_vocabs(void) {
    const char *shared = getenv("HEARTH_SHARED");
    if (!shared || !*shared) shared = "../shared";
    char path[1024];
    snprintf(path, sizeof path, "%s/models/ggml-vocab-llama-spm.gguf", shared);
    fuzz_vocabs[0] = fuzz_load_gguf(path);
    snprintf(path, sizeof path, "%s/models/ggml-vocab-gpt-2.gguf", shared);
    fuzz_vocabs[1] = fuzz_load_gguf(path);
    snprintf(path, sizeof path, "%s/models/qwen3-tokenizer.json", shared);
    fuzz_vocabs[2] = fuzz_load_json(path, "qwen2");
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);   /* 512 tokens: byte fallback */
    fuzz_vocabs[3] = fuzz_load_gguf(path);
}

/* RFC 3629 UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
static inline bool fuzz_utf8_valid(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k;
        unsigned lo = 0x80, hi = 0xBF;      /* range of the second byte */
        if (c < 0x80) k = 1;
        else if (c >= 0xC2 && c <= 0xDF) k = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            k = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else return false;
        if (i + k > n) return false;
        if (k > 1 && (s[i + 1] < lo || s[i + 1] > hi)) return false;
        for (size_t j = 2; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

#endif
