/* The Jinja evaluator: statements write to the context's output, expressions
 * give values; scopes are frames (a for loop's body, a macro's call), set
 * writes to the innermost. Errors longjmp out through jfail; everything is
 * in the render's arena, so nothing leaks. Also jinja_parse/render/free. */
#include "engine/text/jinja_internal.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jinja_template { jarena A; jnode *root; };

void jstep(jctx *c, int line) {
    if (++c->steps > JINJA_MAX_STEPS) jfail(c, line, "the template ran past %ld steps", JINJA_MAX_STEPS);
}

static jframe *push_frame(jctx *c, jframe *up) {
    jframe *f = jctx_alloc(c, sizeof *f);
    f->up = up;
    return f;
}

static void setvar(jctx *c, jframe *f, const char *name, jv v) { jd_sets(c, &f->vars, name, v); }

jv jlookup(jctx *c, const char *name) {
    for (jframe *f = c->cur; f; f = f->up) {
        jv *v = jd_gets(&f->vars, name);
        if (v) return *v;
    }
    return jglobal(c, name);
}

/* ---- attribute and item access ------------------------------------------------- */
static bool as_index(const jv *k, int64_t *i) {
    if (k->t == JV_INT) { *i = k->u.i; return true; }
    if (k->t == JV_BOOL) { *i = k->u.b; return true; }
    return false;
}

jv jgetattr(jctx *c, const jv *obj, const char *name, size_t n, int line) {
    if (obj->t == JV_NS) {
        jv *v = jd_get(obj->u.d, jv_strref(name, n));
        return v ? *v : jv_undef();
    }
    /* Python attribute first (methods), then the item, as Jinja's getattr */
    jv m = jmethod(c, obj, name, n, line);
    if (m.t != JV_UNDEF) return m;
    if (obj->t == JV_DICT) {
        jv *v = jd_get(obj->u.d, jv_strref(name, n));
        return v ? *v : jv_undef();
    }
    return jv_undef();
}

jv jgetitem(jctx *c, const jv *obj, const jv *key, int line) {
    int64_t i;
    switch (obj->t) {
    case JV_DICT: {
        jv *v = jd_get(obj->u.d, *key);
        if (v) return *v;
        break;
    }
    case JV_LIST:
        if (as_index(key, &i)) {
            int64_t n = (int64_t)obj->u.l->n;
            if (i < 0) i += n;
            return i >= 0 && i < n ? obj->u.l->v[i] : jv_undef();
        }
        break;
    case JV_STR:
        if (as_index(key, &i)) {
            jv chars = jv_iterable(c, obj, line);
            return jgetitem(c, &chars, key, line);
        }
        break;
    default: break;
    }
    if (key->t == JV_STR) return jgetattr(c, obj, key->u.s, key->n, line);
    return jv_undef();
}

/* Python's slice indices for a sequence of n */
static int64_t slice_index(jctx *c, const jv *e, int64_t n, bool neg, int64_t dflt, int line) {
    if (!e || e->t == JV_NONE || e->t == JV_UNDEF) return dflt;
    int64_t v;
    if (!as_index(e, &v)) jfail(c, line, "slice indices must be integers");
    if (v < 0) { v += n; if (v < 0) v = neg ? -1 : 0; }
    else if (v >= n) v = neg ? n - 1 : n;
    return v;
}

static void slice_bounds(jctx *c, const jv *a, const jv *b, const jv *s, int64_t n, int64_t *start, int64_t *stop,
                         int64_t *step, int line) {
    *step = 1;
    if (s && s->t != JV_NONE && s->t != JV_UNDEF) {
        if (!as_index(s, step)) jfail(c, line, "a slice step must be an integer");
        if (*step == 0) jfail(c, line, "a slice step cannot be zero");
    }
    bool neg = *step < 0;
    *start = slice_index(c, a, n, neg, neg ? n - 1 : 0, line);
    *stop = slice_index(c, b, n, neg, neg ? -1 : n, line);
}

