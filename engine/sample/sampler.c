/* Sampling: logits in, one token id out.
 *
 * The chain follows llama.cpp's default order:
 *
 *   logit_bias -> penalties -> DRY -> top_n_sigma -> top_k -> typical
 *     -> top_p -> min_p -> XTC -> temperature -> draw
 *
 * and with mirostat on (as in llama.cpp) top_k through XTC are skipped: the
 * temperature-scaled distribution goes to mirostat, which cuts and draws.
 * Each stage follows its published definition (llama.cpp's sampling code
 * for DRY, XTC and top-n-sigma; Meister et al. for typical sampling;
 * Basu et al. for mirostat).
 *
 * so top_p and min_p judge the distribution at temperature 1, and the
 * temperature only reshapes what survived them. temperature <= 0 is greedy:
 * bias and penalties still apply, then the argmax wins (ties: lowest id) and
 * no random number is drawn.
 *
 * Every buffer is sized for n_vocab in sampler_new, so sampler_sample and
 * sampler_accept never allocate. Candidates are ranked by a total order
 * (logit descending, then id ascending), so a cut through equal logits
 * (top_k, top_p) keeps the lowest ids, and the same seed with the same
 * logits always gives the same tokens. top_k selects with a heap and top_p
 * with buckets (see top_p_cut): neither sorts the whole vocabulary.
 *
 * Odd logits: NaN counts as -inf (never chosen), +inf as FLT_MAX (several of
 * them share the mass equally). If bias and penalties ban every token, the
 * argmax of the raw logits is returned; if even those are all NaN/-inf,
 * token 0. The result is always in [0, n_vocab). */
#include "engine/sample/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A window larger than this is treated as the whole history: it would only
 * differ after a million accepted tokens, and it keeps the ring small. */
#define MAX_RING (1 << 20)
#define DRY_MAX_HISTORY (1 << 16)   /* DRY's window when the request says "all" */
#define LAZY_GREEDY 64              /* sampler_sample_lazy: greedy asks about this many at most */
#define MIROSTAT_M 100              /* mirostat 1: tokens used to estimate the Zipf exponent */

typedef struct { float logit; int32_t id; } cand;

struct sampler {
    sampler_params p;          /* p.logit_bias points at bias below */
    int n_vocab;
    logit_bias_entry *bias;
    int n_bias;

    /* Penalty window: counts per token, the distinct tokens with a nonzero
     * count (upos[t] = index of t in uniq), and a ring of the last n ids
     * when the window is finite (ring_cap > 0). */
    int32_t *counts, *uniq, *upos;
    int n_uniq;
    int32_t *ring;
    int ring_cap, ring_len, ring_head;
    bool window_all;           /* penalty_last_n < 0 (or huge) */

    cand *c;                   /* candidates, n_vocab */
    double *w;                 /* weights of candidates, n_vocab */
    uint64_t rng[4];

    /* DRY (only when on): a ring of the last dry_cap tokens; the history
     * reversed and its Z-array; the longest repeat each token would extend
     * (dry_best, reset through dry_touched); which ids break a repeat. */
    int32_t *dry_ring, *dry_rev, *dry_z, *dry_best, *dry_touched;
    int dry_cap, dry_len, dry_head;
    unsigned char *dry_brk;

    struct keyed { double key; cand c; } *tk;   /* typical: candidates by score (when on) */
    double mu;                 /* mirostat: the current surprise cap, 2 tau at the start */
};

void sampler_params_default(sampler_params *p) {
    /* llama.cpp's defaults; the server picks a seed when a request has none. */
    memset(p, 0, sizeof *p);
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->presence_penalty = 0.0f;
    p->frequency_penalty = 0.0f;
    p->penalty_last_n = 64;
    p->seed = 0;
    p->typical_p = 1.0f;
    p->xtc_threshold = 0.1f;
    p->mirostat_tau = 5.0f;
    p->mirostat_eta = 0.1f;
    p->dry_base = 1.75f;
    p->dry_allowed_length = 2;
    p->dry_penalty_last_n = -1;
}

static bool dry_on(const sampler_params *p) { return p->dry_multiplier > 0.0f && isfinite(p->dry_multiplier); }
static bool typical_on(const sampler_params *p) { return p->typical_p > 0.0f && p->typical_p < 1.0f; }

/* ---- RNG: xoshiro256** seeded through splitmix64 ------------------------ */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static void rng_seed(uint64_t s[4], uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);  /* never all zero in practice */
}

