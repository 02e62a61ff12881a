/* The SME ABI routines of kernels/sme_abi.c, where the CPU has SME (qemu
 * -cpu max,sme512=on; skipped elsewhere):
 *  - a lazy ZA save: a function with live ZA calls a private-ZA function
 *    that starts new ZA, so that one's prologue commits the save through
 *    __arm_tpidr2_save and the caller reloads it through
 *    __arm_tpidr2_restore; every byte of ZA must come back (control: the
 *    callee really changed ZA, so a missing save could not pass);
 *  - __arm_sme_state: SME present, PSTATE.SM and PSTATE.ZA as they are;
 *  - __arm_get_current_vg: the streaming VG inside a streaming function;
 *  - __arm_za_disable: ZA off afterwards.
 * Built with +sme2 (tests only; the library's other files have no SME). */
#include "tests/test.h"

#include <arm_sme.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>

typedef struct { uint64_t x0, x1; } sme_state;
sme_state __arm_sme_state(void) __arm_streaming_compatible;
uint64_t __arm_get_current_vg(void) __arm_streaming_compatible;
/* __arm_za_disable is declared by arm_sme.h */

enum { SVL_MAX = 256 };
static uint8_t seen_in_callee[SVL_MAX];

/* A private-ZA function with new ZA: writes a pattern of its own to ZA
 * (row 0 of the byte tile) and reads it back. */
__arm_locally_streaming __arm_new("za") __attribute__((noinline)) static void clobber_za(void) {
    svbool_t pt = svptrue_b8();
    svwrite_hor_za8_u8_m(0, 0, pt, svdup_n_u8(0xa5));
    svst1_u8(pt, seen_in_callee, svread_hor_za8_u8_m(svdup_n_u8(0), pt, 0, 0));
}

__attribute__((noinline)) static void private_call(void) { clobber_za(); }

/* Fills every ZA slice with a pattern, calls out, and counts the bytes that
 * did not come back. */
__arm_locally_streaming __arm_new("za") __attribute__((noinline)) static int za_round_trip(uint64_t *svl_out) {
    const uint64_t svl = svcntsb();
    *svl_out = svl;
    svbool_t pt = svptrue_b8();
    for (uint32_t s = 0; s < svl; s++)
        svwrite_hor_za8_u8_m(0, s, pt, svadd_n_u8_x(pt, svindex_u8(0, 1), (uint8_t)(7 * s + 1)));
    private_call();
    int bad = 0;
    for (uint32_t s = 0; s < svl; s++) {
        svuint8_t want = svadd_n_u8_x(pt, svindex_u8(0, 1), (uint8_t)(7 * s + 1));
        svuint8_t got = svread_hor_za8_u8_m(svdup_n_u8(0), pt, 0, s);
        bad += (int)svcntp_b8(pt, svcmpne_u8(pt, got, want));
    }
    return bad;
}

__arm_locally_streaming __attribute__((noinline)) static uint64_t vg_streaming(void) { return __arm_get_current_vg(); }

int main(void) {
    if (!(getauxval(AT_HWCAP2) & (1ul << 23))) {   /* HWCAP2_SME */
        printf("SKIP: no SME on this CPU\n");
        return 77;
    }
    sme_state st = __arm_sme_state();
    CHECKF(st.x0 >> 63, "__arm_sme_state: SME not reported (x0 %llx)", (unsigned long long)st.x0);
    CHECKF((st.x0 & 3) == 0, "__arm_sme_state: SM/ZA set outside streaming code (x0 %llx)", (unsigned long long)st.x0);

    uint64_t svl = 0;
    memset(seen_in_callee, 0, sizeof seen_in_callee);
    int bad = za_round_trip(&svl);
    CHECK(svl > 0 && svl <= SVL_MAX);
    CHECKF(bad == 0, "lazy save: %d bytes of ZA (of %llu) did not come back", bad, (unsigned long long)(svl * svl));
    CHECKF(seen_in_callee[0] == 0xa5 && seen_in_callee[svl - 1] == 0xa5, "control: the callee did not write ZA");

    CHECKF(vg_streaming() == svl / 8, "__arm_get_current_vg in streaming mode: %llu, want %llu",
           (unsigned long long)vg_streaming(), (unsigned long long)(svl / 8));
    __arm_za_disable();
    st = __arm_sme_state();
    CHECKF((st.x0 & 2) == 0 && st.x1 == 0, "__arm_za_disable: ZA still on or TPIDR2 set (x0 %llx, x1 %llx)",
           (unsigned long long)st.x0, (unsigned long long)st.x1);
    printf("svl %llu bytes; lazy save and restore of %llu ZA bytes ok\n", (unsigned long long)svl,
           (unsigned long long)(svl * svl));
    return test_summary("sme_abi");
}
