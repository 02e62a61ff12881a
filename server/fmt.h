/* The answers' shapes: OpenAI chat and completions (fmt_oai.c), and
 * llama.cpp's /completion and /infill (fmt_llama.c), streamed or whole. */
#ifndef HEARTH_FMT_H
#define HEARTH_FMT_H

#include "server/gen.h"

extern const gen_fmt fmt_chat;
extern const gen_fmt fmt_completion;
extern const gen_fmt fmt_llama;

/* A token's text (render specials, sanitized) and its raw bytes. */
void fmt_token_piece(const server *s, int32_t id, cJSON **text, cJSON **bytes);
/* A token event's {id?, token, logprob, bytes, top_logprobs: [{id?, token, logprob, bytes}]};
 * the id only where with_id (llama.cpp's shape). */
cJSON *fmt_token_logprobs(const gen *g, const job_event *ev, bool with_id);
/* usage: prompt, completion, total tokens and cached prompt tokens. */
cJSON *fmt_usage(const gen *g);
/* llama.cpp's timings object. */
cJSON *fmt_timings(const gen *g);
/* A chat.completion.chunk with this delta, logprobs (or null) and finish (or null). */
cJSON *fmt_chat_chunk(const gen *g, cJSON *delta, cJSON *logprobs, const char *finish);
/* fmt_tools.c, chats with o.parse_chat: a stream's text through the output
 * parser (the chunks it makes carry logprobs, taken over); the end of the
 * stream (the number of tool calls made); a whole answer's content,
 * reasoning_content and tool_calls added to message m (the number of calls). */
void fmt_chat_parsed_token(gen *g, const char *text, size_t len, cJSON *logprobs);
int fmt_chat_parsed_end(gen *g);
int fmt_chat_parsed_message(gen *g, cJSON *m);

/* llama.cpp's generation_settings for these options (stop strings copied). */
cJSON *fmt_settings(const server *s, const gen_opts *o);

#endif