static uint64_t rng_next(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

/* ---- construction -------------------------------------------------------- */

sampler *sampler_new(const sampler_params *p, int n_vocab) {
    if (n_vocab <= 0) return NULL;
    sampler_params def;
    if (!p) { sampler_params_default(&def); p = &def; }
    sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;

    /* Copy the bias, keeping only ids that exist. */
    if (p->logit_bias && p->n_logit_bias > 0) {
        s->bias = malloc((size_t)p->n_logit_bias * sizeof *s->bias);
        if (!s->bias) goto fail;
        for (int i = 0; i < p->n_logit_bias; i++) {
            logit_bias_entry e = p->logit_bias[i];
            if (e.id >= 0 && e.id < n_vocab) s->bias[s->n_bias++] = e;
        }
    }
    s->p.logit_bias = s->bias;
    s->p.n_logit_bias = s->n_bias;

    int last_n = p->penalty_last_n;
    s->window_all = last_n < 0 || last_n > MAX_RING;
    if (!s->window_all && last_n > 0) {
        s->ring_cap = last_n;
        s->ring = malloc((size_t)last_n * sizeof *s->ring);
        if (!s->ring) goto fail;
    }
    size_t n = (size_t)n_vocab;
    s->counts = calloc(n, sizeof *s->counts);
    s->uniq = malloc(n * sizeof *s->uniq);
    s->upos = malloc(n * sizeof *s->upos);
    s->c = malloc(n * sizeof *s->c);
    s->w = malloc(n * sizeof *s->w);
    if (!s->counts || !s->uniq || !s->upos || !s->c || !s->w) goto fail;
    if (dry_on(p)) {
        int cap = p->dry_penalty_last_n > 0 && p->dry_penalty_last_n < DRY_MAX_HISTORY ? p->dry_penalty_last_n
                                                                                    : DRY_MAX_HISTORY;
        s->dry_cap = cap;
        s->dry_ring = malloc((size_t)cap * sizeof *s->dry_ring);
        s->dry_rev = malloc((size_t)cap * sizeof *s->dry_rev);
        s->dry_z = malloc((size_t)cap * sizeof *s->dry_z);
        s->dry_touched = malloc((size_t)cap * sizeof *s->dry_touched);
        s->dry_best = calloc(n, sizeof *s->dry_best);
        s->dry_brk = calloc(n, 1);
        if (!s->dry_ring || !s->dry_rev || !s->dry_z || !s->dry_touched || !s->dry_best || !s->dry_brk) goto fail;
        for (int i = 0; p->dry_breakers && i < p->n_dry_breakers; i++)
            if (p->dry_breakers[i] >= 0 && p->dry_breakers[i] < n_vocab) s->dry_brk[p->dry_breakers[i]] = 1;
    }
    s->p.dry_breakers = NULL;   /* held as dry_brk */
    s->p.n_dry_breakers = 0;
    if (typical_on(p) && !(s->tk = malloc(n * sizeof *s->tk))) goto fail;
    rng_seed(s->rng, p->seed);
    s->mu = 2.0 * p->mirostat_tau;
    return s;
fail:
    sampler_free(s);
    return NULL;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->bias);
    free(s->ring);
    free(s->counts);
    free(s->uniq);
    free(s->upos);
    free(s->c);
    free(s->w);
    free(s->dry_ring);
    free(s->dry_rev);
    free(s->dry_z);
    free(s->dry_best);
    free(s->dry_touched);
    free(s->dry_brk);
    free(s->tk);
    free(s);
}

/* Forget the history and restart the RNG from the seed: a reset sampler
 * repeats exactly what a new one would do. */
void sampler_reset(sampler *s) {
    if (!s) return;
    for (int i = 0; i < s->n_uniq; i++) s->counts[s->uniq[i]] = 0;
    s->n_uniq = 0;
    s->ring_len = s->ring_head = 0;
    s->dry_len = s->dry_head = 0;
    rng_seed(s->rng, s->p.seed);
    s->mu = 2.0 * s->p.mirostat_tau;
}

/* ---- penalty history ----------------------------------------------------- */

static void count_add(sampler *s, int32_t t) {
    if (s->counts[t] == 0) {
        s->upos[t] = s->n_uniq;
        s->uniq[s->n_uniq++] = t;
    }
    if (s->counts[t] < INT32_MAX) s->counts[t]++;
}

