/* The grammar vocabulary (engine/sample/grammar.h) of a tokenizer. */
#ifndef HEARTH_GRAMMAR_TOKENS_H
#define HEARTH_GRAMMAR_TOKENS_H

#include "engine/sample/grammar.h"

struct tokenizer;
/* NULL without memory. Takes tens of milliseconds for a 150k vocabulary. */
grammar_vocab *grammar_vocab_from_tokenizer(const struct tokenizer *t);

#endif
