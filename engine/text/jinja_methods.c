/* Python methods that templates call on values (str.strip, str.split,
 * dict.get, dict.items...), and the global functions: range, namespace,
 * dict, raise_exception, strftime_now. */
#include "engine/text/jinja_internal.h"
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

jv jstrip(jctx *c, const jv *s, const jv *chars, bool left, bool right, int line);
jv jreplace(jctx *c, const jv *s, const jv *old, const jv *new_, const jv *count, int line);

static jv bound(jctx *c, jfunc f, const jv *self, const char *name) {
    struct jbound *b = jctx_alloc(c, sizeof *b);
    b->f = f;
    b->self = self ? *self : jv_undef();
    b->name = name;
    jv v = { .t = JV_FUNC, .u.fn = b };
    return v;
}

static jv str_arg(jctx *c, jargs *a, int pos, const char *kw, const char *what, int line) {
    const jv *v = jarg(a, pos, kw);
    if (!v || v->t != JV_STR) jfail(c, line, "%s wants a string argument", what);
    return *v;
}

static bool has_at(const jv *s, size_t at, const jv *sub) {
    return at + sub->n <= s->n && !memcmp(s->u.s + at, sub->u.s, sub->n);
}

/* ---- str ------------------------------------------------------------------------- */
static jv m_strip(jctx *c, const jv *s, jargs *a, int line) { return jstrip(c, s, jarg(a, 0, "chars"), true, true, line); }
static jv m_lstrip(jctx *c, const jv *s, jargs *a, int line) { return jstrip(c, s, jarg(a, 0, "chars"), true, false, line); }
static jv m_rstrip(jctx *c, const jv *s, jargs *a, int line) { return jstrip(c, s, jarg(a, 0, "chars"), false, true, line); }

/* One code point's case, for the scripts chat text meets most: ASCII,
 * Latin-1, Latin Extended-A, Greek and Cyrillic (what toUpperCase and
 * str.upper agree on; a letter outside these keeps its case). */
static uint32_t cp_case(uint32_t c, bool up) {
    if (up) {
        if (c >= 'a' && c <= 'z') return c - 32;
        if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
        if (c == 0xFF) return 0x178;
        if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c & ~1u;
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c : c - 1;
        if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
        if (c >= 0x430 && c <= 0x44F) return c - 32;
        if (c >= 0x450 && c <= 0x45F) return c - 80;
    } else {
        if (c >= 'A' && c <= 'Z') return c + 32;
        if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
        if (c == 0x178) return 0xFF;
        if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return c | 1u;
        if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c + 1 : c;
        if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
        if (c >= 0x410 && c <= 0x42F) return c + 32;
        if (c >= 0x400 && c <= 0x40F) return c + 80;
    }
    return c;
}

/* Decodes the code point at s[*i] (2-byte sequences only; others pass as bytes). */
static bool two_byte(const jv *s, size_t i, uint32_t *cp) {
    unsigned char a = (unsigned char)s->u.s[i];
    if ((a & 0xE0) != 0xC0 || i + 1 >= s->n || ((unsigned char)s->u.s[i + 1] & 0xC0) != 0x80) return false;
    *cp = ((uint32_t)(a & 0x1F) << 6) | ((unsigned char)s->u.s[i + 1] & 0x3F);
    return *cp >= 0x80;
}

static bool ascii_word(unsigned char ch) { return isalnum(ch) || ch == '_'; }

/* 0 upper, 1 lower, 2 capitalize, 3 title, 4 swapcase. capitalize and title
 * are the reference renderer's: the first letter (of the text, or of each
 * ASCII word) raised, the rest left as they are. */
