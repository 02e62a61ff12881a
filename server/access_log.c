/* The access log (see access_log.h). */
#include "server/access_log.h"
#include "server/utf8.h"
#include "server/log_out.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* src for a text line: control bytes (a client's, in the method or path) become '?' */
static void clean(char *dst, size_t cap, const char *src) {
    size_t i = 0;
    for (const char *p = src; *p && i < cap - 1; p++) dst[i++] = (unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p;
    dst[i] = 0;
}

void access_log(void *ud, http_req *r) {
    server *s = ud;
    int status = http_status(r), n_prompt, n_gen;
    http_get_tokens(r, &n_prompt, &n_gen);
    metrics_request(s->metrics, http_route(r), status);
    double ms = (double)(uv_hrtime() - http_start_ns(r)) / 1e6;
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (s->o.log_json) {
        cJSON *o = cJSON_CreateObject();
        const char *path = http_path(r);
        cJSON_AddStringToObject(o, "time", when);
        cJSON_AddStringToObject(o, "remote", http_client_addr(r));
        cJSON_AddItemToObject(o, "method", utf8_json_string(http_method(r), strlen(http_method(r))));
        cJSON_AddItemToObject(o, "path", utf8_json_string(path, strlen(path)));
        cJSON_AddNumberToObject(o, "status", status);
        cJSON_AddNumberToObject(o, "prompt_tokens", n_prompt);
        cJSON_AddNumberToObject(o, "generated_tokens", n_gen);
        cJSON_AddNumberToObject(o, "ms", (double)(long long)(ms * 10) / 10);
        char *line = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (line) log_out_line(line, strlen(line));
        free(line);
        return;
    }
    char path[256], method[24];
    clean(path, sizeof path, http_path(r));
    clean(method, sizeof method, http_method(r));
    log_out_printf("%s %s %s %s %d prompt=%d gen=%d %.1fms", when, http_client_addr(r), method, path,
            status, n_prompt, n_gen, ms);
}
