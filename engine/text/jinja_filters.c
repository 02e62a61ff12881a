/* Jinja's filters and tests, as Jinja2 defines them (tojson as Hugging Face
 * transformers overrides it: json.dumps with ensure_ascii=False). */
#include "engine/text/jinja_internal.h"
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const jv *jarg(jargs *a, int pos, const char *kw) {
    if (kw) for (int i = 0; i < a->nkw; i++) if (!strcmp(a->kwn[i], kw)) return &a->kwv[i];
    if (pos >= 0 && pos < a->npos) return &a->pos[pos];
    return NULL;
}

static jargs sub_args(jargs *a, int from) {   /* positional args from `from` on, keywords kept */
    jargs s = *a;
    if (from > s.npos) from = s.npos;
    s.pos += from;
    s.npos -= from;
    return s;
}

static const char *want_str(jctx *c, const jv *v, const char *what, int line) {
    if (!v || v->t != JV_STR) jfail(c, line, "%s wants a string", what);
    return v->u.s;
}

/* A double truncated to int64, clamped (casting one outside the range is undefined). */
static int64_t f_to_i(double f) {
    if (!(f == f)) return 0;
    if (f >= 9.2e18) return INT64_MAX;
    if (f <= -9.2e18) return INT64_MIN;
    return (int64_t)f;
}

static int64_t want_int(jctx *c, const jv *v, int64_t dflt, const char *what, int line) {
    if (!v || v->t == JV_NONE || v->t == JV_UNDEF) return dflt;
    if (v->t == JV_INT) return v->u.i;
    if (v->t == JV_BOOL) return v->u.b;
    if (v->t == JV_FLOAT) return f_to_i(v->u.f);
    jfail(c, line, "%s wants an integer", what);
}

static bool is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }

/* strip with Python's rules: whitespace, or any of chars */
jv jstrip(jctx *c, const jv *s, const jv *chars, bool left, bool right, int line);
jv jstrip(jctx *c, const jv *s, const jv *chars, bool left, bool right, int line) {
    jv v = jv_to_str(c, s);
    size_t a = 0, b = v.n;
    bool ws = !chars || chars->t == JV_NONE || chars->t == JV_UNDEF;
    const char *set = ws ? NULL : want_str(c, chars, "strip's argument", line);
    size_t setn = ws ? 0 : chars->n;
#define IN_SET(ch) (ws ? is_space(ch) : memchr(set, (ch), setn) != NULL)
    if (left) while (a < b && IN_SET(v.u.s[a])) a++;
    if (right) while (b > a && IN_SET(v.u.s[b - 1])) b--;
#undef IN_SET
    return jv_strref(v.u.s + a, b - a);
}

jv jreplace(jctx *c, const jv *s, const jv *old, const jv *new_, const jv *count, int line);
jv jreplace(jctx *c, const jv *s, const jv *old, const jv *new_, const jv *count, int line) {
    jv v = jv_to_str(c, s);
    jv o = jv_to_str(c, old), w = jv_to_str(c, new_);
    int64_t max = want_int(c, count, -1, "replace's count", line);
    jout out = { 0 };
    size_t i = 0;
    int64_t done = 0;
    if (o.n == 0) {   /* Python inserts new between every character */
        for (size_t k = 0; k <= v.n; k++) {
            if (max < 0 || done < max) { jout_put(c, &out, w.u.s, w.n); done++; }
            if (k < v.n) {
                size_t e = k + 1;
                while (e < v.n && ((unsigned char)v.u.s[e] & 0xC0) == 0x80) e++;
                jout_put(c, &out, v.u.s + k, e - k);
                k = e - 1;
            }
        }
        return jv_strref(out.p ? out.p : "", out.n);
    }
    while (i < v.n) {
        if ((max < 0 || done < max) && i + o.n <= v.n && !memcmp(v.u.s + i, o.u.s, o.n)) {
            jout_put(c, &out, w.u.s, w.n);
            i += o.n;
            done++;
        } else {
            jout_put(c, &out, v.u.s + i, 1);
            i++;
        }
    }
    return jv_strref(out.p ? out.p : "", out.n);
}