jv jstr_case(jctx *c, const jv *sv, int how) {
    jv s = jv_to_str(c, sv);
    char *p = jctx_alloc(c, s.n + 1);
    size_t w = 0;
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.u.s[i];
        uint32_t cp;
        bool up = how == 0 || (how == 2 && i == 0), down = how == 1;
        if ((up || down) && two_byte(&s, i, &cp)) {
            uint32_t m = cp_case(cp, up);
            if (m < 0x800) {   /* same 2-byte length: the text never grows */
                p[w++] = (char)(0xC0 | (m >> 6));
                p[w++] = (char)(0x80 | (m & 0x3F));
                i++;
                continue;
            }
        }
        int r = ch;
        switch (how) {
        case 0: r = toupper(ch); break;
        case 1: r = tolower(ch); break;
        case 2: r = i == 0 ? toupper(ch) : ch; break;
        case 3: r = ascii_word(ch) && (i == 0 || !ascii_word((unsigned char)s.u.s[i - 1])) ? toupper(ch) : ch; break;
        default: r = isupper(ch) ? tolower(ch) : toupper(ch); break;
        }
        p[w++] = (char)r;
    }
    return jv_strref(p, w);
}
static jv m_case(jctx *c, const jv *s, int how) { return jstr_case(c, s, how); }
static jv m_upper(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_case(c, s, 0); }
static jv m_lower(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_case(c, s, 1); }
static jv m_capitalize(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_case(c, s, 2); }
static jv m_title(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_case(c, s, 3); }
static jv m_swapcase(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_case(c, s, 4); }

static bool ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }

static jv split_impl(jctx *c, const jv *s, jargs *a, int line, bool lines) {
    jv out = jv_list(c);
    const jv *sep = lines ? NULL : jarg(a, 0, "sep");
    const jv *mx = lines ? NULL : jarg(a, 1, "maxsplit");
    int64_t max = mx && mx->t == JV_INT ? mx->u.i : -1;
    if (lines) {
        size_t i = 0;
        while (i < s->n) {
            size_t e = i;
            while (e < s->n && s->u.s[e] != '\n' && s->u.s[e] != '\r') e++;
            jl_push(c, out.u.l, jv_strref(s->u.s + i, e - i));
            if (e < s->n && s->u.s[e] == '\r' && e + 1 < s->n && s->u.s[e + 1] == '\n') e++;
            i = e + 1;
        }
        return out;
    }
    if (!sep || sep->t == JV_NONE) {   /* runs of whitespace; ends ignored */
        size_t i = 0;
        int64_t done = 0;
        while (i < s->n) {
            while (i < s->n && ws(s->u.s[i])) i++;
            if (i >= s->n) break;
            if (max >= 0 && done >= max) {
                size_t e = s->n;
                while (e > i && ws(s->u.s[e - 1])) e--;
                jl_push(c, out.u.l, jv_strref(s->u.s + i, e - i));
                break;
            }
            size_t e = i;
            while (e < s->n && !ws(s->u.s[e])) e++;
            jl_push(c, out.u.l, jv_strref(s->u.s + i, e - i));
            done++;
            i = e;
        }
        return out;
    }
    if (sep->t != JV_STR) jfail(c, line, "split wants a string separator");
    if (!sep->n) jfail(c, line, "split: empty separator");
    size_t st = 0;
    int64_t done = 0;
    for (size_t i = 0; i + sep->n <= s->n;) {
        if ((max < 0 || done < max) && has_at(s, i, sep)) {
            jl_push(c, out.u.l, jv_strref(s->u.s + st, i - st));
            i += sep->n;
            st = i;
            done++;
        } else {
            i++;
        }
    }
    jl_push(c, out.u.l, jv_strref(s->u.s + st, s->n - st));
    return out;
}
static jv m_split(jctx *c, const jv *s, jargs *a, int line) { return split_impl(c, s, a, line, false); }
static jv m_splitlines(jctx *c, const jv *s, jargs *a, int line) { return split_impl(c, s, a, line, true); }

