/* JSON Schema `pattern` -> GBNF (see json_regex.h): a recursive-descent
 * parser of the ECMAScript subset that writes the expression as it goes;
 * character classes are kept as sorted code point ranges until written. */
#include "engine/sample/json_regex.h"
#include "engine/sample/grammar.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CP 0x10FFFFu

typedef struct { char *s; size_t n, cap; bool oom; } obuf;

static void ob_add(obuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap * 2 : 256;
        while (c < b->n + n + 1) c *= 2;
        char *ns = realloc(b->s, c);
        if (!ns) { b->oom = true; return; }
        b->s = ns;
        b->cap = c;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void ob_puts(obuf *b, const char *s) { ob_add(b, s, strlen(s)); }
static void ob_printf(obuf *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof tmp) ob_add(b, tmp, (size_t)n);
}

/* ---- code point sets ------------------------------------------------------------ */
typedef struct { uint32_t lo, hi; } crange;
typedef struct { crange *r; int n, cap; bool oom; } cset;

static void cs_add(cset *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        int c = s->cap ? s->cap * 2 : 16;
        crange *r = realloc(s->r, sizeof *r * (size_t)c);
        if (!r) { s->oom = true; return; }
        s->r = r;
        s->cap = c;
    }
    s->r[s->n++] = (crange){ lo, hi };
}

static int cr_cmp(const void *a, const void *b) {
    const crange *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sorted, with overlapping and adjacent ranges joined. */
static void cs_norm(cset *s) {
    if (s->n < 2) return;
    qsort(s->r, (size_t)s->n, sizeof *s->r, cr_cmp);
    int k = 0;
    for (int i = 1; i < s->n; i++) {
        if (s->r[i].lo <= s->r[k].hi + 1) { if (s->r[i].hi > s->r[k].hi) s->r[k].hi = s->r[i].hi; }
        else s->r[++k] = s->r[i];
    }
    s->n = k + 1;
}

static void cs_negate(cset *s) {
    cs_norm(s);
    cset o = { 0 };
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->r[i].lo > next) cs_add(&o, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= MAX_CP) cs_add(&o, next, MAX_CP);
    o.oom |= s->oom;
    free(s->r);
    *s = o;
}

static bool cs_has(const cset *s, uint32_t cp) {
    for (int i = 0; i < s->n; i++) if (cp >= s->r[i].lo && cp <= s->r[i].hi) return true;
    return false;
}

static void cs_union(cset *s, const cset *x) { for (int i = 0; i < x->n; i++) cs_add(s, x->r[i].lo, x->r[i].hi); }

