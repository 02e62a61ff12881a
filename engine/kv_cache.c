/* The KV cache: fp16, one region per (layer, slot), all allocated at start. */
#include "forward.h"
#include <stdlib.h>
#include <string.h>

int kv_cache_init(kv_cache *kv, const model *m, int n_slots, int n_ctx) {
    memset(kv, 0, sizeof *kv);
    if (n_slots <= 0 || n_ctx <= 0) return -1;
    kv->n_slots = n_slots;
    kv->n_ctx = n_ctx;
    kv->n_layer = m->p.n_layer;
    kv->kv_dim = m->p.n_head_kv * m->p.head_dim;
    size_t n = (size_t)kv->n_layer * (size_t)n_slots * (size_t)n_ctx * (size_t)kv->kv_dim;
    kv->k = calloc(n, sizeof *kv->k);
    kv->v = calloc(n, sizeof *kv->v);
    if (!kv->k || !kv->v) { kv_cache_free(kv); return -1; }
    return 0;
}

void kv_cache_free(kv_cache *kv) {
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

uint64_t kv_cache_bytes(const kv_cache *kv) {
    return 2ull * kv->n_layer * kv->n_slots * kv->n_ctx * kv->kv_dim * sizeof(uint16_t);
}

/* Offset of (layer, slot, pos) in k or v. */
static size_t kv_index(const kv_cache *kv, int layer, int slot, int pos) {
    return (((size_t)layer * kv->n_slots + slot) * kv->n_ctx + pos) * kv->kv_dim;
}

void kv_cache_copy(kv_cache *kv, int dst, int src, int n) {
    if (dst == src || n <= 0) return;
    for (int l = 0; l < kv->n_layer; l++) {
        size_t bytes = (size_t)n * kv->kv_dim * sizeof(uint16_t);
        memcpy(kv->k + kv_index(kv, l, dst, 0), kv->k + kv_index(kv, l, src, 0), bytes);
        memcpy(kv->v + kv_index(kv, l, dst, 0), kv->v + kv_index(kv, l, src, 0), bytes);
    }
}

uint16_t *kv_k_at(kv_cache *kv, int layer, int slot, int pos) { return kv->k + kv_index(kv, layer, slot, pos); }
uint16_t *kv_v_at(kv_cache *kv, int layer, int slot, int pos) { return kv->v + kv_index(kv, layer, slot, pos); }