static bool affix(jctx *c, const jv *s, jargs *a, int line, bool end) {
    const jv *p = jarg(a, 0, NULL);
    if (!p) jfail(c, line, "%s wants an argument", end ? "endswith" : "startswith");
    if (p->t == JV_LIST) {
        for (size_t i = 0; i < p->u.l->n; i++) {
            jargs one = { .pos = &p->u.l->v[i], .npos = 1 };
            if (affix(c, s, &one, line, end)) return true;
        }
        return false;
    }
    if (p->t != JV_STR) jfail(c, line, "%s wants a string", end ? "endswith" : "startswith");
    if (p->n > s->n) return false;
    return !memcmp(s->u.s + (end ? s->n - p->n : 0), p->u.s, p->n);
}
static jv m_startswith(jctx *c, const jv *s, jargs *a, int line) { return jv_bool(affix(c, s, a, line, false)); }
static jv m_endswith(jctx *c, const jv *s, jargs *a, int line) { return jv_bool(affix(c, s, a, line, true)); }

static jv m_replace(jctx *c, const jv *s, jargs *a, int line) {
    const jv *o = jarg(a, 0, NULL), *n = jarg(a, 1, NULL);
    if (!o || !n) jfail(c, line, "replace wants two arguments");
    return jreplace(c, s, o, n, jarg(a, 2, "count"), line);
}

/* character index of a byte offset */
static int64_t char_index(const jv *s, size_t byte) {
    int64_t k = 0;
    for (size_t i = 0; i < byte; i++) if (((unsigned char)s->u.s[i] & 0xC0) != 0x80) k++;
    return k;
}

static jv find_impl(jctx *c, const jv *s, jargs *a, int line, bool rev, bool count) {
    jv sub = str_arg(c, a, 0, NULL, count ? "count" : "find", line);
    int64_t found = -1, n = 0;
    for (size_t i = 0; i + sub.n <= s->n; i++) {
        if (!has_at(s, i, &sub)) continue;
        if (count) { n++; if (sub.n) i += sub.n - 1; continue; }
        found = (int64_t)i;
        if (!rev) break;
    }
    if (count) return jv_int(sub.n ? n : char_index(s, s->n) + 1);
    return jv_int(found < 0 ? -1 : char_index(s, (size_t)found));
}
static jv m_find(jctx *c, const jv *s, jargs *a, int line) { return find_impl(c, s, a, line, false, false); }
static jv m_rfind(jctx *c, const jv *s, jargs *a, int line) { return find_impl(c, s, a, line, true, false); }
static jv m_count(jctx *c, const jv *s, jargs *a, int line) { return find_impl(c, s, a, line, false, true); }

static jv m_join(jctx *c, const jv *s, jargs *a, int line) {
    const jv *l = jarg(a, 0, NULL);
    if (!l) jfail(c, line, "join wants a list");
    jv it = jv_iterable(c, l, line);
    jout o = { 0 };
    for (size_t i = 0; i < it.u.l->n; i++) {
        if (i) jout_put(c, &o, s->u.s, s->n);
        jv x = it.u.l->v[i];
        if (x.t != JV_STR) jfail(c, line, "join: item %zu is a %s, not a string", i, jv_type_name(&x));
        jout_put(c, &o, x.u.s, x.n);
    }
    return jv_strref(o.p ? o.p : "", o.n);
}

