/* An incremental JSON validator fed one byte at a time, so that a tool
 * call's arguments can be streamed while the model writes them and each
 * fragment sent is known to be a prefix of valid JSON. The top-level value
 * must be an object or an array (so its end is its closing bracket). */
#ifndef HEARTH_TOOL_JSON_H
#define HEARTH_TOOL_JSON_H

#include <stdbool.h>
#include <stdint.h>

#define JSCAN_MAX_DEPTH 64

enum { JSCAN_MORE = 0, JSCAN_DONE = 1, JSCAN_ERR = -1 };

/* Scanner states, visible so that a caller can follow keys and values. */
enum {
    JS_VALUE, JS_VALUE_OR_END, JS_STR, JS_STR_ESC, JS_STR_U, JS_KEY, JS_KEY_ESC, JS_KEY_U,
    JS_NUM, JS_LIT, JS_AFTER, JS_KEY_OR_END, JS_KEY_START, JS_COLON, JS_DONE_ST, JS_ERR_ST
};

typedef struct json_scan {
    int depth;                /* open containers */
    uint8_t st, lit_i, u_n;
    const char *lit;
    char stack[JSCAN_MAX_DEPTH];
} json_scan;

void json_scan_init(json_scan *s);
/* JSCAN_MORE, JSCAN_DONE (this byte closed the top-level value) or JSCAN_ERR
 * (and every later byte is an error too). */
int json_scan_byte(json_scan *s, unsigned char c);
/* Inside a key string (its bytes after the opening quote). */
bool json_scan_in_key(const json_scan *s);

#endif
