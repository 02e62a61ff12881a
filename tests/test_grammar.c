/* Grammar-constrained sampling: the GBNF parser (valid and invalid input),
 * the matcher (whole strings, byte by byte, UTF-8), the JSON-schema
 * compiler (strings each construct must and must not take), the token mask
 * against a brute-force oracle on real vocabularies, and 200 generations
 * from a random-weight model that must all parse and validate, with the
 * mask turned off as the planted control. */
#include "tests/test.h"
#include "tests/json_check.h"
#include "engine/sample/grammar.h"
#include "engine/sample/grammar_pick.h"
#include "engine/sched/grammar_tokens.h"
#include "engine/sample/json_schema.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"
#include "engine/model/model.h"
#include "engine/sched/engine.h"
#include "kernels/kernels.h"

#include <pthread.h>
#include <stdint.h>

/* ---- helpers ------------------------------------------------------------------- */
static grammar *parse(const char *text) {
    char err[256];
    grammar *g = grammar_parse(text, strlen(text), err, sizeof err);
    if (!g) fprintf(stderr, "parse: %s\n", err);
    return g;
}

/* 1: the grammar takes the whole text and may end there; 0 otherwise. */
static int full(const grammar *g, const char *text) {
    grammar_matcher *m = grammar_matcher_new(g);
    if (!m) return -1;
    int ok = grammar_matcher_accept(m, text, strlen(text)) && grammar_matcher_can_end(m);
    grammar_matcher_free(m);
    return ok;
}

/* The same fed one byte at a time: it must agree with full(). */
static int bytewise(const grammar *g, const char *text) {
    grammar_matcher *m = grammar_matcher_new(g);
    if (!m) return -1;
    int ok = 1;
    for (size_t i = 0; text[i] && ok; i++) ok = grammar_matcher_accept(m, text + i, 1);
    ok = ok && grammar_matcher_can_end(m);
    grammar_matcher_free(m);
    return ok;
}

