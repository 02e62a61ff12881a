/* JSON Schema -> GBNF (see json_schema.h).
 *
 * Each schema object becomes a rule. Covered: type (one or a list), object
 * properties in their listed order with required/optional (no other keys
 * unless additionalProperties is true or a schema; then any further keys,
 * which may repeat listed ones), arrays (items, prefixItems, minItems,
 * maxItems), enum, const, string / number / integer / boolean / null,
 * minLength / maxLength, pattern (json_regex.c: the ECMAScript subset
 * schemas use; a string with a pattern is held to the pattern alone, not
 * also to its lengths; lookaround and backreferences are errors), the
 * formats date, time, date-time and uuid (a format wins over a pattern),
 * anyOf and oneOf (both as "one of the alternatives": oneOf's exclusivity
 * is not enforced), allOf by merging its parts' keywords (properties and
 * required are united; for any other keyword the first part that has it
 * wins), and $ref to any JSON pointer inside the document ("#/$defs/x",
 * "#/definitions/x", "#"), recursive refs included.
 * Not enforced (accepted and ignored): other formats, minimum /
 * maximum / multipleOf, minProperties / maxProperties, uniqueItems,
 * not, if/then/else. Remote $refs are an error.
 *
 * JSON whitespace is allowed between tokens but bounded (a newline and at
 * most 20 spaces or tabs), and numbers have at most 16 integer digits and
 * 16 fraction digits, so a model cannot stall in whitespace or digits. */
#include "engine/sample/json_schema.h"
#include "engine/sample/json_regex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char *s; size_t n, cap; int oom; } sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 1024;
        while (c < b->n + n + 1) c *= 2;
        char *ns = realloc(b->s, c);
        if (!ns) { b->oom = 1; return; }
        b->s = ns;
        b->cap = c;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof tmp) sb_add(b, tmp, (size_t)n);
    else if (n > 0) {   /* a long rule body (a pattern's, an enum's): never cut */
        char *big = malloc((size_t)n + 1);
        if (big) { vsnprintf(big, (size_t)n + 1, fmt, ap2); sb_add(b, big, (size_t)n); free(big); }
        else b->oom = 1;
    }
    va_end(ap2);
}

/* A GBNF literal of raw bytes. */
static void sb_literal(sbuf *b, const char *s, size_t n) {
    sb_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { char e[2] = { '\\', (char)c }; sb_add(b, e, 2); }
        else if (c < 0x20 || c == 0x7F) sb_printf(b, "\\x%02X", c);
        else sb_add(b, (const char *)&c, 1);
    }
    sb_add(b, "\"", 1);
}

enum { P_SPACE, P_CHAR, P_STRING, P_INTPART, P_INTEGER, P_NUMBER, P_BOOLEAN, P_NULL, P_VALUE, P_OBJECT, P_ARRAY,
       P_DATE, P_TIME, P_DATETIME, P_UUID, P_COUNT };
static const char *const prim_name[P_COUNT] = {
    "space", "json-char", "string", "integral-part", "integer", "number", "boolean", "null", "value", "object", "array",
    "date", "time", "date-time", "uuid",
};
static const char *const prim_body[P_COUNT] = {
    "| \" \" | \"\\n\" [ \\t]{0,20}",
    "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})",
    "\"\\\"\" json-char* \"\\\"\" space",
    "[0] | [1-9] [0-9]{0,15}",
    "\"-\"? integral-part space",
    "\"-\"? integral-part (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? space",
    "(\"true\" | \"false\") space",
    "\"null\" space",
    "object | array | string | number | boolean | null",
    "\"{\" space (string \":\" space value (\",\" space string \":\" space value)*)? \"}\" space",
    "\"[\" space (value (\",\" space value)*)? \"]\" space",
    "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1])",
    "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{3})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])",
    "date \"T\" time",
    "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}",
};
/* what each primitive uses, -1 ending the list */
static const int prim_deps[P_COUNT][4] = {
    [P_SPACE] = { -1 }, [P_CHAR] = { -1 }, [P_STRING] = { P_CHAR, P_SPACE, -1 }, [P_INTPART] = { -1 },
    [P_INTEGER] = { P_INTPART, P_SPACE, -1 }, [P_NUMBER] = { P_INTPART, P_SPACE, -1 },
    [P_BOOLEAN] = { P_SPACE, -1 }, [P_NULL] = { P_SPACE, -1 },
    [P_VALUE] = { P_OBJECT, P_ARRAY, P_NUMBER, -1 }, [P_OBJECT] = { P_STRING, P_VALUE, P_SPACE, -1 },
    [P_ARRAY] = { P_VALUE, P_SPACE, -1 }, [P_DATE] = { -1 }, [P_TIME] = { -1 }, [P_DATETIME] = { P_DATE, P_TIME, -1 },
    [P_UUID] = { -1 },
};

