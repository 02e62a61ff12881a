/* A small line editor for the terminal chat: cursor keys, history (up and
 * down), Home/End, Ctrl-A/E/K/U/W, backspace over whole UTF-8 characters.
 * On a terminal it puts stdin in raw mode only while a line is read; when
 * stdin is not a terminal it reads plain lines. No dependencies. */
#ifndef HEARTH_LINE_EDIT_H
#define HEARTH_LINE_EDIT_H

#include <stdbool.h>

typedef struct line_edit line_edit;

line_edit *line_edit_new(void);
void line_edit_free(line_edit *le);

typedef enum { LINE_OK, LINE_EOF, LINE_INTERRUPT } line_status;

/* Shows prompt and reads one line into *out (malloc'd, no newline; free it).
 * LINE_EOF: Ctrl-D on an empty line or end of input (*out NULL).
 * LINE_INTERRUPT: Ctrl-C while editing (*out NULL). */
line_status line_edit_read(line_edit *le, const char *prompt, char **out);
/* Adds a line to the history (empty lines and repeats of the last are not kept). */
void line_edit_add_history(line_edit *le, const char *line);

#endif
