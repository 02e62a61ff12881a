// Planted controls for the emulator: kernels a test runs to see that the
// emulator catches what breaks GPU code. reverse_tg is correct; its twin
// without the barrier must read threadgroup memory before another thread
// wrote it; gemv_f32_bad_tile offsets its rows by one simdgroup too few.
#include <metal_stdlib>
#include "args.h"
using namespace metal;

kernel void reverse_tg(device const float *in [[buffer(0)]],
                       device float *out [[buffer(1)]],
                       threadgroup float *t [[threadgroup(0)]],
                       uint gid [[thread_position_in_grid]],
                       uint lid [[thread_index_in_threadgroup]],
                       uint n [[threads_per_threadgroup]]) {
    t[lid] = in[gid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[gid] = t[n - 1 - lid];
}

kernel void reverse_tg_no_barrier(device const float *in [[buffer(0)]],
                                  device float *out [[buffer(1)]],
                                  threadgroup float *t [[threadgroup(0)]],
                                  uint gid [[thread_position_in_grid]],
                                  uint lid [[thread_index_in_threadgroup]],
                                  uint n [[threads_per_threadgroup]]) {
    t[lid] = in[gid];
    out[gid] = t[n - 1 - lid];
}

kernel void gemv_f32_bad_tile(device const uchar *w [[buffer(0)]],
                              device const float *x [[buffer(1)]],
                              device float *y [[buffer(2)]],
                              device float *add [[buffer(3)]],
                              constant md_gemv_args &a [[buffer(4)]],
                              uint2 tg [[threadgroup_position_in_grid]],
                              uint sg [[simdgroup_index_in_threadgroup]],
                              uint lane [[thread_index_in_simdgroup]]) {
    (void)add;
    int r0 = ((int)tg.x * MD_GEMV_SG + (int)sg) * (MD_GEMV_ROWS - 1), m = (int)tg.y;
    if (r0 >= a.n_out) return;
    device const float *xm = x + (long)m * a.n_in;
    for (int r = 0; r < MD_GEMV_ROWS && r0 + r < a.n_out; r++) {
        device const float *wr = (device const float *)(w + (long)(r0 + r) * a.row_bytes);
        float s = 0.0f;
        for (int k = (int)lane; k < a.n_in; k += MD_SIMD) s = fma(wr[k], xm[k], s);
        s = simd_sum(s);
        if (lane == 0) y[(long)m * a.n_out + r0 + r] = s;
    }
}
