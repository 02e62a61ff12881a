/* What the benchmark programs (tests/bench_*.c) share: a monotonic clock
 * in milliseconds, a comparison of doubles for qsort, and the median of a
 * set of timings. */
#ifndef HEARTH_TEST_BENCH_UTIL_H
#define HEARTH_TEST_BENCH_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <time.h>

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v): the mean of the middle two for even n. */
static inline double median(double *v, int n) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
