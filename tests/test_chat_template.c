/* Chat template tests: the built-in families render a conversation exactly
 * (expected strings written from each family's published format), the real
 * templates in the shared models load, parse errors name line and construct,
 * the variables transformers passes are there (tools, kwargs such as
 * enable_thinking, add_generation_prompt), and template errors come back. */
#include "tests/test.h"
#include "engine/text/chat_template.h"

#include <cjson/cJSON.h>

static const char conv_json[] =
    "[{\"role\":\"system\",\"content\":\"You are helpful.\"},{\"role\":\"user\",\"content\":\"Hi there\"},"
    "{\"role\":\"assistant\",\"content\":\"Hello! How can I help?\"},{\"role\":\"user\",\"content\":\"Tell me a joke.\"}]";

static char *render(const char *name_or_src, const char *bos, const char *eos, const char *msgs, const char *tools,
                    const char *kwargs, bool agp, char *err, size_t errlen) {
    const char *src = chat_template_builtin(name_or_src);
    chat_template *t = chat_template_load(src ? src : name_or_src, bos, eos, err, errlen);
    if (!t) return NULL;
    cJSON *m = cJSON_Parse(msgs), *tl = tools ? cJSON_Parse(tools) : NULL, *kw = kwargs ? cJSON_Parse(kwargs) : NULL;
    char *out = chat_template_apply(t, m, tl, kw, agp, err, errlen);
    cJSON_Delete(m);
    cJSON_Delete(tl);
    cJSON_Delete(kw);
    chat_template_free(t);
    return out;
}

static void check(const char *name, const char *bos, const char *eos, const char *msgs, bool agp, const char *want) {
    char err[512] = "";
    char *got = render(name, bos, eos, msgs, NULL, NULL, agp, err, sizeof err);
    CHECKF(got && !strcmp(got, want), "%s:\n got  [%s]\n want [%s]\n err %s", name, got ? got : "(null)", want, err);
    free(got);
}

static void test_families(void) {
    check("chatml", "", "", conv_json, true,
          "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
          "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nTell me a joke.<|im_end|>\n"
          "<|im_start|>assistant\n");
    check("llama3", "<|begin_of_text|>", "<|eot_id|>", conv_json, true,
          "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\n");
    check("llama2", "<s>", "</s>", conv_json, true,
          "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi there [/INST] Hello! How can I help? </s>"
          "<s>[INST] Tell me a joke. [/INST]");
    check("mistral", "<s>", "</s>", conv_json, true,
          "<s> [INST] You are helpful.\n\nHi there [/INST] Hello! How can I help?</s> [INST] Tell me a joke. [/INST]");
    check("gemma", "<bos>", "<eos>", conv_json, true,
          "<bos><start_of_turn>user\nYou are helpful.\n\nHi there<end_of_turn>\n"
          "<start_of_turn>model\nHello! How can I help?<end_of_turn>\n"
          "<start_of_turn>user\nTell me a joke.<end_of_turn>\n<start_of_turn>model\n");
    check("phi3", "<s>", "<|endoftext|>", conv_json, true,
          "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi there<|end|>\n"
          "<|assistant|>\nHello! How can I help?<|end|>\n<|user|>\nTell me a joke.<|end|>\n<|assistant|>\n");
    check("phi4", "", "", conv_json, false,
          "<|im_start|>system<|im_sep|>You are helpful.<|im_end|><|im_start|>user<|im_sep|>Hi there<|im_end|>"
          "<|im_start|>assistant<|im_sep|>Hello! How can I help?<|im_end|><|im_start|>user<|im_sep|>Tell me a joke.<|im_end|>");
    check("zephyr", "<s>", "</s>", conv_json, true,
          "<|system|>\nYou are helpful.</s>\n<|user|>\nHi there</s>\n"
          "<|assistant|>\nHello! How can I help?</s>\n<|user|>\nTell me a joke.</s>\n<|assistant|>\n");
    CHECK(chat_template_builtin("vicuna-nonexistent") == NULL);
    CHECK(chat_template_builtin(NULL) == NULL);
    CHECK(strstr(chat_template_builtin_names(), "chatml") != NULL);
}

