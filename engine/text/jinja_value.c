/* Jinja values: the arena they live in, construction (from cJSON too),
 * truth, equality and order, and their text forms as Python gives them:
 * str() for output, repr() inside printed lists and dicts, and json.dumps
 * (ensure_ascii=False) for tojson. */
#include "engine/text/jinja_internal.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ------------------------------------------------------------------ */
struct jarena_chunk { jarena_chunk *next; size_t used, cap; _Alignas(max_align_t) unsigned char data[]; };

void *jalloc(jarena *A, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    jarena_chunk *c = A->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (A->cap_total && A->used + cap > A->cap_total) return NULL;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = A->head;
        c->used = 0;
        c->cap = cap;
        A->head = c;
        A->used += cap;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void jarena_free(jarena *A) {
    for (jarena_chunk *c = A->head, *nx; c; c = nx) { nx = c->next; free(c); }
    A->head = NULL;
    A->used = 0;
}

_Noreturn void jfail(jctx *c, int line, const char *fmt, ...) {
    if (c->err && c->errlen && !c->err[0]) {
        int k = line > 0 ? snprintf(c->err, c->errlen, "line %d: ", line) : 0;
        if (k >= 0 && (size_t)k < c->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    longjmp(c->fail, 1);
}

void *jctx_alloc(jctx *c, size_t n) {
    void *p = jalloc(c->A, n);
    if (!p) jfail(c, 0, "the template used too much memory");
    return p;
}

/* ---- construction ---------------------------------------------------------------- */
jv jv_undef(void) { jv v = { .t = JV_UNDEF }; return v; }
jv jv_none(void) { jv v = { .t = JV_NONE }; return v; }
jv jv_bool(bool b) { jv v = { .t = JV_BOOL, .u.b = b }; return v; }
jv jv_int(int64_t i) { jv v = { .t = JV_INT, .u.i = i }; return v; }
jv jv_float(double f) { jv v = { .t = JV_FLOAT, .u.f = f }; return v; }
jv jv_strref(const char *s, size_t n) { jv v = { .t = JV_STR, .n = n, .u.s = s }; return v; }
jv jv_cstr(const char *s) { return jv_strref(s, strlen(s)); }
jv jv_str(jctx *c, const char *s, size_t n) {
    char *p = jctx_alloc(c, n + 1);
    if (n) memcpy(p, s, n);
    return jv_strref(p, n);
}
jv jv_list(jctx *c) { jv v = { .t = JV_LIST, .u.l = jctx_alloc(c, sizeof(jlist)) }; return v; }
jv jv_dict(jctx *c) { jv v = { .t = JV_DICT, .u.d = jctx_alloc(c, sizeof(jdict)) }; return v; }

void jl_push(jctx *c, jlist *l, jv v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jv *nv = jctx_alloc(c, cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

jv *jd_get(const jdict *d, jv key) {
    for (size_t i = 0; i < d->n; i++) if (jv_eq(&d->k[i], &key)) return &d->v[i];
    return NULL;
}
jv *jd_gets(const jdict *d, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].n == n && !memcmp(d->k[i].u.s, key, n)) return &d->v[i];
    return NULL;
}
void jd_set(jctx *c, jdict *d, jv key, jv v) {
    jv *have = jd_get(d, key);
    if (have) { *have = v; return; }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jv *nk = jctx_alloc(c, cap * sizeof *nk), *nv = jctx_alloc(c, cap * sizeof *nv);
        if (d->n) { memcpy(nk, d->k, d->n * sizeof *nk); memcpy(nv, d->v, d->n * sizeof *nv); }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n++] = v;
}
void jd_sets(jctx *c, jdict *d, const char *key, jv v) { jd_set(c, d, jv_cstr(key), v); }

jv jv_from_cjson(jctx *c, const cJSON *j) {
    if (!j || cJSON_IsNull(j)) return jv_none();
    if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return jv_int((int64_t)d);
        return jv_float(d);
    }
    if (cJSON_IsString(j)) return jv_cstr(j->valuestring);
    if (cJSON_IsArray(j)) {
        jv l = jv_list(c);
        for (const cJSON *x = j->child; x; x = x->next) jl_push(c, l.u.l, jv_from_cjson(c, x));
        return l;
    }
    if (cJSON_IsObject(j)) {
        jv d = jv_dict(c);
        for (const cJSON *x = j->child; x; x = x->next)
            if (x->string) jd_set(c, d.u.d, jv_cstr(x->string), jv_from_cjson(c, x));
        return d;
    }
    return jv_none();
}

/* ---- truth, equality, order ------------------------------------------------------- */
bool jv_is_num(const jv *v) { return v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL; }
double jv_num(const jv *v) {
    return v->t == JV_INT ? (double)v->u.i : v->t == JV_FLOAT ? v->u.f : v->t == JV_BOOL ? (double)v->u.b : 0;
}

bool jv_truthy(const jv *v) {
    switch (v->t) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0;
    case JV_STR: return v->n > 0;
    case JV_LIST: return v->u.l->n > 0;
    case JV_DICT: return v->u.d->n > 0;
    default: return true;
    }
}

