/* The thread pool: every item runs exactly once, for many (n, grain,
 * threads) combinations; blocks respect the grain; every worker id is in
 * range; thousands of back-to-back runs (the workers spinning) and runs after
 * the workers fell asleep; destroy while idle; a NULL pool runs inline.
 * A planted control: a deliberately broken "pool" that skips the last block
 * must be caught by the same check. */
#include "tests/test.h"
#include "runtime/pool.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define MAX_ITEMS 5000

typedef struct {
    _Atomic int count[MAX_ITEMS];
    _Atomic int bad_block;      /* a block longer than the grain or misaligned */
    _Atomic int bad_worker;
    int64_t grain;
    int threads;
    int64_t span;               /* count[0, span) was cleared by reset() */
} job;

static void count_items(void *ctx, int64_t begin, int64_t end, int worker) {
    job *j = ctx;
    if (begin % j->grain != 0 || end - begin > j->grain || end <= begin) atomic_fetch_add(&j->bad_block, 1);
    if (worker < 0 || worker >= j->threads) atomic_fetch_add(&j->bad_worker, 1);
    for (int64_t i = begin; i < end; i++) atomic_fetch_add(&j->count[i], 1);
}

/* Each item exactly once, none past n; returns the number of wrong counts. */
static int wrong_items(job *j, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += atomic_load(&j->count[i]) != 1;
    for (int64_t i = n; i < j->span; i++) bad += atomic_load(&j->count[i]) != 0;
    return bad;
}

/* Clears the counts of the items a run of up to n items (and a few more)
 * can touch: clearing all MAX_ITEMS every run is slow under emulation. */
static void reset_n(job *j, int64_t grain, int threads, int64_t n) {
    j->span = n + 8 < MAX_ITEMS ? n + 8 : MAX_ITEMS;
    for (int64_t i = 0; i < j->span; i++) atomic_store(&j->count[i], 0);
    atomic_store(&j->bad_block, 0);
    atomic_store(&j->bad_worker, 0);
    j->grain = grain < 1 ? 1 : grain;
    j->threads = threads;
}

static void reset(job *j, int64_t grain, int threads) { reset_n(j, grain, threads, MAX_ITEMS); }

/* The planted control: runs every block but the last. */
static void broken_run(pool_fn fn, void *ctx, int64_t n, int64_t grain) {
    for (int64_t b = 0; (b + 1) * grain < n; b++) fn(ctx, b * grain, (b + 1) * grain, 0);
}

static void sleep_ms(int ms) {
    struct timespec ts = { 0, ms * 1000000L };
    nanosleep(&ts, NULL);
}

static job J;

int main(void) {
    static const int64_t ns[] = { 1, 2, 3, 7, 31, 64, 100, 1000, 4999 };
    static const int64_t grains[] = { 1, 2, 3, 8, 64, 1000, 100000 };
    for (int threads = 1; threads <= 4; threads++) {
        hpool *p = pool_create(threads);
        CHECK(p != NULL);
        if (!p) continue;
        CHECK(pool_threads(p) == threads);
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++) {
                reset(&J, grains[g], threads);
                pool_run(p, count_items, &J, ns[a], grains[g]);
                CHECKF(wrong_items(&J, ns[a]) == 0, "threads %d n %lld grain %lld", threads,
                       (long long)ns[a], (long long)grains[g]);
                CHECK(atomic_load(&J.bad_block) == 0);
                CHECK(atomic_load(&J.bad_worker) == 0);
            }
        /* n = 0 runs nothing. */
        reset(&J, 1, threads);
        pool_run(p, count_items, &J, 0, 1);
        CHECK(wrong_items(&J, 0) == 0);

        /* Many back-to-back runs while the workers spin (reentry). */
        int fails = 0;
        for (int r = 0; r < 3000; r++) {
            int64_t n = 1 + r % 97, grain = 1 + r % 5;
            reset_n(&J, grain, threads, 100);
            pool_run(p, count_items, &J, n, grain);
            fails += wrong_items(&J, n) != 0 || atomic_load(&J.bad_block) || atomic_load(&J.bad_worker);
        }
        CHECKF(fails == 0, "threads %d: %d of 3000 back-to-back runs wrong", threads, fails);

        /* Alternate two different jobs back to back: a worker still finishing
         * one must never run (or count) a block against the next. */
        static job JB;
        fails = 0;
        for (int r = 0; r < 5000; r++) {
            int64_t na = 1 + r % 7, nbig = 40 + r % 50;
            reset_n(&J, 1, threads, 10);
            pool_run(p, count_items, &J, na, 1);
            fails += wrong_items(&J, na) != 0 || atomic_load(&J.bad_block);
            reset_n(&JB, 1, threads, 100);
            pool_run(p, count_items, &JB, nbig, 1);
            fails += wrong_items(&JB, nbig) != 0 || atomic_load(&JB.bad_block);
        }
        CHECKF(fails == 0, "threads %d: %d of 10000 alternating runs wrong", threads, fails);

        /* Runs after the workers went to sleep. */
        fails = 0;
        for (int r = 0; r < 5; r++) {
            sleep_ms(3);
            reset(&J, 3, threads);
            pool_run(p, count_items, &J, 500, 3);
            fails += wrong_items(&J, 500) != 0;
        }
        CHECKF(fails == 0, "threads %d: %d runs after sleep wrong", threads, fails);

        sleep_ms(2);
        pool_destroy(p);   /* while idle (asleep) */
    }

    /* Destroy right after a run (workers still spinning), and right after create. */
    for (int r = 0; r < 20; r++) {
        hpool *p = pool_create(3);
        CHECK(p != NULL);
        if (!p) continue;
        if (r & 1) {
            reset(&J, 1, 3);
            pool_run(p, count_items, &J, 10, 1);
            CHECK(wrong_items(&J, 10) == 0);
        }
        pool_destroy(p);
    }

    /* A NULL pool runs inline as worker 0. */
    reset(&J, 4, 1);
    pool_run(NULL, count_items, &J, 37, 4);
    CHECK(wrong_items(&J, 37) == 0);
    CHECK(atomic_load(&J.bad_block) == 0);
    CHECK(pool_threads(NULL) == 1);

    /* The planted control must fail the same check. */
    reset(&J, 4, 1);
    broken_run(count_items, &J, 37, 4);
    CHECK(wrong_items(&J, 37) != 0);

    int def = pool_default_threads();
    CHECK(def >= 1 && def <= 4096);
    printf("pool_default_threads: %d\n", def);
    return test_summary("pool");
}
