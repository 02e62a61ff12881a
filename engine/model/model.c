/* Loading a model: hyperparameters from metadata (with the usual
 * defaults), every tensor checked for presence, type and shape, and the
 * plan parameters set from the architecture. Once loaded, the model holds
 * nothing of the file (see detach_weights). */
#include "engine/model/model.h"
#include "engine/model/model_check.h"
#include "engine/model/backend.h"
#include "engine/model/plan.h"
#include "engine/text/tokenizer.h"
#include "runtime/hash.h"
#include "runtime/pages.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *arch_names[ARCH_COUNT] = { "llama", "qwen2", "qwen3", "gemma3", "phi3" };

const char *model_arch_name(model_arch a) {
    return (unsigned)a < ARCH_COUNT ? arch_names[a] : "unknown";
}

typedef struct {
    model *m;
    const gguf_file *g;       /* open only while loading */
    char *err;
    size_t errlen;
    int failed;
} loader;

static void fail(loader *L, const char *fmt, ...) {
    if (L->failed++) return;   /* keep the first error: it is the cause */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err, L->errlen, fmt, ap);
    va_end(ap);
}

/* "{arch}.{suffix}" as an unsigned count; missing → def. */
static int arch_u32(loader *L, const char *suffix, int def) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", model_arch_name(L->m->p.arch), suffix);
    uint32_t v;
    if (!gguf_find_kv(L->g, key)) return def;
    if (!gguf_get_u32(L->g, key, &v) || v > (1u << 30)) {
        fail(L, "metadata %s has a bad type or value", key);
        return def;
    }
    return (int)v;
}

static float arch_f32(loader *L, const char *suffix, float def) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", model_arch_name(L->m->p.arch), suffix);
    float v;
    if (!gguf_find_kv(L->g, key)) return def;
    if (!gguf_get_f32(L->g, key, &v) || !isfinite(v)) {
        fail(L, "metadata %s has a bad type or value", key);
        return def;
    }
    return v;
}

/* Find a tensor and check its shape (ne0 x ne1; ne1 = 1 for vectors). */
static const gguf_tensor *tensor(loader *L, const char *name, int64_t ne0, int64_t ne1, bool required) {
    const gguf_tensor *t = gguf_find_tensor(L->g, name);
    if (!t) {
        if (required) fail(L, "tensor '%s' is missing", name);
        return NULL;
    }
    int64_t rest = 1;
    for (int d = 2; d < t->n_dims; d++) rest *= t->ne[d];
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || rest != 1) {
        fail(L, "tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", name,
             (long long)t->ne[0], (long long)t->ne[1], (long long)ne0, (long long)ne1);
        return NULL;
    }
    const format_info *f = format_get(t->type);
    if (!f) {
        fail(L, "tensor '%s' has type %s, which hearth does not support", name, format_name(t->type));
        return NULL;
    }
    if (ne0 % f->block_elems) {
        fail(L, "tensor '%s': row length %lld is not a multiple of the %s block (%d)", name,
             (long long)ne0, f->name, f->block_elems);
        return NULL;
    }
    return t;
}

static void weight(loader *L, hweight *w, const char *name, int64_t n_in, int64_t n_out) {
    const gguf_tensor *t = tensor(L, name, n_in, n_out, true);
    if (!t) return;
    w->type = t->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->data = t->data;
    w->row_bytes = format_row_bytes(t->type, n_in);
    L->m->weight_bytes += t->size;
}

/* A fused matrix (phi3's attn_qkv: rows q, k, v; its ffn_up: rows gate,
 * up) is split at load into views of consecutive rows: a matrix's rows are
 * stored one after another, so rows [r0, r0 + n) are a matrix of their own,
 * repacked and released like any other. */
static void weight_split(loader *L, const char *name, int64_t n_in, int n_parts, hweight *const *parts,
                         const int64_t *rows) {
    int64_t total = 0;
    for (int i = 0; i < n_parts; i++) total += rows[i];
    hweight whole;
    memset(&whole, 0, sizeof whole);
    weight(L, &whole, name, n_in, total);
    if (L->failed) return;
    int64_t r0 = 0;
    for (int i = 0; i < n_parts; i++) {
        *parts[i] = whole;
        parts[i]->n_out = rows[i];
        parts[i]->data = whole.data + (size_t)r0 * whole.row_bytes;
        r0 += rows[i];
    }
}

