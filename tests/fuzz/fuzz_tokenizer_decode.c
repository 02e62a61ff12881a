/* libFuzzer target for tokenizer_decode and the streaming detokenizer over
 * real vocabularies (see fuzz_vocabs.h). Built and run by tests/fuzz/run.
 *
 * Input: byte 0 picks the vocabulary (bits 0-1) and render_special (bit 2);
 * bits 3-7 give a small output cap (0..31 bytes) for a second stream. Then
 * 4 bytes per id, little-endian: when the top byte is 0x7F, 0x80 or 0xFF
 * the value is the id as it is (huge, INT32_MIN, negative), otherwise
 * value % (n_vocab + 100) - 50 (mostly real ids, some just out of range).
 * Checks:
 *   - decode gives a NUL-terminated string of the length it reports;
 *   - streamed with a cap of tokenizer_max_piece + 4 (nothing is cut), the
 *     chunks and the flush together equal decode's output: both drop the
 *     SentencePiece space at the start the same way;
 *   - when decode's output is valid UTF-8, every chunk is valid UTF-8;
 *   - with the small cap, no call writes more than cap bytes; when every
 *     piece fits in cap - 3 (the most bytes held back is 3), the stream
 *     still equals decode's output;
 *   - tokenizer_token_bytes never writes past cap and matches the piece. */
#include "tests/fuzz/fuzz_vocabs.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_load_vocabs();
    return 0;
}

static int32_t id_of(const uint8_t *p, int n_vocab) {
    uint32_t x = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    uint32_t top = x >> 24;
    if (top == 0x7F || top == 0x80 || top == 0xFF) return (int32_t)x;
    return (int32_t)(x % (uint32_t)(n_vocab + 100)) - 50;
}

/* Streams ids through a detok_stream with a fixed cap into acc (which has
 * room for everything); returns the bytes streamed. */
static size_t stream(const tokenizer *t, bool render, const int32_t *ids, int n, size_t cap, bool check_chunks,
                     char *acc) {
    char *chunk = malloc(cap + 1);
    detok_stream s;
    detok_init(&s, t, render);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        size_t m = detok_push(&s, ids[i], chunk, cap);
        if (m > cap) abort();
        if (check_chunks && !fuzz_utf8_valid(chunk, m)) {
            fprintf(stderr, "chunk %d splits a character\n", i);
            abort();
        }
        memcpy(acc + k, chunk, m);
        k += m;
    }
    size_t m = detok_flush(&s, chunk, cap);
    if (m > cap || m > 3) abort();
    memcpy(acc + k, chunk, m);
    k += m;
    if (detok_flush(&s, chunk, cap) != 0) abort();
    free(chunk);
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int v = data[0] & 3;
    bool render = data[0] & 4;
    size_t small_cap = data[0] >> 3;
    const tokenizer *t = fuzz_vocabs[v];
    int n_vocab = tokenizer_n_vocab(t);
    int n = (int)((size - 1) / 4);
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    for (int i = 0; i < n; i++) ids[i] = id_of(data + 1 + 4 * (size_t)i, n_vocab);

    size_t dl;
    char *dec = tokenizer_decode(t, ids, n, render, &dl);
    if (!dec || dec[dl] != 0 || strlen(dec) > dl) abort();

    /* every piece: token_bytes agrees with itself at any cap */
    size_t max_piece = tokenizer_max_piece(t), total = 0, longest = 0;
    char *piece = malloc(max_piece + 8);
    for (int i = 0; i < n; i++) {
        size_t m = tokenizer_token_bytes(t, ids[i], render, piece, max_piece + 8);
        if (m > max_piece) abort();
        if ((tokenizer_token_text(t, ids[i]) != NULL) != (ids[i] >= 0 && ids[i] < n_vocab)) abort();
        if (tokenizer_token_bytes(t, ids[i], render, piece, small_cap) != (m < small_cap ? m : small_cap)) abort();
        total += m;
        if (m > longest) longest = m;
    }
    free(piece);
    if (dl > total) abort();

    char *acc = malloc(total + 8);
    size_t k = stream(t, render, ids, n, max_piece + 4, fuzz_utf8_valid(dec, dl), acc);
    if (k != dl || memcmp(acc, dec, dl) != 0) {
        fprintf(stderr, "%s render_special=%d: stream (%zu bytes) differs from decode (%zu bytes)\n",
                fuzz_vocab_names[v], render, k, dl);
        abort();
    }
    k = stream(t, render, ids, n, small_cap, false, acc);
    if (k > dl) abort();
    if (longest + 3 <= small_cap && (k != dl || memcmp(acc, dec, dl) != 0)) {
        fprintf(stderr, "%s render_special=%d cap %zu: stream differs from decode\n", fuzz_vocab_names[v], render,
                small_cap);
        abort();
    }
    free(acc);
    free(dec);
    free(ids);
    return 0;
}
