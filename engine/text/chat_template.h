/* Chat templates: a model's Jinja chat template (or a built-in family's,
 * by name), parsed once at load and rendered per request by the Jinja
 * interpreter (engine/text/jinja.h) with Hugging Face's variables.
 *
 * API (stable):
 *   chat_template *chat_template_load(jinja_src, bos, eos, err, errlen)
 *       Parse once. bos/eos: the model's BOS/EOS token texts (bos_token and
 *       eos_token in the template; NULL means ""). NULL with err naming the
 *       construct and line when the source does not parse.
 *   char *chat_template_apply(t, messages, tools, kwargs, add_generation_prompt, err, errlen)
 *       messages: a JSON list of message objects, passed to the template as
 *       given (the caller normalises OpenAI shapes first: see server/prompt.c).
 *       tools: the JSON list of tool definitions, or NULL (then `tools` is
 *       undefined in the template, as in transformers). kwargs: a JSON object
 *       whose keys become globals (chat_template_kwargs: enable_thinking...),
 *       or NULL. Returns the malloc'd prompt text, or NULL with err set (a
 *       template's raise_exception message, a limit hit...).
 *   void chat_template_free(t)
 *   const char *chat_template_builtin(name)
 *       The Jinja source of a built-in family by llama-server's name
 *       (chatml, llama3, llama2, mistral, gemma, phi3, zephyr...), or NULL.
 *   const char *chat_template_builtin_names(void)   "chatml, llama3, ..." for messages.
 *   const char *chat_template_source(t)             the source it was loaded from.
 *
 * The rendered text usually starts with the BOS text when the template
 * writes it; callers tokenize with add_special and drop a doubled BOS. */
#ifndef HEARTH_CHAT_TEMPLATE_H
#define HEARTH_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>

typedef struct chat_template chat_template;

chat_template *chat_template_load(const char *jinja_src, const char *bos, const char *eos, char *err, size_t errlen);
char *chat_template_apply(const chat_template *t, const cJSON *messages, const cJSON *tools, const cJSON *kwargs,
                          bool add_generation_prompt, char *err, size_t errlen);
void chat_template_free(chat_template *t);

const char *chat_template_builtin(const char *name);
const char *chat_template_builtin_names(void);
const char *chat_template_source(const chat_template *t);

#endif