static jv do_slice(jctx *c, const jv *obj, const jv *a, const jv *b, const jv *s, int line) {
    if (obj->t == JV_UNDEF) return jv_undef();
    bool str = obj->t == JV_STR;
    if (!str && obj->t != JV_LIST) jfail(c, line, "cannot slice a %s", jv_type_name(obj));
    jv seq = str ? jv_iterable(c, obj, line) : *obj;
    int64_t n = (int64_t)seq.u.l->n, start, stop, step;
    slice_bounds(c, a, b, s, n, &start, &stop, &step, line);
    jv out = jv_list(c);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) jl_push(c, out.u.l, seq.u.l->v[i]);
    if (!str) return out;
    jout o = { 0 };
    for (size_t i = 0; i < out.u.l->n; i++) jout_put(c, &o, out.u.l->v[i].u.s, out.u.l->v[i].n);
    return jv_strref(o.p ? o.p : "", o.n);
}

/* ---- calls ------------------------------------------------------------------------- */
static void eval_args(jctx *c, const jnode *n, jargs *a) {
    memset(a, 0, sizeof *a);
    a->pos = jctx_alloc(c, sizeof(jv) * (size_t)(n->nkids + 1));
    a->kwv = jctx_alloc(c, sizeof(jv) * (size_t)(n->nkids + 1));
    a->kwn = jctx_alloc(c, sizeof(char *) * (size_t)(n->nkids + 1));
    for (int i = 0; i < n->nkids; i++) {
        jv v = jeval(c, n->kids[i]);
        if (n->names && n->names[i]) { a->kwn[a->nkw] = n->names[i]; a->kwv[a->nkw++] = v; }
        else a->pos[a->npos++] = v;
    }
}

static jv render_body_to_string(jctx *c, const jnode *body) {
    jout o = { 0 }, *saved = c->out;
    c->out = &o;
    jexec(c, body);
    c->out = saved;
    return jv_strref(o.p ? o.p : "", o.n);
}

/* A macro (N_MACRO) or a {% call %} body (N_CALL_BLOCK) invoked with a. */
static jv call_macro(jctx *c, const struct jbound *m, jargs *a, int line) {
    const jnode *def = m->node;
    if (++c->depth > JINJA_MAX_DEPTH) jfail(c, line, "macro calls nested deeper than %d", JINJA_MAX_DEPTH);
    jframe *saved = c->cur, *f = push_frame(c, m->env);
    c->cur = f;
    for (int i = 0; i < def->nnames; i++) {
        jv v = jv_undef();
        bool have = false;
        if (i < a->npos) { v = a->pos[i]; have = true; }
        for (int k = 0; k < a->nkw; k++) if (!strcmp(a->kwn[k], def->names[i])) { v = a->kwv[k]; have = true; }
        if (!have && def->kids[i]) v = jeval(c, def->kids[i]);
        setvar(c, f, def->names[i], v);
    }
    if (a->npos > def->nnames) {
        jv va = jv_list(c);
        for (int i = def->nnames; i < a->npos; i++) jl_push(c, va.u.l, a->pos[i]);
        setvar(c, f, "varargs", va);
    }
    if (a->caller.t == JV_MACRO) setvar(c, f, "caller", a->caller);
    int ctl = c->loop_ctl;
    jv out = render_body_to_string(c, def->kind == N_MACRO ? def->a : def->b);
    c->loop_ctl = ctl;
    c->cur = saved;
    c->depth--;
    return out;
}

jv jcall(jctx *c, const jv *fn, jargs *a, int line) {
    if (fn->t == JV_FUNC) return fn->u.fn->f(c, &fn->u.fn->self, a, line);
    if (fn->t == JV_MACRO) return call_macro(c, fn->u.fn, a, line);
    if (fn->t == JV_UNDEF) jfail(c, line, "calling something undefined");
    jfail(c, line, "a %s is not callable", jv_type_name(fn));
}

