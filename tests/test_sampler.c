/* Sampler tests: every filter against a brute-force model of the filtered
 * distribution (empirical frequencies over many draws with a fixed seed),
 * penalties against their formulas, bans, seeds, reset, logprobs. */
#include "tests/test.h"
#include "engine/sample/sampler.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "tests/sampler_check.h"

/* Order of ids by logit descending (ties: lower id first), by selection. */
static void order_desc(const float *l, int *ord) {
    int used[NV] = {0};
    for (int k = 0; k < NV; k++) {
        int best = -1;
        for (int i = 0; i < NV; i++)
            if (!used[i] && (best < 0 || l[i] > l[best])) best = i;
        used[best] = 1;
        ord[k] = best;
    }
}


static void test_greedy(void) {
    sampler_params p = base();
    p.temperature = 0.0f;
    sampler *s = sampler_new(&p, NV);
    for (int rep = 0; rep < 50; rep++) {
        float l[NV], w[NV];
        fill_logits(l, 4.0f);
        int best = 0;
        for (int i = 1; i < NV; i++) if (l[i] > l[best]) best = i;
        memcpy(w, l, sizeof w);
        CHECK(sampler_sample(s, w) == best);
    }
    float tie[NV] = {0};
    tie[3] = tie[7] = 2.0f;
    CHECK(sampler_sample(s, tie) == 3);
    /* top_k cuts between equal logits by lower id too */
    sampler_params pk = base();
    pk.top_k = 1;
    sampler *sk = sampler_new(&pk, NV);
    int low = 0;
    for (int d = 0; d < 200; d++) {
        float w[NV];
        for (int i = 0; i < NV; i++) w[i] = i % 4 == 3 ? 2.0f : 0.0f;  /* 3, 7, 11 tie */
        low += sampler_sample(sk, w) == 3;
    }
    CHECK(low == 200);
    sampler_free(sk);
    /* negative temperature is greedy too */
    sampler_free(s);
    p.temperature = -1.0f;
    s = sampler_new(&p, NV);
    float l[NV] = {0};
    l[9] = 0.5f;
    CHECK(sampler_sample(s, l) == 9);
    sampler_free(s);
}

/* sampler_greedy against sampler_sample on the same rows: NaN, +-inf,
 * ties, signed zeros, all -inf, odd lengths; and -1 where it does not apply
 * (temperature, logit_bias, penalties after a token). */
static void test_greedy_fast(void) {
    static const int sizes[] = { 1, 7, 8, 9, 33, 1000, 151936 };
    int bad = 0, cases = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int n = sizes[si];
        sampler_params p = base();
        p.temperature = 0.0f;
        sampler *s = sampler_new(&p, n);
        float *row = malloc(sizeof(float) * (size_t)n), *w = malloc(sizeof(float) * (size_t)n);
        for (int rep = 0; rep < 40; rep++) {
            for (int i = 0; i < n; i++) {
                lcg = lcg * 1664525u + 1013904223u;
                uint32_t r = lcg >> 8;
                row[i] = (float)((int)(r % 7) - 3) * 0.5f;          /* many ties */
                if (rep % 5 == 1 && r % 13 == 0) row[i] = NAN;
                if (rep % 5 == 2 && r % 29 == 0) row[i] = INFINITY;
                if (rep % 5 == 3) row[i] = (r & 1) ? -0.0f : 0.0f;
                if (rep % 5 == 4) row[i] = (r % 3) ? -INFINITY : NAN;   /* nothing finite */
            }
            if (rep == 10) row[n - 1] = 100.0f;                  /* the maximum in the tail */
            memcpy(w, row, sizeof(float) * (size_t)n);
            int32_t want = sampler_sample(s, w), got = sampler_greedy(s, row);
            bad += want != got;
            cases++;
        }
        /* not greedy-as-is: -1 */
        sampler_params pt = base();
        pt.temperature = 0.7f;
        sampler *st = sampler_new(&pt, n);
        CHECK(sampler_greedy(st, row) == -1);
        sampler_free(st);
        logit_bias_entry lb = { 0, 1.0f };
        sampler_params pb = base();
        pb.temperature = 0.0f;
        pb.logit_bias = &lb;
        pb.n_logit_bias = 1;
        sampler *sb = sampler_new(&pb, n);
        CHECK(sampler_greedy(sb, row) == -1);
        sampler_free(sb);
        sampler_params pr = base();
        pr.temperature = 0.0f;
        pr.repeat_penalty = 1.3f;
        pr.penalty_last_n = -1;
        sampler *sr = sampler_new(&pr, n);
        CHECK(sampler_greedy(sr, row) >= 0);    /* no token seen yet: nothing to penalise */
        sampler_accept(sr, 0);
        CHECK(sampler_greedy(sr, row) == -1);
        sampler_free(sr);
        sampler_free(s);
        free(row); free(w);
    }
    CHECKF(bad == 0, "sampler_greedy differs from sampler_sample in %d of %d rows", bad, cases);
}

