/* The non-blocking line writer (see log_out.h): a ring of LOG_CAP bytes
 * under a mutex; the writer thread takes what is there and writes it with
 * plain blocking writes, outside the lock, so only it ever waits on stderr. */
#include "server/log_out.h"
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_CAP ((size_t)256 << 10)   /* about 3000 access lines */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv, drained;
    pthread_t thread;
    bool running, stop;
    char buf[LOG_CAP];
    size_t head, len;          /* ring: len bytes from head */
    uint64_t dropped;          /* lines, since the last note */
    bool writing;              /* the writer holds a chunk outside the lock */
} L = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .drained = PTHREAD_COND_INITIALIZER };

static void write_all(const char *p, size_t n) {
    while (n) {
        ssize_t k = write(2, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return;   /* stderr is gone: nothing to do about it */
        p += k;
        n -= (size_t)k;
    }
}

static void *writer(void *arg) {
    (void)arg;
    static char chunk[64 * 1024];
    pthread_mutex_lock(&L.mu);
    for (;;) {
        while (!L.len && !L.dropped && !L.stop) pthread_cond_wait(&L.cv, &L.mu);
        if (!L.len && !L.dropped && L.stop) break;
        size_t n = L.len < sizeof chunk ? L.len : sizeof chunk;
        for (size_t i = 0; i < n; i++) chunk[i] = L.buf[(L.head + i) % LOG_CAP];
        L.head = (L.head + n) % LOG_CAP;
        L.len -= n;
        uint64_t dropped = L.len ? 0 : L.dropped;   /* the note comes after the lines kept before it */
        if (dropped) L.dropped = 0;
        L.writing = true;
        pthread_mutex_unlock(&L.mu);
        write_all(chunk, n);
        if (dropped) {
            char note[96];
            int k = snprintf(note, sizeof note, "hearth: %llu log lines dropped (stderr was not being read)\n",
                             (unsigned long long)dropped);
            write_all(note, (size_t)k);
        }
        pthread_mutex_lock(&L.mu);
        L.writing = false;
        pthread_cond_broadcast(&L.drained);
    }
    pthread_mutex_unlock(&L.mu);
    return NULL;
}

int log_out_start(void) {
    pthread_mutex_lock(&L.mu);
    L.stop = false;
    L.head = L.len = 0;
    L.dropped = 0;
    int rc = L.running ? 0 : pthread_create(&L.thread, NULL, writer, NULL);
    if (!rc) L.running = true;
    pthread_mutex_unlock(&L.mu);
    return rc ? -1 : 0;
}

void log_out_stop(void) {
    pthread_mutex_lock(&L.mu);
    if (!L.running) { pthread_mutex_unlock(&L.mu); return; }
    /* a second at most for what is buffered: a stderr nobody reads must not hold the exit */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    while ((L.len || L.writing) && pthread_cond_timedwait(&L.drained, &L.mu, &until) == 0) {}
    bool done = !L.len && !L.writing;
    L.stop = true;
    L.len = 0;
    L.dropped = 0;
    pthread_cond_signal(&L.cv);
    L.running = false;
    pthread_mutex_unlock(&L.mu);
    if (done) pthread_join(L.thread, NULL);
    else pthread_detach(L.thread);   /* still blocked in write(): let it be */
}

void log_out_line(const char *line, size_t len) {
    pthread_mutex_lock(&L.mu);
    if (!L.running) {
        pthread_mutex_unlock(&L.mu);
        fprintf(stderr, "%.*s\n", (int)len, line);
        return;
    }
    if (L.len + len + 1 > LOG_CAP) {
        L.dropped++;
    } else {
        size_t tail = (L.head + L.len) % LOG_CAP;
        for (size_t i = 0; i < len; i++) L.buf[(tail + i) % LOG_CAP] = line[i];
        L.buf[(tail + len) % LOG_CAP] = '\n';
        L.len += len + 1;
        pthread_cond_signal(&L.cv);
    }
    pthread_mutex_unlock(&L.mu);
}

void log_out_printf(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    log_out_line(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}
