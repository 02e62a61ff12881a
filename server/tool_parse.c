/* The chat output parser (see tool_parse.h): one state machine over a
 * buffer of text not yet reported. Each state consumes what it can decide
 * and waits for more otherwise; finishing decides the rest. */
#include "server/tool_parse.h"
#include "server/tool_json.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME 256   /* a function name or harmony header longer than this is not one */

typedef enum {
    M_START, M_THINK, M_AFTER_THINK, M_CONTENT_START, M_TEXT, M_BARE, M_AFTER_CALL,
    M_OBJ, M_CLOSE, M_ARR, M_ARR_ELEM, M_ARR_SEP, M_MIS, M_MIS_NAME, M_MIS_ID, M_ARGS,
    M_DS_NEXT, M_DS_HEAD, M_DS_NAME, M_DS_FENCE, M_DS_FENCE_END, M_DS_END,
    M_H_TEXT, M_H_HEAD, M_H_BODY
} mode;

enum { K_OTHER, K_NAME, K_ARGS, K_ID };
enum { H_CONTENT, H_REASONING, H_CALL };

struct tool_parser {
    tool_parse_opts o;
    tp_emit_fn fn;
    void *user;
    char *buf;
    size_t len, cap, pos;
    size_t seg;               /* where the current call's text began (given back if it breaks) */
    mode m, after;            /* after: where an object or raw arguments lead once complete */
    bool bare_ok;             /* a bare JSON call may still begin the content */
    bool in_array;            /* the objects are elements of a list of calls */
    bool oom;
    bool call_open;           /* seg..pos is a call (or harmony header) not yet decided */
    int n_calls;
    /* the current call */
    bool announced, suppressed, streaming;
    char *name, *id;
    size_t args_sent;
    json_scan js;
    size_t obj_start, key_start, val_start;
    int key_kind, val_kind;
    bool val_active;
    size_t args_s, args_e;    /* the arguments value's raw span in an object */
    bool have_name;
    int h_kind;               /* harmony: what the body is */
    const char *close_mark;   /* the marker that may close a call ("</tool_call>") */
};

/* ---- text helpers --------------------------------------------------------------- */
static const char *find_bytes(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i + 1, n + 1, nn - 1)) return h + i;
    return NULL;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Earliest whole marker in buf[from..len): its offset (len if none) and
 * index in *which (-1). *hold: where a tail that may begin a marker starts. */
static size_t find_mark(const tool_parser *p, size_t from, const char *const *marks, int *which, size_t *hold) {
    size_t best = p->len, longest = 0;
    *which = -1;
    for (int k = 0; marks[k]; k++) {
        size_t n = strlen(marks[k]);
        if (n > longest) longest = n;
        const char *f = find_bytes(p->buf + from, best - from, marks[k], n);
        if (f) best = (size_t)(f - p->buf), *which = k;
    }
    *hold = best;
    if (*which >= 0) return best;
    size_t i = p->len - from > longest ? p->len - longest + 1 : from;
    for (; i < p->len; i++)
        for (int k = 0; marks[k]; k++)
            if (strlen(marks[k]) > p->len - i && !memcmp(p->buf + i, marks[k], p->len - i)) { *hold = i; return best; }
    return best;
}

/* 1: lit is at pos; 0: the text so far is a proper prefix of it; -1: it is not there. */
static int match_at(const tool_parser *p, const char *lit) {
    size_t n = strlen(lit), have = p->len - p->pos;
    if (have >= n) return memcmp(p->buf + p->pos, lit, n) ? -1 : 1;
    return memcmp(p->buf + p->pos, lit, have) ? -1 : 0;
}

/* Skips whitespace; false when the text ran out first. */
static bool skip_ws(tool_parser *p) {
    while (p->pos < p->len && is_ws(p->buf[p->pos])) p->pos++;
    return p->pos < p->len;
}