typedef struct { char *ref; char *name; } refmap;

typedef struct {
    const cJSON *root;
    bool strict;
    sbuf out;
    bool prim[P_COUNT];
    refmap *refs;
    int n_refs, cap_refs;
    int n_names, nodes, failed;
    char *err;
    size_t errlen;
    char path[256];
} sc;

static void fail(sc *c, const char *fmt, ...) {
    if (c->failed) return;
    c->failed = 1;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->err && c->errlen) snprintf(c->err, c->errlen, "json_schema: at %s: %s", *c->path ? c->path : "/", msg);
}

static const char *use(sc *c, int p) {
    if (!c->prim[p]) {
        c->prim[p] = true;
        for (int i = 0; prim_deps[p][i] >= 0; i++) use(c, prim_deps[p][i]);
        if (p == P_VALUE) { use(c, P_STRING); use(c, P_BOOLEAN); use(c, P_NULL); }
    }
    return prim_name[p];
}

/* A fresh rule name from a hint (only letters, digits and '-'). */
static char *new_name(sc *c, const char *hint) {
    char buf[64];
    size_t k = 0;
    for (const char *h = hint ? hint : "s"; *h && k < 24; h++) {
        char ch = *h;
        buf[k++] = ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) ? ch : '-';
    }
    if (!k) buf[k++] = 's';
    snprintf(buf + k, sizeof buf - k, "-%d", ++c->n_names);
    char *s = strdup(buf);
    if (!s) fail(c, "out of memory");
    return s;
}

static void emit_rule(sc *c, const char *name, const char *body) {
    sb_puts(&c->out, name);
    sb_puts(&c->out, " ::= ");
    sb_puts(&c->out, *body ? body : "\"\"");   /* an empty body would take the next line */
    sb_puts(&c->out, "\n");
    if (c->out.n > GRAMMAR_MAX_TEXT) fail(c, "the grammar for this schema is too large (over %u bytes)", GRAMMAR_MAX_TEXT);
}

static char *gen(sc *c, const cJSON *s, const char *hint);

/* ---- $ref -------------------------------------------------------------------------- */
static const cJSON *resolve(sc *c, const char *ref) {
    if (ref[0] != '#') { fail(c, "only local $refs (\"#/...\") are supported, not '%.80s'", ref); return NULL; }
    const cJSON *cur = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') { fail(c, "unsupported $ref '%.80s'", ref); return NULL; }
    while (*p == '/') {
        p++;
        char key[256];
        size_t k = 0;
        for (; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1')) { ch = p[1] == '0' ? '~' : '/'; p++; }
            if (k < sizeof key - 1) key[k++] = ch;
        }
        key[k] = 0;
        const cJSON *next = cJSON_IsArray(cur) ? cJSON_GetArrayItem(cur, atoi(key)) : cJSON_GetObjectItemCaseSensitive(cur, key);
        if (!next) { fail(c, "$ref '%.80s' points at nothing", ref); return NULL; }
        cur = next;
    }
    return cur;
}

