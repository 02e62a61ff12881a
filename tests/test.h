/* A small test harness: CHECK records a failure and goes on; each test
 * program ends with test_summary(), which prints "N passed, N failed". */
#ifndef HEARTH_TEST_H
#define HEARTH_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_pass_count, test_fail_count;

#define CHECK(cond) do { \
    if (cond) test_pass_count++; \
    else { test_fail_count++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECKF(cond, ...) do { \
    if (cond) test_pass_count++; \
    else { test_fail_count++; fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
           fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
} while (0)

/* The folder with models/ and fixtures/ (HEARTH_SHARED, else ../shared). */
static inline const char *test_shared_dir(void) {
    const char *s = getenv("HEARTH_SHARED");
    return s && *s ? s : "../shared";
}

static inline char *test_path(const char *rel) {
    static char buf[4][1024];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", test_shared_dir(), rel);
    return b;
}

/* A whole file, NUL-terminated (malloc'd), or NULL; *len gets its size if len. */
static inline char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; if (len) *len = (size_t)n; }
    return b;
}

/* Prints SKIP with a reason (a missing input that CI must provide). */
#define SKIP(...) do { printf("SKIP: "); printf(__VA_ARGS__); printf("\n"); } while (0)

static inline int test_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, test_pass_count, test_fail_count);
    return test_fail_count ? 1 : 0;
}

#endif
