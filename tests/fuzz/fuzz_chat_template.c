/* libFuzzer target: a chat request's messages (the input as JSON, or a
 * conversation built from its bytes when it is not JSON) through every
 * built-in chat template with chat_template_apply, tools and kwargs from the
 * same bytes. Checks:
 *   - it returns a NUL-terminated prompt or fails with a one-line message,
 *     never both, never neither, never a crash (the sanitizers watch the rest);
 *   - on success with plain string contents, every user message's content
 *     (trimmed) is in the prompt for the families that keep them all. */
#include "engine/text/chat_template.h"
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = { "chatml", "llama3", "llama2", "mistral", "gemma", "phi3", "phi4", "zephyr" };
#define N (sizeof names / sizeof *names)
static chat_template *tpls[N];

static cJSON *conversation(const uint8_t *d, size_t n) {
    static const char *const roles[] = { "system", "user", "assistant", "tool", "narrator" };
    cJSON *m = cJSON_CreateArray();
    size_t i = 0;
    while (i < n && cJSON_GetArraySize(m) < 16) {
        uint8_t h = d[i++];
        size_t len = h >> 3;
        if (len > n - i) len = n - i;
        char text[64];
        memcpy(text, d + i, len);
        text[len] = 0;
        i += len;
        cJSON *msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "role", roles[h % 5]);
        if (h & 4) cJSON_AddNullToObject(msg, "content");
        else cJSON_AddStringToObject(msg, "content", text);
        cJSON_AddItemToArray(m, msg);
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tpls[0])
        for (size_t i = 0; i < N; i++) {
            char err[256];
            if (!(tpls[i] = chat_template_load(chat_template_builtin(names[i]), "<s>", "</s>", err, sizeof err))) {
                fprintf(stderr, "%s: %s\n", names[i], err);
                abort();
            }
        }
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = 0;
    cJSON *msgs = cJSON_Parse(s);
    if (!cJSON_IsArray(msgs)) { cJSON_Delete(msgs); msgs = conversation(data, size); }
    cJSON *kw = cJSON_CreateObject();
    cJSON_AddBoolToObject(kw, "enable_thinking", size & 1);
    cJSON *tools = size & 2 ? cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]") : NULL;
    for (size_t i = 0; i < N; i++) {
        char err[256] = "";
        char *out = chat_template_apply(tpls[i], msgs, tools, kw, size & 4, err, sizeof err);
        if (!out == !err[0]) { fprintf(stderr, "%s: result %p with err '%s'\n", names[i], (void *)out, err); abort(); }
        if (strchr(err, '\n') && !out) { fprintf(stderr, "%s: a multi-line error: %s\n", names[i], err); abort(); }
        if (out && i != 6 && i != 2 && i != 3 && i != 4) {   /* families that print every message as given */
            const cJSON *m;
            cJSON_ArrayForEach(m, msgs) {
                const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
                const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
                if (!cJSON_IsString(r) || strcmp(r->valuestring, "user") || !cJSON_IsString(c)) continue;
                const char *a = c->valuestring;
                size_t n = strlen(a);
                while (*a == ' ' || *a == '\n' || *a == '\t' || *a == '\r' || *a == '\f' || *a == '\v') { a++; n--; }
                while (n && (a[n - 1] == ' ' || a[n - 1] == '\n' || a[n - 1] == '\t' || a[n - 1] == '\r' ||
                             a[n - 1] == '\f' || a[n - 1] == '\v')) n--;
                char *want = strndup(a, n);
                if (!strstr(out, want)) { fprintf(stderr, "%s: user content '%s' missing\n", names[i], want); abort(); }
                free(want);
            }
        }
        free(out);
    }
    cJSON_Delete(tools);
    cJSON_Delete(kw);
    cJSON_Delete(msgs);
    free(s);
    return 0;
}
