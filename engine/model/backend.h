/* The backend interface: what the engine asks of whatever runs the plan
 * (a method table in the manner of sqlite's VFS). A backend puts the
 * weights in its layout at load, creates per-model state (its activation
 * arena and the KV cache), runs one batch through the model's plan, and
 * shows the KV cache to the prompt cache. The engine and the generator call
 * only this; the CPU executor (backend_cpu.c) is the first implementation. */
#ifndef HEARTH_BACKEND_H
#define HEARTH_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include "engine/model/forward.h"

struct hpool;
struct model;
struct model_options;

/* A backend's own state for one model: arena, KV cache, its kernels. */
typedef struct backend_state backend_state;

typedef struct backend_config {
    int n_slots, n_ctx;       /* the KV cache: n_ctx positions per slot */
    int max_batch;            /* rows in one run */
    struct hpool *pool;       /* the workers a run may use (NULL: the caller alone) */
} backend_config;

typedef struct backend {
    const char *name;
    /* True when this machine and build can run it. */
    bool (*available)(void);
    /* At load, before the model lets go of its file: choose the kernels
     * (o may name them) and put every matrix in their layout. 0, or -1 with
     * a one-line error. */
    int (*prepare)(struct model *m, const struct model_options *o, char *err, size_t errlen);
    /* Undoes prepare (model_free). */
    void (*release)(struct model *m);
    /* Per-model state sized for c; NULL when out of memory. */
    backend_state *(*create)(const struct model *m, const backend_config *c);
    void (*destroy)(backend_state *s);
    /* One batch through the plan; logits gets an n_vocab row per wanted row,
     * in batch order. 0, or -1 for a bad batch (nothing is run). */
    int (*run)(backend_state *s, const fwd_batch *b, float *logits);
    /* The KV cache, for the prompt cache's block copies. */
    kv_cache *(*kv)(backend_state *s);
    /* A name for the kernels it runs (logs, --version, the prompt cache's fingerprint). */
    const char *(*kernels_name)(const struct model *m);
} backend;

extern const backend backend_cpu;

/* "auto" (or NULL): the best available backend; else the named one. NULL
 * when the name is unknown or the backend cannot run here. */
const backend *backend_find(const char *name);
/* The backends of this build, for --version and --help ("cpu"). */
const char *backend_names(void);

#endif