static char *gen_ref(sc *c, const char *ref) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) return strdup(c->refs[i].name);
    const cJSON *target = resolve(c, ref);
    if (!target) return NULL;
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        refmap *r = realloc(c->refs, sizeof *r * (size_t)cap);
        if (!r) { fail(c, "out of memory"); return NULL; }
        c->refs = r;
        c->cap_refs = cap;
    }
    const char *slash = strrchr(ref, '/');
    char *name = new_name(c, slash ? slash + 1 : "root-ref");
    char *rs = strdup(ref);
    if (!name || !rs) { free(name); free(rs); fail(c, "out of memory"); return NULL; }
    c->refs[c->n_refs++] = (refmap){ rs, name };   /* before the body: a recursive ref finds it */
    char *body = gen(c, target, name);
    if (!body) return NULL;
    emit_rule(c, name, body);
    free(body);
    return strdup(name);
}

/* ---- pieces --------------------------------------------------------------------------- */
static long get_count(sc *c, const cJSON *s, const char *key, long dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return dflt;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != (double)(long)v->valuedouble) {
        fail(c, "'%s' must be a non-negative integer", key);
        return dflt;
    }
    if (v->valuedouble > GRAMMAR_MAX_REPEAT) { fail(c, "'%s' above %d is not supported", key, GRAMMAR_MAX_REPEAT); return dflt; }
    return (long)v->valuedouble;
}

/* x repeated lo..hi times (hi < 0: no limit), separated by sep (NULL: nothing). */
static void sb_repeat(sbuf *b, const char *x, const char *sep, long lo, long hi) {
    if (hi == 0) return;
    if (lo == 0) {
        sb_printf(b, "(%s", x);
        if (hi < 0) sb_printf(b, " (%s%s)*)?", sep ? sep : "", x);
        else if (hi > 1) sb_printf(b, " (%s%s){0,%ld})?", sep ? sep : "", x, hi - 1);
        else sb_puts(b, ")?");
        return;
    }
    sb_puts(b, x);
    if (hi < 0) sb_printf(b, " (%s%s){%ld,}", sep ? sep : "", x, lo - 1);
    else if (hi > 1) sb_printf(b, " (%s%s){%ld,%ld}", sep ? sep : "", x, lo - 1, hi - 1);
}

static char *gen_string(sc *c, const cJSON *s) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(s, "format");
    sbuf b = { 0 };
    if (cJSON_IsString(f)) {
        int p = !strcmp(f->valuestring, "date") ? P_DATE : !strcmp(f->valuestring, "time") ? P_TIME
              : !strcmp(f->valuestring, "date-time") ? P_DATETIME : !strcmp(f->valuestring, "uuid") ? P_UUID : -1;
        if (p >= 0) {
            sb_printf(&b, "\"\\\"\" %s \"\\\"\" %s", use(c, p), use(c, P_SPACE));
            return b.s;
        }
    }
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    if (pat) {
        if (!cJSON_IsString(pat)) { fail(c, "'pattern' must be a string"); return NULL; }
        char rerr[200];
        char *re = json_regex_to_gbnf(pat->valuestring, use(c, P_CHAR), rerr, sizeof rerr);
        if (!re) { fail(c, "%s", rerr); return NULL; }
        sb_printf(&b, "\"\\\"\" ");
        sb_puts(&b, re);
        sb_printf(&b, " \"\\\"\" %s", use(c, P_SPACE));
        free(re);
        return b.s;
    }
    long lo = get_count(c, s, "minLength", 0), hi = get_count(c, s, "maxLength", -1);
    if (hi >= 0 && hi < lo) fail(c, "maxLength is below minLength");
    if (lo == 0 && hi < 0) { sb_puts(&b, use(c, P_STRING)); return b.s; }
    sb_puts(&b, "\"\\\"\" ");
    use(c, P_CHAR);
    if (hi < 0) sb_printf(&b, "json-char{%ld,}", lo);
    else if (hi > 0) sb_printf(&b, "json-char{%ld,%ld}", lo, hi);
    sb_printf(&b, " \"\\\"\" %s", use(c, P_SPACE));
    return b.s;
}