/* ---- operators ------------------------------------------------------------------------ */
static jv arith(jctx *c, jop op, const jv *x, const jv *y, int line) {
    if (op == OP_ADD) {
        /* a string and a string, number, boolean, list or dict concatenate, the
         * container as its JSON (as minja, so a DeepSeek template's
         * `'...' + arguments` shows the arguments object) */
        bool xs = x->t == JV_STR, ys = y->t == JV_STR;
        bool xo = jv_is_num(x) || x->t == JV_LIST || x->t == JV_DICT, yo = jv_is_num(y) || y->t == JV_LIST || y->t == JV_DICT;
        if ((xs && (ys || yo)) || (ys && xo)) return jv_concat(c, x, y);
        if (x->t == JV_LIST && y->t == JV_LIST) {
            jv l = jv_list(c);
            for (size_t i = 0; i < x->u.l->n; i++) jl_push(c, l.u.l, x->u.l->v[i]);
            for (size_t i = 0; i < y->u.l->n; i++) jl_push(c, l.u.l, y->u.l->v[i]);
            return l;
        }
    }
    if (op == OP_MUL && ((x->t == JV_STR || x->t == JV_LIST) && y->t == JV_INT)) {
        int64_t k = y->u.i;
        size_t len = x->t == JV_STR ? x->n : x->u.l->n;
        if (k < 0 || len == 0) k = 0;   /* nothing to repeat: done at once, whatever the count */
        if (x->t == JV_STR) {
            if (k && x->n * (uint64_t)k > JINJA_MAX_OUTPUT) jfail(c, line, "string repetition too large");
            jout o = { 0 };
            for (int64_t i = 0; i < k; i++) jout_put(c, &o, x->u.s, x->n);
            return jv_strref(o.p ? o.p : "", o.n);
        }
        if (k && x->u.l->n * (uint64_t)k > (1u << 24)) jfail(c, line, "list repetition too large");
        jv l = jv_list(c);
        for (int64_t i = 0; i < k; i++)
            for (size_t j = 0; j < x->u.l->n; j++) jl_push(c, l.u.l, x->u.l->v[j]);
        return l;
    }
    if (op == OP_MUL && x->t == JV_INT && (y->t == JV_STR || y->t == JV_LIST)) return arith(c, op, y, x, line);
    if (!jv_is_num(x) || !jv_is_num(y)) {
        static const char *const sym[] = { "+", "-", "*", "/", "//", "%", "**" };
        jfail(c, line, "unsupported operand types for %s: %s and %s", sym[op], jv_type_name(x), jv_type_name(y));
    }
    bool ints = x->t != JV_FLOAT && y->t != JV_FLOAT;
    /* integers as they are (a round trip through double can leave int64's range); booleans as 0/1 */
    int64_t a = x->t == JV_INT ? x->u.i : x->t == JV_FLOAT ? 0 : (int64_t)jv_num(x);
    int64_t b = y->t == JV_INT ? y->u.i : y->t == JV_FLOAT ? 0 : (int64_t)jv_num(y);
    double fa = jv_num(x), fb = jv_num(y);
    int64_t r;
    switch (op) {
    case OP_ADD: if (ints && !__builtin_add_overflow(a, b, &r)) return jv_int(r); return jv_float(fa + fb);
    case OP_SUB: if (ints && !__builtin_sub_overflow(a, b, &r)) return jv_int(r); return jv_float(fa - fb);
    case OP_MUL: if (ints && !__builtin_mul_overflow(a, b, &r)) return jv_int(r); return jv_float(fa * fb);
    case OP_DIV:
        if (fb == 0) jfail(c, line, "division by zero");
        return jv_float(fa / fb);
    case OP_FLOORDIV:
        if (fb == 0) jfail(c, line, "division by zero");
        if (ints && !(a == INT64_MIN && b == -1)) {
            int64_t q = a / b;
            if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
            return jv_int(q);
        }
        return jv_float(floor(fa / fb));
    case OP_MOD:   /* the remainder takes the dividend's sign, as in the reference (JavaScript) */
        if (fb == 0) jfail(c, line, "modulo by zero");
        if (ints) return jv_int(b == -1 ? 0 : a % b);
        return jv_float(fmod(fa, fb));
    case OP_POW:
        if (ints && b >= 0) {
            if (a == 0) return jv_int(b == 0);
            if (a == 1) return jv_int(1);
            if (a == -1) return jv_int(b % 2 ? -1 : 1);
            int64_t acc = 1;   /* |a| >= 2 overflows within 63 rounds */
            bool ovf = false;
            for (int64_t i = 0; i < b && !ovf; i++) ovf = __builtin_mul_overflow(acc, a, &acc);
            if (!ovf) return jv_int(acc);
        }
        return jv_float(pow(fa, fb));
    default: break;
    }
    return jv_undef();
}

static bool contains(jctx *c, const jv *hay, const jv *needle, int line) {
    switch (hay->t) {
    case JV_STR:
        if (needle->t != JV_STR) jfail(c, line, "'in <string>' needs a string on the left, not a %s", jv_type_name(needle));
        if (!needle->n) return true;
        for (size_t i = 0; i + needle->n <= hay->n; i++)
            if (!memcmp(hay->u.s + i, needle->u.s, needle->n)) return true;
        return false;
    case JV_LIST:
        for (size_t i = 0; i < hay->u.l->n; i++) if (jv_eq(&hay->u.l->v[i], needle)) return true;
        return false;
    case JV_DICT: case JV_NS: return jd_get(hay->u.d, *needle) != NULL;
    case JV_UNDEF: return false;
    default: jfail(c, line, "'in' needs a string, list or dict on the right, not a %s", jv_type_name(hay));
    }
}