static void count_remove(sampler *s, int32_t t) {
    if (s->counts[t] <= 0) return;
    if (--s->counts[t] == 0) {
        /* swap-remove t from the distinct list */
        int i = s->upos[t];
        int32_t last = s->uniq[--s->n_uniq];
        s->uniq[i] = last;
        s->upos[last] = i;
    }
}

void sampler_accept(sampler *s, int32_t token) {
    if (!s || token < 0 || token >= s->n_vocab) return;
    if (s->dry_cap) {
        if (s->dry_len == s->dry_cap) {
            s->dry_ring[s->dry_head] = token;
            s->dry_head = (s->dry_head + 1) % s->dry_cap;
        } else {
            s->dry_ring[(s->dry_head + s->dry_len++) % s->dry_cap] = token;
        }
    }
    if (s->window_all) { count_add(s, token); return; }
    if (s->ring_cap == 0) return;                       /* penalties off */
    if (s->ring_len == s->ring_cap) {                   /* evict the oldest */
        count_remove(s, s->ring[s->ring_head]);
        s->ring[s->ring_head] = token;
        s->ring_head = (s->ring_head + 1) % s->ring_cap;
    } else {
        s->ring[(s->ring_head + s->ring_len) % s->ring_cap] = token;
        s->ring_len++;
    }
    count_add(s, token);
}

/* ---- the chain ----------------------------------------------------------- */

/* The penalties as applied: out-of-range values turned off. False when all
 * three are off. */
static bool penalty_values(const sampler *s, float *rp, float *fp, float *pp) {
    *rp = s->p.repeat_penalty, *fp = s->p.frequency_penalty, *pp = s->p.presence_penalty;
    if (!(*rp > 0.0f) || !isfinite(*rp)) *rp = 1.0f;      /* <= 0, NaN, inf: off */
    if (!isfinite(*fp)) *fp = 0.0f;
    if (!isfinite(*pp)) *pp = 0.0f;
    return !(*rp == 1.0f && *fp == 0.0f && *pp == 0.0f);
}

/* DRY: a token that would extend a repeat of the last n tokens (n at least
 * allowed_length, no breaker inside) loses multiplier * base^(n - allowed).
 * With r the history reversed (r[0] the last token), a repeat ending before
 * r[q - 1] has length Z[q], the longest common prefix of r and r[q..]
 * (the Z-algorithm, linear in the history); the token that followed it is
 * r[q - 1]. A breaker matches nothing, not even itself. */
static void dry_apply(const sampler *cs, float *logits) {
    sampler *s = (sampler *)cs;   /* scratch buffers only; the state is unchanged */
    int L = s->dry_len;
    if (!s->dry_cap || L < 2) return;
    int32_t *r = s->dry_rev, *z = s->dry_z;
    for (int m = 0; m < L; m++) {
        int32_t t = s->dry_ring[(s->dry_head + L - 1 - m) % s->dry_cap];
        r[m] = s->dry_brk[t] ? -1 - m : t;   /* a breaker: a symbol of its own */
    }
    z[0] = L;
    for (int q = 1, lo = 0, hi = 0; q < L; q++) {   /* r[lo..hi) == r[0..hi-lo) */
        int k = q < hi ? (z[q - lo] < hi - q ? z[q - lo] : hi - q) : 0;
        while (q + k < L && r[k] == r[q + k] && r[k] >= 0) k++;
        z[q] = k;
        if (q + k > hi) { lo = q; hi = q + k; }
    }
    int n_touched = 0;
    for (int q = 1; q < L; q++) {
        int32_t t = r[q - 1];
        if (t < 0 || z[q] < s->p.dry_allowed_length) continue;
        if (!s->dry_best[t]) s->dry_touched[n_touched++] = t;
        if (z[q] > s->dry_best[t]) s->dry_best[t] = z[q];
    }
    for (int i = 0; i < n_touched; i++) {
        int32_t t = s->dry_touched[i];
        double pen = (double)s->p.dry_multiplier * pow((double)s->p.dry_base, (double)(s->dry_best[t] - s->p.dry_allowed_length));
        logits[t] = (float)((double)logits[t] - pen);
        s->dry_best[t] = 0;
    }
}

