/* Loads and stores of 32- and 64-bit values at any address, in the host's
 * byte order (memcpy: no alignment needed, one instruction once compiled). */
#ifndef HEARTH_BYTES_H
#define HEARTH_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint32_t bytes_get32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t bytes_get64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline void bytes_put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void bytes_put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

#endif