static void test_temperature(void) {
    float l[NV];
    fill_logits(l, 2.0f);
    int all[NV];
    for (int i = 0; i < NV; i++) all[i] = 1;
    const float temps[] = {1.0f, 0.5f, 2.0f};
    for (int k = 0; k < 3; k++) {
        sampler_params p = base();
        p.temperature = temps[k];
        double ref[NV];
        softmax_keep(l, all, temps[k], ref);
        char what[64];
        snprintf(what, sizeof what, "temperature %.1f", temps[k]);
        check_dist(what, &p, l, ref);
    }
}

static void test_top_k(void) {
    float l[NV];
    fill_logits(l, 2.0f);
    int ord[NV];
    order_desc(l, ord);
    for (int k = 1; k <= 4; k++) {
        int keep[NV] = {0};
        for (int i = 0; i < k; i++) keep[ord[i]] = 1;
        double ref[NV];
        softmax_keep(l, keep, 1.0f, ref);
        sampler_params p = base();
        p.top_k = k;
        check_dist("top_k", &p, l, ref);
    }
    /* top_k beyond the vocabulary keeps everything */
    int all[NV];
    for (int i = 0; i < NV; i++) all[i] = 1;
    double ref[NV];
    softmax_keep(l, all, 1.0f, ref);
    sampler_params p = base();
    p.top_k = 1000;
    check_dist("top_k > n_vocab", &p, l, ref);
}

static void test_top_p(void) {
    float l[NV];
    fill_logits(l, 2.0f);
    int ord[NV], all[NV];
    for (int i = 0; i < NV; i++) all[i] = 1;
    order_desc(l, ord);
    double full[NV];
    softmax_keep(l, all, 1.0f, full);
    const float ps[] = {0.3f, 0.6f, 0.9f};
    for (int k = 0; k < 3; k++) {
        /* keep the smallest head whose mass reaches p */
        int keep[NV] = {0};
        double cum = 0;
        for (int i = 0; i < NV; i++) {
            keep[ord[i]] = 1;
            cum += full[ord[i]];
            if (cum >= ps[k]) break;
        }
        double ref[NV];
        softmax_keep(l, keep, 1.0f, ref);
        sampler_params p = base();
        p.top_p = ps[k];
        check_dist("top_p", &p, l, ref);
    }
}

/* Exact kept set of top_p on a larger vocabulary with many equal logits
 * (crowded buckets): with a huge temperature the kept tokens are equally
 * likely, so enough draws show every one of them, and nothing else. */
