/* libFuzzer target: Jinja template sources from bytes. The first byte picks
 * the variables (none, a conversation with tools, deep nesting); the rest is
 * the template, parsed with jinja_parse and, when it parses, rendered.
 * Checks: parse and render each give a result or a one-line error, never
 * both or neither; no crash, no leak, and bounded time and memory (the
 * interpreter's step, depth, output and memory caps; libFuzzer's -timeout
 * and -rss_limit_mb catch a cap that does not hold). */
#include "engine/text/jinja.h"
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const var_sets[] = {
    "{}",
    "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"hi\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
    "\"arguments\":{\"a\":1}}}]},{\"role\":\"tool\",\"content\":\"r\"}],\"tools\":[{\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}],"
    "\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"enable_thinking\":false}",
    "{\"x\":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]],\"s\":\"abc\",\"n\":null,\"f\":1.5,\"b\":true}",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static cJSON *vars[3];
    if (!vars[0]) for (int i = 0; i < 3; i++) vars[i] = cJSON_Parse(var_sets[i]);
    char err[512] = "";
    jinja_template *t = jinja_parse((const char *)data + 1, size - 1, NULL, err, sizeof err);
    if (!t == !err[0]) { fprintf(stderr, "parse: template %p with err '%s'\n", (void *)t, err); abort(); }
    if (!t) return 0;
    err[0] = 0;
    char *out = jinja_render(t, vars[data[0] % 3], err, sizeof err);
    if (!out == !err[0]) { fprintf(stderr, "render: output %p with err '%s'\n", (void *)out, err); abort(); }
    free(out);
    jinja_free(t);
    return 0;
}
