/* UTF-8 checks for request bodies and for generated text on its way into JSON. */
#ifndef HEARTH_UTF8_H
#define HEARTH_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Well-formed UTF-8 (RFC 3629: no overlongs, surrogates or values past U+10FFFF). */
bool utf8_valid(const char *s, size_t n);
/* Drops, in place, the bytes of each ill-formed sequence of the string (a
 * character cut by a "%.40s" precision or a full buffer); the new length. */
size_t utf8_drop_invalid(char *s);
/* A malloc'd, NUL-terminated copy with each maximal ill-formed subpart
 * (Unicode's and WHATWG's practice: "\xE2\x82" is one, "\xC0\xAF" two) and
 * each NUL byte replaced by U+FFFD, so it can go into JSON; NULL without memory. */
char *utf8_sanitize(const char *s, size_t n, size_t *out_len);

/* A cJSON string of the sanitized text; NULL without memory. */
struct cJSON;
struct cJSON *utf8_json_string(const char *s, size_t n);

#endif
