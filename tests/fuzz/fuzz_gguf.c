/* libFuzzer target for the GGUF reader. Not part of the meson build; from the repo root:
 *
 *   clang-19 -std=c17 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -I. \
 *       tests/fuzz/fuzz_gguf.c engine/gguf.c kernels/formats.c -lm -o /tmp/fuzz_gguf
 *   /tmp/fuzz_gguf -max_total_time=60 /tmp/fuzz_gguf_corpus tests/fuzz/corpus/gguf
 *
 * (the first corpus folder is a scratch copy that collects new inputs). On
 * success every value, string and tensor the reader hands out is touched, so
 * ASan catches any pointer it returns that lies outside the input. */
#include "engine/gguf/gguf.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every element of an array through the public accessors, recursing into nested arrays. */
static unsigned touch_array(const gguf_kv *kv, int depth) {
    unsigned sum = 0;
    uint64_t n = kv->arr_n < 64 ? kv->arr_n : 64;   /* bounded: gguf_arr_elem is O(i) */
    for (uint64_t i = 0; i < n; i++) {
        double d;
        int64_t v;
        gguf_kv e;
        sum += gguf_arr_f64(kv, i, &d) ? (unsigned)(d != 0) : 0;
        sum += gguf_arr_i64(kv, i, &v) ? (unsigned)v : 0;
        if (gguf_arr_elem(kv, i, &e) && e.type == GGUF_TYPE_ARRAY && depth < 4) sum += touch_array(&e, depth + 1);
    }
    if (kv->arr_type == GGUF_TYPE_STRING && kv->arr_n <= 1u << 16) {
        gguf_str *s = malloc((kv->arr_n ? kv->arr_n : 1) * sizeof *s);
        if (s && gguf_arr_strings(kv, s))
            for (uint64_t i = 0; i < kv->arr_n; i++) sum += s[i].len ? (uint8_t)s[i].ptr[s[i].len - 1] : 0;
        free(s);
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file g;
    char err[256];
    if (gguf_open_memory(data, size, &g, err, sizeof err)) {
        if (strncmp(err, "gguf: ", 6) || strchr(err, '\n')) abort();   /* errors are one clean line */
        return 0;
    }
    volatile unsigned sum = 0;
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const gguf_kv *kv = &g.kv[i];
        uint32_t u;
        int64_t v;
        float f;
        bool b;
        gguf_str s;
        if (gguf_find_kv(&g, kv->key) != kv) abort();
        sum += gguf_get_u32(&g, kv->key, &u) + gguf_get_i64(&g, kv->key, &v) + gguf_get_f32(&g, kv->key, &f) +
               gguf_get_bool(&g, kv->key, &b);
        if (gguf_get_str(&g, kv->key, &s) && s.len) sum += (uint8_t)s.ptr[s.len - 1];
        if (kv->data_size) sum += kv->data[0] + kv->data[kv->data_size - 1];
        if (kv->type == GGUF_TYPE_ARRAY) sum += touch_array(kv, 0);
    }
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        if (gguf_find_tensor(&g, t->name) != t || t->size == 0) abort();
        sum += t->data[0] + t->data[t->size - 1];
    }
    (void)sum;
    gguf_close(&g);
    return 0;
}