static jv m_is(jctx *c, const jv *s, int kind) {   /* 0 digit 1 alpha 2 alnum 3 space 4 upper 5 lower */
    (void)c;
    if (!s->n) return jv_bool(false);
    bool cased = false;
    for (size_t i = 0; i < s->n; i++) {
        unsigned char ch = (unsigned char)s->u.s[i];
        switch (kind) {
        case 0: if (!isdigit(ch)) return jv_bool(false); break;
        case 1: if (!isalpha(ch)) return jv_bool(false); break;
        case 2: if (!isalnum(ch)) return jv_bool(false); break;
        case 3: if (!ws((char)ch)) return jv_bool(false); break;
        case 4: if (islower(ch)) return jv_bool(false); cased |= isupper(ch) != 0; break;
        default: if (isupper(ch)) return jv_bool(false); cased |= islower(ch) != 0; break;
        }
    }
    return jv_bool(kind < 4 || cased);
}
static jv m_isdigit(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_is(c, s, 0); }
static jv m_isalpha(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_is(c, s, 1); }
static jv m_isalnum(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_is(c, s, 2); }
static jv m_isspace(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_is(c, s, 3); }
static jv m_isupper(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_is(c, s, 4); }
static jv m_islower(jctx *c, const jv *s, jargs *a, int line) { (void)a; (void)line; return m_is(c, s, 5); }

static jv m_removeprefix(jctx *c, const jv *s, jargs *a, int line) {
    jv p = str_arg(c, a, 0, NULL, "removeprefix", line);
    return p.n <= s->n && !memcmp(s->u.s, p.u.s, p.n) ? jv_strref(s->u.s + p.n, s->n - p.n) : *s;
}
static jv m_removesuffix(jctx *c, const jv *s, jargs *a, int line) {
    jv p = str_arg(c, a, 0, NULL, "removesuffix", line);
    return p.n <= s->n && !memcmp(s->u.s + s->n - p.n, p.u.s, p.n) ? jv_strref(s->u.s, s->n - p.n) : *s;
}

/* str.format: {} {0} {name}, with {{ and }} for braces */
static jv m_format(jctx *c, const jv *s, jargs *a, int line) {
    jout o = { 0 };
    int auto_i = 0;
    for (size_t i = 0; i < s->n; i++) {
        char ch = s->u.s[i];
        if ((ch == '{' || ch == '}') && i + 1 < s->n && s->u.s[i + 1] == ch) { jout_put(c, &o, &ch, 1); i++; continue; }
        if (ch != '{') { jout_put(c, &o, &ch, 1); continue; }
        size_t e = i + 1;
        while (e < s->n && s->u.s[e] != '}') e++;
        if (e >= s->n) jfail(c, line, "format: unclosed '{'");
        size_t fe = i + 1;
        while (fe < e && s->u.s[fe] != ':' && s->u.s[fe] != '!') fe++;
        const jv *v = NULL;
        if (fe == i + 1) v = jarg(a, auto_i++, NULL);
        else if (isdigit((unsigned char)s->u.s[i + 1])) v = jarg(a, (int)strtol(s->u.s + i + 1, NULL, 10), NULL);
        else {
            char name[64];
            size_t n = fe - i - 1 < sizeof name - 1 ? fe - i - 1 : sizeof name - 1;
            memcpy(name, s->u.s + i + 1, n);
            name[n] = 0;
            v = jarg(a, -1, name);
        }
        if (!v) jfail(c, line, "format: no argument for a replacement field");
        jv_write(c, &o, v);
        i = e;
    }
    return jv_strref(o.p ? o.p : "", o.n);
}

/* ---- dict ----------------------------------------------------------------------------- */
static jv m_get(jctx *c, const jv *d, jargs *a, int line) {
    (void)c;
    const jv *k = jarg(a, 0, NULL), *dflt = jarg(a, 1, "default");
    if (!k) jfail(c, line, "get wants a key");
    jv *v = jd_get(d->u.d, *k);
    return v ? *v : dflt ? *dflt : jv_none();
}
static jv m_items(jctx *c, const jv *d, jargs *a, int line) {
    jargs none = { 0 };
    (void)a;
    return jfilter(c, "items", d, &none, line);
}
static jv m_keys(jctx *c, const jv *d, jargs *a, int line) {
    (void)a; (void)line;
    jv l = jv_list(c);
    for (size_t i = 0; i < d->u.d->n; i++) jl_push(c, l.u.l, d->u.d->k[i]);
    return l;
}
static jv m_values(jctx *c, const jv *d, jargs *a, int line) {
    (void)a; (void)line;
    jv l = jv_list(c);
    for (size_t i = 0; i < d->u.d->n; i++) jl_push(c, l.u.l, d->u.d->v[i]);
    return l;
}
static jv m_copy(jctx *c, const jv *d, jargs *a, int line) {
    (void)a; (void)line;
    if (d->t == JV_LIST) {
        jv l = jv_list(c);
        for (size_t i = 0; i < d->u.l->n; i++) jl_push(c, l.u.l, d->u.l->v[i]);
        return l;
    }
    jv r = jv_dict(c);
    for (size_t i = 0; i < d->u.d->n; i++) jd_set(c, r.u.d, d->u.d->k[i], d->u.d->v[i]);
    return r;
}

