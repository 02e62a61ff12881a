/* The blob of one prompt-state block, as the prompt cache stores it, and
 * the hashes that name and check it.
 *
 * A block holds the KV of B consecutive positions of one slot, for every
 * layer, together with ALL the tokens of the prompt prefix it ends (not
 * only its own B): the KV of a position depends on every token before it,
 * so comparing the whole prefix before use is what makes a hash collision
 * harmless. The tokens cost 4 bytes a position, next to 4 * n_layer *
 * kv_dim bytes of KV per position, so this is cheap.
 *
 * Layout, every integer little-endian:
 *
 *     0  magic "HKVB"
 *     4  u32 version (1)
 *     8  fingerprint, 16 bytes (model file and KV format)
 *    24  u32 n_tokens   the prefix length; the block is its last n_block positions
 *    28  u32 n_block
 *    32  u32 n_layer
 *    36  u32 kv_dim
 *    40  u32 kv_type    (1: fp16)
 *    44  u32 flags      (0)
 *    48  n_tokens x i32 the tokens of the prefix
 *     .  n_layer x { K: n_block x kv_dim fp16, V: n_block x kv_dim fp16 }
 *  end-8 u64 checksum:  xxh64 of every byte before it
 *
 * The decoder trusts nothing: it checks every field, the exact size and the
 * checksum before it hands out a view, and never reads outside the buffer. */
#ifndef HEARTH_BLOCK_CODEC_H
#define HEARTH_BLOCK_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "runtime/hash.h"

#define BLOCK_VERSION 1
#define BLOCK_KV_F16 1
#define BLOCK_HEADER_BYTES 48

/* Bounds on the fields, far above any real model, that keep every size
 * computation inside 64 bits. */
#define BLOCK_MAX_TOKENS (1u << 24)
#define BLOCK_MAX_LAYERS 4096u
#define BLOCK_MAX_KV_DIM (1u << 20)

typedef struct block_key { uint8_t b[16]; } block_key;

typedef struct block_shape {
    uint32_t n_tokens, n_block, n_layer, kv_dim;
} block_shape;

/* A decoded blob: pointers into the caller's buffer. */
typedef struct block_view {
    uint8_t fingerprint[16];
    block_shape shape;
    uint32_t kv_type;
    const uint8_t *tokens;    /* n_tokens little-endian int32, maybe unaligned */
    const uint8_t *kv;        /* per layer: K rows, then V rows */
    size_t kv_bytes;
} block_view;

/* The key of the first block's parent: a function of the fingerprint alone,
 * so the chain of keys is specific to one model file and KV format. */
void block_key_root(const uint8_t fingerprint[16], block_key *k);
/* k = H(k, tokens of one block). */
void block_key_next(block_key *k, const int32_t *tokens, int n);

/* Bytes of a blob of this shape; 0 when a field is out of bounds. */
size_t block_blob_size(const block_shape *s);
/* Bytes of the KV part (n_layer x 2 x n_block x kv_dim fp16). */
size_t block_kv_bytes(const block_shape *s);

/* Writes the header and the tokens into buf (block_blob_size bytes) and
 * returns where the KV goes; the caller fills it, then seals. NULL for a
 * bad shape or a buffer of the wrong size. */
uint8_t *block_encode(void *buf, size_t size, const uint8_t fingerprint[16],
                      const block_shape *s, const int32_t *tokens);
/* Writes the checksum (the last 8 bytes). */
void block_seal(void *buf, size_t size);

/* 0 and a view when buf is a well-formed blob; -1 otherwise. */
int block_decode(const void *buf, size_t size, block_view *out);
/* Token i of a decoded view (i < n_tokens). */
int32_t block_token(const block_view *v, uint32_t i);
/* Whether the view's prefix is exactly tokens[0, n). */
bool block_tokens_equal(const block_view *v, const int32_t *tokens, uint32_t n);

#endif
