/* Helpers the tokenizer files share: the growable id array, the heap of
 * merge candidates, text -> id lookup, UTF-8 lengths and the byte-level
 * mapping of GPT-2 style vocabularies. Depends on nothing else of the
 * tokenizer's but its data (tok_internal.h). */
#ifndef HEARTH_TOK_COMMON_H
#define HEARTH_TOK_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

typedef struct tokenizer tokenizer;

/* Growable id array used while encoding. */
typedef struct {
    int32_t *v;
    size_t n, cap;
    bool oom;           /* an allocation failed: the result is unusable */
} tok_vec;

void tok_vec_push(tok_vec *v, int32_t id);

/* Min-heap of candidate merges ordered by (key, left): used by both encoders. */
typedef struct {
    double key;
    int32_t left, right;
    int32_t check;              /* a value to detect a stale entry */
} tok_cand;

typedef struct {
    tok_cand *v;
    size_t n, cap;
    bool oom;
} tok_heap;

void tok_heap_push(tok_heap *h, tok_cand c);
bool tok_heap_pop(tok_heap *h, tok_cand *out);

/* Text -> id over the vocabulary's own strings (the first id wins when two
 * tokens share a text); tok_build_map makes the table once at load. */
int tok_build_map(tokenizer *t);
int32_t tok_lookup(const tokenizer *t, const char *s, size_t len);

/* Length of the UTF-8 sequence led by byte c (1 for a stray byte). */
static inline int tok_utf8_len(unsigned char c) {
    static const uint8_t len[16] = {1,1,1,1,1,1,1,1,1,1,1,1,2,2,3,4};
    return len[c >> 4];
}

/* Byte-level mapping: the code point that stands for byte b, and back
 * (-1 if cp stands for no byte); tok_byte_char writes b's character as
 * UTF-8 (1 or 2 bytes) and returns its length. */
uint32_t tok_byte_to_cp(unsigned b);
int tok_cp_to_byte(uint32_t cp);
int tok_byte_char(unsigned b, char *out);

#endif