static void test_top_p_set(void) {
    enum { V = 20000, DR = 4000 };
    static float l[V], w[V];
    static int seen[V], want[V], ord_used[V];
    for (int i = 0; i < V; i++) l[i] = rnd_logit(1.0f);
    for (int i = 0; i < 80; i++) {                  /* a peak of quantized, tied logits */
        int t = (int)((uint32_t)(rnd_logit(1.0f) * 1e6f + 2e6f) % V);
        float u = rnd_logit(0.75f) + 0.75f;          /* continuous: neighbouring buckets */
        l[t] = 12.0f + (i % 2 ? 0.25f * (float)(i % 6) : u);
    }
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < V; i++) if (l[i] > mx) mx = l[i];
    for (int i = 0; i < V; i++) z += exp(l[i] - mx);
    const float ps[] = {0.3f, 0.9f};
    for (int k = 0; k < 2; k++) {
        /* brute force: walk down the total order until the mass reaches p */
        memset(want, 0, sizeof want);
        memset(ord_used, 0, sizeof ord_used);
        double cum = 0;
        int n_want = 0;
        while (cum < ps[k] * z) {
            int best = -1;
            for (int i = 0; i < V; i++)
                if (!ord_used[i] && (best < 0 || l[i] > l[best])) best = i;
            ord_used[best] = want[best] = 1;
            n_want++;
            cum += exp(l[best] - mx);
        }
        sampler_params p = base();
        p.top_p = ps[k];
        p.temperature = 1e30f;
        sampler *s = sampler_new(&p, V);
        memset(seen, 0, sizeof seen);
        for (int d = 0; d < DR; d++) {
            memcpy(w, l, sizeof w);
            int32_t t = sampler_sample(s, w);
            if (t >= 0 && t < V) seen[t] = 1;
        }
        int extra = 0, missing = 0;
        for (int i = 0; i < V; i++) { extra += seen[i] && !want[i]; missing += want[i] && !seen[i]; }
        CHECKF(extra == 0 && missing == 0, "top_p %.1f: %d tokens wanted, %d extra, %d missing",
               ps[k], n_want, extra, missing);
        CHECK(n_want > 1 && n_want < 80);
        sampler_free(s);
    }
}

static void test_min_p(void) {
    float l[NV];
    fill_logits(l, 3.0f);
    int all[NV];
    for (int i = 0; i < NV; i++) all[i] = 1;
    double full[NV], pmax = 0;
    softmax_keep(l, all, 1.0f, full);
    for (int i = 0; i < NV; i++) if (full[i] > pmax) pmax = full[i];
    const float mps[] = {0.05f, 0.2f, 0.5f};
    for (int k = 0; k < 3; k++) {
        int keep[NV];
        for (int i = 0; i < NV; i++) keep[i] = full[i] >= mps[k] * pmax;
        double ref[NV];
        softmax_keep(l, keep, 1.0f, ref);
        sampler_params p = base();
        p.min_p = mps[k];
        check_dist("min_p", &p, l, ref);
    }
}

/* The whole chain, in llama.cpp's order: top_k, then top_p and min_p on the
 * renormalized temperature-1 distribution, then temperature. */
static void test_chain(void) {
    float l[NV];
    fill_logits(l, 2.5f);
    int ord[NV];
    order_desc(l, ord);
    int keep[NV] = {0};
    for (int i = 0; i < 8; i++) keep[ord[i]] = 1;            /* top_k 8 */
    double d[NV];
    softmax_keep(l, keep, 1.0f, d);
    int keep2[NV] = {0};
    double cum = 0;
    for (int i = 0; i < 8; i++) {                             /* top_p 0.8 */
        keep2[ord[i]] = 1;
        cum += d[ord[i]];
        if (cum >= 0.8) break;
    }
    softmax_keep(l, keep2, 1.0f, d);
    double pmax = d[ord[0]];
    for (int i = 0; i < NV; i++) keep2[i] = keep2[i] && d[i] >= 0.1 * pmax;  /* min_p 0.1 */
    double ref[NV];
    softmax_keep(l, keep2, 0.7f, ref);                        /* temperature 0.7 */
    sampler_params p = base();
    p.top_k = 8;
    p.top_p = 0.8f;
    p.min_p = 0.1f;
    p.temperature = 0.7f;
    check_dist("chain", &p, l, ref);
}

