// The KV append: each row's k and v heads into the layer's fp16 cache at its
// slot and position (a ring layer's position also into its twin), one thread
// an element; fp16 by rounding to nearest even, as the CPU's store.
#include <metal_stdlib>
#include "args.h"
using namespace metal;

kernel void kv_store_f16(device const float *k [[buffer(0)]],
                         device const float *v [[buffer(1)]],
                         device half *kc [[buffer(2)]],
                         device half *vc [[buffer(3)]],
                         device const int *pos [[buffer(4)]],
                         device const int *slot [[buffer(5)]],
                         constant md_kv_args &a [[buffer(6)]],
                         uint3 gid [[thread_position_in_grid]]) {
    int d = (int)gid.x, h = (int)gid.y, row = (int)gid.z;
    if (d >= a.head_dim || h >= a.n_head_kv || row >= a.n) return;
    int p = a.ring ? pos[row] % a.ring : pos[row];
    long at = (long)a.off + (((long)slot[row] * a.n_head_kv + h) * a.span + p) * a.head_dim + d;
    half kh = half(k[(long)row * a.k_w + h * a.head_dim + d]);
    half vh = half(v[(long)row * a.v_w + h * a.head_dim + d]);
    kc[at] = kh;
    vc[at] = vh;
    if (a.ring) {
        kc[at + (long)a.ring * a.head_dim] = kh;
        vc[at + (long)a.ring * a.head_dim] = vh;
    }
}