/* ---- expressions ------------------------------------------------------------------------ */
jv jeval(jctx *c, const jnode *n) {
    jstep(c, n->line);
    switch (n->kind) {
    case N_LIT: return n->lit;
    case N_NAME: return jlookup(c, n->name);
    case N_ATTR: {
        jv o = jeval(c, n->a);
        return jgetattr(c, &o, n->name, strlen(n->name), n->line);
    }
    case N_ITEM: {
        jv o = jeval(c, n->a), k = jeval(c, n->b);
        return jgetitem(c, &o, &k, n->line);
    }
    case N_SLICE: {
        jv o = jeval(c, n->a), a = n->b ? jeval(c, n->b) : jv_none(), b = n->c ? jeval(c, n->c) : jv_none(),
           s = n->d ? jeval(c, n->d) : jv_none();
        return do_slice(c, &o, &a, &b, &s, n->line);
    }
    case N_CALL: {
        jv fn = jeval(c, n->a);
        jargs a;
        eval_args(c, n, &a);
        a.caller = jv_undef();
        return jcall(c, &fn, &a, n->line);
    }
    case N_FILTER: {
        jv v = jeval(c, n->a);
        jargs a;
        eval_args(c, n, &a);
        return jfilter(c, n->name, &v, &a, n->line);
    }
    case N_TEST: {
        jv v = jeval(c, n->a);
        jargs a;
        eval_args(c, n, &a);
        bool r = jtest(c, n->name, &v, &a, n->line);
        return jv_bool(n->op ? !r : r);
    }
    case N_NOT: { jv v = jeval(c, n->a); return jv_bool(!jv_truthy(&v)); }
    case N_NEG: case N_POS: {
        jv v = jeval(c, n->a);
        if (!jv_is_num(&v)) jfail(c, n->line, "bad operand type for unary %c: %s", n->kind == N_NEG ? '-' : '+', jv_type_name(&v));
        if (n->kind == N_POS) return v.t == JV_BOOL ? jv_int(v.u.b) : v;
        if (v.t == JV_FLOAT) return jv_float(-v.u.f);
        int64_t i = v.t == JV_BOOL ? v.u.b : v.u.i;
        return i == INT64_MIN ? jv_float(-(double)i) : jv_int(-i);
    }
    case N_AND: { jv a = jeval(c, n->a); return jv_truthy(&a) ? jeval(c, n->b) : a; }
    case N_OR: { jv a = jeval(c, n->a); return jv_truthy(&a) ? a : jeval(c, n->b); }
    case N_COND: {
        jv cond = jeval(c, n->b);
        if (jv_truthy(&cond)) return jeval(c, n->a);
        return n->c ? jeval(c, n->c) : jv_undef();
    }
    case N_BIN: {
        jv x = jeval(c, n->a), y = jeval(c, n->b);
        switch (n->op) {
        case OP_CONCAT: return jv_concat(c, &x, &y);
        case OP_EQ: return jv_bool(jv_eq(&x, &y));
        case OP_NE: return jv_bool(!jv_eq(&x, &y));
        case OP_LT: return jv_bool(jv_cmp(c, &x, &y, n->line) < 0);
        case OP_LE: return jv_bool(jv_cmp(c, &x, &y, n->line) <= 0);
        case OP_GT: return jv_bool(jv_cmp(c, &x, &y, n->line) > 0);
        case OP_GE: return jv_bool(jv_cmp(c, &x, &y, n->line) >= 0);
        case OP_IN: return jv_bool(contains(c, &y, &x, n->line));
        case OP_NOTIN: return jv_bool(!contains(c, &y, &x, n->line));
        default: return arith(c, (jop)n->op, &x, &y, n->line);
        }
    }
    case N_LIST: case N_TUPLE: {
        jv l = jv_list(c);
        for (int i = 0; i < n->nkids; i++) jl_push(c, l.u.l, jeval(c, n->kids[i]));
        l.tuple = n->kind == N_TUPLE;
        return l;
    }
    case N_DICT: {
        jv d = jv_dict(c);
        for (int i = 0; i + 1 < n->nkids; i += 2) {
            jv k = jeval(c, n->kids[i]);
            jd_set(c, d.u.d, k, jeval(c, n->kids[i + 1]));
        }
        return d;
    }
    default: jfail(c, n->line, "internal: not an expression");
    }
}

