/* The KV cache: fp16, one region per (layer, slot, KV head), all allocated at start. */
#include "engine/model/forward.h"
#include <stdlib.h>
#include <string.h>

int kv_cache_init(kv_cache *kv, const model *m, int n_slots, int n_ctx) {
    memset(kv, 0, sizeof *kv);
    if (n_slots <= 0 || n_ctx <= 0) return -1;
    kv->n_slots = n_slots;
    kv->n_ctx = n_ctx;
    kv->n_layer = m->p.n_layer;
    kv->n_head_kv = m->p.n_head_kv;
    kv->head_dim = m->p.head_dim;
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

/* Offset of (layer, slot, head, pos) in k or v. */
static size_t kv_index(const kv_cache *kv, int layer, int slot, int head, int pos) {
    return ((((size_t)layer * kv->n_slots + slot) * kv->n_head_kv + head) * kv->n_ctx + pos) * kv->head_dim;
}

void kv_cache_copy(kv_cache *kv, int dst, int src, int n) {
    if (dst == src || n <= 0) return;
    size_t bytes = (size_t)n * kv->head_dim * sizeof(uint16_t);
    for (int l = 0; l < kv->n_layer; l++)
        for (int h = 0; h < kv->n_head_kv; h++) {
            memcpy(kv->k + kv_index(kv, l, dst, h, 0), kv->k + kv_index(kv, l, src, h, 0), bytes);
            memcpy(kv->v + kv_index(kv, l, dst, h, 0), kv->v + kv_index(kv, l, src, h, 0), bytes);
        }
}

uint16_t *kv_k_head(kv_cache *kv, int layer, int slot, int head, int pos) {
    return kv->k + kv_index(kv, layer, slot, head, pos);
}
uint16_t *kv_v_head(kv_cache *kv, int layer, int slot, int head, int pos) {
    return kv->v + kv_index(kv, layer, slot, head, pos);
}

void kv_rows_get(const kv_cache *kv, int layer, int slot, int pos, int n, void *k, void *v) {
    size_t hb = (size_t)kv->head_dim * sizeof(uint16_t), rb = (size_t)kv->kv_dim * sizeof(uint16_t);
    for (int h = 0; h < kv->n_head_kv; h++) {
        const uint16_t *ks = kv->k + kv_index(kv, layer, slot, h, pos), *vs = kv->v + kv_index(kv, layer, slot, h, pos);
        for (int i = 0; i < n; i++) {
            size_t at = (size_t)i * rb + (size_t)h * hb;
            memcpy((uint8_t *)k + at, ks + (size_t)i * kv->head_dim, hb);
            memcpy((uint8_t *)v + at, vs + (size_t)i * kv->head_dim, hb);
        }
    }
}

void kv_rows_put(kv_cache *kv, int layer, int slot, int pos, int n, const void *k, const void *v) {
    size_t hb = (size_t)kv->head_dim * sizeof(uint16_t), rb = (size_t)kv->kv_dim * sizeof(uint16_t);
    for (int h = 0; h < kv->n_head_kv; h++) {
        uint16_t *kd = kv->k + kv_index(kv, layer, slot, h, pos), *vd = kv->v + kv_index(kv, layer, slot, h, pos);
        for (int i = 0; i < n; i++) {
            size_t at = (size_t)i * rb + (size_t)h * hb;
            memcpy(kd + (size_t)i * kv->head_dim, (const uint8_t *)k + at, hb);
            memcpy(vd + (size_t)i * kv->head_dim, (const uint8_t *)v + at, hb);
        }
    }
}
