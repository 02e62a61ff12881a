/* Helpers shared by the sampler tests: test-only random logits, the
 * brute-force softmax of a kept set, and an empirical check of a sampler's
 * distribution against an expected one. */
#ifndef HEARTH_TESTS_SAMPLER_CHECK_H
#define HEARTH_TESTS_SAMPLER_CHECK_H

#include "tests/test.h"
#include "engine/sample/sampler.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

#define NV 12
#define DRAWS 20000

/* Test-only pseudo-random logits (an LCG, independent of the sampler's RNG). */
static uint32_t lcg = 12345;
static inline float rnd_logit(float scale) {
    lcg = lcg * 1664525u + 1013904223u;
    return ((float)(lcg >> 8) / 16777216.0f - 0.5f) * 2.0f * scale;
}

static inline sampler_params base(void) {
    sampler_params p;
    sampler_params_default(&p);
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.penalty_last_n = 0;
    p.seed = 42;
    return p;
}

/* Brute force: softmax of l/t over the tokens where keep[i]. */
static inline void softmax_keep(const float *l, const int *keep, float t, double *p) {
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < NV; i++) if (keep[i] && l[i] > mx) mx = l[i];
    for (int i = 0; i < NV; i++) { p[i] = keep[i] ? exp((l[i] - mx) / t) : 0.0; z += p[i]; }
    for (int i = 0; i < NV; i++) p[i] /= z;
}

/* Draw DRAWS tokens from fresh copies of l and compare frequencies with p:
 * tokens with p == 0 must never appear; others within 5 sigma + 0.003. */
static inline void check_dist(const char *what, const sampler_params *sp, const float *l, const double *p) {
    sampler *s = sampler_new(sp, NV);
    CHECK(s != NULL);
    if (!s) return;
    int cnt[NV] = {0}, bad = 0;
    float work[NV];
    for (int d = 0; d < DRAWS; d++) {
        memcpy(work, l, sizeof work);
        int32_t t = sampler_sample(s, work);
        if (t < 0 || t >= NV) bad++; else cnt[t]++;
    }
    CHECKF(bad == 0, "%s: %d out-of-range ids", what, bad);
    for (int i = 0; i < NV; i++) {
        double f = (double)cnt[i] / DRAWS;
        if (p[i] == 0.0) {
            CHECKF(cnt[i] == 0, "%s: token %d outside the filter drawn %d times", what, i, cnt[i]);
        } else {
            double tol = 5.0 * sqrt(p[i] * (1 - p[i]) / DRAWS) + 0.003;
            CHECKF(fabs(f - p[i]) <= tol, "%s: token %d freq %.4f expected %.4f", what, i, f, p[i]);
        }
    }
    sampler_free(s);
}

static inline void fill_logits(float *l, float scale) { for (int i = 0; i < NV; i++) l[i] = rnd_logit(scale); }

#endif