/* Small vectors (norms, biases) are kept as float whatever their format. */
static float *vector(loader *L, const char *name, int64_t n, bool required) {
    const gguf_tensor *t = tensor(L, name, n, 1, required);
    if (!t) return NULL;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) { fail(L, "out of memory"); return NULL; }
    format_dequantize_row(t->type, t->data, v, n);
    return v;
}

static void layer_name(char *buf, size_t cap, int il, const char *what) {
    snprintf(buf, cap, "blk.%d.%s", il, what);
}

static void load_layer(loader *L, int il) {
    model *m = L->m;
    const model_params *p = &m->p;
    layer_weights *lw = &m->layers[il];
    int q_dim = p->n_head * p->head_dim, kv_dim = p->n_head_kv * p->head_dim;
    char n[96];
#define NAME(what) (layer_name(n, sizeof n, il, what), n)
    lw->attn_norm = vector(L, NAME("attn_norm.weight"), p->n_embd, true);
    if (gguf_find_tensor(L->g, NAME("attn_qkv.weight"))) {
        hweight *const parts[3] = { &lw->wq, &lw->wk, &lw->wv };
        const int64_t rows[3] = { q_dim, kv_dim, kv_dim };
        weight_split(L, n, p->n_embd, 3, parts, rows);
    } else {
        weight(L, &lw->wq, NAME("attn_q.weight"), p->n_embd, q_dim);
        weight(L, &lw->wk, NAME("attn_k.weight"), p->n_embd, kv_dim);
        weight(L, &lw->wv, NAME("attn_v.weight"), p->n_embd, kv_dim);
    }
    weight(L, &lw->wo, NAME("attn_output.weight"), q_dim, p->n_embd);
    if (p->qkv_bias) {
        lw->bq = vector(L, NAME("attn_q.bias"), q_dim, true);
        lw->bk = vector(L, NAME("attn_k.bias"), kv_dim, true);
        lw->bv = vector(L, NAME("attn_v.bias"), kv_dim, true);
    }
    if (p->qk_norm) {
        lw->q_norm = vector(L, NAME("attn_q_norm.weight"), p->head_dim, true);
        lw->k_norm = vector(L, NAME("attn_k_norm.weight"), p->head_dim, true);
    }
    if (p->post_norms) {
        lw->post_attn_norm = vector(L, NAME("post_attention_norm.weight"), p->n_embd, true);
        lw->post_ffn_norm = vector(L, NAME("post_ffw_norm.weight"), p->n_embd, true);
    }
    lw->ffn_norm = vector(L, NAME("ffn_norm.weight"), p->n_embd, true);
    if (!gguf_find_tensor(L->g, NAME("ffn_gate.weight"))) {
        hweight *const parts[2] = { &lw->w_gate, &lw->w_up };
        const int64_t rows[2] = { p->n_ff, p->n_ff };
        weight_split(L, NAME("ffn_up.weight"), p->n_embd, 2, parts, rows);
    } else {
        weight(L, &lw->w_gate, NAME("ffn_gate.weight"), p->n_embd, p->n_ff);
        weight(L, &lw->w_up, NAME("ffn_up.weight"), p->n_embd, p->n_ff);
    }
    weight(L, &lw->w_down, NAME("ffn_down.weight"), p->n_ff, p->n_embd);
#undef NAME
}

