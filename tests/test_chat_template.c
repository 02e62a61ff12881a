/* Chat template tests: exact renderings of each family (expected strings
 * written by hand from each family's documented format), detection of real
 * and representative Jinja sources, and errors. */
#include "tests/test.h"
#include "engine/text/chat_template.h"
#include "engine/gguf/gguf.h"

#include <cjson/cJSON.h>

static const chat_msg conv[] = {
    {"system", "You are helpful."},
    {"user", "Hi there"},
    {"assistant", "Hello! How can I help?"},
    {"user", "Tell me a joke."},
};

typedef struct {
    int id;
    const char *three;  /* the first 3 messages, no assistant opening */
    const char *four;   /* all 4, with the assistant opening */
} expect;

static const expect cases[] = {
    {TPL_CHATML,
     "<|im_start|>system\nYou are helpful.<|im_end|>\n"
     "<|im_start|>user\nHi there<|im_end|>\n"
     "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n",
     "<|im_start|>system\nYou are helpful.<|im_end|>\n"
     "<|im_start|>user\nHi there<|im_end|>\n"
     "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
     "<|im_start|>user\nTell me a joke.<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {TPL_LLAMA3,
     "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>",
     "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {TPL_LLAMA2,
     "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi there [/INST] Hello! How can I help? </s>",
     "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi there [/INST] Hello! How can I help? </s>"
     "<s>[INST] Tell me a joke. [/INST]"},
    {TPL_MISTRAL,
     "[INST] You are helpful.\n\nHi there [/INST]Hello! How can I help?</s>",
     "[INST] You are helpful.\n\nHi there [/INST]Hello! How can I help?</s>"
     "[INST] Tell me a joke. [/INST]"},
    {TPL_GEMMA,
     "<start_of_turn>user\nYou are helpful.\n\nHi there<end_of_turn>\n"
     "<start_of_turn>model\nHello! How can I help?<end_of_turn>\n",
     "<start_of_turn>user\nYou are helpful.\n\nHi there<end_of_turn>\n"
     "<start_of_turn>model\nHello! How can I help?<end_of_turn>\n"
     "<start_of_turn>user\nTell me a joke.<end_of_turn>\n"
     "<start_of_turn>model\n"},
    {TPL_PHI3,
     "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi there<|end|>\n"
     "<|assistant|>\nHello! How can I help?<|end|>\n",
     "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi there<|end|>\n"
     "<|assistant|>\nHello! How can I help?<|end|>\n"
     "<|user|>\nTell me a joke.<|end|>\n<|assistant|>\n"},
    {TPL_ZEPHYR,
     "<|system|>\nYou are helpful.</s>\n<|user|>\nHi there</s>\n"
     "<|assistant|>\nHello! How can I help?</s>\n",
     "<|system|>\nYou are helpful.</s>\n<|user|>\nHi there</s>\n"
     "<|assistant|>\nHello! How can I help?</s>\n"
     "<|user|>\nTell me a joke.</s>\n<|assistant|>\n"},
};

static void check_render(int id, const chat_msg *m, int n, bool add, const char *bos,
                         const char *eos, const char *want) {
    char err[256] = "";
    char *got = chat_template_render(id, m, n, add, bos, eos, err, sizeof err);
    CHECKF(got && !strcmp(got, want), "%s (%d msgs, add=%d):\n got: [%s]\nwant: [%s]\n err: %s",
           chat_template_name(id), n, add, got ? got : "(null)", want, err);
    free(got);
}

static void test_families(void) {
    CHECK(sizeof cases / sizeof cases[0] == TPL_COUNT);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const expect *e = &cases[i];
        check_render(e->id, conv, 3, false, "<s>", "</s>", e->three);
        check_render(e->id, conv, 4, true, "<s>", "</s>", e->four);
        /* an empty bos/eos falls back to <s> / </s> */
        check_render(e->id, conv, 4, true, "", NULL, e->four);
    }
    /* the model's own eos text where the family spells it */
    check_render(TPL_ZEPHYR, conv + 1, 2, true, "", "<|endoftext|>",
                 "<|user|>\nHi there<|endoftext|>\n<|assistant|>\nHello! How can I help?<|endoftext|>\n"
                 "<|assistant|>\n");
    /* llama3 and gemma trim like their Jinja does; chatml keeps the text */
    const chat_msg pad[] = {{"user", "  spaced out \n"}};
    check_render(TPL_LLAMA3, pad, 1, false, "", "",
                 "<|start_header_id|>user<|end_header_id|>\n\nspaced out<|eot_id|>");
    check_render(TPL_GEMMA, pad, 1, false, "", "",
                 "<start_of_turn>user\nspaced out<end_of_turn>\n");
    check_render(TPL_CHATML, pad, 1, false, "", "",
                 "<|im_start|>user\n  spaced out \n<|im_end|>\n");
    /* no system: no empty system block */
    check_render(TPL_LLAMA2, conv + 1, 1, true, "<s>", "</s>", "[INST] Hi there [/INST]");
    check_render(TPL_GEMMA, conv + 1, 1, true, "<bos>", "<eos>",
                 "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n");
    /* a system message alone still reaches the model */
    check_render(TPL_MISTRAL, conv, 1, true, "", "", "[INST] You are helpful.\n\n [/INST]");
    /* empty conversation */
    check_render(TPL_CHATML, NULL, 0, true, "", "", "<|im_start|>assistant\n");
    check_render(TPL_CHATML, NULL, 0, false, "", "", "");
    /* NULL content is empty */
    const chat_msg nul[] = {{"user", NULL}};
    check_render(TPL_PHI3, nul, 1, false, "", "", "<|user|>\n<|end|>\n");
}

