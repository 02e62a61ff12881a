/* The request side of tools and reasoning (see tool_request.h). */
#include "server/tool_request.h"
#include "server/reasoning.h"
#include "server/request_json.h"
#include <stdio.h>
#include <string.h>

/* OpenAI's rule for function names: 1-64 of a-z A-Z 0-9 _ - (and '.', which
 * llama-server and templates such as gpt-oss's use). */
static bool good_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("_-.", *s)))
            return false;
    return true;
}

static const cJSON *tool_function(const cJSON *tool) {
    return cJSON_GetObjectItemCaseSensitive(tool, "function");
}

static bool check_tools(const cJSON *tools, api_error *e) {
    if (!cJSON_IsArray(tools)) return api_fail(e, 400, "tools", "invalid_type", "'tools' must be a list of tool definitions");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        char p[64];
        snprintf(p, sizeof p, "tools[%d]", i);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type"), *fn = tool_function(t);
        if (!cJSON_IsObject(t)) return api_fail(e, 400, p, "invalid_type", "%s must be an object", p);
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
            return api_fail(e, 400, p, "invalid_value", "%s.type must be \"function\"", p);
        if (!cJSON_IsObject(fn)) return api_fail(e, 400, p, "invalid_type", "%s.function must be an object", p);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *desc = jf_get(fn, "description"), *params = jf_get(fn, "parameters"), *strict = jf_get(fn, "strict");
        if (!cJSON_IsString(name) || !good_name(name->valuestring))
            return api_fail(e, 400, p, "invalid_value", "%s.function.name must be 1 to 64 letters, digits, '_', '-' or '.'", p);
        if (desc && !cJSON_IsString(desc)) return api_fail(e, 400, p, "invalid_type", "%s.function.description must be a string", p);
        if (params && !cJSON_IsObject(params))
            return api_fail(e, 400, p, "invalid_type", "%s.function.parameters must be a JSON schema object", p);
        if (strict && !cJSON_IsBool(strict)) return api_fail(e, 400, p, "invalid_type", "%s.function.strict must be true or false", p);
        const cJSON *u;
        for (u = tools->child; u != t; u = u->next)
            if (!strcmp(cJSON_GetObjectItemCaseSensitive(tool_function(u), "name")->valuestring, name->valuestring))
                return api_fail(e, 400, p, "invalid_value", "%s: a second function named '%.64s'", p, name->valuestring);
        i++;
    }
    return true;
}

static bool has_tool(const cJSON *tools, const char *name) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(tool_function(t), "name")->valuestring, name)) return true;
    return false;
}

static bool parse_choice(const cJSON *body, chat_tools *t, api_error *e) {
    const cJSON *c = jf_get(body, "tool_choice");
    if (!c) return true;
    if (cJSON_IsString(c)) {
        const char *s = c->valuestring;
        if (!strcmp(s, "auto")) t->choice = TOOL_CHOICE_AUTO;
        else if (!strcmp(s, "none")) t->choice = TOOL_CHOICE_NONE;
        else if (!strcmp(s, "required")) t->choice = TOOL_CHOICE_REQUIRED;
        else return api_fail(e, 400, "tool_choice", "invalid_value", "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        return true;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type"), *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    if (!cJSON_IsObject(c) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsString(name))
        return api_fail(e, 400, "tool_choice", "invalid_value", "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    t->choice = TOOL_CHOICE_NAMED;
    t->choice_name = name->valuestring;
    return true;
}

/* chat_template_kwargs, then the top-level spellings clients use. */
static bool parse_kwargs(const cJSON *body, chat_tools *t, api_error *e) {
    const cJSON *k = jf_get(body, "chat_template_kwargs");
    if (k && !cJSON_IsObject(k)) return api_fail(e, 400, "chat_template_kwargs", "invalid_type", "'chat_template_kwargs' must be an object");
    const cJSON *think = jf_get(body, "enable_thinking"), *effort = jf_get(body, "reasoning_effort");
    if (think && !cJSON_IsBool(think)) return api_fail(e, 400, "enable_thinking", "invalid_type", "'enable_thinking' must be true or false");
    if (effort && (!cJSON_IsString(effort) || (strcmp(effort->valuestring, "low") && strcmp(effort->valuestring, "medium") &&
                                               strcmp(effort->valuestring, "high") && strcmp(effort->valuestring, "minimal"))))
        return api_fail(e, 400, "reasoning_effort", "invalid_value", "'reasoning_effort' must be minimal, low, medium or high");
    if (!k && !think && !effort) return true;
    t->kwargs = k ? cJSON_Duplicate(k, true) : cJSON_CreateObject();
    if (!t->kwargs) return api_fail(e, 500, NULL, NULL, "out of memory");
    if (think && !cJSON_GetObjectItemCaseSensitive(t->kwargs, "enable_thinking"))
        cJSON_AddItemToObject(t->kwargs, "enable_thinking", cJSON_CreateBool(cJSON_IsTrue(think)));
    if (effort && !cJSON_GetObjectItemCaseSensitive(t->kwargs, "reasoning_effort"))
        cJSON_AddStringToObject(t->kwargs, "reasoning_effort", effort->valuestring);
    return true;
}

bool chat_tools_parse(const cJSON *body, int server_reasoning, chat_tools *t, api_error *e) {
    memset(t, 0, sizeof *t);
    t->parallel = true;
    t->reasoning = server_reasoning;
    const cJSON *tools = jf_get(body, "tools");
    if (tools && !check_tools(tools, e)) return false;
    if (!parse_choice(body, t, e) || !jf_bool(body, "parallel_tool_calls", &t->parallel, e)) return false;
    const char *rf = NULL;
    if (!jf_str(body, "reasoning_format", &rf, e)) return false;
    if (rf && (t->reasoning = reasoning_format_from_name(rf)) < 0)
        return api_fail(e, 400, "reasoning_format", "invalid_value", "'reasoning_format' must be none, auto or deepseek");
    int n = tools ? cJSON_GetArraySize(tools) : 0;
    if (n == 0 && (t->choice == TOOL_CHOICE_REQUIRED || t->choice == TOOL_CHOICE_NAMED))
        return api_fail(e, 400, "tool_choice", "invalid_value", "'tool_choice' %s needs 'tools'",
                        t->choice == TOOL_CHOICE_REQUIRED ? "required" : "naming a function");
    if (t->choice == TOOL_CHOICE_NAMED && !has_tool(tools, t->choice_name))
        return api_fail(e, 400, "tool_choice", "invalid_value", "'tool_choice' names '%.64s', which is not in 'tools'", t->choice_name);
    if (n > 0 && t->choice != TOOL_CHOICE_NONE) t->tools = tools, t->n_tools = n;
    if (!parse_kwargs(body, t, e)) { chat_tools_free(t); return false; }
    return true;
}

void chat_tools_free(chat_tools *t) {
    cJSON_Delete(t->kwargs);
    t->kwargs = NULL;
}

/* ---- the history -------------------------------------------------------------------- */
static bool check_call(const cJSON *c, const char *p, api_error *e) {
    const cJSON *id = jf_get(c, "id"), *type = jf_get(c, "type"), *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name"), *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    if (!cJSON_IsObject(c)) return api_fail(e, 400, p, "invalid_type", "%s must be an object", p);
    if (id && !cJSON_IsString(id)) return api_fail(e, 400, p, "invalid_type", "%s.id must be a string", p);
    if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "function")))
        return api_fail(e, 400, p, "invalid_value", "%s.type must be \"function\"", p);
    if (!cJSON_IsObject(fn) || !cJSON_IsString(name))
        return api_fail(e, 400, p, "invalid_type", "%s.function must be {\"name\": string, \"arguments\": string}", p);
    if (args && !cJSON_IsNull(args) && !cJSON_IsString(args) && !cJSON_IsObject(args))
        return api_fail(e, 400, p, "invalid_type", "%s.function.arguments must be a string of JSON", p);
    return true;
}

