/* GBNF text -> rules (see grammar.h, grammar_internal.h).
 *
 * The syntax is llama.cpp's: `name ::= alternatives` one rule per line (a
 * rule continues over newlines inside parentheses and after `|`), literals
 * "..." and classes [...] / [^...] with \x \u \U \t \n \r \\ \" \[ \] \-
 * escapes, `.`, grouping, `*` `+` `?` `{m}` `{m,}` `{m,n}` `{,n}`, and #
 * comments. Groups become rules of their own; repetitions are rewritten as
 * right-recursive rules (x* -> R ::= x R | ), so the matcher only sees
 * sequences, alternatives and references. Rules that can recurse without
 * consuming input (left recursion) are rejected: the matcher would never
 * finish expanding them. */
#include "engine/sample/grammar.h"
#include "engine/sample/grammar_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { gelem *el; uint32_t n, cap; } ebuf;

typedef struct {
    ebuf body;
    char *name;
    size_t ref_pos;          /* where it was first referenced, for an undefined rule */
    int defined;
} prule;

typedef struct {
    const char *s;
    size_t n, pos;
    char *err;
    size_t errlen;
    int failed;
    prule *rules;
    uint32_t n_rules, cap_rules;
    uint32_t *hash;          /* open addressing over rule ids + 1; 0 = empty */
    uint32_t hash_cap;
    size_t n_elems;          /* across every rule, for the bound */
    int depth;
} parser;

static void fail_at(parser *p, size_t pos, const char *fmt, ...) {
    if (p->failed) return;
    p->failed = 1;
    int line = 1, col = 1;
    for (size_t i = 0; i < pos && i < p->n; i++) {
        if (p->s[i] == '\n') { line++; col = 1; } else col++;
    }
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->err && p->errlen) snprintf(p->err, p->errlen, "grammar: line %d, column %d: %s", line, col, msg);
}

static int push(parser *p, ebuf *b, uint32_t type, uint32_t value) {
    if (p->failed) return -1;
    if (++p->n_elems > GRAMMAR_MAX_ELEMS) { fail_at(p, p->pos, "grammar too large (over %u elements)", GRAMMAR_MAX_ELEMS); return -1; }
    if (b->n == b->cap) {
        uint32_t c = b->cap ? b->cap * 2 : 16;
        gelem *ne = realloc(b->el, sizeof *ne * c);
        if (!ne) { fail_at(p, p->pos, "out of memory"); return -1; }
        b->el = ne;
        b->cap = c;
    }
    b->el[b->n++] = (gelem){ type, value };
    return 0;
}

/* ---- rule names ---------------------------------------------------------------- */
static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int hash_grow(parser *p) {
    uint32_t cap = p->hash_cap ? p->hash_cap * 2 : 256;
    uint32_t *h = calloc(cap, sizeof *h);
    if (!h) return -1;
    for (uint32_t r = 0; r < p->n_rules; r++) {
        uint32_t i = name_hash(p->rules[r].name, strlen(p->rules[r].name)) & (cap - 1);
        while (h[i]) i = (i + 1) & (cap - 1);
        h[i] = r + 1;
    }
    free(p->hash);
    p->hash = h;
    p->hash_cap = cap;
    return 0;
}

/* A new rule (name NUL-terminated copy of s[0..n)). -1 on failure. */
static int64_t rule_add(parser *p, const char *s, size_t n) {
    if (p->n_rules >= GRAMMAR_MAX_RULES) { fail_at(p, p->pos, "too many rules (over %d)", GRAMMAR_MAX_RULES); return -1; }
    if ((p->n_rules + 1) * 2 > p->hash_cap && hash_grow(p)) { fail_at(p, p->pos, "out of memory"); return -1; }
    if (p->n_rules == p->cap_rules) {
        uint32_t c = p->cap_rules ? p->cap_rules * 2 : 32;
        prule *nr = realloc(p->rules, sizeof *nr * c);
        if (!nr) { fail_at(p, p->pos, "out of memory"); return -1; }
        p->rules = nr;
        p->cap_rules = c;
    }
    prule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(n + 1);
    if (!r->name) { fail_at(p, p->pos, "out of memory"); return -1; }
    memcpy(r->name, s, n);
    r->name[n] = 0;
    r->ref_pos = p->pos;
    uint32_t i = name_hash(s, n) & (p->hash_cap - 1);
    while (p->hash[i]) i = (i + 1) & (p->hash_cap - 1);
    p->hash[i] = p->n_rules + 1;
    return p->n_rules++;
}

