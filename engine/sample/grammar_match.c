/* The incremental matcher (see grammar.h).
 *
 * Like llama.cpp's, a matcher state is a set of stacks of element positions;
 * each stack's top is a character set the next code point may match (an
 * empty stack: the sentence may end here). Advancing over a code point
 * keeps the stacks whose top matches, moves past the set and expands rule
 * references again until every top is a set. Bytes come one at a time: a
 * state also holds the leading bits of an unfinished UTF-8 character, and
 * keeps only the stacks that some completion of it could still satisfy, so
 * a token that ends inside a character is possible exactly when the
 * character can still be finished. Once every completion of the unfinished
 * character is one every kept stack takes, its bits are dropped (WHOLE):
 * the thousands of CJK prefixes of a vocabulary then share a few states.
 *
 * States are interned (sorted, deduplicated stacks; a hash table), and each
 * has a lazily filled row byte -> next state in one table for all states;
 * a transition computed fills every byte of its class at once (share_step).
 * Walking a vocabulary trie from one state then costs one table load per
 * trie node once the handful of states involved are known. The table is bounded: gm_trim renumbers
 * (keeping only the current state) when it grows large, and past a hard
 * cap a new state counts as impossible (conservative: text may be refused,
 * never wrongly allowed). Stacks are capped in depth and number the same way. */
#include "engine/sample/grammar.h"
#include "engine/sample/grammar_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH      1024        /* positions on one stack */
#define MAX_STACKS     2048        /* stacks in one state */
#define EXPAND_BUDGET  (1u << 20)  /* stack words written per step */
#define TRIM_STATES    4096
#define TRIM_WORDS     (4u << 20)
#define HARD_STATES    16384
#define NEXT_UNKNOWN   (-2)
_Static_assert(HARD_STATES < INT16_MAX, "state ids fit the int16 transition table");
#define WHOLE          UINT32_MAX  /* gstate.partial: the bits no longer matter */

typedef struct {
    uint32_t off, n_words, n_stacks;   /* stacks in words[off..]: [len, pos...] each */
    uint32_t partial;                  /* bits of an unfinished UTF-8 character, or WHOLE */
    uint8_t need, total;               /* continuation bytes still expected; its length */
    uint8_t can_end;
    uint8_t has_cls;                   /* cls holds its ASCII byte classes */
    uint64_t hash;
} gstate;

typedef struct { uint32_t *w; size_t n, cap; } wbuf;

struct grammar_matcher {
    const grammar *g;
    gstate *st;
    uint32_t n_st, cap_st;
    int16_t *next;                     /* state s's byte b -> state: next[s * 256 + b], NEXT_UNKNOWN until computed
                                        * (int16: half the cache a walk needs; HARD_STATES fits) */
    uint8_t *cls;                      /* state s's ASCII byte b's class: cls[s * 128 + b] (share_step) */
    wbuf words;                        /* every state's stacks */
    uint32_t *ht;                      /* state id + 1; 0 empty */
    uint32_t ht_cap;
    int32_t cur;
    uint64_t epoch;
    bool merge;                        /* intern whole partial states as WHOLE */
    bool share;                        /* share_step: a computed transition fills its byte class */
    uint64_t n_computed;               /* transitions computed (the others shared or looked up) */
    /* scratch for building a state */
    wbuf work, out;
    uint32_t *idx;                     /* offsets of the stacks in out */
    size_t idx_cap;
};

static int wpush(wbuf *b, uint32_t v) {
    if (b->n == b->cap) {
        size_t c = b->cap ? b->cap * 2 : 256;
        uint32_t *n = realloc(b->w, sizeof *n * c);
        if (!n) return -1;
        b->w = n;
        b->cap = c;
    }
    b->w[b->n++] = v;
    return 0;
}

/* ---- character sets ---------------------------------------------------------- */
static uint32_t set_end(const grammar *g, uint32_t pos) {
    uint32_t i = pos + 1;
    while (g->el[i].type == GE_CHAR_ALT || g->el[i].type == GE_RNG_UPPER) i++;
    return i;
}

/* The range of the set element at i: [lo, hi]; returns the index after it. */
static uint32_t set_range(const grammar *g, uint32_t i, uint32_t *lo, uint32_t *hi) {
    *lo = *hi = g->el[i].value;
    if (g->el[i + 1].type == GE_RNG_UPPER) { *hi = g->el[i + 1].value; return i + 2; }
    return i + 1;
}

