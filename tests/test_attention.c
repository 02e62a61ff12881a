/* Every attention path against the scalar oracle, for groups of 1 to
 * ATTN_GROUP_MAX query heads over one KV head, head dimensions that leave
 * tails, context lengths from 1 up (around the 16-key blocks too) and flat
 * or peaked scores; a planted control (an oracle that skips the last
 * position) must fail the same check. */
#include "tests/test.h"
#include "kernels/attention.h"
#include <math.h>

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* the oracle minus its last position: what a tail bug looks like */
static void attn_group_planted(const float *q, int G, const fp16_t *k, const fp16_t *v, size_t stride,
                               int n_pos, int hd, float scale, float *scores, float *out) {
    attn_group_scalar(q, G, k, v, stride, n_pos > 1 ? n_pos - 1 : n_pos, hd, scale, scores, out);
}

#define MAX_HD 320
#define MAX_POS 400

/* Worst error of any head of the group, relative to that head's largest
 * output. q_mag scales the queries: 2 gives flat softmax weights, 40 peaked
 * ones (scores spread over tens of units, so exp's range reduction is
 * exercised). */
static double max_rel_err(attn_group_fn f, int G, int hd, int n_pos, size_t stride, float q_mag) {
    static float q[ATTN_GROUP_MAX * MAX_HD], want[ATTN_GROUP_MAX * MAX_HD], got[ATTN_GROUP_MAX * MAX_HD];
    static float scores[ATTN_GROUP_MAX * MAX_POS];
    static fp16_t k[MAX_POS * (MAX_HD + 20)], v[MAX_POS * (MAX_HD + 20)];
    for (int d = 0; d < G * hd; d++) q[d] = frand() * q_mag;
    for (size_t i = 0; i < (size_t)n_pos * stride; i++) { k[i] = f32_to_fp16(frand()); v[i] = f32_to_fp16(frand()); }
    attn_group_scalar(q, G, k, v, stride, n_pos, hd, 0.125f, scores, want);
    f(q, G, k, v, stride, n_pos, hd, 0.125f, scores, got);
    double worst = 0;
    for (int g = 0; g < G; g++) {
        double norm = 1e-6;
        for (int d = 0; d < hd; d++) norm = fmax(norm, fabs(want[g * hd + d]));
        for (int d = 0; d < hd; d++) worst = fmax(worst, fabs(want[g * hd + d] - got[g * hd + d]) / norm);
    }
    return worst;
}

int main(void) {
    /* multiples of 16 (AVX-512 vectors), of 4 but odd in 4-float vectors
     * (NEON's leftover column chunks), and neither */
    static const int hds[] = { 2, 4, 6, 8, 12, 16, 20, 48, 64, 72, 100, 128, 160, 256, 260, 320 };
    static const int lens[] = { 1, 2, 7, 15, 16, 17, 64, 333 };
    static const float mags[] = { 2.0f, 40.0f };
    for (int p = 0; p < KPATH_COUNT; p++) {
        if (!kernels_path_available((kern_path_id)p)) continue;
        attn_group_fn f = attn_group_for((kern_path_id)p);
        for (int G = 1; G <= ATTN_GROUP_MAX; G++)
            for (size_t i = 0; i < sizeof hds / sizeof *hds; i++)
                for (size_t j = 0; j < sizeof lens / sizeof *lens; j++)
                    for (size_t g = 0; g < sizeof mags / sizeof *mags; g++) {
                        double e = max_rel_err(f, G, hds[i], lens[j], (size_t)hds[i] + 16, mags[g]);
                        /* peaked scores: a score's rounding (|s| * 2^-24 per term)
                         * becomes that much relative error in its weight */
                        double tol = mags[g] > 2.0f ? 1e-4 : 1e-5;
                        CHECKF(e < tol, "%s: %d heads, hd %d, %d positions, |q| %g: rel err %g",
                               kernels_path_name((kern_path_id)p), G, hds[i], lens[j], mags[g], e);
                    }
    }
    /* the planted control is caught, for one head and for the last of a group */
    CHECK(max_rel_err(attn_group_planted, 1, 64, 64, 64, 2.0f) > 1e-3);
    CHECK(max_rel_err(attn_group_planted, 4, 64, 64, 64, 2.0f) > 1e-3);
    return test_summary("attention");
}
