/* The rule representation shared by the GBNF parser and the matcher.
 *
 * All rules live in one element array. A rule is its alternatives one after
 * another, each a sequence of elements, separated by GE_ALT and closed by
 * GE_END. A character set is a GE_CHAR / GE_CHAR_NOT / GE_ANY head followed
 * by GE_CHAR_ALT (one more code point) and GE_RNG_UPPER (the previous code
 * point is the low end of a range up to this one) elements. */
#ifndef HEARTH_GRAMMAR_INTERNAL_H
#define HEARTH_GRAMMAR_INTERNAL_H

#include <stdint.h>

enum {
    GE_END = 0,      /* end of the rule */
    GE_ALT,          /* start of another alternative */
    GE_REF,          /* value: rule id */
    GE_CHAR,         /* value: code point; a set of what follows */
    GE_CHAR_NOT,     /* value: code point; a set of everything but what follows */
    GE_CHAR_ALT,     /* value: code point, part of the set before it */
    GE_RNG_UPPER,    /* value: the upper end of a range starting at the previous element */
    GE_ANY,          /* `.`: any code point */
};

typedef struct { uint32_t type, value; } gelem;

struct grammar {
    gelem *el;
    uint32_t n_el;
    uint32_t *rule_start;    /* index of each rule's first element */
    uint32_t n_rules;
    uint32_t root;           /* rule id of `root` */
};

static inline int gelem_is_end(uint32_t t) { return t == GE_END || t == GE_ALT; }
static inline int gelem_is_char(uint32_t t) { return t == GE_CHAR || t == GE_CHAR_NOT || t == GE_ANY; }

/* A vocabulary trie in preorder (grammar_vocab.c builds it): node i's
 * subtree ends before node skip. The token whose bytes end at node i is bit
 * `shift` of mask word `word`, so a live node sets its bit without another
 * load; a node that ends no token names the spare word past the mask, and
 * one that ends several (tokens with the same bytes) has GTRIE_MULTI set
 * and word's other bits index the vocabulary's list of them. */
#define GTRIE_MULTI 0x80000000u
typedef struct { uint8_t byte; uint8_t shift; uint16_t depth; uint32_t skip; uint32_t word; } gtrie_node;
/* The tokens of the GTRIE_MULTI node with index x: ids[range[2x] .. range[2x + 1]). */
typedef struct { const uint32_t *range; const int32_t *ids; } gtrie_multi;

/* Sets the bit of every token in the trie that the matcher can take from
 * state `from`; returns how many bits bits[0 .. n_words) then hold. bits:
 * n_words + 1 words (the last, the spare, is left 0). at: room for the
 * trie's depth + 1 (the state at each depth of the current path). */
struct grammar_matcher;
size_t gm_walk(struct grammar_matcher *m, int32_t from, const gtrie_node *nodes, size_t n_nodes, const gtrie_multi *multi,
               uint64_t *bits, size_t n_words, int32_t *at);

#endif