static void read_params(loader *L) {
    model *m = L->m;
    model_params *p = &m->p;
    gguf_str s;
    if (!gguf_get_str(L->g, "general.architecture", &s)) {
        fail(L, "metadata general.architecture is missing");
        return;
    }
    p->arch = ARCH_COUNT;
    for (int a = 0; a < ARCH_COUNT; a++)
        if (gguf_str_eq(s, arch_names[a])) p->arch = (model_arch)a;
    if (p->arch == ARCH_COUNT) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(s.len < 48 ? s.len : 48), s.ptr);
        fail(L, "architecture '%s' is not supported (hearth runs llama, qwen2, qwen3, gemma3, phi3)", name);
        return;
    }
    p->n_embd = arch_u32(L, "embedding_length", 0);
    p->n_layer = arch_u32(L, "block_count", 0);
    p->n_head = arch_u32(L, "attention.head_count", 0);
    p->n_head_kv = arch_u32(L, "attention.head_count_kv", p->n_head);
    p->n_ff = arch_u32(L, "feed_forward_length", 0);
    p->n_ctx_train = arch_u32(L, "context_length", 2048);
    if (L->failed) return;
    if (p->n_embd <= 0 || p->n_layer <= 0 || p->n_head <= 0 || p->n_ff <= 0) {
        fail(L, "metadata: embedding_length, block_count, head_count and feed_forward_length must be set and positive");
        return;
    }
    if (p->n_head_kv <= 0 || p->n_head % p->n_head_kv) {
        fail(L, "metadata: head_count %d is not a multiple of head_count_kv %d", p->n_head, p->n_head_kv);
        return;
    }
    p->head_dim = arch_u32(L, "attention.key_length", p->n_embd / p->n_head);
    int v_len = arch_u32(L, "attention.value_length", p->head_dim);
    if (p->head_dim <= 0 || p->head_dim % 2 || v_len != p->head_dim) {
        fail(L, "metadata: head dimension %d (value %d) is not supported", p->head_dim, v_len);
        return;
    }
    p->n_rot = arch_u32(L, "rope.dimension_count", p->head_dim);
    if (p->n_rot <= 0 || p->n_rot > p->head_dim || p->n_rot % 2) {
        fail(L, "metadata: rope.dimension_count %d does not fit head dimension %d", p->n_rot, p->head_dim);
        return;
    }
    float eps_default = p->arch == ARCH_LLAMA ? 1e-5f : 1e-6f;
    p->rms_eps = arch_f32(L, "attention.layer_norm_rms_epsilon", eps_default);
    bool base_1e4 = p->arch == ARCH_LLAMA || p->arch == ARCH_PHI3;
    p->rope_base = arch_f32(L, "rope.freq_base", base_1e4 ? 10000.0f : 1000000.0f);
    if (p->rms_eps <= 0 || p->rope_base <= 0) fail(L, "metadata: rms epsilon and rope base must be positive");
    p->rope_neox = p->arch != ARCH_LLAMA;
    p->qkv_bias = p->arch == ARCH_QWEN2;
    p->qk_norm = p->arch == ARCH_QWEN3 || p->arch == ARCH_GEMMA3;
    p->embd_scale = 1.0f;
    p->attn_scale = 1.0f / sqrtf((float)p->head_dim);
    p->glu = GLU_SWIGLU;
    p->rope_base_swa = p->rope_base;
    /* longrope (phi3): cos and sin are scaled whichever factors are used */
    p->rope_attn_factor = arch_f32(L, "rope.scaling.attn_factor", 1.0f);
    p->n_ctx_orig = arch_u32(L, "rope.scaling.original_context_length", p->n_ctx_train);
    if (p->arch == ARCH_GEMMA3) {
        p->embd_scale = sqrtf((float)p->n_embd);
        p->post_norms = true;
        p->glu = GLU_GEGLU;
        p->swa_window = arch_u32(L, "attention.sliding_window", 0);
        p->rope_base_swa = arch_f32(L, "rope.freq_base_swa", 10000.0f);
        p->final_softcap = arch_f32(L, "final_logit_softcapping", 0.0f);
        /* Gemma's query_pre_attn_scalar: head_dim, except the 27B model
         * (62 layers), which scales by n_embd / n_head (as llama.cpp does,
         * after gemma_pytorch's config), unless the file says */
        if (p->n_layer == 62) p->attn_scale = 1.0f / sqrtf((float)(p->n_embd / p->n_head));
    }
    p->attn_scale = arch_f32(L, "attention.scale", p->attn_scale);
    p->pooling = arch_u32(L, "pooling_type", 3);
    if (p->pooling < 1 || p->pooling > 3) p->pooling = 3;   /* none / rank: last token, as a decoder's */
    if (p->rope_base_swa <= 0 || p->rope_attn_factor <= 0 || p->attn_scale <= 0 || p->final_softcap < 0)
        fail(L, "metadata: rope.freq_base_swa, rope.scaling.attn_factor, attention.scale and "
                "final_logit_softcapping must be positive");
}

/* Which layers slide: the pattern key (a period N, the last layer of each N
 * global, or one flag per layer), else llama.cpp's gemma3 default: every
 * 6th layer global. No window, no local layer. */