/* ---- writing JSON text ------------------------------------------------------------ */
static bool json_special(uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\' || cp == 0x7F; }

/* The GBNF literal of code point cp as JSON string text spells it. */
static void emit_cp(obuf *b, uint32_t cp) {
    if (json_special(cp)) {
        static const char short_esc[][2] = { { 8, 'b' }, { 9, 't' }, { 10, 'n' }, { 12, 'f' }, { 13, 'r' }, { '"', '"' }, { '\\', '\\' } };
        for (size_t i = 0; i < sizeof short_esc / sizeof *short_esc; i++)
            if ((uint32_t)short_esc[i][0] == cp) {
                /* GBNF "\\x": a backslash and x (x itself escaped when it is " or \) */
                ob_puts(b, "\"\\\\");
                if (cp == '"' || cp == '\\') ob_add(b, "\\", 1);
                ob_add(b, &short_esc[i][1], 1);
                ob_puts(b, "\"");
                return;
            }
        ob_printf(b, "\"\\\\u%04x\"", cp);
        return;
    }
    if (cp >= 0x20 && cp < 0x7F) {
        char c = (char)cp;
        ob_puts(b, "\"");
        ob_add(b, &c, 1);
        ob_puts(b, "\"");
    } else if (cp <= 0xFFFF) ob_printf(b, "\"\\u%04X\"", cp);
    else ob_printf(b, "\"\\U%08X\"", cp);
}

static void emit_class_cp(obuf *b, uint32_t cp) {
    if (cp <= 0xFFFF) ob_printf(b, "\\u%04X", cp);
    else ob_printf(b, "\\U%08X", cp);
}

/* A set as GBNF: the characters written as themselves in one class, each
 * one JSON escapes as its own alternative. */
static void emit_set(obuf *b, cset *s) {
    cs_norm(s);
    obuf raw = { 0 };
    int parts = 0;
    for (int i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        /* cut out the controls, " \ DEL and the surrogates */
        static const crange holes[] = { { 0, 0x1F }, { '"', '"' }, { '\\', '\\' }, { 0x7F, 0x7F }, { 0xD800, 0xDFFF } };
        uint32_t x = lo;
        for (size_t h = 0; h <= sizeof holes / sizeof *holes && x <= hi; h++) {
            uint32_t end = h < sizeof holes / sizeof *holes ? holes[h].lo : MAX_CP + 1;
            if (end > x) {
                uint32_t top = end - 1 < hi ? end - 1 : hi;
                emit_class_cp(&raw, x);
                if (top > x) { ob_puts(&raw, "-"); emit_class_cp(&raw, top); }
                x = top + 1;
            }
            if (h < sizeof holes / sizeof *holes && x <= holes[h].hi) x = holes[h].hi + 1;
        }
    }
    obuf alts = { 0 };
    if (raw.n) { ob_puts(&alts, "["); ob_add(&alts, raw.s, raw.n); ob_puts(&alts, "]"); parts++; }
    for (uint32_t cp = 0; cp < 0x80; cp++)
        if (json_special(cp) && cs_has(s, cp)) {
            if (parts++) ob_puts(&alts, " | ");
            emit_cp(&alts, cp);
        }
    if (!parts) ob_puts(b, "[^\\x00-\\U0010FFFF]");   /* the empty set: nothing matches */
    else if (parts == 1) ob_add(b, alts.s, alts.n);
    else { ob_puts(b, "("); ob_add(b, alts.s, alts.n); ob_puts(b, ")"); }
    b->oom |= raw.oom || alts.oom || s->oom;
    free(raw.s);
    free(alts.s);
}

/* ---- the parser -------------------------------------------------------------------- */
typedef struct {
    const char *p, *end;
    const char *any;
    int depth;
    bool failed;
    char *err;
    size_t errlen;
} rx;

static void rx_fail(rx *r, const char *fmt, ...) {
    if (r->failed) return;
    r->failed = true;
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->err && r->errlen) snprintf(r->err, r->errlen, "pattern: %s", msg);
}

static uint32_t utf8_next(rx *r) {
    const unsigned char *s = (const unsigned char *)r->p;
    size_t left = (size_t)(r->end - r->p);
    uint32_t c = s[0];
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!n || (size_t)n > left) { rx_fail(r, "not UTF-8"); r->p = r->end; return 0; }
    if (n > 1) c &= 0x3Fu >> (n - 1);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) { rx_fail(r, "not UTF-8"); r->p = r->end; return 0; }
        c = c << 6 | (s[i] & 0x3Fu);
    }
    r->p += n;
    return c;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static uint32_t hex_digits(rx *r, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        int h = r->p < r->end ? hexval(*r->p) : -1;
        if (h < 0) { rx_fail(r, "bad hex escape"); return 0; }
        v = v * 16 + (uint32_t)h;
        r->p++;
    }
    return v;
}

static void class_escape(cset *s, char e) {
    switch (e) {
    case 'd': case 'D': cs_add(s, '0', '9'); break;
    case 'w': case 'W': cs_add(s, '0', '9'); cs_add(s, 'A', 'Z'); cs_add(s, '_', '_'); cs_add(s, 'a', 'z'); break;
    default:   /* s, S: ECMAScript's WhiteSpace and LineTerminator */
        cs_add(s, 9, 13); cs_add(s, ' ', ' '); cs_add(s, 0xA0, 0xA0); cs_add(s, 0x1680, 0x1680); cs_add(s, 0x2000, 0x200A);
        cs_add(s, 0x2028, 0x2029); cs_add(s, 0x202F, 0x202F); cs_add(s, 0x205F, 0x205F); cs_add(s, 0x3000, 0x3000);
        cs_add(s, 0xFEFF, 0xFEFF);
    }
}