static void expect(const char *gbnf, const char *const *yes, const char *const *no) {
    grammar *g = parse(gbnf);
    CHECKF(g != NULL, "%s", gbnf);
    if (!g) return;
    for (int i = 0; yes && yes[i]; i++) {
        CHECKF(full(g, yes[i]) == 1, "%s should take '%s'", gbnf, yes[i]);
        CHECKF(bytewise(g, yes[i]) == 1, "%s should take '%s' byte by byte", gbnf, yes[i]);
    }
    for (int i = 0; no && no[i]; i++) {
        CHECKF(full(g, no[i]) == 0, "%s should refuse '%s'", gbnf, no[i]);
        CHECKF(bytewise(g, no[i]) == 0, "%s should refuse '%s' byte by byte", gbnf, no[i]);
    }
    grammar_free(g);
}
#define L(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* ---- the parser ----------------------------------------------------------------- */
static void test_parse_errors(void) {
    static const struct { const char *g, *msg; } bad[] = {
        { "", "no 'root' rule" },
        { "root ::= foo", "line 1, column 10: undefined rule 'foo'" },
        { "root ::= \"a", "unterminated literal" },
        { "root ::= [a-", "unterminated character class" },
        { "root ::= []", "empty character class" },
        { "root ::= (\"a\"", "expected ')'" },
        { "root ::= *", "without a symbol" },
        { "root ::= \"a\"{3,1}", "upper bound is below" },
        { "root ::= \"a\"{99999}", "repetition count above" },
        { "root ::= \"\\q\"", "unknown escape" },
        { "root ::= \"\\x4\"", "hex digits" },
        { "root ::= root \"a\" | \"b\"", "left-recursive" },
        { "root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"", "left-recursive" },
        { "root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice" },
        { "root ::= \"a\" )", "expected the end of the line" },
        { "root \"a\"", "expected '::='" },
        { "root ::= [z-a]", "range end below its start" },
        { "root ::= \"\xff\"", "invalid UTF-8" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char err[256];
        grammar *g = grammar_parse(bad[i].g, strlen(bad[i].g), err, sizeof err);
        CHECKF(!g, "'%s' parsed", bad[i].g);
        CHECKF(strstr(err, bad[i].msg) != NULL, "'%s': got '%s', want '%s'", bad[i].g, err, bad[i].msg);
        grammar_free(g);
    }
    /* deep nesting is an error, not a stack overflow */
    char deep[400];
    int k = snprintf(deep, sizeof deep, "root ::= ");
    for (int i = 0; i < 100; i++) deep[k++] = '(';
    deep[k] = 0;
    char err[256];
    CHECK(!grammar_parse(deep, strlen(deep), err, sizeof err) && strstr(err, "nested deeper"));
    /* a grammar too large for the bounds */
    char big[400];
    k = snprintf(big, sizeof big, "root ::=");
    for (int i = 0; i < 12; i++) k += snprintf(big + k, sizeof big - (size_t)k, " \"a\"{0,10000}");
    CHECK(!grammar_parse(big, strlen(big), err, sizeof err) && strstr(err, "too "));
}

static void test_parse_valid(void) {
    /* comments, newlines inside groups and after |, every escape, names with - and _ */
    expect("# a comment\nroot ::= greeting-1 (\n  \" \" name_x # trailing\n)?\n"
           "greeting-1 ::= \"hi\" |\n  \"hello\"\nname_x ::= [A-Z] [a-z]*\n",
           L("hi", "hello", "hi Bob", "hello X"), L("", "hi ", "hey", "hi bob", "hi Bob!"));
    expect("root ::= \"\\x41\\u00e9\\U0001F600\\t\\n\\r\\\\\\\"\\[\\]\"", L("A\xc3\xa9\xf0\x9f\x98\x80\t\n\r\\\"[]"), L("A"));
    expect("root ::= [^\\]a-c\\-] .", L("dx", "zz", "\xc3\xa9\xc3\xa9"), L("ax", "]x", "-x", "d"));
    expect("root ::= \"ab\"{2} \"c\"{1,3} \"d\"{2,} \"e\"{,1}",
           L("ababcdd", "ababcccdddde"), L("abcdd", "ababccccdd", "ababcd", "ababcddee"));
    expect("root ::= (\"a\" | \"b\")+ \"\" [0-9]?", L("a", "ab7", "bbba"), L("", "7", "ab77"));
    expect("root ::= \"\"", L(""), L("a"));
    expect("root ::= [^]", L("a", "\xe2\x82\xac"), L("", "ab"));
    /* a nullable rule before a recursion is fine when something is consumed first */
    expect("root ::= \"(\" root? \")\"", L("()", "(())", "((()))"), L("(", "(()", ")("));
}

/* ---- the matcher --------------------------------------------------------------- */
static void test_matcher(void) {
    /* UTF-8: sets over code points, characters split across accepts */
    grammar *g = parse("root ::= [\\u0100-\\U0001F64F]+ \"!\"");
    if (g) {
        grammar_matcher *m = grammar_matcher_new(g);
        const char *s = "\xc4\x80\xf0\x9f\x98\x80!";   /* U+0100, U+1F600, ! */
        CHECK(grammar_matcher_accept(m, s, 1));          /* a lead byte alone: a character in range can follow */
        CHECK(!grammar_matcher_can_end(m));
        CHECK(grammar_matcher_accept(m, s + 1, 2));       /* the rest, and a 4-byte lead */
        CHECK(!grammar_matcher_accept(m, "A", 1));        /* not a continuation byte */
        CHECK(grammar_matcher_accept(m, s + 3, 3));
        CHECK(grammar_matcher_accept(m, "!", 1));
        CHECK(grammar_matcher_done(m));
        grammar_matcher_free(m);
        m = grammar_matcher_new(g);
        CHECK(!grammar_matcher_accept(m, "\xc3", 1));          /* U+00C0..U+00FF: all below the range */
        CHECK(!grammar_matcher_accept(m, "\xf0\x9f\x99\x90", 4));   /* U+1F650: above it */
        CHECK(!grammar_matcher_accept(m, "\xed\xa0\x80", 3));       /* a surrogate */
        CHECK(!grammar_matcher_accept(m, "\xc4", 1) || !grammar_matcher_accept(m, "\xc4", 1));
        grammar_matcher_free(m);
        grammar_free(g);
    }
    /* overlong forms and stray bytes never match, even against a negated set */
    expect("root ::= [^a]*", L("", "b", "\xc3\xa9"), L("a", "\xc1\xa1", "\x80", "\xff", "\xe0\x80\x80", "\xf4\x90\x80\x80"));
    /* ambiguity: many stacks at once */
    expect("root ::= (\"a\" | \"aa\" | \"aaa\")* \"b\"", L("b", "aaaaaaab"), L("aaaa", "ba"));
    /* deep recursion is bounded, not a crash: 3000 nested brackets are refused */
    g = parse("root ::= \"[\" root? \"]\"");
    if (g) {
        grammar_matcher *m = grammar_matcher_new(g);
        int taken = 0;
        for (int i = 0; i < 3000; i++) taken += grammar_matcher_accept(m, "[", 1);
        CHECKF(taken > 500 && taken < 3000, "%d", taken);
        grammar_matcher_free(m);
        grammar_free(g);
    }
    /* a rejected chunk leaves the state as it was */
    g = parse("root ::= \"abc\"");
    if (g) {
        grammar_matcher *m = grammar_matcher_new(g);
        CHECK(grammar_matcher_accept(m, "a", 1));
        CHECK(!grammar_matcher_accept(m, "bx", 2));
        CHECK(grammar_matcher_accept(m, "bc", 2) && grammar_matcher_done(m));
        grammar_matcher_free(m);
        grammar_free(g);
    }
}

/* ---- the schema compiler -------------------------------------------------------- */
static void schema_expect(const char *schema_json, bool strict, const char *const *yes, const char *const *no) {
    cJSON *s = cJSON_Parse(schema_json);
    CHECKF(s != NULL, "bad test schema %s", schema_json);
    if (!s) return;
    char err[256];
    grammar *g = grammar_from_json_schema(s, strict, err, sizeof err);
    CHECKF(g != NULL, "%s: %s", schema_json, err);
    for (int i = 0; g && yes && yes[i]; i++) {
        CHECKF(full(g, yes[i]) == 1, "%s should take %s", schema_json, yes[i]);
        cJSON *doc = cJSON_Parse(yes[i]);
        CHECKF(doc && json_check(doc, s, s), "test case %s is not valid under %s", yes[i], schema_json);
        cJSON_Delete(doc);
    }
    for (int i = 0; g && no && no[i]; i++) CHECKF(full(g, no[i]) == 0, "%s should refuse %s", schema_json, no[i]);
    grammar_free(g);
    cJSON_Delete(s);
}

/* A string schema with this pattern against raw values: the grammar (over
 * the value's JSON text) must agree with PCRE2 (json_check) and with the
 * expectation. */
static void pattern_expect_as(const char *pattern, bool oracle, const char *const *yes, const char *const *no) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "string");
    cJSON_AddStringToObject(s, "pattern", pattern);
    char err[256];
    grammar *g = grammar_from_json_schema(s, true, err, sizeof err);
    CHECKF(g != NULL, "pattern %s: %s", pattern, err);
    for (int pass = 0; g && pass < 2; pass++)
        for (int i = 0; (pass ? no : yes) && (pass ? no : yes)[i]; i++) {
            const char *x = (pass ? no : yes)[i];
            cJSON *v = cJSON_CreateString(x);
            char *text = cJSON_PrintUnformatted(v);
            int got = full(g, text);
            CHECKF(got == !pass, "pattern %s on %s: grammar %d", pattern, text, got);
            if (oracle) CHECKF(json_check(v, s, s) == !pass, "pattern %s on %s: PCRE2 disagrees with the test", pattern, text);
            free(text);
            cJSON_Delete(v);
        }
    grammar_free(g);
    cJSON_Delete(s);
}

/* PCRE2 reads these as ECMAScript does */
#define pattern_expect(p, yes, no) pattern_expect_as(p, true, yes, no)

static void pattern_refused(const char *pattern, const char *what) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "pattern", pattern);
    char err[256] = "";
    grammar *g = grammar_from_json_schema(s, true, err, sizeof err);
    CHECKF(!g && strstr(err, "pattern") && strstr(err, what), "pattern %s: want an error naming '%s', got '%s'", pattern, what, err);
    grammar_free(g);
    cJSON_Delete(s);
}