static char *dup_range(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

/* A function name: printable, no spaces, not too long. */
static char *take_name(tool_parser *p, size_t a, size_t b) {
    while (a < b && is_ws(p->buf[a])) a++;
    while (b > a && is_ws(p->buf[b - 1])) b--;
    if (a == b || b - a > MAX_NAME) return NULL;
    for (size_t i = a; i < b; i++)
        if ((unsigned char)p->buf[i] <= ' ' || strchr("\"<>[]{}", p->buf[i])) return NULL;
    char *n = dup_range(p->buf + a, b - a);
    if (!n) p->oom = true;
    return n;
}

/* ---- events ----------------------------------------------------------------------- */
static void emit(tool_parser *p, tp_kind k, const char *t, size_t n) {
    if (!n) return;
    if (k == TP_REASONING && !p->o.reasoning) k = TP_CONTENT;
    tp_event ev = { .kind = k, .index = p->n_calls - 1, .text = t, .len = n };
    if (k == TP_ARGS && (p->suppressed || !p->announced)) return;
    p->fn(p->user, &ev);
}

static void reset_call(tool_parser *p) {
    free(p->name);
    free(p->id);
    p->name = p->id = NULL;
    p->announced = p->suppressed = p->streaming = p->have_name = p->val_active = false;
    p->args_s = p->args_e = 0;
}

/* The call is known by name: report it (unless past max_calls). */
static void announce(tool_parser *p) {
    if (p->announced) return;
    p->announced = true;
    p->suppressed = p->o.max_calls > 0 && p->n_calls >= p->o.max_calls;
    if (p->suppressed) return;
    p->n_calls++;
    tp_event ev = { .kind = TP_CALL, .index = p->n_calls - 1, .text = p->name, .len = strlen(p->name), .id = p->id };
    p->fn(p->user, &ev);
}

/* A whole call at once (name and arguments text). */
static void whole_call(tool_parser *p, const char *args, size_t n) {
    announce(p);
    emit(p, TP_ARGS, args, n);
}

/* The call cannot be read: what it wrote is content (or, once reported,
 * the call just ends there). The byte at pos is read again as text. */
static void call_failed(tool_parser *p) {
    if (p->call_open && !p->announced) emit(p, TP_CONTENT, p->buf + p->seg, p->pos - p->seg);
    reset_call(p);
    p->call_open = false;
    p->bare_ok = false;
    p->in_array = false;
    p->m = p->o.fmt == TOOL_FMT_HARMONY ? M_H_TEXT : M_TEXT;
}

static void call_done(tool_parser *p) {
    reset_call(p);
    p->call_open = false;
    p->m = p->after;
}

/* ---- JSON calls ------------------------------------------------------------------- */
static int key_kind(const char *k, size_t n) {
#define IS(s) (n == sizeof s - 1 && !memcmp(k, s, n))
    if (IS("name") || IS("tool_name")) return K_NAME;
    if (IS("arguments") || IS("parameters")) return K_ARGS;
    if (IS("id") || IS("tool_call_id")) return K_ID;
    return K_OTHER;
#undef IS
}

static const cJSON *str_item(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (!cJSON_IsString(v) && b) v = cJSON_GetObjectItemCaseSensitive(o, b);
    return cJSON_IsString(v) ? v : NULL;
}

/* One call from a parsed object: {name, arguments|parameters, id} or
 * {function: {name, arguments}}. raw: the arguments' text as written, if known. */
static bool call_from_json(tool_parser *p, const cJSON *o, const char *raw, size_t raw_n) {
    if (!cJSON_IsObject(o)) return false;
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(o, "function");
    const cJSON *holder = cJSON_IsObject(fn) ? fn : o;
    const cJSON *name = str_item(holder, "name", "tool_name");
    if (!name && cJSON_IsString(fn)) name = fn;
    if (!name || !*name->valuestring || strlen(name->valuestring) > MAX_NAME) return false;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(holder, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(holder, "parameters");
    const cJSON *id = str_item(o, "id", "tool_call_id");
    char *printed = NULL;
    const char *a = "{}";
    size_t an = 2;
    if (cJSON_IsString(args)) a = args->valuestring, an = strlen(a);
    else if (raw && holder == o) a = raw, an = raw_n;
    else if (args && !cJSON_IsNull(args)) {
        if (!(printed = cJSON_PrintUnformatted(args))) { p->oom = true; return false; }
        a = printed, an = strlen(printed);
    }
    if (!p->announced) {
        free(p->name);
        p->name = strdup(name->valuestring);
        if (id && !p->id) p->id = strdup(id->valuestring);
        if (!p->name || (id && !p->id)) { free(printed); p->oom = true; return false; }
        whole_call(p, a, an);
    } else if (!p->streaming && !p->args_e) {
        emit(p, TP_ARGS, a, an);
    }
    free(printed);
    return true;
}

/* The object's bytes through the scanner, following its top-level keys so
 * that the arguments stream as soon as the name is known. */
static void step_obj(tool_parser *p) {
    while (p->pos < p->len) {
        size_t i = p->pos;
        unsigned char c = (unsigned char)p->buf[i];
        int before = p->js.st, dbefore = p->js.depth;
        int rc = json_scan_byte(&p->js, c);
        if (rc == JSCAN_ERR) { call_failed(p); return; }
        p->pos++;
        int d = p->js.depth;
        if (d == 1 && dbefore == 1 && (before == JS_KEY_OR_END || before == JS_KEY_START) && p->js.st == JS_KEY)
            p->key_start = i + 1;
        if (d == 1 && before == JS_KEY && p->js.st == JS_COLON)
            p->key_kind = key_kind(p->buf + p->key_start, i - p->key_start);
        if (dbefore == 1 && before == JS_VALUE && p->js.st != JS_VALUE) {
            p->val_active = true;
            p->val_start = i;
            p->val_kind = p->key_kind;
            if (p->val_kind == K_ARGS && (c == '{' || c == '[') && p->have_name && !p->o.hold_calls) {
                announce(p);
                p->streaming = true;
                p->args_sent = i;
            }
        }
        if (p->val_active && ((d == 1 && p->js.st == JS_AFTER) || rc == JSCAN_DONE)) {
            size_t end = before == JS_NUM && dbefore == 1 ? i : i + 1;   /* a number ends before its delimiter */
            p->val_active = false;
            if (p->val_kind == K_NAME && p->buf[p->val_start] == '"' && !p->have_name && !p->announced) {
                cJSON *n = cJSON_ParseWithLength(p->buf + p->val_start, end - p->val_start);
                if (cJSON_IsString(n) && *n->valuestring && strlen(n->valuestring) <= MAX_NAME) {
                    free(p->name);
                    if ((p->name = strdup(n->valuestring))) p->have_name = true;
                    else p->oom = true;
                }
                cJSON_Delete(n);
            } else if (p->val_kind == K_ARGS && (p->buf[p->val_start] == '{' || p->buf[p->val_start] == '[')) {
                p->args_s = p->val_start;
                p->args_e = end;
                if (p->streaming) {
                    emit(p, TP_ARGS, p->buf + p->args_sent, end - p->args_sent);
                    p->args_sent = end;
                    p->streaming = false;
                }
            }
        }
        if (rc == JSCAN_DONE) {
            cJSON *o = cJSON_ParseWithLength(p->buf + p->obj_start, p->pos - p->obj_start);
            bool ok = call_from_json(p, o, p->args_e ? p->buf + p->args_s : NULL, p->args_e - p->args_s);
            cJSON_Delete(o);
            if (!ok && !p->announced) { p->pos = p->obj_start; call_failed(p); return; }   /* not a call: text */
            call_done(p);
            return;
        }
    }
    if (p->streaming && p->pos > p->args_sent) {
        emit(p, TP_ARGS, p->buf + p->args_sent, p->pos - p->args_sent);
        p->args_sent = p->pos;
    }
}

static void begin_obj(tool_parser *p, mode after) {
    json_scan_init(&p->js);
    p->obj_start = p->pos;
    p->key_kind = K_OTHER;
    p->after = after;
    p->m = M_OBJ;
}

/* Raw arguments (Mistral's [ARGS], DeepSeek's, harmony's): one JSON object
 * or list, streamed as it comes once the name is known. */
static void begin_args(tool_parser *p, mode after) {
    json_scan_init(&p->js);
    p->after = after;
    p->m = M_ARGS;
    p->args_s = 0;
}

static void step_args(tool_parser *p) {
    if (!p->args_s) {
        if (!skip_ws(p)) return;
        p->args_s = p->pos;
        p->args_sent = p->pos;
        if (!p->o.hold_calls) announce(p);
    }
    while (p->pos < p->len) {
        int rc = json_scan_byte(&p->js, (unsigned char)p->buf[p->pos]);
        if (rc == JSCAN_ERR) { call_failed(p); return; }
        p->pos++;
        if (rc == JSCAN_DONE) {
            if (p->announced) emit(p, TP_ARGS, p->buf + p->args_sent, p->pos - p->args_sent);
            else whole_call(p, p->buf + p->args_s, p->pos - p->args_s);
            call_done(p);
            return;
        }
    }
    if (p->announced) {
        emit(p, TP_ARGS, p->buf + p->args_sent, p->pos - p->args_sent);
        p->args_sent = p->pos;
    }
}

/* An object that names a function: {name, ...} or {function: {name}}; a
 * bare answer's own object must also carry arguments, or it is plain JSON. */
static bool looks_like_call(const cJSON *c, bool need_args) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
    if (cJSON_IsObject(fn)) return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name"));
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c, "name"))) return false;
    return !need_args || cJSON_GetObjectItemCaseSensitive(c, "arguments") || cJSON_GetObjectItemCaseSensitive(c, "parameters");
}