static char *gen_array(sc *c, const cJSON *s, const char *hint) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    sbuf b = { 0 };
    sb_printf(&b, "\"[\" %s ", use(c, P_SPACE));
    if (cJSON_IsArray(prefix) || cJSON_IsArray(items)) {   /* a tuple (items as a list: the old spelling) */
        const cJSON *it;
        int k = 0;
        const cJSON *tuple = cJSON_IsArray(prefix) ? prefix : items;
        cJSON_ArrayForEach(it, tuple) {
            char *r = gen(c, it, hint);
            if (!r) break;
            sb_printf(&b, "%s%s ", k++ ? "\",\" space " : "", r);
            free(r);
        }
    } else {
        char *item = items ? gen(c, items, hint) : strdup(use(c, P_VALUE));
        if (!item) { if (!c->failed) fail(c, "out of memory"); free(b.s); return NULL; }
        long lo = get_count(c, s, "minItems", 0), hi = get_count(c, s, "maxItems", -1);
        if (hi >= 0 && hi < lo) fail(c, "maxItems is below minItems");
        sb_repeat(&b, item, "\",\" space ", lo, hi);
        sb_puts(&b, " ");
        free(item);
    }
    sb_printf(&b, "\"]\" %s", use(c, P_SPACE));
    return b.s;
}

static char *gen_object(sc *c, const cJSON *s, const char *hint) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) { fail(c, "'properties' must be an object"); return NULL; }
    if (req && !cJSON_IsArray(req)) { fail(c, "'required' must be a list"); return NULL; }
    bool has_props = props && props->child;
    /* further keys: an explicit true or schema; without properties, any object (unless strict) */
    char *addval = NULL;
    if (cJSON_IsTrue(add) || (!add && !has_props && !c->strict)) addval = strdup(use(c, P_VALUE));
    else if (cJSON_IsObject(add)) addval = gen(c, add, "additional");
    if (c->failed) { free(addval); return NULL; }
    char *name = new_name(c, hint ? hint : "object");
    if (!name) { free(addval); return NULL; }
    sbuf b = { 0 };
    int n = 0;
    const cJSON *p;
    if (has_props) cJSON_ArrayForEach(p, props) n++;
    /* rules fI (nothing written yet, properties I.. to come) and rI (something written) */
    sbuf r = { 0 };
    if (addval) {
        char kv[160];
        snprintf(kv, sizeof kv, "%s-kv", name);
        sb_printf(&r, "%s \":\" %s %s", use(c, P_STRING), use(c, P_SPACE), addval);
        emit_rule(c, kv, r.s);
        r.n = 0;
        sb_printf(&r, "(%s (\",\" space %s)*)?", kv, kv);
        char nm[128]; snprintf(nm, sizeof nm, "%s-f%d", name, n); emit_rule(c, nm, r.s);
        r.n = 0;
        sb_printf(&r, "(\",\" space %s)*", kv);
        snprintf(nm, sizeof nm, "%s-r%d", name, n); emit_rule(c, nm, r.s);
    } else {
        char nm[128];
        snprintf(nm, sizeof nm, "%s-f%d", name, n); emit_rule(c, nm, "");
        snprintf(nm, sizeof nm, "%s-r%d", name, n); emit_rule(c, nm, "");
    }
    free(addval);
    /* the listed properties, last first */
    const cJSON **list = n ? malloc(sizeof *list * (size_t)n) : NULL;
    if (n && !list) { fail(c, "out of memory"); free(name); free(r.s); return NULL; }
    int k = 0;
    if (has_props) cJSON_ArrayForEach(p, props) list[k++] = p;
    size_t plen = strlen(c->path);
    for (int i = n - 1; i >= 0 && !c->failed; i--) {
        const cJSON *pp = list[i];
        bool required = false;
        const cJSON *q;
        cJSON_ArrayForEach(q, req) if (cJSON_IsString(q) && !strcmp(q->valuestring, pp->string)) required = true;
        snprintf(c->path + plen, sizeof c->path - plen, "/properties/%.60s", pp->string);
        char *val = gen(c, pp, pp->string);
        c->path[plen] = 0;
        if (!val) break;
        char kv[128];
        snprintf(kv, sizeof kv, "%s-k%d", name, i);
        r.n = 0;
        /* the key as JSON text, then as a GBNF literal */
        cJSON *ks = cJSON_CreateString(pp->string);
        char *kj = ks ? cJSON_PrintUnformatted(ks) : NULL;
        cJSON_Delete(ks);
        if (!kj) { free(val); fail(c, "out of memory"); break; }
        sb_literal(&r, kj, strlen(kj));
        free(kj);
        sb_printf(&r, " %s \":\" %s %s", use(c, P_SPACE), use(c, P_SPACE), val);
        free(val);
        emit_rule(c, kv, r.s);
        char fi[128], ri[128];
        snprintf(fi, sizeof fi, "%s-f%d", name, i);
        snprintf(ri, sizeof ri, "%s-r%d", name, i);
        r.n = 0;
        if (required) sb_printf(&r, "\",\" space %s %s-r%d", kv, name, i + 1);
        else sb_printf(&r, "(\",\" space %s)? %s-r%d", kv, name, i + 1);
        emit_rule(c, ri, r.s);
        r.n = 0;
        if (required) sb_printf(&r, "%s %s-r%d", kv, name, i + 1);
        else sb_printf(&r, "%s %s-r%d | %s-f%d", kv, name, i + 1, name, i + 1);
        emit_rule(c, fi, r.s);
    }
    free(list);
    free(r.s);
    sb_printf(&b, "\"{\" %s %s-f0 \"}\" %s", use(c, P_SPACE), name, use(c, P_SPACE));
    free(name);
    return b.s;
}

