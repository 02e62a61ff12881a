/* Building prompts: chat messages through the template, prompt fields as
 * text or token ids, and fill-in-the-middle from the model's FIM tokens. */
#ifndef HEARTH_PROMPT_H
#define HEARTH_PROMPT_H

#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "server/errors.h"
#include "server/server.h"

/* A chat request's prompt text (malloc'd), or NULL with e: body's messages,
 * tools (not with tool_choice "none"), chat_template_kwargs and add_generation_prompt (default true)
 * through the server's chat template. A final assistant message is
 * continued (prefill). The same for /v1/chat/completions and /apply-template. */
char *prompt_render_chat(const server *s, const cJSON *body, api_error *e);
/* The chat template a model's server uses: --chat-template-file, else
 * --chat-template (a built-in name or a file), else the model's own, else
 * chatml with a warning. NULL with err naming the template, the line and the
 * construct when it does not parse. *what: where it came from, for the log. */
struct chat_template *prompt_load_template(const server_opts *o, const model *m, const char **what, char *err, size_t errlen);
/* Tokenize; the count, or -1 with e. *out is malloc'd (free it). */
int prompt_tokenize(const server *s, const char *text, size_t len, bool add_special, bool parse_special,
                    int32_t **out, api_error *e);
/* A "prompt" field: text, token ids, or (llama.cpp) a mix of both. With
 * oai, a list may hold one prompt only. *text gets the prompt as text
 * (malloc'd) when wanted. */
int prompt_from_field(const server *s, const cJSON *prompt, bool oai, int32_t **out, char **text, api_error *e);

typedef struct fim_input {
    const char *prefix, *suffix, *middle;   /* middle: typed before the cursor on its line */
    const cJSON *extra;                     /* [{filename, text}], or NULL */
    bool trim;                              /* fit like llama.cpp's /infill, else all or 400 */
    int n_predict;
    const char *param;                      /* the field named in errors */
} fim_input;
/* [extra] [BOS] FIM_PRE prefix middle FIM_SUF suffix FIM_MID */
int prompt_fim(const server *s, const fim_input *in, int32_t **out, bool *truncated, api_error *e);

/* false with a 400 when text of len bytes cannot fit a slot's context
 * whatever it tokenizes to (checked before tokenizing megabytes on the loop). */
bool prompt_text_may_fit(const server *s, size_t len, const char *param, api_error *e);
/* false with a 400 when n tokens leave no room in a slot's context. */
bool prompt_fits(const server *s, int n, const char *param, api_error *e);

#endif
