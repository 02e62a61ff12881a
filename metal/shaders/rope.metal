// RoPE in place, one thread a rotated pair of one head of one row, as
// kernels/ops.c's op_rope_apply: adjacent pairs (2i, 2i+1), or NeoX halves
// (i, i + n_rot/2), by the row's cos and sin (the ROPE_ANGLES step's).
#include <metal_stdlib>
#include "args.h"
using namespace metal;

kernel void rope_f32(device float *x [[buffer(0)]],
                     device const float *cs [[buffer(1)]],
                     constant md_rope_args &a [[buffer(2)]],
                     uint3 gid [[thread_position_in_grid]]) {
    int half_rot = a.n_rot / 2, i = (int)gid.x, h = (int)gid.y, row = (int)gid.z;
    if (i >= half_rot || h >= a.n_head || row >= a.n) return;
    device float *head = x + (long)row * a.row_w + (long)h * a.head_dim;
    device const float *c = cs + (long)row * a.cs_w;
    float co = c[i], si = c[half_rot + i];
    int ia = a.neox ? i : 2 * i, ib = a.neox ? i + half_rot : 2 * i + 1;
    float x0 = head[ia], x1 = head[ib];
    head[ia] = fma(x0, co, -(x1 * si));
    head[ib] = fma(x0, si, x1 * co);
}