void sampler_apply_bias_penalties(const sampler *s, float *logits) {
    if (!s || !logits) return;
    for (int i = 0; i < s->n_bias; i++) logits[s->bias[i].id] += s->bias[i].bias;

    float rp, fp, pp;
    if (penalty_values(s, &rp, &fp, &pp))
        for (int i = 0; i < s->n_uniq; i++) {
            int32_t t = s->uniq[i];
            float l = logits[t];
            /* llama.cpp: dividing a positive logit and multiplying a negative
             * one both push it the same way (down for a penalty > 1) */
            l = l > 0.0f ? l / rp : l * rp;
            /* OpenAI: frequency scales with the count, presence is once */
            l -= (float)s->counts[t] * fp + pp;
            logits[t] = l;
        }
    dry_apply(s, logits);
}

/* a comes before b: higher logit, then lower id. */
static inline bool before(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cand_cmp(const void *x, const void *y) {
    const cand *a = x, *b = y;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

static inline void cswap(cand *a, cand *b) { cand t = *a; *a = *b; *b = t; }

/* top_k keeps a heap of the k best seen so far with the worst at the root,
 * so most tokens cost one comparison with the root. */
static void heap_up(cand *h, int i) {
    while (i > 0 && before(&h[(i - 1) / 2], &h[i])) {
        cswap(&h[(i - 1) / 2], &h[i]);
        i = (i - 1) / 2;
    }
}

static void heap_down(cand *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && before(&h[w], &h[l])) w = l;
        if (r < n && before(&h[w], &h[r])) w = r;
        if (w == i) return;
        cswap(&h[w], &h[i]);
        i = w;
    }
}

/* NaN -> -inf, +inf -> FLT_MAX; -inf stays (banned). */
static inline float sane(float x) {
    if (isnan(x)) return -INFINITY;
    if (x == INFINITY) return FLT_MAX;
    return x;
}

#define N_BUCKETS 1024

/* top_p: keep the smallest head of the candidates (in the total order)
 * whose mass at temperature 1 reaches p; the token that crosses p is kept.
 * Returns the new count; the kept ones are moved to c[0..count).
 *
 * A full sort of a large vocabulary would dominate the step, so the logits
 * are bucketed by their distance from the max: the buckets before the one
 * where the mass crosses p are kept whole, and only the crossing bucket is
 * sorted. The kept set is the same as a full sort would give. */
static int top_p_cut(sampler *s, int nc, float mx, double p) {
    cand *c = s->c;
    double *w = s->w, z = 0.0;
    float mn = mx;
    for (int i = 0; i < nc; i++) {
        w[i] = exp((double)c[i].logit - mx);
        z += w[i];
        if (c[i].logit < mn) mn = c[i].logit;
    }
    double target = p * z, cum = 0.0;

    /* bucket 0 holds the max; a higher logit never lands in a later bucket */
    double range = (double)mx - mn, scale = range > 0 ? (N_BUCKETS - 1) / range : 0.0;
    double mass[N_BUCKETS] = {0};
#define BUCKET(l) ((int)fmin(((double)mx - (l)) * scale, N_BUCKETS - 1))
    for (int i = 0; i < nc; i++) mass[BUCKET(c[i].logit)] += w[i];
    int j = 0;
    for (; j < N_BUCKETS; j++) {
        if (cum + mass[j] >= target) break;
        cum += mass[j];
    }
    if (j == N_BUCKETS) return nc;

    /* c[0..k): buckets before j, kept whole; c[k..m): bucket j, sorted */
    int k = 0, m;
    for (int i = 0; i < nc; i++)
        if (BUCKET(c[i].logit) < j) cswap(&c[i], &c[k++]);
    m = k;
    for (int i = k; i < nc; i++)
        if (BUCKET(c[i].logit) == j) cswap(&c[i], &c[m++]);
#undef BUCKET
    qsort(c + k, (size_t)(m - k), sizeof *c, cand_cmp);
    for (int i = k; i < m; i++)
        if ((cum += exp((double)c[i].logit - mx)) >= target) return i + 1;
    return m;
}

/* The largest logit among the candidates (nc >= 1). */
static float cand_max(const cand *c, int nc) {
    float mx = c[0].logit;
    for (int i = 1; i < nc; i++) mx = c[i].logit > mx ? c[i].logit : mx;
    return mx;
}

/* Moves the k best candidates (total order) to c[0..k), sorted; returns
 * min(k, nc). A heap with the worst at the root, as top_k uses. */
