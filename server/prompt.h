/* Building prompts: chat messages through the template, prompt fields as
 * text or token ids, and fill-in-the-middle from the model's FIM tokens. */
#ifndef HEARTH_PROMPT_H
#define HEARTH_PROMPT_H

#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "server/errors.h"
#include "server/server.h"

/* The messages rendered with the server's chat template (malloc'd), or NULL with e. */
char *prompt_render_chat(const server *s, const cJSON *messages, api_error *e);
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
