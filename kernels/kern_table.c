/* The kernel tables of the paths this build has (see kern_table.h): the one
 * place that says which vector version of each step a path runs. */
#include "kernels/kern_table.h"
#include "kernels/kern_path.h"
#include "kernels/kern_amx.h"
#include "kernels/kern_sme.h"

static bool scalar_available(void) { return true; }
#if defined(__x86_64__)
static bool avx2_available(void) { return kernels_cpu_can(KPATH_AVX2); }
static bool avx512_available(void) { return kernels_cpu_can(KPATH_AVX512); }
static bool amx_available(void) { return kernels_cpu_can(KPATH_AMX); }
#endif
#if defined(__aarch64__)
static bool neon_available(void) { return kernels_cpu_can(KPATH_NEON); }
static bool sme2_available(void) { return kernels_cpu_can(KPATH_SME2); }
#endif

static const kern_table tables[KPATH_COUNT] = {
    [KPATH_SCALAR] = { KPATH_SCALAR, "scalar", scalar_available, &kern_path_scalar,
                       op_rmsnorm, op_rope_apply, op_to_fp16, { op_swiglu, op_geglu }, attn_group_scalar },
#if defined(__x86_64__)
    [KPATH_AVX2] = { KPATH_AVX2, "avx2", avx2_available, &kern_path_avx2,
                     op_rmsnorm_avx2, op_rope_apply_avx2, op_to_fp16_avx2, { op_swiglu, op_geglu_avx2 }, attn_group_f16c },
    [KPATH_AVX512] = { KPATH_AVX512, "avx512", avx512_available, &kern_path_avx512,
                       op_rmsnorm_avx512, op_rope_apply_avx512, op_to_fp16_avx512,
                       { op_swiglu_avx512, op_geglu_avx512 }, attn_group_avx512 },
    /* The AVX-512 table but for the matmul (whose small batches are the AVX-512 rows). */
    [KPATH_AMX] = { KPATH_AMX, "amx", amx_available, &kern_path_amx,
                    op_rmsnorm_avx512, op_rope_apply_avx512, op_to_fp16_avx512,
                    { op_swiglu_avx512, op_geglu_avx512 }, attn_group_avx512 },
#endif
#if defined(__aarch64__)
    [KPATH_NEON] = { KPATH_NEON, "neon", neon_available, &kern_path_neon,
                     op_rmsnorm_neon, op_rope_apply_neon, op_to_fp16_neon, { op_swiglu, op_geglu_neon }, attn_group_neon },
    /* The NEON table but for the matmul (whose NEON workers run the NEON rows). */
    [KPATH_SME2] = { KPATH_SME2, "sme2", sme2_available, &kern_path_sme2,
                     op_rmsnorm_neon, op_rope_apply_neon, op_to_fp16_neon, { op_swiglu, op_geglu_neon }, attn_group_neon },
#endif
};

const kern_table *kern_table_of(kern_path_id id) {
    if ((unsigned)id >= KPATH_COUNT || !tables[id].matmul) return NULL;
    return &tables[id];
}

const kern_table *kern_table_get(kern_path_id id) {
    const kern_table *t = kern_table_of(id);
    return t && t->available() ? t : NULL;
}
