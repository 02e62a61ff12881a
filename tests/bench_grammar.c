/* Grammar-constrained sampling speed on real vocabularies (by hand, not a test):
 *
 *   bench_grammar [VOCAB.gguf ...]     (default: the qwen3 and llama3 fixtures)
 *
 * Per vocabulary, with a JSON schema's grammar:
 *  - gen: the constraint's cost per generated token in a simulated
 *    generation (a random "sampled" token is checked first; when refused,
 *    the mask is taken, applied to a logits row and a token drawn from it);
 *  - walk: one full mask from a fresh sampler (no cached state or
 *    transition) at each prefix of a sample document: the first-time cost;
 *  - brute: the same masks with each token's bytes run through the matcher
 *    one token at a time, no trie (the baseline the trie is measured
 *    against), alternating walk, brute, brute, walk.
 * Each as min / median / mean / p99 / max in microseconds of the thread's
 * CPU time, so that on a busy machine the time others take does not count.
 * BENCH_JSON set: the json_object grammar instead of the schema's;
 * BENCH_NO_BRUTE set: walk only. */
#include "engine/sample/grammar.h"
#include "engine/sched/grammar_tokens.h"
#include "engine/sample/json_schema.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *v, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    printf("  %-6s n=%-5d min %8.1f  median %8.1f  mean %8.1f  p99 %8.1f  max %8.1f us\n", what, n, v[0], v[n / 2], sum / n,
           v[n - 1 - n / 100], v[n - 1]);
}

static uint64_t rng = 88172645463325252ull;
static uint32_t next_rand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng >> 11); }

static const char *SCHEMA =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
    "\"email\":{\"type\":\"string\",\"maxLength\":40},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":4},"
    "\"kind\":{\"enum\":[\"person\",\"robot\",\"other\"]},\"score\":{\"type\":\"number\"},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\",\"format\":\"date\"}},"
    "\"required\":[\"city\"]}},\"required\":[\"name\",\"age\",\"kind\"]}";
static const char *DOC = "{\"name\": \"Ada Lovelace\", \"age\": 36, \"email\": \"ada@example.org\", \"tags\": [\"math\", \"\xc3\xa9t\xc3\xa9\"], "
                         "\"kind\": \"person\", \"score\": -1.5e3, \"address\": {\"city\": \"London\"}}";

/* A fresh sampler advanced over prefix (one-byte steps through a matcher of its own, then set as the current state). */
static grammar_sampler *at_prefix(const grammar *g, const grammar_vocab *v, const tokenizer *t, size_t cut, int32_t *byte_tok) {
    grammar_sampler *s = grammar_sampler_new(g, v, true);
    for (size_t i = 0; s && i < cut; i++) grammar_sampler_accept(s, byte_tok[(uint8_t)DOC[i]]);
    (void)t;
    return s;
}

