/* Tokenizer speed: a ~100 kB prompt (prose, code, numbers, non-Latin text,
 * emoji, runs of spaces) encoded with each vocabulary, several runs each;
 * prints min / median / max milliseconds. Not a test: run it by hand.
 *   HEARTH_SHARED=../shared build/tests/bench_tokenizer [runs] */
#include "tests/test.h"
#include "tests/bench_util.h"
#include "engine/text/tokenizer.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"

#include <stdint.h>
#include <time.h>

/* A deterministic mix of the kinds of text that prompts hold. */
static char *make_prompt(size_t target, size_t *len) {
    static const char *const words[] = {
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "then", "it's",
        "tokenizer", "inference", "server", "model", "weights", "don't", "we'll", "Hello", "World",
        "r\xC3\xA9sum\xC3\xA9", "na\xC3\xAFve", "\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
        "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", "\xF0\x9F\x98\x80", "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
    };
    static const char *const code =
        "\nfor (int i = 0; i < n; i++) {\n    sum += a[i] * b[i]; // dot\n}\n"
        "def f(x):\n\treturn {'k': [x, 3.14159, 0x1F]}\n";
    char *s = malloc(target + 256);
    size_t n = 0;
    uint32_t r = 12345;
    while (n < target) {
        r = r * 1103515245u + 12345u;
        uint32_t k = (r >> 16) % 100;
        const char *piece;
        char num[32];
        if (k < 80) piece = words[(r >> 8) % (sizeof words / sizeof words[0])];
        else if (k < 90) { snprintf(num, sizeof num, "%u", r % 1000000); piece = num; }
        else if (k < 93) piece = code;
        else if (k < 97) piece = k & 1 ? ", " : ". ";
        else piece = "\n\n    ";
        size_t m = strlen(piece);
        if (n + m + 1 > target + 255) break;
        memcpy(s + n, piece, m);
        n += m;
        s[n++] = ' ';
    }
    *len = n;
    return s;
}

static tokenizer *load(const char *name, const char *pre) {
    char err[256];
    tokenizer *t = NULL;
    gguf_writer *w = NULL;
    uint8_t *buf = NULL;
    size_t size;
    gguf_file g;
    if (!pre) {
        if (gguf_open(test_path(name), &g, err, sizeof err)) goto fail;
        t = tokenizer_load(&g, err, sizeof err);
        gguf_close(&g);
    } else {
        w = gguf_writer_new();
        int nv;
        if (vocab_from_tokenizer_json(test_path(name), pre, w, &nv, err, sizeof err) ||
            gguf_writer_to_buffer(w, &buf, &size, err, sizeof err) || gguf_open_memory(buf, size, &g, err, sizeof err))
            goto fail;
        t = tokenizer_load(&g, err, sizeof err);
        gguf_close(&g);
    }
    if (!t) goto fail;
    gguf_writer_free(w);
    free(buf);
    return t;
fail:
    fprintf(stderr, "%s: %s\n", name, err);
    gguf_writer_free(w);
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 11;
    if (runs < 1 || runs > 1000) runs = 11;
    size_t len;
    char *prompt = make_prompt(100 * 1024, &len);
    static const struct { const char *file, *pre, *label; } vocabs[] = {
        {"models/ggml-vocab-llama-spm.gguf", NULL, "llama-spm (SPM, 32000)"},
        {"models/ggml-vocab-gpt-2.gguf", NULL, "gpt-2 (BPE, 50257)"},
        {"models/llama3-tokenizer.json", "llama-bpe", "llama-bpe (BPE, 128256)"},
        {"models/qwen3-tokenizer.json", "qwen2", "qwen2 (BPE, 151669)"},
    };
    printf("prompt: %zu bytes, %d runs\n", len, runs);
    int status = 0;
    double *ms = malloc((size_t)runs * sizeof *ms);
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        double t0 = now_ms();
        tokenizer *t = load(vocabs[v].file, vocabs[v].pre);
        double load_ms = now_ms() - t0;
        if (!t) { status = 1; continue; }
        int n = 0;
        for (int r = 0; r < runs; r++) {
            int32_t *ids;
            t0 = now_ms();
            n = tokenizer_encode(t, prompt, len, true, true, &ids);
            ms[r] = now_ms() - t0;
            free(ids);
        }
        qsort(ms, (size_t)runs, sizeof *ms, cmp_double);
        printf("%-26s %7d tokens  encode ms: min %6.2f  median %6.2f  max %6.2f   (load %.0f ms)\n",
               vocabs[v].label, n, ms[0], ms[runs / 2], ms[runs - 1], load_ms);
        tokenizer_free(t);
    }
    free(ms);
    free(prompt);
    return status;
}