bool chat_messages_check_tools(const cJSON *msgs, api_error *e) {
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char p[96];
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *calls = jf_get(m, "tool_calls"), *tcid = jf_get(m, "tool_call_id");
        if (calls) {
            snprintf(p, sizeof p, "messages[%d].tool_calls", i);
            if (!cJSON_IsString(role) || strcmp(role->valuestring, "assistant"))
                return api_fail(e, 400, p, "invalid_value", "%s: only an assistant message has tool calls", p);
            if (!cJSON_IsArray(calls)) return api_fail(e, 400, p, "invalid_type", "%s must be a list", p);
            int j = 0;
            const cJSON *c;
            cJSON_ArrayForEach(c, calls) {
                char q[128];
                snprintf(q, sizeof q, "%s[%d]", p, j++);
                if (!check_call(c, q, e)) return false;
            }
        }
        if (tcid && !cJSON_IsString(tcid)) {
            snprintf(p, sizeof p, "messages[%d].tool_call_id", i);
            return api_fail(e, 400, p, "invalid_type", "%s must be a string", p);
        }
        i++;
    }
    return true;
}

/* ---- forced calls ------------------------------------------------------------------------ */
/* {"type":"object","properties":{"name":{"const":N},"arguments":P},"required":["name","arguments"]} */
static cJSON *one_call_schema(const cJSON *tool) {
    const cJSON *fn = tool_function(tool);
    const cJSON *params = jf_get(fn, "parameters");
    cJSON *s = cJSON_CreateObject(), *props = cJSON_AddObjectToObject(s, "properties"), *req = cJSON_CreateArray();
    cJSON_AddStringToObject(s, "type", "object");
    cJSON *name = cJSON_AddObjectToObject(props, "name");
    cJSON_AddStringToObject(name, "const", cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring);
    if (params) cJSON_AddItemToObject(props, "arguments", cJSON_Duplicate(params, true));
    else cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "arguments"), "type", "object");
    cJSON_AddItemToArray(req, cJSON_CreateString("name"));
    cJSON_AddItemToArray(req, cJSON_CreateString("arguments"));
    cJSON_AddItemToObject(s, "required", req);
    cJSON_AddFalseToObject(s, "additionalProperties");
    return s;
}

cJSON *tool_call_schema(const chat_tools *t) {
    if (!t->tools || (t->choice != TOOL_CHOICE_REQUIRED && t->choice != TOOL_CHOICE_NAMED)) return NULL;
    cJSON *call;
    if (t->choice == TOOL_CHOICE_NAMED) {
        const cJSON *tool;
        cJSON_ArrayForEach(tool, t->tools)
            if (!strcmp(cJSON_GetObjectItemCaseSensitive(tool_function(tool), "name")->valuestring, t->choice_name)) break;
        call = one_call_schema(tool);
    } else if (t->n_tools == 1) {
        call = one_call_schema(t->tools->child);
    } else {
        call = cJSON_CreateObject();
        cJSON *any = cJSON_AddArrayToObject(call, "anyOf");
        const cJSON *tool;
        cJSON_ArrayForEach(tool, t->tools) cJSON_AddItemToArray(any, one_call_schema(tool));
    }
    if (!t->parallel || t->choice == TOOL_CHOICE_NAMED) return call;
    cJSON *list = cJSON_CreateObject();
    cJSON_AddStringToObject(list, "type", "array");
    cJSON_AddItemToObject(list, "items", call);
    cJSON_AddNumberToObject(list, "minItems", 1);
    return list;
}