static void test_penalties(void) {
    sampler_params p = base();
    p.repeat_penalty = 1.5f;
    p.frequency_penalty = 0.25f;
    p.presence_penalty = 0.5f;
    p.penalty_last_n = 4;
    sampler *s = sampler_new(&p, NV);
    /* window after these: 5 2 2 7 (the first 1 and 3 have left it) */
    const int32_t hist[] = {1, 3, 5, 2, 2, 7};
    for (int i = 0; i < 6; i++) sampler_accept(s, hist[i]);
    sampler_accept(s, -1);      /* out of range: ignored */
    sampler_accept(s, NV);
    float l[NV], w[NV];
    for (int i = 0; i < NV; i++) l[i] = (i % 2 ? 1.0f : -1.0f) * (0.5f + (float)i);
    memcpy(w, l, sizeof w);
    sampler_apply_bias_penalties(s, w);
    int count[NV] = {0};
    count[5] = 1; count[2] = 2; count[7] = 1;
    for (int i = 0; i < NV; i++) {
        if (!count[i]) {
            CHECKF(w[i] == l[i], "token %d outside the window changed: %g -> %g", i, l[i], w[i]);
            continue;
        }
        float e = l[i] > 0 ? l[i] / 1.5f : l[i] * 1.5f;
        e -= (float)count[i] * 0.25f + 0.5f;
        CHECKF(fabsf(w[i] - e) < 1e-5f, "token %d: %g expected %g", i, w[i], e);
    }

    /* Greedy sampling sees the penalties: the top token, once repeated, loses. */
    sampler_params g = base();
    g.temperature = 0.0f;
    g.repeat_penalty = 2.0f;
    g.penalty_last_n = -1;
    sampler *sg = sampler_new(&g, NV);
    float a[NV] = {0};
    a[4] = 3.0f; a[6] = 2.0f;
    memcpy(w, a, sizeof w);
    CHECK(sampler_sample(sg, w) == 4);
    sampler_accept(sg, 4);
    memcpy(w, a, sizeof w);
    CHECK(sampler_sample(sg, w) == 6);
    /* whole history (-1): a token accepted long ago is still penalized */
    for (int i = 0; i < 1000; i++) sampler_accept(sg, 9);
    memcpy(w, a, sizeof w);
    CHECK(sampler_sample(sg, w) == 6);
    /* reset forgets the history */
    sampler_reset(sg);
    memcpy(w, a, sizeof w);
    CHECK(sampler_sample(sg, w) == 4);
    sampler_free(sg);

    /* penalty_last_n 0: nothing changes */
    p.penalty_last_n = 0;
    sampler *s0 = sampler_new(&p, NV);
    for (int i = 0; i < 6; i++) sampler_accept(s0, hist[i]);
    memcpy(w, l, sizeof w);
    sampler_apply_bias_penalties(s0, w);
    CHECK(memcmp(w, l, sizeof w) == 0);
    sampler_free(s0);
    sampler_free(s);
}

static void test_logit_bias(void) {
    logit_bias_entry bias[] = {
        {5, -INFINITY}, {2, 1.5f}, {-3, 100.0f}, {NV, 100.0f}, {1 << 30, 5.0f},
    };
    sampler_params p = base();
    p.temperature = 0.0f;
    p.logit_bias = bias;
    p.n_logit_bias = 5;
    sampler *s = sampler_new(&p, NV);
    bias[1].bias = 1000.0f;     /* must not matter: the table was copied */
    float l[NV] = {0}, w[NV];
    l[5] = 10.0f; l[2] = 1.0f; l[8] = 2.0f;
    memcpy(w, l, sizeof w);
    CHECK(sampler_sample(s, w) == 2);    /* 5 banned; 2 gets 1 + 1.5 = 2.5 > 2 */
    memcpy(w, l, sizeof w);
    sampler_apply_bias_penalties(s, w);
    CHECK(w[5] == -INFINITY);
    CHECK(w[2] == 2.5f);
    for (int i = 0; i < NV; i++) if (i != 5 && i != 2) CHECK(w[i] == l[i]);
    sampler_free(s);

    /* sampled: a banned token never appears, even when it dominates */
    p = base();
    p.logit_bias = bias;
    p.n_logit_bias = 1;
    s = sampler_new(&p, NV);
    int hit = 0;
    for (int d = 0; d < 5000; d++) {
        memcpy(w, l, sizeof w);
        if (sampler_sample(s, w) == 5) hit++;
    }
    CHECK(hit == 0);
    sampler_free(s);

    /* all banned: the argmax of the raw logits, for greedy and sampled */
    logit_bias_entry ban[NV];
    for (int i = 0; i < NV; i++) { ban[i].id = i; ban[i].bias = -INFINITY; }
    for (int mode = 0; mode < 2; mode++) {
        p = base();
        p.temperature = mode ? 1.0f : 0.0f;
        p.logit_bias = ban;
        p.n_logit_bias = NV;
        s = sampler_new(&p, NV);
        memcpy(w, l, sizeof w);
        CHECK(sampler_sample(s, w) == 5);
        sampler_free(s);
    }
}

