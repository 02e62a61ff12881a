/* Reading request fields with checks. Unknown fields are ignored; a known
 * field of the wrong type, out of range, or asking for something hearth
 * cannot do is a 400 that names it. An absent or null field keeps its default. */
#ifndef HEARTH_REQUEST_JSON_H
#define HEARTH_REQUEST_JSON_H

#include <stdbool.h>
#include <cjson/cJSON.h>
#include "server/errors.h"
#include "server/gen.h"

/* The field, or NULL when absent or null. */
const cJSON *jf_get(const cJSON *o, const char *key);
bool jf_bool(const cJSON *o, const char *key, bool *out, api_error *e);
bool jf_int(const cJSON *o, const char *key, long long lo, long long hi, long long *out, api_error *e);
bool jf_num(const cJSON *o, const char *key, double lo, double hi, double *out, api_error *e);
bool jf_str(const cJSON *o, const char *key, const char **out, api_error *e);

/* Sampling, length, stop strings, logprobs and streaming fields, in the
 * spelling of the request's API (kind), into o. */
bool parse_gen_opts(const server *s, const cJSON *body, gen_kind kind, gen_opts *o, api_error *e);

/* The "model" field, if any, must name the served model (404 otherwise). */
bool check_model_field(const server *s, const cJSON *body, api_error *e);
bool model_name_matches(const server *s, const char *name);

#endif