static void test_patterns(void) {
    /* what clients send: pydantic constr, zod regex, OpenAI's examples */
    pattern_expect("^\\d{3}-\\d{3}-\\d{4}$", L("555-123-4567"), L("555-1234-567", "5551234567", " 555-123-4567", "555-123-45678"));
    pattern_expect("^@[a-zA-Z0-9_]+$", L("@ada_99", "@x"), L("@", "ada", "@a-b", "@a\n"));
    pattern_expect("^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)$", L("0.1.2", "10.20.300"), L("01.1.1", "1.2", "1.2.3.4", "v1.2.3"));
    pattern_expect("^#(?:[0-9a-fA-F]{3}){1,2}$", L("#fff", "#A0b1C2"), L("#ffff", "fff", "#ggg", "#12345"));
    pattern_expect("^[A-Z]{2}[0-9]{6}$", L("AB123456"), L("ab123456", "AB12345", "AB1234567"));
    pattern_expect("^\\+?[1-9]\\d{1,14}$", L("+14155552671", "44"), L("+0123", "1", "+1 415"));
    pattern_expect("^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$", L("ada@example.org", "a.b@c.io"), L("ada@", "a b@c.io", "a@b@c.io", "a@b.c"));
    pattern_expect("^(?<year>\\d{4})-(?<mon>0[1-9]|1[0-2])$", L("2024-01", "1999-12"), L("2024-13", "2024-1", "24-01"));
    /* a search: unanchored ends take any text */
    pattern_expect("ok", L("ok", "it is ok!", "\"ok\"", "o\nok"), L("", "o k", "KO"));
    pattern_expect("^ab|cd$", L("abx", "xcd", "ab"), L("xab", "cdx", "ac"));
    pattern_expect("", L("", "anything \" \\"), NULL);
    /* characters JSON escapes, in classes and as literals; . and its line terminators */
    pattern_expect("^a\"b\\\\c$", L("a\"b\\c"), L("a\"bc", "ab\\c"));
    pattern_expect("^[^a-z]{1,3}$", L("\"", "\\", "\t\n", "\x01\x1f", "A\xc3\xa9"), L("a", "", "ABCD"));
    pattern_expect("^.+$", L("x", "\"\\\t", "\xe4\xb8\xad\xe6\x96\x87"), L("", "a\nb"));
    /* where PCRE2 reads ECMAScript otherwise: . and \r, \u{...} */
    pattern_expect_as("^.$", false, L("x"), L("\r", "\xe2\x80\xa8"));
    pattern_expect("^[\\s\\S]$", L("\n", " ", "x"), L("", "ab"));
    pattern_expect("^\\w+\\W\\D$", L("ab_9-x", "a  "), L("ab-9", "a-"));
    pattern_expect("^[\\u00e0-\\u00ff\\x41]*$", L("", "A\xc3\xa9\xc3\xbf"), L("B", "\xc4\x80"));
    pattern_expect_as("^\\u{1F600}?\\cJ$", false, L("\n", "\xf0\x9f\x98\x80\n"), L("", "x\n"));
    pattern_expect("^a{2}b{1,}c{0,1}d*?$", L("aab", "aabbbcdd"), L("ab", "aac", "aabcc"));
    pattern_expect("^x{,2}]}$", L("x{,2}]}"), L("xx]}"));   /* braces that are no quantifier are literal */
    pattern_expect("^[-a\\]b-]+$", L("-", "a]b-"), L("c", "\\"));
    /* what a grammar cannot match, or this subset does not take: clear errors */
    pattern_refused("(a)\\1", "backreference");
    pattern_refused("(?<n>a)\\k<n>", "backreference");
    pattern_refused("a(?=b)", "lookaround");
    pattern_refused("(?<!x)y", "lookaround");
    pattern_refused("\\bword", "boundar");
    pattern_refused("a(^b)", "start or end");
    pattern_refused("a$b", "start or end");
    pattern_refused("(ab", "parenthesis");
    pattern_refused("ab)", "parenthesis");
    pattern_refused("[ab", "class");
    pattern_refused("*a", "repeat");
    pattern_refused("a**", "repeat");
    pattern_refused("[z-a]", "order");
    pattern_refused("a{3,2}", "order");
    pattern_refused("a{20000}", "above");
    pattern_refused("\\p{L}", "property");
    /* a property's body longer than the formatting buffer is not cut */
    {
        char sch[1400], doc[1400], long_s[700];
        memset(long_s, 'q', sizeof long_s - 1);
        long_s[sizeof long_s - 1] = 0;
        snprintf(sch, sizeof sch, "{\"type\":\"object\",\"properties\":{\"e\":{\"const\":\"%s\"}},\"required\":[\"e\"]}", long_s);
        snprintf(doc, sizeof doc, "{\"e\":\"%s\"}", long_s);
        schema_expect(sch, true, L(doc), L("{\"e\":\"q\"}"));
    }
    /* pattern alone implies a string; a pattern must be a string */
    schema_expect("{\"pattern\":\"^[0-9]+$\"}", true, L("\"12\""), L("12", "\"a\""));
    cJSON *bad = cJSON_Parse("{\"type\":\"string\",\"pattern\":5}");
    char err[256] = "";
    grammar *g = grammar_from_json_schema(bad, true, err, sizeof err);
    CHECKF(!g && strstr(err, "'pattern' must be a string"), "%s", err);
    grammar_free(g);
    cJSON_Delete(bad);
}

