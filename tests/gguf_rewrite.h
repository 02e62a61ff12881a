/* A GGUF file written again with some metadata replaced or removed: the
 * tensors and every other key are copied as they are. For tests and
 * fuzzers that feed the loader hostile hyperparameters behind valid
 * tensors. */
#ifndef HEARTH_TEST_GGUF_REWRITE_H
#define HEARTH_TEST_GGUF_REWRITE_H

#include <stdint.h>
#include <string.h>
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"

enum { RW_U32, RW_I32, RW_U64, RW_F32, RW_STR, RW_DELETE };

typedef struct {
    const char *key;
    int kind;               /* RW_* */
    uint64_t u;             /* RW_U32 / RW_I32 / RW_U64 (low bits) */
    float f;                /* RW_F32 */
    const char *s;          /* RW_STR */
} gguf_override;

static inline void gguf_override_put(gguf_writer *w, const gguf_override *o) {
    switch (o->kind) {
    case RW_U32: gw_kv_u32(w, o->key, (uint32_t)o->u); break;
    case RW_I32: gw_kv_i32(w, o->key, (int32_t)(uint32_t)o->u); break;
    case RW_U64: gw_kv_u64(w, o->key, o->u); break;
    case RW_F32: gw_kv_f32(w, o->key, o->f); break;
    case RW_STR: gw_kv_str(w, o->key, o->s); break;
    default: break;
    }
}

/* g written to path with ov[0..n) applied (the last one for a key wins);
 * 0 or -1 with err. */
static inline int gguf_rewrite(const gguf_file *g, const gguf_override *ov, int n, const char *path,
                               char *err, size_t errlen) {
    gguf_writer *w = gguf_writer_new();
    if (!w) { snprintf(err, errlen, "out of memory"); return -1; }
    if (g->alignment != 32) gw_set_alignment(w, (uint32_t)g->alignment);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (!strcmp(kv->key, "general.alignment")) continue;   /* gw_set_alignment writes it */
        int over = -1;
        for (int j = 0; j < n; j++) if (!strcmp(ov[j].key, kv->key)) over = j;
        if (over >= 0) continue;
        if (kv->type == GGUF_TYPE_ARRAY)   /* the stored form: element type, count, elements */
            gw_kv_encoded(w, kv->key, (uint32_t)kv->type, kv->data - 12, (size_t)kv->data_size + 12);
        else
            gw_kv_encoded(w, kv->key, (uint32_t)kv->type, kv->data, (size_t)kv->data_size);
    }
    for (int j = 0; j < n; j++) {
        int last = 1;
        for (int k = j + 1; k < n; k++) if (!strcmp(ov[k].key, ov[j].key)) last = 0;
        if (last) gguf_override_put(w, &ov[j]);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        gw_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, (size_t)t->size);
    }
    int rc = gguf_writer_save(w, path, err, errlen);
    gguf_writer_free(w);
    return rc;
}

#endif
