/* OpenAI-style error objects:
 *   {"error": {"message": ..., "type": ..., "param": ... | null, "code": ... | null}}
 * as an HTTP answer, or as one SSE data event once a stream has started. */
#ifndef HEARTH_ERRORS_H
#define HEARTH_ERRORS_H

#include <stdbool.h>
#include <cjson/cJSON.h>
#include "server/http.h"

typedef struct api_error {
    int status;
    char message[512];
    char param[96];           /* "" -> null */
    const char *code;         /* NULL -> a default for the status */
} api_error;

/* Fills e; returns false so that validators can `return api_fail(...)`. */
bool api_fail(api_error *e, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

const char *api_error_type(int status);
cJSON *api_error_json(const api_error *e);
/* Answers r with e (Retry-After on 429 and 503). */
void api_error_respond(http_req *r, const api_error *e);
void respond_error(http_req *r, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Answers r with the JSON (freed here); 500 if it cannot be printed. */
void respond_json(http_req *r, int status, cJSON *body);

#endif