static void test_schema(void) {
    schema_expect("{\"type\":\"string\"}", true, L("\"\"", "\"a b\\\"\\\\\\u00e9\\n\"", "\"\xc3\xa9\""),
                  L("\"a", "\"\n\"", "\"\\q\"", "1", "\"a\"\"", "\"\\u12\""));
    schema_expect("{\"type\":\"integer\"}", true, L("0", "-12", "1234567890123456"), L("01", "1.5", "-", "12345678901234567", "1e3"));
    schema_expect("{\"type\":\"number\"}", true, L("0", "-1.25", "3e10", "2.5E-3"), L("1.", ".5", "+1", "1e"));
    schema_expect("{\"type\":\"boolean\"}", true, L("true", "false"), L("True", "1"));
    schema_expect("{\"type\":\"null\"}", true, L("null"), L("nil"));
    schema_expect("{\"type\":[\"string\",\"null\"]}", true, L("null", "\"x\""), L("1"));
    schema_expect("{\"enum\":[\"red\",1,null,{\"a\":[true]}]}", true, L("\"red\"", "1", "null", "{\"a\":[true]}"),
                  L("\"blue\"", "2", "{\"a\":[false]}"));
    schema_expect("{\"const\":\"x\\\"y\"}", true, L("\"x\\\"y\""), L("\"xy\""));
    schema_expect("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", true, L("\"ab\"", "\"\xc3\xa9\xc3\xa9\xc3\xa9\"", "\"a\\nb\""),
                  L("\"a\"", "\"abcd\""));
    schema_expect("{\"type\":\"string\",\"format\":\"date\"}", true, L("\"2024-02-29\"", "\"1999-12-31\""),
                  L("\"2024-13-01\"", "\"2024-1-01\"", "\"x\""));
    schema_expect("{\"type\":\"string\",\"format\":\"time\"}", true, L("\"23:59:59Z\"", "\"01:02:03.123+05:30\""), L("\"24:00:00Z\"", "\"12:00:00\""));
    schema_expect("{\"type\":\"string\",\"format\":\"date-time\"}", true, L("\"2024-01-02T03:04:05Z\""), L("\"2024-01-02 03:04:05Z\""));
    schema_expect("{\"type\":\"string\",\"format\":\"uuid\"}", true, L("\"123e4567-e89b-12d3-a456-426614174000\""),
                  L("\"123e4567e89b12d3a456426614174000\""));
    schema_expect("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}", true,
                  L("[1]", "[1, 2,3]", "[ 1 ]"), L("[]", "[1,2,3,4]", "[1,]", "[\"a\"]"));
    schema_expect("{\"type\":\"array\",\"maxItems\":0}", true, L("[]"), L("[1]"));
    schema_expect("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", true,
                  L("[\"a\",1]"), L("[\"a\"]", "[1,\"a\"]"));
    const char *obj = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"},"
                      "\"c\":{\"type\":\"boolean\"}},\"required\":[\"b\"]}";
    schema_expect(obj, true, L("{\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\"}", "{\"b\":\"x\",\"c\":true}", "{ \"a\" : 1 , \"b\" : \"\" , \"c\" : false }"),
                  L("{}", "{\"a\":1}", "{\"b\":\"x\",\"a\":1}", "{\"b\":\"x\",\"d\":1}", "{\"b\":\"x\",}", "{,\"b\":\"x\"}"));
    schema_expect("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}}",
                  true, L("{}", "{\"a\":1,\"z\":\"y\"}", "{\"z\":\"y\",\"w\":\"v\"}"), L("{\"z\":1}"));
    schema_expect("{\"type\":\"object\"}", false, L("{}", "{\"k\":[1,{\"x\":null}]}"), L("[]", "{1:2}"));
    schema_expect("{\"type\":\"object\"}", true, L("{}"), L("{\"k\":1}"));
    schema_expect("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}", true, L("1", "\"a\""), L("\"ab\"", "true"));
    schema_expect("{\"oneOf\":[{\"const\":1},{\"const\":2}]}", true, L("1", "2"), L("3"));
    schema_expect("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
                  "{\"properties\":{\"b\":{\"type\":\"null\"}},\"required\":[\"b\"]}]}", true,
                  L("{\"a\":1,\"b\":null}"), L("{\"a\":1}", "{\"b\":null}"));
    schema_expect("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                  "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},"
                  "\"$ref\":\"#/$defs/node\"}", true,
                  L("{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"), L("{\"v\":1}", "{\"v\":1,\"next\":2}"));
    schema_expect("{\"definitions\":{\"n\":{\"type\":\"integer\"}},\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/n\"}}", true,
                  L("[1,2]"), L("[\"x\"]"));
    schema_expect("{\"type\":\"string\",\"pattern\":\"^a+$\"}", true, L("\"aaa\""), L("\"zzz\""));   /* pattern: enforced (test_patterns) */
    schema_expect("{}", true, L("1", "\"s\"", "[{}]", "null"), L("nul", "[1"));

    static const struct { const char *s, *msg; } bad[] = {
        { "{\"type\":\"strin\"}", "unknown type 'strin'" },
        { "{\"$ref\":\"#/$defs/nope\"}", "points at nothing" },
        { "{\"$ref\":\"http://x/y.json\"}", "only local $refs" },
        { "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":7}}}", "at /properties/a: 'type' must be" },
        { "{\"type\":\"string\",\"minLength\":-1}", "non-negative integer" },
        { "{\"type\":\"array\",\"minItems\":3,\"maxItems\":1}", "maxItems is below" },
        { "{\"enum\":[]}", "non-empty list" },
        { "false", "matches nothing" },
        { "{\"type\":\"string\",\"maxLength\":1000000}", "above" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *s = cJSON_Parse(bad[i].s);
        char err[256] = "";
        grammar *g = s ? grammar_from_json_schema(s, true, err, sizeof err) : NULL;
        CHECKF(!g && strstr(err, bad[i].msg), "%s: got '%s', want '%s'", bad[i].s, err, bad[i].msg);
        grammar_free(g);
        cJSON_Delete(s);
    }
    /* a hostile schema: 5000 nested arrays is bounded work and an answer either way */
    char *deep = malloc(200000);
    size_t k = 0;
    for (int i = 0; i < 5000; i++) k += (size_t)sprintf(deep + k, "{\"items\":");
    k += (size_t)sprintf(deep + k, "{}");
    for (int i = 0; i < 5000; i++) deep[k++] = '}';
    deep[k] = 0;
    cJSON *s = cJSON_ParseWithOpts(deep, NULL, 0);
    if (s) {
        char err[256];
        grammar *g = grammar_from_json_schema(s, true, err, sizeof err);
        CHECK(g != NULL || err[0]);
        grammar_free(g);
        cJSON_Delete(s);
    }
    free(deep);
    char err[256];
    grammar *g = grammar_json_object(err, sizeof err);
    CHECK(g && full(g, "{\"a\": [1, 2.5, \"x\", {\"b\": null}], \"c\": true}") == 1 && full(g, "[1]") == 0);
    grammar_free(g);
}

/* ---- the mask against a brute-force oracle ------------------------------------------ */
static tokenizer *load_tok(const char *rel) {
    gguf_file gf;
    char err[256];
    if (gguf_open(test_path(rel), &gf, err, sizeof err)) { fprintf(stderr, "%s\n", err); return NULL; }
    tokenizer *t = tokenizer_load(&gf, err, sizeof err);
    gguf_close(&gf);
    return t;
}

/* From the states reached by the prefixes of `walk`, the mask must equal,
 * token by token, feeding the token's bytes to a matcher of its own. */
