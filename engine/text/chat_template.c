/* Chat templates (see chat_template.h): a Jinja source parsed once, rendered
 * per request with Hugging Face's globals, and the built-in family
 * templates that --chat-template NAME picks (llama-server's names), written
 * as Jinja sources in the families' published shapes. */
#include "engine/text/chat_template.h"
#include "engine/text/jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct chat_template {
    jinja_template *j;
    char *src, *bos, *eos;
};

/* ---- the built-in families --------------------------------------------------- */
/* ChatML with Hermes-style tools (Qwen 2.5's shape): tools listed in the
 * system turn, calls as <tool_call> JSON, results as <tool_response> in a user turn. */
static const char chatml[] =
    "{%- if tools %}\n"
    "{{- '<|im_start|>system\\n' }}\n"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}\n"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}\n"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}\n"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n"
    "</tool_call><|im_end|>\\n' }}\n"
    "{%- elif messages[0].role == 'system' %}\n"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "{%- if message.role == 'system' and loop.first %}\n"
    "{%- elif message.role == 'assistant' %}\n"
    "{{- '<|im_start|>assistant' }}{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}\n"
    "{%- for tc in message.tool_calls or [] %}{%- set f = tc.function if tc.function is defined else tc %}\n"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + f.name + '\", \"arguments\": ' }}"
    "{{- f.arguments if f.arguments is string else f.arguments | tojson }}{{- '}\\n</tool_call>' }}\n"
    "{%- endfor %}\n"
    "{{- '<|im_end|>\\n' }}\n"
    "{%- elif message.role == 'tool' %}\n"
    "{%- if loop.first or loop.previtem.role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}\n"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}\n"
    "{%- if loop.last or loop.nextitem.role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}\n"
    "{%- else %}\n"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}\n";

static const char llama3[] =
    "{{- bos_token }}\n"
    "{%- for message in messages %}\n"
    "{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + (message.content or '') | trim + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}\n";

/* Meta's Llama 2 chat template */
static const char llama2[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

/* Mistral Instruct v0.2/v1: a system message is put before the first user turn */
static const char mistral[] =
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}"
    "{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}\n"
    "{{- bos_token }}\n"
    "{%- for message in loop_messages %}\n"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif %}\n"
    "{%- if message['role'] == 'user' %}\n"
    "{%- if loop.first and system_message is defined %}{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n"
    "{%- else %}{{- ' [INST] ' + message['content'] + ' [/INST]' }}{%- endif %}\n"
    "{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content'] + eos_token }}\n"
    "{%- else %}{{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}\n"
    "{%- endif %}\n"
    "{%- endfor %}\n";

/* Gemma: system text goes at the start of the first user turn (Gemma 3's shape) */
static const char gemma[] =
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}"
    "{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif -%}\n"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n"
    "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}\n";

static const char phi3[] =
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";

static const char phi4[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + '<|im_end|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}";

static const char zephyr[] =
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

static const struct { const char *name; const char *src; } builtins[] = {
    { "chatml", chatml }, { "llama3", llama3 }, { "llama2", llama2 }, { "mistral", mistral },
    { "mistral-v1", mistral }, { "gemma", gemma }, { "phi3", phi3 }, { "phi4", phi4 }, { "zephyr", zephyr },
};

const char *chat_template_builtin(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
        if (!strcmp(builtins[i].name, name)) return builtins[i].src;
    return NULL;
}

const char *chat_template_builtin_names(void) {
    return "chatml, llama3, llama2, mistral, mistral-v1, gemma, phi3, phi4, zephyr";
}

/* ---- load and apply ---------------------------------------------------------------- */
static char *dup_or_empty(const char *s) {
    s = s ? s : "";
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

chat_template *chat_template_load(const char *src, const char *bos, const char *eos, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    chat_template *t = calloc(1, sizeof *t);
    if (!t || !(t->src = dup_or_empty(src)) || !(t->bos = dup_or_empty(bos)) || !(t->eos = dup_or_empty(eos))) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        chat_template_free(t);
        return NULL;
    }
    char jerr[256];
    t->j = jinja_parse(t->src, strlen(t->src), NULL, jerr, sizeof jerr);
    if (!t->j) {
        if (err && errlen) snprintf(err, errlen, "chat template: %s", jerr);
        chat_template_free(t);
        return NULL;
    }
    return t;
}

char *chat_template_apply(const chat_template *t, const cJSON *messages, const cJSON *tools, const cJSON *kwargs,
                          bool add_generation_prompt, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    cJSON *vars = cJSON_CreateObject();
    if (!vars) { if (err && errlen) snprintf(err, errlen, "out of memory"); return NULL; }
    /* as transformers: special tokens, then the caller's kwargs, then the named arguments */
    bool ok = cJSON_AddStringToObject(vars, "bos_token", t->bos) && cJSON_AddStringToObject(vars, "eos_token", t->eos);
    if (cJSON_IsObject(kwargs))
        for (const cJSON *k = kwargs->child; k && ok; k = k->next) {
            if (!k->string) continue;
            cJSON_DeleteItemFromObjectCaseSensitive(vars, k->string);
            ok = cJSON_AddItemReferenceToObject(vars, k->string, (cJSON *)k);
        }
    static const char *const named[] = { "messages", "tools", "documents", "add_generation_prompt" };
    for (size_t i = 0; i < sizeof named / sizeof *named; i++) cJSON_DeleteItemFromObjectCaseSensitive(vars, named[i]);
    if (ok) ok = messages ? cJSON_AddItemReferenceToObject(vars, "messages", (cJSON *)messages)
                          : cJSON_AddArrayToObject(vars, "messages") != NULL;
    if (ok) ok = tools && !cJSON_IsNull(tools) ? cJSON_AddItemReferenceToObject(vars, "tools", (cJSON *)tools)
                                               : cJSON_AddNullToObject(vars, "tools") != NULL;
    if (ok) ok = cJSON_AddNullToObject(vars, "documents") != NULL;
    if (ok) ok = cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt) != NULL;
    char *out = NULL;
    if (!ok) { if (err && errlen) snprintf(err, errlen, "out of memory"); }
    else {
        char jerr[512];
        out = jinja_render(t->j, vars, jerr, sizeof jerr);
        if (!out && err && errlen) snprintf(err, errlen, "chat template: %s", jerr);
    }
    cJSON_Delete(vars);
    return out;
}

void chat_template_free(chat_template *t) {
    if (!t) return;
    jinja_free(t->j);
    free(t->src);
    free(t->bos);
    free(t->eos);
    free(t);
}

const char *chat_template_source(const chat_template *t) { return t ? t->src : NULL; }
