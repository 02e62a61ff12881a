/* Private to kernels/kern_amx.c: the AMX tile instructions the GEMM uses,
 * as inline asm, or (KERN_AMX_EMULATE, a test build) as a scalar model of
 * the tile registers that a machine without AMX runs.
 *
 * Inline asm rather than GCC's intrinsics: GCC 12's _tile_loadconfig,
 * _tile_loadd and _tile_stored are asm statements that name no memory
 * operand, so the compiler may drop the stores that build a config (they
 * look dead) or move reads of a stored tile before the store. Every
 * statement here clobbers memory. Tile numbers are literals (the
 * instructions encode them).
 *
 * The model follows the ISA's rules for what it runs: loads read `rows` rows
 * of `colsb` bytes at `stride` and zero the rest of the register; TDPBSSD
 * C[m][n] += sum over k of A[m][k] * B[k/4][4n + k%4] (signed bytes) and
 * checks the shapes it multiplies agree (a mismatch is #UD on hardware: the
 * model aborts). */
#ifndef HEARTH_AMX_OPS_H
#define HEARTH_AMX_OPS_H

#include <stdint.h>
#include <string.h>

/* Palette 1 config: byte 0 palette, 16 + 2t: colsb of tile t (uint16), 48 + t: rows. */
typedef struct { uint8_t b[64]; } __attribute__((aligned(64))) amx_cfg;

#ifndef KERN_AMX_EMULATE

#define AMX_LDTILECFG(cfg) __asm__ volatile("ldtilecfg %0" : : "m"(*(const amx_cfg *)(cfg)) : "memory")
#define AMX_STTILECFG(cfg) __asm__ volatile("sttilecfg %0" : "=m"(*(amx_cfg *)(cfg)) : : "memory")
#define AMX_RELEASE() __asm__ volatile("tilerelease" : : : "memory")
#define AMX_ZERO(t) __asm__ volatile("tilezero %%tmm" #t : : : "memory")
#define AMX_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t : : "r"(base), "r"((int64_t)(stride)) : "memory")
#define AMX_STORE(t, base, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" : : "r"(base), "r"((int64_t)(stride)) : "memory")
/* tmm c += tmm a . tmm b (AT&T order: b, a, c) */
#define AMX_DPBSSD(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c : : : "memory")

#else

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    amx_cfg cfg;
    uint8_t t[8][16][64];
} amx_emu_state;

static _Thread_local amx_emu_state amx_emu;
/* Test hook: when set, a loaded config loses its first colsb, as a config
 * whose stores the compiler dropped would. */
static int amx_emu_drop_colsb;

static inline int amx_emu_colsb(int t) { return amx_emu.cfg.b[16 + 2 * t] | amx_emu.cfg.b[17 + 2 * t] << 8; }
static inline int amx_emu_rows(int t) { return amx_emu.cfg.b[48 + t]; }

static inline void amx_emu_fault(const char *what) {
    fprintf(stderr, "amx model: %s\n", what);
    abort();
}

static inline void amx_emu_ldtilecfg(const void *cfg) {
    memcpy(&amx_emu.cfg, cfg, sizeof amx_emu.cfg);
    if (amx_emu_drop_colsb) amx_emu.cfg.b[16] = amx_emu.cfg.b[17] = 0;
    if (amx_emu.cfg.b[0] != 1) amx_emu_fault("palette is not 1");
    for (int t = 0; t < 8; t++)
        if (amx_emu_colsb(t) > 64 || amx_emu_rows(t) > 16) amx_emu_fault("tile shape beyond 16 x 64");
    memset(amx_emu.t, 0, sizeof amx_emu.t);
}

static inline void amx_emu_load(int t, const void *base, int64_t stride) {
    int rows = amx_emu_rows(t), cb = amx_emu_colsb(t);
    if (!rows || !cb) amx_emu_fault("load into an unconfigured tile");
    memset(amx_emu.t[t], 0, sizeof amx_emu.t[t]);
    for (int r = 0; r < rows; r++) memcpy(amx_emu.t[t][r], (const uint8_t *)base + r * stride, (size_t)cb);
}

static inline void amx_emu_store(int t, void *base, int64_t stride) {
    int rows = amx_emu_rows(t), cb = amx_emu_colsb(t);
    if (!rows || !cb) amx_emu_fault("store from an unconfigured tile");
    for (int r = 0; r < rows; r++) memcpy((uint8_t *)base + r * stride, amx_emu.t[t][r], (size_t)cb);
}

static inline void amx_emu_dpbssd(int c, int a, int b) {
    int M = amx_emu_rows(c), N = amx_emu_colsb(c) / 4, K4 = amx_emu_colsb(a) / 4;
    if (amx_emu_rows(a) != M || amx_emu_rows(b) != K4 || amx_emu_colsb(b) != amx_emu_colsb(c) ||
        amx_emu_colsb(a) % 4 || !M || !N)
        amx_emu_fault("tdpbssd shapes disagree");
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int32_t s;
            memcpy(&s, &amx_emu.t[c][m][4 * n], 4);
            for (int g = 0; g < K4; g++)
                for (int i = 0; i < 4; i++)
                    s += (int32_t)(int8_t)amx_emu.t[a][m][4 * g + i] * (int8_t)amx_emu.t[b][g][4 * n + i];
            memcpy(&amx_emu.t[c][m][4 * n], &s, 4);
        }
}

#define AMX_LDTILECFG(c_) amx_emu_ldtilecfg(c_)
#define AMX_STTILECFG(c_) memcpy((c_), &amx_emu.cfg, sizeof amx_emu.cfg)
#define AMX_RELEASE() memset(&amx_emu, 0, sizeof amx_emu)
#define AMX_ZERO(t_) memset(amx_emu.t[t_], 0, sizeof amx_emu.t[t_])
#define AMX_LOAD(t_, base, stride) amx_emu_load(t_, base, (int64_t)(stride))
#define AMX_STORE(t_, base, stride) amx_emu_store(t_, base, (int64_t)(stride))
#define AMX_DPBSSD(c, a, b) amx_emu_dpbssd(c, a, b)

#endif
#endif