/* ---- statements ------------------------------------------------------------------------- */
static void bind_targets(jctx *c, jframe *f, const jnode *n, const jv *v) {
    if (n->nnames == 1) { setvar(c, f, n->names[0], *v); return; }
    if (v->t != JV_LIST) jfail(c, n->line, "cannot unpack a %s into %d names", jv_type_name(v), n->nnames);
    if ((int)v->u.l->n != n->nnames)
        jfail(c, n->line, "cannot unpack %zu values into %d names", v->u.l->n, n->nnames);
    for (int i = 0; i < n->nnames; i++) setvar(c, f, n->names[i], v->u.l->v[i]);
}

static jv loop_cycle(jctx *c, const jv *self, jargs *a, int line) {
    (void)c;
    (void)line;
    if (!a->npos) return jv_undef();
    return a->pos[self->u.i % a->npos];
}

static void exec_for(jctx *c, const jnode *n) {
    jv src = jeval(c, n->a);
    jv items = jv_iterable(c, &src, n->line);
    jframe *outer = c->cur;
    if (n->b) {   /* for x in y if cond: filter first, so loop.length counts what is kept */
        jv kept = jv_list(c);
        jframe *f = push_frame(c, outer);
        c->cur = f;
        for (size_t i = 0; i < items.u.l->n; i++) {
            jstep(c, n->line);
            bind_targets(c, f, n, &items.u.l->v[i]);
            jv ok = jeval(c, n->b);
            if (jv_truthy(&ok)) jl_push(c, kept.u.l, items.u.l->v[i]);
        }
        c->cur = outer;
        items = kept;
    }
    /* one frame and one loop object, refilled each iteration: a loop of a
     * million items costs steps, not memory */
    size_t len = items.u.l->n;
    jframe *f = push_frame(c, outer);
    jv loop = jv_dict(c);
    jdict *d = loop.u.d;
    struct jbound *cy = jctx_alloc(c, sizeof *cy);
    cy->f = loop_cycle;
    cy->name = "cycle";
    jv cyv = { .t = JV_FUNC, .u.fn = cy };
    for (size_t i = 0; i < len; i++) {
        jstep(c, n->line);
        f->vars.n = 0;
        jd_sets(c, d, "index0", jv_int((int64_t)i));
        jd_sets(c, d, "index", jv_int((int64_t)i + 1));
        jd_sets(c, d, "revindex", jv_int((int64_t)(len - i)));
        jd_sets(c, d, "revindex0", jv_int((int64_t)(len - i - 1)));
        jd_sets(c, d, "first", jv_bool(i == 0));
        jd_sets(c, d, "last", jv_bool(i + 1 == len));
        jd_sets(c, d, "length", jv_int((int64_t)len));
        jd_sets(c, d, "depth", jv_int(1));
        jd_sets(c, d, "depth0", jv_int(0));
        jd_sets(c, d, "previtem", i > 0 ? items.u.l->v[i - 1] : jv_undef());
        jd_sets(c, d, "nextitem", i + 1 < len ? items.u.l->v[i + 1] : jv_undef());
        cy->self = jv_int((int64_t)i);
        jd_sets(c, d, "cycle", cyv);
        setvar(c, f, "loop", loop);
        bind_targets(c, f, n, &items.u.l->v[i]);
        c->cur = f;
        jexec(c, n->c);
        c->cur = outer;
        int ctl = c->loop_ctl;
        c->loop_ctl = 0;
        if (ctl == 1) break;
    }
    if (len == 0 && n->d) jexec(c, n->d);
}

static jv apply_chain(jctx *c, const jnode *f, jv v) {
    if (f->a) v = apply_chain(c, f->a, v);
    jargs a;
    eval_args(c, f, &a);
    return jfilter(c, f->name, &v, &a, f->line);
}

static void assign(jctx *c, const jnode *n, jv v) {
    if (n->name) {   /* ns.attr = v */
        jv ns = jlookup(c, n->names[0]);
        if (ns.t != JV_NS && ns.t != JV_DICT)
            jfail(c, n->line, "cannot set '%s.%s': '%s' is a %s, not a namespace", n->names[0], n->name, n->names[0], jv_type_name(&ns));
        jd_sets(c, ns.u.d, n->name, v);
        return;
    }
    bind_targets(c, c->cur, n, &v);
}