static jv do_tojson(jctx *c, const jv *v, jargs *a, int line) {
    const jv *ind = jarg(a, 0, "indent"), *sep = jarg(a, -1, "separators"), *sk = jarg(a, -1, "sort_keys");
    int indent = ind && ind->t != JV_NONE && ind->t != JV_UNDEF ? (int)want_int(c, ind, 0, "tojson's indent", line) : -1;
    if (indent > 64) indent = 64;
    const char *isep = indent >= 0 ? "," : ", ", *ksep = ": ";
    if (sep && sep->t == JV_LIST && sep->u.l->n == 2) {
        isep = jv_to_str(c, &sep->u.l->v[0]).u.s;
        ksep = jv_to_str(c, &sep->u.l->v[1]).u.s;
        /* arena strings from jv_to_str are NUL-terminated; literals are too */
    }
    jout o = { 0 };
    jv_tojson(c, &o, v, indent, isep, ksep, sk && jv_truthy(sk), 0, line);
    return jv_strref(o.p ? o.p : "", o.n);
}

static jv as_list(jctx *c, const jv *v, int line) {
    jv it = jv_iterable(c, v, line);
    return it;
}

static jv copy_list(jctx *c, const jv *l) {
    jv r = jv_list(c);
    for (size_t i = 0; i < l->u.l->n; i++) jl_push(c, r.u.l, l->u.l->v[i]);
    return r;
}

/* attribute lookup with dots ("a.b"), for map/selectattr/sort/sum... */
static jv attr_path(jctx *c, const jv *v, const jv *attr, int line) {
    if (attr->t == JV_INT) return jgetitem(c, v, attr, line);
    jv a = jv_to_str(c, attr), cur = *v;
    size_t s = 0;
    for (size_t i = 0; i <= a.n; i++) {
        if (i == a.n || a.u.s[i] == '.') {
            jv key = jv_strref(a.u.s + s, i - s);
            cur = jgetitem(c, &cur, &key, line);
            s = i + 1;
        }
    }
    return cur;
}

static jv lowered(jctx *c, const jv *v, bool case_sensitive) {
    return !case_sensitive && v->t == JV_STR ? jstr_case(c, v, 1) : *v;
}

typedef struct { jctx *c; const jv *attr; bool cs; int pair; int line; } sort_ctx;   /* pair: 1 key, 2 value of (k, v) */
static int sort_cmp(sort_ctx *s, const jv *x, const jv *y) {
    jv a = *x, b = *y;
    if (s->pair) { a = a.u.l->v[s->pair - 1]; b = b.u.l->v[s->pair - 1]; }
    if (s->attr) { a = attr_path(s->c, &a, s->attr, s->line); b = attr_path(s->c, &b, s->attr, s->line); }
    a = lowered(s->c, &a, s->cs);
    b = lowered(s->c, &b, s->cs);
    return jv_cmp(s->c, &a, &b, s->line);
}

/* a stable sort (merge) so equal keys keep their order, as Python's sorted */
static void stable_sort(jctx *c, sort_ctx *s, jv *v, size_t n, bool reverse) {
    if (n < 2) return;
    jv *tmp = jctx_alloc(c, n * sizeof *tmp);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int r = sort_cmp(s, &v[i], &v[j]);
                if (reverse) r = -r;
                tmp[k++] = r <= 0 ? v[i++] : v[j++];
            }
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof *v);
    }
}

static jv items_of(jctx *c, const jv *v, int line) {
    jv l = jv_list(c);
    if (v->t == JV_UNDEF) return l;
    if (v->t != JV_DICT && v->t != JV_NS) jfail(c, line, "items wants a dict, not a %s", jv_type_name(v));
    for (size_t i = 0; i < v->u.d->n; i++) {
        jv p = jv_list(c);
        p.tuple = true;
        jl_push(c, p.u.l, v->u.d->k[i]);
        jl_push(c, p.u.l, v->u.d->v[i]);
        jl_push(c, l.u.l, p);
    }
    return l;
}

