/* The prompt cache's WAL index lives in FILE-shm, which sqlite maps: if
 * that file is truncated while the server runs, the next access to the map
 * is SIGBUS. shm_guard catches exactly that fault (an address inside a
 * mapping of a file whose name ends in -shm), puts private zero pages in
 * place of the mapping so the access completes (sqlite then finds an
 * invalid index), and raises a flag the cache checks to turn itself off.
 * Any other SIGBUS goes to the handler installed before, or kills as
 * usual. */
#ifndef HEARTH_SHM_GUARD_H
#define HEARTH_SHM_GUARD_H

#include <stdbool.h>

/* Installs the handler once per process; 0 or -1. */
int shm_guard_install(void);
/* A -shm mapping was damaged (and replaced) since the process started. */
bool shm_guard_tripped(void);

#endif
