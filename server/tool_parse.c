/* The chat output parser (see tool_parse.h): one state machine over a
 * buffer of text not yet reported. Each state consumes what it can decide
 * and waits for more otherwise; finishing decides the rest. This file holds
 * the machine, text, reasoning and JSON calls; tool_formats.c the formats
 * with markers of their own. */
#include "server/tool_parse_internal.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* ---- text helpers --------------------------------------------------------------- */
const char *tp_find_bytes(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && !memcmp(h + i + 1, n + 1, nn - 1)) return h + i;
    return NULL;
}

bool tp_is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Earliest whole marker in buf[from..len): its offset (len if none) and
 * index in *which (-1). *hold: where a tail that may begin a marker starts. */
size_t tp_find_mark(const tool_parser *p, size_t from, const char *const *marks, int *which, size_t *hold) {
    size_t best = p->len, longest = 0;
    *which = -1;
    for (int k = 0; marks[k]; k++) {
        size_t n = strlen(marks[k]);
        if (n > longest) longest = n;
        const char *f = tp_find_bytes(p->buf + from, best - from, marks[k], n);
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
int tp_match_at(const tool_parser *p, const char *lit) {
    size_t n = strlen(lit), have = p->len - p->pos;
    if (have >= n) return memcmp(p->buf + p->pos, lit, n) ? -1 : 1;
    return memcmp(p->buf + p->pos, lit, have) ? -1 : 0;
}

/* Skips whitespace; false when the text ran out first. */
bool tp_skip_ws(tool_parser *p) {
    while (p->pos < p->len && tp_is_ws(p->buf[p->pos])) p->pos++;
    return p->pos < p->len;
}

char *tp_dup_range(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

/* A function name: printable, no spaces, not too long. */
char *tp_take_name(tool_parser *p, size_t a, size_t b) {
    while (a < b && tp_is_ws(p->buf[a])) a++;
    while (b > a && tp_is_ws(p->buf[b - 1])) b--;
    if (a == b || b - a > MAX_NAME) return NULL;
    for (size_t i = a; i < b; i++)
        if ((unsigned char)p->buf[i] <= ' ' || strchr("\"<>[]{}", p->buf[i])) return NULL;
    char *n = tp_dup_range(p->buf + a, b - a);
    if (!n) p->oom = true;
    return n;
}

/* ---- events ----------------------------------------------------------------------- */
void tp_emit(tool_parser *p, tp_kind k, const char *t, size_t n) {
    if (!n) return;
    if (k == TP_REASONING && !p->o.reasoning) k = TP_CONTENT;
    tp_event ev = { .kind = k, .index = p->n_calls - 1, .text = t, .len = n };
    if (k == TP_ARGS && (p->suppressed || !p->announced)) return;
    p->fn(p->user, &ev);
}

void tp_reset_call(tool_parser *p) {
    free(p->name);
    free(p->id);
    p->name = p->id = NULL;
    p->announced = p->suppressed = p->streaming = p->have_name = p->val_active = false;
    p->args_s = p->args_e = 0;
}

/* The call is known by name: report it (unless past max_calls). */
void tp_announce(tool_parser *p) {
    if (p->announced) return;
    p->announced = true;
    p->suppressed = p->o.max_calls > 0 && p->n_calls >= p->o.max_calls;
    if (p->suppressed) return;
    p->n_calls++;
    tp_event ev = { .kind = TP_CALL, .index = p->n_calls - 1, .text = p->name, .len = strlen(p->name), .id = p->id };
    p->fn(p->user, &ev);
}

/* A whole call at once (name and arguments text). */
void tp_whole_call(tool_parser *p, const char *args, size_t n) {
    tp_announce(p);
    tp_emit(p, TP_ARGS, args, n);
}

/* The call cannot be read: what it wrote is content (or, once reported,
 * the call just ends there). The byte at pos is read again as text. */
void tp_call_failed(tool_parser *p) {
    if (p->call_open && !p->announced) tp_emit(p, TP_CONTENT, p->buf + p->seg, p->pos - p->seg);
    tp_reset_call(p);
    p->call_open = false;
    p->bare_ok = false;
    p->in_array = false;
    p->m = p->o.fmt == TOOL_FMT_HARMONY ? M_H_TEXT : M_TEXT;
}

void tp_call_done(tool_parser *p) {
    tp_reset_call(p);
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
        tp_whole_call(p, a, an);
    } else if (!p->streaming && !p->args_e) {
        tp_emit(p, TP_ARGS, a, an);
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
        if (rc == JSCAN_ERR) { tp_call_failed(p); return; }
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
                tp_announce(p);
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
                    tp_emit(p, TP_ARGS, p->buf + p->args_sent, end - p->args_sent);
                    p->args_sent = end;
                    p->streaming = false;
                }
            }
        }
        if (rc == JSCAN_DONE) {
            cJSON *o = cJSON_ParseWithLength(p->buf + p->obj_start, p->pos - p->obj_start);
            bool ok = call_from_json(p, o, p->args_e ? p->buf + p->args_s : NULL, p->args_e - p->args_s);
            cJSON_Delete(o);
            if (!ok && !p->announced) { p->pos = p->obj_start; tp_call_failed(p); return; }   /* not a call: text */
            tp_call_done(p);
            return;
        }
    }
    if (p->streaming && p->pos > p->args_sent) {
        tp_emit(p, TP_ARGS, p->buf + p->args_sent, p->pos - p->args_sent);
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
void tp_begin_args(tool_parser *p, mode after) {
    json_scan_init(&p->js);
    p->after = after;
    p->m = M_ARGS;
    p->args_s = 0;
}

static void step_args(tool_parser *p) {
    if (!p->args_s) {
        if (!tp_skip_ws(p)) return;
        p->args_s = p->pos;
        p->args_sent = p->pos;
        if (!p->o.hold_calls) tp_announce(p);
    }
    while (p->pos < p->len) {
        int rc = json_scan_byte(&p->js, (unsigned char)p->buf[p->pos]);
        if (rc == JSCAN_ERR) { tp_call_failed(p); return; }
        p->pos++;
        if (rc == JSCAN_DONE) {
            if (p->announced) tp_emit(p, TP_ARGS, p->buf + p->args_sent, p->pos - p->args_sent);
            else tp_whole_call(p, p->buf + p->args_s, p->pos - p->args_s);
            tp_call_done(p);
            return;
        }
    }
    if (p->announced) {
        tp_emit(p, TP_ARGS, p->buf + p->args_sent, p->pos - p->args_sent);
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
        if (rc == JSCAN_ERR) { tp_call_failed(p); return; }
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
                tp_reset_call(p);
            }
        } else if (cJSON_IsObject(v)) {
            const cJSON *c = cJSON_IsObject(one) ? one : v;
            ok = looks_like_call(c, c == v) && call_from_json(p, c, NULL, 0);
        }
        cJSON_Delete(v);
        if (!ok) { tp_call_failed(p); return; }   /* plain JSON: content */
        p->after = M_AFTER_CALL;
        tp_call_done(p);
        return;
    }
}


