/* The one thread pool for all compute. The calling thread (the engine
 * thread) takes part as worker 0; workers spin briefly, then sleep. Work is
 * cut into blocks handed out dynamically, so no worker is left with a tail. */
#ifndef HEARTH_POOL_H
#define HEARTH_POOL_H

#include <stdint.h>

typedef struct hpool hpool;

/* Runs on some worker for items [begin, end). */
typedef void (*pool_fn)(void *ctx, int64_t begin, int64_t end, int worker);

hpool *pool_create(int n_threads);     /* n_threads >= 1, includes the caller */
void pool_destroy(hpool *p);
int pool_threads(const hpool *p);
/* Split [0, n) into blocks of `grain` items (the last may be shorter) and
 * run them on all workers; returns when every block is done. p may be NULL
 * (runs inline). Callers on different threads take turns (engines may
 * share one pool); a job must not call pool_run on the same pool (not
 * reentrant). */
void pool_run(hpool *p, pool_fn fn, void *ctx, int64_t n, int64_t grain);
/* Physical performance cores of this machine (default thread count). */
int pool_default_threads(void);

#endif