static jv do_select(jctx *c, const jv *v, jargs *a, bool attr, bool keep, int line) {
    jv src = as_list(c, v, line), out = jv_list(c);
    int at = attr ? 1 : 0;
    const jv *an = attr ? jarg(a, 0, NULL) : NULL;
    if (attr && !an) jfail(c, line, "%s wants an attribute name", keep ? "selectattr" : "rejectattr");
    const jv *tn = jarg(a, at, NULL);
    jargs targs = sub_args(a, at + 1);
    for (size_t i = 0; i < src.u.l->n; i++) {
        jstep(c, line);
        jv item = src.u.l->v[i], x = attr ? attr_path(c, &item, an, line) : item;
        bool r = tn ? jtest(c, want_str(c, tn, "the test name", line), &x, &targs, line) : jv_truthy(&x);
        if (r == keep) jl_push(c, out.u.l, item);
    }
    return out;
}

static jv do_map(jctx *c, const jv *v, jargs *a, int line) {
    jv src = as_list(c, v, line), out = jv_list(c);
    const jv *attr = jarg(a, -1, "attribute"), *dflt = jarg(a, -1, "default");
    const jv *fname = attr ? NULL : jarg(a, 0, NULL);
    if (!attr && !fname) jfail(c, line, "map wants a filter name or attribute=");
    jargs fargs = sub_args(a, 1);
    fargs.nkw = 0;
    for (size_t i = 0; i < src.u.l->n; i++) {
        jstep(c, line);
        jv x = src.u.l->v[i];
        if (attr) {
            x = attr_path(c, &x, attr, line);
            if (x.t == JV_UNDEF && dflt) x = *dflt;
        } else {
            x = jfilter(c, want_str(c, fname, "map's filter name", line), &x, &fargs, line);
        }
        jl_push(c, out.u.l, x);
    }
    return out;
}

static jv do_indent(jctx *c, const jv *v, jargs *a, int line) {
    const jv *w = jarg(a, 0, "width"), *first = jarg(a, 1, "first"), *blank = jarg(a, 2, "blank");
    jv ind;
    if (w && w->t == JV_STR) ind = *w;
    else {
        int64_t n = want_int(c, w, 4, "indent's width", line);
        if (n < 0) n = 0;
        if (n > 1024) n = 1024;
        char *p = jctx_alloc(c, (size_t)n + 1);
        memset(p, ' ', (size_t)n);
        ind = jv_strref(p, (size_t)n);
    }
    jv s = jv_to_str(c, v);
    jout o = { 0 };
    if (first && jv_truthy(first)) jout_put(c, &o, ind.u.s, ind.n);
    /* lines split as str.splitlines on the text plus "\n" */
    size_t i = 0;
    bool first_line = true;
    while (i < s.n) {
        size_t e = i;
        while (e < s.n && s.u.s[e] != '\n') e++;
        if (!first_line) {
            jout_put(c, &o, "\n", 1);
            if (e > i || (blank && jv_truthy(blank))) jout_put(c, &o, ind.u.s, ind.n);
        }
        jout_put(c, &o, s.u.s + i, e - i);
        first_line = false;
        i = e + 1;
    }
    return jv_strref(o.p ? o.p : "", o.n);
}

