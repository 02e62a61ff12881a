/* Encoding and decoding of a prompt-state block (see block_codec.h). */
#include "engine/cache/block_codec.h"
#include "runtime/bytes.h"
#include "runtime/hash.h"
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the block format keeps tokens and fp16 KV in host order: little-endian hosts only"
#endif

static const uint8_t block_magic[4] = { 'H', 'K', 'V', 'B' };

/* ---- keys ------------------------------------------------------------------- */
/* A key is two 64-bit halves, each an xxh64 of the block's tokens seeded by
 * the parent key's half (with distinct constants so the halves differ).
 * Nothing depends on the hash resisting a deliberate collision: the stored
 * tokens are compared before a block is used. */
#define KEY_SEED_LO 0x6865617274686b76ull   /* "hearthkv" */
#define KEY_SEED_HI 0x626c6f636b636861ull   /* "blockcha" */

void block_key_root(const uint8_t fingerprint[16], block_key *k) {
    uint64_t lo = hash64(fingerprint, 16, KEY_SEED_LO), hi = hash64(fingerprint, 16, KEY_SEED_HI);
    bytes_put64(k->b, lo);
    bytes_put64(k->b + 8, hi);
}

void block_key_next(block_key *k, const int32_t *tokens, int n) {
    size_t bytes = n > 0 ? sizeof(int32_t) * (size_t)n : 0;
    uint64_t lo = hash64(tokens, bytes, bytes_get64(k->b) ^ KEY_SEED_LO);
    uint64_t hi = hash64(tokens, bytes, bytes_get64(k->b + 8) ^ KEY_SEED_HI);
    bytes_put64(k->b, lo);
    bytes_put64(k->b + 8, hi);
}

/* ---- blobs ------------------------------------------------------------------ */
#define CHECKSUM_SEED 0x686b76622d763031ull    /* "hkvb-v01" */

static bool shape_ok(const block_shape *s) {
    return s->n_block >= 1 && s->n_block <= s->n_tokens && s->n_tokens <= BLOCK_MAX_TOKENS &&
           s->n_layer >= 1 && s->n_layer <= BLOCK_MAX_LAYERS && s->kv_dim >= 1 && s->kv_dim <= BLOCK_MAX_KV_DIM;
}

size_t block_kv_bytes(const block_shape *s) {
    if (!shape_ok(s)) return 0;
    /* at most 2^12 * 2 * 2^24 * 2^20 * 2 = 2^58: fits in 64 bits */
    uint64_t kv = (uint64_t)s->n_layer * 2u * s->n_block * s->kv_dim * sizeof(uint16_t);
    return kv > SIZE_MAX ? 0 : (size_t)kv;
}

size_t block_blob_size(const block_shape *s) {
    size_t kv = block_kv_bytes(s);
    if (!kv) return 0;
    uint64_t n = (uint64_t)BLOCK_HEADER_BYTES + 4ull * s->n_tokens + kv + 8;
    return n < kv || n > SIZE_MAX ? 0 : (size_t)n;
}

uint8_t *block_encode(void *buf, size_t size, const uint8_t fingerprint[16],
                      const block_shape *s, const int32_t *tokens) {
    if (!buf || size != block_blob_size(s) || size == 0) return NULL;
    uint8_t *p = buf;
    memcpy(p, block_magic, 4);
    bytes_put32(p + 4, BLOCK_VERSION);
    memcpy(p + 8, fingerprint, 16);
    bytes_put32(p + 24, s->n_tokens);
    bytes_put32(p + 28, s->n_block);
    bytes_put32(p + 32, s->n_layer);
    bytes_put32(p + 36, s->kv_dim);
    bytes_put32(p + 40, BLOCK_KV_F16);
    bytes_put32(p + 44, 0);
    memcpy(p + BLOCK_HEADER_BYTES, tokens, 4u * (size_t)s->n_tokens);
    return p + BLOCK_HEADER_BYTES + 4u * (size_t)s->n_tokens;
}

void block_seal(void *buf, size_t size) {
    if (size < BLOCK_HEADER_BYTES + 8) return;
    uint8_t *p = buf;
    bytes_put64(p + size - 8, hash64(p, size - 8, CHECKSUM_SEED));
}

int block_decode(const void *buf, size_t size, block_view *out) {
    const uint8_t *p = buf;
    memset(out, 0, sizeof *out);
    if (!buf || size < BLOCK_HEADER_BYTES + 8) return -1;
    if (memcmp(p, block_magic, 4) || bytes_get32(p + 4) != BLOCK_VERSION) return -1;
    block_shape s = { bytes_get32(p + 24), bytes_get32(p + 28), bytes_get32(p + 32), bytes_get32(p + 36) };
    uint32_t kv_type = bytes_get32(p + 40), flags = bytes_get32(p + 44);
    if (kv_type != BLOCK_KV_F16 || flags != 0) return -1;
    /* the exact size follows from the (bounded) header fields */
    size_t want = block_blob_size(&s);
    if (!want || want != size) return -1;
    if (bytes_get64(p + size - 8) != hash64(p, size - 8, CHECKSUM_SEED)) return -1;
    const uint8_t *tok = p + BLOCK_HEADER_BYTES;
    for (uint32_t i = 0; i < s.n_tokens; i++)
        if ((int32_t)bytes_get32(tok + 4u * i) < 0) return -1;
    memcpy(out->fingerprint, p + 8, 16);
    out->shape = s;
    out->kv_type = kv_type;
    out->tokens = tok;
    out->kv = tok + 4u * (size_t)s.n_tokens;
    out->kv_bytes = block_kv_bytes(&s);
    return 0;
}

int32_t block_token(const block_view *v, uint32_t i) {
    return i < v->shape.n_tokens ? (int32_t)bytes_get32(v->tokens + 4u * i) : -1;
}

bool block_tokens_equal(const block_view *v, const int32_t *tokens, uint32_t n) {
    /* little-endian host: the stored bytes are the int32 values as in memory */
    return v->tokens && v->shape.n_tokens == n && !memcmp(v->tokens, tokens, 4u * (size_t)n);
}