/* After a backslash: one code point (returns true), or a class escape put in
 * *cls (returns false). in_class: \b is a backspace there. */
static bool parse_escape(rx *r, bool in_class, uint32_t *cp, cset *cls) {
    if (r->p >= r->end) { rx_fail(r, "a pattern cannot end with a backslash"); return true; }
    char e = *r->p++;
    switch (e) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': {
        cset t = { 0 };
        class_escape(&t, (char)(e | 0x20));
        if (e == 'D' || e == 'W' || e == 'S') cs_negate(&t);
        cs_union(cls, &t);
        cls->oom |= t.oom;
        free(t.r);
        return false;
    }
    case 't': *cp = 9; return true;
    case 'n': *cp = 10; return true;
    case 'v': *cp = 11; return true;
    case 'f': *cp = 12; return true;
    case 'r': *cp = 13; return true;
    case 'x': *cp = hex_digits(r, 2); return true;
    case 'u':
        if (r->p < r->end && *r->p == '{') {
            r->p++;
            uint32_t v = 0;
            int n = 0;
            while (r->p < r->end && hexval(*r->p) >= 0 && n < 7) { v = v * 16 + (uint32_t)hexval(*r->p++); n++; }
            if (!n || r->p >= r->end || *r->p != '}' || v > MAX_CP) { rx_fail(r, "bad \\u{...} escape"); return true; }
            r->p++;
            *cp = v;
        } else *cp = hex_digits(r, 4);
        return true;
    case 'c':
        if (r->p < r->end && ((*r->p >= 'a' && *r->p <= 'z') || (*r->p >= 'A' && *r->p <= 'Z'))) { *cp = (uint32_t)(*r->p++ & 31); return true; }
        rx_fail(r, "bad \\c escape");
        return true;
    case '0':
        if (r->p < r->end && *r->p >= '0' && *r->p <= '9') { rx_fail(r, "octal escapes are not supported"); return true; }
        *cp = 0;
        return true;
    case 'b':
        if (in_class) { *cp = 8; return true; }
        rx_fail(r, "word boundaries (\\b) cannot be matched by a grammar");
        return true;
    case 'B': rx_fail(r, "word boundaries (\\B) cannot be matched by a grammar"); return true;
    case 'k': rx_fail(r, "backreferences (\\k) cannot be matched by a grammar"); return true;
    case 'p': case 'P': rx_fail(r, "Unicode property escapes (\\%c) are not supported", e); return true;
    default:
        if (e >= '1' && e <= '9') { rx_fail(r, "backreferences (\\%c) cannot be matched by a grammar", e); return true; }
        r->p--;
        *cp = utf8_next(r);   /* an escaped character stands for itself */
        return true;
    }
}

/* [...] after its '['. */
static void parse_class(rx *r, obuf *out) {
    cset s = { 0 };
    bool neg = r->p < r->end && *r->p == '^';
    if (neg) r->p++;
    for (;;) {
        if (r->p >= r->end) { rx_fail(r, "unterminated character class"); break; }
        if (*r->p == ']') { r->p++; break; }
        uint32_t lo = 0, hi;
        bool single = true;
        if (*r->p == '\\') { r->p++; single = parse_escape(r, true, &lo, &s); }
        else lo = utf8_next(r);
        if (r->failed) break;
        if (!single) {
            if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') { rx_fail(r, "a range cannot start at a class escape"); break; }
            continue;
        }
        hi = lo;
        if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
            r->p++;
            cset dummy = { 0 };
            if (*r->p == '\\') {
                r->p++;
                if (!parse_escape(r, true, &hi, &dummy)) rx_fail(r, "a range cannot end at a class escape");
            } else hi = utf8_next(r);
            free(dummy.r);
            if (r->failed) break;
            if (hi < lo) { rx_fail(r, "range out of order in a character class"); break; }
        }
        cs_add(&s, lo, hi);
    }
    if (neg) cs_negate(&s);
    if (!r->failed) emit_set(out, &s);
    free(s.r);
}