/* A bare JSON value that may be calls (llama3, generic): held until whole. */
static void step_bare(tool_parser *p) {
    while (p->pos < p->len) {
        int rc = json_scan_byte(&p->js, (unsigned char)p->buf[p->pos]);
        if (rc == JSCAN_ERR) { call_failed(p); return; }
        p->pos++;
        if (rc != JSCAN_DONE) continue;
        cJSON *v = cJSON_ParseWithLength(p->buf + p->seg, p->pos - p->seg);
        const cJSON *list = cJSON_IsArray(v) ? v : cJSON_GetObjectItemCaseSensitive(v, "tool_calls");
        const cJSON *one = cJSON_GetObjectItemCaseSensitive(v, "tool_call");
        bool ok = false;
        if (cJSON_IsArray(list) && cJSON_GetArraySize(list) > 0) {
            const cJSON *it;
            ok = true;
            cJSON_ArrayForEach(it, list) ok = ok && looks_like_call(it, false);
            if (ok) cJSON_ArrayForEach(it, list) {
                if (!call_from_json(p, it, NULL, 0)) break;
                reset_call(p);
            }
        } else if (cJSON_IsObject(v)) {
            const cJSON *c = cJSON_IsObject(one) ? one : v;
            ok = looks_like_call(c, c == v) && call_from_json(p, c, NULL, 0);
        }
        cJSON_Delete(v);
        if (!ok) { call_failed(p); return; }   /* plain JSON: content */
        p->after = M_AFTER_CALL;
        call_done(p);
        return;
    }
}


