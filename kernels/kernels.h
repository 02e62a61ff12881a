/* The kernel boundary: the matmul entry points, the weight type, and the
 * choice of a CPU path. A path's kernels are one table (kern_table.h) that
 * an executor takes per model; kernels_select() says which path a model
 * loaded without an explicit choice gets (the hardware probe, or
 * HEARTH_KERNELS). */
#ifndef HEARTH_KERNELS_H
#define HEARTH_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "kernels/formats.h"

struct hpool;
struct kern_path;

/* A weight matrix: n_out rows of n_in elements in GGUF's row-major layout.
 * `data` points into the mapped file (or a repacked copy, see `packed`). */
typedef struct hweight {
    int type;
    int64_t n_in, n_out;
    const uint8_t *data;
    size_t row_bytes;
    void *packed;        /* path-specific layout made at load, or NULL */
    const struct kern_path *packed_path;   /* the path (of the table it was prepared with)
                                            * that made `packed` and computes it; NULL when not packed */
} hweight;

/* Scratch the matmul needs for quantized activations; sized once at load
 * for the largest step so no step allocates. */
typedef struct kern_scratch {
    void *buf;
    size_t size;
} kern_scratch;

size_t kern_scratch_bytes(int64_t max_rows, int64_t max_n_in);

/* y[m * n_out + n] = sum_k W[n][k] * x[m * n_in + k] for m < M.
 * A row's result is bit-identical for any M (batch invariance). */
void kern_matmul(const hweight *w, int M, const float *x, float *y,
                 kern_scratch *scratch, struct hpool *pool);

/* Several weights that read the same input (q|k|v, gate|up) in one call:
 * the activations are quantized once and the rows of all of them are handed
 * out as one job. Each ys[i] is exactly what kern_matmul(ws[i]) would give. */
#define KERN_MAX_FUSED 3
void kern_matmul_n(int count, const hweight *const *ws, int M, const float *x, float *const *ys,
                   kern_scratch *scratch, struct hpool *pool);

/* Dequantize row `row` of a weight (embedding lookup). */
void kern_get_row(const hweight *w, int64_t row, float *out);

/* Repack a weight into the layout of a kernel table's path (may be a no-op:
 * the path's packing rules say which formats it repacks). Returns 0 or -1 on
 * allocation failure. */
struct kern_table;
int kern_prepare_weight(const struct kern_table *t, hweight *w);
void kern_release_weight(hweight *w);

/* Path selection: the default for models loaded after it. */
/* KPATH_AMX: the AVX-512 path with its batches of 16 rows or more on AMX
 * int8 tiles (same packed weights, same bits). */
/* KPATH_SME2: the NEON path with some pool workers' rows on the SME2 matrix
 * unit (same packed weights, same bits); only with a 512-bit streaming vector. */
typedef enum { KPATH_SCALAR = 0, KPATH_AVX2, KPATH_AVX512, KPATH_NEON, KPATH_AMX, KPATH_SME2, KPATH_COUNT } kern_path_id;
/* Probe the CPU (honouring HEARTH_KERNELS); returns the selected path. */
kern_path_id kernels_select(void);
/* Force a path (tests, bench). Returns false if this CPU or build cannot run it. */
bool kernels_force(kern_path_id p);
kern_path_id kernels_current(void);
const char *kernels_path_name(kern_path_id p);
bool kernels_path_available(kern_path_id p);
kern_path_id kernels_path_from_name(const char *name); /* KPATH_COUNT if unknown */
/* The CPU features the probe found, e.g. "avx2 fma f16c avx512f ..." (for logs). */
const char *kernels_cpu_summary(void);
/* The CPU reports AMX-TILE and AMX-INT8 and the OS enables their state. */
bool kernels_cpu_has_amx(void);
/* "usable", or why the AMX tiles are not (the CPU, the OS permission, a
 * tile config that does not read back). */
const char *kernels_amx_status(void);
/* For `hearth --version`: "usable (...)" with the SME workers, or why the
 * SME2 path is not (no SME2, another streaming vector length). */
const char *kernels_sme_status(void);

#endif