/* ---- text, reasoning and the formats' markers ---------------------------------------- */
static const char *const no_marks[] = { NULL };
static const char *const hermes_marks[] = { "<tool_call>", NULL };
static const char *const llama3_marks[] = { "<|python_tag|>", NULL };
static const char *const mistral_marks[] = { "[TOOL_CALLS]", NULL };
static const char *const granite_marks[] = { "<|tool_call|>", NULL };
static const char *const deepseek_marks[] = { DS_CALLS_BEGIN, DS_CALL_BEGIN, NULL };

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
    while (i < p->len && tp_is_ws(p->buf[i])) i++;
    if (i == p->len) return;
    size_t save = p->pos;
    p->pos = i;
    int r = tp_match_at(p, "<think>");
    if (r == 1) { p->pos += 7; p->m = M_THINK; return; }
    p->pos = save;
    if (r == -1) p->m = M_CONTENT_START;
}

static void step_think(tool_parser *p) {
    static const char *const close[] = { "</think>", NULL };
    int w;
    if (!p->think_begun && !(p->think_begun = tp_skip_ws(p))) return;   /* the reasoning is trimmed */
    size_t hold, at = tp_find_mark(p, p->pos, close, &w, &hold);
    size_t end = w >= 0 ? at : hold;
    while (end > p->pos && tp_is_ws(p->buf[end - 1])) end--;   /* held until more text comes */
    tp_emit(p, TP_REASONING, p->buf + p->pos, end - p->pos);
    p->pos = end;
    if (w >= 0) { p->pos = at + 8; p->m = M_AFTER_THINK; }
}

static void step_content_start(tool_parser *p) {
    if (!bare_format(p) || !p->bare_ok) { p->m = M_TEXT; return; }
    size_t i = p->pos;
    while (i < p->len && tp_is_ws(p->buf[i])) i++;
    if (i == p->len) return;
    if (p->buf[i] == '{' || p->buf[i] == '[') { p->pos = i; begin_bare(p); return; }
    p->m = M_TEXT;
}

