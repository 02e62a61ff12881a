/* A 64-bit hash of bytes (xxHash64): block keys and checksums of the prompt
 * cache, the id of a model file. Its values are stored on disk: never change
 * them. */
#ifndef HEARTH_HASH_H
#define HEARTH_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t hash64(const void *data, size_t n, uint64_t seed);

#endif
