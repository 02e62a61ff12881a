/* --reasoning-format (llama-server's): what becomes of a model's thinking.
 *   none      left in the content as the model wrote it (<think>..</think>)
 *   auto      reasoning_content, when the model's format has it (the default)
 *   deepseek  reasoning_content, as auto (DeepSeek's name for it) */
#ifndef HEARTH_REASONING_H
#define HEARTH_REASONING_H

typedef enum { REASONING_NONE = 0, REASONING_AUTO, REASONING_DEEPSEEK } reasoning_format;

/* -1 for an unknown name. */
static inline int reasoning_format_from_name(const char *s) {
    static const char *const names[] = { "none", "auto", "deepseek" };
    for (int i = 0; s && i < 3; i++)
        if (!__builtin_strcmp(s, names[i])) return i;
    return -1;
}

#endif
