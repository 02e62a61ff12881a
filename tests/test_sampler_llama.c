/* llama.cpp's further samplers against brute-force models written from
 * their definitions: locally typical, top-n-sigma and XTC (empirical
 * distributions), mirostat 1 and 2 (their surprise control), DRY (the
 * penalty of every token against a quadratic scan of the history, with
 * breakers), and their neutral values leaving the stream untouched. */
#include "tests/sampler_check.h"
#include <stdio.h>
#include <stdlib.h>

/* p at temperature 1 over all NV tokens. */
static void probs(const float *l, double *p) {
    int all[NV];
    for (int i = 0; i < NV; i++) all[i] = 1;
    softmax_keep(l, all, 1.0f, p);
}

static void test_typical(void) {
    for (int round = 0; round < 4; round++) {
        float l[NV];
        fill_logits(l, 3.0f);
        double p[NV], h = 0, score[NV];
        probs(l, p);
        for (int i = 0; i < NV; i++) h -= p[i] * log(p[i]);
        for (int i = 0; i < NV; i++) score[i] = fabs(-log(p[i]) - h);
        float tp = 0.3f + 0.2f * (float)round;
        int keep[NV] = {0}, used[NV] = {0};
        double cum = 0;
        while (cum < tp) {   /* the closest to the entropy first */
            int b = -1;
            for (int i = 0; i < NV; i++)
                if (!used[i] && (b < 0 || score[i] < score[b])) b = i;
            used[b] = keep[b] = 1;
            cum += p[b];
        }
        double want[NV];
        softmax_keep(l, keep, 1.0f, want);
        sampler_params sp = base();
        sp.typical_p = tp;
        char what[64];
        snprintf(what, sizeof what, "typical_p %.1f", tp);
        check_dist(what, &sp, l, want);
    }
}

static void test_top_n_sigma(void) {
    float l[NV];
    fill_logits(l, 4.0f);
    double mean = 0, var = 0, mx = -INFINITY;
    for (int i = 0; i < NV; i++) { mean += l[i] / (double)NV; if (l[i] > mx) mx = l[i]; }
    for (int i = 0; i < NV; i++) var += (l[i] - mean) * (l[i] - mean) / NV;
    int keep[NV];
    for (int i = 0; i < NV; i++) keep[i] = l[i] >= mx - 1.0 * sqrt(var);
    double want[NV];
    softmax_keep(l, keep, 0.7f, want);
    sampler_params sp = base();
    sp.top_n_sigma = 1.0f;
    sp.temperature = 0.7f;
    check_dist("top_n_sigma 1", &sp, l, want);
}

static void test_xtc(void) {
    /* three tokens above 0.15: the two most likely go, the third stays */
    float l[NV] = { 3.0f, 2.9f, 2.5f, 0.5f, 0.4f, 0.1f, 0, 0, -1, -2, -3, -4 };
    double p[NV];
    probs(l, p);
    int keep[NV], above = 0;
    for (int i = 0; i < NV; i++) { keep[i] = !(p[i] >= 0.15); above += !keep[i]; }
    CHECKF(above == 3, "fixture: %d tokens above the threshold", above);
    keep[2] = 1;
    double want[NV];
    softmax_keep(l, keep, 1.0f, want);
    sampler_params sp = base();
    sp.xtc_probability = 1.0f;
    sp.xtc_threshold = 0.15f;
    check_dist("xtc 1.0/0.15", &sp, l, want);
    /* chance one half: a mixture of the cut and the whole distribution */
    sp.xtc_probability = 0.5f;
    for (int i = 0; i < NV; i++) want[i] = 0.5 * want[i] + 0.5 * p[i];
    check_dist("xtc 0.5/0.15", &sp, l, want);
    /* threshold above one half: off, and no random number drawn */
    sp.xtc_threshold = 0.6f;
    sp.xtc_probability = 1.0f;
    sampler_params b = base();
    sampler *x = sampler_new(&sp, NV), *y = sampler_new(&b, NV);
    int same = 1;
    for (int i = 0; i < 500; i++) {
        float w1[NV], w2[NV];
        memcpy(w1, l, sizeof w1);
        memcpy(w2, l, sizeof w2);
        same &= sampler_sample(x, w1) == sampler_sample(y, w2);
    }
    CHECK(same);
    sampler_free(x);
    sampler_free(y);
}

/* Mirostat steers the draw's surprise to tau: a tiny tau soon leaves only
 * the most likely token; a tau above the distribution's surprises cuts
 * nothing (version 2: the first draws follow the plain distribution). */
