/* The chat output parser's formats with markers of their own (see
 * tool_parse.h): <function=NAME> inside <tool_call> (Qwen3-Coder's XML
 * parameters, or JSON), Mistral's [TOOL_CALLS] name[ARGS], DeepSeek's
 * tool-call tokens and gpt-oss's harmony channels. */
#include "server/tool_parse_internal.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const char *const h_text_marks[] = { "<|channel|>", "<|start|>", "<|end|>", "<|return|>", "<|call|>", NULL };
static const char *const h_body_marks[] = { "<|end|>", "<|call|>", "<|return|>", "<|start|>", "<|channel|>", NULL };

/* <parameter=KEY>\nVALUE\n</parameter>... as a JSON object: a value that
 * reads as JSON (a number, true, an object...) is that, anything else a string. */
static char *xml_params(const char *s, size_t n) {
    cJSON *o = cJSON_CreateObject();
    const char *end = s + n;
    while (o) {
        while (s < end && tp_is_ws(*s)) s++;
        if (s == end) break;
        const char *k = tp_find_bytes(s, (size_t)(end - s), "<parameter=", 11);
        if (k != s) goto bad;
        k += 11;
        const char *gt = memchr(k, '>', (size_t)(end - k));
        const char *close = gt ? tp_find_bytes(gt, (size_t)(end - gt), "</parameter>", 12) : NULL;
        if (!gt || !close || gt == k || gt - k > MAX_NAME) goto bad;
        const char *v = gt + 1, *ve = close;
        if (v < ve && *v == '\n') v++;
        if (ve > v && ve[-1] == '\n') ve--;
        char *key = tp_dup_range(k, (size_t)(gt - k)), *val = tp_dup_range(v, (size_t)(ve - v));
        cJSON *j = val ? cJSON_ParseWithLength(val, strlen(val)) : NULL;
        if (!j && val) j = cJSON_CreateString(val);
        if (!key || !j) { free(key); free(val); cJSON_Delete(j); goto bad; }
        cJSON_DeleteItemFromObjectCaseSensitive(o, key);
        cJSON_AddItemToObject(o, key, j);
        free(key);
        free(val);
        s = close + 12;
    }
    char *out = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return out;
bad:
    cJSON_Delete(o);
    return NULL;
}

void tp_step_function(tool_parser *p) {
    static const char *const gt[] = { ">", NULL };
    static const char *const fn_end[] = { "</function>", NULL };
    int w, r;
    size_t hold, at;
    switch (p->m) {
    case M_FN_NAME:
        at = tp_find_mark(p, p->pos, gt, &w, &hold);
        if (w < 0) { if (p->len - p->pos > MAX_NAME) tp_call_failed(p); return; }
        if (!(p->name = tp_take_name(p, p->pos, at))) { tp_call_failed(p); return; }
        p->pos = at + 1;
        p->args_s = 0;
        p->m = M_FN_BODY;
        return;
    case M_FN_BODY:
        if (!p->args_s) {
            if (!tp_skip_ws(p)) return;
            if (p->buf[p->pos] == '{') { tp_begin_args(p, M_FN_END); return; }
            p->args_s = p->pos;
        }
        at = tp_find_mark(p, p->pos, fn_end, &w, &hold);
        p->pos = w >= 0 ? at : hold;
        if (w < 0) return;
        char *args = xml_params(p->buf + p->args_s, at - p->args_s);
        if (!args) { tp_call_failed(p); return; }
        tp_whole_call(p, args, strlen(args));
        free(args);
        p->pos = at + 11;
        p->after = M_CLOSE;
        tp_call_done(p);
        return;
    default:   /* M_FN_END */
        if (!tp_skip_ws(p)) return;
        if ((r = tp_match_at(p, "</function>")) == 0) return;
        if (r == 1) p->pos += 11;
        p->m = M_CLOSE;
    }
}

/* ---- Mistral: [TOOL_CALLS] then a list, or name[CALL_ID]id[ARGS]{...} -------------------- */
void tp_step_mistral(tool_parser *p) {
    static const char *const name_end[] = { "[ARGS]", "[CALL_ID]", NULL };
    static const char *const id_end[] = { "[ARGS]", NULL };
    if (p->m == M_MIS) {
        if (!tp_skip_ws(p)) return;
        char c = p->buf[p->pos];
        p->m = c == '[' || c == '{' ? M_ARR : M_MIS_NAME;
        return;
    }
    int w;
    size_t hold, at = tp_find_mark(p, p->pos, p->m == M_MIS_NAME ? name_end : id_end, &w, &hold);
    if (w < 0) {
        if (p->len - p->pos > MAX_NAME) tp_call_failed(p);
        return;
    }
    char *s = tp_take_name(p, p->pos, at);
    if (!s) { tp_call_failed(p); return; }
    if (p->m == M_MIS_NAME) free(p->name), p->name = s;
    else free(p->id), p->id = s;
    p->pos = at + strlen(p->m == M_MIS_NAME ? name_end[w] : "[ARGS]");
    if (p->m == M_MIS_NAME && w == 1) { p->m = M_MIS_ID; return; }
    tp_begin_args(p, M_AFTER_CALL);
}

