/* The terminal chat's line editor (see line_edit.h). The line is a byte
 * buffer; the cursor moves over whole UTF-8 characters, and each redraw
 * writes the prompt and the line again, then puts the cursor back. */
#include "server/line_edit.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define HISTORY_MAX 200

struct line_edit {
    char *history[HISTORY_MAX];
    int n_history;
};

typedef struct {
    char *buf;
    size_t len, cap, pos;     /* pos: the cursor, a byte offset at a character start */
} line_buf;

line_edit *line_edit_new(void) { return calloc(1, sizeof(line_edit)); }

void line_edit_free(line_edit *le) {
    if (!le) return;
    for (int i = 0; i < le->n_history; i++) free(le->history[i]);
    free(le);
}

void line_edit_add_history(line_edit *le, const char *line) {
    if (!*line || (le->n_history && !strcmp(le->history[le->n_history - 1], line))) return;
    char *copy = strdup(line);
    if (!copy) return;
    if (le->n_history == HISTORY_MAX) {
        free(le->history[0]);
        memmove(le->history, le->history + 1, (HISTORY_MAX - 1) * sizeof *le->history);
        le->n_history--;
    }
    le->history[le->n_history++] = copy;
}

static bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

static size_t prev_char(const line_buf *b, size_t p) {
    while (p > 0 && is_cont((unsigned char)b->buf[--p])) {}
    return p;
}
static size_t next_char(const line_buf *b, size_t p) {
    if (p < b->len) p++;
    while (p < b->len && is_cont((unsigned char)b->buf[p])) p++;
    return p;
}
static size_t columns(const char *s, size_t n) {   /* characters, one column each */
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += !is_cont((unsigned char)s[i]);
    return c;
}

static bool reserve(line_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = (b->len + extra + 1) * 2;
    char *n = realloc(b->buf, cap);
    if (!n) return false;
    b->buf = n;
    b->cap = cap;
    return true;
}

static void set_text(line_buf *b, const char *s) {
    size_t n = strlen(s);
    b->len = b->pos = 0;
    if (!reserve(b, n)) return;
    memcpy(b->buf, s, n);
    b->len = b->pos = n;
}

static void cut(line_buf *b, size_t from, size_t to) {
    memmove(b->buf + from, b->buf + to, b->len - to);
    b->len -= to - from;
    b->pos = from;
}

static void redraw(const char *prompt, const line_buf *b) {
    char tail[32];
    size_t back = columns(b->buf + b->pos, b->len - b->pos);
    fputs("\r", stdout);
    fputs(prompt, stdout);
    fwrite(b->buf, 1, b->len, stdout);
    fputs("\x1b[K", stdout);
    if (back) {
        snprintf(tail, sizeof tail, "\x1b[%zuD", back);
        fputs(tail, stdout);
    }
    fflush(stdout);
}

static line_status read_plain(char **out) {
    line_buf b = {0};
    int c;
    while ((c = getchar()) != EOF && c != '\n') {
        if (!reserve(&b, 1)) break;
        b.buf[b.len++] = (char)c;
    }
    if (c == EOF && b.len == 0) { free(b.buf); *out = NULL; return LINE_EOF; }
    if (!reserve(&b, 0)) { free(b.buf); *out = NULL; return LINE_EOF; }
    b.buf[b.len] = 0;
    if (b.len && b.buf[b.len - 1] == '\r') b.buf[--b.len] = 0;
    *out = b.buf;
    return LINE_OK;
}

static int read_byte(void) {
    unsigned char c;
    for (;;) {
        ssize_t n = read(STDIN_FILENO, &c, 1);
        if (n == 1) return c;
        if (n < 0 && errno == EINTR) continue;
        return -1;
    }
}

line_status line_edit_read(line_edit *le, const char *prompt, char **out) {
    *out = NULL;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fputs(prompt, stdout);
        fflush(stdout);
        return read_plain(out);
    }
    struct termios saved, raw;
    if (tcgetattr(STDIN_FILENO, &saved) < 0) return read_plain(out);
    raw = saved;
    raw.c_lflag &= ~(tcflag_t)(ECHO | ICANON | ISIG | IEXTEN);
    raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw);

    line_buf b = {0};
    reserve(&b, 64);
    int hist = le->n_history;           /* le->n_history: the line being typed */
    char *typed = NULL;                 /* kept while browsing the history */
    line_status st = LINE_OK;
    redraw(prompt, &b);
    for (;;) {
        int c = read_byte();
        if (c < 0) { st = b.len ? LINE_OK : LINE_EOF; break; }
        if (c == '\r' || c == '\n') break;
        if (c == 3) { st = LINE_INTERRUPT; break; }                    /* Ctrl-C */
        if (c == 4) { if (!b.len) { st = LINE_EOF; break; } continue; } /* Ctrl-D */
        if (c == 127 || c == 8) {                                      /* backspace */
            if (b.pos) cut(&b, prev_char(&b, b.pos), b.pos);
        } else if (c == 1) { b.pos = 0;                                /* Ctrl-A */
        } else if (c == 5) { b.pos = b.len;                            /* Ctrl-E */
        } else if (c == 11) { b.len = b.pos;                           /* Ctrl-K */
        } else if (c == 21) { cut(&b, 0, b.pos);                       /* Ctrl-U */
        } else if (c == 23) {                                          /* Ctrl-W: the word before */
            size_t p = b.pos;
            while (p && b.buf[p - 1] == ' ') p--;
            while (p && b.buf[p - 1] != ' ') p--;
            cut(&b, p, b.pos);
        } else if (c == 27) {                                          /* escape sequences */
            int c1 = read_byte(), c2 = c1 >= 0 ? read_byte() : -1;
            if (c1 != '[' && c1 != 'O') continue;
            if (c2 >= '0' && c2 <= '9') {                              /* ESC [ n ~ */
                int c3 = read_byte();
                if (c3 == '~' && (c2 == '1' || c2 == '7')) b.pos = 0;
                else if (c3 == '~' && (c2 == '4' || c2 == '8')) b.pos = b.len;
                else if (c3 == '~' && c2 == '3' && b.pos < b.len) cut(&b, b.pos, next_char(&b, b.pos));
            } else if (c2 == 'D') b.pos = prev_char(&b, b.pos);
            else if (c2 == 'C') b.pos = next_char(&b, b.pos);
            else if (c2 == 'H') b.pos = 0;
            else if (c2 == 'F') b.pos = b.len;
            else if ((c2 == 'A' && hist > 0) || (c2 == 'B' && hist < le->n_history)) {
                if (hist == le->n_history) {                           /* leaving the typed line */
                    free(typed);
                    if (reserve(&b, 0)) { b.buf[b.len] = 0; typed = strdup(b.buf); }
                }
                hist += c2 == 'A' ? -1 : 1;
                set_text(&b, hist == le->n_history ? (typed ? typed : "") : le->history[hist]);
            }
        } else if (c >= 32 || c == '\t') {
            if (!reserve(&b, 1)) continue;
            memmove(b.buf + b.pos + 1, b.buf + b.pos, b.len - b.pos);
            b.buf[b.pos++] = (char)c;
            b.len++;
        }
        redraw(prompt, &b);
    }
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    fputs(st == LINE_INTERRUPT ? "^C\n" : "\n", stdout);
    fflush(stdout);
    free(typed);
    if (st != LINE_OK || !reserve(&b, 0)) { free(b.buf); return st == LINE_OK ? LINE_EOF : st; }
    b.buf[b.len] = 0;
    *out = b.buf;
    return LINE_OK;
}
