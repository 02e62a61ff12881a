/* CPU probe and path dispatch. A path is chosen at run time from what the
 * CPU and the OS report (cpuid + xgetbv on x86, HWCAP on Linux/aarch64,
 * sysctl on macOS), never from build flags alone. HEARTH_KERNELS=name forces
 * one (when this CPU can run it), so two paths can be compared in one binary. */
#include "kernels/kernels.h"
#include "kernels/kern_path.h"
#include "kernels/kern_table.h"
#include "kernels/kern_amx.h"
#include "kernels/kern_sme.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#ifndef PR_SME_GET_VL
#define PR_SME_GET_VL 64
#endif
#ifndef PR_SME_VL_LEN_MASK
#define PR_SME_VL_LEN_MASK 0xffff
#endif
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

typedef struct {
    bool probed;
    /* x86 */
    bool avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avxvnni, amx;
    /* aarch64 */
    bool neon, dotprod, i8mm, sme, sme2;
    int svl;    /* the streaming vector length in bytes (0: no SME2) */
} cpu_caps;

static cpu_caps caps;
static _Atomic int current_path = -1;   /* -1: not chosen yet */

#if defined(__x86_64__)
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void probe_x86(cpu_caps *c) {
    unsigned a, b, cx, d;
    if (!__get_cpuid(1, &a, &b, &cx, &d)) return;
    bool osxsave = cx & (1u << 27), avx = cx & (1u << 28);
    c->fma = cx & (1u << 12);
    c->f16c = cx & (1u << 29);
    if (!osxsave || !avx) return;
    uint64_t xcr0 = xgetbv0();
    bool os_avx = (xcr0 & 0x6) == 0x6;            /* XMM and YMM state */
    bool os_avx512 = (xcr0 & 0xe6) == 0xe6;       /* plus opmask, ZMM_Hi256, Hi16_ZMM */
    bool os_amx = (xcr0 & 0x60000) == 0x60000;    /* XTILECFG, XTILEDATA */
    if (!os_avx) { c->fma = c->f16c = false; return; }
    if (!__get_cpuid_count(7, 0, &a, &b, &cx, &d)) return;
    c->avx2 = b & (1u << 5);
    if (os_avx512) {
        c->avx512f = b & (1u << 16);
        c->avx512dq = b & (1u << 17);
        c->avx512bw = b & (1u << 30);
        c->avx512vl = b & (1u << 31);
        c->avx512vnni = cx & (1u << 11);
    }
    c->amx = os_amx && (d & (1u << 24)) && (d & (1u << 25));  /* AMX-TILE, AMX-INT8 */
    if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) {
        c->avxvnni = a & (1u << 4);
        c->avx512bf16 = os_avx512 && (a & (1u << 5));
    }
}
#endif

#if defined(__aarch64__)
static void probe_arm(cpu_caps *c) {
    c->neon = true;   /* Advanced SIMD is mandatory on AArch64 */
#if defined(__linux__)
    unsigned long h1 = getauxval(AT_HWCAP), h2 = getauxval(AT_HWCAP2);
    c->dotprod = h1 & (1ul << 20);      /* HWCAP_ASIMDDP */
    c->i8mm = h2 & (1ul << 13);         /* HWCAP2_I8MM */
    c->sme = h2 & (1ul << 23);          /* HWCAP2_SME */
    c->sme2 = h2 & (1ul << 37);         /* HWCAP2_SME2 */
    if (c->sme2) {
        int vl = prctl(PR_SME_GET_VL, 0, 0, 0, 0);   /* this thread's, inherited by the pool's */
        c->svl = vl < 0 ? 0 : vl & PR_SME_VL_LEN_MASK;
    }
#elif defined(__APPLE__)
    int v = 0;
    size_t len = sizeof v;
    if (sysctlbyname("hw.optional.arm.FEAT_DotProd", &v, &len, NULL, 0) == 0) c->dotprod = v;
    len = sizeof v; v = 0;
    if (sysctlbyname("hw.optional.arm.FEAT_I8MM", &v, &len, NULL, 0) == 0) c->i8mm = v;
    len = sizeof v; v = 0;
    if (sysctlbyname("hw.optional.arm.FEAT_SME", &v, &len, NULL, 0) == 0) c->sme = v;
    len = sizeof v; v = 0;
    if (sysctlbyname("hw.optional.arm.FEAT_SME2", &v, &len, NULL, 0) == 0) c->sme2 = v;
    if (c->sme2) c->svl = (int)sme_svl_bytes();
#endif
}
#endif

static char summary[256];

static void probe_once(void) {
    cpu_caps c = {0};
#if defined(__x86_64__)
    probe_x86(&c);
#elif defined(__aarch64__)
    probe_arm(&c);
#endif
    c.probed = true;
    caps = c;
    struct { bool on; const char *name; } f[] = {
        { c.avx2, "avx2" }, { c.fma, "fma" }, { c.f16c, "f16c" }, { c.avxvnni, "avx-vnni" },
        { c.avx512f, "avx512f" }, { c.avx512bw, "avx512bw" }, { c.avx512vl, "avx512vl" },
        { c.avx512dq, "avx512dq" }, { c.avx512vnni, "avx512vnni" }, { c.avx512bf16, "avx512bf16" },
        { c.amx, "amx" }, { c.neon, "neon" }, { c.dotprod, "dotprod" }, { c.i8mm, "i8mm" },
        { c.sme, "sme" }, { c.sme2, "sme2" },
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].on) continue;
        size_t l = strlen(summary);
        snprintf(summary + l, sizeof summary - l, "%s%s", l ? " " : "", f[i].name);
    }
    if (!summary[0]) snprintf(summary, sizeof summary, "none");
}

