/* The emulator's runtime as the compiled shaders see it: the kernel
 * arguments a dispatch hands each thread, and the two points where a thread
 * waits for the others of its group (a simdgroup collective, a threadgroup
 * barrier). Threads are fibers; these are the only places they switch. */
#ifndef HEARTH_METAL_EMU_RT_H
#define HEARTH_METAL_EMU_RT_H

#include <cstddef>
#include <cstdint>

namespace emu {

constexpr int kMaxBind = 16;
constexpr int kSimdWidth = 32;
constexpr int kXchgBytes = 64;     /* the widest value a collective carries */

/* What one dispatch binds, shared by every thread. */
struct Args {
    void *buf[kMaxBind];
    void *tg[kMaxBind];
    uint32_t groups[3], threads[3];   /* threadgroups per grid, threads per threadgroup */
};

/* One thread's place. */
struct Thread {
    uint32_t tg[3];     /* threadgroup_position_in_grid */
    uint32_t tid[3];    /* thread_position_in_threadgroup */
    uint32_t lid;       /* thread_index_in_threadgroup */
};

typedef void (*KernelFn)(const Args &a, const Thread &t);

struct KernelEntry {
    const char *name;
    KernelFn fn;
};

/* Publishes n bytes of this lane's value and waits until every live lane
 * of its simdgroup has done the same; returns the 32 lanes' values
 * (kXchgBytes apart), the mask of those that took part, and this lane. */
const uint8_t *simd_exchange(const void *v, size_t n, uint32_t *mask, unsigned *lane);
/* Waits until every live thread of the threadgroup is here. */
void barrier();

}  // namespace emu

#endif
