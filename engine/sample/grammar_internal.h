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
 * subtree ends before node skip; the tokens whose bytes end at node i are
 * order[tok .. nodes[i + 1].tok) (a last node closes the list). */
typedef struct { uint8_t byte; uint8_t pad; uint16_t depth; uint32_t skip; uint32_t tok; } gtrie_node;

/* Sets the bit of every token in the trie that the matcher can take from
 * state `from`; returns how many. at: room for the trie's depth + 1 (the
 * state at each depth of the current path, and its transition table). */
struct grammar_matcher;
typedef struct { int32_t s; const int32_t *nx; } gwalk_at;
size_t gm_walk(struct grammar_matcher *m, int32_t from, const gtrie_node *nodes, size_t n_nodes,
               const int32_t *order, uint64_t *bits, gwalk_at *at);

#endif
