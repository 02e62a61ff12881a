/* JSON Schema `pattern` -> a GBNF expression over the JSON text of a string's
 * contents (between its quotes), for the schema compiler (json_schema.c).
 *
 * The ECMAScript subset schemas use: literals, `.`, classes `[...]` and
 * `[^...]` with ranges, the escapes \d \D \w \W \s \S \t \n \r \f \v \0
 * \xHH \uHHHH \u{H...} \cX and escaped punctuation, quantifiers * + ? {n}
 * {n,} {n,m} (lazy forms too: the language is the same), groups (...),
 * (?:...) and (?<name>...), alternation, and ^ / $ at the start / end of a
 * top-level alternative. A pattern is a search, as JSON Schema says: an
 * alternative without ^ may be preceded by any text, one without $ followed
 * by any. Characters that JSON must escape (" \ and controls) are matched in
 * their escaped spelling (\" \\ \n ... \u00XX); other characters only as
 * themselves, never as \u escapes (refusing text is safe, allowing an
 * invalid one is not). Backreferences, lookaround, \b \B and anchors
 * elsewhere are errors. */
#ifndef HEARTH_JSON_REGEX_H
#define HEARTH_JSON_REGEX_H

#include <stddef.h>

#define JSON_REGEX_MAX_LEN 4096   /* bytes of pattern */

/* The expression (malloc'd) for pattern (NUL-terminated UTF-8); any_char is
 * the GBNF rule name of one character of JSON string text (for the
 * unanchored ends). NULL with a message in err. */
char *json_regex_to_gbnf(const char *pattern, const char *any_char, char *err, size_t errlen);

#endif
