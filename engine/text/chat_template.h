/* Chat templates: the GGUF's tokenizer.chat_template (Jinja source) is
 * matched to one of the built-in renderers; no Jinja is interpreted. */
#ifndef HEARTH_CHAT_TEMPLATE_H
#define HEARTH_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdbool.h>

typedef enum {
    TPL_CHATML = 0, TPL_LLAMA3, TPL_LLAMA2, TPL_MISTRAL, TPL_GEMMA, TPL_PHI3,
    TPL_ZEPHYR, TPL_COUNT
} chat_template_id;

typedef struct { const char *role; const char *content; } chat_msg;

/* Match a Jinja template source to a family; -1 when unknown (the caller
 * falls back to ChatML with a warning). NULL source gives -1. */
int chat_template_detect(const char *jinja_source);
/* "chatml", "llama3", "llama2", "mistral", "gemma", "phi3", "zephyr"; -1 if unknown. */
int chat_template_from_name(const char *name);
const char *chat_template_name(int id);

/* Render messages to prompt text (malloc'd, NUL-terminated), ending with the
 * assistant turn's opening when add_assistant. bos/eos are the model's token
 * texts (templates that spell them out use them; may be ""). NULL on a role the
 * template cannot express, with err set. */
char *chat_template_render(int id, const chat_msg *msgs, int n_msgs, bool add_assistant,
                           const char *bos, const char *eos, char *err, size_t errlen);

#endif
