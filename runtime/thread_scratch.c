/* Per-thread scratch buffers (see thread_scratch.h). */
#include "runtime/thread_scratch.h"
#include <stdlib.h>

static pthread_mutex_t make_mu = PTHREAD_MUTEX_INITIALIZER;

static void scratch_free(void *p) {
    thread_scratch *s = p;
    free(s->buf);
    free(s);
}

static int slot_ready(thread_scratch_slot *slot) {
    int st = atomic_load_explicit(&slot->state, memory_order_acquire);
    if (st) return st;
    pthread_mutex_lock(&make_mu);
    st = atomic_load_explicit(&slot->state, memory_order_relaxed);
    if (!st) {
        st = pthread_key_create(&slot->key, scratch_free) == 0 ? 1 : -1;
        atomic_store_explicit(&slot->state, st, memory_order_release);
    }
    pthread_mutex_unlock(&make_mu);
    return st;
}

thread_scratch *thread_scratch_get(thread_scratch_slot *slot, size_t bytes) {
    if (slot_ready(slot) < 0) return NULL;
    thread_scratch *s = pthread_getspecific(slot->key);
    if (!s) {
        if (!(s = calloc(1, sizeof *s))) return NULL;
        if (pthread_setspecific(slot->key, s) != 0) { free(s); return NULL; }
    }
    if (s->cap < bytes) {
        free(s->buf);
        size_t cap = (bytes + 4095) & ~(size_t)4095;
        s->buf = aligned_alloc(64, cap);
        s->cap = s->buf ? cap : 0;
        s->tag = 0;
    }
    return s->buf ? s : NULL;
}
