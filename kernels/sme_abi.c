/* The SME ABI support routines (AAPCS64, "SME support routines") that code
 * built with SME attributes calls: __arm_tpidr2_save (commit a lazy ZA save
 * on entry to a function with new ZA), __arm_tpidr2_restore (reload ZA
 * after a call that committed the caller's lazy save), __arm_za_disable,
 * __arm_sme_state and __arm_get_current_vg (the vector granule kept for
 * unwinding when a function changes streaming mode). compiler-rt and newer libgcc have them;
 * GCC 12's libgcc, which the Linux cross build links, does not, so the
 * project provides them for Linux (macOS's libSystem has its own).
 *
 * They are called with a special interface: besides their results they
 * change only X16, X17 (and, where the ABI allows, X0 and X1), so they are
 * written in assembly. Whether this process may touch the SME registers
 * (TPIDR2_EL0, SVCR, ZA) is decided once at load by a constructor from
 * HWCAP2; without SME every routine returns at once, as the ABI asks. */
#include <stdint.h>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>

/* bit 0: the kernel gives this process SME; bit 1: SVE (non-streaming). */
uint8_t hearth_sme_abi_caps __attribute__((visibility("hidden")));

__attribute__((constructor)) static void sme_abi_probe(void) {
    unsigned long h1 = getauxval(AT_HWCAP), h2 = getauxval(AT_HWCAP2);
    hearth_sme_abi_caps = (uint8_t)(((h2 >> 23) & 1) | (((h1 >> 22) & 1) << 1));  /* HWCAP2_SME, HWCAP_SVE */
}

