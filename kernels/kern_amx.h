/* Private to kernels/: the AMX int8 tile path (kern_amx.c) and the OS
 * permission it needs (amx_perm.c). The path reads the AVX-512 path's panels
 * (one resident copy of the weights) and gives its bits: for M >= AMX_M_MIN
 * a batch runs on tiles, below it (and for the float formats) the AVX-512
 * rows run. */
#ifndef HEARTH_KERN_AMX_H
#define HEARTH_KERN_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include "kernels/kern_path.h"
#include "kernels/amx_ops.h"

/* Asks the kernel for the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA); refuse: act as if it said no (tests). 0 on success,
 * else -1 with the reason in why. */
int amx_request_permission(bool refuse, char *why, size_t why_len);
/* Once per process: the request above (refused when HEARTH_AMX_DENY is set
 * to a non-empty value other than 0). On refusal one line on stderr says why. */
bool amx_permission(void);
/* For `hearth --version`: "usable", or why the tiles are not. */
const char *amx_status(void);

/* The one tile config of the GEMM (see kern_amx.c). */
void amx_config_build(amx_cfg *c);
/* Loads `load` into this thread's tile config, reads it back and compares
 * it with `want`: true when the config is live. `load` differs from `want`
 * only in tests (the planted wrong colsb). */
bool amx_config_live(const amx_cfg *want, const amx_cfg *load);
/* The emulated build's versions (tests only, kernels/kern_amx.c compiled
 * with KERN_AMX_EMULATE). */
bool amx_config_live_emu(const amx_cfg *want, const amx_cfg *load);
void amx_emu_set_drop_colsb(bool on);

/* Rows per A tile; the smallest batch that runs on tiles: measured
 * (bench_matmul -t 2, Q4_0 2048 x 2048) M = 16 434 vs 429 GOPS, 24 542 vs
 * 474 (the AVX-512 rows ahead), 32 416 vs 490, 64 340 vs 410 (tiles ahead). */
#define AMX_TILE_M 16
#define AMX_M_MIN 32

extern const kern_path kern_path_amx;
extern const kern_path kern_path_amx_emu;
/* Rows calls that ran on tiles, in this process (tests: the path is taken). */
uint64_t amx_tile_runs(void);
uint64_t amx_tile_runs_emu(void);
/* True when `type` runs on tiles (the other packed formats run the AVX-512 rows). */
bool amx_tiles_format(int type);
/* Whether a rows call of `type` with M activation rows runs on tiles. */
bool amx_tiles_take(int type, int M);
bool amx_tiles_take_emu(int type, int M);

#endif