/* allOf: one schema with the parts' keywords merged (refs followed). */
static cJSON *merge_all_of(sc *c, const cJSON *s, int depth) {
    cJSON *m = cJSON_CreateObject();
    if (!m) return NULL;
    cJSON *props = NULL, *req = NULL;
    const cJSON *parts[2] = { s, cJSON_GetObjectItemCaseSensitive(s, "allOf") };
    const cJSON *it;
    /* the schema's own keywords, then each part */
    for (int pass = 0; pass < 2 && !c->failed; pass++) {
        const cJSON *list = pass == 0 ? NULL : parts[1];
        const cJSON *one = pass == 0 ? s : NULL;
        const cJSON *x = pass == 0 ? one : (list ? list->child : NULL);
        for (; x && !c->failed; x = pass == 0 ? NULL : x->next) {
            cJSON *own = NULL;
            const cJSON *src = x;
            const cJSON *ref = cJSON_GetObjectItemCaseSensitive(x, "$ref");
            if (pass == 1 && cJSON_IsString(ref)) src = resolve(c, ref->valuestring);
            if (pass == 1 && src && cJSON_GetObjectItemCaseSensitive(src, "allOf")) {
                if (depth > 16) { fail(c, "allOf nested too deeply"); break; }
                own = merge_all_of(c, src, depth + 1);
                src = own;
            }
            if (!src || !cJSON_IsObject(src)) { cJSON_Delete(own); if (!c->failed) fail(c, "allOf parts must be schemas"); break; }
            cJSON_ArrayForEach(it, src) {
                if (!strcmp(it->string, "allOf") || !strcmp(it->string, "$ref")) continue;
                if (!strcmp(it->string, "properties") && cJSON_IsObject(it)) {
                    if (!props) props = cJSON_AddObjectToObject(m, "properties");
                    const cJSON *p;
                    cJSON_ArrayForEach(p, it)
                        if (props && !cJSON_GetObjectItemCaseSensitive(props, p->string))
                            cJSON_AddItemToObject(props, p->string, cJSON_Duplicate(p, true));
                } else if (!strcmp(it->string, "required") && cJSON_IsArray(it)) {
                    if (!req) req = cJSON_AddArrayToObject(m, "required");
                    const cJSON *q;
                    cJSON_ArrayForEach(q, it) if (req) cJSON_AddItemToArray(req, cJSON_Duplicate(q, true));
                } else if (!cJSON_GetObjectItemCaseSensitive(m, it->string)) {
                    cJSON_AddItemToObject(m, it->string, cJSON_Duplicate(it, true));
                }
            }
            cJSON_Delete(own);
        }
    }
    return m;
}

