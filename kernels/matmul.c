/* The matmul entry points: activation preparation, threading, the packed
 * panel layout (see kern_path.h) and its inverse for embedding lookups.
 *
 * Batch invariance: work is split over output rows only (pairs of panels
 * handed out through pool_run), activations are quantized row by row, and
 * every path computes each output with the accumulation order formats.c
 * defines. So a row's result does not depend on M, on the thread split, or
 * on the path. */
#include "kernels/kernels.h"
#include "kernels/kern_path.h"
#include "kernels/kern_table.h"
#include "runtime/pool.h"

#include <stdatomic.h>
#include <stdio.h>
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__) || defined(__APPLE__)
#include <sys/mman.h>
#endif

/* ---- scratch ------------------------------------------------------------- */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Layout: act_q8 blocks of every row, the int32 half sums, then one
 * act_extra array per weight format of a fused call (at most KERN_MAX_FUSED). */
static size_t scratch_q_bytes(int64_t rows, int64_t n_in) {
    return align64((size_t)rows * (size_t)((n_in + QK - 1) / QK) * sizeof(act_q8));
}

static size_t scratch_ext_bytes(int64_t rows, int64_t n_in) {
    return align64((size_t)rows * (size_t)((n_in + QK - 1) / QK) * sizeof(act_extra));
}

size_t kern_scratch_bytes(int64_t max_rows, int64_t max_n_in) {
    if (max_rows < 1) max_rows = 1;
    size_t nb = (size_t)((max_n_in + QK - 1) / QK);
    return 64 + scratch_q_bytes(max_rows, max_n_in) + align64((size_t)max_rows * nb * sizeof(int32_t)) +
           KERN_MAX_FUSED * scratch_ext_bytes(max_rows, max_n_in);
}

/* ---- activation preparation ------------------------------------------------ */

typedef struct {
    const float *x;
    act_q8 *q;
    int32_t *slo;
    int64_t n_in;
    int n_types;                        /* distinct integer formats of the call */
    int type[KERN_MAX_FUSED];
    act_extra *ext[KERN_MAX_FUSED];     /* one per format */
    void (*quantize)(const float *x, act_q8 *q, int32_t *slo, int64_t n);
} quant_job;

static void reference_quantize(const float *x, act_q8 *q, int32_t *slo, int64_t n) {
    act_quantize_row(x, q, n);
    for (int64_t b = 0; b < n / QK; b++) {
        int32_t s = 0;
        for (int j = 0; j < 16; j++) s += q[b].qs[j];
        slo[b] = s;
    }
}

/* What a format's kernels need per activation block (see act_extra). */
void kern_act_extra(int type, const act_q8 *q, const int32_t *slo, act_extra *e, int64_t nb) {
    int off = type == FMT_Q4_0 ? 8 : type == FMT_Q5_0 ? 16 : type == FMT_Q8_0 ? 128
            : type == FMT_Q6_K ? 32 : 0;
    for (int64_t b = 0; b < nb; b++) {
        int32_t sum = q[b].sum;
        e[b] = (act_extra){ -off * sum, 0, 0.0f, 0 };
        if (type == FMT_Q6_K) e[b] = (act_extra){ -off * slo[b], -off * (sum - slo[b]), 0.0f, 0 };
        if (type == FMT_Q4_1 || type == FMT_Q5_1) e[b].fs = (float)sum;
        if (type == FMT_Q4_K || type == FMT_Q5_K) e[b].fs = (float)-sum;
    }
}

static void quant_rows(void *ctx, int64_t begin, int64_t end, int worker) {
    (void)worker;
    const quant_job *j = ctx;
    int64_t nb = j->n_in / QK;
    for (int64_t m = begin; m < end; m++) {
        act_q8 *q = j->q + m * nb;
        int32_t *slo = j->slo + m * nb;
        j->quantize(j->x + m * j->n_in, q, slo, j->n_in);
        for (int t = 0; t < j->n_types; t++) kern_act_extra(j->type[t], q, slo, j->ext[t] + m * nb, nb);
    }
}

/* ---- matmul -------------------------------------------------------------- */

/* One weight of a (possibly fused) call: its path, activations, output and
 * the first global work item that is its own. */
typedef struct {
    const kern_path *path;
    const hweight *w;
    kern_act a;
    float *y;
    int64_t item0, items;
} mm_part;