static void test_odd_logits(void) {
    sampler_params p = base();
    p.top_k = 5;
    p.top_p = 0.9f;
    p.min_p = 0.01f;
    sampler *s = sampler_new(&p, NV);
    float w[NV];
    /* NaN is never chosen while something else is possible */
    int nan_hits = 0;
    for (int d = 0; d < 2000; d++) {
        for (int i = 0; i < NV; i++) w[i] = i % 3 ? NAN : 0.0f;
        int32_t t = sampler_sample(s, w);
        if (t < 0 || t >= NV || t % 3) nan_hits++;
    }
    CHECK(nan_hits == 0);
    /* +inf tokens share the mass; the rest get nothing */
    int cnt[NV] = {0};
    for (int d = 0; d < 4000; d++) {
        for (int i = 0; i < NV; i++) w[i] = 1.0f;
        w[2] = w[9] = INFINITY;
        int32_t t = sampler_sample(s, w);
        if (t >= 0 && t < NV) cnt[t]++;
    }
    CHECK(cnt[2] + cnt[9] == 4000);
    CHECK(cnt[2] > 1500 && cnt[9] > 1500);
    /* all NaN / all -inf: in range */
    for (int i = 0; i < NV; i++) w[i] = NAN;
    int32_t t = sampler_sample(s, w);
    CHECK(t >= 0 && t < NV);
    for (int i = 0; i < NV; i++) w[i] = -INFINITY;
    t = sampler_sample(s, w);
    CHECK(t >= 0 && t < NV);
    /* huge logits and a tiny temperature do not overflow */
    sampler_free(s);
    p = base();
    p.temperature = 1e-30f;
    s = sampler_new(&p, NV);
    for (int i = 0; i < NV; i++) w[i] = (float)i * 1e37f - 3e38f;
    CHECK(sampler_sample(s, w) == NV - 1);
    sampler_free(s);
    /* bad parameters: NaN top_p / min_p are off, min_p > 1 keeps the max */
    p = base();
    p.top_p = NAN;
    p.min_p = 5.0f;
    p.repeat_penalty = 0.0f;
    p.penalty_last_n = 1 << 30;
    s = sampler_new(&p, NV);
    CHECK(s != NULL);
    float l[NV] = {0};
    l[7] = 1.0f;
    for (int d = 0; d < 50; d++) {
        memcpy(w, l, sizeof w);
        CHECK(sampler_sample(s, w) == 7);
        sampler_accept(s, 7);
    }
    sampler_free(s);
    CHECK(sampler_new(&p, 0) == NULL);
    sampler_free(NULL);
}

static void test_seeds(void) {
    enum { N = 500, V = 1000 };
    static float seq[N][V];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < V; j++) seq[i][j] = rnd_logit(3.0f);
    sampler_params p = base();
    p.top_k = 50;
    p.top_p = 0.95f;
    p.min_p = 0.02f;
    p.temperature = 0.9f;
    p.repeat_penalty = 1.1f;
    p.penalty_last_n = 32;
    p.seed = 7;
    sampler *a = sampler_new(&p, V), *b = sampler_new(&p, V);
    p.seed = 8;
    sampler *c = sampler_new(&p, V);
    static float w[V];
    int32_t ta[N];
    int same_ab = 1, diff_ac = 0;
    for (int i = 0; i < N; i++) {
        memcpy(w, seq[i], sizeof w); ta[i] = sampler_sample(a, w); sampler_accept(a, ta[i]);
        memcpy(w, seq[i], sizeof w); int32_t tb = sampler_sample(b, w); sampler_accept(b, tb);
        memcpy(w, seq[i], sizeof w); int32_t tc = sampler_sample(c, w); sampler_accept(c, tc);
        if (tb != ta[i]) same_ab = 0;
        if (tc != ta[i]) diff_ac++;
    }
    CHECK(same_ab);
    CHECKF(diff_ac > 50, "different seeds agree too often (%d of %d differ)", diff_ac, N);
    /* reset: the same sequence again */
    sampler_reset(a);
    int again = 1;
    for (int i = 0; i < N; i++) {
        memcpy(w, seq[i], sizeof w);
        int32_t t = sampler_sample(a, w);
        sampler_accept(a, t);
        if (t != ta[i]) again = 0;
    }
    CHECK(again);
    sampler_free(a); sampler_free(b); sampler_free(c);
}