static void parse_alt(rx *r, obuf *out, bool top);

/* {n}, {n,}, {n,m} after '{'; false (nothing consumed) when it is not one:
 * then the brace is a literal, as ECMAScript reads it. */
static bool parse_braces(rx *r, long *lo, long *hi) {
    const char *q = r->p + 1;
    long a = 0, b;
    int nd = 0;
    while (q < r->end && *q >= '0' && *q <= '9' && nd < 9) { a = a * 10 + (*q++ - '0'); nd++; }
    if (!nd) return false;
    b = a;
    if (q < r->end && *q == ',') {
        q++;
        nd = 0;
        b = 0;
        while (q < r->end && *q >= '0' && *q <= '9' && nd < 9) { b = b * 10 + (*q++ - '0'); nd++; }
        if (!nd) b = -1;
    }
    if (q >= r->end || *q != '}') return false;
    r->p = q + 1;
    *lo = a;
    *hi = b;
    return true;
}

/* One atom and its quantifier. */
static void parse_piece(rx *r, obuf *out) {
    obuf a = { 0 };
    char c = *r->p;
    if (c == '(') {
        r->p++;
        if (r->p < r->end && *r->p == '?') {
            const char *q = r->p + 1;
            if (q < r->end && *q == ':') r->p = q + 1;
            else if (q + 1 < r->end && *q == '<' && q[1] != '=' && q[1] != '!') {   /* (?<name>...) */
                const char *g = memchr(q, '>', (size_t)(r->end - q));
                if (!g) { rx_fail(r, "unterminated group name"); free(a.s); return; }
                r->p = g + 1;
            } else { rx_fail(r, "lookaround and (?...) groups cannot be matched by a grammar"); free(a.s); return; }
        }
        if (++r->depth > GRAMMAR_MAX_NESTING) { rx_fail(r, "groups nested too deeply"); free(a.s); return; }
        ob_puts(&a, "(");
        parse_alt(r, &a, false);
        ob_puts(&a, ")");
        r->depth--;
        if (r->failed) { free(a.s); return; }
        if (r->p >= r->end || *r->p != ')') { rx_fail(r, "unbalanced parenthesis"); free(a.s); return; }
        r->p++;
    } else if (c == '[') {
        r->p++;
        parse_class(r, &a);
    } else if (c == '.') {   /* any character but a line terminator */
        r->p++;
        cset s = { 0 };
        cs_add(&s, 10, 10); cs_add(&s, 13, 13); cs_add(&s, 0x2028, 0x2029);
        cs_negate(&s);
        emit_set(&a, &s);
        free(s.r);
    } else if (c == '\\') {
        r->p++;
        uint32_t cp = 0;
        cset s = { 0 };
        if (parse_escape(r, false, &cp, &s)) emit_cp(&a, cp);
        else emit_set(&a, &s);
        free(s.r);
    } else if (c == '*' || c == '+' || c == '?') {
        rx_fail(r, "nothing to repeat before '%c'", c);
    } else if (c == ')') {
        rx_fail(r, "unbalanced parenthesis");
    } else if (c == '^' || c == '$') {
        rx_fail(r, "'%c' is supported only at the start or end of the pattern or of a top-level alternative", c);
    } else {
        long lo, hi;
        if (c == '{' && parse_braces(r, &lo, &hi)) rx_fail(r, "nothing to repeat before '{'");
        else emit_cp(&a, utf8_next(r));
    }
    if (r->failed) { free(a.s); return; }
    /* the quantifier */
    long lo = -2, hi = -2;
    if (r->p < r->end) {
        if (*r->p == '*') { lo = 0; hi = -1; r->p++; }
        else if (*r->p == '+') { lo = 1; hi = -1; r->p++; }
        else if (*r->p == '?') { lo = 0; hi = 1; r->p++; }
        else if (*r->p == '{' && !parse_braces(r, &lo, &hi)) lo = -2;
    }
    if (lo == -2) { ob_add(out, a.s, a.n); free(a.s); return; }
    if (r->p < r->end && *r->p == '?') r->p++;   /* lazy: the same strings */
    if (lo > GRAMMAR_MAX_REPEAT || hi > GRAMMAR_MAX_REPEAT) rx_fail(r, "repetition counts above %d are not supported", GRAMMAR_MAX_REPEAT);
    else if (hi >= 0 && hi < lo) rx_fail(r, "numbers out of order in a {m,n} quantifier");
    else if (r->p < r->end && (*r->p == '*' || *r->p == '+' || (*r->p == '{' && parse_braces(&(rx){ .p = r->p, .end = r->end }, &(long){ 0 }, &(long){ 0 }))))
        rx_fail(r, "nothing to repeat before '%c'", *r->p);
    if (!r->failed) {
        ob_puts(out, "(");
        ob_add(out, a.s, a.n);
        ob_puts(out, ")");
        if (lo == 0 && hi == -1) ob_puts(out, "*");
        else if (lo == 1 && hi == -1) ob_puts(out, "+");
        else if (lo == 0 && hi == 1) ob_puts(out, "?");
        else if (hi < 0) ob_printf(out, "{%ld,}", lo);
        else ob_printf(out, "{%ld,%ld}", lo, hi);
    }
    out->oom |= a.oom;
    free(a.s);
}

