/* The next token under a grammar: the sampler's own pick when the grammar
 * allows it, else the pick over the allowed tokens, found by asking the
 * grammar about the best candidates one at a time when the sampler can
 * (sampler_sample_lazy) and through the full mask otherwise. */
#ifndef HEARTH_GRAMMAR_PICK_H
#define HEARTH_GRAMMAR_PICK_H

#include "engine/sample/grammar.h"
#include "engine/sample/sampler.h"

#include <stdbool.h>
#include <stdint.h>

/* Questions the candidate path may ask before it gives up for the mask. */
#define GRAMMAR_PICK_CHECKS 1024

/* row: n_vocab logits (unchanged); work: room for n_vocab. gs NULL: the
 * sampler's pick. lazy false: the mask whenever the first pick is refused
 * (the oracle the candidate path is tested against; same tokens). -1 when
 * the grammar allows no token. */
int32_t grammar_pick(sampler *smp, grammar_sampler *gs, const float *row, float *work, int n_vocab, bool lazy);

#endif
