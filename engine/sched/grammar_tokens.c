/* A tokenizer's vocabulary for grammar sampling: each token's bytes as the
 * detokenizer writes them, EOG tokens marked, control tokens never possible. */
#include "engine/sched/grammar_tokens.h"
#include "engine/text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

grammar_vocab *grammar_vocab_from_tokenizer(const tokenizer *t) {
    int n = tokenizer_n_vocab(t);
    if (n <= 0) return NULL;
    char **b = calloc((size_t)n, sizeof *b);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    uint8_t *kind = calloc((size_t)n, 1);
    char *buf = malloc(GRAMMAR_MAX_TOKEN_BYTES + 1);
    grammar_vocab *v = NULL;
    if (!b || !lens || !kind || !buf) goto out;
    for (int i = 0; i < n; i++) {
        if (tokenizer_is_eog(t, i)) { kind[i] = GV_EOG; continue; }
        if (tokenizer_is_control(t, i)) { kind[i] = GV_NEVER; continue; }
        size_t len = tokenizer_token_bytes(t, i, false, buf, GRAMMAR_MAX_TOKEN_BYTES + 1);
        if (!len || len > GRAMMAR_MAX_TOKEN_BYTES) { kind[i] = GV_NEVER; continue; }
        b[i] = malloc(len);
        if (!b[i]) goto out;
        memcpy(b[i], buf, len);
        lens[i] = len;
    }
    v = grammar_vocab_new(n, (const char *const *)b, lens, kind);
out:
    if (b) for (int i = 0; i < n; i++) free(b[i]);
    free(b); free(lens); free(kind); free(buf);
    return v;
}

