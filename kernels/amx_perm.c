/* The OS side of the AMX path: Linux gives a process the tile data state
 * (8 KiB of xsave area per thread) only on request, arch_prctl
 * ARCH_REQ_XCOMP_PERM with XFEATURE_XTILEDATA, made once per process before
 * the first tile instruction. Refused (an old kernel, a sandbox that blocks
 * it), the path is unavailable and one line on stderr says why; the AVX-512
 * path runs instead, with the same bits. */
#include "kernels/kern_amx.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

int amx_request_permission(bool refuse, char *why, size_t why_len) {
    if (refuse) {
        snprintf(why, why_len, "the tile permission request was refused (HEARTH_AMX_DENY)");
        return -1;
    }
#if defined(__linux__) && defined(__x86_64__)
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        snprintf(why, why_len, "arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) failed: %s", strerror(errno));
        return -1;
    }
    unsigned long mask = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &mask) != 0 || !(mask & (1ul << XFEATURE_XTILEDATA))) {
        snprintf(why, why_len, "arch_prctl granted XTILEDATA but does not report it");
        return -1;
    }
    return 0;
#else
    snprintf(why, why_len, "tiles need Linux on x86-64");
    return -1;
#endif
}

static bool granted;
static char refusal[200];

static void request_once(void) {
    const char *deny = getenv("HEARTH_AMX_DENY");
    bool refuse = deny && *deny && strcmp(deny, "0") != 0;
    granted = amx_request_permission(refuse, refusal, sizeof refusal) == 0;
    if (!granted) fprintf(stderr, "hearth: AMX tiles unavailable: %s; the AVX-512 path runs instead\n", refusal);
}

bool amx_permission(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, request_once);
    return granted;
}

const char *amx_status(void) {
    static char buf[240];
    if (!kernels_cpu_has_amx()) return "not on this CPU";
    if (!kernels_path_available(KPATH_AVX512)) return "no AVX-512 beside them";
    if (!amx_permission()) {
        snprintf(buf, sizeof buf, "refused: %s", refusal);
        return buf;
    }
#if defined(__x86_64__)
    amx_cfg want, load;
    amx_config_build(&want);
    load = want;
    if (!amx_config_live(&want, &load)) return "the tile config did not read back";
    AMX_RELEASE();
#endif
    return "usable";
}

const char *kernels_amx_status(void) { return amx_status(); }