static int keep_top(cand *c, int nc, int k) {
    if (k >= nc) { qsort(c, (size_t)nc, sizeof *c, cand_cmp); return nc; }
    for (int i = 0; i < k; i++) heap_up(c, i);
    for (int i = k; i < nc; i++)
        if (before(&c[i], &c[0])) { cswap(&c[0], &c[i]); heap_down(c, k, 0); }
    qsort(c, (size_t)k, sizeof *c, cand_cmp);
    return k;
}

/* top_n_sigma: the threshold max - n * stddev over the tokens not banned
 * (-inf when fewer than two are left). */
static float sigma_threshold(const float *logits, int n, float nsig) {
    double sum = 0, mx = -INFINITY;
    int cnt = 0;
    for (int i = 0; i < n; i++)
        if (logits[i] != -INFINITY) { sum += logits[i]; cnt++; if (logits[i] > mx) mx = logits[i]; }
    if (cnt < 2) return -INFINITY;
    double mean = sum / cnt, var = 0;
    for (int i = 0; i < n; i++)
        if (logits[i] != -INFINITY) var += ((double)logits[i] - mean) * ((double)logits[i] - mean);
    return (float)(mx - (double)nsig * sqrt(var / cnt));
}

static int keyed_cmp(const void *x, const void *y) {
    const struct keyed *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return cand_cmp(&a->c, &b->c);
}

/* Locally typical sampling: rank the candidates by how far their surprise
 * (-log p at temperature 1) is from the distribution's entropy, closest
 * first, and keep the smallest head whose mass reaches p. */
static int typical_cut(sampler *s, int nc, double p) {
    cand *c = s->c;
    float mx = cand_max(c, nc);
    double z = 0, ez = 0;
    for (int i = 0; i < nc; i++) {
        s->w[i] = exp((double)c[i].logit - mx);
        z += s->w[i];
        ez += s->w[i] * ((double)c[i].logit - mx);
    }
    double lz = log(z), entropy = lz - ez / z;   /* -sum p log p, with log p = (l - mx) - log z */
    for (int i = 0; i < nc; i++) {
        double lp = (double)c[i].logit - mx - lz;
        s->tk[i].key = fabs(-lp - entropy);
        s->tk[i].c = c[i];
    }
    qsort(s->tk, (size_t)nc, sizeof *s->tk, keyed_cmp);
    double cum = 0;
    int kept = 0;
    while (kept < nc) {
        c[kept] = s->tk[kept].c;
        cum += exp((double)c[kept].logit - mx - lz);
        kept++;
        if (cum >= p) break;
    }
    return kept;
}

/* XTC: with the given chance, when two or more candidates have p >= the
 * threshold (temperature 1), drop all of them but the least likely. */
static int xtc_cut(sampler *s, int nc) {
    double u = rng_uniform(s->rng);   /* drawn every step, so the stream does not depend on the outcome */
    if (!(u < s->p.xtc_probability) || nc < 2) return nc;
    cand *c = s->c;
    float mx = cand_max(c, nc);
    double z = 0;
    for (int i = 0; i < nc; i++) z += (s->w[i] = exp((double)c[i].logit - mx));
    int above = 0, least = -1;
    for (int i = 0; i < nc; i++)
        if (s->w[i] / z >= s->p.xtc_threshold) {
            above++;
            if (least < 0 || before(&c[least], &c[i])) least = i;
        }
    if (above < 2) return nc;
    int kept = 0;
    for (int i = 0; i < nc; i++)
        if (i == least || !(s->w[i] / z >= s->p.xtc_threshold)) c[kept++] = c[i];
    return kept;
}

/* Draws from c[0..nc) with weights w (total z) and returns the index. */
static int draw(sampler *s, int nc, double z) {
    double u = rng_uniform(s->rng) * z, cum = 0.0;
    for (int i = 0; i < nc; i++) {
        cum += s->w[i];
        if (u < cum) return i;
    }
    /* rounding left u at the very top: take the last token with weight */
    for (int i = nc - 1; i > 0; i--)
        if (s->w[i] > 0.0) return i;
    return 0;
}

/* Mirostat: cut the temperature-scaled distribution so the surprise of the
 * draw (-log2 p) tracks tau, learning the cut mu from each draw. Version 2
 * keeps the tokens with surprise <= mu; version 1 estimates the Zipf
 * exponent from the top MIROSTAT_M tokens and keeps the top k it implies. */