/* Alternatives up to ')' or the end. top: ^ and $ may open and close each. */
static void parse_alt(rx *r, obuf *out, bool top) {
    bool first = true;
    for (;;) {
        bool start = false, end = false;
        obuf seq = { 0 };
        if (top && r->p < r->end && *r->p == '^') { start = true; r->p++; }
        int n = 0;
        while (!r->failed && r->p < r->end && *r->p != '|' && *r->p != ')') {
            if (top && *r->p == '$' && (r->p + 1 == r->end || r->p[1] == '|')) { end = true; r->p++; break; }
            if (n++) ob_puts(&seq, " ");
            parse_piece(r, &seq);
        }
        if (!first) ob_puts(out, " | ");
        first = false;
        if (top) {   /* a search: what the anchors leave open takes any text */
            bool any = false;
            if (!start) { ob_printf(out, "%s*", r->any); any = true; }
            if (seq.n) { if (any) ob_puts(out, " "); ob_add(out, seq.s, seq.n); any = true; }
            if (!end && (start || seq.n)) { if (any) ob_puts(out, " "); ob_printf(out, "%s*", r->any); any = true; }
            if (!any) ob_puts(out, "\"\"");
        } else if (seq.n) ob_add(out, seq.s, seq.n);
        else ob_puts(out, "\"\"");
        out->oom |= seq.oom;
        free(seq.s);
        if (r->failed || r->p >= r->end || *r->p != '|') return;
        r->p++;
    }
}

char *json_regex_to_gbnf(const char *pattern, const char *any_char, char *err, size_t errlen) {
    size_t n = strlen(pattern);
    rx r = { .p = pattern, .end = pattern + n, .any = any_char, .err = err, .errlen = errlen };
    if (n > JSON_REGEX_MAX_LEN) { rx_fail(&r, "longer than %d bytes", JSON_REGEX_MAX_LEN); return NULL; }
    obuf out = { 0 };
    ob_puts(&out, "(");
    parse_alt(&r, &out, true);
    ob_puts(&out, ")");
    if (!r.failed && r.p < r.end) rx_fail(&r, "unbalanced parenthesis");
    if (!r.failed && out.oom) rx_fail(&r, "out of memory");
    if (r.failed) { free(out.s); return NULL; }
    return out.s;
}