/* ---- DeepSeek's tool-call tokens ----------------------------------------------------------- */
void tp_step_deepseek(tool_parser *p) {
    static const char *const sep[] = { DS_SEP, NULL };
    static const char *const nl[] = { "\n", "```", NULL };
    int r, w;
    size_t hold, at;
    switch (p->m) {
    case M_DS_NEXT:
        if (!tp_skip_ws(p)) return;
        if ((r = tp_match_at(p, DS_CALLS_END)) == 1) { p->pos += strlen(DS_CALLS_END); p->m = M_AFTER_CALL; return; }
        if (r == 0) return;
        if ((r = tp_match_at(p, DS_CALL_BEGIN)) == 1) {
            if (!p->call_open) { p->call_open = true; p->seg = p->pos; }
            p->pos += strlen(DS_CALL_BEGIN);
            p->m = M_DS_HEAD;
            return;
        }
        if (r == 0) return;
        if (p->call_open) tp_call_failed(p);
        else p->m = M_TEXT;
        return;
    case M_DS_HEAD:
        at = tp_find_mark(p, p->pos, sep, &w, &hold);
        if (w < 0) { if (p->len - p->pos > MAX_NAME) tp_call_failed(p); return; }
        if (at - p->pos == 8 && !memcmp(p->buf + p->pos, "function", 8)) {   /* R1 / V3: type, then the name */
            p->pos = at + strlen(DS_SEP);
            p->m = M_DS_NAME;
            return;
        }
        if (!(p->name = tp_take_name(p, p->pos, at))) { tp_call_failed(p); return; }
        p->pos = at + strlen(DS_SEP);
        tp_begin_args(p, M_DS_END);
        return;
    case M_DS_NAME:
        at = tp_find_mark(p, p->pos, nl, &w, &hold);
        if (w < 0) { if (p->len - p->pos > MAX_NAME) tp_call_failed(p); return; }
        if (!(p->name = tp_take_name(p, p->pos, at))) { tp_call_failed(p); return; }
        p->pos = at;
        p->m = M_DS_FENCE;
        return;
    case M_DS_FENCE:
        if (!tp_skip_ws(p)) return;
        if ((r = tp_match_at(p, "```json")) == 0) return;
        if (r == 1) p->pos += 7;
        else if ((r = tp_match_at(p, "```")) == 0) return;
        else if (r == 1) p->pos += 3;
        tp_begin_args(p, M_DS_FENCE_END);
        return;
    case M_DS_FENCE_END:
        if (!tp_skip_ws(p)) return;
        if ((r = tp_match_at(p, "```")) == 0) return;
        if (r == 1) p->pos += 3;
        p->m = M_DS_END;
        return;
    default:   /* M_DS_END */
        if (!tp_skip_ws(p)) return;
        if ((r = tp_match_at(p, DS_CALL_END)) == 0) return;
        if (r == 1) p->pos += strlen(DS_CALL_END);
        p->m = M_DS_NEXT;
    }
}

/* ---- harmony (gpt-oss): messages of channels ------------------------------------------------ */
static void h_header(tool_parser *p, size_t a, size_t b) {
    p->h_kind = H_CONTENT;
    const char *h = p->buf + a;
    size_t n = b - a;
    const char *ch = tp_find_bytes(h, n, "<|channel|>", 11);
    if (ch) {
        const char *w = ch + 11, *e = h + n;
        while (w < e && tp_is_ws(*w)) w++;
        if ((size_t)(e - w) >= 8 && !memcmp(w, "analysis", 8)) p->h_kind = H_REASONING;
    }
    const char *to = tp_find_bytes(h, n, "to=", 3);
    if (to && p->o.tools) {
        size_t s = (size_t)(to + 3 - p->buf), e = s;
        while (e < b && !tp_is_ws(p->buf[e]) && p->buf[e] != '<') e++;
        if (e - s > 10 && !memcmp(p->buf + s, "functions.", 10)) s += 10;
        if ((p->name = tp_take_name(p, s, e))) p->h_kind = H_CALL;
    }
}

/* The body ended at `at`: a call held whole is reported now. */
void tp_h_body_end(tool_parser *p, size_t at) {
    if (p->h_kind == H_CALL && !p->announced) {
        size_t a = p->args_s, b = at;
        while (a < b && tp_is_ws(p->buf[a])) a++;
        while (b > a && tp_is_ws(p->buf[b - 1])) b--;
        if (a == b) tp_whole_call(p, "{}", 2);
        else tp_whole_call(p, p->buf + a, b - a);
    }
    tp_reset_call(p);
    p->call_open = false;
    p->m = M_H_TEXT;
}

void tp_step_harmony(tool_parser *p) {
    int w;
    size_t hold, at;
    if (p->m == M_H_TEXT) {
        at = tp_find_mark(p, p->pos, h_text_marks, &w, &hold);
        size_t end = w >= 0 ? at : hold;
        tp_emit(p, TP_CONTENT, p->buf + p->pos, end - p->pos);
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
        at = tp_find_mark(p, p->pos, msg, &w, &hold);
        if (w < 0) {
            if (p->len - p->pos > 2 * MAX_NAME) {   /* not a header: the text as it is */
                tp_emit(p, TP_CONTENT, p->buf + p->seg, p->len - p->seg);
                p->pos = p->len;
                p->call_open = false;
                p->m = M_H_TEXT;
            }
            return;
        }
        tp_reset_call(p);
        h_header(p, p->pos, at);
        p->pos = at + 11;
        p->args_s = p->args_sent = p->pos;
        p->call_open = p->h_kind == H_CALL;
        if (p->h_kind == H_CALL && !p->o.hold_calls) tp_announce(p);
        p->m = M_H_BODY;
        return;
    }
    at = tp_find_mark(p, p->pos, h_body_marks, &w, &hold);
    size_t end = w >= 0 ? at : hold;
    if (p->h_kind == H_CALL) tp_emit(p, TP_ARGS, p->buf + p->pos, end - p->pos);
    else tp_emit(p, p->h_kind == H_REASONING ? TP_REASONING : TP_CONTENT, p->buf + p->pos, end - p->pos);
    p->pos = end;
    if (w < 0) return;
    tp_h_body_end(p, at);
    if (w < 3) p->pos += strlen(h_body_marks[w]);
}