static int32_t mirostat_draw(sampler *s, int nc) {
    cand *c = s->c;
    double t = s->p.temperature;
    float mx = cand_max(c, nc);
    double z = 0;
    for (int i = 0; i < nc; i++) z += exp(((double)c[i].logit - mx) / t);
    if (s->p.mirostat == 2) {
        int kept = 0, best = 0;
        for (int i = 0; i < nc; i++) {
            if (before(&c[i], &c[best])) best = i;
            double w = exp(((double)c[i].logit - mx) / t);
            if (log2(z / w) <= s->mu) c[kept++] = c[i];
        }
        if (!kept) { c[0] = c[best]; kept = 1; }
        nc = kept;
    } else {
        int m = keep_top(c, nc, MIROSTAT_M);
        double num = 0, den = 0;
        for (int i = 0; i + 1 < m; i++) {
            double ti = log((i + 2.0) / (i + 1.0)), bi = ((double)c[i].logit - c[i + 1].logit) / t;
            num += ti * bi;
            den += ti * ti;
        }
        double sh = den > 0 ? num / den : 0, eps = sh - 1;
        double kf = pow(eps * pow(2.0, s->mu) / (1 - pow((double)s->n_vocab, -eps)), 1 / sh);
        int k = !(kf >= 1) ? 1 : kf >= nc ? nc : (int)kf;   /* NaN: 1 */
        nc = keep_top(c, nc, k);
    }
    mx = cand_max(c, nc);
    z = 0;
    for (int i = 0; i < nc; i++) z += (s->w[i] = exp(((double)c[i].logit - mx) / t));
    int j = draw(s, nc, z);
    double surprise = log2(z / s->w[j]);
    s->mu -= (double)s->p.mirostat_eta * (surprise - (double)s->p.mirostat_tau);
    return c[j].id;
}

int32_t sampler_greedy(const sampler *s, const float *logits) {
    if (!s || !logits || s->p.temperature > 0.0f || s->n_bias) return -1;
    float rp, fp, pp;
    if (penalty_values(s, &rp, &fp, &pp) && s->n_uniq) return -1;
    if (s->dry_cap && s->dry_len >= 2) return -1;
    /* sampler_sample's answer here: the first index of the largest sane()
     * value (all -inf: 0). One pass over 8 independent lanes, each keeping
     * its largest value and where it first saw it (strict >, so ties keep
     * the lower index; +0 and -0 compare equal, as they do there); then the
     * lowest index among the lanes that hold the overall largest. */
    int n = s->n_vocab;
    float best[8];
    int at[8];
    for (int j = 0; j < 8; j++) { best[j] = -INFINITY; at[j] = -1; }
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            float v = sane(logits[i + j]);
            if (v > best[j]) { best[j] = v; at[j] = i + j; }
        }
    for (; i < n; i++) {
        float v = sane(logits[i]);
        int j = i % 8;
        if (v > best[j]) { best[j] = v; at[j] = i; }
    }
    float mx = -INFINITY;
    for (int j = 0; j < 8; j++) mx = best[j] > mx ? best[j] : mx;
    int32_t first = -1;
    for (int j = 0; j < 8; j++)
        if (at[j] >= 0 && best[j] == mx && (first < 0 || at[j] < first)) first = at[j];
    return first < 0 ? 0 : first;
}

/* The first stages of sampler_sample, in place: NaN/inf cleaned, then bias,
 * penalties and DRY, and the touched tokens cleaned again. Returns the argmax
 * of the cleaned raw logits: the answer when those stages ban everything. */
static int32_t prepare(sampler *s, float *logits) {
    int n = s->n_vocab;
    int32_t raw_best = 0;
    float rb = -INFINITY;
    for (int i = 0; i < n; i++) {
        float x = sane(logits[i]);
        logits[i] = x;
        if (x > rb) { rb = x; raw_best = i; }   /* strict: ties keep the lowest id */
    }

    /* Bias and penalties touch few tokens; clean just those again. */
    sampler_apply_bias_penalties(s, logits);
    for (int i = 0; i < s->n_bias; i++) logits[s->bias[i].id] = sane(logits[s->bias[i].id]);
    for (int i = 0; i < s->n_uniq; i++) logits[s->uniq[i]] = sane(logits[s->uniq[i]]);
    return raw_best;
}

static bool mirostat_on(const sampler_params *p) { return p->mirostat == 1 || p->mirostat == 2; }

