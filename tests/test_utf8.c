/* Generated text on its way into JSON (server/utf8.c): one U+FFFD per
 * maximal ill-formed subpart, the cases of Unicode's table 3-8 and the
 * WHATWG decoder, against a byte-at-a-time oracle written from the rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "server/utf8.h"

#define R "\xEF\xBF\xBD"

static void expect(const char *in, size_t n, const char *want) {
    size_t len;
    char *out = utf8_sanitize(in, n, &len);
    CHECK(out != NULL);
    if (!out) return;
    char hex[200] = "";
    for (size_t i = 0; i < n && i < 60; i++) snprintf(hex + strlen(hex), sizeof hex - strlen(hex), "%02X ", (unsigned char)in[i]);
    CHECKF(len == strlen(want) && !strcmp(out, want), "[%s] -> '%s'", hex, out);
    CHECK(utf8_valid(out, len));
    free(out);
}

int main(void) {
    expect("abc", 3, "abc");
    expect("\xC3\xA9", 2, "\xC3\xA9");
    expect("\xE2\x82\xAC", 3, "\xE2\x82\xAC");
    expect("\xF0\x9F\x98\x80", 4, "\xF0\x9F\x98\x80");
    /* a truncated sequence is one subpart, whatever its length */
    expect("\xE2\x82" "x", 3, R "x");
    expect("\xF0\x9F\x98" "x", 4, R "x");
    expect("\xF0\x9F\x98", 3, R);
    expect("\xF0\x9F", 2, R);
    /* bytes that can never start or continue here: one each */
    expect("\xC0\xAF", 2, R R);                      /* overlong lead */
    expect("\xE0\x80\xAF", 3, R R R);                /* E0 wants A0..BF next */
    expect("\xED\xA0\x80", 3, R R R);                /* a surrogate */
    expect("\xF4\x90\x80\x80", 4, R R R R);          /* past U+10FFFF */
    expect("\xF5\x80", 2, R R);
    expect("\xFF\xFE", 2, R R);
    expect("\x80\xBF", 2, R R);                      /* lone continuations */
    /* Unicode 3.9's example: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 */
    expect("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", 13, "a" R R R "b" R "c" R R "d");
    /* a lead cut by another lead, and NUL (never valid in a C string in JSON) */
    expect("\xE2\xE2\x82\xAC", 4, R "\xE2\x82\xAC");
    expect("a\0b", 3, "a" R "b");
    expect("\xE2\x82\0", 3, R R);
    return test_summary("utf8");
}
