/* Bounds on a model's hyperparameters, checked at load before anything is
 * sized from them: each one alone and every product the forward pass,
 * the KV cache and the arena compute (in 64-bit, so a product that wraps
 * a 32-bit int cannot pass as a small one). */
#ifndef HEARTH_MODEL_CHECK_H
#define HEARTH_MODEL_CHECK_H

#include <stddef.h>
#include "engine/model/model.h"

/* 0, or -1 with a one-line error naming the value. n_vocab 0 means "not
 * read yet" (the vocabulary's products are checked once it is). */
int model_check_params(const model_params *p, char *err, size_t errlen);

#endif