/* ---- text, reasoning and the formats' markers ---------------------------------------- */
static const char *const no_marks[] = { NULL };
static const char *const hermes_marks[] = { "<tool_call>", NULL };
static const char *const llama3_marks[] = { "<|python_tag|>", NULL };
static const char *const mistral_marks[] = { "[TOOL_CALLS]", NULL };
static const char *const granite_marks[] = { "<|tool_call|>", NULL };
#define DS_CALLS_BEGIN "<\xEF\xBD\x9Ctool\xE2\x96\x81""calls\xE2\x96\x81""begin\xEF\xBD\x9C>"
#define DS_CALLS_END "<\xEF\xBD\x9Ctool\xE2\x96\x81""calls\xE2\x96\x81""end\xEF\xBD\x9C>"
#define DS_CALL_BEGIN "<\xEF\xBD\x9Ctool\xE2\x96\x81""call\xE2\x96\x81""begin\xEF\xBD\x9C>"
#define DS_CALL_END "<\xEF\xBD\x9Ctool\xE2\x96\x81""call\xE2\x96\x81""end\xEF\xBD\x9C>"
#define DS_SEP "<\xEF\xBD\x9Ctool\xE2\x96\x81sep\xEF\xBD\x9C>"
static const char *const deepseek_marks[] = { DS_CALLS_BEGIN, DS_CALL_BEGIN, NULL };
static const char *const h_text_marks[] = { "<|channel|>", "<|start|>", "<|end|>", "<|return|>", "<|call|>", NULL };
static const char *const h_body_marks[] = { "<|end|>", "<|call|>", "<|return|>", "<|start|>", "<|channel|>", NULL };

static const char *const *text_marks(const tool_parser *p) {
    if (!p->o.tools) return no_marks;
    switch (p->o.fmt) {
    case TOOL_FMT_HERMES: return hermes_marks;
    case TOOL_FMT_LLAMA3: return llama3_marks;
    case TOOL_FMT_MISTRAL: return mistral_marks;
    case TOOL_FMT_GRANITE: return granite_marks;
    case TOOL_FMT_DEEPSEEK: return deepseek_marks;
    default: return no_marks;
    }
}

