/* A small JSON Schema validator for the tests of constrained output: the
 * keywords the schema compiler enforces (type, enum, const, properties,
 * required, additionalProperties, items, prefixItems, minItems, maxItems,
 * minLength, maxLength, pattern (through PCRE2, the compiler's patterns
 * being ones PCRE2 reads as ECMAScript does), the formats date, time,
 * date-time and uuid, anyOf, oneOf, allOf, local $ref). Written
 * independently of the compiler, from the JSON Schema text, so the two can
 * check each other. */
#ifndef HEARTH_TEST_JSON_CHECK_H
#define HEARTH_TEST_JSON_CHECK_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* A search, as JSON Schema's pattern is; false when it does not compile. */
static bool jc_pattern(const char *re, const char *x) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
    if (!c) return false;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(c, NULL);
    int rc = md ? pcre2_match(c, (PCRE2_SPTR)x, strlen(x), 0, 0, md, NULL) : -1;
    pcre2_match_data_free(md);
    pcre2_code_free(c);
    return rc >= 0;
}

static const cJSON *jc_ref(const cJSON *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const cJSON *cur = root;
    for (const char *p = ref + 1; *p == '/';) {
        p++;
        char key[256];
        size_t k = 0;
        for (; *p && *p != '/'; p++) {
            char c = *p;
            if (c == '~' && (p[1] == '0' || p[1] == '1')) { c = p[1] == '0' ? '~' : '/'; p++; }
            if (k < sizeof key - 1) key[k++] = c;
        }
        key[k] = 0;
        cur = cJSON_GetObjectItemCaseSensitive(cur, key);
        if (!cur) return NULL;
    }
    return cur;
}

static size_t jc_codepoints(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool jc_digits(const char *s, int n) {
    for (int i = 0; i < n; i++) if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

static bool jc_date(const char *s) {
    if (strlen(s) < 10 || !jc_digits(s, 4) || s[4] != '-' || !jc_digits(s + 5, 2) || s[7] != '-' || !jc_digits(s + 8, 2)) return false;
    int mo = atoi(s + 5), d = atoi(s + 8);
    return mo >= 1 && mo <= 12 && d >= 1 && d <= 31;
}

static bool jc_time(const char *s) {
    if (!jc_digits(s, 2) || s[2] != ':' || !jc_digits(s + 3, 2) || s[5] != ':' || !jc_digits(s + 6, 2)) return false;
    if (atoi(s) > 23 || atoi(s + 3) > 59 || atoi(s + 6) > 59) return false;
    const char *p = s + 8;
    if (*p == '.') { if (!jc_digits(p + 1, 3)) return false; p += 4; }
    if (!strcmp(p, "Z")) return true;
    return (*p == '+' || *p == '-') && jc_digits(p + 1, 2) && p[3] == ':' && jc_digits(p + 4, 2) && !p[6] &&
           atoi(p + 1) <= 23 && atoi(p + 4) <= 59;
}

static bool jc_uuid(const char *s) {
    if (strlen(s) != 36) return false;
    for (int i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        char c = s[i];
        if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
    }
    return true;
}

static bool jc_type(const cJSON *v, const char *t) {
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    return false;
}

static bool json_check(const cJSON *v, const cJSON *s, const cJSON *root) {
    if (cJSON_IsTrue(s)) return true;
    if (!cJSON_IsObject(s)) return false;
    const cJSON *k;
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "$ref"))) {
        const cJSON *t = jc_ref(root, k->valuestring);
        if (!t || !json_check(v, t, root)) return false;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "type"))) {
        bool any = false;
        if (cJSON_IsString(k)) any = jc_type(v, k->valuestring);
        const cJSON *it;
        if (cJSON_IsArray(k)) cJSON_ArrayForEach(it, k) any = any || jc_type(v, it->valuestring);
        if (!any) return false;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "const")) && !cJSON_Compare(v, k, true)) return false;
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        bool any = false;
        const cJSON *it;
        cJSON_ArrayForEach(it, k) any = any || cJSON_Compare(v, it, true);
        if (!any) return false;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "anyOf")) || (k = cJSON_GetObjectItemCaseSensitive(s, "oneOf"))) {
        bool any = false;
        const cJSON *it;
        cJSON_ArrayForEach(it, k) any = any || json_check(v, it, root);
        if (!any) return false;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "allOf"))) {
        const cJSON *it;
        cJSON_ArrayForEach(it, k) if (!json_check(v, it, root)) return false;
    }
    if (cJSON_IsString(v)) {
        size_t n = jc_codepoints(v->valuestring);
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "minLength")) && n < (size_t)k->valuedouble) return false;
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "maxLength")) && n > (size_t)k->valuedouble) return false;
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "pattern")) && cJSON_IsString(k) && !jc_pattern(k->valuestring, v->valuestring))
            return false;
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "format")) && cJSON_IsString(k)) {
            const char *f = k->valuestring, *x = v->valuestring;
            if (!strcmp(f, "date") && (strlen(x) != 10 || !jc_date(x))) return false;
            if (!strcmp(f, "time") && !jc_time(x)) return false;
            if (!strcmp(f, "date-time") && (!jc_date(x) || x[10] != 'T' || !jc_time(x + 11))) return false;
            if (!strcmp(f, "uuid") && !jc_uuid(x)) return false;
        }
    }
    if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v);
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "minItems")) && n < k->valuedouble) return false;
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "maxItems")) && n > k->valuedouble) return false;
        const cJSON *pre = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, v) {
            const cJSON *sub = pre && i < cJSON_GetArraySize(pre) ? cJSON_GetArrayItem(pre, i) : (pre ? NULL : items);
            if (pre && i >= cJSON_GetArraySize(pre) && items) sub = items;
            if (sub && !json_check(it, sub, root)) return false;
            i++;
        }
    }
    if (cJSON_IsObject(v)) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(s, "required"))
            if (!cJSON_GetObjectItemCaseSensitive(v, it->valuestring)) return false;
        cJSON_ArrayForEach(it, v) {
            const cJSON *p = props ? cJSON_GetObjectItemCaseSensitive(props, it->string) : NULL;
            if (p) { if (!json_check(it, p, root)) return false; }
            else if (cJSON_IsFalse(add)) return false;
            else if (cJSON_IsObject(add) && !json_check(it, add, root)) return false;
        }
    }
    return true;
}

#endif
