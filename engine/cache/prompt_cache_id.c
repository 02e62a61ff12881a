/* Where the prompt cache lives by default, and the fingerprint of the model
 * state it may hold (a changed model file, KV format, block shape, numerics
 * or kernel path gives another, so stale state is never resumed). */
#include "engine/cache/prompt_cache.h"
#include "engine/cache/block_codec.h"
#include "engine/model/model.h"
#include "engine/model/forward.h"
#include "engine/model/backend.h"
#include "kernels/kern_table.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int make_dirs(const char *dir) {
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) return -1;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

int prompt_cache_default_path(char *buf, size_t cap) {
    char dir[1024];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
#ifdef __APPLE__
    xdg = NULL;
    if (home && *home) snprintf(dir, sizeof dir, "%s/Library/Caches/hearth", home);
#else
    if (xdg && *xdg) snprintf(dir, sizeof dir, "%s/hearth", xdg);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.cache/hearth", home);
#endif
    else return -1;
    if (make_dirs(dir)) return -1;
    return snprintf(buf, cap, "%s/prompt-cache.db", dir) < (int)cap ? 0 : -1;
}

typedef struct { uint64_t lo, hi; } fp_state;

static void fp_mix(fp_state *s, const void *p, size_t n) {
    s->lo = hash64(p, n, s->lo);
    s->hi = hash64(p, n, s->hi ^ 0x5bd1e9955bd1e995ull);
}

void prompt_cache_fingerprint(const model *m, int block_tokens, uint8_t out[16]) {
    fp_state s = { 0x6865617274682d66ull, 0x696e6765727072ull };
    /* The kernel path too: attention's sums run in a different order on
     * each, so state saved by one is not what another would compute. */
    uint64_t fields[8] = { BLOCK_VERSION, BLOCK_KV_F16, (uint64_t)m->p.n_layer,
                           (uint64_t)m->p.n_head_kv * (uint64_t)m->p.head_dim, (uint64_t)block_tokens,
                           m->file_size, FORWARD_NUMERICS, (uint64_t)m->kern->id };
    fp_mix(&s, fields, sizeof fields);
    /* another backend's numerics are its own too (the CPU's fingerprint is unchanged) */
    if (m->backend && strcmp(m->backend->name, "cpu")) fp_mix(&s, m->backend->name, strlen(m->backend->name));
    /* what the model is: header, metadata, tensor table and sampled weights
     * (model_load reads them before it closes the file) */
    fp_mix(&s, m->file_id, sizeof m->file_id);
    memcpy(out, &s.lo, 8);
    memcpy(out + 8, &s.hi, 8);
}