static bool bare_format(const tool_parser *p) {
    return p->o.tools && (p->o.fmt == TOOL_FMT_LLAMA3 || p->o.fmt == TOOL_FMT_GENERIC);
}

static void begin_bare(tool_parser *p) {
    p->seg = p->pos;
    p->call_open = true;
    json_scan_init(&p->js);
    p->m = M_BARE;
}

static void step_start(tool_parser *p) {
    if (p->o.fmt == TOOL_FMT_HARMONY) { p->m = M_H_TEXT; return; }
    if (!p->o.reasoning) { p->m = M_CONTENT_START; return; }
    if (p->o.think_open) { p->m = M_THINK; return; }
    size_t i = p->pos;
    while (i < p->len && is_ws(p->buf[i])) i++;
    if (i == p->len) return;
    size_t save = p->pos;
    p->pos = i;
    int r = match_at(p, "<think>");
    if (r == 1) { p->pos += 7; p->m = M_THINK; return; }
    p->pos = save;
    if (r == -1) p->m = M_CONTENT_START;
}

static void step_think(tool_parser *p) {
    static const char *const close[] = { "</think>", NULL };
    int w;
    size_t hold, at = find_mark(p, p->pos, close, &w, &hold);
    size_t end = w >= 0 ? at : hold;
    emit(p, TP_REASONING, p->buf + p->pos, end - p->pos);
    p->pos = end;
    if (w >= 0) { p->pos += 8; p->m = M_AFTER_THINK; }
}

static void step_content_start(tool_parser *p) {
    if (!bare_format(p) || !p->bare_ok) { p->m = M_TEXT; return; }
    size_t i = p->pos;
    while (i < p->len && is_ws(p->buf[i])) i++;
    if (i == p->len) return;
    if (p->buf[i] == '{' || p->buf[i] == '[') { p->pos = i; begin_bare(p); return; }
    p->m = M_TEXT;
}

static void step_text(tool_parser *p) {
    int w;
    size_t hold, at = find_mark(p, p->pos, text_marks(p), &w, &hold);
    size_t end = w >= 0 ? at : hold;
    if (p->o.tools)   /* whitespace before a call is not content; held until known */
        while (end > p->pos && is_ws(p->buf[end - 1])) end--;
    emit(p, TP_CONTENT, p->buf + p->pos, end - p->pos);
    p->pos = end;
    if (w < 0) return;
    const char *mk = text_marks(p)[w];
    p->seg = end;   /* with the whitespace before it, in case it is not a call */
    p->pos = at;
    p->call_open = true;
    p->bare_ok = false;
    p->in_array = false;
    if (p->o.fmt == TOOL_FMT_DEEPSEEK) {
        if (!strcmp(mk, DS_CALLS_BEGIN)) p->pos += strlen(mk);
        p->m = M_DS_NEXT;
        return;
    }
    p->pos += strlen(mk);
    p->close_mark = p->o.fmt == TOOL_FMT_HERMES ? "</tool_call>" : p->o.fmt == TOOL_FMT_GRANITE ? "<|/tool_call|>" : NULL;
    p->m = p->o.fmt == TOOL_FMT_MISTRAL ? M_MIS : M_ARR;
}

/* After "<tool_call>" and the like: one object, or a list of them. */
static void step_open(tool_parser *p) {
    if (!skip_ws(p)) return;
    char c = p->buf[p->pos];
    if (c == '{') begin_obj(p, p->in_array ? M_ARR_SEP : M_CLOSE);
    else if (c == '[' && !p->in_array) { p->in_array = true; p->pos++; p->m = M_ARR_ELEM; }
    else call_failed(p);
}

static void step_arr_elem(tool_parser *p) {
    if (!p->call_open) { p->call_open = true; p->seg = p->pos; }
    if (!skip_ws(p)) return;
    char c = p->buf[p->pos];
    if (c == '{') begin_obj(p, M_ARR_SEP);
    else if (c == ']') { p->pos++; p->in_array = false; p->call_open = false; p->m = M_CLOSE; }
    else call_failed(p);
}

static void step_arr_sep(tool_parser *p) {
    if (!skip_ws(p)) return;
    char c = p->buf[p->pos];
    if (c == ',') { p->pos++; p->m = M_ARR_ELEM; return; }
    if (c == ']') p->pos++;
    p->in_array = false;
    p->m = c == ']' ? M_CLOSE : M_TEXT;
}