bool jv_eq(const jv *a, const jv *b) {
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a->t == JV_INT && b->t == JV_INT) return a->u.i == b->u.i;
        return jv_num(a) == jv_num(b);
    }
    if (a->t != b->t) return false;
    switch (a->t) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a->n == b->n && !memcmp(a->u.s, b->u.s, a->n);
    case JV_LIST:
        if (a->u.l->n != b->u.l->n) return false;
        for (size_t i = 0; i < a->u.l->n; i++) if (!jv_eq(&a->u.l->v[i], &b->u.l->v[i])) return false;
        return true;
    case JV_DICT:
        if (a->u.d->n != b->u.d->n) return false;
        for (size_t i = 0; i < a->u.d->n; i++) {
            jv *o = jd_get(b->u.d, a->u.d->k[i]);
            if (!o || !jv_eq(&a->u.d->v[i], o)) return false;
        }
        return true;
    case JV_NS: return a->u.d == b->u.d;
    case JV_MACRO: return a->u.fn == b->u.fn;
    default: return false;
    }
}

const char *jv_type_name(const jv *v) {
    static const char *const n[] = { "undefined", "none", "boolean", "integer", "float", "string", "list", "dict",
                                     "macro", "namespace", "function" };
    return n[v->t];
}

int jv_cmp(jctx *c, const jv *a, const jv *b, int line) {
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a->t == JV_INT && b->t == JV_INT) return (a->u.i > b->u.i) - (a->u.i < b->u.i);
        double x = jv_num(a), y = jv_num(b);
        return (x > y) - (x < y);
    }
    if (a->t == JV_STR && b->t == JV_STR) {
        size_t n = a->n < b->n ? a->n : b->n;
        int r = memcmp(a->u.s, b->u.s, n);
        if (r) return r < 0 ? -1 : 1;
        return (a->n > b->n) - (a->n < b->n);
    }
    if (a->t == JV_LIST && b->t == JV_LIST) {
        for (size_t i = 0; i < a->u.l->n && i < b->u.l->n; i++) {
            int r = jv_cmp(c, &a->u.l->v[i], &b->u.l->v[i], line);
            if (r) return r;
        }
        return (a->u.l->n > b->u.l->n) - (a->u.l->n < b->u.l->n);
    }
    jfail(c, line, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
}