__asm__(
    ".arch_extension sme\n"
    ".arch_extension sve\n"
    ".text\n"

    /* TPIDR2_EL0 points at a block: the save buffer (8 bytes), the number of
     * ZA slices to save (16 bits), 6 reserved bytes that must be zero. Saves
     * that many horizontal slices of ZA, one SVL apart, and returns; X12 (the
     * slice index register STR ZA needs) is kept on the stack. */
    ".p2align 2\n"
    ".globl __arm_tpidr2_save\n"
    ".hidden __arm_tpidr2_save\n"
    ".type __arm_tpidr2_save, %function\n"
    "__arm_tpidr2_save:\n"
    "  adrp x16, hearth_sme_abi_caps\n"
    "  ldrb w16, [x16, :lo12:hearth_sme_abi_caps]\n"
    "  tbz w16, #0, 2f\n"
    "  mrs x16, TPIDR2_EL0\n"
    "  cbz x16, 2f\n"
    "  ldr x17, [x16, #8]\n"
    "  tst x17, #0xffffffffffff0000\n"
    "  b.ne 3f\n"
    "  ldr x16, [x16]\n"
    "  str x12, [sp, #-16]!\n"
    "  mov w12, #0\n"
    "1:\n"
    "  cmp w12, w17\n"
    "  b.hs 4f\n"
    "  str za[w12, 0], [x16]\n"
    "  addsvl x16, x16, #1\n"
    "  add w12, w12, #1\n"
    "  b 1b\n"
    "4:\n"
    "  ldr x12, [sp], #16\n"
    "2:\n"
    "  ret\n"
    "3:\n"
    "  b abort\n"
    ".size __arm_tpidr2_save, . - __arm_tpidr2_save\n"

    /* X0 points at a TPIDR2 block whose save has been committed (TPIDR2_EL0
     * is 0, else abort): loads its slices back into ZA. */
    ".p2align 2\n"
    ".globl __arm_tpidr2_restore\n"
    ".hidden __arm_tpidr2_restore\n"
    ".type __arm_tpidr2_restore, %function\n"
    "__arm_tpidr2_restore:\n"
    "  adrp x16, hearth_sme_abi_caps\n"
    "  ldrb w16, [x16, :lo12:hearth_sme_abi_caps]\n"
    "  tbz w16, #0, 2f\n"
    "  mrs x16, TPIDR2_EL0\n"
    "  cbnz x16, 3f\n"
    "  ldr x17, [x0, #8]\n"
    "  tst x17, #0xffffffffffff0000\n"
    "  b.ne 3f\n"
    "  ldr x16, [x0]\n"
    "  str x12, [sp, #-16]!\n"
    "  mov w12, #0\n"
    "1:\n"
    "  cmp w12, w17\n"
    "  b.hs 4f\n"
    "  ldr za[w12, 0], [x16]\n"
    "  addsvl x16, x16, #1\n"
    "  add w12, w12, #1\n"
    "  b 1b\n"
    "4:\n"
    "  ldr x12, [sp], #16\n"
    "2:\n"
    "  ret\n"
    "3:\n"
    "  b abort\n"
    ".size __arm_tpidr2_restore, . - __arm_tpidr2_restore\n"

    /* Commit any lazy save, clear TPIDR2_EL0 and turn ZA off. */
    ".p2align 2\n"
    ".globl __arm_za_disable\n"
    ".hidden __arm_za_disable\n"
    ".type __arm_za_disable, %function\n"
    "__arm_za_disable:\n"
    "  adrp x16, hearth_sme_abi_caps\n"
    "  ldrb w16, [x16, :lo12:hearth_sme_abi_caps]\n"
    "  tbz w16, #0, 1f\n"
    "  stp x29, x30, [sp, #-16]!\n"
    "  mov x29, sp\n"
    "  bl __arm_tpidr2_save\n"
    "  msr TPIDR2_EL0, xzr\n"
    "  smstop za\n"
    "  ldp x29, x30, [sp], #16\n"
    "1:\n"
    "  ret\n"
    ".size __arm_za_disable, . - __arm_za_disable\n"

    /* X0: bit 63 SME is usable, bit 62 TPIDR2_EL0 is, bits 0-1 PSTATE.SM and
     * PSTATE.ZA; X1: TPIDR2_EL0. Both 0 without SME. */
    ".p2align 2\n"
    ".globl __arm_sme_state\n"
    ".hidden __arm_sme_state\n"
    ".type __arm_sme_state, %function\n"
    "__arm_sme_state:\n"
    "  mov x0, xzr\n"
    "  mov x1, xzr\n"
    "  adrp x16, hearth_sme_abi_caps\n"
    "  ldrb w16, [x16, :lo12:hearth_sme_abi_caps]\n"
    "  tbz w16, #0, 1f\n"
    "  mov x0, #0xc000000000000000\n"
    "  mrs x16, SVCR\n"
    "  bfxil x0, x16, #0, #2\n"
    "  mrs x1, TPIDR2_EL0\n"
    "1:\n"
    "  ret\n"
    ".size __arm_sme_state, . - __arm_sme_state\n"

    /* X0 = the current VG: the streaming one in streaming mode, else SVE's,
     * else 0 (no SVE outside streaming mode, as on Apple's cores). Changes
     * nothing else. */
    ".p2align 2\n"
    ".globl __arm_get_current_vg\n"
    ".hidden __arm_get_current_vg\n"
    ".type __arm_get_current_vg, %function\n"
    "__arm_get_current_vg:\n"
    "  adrp x0, hearth_sme_abi_caps\n"
    "  ldrb w0, [x0, :lo12:hearth_sme_abi_caps]\n"
    "  tbz w0, #0, 1f\n"
    "  mrs x0, SVCR\n"
    "  tbz w0, #0, 1f\n"
    "  rdsvl x0, #1\n"
    "  lsr x0, x0, #3\n"
    "  ret\n"
    "1:\n"
    "  adrp x0, hearth_sme_abi_caps\n"
    "  ldrb w0, [x0, :lo12:hearth_sme_abi_caps]\n"
    "  tbz w0, #1, 2f\n"
    "  cntd x0\n"
    "  ret\n"
    "2:\n"
    "  mov x0, xzr\n"
    "  ret\n"
    ".size __arm_get_current_vg, . - __arm_get_current_vg\n");
#endif
