/* libFuzzer target: grammars and JSON schemas from bytes. The first byte
 * picks the input kind (even: GBNF text, odd: a JSON schema); a grammar that
 * parses is then fed the rest of the input after its first newline-newline
 * (or the grammar text itself) byte by byte, and its mask is taken over a
 * small synthetic vocabulary. Nothing may crash, leak or run unbounded. */
#include "engine/sample/grammar.h"
#include "engine/sample/json_schema.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static grammar_vocab *small_vocab(void) {
    static const char *const pieces[] = { "{", "}", "\"", "a", "ab", "abc", " ", "\n", ":", ",", "[", "]", "1", "12",
                                          "-", ".", "e", "true", "null", "\xc3", "\xa9", "\xc3\xa9", "\xf0\x9f", "\x98\x80",
                                          "\\", "u", "x", "{\"", "\":", "\",\"", "", "<eos>" };
    enum { N = sizeof pieces / sizeof *pieces };
    size_t lens[N];
    uint8_t kind[N];
    for (int i = 0; i < N; i++) { lens[i] = strlen(pieces[i]); kind[i] = GV_TEXT; }
    kind[N - 1] = GV_EOG;
    return grammar_vocab_new(N, pieces, lens, kind);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1 << 16) return 0;
    static grammar_vocab *v;
    if (!v) v = small_vocab();
    char err[256];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    /* the text to match: after a blank line, else the source itself */
    const char *feed = text;
    size_t n_feed = n;
    for (size_t i = 0; i + 1 < n; i++)
        if (text[i] == '\n' && text[i + 1] == '\n') { feed = text + i + 2; n_feed = n - i - 2; n = i; break; }
    grammar *g = NULL;
    if (data[0] & 1) {
        cJSON *s = cJSON_ParseWithLength(text, n);
        if (s) g = grammar_from_json_schema(s, data[0] & 2, err, sizeof err);
        cJSON_Delete(s);
    } else {
        g = grammar_parse(text, n, err, sizeof err);
    }
    if (!g) return 0;
    grammar_matcher *m = grammar_matcher_new(g);
    for (size_t i = 0; m && i < n_feed && i < 512; i++) grammar_matcher_accept(m, feed + i, 1);
    grammar_matcher_free(m);
    grammar_sampler *gs = grammar_sampler_new(g, v, true);
    for (int step = 0; gs && step < 16; step++) {
        int n_allowed;
        const uint64_t *mask = grammar_sampler_mask(gs, &n_allowed);
        if (!mask || !n_allowed) break;
        int pick = -1;
        for (int t = 0, k = step % (n_allowed ? n_allowed : 1); t < grammar_vocab_n(v); t++)
            if (mask[t >> 6] >> (t & 63) & 1 && k-- == 0) { pick = t; break; }
        if (pick < 0 || !grammar_sampler_allows(gs, pick) || !grammar_sampler_accept(gs, pick)) __builtin_trap();
    }
    grammar_sampler_free(gs);
    grammar_free(g);
    return 0;
}