static void step_close(tool_parser *p) {
    if (!skip_ws(p)) return;
    if (p->close_mark) {
        int r = match_at(p, p->close_mark);
        if (r == 0) return;
        if (r == 1) p->pos += strlen(p->close_mark);
    }
    p->m = M_AFTER_CALL;
}

static void step_after_call(tool_parser *p) {
    while (p->pos < p->len && (is_ws(p->buf[p->pos]) || p->buf[p->pos] == ';')) p->pos++;
    if (p->pos == p->len) return;
    char c = p->buf[p->pos];
    if (bare_format(p) && (c == '{' || c == '[')) { p->bare_ok = true; begin_bare(p); return; }
    p->m = M_TEXT;
}

/* ---- Mistral: [TOOL_CALLS] then a list, or name[CALL_ID]id[ARGS]{...} -------------------- */
static void step_mistral(tool_parser *p) {
    static const char *const name_end[] = { "[ARGS]", "[CALL_ID]", NULL };
    static const char *const id_end[] = { "[ARGS]", NULL };
    if (p->m == M_MIS) {
        if (!skip_ws(p)) return;
        char c = p->buf[p->pos];
        p->m = c == '[' || c == '{' ? M_ARR : M_MIS_NAME;
        return;
    }
    int w;
    size_t hold, at = find_mark(p, p->pos, p->m == M_MIS_NAME ? name_end : id_end, &w, &hold);
    if (w < 0) {
        if (p->len - p->pos > MAX_NAME) call_failed(p);
        return;
    }
    char *s = take_name(p, p->pos, at);
    if (!s) { call_failed(p); return; }
    if (p->m == M_MIS_NAME) free(p->name), p->name = s;
    else free(p->id), p->id = s;
    p->pos = at + strlen(p->m == M_MIS_NAME ? name_end[w] : "[ARGS]");
    if (p->m == M_MIS_NAME && w == 1) { p->m = M_MIS_ID; return; }
    begin_args(p, M_AFTER_CALL);
}

/* ---- DeepSeek's tool-call tokens ----------------------------------------------------------- */
static void step_deepseek(tool_parser *p) {
    static const char *const sep[] = { DS_SEP, NULL };
    static const char *const nl[] = { "\n", "```", NULL };
    int r, w;
    size_t hold, at;
    switch (p->m) {
    case M_DS_NEXT:
        if (!skip_ws(p)) return;
        if ((r = match_at(p, DS_CALLS_END)) == 1) { p->pos += strlen(DS_CALLS_END); p->m = M_AFTER_CALL; return; }
        if (r == 0) return;
        if ((r = match_at(p, DS_CALL_BEGIN)) == 1) {
            if (!p->call_open) { p->call_open = true; p->seg = p->pos; }
            p->pos += strlen(DS_CALL_BEGIN);
            p->m = M_DS_HEAD;
            return;
        }
        if (r == 0) return;
        if (p->call_open) call_failed(p);
        else p->m = M_TEXT;
        return;
    case M_DS_HEAD:
        at = find_mark(p, p->pos, sep, &w, &hold);
        if (w < 0) { if (p->len - p->pos > MAX_NAME) call_failed(p); return; }
        if (at - p->pos == 8 && !memcmp(p->buf + p->pos, "function", 8)) {   /* R1 / V3: type, then the name */
            p->pos = at + strlen(DS_SEP);
            p->m = M_DS_NAME;
            return;
        }
        if (!(p->name = take_name(p, p->pos, at))) { call_failed(p); return; }
        p->pos = at + strlen(DS_SEP);
        begin_args(p, M_DS_END);
        return;
    case M_DS_NAME:
        at = find_mark(p, p->pos, nl, &w, &hold);
        if (w < 0) { if (p->len - p->pos > MAX_NAME) call_failed(p); return; }
        if (!(p->name = take_name(p, p->pos, at))) { call_failed(p); return; }
        p->pos = at;
        p->m = M_DS_FENCE;
        return;
    case M_DS_FENCE:
        if (!skip_ws(p)) return;
        if ((r = match_at(p, "```json")) == 0) return;
        if (r == 1) p->pos += 7;
        else if ((r = match_at(p, "```")) == 0) return;
        else if (r == 1) p->pos += 3;
        begin_args(p, M_DS_FENCE_END);
        return;
    case M_DS_FENCE_END:
        if (!skip_ws(p)) return;
        if ((r = match_at(p, "```")) == 0) return;
        if (r == 1) p->pos += 3;
        p->m = M_DS_END;
        return;
    default:   /* M_DS_END */
        if (!skip_ws(p)) return;
        if ((r = match_at(p, DS_CALL_END)) == 0) return;
        if (r == 1) p->pos += strlen(DS_CALL_END);
        p->m = M_DS_NEXT;
    }
}