static char *gen_type(sc *c, const cJSON *s, const char *type, const char *hint) {
    if (!strcmp(type, "string")) return gen_string(c, s);
    if (!strcmp(type, "integer")) return strdup(use(c, P_INTEGER));
    if (!strcmp(type, "number")) return strdup(use(c, P_NUMBER));
    if (!strcmp(type, "boolean")) return strdup(use(c, P_BOOLEAN));
    if (!strcmp(type, "null")) return strdup(use(c, P_NULL));
    if (!strcmp(type, "object")) return gen_object(c, s, hint);
    if (!strcmp(type, "array")) return gen_array(c, s, hint);
    fail(c, "unknown type '%.40s'", type);
    return NULL;
}

/* A GBNF expression (malloc'd) for the schema s. */
static char *gen(sc *c, const cJSON *s, const char *hint) {
    if (c->failed) return NULL;
    if (++c->nodes > JSON_SCHEMA_MAX_NODES) { fail(c, "schema too large (over %d schemas)", JSON_SCHEMA_MAX_NODES); return NULL; }
    if (cJSON_IsTrue(s)) return strdup(use(c, P_VALUE));
    if (cJSON_IsFalse(s)) { fail(c, "the schema false matches nothing"); return NULL; }
    if (!cJSON_IsObject(s)) { fail(c, "a schema must be an object or a boolean"); return NULL; }
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "$ref"))) {
        if (!cJSON_IsString(v)) { fail(c, "'$ref' must be a string"); return NULL; }
        return gen_ref(c, v->valuestring);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "allOf"))) {
        if (!cJSON_IsArray(v)) { fail(c, "'allOf' must be a list"); return NULL; }
        cJSON *m = merge_all_of(c, s, 0);
        char *r = m && !c->failed ? gen(c, m, hint) : NULL;
        if (!m && !c->failed) fail(c, "out of memory");
        cJSON_Delete(m);
        return r;
    }
    sbuf b = { 0 };
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "const")) || (v = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        bool is_enum = !strcmp(v->string, "enum");
        if (is_enum && (!cJSON_IsArray(v) || !v->child)) { fail(c, "'enum' must be a non-empty list"); return NULL; }
        const cJSON *it = is_enum ? v->child : v;
        for (int k = 0; it; it = is_enum ? it->next : NULL, k++) {
            char *j = cJSON_PrintUnformatted(it);
            if (!j) { fail(c, "out of memory"); break; }
            if (k) sb_puts(&b, " | ");
            sb_literal(&b, j, strlen(j));
            free(j);
        }
        char *r = NULL;
        if (b.s && !b.oom) {
            sbuf w = { 0 };
            sb_printf(&w, "(%s) %s", b.s, use(c, P_SPACE));
            r = w.s;
        }
        free(b.s);
        if (!r && !c->failed) fail(c, "out of memory");
        return r;
    }
    const cJSON *alts = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (!alts) alts = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    if (alts) {
        if (!cJSON_IsArray(alts) || !alts->child) { fail(c, "'%s' must be a non-empty list", alts->string); return NULL; }
        const cJSON *it;
        int k = 0;
        sb_puts(&b, "(");   /* the whole is one item of the sequence around it */
        cJSON_ArrayForEach(it, alts) {
            char *r = gen(c, it, hint);
            if (!r) { free(b.s); return NULL; }
            sb_printf(&b, "%s(", k++ ? " | " : "");
            sb_puts(&b, r);
            sb_puts(&b, ")");
            free(r);
        }
        sb_puts(&b, ")");
        return b.s;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsArray(type)) {
        const cJSON *it;
        int k = 0;
        sb_puts(&b, "(");
        cJSON_ArrayForEach(it, type) {
            if (!cJSON_IsString(it)) { fail(c, "'type' must be a string or a list of strings"); break; }
            char *r = gen_type(c, s, it->valuestring, hint);
            if (!r) break;
            sb_printf(&b, "%s(", k++ ? " | " : "");
            sb_puts(&b, r);
            sb_puts(&b, ")");
            free(r);
        }
        if (c->failed || !k) { if (!c->failed) fail(c, "'type' is an empty list"); free(b.s); return NULL; }
        sb_puts(&b, ")");
        return b.s;
    }
    if (type && !cJSON_IsString(type)) { fail(c, "'type' must be a string or a list of strings"); return NULL; }
    const char *t = type ? type->valuestring : NULL;
    if (!t) {   /* no type: what the keywords say */
        if (cJSON_GetObjectItemCaseSensitive(s, "properties") || cJSON_GetObjectItemCaseSensitive(s, "additionalProperties")) t = "object";
        else if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems")) t = "array";
        else if (cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength") ||
                 cJSON_GetObjectItemCaseSensitive(s, "format") || cJSON_GetObjectItemCaseSensitive(s, "pattern")) t = "string";
        else return strdup(use(c, P_VALUE));
    }
    return gen_type(c, s, t, hint);
}