static void mask_vs_oracle(const tokenizer *t, const grammar_vocab *v, const grammar *g, const char *walk, bool control) {
    int n = grammar_vocab_n(v);
    char *buf = malloc(4096);
    size_t wl = strlen(walk);
    for (size_t cut = 0; cut <= wl; cut += 1 + cut / 3) {
        grammar_sampler *gs = grammar_sampler_new(g, v, true);
        gm_set_merge_disabled(true);   /* the oracle keeps every partial character apart */
        gm_set_share_disabled(true);   /* and computes every byte's transition */
        grammar_matcher *oracle = grammar_matcher_new(g);
        gm_set_merge_disabled(false);
        gm_set_share_disabled(false);
        if (!gs || !oracle) { CHECK(0); break; }
        /* the sampler advances token by token, taking single-byte pieces of walk */
        bool ok = true;
        for (size_t i = 0; i < cut && ok; i++) {
            int32_t id = -1;
            for (int k = 0; k < n && id < 0; k++) {   /* a token whose bytes are walk[i] */
                size_t len = tokenizer_token_bytes(t, k, false, buf, 4096);
                if (len == 1 && buf[0] == walk[i] && !tokenizer_is_control(t, k) && !tokenizer_is_eog(t, k)) id = k;
            }
            ok = id >= 0 && grammar_sampler_accept(gs, id);
        }
        CHECKF(ok, "walk prefix %zu", cut);
        CHECK(grammar_matcher_accept(oracle, walk, cut));
        int n_allowed;
        const uint64_t *mask = grammar_sampler_mask(gs, &n_allowed);
        int32_t base = gm_current(oracle);
        int mismatches = 0, count = 0;
        for (int k = 0; k < n && mask; k++) {
            bool want;
            if (tokenizer_is_eog(t, k)) want = grammar_matcher_can_end(oracle);
            else if (tokenizer_is_control(t, k)) want = false;
            else {
                size_t len = tokenizer_token_bytes(t, k, false, buf, 4096);
                want = len > 0 && grammar_matcher_accept(oracle, buf, len);
                gm_set_state(oracle, base);
                base = gm_current(oracle);
            }
            bool got = mask[k >> 6] >> (k & 63) & 1;
            if (control && k % 1000 == 7) got = !got;   /* planted: the comparison must see it */
            if (got != want && mismatches++ < 3) fprintf(stderr, "%s token %d (%s): mask %d oracle %d\n",
                                                         control ? "control" : "mask", k, tokenizer_token_text(t, k), got, want);
            count += want;
            /* allows() (the fast path) agrees too */
            if (!control && k % 97 == 0) CHECK(grammar_sampler_allows(gs, k) == want);
        }
        if (control) CHECKF(mismatches > 0, "the planted mismatch was not seen");
        else {
            CHECKF(mismatches == 0, "prefix '%.*s': %d mismatches", (int)cut, walk, mismatches);
            CHECKF(count == n_allowed, "count %d vs %d", count, n_allowed);
            if (getenv("GRAMMAR_TEST_VERBOSE")) printf("prefix %zu: %d of %d tokens possible\n", cut, n_allowed, n);
        }
        grammar_matcher_free(oracle);
        grammar_sampler_free(gs);
        if (control) break;
    }
    free(buf);
}

static void test_mask(void) {
    const char *vocabs[] = { "fixtures/qwen2-tiny-Q8_0.gguf", "fixtures/llama3-tiny-Q4_0.gguf", "models/stories260K.gguf" };
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":4},"
                         "\"n\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"\xc3\xa9t\xc3\xa9\"]}}},"
                         "\"required\":[\"name\",\"n\"]}";
    const char *walk = "{\"name\": \"ab\xc3\xa9\", \"n\": -12, \"tags\": [\"\xc3\xa9t\xc3\xa9\"]}";
    cJSON *s = cJSON_Parse(schema);
    char err[256];
    grammar *g = grammar_from_json_schema(s, true, err, sizeof err);
    CHECKF(g != NULL, "%s", err);
    grammar *gu = parse("root ::= [^\\u00e9]* \"\\u00e9\\U0001F600\" | \"x\" [\\u0080-\\uFFFF]{2}");
    for (size_t i = 0; i < sizeof vocabs / sizeof *vocabs && g && gu; i++) {
        tokenizer *t = load_tok(vocabs[i]);
        CHECKF(t != NULL, "%s", vocabs[i]);
        if (!t) continue;
        grammar_vocab *v = grammar_vocab_from_tokenizer(t);
        CHECK(v != NULL);
        if (v) {
            mask_vs_oracle(t, v, g, walk, false);
            mask_vs_oracle(t, v, gu, "ab\xc3\xa9", false);   /* the walk ends inside no character, but tokens do */
            if (i == 0) mask_vs_oracle(t, v, g, walk, true);
        }
        grammar_vocab_free(v);
        tokenizer_free(t);
    }
    grammar_free(g);
    grammar_free(gu);
    cJSON_Delete(s);
}

/* Whole partial states (an unfinished character every stack takes however it
 * ends, interned without its bits) against a matcher that keeps the bits:
 * random byte strings, valid characters near every boundary and broken
 * ones, must be taken or refused alike, byte by byte. */