static void test_tools(void) {
    const chat_msg m[] = {
        {"user", "Weather in Oslo?"},
        {"assistant", "<tool_call>\n{\"name\": \"weather\"}\n</tool_call>"},
        {"tool", "rain"},
        {"tool", "5C"},
    };
    check_render(TPL_CHATML, m, 4, true, "", "",
                 "<|im_start|>user\nWeather in Oslo?<|im_end|>\n"
                 "<|im_start|>assistant\n<tool_call>\n{\"name\": \"weather\"}\n</tool_call><|im_end|>\n"
                 "<|im_start|>user\n<tool_response>\nrain\n</tool_response>\n"
                 "<tool_response>\n5C\n</tool_response><|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_render(TPL_LLAMA3, m + 2, 1, false, "", "",
                 "<|start_header_id|>ipython<|end_header_id|>\n\nrain<|eot_id|>");
    const int no_tool[] = {TPL_LLAMA2, TPL_MISTRAL, TPL_GEMMA, TPL_PHI3, TPL_ZEPHYR};
    for (int i = 0; i < 5; i++) {
        char err[256] = "";
        char *s = chat_template_render(no_tool[i], m, 4, true, "", "", err, sizeof err);
        CHECKF(!s && strstr(err, "tool"), "%s: tool role should fail, err '%s'",
               chat_template_name(no_tool[i]), err);
        free(s);
    }
}

static void test_errors(void) {
    const chat_msg bad[] = {{"user", "hi"}, {"narrator", "once"}};
    for (int id = 0; id < TPL_COUNT; id++) {
        char err[256] = "";
        char *s = chat_template_render(id, bad, 2, true, "", "", err, sizeof err);
        CHECKF(!s && strstr(err, "narrator"), "%s: err '%s'", chat_template_name(id), err);
        free(s);
    }
    const chat_msg norole[] = {{NULL, "x"}};
    char err[64] = "";
    char *s = chat_template_render(TPL_CHATML, norole, 1, true, "", "", err, sizeof err);
    CHECK(!s && err[0]);
    s = chat_template_render(TPL_COUNT, conv, 1, true, "", "", err, sizeof err);
    CHECK(!s);
    s = chat_template_render(-1, conv, 1, true, "", "", NULL, 0);   /* no err buffer */
    CHECK(!s);
    s = chat_template_render(TPL_CHATML, NULL, 2, true, "", "", err, sizeof err);
    CHECK(!s);
    /* a tiny err buffer is truncated, not overrun */
    char tiny[4] = "";
    s = chat_template_render(TPL_CHATML, bad, 2, true, "", "", tiny, sizeof tiny);
    CHECK(!s && strlen(tiny) == 3);
}

static void test_names(void) {
    for (int id = 0; id < TPL_COUNT; id++)
        CHECK(chat_template_from_name(chat_template_name(id)) == id);
    CHECK(chat_template_from_name("vicuna") == -1);
    CHECK(chat_template_from_name(NULL) == -1);
    CHECK(chat_template_name(TPL_COUNT) == NULL);
    CHECK(chat_template_name(-1) == NULL);
}

/* Random conversations in every family: a result exactly when every role
 * is one the family takes, and it is NUL-terminated (sanitizers check the
 * rest). */