static jv do_format(jctx *c, const jv *fmt, jargs *a, int line) {   /* "%s" % args */
    jv f = jv_to_str(c, fmt);
    jout o = { 0 };
    int ai = 0;
    for (size_t i = 0; i < f.n; i++) {
        if (f.u.s[i] != '%' || i + 1 >= f.n) { jout_put(c, &o, f.u.s + i, 1); continue; }
        size_t j = i + 1;
        char spec[32];
        size_t k = 0;
        spec[k++] = '%';
        while (j < f.n && k < 20 && strchr("-+ #0123456789.", f.u.s[j])) spec[k++] = f.u.s[j++];
        if (j >= f.n) break;
        char conv = f.u.s[j];
        if (conv == '%') { jout_put(c, &o, "%", 1); i = j; continue; }
        if (ai >= a->npos) jfail(c, line, "format: not enough arguments");
        jv x = a->pos[ai++];
        char buf[128];
        if (conv == 'd' || conv == 'i') {
            spec[k++] = 'l'; spec[k++] = 'l'; spec[k++] = 'd'; spec[k] = 0;
            snprintf(buf, sizeof buf, spec, (long long)(x.t == JV_FLOAT ? f_to_i(x.u.f) : (int64_t)jv_num(&x)));
            jout_put(c, &o, buf, strlen(buf));
        } else if (conv == 'f' || conv == 'e' || conv == 'g') {
            spec[k++] = conv; spec[k] = 0;
            snprintf(buf, sizeof buf, spec, jv_num(&x));
            jout_put(c, &o, buf, strlen(buf));
        } else if (conv == 'r') {
            jv_tojson(c, &o, &x, -1, ", ", ": ", false, 0, line);
        } else {
            jv_write(c, &o, &x);
        }
        i = j;
    }
    return jv_strref(o.p ? o.p : "", o.n);
}

/* A string's number (spaces around allowed): *is_int when it is an integer literal. */
static bool str_number(jctx *c, const jv *v, double *d, long long *i, bool *is_int, int line) {
    char buf[64];
    jv t = jstrip(c, v, NULL, true, true, line);
    if (!t.n || t.n >= sizeof buf) return false;
    memcpy(buf, t.u.s, t.n);
    buf[t.n] = 0;
    char *e;
    *i = strtoll(buf, &e, 10);
    *is_int = !*e;
    if (*is_int) return true;
    *d = strtod(buf, &e);
    return !*e;
}

static jv to_int(jctx *c, const jv *v, const jv *dflt, int line) {
    double d;
    long long i;
    bool is_int;
    switch (v->t) {
    case JV_INT: return *v;
    case JV_BOOL: return jv_int(v->u.b);
    case JV_FLOAT: if (isfinite(v->u.f)) return jv_int(f_to_i(v->u.f)); break;
    case JV_STR:
        if (str_number(c, v, &d, &i, &is_int, line)) {
            if (is_int) return jv_int(i);
            if (isfinite(d)) return jv_int(f_to_i(d));
        }
        break;
    default: break;
    }
    return dflt ? *dflt : jv_int(0);
}

static jv to_float(jctx *c, const jv *v, const jv *dflt, int line) {
    double d;
    long long i;
    bool is_int;
    if (jv_is_num(v)) return jv_float(jv_num(v));
    if (v->t == JV_STR && str_number(c, v, &d, &i, &is_int, line)) return jv_float(is_int ? (double)i : d);
    return dflt ? *dflt : jv_float(0);
}

static jv html_escape(jctx *c, const jv *v) {
    jv s = jv_to_str(c, v);
    jout o = { 0 };
    for (size_t i = 0; i < s.n; i++) {
        const char *r = NULL;
        switch (s.u.s[i]) {
        case '&': r = "&amp;"; break;
        case '<': r = "&lt;"; break;
        case '>': r = "&gt;"; break;
        case '"': r = "&#34;"; break;
        case '\'': r = "&#39;"; break;
        default: break;
        }
        if (r) jout_put(c, &o, r, strlen(r));
        else jout_put(c, &o, s.u.s + i, 1);
    }
    return jv_strref(o.p ? o.p : "", o.n);
}

static jv minmax(jctx *c, const jv *v, jargs *a, bool max, int line) {
    jv l = as_list(c, v, line);
    if (!l.u.l->n) return jv_undef();
    const jv *cs = jarg(a, 0, "case_sensitive"), *attr = jarg(a, 1, "attribute");
    sort_ctx s = { c, attr, cs && jv_truthy(cs), 0, line };
    jv best = l.u.l->v[0];
    for (size_t i = 1; i < l.u.l->n; i++) {
        int r = sort_cmp(&s, &l.u.l->v[i], &best);
        if (max ? r > 0 : r < 0) best = l.u.l->v[i];
    }
    return best;
}