static void test_logprobs(void) {
    enum { V = 5000 };
    static float l[V];
    for (int i = 0; i < V; i++) l[i] = rnd_logit(8.0f) + 500.0f;   /* big offset: stability */
    l[17] = l[4000];                                               /* a tie */
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)logprob_of(l, V, i));
    CHECKF(fabs(sum - 1.0) < 1e-4, "sum of probabilities %.6f", sum);
    CHECK(logprob_of(l, V, -1) == -INFINITY);
    CHECK(logprob_of(l, V, V) == -INFINITY);

    token_logprob top[10];
    logprob_top(l, V, 10, top);
    /* brute force: the 10 largest, ties by lower id */
    int used[V];
    memset(used, 0, sizeof used);
    for (int k = 0; k < 10; k++) {
        int best = -1;
        for (int i = 0; i < V; i++) if (!used[i] && (best < 0 || l[i] > l[best])) best = i;
        used[best] = 1;
        CHECKF(top[k].id == best, "top %d: id %d expected %d", k, top[k].id, best);
        CHECK(fabsf(top[k].logprob - logprob_of(l, V, best)) < 1e-6f);
        if (k) CHECK(top[k].logprob <= top[k - 1].logprob);
        CHECK(top[k].logprob <= 0.0f);
    }
    /* more asked than the vocabulary has */
    float small[3] = {1.0f, NAN, 2.0f};
    token_logprob t5[5];
    logprob_top(small, 3, 5, t5);
    CHECK(t5[0].id == 2 && t5[1].id == 0 && t5[2].id == 1);
    CHECK(t5[2].logprob == -INFINITY);
    CHECK(t5[3].id == -1 && t5[4].id == -1);
    double s2 = exp((double)t5[0].logprob) + exp((double)t5[1].logprob);
    CHECK(fabs(s2 - 1.0) < 1e-6);
}

/* Hostile parameters and logits: always an id in range, never a crash
 * (the sanitizer build checks UB and leaks). */
static int RI(int n) {
    lcg = lcg * 1664525u + 1013904223u;
    return (int)((lcg >> 8) % (uint32_t)n);
}

static float ODD(void) {
    static const float odd[] = {0.0f, -1.0f, 1.0f, 0.5f, 2.0f, 1e30f, -1e30f, NAN, INFINITY, -INFINITY, 1e-30f};
    return odd[RI((int)(sizeof odd / sizeof odd[0]))];
}

static void test_stress(void) {
    int bad = 0;
    float w[300];
    logit_bias_entry lb[8];
    for (int it = 0; it < 3000; it++) {
        int nv = 1 + RI(300);
        sampler_params p = base();
        p.temperature = ODD();
        p.top_k = RI(5) ? RI(nv + 5) - 2 : 1 << 30;
        p.top_p = ODD();
        p.min_p = ODD();
        p.repeat_penalty = ODD();
        p.presence_penalty = ODD();
        p.frequency_penalty = ODD();
        p.penalty_last_n = RI(40) - 2;
        p.seed = (uint64_t)it;
        for (int i = 0; i < 8; i++) { lb[i].id = RI(nv + 10) - 5; lb[i].bias = ODD(); }
        p.logit_bias = lb;
        p.n_logit_bias = RI(9);
        sampler *s = sampler_new(&p, nv);
        if (!s) { bad++; continue; }
        for (int step = 0; step < 5; step++) {
            for (int i = 0; i < nv; i++) w[i] = RI(4) ? rnd_logit(10.0f) : ODD();
            int32_t t = sampler_sample(s, w);
            if (t < 0 || t >= nv) bad++;
            sampler_accept(s, RI(3) ? t : RI(nv + 10) - 5);
        }
        token_logprob top[4];
        logprob_top(w, nv, 4, top);
        for (int i = 0; i < 4; i++) if (top[i].id >= nv || top[i].logprob > 0.0f) bad++;
        if (logprob_of(w, nv, RI(nv)) > 0.0f) bad++;
        sampler_free(s);
    }
    CHECKF(bad == 0, "%d bad results", bad);
}