/* ---- list ------------------------------------------------------------------------------ */
static jv m_index(jctx *c, const jv *l, jargs *a, int line) {
    const jv *x = jarg(a, 0, NULL);
    if (!x) jfail(c, line, "index wants a value");
    for (size_t i = 0; i < l->u.l->n; i++) if (jv_eq(&l->u.l->v[i], x)) return jv_int((int64_t)i);
    jfail(c, line, "index: the value is not in the list");
}
static jv m_list_count(jctx *c, const jv *l, jargs *a, int line) {
    (void)c;
    const jv *x = jarg(a, 0, NULL);
    if (!x) jfail(c, line, "count wants a value");
    int64_t n = 0;
    for (size_t i = 0; i < l->u.l->n; i++) n += jv_eq(&l->u.l->v[i], x);
    return jv_int(n);
}

/* The methods that change a list or dict in place: transformers renders chat
 * templates in Jinja2's immutable sandbox, which refuses them, and the
 * reference renderer has none, so a template that calls one works nowhere.
 * They exist (`x.append is defined`, as in the sandbox) and fail when called. */
static jv m_mutate(jctx *c, const jv *s, jargs *a, int line) {
    (void)a;
    jfail(c, line, "a chat template cannot change a %s in place (append, pop, insert, extend, remove, update, setdefault...): "
                   "transformers renders templates in an immutable sandbox; build a new value with set, + or namespace()",
          s->t == JV_LIST ? "list" : "dict");
}

typedef struct { const char *name; jfunc f; } method;

static const method str_methods[] = {
    { "strip", m_strip }, { "lstrip", m_lstrip }, { "rstrip", m_rstrip }, { "split", m_split },
    { "splitlines", m_splitlines }, { "startswith", m_startswith }, { "endswith", m_endswith },
    { "upper", m_upper }, { "lower", m_lower }, { "capitalize", m_capitalize }, { "title", m_title },
    { "swapcase", m_swapcase }, { "replace", m_replace }, { "find", m_find }, { "rfind", m_rfind },
    { "count", m_count }, { "join", m_join }, { "format", m_format }, { "isdigit", m_isdigit },
    { "isalpha", m_isalpha }, { "isalnum", m_isalnum }, { "isspace", m_isspace }, { "isupper", m_isupper },
    { "islower", m_islower }, { "removeprefix", m_removeprefix }, { "removesuffix", m_removesuffix },
    { NULL, NULL } };
static const method dict_methods[] = {
    { "get", m_get }, { "items", m_items }, { "keys", m_keys }, { "values", m_values }, { "copy", m_copy },
    { "update", m_mutate }, { "setdefault", m_mutate }, { "pop", m_mutate }, { "popitem", m_mutate }, { "clear", m_mutate },
    { NULL, NULL } };
static const method list_methods[] = {
    { "index", m_index }, { "count", m_list_count }, { "copy", m_copy },
    { "append", m_mutate }, { "pop", m_mutate }, { "insert", m_mutate }, { "extend", m_mutate }, { "remove", m_mutate },
    { "clear", m_mutate }, { "sort", m_mutate }, { "reverse", m_mutate },
    { NULL, NULL } };

