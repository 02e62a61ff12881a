// GEMV over the weights in GGUF's own layout (wrapped, not repacked): F32 and
// F16 on float activations; Q8_0 and Q4_0 on the activations quantized once
// per call by the prepass (act_quant_q8: kernels/formats.c's
// act_quantize_row, bit for bit), so a block's dot product is the integers'
// exact sum times the two scales, as on the CPU. A threadgroup is
// MD_GEMV_SG simdgroups of MD_SIMD lanes; a simdgroup computes MD_GEMV_ROWS
// output rows of one activation row: lane l takes blocks (or elements) l,
// l + 32, ... in order, then one simd_sum adds the lanes. The order depends
// on nothing but n_in, so a row's result is the same in any batch.
#include <metal_stdlib>
#include "args.h"
using namespace metal;

struct act_q8 { float d; int sum; char qs[32]; };
struct block_q8_0 { half d; char qs[32]; };
struct block_q4_0 { half d; uchar qs[16]; };

kernel void act_quant_q8(device const float *x [[buffer(0)]],
                         device act_q8 *out [[buffer(1)]],
                         constant md_act_args &a [[buffer(2)]],
                         uint gid [[thread_position_in_grid]]) {
    int nb = a.n_in / 32;
    if ((int)gid >= nb * a.M) return;
    device const float *xb = x + (long)(gid / nb) * a.n_in + (long)(gid % nb) * 32;
    float amax = 0.0f;
    for (int i = 0; i < 32; i++)
        if (fabs(xb[i]) > amax) amax = fabs(xb[i]);
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; i++) {
        float v = xb[i] * id;
        int q = !(v >= -127.0f) ? -127 : v >= 127.0f ? 127 : (int)rint(v);
        out[gid].qs[i] = (char)q;
        sum += q;
    }
    out[gid].d = d;
    out[gid].sum = sum;
}

// The rows this simdgroup computes and where it writes them.
static void gemv_store(float4 s, constant md_gemv_args &a, int r0, int m, uint lane,
                       device float *y, device float *add) {
    if (lane != 0) return;
    for (int r = 0; r < MD_GEMV_ROWS && r0 + r < a.n_out; r++) {
        long at = (long)m * a.n_out + r0 + r;
        y[at] = s[r];
        if (a.has_add) add[at] += s[r];
    }
}

kernel void gemv_q8_0(device const uchar *w [[buffer(0)]],
                      device const act_q8 *x [[buffer(1)]],
                      device float *y [[buffer(2)]],
                      device float *add [[buffer(3)]],
                      constant md_gemv_args &a [[buffer(4)]],
                      uint2 tg [[threadgroup_position_in_grid]],
                      uint sg [[simdgroup_index_in_threadgroup]],
                      uint lane [[thread_index_in_simdgroup]]) {
    int r0 = ((int)tg.x * MD_GEMV_SG + (int)sg) * MD_GEMV_ROWS, m = (int)tg.y, nb = a.n_in / 32;
    if (r0 >= a.n_out) return;
    device const act_q8 *xm = x + (long)m * nb;
    float4 acc = float4(0.0f);
    for (int r = 0; r < MD_GEMV_ROWS && r0 + r < a.n_out; r++) {
        device const block_q8_0 *wr = (device const block_q8_0 *)(w + (long)(r0 + r) * a.row_bytes);
        float s = 0.0f;
        for (int b = (int)lane; b < nb; b += MD_SIMD) {
            int isum = 0;
            for (int j = 0; j < 32; j++) isum += (int)wr[b].qs[j] * (int)xm[b].qs[j];
            s = fma(float(wr[b].d) * xm[b].d, (float)isum, s);
        }
        acc[r] = s;
    }
    gemv_store(simd_sum(acc), a, r0, m, lane, y, add);
}

