/* The Jinja interpreter's shared insides: the arena, values, tokens, the
 * AST, and the render context. Only engine/text/jinja_*.c include this. */
#ifndef HEARTH_JINJA_INTERNAL_H
#define HEARTH_JINJA_INTERNAL_H

#define JINJA_MAX_NEST 128   /* nested expressions/blocks in the source */
#define JINJA_MAX_MEMORY ((size_t)256 << 20)

#include "engine/text/jinja.h"
#include <setjmp.h>
#include <stdint.h>

/* ---- arena: everything a parse or a render allocates, freed at once ----- */
typedef struct jarena_chunk jarena_chunk;
typedef struct jarena { jarena_chunk *head; size_t used, cap_total; } jarena;

/* ---- values ---------------------------------------------------------------- */
typedef enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_MACRO, JV_NS,
               JV_FUNC } jv_type;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jnode jnode;
typedef struct jctx jctx;
typedef struct jv jv;
typedef struct jargs jargs;
typedef jv (*jfunc)(jctx *c, const jv *self, jargs *a, int line);

struct jv {
    uint8_t t;          /* jv_type */
    bool tuple;         /* a list written as a tuple (prints with parentheses) */
    size_t n;           /* string length */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s;  /* JV_STR: n bytes, not NUL-terminated in general */
        jlist *l;
        jdict *d;       /* JV_DICT and JV_NS */
        struct jbound *fn;  /* JV_FUNC: a builtin or bound method; JV_MACRO: node and scope */
    } u;
};
struct jlist { jv *v; size_t n, cap; };
struct jdict { jv *k, *v; size_t n, cap; };
struct jbound { jfunc f; jv self; const char *name; const jnode *node; struct jframe *env; };

/* a call's arguments: positional then keyword */
struct jargs { jv *pos; int npos; const char **kwn; jv *kwv; int nkw; jv caller; };

/* ---- tokens ----------------------------------------------------------------- */
typedef enum {
    TK_TEXT, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP, TK_EOF
} jtok_kind;

typedef struct jtok {
    jtok_kind k;
    int line;
    const char *s;      /* TEXT/NAME/STRING (unescaped)/OP */
    size_t n;
    int64_t i;
    double f;
} jtok;

typedef struct jtoks { jtok *v; size_t n, cap; } jtoks;

/* ---- AST ---------------------------------------------------------------------- */
typedef enum {
    /* statements */
    N_BODY, N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SET_BLOCK, N_MACRO, N_CALL_BLOCK, N_FILTER_BLOCK,
    N_BREAK, N_CONTINUE, N_DO,
    /* expressions */
    N_LIT, N_NAME, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_NOT, N_NEG, N_POS,
    N_BIN, N_AND, N_OR, N_COND, N_LIST, N_TUPLE, N_DICT
} jnode_kind;

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
               OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN } jop;

struct jnode {
    uint8_t kind;       /* jnode_kind */
    uint8_t op;         /* N_BIN: jop; N_TEST: negated */
    int line;
    jv lit;             /* N_LIT; N_TEXT's text */
    const char *name;   /* NAME/ATTR/FILTER/TEST/MACRO name, SET's attribute */
    jnode *a, *b, *c, *d;
    jnode **kids;       /* BODY statements; LIST/TUPLE/DICT items; CALL/FILTER/TEST args; IF branches */
    int nkids;
    const char **names; /* keyword argument names (NULL = positional); FOR/SET targets; MACRO params */
    int nnames;
};
/* Layouts:
 *   N_IF: a cond, b body, c else (an N_IF for elif, a body, or NULL)
 *   N_FOR: names targets, a iterable, b filter cond or NULL, c body, d else body or NULL
 *   N_SET: names targets (one, or a tuple), name attribute (ns.attr) or NULL, a value
 *   N_SET_BLOCK: names[0] target, name attribute, a body, b filter chain (applied to a N_LIT) or NULL
 *   N_MACRO: name, names params, kids defaults (NULL where none), a body
 *   N_CALL_BLOCK: a the N_CALL, names caller params, kids their defaults, b body
 *   N_FILTER_BLOCK: a filter chain whose innermost operand is NULL, b body
 *   N_CALL/N_FILTER/N_TEST: a callee/operand, kids args, names keyword names per arg
 *   N_SLICE: a object, b start, c stop, d step (NULL where omitted)
 *   N_DICT: kids key, value, key, value... */

