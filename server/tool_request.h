/* The request side of tools and reasoning on /v1/chat/completions: OpenAI's
 * tools, tool_choice and parallel_tool_calls checked; assistant tool_calls
 * and tool messages in the history checked; chat_template_kwargs (with
 * enable_thinking and reasoning_effort) gathered for the template; and the
 * JSON schema a forced call (tool_choice required or named) must follow. */
#ifndef HEARTH_TOOL_REQUEST_H
#define HEARTH_TOOL_REQUEST_H

#include <stdbool.h>
#include <cjson/cJSON.h>
#include "server/errors.h"

typedef enum { TOOL_CHOICE_AUTO, TOOL_CHOICE_NONE, TOOL_CHOICE_REQUIRED, TOOL_CHOICE_NAMED } tool_choice_kind;

typedef struct chat_tools {
    const cJSON *tools;       /* the request's list (borrowed); NULL when absent, empty or tool_choice none */
    int n_tools;
    tool_choice_kind choice;
    const char *choice_name;  /* NAMED: the function (borrowed) */
    bool parallel;            /* parallel_tool_calls, default true */
    cJSON *kwargs;            /* the template's extra globals (owned), or NULL */
    int reasoning;            /* reasoning_format for this request (reasoning.h) */
} chat_tools;

/* server_reasoning: the server's --reasoning-format, which a request's own
 * "reasoning_format" overrides. false with e (400 naming the field). */
bool chat_tools_parse(const cJSON *body, int server_reasoning, chat_tools *t, api_error *e);
void chat_tools_free(chat_tools *t);

/* Each message's tool fields: an assistant's tool_calls [{id, type:
 * "function", function: {name, arguments: string}}], a tool message's
 * tool_call_id (a string). false with e. */
bool chat_messages_check_tools(const cJSON *messages, api_error *e);

/* The JSON schema of what a forced call must be: {"name": NAME, "arguments":
 * {...the tool's parameters}} for a named tool or any of them (required), a
 * non-empty list of those when parallel calls are allowed. NULL unless the
 * choice is required or named. */
cJSON *tool_call_schema(const chat_tools *t);

#endif
