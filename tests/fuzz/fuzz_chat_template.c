/* libFuzzer target for the chat templates. Built and run by tests/fuzz/run.
 *
 * Input: byte 0 picks the template id (-1 .. TPL_COUNT, the two ends
 * invalid); byte 1: add_assistant (bit 0), bos (bits 1-2) and eos (bits 3-4)
 * from a small set that includes NULL and "". The rest is split on 0x1E
 * into messages: each one's first byte picks its role from a set that
 * includes invalid ones (NULL, "", "User", "ipython"), the rest is the
 * content (cut at a NUL, as a C string is). Checks:
 *   - render succeeds exactly when the id and every role are valid and
 *     "tool" only goes to a template that has a place for it; a failure
 *     comes with a one-line message;
 *   - on success every message's content, trimmed as the templates trim,
 *     appears in the output;
 *   - chat_template_detect on the whole input as a string gives -1 or a
 *     template whose name maps back to it. */
#include "engine/text/chat_template.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_MSGS = 64 };

static const char *const roles[8] = {"system", "user", "assistant", "tool", NULL, "", "User", "ipython"};
static const char *const bos_set[4] = {NULL, "", "<s>", "<|begin_of_text|>"};
static const char *const eos_set[4] = {NULL, "", "</s>", "<|eot_id|>"};

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The content with white space trimmed at both ends, as a (ptr, len). */
static const char *trimmed(const char *s, size_t *len) {
    size_t n = strlen(s), i = 0;
    while (i < n && is_space(s[i])) i++;
    while (n > i && is_space(s[n - 1])) n--;
    *len = n - i;
    return s + i;
}

static void detect(const uint8_t *data, size_t size) {
    char *src = malloc(size + 1);
    memcpy(src, data, size);
    src[size] = 0;
    int d = chat_template_detect(src);
    if (d < -1 || d >= TPL_COUNT) abort();
    if (d >= 0 && chat_template_from_name(chat_template_name(d)) != d) abort();
    int id = chat_template_from_name(src);
    if (id >= 0 && strcmp(chat_template_name(id), src) != 0) abort();
    free(src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    detect(data, size);
    if (size < 2) return 0;
    int id = (int)(data[0] % (TPL_COUNT + 2)) - 1;
    bool add_assistant = data[1] & 1;
    const char *bos = bos_set[(data[1] >> 1) & 3], *eos = eos_set[(data[1] >> 3) & 3];
    const uint8_t *p = data + 2, *end = data + size;

    /* one buffer holds every content NUL-terminated */
    char *text = malloc(size);
    chat_msg msgs[MAX_MSGS];
    int n = 0;
    size_t used = 0;
    bool roles_ok = true;
    while (p < end && n < MAX_MSGS) {
        const uint8_t *sep = memchr(p, 0x1E, (size_t)(end - p));
        const uint8_t *stop = sep ? sep : end;
        const char *role = roles[p[0] % 8];
        if (p[0] == 0x1E) role = "user";     /* an empty piece */
        size_t len = stop > p ? (size_t)(stop - p) - 1 : 0;
        memcpy(text + used, p + 1, len);
        text[used + len] = 0;
        msgs[n].role = role;
        msgs[n].content = text + used;
        used += len + 1;
        bool tool_ok = id == TPL_CHATML || id == TPL_LLAMA3;
        if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
                      (strcmp(role, "tool") || !tool_ok)))
            roles_ok = false;
        n++;
        p = sep ? sep + 1 : end;
    }

    char err[256] = "";
    char *out = chat_template_render(id, msgs, n, add_assistant, bos, eos, err, sizeof err);
    bool expect_ok = id >= 0 && id < TPL_COUNT && roles_ok;
    if ((out != NULL) != expect_ok) {
        fprintf(stderr, "template %d: render %s (%s)\n", id, out ? "succeeded" : "failed", err);
        abort();
    }
    if (!out && (!err[0] || strchr(err, '\n'))) abort();
    for (int i = 0; out && i < n; i++) {
        size_t len;
        const char *c = trimmed(msgs[i].content, &len);
        if (len && !memmem(out, strlen(out), c, len)) {
            fprintf(stderr, "template %s: message %d's content is missing from the output\n", chat_template_name(id), i);
            abort();
        }
    }
    free(out);
    free(text);
    return 0;
}
