/* OpenAI-style error objects (see errors.h). */
#include "server/errors.h"
#include "server/utf8.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Messages quote client text: keep them one line (and the access log with
 * them), and UTF-8 where a precision (%.40s) or the buffer cut a character. */
static void tidy(char *msg) {
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
    utf8_drop_invalid(msg);
}

bool api_fail(api_error *e, int status, const char *param, const char *code, const char *fmt, ...) {
    e->status = status;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    tidy(e->message);
    return false;
}

const char *api_error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

static const char *default_code(int status) {
    switch (status) {
    case 400: return "invalid_request";
    case 401: return "invalid_api_key";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 413: return "request_too_large";
    case 429: return "rate_limit_exceeded";
    case 503: return "unavailable";
    default: return status >= 500 ? "internal_error" : "invalid_request";
    }
}

cJSON *api_error_json(const api_error *e) {
    cJSON *root = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(root, "error");
    if (!err) { cJSON_Delete(root); return NULL; }
    cJSON_AddStringToObject(err, "message", e->message);
    /* OpenAI files an unknown model (a 404) under the request's fault */
    bool bad_model = e->code && !strcmp(e->code, "model_not_found");
    cJSON_AddStringToObject(err, "type", bad_model ? "invalid_request_error" : api_error_type(e->status));
    if (e->param[0]) cJSON_AddStringToObject(err, "param", e->param);
    else cJSON_AddNullToObject(err, "param");
    cJSON_AddStringToObject(err, "code", e->code ? e->code : default_code(e->status));
    return root;
}

void respond_json(http_req *r, int status, cJSON *body) {
    char *text = body ? cJSON_PrintUnformatted(body) : NULL;
    cJSON_Delete(body);
    if (!text) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                                  "\"param\":null,\"code\":\"internal_error\"}}";
        http_respond(r, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    http_respond(r, status, "application/json", text, strlen(text));
    free(text);
}

void api_error_respond(http_req *r, const api_error *e) {
    if (e->status == 429 || e->status == 503) http_add_header(r, "Retry-After", "1");
    respond_json(r, e->status, api_error_json(e));
}

void respond_error(http_req *r, int status, const char *param, const char *code, const char *fmt, ...) {
    api_error e = { .status = status, .code = code };
    snprintf(e.param, sizeof e.param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    tidy(e.message);   /* "Not found: %.200s" quotes the decoded path */
    api_error_respond(r, &e);
}