static void set_local_layers(loader *L) {
    model *m = L->m;
    const model_params *p = &m->p;
    if (p->swa_window <= 0) return;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", model_arch_name(p->arch));
    const gguf_kv *kv = gguf_find_kv(L->g, key);
    int period = 6;
    if (kv && kv->type == GGUF_TYPE_ARRAY) {
        if (kv->arr_n != (uint64_t)p->n_layer) {
            fail(L, "metadata %s has %llu entries for %d layers", key, (unsigned long long)kv->arr_n, p->n_layer);
            return;
        }
        for (int il = 0; il < p->n_layer; il++) {
            int64_t v;
            if (!gguf_arr_i64(kv, (uint64_t)il, &v)) { fail(L, "metadata %s has a bad type", key); return; }
            m->layers[il].local = v != 0;
        }
        return;
    }
    if (kv) {
        uint32_t v;
        if (!gguf_get_u32(L->g, key, &v) || v > (1u << 20)) { fail(L, "metadata %s has a bad type or value", key); return; }
        period = (int)v;
    }
    for (int il = 0; il < p->n_layer; il++) m->layers[il].local = period > 0 && il % period < period - 1;
}

/* Linear rope scaling (rope.scaling.type "linear"): every pair's frequency
 * divided by the factor, on the global layers. Folded into rope_freqs. */
static void linear_rope_scaling(loader *L) {
    model *m = L->m;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", model_arch_name(m->p.arch));
    gguf_str s;
    if (!gguf_get_str(L->g, key, &s) || !gguf_str_eq(s, "linear")) return;
    float factor = arch_f32(L, "rope.scaling.factor", 1.0f);
    if (factor <= 0) { fail(L, "metadata rope.scaling.factor must be positive"); return; }
    if (factor == 1.0f) return;
    int half = m->p.n_rot / 2;
    if (!m->rope_freqs) {
        if (!(m->rope_freqs = malloc(sizeof(float) * (size_t)half))) { fail(L, "out of memory"); return; }
        for (int i = 0; i < half; i++) m->rope_freqs[i] = 1.0f;
    }
    for (int i = 0; i < half; i++) m->rope_freqs[i] *= factor;
}

static void load_tensors(loader *L) {
    model *m = L->m;
    model_params *p = &m->p;
    const gguf_tensor *emb = gguf_find_tensor(L->g, "token_embd.weight");
    if (!emb) { fail(L, "tensor 'token_embd.weight' is missing"); return; }
    p->n_vocab = (int)(emb->ne[1] > 0 && emb->ne[1] < (1 << 24) ? emb->ne[1] : 0);
    if (!p->n_vocab) { fail(L, "tensor 'token_embd.weight' has a bad vocabulary dimension"); return; }
    weight(L, &m->tok_embd, "token_embd.weight", p->n_embd, p->n_vocab);
    m->output_norm = vector(L, "output_norm.weight", p->n_embd, true);
    if (gguf_find_tensor(L->g, "output.weight")) {
        weight(L, &m->output, "output.weight", p->n_embd, p->n_vocab);
    } else {
        p->tied_embeddings = true;
        m->output = m->tok_embd;
    }
    if (gguf_find_tensor(L->g, "rope_freqs.weight"))
        m->rope_freqs = vector(L, "rope_freqs.weight", p->n_rot / 2, true);
    if (gguf_find_tensor(L->g, "rope_factors_short.weight") || gguf_find_tensor(L->g, "rope_factors_long.weight")) {
        m->rope_short = vector(L, "rope_factors_short.weight", p->n_rot / 2, true);
        m->rope_long = vector(L, "rope_factors_long.weight", p->n_rot / 2, true);
    }
    linear_rope_scaling(L);
    m->layers = calloc((size_t)p->n_layer, sizeof *m->layers);
    if (!m->layers) { fail(L, "out of memory"); return; }
    set_local_layers(L);
    for (int il = 0; il < p->n_layer && !L->failed; il++) load_layer(L, il);
}

/* Every matrix the matmul reads, for repacking and release. */
int model_for_each_matrix(model *m, int (*fn)(hweight *, void *), void *ctx) {
    int rc = fn(&m->output, ctx);
    for (int il = 0; m->layers && il < m->p.n_layer && !rc; il++) {
        layer_weights *lw = &m->layers[il];
        hweight *ws[] = { &lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w_gate, &lw->w_up, &lw->w_down };
        for (size_t i = 0; i < sizeof ws / sizeof ws[0] && !rc; i++) rc = fn(ws[i], ctx);
    }
    return rc;
}

static char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return strdup(b ? b + 1 : path);
}

