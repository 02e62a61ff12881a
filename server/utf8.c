/* UTF-8 checks (see utf8.h). */
#include "server/utf8.h"
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

/* The sequence at s[0..n): true and its length if well-formed; otherwise
 * false and the length of its maximal ill-formed subpart (Unicode 3.9, the
 * WHATWG decoder): the longest prefix that could still have begun a
 * well-formed sequence, at least one byte. */
static bool scan(const unsigned char *s, size_t n, size_t *len) {
    unsigned char c = s[0];
    *len = 1;
    if (c < 0x80) return true;
    size_t want;
    unsigned char lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) want = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        want = 3;
        if (c == 0xE0) lo = 0xA0;         /* overlong */
        if (c == 0xED) hi = 0x9F;         /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        want = 4;
        if (c == 0xF0) lo = 0x90;         /* overlong */
        if (c == 0xF4) hi = 0x8F;         /* past U+10FFFF */
    } else return false;
    for (size_t i = 1; i < want; i++) {
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (i >= n || s[i] < l || s[i] > h) return false;
        *len = i + 1;
    }
    return true;
}

static size_t seq_len(const unsigned char *s, size_t n) {
    size_t k;
    return scan(s, n, &k) ? k : 0;
}

bool utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t k = seq_len(p + i, n - i);
        if (!k) return false;
        i += k;
    }
    return true;
}

size_t utf8_drop_invalid(char *s) {
    size_t n = strlen(s), i = 0, o = 0;
    while (i < n) {
        size_t k = seq_len((const unsigned char *)s + i, n - i);
        if (!k) { i++; continue; }
        memmove(s + o, s + i, k);
        o += k;
        i += k;
    }
    s[o] = 0;
    return o;
}

char *utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    const unsigned char *p = (const unsigned char *)s;
    char *out = malloc(n * 3 + 1);   /* each bad byte may become 3 */
    if (!out) return NULL;
    size_t i = 0, o = 0;
    while (i < n) {
        size_t k;
        bool ok = scan(p + i, n - i, &k) && p[i];
        if (ok) {
            memcpy(out + o, p + i, k);
            o += k;
        } else {   /* one U+FFFD per maximal ill-formed subpart, or per NUL */
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
        }
        i += k;
    }
    out[o] = 0;
    if (out_len) *out_len = o;
    return out;
}

cJSON *utf8_json_string(const char *s, size_t n) {
    char *t = utf8_sanitize(s, n, NULL);
    if (!t) return NULL;
    cJSON *j = cJSON_CreateString(t);
    free(t);
    return j;
}
