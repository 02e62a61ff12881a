/* Stop strings over a stream of text (see stop_text.h). Each push joins
 * the held text and the new text in `buf`; what can no longer be part of a
 * stop string is handed out from `buf`, the rest moves back to `held`. */
#include "engine/text/stop_text.h"
#include <stdlib.h>
#include <string.h>

int stop_text_init(stop_text *s, const char *const *stops, int n_stops) {
    memset(s, 0, sizeof *s);
    s->stops = calloc((size_t)(n_stops > 0 ? n_stops : 1), sizeof *s->stops);
    if (!s->stops) return -1;
    for (int i = 0; i < n_stops; i++) {
        if (!stops[i] || !stops[i][0]) continue;
        if (!(s->stops[s->n_stops++] = strdup(stops[i]))) { stop_text_free(s); return -1; }
    }
    return 0;
}

void stop_text_free(stop_text *s) {
    for (int i = 0; i < s->n_stops; i++) free(s->stops[i]);
    free(s->stops);
    free(s->held);
    free(s->buf);
    memset(s, 0, sizeof *s);
}

/* Length of the longest suffix of t[0..n) that is a proper prefix of a stop string. */
static size_t partial_stop_suffix(const stop_text *s, const char *t, size_t n) {
    size_t best = 0;
    for (int i = 0; i < s->n_stops; i++) {
        size_t L = strlen(s->stops[i]);
        size_t max = L - 1 < n ? L - 1 : n;
        for (size_t k = max; k > best; k--)
            if (!memcmp(t + n - k, s->stops[i], k)) { best = k; break; }
    }
    return best;
}

static int grow(char **p, size_t need) {
    char *q = realloc(*p, need ? need : 1);
    if (!q) return -1;
    *p = q;
    return 0;
}

int stop_text_push(stop_text *s, const char *text, size_t len, const char **out, size_t *out_len) {
    size_t n = s->n_held + len;
    if (n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 64;
        while (cap < n + 1) cap *= 2;
        if (grow(&s->buf, cap) || grow(&s->held, cap)) { *out = ""; *out_len = 0; return STOP_TEXT_NOMEM; }
        s->cap = cap;
    }
    memcpy(s->buf, s->held, s->n_held);
    memcpy(s->buf + s->n_held, text, len);
    *out = s->buf;

    /* the earliest complete stop string wins */
    int hit = -1;
    size_t hit_at = n;
    for (int i = 0; i < s->n_stops; i++) {
        size_t L = strlen(s->stops[i]);
        for (size_t at = 0; at + L <= n && at < hit_at; at++)
            if (!memcmp(s->buf + at, s->stops[i], L)) { hit = i; hit_at = at; break; }
    }
    if (hit >= 0) {
        *out_len = hit_at;          /* the stop string and what follows are dropped */
        s->n_held = 0;
        return hit;
    }
    size_t keep = partial_stop_suffix(s, s->buf, n);
    memcpy(s->held, s->buf + n - keep, keep);
    s->n_held = keep;
    *out_len = n - keep;
    return -1;
}

void stop_text_flush(stop_text *s, const char **out, size_t *out_len) {
    *out = s->held ? s->held : "";
    *out_len = s->n_held;
    s->n_held = 0;
}