typedef struct {
    int count;
    mm_part part[KERN_MAX_FUSED];
} rows_job;

/* Global work items [begin, end) may span several weights: each gets its
 * own piece. */
static void run_rows(void *ctx, int64_t begin, int64_t end, int worker) {
    const rows_job *j = ctx;
    for (int i = 0; i < j->count; i++) {
        const mm_part *p = &j->part[i];
        int64_t b = begin > p->item0 ? begin : p->item0;
        int64_t e = end < p->item0 + p->items ? end : p->item0 + p->items;
        if (b >= e) continue;
        int64_t n0 = (b - p->item0) * KP_UNIT_ROWS, n1 = (e - p->item0) * KP_UNIT_ROWS;
        if (n1 > p->w->n_out) n1 = p->w->n_out;
        assert(n0 % KP_UNIT_ROWS == 0);   /* the rows contract: whole units of the panel layout */
        p->path->rows(p->w, &p->a, p->y, n0, n1, worker);
    }
}

static void matmul_abort(const char *why, const hweight *w) {
    fprintf(stderr, "hearth: kern_matmul: %s (%s, %lld x %lld)\n", why, format_name(w->type),
            (long long)w->n_out, (long long)w->n_in);
    abort();
}

void kern_matmul_n(int count, const hweight *const *ws, int M, const float *x, float *const *ys,
                   kern_scratch *scratch, struct hpool *pool) {
    if (M <= 0 || count <= 0) return;
    if (count > KERN_MAX_FUSED) matmul_abort("too many fused weights", ws[0]);
    const int64_t n_in = ws[0]->n_in;
    static _Atomic uint64_t calls;
    const uint64_t id = atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed) + 1;
    rows_job rj = { .count = count };
    quant_job qj = { .x = x, .n_in = n_in };
    bool need_q8 = false;
    int64_t items = 0;
    for (int i = 0; i < count; i++) {
        const hweight *w = ws[i];
        const format_info *f = format_get(w->type);
        const kern_path *path = w->packed ? w->packed_path : &kern_path_scalar;
        if (!f || !path) matmul_abort("unsupported weight", w);
        if (w->n_in != n_in) matmul_abort("fused weights differ in n_in", w);
        mm_part *p = &rj.part[i];
        *p = (mm_part){ path, w, { .M = M, .n_in = n_in, .x = x, .id = id }, ys[i], items,
                        (w->n_out + KP_UNIT_ROWS - 1) / KP_UNIT_ROWS };
        items += p->items;
        if (!f->uses_act_q8) continue;
        need_q8 = true;
        /* the quantizer of the first integer weight serves all (they are
         * bit-identical to the reference) */
        if (!qj.quantize) qj.quantize = path->quantize ? path->quantize : reference_quantize;
        int t = 0;
        while (t < qj.n_types && qj.type[t] != w->type) t++;
        if (t == qj.n_types) qj.type[qj.n_types++] = w->type;
    }

    if (need_q8) {
        size_t need = kern_scratch_bytes(M, n_in);
        if (!scratch || !scratch->buf || scratch->size < need) matmul_abort("scratch too small", ws[0]);
        uint8_t *base = (uint8_t *)(((uintptr_t)scratch->buf + 63) & ~(uintptr_t)63);
        size_t nbm = (size_t)M * (size_t)(n_in / QK);
        qj.q = (act_q8 *)base;
        qj.slo = (int32_t *)(base + scratch_q_bytes(M, n_in));
        uint8_t *ext = (uint8_t *)qj.slo + align64(nbm * sizeof(int32_t));
        for (int t = 0; t < qj.n_types; t++) qj.ext[t] = (act_extra *)(ext + (size_t)t * scratch_ext_bytes(M, n_in));
        int threads = pool_threads(pool);
        pool_run(pool, quant_rows, &qj, M, (M + 4 * threads - 1) / (4 * threads));
        for (int i = 0; i < count; i++) {
            mm_part *p = &rj.part[i];
            int t = 0;
            while (t < qj.n_types && qj.type[t] != p->w->type) t++;
            if (t == qj.n_types) continue;   /* a float weight: reads x */
            p->a.q = qj.q;
            p->a.slo = qj.slo;
            p->a.ext = qj.ext[t];
        }
    }

    /* Work items are pairs of panels; about 8 blocks per thread lets the
     * dynamic hand-out even out a slow worker. */
    int64_t grain = items / (8 * pool_threads(pool));
    if (grain < 1) grain = 1;
    pool_run(pool, run_rows, &rj, items, grain);
}