static void test_random(void) {
    const char *roles[] = {"system", "user", "assistant", "tool", "bogus", NULL};
    const char *texts[] = {"", " ", "hi", "\n\t x \n", "<|im_end|>", NULL, "a longer line of text"};
    uint32_t r = 1;
    int bad = 0;
    for (int it = 0; it < 4000; it++) {
        chat_msg m[6];
        int n = (int)((r = r * 1664525u + 1013904223u) >> 8) % 7;
        int id = (int)((r = r * 1664525u + 1013904223u) >> 8) % TPL_COUNT;
        bool ok = true;
        for (int i = 0; i < n && i < 6; i++) {
            int ri = (int)((r = r * 1664525u + 1013904223u) >> 8) % 12;
            ri = ri < 4 ? ri % 3 : ri < 10 ? ri % 4 : ri - 6;   /* mostly valid roles */
            m[i].role = roles[ri];
            m[i].content = texts[((r = r * 1664525u + 1013904223u) >> 8) % 7];
            if (ri >= 4 || (ri == 3 && id != TPL_CHATML && id != TPL_LLAMA3)) ok = false;
        }
        if (n > 6) n = 6;
        char err[128] = "";
        char *s = chat_template_render(id, m, n, it & 1, "<s>", "</s>", err, sizeof err);
        if ((s != NULL) != ok || (!s && !err[0])) bad++;
        if (s && strlen(s) > 4096) bad++;
        free(s);
    }
    CHECKF(bad == 0, "%d bad renders", bad);
}

/* chat_template field of a tokenizer_config.json, malloc'd, or NULL. */
static char *json_template(const char *rel) {
    FILE *f = fopen(test_path(rel), "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n > 0 ? malloc((size_t)n + 1) : NULL;
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!buf) return NULL;
    buf[got] = '\0';
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
    char *out = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
    cJSON_Delete(j);
    return out;
}

static void test_detect(void) {
    struct { const char *file; int want; } real[] = {
        {"models/qwen3-tokenizer_config.json", TPL_CHATML},
        {"models/llama3-tokenizer_config.json", TPL_LLAMA3},
        {"models/gemma3-tokenizer_config.json", TPL_GEMMA},
    };
    for (int i = 0; i < 3; i++) {
        char *src = json_template(real[i].file);
        if (!src) { SKIP("%s not readable", real[i].file); continue; }
        CHECKF(chat_template_detect(src) == real[i].want, "%s", real[i].file);
        free(src);
    }
    struct { const char *file; int want; } ggufs[] = {
        {"fixtures/qwen3-tiny-Q4_K_M.gguf", TPL_CHATML},
        {"fixtures/qwen2-tiny-Q8_0.gguf", TPL_CHATML},
        {"fixtures/llama3-tiny-Q4_0.gguf", TPL_LLAMA3},
    };
    for (int i = 0; i < 3; i++) {
        gguf_file g;
        char err[256];
        if (gguf_open(test_path(ggufs[i].file), &g, err, sizeof err)) { SKIP("%s", err); continue; }
        gguf_str s;
        if (gguf_get_str(&g, "tokenizer.chat_template", &s)) {
            char *src = gguf_str_dup(s);
            CHECKF(src && chat_template_detect(src) == ggufs[i].want, "%s", ggufs[i].file);
            free(src);
        } else {
            CHECKF(0, "%s has no tokenizer.chat_template", ggufs[i].file);
        }
        gguf_close(&g);
    }

    /* Representative sources for the families without a real file here:
     * the shapes these families' published templates take. */
    struct { const char *src; int want; } rep[] = {
        {"{% if messages[0]['role'] == 'system' %}{% set sys = '<<SYS>>\\n' + messages[0]['content']"
         " + '\\n<</SYS>>\\n\\n' %}{% endif %}{% for m in messages %}{% if m['role'] == 'user' %}"
         "{{ bos_token + '[INST] ' + m['content'].strip() + ' [/INST]' }}{% endif %}{% endfor %}",
         TPL_LLAMA2},
        {"{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content']"
         " + ' [/INST]' }}{% else %}{{ m['content'] + eos_token }}{% endif %}{% endfor %}",
         TPL_MISTRAL},
        {"{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] + '<|end|>\\n' }}"
         "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
         "{# roles: <|system|> <|user|> <|assistant|> #}",
         TPL_PHI3},
        {"{% for m in messages %}{% if m['role'] == 'user' %}{{ '<|user|>\\n' + m['content'] + eos_token }}"
         "{% elif m['role'] == 'assistant' %}{{ '<|assistant|>\\n' + m['content'] + eos_token }}"
         "{% endif %}{% endfor %}",
         TPL_ZEPHYR},
        {"{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '\\n' }}{% endfor %}", -1},
        {"{% for m in messages %}{{ '<|user|>\\n' + m['content'] }}{% endfor %}", -1},
        {"", -1},
    };
    for (size_t i = 0; i < sizeof rep / sizeof rep[0]; i++)
        CHECKF(chat_template_detect(rep[i].src) == rep[i].want, "representative %zu: got %d want %d",
               i, chat_template_detect(rep[i].src), rep[i].want);
    CHECK(chat_template_detect(NULL) == -1);
}

int main(void) {
    test_families();
    test_tools();
    test_errors();
    test_names();
    test_random();
    test_detect();
    return test_summary("chat_template");
}