static const cpu_caps *get_caps(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, probe_once);
    return &caps;
}

const char *kernels_cpu_summary(void) {
    get_caps();
    return summary;
}

bool kernels_cpu_has_amx(void) { return get_caps()->amx; }

const char *kernels_sme_status(void) {
    static char line[128];
    const cpu_caps *c = get_caps();
    if (!c->sme2) return "not usable: no SME2";
#if defined(__aarch64__)
    if (c->svl != SME_SVL_BYTES) {
        snprintf(line, sizeof line, "not usable: streaming vector %d-bit, the kernels need %d", 8 * c->svl,
                 8 * SME_SVL_BYTES);
        return line;
    }
    if (!kernels_cpu_can(KPATH_SME2)) return "not usable: no dotprod";
    int n = sme_workers();
    snprintf(line, sizeof line, "usable (streaming vector %d-bit, %d SME worker%s)", 8 * c->svl, n, n == 1 ? "" : "s");
    return line;
#else
    (void)line;
    return "not usable: not an aarch64 build";
#endif
}

#if defined(__aarch64__)
bool kernels_cpu_has_i8mm(void) { return get_caps()->i8mm; }
#endif

const kern_path *kern_path_get(kern_path_id id) {
    const kern_table *t = kern_table_of(id);
    return t ? t->matmul : NULL;
}

/* The probe behind each table's available(). */
bool kernels_cpu_can(kern_path_id p) {
    const cpu_caps *c = get_caps();
    switch (p) {
    case KPATH_SCALAR: return true;
    case KPATH_AVX2: return c->avx2 && c->fma && c->f16c;
    case KPATH_AVX512:
        return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512vnni &&
               c->avx2 && c->fma && c->f16c;
    case KPATH_NEON: return c->neon && c->dotprod;
    /* the layouts assume one 16-row x 4-k unit per streaming vector */
    case KPATH_SME2: return c->neon && c->dotprod && c->sme2 && c->svl == SME_SVL_BYTES;
    /* The permission last: it is asked for only where tiles exist. */
    case KPATH_AMX: return c->amx && kernels_cpu_can(KPATH_AVX512) && amx_permission();
    default: return false;
    }
}

bool kernels_path_available(kern_path_id p) { return kern_table_get(p) != NULL; }

const char *kernels_path_name(kern_path_id p) {
    static const char *names[KPATH_COUNT] = { "scalar", "avx2", "avx512", "neon", "amx", "sme2" };
    return (unsigned)p < KPATH_COUNT ? names[p] : "unknown";
}

kern_path_id kernels_path_from_name(const char *name) {
    if (!name) return KPATH_COUNT;
    for (int p = 0; p < KPATH_COUNT; p++)
        if (strcmp(name, kernels_path_name((kern_path_id)p)) == 0) return (kern_path_id)p;
    return KPATH_COUNT;
}

static kern_path_id best_path(void) {
    static const kern_path_id order[] = { KPATH_AMX, KPATH_AVX512, KPATH_AVX2, KPATH_SME2, KPATH_NEON };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (kernels_path_available(order[i])) return order[i];
    return KPATH_SCALAR;
}

kern_path_id kernels_select(void) {
    kern_path_id p = best_path();
    const char *env = getenv("HEARTH_KERNELS");
    if (env && *env && strcmp(env, "auto") != 0) {
        kern_path_id f = kernels_path_from_name(env);
        if (f == KPATH_COUNT)
            fprintf(stderr, "hearth: HEARTH_KERNELS=%s is not a path (scalar, avx2, avx512, amx, neon, sme2); using %s\n",
                    env, kernels_path_name(p));
        else if ((f == KPATH_SME2 || f == KPATH_AMX) && !kernels_path_available(f)) {
            /* asked for a matrix unit: a silent vector run would hide it */
            fprintf(stderr, "hearth: HEARTH_KERNELS=%s: %s\n", env,
                    f == KPATH_SME2 ? kernels_sme_status() : kernels_amx_status());
            exit(2);
        } else if (!kernels_path_available(f))
            fprintf(stderr, "hearth: HEARTH_KERNELS=%s cannot run on this CPU or build; using %s\n",
                    env, kernels_path_name(p));
        else
            p = f;
    }
    atomic_store(&current_path, (int)p);
    return p;
}

bool kernels_force(kern_path_id p) {
    if (!kernels_path_available(p)) return false;
    atomic_store(&current_path, (int)p);
    return true;
}

/* The first use selects (honouring HEARTH_KERNELS) if nobody did. */
kern_path_id kernels_current(void) {
    int p = atomic_load(&current_path);
    return p < 0 ? kernels_select() : (kern_path_id)p;
}