/* top_k's k as the candidate pass applies it; 0: every token is a candidate. */
static int top_k_of(const sampler *s) {
    return !mirostat_on(&s->p) && s->p.top_k > 0 && s->p.top_k < s->n_vocab ? s->p.top_k : 0;
}

/* The stages after the candidates c[0..nc) (nc >= 1, mx their largest
 * logit): typical, top_p, min_p, XTC, temperature and the draw. */
static int32_t cut_and_draw(sampler *s, int nc, float mx) {
    cand *c = s->c;
    if (typical_on(&s->p) && nc > 1) {
        nc = typical_cut(s, nc, s->p.typical_p);
        mx = cand_max(c, nc);           /* typical may drop the most likely token */
    }

    if (s->p.top_p < 1.0f && nc > 1)                    /* NaN: off */
        nc = top_p_cut(s, nc, mx, s->p.top_p);

    /* min_p: keep p >= min_p * p_max, i.e. logit >= max + log(min_p). */
    if (s->p.min_p > 0.0f && nc > 1) {
        double thr = (double)mx + log((double)s->p.min_p);
        if (thr > mx) thr = mx;         /* min_p > 1: the max still survives */
        int kept = 0;
        for (int i = 0; i < nc; i++)
            if ((double)c[i].logit >= thr) c[kept++] = c[i];
        nc = kept;
    }

    if (s->p.xtc_probability > 0.0f && s->p.xtc_threshold <= 0.5f) {
        nc = xtc_cut(s, nc);
        mx = cand_max(c, nc);           /* XTC drops the most likely tokens */
    }

    /* temperature and the draw, in double so tiny temperatures cannot
     * overflow: weight = exp((l - max) / T). mx is the candidates' max, so
     * the total is at least 1. */
    double t = s->p.temperature, z = 0.0;
    for (int i = 0; i < nc; i++) {
        s->w[i] = exp(((double)c[i].logit - mx) / t);
        z += s->w[i];
    }
    return c[draw(s, nc, z)].id;
}

int32_t sampler_sample(sampler *s, float *logits) {
    if (!s || !logits) return 0;
    int n = s->n_vocab;
    int32_t raw_best = prepare(s, logits);

    if (!(s->p.temperature > 0.0f)) {                   /* greedy (NaN too) */
        int32_t b = 0;
        for (int i = 1; i < n; i++)
            if (logits[i] > logits[b]) b = i;
        return logits[b] == -INFINITY ? raw_best : b;
    }

    /* Candidates: every token that is not banned (nor under top_n_sigma's
     * threshold), or with top_k only the k best of them (ties: lowest id). */
    bool miro = mirostat_on(&s->p);
    float floor_l = s->p.top_n_sigma > 0.0f && isfinite(s->p.top_n_sigma) ? sigma_threshold(logits, n, s->p.top_n_sigma)
                                                                        : -INFINITY;
    cand *c = s->c;
    int nc = 0, k = top_k_of(s);
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        cand x = { logits[i], i };
        if (x.logit == -INFINITY || x.logit < floor_l) continue;
        if (x.logit > mx) mx = x.logit;
        if (!k) c[nc++] = x;
        else if (nc < k) { c[nc] = x; heap_up(c, nc++); }
        else if (before(&x, &c[0])) { c[0] = x; heap_down(c, nc, 0); }
    }
    if (nc == 0) return raw_best;
    if (miro) return mirostat_draw(s, nc);
    return cut_and_draw(s, nc, mx);
}

/* Why the answer is the same as sampler_sample's over the logits with every
 * refused token at -inf (the masked row). The first stages are per token, so
 * an allowed token's prepared logit is the same in both, and a refused one's
 * is -inf in the masked row (-inf plus a bias, times or divided by a
 * penalty, less a count, less DRY's penalty: -inf or NaN, cleaned to -inf;
 * DRY's penalty is not cleaned, but with a base >= 0 it is >= 0 or +inf, so
 * -inf stays -inf). Greedy's answer is then the first allowed token in the
 * total order, unless its logit is -inf (the masked row's raw argmax is
 * chosen then: not decided here). top_k's heap takes the allowed tokens in
 * id order and skips the -inf ones, so asking allow() only about a token
 * that would enter the heap builds the same heap, and the largest candidate
 * logit, which the pass keeps as it goes, is the heap's largest. Without
 * top_k (or with top_n_sigma, whose threshold is over every allowed token,
 * or mirostat) every allowed token counts: not decided here. */
