/* The vocabulary side of grammar sampling (see grammar.h): every token's
 * bytes, once per model, in a trie laid out in preorder so that tokens
 * sharing a prefix are matched once and a whole subtree is skipped when its
 * prefix is impossible; and the per-request sampler: is one token possible
 * (the fast path, a few table lookups), the full mask of possible tokens
 * (one trie walk, cached per matcher state), accepting a token. */
#include "engine/sample/grammar.h"
#include "engine/sample/grammar_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MASK_CACHE 8           /* masks kept per sampler */

struct grammar_vocab {
    int n_vocab;
    uint8_t *kind;
    uint32_t *off;             /* token i's bytes: bytes[off[i] .. off[i + 1]) */
    uint8_t *bytes;
    gtrie_node *nodes;
    size_t n_nodes;
    int32_t *order;            /* token ids in trie order */
    uint32_t *multi_range;     /* the nodes that end several tokens: their runs of order */
    uint16_t max_depth;
};

typedef struct { const uint8_t *s; uint32_t n; int32_t id; } vent;

static int vent_cmp(const void *a, const void *b) {
    const vent *x = a, *y = b;
    uint32_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

grammar_vocab *grammar_vocab_new(int n_vocab, const char *const *bytes, const size_t *lens, const uint8_t *kind) {
    if (n_vocab <= 0) return NULL;
    grammar_vocab *v = calloc(1, sizeof *v);
    vent *ents = NULL;
    uint32_t *open = NULL, *first = NULL;
    if (!v) return NULL;
    v->n_vocab = n_vocab;
    v->kind = malloc((size_t)n_vocab);
    v->off = malloc(sizeof *v->off * ((size_t)n_vocab + 1));
    ents = malloc(sizeof *ents * (size_t)n_vocab);
    size_t total = 0;
    for (int i = 0; i < n_vocab; i++) total += lens[i] <= GRAMMAR_MAX_TOKEN_BYTES ? lens[i] : 0;
    v->bytes = malloc(total ? total : 1);
    v->order = calloc((size_t)n_vocab, sizeof *v->order);
    if (!v->kind || !v->off || !ents || !v->bytes || !v->order) goto fail;
    size_t o = 0, ne = 0, trie_bound = 1;
    for (int i = 0; i < n_vocab; i++) {
        uint8_t k = kind[i];
        size_t n = lens[i];
        if (k == GV_TEXT && (n == 0 || n > GRAMMAR_MAX_TOKEN_BYTES)) k = GV_NEVER;
        v->kind[i] = k;
        v->off[i] = (uint32_t)o;
        if (k == GV_TEXT) {
            memcpy(v->bytes + o, bytes[i], n);
            ents[ne++] = (vent){ v->bytes + o, (uint32_t)n, i };
            o += n;
            trie_bound += n;
        }
    }
    v->off[n_vocab] = (uint32_t)o;
    qsort(ents, ne, sizeof *ents, vent_cmp);
    v->nodes = malloc(sizeof *v->nodes * trie_bound);
    first = malloc(sizeof *first * (trie_bound + 1));   /* each node's first token in order */
    open = malloc(sizeof *open * (GRAMMAR_MAX_TOKEN_BYTES + 1));   /* the node at each depth on the current path */
    if (!v->nodes || !first || !open) goto fail;
    size_t nn = 0, n_order = 0;
    uint32_t path = 0;   /* depth of the current path */
    for (size_t e = 0; e < ne; e++) {
        const vent *x = &ents[e];
        uint32_t lcp = 0;
        if (e) {
            const vent *p = &ents[e - 1];
            uint32_t n = p->n < x->n ? p->n : x->n;
            while (lcp < n && p->s[lcp] == x->s[lcp]) lcp++;
        }
        if (lcp > path) lcp = path;
        /* close the nodes below the shared prefix */
        for (uint32_t d = lcp + 1; d <= path; d++) v->nodes[open[d]].skip = (uint32_t)nn;
        path = lcp;
        for (uint32_t d = lcp; d < x->n; d++) {
            v->nodes[nn] = (gtrie_node){ .byte = x->s[d], .depth = (uint16_t)(d + 1) };
            first[nn] = (uint32_t)n_order;
            open[d + 1] = (uint32_t)nn++;
        }
        path = x->n;
        if (path > v->max_depth) v->max_depth = (uint16_t)path;
        v->order[n_order++] = x->id;
    }
    for (uint32_t d = 1; d <= path; d++) v->nodes[open[d]].skip = (uint32_t)nn;
    first[nn] = (uint32_t)n_order;
    v->n_nodes = nn;
    /* each node's token as a mask word and bit (none: the spare word) */
    size_t n_multi = 0, n_words = ((size_t)n_vocab + 63) / 64;
    for (size_t i = 0; i < nn; i++) n_multi += first[i + 1] - first[i] > 1;
    v->multi_range = malloc(sizeof *v->multi_range * (2 * n_multi + 1));
    if (!v->multi_range) goto fail;
    n_multi = 0;
    for (size_t i = 0; i < nn; i++) {
        uint32_t c = first[i + 1] - first[i];
        int32_t id = c ? v->order[first[i]] : 0;
        if (c <= 1) { v->nodes[i].word = c ? (uint32_t)(id >> 6) : (uint32_t)n_words; v->nodes[i].shift = (uint8_t)(id & 63); continue; }
        v->nodes[i].word = GTRIE_MULTI | (uint32_t)n_multi;
        v->multi_range[2 * n_multi] = first[i];
        v->multi_range[2 * n_multi + 1] = first[i + 1];
        n_multi++;
    }
    free(ents);
    free(open);
    free(first);
    return v;
fail:
    free(ents);
    free(open);
    free(first);
    grammar_vocab_free(v);
    return NULL;
}

void grammar_vocab_free(grammar_vocab *v) {
    if (!v) return;
    free(v->kind); free(v->off); free(v->bytes); free(v->nodes); free(v->order); free(v->multi_range);
    free(v);
}

int grammar_vocab_n(const grammar_vocab *v) { return v->n_vocab; }
size_t grammar_vocab_trie_nodes(const grammar_vocab *v) { return v->n_nodes; }

/* ---- the sampler ------------------------------------------------------------------ */
typedef struct { uint64_t epoch; int32_t state; int n_allowed; uint64_t use; uint64_t *bits; } mask_entry;

struct grammar_sampler {
    grammar *g;
    grammar_matcher *m;
    const grammar_vocab *v;
    bool allow_eog;
    size_t words;              /* uint64 words of a mask */
    mask_entry cache[MASK_CACHE];
    uint64_t uses;
    uint64_t n_masks;          /* grammar_sampler_mask calls */
    int32_t *depth_state;
    int32_t last_id, last_from, last_state; uint64_t last_epoch;   /* the last token checked, for accept */
};

grammar_sampler *grammar_sampler_new(const grammar *g, const grammar_vocab *v, bool allow_eog) {
    grammar_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->v = v;
    s->allow_eog = allow_eog;
    s->words = ((size_t)v->n_vocab + 63) / 64;
    s->g = grammar_clone(g);
    s->m = s->g ? grammar_matcher_new(s->g) : NULL;
    s->depth_state = malloc(sizeof *s->depth_state * ((size_t)v->max_depth + 2));
    s->last_id = -1;
    if (!s->m || !s->depth_state) { grammar_sampler_free(s); return NULL; }
    return s;
}

void grammar_sampler_free(grammar_sampler *s) {
    if (!s) return;
    for (int i = 0; i < MASK_CACHE; i++) free(s->cache[i].bits);
    grammar_matcher_free(s->m);
    grammar_free(s->g);
    free(s->depth_state);
    free(s);
}

/* The state after token id's bytes from the current state (GM_DEAD if impossible). */
static int32_t after_token(grammar_sampler *s, int32_t id) {
    const grammar_vocab *v = s->v;
    int32_t st = gm_current(s->m);
    for (uint32_t i = v->off[id]; i < v->off[id + 1] && st >= 0; i++) st = gm_step(s->m, st, v->bytes[i]);
    s->last_id = id;
    s->last_from = gm_current(s->m);
    s->last_state = st;
    s->last_epoch = gm_epoch(s->m);
    return st;
}

bool grammar_sampler_allows(grammar_sampler *s, int32_t id) {
    if (id < 0 || id >= s->v->n_vocab) return false;
    switch (s->v->kind[id]) {
    case GV_EOG: return s->allow_eog && grammar_matcher_can_end(s->m);
    case GV_TEXT: return after_token(s, id) >= 0;
    default: return false;
    }
}

const uint64_t *grammar_sampler_mask(grammar_sampler *s, int *n_allowed) {
    int32_t cur = gm_current(s->m);
    uint64_t ep = gm_epoch(s->m);
    s->n_masks++;
    mask_entry *slot = NULL;   /* an empty entry, else the least recently used */
    for (int i = 0; i < MASK_CACHE; i++) {
        mask_entry *c = &s->cache[i];
        if (c->bits && c->epoch == ep && c->state == cur) {
            c->use = ++s->uses;
            *n_allowed = c->n_allowed;
            return c->bits;
        }
        if (!slot || (slot->bits && (!c->bits || c->use < slot->use))) slot = c;
    }
    if (!slot->bits) slot->bits = malloc(sizeof *slot->bits * (s->words + 1));   /* + the walk's spare word */
    if (!slot->bits) { *n_allowed = 0; return NULL; }
    memset(slot->bits, 0, sizeof *slot->bits * s->words);
    const grammar_vocab *v = s->v;
    gtrie_multi multi = { v->multi_range, v->order };
    size_t n = gm_walk(s->m, cur, v->nodes, v->n_nodes, &multi, slot->bits, s->words, s->depth_state);
    if (s->allow_eog && gm_can_end(s->m, cur))
        for (int i = 0; i < v->n_vocab; i++)
            if (v->kind[i] == GV_EOG) { slot->bits[i >> 6] |= 1ull << (i & 63); n++; }
    slot->epoch = ep;
    slot->state = cur;
    slot->n_allowed = (int)n;
    slot->use = ++s->uses;
    *n_allowed = (int)n;
    return slot->bits;
}

void grammar_mask_apply(const uint64_t *mask, float *logits, int n_vocab) {
    for (int w = 0; w * 64 < n_vocab; w++) {
        uint64_t b = mask[w];
        if (b == ~0ull) continue;
        int end = w * 64 + 64 < n_vocab ? w * 64 + 64 : n_vocab;
        for (int i = w * 64; i < end; i++)
            if (!(b >> (i & 63) & 1)) logits[i] = -INFINITY;
    }
}

bool grammar_sampler_accept(grammar_sampler *s, int32_t id) {
    if (id < 0 || id >= s->v->n_vocab) return false;
    if (s->v->kind[id] == GV_EOG) return s->allow_eog && grammar_matcher_can_end(s->m);
    if (s->v->kind[id] != GV_TEXT) return false;
    int32_t st = s->last_id == id && s->last_epoch == gm_epoch(s->m) && s->last_from == gm_current(s->m) ? s->last_state : after_token(s, id);
    s->last_id = -1;
    if (st < 0) return false;
    gm_set_state(s->m, st);
    return true;
}

uint64_t grammar_sampler_n_masks(const grammar_sampler *s) { return s->n_masks; }
bool grammar_sampler_done(const grammar_sampler *s) { return grammar_matcher_done(s->m); }
const grammar_matcher *grammar_sampler_matcher(const grammar_sampler *s) { return s->m; }

static atomic_bool mask_off;
void grammar_set_mask_disabled(bool off) { atomic_store(&mask_off, off); }
bool grammar_mask_disabled(void) { return atomic_load(&mask_off); }