/* A real vocabulary size: correctness of the selection path and time. */
static void test_big_vocab(void) {
    enum { V = 151936, N = 200 };
    float *l = malloc(V * sizeof *l), *w = malloc(V * sizeof *w);
    for (int i = 0; i < V; i++) l[i] = rnd_logit(6.0f);
    sampler_params p = base();
    p.top_p = 0.9f;
    p.min_p = 0.0f;
    sampler *s = sampler_new(&p, V);
    /* brute-force membership of top_p 0.9 via a threshold on the sorted set */
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < V; i++) if (l[i] > mx) mx = l[i];
    for (int i = 0; i < V; i++) z += exp(l[i] - mx);
    clock_t t0 = clock();
    int outside = 0;
    for (int d = 0; d < N; d++) {
        memcpy(w, l, V * sizeof *l);
        int32_t t = sampler_sample(s, w);
        /* t is inside iff the mass of tokens strictly better than t is < 0.9 */
        double above = 0;
        for (int i = 0; i < V; i++)
            if (l[i] > l[t] || (l[i] == l[t] && i < t)) above += exp(l[i] - mx);
        if (above / z >= 0.9) outside++;
    }
    double ms = 1000.0 * (double)(clock() - t0) / CLOCKS_PER_SEC / N;
    CHECK(outside == 0);
    printf("big vocab: %.2f ms per draw incl. brute-force check\n", ms);
    sampler_free(s);
    free(l);
    free(w);
}

/* sampler_sample_lazy against sampler_sample over the masked row: for each
 * chain, random logits (ties, NaN, +-inf among them) and random allowed sets
 * from dense to a handful, two samplers with one seed in lockstep must pick
 * the same tokens, the lazy one asking at most its budget; the undecided
 * cases fall back to the mask as a caller would. Controls: the lazy path
 * decides most steps where it can, and a lie in its allow() is seen. */
#define LV 3000
typedef struct { const unsigned char *ok; int asked; int32_t lie; } lazy_ctx;
static bool lazy_allow(void *ctx, int32_t id) {
    lazy_ctx *c = ctx;
    c->asked++;
    return c->ok[id] && id != c->lie;
}