static int64_t rule_id(parser *p, const char *s, size_t n) {
    if (p->hash_cap) {
        uint32_t i = name_hash(s, n) & (p->hash_cap - 1);
        for (; p->hash[i]; i = (i + 1) & (p->hash_cap - 1)) {
            const char *nm = p->rules[p->hash[i] - 1].name;
            if (strlen(nm) == n && !memcmp(nm, s, n)) return p->hash[i] - 1;
        }
    }
    return rule_add(p, s, n);
}

/* A rule made by the parser (a group or a repetition): named after its parent. */
static int64_t rule_synth(parser *p, uint32_t parent) {
    char nm[96];
    int k = snprintf(nm, sizeof nm, "%.60s-%u", p->rules[parent].name, p->n_rules);
    int64_t id = rule_add(p, nm, (size_t)k);
    if (id >= 0) p->rules[id].defined = 1;
    return id;
}

/* ---- lexing ------------------------------------------------------------------------ */
static int at(const parser *p, size_t i) { return i < p->n ? (uint8_t)p->s[i] : -1; }

static void skip_space(parser *p, int newline_ok) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t') p->pos++;
        else if (c == '#') { while (p->pos < p->n && p->s[p->pos] != '\n' && p->s[p->pos] != '\r') p->pos++; }
        else if (newline_ok && (c == '\n' || c == '\r')) p->pos++;
        else break;
    }
}

