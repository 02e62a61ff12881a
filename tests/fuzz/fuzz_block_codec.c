/* libFuzzer target for the prompt-cache block decoder. Not part of the
 * meson build; from the repo root:
 *
 *   clang-19 -std=c17 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -I. \
 *       tests/fuzz/fuzz_block_codec.c engine/block_codec.c -o /tmp/fuzz_block_codec
 *   mkdir -p /tmp/fuzz_block_corpus
 *   /tmp/fuzz_block_codec -max_total_time=60 /tmp/fuzz_block_corpus tests/fuzz/corpus/block
 *
 * (the first corpus folder is a scratch copy that collects new inputs).
 *
 * Each input is decoded twice: as it is, and with its checksum made right,
 * so the fuzzer also reaches everything the checksum guards. The input is
 * copied into a buffer of exactly its size, so ASan catches any read past
 * its end; on success every token and KV byte of the view is read. */
#include "engine/cache/block_codec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned touch(const block_view *v) {
    unsigned sum = 0;
    for (uint32_t i = 0; i < v->shape.n_tokens; i++) sum += (unsigned)block_token(v, i);
    for (size_t i = 0; i < v->kv_bytes; i++) sum += v->kv[i];
    /* the view must describe the blob it came from */
    if (block_blob_size(&v->shape) == 0 || v->kv_bytes != block_kv_bytes(&v->shape)) abort();
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    block_view v;
    volatile unsigned sink = 0;
    if (block_decode(buf, size, &v) == 0) sink += touch(&v);
    block_seal(buf, size);
    if (block_decode(buf, size, &v) == 0) {
        sink += touch(&v);
        /* a decoded blob re-encodes to the same bytes */
        uint8_t *again = malloc(size);
        if (again) {
            uint8_t *kv = block_encode(again, size, v.fingerprint, &v.shape, (const int32_t *)(const void *)v.tokens);
            if (!kv) abort();
            memcpy(kv, v.kv, v.kv_bytes);
            block_seal(again, size);
            if (memcmp(again, buf, size)) abort();
            free(again);
        }
    }
    (void)sink;
    free(buf);
    return 0;
}