static bool set_has(const grammar *g, uint32_t pos, uint32_t cp) {
    uint32_t t = g->el[pos].type;
    if (t == GE_ANY) return true;
    bool in = false;
    for (uint32_t i = pos; !in;) {
        uint32_t lo, hi;
        i = set_range(g, i, &lo, &hi);
        in = cp >= lo && cp <= hi;
        if (g->el[i].type != GE_CHAR_ALT) break;
    }
    return in != (t == GE_CHAR_NOT);
}

/* Does one of the set's ranges (GE_CHAR or GE_CHAR_NOT alike) meet [lo, hi]? */
static bool ranges_meet(const grammar *g, uint32_t pos, uint32_t lo, uint32_t hi) {
    for (uint32_t i = pos;;) {
        uint32_t a, b;
        i = set_range(g, i, &a, &b);
        if (a <= hi && b >= lo) return true;
        if (g->el[i].type != GE_CHAR_ALT) return false;
    }
}

/* Do the set's ranges together (in any order) cover [lo, hi]: lo, then what
 * follows, up to hi? */
static bool ranges_cover(const grammar *g, uint32_t pos, uint32_t lo, uint32_t hi) {
    uint32_t x = lo;
    for (;;) {
        bool moved = false;
        for (uint32_t i = pos;;) {
            uint32_t a, b;
            i = set_range(g, i, &a, &b);
            if (x >= a && x <= b) { if (b >= hi) return true; x = b + 1; moved = true; }
            if (g->el[i].type != GE_CHAR_ALT) break;
        }
        if (!moved) return false;
    }
}

/* Does the set hold some code point in [lo, hi]? A negated set does unless
 * its ranges cover all of it. */
static bool set_meets(const grammar *g, uint32_t pos, uint32_t lo, uint32_t hi) {
    if (lo > hi) return false;
    uint32_t t = g->el[pos].type;
    if (t == GE_ANY) return true;
    return t == GE_CHAR ? ranges_meet(g, pos, lo, hi) : !ranges_cover(g, pos, lo, hi);
}

/* Does the set hold every code point in [lo, hi]? A negated set does when
 * no excluded range meets it. */
static bool set_covers(const grammar *g, uint32_t pos, uint32_t lo, uint32_t hi) {
    uint32_t t = g->el[pos].type;
    if (t == GE_ANY) return true;
    return t == GE_CHAR_NOT ? !ranges_meet(g, pos, lo, hi) : ranges_cover(g, pos, lo, hi);
}

/* The code points a character starting with these bits can still become:
 * [lo, hi] without the overlong forms and past-the-end values; *whole when
 * every completion is a character (no surrogate, nothing cut off). */
