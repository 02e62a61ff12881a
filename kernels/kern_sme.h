/* Private to kernels/: the SME2 path (kern_sme.c). It reads the NEON path's
 * panels (the same packed bytes: one resident copy of the weights) and gives
 * its bits. Pool workers below sme_workers() run their rows on the streaming
 * matrix unit (SMOPA tiles for M > 1, streaming SDOT for M = 1); the others,
 * and the float formats, run the NEON rows. */
#ifndef HEARTH_KERN_SME_H
#define HEARTH_KERN_SME_H

#include <stdbool.h>
#include <stdint.h>
#include "kernels/kern_path.h"

/* The streaming vector length the layouts assume: one 16-row x 4-k int8
 * unit of a panel is one vector, one 16 x 16 int32 ZA tile one block's sums. */
#define SME_SVL_BYTES 64

#if defined(__aarch64__)
extern const kern_path kern_path_sme2;
/* The streaming vector length in bytes (RDSVL); call only where SME exists. */
uint64_t sme_svl_bytes(void);
/* Workers 0 .. n-1 of a pool run SME (default: HEARTH_SME_WORKERS, else
 * min(2, cores - 1), at least 1: the unit is shared by a cluster). Tests
 * set it; 0 runs every worker on NEON (a control). */
int sme_workers(void);
void sme_set_workers(int n);
/* 16 x 16 SMOPA tiles and M = 1 streaming panels computed in this process
 * (the tests' control that the matrix unit ran, not a NEON fallback). */
uint64_t sme_tile_runs(void);
uint64_t sme_gemv_runs(void);
#endif

#endif
