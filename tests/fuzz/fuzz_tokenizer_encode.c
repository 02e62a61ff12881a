/* libFuzzer target for tokenizer_encode over real vocabularies (see
 * fuzz_vocabs.h). Built and run by tests/fuzz/run.
 *
 * Input: byte 0 picks the vocabulary (bits 0-1), add_special (bit 2) and
 * parse_special (bit 3); the rest is the text, any bytes. Checks:
 *   - every id is in the vocabulary, BOS first when add_special wants it;
 *   - without parse_special, text never becomes a control token (only the
 *     BOS/EOS that add_special puts at the ends are);
 *   - without parse_special, decode(encode(x)) == x (what test_tokenizer's
 *     random_bytes checks): BOS/EOS decode to nothing and the space
 *     SentencePiece adds is removed again. Not for SentencePiece text that
 *     holds U+2581 itself, which decodes as a space;
 *   - with parse_special on a byte-level BPE vocabulary, decoding with the
 *     specials rendered gives x back (there is no space prefix to add). */
#include "tests/fuzz/fuzz_vocabs.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_load_vocabs();
    return 0;
}

static void mismatch(int v, bool add, bool parse, const char *text, size_t len, const char *dec, size_t dl) {
    fprintf(stderr, "%s add_special=%d parse_special=%d: decode(encode(x)) != x\n  x   (%zu): %.*s\n  got (%zu): %.*s\n",
            fuzz_vocab_names[v], add, parse, len, (int)len, text, dl, (int)dl, dec);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int v = data[0] & 3;
    bool add = data[0] & 4, parse = data[0] & 8;
    const tokenizer *t = fuzz_vocabs[v];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    int32_t *ids;
    int n = tokenizer_encode(t, text, len, add, parse, &ids);
    if (n < 0 || !ids) abort();
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= tokenizer_n_vocab(t)) abort();
    if (add && tokenizer_add_bos(t) && (n == 0 || ids[0] != tokenizer_bos(t))) abort();
    for (int i = 0; i < n && !parse; i++) {
        bool added = add && ((i == 0 && tokenizer_add_bos(t)) || (i == n - 1 && tokenizer_add_eos(t)));
        if (tokenizer_is_control(t, ids[i]) && !added) abort();
    }

    bool spm = fuzz_vocab_spm[v];
    size_t dl;
    if (!parse && !(spm && memmem(text, len, "\xE2\x96\x81", 3))) {
        char *dec = tokenizer_decode(t, ids, n, false, &dl);
        if (!dec) abort();
        if (dl != len || memcmp(dec, text, len) != 0) mismatch(v, add, parse, text, len, dec, dl);
        free(dec);
    }
    if (parse && !spm) {
        char *dec = tokenizer_decode(t, ids, n, true, &dl);
        if (!dec) abort();
        if (dl != len || memcmp(dec, text, len) != 0) mismatch(v, add, parse, text, len, dec, dl);
        free(dec);
    }
    free(ids);
    return 0;
}
