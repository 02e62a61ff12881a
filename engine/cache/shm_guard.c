/* The -shm SIGBUS guard (see shm_guard.h). The handler only makes system
 * calls (open, read, close, mmap) and reads /proc/self/maps itself,
 * without stdio, to find the mapping that holds the faulting address. */
#include "engine/cache/shm_guard.h"
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct sigaction previous;
static atomic_bool tripped;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int install_rc = -1;

static uintptr_t hex(const char **p) {
    uintptr_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return v;
        v = v * 16 + (uintptr_t)d;
    }
}

/* One line of /proc/self/maps: does it hold addr, and is it a -shm file? */
static bool shm_line(const char *line, uintptr_t addr, uintptr_t *lo, uintptr_t *hi) {
    const char *p = line;
    *lo = hex(&p);
    if (*p++ != '-') return false;
    *hi = hex(&p);
    if (addr < *lo || addr >= *hi) return false;
    const char *name = strchr(line, '/');
    if (!name) return false;
    size_t n = strlen(name), d = strlen(" (deleted)");
    if (n > d && !strcmp(name + n - d, " (deleted)")) n -= d;
    return n > 4 && !strncmp(name + n - 4, "-shm", 4);
}

/* The -shm mapping around addr, or false. */
static bool find_shm(uintptr_t addr, uintptr_t *lo, uintptr_t *hi) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    static char buf[8192], line[1024];   /* a fault is handled at a time: SIGBUS is blocked in the handler */
    size_t n_line = 0;
    bool found = false;
    ssize_t n;
    while (!found && (n = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n && !found; i++) {
            if (buf[i] != '\n') {
                if (n_line < sizeof line - 1) line[n_line++] = buf[i];
                continue;
            }
            line[n_line] = 0;
            n_line = 0;
            found = shm_line(line, addr, lo, hi);
        }
    }
    close(fd);
    return found;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    uintptr_t lo = 0, hi = 0;
    if (si && find_shm((uintptr_t)si->si_addr, &lo, &hi) &&
        mmap((void *)lo, hi - lo, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
        atomic_store(&tripped, true);
        return;   /* the access runs again, on zero pages */
    }
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) { previous.sa_sigaction(sig, si, uc); return; }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    signal(SIGBUS, SIG_DFL);   /* returning faults again, now with the default action */
}

static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    install_rc = sigaction(SIGBUS, &sa, &previous) ? -1 : 0;
}

int shm_guard_install(void) {
    pthread_once(&once, install);
    return install_rc;
}

bool shm_guard_tripped(void) { return atomic_load(&tripped); }
