/* The Jinja lexer: source text to tokens, with Jinja2's whitespace rules
 * applied here (so the parser sees final text): "-" on a tag strips the
 * whitespace on that side; trim_blocks drops the newline after a block or
 * comment tag; lstrip_blocks drops the spaces and tabs between a line's start
 * and a block or comment tag; a single trailing newline of the source goes
 * (keep_trailing_newline=False). "\r\n" and "\r" are read as "\n", as
 * Jinja2 normalises them. {% raw %} bodies come out as one text token. */
#include "engine/text/jinja_internal.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    const char *s;      /* normalised source */
    size_t n, p;
    int line;
    const jinja_options *o;
    jtoks *out;
    jarena *A;
    char *err;
    size_t errlen;
    bool failed;
    bool line_starting; /* the last tag ended at a line's start */
} lexer;

static void lfail(lexer *L, const char *fmt, const char *what) {
    if (!L->failed && L->err && L->errlen) snprintf(L->err, L->errlen, fmt, L->line, what);
    L->failed = true;
}

static jtok *emit(lexer *L, jtok_kind k) {
    if (L->failed) return NULL;
    if (L->out->n == L->out->cap) {
        size_t cap = L->out->cap ? L->out->cap * 2 : 256;
        jtok *v = jalloc(L->A, cap * sizeof *v);
        if (!v) { lfail(L, "line %d: %s", "template too large"); return NULL; }
        if (L->out->n) memcpy(v, L->out->v, L->out->n * sizeof *v);
        L->out->v = v;
        L->out->cap = cap;
    }
    jtok *t = &L->out->v[L->out->n++];
    memset(t, 0, sizeof *t);
    t->k = k;
    t->line = L->line;
    return t;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static void advance(lexer *L, size_t to) {
    for (size_t i = L->p; i < to; i++) if (L->s[i] == '\n') L->line++;
    L->p = to;
}

/* Text [a, b), trimmed on the right when rstrip, and lstrip_blocks applied
 * when lstrip (the tag after it is a block or comment without "+"). */
static void emit_text(lexer *L, size_t a, size_t b, bool rstrip, bool lstrip) {
    if (rstrip) while (b > a && is_ws(L->s[b - 1])) b--;
    else if (lstrip) {
        size_t l = b;   /* the start of the text's last line */
        while (l > a && L->s[l - 1] != '\n') l--;
        bool at_line_start = l > a || L->line_starting;
        size_t k = l;
        while (k < b && is_ws(L->s[k])) k++;
        if (at_line_start && k == b) b = l;
    }
    if (b > a) {
        jtok *t = emit(L, TK_TEXT);
        if (t) { t->s = L->s + a; t->n = b - a; }
    }
}

/* After a tag's end: "-" strips all whitespace; trim_blocks one newline. */
static void after_tag(lexer *L, bool strip, bool trim) {
    size_t p = L->p;
    if (strip) while (p < L->n && is_ws(L->s[p])) p++;
    else if (trim && p < L->n && L->s[p] == '\n') p++;
    L->line_starting = p > L->p && L->s[p - 1] == '\n';
    advance(L, p);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *w, uint32_t cp) {
    if (cp < 0x80) { w[0] = (char)cp; return 1; }
    if (cp < 0x800) { w[0] = (char)(0xC0 | (cp >> 6)); w[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        w[0] = (char)(0xE0 | (cp >> 12)); w[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); w[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) cp = 0xFFFD;
    w[0] = (char)(0xF0 | (cp >> 18)); w[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    w[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); w[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static void lex_string(lexer *L) {
    char q = L->s[L->p];
    size_t i = L->p + 1;
    char *w = jalloc(L->A, L->n - L->p + 4), *w0 = w;
    if (!w) { lfail(L, "line %d: %s", "template too large"); return; }
    while (i < L->n && L->s[i] != q) {
        char ch = L->s[i++];
        if (ch != '\\' || i >= L->n) { *w++ = ch; continue; }
        char e = L->s[i++];
        int digits = 0;
        switch (e) {
        case 'n': *w++ = '\n'; break;
        case 't': *w++ = '\t'; break;
        case 'r': *w++ = '\r'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'v': *w++ = '\v'; break;
        case 'a': *w++ = '\a'; break;
        case '0': *w++ = '\0'; break;
        case '\\': case '\'': case '"': *w++ = e; break;
        case '\n': break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default: *w++ = '\\'; *w++ = e; break;
        }
        if (digits) {
            uint32_t cp = 0;
            int k = 0;
            while (k < digits && i < L->n && hexval(L->s[i]) >= 0) { cp = cp * 16 + (uint32_t)hexval(L->s[i++]); k++; }
            if (k < digits) { *w++ = '\\'; *w++ = e; i -= (size_t)k; }
            else w += put_utf8(w, cp);
        }
    }
    if (i >= L->n) { lfail(L, "line %d: %s", "unterminated string literal"); return; }
    jtok *t = emit(L, TK_STRING);
    if (t) { t->s = w0; t->n = (size_t)(w - w0); }
    advance(L, i + 1);
}

static void lex_number(lexer *L) {
    size_t i = L->p;
    char buf[64];
    size_t k = 0, int_digits = 0;
    bool flt = false;
    while (i < L->n && (isdigit((unsigned char)L->s[i]) || L->s[i] == '_')) {
        if (L->s[i] != '_') { int_digits++; if (k < 60) buf[k++] = L->s[i]; }
        i++;
    }
    if (i + 1 < L->n && L->s[i] == '.' && isdigit((unsigned char)L->s[i + 1])) {
        flt = true;
        if (k < 60) buf[k++] = L->s[i];
        i++;
        while (i < L->n && (isdigit((unsigned char)L->s[i]) || L->s[i] == '_')) { if (L->s[i] != '_' && k < 60) buf[k++] = L->s[i]; i++; }
    }
    if (i < L->n && (L->s[i] == 'e' || L->s[i] == 'E')) {
        size_t j = i + 1;
        if (j < L->n && (L->s[j] == '+' || L->s[j] == '-')) j++;
        if (j < L->n && isdigit((unsigned char)L->s[j])) {
            flt = true;
            while (i < j && k < 60) buf[k++] = L->s[i++];
            while (i < L->n && isdigit((unsigned char)L->s[i])) { if (k < 60) buf[k++] = L->s[i]; i++; }
        }
    }
    buf[k] = 0;
    /* an integer past int64 is a float, as the JavaScript reference reads it;
     * digits past the buffer still scale it */
    unsigned long long v = 0;
    bool too_big = false;
    if (!flt) {
        errno = 0;
        v = strtoull(buf, NULL, 10);
        too_big = errno == ERANGE || v > INT64_MAX || int_digits > k;
    }
    jtok *t = emit(L, flt || too_big ? TK_FLOAT : TK_INT);
    if (t) {
        if (flt) t->f = strtod(buf, NULL);
        else if (too_big) t->f = strtod(buf, NULL) * pow(10.0, (double)(int_digits - k));
        else t->i = (int64_t)v;
    }
    advance(L, i);
}

static const char *const ops[] = { "**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                   "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "=", "!" };

/* Tokens inside a tag up to its end ("}}" or "%}" with "-"/"+"); returns
 * whether the end had "-". */
static bool lex_tag(lexer *L, bool var, bool *plus) {
    int depth = 0, start = L->line;
    *plus = false;
    char close = var ? '}' : '%';
    while (!L->failed) {
        size_t p = L->p;
        while (p < L->n && is_ws(L->s[p])) p++;
        advance(L, p);
        if (p >= L->n) {   /* name the line the tag opened on */
            L->line = start;
            lfail(L, "line %d: %s", var ? "unclosed '{{' (missing '}}')" : "unclosed '{%' (missing '%}')");
            return false;
        }
        const char *c = L->s + p;
        size_t left = L->n - p;
        if (depth == 0) {
            if (left >= 3 && (c[0] == '-' || c[0] == '+') && c[1] == close && c[2] == '}') {
                *plus = c[0] == '+';
                emit(L, var ? TK_VAR_END : TK_BLOCK_END);
                advance(L, p + 3);
                return c[0] == '-';
            }
            if (left >= 2 && c[0] == close && c[1] == '}') {
                emit(L, var ? TK_VAR_END : TK_BLOCK_END);
                advance(L, p + 2);
                return false;
            }
        }
        if (isalpha((unsigned char)*c) || *c == '_') {
            size_t e = p;
            while (e < L->n && (isalnum((unsigned char)L->s[e]) || L->s[e] == '_')) e++;
            jtok *t = emit(L, TK_NAME);
            if (t) { t->s = c; t->n = e - p; }
            advance(L, e);
        } else if (isdigit((unsigned char)*c)) {
            lex_number(L);
        } else if (*c == '\'' || *c == '"') {
            lex_string(L);
        } else {
            size_t k = 0;
            for (; k < sizeof ops / sizeof *ops; k++) {
                size_t on = strlen(ops[k]);
                if (on <= left && !memcmp(c, ops[k], on)) break;
            }
            if (k == sizeof ops / sizeof *ops) {
                char what[48];
                snprintf(what, sizeof what, "unexpected character '%c'", isprint((unsigned char)*c) ? *c : '?');
                lfail(L, "line %d: %s", what);
                return false;
            }
            if (ops[k][0] == '(' || ops[k][0] == '[' || ops[k][0] == '{') depth++;
            if ((ops[k][0] == ')' || ops[k][0] == ']' || ops[k][0] == '}') && depth > 0) depth--;
            jtok *t = emit(L, TK_OP);
            if (t) { t->s = ops[k]; t->n = strlen(ops[k]); }
            advance(L, p + strlen(ops[k]));
        }
    }
    return false;
}

/* "{% raw %}" at p (after lstrip handling)? Sets *body_at past its "%}". */
static bool match_word_tag(const lexer *L, size_t p, const char *word, bool *lminus, bool *rminus, size_t *end) {
    const char *s = L->s;
    size_t n = L->n;
    if (p + 2 > n || s[p] != '{' || s[p + 1] != '%') return false;
    p += 2;
    *lminus = p < n && s[p] == '-';
    if (p < n && (s[p] == '-' || s[p] == '+')) p++;
    while (p < n && is_ws(s[p])) p++;
    size_t wl = strlen(word);
    if (p + wl > n || memcmp(s + p, word, wl) || (p + wl < n && (isalnum((unsigned char)s[p + wl]) || s[p + wl] == '_')))
        return false;
    p += wl;
    while (p < n && is_ws(s[p])) p++;
    *rminus = p < n && (s[p] == '-' || s[p] == '+');
    bool plus = p < n && s[p] == '+';
    if (*rminus) p++;
    if (p + 2 > n || s[p] != '%' || s[p + 1] != '}') return false;
    if (plus) *rminus = false;
    *end = p + 2;
    return true;
}

bool jinja_lex(const char *src, size_t len, const jinja_options *o, jtoks *out, jarena *A, char *err, size_t errlen) {
    /* normalise newlines and drop one trailing newline */
    char *s = jalloc(A, len + 1);
    if (!s) { if (err && errlen) snprintf(err, errlen, "template too large"); return false; }
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') { s[n++] = '\n'; if (i + 1 < len && src[i + 1] == '\n') i++; }
        else s[n++] = src[i];
    }
    if (n > 0 && s[n - 1] == '\n') n--;
    lexer L = { .s = s, .n = n, .line = 1, .o = o, .out = out, .A = A, .err = err, .errlen = errlen,
                .line_starting = true };
    while (!L.failed && L.p < L.n) {
        size_t q = L.p;
        const char *t = NULL;
        while (q + 1 < L.n) {
            if (s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#')) { t = s + q; break; }
            q++;
        }
        if (!t) { emit_text(&L, L.p, L.n, false, false); advance(&L, L.n); break; }
        char kind = t[1];
        char sign = q + 2 < L.n ? s[q + 2] : 0;
        bool minus = sign == '-', plus = sign == '+';
        emit_text(&L, L.p, q, minus, kind != '{' && !plus && o->lstrip_blocks);
        advance(&L, q);
        bool lm, rm;
        size_t end;
        if (kind == '#') {
            const char *e = NULL;
            for (size_t k = q + 2; k + 1 < L.n; k++) if (s[k] == '#' && s[k + 1] == '}') { e = s + k; break; }
            if (!e) { lfail(&L, "line %d: %s", "unclosed comment '{#'"); break; }
            size_t ep = (size_t)(e - s);
            bool rminus = ep > q + 2 && s[ep - 1] == '-', rplus = ep > q + 2 && s[ep - 1] == '+';
            advance(&L, ep + 2);
            after_tag(&L, rminus, o->trim_blocks && !rplus);
        } else if (kind == '%' && match_word_tag(&L, q, "raw", &lm, &rm, &end)) {
            advance(&L, end);
            size_t b = L.p;
            if (rm) while (b < L.n && is_ws(s[b])) b++;
            size_t k = b;
            bool found = false;
            for (; k + 1 < L.n; k++)
                if (s[k] == '{' && s[k + 1] == '%' && match_word_tag(&L, k, "endraw", &lm, &rm, &end)) { found = true; break; }
            if (!found) { lfail(&L, "line %d: %s", "'raw' block without 'endraw'"); break; }
            size_t te = k;
            if (lm) while (te > b && is_ws(s[te - 1])) te--;
            if (te > b) { jtok *tk = emit(&L, TK_TEXT); if (tk) { tk->s = s + b; tk->n = te - b; } }
            advance(&L, end);
            bool rplus = end >= 3 && s[end - 3] == '+';
            after_tag(&L, rm, o->trim_blocks && !rplus);
        } else {
            emit(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN);
            advance(&L, q + 2 + (minus || plus ? 1 : 0));
            bool eplus;
            bool strip = lex_tag(&L, kind == '{', &eplus);
            after_tag(&L, strip, kind == '%' && o->trim_blocks && !eplus);
        }
    }
    if (!L.failed) emit(&L, TK_EOF);
    return !L.failed;
}