/* ---- harmony (gpt-oss): messages of channels ------------------------------------------------ */
static void h_header(tool_parser *p, size_t a, size_t b) {
    p->h_kind = H_CONTENT;
    const char *h = p->buf + a;
    size_t n = b - a;
    const char *ch = find_bytes(h, n, "<|channel|>", 11);
    if (ch) {
        const char *w = ch + 11, *e = h + n;
        while (w < e && is_ws(*w)) w++;
        if ((size_t)(e - w) >= 8 && !memcmp(w, "analysis", 8)) p->h_kind = H_REASONING;
    }
    const char *to = find_bytes(h, n, "to=", 3);
    if (to && p->o.tools) {
        size_t s = (size_t)(to + 3 - p->buf), e = s;
        while (e < b && !is_ws(p->buf[e]) && p->buf[e] != '<') e++;
        if (e - s > 10 && !memcmp(p->buf + s, "functions.", 10)) s += 10;
        if ((p->name = take_name(p, s, e))) p->h_kind = H_CALL;
    }
}

/* The body ended at `at`: a call held whole is reported now. */
static void h_body_end(tool_parser *p, size_t at) {
    if (p->h_kind == H_CALL && !p->announced) {
        size_t a = p->args_s, b = at;
        while (a < b && is_ws(p->buf[a])) a++;
        while (b > a && is_ws(p->buf[b - 1])) b--;
        if (a == b) whole_call(p, "{}", 2);
        else whole_call(p, p->buf + a, b - a);
    }
    reset_call(p);
    p->call_open = false;
    p->m = M_H_TEXT;
}

static void step_harmony(tool_parser *p) {
    int w;
    size_t hold, at;
    if (p->m == M_H_TEXT) {
        at = find_mark(p, p->pos, h_text_marks, &w, &hold);
        size_t end = w >= 0 ? at : hold;
        emit(p, TP_CONTENT, p->buf + p->pos, end - p->pos);
        p->pos = end;
        if (w < 0) return;
        if (w >= 2) { p->pos += strlen(h_text_marks[w]); return; }   /* an end marker: nothing to say */
        p->seg = at;
        p->call_open = true;
        p->m = M_H_HEAD;
        return;
    }
    if (p->m == M_H_HEAD) {
        static const char *const msg[] = { "<|message|>", NULL };
        at = find_mark(p, p->pos, msg, &w, &hold);
        if (w < 0) {
            if (p->len - p->pos > 2 * MAX_NAME) {   /* not a header: the text as it is */
                emit(p, TP_CONTENT, p->buf + p->seg, p->len - p->seg);
                p->pos = p->len;
                p->call_open = false;
                p->m = M_H_TEXT;
            }
            return;
        }
        reset_call(p);
        h_header(p, p->pos, at);
        p->pos = at + 11;
        p->args_s = p->args_sent = p->pos;
        p->call_open = p->h_kind == H_CALL;
        if (p->h_kind == H_CALL && !p->o.hold_calls) announce(p);
        p->m = M_H_BODY;
        return;
    }
    at = find_mark(p, p->pos, h_body_marks, &w, &hold);
    size_t end = w >= 0 ? at : hold;
    if (p->h_kind == H_CALL) emit(p, TP_ARGS, p->buf + p->pos, end - p->pos);
    else emit(p, p->h_kind == H_REASONING ? TP_REASONING : TP_CONTENT, p->buf + p->pos, end - p->pos);
    p->pos = end;
    if (w < 0) return;
    h_body_end(p, at);
    if (w < 3) p->pos += strlen(h_body_marks[w]);
}