static void partial_range(uint32_t partial, int need, int total, uint32_t *lo, uint32_t *hi, bool *whole) {
    static const uint32_t minv[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    uint32_t l = partial << (6 * need), h = l | ((1u << (6 * need)) - 1);
    *whole = l >= minv[total] && h <= 0x10FFFF && (h < 0xD800 || l > 0xDFFF);
    *lo = l < minv[total] ? minv[total] : l;
    *hi = h > 0x10FFFF ? 0x10FFFF : h;
}

/* Could a character that starts with these bits still be one the set holds? */
static bool set_meets_partial(const grammar *g, uint32_t pos, uint32_t lo, uint32_t hi) {
    /* surrogates are not characters */
    return set_meets(g, pos, lo, hi < 0xD7FF ? hi : 0xD7FF) || set_meets(g, pos, lo > 0xE000 ? lo : 0xE000, hi);
}

/* ---- building states ------------------------------------------------------------ */
/* Expand the stacks queued in m->work until every top is a character set;
 * the results go to m->out. */
static void expand(grammar_matcher *m, size_t *budget) {
    const grammar *g = m->g;
    wbuf *w = &m->work;
    while (w->n) {
        /* pop the last stack: its length is stored after it */
        uint32_t len = w->w[w->n - 1];
        size_t start = w->n - 1 - len;
        uint32_t top = len ? w->w[w->n - 2] : 0;
        if (!len || gelem_is_char(g->el[top].type)) {
            if (len + 1 <= *budget) {   /* out holds [len, positions] */
                wpush(&m->out, len);
                for (uint32_t i = 0; i < len; i++) wpush(&m->out, w->w[start + i]);
                *budget -= len + 1;
            }
            w->n = start;
            continue;
        }
        /* a reference: one stack per alternative of the rule */
        uint32_t rule = g->el[top].value, after = top + 1;
        w->n = start;
        uint32_t base = len - 1;
        int keep_after = !gelem_is_end(g->el[after].type);
        for (uint32_t a = g->rule_start[rule];;) {
            int nonempty = !gelem_is_end(g->el[a].type);
            uint32_t nl = base + (uint32_t)keep_after + (uint32_t)nonempty;
            if (nl <= MAX_DEPTH && *budget > nl + 1) {
                /* the old stack's base is still in place at start (the first
                 * copy rewrites it with the same values) */
                for (uint32_t i = 0; i < base; i++) wpush(w, w->w[start + i]);
                if (keep_after) wpush(w, after);
                if (nonempty) wpush(w, a);
                wpush(w, nl);
                *budget -= nl + 1;
            }
            while (!gelem_is_end(g->el[a].type)) a++;
            if (g->el[a].type == GE_END) break;
            a++;
        }
    }
}

static uint64_t hash_words(const uint32_t *w, size_t n, uint32_t partial, uint32_t need) {
    uint64_t h = 1469598103934665603ull ^ ((uint64_t)partial << 8) ^ need;
    for (size_t i = 0; i < n; i++) h = (h ^ w[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* Stacks [len, positions] compared by length, then positions. */
static int cmp_stacks(const uint32_t *w, uint32_t a, uint32_t b) {
    const uint32_t *x = w + a, *y = w + b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    for (uint32_t i = 1; i <= x[0]; i++) if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* Bottom-up merge sort of n stack offsets (tmp: room for n more). */
static void sort_stacks(const uint32_t *w, uint32_t *a, uint32_t *tmp, size_t n) {
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp_stacks(w, a[j], a[i]) < 0 ? a[j++] : a[i++];
            while (i < mid) tmp[k++] = a[i++];
            while (j < hi) tmp[k++] = a[j++];
        }
        memcpy(a, tmp, sizeof *a * n);
    }
}

static int ht_grow(grammar_matcher *m) {
    uint32_t cap = m->ht_cap ? m->ht_cap * 2 : 1024;
    uint32_t *h = calloc(cap, sizeof *h);
    if (!h) return -1;
    for (uint32_t s = 0; s < m->n_st; s++) {
        uint32_t i = (uint32_t)m->st[s].hash & (cap - 1);
        while (h[i]) i = (i + 1) & (cap - 1);
        h[i] = s + 1;
    }
    free(m->ht);
    m->ht = h;
    m->ht_cap = cap;
    return 0;
}

/* Intern the stacks in m->out (any order, maybe repeated) with the partial
 * character given; GM_DEAD if there are none or memory/caps run out. */
static int32_t intern(grammar_matcher *m, uint32_t partial, uint8_t need, uint8_t total) {
    size_t n = 0;
    for (size_t i = 0; i < m->out.n; i += m->out.w[i] + 1) n++;
    if (!n) return GM_DEAD;
    if (2 * n > m->idx_cap) {
        uint32_t *x = realloc(m->idx, sizeof *x * 2 * n);
        if (!x) return GM_DEAD;
        m->idx = x;
        m->idx_cap = 2 * n;
    }
    n = 0;
    for (size_t i = 0; i < m->out.n; i += m->out.w[i] + 1) m->idx[n++] = (uint32_t)i;
    sort_stacks(m->out.w, m->idx, m->idx + n, n);
    /* canonical words at the end of the state store */
    size_t off = m->words.n;
    uint32_t kept = 0;
    bool can_end = false;
    for (size_t k = 0; k < n; k++) {
        if (k && !cmp_stacks(m->out.w, m->idx[k - 1], m->idx[k])) continue;
        if (kept == MAX_STACKS) break;
        const uint32_t *s = m->out.w + m->idx[k];
        for (uint32_t i = 0; i <= s[0]; i++)
            if (wpush(&m->words, s[i])) { m->words.n = off; return GM_DEAD; }
        if (!s[0]) can_end = true;
        kept++;
    }
    size_t nw = m->words.n - off;
    uint64_t h = hash_words(m->words.w + off, nw, partial, need);
    if (m->ht_cap) {
        for (uint32_t i = (uint32_t)h & (m->ht_cap - 1); m->ht[i]; i = (i + 1) & (m->ht_cap - 1)) {
            gstate *s = &m->st[m->ht[i] - 1];
            if (s->hash == h && s->n_words == nw && s->partial == partial && s->need == need && s->total == total &&
                !memcmp(m->words.w + s->off, m->words.w + off, sizeof(uint32_t) * nw)) {
                m->words.n = off;
                return (int32_t)(m->ht[i] - 1);
            }
        }
    }
    if (m->n_st >= HARD_STATES) { m->words.n = off; return GM_DEAD; }
    if ((m->n_st + 1) * 2 > m->ht_cap && ht_grow(m)) { m->words.n = off; return GM_DEAD; }
    if (m->n_st == m->cap_st) {
        uint32_t c = m->cap_st ? m->cap_st * 2 : 64;
        gstate *ns = realloc(m->st, sizeof *ns * c);
        if (ns) m->st = ns;
        int16_t *nx = ns ? realloc(m->next, sizeof *nx * 256 * c) : NULL;
        if (nx) m->next = nx;
        uint8_t *cl = nx ? realloc(m->cls, (size_t)128 * c) : NULL;
        if (!cl) { m->words.n = off; return GM_DEAD; }
        m->cls = cl;
        m->cap_st = c;
    }
    for (int b = 0; b < 256; b++) m->next[(size_t)m->n_st * 256 + b] = NEXT_UNKNOWN;
    gstate *s = &m->st[m->n_st];
    *s = (gstate){ .off = (uint32_t)off, .n_words = (uint32_t)nw, .n_stacks = kept, .partial = partial,
                   .need = need, .total = total, .can_end = can_end && !need, .hash = h };
    uint32_t i = (uint32_t)h & (m->ht_cap - 1);
    while (m->ht[i]) i = (i + 1) & (m->ht_cap - 1);
    m->ht[i] = m->n_st + 1;
    return (int32_t)m->n_st++;
}

/* Queue a copy of a stack (len positions) plus an optional push for expansion. */
static void queue(grammar_matcher *m, const uint32_t *s, uint32_t len, int64_t push_pos) {
    for (uint32_t i = 0; i < len; i++) wpush(&m->work, s[i]);
    if (push_pos >= 0) { wpush(&m->work, (uint32_t)push_pos); len++; }
    wpush(&m->work, len);
}

/* The state after state s (no partial character) reads code point cp; with
 * cp ANY_CP, a character every stack of s takes (s is a whole partial state). */
#define ANY_CP UINT32_MAX
static int32_t advance_cp(grammar_matcher *m, int32_t s, uint32_t cp) {
    const grammar *g = m->g;
    m->out.n = 0;
    size_t budget = EXPAND_BUDGET;
    gstate st = m->st[s];
    for (uint32_t i = 0, k = 0; k < st.n_stacks; k++) {
        const uint32_t *stk = m->words.w + st.off + i;
        uint32_t len = stk[0];
        i += len + 1;
        if (!len) continue;
        uint32_t top = stk[len];
        if (cp != ANY_CP && !set_has(g, top, cp)) continue;
        uint32_t nx = set_end(g, top);
        m->work.n = 0;
        queue(m, stk + 1, len - 1, gelem_is_end(g->el[nx].type) ? -1 : (int64_t)nx);
        expand(m, &budget);
    }
    return intern(m, 0, 0, 0);
}

/* The state after s keeps a longer unfinished character: only stacks it can
 * still serve. When every completion is a character and every stack kept
 * takes all of them, the bits no longer matter: the state is interned as
 * WHOLE, so the thousands of partial CJK characters of a vocabulary share one
 * state (and one transition table) per set of stacks. */
static int32_t advance_partial(grammar_matcher *m, int32_t s, uint32_t partial, uint8_t need, uint8_t total) {
    m->out.n = 0;
    gstate st = m->st[s];
    uint32_t lo = 0, hi = 0;
    bool whole = true;
    if (st.partial != WHOLE) partial_range(partial, need, total, &lo, &hi, &whole);
    whole = whole && m->merge;
    for (uint32_t i = 0, k = 0; k < st.n_stacks; k++) {
        const uint32_t *stk = m->words.w + st.off + i;
        uint32_t len = stk[0];
        i += len + 1;
        if (!len) continue;
        /* from a whole state every stack takes every completion */
        if (st.partial != WHOLE) {
            if (!set_meets_partial(m->g, stk[len], lo, hi)) continue;
            if (whole && !set_covers(m->g, stk[len], lo, hi)) whole = false;
        }
        for (uint32_t j = 0; j <= len; j++) wpush(&m->out, stk[j]);
    }
    return intern(m, whole ? WHOLE : partial, need, total);
}

static int32_t compute_step(grammar_matcher *m, int32_t s, uint8_t b) {
    gstate st = m->st[s];
    if (st.need) {
        if ((b & 0xC0) != 0x80) return GM_DEAD;
        if (st.partial == WHOLE)
            return st.need > 1 ? advance_partial(m, s, WHOLE, (uint8_t)(st.need - 1), st.total) : advance_cp(m, s, ANY_CP);
        uint32_t v = (st.partial << 6) | (b & 0x3Fu);
        if (st.need > 1) return advance_partial(m, s, v, (uint8_t)(st.need - 1), st.total);
        static const uint32_t minv[5] = { 0, 0, 0x80, 0x800, 0x10000 };
        if (v < minv[st.total] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return GM_DEAD;
        return advance_cp(m, s, v);
    }
    if (b < 0x80) return advance_cp(m, s, b);
    if (b >= 0xC2 && b <= 0xDF) return advance_partial(m, s, b & 0x1Fu, 1, 2);
    if (b >= 0xE0 && b <= 0xEF) return advance_partial(m, s, b & 0x0Fu, 2, 3);
    if (b >= 0xF0 && b <= 0xF4) return advance_partial(m, s, b & 0x07u, 3, 4);
    return GM_DEAD;
}

/* The stacks of st (at most 64) whose top takes code point cp, as bits. */
static uint64_t takers(const grammar_matcher *m, const gstate *st, uint32_t cp) {
    uint64_t sig = 0;
    for (uint32_t i = 0, k = 0; k < st->n_stacks; k++) {
        const uint32_t *stk = m->words.w + st->off + i;
        i += stk[0] + 1;
        if (stk[0] && set_has(m->g, stk[stk[0]], cp)) sig |= 1ull << k;
    }
    return sig;
}

/* Give the bytes that step state s exactly as b does the same next state r,
 * so a vocabulary walk computes one transition per class of bytes rather
 * than per byte. advance_cp's result depends only on which stacks take the
 * code point, so: from a state without a partial character, every ASCII
 * byte the same stacks take; from a whole partial state (its bits do not
 * matter), every continuation byte. Only for live steps (finding a dead end
 * is cheap) from states of few stacks (the classes cost a check per stack
 * and byte). */
#define SHARE_STACKS 8
static void share_step(grammar_matcher *m, int32_t s, uint8_t b, int32_t r) {
    const gstate *st = &m->st[s];
    int16_t *nx = m->next + (size_t)s * 256;
    if (st->n_stacks > SHARE_STACKS || r == GM_DEAD) return;   /* a dead end is cheap to find again */
    if (!st->need) {
        if (b >= 0x80) return;
        uint8_t *cl = m->cls + (size_t)s * 128;
        if (!st->has_cls) {   /* the classes once per state: bytes the same stacks take */
            uint64_t sig[128], rep_sig[128];
            uint32_t n_cls = 0;
            for (uint32_t c = 0; c < 0x80; c++) {
                sig[c] = takers(m, st, c);
                uint32_t k = 0;
                while (k < n_cls && rep_sig[k] != sig[c]) k++;
                if (k == n_cls) rep_sig[n_cls++] = sig[c];
                cl[c] = (uint8_t)k;
            }
            m->st[s].has_cls = 1;
        }
        for (uint32_t c = 0; c < 0x80; c++)
            if (nx[c] == NEXT_UNKNOWN && cl[c] == cl[b]) nx[c] = (int16_t)r;
    } else if ((b & 0xC0) != 0x80) {
        return;
    } else if (st->partial == WHOLE) {
        for (uint32_t c = 0x80; c < 0xC0; c++)
            if (nx[c] == NEXT_UNKNOWN) nx[c] = (int16_t)r;
    }
}

int32_t gm_step(grammar_matcher *m, int32_t s, uint8_t b) {
    if (s < 0) return GM_DEAD;
    int32_t r = m->next[(size_t)s * 256 + b];
    if (r != NEXT_UNKNOWN) return r;
    r = compute_step(m, s, b);   /* may grow m->next */
    m->n_computed++;
    m->next[(size_t)s * 256 + b] = (int16_t)r;
    if (m->share) share_step(m, s, b, r);
    return r;
}

/* ---- the public side ----------------------------------------------------------------- */
static atomic_bool merge_off, share_off;
void gm_set_merge_disabled(bool off) { atomic_store(&merge_off, off); }
void gm_set_share_disabled(bool off) { atomic_store(&share_off, off); }
uint32_t gm_n_states(const grammar_matcher *m) { return m->n_st; }
uint64_t gm_n_computed(const grammar_matcher *m) { return m->n_computed; }

static void reset_tables(grammar_matcher *m) {
    m->n_st = 0;
    m->words.n = 0;
    if (m->ht) memset(m->ht, 0, sizeof *m->ht * m->ht_cap);
    m->epoch++;
}

grammar_matcher *grammar_matcher_new(const grammar *g) {
    grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->g = g;
    m->merge = !atomic_load(&merge_off);
    m->share = !atomic_load(&share_off);
    /* the start: one stack per alternative of root */
    m->out.n = 0;
    size_t budget = EXPAND_BUDGET;
    m->work.n = 0;
    uint32_t none[1] = { 0 };
    for (uint32_t a = g->rule_start[g->root];;) {
        m->work.n = 0;
        queue(m, none, 0, gelem_is_end(g->el[a].type) ? -1 : (int64_t)a);
        expand(m, &budget);
        while (!gelem_is_end(g->el[a].type)) a++;
        if (g->el[a].type == GE_END) break;
        a++;
    }
    m->cur = intern(m, 0, 0, 0);
    if (m->cur < 0) { grammar_matcher_free(m); return NULL; }
    return m;
}

void grammar_matcher_free(grammar_matcher *m) {
    if (!m) return;
    free(m->st);
    free(m->next);
    free(m->cls);
    free(m->words.w);
    free(m->ht);
    free(m->work.w);
    free(m->out.w);
    free(m->idx);
    free(m);
}

void gm_trim(grammar_matcher *m) {
    if (m->n_st <= TRIM_STATES && m->words.n <= TRIM_WORDS) return;
    gstate cur = m->st[m->cur];
    m->out.n = 0;
    for (uint32_t i = 0; i < cur.n_words; i++) wpush(&m->out, m->words.w[cur.off + i]);
    reset_tables(m);
    m->cur = intern(m, cur.partial, cur.need, cur.total);
}

bool grammar_matcher_accept(grammar_matcher *m, const char *s, size_t n) {
    int32_t st = m->cur;
    for (size_t i = 0; i < n && st >= 0; i++) st = gm_step(m, st, (uint8_t)s[i]);
    if (st < 0) return false;
    m->cur = st;
    gm_trim(m);
    return true;
}

bool grammar_matcher_can_end(const grammar_matcher *m) { return m->st[m->cur].can_end; }
bool grammar_matcher_done(const grammar_matcher *m) {
    return m->st[m->cur].can_end && m->st[m->cur].n_stacks == 1;
}
int32_t gm_current(const grammar_matcher *m) { return m->cur; }
bool gm_can_end(const grammar_matcher *m, int32_t s) { return s >= 0 && m->st[s].can_end; }
void gm_set_state(grammar_matcher *m, int32_t s) {
    if (s >= 0 && (uint32_t)s < m->n_st) m->cur = s;
    gm_trim(m);
}
uint64_t gm_epoch(const grammar_matcher *m) { return m->epoch; }

/* ---- the vocabulary walk ------------------------------------------------------------- */
size_t gm_walk(grammar_matcher *m, int32_t from, const gtrie_node *nodes, size_t n_nodes, const gtrie_multi *multi,
               uint64_t *bits, size_t n_words, int32_t *at) {
    const int16_t *next = m->next;
    size_t n_set = 0;
    at[0] = from;
    bits[n_words] = 0;
    for (size_t i = 0; i < n_nodes;) {
        const gtrie_node *nd = &nodes[i];
        /* one table for all states: the path's state and the byte give the
         * next state in one load (the walk's chain of dependent loads is
         * what it costs); a transition not yet known is computed once */
        int32_t ps = at[nd->depth - 1];
        int32_t t = next[(size_t)ps * 256 + nd->byte];
        if (t == NEXT_UNKNOWN) {
            t = gm_step(m, ps, nd->byte);
            next = m->next;
        }
        if (t < 0) { i = nd->skip; continue; }
        at[nd->depth] = t;
        if (!(nd->word & GTRIE_MULTI)) {
            bits[nd->word] |= 1ull << nd->shift;
            n_set += nd->word < n_words;
        } else {
            const uint32_t *r = multi->range + 2 * (size_t)(nd->word & ~GTRIE_MULTI);
            for (uint32_t k = r[0]; k < r[1]; k++) bits[multi->ids[k] >> 6] |= 1ull << (multi->ids[k] & 63);
            n_set += r[1] - r[0];
        }
        i++;
    }
    bits[n_words] = 0;
    return n_set;
}
