/* Built-in chat template renderers, chosen by matching the GGUF's Jinja
 * source; no Jinja is interpreted.
 *
 * BOS: hearth tokenizes the rendered text with add_special=true (the
 * tokenizer puts BOS first when the model wants one) and parse_special=true
 * (special-token text in the prompt becomes the special token). So the
 * renderers never write the leading BOS that many templates start with, or
 * the model would see two. A BOS or EOS *inside* the conversation (Llama 2
 * opens every later user turn with BOS; Llama 2, Mistral and Zephyr close
 * turns with EOS) is written as the token text given by the caller; when
 * that is NULL or "", "<s>" and "</s>" are used.
 *
 * The families, for system S, user U, assistant A (and the opening of the
 * assistant turn added by add_assistant):
 *
 *   chatml   <|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n
 *            <|im_start|>assistant\nA<|im_end|>\n   + <|im_start|>assistant\n
 *            Tool results follow Qwen: a run of tool messages becomes one
 *            user turn of <tool_response>\n...\n</tool_response> blocks.
 *   llama3   <|start_header_id|>R<|end_header_id|>\n\nX<|eot_id|> per message,
 *            X trimmed; tool results use the role "ipython" (Llama 3.1+).
 *   llama2   [INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST] A </s><s>[INST] U2 [/INST]
 *   mistral  [INST] S\n\nU [/INST]A</s>[INST] U2 [/INST]   (Instruct v0.2 form;
 *            the system text is folded into the next user turn)
 *   gemma    <start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\nA
 *            <end_of_turn>\n   + <start_of_turn>model\n   (U, A trimmed)
 *   phi3     <|system|>\nS<|end|>\n<|user|>\nU<|end|>\n<|assistant|>\nA<|end|>\n
 *            + <|assistant|>\n
 *   zephyr   <|system|>\nS</s>\n<|user|>\nU</s>\n<|assistant|>\nA</s>\n
 *            + <|assistant|>\n
 *
 * Where a family has no system turn (llama2, mistral, gemma), system text is
 * held and put at the start of the next user turn; a system message with no
 * user turn after it gets a user turn of its own. Only chatml and llama3 can
 * express tool results; elsewhere "tool" is an error naming the role. */
#include "engine/text/chat_template.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[TPL_COUNT] = {
    "chatml", "llama3", "llama2", "mistral", "gemma", "phi3", "zephyr",
};

