/* A Jinja interpreter for chat templates: the subset of Jinja2 that Hugging
 * Face chat templates use, rendered as transformers renders them.
 *
 * API (stable):
 *   jinja_template *jinja_parse(src, len, &opts, err, errlen)
 *       Lex and parse once into an AST. NULL on a syntax error, with err set
 *       to one line naming the construct and the line ("line 3: unknown tag
 *       'foo'", "line 7: expected '%}' after 'endfor'").
 *   char *jinja_render(t, vars, err, errlen)
 *       Render with the globals in the cJSON object vars (messages, tools,
 *       bos_token, add_generation_prompt, any chat_template_kwargs...; vars
 *       may be NULL). Returns malloc'd NUL-terminated text, or NULL with err
 *       set ("line 12: raise_exception: ...", "line 4: output over 16 MiB").
 *       Thread-safe: a parsed template is read-only while rendering.
 *   void jinja_free(t)
 *
 * Builtins besides the variables: raise_exception(msg), strftime_now(fmt),
 * namespace(...), range(...), dict(...), cycler/joiner are not provided.
 *
 * Bounded: every render stops with an error past JINJA_MAX_DEPTH nested
 * calls/includes of macros, JINJA_MAX_OUTPUT bytes of output, or
 * JINJA_MAX_STEPS evaluation steps (loop iterations and expression nodes), so
 * a hostile template is an error, never a hang or a crash. */
#ifndef HEARTH_JINJA_H
#define HEARTH_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>

#define JINJA_MAX_DEPTH 32
#define JINJA_MAX_OUTPUT ((size_t)16 << 20)
#define JINJA_MAX_STEPS 5000000L

typedef struct jinja_template jinja_template;

typedef struct jinja_options {
    bool trim_blocks;     /* drop the first newline after a block tag (HF: true) */
    bool lstrip_blocks;   /* strip spaces/tabs before a block tag on its line (HF: true) */
} jinja_options;

/* opts NULL: Hugging Face's settings (both true). */
jinja_template *jinja_parse(const char *src, size_t len, const jinja_options *opts, char *err, size_t errlen);
char *jinja_render(const jinja_template *t, const cJSON *vars, char *err, size_t errlen);
void jinja_free(jinja_template *t);

#endif
