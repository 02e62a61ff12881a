/* The one thread pool. The caller of pool_run is worker 0; n-1 threads wait
 * for jobs, spinning a few microseconds before they sleep on a condvar.
 *
 * A job is published through one 64-bit atomic `claim`: its generation, its
 * number of blocks and the next block to hand out. A worker takes a block
 * with a compare-and-swap on that word, so the test "is there a block left
 * in this job" reads one snapshot: a worker that wakes late (after the job is
 * over, or while the caller is already writing the next one) can never take
 * a block that does not exist. The job's other fields are read before the
 * CAS; a CAS that succeeds proves the job was still running, so they were
 * the job's own. The caller waits until `done` reaches the number of
 * blocks, not for every worker to wake: a sleeping worker never delays a
 * short job. */
#include "runtime/pool.h"
#include <assert.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#if defined(__linux__)
#include <sched.h>
#endif

/* How long an idle thread spins before it sleeps. Long enough to bridge the
 * short serial steps between two matmuls of a forward pass (a futex wake in
 * a VM costs tens of microseconds), short enough to cost nothing when idle. */
#define POOL_SPIN_NS 50000

struct hpool {
    int n_threads;
    pthread_t *threads;

    /* The current job. Written by the caller before it publishes a new
     * generation in `claim`; read by workers between their load of `claim`
     * and their compare-and-swap, so they are atomics (relaxed). */
    _Atomic(pool_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n, grain;

    _Atomic uint64_t claim;   /* generation << 40 | blocks << 20 | next block */
    _Atomic int64_t done;     /* blocks finished in this generation */
    _Atomic bool quit;

    pthread_mutex_t callers;  /* several threads may run jobs (engines sharing the pool): one at a time */
    pthread_mutex_t mu;
    pthread_cond_t wake;      /* workers sleep here for a new generation */
    pthread_cond_t finished;  /* the caller sleeps here for `done` */
    _Atomic int sleepers;     /* workers inside (or about to enter) wake */
    _Atomic bool caller_sleeping;
};

typedef struct { hpool *p; int id; } worker_arg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define BLOCK_BITS 20
#define MAX_BLOCKS ((1 << BLOCK_BITS) - 1)
static inline uint32_t gen_of(uint64_t c) { return (uint32_t)(c >> (2 * BLOCK_BITS)); }
static inline int64_t blocks_of(uint64_t c) { return (int64_t)((c >> BLOCK_BITS) & MAX_BLOCKS); }
static inline int64_t next_of(uint64_t c) { return (int64_t)(c & MAX_BLOCKS); }
static inline uint64_t make_claim(uint32_t gen, int64_t nb) {
    return (uint64_t)(gen & 0xffffff) << (2 * BLOCK_BITS) | (uint64_t)nb << BLOCK_BITS;
}

/* Claim and run blocks of generation `gen` until none is left. */
/* Set while this thread runs a block: pool_run must not be called from one
 * (a documented precondition; the pool has one job at a time). */
static _Thread_local bool in_block;

static void run_blocks(hpool *p, uint32_t gen, int worker) {
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        int64_t nb = blocks_of(c), b = next_of(c);
        if (gen_of(c) != gen || b >= nb) return;
        pool_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        int64_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
        int64_t grain = atomic_load_explicit(&p->grain, memory_order_relaxed);
        /* On failure c is reloaded; the fields above are read again. */
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1,
                                                   memory_order_acquire, memory_order_acquire))
            continue;
        int64_t begin = b * grain;
        int64_t end = begin + grain < n ? begin + grain : n;
        in_block = true;
        fn(ctx, begin, end, worker);
        in_block = false;
        int64_t d = atomic_fetch_add(&p->done, 1) + 1;   /* seq_cst: pairs with caller_sleeping */
        if (d == nb && worker != 0 && atomic_load(&p->caller_sleeping)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->finished);
            pthread_mutex_unlock(&p->mu);
        }
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    hpool *p = ((worker_arg *)arg)->p;
    int id = ((worker_arg *)arg)->id;
    free(arg);
    uint32_t seen = gen_of(atomic_load(&p->claim));
    for (;;) {
        /* Spin for a new generation, then sleep. */
        uint64_t t0 = now_ns();
        for (int i = 0;; i++) {
            if (gen_of(atomic_load_explicit(&p->claim, memory_order_acquire)) != seen ||
                atomic_load_explicit(&p->quit, memory_order_relaxed))
                break;
            cpu_relax();
            if ((i & 63) == 63 && now_ns() - t0 > POOL_SPIN_NS) {
                pthread_mutex_lock(&p->mu);
                /* sleepers is raised before the last look at claim; the caller
                 * raises claim before it looks at sleepers (both seq_cst), so
                 * one of the two sees the other and no wake-up is lost. */
                atomic_fetch_add(&p->sleepers, 1);
                while (gen_of(atomic_load(&p->claim)) == seen && !atomic_load(&p->quit))
                    pthread_cond_wait(&p->wake, &p->mu);
                atomic_fetch_sub(&p->sleepers, 1);
                pthread_mutex_unlock(&p->mu);
                break;
            }
        }
        if (atomic_load(&p->quit)) return NULL;
        seen = gen_of(atomic_load_explicit(&p->claim, memory_order_acquire));
        run_blocks(p, seen, id);
    }
}