void kern_matmul(const hweight *w, int M, const float *x, float *y,
                 kern_scratch *scratch, struct hpool *pool) {
    kern_matmul_n(1, &w, M, x, &y, scratch, pool);
}

/* ---- packing --------------------------------------------------------------- */

/* The integer content of one k-unit of one row: unsigned quants as the
 * packed layout stores them, and the scale fields. */
typedef struct {
    uint8_t q[QK_K];
    fp16_t d, m;            /* d and m (Q4_1/Q5_1) or dmin (K-quants) */
    uint8_t sc[16], mn[8];  /* K-quant scales (Q6_K: 16 int8 as bytes) */
} unit_vals;

typedef struct {
    int unit;               /* k per unit */
    int qb32;               /* quant bytes of one 32-k block of a panel */
    size_t s_bytes;         /* scale bytes of one unit of a panel */
} pack_fmt;

static bool pack_fmt_of(int type, pack_fmt *pf) {
    switch (type) {
    case FMT_Q4_0: *pf = (pack_fmt){ QK, 256, 32 }; return true;
    case FMT_Q4_1: *pf = (pack_fmt){ QK, 256, 64 }; return true;
    case FMT_Q5_0: *pf = (pack_fmt){ QK, 320, 32 }; return true;
    case FMT_Q5_1: *pf = (pack_fmt){ QK, 320, 64 }; return true;
    case FMT_Q8_0: *pf = (pack_fmt){ QK, 512, 32 }; return true;
    case FMT_Q4_K: *pf = (pack_fmt){ QK_K, 256, 320 }; return true;
    case FMT_Q5_K: *pf = (pack_fmt){ QK_K, 320, 320 }; return true;
    case FMT_Q6_K: *pf = (pack_fmt){ QK_K, 384, 288 }; return true;
    case FMT_F32:  *pf = (pack_fmt){ 1, 0, 0 }; return true;
    case FMT_F16:
    case FMT_BF16: *pf = (pack_fmt){ 1, 0, 0 }; return true;
    default: return false;
    }
}

static size_t float_size(int type) { return type == FMT_F32 ? 4 : 2; }

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

/* Q4_0..Q5_1: quant j < 16 is the low nibble of qs[j], else the high nibble
 * of qs[j-16]; bit 4 is bit j of qh. */
static void nib32_get(const uint8_t *qs, uint32_t qh, uint8_t *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = (uint8_t)((qs[j] & 15) | ((qh >> j) & 1) << 4);
        q[j + 16] = (uint8_t)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
    }
}
static uint32_t nib32_put(uint8_t *qs, const uint8_t *q) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
    for (int j = 0; j < 32; j++) qh |= (uint32_t)((q[j] >> 4) & 1) << j;
    return qh;
}

/* Q4_K/Q5_K scales: 6-bit sc and m of 8 sub-blocks in 12 bytes. */
static void kq_get_scales(const uint8_t *s, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 15) | (s[j] >> 6) << 4);
        mn[j + 4] = (uint8_t)((s[j + 8] >> 4) | (s[j + 4] >> 6) << 4);
    }
}
static void kq_put_scales(uint8_t *s, const uint8_t sc[8], const uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
}

/* Q6_K element i: low 4 bits in ql[64h + l + 32(g&1)] (low nibble for g < 2),
 * high 2 bits at bits 2g of qh[32h + l]; h = i/128, g = i%128/32, l = i%32. */
static int q6_ql_index(int i) { return 64 * (i / 128) + i % 32 + 32 * ((i % 128 / 32) & 1); }
static int q6_qh_index(int i) { return 32 * (i / 128) + i % 32; }
static int q6_shift(int i) { return 2 * (i % 128 / 32); }