static void test_merge_whole(void) {
    const char *gbnf[] = {
        "root ::= [^\"\\\\\\x00-\\x1f]* \"\\\"\"",
        "root ::= ([\\u4e00-\\u4eff] | [\\u0400-\\u04ff] | \"x\")* \"!\"",
        "root ::= [^\\u4e50]* \"!\"",
        "root ::= [\\U00010000-\\U0010FFFF]* | [\\u0800-\\uD7FF]+ \"a\"",
        "root ::= [^a]* | \"\\u00e9\" [\\u00e0-\\u00ff]",
    };
    static const uint32_t cps[] = { 0x41, 0x22, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x4E00, 0x4E50, 0x4EFF, 0x4F00, 0x400, 0xD7FF,
                                    0xE000, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0x10FFFF, 0xE9, 0xE0, 0xFF, 0x100 };
    static const char *broken[] = { "\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf", "\xed\xa0\x80",
                                    "\xed\xbf\xbf", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80", "\xff", "\xe4\xb9" };
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (size_t gi = 0; gi < sizeof gbnf / sizeof *gbnf; gi++) {
        grammar *g = parse(gbnf[gi]);
        if (!g) continue;
        for (int round = 0; round < 300; round++) {
            char buf[256];
            size_t n = 0;
            int len = 1 + round % 12;
            for (int k = 0; k < len && n + 8 < sizeof buf; k++) {
                r ^= r << 13; r ^= r >> 7; r ^= r << 17;
                if (r % 9 == 0) {
                    const char *b = broken[(r >> 8) % (sizeof broken / sizeof *broken)];
                    memcpy(buf + n, b, strlen(b));
                    n += strlen(b);
                    continue;
                }
                uint32_t c = cps[(r >> 8) % (sizeof cps / sizeof *cps)];
                if (r % 5 == 0) c += (uint32_t)((r >> 20) % 64);   /* near the boundary, not on it */
                if (c >= 0xD800 && c <= 0xDFFF) c = 0xE000;
                if (c > 0x10FFFF) c = 0x10FFFF;
                if (c < 0x80) buf[n++] = (char)c;
                else if (c < 0x800) { buf[n++] = (char)(0xC0 | c >> 6); buf[n++] = (char)(0x80 | (c & 63)); }
                else if (c < 0x10000) { buf[n++] = (char)(0xE0 | c >> 12); buf[n++] = (char)(0x80 | (c >> 6 & 63)); buf[n++] = (char)(0x80 | (c & 63)); }
                else { buf[n++] = (char)(0xF0 | c >> 18); buf[n++] = (char)(0x80 | (c >> 12 & 63)); buf[n++] = (char)(0x80 | (c >> 6 & 63)); buf[n++] = (char)(0x80 | (c & 63)); }
            }
            grammar_matcher *a = grammar_matcher_new(g);
            gm_set_merge_disabled(true);
            gm_set_share_disabled(true);
            grammar_matcher *b = grammar_matcher_new(g);
            gm_set_merge_disabled(false);
            gm_set_share_disabled(false);
            if (!a || !b) { CHECK(0); grammar_matcher_free(a); grammar_matcher_free(b); break; }
            for (size_t i = 0; i < n; i++) {
                bool ya = grammar_matcher_accept(a, buf + i, 1), yb = grammar_matcher_accept(b, buf + i, 1);
                CHECKF(ya == yb, "grammar %zu round %d byte %zu: merged %d, kept %d", gi, round, i, ya, yb);
                CHECK(grammar_matcher_can_end(a) == grammar_matcher_can_end(b));
                CHECK(grammar_matcher_done(a) == grammar_matcher_done(b));
            }
            grammar_matcher_free(a);
            grammar_matcher_free(b);
        }
        grammar_free(g);
    }
}

/* The control that the merging is taken: inside a JSON string, the mask over a
 * vocabulary full of CJK characters needs a few dozen states, not thousands;
 * and that byte classes are: far fewer transitions are computed. */
static void test_merge_taken(void) {
    tokenizer *t = load_tok("fixtures/qwen3-tiny-Q4_K_M.gguf");
    CHECK(t != NULL);
    if (!t) return;
    grammar_vocab *v = grammar_vocab_from_tokenizer(t);
    grammar *g = parse("root ::= \"\\\"\" [^\"\\\\\\x00-\\x1f]* \"\\\"\"");
    uint32_t st[2] = { 0, 0 };
    uint64_t computed[2] = { 0, 0 };
    for (int off = 0; off < 3 && v && g; off++) {   /* both on; merging off; sharing off */
        gm_set_merge_disabled(off == 1);
        gm_set_share_disabled(off == 2);
        grammar_sampler *gs = grammar_sampler_new(g, v, true);
        gm_set_merge_disabled(false);
        gm_set_share_disabled(false);
        if (!gs) { CHECK(0); break; }
        int32_t q = -1;
        char buf[64];
        for (int k = 0; k < grammar_vocab_n(v) && q < 0; k++)
            if (tokenizer_token_bytes(t, k, false, buf, sizeof buf) == 1 && buf[0] == '"' && !tokenizer_is_control(t, k)) q = k;
        CHECK(q >= 0 && grammar_sampler_accept(gs, q));
        int n_allowed;
        CHECK(grammar_sampler_mask(gs, &n_allowed) != NULL && n_allowed > 1000);
        if (off < 2) st[off] = gm_n_states(grammar_sampler_matcher(gs));
        if (off != 1) computed[off / 2] = gm_n_computed(grammar_sampler_matcher(gs));
        grammar_sampler_free(gs);
    }
    CHECKF(st[0] < 100 && st[1] > 5 * st[0], "states: %u merged, %u kept", st[0], st[1]);
    CHECKF(computed[0] * 2 < computed[1], "transitions computed: %llu with byte classes, %llu without",
           (unsigned long long)computed[0], (unsigned long long)computed[1]);
    if (getenv("GRAMMAR_TEST_VERBOSE")) printf("transitions computed: %llu with byte classes, %llu without\n",
                                               (unsigned long long)computed[0], (unsigned long long)computed[1]);
    grammar_free(g);
    grammar_vocab_free(v);
    tokenizer_free(t);
}


/* ---- the candidate path of grammar_pick ----------------------------------------------- */
/* A random GBNF grammar: a root of alternatives over literals and sets. */
static void random_gbnf(uint64_t *r, char *out, size_t cap) {
    static const char *const items[] = { "\"a\"", "\"{\\\"k\\\": \"", "[0-9]", "[a-f]+", "[^\\\"\\\\]", "\" \"", "\"\\u00e9t\\u00e9\"",
                                         "[\\u4e00-\\u9fff]", "\"true\"", "\"null\"", "[A-Z] [a-z]?", "\",\"", "\"}\"", "[^a-z]" };
    size_t n = 0;
    n += (size_t)snprintf(out + n, cap - n, "root ::= item* \"!\"\nitem ::= ");
    int alts = 2 + (int)(*r % 4);
    for (int a = 0; a < alts; a++) {
        int len = 1 + (int)((*r >> 8) % 3);
        for (int k = 0; k < len; k++) {
            *r ^= *r << 13; *r ^= *r >> 7; *r ^= *r << 17;
            n += (size_t)snprintf(out + n, cap - n, "%s ", items[*r % (sizeof items / sizeof *items)]);
        }
        if (a + 1 < alts) n += (size_t)snprintf(out + n, cap - n, "| ");
    }
}

/* grammar_pick with the candidate path against the mask every time (lazy
 * false): the same tokens, over random logits with a few refused tokens
 * boosted (so the first pick is refused) and a few allowed ones (what a
 * model that follows the format does), for greedy and sampling chains. The
 * planted control: where the grammar allows many tokens (inside a string),
 * the candidate path must take almost no masks. */
static void test_pick(void) {
    const char *vocabs[] = { "fixtures/qwen2-tiny-Q8_0.gguf", "fixtures/llama3-tiny-Q4_0.gguf" };
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":20},"
                         "\"n\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"\xc3\xa9t\xc3\xa9\"]}}},"
                         "\"required\":[\"name\",\"n\"]}";
    cJSON *sj = cJSON_Parse(schema);
    char err[256];
    grammar *gr[4] = { grammar_from_json_schema(sj, true, err, sizeof err), NULL, NULL, NULL };
    uint64_t r = 0x2545F4914F6CDD1Dull;
    for (int i = 1; i < 4; i++) {
        char text[1024];
        random_gbnf(&r, text, sizeof text);
        gr[i] = parse(text);
        CHECKF(gr[i] != NULL, "%s", text);
    }
    uint64_t masks_lazy = 0, masks_full = 0, dense_lazy = 0, dense_full = 0;
    int steps_total = 0;
    for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
        tokenizer *t = load_tok(vocabs[vi]);
        CHECK(t != NULL);
        grammar_vocab *v = t ? grammar_vocab_from_tokenizer(t) : NULL;
        int n = v ? grammar_vocab_n(v) : 0;
        float *row = malloc(sizeof *row * (size_t)n), *work = malloc(sizeof *work * (size_t)n);
        for (int gi = 0; v && row && work && gi < 4; gi++) {
            if (!gr[gi]) continue;
            for (int cfg = 0; cfg < 3; cfg++) {
                sampler_params p;
                sampler_params_default(&p);
                p.seed = 100 + (uint64_t)cfg;
                if (cfg == 0) p.temperature = 0.0f;
                if (cfg == 2) { p.temperature = 1.5f; p.repeat_penalty = 1.2f; p.top_p = 1.0f; p.min_p = 0.0f; }
                sampler *sa = sampler_new(&p, n), *sb = sampler_new(&p, n);
                grammar_sampler *ga = grammar_sampler_new(gr[gi], v, true), *gb = grammar_sampler_new(gr[gi], v, true);
                grammar_sampler *go = grammar_sampler_new(gr[gi], v, true);   /* the oracle's mask, for the boosts */
                for (int step = 0; step < 50 && sa && sb && ga && gb && go; step++) {
                    for (int i = 0; i < n; i++) { r ^= r << 13; r ^= r >> 7; r ^= r << 17; row[i] = (float)(r >> 40) * 0x1p-22f; }
                    int n_allowed;
                    const uint64_t *om = grammar_sampler_mask(go, &n_allowed);
                    for (int k = 0; om && k < 6; k++) {   /* refused tokens on top (the first pick is refused) */
                        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
                        int i = (int)(r % (uint64_t)n);
                        while (i < n && om[i >> 6] >> (i & 63) & 1) i++;
                        if (i < n) row[i] += 8.0f;
                    }
                    for (int k = 0; om && n_allowed && step % 4 && k < 3; k++) {   /* and a few allowed ones next */
                        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
                        int want = (int)(r % (uint64_t)n_allowed);
                        for (int i = 0; i < n; i++)
                            if (om[i >> 6] >> (i & 63) & 1 && want-- == 0) { row[i] += 6.0f + (float)k; break; }
                    }
                    uint64_t ma = grammar_sampler_n_masks(ga), mb = grammar_sampler_n_masks(gb);
                    int32_t ta = grammar_pick(sa, ga, row, work, n, true), tb = grammar_pick(sb, gb, row, work, n, false);
                    if (om && n_allowed > n / 4) {   /* a dense state: the candidates decide */
                        dense_lazy += grammar_sampler_n_masks(ga) - ma;
                        dense_full += grammar_sampler_n_masks(gb) - mb;
                    }
                    CHECKF(ta == tb, "vocab %zu grammar %d config %d step %d: %d with the candidate path, %d with the mask",
                           vi, gi, cfg, step, ta, tb);
                    steps_total++;
                    if (ta != tb) break;
                    if (ta < 0 || tokenizer_is_eog(t, ta) || !grammar_sampler_accept(ga, ta) || !grammar_sampler_accept(gb, ta) ||
                        !grammar_sampler_accept(go, ta) || grammar_sampler_done(ga)) {
                        masks_lazy += grammar_sampler_n_masks(ga);
                        masks_full += grammar_sampler_n_masks(gb);
                        grammar_sampler_free(ga); grammar_sampler_free(gb); grammar_sampler_free(go);
                        ga = grammar_sampler_new(gr[gi], v, true); gb = grammar_sampler_new(gr[gi], v, true);
                        go = grammar_sampler_new(gr[gi], v, true);
                        continue;
                    }
                    sampler_accept(sa, ta);
                    sampler_accept(sb, ta);
                }
                if (getenv("GRAMMAR_TEST_VERBOSE")) printf("vocab %zu grammar %d config %d: masks %llu / %llu\n", vi, gi, cfg,
                    (unsigned long long)(masks_lazy + (ga ? grammar_sampler_n_masks(ga) : 0)), (unsigned long long)(masks_full + (gb ? grammar_sampler_n_masks(gb) : 0)));
                if (ga) masks_lazy += grammar_sampler_n_masks(ga);
                if (gb) masks_full += grammar_sampler_n_masks(gb);
                grammar_sampler_free(ga); grammar_sampler_free(gb); grammar_sampler_free(go);
                sampler_free(sa); sampler_free(sb);
            }
        }
        free(row); free(work);
        grammar_vocab_free(v);
        tokenizer_free(t);
    }
    printf("pick: %d steps, %llu masks with the candidate path, %llu without (in states allowing a quarter of the tokens: %llu, %llu)\n",
           steps_total, (unsigned long long)masks_lazy, (unsigned long long)masks_full, (unsigned long long)dense_lazy,
           (unsigned long long)dense_full);
    CHECK(masks_lazy < masks_full);
    CHECKF(dense_full > 50 && dense_lazy * 10 < dense_full, "dense states' masks: %llu with the candidate path, %llu without",
           (unsigned long long)dense_lazy, (unsigned long long)dense_full);
    for (int i = 0; i < 4; i++) grammar_free(gr[i]);
    cJSON_Delete(sj);
}

