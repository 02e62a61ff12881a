/* The incremental JSON validator (see tool_json.h). Numbers are checked
 * loosely (their characters only); a caller that needs the value parses the
 * finished text with cJSON, which checks them exactly. */
#include "server/tool_json.h"
#include <string.h>

void json_scan_init(json_scan *s) {
    memset(s, 0, sizeof *s);
    s->st = JS_VALUE;
}

bool json_scan_in_key(const json_scan *s) { return s->st == JS_KEY || s->st == JS_KEY_ESC || s->st == JS_KEY_U; }

static bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool is_hex(unsigned char c) { return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'f'); }

static int fail(json_scan *s) {
    s->st = JS_ERR_ST;
    return JSCAN_ERR;
}

static int after_value(json_scan *s) {
    if (s->depth == 0) {
        s->st = JS_DONE_ST;
        return JSCAN_DONE;
    }
    s->st = JS_AFTER;
    return JSCAN_MORE;
}

static int close_container(json_scan *s, char open) {
    if (s->depth == 0 || s->stack[s->depth - 1] != open) return fail(s);
    s->depth--;
    return after_value(s);
}

static int value_start(json_scan *s, unsigned char c) {
    if (s->depth == 0 && c != '{' && c != '[') return fail(s);
    switch (c) {
    case '{': case '[':
        if (s->depth >= JSCAN_MAX_DEPTH) return fail(s);
        s->stack[s->depth++] = (char)c;
        s->st = c == '{' ? JS_KEY_OR_END : JS_VALUE_OR_END;
        return JSCAN_MORE;
    case '"': s->st = JS_STR; return JSCAN_MORE;
    case 't': s->lit = "true"; break;
    case 'f': s->lit = "false"; break;
    case 'n': s->lit = "null"; break;
    default:
        if (c != '-' && !(c >= '0' && c <= '9')) return fail(s);
        s->st = JS_NUM;
        return JSCAN_MORE;
    }
    s->lit_i = 1;
    s->st = JS_LIT;
    return JSCAN_MORE;
}

int json_scan_byte(json_scan *s, unsigned char c) {
    switch (s->st) {
    case JS_VALUE_OR_END:
        if (c == ']') return close_container(s, '[');
        /* fall through */
    case JS_VALUE:
        if (is_ws(c)) return JSCAN_MORE;
        return value_start(s, c);
    case JS_STR: case JS_KEY:
        if (c == '"') {
            if (s->st == JS_KEY) { s->st = JS_COLON; return JSCAN_MORE; }
            return after_value(s);
        }
        if (c == '\\') { s->st = s->st == JS_KEY ? JS_KEY_ESC : JS_STR_ESC; return JSCAN_MORE; }
        return c < 0x20 ? fail(s) : JSCAN_MORE;
    case JS_STR_ESC: case JS_KEY_ESC: {
        bool key = s->st == JS_KEY_ESC;
        if (c == 'u') { s->u_n = 0; s->st = key ? JS_KEY_U : JS_STR_U; return JSCAN_MORE; }
        if (!c || !strchr("\"\\/bfnrt", c)) return fail(s);
        s->st = key ? JS_KEY : JS_STR;
        return JSCAN_MORE;
    }
    case JS_STR_U: case JS_KEY_U:
        if (!is_hex(c)) return fail(s);
        if (++s->u_n == 4) s->st = s->st == JS_KEY_U ? JS_KEY : JS_STR;
        return JSCAN_MORE;
    case JS_NUM:
        if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') return JSCAN_MORE;
        s->st = JS_AFTER;   /* the number ended at this byte: read it as what follows */
        return json_scan_byte(s, c);
    case JS_LIT:
        if (c != (unsigned char)s->lit[s->lit_i]) return fail(s);
        return s->lit[++s->lit_i] ? JSCAN_MORE : after_value(s);
    case JS_AFTER:
        if (is_ws(c)) return JSCAN_MORE;
        if (c == ',') { s->st = s->stack[s->depth - 1] == '{' ? JS_KEY_START : JS_VALUE; return JSCAN_MORE; }
        if (c == '}') return close_container(s, '{');
        if (c == ']') return close_container(s, '[');
        return fail(s);
    case JS_KEY_OR_END:
        if (c == '}') return close_container(s, '{');
        /* fall through */
    case JS_KEY_START:
        if (is_ws(c)) return JSCAN_MORE;
        if (c == '"') { s->st = JS_KEY; return JSCAN_MORE; }
        return fail(s);
    case JS_COLON:
        if (is_ws(c)) return JSCAN_MORE;
        if (c == ':') { s->st = JS_VALUE; return JSCAN_MORE; }
        return fail(s);
    default:
        return fail(s);
    }
}