static int lazy_run(const sampler_params *p, int steps, bool lie, int *decided) {
    static float row[LV], a[LV], b[LV];
    static unsigned char ok[LV];
    sampler *sa = sampler_new(p, LV), *sb = sampler_new(p, LV);
    int same = 0;
    *decided = 0;
    for (int st = 0; st < steps && sa && sb; st++) {
        int dens = st % 5;   /* allowed: 90%, 30%, 3%, 0.3%, 2 tokens */
        for (int i = 0; i < LV; i++) {
            row[i] = rnd_logit(st % 2 ? 8.0f : 2.0f);
            if (st % 7 == 3) row[i] = (float)(int)row[i];   /* many ties */
            uint32_t r = (lcg = lcg * 1664525u + 1013904223u) >> 8;
            ok[i] = dens == 0 ? r % 10 != 0 : dens == 1 ? r % 10 < 3 : dens == 2 ? r % 100 < 3 : dens == 3 ? r % 1000 < 3 : 0;
        }
        if (dens == 4) { ok[(st * 7919) % LV] = 1; ok[(st * 104729) % LV] = 1; }
        if (st % 11 == 5) { row[st % LV] = NAN; row[(st + 1) % LV] = INFINITY; row[(st + 2) % LV] = -INFINITY; }
        /* the masked pick (the oracle) */
        for (int i = 0; i < LV; i++) b[i] = ok[i] ? row[i] : -INFINITY;
        int32_t want = sampler_sample(sb, b);
        /* the lazy pick; the mask when undecided */
        lazy_ctx c = { ok, 0, -1 };
        if (lie) c.lie = want;   /* refused by allow() only: a step the lazy path decides differs */
        memcpy(a, row, sizeof a);
        int32_t got = sampler_sample_lazy(sa, a, lazy_allow, &c, 1000);
        CHECKF(c.asked <= 1000, "asked %d", c.asked);
        if (got == SAMPLER_LAZY_NO) {
            for (int i = 0; i < LV; i++) a[i] = ok[i] ? row[i] : -INFINITY;
            got = sampler_sample(sa, a);
        } else {
            (*decided)++;
            CHECKF(ok[got] && got != c.lie, "lazy picked a refused token %d", got);
        }
        same += got == want;
        if (!lie) CHECKF(got == want, "step %d: lazy %d, masked %d (temp %g, top_k %d)", st, got, want, p->temperature, p->top_k);
        sampler_accept(sa, want);
        sampler_accept(sb, want);
    }
    sampler_free(sa);
    sampler_free(sb);
    return same;
}

static void test_lazy(void) {
    int32_t brk[2] = { 5, 77 };
    logit_bias_entry lb[3] = { { 3, 2.5f }, { 10, -INFINITY }, { 17, INFINITY } };
    for (int cfg = 0; cfg < 12; cfg++) {
        sampler_params p = base();
        bool decides = true;   /* the lazy path can decide this chain */
        switch (cfg) {
        case 0: p.temperature = 0.0f; break;
        case 1: p.temperature = 0.0f; p.repeat_penalty = 1.3f; p.presence_penalty = 0.5f; p.penalty_last_n = 16;
                p.logit_bias = lb; p.n_logit_bias = 3; break;
        case 2: p.top_k = 40; break;
        case 3: sampler_params_default(&p); p.seed = 9; break;   /* top_k 40, top_p, min_p */
        case 4: p.top_k = 1; break;
        case 5: p.top_k = 20; p.typical_p = 0.7f; p.temperature = 0.5f; break;
        case 6: p.top_k = 30; p.xtc_probability = 0.5f; p.xtc_threshold = 0.05f; p.frequency_penalty = 0.3f; p.penalty_last_n = -1; break;
        case 7: p.top_k = 40; p.dry_multiplier = 0.8f; p.dry_breakers = brk; p.n_dry_breakers = 2; break;
        case 8: p.temperature = 0.0f; p.dry_multiplier = 0.8f; p.dry_base = -1.5f; decides = false; break;
        case 9: p.top_k = 0; p.top_p = 0.9f; decides = false; break;
        case 10: p.top_k = 40; p.top_n_sigma = 1.0f; decides = false; break;
        case 11: p.top_k = 40; p.mirostat = 2; decides = false; break;
        }
        int decided, steps = 200;
        int same = lazy_run(&p, steps, false, &decided);
        CHECKF(same == steps, "config %d: %d of %d the same", cfg, same, steps);
        /* dense and 30% sets (2 in 5 steps) are always decided by top_k's heap and greedy */
        if (decides) CHECKF(decided >= steps * 2 / 5, "config %d: the lazy path decided %d of %d", cfg, decided, steps);
        else CHECKF(decided == 0, "config %d: the lazy path decided %d", cfg, decided);
        if (decides) {
            int d2, same2 = lazy_run(&p, 60, true, &d2);
            CHECKF(same2 < 60, "config %d: the planted lie went unseen", cfg);
        }
    }
}

int main(void) {
    test_greedy();
    test_greedy_fast();
    test_temperature();
    test_top_k();
    test_top_p();
    test_top_p_set();
    test_min_p();
    test_chain();
    test_penalties();
    test_logit_bias();
    test_odd_logits();
    test_seeds();
    test_logprobs();
    test_stress();
    test_big_vocab();
    test_lazy();
    return test_summary("sampler");
}