static void test_mirostat(void) {
    float l[NV];
    fill_logits(l, 2.0f);
    int top = 0;
    for (int i = 1; i < NV; i++) if (l[i] > l[top]) top = i;
    for (int v = 1; v <= 2; v++) {
        sampler_params sp = base();
        sp.mirostat = v;
        sp.mirostat_tau = 0.01f;
        sp.mirostat_eta = 0.5f;
        sp.top_k = 1;   /* skipped under mirostat */
        sampler *s = sampler_new(&sp, NV);
        int late_top = 0;
        for (int i = 0; i < 400; i++) {
            float w[NV];
            memcpy(w, l, sizeof w);
            int32_t t = sampler_sample(s, w);
            CHECK(t >= 0 && t < NV);
            if (i >= 300) late_top += t == top;
        }
        CHECKF(late_top == 100, "mirostat %d, tau 0.01: %d of the last 100 draws the top token", v, late_top);
        /* reset: mu starts again at 2 tau, the same draws again */
        sampler_reset(s);
        sampler *f = sampler_new(&sp, NV);
        int same = 1;
        for (int i = 0; i < 50; i++) {
            float w1[NV], w2[NV];
            memcpy(w1, l, sizeof w1);
            memcpy(w2, l, sizeof w2);
            same &= sampler_sample(s, w1) == sampler_sample(f, w2);
        }
        CHECKF(same, "mirostat %d: a reset sampler repeats a new one", v);
        sampler_free(s);
        sampler_free(f);
    }
    /* version 2, tau 30 bits (mu 60): nothing is cut, mu only grows */
    sampler_params sp = base();
    sp.mirostat = 2;
    sp.mirostat_tau = 30.0f;
    double want[NV];
    probs(l, want);
    check_dist("mirostat 2, tau 30", &sp, l, want);
}

/* DRY by its definition: for each earlier position whose last n tokens
 * (no breaker among them) equal the history's last n, the token after it
 * would extend the repeat to n + 1; the longest n counts. */
static void dry_oracle(const int32_t *h, int L, const unsigned char *brk, int allowed, double mult, double base_,
                       const float *in, float *out) {
    int best[NV] = {0};
    for (int i = 0; i + 1 < L; i++) {   /* the repeat ends at h[i]; h[i + 1] followed it */
        int n = 0;
        while (i - n >= 0 && h[i - n] == h[L - 1 - n] && !brk[h[i - n]]) n++;
        if (n > best[h[i + 1]]) best[h[i + 1]] = n;
    }
    for (int t = 0; t < NV; t++) {
        out[t] = in[t];
        if (!brk[t] && best[t] >= allowed) out[t] = (float)((double)in[t] - mult * pow(base_, best[t] - allowed));
    }
}

static void test_dry(void) {
    int32_t breakers[] = { 0 };
    unsigned char brk[NV] = { 1 };
    for (int round = 0; round < 200; round++) {
        sampler_params sp = base();
        sp.dry_multiplier = 0.8f;
        sp.dry_base = 1.75f;
        sp.dry_allowed_length = 1 + round % 3;
        sp.dry_penalty_last_n = round % 2 ? 24 : -1;
        sp.dry_breakers = breakers;
        sp.n_dry_breakers = 1;
        sampler *s = sampler_new(&sp, NV);
        int32_t h[80];
        int L = 5 + round % 70, alphabet = 2 + round % 4;
        for (int i = 0; i < L; i++) {
            h[i] = (int32_t)((uint32_t)(rnd_logit(1000.0f) + 1000.0f) % (uint32_t)alphabet);
            sampler_accept(s, h[i]);
        }
        int from = sp.dry_penalty_last_n > 0 && L > sp.dry_penalty_last_n ? L - sp.dry_penalty_last_n : 0;
        float in[NV], got[NV], want[NV];
        fill_logits(in, 2.0f);
        memcpy(got, in, sizeof got);
        sampler_apply_bias_penalties(s, got);
        dry_oracle(h + from, L - from, brk, sp.dry_allowed_length, 0.8, 1.75, in, want);
        int ok = 1;
        for (int t = 0; t < NV; t++) ok &= fabsf(got[t] - want[t]) <= 1e-4f * (1 + fabsf(want[t]));
        CHECKF(ok, "dry round %d (L %d, allowed %d): token logits differ from the definition", round, L,
               sp.dry_allowed_length);
        sampler_free(s);
    }
    /* greedy sees DRY: after "1 2 3 1 2", token 3 would continue the repeat */
    sampler_params g = base();
    g.temperature = 0;
    g.dry_multiplier = 5;
    sampler *s = sampler_new(&g, NV);
    const int32_t h[] = { 1, 2, 3, 1, 2 };
    for (int i = 0; i < 5; i++) sampler_accept(s, h[i]);
    float l[NV] = { 0 };
    l[3] = 2.0f;
    l[4] = 1.0f;
    CHECK(sampler_greedy(s, l) == -1);
    CHECK(sampler_sample(s, l) == 4);
    sampler_free(s);
}

/* At their neutral values the new fields change nothing: the same stream
 * as the plain chain, draw for draw. */
static void test_neutral(void) {
    float l[NV];
    fill_logits(l, 3.0f);
    sampler_params a = base(), b = base();
    a.top_k = b.top_k = 6;
    a.seed = b.seed = 7;
    memset(&b.typical_p, 0, sizeof b.typical_p);   /* 0 and 1 are both off */
    b.xtc_probability = 0.0f;
    b.dry_multiplier = 0.0f;
    b.top_n_sigma = -1.0f;
    b.mirostat = 0;
    sampler *x = sampler_new(&a, NV), *y = sampler_new(&b, NV);
    int same = 1;
    for (int i = 0; i < 1000; i++) {
        float w1[NV], w2[NV];
        memcpy(w1, l, sizeof w1);
        memcpy(w2, l, sizeof w2);
        int32_t t = sampler_sample(x, w1);
        same &= t == sampler_sample(y, w2);
        sampler_accept(x, t);
        sampler_accept(y, t);
    }
    CHECK(same);
    sampler_free(x);
    sampler_free(y);
}

int main(void) {
    test_typical();
    test_top_n_sigma();
    test_xtc();
    test_mirostat();
    test_dry();
    test_neutral();
    return test_summary("sampler_llama");
}
