/* The next token under a grammar (see grammar_pick.h). Order of tries:
 *   1. the sampler's pick over the whole row (usually allowed: no mask);
 *   2. refused: the same pick as over the masked row, asking the grammar
 *      about a few candidates (a few table walks, no mask);
 *   3. undecided there: the full mask, applied to a copy of the row.
 * 2 and 3 give the same token (sampler_sample_lazy says why). */
#include "engine/sample/grammar_pick.h"

#include <string.h>

static bool allows(void *ctx, int32_t id) { return grammar_sampler_allows(ctx, id); }

int32_t grammar_pick(sampler *smp, grammar_sampler *gs, const float *row, float *work, int n_vocab, bool lazy) {
    size_t bytes = sizeof(float) * (size_t)n_vocab;
    int32_t tok = sampler_greedy(smp, row);   /* the common case, without a copy */
    if (tok < 0) {
        memcpy(work, row, bytes);
        tok = sampler_sample(smp, work);
    }
    if (!gs || grammar_sampler_allows(gs, tok)) return tok;
    if (lazy) {
        memcpy(work, row, bytes);
        tok = sampler_sample_lazy(smp, work, allows, gs, GRAMMAR_PICK_CHECKS);
        if (tok >= 0) return tok;
    }
    int n_allowed;
    const uint64_t *mask = grammar_sampler_mask(gs, &n_allowed);
    if (!mask || !n_allowed) return -1;
    memcpy(work, row, bytes);
    grammar_mask_apply(mask, work, n_vocab);
    tok = sampler_sample(smp, work);
    if (!grammar_sampler_allows(gs, tok)) {   /* the allowed logits were all NaN or -inf: the first allowed id */
        for (tok = 0; tok < n_vocab && !(mask[tok >> 6] >> (tok & 63) & 1); tok++) {}
        if (tok == n_vocab) return -1;
    }
    return tok;
}
