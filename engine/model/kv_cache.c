/* The KV cache: fp16, one region per (layer, slot, KV head), all of it one
 * page-aligned mapping made at start. A sliding-window layer keeps only a
 * ring of its last positions (kv_cache_init_window), stored twice over, so
 * any window of them is one forward run of memory and attention reads it as
 * it reads a full layer. */
#include "engine/model/kv_cache.h"
#include "engine/model/model.h"
#include "runtime/pages.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int imax(int a, int b) { return a > b ? a : b; }

int kv_cache_init_window(kv_cache *kv, const model *m, int n_slots, int n_ctx, int max_batch) {
    memset(kv, 0, sizeof *kv);
    if (n_slots <= 0 || n_ctx <= 0 || max_batch <= 0) return -1;
    kv->n_slots = n_slots;
    kv->n_ctx = n_ctx;
    kv->n_layer = m->p.n_layer;
    kv->n_head_kv = m->p.n_head_kv;
    kv->head_dim = m->p.head_dim;
    kv->kv_dim = m->p.n_head_kv * m->p.head_dim;
    kv->window = m->p.swa_window;
    kv->max_batch = INT_MAX;   /* a full cache bounds no batch: rows of many slots may pass n_ctx */
    /* A ring of R positions serves a row at p as long as p's last window
     * positions are still in it while its batch is stored: a batch adds at
     * most max_batch positions to a slot, so R = window + max_batch. Kept
     * twice (2R) so positions [p, p + R) are contiguous from p % R. */
    if (kv->window > 0 && 2 * ((int64_t)kv->window + max_batch) < n_ctx) {
        kv->ring = kv->window + max_batch;
        kv->max_batch = max_batch;
    }
    kv->lay = calloc((size_t)kv->n_layer, sizeof *kv->lay);
    kv->valid_from = calloc((size_t)n_slots, sizeof *kv->valid_from);
    if (!kv->lay || !kv->valid_from) { kv_cache_free(kv); return -1; }
    size_t off = 0;
    for (int l = 0; l < kv->n_layer; l++) {
        kv_layer *L = &kv->lay[l];
        L->local = kv->window > 0 && m->layers[l].local;
        L->ring = L->local ? kv->ring : 0;
        L->span = L->ring ? 2 * L->ring : n_ctx;
        L->off = off;
        off += (size_t)n_slots * (size_t)kv->n_head_kv * (size_t)L->span * (size_t)kv->head_dim;
    }
    kv->n_elems = off;
    size_t half = pages_round((off ? off : 1) * sizeof *kv->k);   /* v starts on a page of its own */
    uint8_t *map = pages_alloc(2 * half);
    if (!map) { kv_cache_free(kv); return -1; }
    kv->map_bytes = 2 * half;
    kv->k = (uint16_t *)map;
    kv->v = (uint16_t *)(map + half);
    return 0;
}

int kv_cache_init(kv_cache *kv, const model *m, int n_slots, int n_ctx) {
    return kv_cache_init_window(kv, m, n_slots, n_ctx, imax(n_ctx, 1));
}

void kv_cache_free(kv_cache *kv) {
    pages_free(kv->k, kv->map_bytes);
    free(kv->lay);
    free(kv->valid_from);
    kv->k = kv->v = NULL;
    kv->map_bytes = 0;
    kv->lay = NULL;
    kv->valid_from = NULL;
}

uint64_t kv_cache_bytes(const kv_cache *kv) {
    return 2ull * kv->n_elems * sizeof(uint16_t);
}

/* Offset of (layer, slot, head, pos) in k or v: a ring layer's position p
 * lives at p % R (and its twin at p % R + R). */
static size_t kv_index(const kv_cache *kv, int layer, int slot, int head, int pos) {
    const kv_layer *L = &kv->lay[layer];
    int p = L->ring ? pos % L->ring : pos;
    return L->off + (((size_t)slot * kv->n_head_kv + head) * (size_t)L->span + (size_t)p) * kv->head_dim;
}

