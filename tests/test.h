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

/* Prints SKIP with a reason (a missing input that CI must provide). */
#define SKIP(...) do { printf("SKIP: "); printf(__VA_ARGS__); printf("\n"); } while (0)

static inline int test_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, test_pass_count, test_fail_count);
    return test_fail_count ? 1 : 0;
}

#endif