hpool *pool_create(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    hpool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->callers, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->finished, NULL);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads) { pool_destroy(p); return NULL; }
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (a) { a->p = p; a->id = i; }
        if (!a || pthread_create(&p->threads[i - 1], NULL, worker_main, a) != 0) {
            free(a);
            p->n_threads = i;   /* destroy joins only the threads that exist */
            pool_destroy(p);
            return NULL;
        }
    }
    return p;
}

void pool_destroy(hpool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i - 1], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->finished);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->callers);
    free(p->threads);
    free(p);
}

int pool_threads(const hpool *p) { return p ? p->n_threads : 1; }

void pool_run(hpool *p, pool_fn fn, void *ctx, int64_t n, int64_t grain) {
    assert(!in_block);   /* not reentered from inside a job */
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t nb = (n + grain - 1) / grain;
    if (!p || p->n_threads == 1 || nb == 1) {
        for (int64_t b = 0; b < nb; b++)
            fn(ctx, b * grain, b * grain + grain < n ? b * grain + grain : n, 0);
        return;
    }
    pthread_mutex_lock(&p->callers);
    if (nb > MAX_BLOCKS) {   /* the block count must fit its field of claim */
        grain = (n + MAX_BLOCKS - 1) / MAX_BLOCKS;
        nb = (n + grain - 1) / grain;
    }
    /* Every block of the previous job is done, so no worker reads these now. */
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    atomic_store_explicit(&p->grain, grain, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint32_t gen = (gen_of(atomic_load(&p->claim)) + 1) & 0xffffff;
    atomic_store(&p->claim, make_claim(gen, nb));   /* seq_cst: publishes the job */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }

    run_blocks(p, gen, 0);

    /* Wait for blocks other workers still run: spin, then sleep. */
    uint64_t t0 = now_ns();
    for (int i = 0; atomic_load_explicit(&p->done, memory_order_acquire) < nb; i++) {
        cpu_relax();
        if ((i & 63) == 63 && now_ns() - t0 > POOL_SPIN_NS) {
            pthread_mutex_lock(&p->mu);
            atomic_store(&p->caller_sleeping, true);
            while (atomic_load(&p->done) < nb) pthread_cond_wait(&p->finished, &p->mu);
            atomic_store(&p->caller_sleeping, false);
            pthread_mutex_unlock(&p->mu);
            break;
        }
    }
    pthread_mutex_unlock(&p->callers);
}

/* ---- default thread count: physical cores -------------------------------- */

#if defined(__linux__)
static int read_int_file(const char *path, int *out) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fscanf(f, "%d", out) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* Unique (package, core) pairs among the CPUs this process may run on. */
static int linux_physical_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    enum { MAXC = CPU_SETSIZE };
    static long ids[MAXC];
    int n_ids = 0;
    for (int cpu = 0; cpu < MAXC; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        char path[128];
        int core, pkg;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        if (read_int_file(path, &core) != 0) return -1;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        if (read_int_file(path, &pkg) != 0) pkg = 0;
        long id = (long)pkg * 1000000L + core;
        bool dup = false;
        for (int i = 0; i < n_ids && !dup; i++) dup = ids[i] == id;
        if (!dup) ids[n_ids++] = id;
    }
    return n_ids > 0 ? n_ids : -1;
}

/* Fallback: unique (physical id, core id) pairs in /proc/cpuinfo. */
static int cpuinfo_physical_cores(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    static long ids[4096];
    int n_ids = 0, pkg = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        int v;
        if (sscanf(line, "physical id : %d", &v) == 1) pkg = v;
        else if (sscanf(line, "core id : %d", &v) == 1) {
            long id = (long)pkg * 1000000L + v;
            bool dup = false;
            for (int i = 0; i < n_ids && !dup; i++) dup = ids[i] == id;
            if (!dup && n_ids < 4096) ids[n_ids++] = id;
        }
    }
    fclose(f);
    return n_ids > 0 ? n_ids : -1;
}
#endif

int pool_default_threads(void) {
    int n = -1;
#if defined(__APPLE__)
    int v = 0;
    size_t len = sizeof v;
    if (sysctlbyname("hw.perflevel0.physicalcpu", &v, &len, NULL, 0) == 0 && v > 0) n = v;
    else if (sysctlbyname("hw.physicalcpu", &v, &len, NULL, 0) == 0 && v > 0) n = v;
#elif defined(__linux__)
    n = linux_physical_cores();
    if (n < 1) n = cpuinfo_physical_cores();
#endif
    if (n < 1) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    return n;
}
