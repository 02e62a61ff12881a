// Attention of one query head of one row over its slot's fp16 KV, one
// simdgroup a (row, head): positions in chunks of MD_ATT_CHUNK whose scores
// sit in threadgroup memory; lane l scores positions l, l + 32, ... (each a
// dot product over head_dim in order, times scale), the chunk's maximum and
// sum of exponentials come from simd_max and simd_sum, and lane l then owns
// output dimensions l, l + 32, ... and adds the chunk's values in position
// order, rescaled as the running maximum moves (online softmax). GQA: head h
// reads KV head h / (n_head / n_head_kv). A sliding-window layer reads the
// last `window` positions; a ring layer's run of positions is contiguous
// from its start (the cache stores each ring position twice).
#include <metal_stdlib>
#include "args.h"
using namespace metal;

kernel void attention_f16(device const float *q [[buffer(0)]],
                          device const half *kc [[buffer(1)]],
                          device const half *vc [[buffer(2)]],
                          device float *out [[buffer(3)]],
                          device const int *pos [[buffer(4)]],
                          device const int *slot [[buffer(5)]],
                          constant md_kv_args &a [[buffer(6)]],
                          threadgroup float *sc [[threadgroup(0)]],
                          uint2 tg [[threadgroup_position_in_grid]],
                          uint lane [[thread_index_in_simdgroup]]) {
    int h = (int)tg.x, row = (int)tg.y, hd = a.head_dim;
    if (h >= a.n_head || row >= a.n) return;
    int kvh = h / (a.n_head / a.n_head_kv), p = pos[row];
    int start = a.window && p + 1 > a.window ? p + 1 - a.window : 0, n_pos = p + 1 - start;
    int first = a.ring ? start % a.ring : start;
    long base = (long)a.off + (((long)slot[row] * a.n_head_kv + kvh) * a.span + first) * hd;
    device const half *k = kc + base;
    device const half *v = vc + base;
    device const float *qh = q + (long)row * a.q_w + (long)h * hd;
    float acc[MD_HEAD_DIM_MAX / MD_SIMD];
    for (int j = 0; j < MD_HEAD_DIM_MAX / MD_SIMD; j++) acc[j] = 0.0f;
    float run_max = -INFINITY, run_sum = 0.0f;
    for (int c0 = 0; c0 < n_pos; c0 += MD_ATT_CHUNK) {
        int cn = min(MD_ATT_CHUNK, n_pos - c0);
        float cmax = -INFINITY;
        for (int t = (int)lane; t < cn; t += MD_SIMD) {
            device const half *kt = k + (long)(c0 + t) * hd;
            float s = 0.0f;
            for (int d = 0; d < hd; d++) s = fma(qh[d], float(kt[d]), s);
            s *= a.scale;
            sc[t] = s;
            cmax = max(cmax, s);
        }
        cmax = simd_max(cmax);
        float new_max = max(run_max, cmax);
        float alpha = exp(run_max - new_max);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float part = 0.0f;
        for (int t = (int)lane; t < cn; t += MD_SIMD) {
            float e = exp(sc[t] - new_max);
            sc[t] = e;
            part += e;
        }
        run_sum = run_sum * alpha + simd_sum(part);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int j = 0; j * MD_SIMD + (int)lane < hd; j++) {
            int d = j * MD_SIMD + (int)lane;
            float o = acc[j] * alpha;
            for (int t = 0; t < cn; t++) o = fma(sc[t], float(v[(long)(c0 + t) * hd + d]), o);
            acc[j] = o;
        }
        run_max = new_max;
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    device float *o = out + (long)row * a.q_w + (long)h * hd;
    for (int j = 0; j * MD_SIMD + (int)lane < hd; j++) o[j * MD_SIMD + (int)lane] = acc[j] / run_sum;
}