static int is_word(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class (escapes and UTF-8 decoded). */
static int64_t parse_char(parser *p) {
    size_t start = p->pos;
    int c = at(p, p->pos);
    if (c < 0) { fail_at(p, start, "unexpected end of input"); return -1; }
    if (c == '\\') {
        int e = at(p, p->pos + 1);
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++) {
                int h = hexval(at(p, p->pos + 2 + (size_t)i));
                if (h < 0) { fail_at(p, start, "bad \\%c escape: expected %d hex digits", e, digits); return -1; }
                v = v * 16 + (uint32_t)h;
            }
            if (v > 0x10FFFF) { fail_at(p, start, "escape beyond U+10FFFF"); return -1; }
            p->pos += 2 + (size_t)digits;
            return v;
        }
        p->pos += 2;
        switch (e) {
        case 't': return '\t';
        case 'n': return '\n';
        case 'r': return '\r';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return e;
        default: fail_at(p, start, "unknown escape '\\%c'", e > 32 && e < 127 ? e : '?'); return -1;
        }
    }
    int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || (len > 1 && c < 0xC2) || c > 0xF4) { fail_at(p, start, "invalid UTF-8"); return -1; }
    static const uint32_t lead_mask[5] = { 0, 0x7F, 0x1F, 0x0F, 0x07 };
    uint32_t v = (uint32_t)c & lead_mask[len];
    for (int i = 1; i < len; i++) {
        int b = at(p, p->pos + (size_t)i);
        if (b < 0 || (b & 0xC0) != 0x80) { fail_at(p, start, "invalid UTF-8"); return -1; }
        v = (v << 6) | ((uint32_t)b & 0x3F);
    }
    static const uint32_t minv[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (v < minv[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { fail_at(p, start, "invalid UTF-8"); return -1; }
    p->pos += (size_t)len;
    return v;
}

/* ---- syntax ------------------------------------------------------------------------ */
static void parse_alternates(parser *p, uint32_t rule, ebuf *out, int nested);

/* Replace out[start..) by the repetition {lo,hi} of it (hi < 0: no limit). */
static void repeat(parser *p, uint32_t rule, ebuf *out, uint32_t start, long lo, long hi) {
    uint32_t nx = out->n - start;
    gelem x[1];
    if (nx == 1 && out->el[start].type == GE_REF) {
        x[0] = out->el[start];
    } else {   /* the symbol becomes a rule, so it can be referenced */
        int64_t w = rule_synth(p, rule);
        if (w < 0) return;
        ebuf *wb = &p->rules[w].body;
        for (uint32_t i = 0; i < nx && !p->failed; i++) push(p, wb, out->el[start + i].type, out->el[start + i].value);
        push(p, wb, GE_END, 0);
        x[0] = (gelem){ GE_REF, (uint32_t)w };
    }
    out->n = start;
    for (long i = 0; i < lo && !p->failed; i++) push(p, out, x[0].type, x[0].value);
    if (hi == lo || p->failed) return;
    int64_t r = rule_synth(p, rule);
    if (r < 0) return;
    if (hi < 0) {   /* R ::= x R | */
        ebuf *rb = &p->rules[r].body;
        push(p, rb, x[0].type, x[0].value);
        push(p, rb, GE_REF, (uint32_t)r);
        push(p, rb, GE_ALT, 0);
        push(p, rb, GE_END, 0);
    } else {        /* R1 ::= x | ;  Rk ::= x R(k-1) | */
        int64_t prev = -1;
        for (long k = 0; k < hi - lo && !p->failed; k++) {
            int64_t rk = k == 0 ? r : rule_synth(p, rule);
            if (rk < 0) return;
            ebuf *rb = &p->rules[rk].body;
            push(p, rb, x[0].type, x[0].value);
            if (prev >= 0) push(p, rb, GE_REF, (uint32_t)prev);
            push(p, rb, GE_ALT, 0);
            push(p, rb, GE_END, 0);
            prev = rk;
        }
        r = prev;
    }
    push(p, out, GE_REF, (uint32_t)r);
}

static long parse_int(parser *p) {
    long v = 0;
    size_t start = p->pos;
    while (at(p, p->pos) >= '0' && at(p, p->pos) <= '9') {
        v = v * 10 + (at(p, p->pos) - '0');
        if (v > GRAMMAR_MAX_REPEAT) { fail_at(p, start, "repetition count above %d", GRAMMAR_MAX_REPEAT); return -1; }
        p->pos++;
    }
    return p->pos == start ? -2 : v;
}

static void parse_braces(parser *p, uint32_t rule, ebuf *out, uint32_t start) {
    size_t open = p->pos++;
    skip_space(p, 1);
    long lo = parse_int(p), hi;
    if (p->failed) return;
    skip_space(p, 1);
    if (at(p, p->pos) == ',') {
        p->pos++;
        skip_space(p, 1);
        hi = parse_int(p);
        if (p->failed) return;
        if (hi == -2) hi = -1;
        if (lo == -2) lo = 0;
        skip_space(p, 1);
    } else {
        if (lo == -2) { fail_at(p, open, "expected a count in {}"); return; }
        hi = lo;
    }
    if (at(p, p->pos) != '}') { fail_at(p, open, "expected '}'"); return; }
    p->pos++;
    if (hi >= 0 && hi < lo) { fail_at(p, open, "{%ld,%ld}: the upper bound is below the lower", lo, hi); return; }
    repeat(p, rule, out, start, lo, hi);
}

static void parse_class(parser *p, ebuf *out) {
    size_t open = p->pos++;
    int neg = at(p, p->pos) == '^';
    if (neg) p->pos++;
    uint32_t first = out->n;
    while (!p->failed && at(p, p->pos) != ']') {
        if (at(p, p->pos) < 0) { fail_at(p, open, "unterminated character class"); return; }
        int64_t c = parse_char(p);
        if (c < 0) return;
        push(p, out, out->n == first ? (neg ? GE_CHAR_NOT : GE_CHAR) : GE_CHAR_ALT, (uint32_t)c);
        if (at(p, p->pos) == '-' && at(p, p->pos + 1) != ']' && at(p, p->pos + 1) >= 0) {
            p->pos++;
            int64_t hi = parse_char(p);
            if (hi < 0) return;
            if (hi < c) { fail_at(p, open, "range end below its start"); return; }
            push(p, out, GE_RNG_UPPER, (uint32_t)hi);
        }
    }
    if (p->failed) return;
    p->pos++;
    if (out->n == first) {
        if (!neg) fail_at(p, open, "empty character class");
        else push(p, out, GE_ANY, 0);   /* [^] excludes nothing */
    }
}

static void parse_sequence(parser *p, uint32_t rule, ebuf *out, int nested) {
    uint32_t last = UINT32_MAX;   /* start of the last symbol, for a repetition */
    while (!p->failed) {
        int c = at(p, p->pos);
        size_t here = p->pos;
        if (c == '"') {
            p->pos++;
            last = out->n;
            while (!p->failed && at(p, p->pos) != '"') {
                if (at(p, p->pos) < 0) { fail_at(p, here, "unterminated literal"); return; }
                int64_t ch = parse_char(p);
                if (ch >= 0) push(p, out, GE_CHAR, (uint32_t)ch);
            }
            p->pos++;
            if (out->n == last) last = UINT32_MAX;   /* "" matches the empty string: nothing to repeat */
        } else if (c == '[') {
            last = out->n;
            parse_class(p, out);
        } else if (c == '.') {
            p->pos++;
            last = out->n;
            push(p, out, GE_ANY, 0);
        } else if (c >= 0 && is_word(c)) {
            size_t s = p->pos;
            while (is_word(at(p, p->pos))) p->pos++;
            uint32_t before = p->n_rules;
            int64_t id = rule_id(p, p->s + s, p->pos - s);
            if (id < 0) return;
            if (p->n_rules > before) p->rules[id].ref_pos = s;   /* for "undefined rule" */
            last = out->n;
            push(p, out, GE_REF, (uint32_t)id);
        } else if (c == '(') {
            if (++p->depth > GRAMMAR_MAX_NESTING) { fail_at(p, here, "parentheses nested deeper than %d", GRAMMAR_MAX_NESTING); return; }
            p->pos++;
            int64_t g = rule_synth(p, rule);
            if (g < 0) return;
            skip_space(p, 1);
            ebuf body = { 0 };
            parse_alternates(p, (uint32_t)g, &body, 1);
            push(p, &body, GE_END, 0);
            p->rules[g].body = body;
            if (p->failed) return;
            if (at(p, p->pos) != ')') { fail_at(p, here, "expected ')'"); return; }
            p->pos++;
            p->depth--;
            last = out->n;
            push(p, out, GE_REF, (uint32_t)g);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == UINT32_MAX) { fail_at(p, here, "'%c' without a symbol before it", c); return; }
            if (c == '{') parse_braces(p, rule, out, last);
            else {
                p->pos++;
                repeat(p, rule, out, last, c == '+', c == '?' ? 1 : -1);
            }
            last = UINT32_MAX;   /* x** is not meaningful; llama.cpp rejects it too */
        } else {
            return;
        }
        skip_space(p, nested);
    }
}

static void parse_alternates(parser *p, uint32_t rule, ebuf *out, int nested) {
    parse_sequence(p, rule, out, nested);
    while (!p->failed && at(p, p->pos) == '|') {
        p->pos++;
        push(p, out, GE_ALT, 0);
        skip_space(p, 1);
        parse_sequence(p, rule, out, nested);
    }
}

/* ---- checks ----------------------------------------------------------------------- */
/* A rule that can reach itself again before consuming a character. Edges
 * r -> s: s is referenced at the start of an alternative of r, after only
 * nullable references. */
static void check_left_recursion(parser *p, const grammar *g) {
    uint32_t R = g->n_rules;
    uint8_t *nullable = calloc(R, 1), *color = calloc(R, 1);
    uint32_t *edge_at = malloc(sizeof *edge_at * (R + 1)), *edges = malloc(sizeof *edges * (g->n_el + 1));
    uint32_t *stack = malloc(sizeof *stack * 2 * (R + 1));
    if (!nullable || !color || !edge_at || !edges || !stack) { fail_at(p, 0, "out of memory"); goto out; }
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t r = 0; r < R; r++) {
            if (nullable[r]) continue;
            int ok = 1;
            for (uint32_t i = g->rule_start[r];; i++) {
                uint32_t t = g->el[i].type;
                if (gelem_is_end(t)) {
                    if (ok) { nullable[r] = 1; changed = 1; break; }
                    if (t == GE_END) break;
                    ok = 1;
                } else if (t == GE_REF) { if (!nullable[g->el[i].value]) ok = 0; }
                else ok = 0;
            }
        }
    }
    uint32_t ne = 0;
    for (uint32_t r = 0; r < R; r++) {
        edge_at[r] = ne;
        int live = 1;
        for (uint32_t i = g->rule_start[r]; g->el[i].type != GE_END; i++) {
            uint32_t t = g->el[i].type;
            if (t == GE_ALT) live = 1;
            else if (!live) continue;
            else if (t == GE_REF) { edges[ne++] = g->el[i].value; live = nullable[g->el[i].value]; }
            else live = 0;
        }
    }
    edge_at[R] = ne;
    for (uint32_t r0 = 0; r0 < R && !p->failed; r0++) {
        if (color[r0]) continue;
        uint32_t sp = 0;
        stack[sp++] = r0; stack[sp++] = edge_at[r0];
        color[r0] = 1;
        while (sp) {
            uint32_t r = stack[sp - 2], k = stack[sp - 1];
            if (k == edge_at[r + 1]) { color[r] = 2; sp -= 2; continue; }
            stack[sp - 1] = k + 1;
            uint32_t s = edges[k];
            if (color[s] == 1) { fail_at(p, 0, "rule '%.60s' is left-recursive", p->rules[s].name); break; }
            if (color[s] == 0) { color[s] = 1; stack[sp++] = s; stack[sp++] = edge_at[s]; }
        }
    }
