/* The KV cache: fp16, per slot and layer, all of it one page-aligned
 * allocation made at start (a device on unified memory can wrap it). */
#ifndef HEARTH_KV_CACHE_H
#define HEARTH_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

struct model;

/* Per-slot, per-layer KV cache, fp16. n_ctx is per slot. Each KV head keeps
 * its positions contiguous ([layer][slot][kv_head][pos][head_dim]), so
 * attention, which reads one KV head over every position, streams forward
 * instead of taking head_dim values out of every kv_dim-wide row.
 * A sliding-window (local) layer needs only its last `window` positions: with
 * kv_cache_init_window it keeps a ring of R = window + max_batch of them,
 * stored twice (position p at p % R and p % R + R), so the window of any row
 * is one contiguous run from kv_k_head(.., start) as on a full layer. */
typedef struct kv_layer {
    size_t off;               /* of the layer's region in k and v (fp16 values) */
    int span;                 /* positions stored per (slot, KV head): n_ctx, or 2R for a ring */
    int ring;                 /* R, or 0: every position kept */
    bool local;               /* a sliding-window layer */
} kv_layer;

typedef struct kv_cache {
    int n_slots, n_ctx, n_layer, n_head_kv, head_dim, kv_dim;
    int window;               /* the model's swa_window, 0 = none */
    int ring;                 /* R of the ring layers, 0 = no ring */
    int max_batch;            /* the most rows a batch may hold (the ring is sized for it) */
    kv_layer *lay;            /* [n_layer] */
    int *valid_from;          /* [n_slots]: the local layers' rows are real from here on (kv_can_resume) */
    size_t n_elems;           /* fp16 values in k (and in v) */
    uint16_t *k, *v;          /* v follows k in the one page-aligned mapping */
    size_t map_bytes;
} kv_cache;

/* Every position of every layer kept. */
int kv_cache_init(kv_cache *kv, const struct model *m, int n_slots, int n_ctx);
/* Local layers as rings sized for batches of up to max_batch rows (when
 * that is smaller than n_ctx); forward refuses a larger batch. */
int kv_cache_init_window(kv_cache *kv, const struct model *m, int n_slots, int n_ctx, int max_batch);
void kv_cache_free(kv_cache *kv);
uint64_t kv_cache_bytes(const kv_cache *kv);
/* Copy positions [0, n) of slot src into slot dst (prefix reuse). */
void kv_cache_copy(kv_cache *kv, int dst, int src, int n);
/* head_dim fp16 values of (layer, slot, KV head, pos); the next position's
 * follow them (on a ring layer, for the next R - 1 positions). */
uint16_t *kv_k_head(kv_cache *kv, int layer, int slot, int head, int pos);
uint16_t *kv_v_head(kv_cache *kv, int layer, int slot, int head, int pos);
/* After (layer, slot, head, pos) is written through kv_k_head/kv_v_head:
 * copies it to its ring twin (nothing on a full layer). */
void kv_mirror(kv_cache *kv, int layer, int slot, int head, int pos);
/* Positions [pos, pos + n) of (layer, slot) as rows of kv_dim values (every
 * head of a position together), the prompt cache's block layout: out of the
 * cache into k and v, or from k and v into it (any alignment: byte copies).
 * On a local layer the rows more than `window` before pos + n are zeros. */
void kv_rows_get(const kv_cache *kv, int layer, int slot, int pos, int n, void *k, void *v);
void kv_rows_put(kv_cache *kv, int layer, int slot, int pos, int n, const void *k, const void *v);
/* A slot's positions are written from pos on (forward calls it per row). */
void kv_note_write(kv_cache *kv, int slot, int pos);
/* Whether a slot whose positions [0, n_filled) were written may continue at
 * position `at` (<= n_filled) with what it holds: false when a local layer
 * no longer has the window before `at` (the ring moved past it, or rows put
 * from the prompt cache left it as zeros). Always true without local layers. */
bool kv_can_resume(const kv_cache *kv, int slot, int n_filled, int at);

#endif