static void decode_unit(int type, const uint8_t *src, unit_vals *v) {
    switch (type) {
    case FMT_Q4_0: { const block_q4_0 *b = (const void *)src; v->d = b->d; nib32_get(b->qs, 0, v->q); break; }
    case FMT_Q4_1: { const block_q4_1 *b = (const void *)src; v->d = b->d; v->m = b->m; nib32_get(b->qs, 0, v->q); break; }
    case FMT_Q5_0: { const block_q5_0 *b = (const void *)src; v->d = b->d; nib32_get(b->qs, rd32(b->qh), v->q); break; }
    case FMT_Q5_1: { const block_q5_1 *b = (const void *)src; v->d = b->d; v->m = b->m; nib32_get(b->qs, rd32(b->qh), v->q); break; }
    case FMT_Q8_0: {
        const block_q8_0 *b = (const void *)src;
        v->d = b->d;
        for (int j = 0; j < QK; j++) v->q[j] = (uint8_t)b->qs[j] ^ 0x80;   /* q + 128 */
        break;
    }
    case FMT_Q4_K:
    case FMT_Q5_K: {
        const uint8_t *qs, *qh = NULL, *scales;
        if (type == FMT_Q4_K) {
            const block_q4_k *b = (const void *)src;
            v->d = b->d; v->m = b->dmin; qs = b->qs; scales = b->scales;
        } else {
            const block_q5_k *b = (const void *)src;
            v->d = b->d; v->m = b->dmin; qs = b->qs; qh = b->qh; scales = b->scales;
        }
        kq_get_scales(scales, v->sc, v->mn);
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++) {
                uint8_t byte = qs[32 * (j / 2) + l];
                int q = (j & 1) ? byte >> 4 : byte & 15;
                if (qh) q |= ((qh[l] >> j) & 1) << 4;
                v->q[32 * j + l] = (uint8_t)q;
            }
        break;
    }
    case FMT_Q6_K: {
        const block_q6_k *b = (const void *)src;
        v->d = b->d;
        for (int j = 0; j < 16; j++) v->sc[j] = (uint8_t)b->scales[j];
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *ql = b->ql + 64 * h + l;
                int qh = b->qh[32 * h + l];
                uint8_t *q = v->q + 128 * h + l;
                q[0] = (uint8_t)((ql[0] & 15) | (qh & 3) << 4);
                q[32] = (uint8_t)((ql[32] & 15) | ((qh >> 2) & 3) << 4);
                q[64] = (uint8_t)((ql[0] >> 4) | ((qh >> 4) & 3) << 4);
                q[96] = (uint8_t)((ql[32] >> 4) | ((qh >> 6) & 3) << 4);
            }
        break;
    }
    default: break;
    }
}

static void encode_unit(int type, const unit_vals *v, uint8_t *dst) {
    switch (type) {
    case FMT_Q4_0: { block_q4_0 *b = (void *)dst; b->d = v->d; nib32_put(b->qs, v->q); break; }
    case FMT_Q4_1: { block_q4_1 *b = (void *)dst; b->d = v->d; b->m = v->m; nib32_put(b->qs, v->q); break; }
    case FMT_Q5_0: { block_q5_0 *b = (void *)dst; b->d = v->d; wr32(b->qh, nib32_put(b->qs, v->q)); break; }
    case FMT_Q5_1: { block_q5_1 *b = (void *)dst; b->d = v->d; b->m = v->m; wr32(b->qh, nib32_put(b->qs, v->q)); break; }
    case FMT_Q8_0: {
        block_q8_0 *b = (void *)dst;
        b->d = v->d;
        for (int j = 0; j < QK; j++) b->qs[j] = (int8_t)(v->q[j] ^ 0x80);
        break;
    }
    case FMT_Q4_K:
    case FMT_Q5_K: {
        uint8_t *qs, *qh = NULL;
        if (type == FMT_Q4_K) {
            block_q4_k *b = (void *)dst;
            b->d = v->d; b->dmin = v->m; qs = b->qs; kq_put_scales(b->scales, v->sc, v->mn);
        } else {
            block_q5_k *b = (void *)dst;
            b->d = v->d; b->dmin = v->m; qs = b->qs; qh = b->qh; kq_put_scales(b->scales, v->sc, v->mn);
            memset(qh, 0, QK_K / 8);
        }
        memset(qs, 0, QK_K / 2);
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++) {
                int q = v->q[32 * j + l];
                qs[32 * (j / 2) + l] |= (uint8_t)((j & 1) ? (q & 15) << 4 : (q & 15));
                if (qh) qh[l] |= (uint8_t)(((q >> 4) & 1) << j);
            }
        break;
    }
    case FMT_Q6_K: {
        block_q6_k *b = (void *)dst;
        memset(b, 0, sizeof *b);
        b->d = v->d;
        for (int j = 0; j < 16; j++) b->scales[j] = (int8_t)v->sc[j];
        for (int i = 0; i < QK_K; i++) {
            int q = v->q[i];
            b->ql[q6_ql_index(i)] |= (uint8_t)(i % 128 < 64 ? q & 15 : (q & 15) << 4);
            b->qh[q6_qh_index(i)] |= (uint8_t)(((q >> 4) & 3) << q6_shift(i));
        }
        break;
    }
    default: break;
    }
}

