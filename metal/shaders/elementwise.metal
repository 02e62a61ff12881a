// One thread an element: the GLUs, the bias add and the logit soft-cap, each
// the expression kernels/ops.c evaluates (SwiGLU with exp, GeGLU with the
// polynomial exp of ops.c's exp_poly), so the emulator gives its bits.
#include <metal_stdlib>
#include "args.h"
using namespace metal;

#define GELU_A 0.044715f
#define GELU_2C 1.5957691216057308f
#define GELU_ZMAX 80.0f

static float exp_poly(float x) {
    float n = rint(x * 1.44269504088896341f);
    float r = fma(-n, 0.693359375f, x);
    r = fma(-n, -2.12194440e-4f, r);
    float p = 1.0f / 720;
    p = fma(p, r, 1.0f / 120);
    p = fma(p, r, 1.0f / 24);
    p = fma(p, r, 1.0f / 6);
    p = fma(p, r, 0.5f);
    p = fma(p, r, 1.0f);
    p = fma(p, r, 1.0f);
    return ldexp(p, (int)n);
}

kernel void glu_f32(device const float *gate [[buffer(0)]],
                    device const float *up [[buffer(1)]],
                    device float *out [[buffer(2)]],
                    constant md_ew_args &a [[buffer(3)]],
                    uint gid [[thread_position_in_grid]]) {
    if ((long)gid >= (long)a.n * a.width) return;
    float g = gate[gid];
    if (a.act == 0) {
        out[gid] = g / (1.0f + exp(-g)) * up[gid];
    } else {
        float z = fma(GELU_A * g * g, g, g) * -GELU_2C;
        z = min(max(z, -GELU_ZMAX), GELU_ZMAX);
        out[gid] = g / (1.0f + exp_poly(z)) * up[gid];
    }
}

kernel void bias_add_f32(device float *x [[buffer(0)]],
                         device const float *bias [[buffer(1)]],
                         constant md_ew_args &a [[buffer(2)]],
                         uint gid [[thread_position_in_grid]]) {
    if ((long)gid >= (long)a.n * a.width) return;
    x[gid] += bias[gid % (uint)a.width];
}

kernel void softcap_f32(device float *x [[buffer(0)]],
                        constant md_ew_args &a [[buffer(1)]],
                        uint gid [[thread_position_in_grid]]) {
    if ((long)gid >= (long)a.n * a.width) return;
    x[gid] = a.cap * tanh(x[gid] / a.cap);
}