int chat_template_from_name(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < TPL_COUNT; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

const char *chat_template_name(int id) {
    return id >= 0 && id < TPL_COUNT ? names[id] : NULL;
}

/* Distinctive substrings, most specific first. */
int chat_template_detect(const char *src) {
    if (!src) return -1;
    if (strstr(src, "<|im_start|>")) return TPL_CHATML;
    if (strstr(src, "<|start_header_id|>")) return TPL_LLAMA3;
    if (strstr(src, "<start_of_turn>")) return TPL_GEMMA;
    if (strstr(src, "[INST]")) return strstr(src, "<<SYS>>") ? TPL_LLAMA2 : TPL_MISTRAL;
    if (strstr(src, "<|user|>")) {
        if (strstr(src, "<|end|>")) return TPL_PHI3;
        if (strstr(src, "eos_token") || strstr(src, "</s>")) return TPL_ZEPHYR;
    }
    return -1;
}

/* ---- a growing string --------------------------------------------------- */

typedef struct { char *p; size_t len, cap; bool oom; } sbuf;

static void putn(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            if (cap > ((size_t)-1) / 2) { b->oom = true; return; }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void put(sbuf *b, const char *s) { putn(b, s, strlen(s)); }

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Jinja's trim (Python strip) on either end. */
static void put_trimmed(sbuf *b, const char *s, bool left, bool right) {
    size_t n = strlen(s), i = 0;
    if (left) while (i < n && is_space(s[i])) i++;
    if (right) while (n > i && is_space(s[n - 1])) n--;
    putn(b, s + i, n - i);
}

/* ---- rendering ------------------------------------------------------------ */

enum { R_SYSTEM, R_USER, R_ASSISTANT, R_TOOL };

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int role_of(const char *r) {
    if (!r) return -1;
    if (!strcmp(r, "system")) return R_SYSTEM;
    if (!strcmp(r, "user")) return R_USER;
    if (!strcmp(r, "assistant")) return R_ASSISTANT;
    if (!strcmp(r, "tool")) return R_TOOL;
    return -1;
}

/* One user turn of the families without a system turn, with the held
 * system text (if any) in front. */
static void user_turn(int id, sbuf *b, const sbuf *sys, const char *u, const char *bos) {
    bool has_sys = sys->len > 0;
    switch (id) {
    case TPL_LLAMA2:
        /* Meta's template strips the whole "<<SYS>>...U" string, so with a
         * system block only U's right end is trimmed. */
        if (b->len > 0) put(b, bos);
        put(b, "[INST] ");
        if (has_sys) { put(b, "<<SYS>>\n"); put(b, sys->p); put(b, "\n<</SYS>>\n\n"); }
        put_trimmed(b, u, !has_sys, true);
        put(b, " [/INST]");
        break;
    case TPL_MISTRAL:
        put(b, "[INST] ");
        if (has_sys) { put(b, sys->p); put(b, "\n\n"); }
        put(b, u);
        put(b, " [/INST]");
        break;
    default: /* TPL_GEMMA */
        put(b, "<start_of_turn>user\n");
        if (has_sys) { put(b, sys->p); put(b, "\n\n"); }
        put_trimmed(b, u, true, true);
        put(b, "<end_of_turn>\n");
        break;
    }
}

char *chat_template_render(int id, const chat_msg *msgs, int n_msgs, bool add_assistant,
                           const char *bos, const char *eos, char *err, size_t errlen) {
    if (id < 0 || id >= TPL_COUNT) { set_err(err, errlen, "unknown chat template id %d", id); return NULL; }
    if (n_msgs < 0 || (n_msgs > 0 && !msgs)) { set_err(err, errlen, "no messages"); return NULL; }
    if (!bos || !*bos) bos = "<s>";
    if (!eos || !*eos) eos = "</s>";
    bool tool_ok = id == TPL_CHATML || id == TPL_LLAMA3;

    /* Check every role before writing anything. */
    for (int i = 0; i < n_msgs; i++) {
        int r = role_of(msgs[i].role);
        if (!msgs[i].role) { set_err(err, errlen, "message %d has no role", i); return NULL; }
        if (r < 0) { set_err(err, errlen, "unknown role '%.64s' in message %d", msgs[i].role, i); return NULL; }
        if (r == R_TOOL && !tool_ok) {
            set_err(err, errlen, "the %s chat template has no place for role 'tool' (message %d)", names[id], i);
            return NULL;
        }
    }

    sbuf b = {0}, sys = {0};
    for (int i = 0; i < n_msgs; i++) {
        int r = role_of(msgs[i].role);
        const char *c = msgs[i].content ? msgs[i].content : "";
        switch (id) {
        case TPL_CHATML:
            if (r == R_TOOL) {
                bool first = i == 0 || role_of(msgs[i - 1].role) != R_TOOL;
                bool last = i == n_msgs - 1 || role_of(msgs[i + 1].role) != R_TOOL;
                if (first) put(&b, "<|im_start|>user");
                put(&b, "\n<tool_response>\n"); put(&b, c); put(&b, "\n</tool_response>");
                if (last) put(&b, "<|im_end|>\n");
            } else {
                put(&b, "<|im_start|>"); put(&b, msgs[i].role); put(&b, "\n");
                put(&b, c); put(&b, "<|im_end|>\n");
            }
            break;
        case TPL_LLAMA3:
            put(&b, "<|start_header_id|>");
            put(&b, r == R_TOOL ? "ipython" : msgs[i].role);
            put(&b, "<|end_header_id|>\n\n");
            put_trimmed(&b, c, true, true);
            put(&b, "<|eot_id|>");
            break;
        case TPL_PHI3:
        case TPL_ZEPHYR:
            put(&b, "<|"); put(&b, msgs[i].role); put(&b, "|>\n"); put(&b, c);
            put(&b, id == TPL_PHI3 ? "<|end|>" : eos);
            put(&b, "\n");
            break;
        default: /* llama2, mistral, gemma: system text waits for a user turn */
            if (r == R_SYSTEM) {
                if (sys.len > 0) put(&sys, "\n\n");
                put(&sys, c);
            } else if (r == R_USER) {
                user_turn(id, &b, &sys, c, bos);
                sys.len = 0;
            } else if (id == TPL_LLAMA2) {
                put(&b, " "); put_trimmed(&b, c, true, true); put(&b, " "); put(&b, eos);
            } else if (id == TPL_MISTRAL) {
                put(&b, c); put(&b, eos);
            } else {
                put(&b, "<start_of_turn>model\n"); put_trimmed(&b, c, true, true);
                put(&b, "<end_of_turn>\n");
            }
            break;
        }
    }
    /* system text with no user turn after it */
    if (sys.len > 0) user_turn(id, &b, &sys, "", bos);

    if (add_assistant) {
        switch (id) {
        case TPL_CHATML: put(&b, "<|im_start|>assistant\n"); break;
        case TPL_LLAMA3: put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n"); break;
        case TPL_GEMMA: put(&b, "<start_of_turn>model\n"); break;
        case TPL_PHI3: case TPL_ZEPHYR: put(&b, "<|assistant|>\n"); break;
        default: break;   /* llama2, mistral: "[/INST]" already opens the answer */
        }
    }
    free(sys.p);
    if (!b.oom && !b.p) put(&b, "");   /* an empty conversation is "" */
    if (b.oom) {
        free(b.p);
        set_err(err, errlen, "out of memory rendering the chat template");
        return NULL;
    }
    return b.p;
}