/* Where row r (0..15) of a panel keeps its fields inside one unit. */
static void put_row_unit(int type, const pack_fmt *pf, bool crumbs, uint8_t *qdst, uint8_t *sdst, int r,
                         const unit_vals *v) {
    fp16_t *h = (fp16_t *)sdst;
    switch (type) {
    case FMT_Q4_0: case FMT_Q5_0: case FMT_Q8_0: h[r] = v->d; break;
    case FMT_Q4_1: case FMT_Q5_1: h[r] = v->d; h[16 + r] = v->m; break;
    case FMT_Q4_K: case FMT_Q5_K:
        h[r] = v->d; h[16 + r] = v->m;
        for (int s = 0; s < 8; s++) { sdst[64 + 16 * s + r] = v->sc[s]; sdst[192 + 16 * s + r] = v->mn[s]; }
        break;
    case FMT_Q6_K:
        h[r] = v->d;
        for (int s = 0; s < 16; s++) sdst[32 + 16 * s + r] = v->sc[s];
        break;
    default: break;
    }
    for (int blk = 0; blk < pf->unit / QK; blk++) {
        const uint8_t *q = v->q + QK * blk;
        uint8_t *d = qdst + (size_t)pf->qb32 * blk;
        if (type == FMT_Q8_0) {
            for (int j = 0; j < 8; j++) memcpy(d + 64 * j + 4 * r, q + 4 * j, 4);
            continue;
        }
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 4; i++)
                d[64 * c + 4 * r + i] = (uint8_t)((q[8 * c + i] & 15) | (q[8 * c + 4 + i] & 15) << 4);
        if (crumbs && type == FMT_Q6_K) {
            for (int h = 0; h < 2; h++)
                for (int i = 0; i < 4; i++) {
                    int byte = 0;
                    for (int t = 0; t < 4; t++) byte |= ((q[4 * (4 * h + t) + i] >> 4) & 3) << (2 * t);
                    d[256 + 64 * h + 4 * r + i] = (uint8_t)byte;
                }
            continue;
        }
        /* Row r owns bits 4r..4r+3 of each plane word: one nibble of byte r/2. */
        int planes = pf->qb32 == 320 ? 1 : pf->qb32 == 384 ? 2 : 0;
        for (int pl = 0; pl < planes; pl++)
            for (int j = 0; j < 8; j++) {
                int nib = 0;
                for (int i = 0; i < 4; i++) nib |= ((q[4 * j + i] >> (4 + pl)) & 1) << i;
                d[256 + 64 * pl + 8 * j + r / 2] |= (uint8_t)(nib << (4 * (r & 1)));
            }
    }
}

