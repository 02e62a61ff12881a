// RMSNorm, one simdgroup a row, bit for bit kernels/ops.c's op_rmsnorm: the
// squares summed in 16 partial sums (element i into sum i % 16, by fused
// multiply-adds), the partial sums then added pairwise lane l + w into lane
// l for w = 8, 4, 2, 1, out = x * scale * weight. The same kernel is the
// per-head norm (rows of head_dim, in place), the final norm of the rows
// that want logits (through an index of rows) and the norm + residual add of
// the post-norms (has_add).
#include <metal_stdlib>
#include "args.h"
using namespace metal;

kernel void rmsnorm_f32(device const float *in [[buffer(0)]],
                        device const float *weight [[buffer(1)]],
                        device float *out [[buffer(2)]],
                        device float *add [[buffer(3)]],
                        device const int *index [[buffer(4)]],
                        constant md_rms_args &a [[buffer(5)]],
                        uint row [[threadgroup_position_in_grid]],
                        uint lane [[thread_index_in_simdgroup]]) {
    if ((int)row >= a.n_rows) return;
    int src = a.use_index ? index[row] : (int)row;
    device const float *x = in + (long)src * a.in_stride;
    device float *y = out + (long)row * a.out_stride;
    float part = 0.0f;
    if (lane < 16)
        for (int i = (int)lane; i < a.width; i += 16) part = fma(x[i], x[i], part);
    for (ushort w = 8; w >= 1; w /= 2) part += simd_shuffle_down(part, w);
    float sum = simd_broadcast(part, 0);
    float scale = 1.0f / sqrt(sum / (float)a.width + a.eps);
    for (int i = (int)lane; i < a.width; i += MD_SIMD) {
        float v = x[i] * scale * weight[i];
        y[i] = v;
        if (a.has_add) add[(long)row * a.out_stride + i] += v;
    }
}