jv jfilter(jctx *c, const char *name, const jv *v, jargs *a, int line) {
#define IS(s) (!strcmp(name, s))
    if (IS("tojson")) return do_tojson(c, v, a, line);
    if (IS("safe") || IS("string")) return IS("safe") ? *v : jv_to_str(c, v);
    if (IS("trim")) return jstrip(c, v, jarg(a, 0, "chars"), true, true, line);
    if (IS("upper")) return jstr_case(c, v, 0);
    if (IS("lower")) return jstr_case(c, v, 1);
    if (IS("capitalize")) return jstr_case(c, v, 2);
    if (IS("title")) return jstr_case(c, v, 3);
    if (IS("length") || IS("count")) return jv_int((int64_t)jv_len(c, v, line));
    if (IS("replace")) {
        const jv *o = jarg(a, 0, "old"), *n = jarg(a, 1, "new");
        if (!o || !n) jfail(c, line, "replace wants two arguments");
        return jreplace(c, v, o, n, jarg(a, 2, "count"), line);
    }
    if (IS("default") || IS("d")) {
        const jv *d = jarg(a, 0, "default_value"), *b = jarg(a, 1, "boolean");
        bool use = v->t == JV_UNDEF || (b && jv_truthy(b) && !jv_truthy(v));
        return use ? (d ? *d : jv_cstr("")) : *v;
    }
    if (IS("join")) {
        const jv *d = jarg(a, 0, "d"), *attr = jarg(a, 1, "attribute");
        jv l = as_list(c, v, line), sep = d ? jv_to_str(c, d) : jv_cstr("");
        jout o = { 0 };
        for (size_t i = 0; i < l.u.l->n; i++) {
            if (i) jout_put(c, &o, sep.u.s, sep.n);
            jv x = attr ? attr_path(c, &l.u.l->v[i], attr, line) : l.u.l->v[i];
            jv_write(c, &o, &x);
        }
        return jv_strref(o.p ? o.p : "", o.n);
    }
    if (IS("map")) return do_map(c, v, a, line);
    if (IS("select")) return do_select(c, v, a, false, true, line);
    if (IS("reject")) return do_select(c, v, a, false, false, line);
    if (IS("selectattr")) return do_select(c, v, a, true, true, line);
    if (IS("rejectattr")) return do_select(c, v, a, true, false, line);
    if (IS("first") || IS("last")) {
        jv l = as_list(c, v, line);
        if (!l.u.l->n) return jv_undef();
        return l.u.l->v[IS("first") ? 0 : l.u.l->n - 1];
    }
    if (IS("items")) return items_of(c, v, line);
    if (IS("list")) { jv l = as_list(c, v, line); return copy_list(c, &l); }
    if (IS("int")) return to_int(c, v, jarg(a, 0, "default"), line);
    if (IS("float")) return to_float(c, v, jarg(a, 0, "default"), line);
    if (IS("abs")) {
        if (v->t == JV_INT) return v->u.i == INT64_MIN ? jv_float(9.2233720368547758e18) : jv_int(v->u.i < 0 ? -v->u.i : v->u.i);
        if (v->t == JV_FLOAT) return jv_float(fabs(v->u.f));
        jfail(c, line, "abs wants a number");
    }
    if (IS("round")) {
        int64_t p = want_int(c, jarg(a, 0, "precision"), 0, "round's precision", line);
        const jv *m = jarg(a, 1, "method");
        double x = jv_num(v), k = pow(10, (double)(p > 15 ? 15 : p < -15 ? -15 : p));
        const char *meth = m ? want_str(c, m, "round's method", line) : "common";
        double r = !strcmp(meth, "floor") ? floor(x * k) / k : !strcmp(meth, "ceil") ? ceil(x * k) / k : round(x * k) / k;
        return jv_float(r);
    }
    if (IS("unique")) {
        jv l = as_list(c, v, line), out = jv_list(c);
        const jv *cs = jarg(a, 0, "case_sensitive"), *attr = jarg(a, 1, "attribute");
        bool sens = cs && jv_truthy(cs);
        jv seen = jv_list(c);
        for (size_t i = 0; i < l.u.l->n; i++) {
            jstep(c, line);
            jv x = attr ? attr_path(c, &l.u.l->v[i], attr, line) : l.u.l->v[i];
            x = lowered(c, &x, sens);
            bool dup = false;
            for (size_t k = 0; k < seen.u.l->n && !dup; k++) { jstep(c, line); dup = jv_eq(&seen.u.l->v[k], &x); }
            if (!dup) { jl_push(c, seen.u.l, x); jl_push(c, out.u.l, l.u.l->v[i]); }
        }
        return out;
    }
    if (IS("sort") || IS("dictsort")) {
        bool dict = IS("dictsort");
        jv l = dict ? items_of(c, v, line) : copy_list(c, (jv[]){ as_list(c, v, line) });
        const jv *rev = jarg(a, dict ? 2 : 0, "reverse"), *cs = jarg(a, dict ? 0 : 1, "case_sensitive");
        const jv *attr = dict ? NULL : jarg(a, 2, "attribute"), *by = dict ? jarg(a, 1, "by") : NULL;
        bool by_value = by && by->t == JV_STR && !strcmp(by->u.s, "value");
        sort_ctx s = { c, attr, cs && jv_truthy(cs), dict ? (by_value ? 2 : 1) : 0, line };
        stable_sort(c, &s, l.u.l->v, l.u.l->n, rev && jv_truthy(rev));
        return l;
    }
    if (IS("reverse")) {
        jv l = as_list(c, v, line), out = jv_list(c);
        for (size_t i = l.u.l->n; i-- > 0;) jl_push(c, out.u.l, l.u.l->v[i]);
        if (v->t != JV_STR) return out;
        jout o = { 0 };
        for (size_t i = 0; i < out.u.l->n; i++) jout_put(c, &o, out.u.l->v[i].u.s, out.u.l->v[i].n);
        return jv_strref(o.p ? o.p : "", o.n);
    }
    if (IS("indent")) return do_indent(c, v, a, line);
    if (IS("wordcount")) {
        jv s = jv_to_str(c, v);
        int64_t n = 0;
        bool in = false;
        for (size_t i = 0; i < s.n; i++) {
            unsigned char ch = (unsigned char)s.u.s[i];
            bool w = isalnum(ch) || ch == '_' || ch >= 0x80;
            if (w && !in) n++;
            in = w;
        }
        return jv_int(n);
    }
    if (IS("batch")) {
        int64_t n = want_int(c, jarg(a, 0, "linecount"), 1, "batch's size", line);
        if (n < 1) jfail(c, line, "batch wants a size of at least 1");
        const jv *fill = jarg(a, 1, "fill_with");
        jv l = as_list(c, v, line), out = jv_list(c), cur = jv_undef();
        for (size_t i = 0; i < l.u.l->n; i++) {
            if (cur.t == JV_UNDEF || (int64_t)cur.u.l->n == n) { cur = jv_list(c); jl_push(c, out.u.l, cur); }
            jl_push(c, cur.u.l, l.u.l->v[i]);
        }
        if (fill && fill->t != JV_NONE && cur.t == JV_LIST)
            while ((int64_t)cur.u.l->n < n) jl_push(c, cur.u.l, *fill);
        return out;
    }
    if (IS("sum")) {
        jv l = as_list(c, v, line);
        const jv *attr = jarg(a, 0, "attribute"), *start = jarg(a, 1, "start");
        jv acc = start ? *start : jv_int(0);
        for (size_t i = 0; i < l.u.l->n; i++) {
            jv x = attr ? attr_path(c, &l.u.l->v[i], attr, line) : l.u.l->v[i];
            if (!jv_is_num(&x) || !jv_is_num(&acc)) jfail(c, line, "sum wants numbers");
            acc = acc.t == JV_INT && x.t == JV_INT ? jv_int(acc.u.i + x.u.i) : jv_float(jv_num(&acc) + jv_num(&x));
        }
        return acc;
    }
    if (IS("min") || IS("max")) return minmax(c, v, a, IS("max"), line);
    if (IS("attr")) {
        const jv *n = jarg(a, 0, "name");
        if (!n) jfail(c, line, "attr wants a name");
        jv s = jv_to_str(c, n);
        return jgetattr(c, v, s.u.s, s.n, line);
    }
    if (IS("escape") || IS("e") || IS("forceescape")) return html_escape(c, v);
    if (IS("format")) return do_format(c, v, a, line);
    if (IS("pprint")) return jv_to_str(c, v);
    jfail(c, line, "unknown filter '%s'", name);
#undef IS
}