static void get_row_unit(int type, const pack_fmt *pf, bool crumbs, const uint8_t *qsrc, const uint8_t *ssrc,
                         int r, unit_vals *v) {
    const fp16_t *h = (const fp16_t *)ssrc;
    memset(v, 0, sizeof *v);
    switch (type) {
    case FMT_Q4_0: case FMT_Q5_0: case FMT_Q8_0: v->d = h[r]; break;
    case FMT_Q4_1: case FMT_Q5_1: v->d = h[r]; v->m = h[16 + r]; break;
    case FMT_Q4_K: case FMT_Q5_K:
        v->d = h[r]; v->m = h[16 + r];
        for (int s = 0; s < 8; s++) { v->sc[s] = ssrc[64 + 16 * s + r]; v->mn[s] = ssrc[192 + 16 * s + r]; }
        break;
    case FMT_Q6_K:
        v->d = h[r];
        for (int s = 0; s < 16; s++) v->sc[s] = ssrc[32 + 16 * s + r];
        break;
    default: break;
    }
    for (int blk = 0; blk < pf->unit / QK; blk++) {
        uint8_t *q = v->q + QK * blk;
        const uint8_t *d = qsrc + (size_t)pf->qb32 * blk;
        if (type == FMT_Q8_0) {
            for (int j = 0; j < 8; j++)
                for (int i = 0; i < 4; i++) q[4 * j + i] = d[64 * j + 4 * r + i];
            continue;
        }
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 4; i++) {
                uint8_t byte = d[64 * c + 4 * r + i];
                q[8 * c + i] = byte & 15;
                q[8 * c + 4 + i] = byte >> 4;
            }
        if (crumbs && type == FMT_Q6_K) {
            for (int h = 0; h < 2; h++)
                for (int i = 0; i < 4; i++)
                    for (int t = 0; t < 4; t++)
                        q[4 * (4 * h + t) + i] |= (uint8_t)(((d[256 + 64 * h + 4 * r + i] >> (2 * t)) & 3) << 4);
            continue;
        }
        int planes = pf->qb32 == 320 ? 1 : pf->qb32 == 384 ? 2 : 0;
        for (int pl = 0; pl < planes; pl++)
            for (int j = 0; j < 8; j++)
                for (int i = 0; i < 4; i++) {
                    int bit = 4 * r + i;
                    q[4 * j + i] |= (uint8_t)(((d[256 + 64 * pl + 8 * j + bit / 8] >> (bit % 8)) & 1) << (4 + pl));
                }
    }
}

/* Nibble chunks of a 32-k block from 16 bytes whose low nibbles are
 * elements 0..15 and high nibbles 16..31 (Q4_0, Q4_1, Q5_x): chunk c byte i
 * is q[8c+i] | q[8c+4+i] << 4, four bytes (one row) per 32-bit word. */
static void nib_chunks(const uint8_t *qs, uint8_t *d, int r) {
    const uint32_t m = 0x0f0f0f0fu;
    uint32_t a = rd32(qs), b = rd32(qs + 4), c = rd32(qs + 8), e = rd32(qs + 12);
    wr32(d + 4 * r, (a & m) | (b & m) << 4);
    wr32(d + 64 + 4 * r, (c & m) | (e & m) << 4);
    wr32(d + 128 + 4 * r, (a >> 4 & m) | (b & ~m));
    wr32(d + 192 + 4 * r, (c >> 4 & m) | (e & ~m));
}

/* The common formats without the per-element detour through unit_vals;
 * false for the others. Same bytes as put_row_unit(decode_unit(...)). */
static bool pack_fast(int type, const uint8_t *blk, uint8_t *qd, uint8_t *sd, int r) {
    fp16_t *h = (fp16_t *)(void *)sd;
    switch (type) {
    case FMT_Q4_0: {
        const block_q4_0 *b = (const void *)blk;
        h[r] = b->d;
        nib_chunks(b->qs, qd, r);
        return true;
    }
    case FMT_Q8_0: {
        const block_q8_0 *b = (const void *)blk;
        h[r] = b->d;
        for (int j = 0; j < 8; j++) wr32(qd + 64 * j + 4 * r, rd32((const uint8_t *)b->qs + 4 * j) ^ 0x80808080u);
        return true;
    }
    case FMT_Q4_K: {
        const block_q4_k *b = (const void *)blk;
        uint8_t sc[8], mn[8];
        kq_get_scales(b->scales, sc, mn);
        h[r] = b->d;
        h[16 + r] = b->dmin;
        for (int s = 0; s < 8; s++) { sd[64 + 16 * s + r] = sc[s]; sd[192 + 16 * s + r] = mn[s]; }
        /* Sub-block j: low (j even) or high (j odd) nibbles of qs[32(j/2) ..]. */
        const uint32_t m = 0x0f0f0f0fu;
        for (int j = 0; j < 8; j++) {
            const uint8_t *qs = b->qs + 32 * (j / 2);
            uint8_t *d = qd + 256 * j;
            for (int c = 0; c < 4; c++) {
                uint32_t a = rd32(qs + 8 * c), e = rd32(qs + 8 * c + 4);
                uint32_t v = (j & 1) ? (a >> 4 & m) | (e & ~m) : (a & m) | (e & m) << 4;
                wr32(d + 64 * c + 4 * r, v);
            }
        }
        return true;
    }
    default:
        return false;
    }
}