int32_t sampler_sample_lazy(sampler *s, float *logits, sampler_allow_fn allow, void *ctx, int max_checks) {
    if (!s || !logits || !allow || max_checks <= 0) return SAMPLER_LAZY_NO;
    bool greedy = !(s->p.temperature > 0.0f);
    int n = s->n_vocab, k = top_k_of(s);
    if (!greedy && (!k || (s->p.top_n_sigma > 0.0f && isfinite(s->p.top_n_sigma)))) return SAMPLER_LAZY_NO;
    if (s->dry_cap && !(s->p.dry_base >= 0.0f)) return SAMPLER_LAZY_NO;
    prepare(s, logits);
    cand *c = s->c;
    int nc = 0, checks = 0;
    if (greedy) {
        /* the best few (total order, none at -inf), asked in order */
        int kk = max_checks < LAZY_GREEDY ? max_checks : LAZY_GREEDY;
        if (kk > n) kk = n;
        for (int i = 0; i < n; i++) {
            cand x = { logits[i], i };
            if (x.logit == -INFINITY) continue;
            if (nc < kk) { c[nc] = x; heap_up(c, nc++); }
            else if (before(&x, &c[0])) { c[0] = x; heap_down(c, nc, 0); }
        }
        qsort(c, (size_t)nc, sizeof *c, cand_cmp);
        for (int i = 0; i < nc; i++)
            if (allow(ctx, c[i].id)) return c[i].id;
        return SAMPLER_LAZY_NO;
    }
    for (int i = 0; i < n; i++) {
        cand x = { logits[i], i };
        if (x.logit == -INFINITY) continue;
        if (nc < k) {
            if (checks++ == max_checks) return SAMPLER_LAZY_NO;
            if (allow(ctx, i)) { c[nc] = x; heap_up(c, nc++); }
        } else if (before(&x, &c[0])) {
            if (checks++ == max_checks) return SAMPLER_LAZY_NO;
            if (allow(ctx, i)) { c[0] = x; heap_down(c, nc, 0); }
        }
    }
    if (nc == 0) return SAMPLER_LAZY_NO;
    return cut_and_draw(s, nc, cand_max(c, nc));
}

/* ---- log-probabilities --------------------------------------------------- */

/* max and log(sum exp(l - max)) of the raw logits, NaN as -inf, +inf as
 * FLT_MAX. Returns false when no logit is finite or +inf. */
static bool log_norm(const float *logits, int n, double *mx, double *lse) {
    double m = -INFINITY;
    for (int i = 0; i < n; i++) {
        double x = sane(logits[i]);
        if (x > m) m = x;
    }
    if (m == -INFINITY) return false;
    double z = 0.0;
    for (int i = 0; i < n; i++) z += exp((double)sane(logits[i]) - m);
    *mx = m;
    *lse = log(z);
    return true;
}

float logprob_of(const float *logits, int n_vocab, int32_t id) {
    double mx, lse;
    if (!logits || id < 0 || id >= n_vocab) return -INFINITY;
    if (!log_norm(logits, n_vocab, &mx, &lse)) return -INFINITY;
    return (float)((double)sane(logits[id]) - mx - lse);
}

/* The n best by logit (ties: lowest id), sorted descending; slots beyond
 * n_vocab get id -1 and -inf. Insertion into the short output list: n is
 * small (OpenAI allows 20), and most tokens fail the first comparison. */
void logprob_top(const float *logits, int n_vocab, int n, token_logprob *out) {
    if (!out || n <= 0) return;
    for (int i = 0; i < n; i++) { out[i].id = -1; out[i].logprob = -INFINITY; }
    double mx, lse;
    if (!logits || n_vocab <= 0) return;
    bool any = log_norm(logits, n_vocab, &mx, &lse);
    int k = 0;                          /* filled entries; out holds raw logits for now */
    for (int t = 0; t < n_vocab; t++) {
        float l = sane(logits[t]);
        if (k == n && !(l > out[n - 1].logprob)) continue;
        int j = k < n ? k++ : n - 1;
        while (j > 0 && l > out[j - 1].logprob) { out[j] = out[j - 1]; j--; }
        out[j].id = t;
        out[j].logprob = l;
    }
    for (int i = 0; i < k; i++)
        out[i].logprob = any && out[i].logprob != -INFINITY
            ? (float)((double)out[i].logprob - mx - lse) : -INFINITY;
}
