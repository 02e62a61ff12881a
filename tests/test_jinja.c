/* Jinja interpreter tests: each construct chat templates use, rendered
 * with known variables against the exact text the reference renderer
 * (@huggingface/jinja, with transformers' trim_blocks and lstrip_blocks)
 * gives; parse errors with their line; and the caps that keep a hostile
 * template from hanging or exhausting memory. */
#include "tests/test.h"
#include "engine/text/jinja.h"
#include <cjson/cJSON.h>

static const char vars_json[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\" hi \"},"
    "{\"role\":\"assistant\",\"content\":\"yo\"}],\"d\":{\"a\":1,\"b\":\"x\",\"c\":[1,2],\"n\":null},"
    "\"l\":[1,\"a\",null,true,2.5],\"s\":\"Hello\",\"n\":null,\"e\":\"\",\"t\":true}";

static cJSON *vars;

static char *run(const char *src, char *err, size_t errlen) {
    jinja_template *t = jinja_parse(src, strlen(src), NULL, err, errlen);
    if (!t) return NULL;
    char *out = jinja_render(t, vars, err, errlen);
    jinja_free(t);
    return out;
}

static void eq(const char *src, const char *want) {
    char err[512] = "";
    char *got = run(src, err, sizeof err);
    CHECKF(got && !strcmp(got, want), "%s\n  got  [%s]\n  want [%s]\n  err  %s", src, got ? got : "(null)", want, err);
    free(got);
}

static void fails(const char *src, const char *needle) {
    char err[512] = "";
    char *got = run(src, err, sizeof err);
    CHECKF(!got && strstr(err, needle), "%s\n  got [%s], err [%s], want an error with '%s'", src, got ? got : "(null)", err, needle);
    free(got);
}

static void test_output_and_literals(void) {
    eq("{{ true }}|{{ false }}|{{ none }}|{{ n }}", "true|false||");
    eq("{{ l }}", "[1, \"a\", null, true, 2.5]");
    eq("{{ d }}", "{\"a\": 1, \"b\": \"x\", \"c\": [1, 2], \"n\": null}");
    eq("{{ 3 * 1.0 }}|{{ 10 / 2 }}|{{ 1 / 3 }}|{{ 0.1 + 0.2 }}|{{ 2.5 }}", "3.0|5.0|0.3333333333333333|0.30000000000000004|2.5");
    eq("{{ 'a' 'b' }}{{ \"c\\n\" }}{{ '\\u00e9' }}", "abc\né");
    eq("{{ [1, [2, 'x']] }}|{{ {'k': [none]} }}", "[1, [2, \"x\"]]|{\"k\": [null]}");
    eq("{{ undefined_thing }}|{{ d.zz }}|{{ l[10] }}", "||");
}

static void test_operators(void) {
    eq("{{ 7 // 2 }} {{ -7 // 2 }} {{ 5 % 3 }} {{ -5 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}", "3 -4 2 -2 1024 0.5");
    eq("{{ 'x' ~ 1 ~ true }}|{{ 'a' + 1 }}|{{ 1 + 1.5 }}|{{ [1] + [2] }}", "x1true|a1|2.5|[1, 2]");
    eq("{{ 1 in [1,2] }}|{{ 'a' in 'cat' }}|{{ 'a' in d }}|{{ 3 not in [1] }}", "true|true|true|true");
    eq("{{ not true or false and true }}|{{ 1 == 1.0 }}|{{ 'a' < 'b' }}|{{ [1,2] == [1,2] }}", "false|true|true|true");
    eq("{{ 'y' if t else 'z' }}|{{ 'x' if false }}|{{ n or 'dflt' }}|{{ s and 1 }}", "y||dflt|1");
    eq("{{ -l[0] }}|{{ -1 | abs }}|{{ +2 }}", "-1|1|2");
}

static void test_access(void) {
    eq("{{ d.c[1] }}|{{ d['c'][0] }}|{{ d.c.0 }}|{{ s[0] }}|{{ s[-1] }}", "2|1|1|H|o");
    eq("{{ s[1:3] }}|{{ l[-2:] }}|{{ l[::2] }}|{{ s[::-1] }}|{{ l[:-3] }}", "el|[true, 2.5]|[1, null, 2.5]|olleH|[1, \"a\"]");
    eq("{{ messages[0].role }}{{ messages[-1]['content'] }}", "systemyo");
}

static void test_control(void) {
    eq("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
       "{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}",
       "10truefalse332;21falsefalse321;32falsetrue310;");
    eq("{% for m in messages %}{{ loop.previtem.role if loop.previtem }}>{{ loop.nextitem.role if loop.nextitem }};{% endfor %}",
       ">user;system>assistant;user>;");
    eq("{% for m in messages if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}{{ m.role }} {% endfor %}",
       "1/2user 2/2assistant ");
    eq("{% for x in [] %}a{% else %}empty{% endfor %}", "empty");
    eq("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=x;c=[1, 2];n=;");
    eq("{% for k in d %}{{ k }}{% endfor %}|{% for c in 'abc' %}{{ c }}.{% endfor %}", "abcn|a.b.c.");
    eq("{% for x in range(5) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}", "02");
    eq("{% if n %}a{% elif e %}b{% elif s %}c{% else %}d{% endif %}", "c");
    eq("{% set x = 1 %}{% for i in [1,2] %}{% set x = x + i %}{% endfor %}{{ x }}", "1");
    eq("{% set ns = namespace(x=1, y=[]) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}", "4");
    eq("{% set a, b = [1, 2] %}{{ b }}{{ a }}", "21");
    eq("{% set blk %}in {{ s }}{% endset %}[{{ blk }}]", "[in Hello]");
    eq("{% macro m(a, b=2) %}<{{ a }}|{{ b }}>{% endmacro %}{{ m(1) }}{{ m(1, b=3) }}{{ m(a=5) }}", "<1|2><1|3><5|2>");
    eq("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}inside{% endcall %}", "[inside]");
    eq("{% filter upper %}abc {{ s }}{% endfilter %}", "ABC HELLO");
    eq("{% raw %}{{ not }}{% endraw %}", "{{ not }}");
    eq("{# a comment #}x{#- trimmed -#}  y", "xy");
}

static void test_whitespace(void) {
    /* trim_blocks drops the newline after a tag; lstrip_blocks the indent before it */
    eq("a\n  {% if true %}\n  b\n  {% endif %}\nc", "a\n  b\nc");
    eq("a  {%- if true -%}  b  {%- endif %}", "ab");
    eq("{{ 'x' -}}\n\n  {{- 'y' }}", "xy");
    eq("line\n", "line");   /* a single trailing newline goes */
    eq("a\r\nb", "a\nb");
    eq("  {%+ if true %}x{% endif %}", "  x");
}

static void test_filters(void) {
    eq("{{ d | tojson }}", "{\"a\": 1, \"b\": \"x\", \"c\": [1, 2], \"n\": null}");
    eq("{{ d | tojson(indent=2) }}", "{\n  \"a\": 1,\n  \"b\": \"x\",\n  \"c\": [\n    1,\n    2\n  ],\n  \"n\": null\n}");
    eq("{{ d | tojson(separators=(',', ':')) }}|{{ {'b':1,'a':2} | tojson(sort_keys=true) }}",
       "{\"a\":1,\"b\":\"x\",\"c\":[1,2],\"n\":null}|{\"a\": 2, \"b\": 1}");
    eq("{{ 'é\"\\n<>&' | tojson }}|{{ [] | tojson(indent=2) }}|{{ {} | tojson }}", "\"é\\\"\\n<>&\"|[]|{}");
    eq("{{ '  x ' | trim }}|{{ s | upper }}|{{ s | lower }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}",
       "x|HELLO|hello|Hello World|HELLO");
    eq("{{ 'é àb ω ж' | upper }}|{{ 'É ÀB Ω Ж' | lower }}|{{ 'éa' | capitalize }}|{{ 'ab_cd 3x ñu' | title }}",
       "É ÀB Ω Ж|é àb ω ж|Éa|Ab_cd 3x ñU");
    eq("{{ s | length }}|{{ l | length }}|{{ d | length }}|{{ 'abc' | replace('b', 'X') }}", "5|5|4|aXc");
    eq("{{ l | join(',') }}|{{ [1, 2] | join }}|{{ messages | map(attribute='role') | join(' ') }}", "1,a,,true,2.5|12|system user assistant");
    eq("{{ l | first }}|{{ l | last }}|{{ d | items | list }}", "1|2.5|[[\"a\", 1], [\"b\", \"x\"], [\"c\", [1, 2]], [\"n\", null]]");
    eq("{{ 2.0 | int }}|{{ '3' | int }}|{{ '3.7' | int }}|{{ 'x' | int }}|{{ 3 | float }}|{{ 5 | string }}", "2|3|3|0|3.0|5");
    eq("{{ zz | default('dflt') }}|{{ '' | default('dflt', true) }}|{{ s | safe }}", "dflt|dflt|Hello");
    eq("{{ [1, 2, 2, 3] | unique | list }}|{{ [3, 1, 2] | sort }}|{{ d | dictsort }}",
       "[1, 2, 3]|[1, 2, 3]|[[\"a\", 1], [\"b\", \"x\"], [\"c\", [1, 2]], [\"n\", null]]");
    eq("{{ 'x\\ny\\n\\nz' | indent(2) }}|{{ 'x\\ny' | indent(2, true) }}", "x\n  y\n\n  z|  x\n  y");
    eq("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}", "[\" hi \"]");
    eq("{{ messages | rejectattr('role', 'in', ['system', 'user']) | list | length }}", "1");
    eq("{{ [0, 1, 2] | select | list }}|{{ [0, 1, 2] | reject('odd') | list }}", "[1, 2]|[0, 2]");
    eq("{{ 'a b  c' | wordcount }}|{{ [1, 2, 3, 4, 5] | batch(2) | list }}", "3|[[1, 2], [3, 4], [5]]");
}

static void test_tests(void) {
    eq("{{ n is none }}|{{ zz is defined }}|{{ zz is undefined }}|{{ d is mapping }}|{{ s is string }}|{{ 1 is number }}",
       "true|false|true|true|true|true");
    eq("{{ s is iterable }}|{{ l is sequence }}|{{ t is boolean }}|{{ t is true }}|{{ t is false }}|{{ 3 is odd }}",
       "true|true|true|true|false|true");
    eq("{{ 'a' is equalto 'a' }}|{{ 2 is divisibleby 2 }}|{{ s is not none }}|{{ true is number }}", "true|true|true|false");
}

static void test_methods_and_globals(void) {
    eq("{{ ' a '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a b  c '.split() }}",
       "a|axx|[\"a\", \"b\", \"\", \"c\"]|[\"a\", \"b\", \"c\"]");
    eq("{{ s.startswith('He') }}|{{ s.endswith('lo') }}|{{ s.upper() }}|{{ s.lower() }}|{{ 'aaa'.replace('a', 'b', 2) }}",
       "true|true|HELLO|hello|bba");
    eq("{{ 'hi there'.title() }}|{{ s.find('l') }}|{{ '{} {}'.format(1, 'x') }}", "Hi There|2|1 x");
    eq("{{ d.get('zz', 5) }}|{{ d.get('a') }}|{{ d.keys() }}|{{ d.values() | length }}", "5|1|[\"a\", \"b\", \"c\", \"n\"]|4");
    eq("{{ range(3) | list }}|{{ range(1, 7, 2) | list }}|{{ strftime_now('%Y') | length }}", "[0, 1, 2]|[1, 3, 5]|4");
    eq("{% set x = dict(a=1) %}{{ x.a }}", "1");
    fails("{{ raise_exception('boom: bad role') }}", "boom: bad role");
}

static void test_errors(void) {
    fails("a\n{% if x %}", "line 2");
    fails("{% if x %}\n{% endfor %}", "endfor");
    fails("{{ 1 + }}", "line 1");
    fails("{% frobnicate %}", "frobnicate");
    fails("{{ 'abc }}", "unterminated string");
    fails("{{ x | nosuchfilter }}", "nosuchfilter");
    fails("{{ x is nosuchtest }}", "nosuchtest");
    fails("{{ 1 / 0 }}", "division by zero");
    fails("{{ 1 < 'a' }}", "compare");
    fails("{% set x = 1 %}{% set x.y = 2 %}", "namespace");
    /* what transformers' immutable sandbox refuses (and the reference lacks): clear errors */
    fails("{% set x = [1] %}{% set _ = x.append(2) %}", "cannot change a list in place");
    fails("{% set x = [1] %}{{ x.pop() }}", "immutable sandbox");
    fails("{% set x = [1] %}{% do x.extend([2]) %}", "cannot change a list");
    fails("{% set x = [1] %}{{ x.insert(0, 2) }}", "cannot change a list");
    fails("{% set d = {'a': 1} %}{% do d.update({'b': 2}) %}", "cannot change a dict in place");
    fails("{% set d = {} %}{{ d.setdefault('a', 1) }}", "cannot change a dict");
    eq("{% set x = [1] %}{{ x.append is defined }}|{{ x + [2] }}", "true|[1, 2]");
    eq("{% set d = {'update': 3, 'pop': 4} %}{{ d.update }}{{ d.pop }}", "34");   /* keys of those names read as keys */
    fails("{% for x in [1] recursive %}{{ loop(x) }}{% endfor %}", "recursive for loops are not supported");
    fails("{% include 'other.jinja' %}", "unsupported tag 'include'");
    fails("{% import 'm.jinja' as m %}", "unsupported tag 'import'");
    fails("{% extends 'base.jinja' %}", "unsupported tag 'extends'");
}

static void test_limits(void) {
    /* each a hostile template: an error, quickly, never a hang or a crash */
    fails("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "");   /* steps or memory */
    fails("{% for a in range(3000) %}{% for b in range(1000) %}{{ 1 }}{% endfor %}{% endfor %}", "steps");
    fails("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested");
    fails("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
          "");
    char deep[4096];
    size_t k = 0;
    k += (size_t)snprintf(deep, sizeof deep, "{{ ");
    for (int i = 0; i < 1000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 1000; i++) deep[k++] = ')';
    memcpy(deep + k, " }}", 4);
    fails(deep, "nested too deeply");
    fails("{{ 'x' * 100000000 }}", "too large");
    /* nothing to repeat is done at once, whatever the count (a fuzzer's timeout) */
    eq("[{{ '' * 9223372036854775807 }}]|{{ ([] * 9223372036854775807) | length }}", "[]|0");
    /* an integer literal past int64 is a float, as the JavaScript reference reads it */
    eq("{{ 99999999999999999999 > 9223372036854775807 }}|{{ 123456789012345678901234567890123456789012345678901234567890123 > 1e62 }}",
       "true|true");
}

int main(void) {
    vars = cJSON_Parse(vars_json);
    test_output_and_literals();
    test_operators();
    test_access();
    test_control();
    test_whitespace();
    test_filters();
    test_tests();
    test_methods_and_globals();
    test_errors();
    test_limits();
    cJSON_Delete(vars);
    return test_summary("jinja");
}