char *json_schema_to_gbnf(const cJSON *schema, bool strict, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    sc c = { .root = schema, .strict = strict, .err = err, .errlen = errlen };
    char *root = gen(&c, schema, "root");
    if (root && !c.failed) {
        sbuf head = { 0 };
        sb_puts(&head, "root ::= ");
        sb_puts(&head, root);
        sb_puts(&head, "\n");
        for (int p = 0; p < P_COUNT; p++)
            if (c.prim[p]) { sb_printf(&head, "%s ::= ", prim_name[p]); sb_puts(&head, prim_body[p]); sb_puts(&head, "\n"); }
        if (c.out.s) sb_puts(&head, c.out.s);
        if (head.oom || head.n > GRAMMAR_MAX_TEXT) { fail(&c, "the grammar for this schema is too large"); free(head.s); head.s = NULL; }
        free(c.out.s);
        c.out.s = head.s;
    } else if (!c.failed) {
        fail(&c, "out of memory");
    }
    if (c.out.oom && !c.failed) fail(&c, "out of memory");
    free(root);
    for (int i = 0; i < c.n_refs; i++) { free(c.refs[i].ref); free(c.refs[i].name); }
    free(c.refs);
    if (c.failed) { free(c.out.s); return NULL; }
    return c.out.s;
}

grammar *grammar_from_json_schema(const cJSON *schema, bool strict, char *err, size_t errlen) {
    char *text = json_schema_to_gbnf(schema, strict, err, errlen);
    if (!text) return NULL;
    grammar *g = grammar_parse(text, strlen(text), err, errlen);
    free(text);
    return g;
}

grammar *grammar_json_object(char *err, size_t errlen) {
    cJSON *s = cJSON_CreateObject();
    if (!s || !cJSON_AddStringToObject(s, "type", "object")) { cJSON_Delete(s); snprintf(err, errlen, "out of memory"); return NULL; }
    grammar *g = grammar_from_json_schema(s, false, err, errlen);
    cJSON_Delete(s);
    return g;
}
