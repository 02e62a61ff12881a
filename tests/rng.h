/* Deterministic random numbers for the tests: xorshift64 from a fixed
 * seed (TEST_RNG_SEED, defined before the include to choose another), with
 * uniform doubles in (0, 1) and normal floats by Box-Muller. Each test
 * program has its own state. */
#ifndef HEARTH_TEST_RNG_H
#define HEARTH_TEST_RNG_H

#include <math.h>
#include <stdint.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rng_state = TEST_RNG_SEED;

static inline uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static inline double rng_uniform(void) { return (rng_u32() + 0.5) / 4294967296.0; }

/* u is drawn before v, whatever order the compiler evaluates operands in. */
static inline float rng_normal(void) {
    double u = rng_uniform(), v = rng_uniform();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

#endif