/* Zeroed memory for a packed weight. Big weights sit on 2 MiB boundaries
 * so transparent huge pages can back them (fewer TLB misses while they are
 * streamed every token); fresh anonymous pages come zeroed from the kernel,
 * so nothing is written twice. */
static void *alloc_zeroed(size_t size, size_t *alloc_bytes) {
#if defined(__linux__)
    const size_t huge = (size_t)2 << 20;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size = (size + pg - 1) & ~(pg - 1);
    bool big = size >= 2 * huge;
    size_t span = big ? size + huge : size;
    uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    uint8_t *p = m;
    if (big) {   /* trim to a 2 MiB aligned range */
        p = (uint8_t *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
        if (p > m) munmap(m, (size_t)(p - m));
        size_t tail = (size_t)(m + span - (p + size));
        if (tail) munmap(p + size, tail);
#if defined(MADV_HUGEPAGE)
        madvise(p, size, MADV_HUGEPAGE);
#endif
    }
    *alloc_bytes = size;
    return p;
#else
    void *p = NULL;
    size = align64(size);
    if (posix_memalign(&p, 64, size) != 0) return NULL;
    memset(p, 0, size);
    *alloc_bytes = size;
    return p;
#endif
}

static void free_zeroed(void *p, size_t size) {
    if (!p) return;
#if defined(__linux__)
    munmap(p, size);
#else
    (void)size;
    free(p);
#endif
}

/* The packer's writable views of kp_quants / kp_scales. */
static uint8_t *unit_quants(kpack *p, int64_t panel, int64_t unit) {
    return p->data + (kp_quants(p, panel, unit) - p->data);
}
static uint8_t *unit_scales(kpack *p, int64_t panel, int64_t unit) {
    return p->data + (kp_scales(p, panel, unit) - p->data);
}

kpack *kern_pack(const hweight *w, bool q6_crumbs, bool pairs_interleaved) {
    pack_fmt pf;
    if (!pack_fmt_of(w->type, &pf) || w->n_in <= 0 || w->n_out <= 0 || w->n_in % pf.unit) return NULL;
    if (w->row_bytes != format_row_bytes(w->type, w->n_in)) return NULL;
    kpack *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->type = w->type;
    p->q6_crumbs = q6_crumbs && w->type == FMT_Q6_K;
    p->pairs_interleaved = pairs_interleaved;
    p->n_in = w->n_in;
    p->n_out = w->n_out;
    p->n_panels = (w->n_out + KP_UNIT_ROWS - 1) / KP_UNIT_ROWS * (KP_UNIT_ROWS / KP_ROWS);
    p->units = w->n_in / pf.unit;
    if (pf.unit == 1) {
        p->q_bytes = KP_ROWS * float_size(w->type);
        p->s_bytes = 0;
    } else {
        p->q_bytes = (size_t)pf.qb32 * (pf.unit / QK);
        p->s_bytes = pf.s_bytes;
    }
    p->panel_bytes = align64((size_t)p->units * (p->q_bytes + p->s_bytes));
    p->data = alloc_zeroed((size_t)p->n_panels * p->panel_bytes, &p->alloc_bytes);
    if (!p->data) { free(p); return NULL; }

    /* Panel by panel, unit by unit: the panel's unit (a few KiB) stays in L1
     * while its 16 rows are written into it. */
    size_t ub = pf.unit == 1 ? 0 : format_get(w->type)->block_bytes * (size_t)(pf.unit / format_get(w->type)->block_elems);
    for (int64_t panel = 0; panel * KP_ROWS < w->n_out; panel++) {
        int rows = w->n_out - panel * KP_ROWS < KP_ROWS ? (int)(w->n_out - panel * KP_ROWS) : KP_ROWS;
        const uint8_t *src = w->data + (size_t)(panel * KP_ROWS) * w->row_bytes;
        if (pf.unit == 1) {
            /* A transpose: 64 columns at a time, so the rows being read and
             * the 1-2 KiB being written both stay in L1. */
            for (int64_t k0 = 0; k0 < w->n_in; k0 += 64) {
                int64_t k1 = k0 + 64 < w->n_in ? k0 + 64 : w->n_in;
                for (int r = 0; r < rows; r++) {
                    const uint8_t *srow = src + (size_t)r * w->row_bytes;
                    size_t es = float_size(w->type);
                    for (int64_t k = k0; k < k1; k++)
                        memcpy(unit_quants(p, panel, k) + es * (size_t)r, srow + es * (size_t)k, es);
                }
            }
            continue;
        }
        unit_vals v;
        for (int64_t u = 0; u < p->units; u++)
            for (int r = 0; r < rows; r++) {
                const uint8_t *blk = src + (size_t)r * w->row_bytes + (size_t)u * ub;
                uint8_t *qd = unit_quants(p, panel, u), *sd = unit_scales(p, panel, u);
                if (pack_fast(w->type, blk, qd, sd, r)) continue;
                decode_unit(w->type, blk, &v);
                put_row_unit(w->type, &pf, p->q6_crumbs, qd, sd, r, &v);
            }
    }
    return p;
}

void kern_pack_free(kpack *p) {
    if (!p) return;
    free_zeroed(p->data, p->alloc_bytes);
    free(p);
}

/* Row `row` back into the GGUF layout, one unit at a time, and through the
 * reference dequantizer: the same floats as from the original row. */
static void pack_get_row(const kpack *p, int64_t row, float *out) {
    pack_fmt pf;
    pack_fmt_of(p->type, &pf);
    int r = (int)(row % KP_ROWS);
    if (pf.unit == 1) {
        size_t es = float_size(p->type);
        uint8_t buf[4];
        for (int64_t k = 0; k < p->n_in; k++) {
            memcpy(buf, kp_quants(p, row / KP_ROWS, k) + (size_t)r * es, es);
            format_dequantize_row(p->type, buf, out + k, 1);
        }
        return;
    }
    unit_vals v;
    union { block_q6_k q6; block_q5_k q5; block_q8_0 q8; } block;   /* the largest units */
    for (int64_t u = 0; u < p->units; u++) {
        get_row_unit(p->type, &pf, p->q6_crumbs, kp_quants(p, row / KP_ROWS, u), kp_scales(p, row / KP_ROWS, u), r, &v);
        encode_unit(p->type, &v, (uint8_t *)&block);
        format_dequantize_row(p->type, &block, out + u * pf.unit, pf.unit);
    }
}

/* ---- weights ------------------------------------------------------------------ */

/* The original rows are a private read-only map of the GGUF file; once packed
 * they are never read again (unless a path without packing runs), so their
 * pages are handed back. MADV_PAGEOUT keeps the contents (a later read faults
 * them in from the file) and leaves memory that is not a file map intact, so
 * it is safe whatever `data` points to; MADV_DONTNEED would zero anonymous
 * memory (weights built in memory by tests). */
static void release_source(const hweight *w) {
#if defined(__linux__) && defined(MADV_PAGEOUT)
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    uintptr_t lo = ((uintptr_t)w->data + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    uintptr_t hi = ((uintptr_t)w->data + w->row_bytes * (size_t)w->n_out) & ~((uintptr_t)pg - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_PAGEOUT);
#else
    (void)w;
#endif
}

int kern_prepare_weight(const kern_table *t, hweight *w) {
    if (w->packed) return 0;
    const kern_path *path = t->matmul;
    if (!path || !path->packs(w->type)) return 0;
    kpack *p = kern_pack(w, path->q6_crumbs, path->pairs_interleaved);
    if (!p) {
        pack_fmt pf;
        if (pack_fmt_of(w->type, &pf) && w->n_in % pf.unit == 0 && w->row_bytes == format_row_bytes(w->type, w->n_in))
            return -1;          /* allocation failed */
        return 0;               /* a shape the layout does not take: stay scalar */
    }
    w->packed = p;
    w->packed_path = path;
    release_source(w);
    return 0;
}

void kern_release_weight(hweight *w) {
    if (!w->packed) return;
    kern_pack_free(w->packed);
    w->packed = NULL;
    w->packed_path = NULL;
}

void kern_get_row(const hweight *w, int64_t row, float *out) {
    if (w->packed) pack_get_row(w->packed, row, out);
    else format_dequantize_row(w->type, w->data + (size_t)row * w->row_bytes, out, w->n_in);
}