static void step_text(tool_parser *p) {
    int w;
    size_t hold, at = tp_find_mark(p, p->pos, text_marks(p), &w, &hold);
    size_t end = w >= 0 ? at : hold;
    if (p->o.tools)   /* whitespace before a call is not content; held until known */
        while (end > p->pos && tp_is_ws(p->buf[end - 1])) end--;
    tp_emit(p, TP_CONTENT, p->buf + p->pos, end - p->pos);
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

/* After "<tool_call>" and the like: one object, a list of them, or
 * <function=NAME> (Qwen3-Coder's XML parameters, or a JSON object). */
static void step_open(tool_parser *p) {
    if (!tp_skip_ws(p)) return;
    char c = p->buf[p->pos];
    if (c == '<' && !p->in_array) {
        int r = tp_match_at(p, "<function=");
        if (r == 1) { p->pos += 10; p->m = M_FN_NAME; }
        else if (r == -1) tp_call_failed(p);
        return;
    }
    if (c == '{') begin_obj(p, p->in_array ? M_ARR_SEP : M_CLOSE);
    else if (c == '[' && !p->in_array) { p->in_array = true; p->pos++; p->m = M_ARR_ELEM; }
    else tp_call_failed(p);
}

static void step_arr_elem(tool_parser *p) {
    if (!p->call_open) { p->call_open = true; p->seg = p->pos; }
    if (!tp_skip_ws(p)) return;
    char c = p->buf[p->pos];
    if (c == '{') begin_obj(p, M_ARR_SEP);
    else if (c == ']') { p->pos++; p->in_array = false; p->call_open = false; p->m = M_CLOSE; }
    else tp_call_failed(p);
}

static void step_arr_sep(tool_parser *p) {
    if (!tp_skip_ws(p)) return;
    char c = p->buf[p->pos];
    if (c == ',') { p->pos++; p->m = M_ARR_ELEM; return; }
    if (c == ']') p->pos++;
    p->in_array = false;
    p->m = c == ']' ? M_CLOSE : M_TEXT;
}

static void step_close(tool_parser *p) {
    if (!tp_skip_ws(p)) return;
    if (p->close_mark) {
        int r = tp_match_at(p, p->close_mark);
        if (r == 0) return;
        if (r == 1) p->pos += strlen(p->close_mark);
    }
    p->m = M_AFTER_CALL;
}

static void step_after_call(tool_parser *p) {
    while (p->pos < p->len && (tp_is_ws(p->buf[p->pos]) || p->buf[p->pos] == ';')) p->pos++;
    if (p->pos == p->len) return;
    char c = p->buf[p->pos];
    if (bare_format(p) && (c == '{' || c == '[')) { p->bare_ok = true; begin_bare(p); return; }
    p->m = M_TEXT;
}

/* ---- driving ------------------------------------------------------------------------------ */
static void step(tool_parser *p) {
    switch (p->m) {
    case M_START: step_start(p); break;
    case M_THINK: step_think(p); break;
    case M_AFTER_THINK: if (tp_skip_ws(p)) p->m = M_CONTENT_START; break;
    case M_CONTENT_START: step_content_start(p); break;
    case M_TEXT: step_text(p); break;
    case M_BARE: step_bare(p); break;
    case M_AFTER_CALL: step_after_call(p); break;
    case M_OBJ: step_obj(p); break;
    case M_CLOSE: step_close(p); break;
    case M_ARR: step_open(p); break;
    case M_ARR_ELEM: step_arr_elem(p); break;
    case M_ARR_SEP: step_arr_sep(p); break;
    case M_MIS: case M_MIS_NAME: case M_MIS_ID: tp_step_mistral(p); break;
    case M_ARGS: step_args(p); break;
    case M_DS_NEXT: case M_DS_HEAD: case M_DS_NAME: case M_DS_FENCE: case M_DS_FENCE_END: case M_DS_END:
        tp_step_deepseek(p);
        break;
    case M_H_TEXT: case M_H_HEAD: case M_H_BODY: tp_step_harmony(p); break;
    case M_FN_NAME: case M_FN_BODY: case M_FN_END: tp_step_function(p); break;
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
        while (rest && tp_is_ws(r[rest - 1])) rest--;
        tp_emit(p, TP_REASONING, r, rest);
        break;
    case M_START: case M_CONTENT_START: case M_TEXT: case M_H_TEXT: {
        size_t n = rest;
        if (p->n_calls) while (n && tp_is_ws(r[n - 1])) n--;
        tp_emit(p, TP_CONTENT, r, n);
        break;
    }
    case M_H_BODY:
        tp_emit(p, p->h_kind == H_CALL ? TP_ARGS : p->h_kind == H_REASONING ? TP_REASONING : TP_CONTENT, r, rest);
        tp_h_body_end(p, p->len);
        break;
    default:
        if (p->announced) {   /* cut short (max_tokens): what was written is sent */
            if ((p->m == M_OBJ && p->streaming) || p->m == M_ARGS) tp_emit(p, TP_ARGS, p->buf + p->args_sent, p->len - p->args_sent);
        } else if (p->call_open) {
            p->pos = p->len;
            tp_call_failed(p);
        }
    }
    p->pos = p->len;
    tp_reset_call(p);
    p->call_open = false;
    return !p->oom;
}

int tool_parser_n_calls(const tool_parser *p) { return p->n_calls; }

void tool_parser_free(tool_parser *p) {
    if (!p) return;
    tp_reset_call(p);
    free(p->buf);
    free(p);
}
