/* Several generations answering one request: n > 1 choices of a prompt,
 * or a list of prompts (/v1/completions), each choice an ordinary gen with
 * its own job. They share the request: the first member starts the answer,
 * every chunk carries its member's index, and the last member to finish
 * ends the stream, or answers with every choice in index order and the
 * usage summed. A failure of any member answers the error once and
 * cancels the others. A gen with no group answers alone, as before. */
#ifndef HEARTH_GEN_GROUP_H
#define HEARTH_GEN_GROUP_H

#include "server/gen.h"
#include "server/errors.h"

typedef struct gen_group gen_group;

/* A group for n members answering r; NULL without memory. */
gen_group *gen_group_new(server *s, http_req *r, int n);
/* Makes g member `index` (in order 0, 1, ...); shares_prompt: a later
 * choice of a prompt an earlier member has (its prompt tokens count once).
 * Takes over the request's close from g. */
void gen_group_add(gen_group *grp, gen *g, int index, bool shares_prompt);
/* A group whose members could not all be created: frees what was made and
 * (respond) answers 500. Only before any member was submitted. */
void gen_group_abort(gen_group *grp, bool respond);

/* The whole answer o of g (freed here): sent now, or, in a group, kept
 * until the last member's, then all choices go out together. */
void gen_answer(gen *g, cJSON *o);
/* A streaming member finished: true when it is the last (or alone), so the
 * caller ends the stream. */
bool gen_stream_last(gen *g);
/* Usage for the answer: g's, or the group's sums. */
void gen_usage_counts(const gen *g, int *prompt, int *completion, int *cached);
/* The access log's token counts for the request (group: the sums). */
void gen_set_tokens(gen *g);
/* g failed: the group answers e once and cancels its other members. */
void gen_group_fail(gen *g, const api_error *e);
/* g is being freed. */
void gen_group_release(gen *g);

#endif
