/* xxHash64 (Yann Collet's construction, written here from its description):
 * the one hash of the tree (the prompt cache's block keys and checksums, a
 * model file's id). */
#include "runtime/hash.h"
#include "runtime/bytes.h"

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t xx_round(uint64_t acc, uint64_t in) {
    acc += in * P2;
    acc = rotl64(acc, 31);
    return acc * P1;
}

static uint64_t xx_merge(uint64_t h, uint64_t acc) {
    h ^= xx_round(0, acc);
    return h * P1 + P4;
}

uint64_t hash64(const void *data, size_t n, uint64_t seed) {
    static const uint8_t empty[1];
    const uint8_t *p = n ? data : empty, *end = p + n;   /* no arithmetic on a NULL */
    uint64_t h;
    if (n >= 32) {
        /* four independent lanes over 32-byte stripes */
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        const uint8_t *limit = end - 32;
        do {
            v1 = xx_round(v1, bytes_get64(p));
            v2 = xx_round(v2, bytes_get64(p + 8));
            v3 = xx_round(v3, bytes_get64(p + 16));
            v4 = xx_round(v4, bytes_get64(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = xx_merge(h, v1);
        h = xx_merge(h, v2);
        h = xx_merge(h, v3);
        h = xx_merge(h, v4);
    } else {
        h = seed + P5;
    }
    h += (uint64_t)n;
    while (end - p >= 8) {
        h ^= xx_round(0, bytes_get64(p));
        h = rotl64(h, 27) * P1 + P4;
        p += 8;
    }
    if (end - p >= 4) {
        h ^= (uint64_t)bytes_get32(p) * P1;
        h = rotl64(h, 23) * P2 + P3;
        p += 4;
    }
    while (p < end) {
        h ^= (uint64_t)*p++ * P5;
        h = rotl64(h, 11) * P1;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}