out:
    free(nullable); free(color); free(edge_at); free(edges); free(stack);
}

grammar *grammar_parse(const char *text, size_t len, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    parser p = { .s = text, .n = len, .err = err, .errlen = errlen };
    grammar *g = NULL;
    if (len > GRAMMAR_MAX_TEXT) { fail_at(&p, 0, "grammar text over %u bytes", GRAMMAR_MAX_TEXT); goto done; }
    skip_space(&p, 1);
    while (!p.failed && p.pos < p.n) {
        size_t s = p.pos;
        while (is_word(at(&p, p.pos))) p.pos++;
        if (p.pos == s) { fail_at(&p, s, "expected a rule name"); break; }
        int64_t id = rule_id(&p, text + s, p.pos - s);
        if (id < 0) break;
        if (p.rules[id].defined) { fail_at(&p, s, "rule '%.60s' is defined twice", p.rules[id].name); break; }
        p.rules[id].defined = 1;
        skip_space(&p, 0);
        if (p.pos + 3 > p.n || memcmp(text + p.pos, "::=", 3)) { fail_at(&p, p.pos, "expected '::='"); break; }
        p.pos += 3;
        skip_space(&p, 1);
        ebuf body = { 0 };
        parse_alternates(&p, (uint32_t)id, &body, 0);
        push(&p, &body, GE_END, 0);
        free(p.rules[id].body.el);
        p.rules[id].body = body;
        if (p.failed) break;
        if (at(&p, p.pos) == '\r' || at(&p, p.pos) == '\n') p.pos++;
        else if (p.pos < p.n) { fail_at(&p, p.pos, "expected the end of the line, found '%c'", at(&p, p.pos) > 32 && at(&p, p.pos) < 127 ? at(&p, p.pos) : '?'); break; }
        skip_space(&p, 1);
    }
    if (p.failed) goto done;
    for (uint32_t r = 0; r < p.n_rules; r++)
        if (!p.rules[r].defined) { fail_at(&p, p.rules[r].ref_pos, "undefined rule '%.60s'", p.rules[r].name); goto done; }
    int64_t root = -1;
    for (uint32_t r = 0; r < p.n_rules; r++) if (!strcmp(p.rules[r].name, "root")) root = r;
    if (root < 0) { fail_at(&p, p.n, "no 'root' rule"); goto done; }
    g = calloc(1, sizeof *g);
    if (g) {
        g->n_rules = p.n_rules;
        g->root = (uint32_t)root;
        g->n_el = (uint32_t)p.n_elems;
        g->el = malloc(sizeof *g->el * (g->n_el ? g->n_el : 1));
        g->rule_start = malloc(sizeof *g->rule_start * p.n_rules);
    }
    if (!g || !g->el || !g->rule_start) { fail_at(&p, 0, "out of memory"); grammar_free(g); g = NULL; goto done; }
    uint32_t k = 0;
    for (uint32_t r = 0; r < p.n_rules; r++) {
        g->rule_start[r] = k;
        memcpy(g->el + k, p.rules[r].body.el, sizeof *g->el * p.rules[r].body.n);
        k += p.rules[r].body.n;
    }
    g->n_el = k;
    check_left_recursion(&p, g);
    if (p.failed) { grammar_free(g); g = NULL; }
done:
    for (uint32_t r = 0; r < p.n_rules; r++) { free(p.rules[r].body.el); free(p.rules[r].name); }
    free(p.rules);
    free(p.hash);
    return g;
}

grammar *grammar_clone(const grammar *src) {
    grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    *g = *src;
    g->el = malloc(sizeof *g->el * (src->n_el ? src->n_el : 1));
    g->rule_start = malloc(sizeof *g->rule_start * (src->n_rules ? src->n_rules : 1));
    if (!g->el || !g->rule_start) { grammar_free(g); return NULL; }
    memcpy(g->el, src->el, sizeof *g->el * src->n_el);
    memcpy(g->rule_start, src->rule_start, sizeof *g->rule_start * src->n_rules);
    return g;
}

void grammar_free(grammar *g) {
    if (!g) return;
    free(g->el);
    free(g->rule_start);
    free(g);
}

int grammar_n_rules(const grammar *g) { return (int)g->n_rules; }