static void test_tools_and_kwargs(void) {
    const char *msgs =
        "[{\"role\":\"user\",\"content\":\"Weather in Oslo?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
        "\"function\":{\"name\":\"weather\",\"arguments\":{\"city\":\"Oslo\"}}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"rain\"},{\"role\":\"tool\",\"content\":\"5C\"}]";
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"weather\",\"parameters\":{\"type\":\"object\"}}}]";
    char err[512] = "";
    char *got = render("chatml", "", "", msgs, tools, NULL, true, err, sizeof err);
    const char *want =
        "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"weather\", \"parameters\": {\"type\": \"object\"}}}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
        "XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nWeather in Oslo?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nrain\n</tool_response>\n<tool_response>\n5C\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n";
    CHECKF(got && !strcmp(got, want), "chatml tools:\n got  [%s]\n err %s", got ? got : "(null)", err);
    free(got);

    /* kwargs become globals; tools is none when not given; add_generation_prompt passes */
    const char *src = "{{ enable_thinking }}|{{ tools is none }}|{{ add_generation_prompt }}|{{ bos_token }}{{ eos_token }}|"
                      "{{ messages | length }}|{{ documents is none }}";
    got = render(src, "<B>", "<E>", "[]", NULL, "{\"enable_thinking\": false}", false, err, sizeof err);
    CHECKF(got && !strcmp(got, "false|true|false|<B><E>|0|true"), "globals: [%s] %s", got ? got : "(null)", err);
    free(got);
    /* kwargs cannot replace messages (transformers' named arguments win), but may set bos_token */
    got = render("{{ messages | length }}{{ bos_token }}", "<B>", "", "[{\"role\":\"user\",\"content\":\"x\"}]", NULL,
                 "{\"messages\": [], \"bos_token\": \"<X>\"}", true, err, sizeof err);
    CHECKF(got && !strcmp(got, "1<X>"), "kwargs order: [%s] %s", got ? got : "(null)", err);
    free(got);
}

static void test_errors(void) {
    char err[512] = "";
    /* a template that does not parse: the line and the construct */
    char *got = render("line one\n{% if x %}\n{% endfor %}", "", "", "[]", NULL, NULL, true, err, sizeof err);
    CHECKF(!got && strstr(err, "line 3") && strstr(err, "endfor"), "err: %s", err);
    free(got);
    err[0] = 0;
    got = render("{{ x | }}", "", "", "[]", NULL, NULL, true, err, sizeof err);
    CHECKF(!got && strstr(err, "line 1"), "err: %s", err);
    free(got);
    err[0] = 0;
    got = render("{% include 'x' %}", "", "", "[]", NULL, NULL, true, err, sizeof err);
    CHECKF(!got && strstr(err, "include"), "err: %s", err);
    free(got);
    /* the template's own exception */
    err[0] = 0;
    got = render("llama2", "<s>", "</s>", "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]",
                 NULL, NULL, true, err, sizeof err);
    CHECKF(!got && strstr(err, "alternate"), "err: %s", err);
    free(got);
    /* a tiny err buffer is cut, not overrun */
    char tiny[4] = "";
    got = render("{% bogus %}", "", "", "[]", NULL, NULL, true, tiny, sizeof tiny);
    CHECK(!got && strlen(tiny) == 3);
    free(got);
}

/* The real templates in the shared models parse and render a plain conversation. */
static void test_shared_templates(void) {
    const char *files[] = { "models/llama3-tokenizer_config.json", "models/qwen3-tokenizer_config.json",
                            "models/gemma3-tokenizer_config.json" };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char *text = test_read_file(test_path(files[i]), NULL);
        CHECKF(text != NULL, "missing %s", files[i]);
        if (!text) continue;
        cJSON *cfg = cJSON_Parse(text);
        free(text);
        const cJSON *src = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
        CHECKF(cJSON_IsString(src), "%s: no chat_template", files[i]);
        if (cJSON_IsString(src)) {
            char err[512] = "";
            chat_template *t = chat_template_load(src->valuestring, "<bos>", "<eos>", err, sizeof err);
            CHECKF(t != NULL, "%s: %s", files[i], err);
            cJSON *m = cJSON_Parse("[{\"role\":\"user\",\"content\":\"Hi there\"}]");
            char *out = t ? chat_template_apply(t, m, NULL, NULL, true, err, sizeof err) : NULL;
            CHECKF(out && strstr(out, "Hi there"), "%s: %s", files[i], out ? out : err);
            CHECK(t == NULL || !strcmp(chat_template_source(t), src->valuestring));
            free(out);
            cJSON_Delete(m);
            chat_template_free(t);
        }
        cJSON_Delete(cfg);
    }
}

int main(void) {
    test_families();
    test_tools_and_kwargs();
    test_errors();
    test_shared_templates();
    return test_summary("chat_template");
}