void jexec(jctx *c, const jnode *n) {
    jstep(c, n->line);
    switch (n->kind) {
    case N_BODY:
        for (int i = 0; i < n->nkids && !c->loop_ctl; i++) jexec(c, n->kids[i]);
        return;
    case N_TEXT: jout_put(c, c->out, n->lit.u.s, n->lit.n); return;
    case N_OUTPUT: { jv v = jeval(c, n->a); jv_write(c, c->out, &v); return; }
    case N_IF: {
        jv cond = jeval(c, n->a);
        if (jv_truthy(&cond)) jexec(c, n->b);
        else if (n->c) jexec(c, n->c);
        return;
    }
    case N_FOR: exec_for(c, n); return;
    case N_SET: assign(c, n, jeval(c, n->a)); return;
    case N_SET_BLOCK: {
        jv v = render_body_to_string(c, n->a);
        if (n->b) v = apply_chain(c, n->b, v);
        assign(c, n, v);
        return;
    }
    case N_MACRO: {
        struct jbound *m = jctx_alloc(c, sizeof *m);
        m->node = n;
        m->env = c->cur;
        m->name = n->name;
        jv v = { .t = JV_MACRO, .u.fn = m };
        setvar(c, c->cur, n->name, v);
        return;
    }
    case N_CALL_BLOCK: {
        struct jbound *cb = jctx_alloc(c, sizeof *cb);
        cb->node = n;
        cb->env = c->cur;
        cb->name = "caller";
        jv fn = jeval(c, n->a->a);
        jargs a;
        eval_args(c, n->a, &a);
        a.caller = (jv){ .t = JV_MACRO, .u.fn = cb };
        jv r = jcall(c, &fn, &a, n->line);
        jv_write(c, c->out, &r);
        return;
    }
    case N_FILTER_BLOCK: {
        jv v = render_body_to_string(c, n->b);
        v = apply_chain(c, n->a, v);
        jv_write(c, c->out, &v);
        return;
    }
    case N_BREAK: c->loop_ctl = 1; return;
    case N_CONTINUE: c->loop_ctl = 2; return;
    case N_DO: (void)jeval(c, n->a); return;
    default: (void)jeval(c, n); return;
    }
}

/* ---- the public API ------------------------------------------------------------------------ */
jinja_template *jinja_parse(const char *src, size_t len, const jinja_options *opts, char *err, size_t errlen) {
    static const jinja_options hf = { .trim_blocks = true, .lstrip_blocks = true };
    if (err && errlen) err[0] = 0;
    jinja_template *t = calloc(1, sizeof *t);
    if (!t) { if (err && errlen) snprintf(err, errlen, "out of memory"); return NULL; }
    t->A.cap_total = JINJA_MAX_MEMORY;
    jtoks toks = { 0 };
    if (!jinja_lex(src ? src : "", src ? len : 0, opts ? opts : &hf, &toks, &t->A, err, errlen) ||
        !(t->root = jinja_parse_tokens(&toks, &t->A, err, errlen))) {
        jinja_free(t);
        return NULL;
    }
    return t;
}

char *jinja_render(const jinja_template *t, const cJSON *vars, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    jarena A = { .cap_total = JINJA_MAX_MEMORY };
    jout o = { 0 };
    jctx c = { .A = &A, .err = err, .errlen = errlen, .out = &o };
    char *res = NULL;
    if (setjmp(c.fail)) {
        jarena_free(&A);
        if (err && errlen && !err[0]) snprintf(err, errlen, "template error");
        return NULL;
    }
    c.top = c.cur = push_frame(&c, NULL);
    if (cJSON_IsObject(vars))
        for (const cJSON *x = vars->child; x; x = x->next)
            if (x->string) setvar(&c, c.top, x->string, jv_from_cjson(&c, x));
    jexec(&c, t->root);
    res = malloc(o.n + 1);
    if (res) { if (o.n) memcpy(res, o.p, o.n); res[o.n] = 0; }
    else if (err && errlen) snprintf(err, errlen, "out of memory");
    jarena_free(&A);
    return res;
}

void jinja_free(jinja_template *t) {
    if (!t) return;
    jarena_free(&t->A);
    free(t);
}
