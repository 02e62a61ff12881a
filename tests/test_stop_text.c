/* Stop strings over a stream (engine/text/stop_text.c): fixed cases (a
 * stop split over pushes, a prefix held then released, the earliest of
 * several, empty stops ignored, flush), then random streams cut at random
 * points against what must hold whatever the cuts: the released text is a
 * prefix of the text in order and holds no stop string; without a hit it is
 * the whole text (which holds none); with one, the stop named starts right
 * after it, no later than the occurrence that ends first (a stream stops
 * at the first stop it completes). */
#include "tests/test.h"
#include "engine/text/stop_text.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct { char buf[4096]; size_t n; } sink;

static void take(sink *k, const char *p, size_t n) {
    if (k->n + n < sizeof k->buf) memcpy(k->buf + k->n, p, n);
    k->n += n;
}

/* Pushes text in pieces of the given sizes (0-terminated list; the rest in one), then flushes when no stop hit. */
static int run(const char *const *stops, int n_stops, const char *text, const size_t *cuts, sink *k) {
    stop_text st;
    if (stop_text_init(&st, stops, n_stops)) return -9;
    k->n = 0;
    size_t len = strlen(text), at = 0;
    int hit = -1;
    for (int c = 0; at < len && hit < 0; c++) {
        size_t n = cuts && cuts[c] ? cuts[c] : len - at;
        if (n > len - at) n = len - at;
        const char *out;
        size_t out_len;
        hit = stop_text_push(&st, text + at, n, &out, &out_len);
        take(k, out, out_len);
        at += n;
    }
    if (hit < 0) {
        const char *out;
        size_t out_len;
        stop_text_flush(&st, &out, &out_len);
        take(k, out, out_len);
    }
    stop_text_free(&st);
    return hit;
}

static int is(const sink *k, const char *want) { return k->n == strlen(want) && !memcmp(k->buf, want, k->n); }

static void test_cases(void) {
    sink k;
    const char *s1[] = { "STOP" };
    size_t ones[64];
    for (int i = 0; i < 63; i++) ones[i] = 1;
    ones[63] = 0;
    CHECK(run(s1, 1, "hello world", NULL, &k) == -1 && is(&k, "hello world"));
    CHECK(run(s1, 1, "hello STOP world", NULL, &k) == 0 && is(&k, "hello "));
    CHECK(run(s1, 1, "hello STOP world", ones, &k) == 0 && is(&k, "hello "));          /* split over pushes */
    CHECK(run(s1, 1, "a STO then STOP", ones, &k) == 0 && is(&k, "a STO then "));      /* a held prefix released */
    CHECK(run(s1, 1, "ends in STO", ones, &k) == -1 && is(&k, "ends in STO"));         /* held, then flushed */
    const char *s2[] = { "world", "lo w" };
    CHECK(run(s2, 2, "hello world", NULL, &k) == 1 && is(&k, "hel"));                  /* earliest position wins */
    const char *s3[] = { "", "x" };
    CHECK(run(s3, 2, "abc", NULL, &k) == -1 && is(&k, "abc"));                         /* an empty stop is ignored */
    CHECK(run(s3, 2, "abxc", NULL, &k) == 0 && is(&k, "ab"));                         /* indices count the kept stops */
    CHECK(run(NULL, 0, "no stops at all", ones, &k) == -1 && is(&k, "no stops at all"));
    /* nothing that could still be a stop is released early */
    stop_text st;
    CHECK(stop_text_init(&st, s1, 1) == 0);
    const char *out;
    size_t n;
    CHECK(stop_text_push(&st, "abcST", 5, &out, &n) == -1 && n == 3 && !memcmp(out, "abc", 3));
    CHECK(stop_text_push(&st, "O", 1, &out, &n) == -1 && n == 0);
    CHECK(stop_text_push(&st, "x", 1, &out, &n) == -1 && n == 4 && !memcmp(out, "STOx", 4));
    stop_text_free(&st);
}

static uint64_t rng = 88172645463325252ull;
static unsigned rnd(unsigned n) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (unsigned)(rng % n); }

static void test_random(void) {
    int bad = 0;
    for (int iter = 0; iter < 20000 && bad < 5; iter++) {
        char text[200], stopbuf[4][8];
        const char *stops[4];
        size_t len = 1 + rnd(150);
        for (size_t i = 0; i < len; i++) text[i] = (char)('a' + rnd(3));   /* a small alphabet: many near misses */
        text[len] = 0;
        int n_stops = (int)rnd(4);
        for (int i = 0; i < n_stops; i++) {
            size_t L = 1 + rnd(5);
            for (size_t j = 0; j < L; j++) stopbuf[i][j] = (char)('a' + rnd(3));
            stopbuf[i][L] = 0;
            stops[i] = stopbuf[i];
        }
        size_t cuts[201];
        for (int i = 0; i < 200; i++) cuts[i] = 1 + rnd(6);
        cuts[200] = 0;
        sink k;
        int hit = run(stops, n_stops, text, cuts, &k);
        /* the occurrence that ends first (at the first listed, for a tie) */
        size_t first_end = SIZE_MAX, first_start = 0;
        for (size_t at = 0; at < len; at++)
            for (int i = 0; i < n_stops; i++) {
                size_t L = strlen(stops[i]);
                if (at + L <= len && !strncmp(text + at, stops[i], L) && at + L < first_end) { first_end = at + L; first_start = at; }
            }
        bool ok = k.n <= len && !memcmp(k.buf, text, k.n);
        for (size_t at = 0; ok && at < k.n; at++)   /* no stop inside what was released */
            for (int i = 0; i < n_stops; i++)
                if (at + strlen(stops[i]) <= k.n && !strncmp(text + at, stops[i], strlen(stops[i]))) ok = false;
        if (hit < 0) ok = ok && k.n == len && first_end == SIZE_MAX;
        else ok = ok && hit < n_stops && !strncmp(text + k.n, stops[hit], strlen(stops[hit])) && k.n <= first_start;
        if (!ok) {
            bad++;
            fprintf(stderr, "text %s, %d stops: hit %d, released %zu\n", text, n_stops, hit, k.n);
        }
    }
    CHECK(bad == 0);
}

int main(void) {
    test_cases();
    test_random();
    return test_summary("stop_text");
}