/* What the file is, for the prompt cache's model fingerprint once the file
 * is closed: its header, metadata and tensor table, and 65 windows of 4 KiB
 * spread over the weights, so rewritten weights of the same shape (a
 * re-quantized or retrained file) give another id too. */
static void file_id(const gguf_file *g, uint8_t out[16]) {
    uint64_t lo = 0x6865617274682d66ull, hi = 0x696e6765727072ull;
#define MIX(p, n) (lo = hash64((p), (n), lo), hi = hash64((p), (n), hi ^ 0x5bd1e9955bd1e995ull))
    uint64_t fields[3] = { g->size, g->data_offset, g->n_tensors };
    MIX(fields, sizeof fields);
    uint64_t head = g->data_offset && g->data_offset <= g->size ? g->data_offset : g->size;
    MIX(g->map, (size_t)head);
    uint64_t span = g->size - head, win = 4096;
    for (int i = 0; i < 64 && span; i++) {
        uint64_t at = head + span / 64 * (uint64_t)i;
        MIX(g->map + at, (size_t)(g->size - at < win ? g->size - at : win));
    }
    if (span) MIX(g->map + g->size - (span < win ? span : win), (size_t)(span < win ? span : win));
#undef MIX
    memcpy(out, &lo, 8);
    memcpy(out + 8, &hi, 8);
}

/* Hands back the whole pages of [p, p + n) of the file map once copied, so
 * the file is not resident beside its copy while the rest is copied. */
static void drop_pages(const uint8_t *p, size_t n) {
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~((uintptr_t)pg - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);   /* a read-only file map: the pages are only dropped */
}

/* After this nothing points into the file, so it can be unmapped: a running
 * server is then out of reach of the file being rewritten in place (a
 * private map shows those writes), truncated (a read of the map past the
 * end is SIGBUS) or replaced. Matrices the kernels repacked are not read
 * again; the others (the token embedding, and every matrix on a path that
 * does not pack) are copied once into memory of their own. A tied embedding
 * is read through the output matrix's packed copy (kern_get_row gives the
 * same floats from either layout), so it is not held twice. */
static int detach_weights(model *m) {
    int n = 0, cap = 2 + 7 * m->p.n_layer;
    hweight **ws = malloc(sizeof *ws * (size_t)cap);
    const uint8_t **orig = malloc(sizeof *orig * (size_t)cap);
    if (!ws || !orig) { free(ws); free(orig); return -1; }
    if (m->p.tied_embeddings && m->output.packed && !m->tok_embd.packed) {
        m->tok_embd.packed = m->output.packed;   /* not owned: model_free releases output's */
        m->tok_embd.packed_path = m->output.packed_path;
    }
    ws[n++] = &m->tok_embd;
    ws[n++] = &m->output;
    for (int il = 0; il < m->p.n_layer; il++) {
        layer_weights *lw = &m->layers[il];
        hweight *l[] = { &lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w_gate, &lw->w_up, &lw->w_down };
        for (size_t i = 0; i < sizeof l / sizeof l[0]; i++) ws[n++] = l[i];
    }
    /* one block for every distinct unpacked matrix (a tied one once) */
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        orig[i] = ws[i]->data;
        bool first = !ws[i]->packed;
        for (int j = 0; j < i && first; j++) first = ws[j]->packed || orig[j] != orig[i];
        if (first) total += (ws[i]->row_bytes * (size_t)ws[i]->n_out + 63) & ~(size_t)63;
    }
    uint8_t *copy = NULL;   /* page-aligned: a device on unified memory can wrap it */
    if (total && !(copy = pages_alloc(pages_round(total)))) { free(ws); free(orig); return -1; }
    m->weights_copy_bytes = total ? pages_round(total) : 0;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        hweight *w = ws[i];
        if (w->packed) { w->data = NULL; continue; }   /* never read again; no stale pointer left */
        int j = 0;
        while (j < i && (ws[j]->packed || orig[j] != orig[i])) j++;
        if (j < i) { w->data = ws[j]->data; continue; }
        size_t bytes = w->row_bytes * (size_t)w->n_out;
        memcpy(copy + off, orig[i], bytes);
        drop_pages(orig[i], bytes);
        w->data = copy + off;
        off += (bytes + 63) & ~(size_t)63;
    }
    m->weights_copy = copy;
    free(ws);
    free(orig);
    return 0;
}

model *model_load(const char *path, char *err, size_t errlen) {
    model_options o = { NULL, -1 };
    return model_load_opts(path, &o, err, errlen);
}