/* ---- text forms --------------------------------------------------------------- */
/* Output buffers live in the arena too, so an error anywhere leaks nothing. */
void jout_put(jctx *c, jout *o, const char *s, size_t n) {
    if (!n) return;
    if (o->n + n + 1 > o->cap) {
        if (o->n + n > JINJA_MAX_OUTPUT) jfail(c, 0, "the output grew past %zu MiB", JINJA_MAX_OUTPUT >> 20);
        size_t cap = o->cap ? o->cap : 64;
        while (cap < o->n + n + 1) cap *= 2;
        char *p = jctx_alloc(c, cap);
        if (o->n) memcpy(p, o->p, o->n);
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    o->p[o->n] = 0;
}
static void puts_(jctx *c, jout *o, const char *s) { jout_put(c, o, s, strlen(s)); }

/* A float as JavaScript prints it (the reference renderer's form): the
 * shortest digits that read back, fixed notation for exponents -7 < e < 21,
 * else d.ddde+X. With point, an integral value gets ".0" (a float printed
 * on its own); JSON forms leave it off. */
static void put_float(jctx *c, jout *o, double f, bool point) {
    char buf[64];
    if (isnan(f)) { puts_(c, o, "NaN"); return; }
    if (isinf(f)) { puts_(c, o, f < 0 ? "-Infinity" : "Infinity"); return; }
    if (f == 0) { puts_(c, o, point ? "0.0" : "0"); return; }
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
    char digits[32];
    int nd = 0;
    const char *p = buf;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++) if (*p != '.' && nd < 30) digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char out[96];
    int w = 0;
    if (neg) out[w++] = '-';
    if (exp > -7 && exp < 21) {
        if (exp < 0) {
            out[w++] = '0'; out[w++] = '.';
            for (int i = -1; i > exp; i--) out[w++] = '0';
            for (int i = 0; i < nd; i++) out[w++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++) out[w++] = i < nd ? digits[i] : '0';
            if (nd > exp + 1) { out[w++] = '.'; for (int i = exp + 1; i < nd; i++) out[w++] = digits[i]; }
            else if (point) { out[w++] = '.'; out[w++] = '0'; }
        }
        out[w] = 0;
    } else {
        out[w++] = digits[0];
        if (nd > 1) { out[w++] = '.'; for (int i = 1; i < nd; i++) out[w++] = digits[i]; }
        snprintf(out + w, sizeof out - (size_t)w, "e%c%d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    puts_(c, o, out);
}

static void put_int(jctx *c, jout *o, int64_t i) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)i);
    puts_(c, o, buf);
}

/* str(v) as the reference renderer prints it: none is "", booleans are
 * true/false, lists and dicts are their JSON (", " and ": "). */
void jv_write(jctx *c, jout *o, const jv *v) {
    switch (v->t) {
    case JV_UNDEF: case JV_NONE: return;
    case JV_BOOL: puts_(c, o, v->u.b ? "true" : "false"); return;
    case JV_INT: put_int(c, o, v->u.i); return;
    case JV_FLOAT: put_float(c, o, v->u.f, true); return;
    case JV_STR: jout_put(c, o, v->u.s, v->n); return;
    case JV_LIST: case JV_DICT: case JV_NS: jv_tojson(c, o, v, -1, ", ", ": ", false, 0, 0); return;
    case JV_MACRO: puts_(c, o, "<macro>"); return;
    default: puts_(c, o, "<function>"); return;
    }
}

jv jv_to_str(jctx *c, const jv *v) {
    if (v->t == JV_STR) return *v;
    jout o = { 0 };
    jv_write(c, &o, v);
    return jv_strref(o.p ? o.p : "", o.n);
}

jv jv_concat(jctx *c, const jv *a, const jv *b) {
    jv x = jv_to_str(c, a), y = jv_to_str(c, b);
    char *p = jctx_alloc(c, x.n + y.n + 1);
    memcpy(p, x.u.s, x.n);
    memcpy(p + x.n, y.u.s, y.n);
    return jv_strref(p, x.n + y.n);
}

/* json.dumps's string: escapes " \ and controls; other text as is */
static void put_json_str(jctx *c, jout *o, const char *s, size_t n) {
    puts_(c, o, "\"");
    size_t a = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char buf[8];
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (ch < 0x20) { snprintf(buf, sizeof buf, "\\u%04x", ch); esc = buf; }
        }
        if (esc) { jout_put(c, o, s + a, i - a); puts_(c, o, esc); a = i + 1; }
    }
    jout_put(c, o, s + a, n - a);
    puts_(c, o, "\"");
}

static void newline_indent(jctx *c, jout *o, int indent, int level) {
    puts_(c, o, "\n");
    for (int i = 0; i < indent * level; i++) puts_(c, o, " ");
}