/* ---- generations -------------------------------------------------------------------- */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
    long ntok;
    char text[64][8192];
    size_t len[64];
    finish_reason fin[64];
} runs;

static void on_ev(void *user, const job_event *ev) {
    runs *r = user;
    /* the job id picks the buffer (ids are handed out from 1 in submit order per engine) */
    int k = (int)((ev->job_id - 1) % 64);
    pthread_mutex_lock(&r->mu);
    if (ev->text_len && r->len[k] + ev->text_len < sizeof r->text[k]) {
        memcpy(r->text[k] + r->len[k], ev->text, ev->text_len);
        r->len[k] += ev->text_len;
    }
    if (ev->type == JOB_EV_DONE) { r->fin[k] = ev->finish; r->ntok += ev->n_generated; r->pending--; pthread_cond_signal(&r->cv); }
    pthread_mutex_unlock(&r->mu);
}

/* n generations of one schema; returns how many parsed and validated. */
static int generate(engine *e, const tokenizer *t, const char *schema_json, int n, uint64_t seed0, int max_tokens, int *length_cut) {
    static runs r;
    cJSON *s = cJSON_Parse(schema_json);
    char err[256];
    grammar *g = grammar_from_json_schema(s, true, err, sizeof err);
    CHECKF(g != NULL, "%s", err);
    int good = 0;
    int32_t *prompt = NULL;
    int np = tokenizer_encode(t, "Answer in JSON:", 15, true, false, &prompt);
    for (int base = 0; base < n && g; base += 64) {
        int batch = n - base < 64 ? n - base : 64;
        memset(&r, 0, sizeof r);
        pthread_mutex_init(&r.mu, NULL);
        pthread_cond_init(&r.cv, NULL);
        r.pending = batch;
        uint64_t ids[64];
        for (int i = 0; i < batch; i++) {
            job_params p;
            job_params_default(&p);
            p.sampling.temperature = 1.0f + 0.5f * (float)(i % 3);
            p.sampling.seed = seed0 + (uint64_t)(base + i);
            p.max_tokens = max_tokens;
            p.grammar = g;
            CHECK(engine_submit(e, prompt, np, &p, on_ev, &r, &ids[i]) == ENGINE_OK);
        }
        pthread_mutex_lock(&r.mu);
        while (r.pending) pthread_cond_wait(&r.cv, &r.mu);
        pthread_mutex_unlock(&r.mu);
        if (getenv("GRAMMAR_TEST_VERBOSE")) printf("%ld tokens\n", r.ntok);
        for (int i = 0; i < batch; i++) {
            int k = (int)((ids[i] - 1) % 64);
            if (getenv("GRAMMAR_TEST_VERBOSE") && i < 2) printf("  %s\n", r.text[k]);
            r.text[k][r.len[k]] = 0;
            const char *end = NULL;
            cJSON *doc = cJSON_ParseWithOpts(r.text[k], &end, 0);
            while (end && (*end == ' ' || *end == '\n' || *end == '\t')) end++;
            bool ok = doc && end && !*end && json_check(doc, s, s);
            if (r.fin[k] == FINISH_LENGTH) (*length_cut)++;
            good += ok;
            if (!ok && !grammar_mask_disabled())
                fprintf(stderr, "invalid (%s): %.300s\n", finish_reason_name(r.fin[k]), r.text[k]);
            cJSON_Delete(doc);
        }
        pthread_mutex_destroy(&r.mu);
        pthread_cond_destroy(&r.cv);
    }
    free(prompt);
    grammar_free(g);
    cJSON_Delete(s);
    return good;
}