void kv_cache_copy(kv_cache *kv, int dst, int src, int n) {
    if (dst == src || n <= 0) return;
    for (int l = 0; l < kv->n_layer; l++) {
        const kv_layer *L = &kv->lay[l];
        size_t bytes = (size_t)(L->ring ? L->span : n) * kv->head_dim * sizeof(uint16_t);
        for (int h = 0; h < kv->n_head_kv; h++) {
            size_t d = L->off + ((size_t)dst * kv->n_head_kv + h) * (size_t)L->span * kv->head_dim;
            size_t s = L->off + ((size_t)src * kv->n_head_kv + h) * (size_t)L->span * kv->head_dim;
            memcpy(kv->k + d, kv->k + s, bytes);
            memcpy(kv->v + d, kv->v + s, bytes);
        }
    }
    kv->valid_from[dst] = kv->valid_from[src];
}

uint16_t *kv_k_head(kv_cache *kv, int layer, int slot, int head, int pos) {
    return kv->k + kv_index(kv, layer, slot, head, pos);
}
uint16_t *kv_v_head(kv_cache *kv, int layer, int slot, int head, int pos) {
    return kv->v + kv_index(kv, layer, slot, head, pos);
}

void kv_mirror(kv_cache *kv, int layer, int slot, int head, int pos) {
    int R = kv->lay[layer].ring;
    if (!R) return;
    size_t at = kv_index(kv, layer, slot, head, pos), bytes = (size_t)kv->head_dim * sizeof(uint16_t);
    memcpy(kv->k + at + (size_t)R * kv->head_dim, kv->k + at, bytes);
    memcpy(kv->v + at + (size_t)R * kv->head_dim, kv->v + at, bytes);
}

void kv_note_write(kv_cache *kv, int slot, int pos) {
    if (pos < kv->valid_from[slot]) kv->valid_from[slot] = pos;
}

bool kv_can_resume(const kv_cache *kv, int slot, int n_filled, int at) {
    if (!kv->window || at <= 0) return true;
    int need = at > kv->window ? at - kv->window : 0;
    if (need < kv->valid_from[slot]) return false;
    return !kv->ring || need >= n_filled - kv->ring;
}

/* A local layer's rows more than `window` before the end of the range are
 * given as zeros: no row at or after the end reads them, and a ring may no
 * longer hold them, so a block's bytes do not depend on the cache's layout
 * or on how the prompt was cut into batches. */
void kv_rows_get(const kv_cache *kv, int layer, int slot, int pos, int n, void *k, void *v) {
    size_t hb = (size_t)kv->head_dim * sizeof(uint16_t), rb = (size_t)kv->kv_dim * sizeof(uint16_t);
    int first = kv->lay[layer].local && n > kv->window ? n - kv->window : 0;   /* rows before it: zeros */
    memset(k, 0, (size_t)first * rb);
    memset(v, 0, (size_t)first * rb);
    for (int h = 0; h < kv->n_head_kv; h++)
        for (int i = first; i < n; i++) {
            size_t at = (size_t)i * rb + (size_t)h * hb, src = kv_index(kv, layer, slot, h, pos + i);
            memcpy((uint8_t *)k + at, kv->k + src, hb);
            memcpy((uint8_t *)v + at, kv->v + src, hb);
        }
}

void kv_rows_put(kv_cache *kv, int layer, int slot, int pos, int n, const void *k, const void *v) {
    size_t hb = (size_t)kv->head_dim * sizeof(uint16_t), rb = (size_t)kv->kv_dim * sizeof(uint16_t);
    for (int h = 0; h < kv->n_head_kv; h++)
        for (int i = 0; i < n; i++) {
            size_t at = (size_t)i * rb + (size_t)h * hb, dst = kv_index(kv, layer, slot, h, pos + i);
            memcpy(kv->k + dst, (const uint8_t *)k + at, hb);
            memcpy(kv->v + dst, (const uint8_t *)v + at, hb);
            kv_mirror(kv, layer, slot, h, pos + i);
        }
    if (kv->lay[layer].local) {   /* see kv_rows_get: only the last window rows are real */
        kv_note_write(kv, slot, pos);
        if (n > kv->window && pos + n - kv->window > kv->valid_from[slot]) kv->valid_from[slot] = pos + n - kv->window;
    }
}
