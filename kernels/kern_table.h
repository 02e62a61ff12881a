/* One kernel table per CPU path: everything a CPU executor calls for one
 * forward step (matmul rows and activation quantization with their packing
 * rules, rmsnorm, rope, the fp16 KV store, the GLU, attention) and the probe
 * that says whether this CPU can run it. An executor takes one table for a
 * model at load and reads nothing else: no process-wide path is consulted
 * while a pass runs. */
#ifndef HEARTH_KERN_TABLE_H
#define HEARTH_KERN_TABLE_H

#include <stdbool.h>
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "kernels/attention.h"

struct kern_path;

/* The gated FFN activations a table holds: silu(gate) * up, gelu_tanh(gate) * up. */
typedef enum { KERN_GLU_SILU = 0, KERN_GLU_GELU_TANH, KERN_GLU_COUNT } kern_glu;

typedef struct kern_table {
    kern_path_id id;
    const char *name;
    /* The probe: true when this CPU and OS can run every entry. */
    bool (*available)(void);
    /* Matmul rows, activation quantization and the packing rules (which
     * formats it repacks, the layout variants), private to kernels/: used
     * through kern_prepare_weight and kern_matmul. Each rows call is told
     * the pool worker that runs it, so a path may give workers different
     * units. */
    const struct kern_path *matmul;
    op_rmsnorm_fn rmsnorm;
    op_rope_apply_fn rope;
    op_to_fp16_fn to_fp16;
    op_swiglu_fn glu[KERN_GLU_COUNT];
    attn_group_fn attention;
} kern_table;

/* The table of a path this build has, or NULL (whether or not it can run). */
const kern_table *kern_table_of(kern_path_id id);
/* The table of a path this CPU can run, or NULL. */
const kern_table *kern_table_get(kern_path_id id);

#endif