kernel void gemv_q4_0(device const uchar *w [[buffer(0)]],
                      device const act_q8 *x [[buffer(1)]],
                      device float *y [[buffer(2)]],
                      device float *add [[buffer(3)]],
                      constant md_gemv_args &a [[buffer(4)]],
                      uint2 tg [[threadgroup_position_in_grid]],
                      uint sg [[simdgroup_index_in_threadgroup]],
                      uint lane [[thread_index_in_simdgroup]]) {
    int r0 = ((int)tg.x * MD_GEMV_SG + (int)sg) * MD_GEMV_ROWS, m = (int)tg.y, nb = a.n_in / 32;
    if (r0 >= a.n_out) return;
    device const act_q8 *xm = x + (long)m * nb;
    float4 acc = float4(0.0f);
    for (int r = 0; r < MD_GEMV_ROWS && r0 + r < a.n_out; r++) {
        device const block_q4_0 *wr = (device const block_q4_0 *)(w + (long)(r0 + r) * a.row_bytes);
        float s = 0.0f;
        for (int b = (int)lane; b < nb; b += MD_SIMD) {
            int isum = 0;
            for (int j = 0; j < 16; j++) {
                isum += ((int)(wr[b].qs[j] & 15) - 8) * (int)xm[b].qs[j];
                isum += ((int)(wr[b].qs[j] >> 4) - 8) * (int)xm[b].qs[j + 16];
            }
            s = fma(float(wr[b].d) * xm[b].d, (float)isum, s);
        }
        acc[r] = s;
    }
    gemv_store(simd_sum(acc), a, r0, m, lane, y, add);
}

kernel void gemv_f32(device const uchar *w [[buffer(0)]],
                     device const float *x [[buffer(1)]],
                     device float *y [[buffer(2)]],
                     device float *add [[buffer(3)]],
                     constant md_gemv_args &a [[buffer(4)]],
                     uint2 tg [[threadgroup_position_in_grid]],
                     uint sg [[simdgroup_index_in_threadgroup]],
                     uint lane [[thread_index_in_simdgroup]]) {
    int r0 = ((int)tg.x * MD_GEMV_SG + (int)sg) * MD_GEMV_ROWS, m = (int)tg.y;
    if (r0 >= a.n_out) return;
    device const float *xm = x + (long)m * a.n_in;
    float4 acc = float4(0.0f);
    for (int r = 0; r < MD_GEMV_ROWS && r0 + r < a.n_out; r++) {
        device const float *wr = (device const float *)(w + (long)(r0 + r) * a.row_bytes);
        float s = 0.0f;
        for (int k = (int)lane; k < a.n_in; k += MD_SIMD) s = fma(wr[k], xm[k], s);
        acc[r] = s;
    }
    gemv_store(simd_sum(acc), a, r0, m, lane, y, add);
}

kernel void gemv_f16(device const uchar *w [[buffer(0)]],
                     device const float *x [[buffer(1)]],
                     device float *y [[buffer(2)]],
                     device float *add [[buffer(3)]],
                     constant md_gemv_args &a [[buffer(4)]],
                     uint2 tg [[threadgroup_position_in_grid]],
                     uint sg [[simdgroup_index_in_threadgroup]],
                     uint lane [[thread_index_in_simdgroup]]) {
    int r0 = ((int)tg.x * MD_GEMV_SG + (int)sg) * MD_GEMV_ROWS, m = (int)tg.y;
    if (r0 >= a.n_out) return;
    device const float *xm = x + (long)m * a.n_in;
    float4 acc = float4(0.0f);
    for (int r = 0; r < MD_GEMV_ROWS && r0 + r < a.n_out; r++) {
        device const half *wr = (device const half *)(w + (long)(r0 + r) * a.row_bytes);
        float s = 0.0f;
        for (int k = (int)lane; k < a.n_in; k += MD_SIMD) s = fma(float(wr[k]), xm[k], s);
        acc[r] = s;
    }
    gemv_store(simd_sum(acc), a, r0, m, lane, y, add);
}