static void bench_vocab(const char *path) {
    gguf_file gf;
    char err[256];
    if (gguf_open(path, &gf, err, sizeof err)) { fprintf(stderr, "%s\n", err); return; }
    tokenizer *t = tokenizer_load(&gf, err, sizeof err);
    gguf_close(&gf);
    if (!t) { fprintf(stderr, "%s: %s\n", path, err); return; }
    int n = tokenizer_n_vocab(t);
    double t0 = now_us();
    grammar_vocab *v = grammar_vocab_from_tokenizer(t);
    double t_build = now_us() - t0;
    cJSON *sch = cJSON_Parse(SCHEMA);
    bool json = getenv("BENCH_JSON") != NULL;   /* the json_object grammar instead of the schema's */
    grammar *g = json ? grammar_json_object(err, sizeof err) : grammar_from_json_schema(sch, true, err, sizeof err);
    if (!v || !g) { fprintf(stderr, "setup: %s\n", err); return; }
    printf("%s (%s): %d tokens, trie %zu nodes, built in %.1f ms\n", path, json ? "json_object" : "schema", n,
           grammar_vocab_trie_nodes(v), t_build / 1e3);

    /* single-byte tokens, to reach a prefix token by token */
    int32_t byte_tok[256];
    char buf[1100];
    for (int b = 0; b < 256; b++) byte_tok[b] = -1;
    for (int i = 0; i < n; i++) {
        size_t len = tokenizer_token_bytes(t, i, false, buf, sizeof buf);
        if (len == 1 && byte_tok[(uint8_t)buf[0]] < 0 && !tokenizer_is_control(t, i)) byte_tok[(uint8_t)buf[0]] = i;
    }

    /* gen */
    float *logits = malloc(sizeof *logits * (size_t)n);
    enum { GEN_TOKENS = 3000 };
    double *gen = malloc(sizeof *gen * GEN_TOKENS);
    int ng = 0, masks = 0;
    grammar_sampler *s = grammar_sampler_new(g, v, true);
    while (ng < GEN_TOKENS) {
        for (int i = 0; i < n; i++) logits[i] = 0;
        double a = now_us();
        int32_t tok = (int32_t)(next_rand() % (uint32_t)n);
        if (!grammar_sampler_allows(s, tok)) {
            int n_allowed;
            const uint64_t *mask = grammar_sampler_mask(s, &n_allowed);
            masks++;
            if (!mask || !n_allowed) { grammar_sampler_free(s); s = grammar_sampler_new(g, v, true); continue; }
            grammar_mask_apply(mask, logits, n);
            int k = (int)(next_rand() % (uint32_t)n_allowed);
            for (tok = 0; tok < n; tok++) if (logits[tok] == 0 && k-- == 0) break;
        }
        grammar_sampler_accept(s, tok);
        gen[ng++] = now_us() - a;
        if (grammar_sampler_done(s) || tokenizer_is_eog(t, tok)) { grammar_sampler_free(s); s = grammar_sampler_new(g, v, true); }
    }
    grammar_sampler_free(s);
    printf("  gen: %d tokens, the full mask taken for %d of them\n", ng, masks);
    report("gen", gen, ng);

    /* walk vs brute, alternating */
    size_t dl = strlen(DOC);
    int cuts = 0;
    double *walk = malloc(sizeof(double) * 4 * dl), *brute = malloc(sizeof(double) * 4 * dl);
    int nw = 0, nb = 0;
    uint64_t *bits = malloc(((size_t)n + 63) / 64 * 8);
    for (int round = 0; round < 4; round++) {
        bool walk_first = round == 0 || round == 3;
        for (size_t cut = 0; cut <= dl; cut += 3, cuts++) {
            for (int pass = 0; pass < 2; pass++) {
                bool is_walk = (pass == 0) == walk_first;
                if (!is_walk && getenv("BENCH_NO_BRUTE")) continue;
                grammar_sampler *x = at_prefix(g, v, t, cut, byte_tok);
                if (!x) continue;
                double a = now_us();
                if (is_walk) {
                    int n_allowed;
                    grammar_sampler_mask(x, &n_allowed);
                    walk[nw++] = now_us() - a;
                    if (getenv("BENCH_VERBOSE") && round == 0) printf("    cut %zu (%.12s): %.1f us, %d allowed\n", cut, DOC + cut, walk[nw - 1], n_allowed);
                } else {
                    memset(bits, 0, ((size_t)n + 63) / 64 * 8);
                    for (int i = 0; i < n; i++) if (grammar_sampler_allows(x, i)) bits[i >> 6] |= 1ull << (i & 63);
                    brute[nb++] = now_us() - a;
                }
                grammar_sampler_free(x);
            }
        }
    }
    report("walk", walk, nw);
    if (nb) report("brute", brute, nb);
    if (nb) printf("  walk/brute medians: %.3f\n", walk[nw / 2] / brute[nb / 2]);
    free(bits); free(walk); free(brute); free(gen); free(logits);
    grammar_free(g);
    cJSON_Delete(sch);
    grammar_vocab_free(v);
    tokenizer_free(t);
}

int main(int argc, char **argv) {
    if (argc > 1) { for (int i = 1; i < argc; i++) bench_vocab(argv[i]); return 0; }
    const char *d = getenv("HEARTH_SHARED");
    char p[1024];
    snprintf(p, sizeof p, "%s/fixtures/qwen3-tiny-Q4_K_M.gguf", d && *d ? d : "../shared");
    bench_vocab(p);
    snprintf(p, sizeof p, "%s/fixtures/llama3-tiny-Q4_0.gguf", d && *d ? d : "../shared");
    bench_vocab(p);
    return 0;
}