jv jmethod(jctx *c, const jv *self, const char *name, size_t n, int line) {
    (void)line;
    const method *m = self->t == JV_STR ? str_methods : self->t == JV_DICT ? dict_methods :
                      self->t == JV_LIST ? list_methods : NULL;
    for (; m && m->name; m++)
        if (strlen(m->name) == n && !memcmp(m->name, name, n)) {
            /* a key of that name (a tool's "update" parameter) is read as the reference reads it */
            if (m->f == m_mutate && self->t == JV_DICT && jd_get(self->u.d, jv_strref(name, n))) return jv_undef();
            return bound(c, m->f, self, m->name);
        }
    return jv_undef();
}

/* ---- globals ----------------------------------------------------------------------------- */
static jv g_range(jctx *c, const jv *self, jargs *a, int line) {
    (void)self;
    if (a->npos < 1 || a->npos > 3) jfail(c, line, "range wants 1 to 3 arguments");
    for (int i = 0; i < a->npos; i++)
        if (a->pos[i].t != JV_INT) jfail(c, line, "range wants integers");
    int64_t start = 0, stop, step = 1;
    if (a->npos == 1) stop = a->pos[0].u.i;
    else { start = a->pos[0].u.i; stop = a->pos[1].u.i; if (a->npos == 3) step = a->pos[2].u.i; }
    if (step == 0) jfail(c, line, "range's step cannot be zero");
    jv l = jv_list(c);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        jstep(c, line);
        jl_push(c, l.u.l, jv_int(i));
    }
    return l;
}

static jv g_namespace(jctx *c, const jv *self, jargs *a, int line) {
    (void)self;
    jv ns = jv_dict(c);
    ns.t = JV_NS;
    for (int i = 0; i < a->npos; i++) {
        if (a->pos[i].t != JV_DICT) jfail(c, line, "namespace wants a dict or keyword arguments");
        for (size_t k = 0; k < a->pos[i].u.d->n; k++) jd_set(c, ns.u.d, a->pos[i].u.d->k[k], a->pos[i].u.d->v[k]);
    }
    for (int i = 0; i < a->nkw; i++) jd_sets(c, ns.u.d, a->kwn[i], a->kwv[i]);
    return ns;
}

static jv g_dict(jctx *c, const jv *self, jargs *a, int line) {
    jv d = g_namespace(c, self, a, line);
    d.t = JV_DICT;
    return d;
}

static jv g_raise(jctx *c, const jv *self, jargs *a, int line) {
    (void)self;
    jv m = a->npos ? jv_to_str(c, &a->pos[0]) : jv_cstr("");
    jfail(c, line, "raise_exception: %.*s", (int)(m.n > 400 ? 400 : m.n), m.u.s);
}

static jv g_strftime(jctx *c, const jv *self, jargs *a, int line) {
    (void)self;
    if (a->npos < 1 || a->pos[0].t != JV_STR) jfail(c, line, "strftime_now wants a format string");
    char fmt[256], buf[512];
    size_t n = a->pos[0].n < sizeof fmt - 1 ? a->pos[0].n : sizeof fmt - 1;
    memcpy(fmt, a->pos[0].u.s, n);
    fmt[n] = 0;
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t w = strftime(buf, sizeof buf, fmt, &tm);
    return jv_str(c, buf, w);
}

jv jglobal(jctx *c, const char *name) {
    static const struct { const char *name; jfunc f; } g[] = {
        { "range", g_range }, { "namespace", g_namespace }, { "dict", g_dict },
        { "raise_exception", g_raise }, { "strftime_now", g_strftime } };
    for (size_t i = 0; i < sizeof g / sizeof *g; i++)
        if (!strcmp(g[i].name, name)) return bound(c, g[i].f, NULL, g[i].name);
    return jv_undef();
}