model *model_load_opts(const char *path, const model_options *o, char *err, size_t errlen) {
    const backend *be = backend_find(o->backend);
    if (!be) {
        snprintf(err, errlen, "backend '%s' is not one this build can run here (%s)", o->backend, backend_names());
        return NULL;
    }
    model *m = calloc(1, sizeof *m);
    if (!m) { snprintf(err, errlen, "out of memory"); return NULL; }
    gguf_file g;
    char gerr[256];
    if (gguf_open(path, &g, gerr, sizeof gerr)) {
        snprintf(err, errlen, "%s: %s", path, gerr);
        free(m);
        return NULL;
    }
    loader L = { m, &g, err, errlen, 0 };
    read_params(&L);
    /* bounds first: nothing is sized from a hyperparameter before they hold */
    if (!L.failed && model_check_params(&m->p, err, errlen)) L.failed = 1;
    if (!L.failed) load_tensors(&L);
    if (!L.failed && model_check_params(&m->p, err, errlen)) L.failed = 1;
    if (!L.failed) {
        char terr[256];
        m->tok = tokenizer_load(&g, terr, sizeof terr);
        if (!m->tok) fail(&L, "%s", terr);
        else if (tokenizer_n_vocab(m->tok) > m->p.n_vocab)
            fail(&L, "vocabulary has %d tokens but token_embd.weight only %d rows",
                 tokenizer_n_vocab(m->tok), m->p.n_vocab);
    }
    /* The backend puts each matrix in its kernels' layout once (the CPU one
     * repacks, releasing the original pages it no longer reads). The token
     * embedding stays as it is (rows are looked up, not multiplied). */
    if (!L.failed) {
        char berr[256];
        if (be->prepare(m, o, berr, sizeof berr)) fail(&L, "%s", berr);
        else m->backend = be;
    }
    gguf_str s;
    if (!L.failed) {
        m->name = gguf_get_str(&g, "general.name", &s) ? gguf_str_dup(s) : base_name(path);
        if (gguf_get_str(&g, "tokenizer.chat_template", &s) && !(m->chat_template = gguf_str_dup(s)))
            fail(&L, "out of memory");
        if (!m->name) fail(&L, "out of memory");
    }
    if (!L.failed) {
        m->file_size = g.size;
        file_id(&g, m->file_id);
    }
    if (!L.failed && detach_weights(m)) fail(&L, "out of memory copying the weights");
    if (!L.failed && !(m->plan = plan_build(m))) fail(&L, "out of memory building the plan");
    if (L.failed) {
        /* prefix the file so the one line says where */
        char msg[512];
        snprintf(msg, sizeof msg, "%s: %s", path, err);
        snprintf(err, errlen, "%s", msg);
        model_free(m);
        gguf_close(&g);
        return NULL;
    }
    gguf_close(&g);
    return m;
}

void model_free(model *m) {
    if (!m) return;
    /* tok_embd is never released: a view of weights_copy or of output's packed layout */
    plan_free(m->plan);
    if (m->backend) m->backend->release(m);
    if (m->layers) {
        for (int il = 0; il < m->p.n_layer; il++) {
            layer_weights *lw = &m->layers[il];
            free(lw->attn_norm); free(lw->ffn_norm); free(lw->q_norm); free(lw->k_norm);
            free(lw->bq); free(lw->bk); free(lw->bv);
            free(lw->post_attn_norm); free(lw->post_ffn_norm);
        }
        free(m->layers);
    }
    free(m->output_norm);
    free(m->rope_freqs);
    free(m->rope_short);
    free(m->rope_long);
    tokenizer_free(m->tok);
    free(m->name);
    free(m->chat_template);
    pages_free(m->weights_copy, m->weights_copy_bytes);
    free(m);
}

uint64_t model_bytes_per_token(const model *m) {
    /* every matrix once; the embedding contributes one row, unless tied
     * (then it is read whole as the output matrix) */
    uint64_t b = m->weight_bytes;
    if (!m->p.tied_embeddings) b -= (uint64_t)m->tok_embd.row_bytes * (uint64_t)(m->tok_embd.n_out - 1);
    return b;
}

const float *model_rope_factors(const model *m, int n_ctx) {
    if (m->rope_freqs) return m->rope_freqs;
    if (m->rope_long && n_ctx > m->p.n_ctx_orig) return m->rope_long;
    return m->rope_short;
}
