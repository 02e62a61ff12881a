/* Page-aligned allocations (see pages.h): one anonymous private mapping each. */
#include "runtime/pages.h"
#include <sys/mman.h>
#include <unistd.h>

size_t pages_round(size_t n) {
    long pg = sysconf(_SC_PAGESIZE);
    size_t p = pg > 0 ? (size_t)pg : 4096;
    return (n + p - 1) / p * p;
}

void *pages_alloc(size_t n) {
    if (!n) return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void pages_free(void *p, size_t n) {
    if (p && n) munmap(p, n);
}
