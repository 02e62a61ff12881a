/* A per-thread scratch buffer that grows on demand and is freed when its
 * thread exits: one per kernel file that needs working memory on each pool
 * worker (kern_amx.c's expanded B tiles, kern_sme.c's transposed
 * activations). */
#ifndef HEARTH_THREAD_SCRATCH_H
#define HEARTH_THREAD_SCRATCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *buf;     /* 64-byte aligned, cap bytes */
    size_t cap;
    uint64_t tag;     /* the owner's: what buf holds; 0 after each regrowth */
} thread_scratch;

/* One per owner, static, zero-initialized: the key is made on first use. */
typedef struct {
    pthread_key_t key;
    _Atomic int state;   /* 0 not made, 1 made, -1 failed */
} thread_scratch_slot;

/* This thread's scratch of slot, with at least `bytes`; NULL when out of
 * memory (or no key could be made): the caller falls back. */
thread_scratch *thread_scratch_get(thread_scratch_slot *slot, size_t bytes);

#endif