static void test_generations(void) {
    char err[512];
    model *m = model_load(test_path("fixtures/qwen2-tiny-Q8_0.gguf"), err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return;
    engine_config c;
    engine_config_default(&c);
    c.n_slots = 8;
    c.n_ctx = 512;
    c.n_threads = 2;
    engine *e = engine_create(m, &c, err, sizeof err);
    CHECKF(e != NULL, "%s", err);
    static const char *const schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\"},"
        "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"]}",
        "{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",7,null]},\"minItems\":1,\"maxItems\":5}",
        "{\"$defs\":{\"p\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},\"y\":{\"anyOf\":[{\"type\":\"null\"},"
        "{\"type\":\"string\",\"format\":\"date\"}]}},\"required\":[\"x\",\"y\"]}},"
        "\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"format\":\"uuid\"},\"pts\":{\"type\":\"array\","
        "\"items\":{\"$ref\":\"#/$defs/p\"},\"maxItems\":3}},\"required\":[\"id\",\"pts\"]}",
        "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":6},"
        "\"t\":{\"type\":[\"integer\",\"null\"]},\"u\":{\"const\":\"fixed\"}},\"required\":[\"s\",\"t\",\"u\"]}",
        "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3,4}$\"},"
        "\"user\":{\"type\":\"string\",\"pattern\":\"^@[a-zA-Z0-9_]{1,8}$\"},\"ver\":{\"type\":\"string\","
        "\"pattern\":\"^(0|[1-9]\\\\d{0,2})\\\\.(0|[1-9]\\\\d{0,2})$\"},\"odd\":{\"type\":\"string\",\"pattern\":\"^[^a-z0-9]{1,4}$\"}},"
        "\"required\":[\"code\",\"user\",\"ver\",\"odd\"]}",
    };
    int total = 0, good = 0, cut = 0;
    /* under emulation (tests/aarch64/run) a tenth: there the point is the
     * other CPU's masks and pick, and the 220 cost many minutes of qemu */
    const int scale = getenv("HEARTH_EMULATED") ? 10 : 1;
    for (size_t i = 0; e && i < sizeof schemas / sizeof *schemas; i++) {
        int n = (i < 4 ? 50 : 20) / scale;
        good += generate(e, m->tok, schemas[i], n, 1000 * (i + 1), 400, &cut);
        total += n;
    }
    CHECKF(good == total, "%d of %d generations parse and validate (%d cut by length)", good, total, cut);
    printf("generations: %d of %d valid\n", good, total);
    /* the planted control: the same with the mask off must fail */
    grammar_set_mask_disabled(true);
    int cut2 = 0, good2 = e ? generate(e, m->tok, schemas[0], 8, 77, 48, &cut2) : 8;
    grammar_set_mask_disabled(false);
    CHECKF(good2 < 2, "with the mask off %d of 8 still validate", good2);
    printf("control (mask off): %d of 8 valid\n", good2);
    engine_destroy(e);
    model_free(m);
}

int main(int argc, char **argv) {
    kernels_select();
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || !strcmp(only, "parse")) { test_parse_errors(); test_parse_valid(); }
    if (!only || !strcmp(only, "match")) { test_matcher(); test_merge_whole(); }
    if (!only || !strcmp(only, "schema")) { test_schema(); test_patterns(); }
    if (!only || !strcmp(only, "mask")) { test_mask(); test_merge_taken(); }
    if (!only || !strcmp(only, "pick")) test_pick();
    if (!only || !strcmp(only, "gen")) test_generations();
    return test_summary("grammar");
}
