/* Setting a quantized block's scales (d, and m or dmin where the format has
 * one) for the kernel tests that build random weights: the random quants
 * come from the bytes, the scales are then written in place so they are
 * finite and of a chosen size. */
#ifndef HEARTH_TEST_BLOCK_SCALES_H
#define HEARTH_TEST_BLOCK_SCALES_H

#include "kernels/formats.h"

static inline void block_set_scales(int type, void *blk, fp16_t d, fp16_t m) {
    switch (type) {
    case FMT_Q4_0: ((block_q4_0 *)blk)->d = d; break;
    case FMT_Q5_0: ((block_q5_0 *)blk)->d = d; break;
    case FMT_Q8_0: ((block_q8_0 *)blk)->d = d; break;
    case FMT_Q4_1: ((block_q4_1 *)blk)->d = d; ((block_q4_1 *)blk)->m = m; break;
    case FMT_Q5_1: ((block_q5_1 *)blk)->d = d; ((block_q5_1 *)blk)->m = m; break;
    case FMT_Q4_K: ((block_q4_k *)blk)->d = d; ((block_q4_k *)blk)->dmin = m; break;
    case FMT_Q5_K: ((block_q5_k *)blk)->d = d; ((block_q5_k *)blk)->dmin = m; break;
    case FMT_Q6_K: ((block_q6_k *)blk)->d = d; break;
    default: break;
    }
}

#endif