/* ---- rendering ------------------------------------------------------------------ */
typedef struct jframe jframe;
struct jframe { jframe *up; jdict vars; };

typedef struct jout { char *p; size_t n, cap; } jout;

struct jctx {
    jarena *A;
    jmp_buf fail;
    char *err;
    size_t errlen;
    jout *out;          /* where output goes (block set / filter / call capture swaps it) */
    jframe *top, *cur;
    int depth;
    long steps;
    int loop_ctl;       /* 1 break, 2 continue */
};

/* errors: never return */
_Noreturn void jfail(jctx *c, int line, const char *fmt, ...);

/* arena */
void *jalloc(jarena *A, size_t n);       /* zeroed; NULL past the cap */
void jarena_free(jarena *A);
void *jctx_alloc(jctx *c, size_t n);     /* jfail on exhaustion */

/* lexer and parser */
bool jinja_lex(const char *src, size_t len, const jinja_options *o, jtoks *out, jarena *A, char *err, size_t errlen);
jnode *jinja_parse_tokens(const jtoks *t, jarena *A, char *err, size_t errlen);

/* values (jinja_value.c) */
jv jv_undef(void);
jv jv_none(void);
jv jv_bool(bool b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(jctx *c, const char *s, size_t n);    /* copies */
jv jv_cstr(const char *s);                       /* borrows a static or arena string */
jv jv_strref(const char *s, size_t n);           /* borrows */
jv jv_list(jctx *c);
jv jv_dict(jctx *c);
void jl_push(jctx *c, jlist *l, jv v);
jv *jd_get(const jdict *d, jv key);
jv *jd_gets(const jdict *d, const char *key);
void jd_set(jctx *c, jdict *d, jv key, jv v);
void jd_sets(jctx *c, jdict *d, const char *key, jv v);
jv jv_from_cjson(jctx *c, const cJSON *j);
bool jv_truthy(const jv *v);
bool jv_eq(const jv *a, const jv *b);
int jv_cmp(jctx *c, const jv *a, const jv *b, int line);   /* <0, 0, >0; jfail when not comparable */
bool jv_is_num(const jv *v);
double jv_num(const jv *v);
const char *jv_type_name(const jv *v);
void jout_put(jctx *c, jout *o, const char *s, size_t n);
void jv_write(jctx *c, jout *o, const jv *v);       /* the text {{ v }} prints */
jv jv_to_str(jctx *c, const jv *v);
void jv_tojson(jctx *c, jout *o, const jv *v, int indent, const char *isep, const char *ksep, bool sort_keys,
               int level, int line);
size_t jv_len(jctx *c, const jv *v, int line);
jv jv_iterable(jctx *c, const jv *v, int line);      /* a list to iterate: dict keys, string chars... */
jv jv_concat(jctx *c, const jv *a, const jv *b);     /* a ~ b */

/* the evaluator (jinja_eval.c) */
jv jeval(jctx *c, const jnode *n);
void jexec(jctx *c, const jnode *n);
jv jcall(jctx *c, const jv *fn, jargs *a, int line);
jv jlookup(jctx *c, const char *name);
jv jgetattr(jctx *c, const jv *obj, const char *name, size_t n, int line);
jv jgetitem(jctx *c, const jv *obj, const jv *key, int line);
void jstep(jctx *c, int line);

/* filters, tests, methods, globals (jinja_filters.c, jinja_methods.c) */
jv jfilter(jctx *c, const char *name, const jv *v, jargs *a, int line);
bool jtest(jctx *c, const char *name, const jv *v, jargs *a, int line);
jv jmethod(jctx *c, const jv *self, const char *name, size_t n, int line);   /* a bound method, or undefined */
jv jglobal(jctx *c, const char *name);                                        /* a builtin, or undefined */
const jv *jarg(jargs *a, int pos, const char *kw);                            /* NULL when not given */
jv jstr_case(jctx *c, const jv *s, int how);   /* 0 upper 1 lower 2 capitalize 3 title 4 swapcase */

#endif