/* ---- tests ------------------------------------------------------------------------ */
bool jtest(jctx *c, const char *name, const jv *v, jargs *a, int line) {
#define IS(s) (!strcmp(name, s))
    const jv *x = jarg(a, 0, NULL);
    if (IS("defined")) return v->t != JV_UNDEF;
    if (IS("undefined")) return v->t == JV_UNDEF;
    if (IS("none")) return v->t == JV_NONE;
    if (IS("string")) return v->t == JV_STR;
    if (IS("number")) return v->t == JV_INT || v->t == JV_FLOAT;
    if (IS("integer")) return v->t == JV_INT;
    if (IS("float")) return v->t == JV_FLOAT;
    if (IS("boolean")) return v->t == JV_BOOL;
    if (IS("true")) return v->t == JV_BOOL && v->u.b;
    if (IS("false")) return v->t == JV_BOOL && !v->u.b;
    if (IS("mapping")) return v->t == JV_DICT;
    if (IS("iterable")) return v->t == JV_LIST || v->t == JV_DICT || v->t == JV_STR || v->t == JV_UNDEF;
    if (IS("sequence")) return v->t == JV_LIST || v->t == JV_DICT || v->t == JV_STR;
    if (IS("callable")) return v->t == JV_MACRO || v->t == JV_FUNC;
    if (IS("odd") || IS("even")) {
        if (v->t != JV_INT) jfail(c, line, "'%s' wants an integer", name);
        return (v->u.i % 2 != 0) == IS("odd");
    }
    if (IS("divisibleby")) {
        int64_t d = want_int(c, x, 1, "divisibleby", line);
        if (d == 0) jfail(c, line, "divisibleby 0");
        return v->t == JV_INT && v->u.i % d == 0;
    }
    if (IS("lower") || IS("upper")) {
        if (v->t != JV_STR) return false;
        bool any = false;
        for (size_t i = 0; i < v->n; i++) {
            unsigned char ch = (unsigned char)v->u.s[i];
            if (isalpha(ch)) { any = true; if (IS("lower") ? isupper(ch) : islower(ch)) return false; }
        }
        return any;
    }
    if (!x && (IS("equalto") || IS("eq") || IS("==") || IS("sameas") || IS("ne") || IS("!=") || IS("lt") || IS("<") ||
               IS("le") || IS("<=") || IS("gt") || IS(">") || IS("ge") || IS(">=") || IS("in")))
        jfail(c, line, "the test '%s' wants an argument", name);
    if (IS("equalto") || IS("eq") || IS("==")) return jv_eq(v, x);
    if (IS("sameas")) return v->t == x->t && jv_eq(v, x);
    if (IS("ne") || IS("!=")) return !jv_eq(v, x);
    if (IS("lt") || IS("<")) return jv_cmp(c, v, x, line) < 0;
    if (IS("le") || IS("<=")) return jv_cmp(c, v, x, line) <= 0;
    if (IS("gt") || IS(">")) return jv_cmp(c, v, x, line) > 0;
    if (IS("ge") || IS(">=")) return jv_cmp(c, v, x, line) >= 0;
    if (IS("in")) {
        if (x->t == JV_LIST) { for (size_t i = 0; i < x->u.l->n; i++) if (jv_eq(&x->u.l->v[i], v)) return true; return false; }
        if (x->t == JV_DICT) return jd_get(x->u.d, *v) != NULL;
        if (x->t == JV_STR && v->t == JV_STR) {
            for (size_t i = 0; i + v->n <= x->n; i++) if (!memcmp(x->u.s + i, v->u.s, v->n)) return true;
            return false;
        }
        return false;
    }
    if (IS("escaped")) return false;
    jfail(c, line, "unknown test '%s'", name);
#undef IS
}