/* ---- driving ------------------------------------------------------------------------------ */
static void step(tool_parser *p) {
    switch (p->m) {
    case M_START: step_start(p); break;
    case M_THINK: step_think(p); break;
    case M_AFTER_THINK: if (skip_ws(p)) p->m = M_CONTENT_START; break;
    case M_CONTENT_START: step_content_start(p); break;
    case M_TEXT: step_text(p); break;
    case M_BARE: step_bare(p); break;
    case M_AFTER_CALL: step_after_call(p); break;
    case M_OBJ: step_obj(p); break;
    case M_CLOSE: step_close(p); break;
    case M_ARR: step_open(p); break;
    case M_ARR_ELEM: step_arr_elem(p); break;
    case M_ARR_SEP: step_arr_sep(p); break;
    case M_MIS: case M_MIS_NAME: case M_MIS_ID: step_mistral(p); break;
    case M_ARGS: step_args(p); break;
    case M_DS_NEXT: case M_DS_HEAD: case M_DS_NAME: case M_DS_FENCE: case M_DS_FENCE_END: case M_DS_END:
        step_deepseek(p);
        break;
    case M_H_TEXT: case M_H_HEAD: case M_H_BODY: step_harmony(p); break;
    }
}

/* Every state either consumes text, changes state or waits; a state change
 * that consumes nothing never repeats, so a few rounds without progress end it. */
static void run(tool_parser *p) {
    int still = 0;
    while (still < 8 && !p->oom) {
        mode m = p->m;
        size_t pos = p->pos;
        step(p);
        if (p->pos != pos) still = 0;
        else if (p->m == m) break;
        else still++;
    }
}

tool_parser *tool_parser_new(const tool_parse_opts *o, tp_emit_fn fn, void *user) {
    tool_parser *p = calloc(1, sizeof *p);
    if (p) p->buf = malloc(p->cap = 256);   /* never NULL: offsets are taken from it */
    if (!p || !p->buf) { free(p); return NULL; }
    p->buf[0] = 0;
    p->o = *o;
    p->fn = fn;
    p->user = user;
    p->bare_ok = true;
    p->m = M_START;
    return p;
}

bool tool_parser_feed(tool_parser *p, const char *text, size_t len) {
    if (p->oom) return false;
    size_t keep = p->call_open ? p->seg : p->pos;   /* offsets in a call stay put */
    if (keep > 0 && keep == p->len) p->len = p->pos = p->seg = 0;
    else if (keep > 4096 && !p->call_open) {
        memmove(p->buf, p->buf + keep, p->len - keep);
        p->len -= keep;
        p->pos -= keep;
        p->seg = 0;
    }
    if (p->len + len + 1 > p->cap) {
        size_t c = p->cap;
        while (c < p->len + len + 1) c *= 2;
        char *nb = realloc(p->buf, c);
        if (!nb) return !(p->oom = true);
        p->buf = nb;
        p->cap = c;
    }
    if (len) memcpy(p->buf + p->len, text, len);
    p->len += len;
    p->buf[p->len] = 0;
    run(p);
    return !p->oom;
}

bool tool_parser_finish(tool_parser *p) {
    if (p->oom) return false;
    run(p);
    size_t rest = p->len - p->pos;
    const char *r = p->buf + p->pos;
    switch (p->m) {
    case M_THINK:
        emit(p, TP_REASONING, r, rest);
        break;
    case M_START: case M_CONTENT_START: case M_TEXT: case M_H_TEXT: {
        size_t n = rest;
        if (p->n_calls) while (n && is_ws(r[n - 1])) n--;
        emit(p, TP_CONTENT, r, n);
        break;
    }
    case M_H_BODY:
        emit(p, p->h_kind == H_CALL ? TP_ARGS : p->h_kind == H_REASONING ? TP_REASONING : TP_CONTENT, r, rest);
        h_body_end(p, p->len);
        break;
    default:
        if (p->announced) {   /* cut short (max_tokens): what was written is sent */
            if ((p->m == M_OBJ && p->streaming) || p->m == M_ARGS) emit(p, TP_ARGS, p->buf + p->args_sent, p->len - p->args_sent);
        } else if (p->call_open) {
            p->pos = p->len;
            call_failed(p);
        }
    }
    p->pos = p->len;
    reset_call(p);
    p->call_open = false;
    return !p->oom;
}

int tool_parser_n_calls(const tool_parser *p) { return p->n_calls; }

void tool_parser_free(tool_parser *p) {
    if (!p) return;
    reset_call(p);
    free(p->buf);
    free(p);
}
