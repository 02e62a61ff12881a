/* Lines for stderr that never block the caller: the access log and the
 * server's notes while it serves go into a bounded buffer that a thread of
 * its own writes out. When stderr is not read (a pipe nobody drains, a
 * stopped terminal) the buffer fills and lines are dropped and counted;
 * the count is written ("N log lines dropped") once stderr moves again. */
#ifndef HEARTH_LOG_OUT_H
#define HEARTH_LOG_OUT_H

#include <stddef.h>

/* Starts the writer (before it, and after log_out_stop, lines go straight
 * to stderr). 0 or -1. */
int log_out_start(void);
/* Writes what is buffered (waiting at most about a second) and stops. */
void log_out_stop(void);
/* One line, without its newline; any thread. */
void log_out_line(const char *line, size_t len);
/* printf-style, one line. */
void log_out_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
