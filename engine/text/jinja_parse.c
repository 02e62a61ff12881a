/* The Jinja parser: tokens to an AST (jinja_internal.h), by recursive
 * descent with Jinja2's precedence (or < and < not < comparisons < + - <
 * ~ < * / // % < ** < unary, with filters, tests, calls, attributes and
 * subscripts binding tightest). Errors name the line and the construct. */
#include "engine/text/jinja_internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>


typedef struct parser {
    const jtoks *t;
    size_t p;
    jarena *A;
    jmp_buf fail;
    char *err;
    size_t errlen;
    int nest;
} parser;

static _Noreturn void pfail(parser *P, const char *fmt, ...) {
    if (P->err && P->errlen) {
        int line = P->t->v[P->p < P->t->n ? P->p : P->t->n - 1].line;
        int k = snprintf(P->err, P->errlen, "line %d: ", line);
        if (k > 0 && (size_t)k < P->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(P->err + k, P->errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    longjmp(P->fail, 1);
}

static void *palloc(parser *P, size_t n) {
    void *p = jalloc(P->A, n);
    if (!p) pfail(P, "template too large");
    return p;
}

static const jtok *cur(parser *P) { return &P->t->v[P->p]; }
static bool is_op(parser *P, const char *op) {
    const jtok *t = cur(P);
    return t->k == TK_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static bool is_name(parser *P, const char *nm) {
    const jtok *t = cur(P);
    return t->k == TK_NAME && t->n == strlen(nm) && !memcmp(t->s, nm, t->n);
}
static bool is_name_at(parser *P, size_t at, const char *nm) {
    if (at >= P->t->n) return false;
    const jtok *t = &P->t->v[at];
    return t->k == TK_NAME && t->n == strlen(nm) && !memcmp(t->s, nm, t->n);
}
static void next(parser *P) { if (cur(P)->k != TK_EOF) P->p++; }
static bool accept_op(parser *P, const char *op) { if (is_op(P, op)) { next(P); return true; } return false; }
static bool accept_name(parser *P, const char *nm) { if (is_name(P, nm)) { next(P); return true; } return false; }

static const char *tok_desc(parser *P) {
    const jtok *t = cur(P);
    static _Thread_local char buf[64];
    switch (t->k) {
    case TK_EOF: return "the end of the template";
    case TK_TEXT: return "text";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_END: return "'%}'";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_STRING: return "a string";
    case TK_INT: case TK_FLOAT: return "a number";
    default: snprintf(buf, sizeof buf, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
    }
}

static void expect_op(parser *P, const char *op, const char *ctx) {
    if (!accept_op(P, op)) pfail(P, "expected '%s' %s, found %s", op, ctx, tok_desc(P));
}

static const char *name_dup(parser *P, const jtok *t) {
    char *s = palloc(P, t->n + 1);
    memcpy(s, t->s, t->n);
    return s;
}

static const char *expect_ident(parser *P, const char *ctx) {
    if (cur(P)->k != TK_NAME) pfail(P, "expected a name %s, found %s", ctx, tok_desc(P));
    const char *s = name_dup(P, cur(P));
    next(P);
    return s;
}

static jnode *mk(parser *P, jnode_kind k) {
    jnode *n = palloc(P, sizeof *n);
    n->kind = (uint8_t)k;
    n->line = cur(P)->line;
    return n;
}

/* a growing node list */
typedef struct { jnode **v; const char **nm; int n, cap; } nlist;
static void nl_push(parser *P, nlist *l, jnode *x, const char *name) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        jnode **v = palloc(P, sizeof *v * (size_t)cap);
        const char **nm = palloc(P, sizeof *nm * (size_t)cap);
        if (l->n) { memcpy(v, l->v, sizeof *v * (size_t)l->n); memcpy(nm, l->nm, sizeof *nm * (size_t)l->n); }
        l->v = v;
        l->nm = nm;
        l->cap = cap;
    }
    l->v[l->n] = x;
    l->nm[l->n++] = name;
}

/* A node of kind k whose kids are l's (tuples, lists, dicts): the one place
 * that hands a list over, so the literal forms cannot drift apart. */
static jnode *mk_seq(parser *P, jnode_kind k, const nlist *l) {
    jnode *n = mk(P, k);
    n->kids = l->v;
    n->nkids = l->n;
    return n;
}

static jnode *expr(parser *P);
static jnode *expr_nocond(parser *P);
static jnode *unary(parser *P, bool with_filter);
static jnode *body(parser *P, const char *const *ends, const char **found);

static void enter(parser *P) { if (++P->nest > JINJA_MAX_NEST) pfail(P, "expressions or blocks nested too deeply"); }

/* ---- expressions ---------------------------------------------------------- */
static void call_args(parser *P, jnode *n) {
    nlist l = { 0 };
    while (!is_op(P, ")")) {
        if (cur(P)->k == TK_EOF) pfail(P, "unclosed '(' in a call");
        const char *kw = NULL;
        if (cur(P)->k == TK_NAME && P->p + 1 < P->t->n && P->t->v[P->p + 1].k == TK_OP &&
            P->t->v[P->p + 1].n == 1 && P->t->v[P->p + 1].s[0] == '=') {
            kw = name_dup(P, cur(P));
            next(P); next(P);
        } else if (l.n && l.nm[l.n - 1]) {
            pfail(P, "a positional argument after a keyword argument");
        }
        nl_push(P, &l, expr(P), kw);
        if (!accept_op(P, ",")) break;
    }
    expect_op(P, ")", "to close the call's arguments");
    n->kids = l.v;
    n->names = l.nm;
    n->nkids = l.n;
}

/* A list [a, b] or a dict {k: v} (pairs) after its opener, up to close; a
 * trailing comma is allowed. One loop, so both literals parse alike. */
static jnode *seq_literal(parser *P, const char *close, const char *what, jnode_kind k, bool pairs) {
    nlist l = { 0 };
    while (!is_op(P, close)) {
        nl_push(P, &l, expr(P), NULL);
        if (pairs) {
            expect_op(P, ":", "between a dict key and its value");
            nl_push(P, &l, expr(P), NULL);
        }
        if (!accept_op(P, ",")) break;
    }
    expect_op(P, close, what);
    return mk_seq(P, k, &l);
}

/* fn(...) after its '(': a call in postfix position and after a filter. */
static jnode *call_of(parser *P, jnode *fn) {
    jnode *c = mk(P, N_CALL);
    c->a = fn;
    call_args(P, c);
    return c;
}

static jnode *primary(parser *P) {
    const jtok *t = cur(P);
    jnode *n;
    switch (t->k) {
    case TK_NAME:
        n = mk(P, N_LIT);
        if (is_name(P, "true") || is_name(P, "True")) n->lit = jv_bool(true);
        else if (is_name(P, "false") || is_name(P, "False")) n->lit = jv_bool(false);
        else if (is_name(P, "none") || is_name(P, "None")) n->lit = jv_none();
        else { n->kind = N_NAME; n->name = name_dup(P, t); }
        next(P);
        return n;
    case TK_STRING: {
        /* adjacent literals concatenate */
        size_t total = 0, q = P->p;
        while (P->t->v[q].k == TK_STRING) total += P->t->v[q++].n;
        char *s = palloc(P, total + 1);
        size_t w = 0;
        while (cur(P)->k == TK_STRING) { memcpy(s + w, cur(P)->s, cur(P)->n); w += cur(P)->n; next(P); }
        n = mk(P, N_LIT);
        n->lit = jv_strref(s, total);
        return n;
    }
    case TK_INT: n = mk(P, N_LIT); n->lit = jv_int(t->i); next(P); return n;
    case TK_FLOAT: n = mk(P, N_LIT); n->lit = jv_float(t->f); next(P); return n;
    case TK_OP:
        if (accept_op(P, "(")) {
            if (accept_op(P, ")")) { n = mk(P, N_TUPLE); return n; }
            jnode *first = expr(P);
            if (!is_op(P, ",")) { expect_op(P, ")", "to close '('"); return first; }
            nlist l = { 0 };
            nl_push(P, &l, first, NULL);
            while (accept_op(P, ",") && !is_op(P, ")")) nl_push(P, &l, expr(P), NULL);
            expect_op(P, ")", "to close a tuple");
            return mk_seq(P, N_TUPLE, &l);
        }
        if (accept_op(P, "[")) return seq_literal(P, "]", "to close a list", N_LIST, false);
        if (accept_op(P, "{")) return seq_literal(P, "}", "to close a dict", N_DICT, true);
        break;
    default: break;
    }
    pfail(P, "expected an expression, found %s", tok_desc(P));
}

static jnode *subscript(parser *P, jnode *obj) {
    jnode *a = NULL, *b = NULL, *c = NULL;
    bool slice = false;
    if (!is_op(P, ":")) a = expr(P);
    if (accept_op(P, ":")) {
        slice = true;
        if (!is_op(P, "]") && !is_op(P, ":")) b = expr(P);
        if (accept_op(P, ":") && !is_op(P, "]")) c = expr(P);
    }
    expect_op(P, "]", "to close a subscript");
    jnode *n = mk(P, slice ? N_SLICE : N_ITEM);
    n->a = obj;
    n->b = a;
    if (slice) { n->c = b; n->d = c; }
    if (!slice && !a) pfail(P, "an empty subscript '[]'");
    return n;
}

static jnode *postfix(parser *P, jnode *n) {
    for (;;) {
        if (accept_op(P, ".")) {
            jnode *g;
            if (cur(P)->k == TK_INT) {   /* x.0 is x[0] */
                g = mk(P, N_ITEM);
                g->b = mk(P, N_LIT);
                g->b->lit = jv_int(cur(P)->i);
                next(P);
            } else {
                g = mk(P, N_ATTR);
                g->name = expect_ident(P, "after '.'");
            }
            g->a = n;
            n = g;
        } else if (accept_op(P, "[")) {
            n = subscript(P, n);
        } else if (accept_op(P, "(")) {
            n = call_of(P, n);
        } else {
            return n;
        }
    }
}

static jnode *filter_expr(parser *P, jnode *n) {
    for (;;) {
        if (accept_op(P, "|")) {
            jnode *f = mk(P, N_FILTER);
            f->name = expect_ident(P, "after '|'");
            while (accept_op(P, ".")) {   /* dotted filter names: treat as the last part */
                f->name = expect_ident(P, "after '.' in a filter name");
            }
            f->a = n;
            if (accept_op(P, "(")) call_args(P, f);
            n = f;
        } else if (is_name(P, "is")) {
            next(P);
            jnode *t = mk(P, N_TEST);
            if (accept_name(P, "not")) t->op = 1;
            t->name = expect_ident(P, "after 'is'");
            t->a = n;
            if (accept_op(P, "(")) call_args(P, t);
            else {
                const jtok *c = cur(P);
                bool arg = (c->k == TK_NAME && !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") &&
                            !is_name(P, "if") && !is_name(P, "in") && !is_name(P, "not") && !is_name(P, "is")) ||
                           c->k == TK_STRING || c->k == TK_INT || c->k == TK_FLOAT ||
                           is_op(P, "[") || is_op(P, "{") || is_op(P, "(") || is_op(P, "-");
                if (arg) {
                    jnode *x = postfix(P, is_op(P, "-") ? unary(P, false) : primary(P));
                    t->kids = palloc(P, sizeof *t->kids);
                    t->names = palloc(P, sizeof *t->names);
                    t->kids[0] = x;
                    t->nkids = 1;
                }
            }
            n = t;
        } else if (accept_op(P, "(")) {
            n = call_of(P, n);
        } else {
            return n;
        }
    }
}

static jnode *unary(parser *P, bool with_filter) {
    enter(P);
    jnode *n;
    if (is_op(P, "-") || is_op(P, "+")) {
        n = mk(P, is_op(P, "-") ? N_NEG : N_POS);
        next(P);
        n->a = unary(P, false);
    } else {
        n = primary(P);
    }
    n = postfix(P, n);
    if (with_filter) n = filter_expr(P, n);
    P->nest--;
    return n;
}

static jnode *bin(parser *P, jop op, jnode *l, jnode *r) {
    jnode *n = mk(P, N_BIN);
    n->op = (uint8_t)op;
    n->a = l;
    n->b = r;
    return n;
}

static jnode *pow_expr(parser *P) {
    jnode *l = unary(P, true);
    while (accept_op(P, "**")) l = bin(P, OP_POW, l, unary(P, true));
    return l;
}
static jnode *math2(parser *P) {
    jnode *l = pow_expr(P);
    for (;;) {
        if (accept_op(P, "*")) l = bin(P, OP_MUL, l, pow_expr(P));
        else if (accept_op(P, "/")) l = bin(P, OP_DIV, l, pow_expr(P));
        else if (accept_op(P, "//")) l = bin(P, OP_FLOORDIV, l, pow_expr(P));
        else if (accept_op(P, "%")) l = bin(P, OP_MOD, l, pow_expr(P));
        else return l;
    }
}
static jnode *concat(parser *P) {
    jnode *l = math2(P);
    while (accept_op(P, "~")) l = bin(P, OP_CONCAT, l, math2(P));
    return l;
}
static jnode *math1(parser *P) {
    jnode *l = concat(P);
    for (;;) {
        if (accept_op(P, "+")) l = bin(P, OP_ADD, l, concat(P));
        else if (accept_op(P, "-")) l = bin(P, OP_SUB, l, concat(P));
        else return l;
    }
}
static jnode *compare(parser *P) {
    jnode *l = math1(P), *res = NULL;
    for (;;) {
        jop op;
        if (accept_op(P, "==")) op = OP_EQ;
        else if (accept_op(P, "!=")) op = OP_NE;
        else if (accept_op(P, "<=")) op = OP_LE;
        else if (accept_op(P, ">=")) op = OP_GE;
        else if (accept_op(P, "<")) op = OP_LT;
        else if (accept_op(P, ">")) op = OP_GT;
        else if (accept_name(P, "in")) op = OP_IN;
        else if (is_name(P, "not") && is_name_at(P, P->p + 1, "in")) { next(P); next(P); op = OP_NOTIN; }
        else break;
        jnode *r = math1(P);
        jnode *c = bin(P, op, l, r);
        if (res) {   /* a < b < c is a < b and b < c */
            jnode *a = mk(P, N_AND);
            a->a = res;
            a->b = c;
            res = a;
        } else {
            res = c;
        }
        l = r;
    }
    return res ? res : l;
}
static jnode *not_expr(parser *P) {
    if (is_name(P, "not")) {
        enter(P);
        jnode *n = mk(P, N_NOT);
        next(P);
        n->a = not_expr(P);
        P->nest--;
        return n;
    }
    return compare(P);
}
static jnode *and_expr(parser *P) {
    jnode *l = not_expr(P);
    while (accept_name(P, "and")) { jnode *n = mk(P, N_AND); n->a = l; n->b = not_expr(P); l = n; }
    return l;
}
static jnode *or_expr(parser *P) {
    jnode *l = and_expr(P);
    while (accept_name(P, "or")) { jnode *n = mk(P, N_OR); n->a = l; n->b = and_expr(P); l = n; }
    return l;
}
static jnode *expr(parser *P) {
    enter(P);
    jnode *n = or_expr(P);
    while (is_name(P, "if")) {   /* x if c else y; a missing else gives undefined */
        next(P);
        jnode *c = mk(P, N_COND);
        c->a = n;
        c->b = or_expr(P);
        if (accept_name(P, "else")) c->c = expr(P);
        n = c;
    }
    P->nest--;
    return n;
}
static jnode *expr_nocond(parser *P) {
    enter(P);
    jnode *n = or_expr(P);
    P->nest--;
    return n;
}

/* ---- statements --------------------------------------------------------------- */
static void end_block(parser *P, const char *tag) {
    if (cur(P)->k != TK_BLOCK_END) pfail(P, "expected '%%}' to end '%s', found %s", tag, tok_desc(P));
    next(P);
}

/* for/set targets: a name, or names separated by commas (optionally in parentheses) */
static void targets(parser *P, jnode *n, const char *ctx) {
    nlist l = { 0 };
    bool paren = accept_op(P, "(");
    do {
        nl_push(P, &l, NULL, expect_ident(P, ctx));
    } while (accept_op(P, ",") && cur(P)->k == TK_NAME);
    if (paren) expect_op(P, ")", "to close the targets");
    n->names = l.nm;
    n->nnames = l.n;
}

static void params(parser *P, jnode *n, const char *what) {
    nlist l = { 0 };
    if (accept_op(P, "(")) {
        while (!is_op(P, ")")) {
            const char *nm = expect_ident(P, what);
            jnode *def = NULL;
            if (accept_op(P, "=")) def = expr(P);
            nl_push(P, &l, def, nm);
            if (!accept_op(P, ",")) break;
        }
        expect_op(P, ")", "to close the parameters");
    }
    n->kids = l.v;
    n->names = l.nm;
    n->nkids = n->nnames = l.n;
}

static jnode *filter_chain(parser *P) {   /* name(args) | name... with a NULL innermost operand */
    jnode *n = NULL;
    do {
        jnode *f = mk(P, N_FILTER);
        f->name = expect_ident(P, "for a filter");
        f->a = n;
        if (accept_op(P, "(")) call_args(P, f);
        n = f;
    } while (accept_op(P, "|"));
    return n;
}

/* The body up to {% end %}, which is consumed. */
static jnode *until(parser *P, const char *end) {
    const char *const e[] = { end, NULL };
    const char *found;
    jnode *b = body(P, e, &found);
    next(P);
    end_block(P, end);
    return b;
}

/* After a body that stopped at `found` ("else" or end): the else branch's
 * body through end, or NULL when there is none; end's tag is consumed. */
static jnode *else_until(parser *P, const char *found, const char *end) {
    next(P);
    if (!strcmp(found, "else")) {
        end_block(P, "else");
        return until(P, end);
    }
    end_block(P, end);
    return NULL;
}

/* More expressions after a first one and a comma: a tuple (for x in a, b; set a, b = 1, 2; {{ a, b }}). */
static jnode *tuple_rest(parser *P, jnode *first, bool nocond) {
    if (!is_op(P, ",")) return first;
    nlist l = { 0 };
    nl_push(P, &l, first, NULL);
    while (accept_op(P, ",")) nl_push(P, &l, nocond ? expr_nocond(P) : expr(P), NULL);
    return mk_seq(P, N_TUPLE, &l);
}

static jnode *statement(parser *P) {
    const char *tag = cur(P)->k == TK_NAME ? name_dup(P, cur(P)) : NULL;
    if (!tag) pfail(P, "expected a tag name after '{%%', found %s", tok_desc(P));
    int line = cur(P)->line;
    next(P);
    jnode *n;
    const char *found;
    if (!strcmp(tag, "if") || !strcmp(tag, "elif")) {
        n = mk(P, N_IF);
        n->line = line;
        n->a = expr(P);
        end_block(P, tag);
        static const char *const e[] = { "elif", "else", "endif", NULL };
        n->b = body(P, e, &found);
        if (!strcmp(found, "elif")) n->c = statement(P);   /* consumes through endif */
        else n->c = else_until(P, found, "endif");
        return n;
    }
    if (!strcmp(tag, "for")) {
        n = mk(P, N_FOR);
        n->line = line;
        targets(P, n, "after 'for'");
        if (!accept_name(P, "in")) pfail(P, "expected 'in' in 'for', found %s", tok_desc(P));
        n->a = tuple_rest(P, expr_nocond(P), true);
        if (accept_name(P, "if")) n->b = expr_nocond(P);
        if (accept_name(P, "recursive"))   /* the reference does not parse it; no chat template is known to use it */
            pfail(P, "recursive for loops are not supported");
        end_block(P, "for");
        static const char *const e[] = { "else", "endfor", NULL };
        n->c = body(P, e, &found);
        n->d = else_until(P, found, "endfor");
        return n;
    }
    if (!strcmp(tag, "set")) {
        n = mk(P, N_SET);
        n->line = line;
        targets(P, n, "after 'set'");
        if (n->nnames == 1 && accept_op(P, ".")) n->name = expect_ident(P, "after '.' in 'set'");
        if (accept_op(P, "=")) {
            n->a = tuple_rest(P, expr(P), false);
            end_block(P, "set");
            return n;
        }
        if (n->nnames != 1) pfail(P, "a block 'set' takes one name");
        n->kind = N_SET_BLOCK;
        if (accept_op(P, "|")) n->b = filter_chain(P);
        end_block(P, "set");
        n->a = until(P, "endset");
        return n;
    }
    if (!strcmp(tag, "macro")) {
        n = mk(P, N_MACRO);
        n->line = line;
        n->name = expect_ident(P, "after 'macro'");
        params(P, n, "for a macro parameter");
        end_block(P, "macro");
        static const char *const e[] = { "endmacro", NULL };
        n->a = body(P, e, &found);
        next(P);
        if (cur(P)->k == TK_NAME) next(P);   /* {% endmacro name %} */
        end_block(P, "endmacro");
        return n;
    }
    if (!strcmp(tag, "call")) {
        n = mk(P, N_CALL_BLOCK);
        n->line = line;
        if (is_op(P, "(")) params(P, n, "for a caller parameter");
        n->a = expr(P);
        if (n->a->kind != N_CALL) pfail(P, "'call' wants a macro call");
        end_block(P, "call");
        n->b = until(P, "endcall");
        return n;
    }
    if (!strcmp(tag, "filter")) {
        n = mk(P, N_FILTER_BLOCK);
        n->line = line;
        n->a = filter_chain(P);
        end_block(P, "filter");
        n->b = until(P, "endfilter");
        return n;
    }
    if (!strcmp(tag, "generation")) {   /* transformers' assistant-mask marker: renders its body */
        end_block(P, tag);
        return until(P, "endgeneration");
    }
    if (!strcmp(tag, "break") || !strcmp(tag, "continue")) {
        n = mk(P, tag[0] == 'b' ? N_BREAK : N_CONTINUE);
        n->line = line;
        end_block(P, tag);
        return n;
    }
    if (!strcmp(tag, "do")) {
        n = mk(P, N_DO);
        n->line = line;
        n->a = expr(P);
        end_block(P, tag);
        return n;
    }
    P->p--;
    pfail(P, "unknown or unsupported tag '%s'", tag);
}

/* Statements until a block whose tag is in ends (left at that tag's name, *found set). */
static jnode *body(parser *P, const char *const *ends, const char **found) {
    enter(P);
    nlist l = { 0 };
    jnode *b = mk(P, N_BODY);
    for (;;) {
        const jtok *t = cur(P);
        if (t->k == TK_EOF) {
            if (ends) pfail(P, "missing '{%% %s %%}' (the template ended inside a block)", ends[0]);
            break;
        }
        if (t->k == TK_TEXT) {
            jnode *x = mk(P, N_TEXT);
            x->lit = jv_strref(t->s, t->n);
            nl_push(P, &l, x, NULL);
            next(P);
        } else if (t->k == TK_VAR_BEGIN) {
            next(P);
            jnode *x = mk(P, N_OUTPUT);
            x->a = tuple_rest(P, expr(P), false);
            if (cur(P)->k != TK_VAR_END) pfail(P, "expected '}}' after an expression, found %s", tok_desc(P));
            next(P);
            nl_push(P, &l, x, NULL);
        } else if (t->k == TK_BLOCK_BEGIN) {
            next(P);
            if (cur(P)->k == TK_NAME && ends)
                for (int k = 0; ends[k]; k++)
                    if (is_name(P, ends[k])) {
                        *found = ends[k];
                        b->kids = l.v;
                        b->nkids = l.n;
                        P->nest--;
                        return b;
                    }
            if (cur(P)->k == TK_NAME) {
                static const char *const closers[] = { "endif", "endfor", "endset", "endmacro", "endcall", "endfilter",
                                                       "else", "elif", "endgeneration", "endraw", NULL };
                for (int k = 0; closers[k]; k++)
                    if (is_name(P, closers[k])) pfail(P, "unexpected '%s'%s", closers[k], ends ? "" : " (no block is open)");
            }
            nl_push(P, &l, statement(P), NULL);
        } else {
            pfail(P, "unexpected %s", tok_desc(P));
        }
    }
    b->kids = l.v;
    b->nkids = l.n;
    P->nest--;
    return b;
}

jnode *jinja_parse_tokens(const jtoks *t, jarena *A, char *err, size_t errlen) {
    parser P = { .t = t, .A = A, .err = err, .errlen = errlen };
    if (setjmp(P.fail)) return NULL;
    return body(&P, NULL, NULL);
}
