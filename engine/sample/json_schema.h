/* JSON Schema -> GBNF, for output that always parses: response_format
 * json_schema / json_object, llama-server's json_schema field, forced tool
 * calls. What is covered and what is not is listed atop json_schema.c. */
#ifndef HEARTH_JSON_SCHEMA_H
#define HEARTH_JSON_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>
#include "engine/sample/grammar.h"

#define JSON_SCHEMA_MAX_NODES 20000   /* schema objects visited */

/* GBNF text (malloc'd) whose root matches JSON documents valid under the
 * schema, with optional whitespace between tokens; NULL with a one-line
 * message in err ("json_schema: at /properties/x: ..."). strict: OpenAI's
 * strict mode (no properties beyond those listed unless the schema says so). */
char *json_schema_to_gbnf(const cJSON *schema, bool strict, char *err, size_t errlen);
/* The same, parsed. */
grammar *grammar_from_json_schema(const cJSON *schema, bool strict, char *err, size_t errlen);
/* Any JSON object (response_format json_object). */
grammar *grammar_json_object(char *err, size_t errlen);

#endif