static int key_cmp(const void *a, const void *b) {
    const jv *x = *(const jv *const *)a, *y = *(const jv *const *)b;
    if (x->t == JV_STR && y->t == JV_STR) {
        size_t n = x->n < y->n ? x->n : y->n;
        int r = memcmp(x->u.s, y->u.s, n);
        return r ? r : (x->n > y->n) - (x->n < y->n);
    }
    return 0;
}

void jv_tojson(jctx *c, jout *o, const jv *v, int indent, const char *isep, const char *ksep, bool sort_keys,
               int level, int line) {
    if (level > JINJA_MAX_DEPTH) jfail(c, line, "tojson: value nested too deeply");
    switch (v->t) {
    case JV_UNDEF: case JV_NONE: puts_(c, o, "null"); return;
    case JV_BOOL: puts_(c, o, v->u.b ? "true" : "false"); return;
    case JV_INT: put_int(c, o, v->u.i); return;
    case JV_FLOAT: put_float(c, o, v->u.f, false); return;
    case JV_STR: put_json_str(c, o, v->u.s, v->n); return;
    case JV_LIST: {
        const jlist *l = v->u.l;
        if (!l->n) { puts_(c, o, "[]"); return; }
        puts_(c, o, "[");
        for (size_t i = 0; i < l->n; i++) {
            if (i) puts_(c, o, isep);
            if (indent >= 0) newline_indent(c, o, indent, level + 1);
            jv_tojson(c, o, &l->v[i], indent, isep, ksep, sort_keys, level + 1, line);
        }
        if (indent >= 0) newline_indent(c, o, indent, level);
        puts_(c, o, "]");
        return;
    }
    case JV_DICT: case JV_NS: {
        const jdict *d = v->u.d;
        if (!d->n) { puts_(c, o, "{}"); return; }
        const jv **order = jctx_alloc(c, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++) order[i] = &d->k[i];
        if (sort_keys) qsort(order, d->n, sizeof *order, key_cmp);
        puts_(c, o, "{");
        for (size_t i = 0; i < d->n; i++) {
            size_t k = (size_t)(order[i] - d->k);
            if (i) puts_(c, o, isep);
            if (indent >= 0) newline_indent(c, o, indent, level + 1);
            if (d->k[k].t == JV_STR) put_json_str(c, o, d->k[k].u.s, d->k[k].n);
            else { jv s = jv_to_str(c, &d->k[k]); put_json_str(c, o, s.u.s, s.n); }
            puts_(c, o, ksep);
            jv_tojson(c, o, &d->v[k], indent, isep, ksep, sort_keys, level + 1, line);
        }
        if (indent >= 0) newline_indent(c, o, indent, level);
        puts_(c, o, "}");
        return;
    }
    default: puts_(c, o, "null"); return;   /* macros, functions */
    }
}

/* ---- sizes and iteration ---------------------------------------------------------- */
static size_t utf8_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) if (((unsigned char)s[i] & 0xC0) != 0x80) k++;
    return k;
}

size_t jv_len(jctx *c, const jv *v, int line) {
    switch (v->t) {
    case JV_STR: return utf8_count(v->u.s, v->n);
    case JV_LIST: return v->u.l->n;
    case JV_DICT: case JV_NS: return v->u.d->n;
    case JV_UNDEF: return 0;
    default: jfail(c, line, "a %s has no length", jv_type_name(v));
    }
}

jv jv_iterable(jctx *c, const jv *v, int line) {
    switch (v->t) {
    case JV_LIST: return *v;
    case JV_UNDEF: return jv_list(c);
    case JV_DICT: {
        jv l = jv_list(c);
        for (size_t i = 0; i < v->u.d->n; i++) jl_push(c, l.u.l, v->u.d->k[i]);
        return l;
    }
    case JV_STR: {
        jv l = jv_list(c);
        for (size_t i = 0; i < v->n;) {
            size_t j = i + 1;
            while (j < v->n && ((unsigned char)v->u.s[j] & 0xC0) == 0x80) j++;
            jl_push(c, l.u.l, jv_strref(v->u.s + i, j - i));
            i = j;
        }
        return l;
    }
    default: jfail(c, line, "a %s is not iterable", jv_type_name(v));
    }
}
