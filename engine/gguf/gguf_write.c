/* GGUF writer (version 3). Metadata is encoded as it is added; tensors are
 * copied and laid out at write time, each at a multiple of the alignment.
 * The first failure (bad argument, out of memory) is kept and reported by
 * gguf_writer_save / gguf_writer_to_buffer; later calls do nothing. */
#include "engine/gguf/gguf_write.h"
#include "engine/gguf/gguf.h"
#include "kernels/formats.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_ALIGNMENT 32

typedef struct { uint8_t *p; size_t len, cap; } bytes;

typedef struct {
    char *name;
    int type, n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint8_t *data;
    size_t size;
} wtensor;

struct gguf_writer {
    uint32_t alignment;
    bool failed;
    char why[200];
    bytes kvs;              /* encoded key/value pairs, in the order added */
    uint64_t n_kv;
    char **keys;            /* to refuse a key added twice */
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
};

static void writer_fail(gguf_writer *w, const char *fmt, ...) {
    if (w->failed) return;
    w->failed = true;
    int n = snprintf(w->why, sizeof w->why, "gguf writer: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why + n, sizeof w->why - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Ensures room for n more bytes. */
static bool reserve(gguf_writer *w, bytes *b, size_t n) {
    if (n <= b->cap - b->len) return true;
    if (n > SIZE_MAX / 2 - b->len) { writer_fail(w, "out of memory"); return false; }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) { writer_fail(w, "out of memory"); return false; }
    b->p = p;
    b->cap = cap;
    return true;
}

static void put(gguf_writer *w, bytes *b, const void *src, size_t n) {
    if (w->failed || !reserve(w, b, n)) return;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_u32(gguf_writer *w, bytes *b, uint32_t v) {
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, le, 4);
}

static void put_u64(gguf_writer *w, bytes *b, uint64_t v) {
    put_u32(w, b, (uint32_t)v);
    put_u32(w, b, (uint32_t)(v >> 32));
}

static void put_str(gguf_writer *w, bytes *b, const char *s, size_t len) {
    put_u64(w, b, len);
    put(w, b, s, len);
}

gguf_writer *gguf_writer_new(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (uint64_t i = 0; w->keys && i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].data);
    }
    free(w->tensors);
    free(w->kvs.p);
    free(w);
}

void gw_set_alignment(gguf_writer *w, uint32_t alignment) {
    if (!w || w->failed) return;
    if (alignment == 0 || (alignment & (alignment - 1)))
        return writer_fail(w, "alignment %u is not a non-zero power of two", alignment);
    w->alignment = alignment;
}

/* Starts a key/value pair: checks the key, remembers it and encodes it with the type. */
static bool begin_kv(gguf_writer *w, const char *key, uint32_t type, bool checked) {
    if (!w || w->failed) return false;
    if (!key) { writer_fail(w, "key is NULL"); return false; }
    if (checked && !strcmp(key, "general.alignment")) {
        writer_fail(w, "set general.alignment with gw_set_alignment");
        return false;
    }
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key)) { writer_fail(w, "key '%s' added twice", key); return false; }
    char **keys = realloc(w->keys, (w->n_kv + 1) * sizeof *keys);
    char *copy = keys ? strdup(key) : NULL;
    if (keys) w->keys = keys;
    if (!copy) { writer_fail(w, "out of memory"); return false; }
    w->keys[w->n_kv++] = copy;
    put_str(w, &w->kvs, key, strlen(key));
    put_u32(w, &w->kvs, type);
    return !w->failed;
}

void gw_kv_encoded(gguf_writer *w, const char *key, uint32_t type, const void *value, size_t size) {
    if (!begin_kv(w, key, type, false)) return;
    if (size && !value) return writer_fail(w, "key '%s': value is NULL", key);
    put(w, &w->kvs, value, size);
}

void gw_kv_u32(gguf_writer *w, const char *key, uint32_t v) {
    if (begin_kv(w, key, GGUF_TYPE_U32, true)) put_u32(w, &w->kvs, v);
}

void gw_kv_i32(gguf_writer *w, const char *key, int32_t v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if (begin_kv(w, key, GGUF_TYPE_I32, true)) put_u32(w, &w->kvs, u);
}

void gw_kv_u64(gguf_writer *w, const char *key, uint64_t v) {
    if (begin_kv(w, key, GGUF_TYPE_U64, true)) put_u64(w, &w->kvs, v);
}

void gw_kv_f32(gguf_writer *w, const char *key, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if (begin_kv(w, key, GGUF_TYPE_F32, true)) put_u32(w, &w->kvs, u);
}

void gw_kv_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    if (begin_kv(w, key, GGUF_TYPE_BOOL, true)) put(w, &w->kvs, &b, 1);
}

void gw_kv_str_n(gguf_writer *w, const char *key, const char *v, size_t len) {
    if (!begin_kv(w, key, GGUF_TYPE_STRING, true)) return;
    if (!v && len) return writer_fail(w, "key '%s': string is NULL", key);
    put_str(w, &w->kvs, v, len);
}

void gw_kv_str(gguf_writer *w, const char *key, const char *v) {
    gw_kv_str_n(w, key, v, v ? strlen(v) : 0);
}

void gw_kv_arr_str(gguf_writer *w, const char *key, const char *const *v, const size_t *lens, uint64_t n) {
    if (!begin_kv(w, key, GGUF_TYPE_ARRAY, true)) return;
    if (n && !v) return writer_fail(w, "key '%s': array is NULL", key);
    put_u32(w, &w->kvs, GGUF_TYPE_STRING);
    put_u64(w, &w->kvs, n);
    for (uint64_t i = 0; i < n && !w->failed; i++) {
        size_t len = lens ? lens[i] : v[i] ? strlen(v[i]) : 0;
        if (!v[i] && len) return writer_fail(w, "key '%s': string %llu is NULL", key, (unsigned long long)i);
        put_str(w, &w->kvs, v[i], len);
    }
}

/* Element bytes of the scalar value types; 0 for string, array and unknown. */
static size_t scalar_bytes(int type) {
    switch (type) {
    case GGUF_TYPE_U8: case GGUF_TYPE_I8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_U16: case GGUF_TYPE_I16: return 2;
    case GGUF_TYPE_U32: case GGUF_TYPE_I32: case GGUF_TYPE_F32: return 4;
    case GGUF_TYPE_U64: case GGUF_TYPE_I64: case GGUF_TYPE_F64: return 8;
    default: return 0;
    }
}

void gw_kv_arr_raw(gguf_writer *w, const char *key, int elem_type, const void *v, uint64_t n) {
    if (!begin_kv(w, key, GGUF_TYPE_ARRAY, true)) return;
    size_t size = scalar_bytes(elem_type);
    if (!size) return writer_fail(w, "key '%s': element type %d is not a scalar type", key, elem_type);
    if (n > SIZE_MAX / size) return writer_fail(w, "key '%s': array of %llu is too large", key, (unsigned long long)n);
    if (n && !v) return writer_fail(w, "key '%s': array is NULL", key);
    put_u32(w, &w->kvs, (uint32_t)elem_type);
    put_u64(w, &w->kvs, n);
    put(w, &w->kvs, v, (size_t)n * size);
}

/* Arrays of f32 / i32 are written element by element so the file is little-endian on any host. */
void gw_kv_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n) {
    if (!begin_kv(w, key, GGUF_TYPE_ARRAY, true)) return;
    if (n && !v) return writer_fail(w, "key '%s': array is NULL", key);
    put_u32(w, &w->kvs, GGUF_TYPE_F32);
    put_u64(w, &w->kvs, n);
    for (uint64_t i = 0; i < n && !w->failed; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        put_u32(w, &w->kvs, u);
    }
}

void gw_kv_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    if (!begin_kv(w, key, GGUF_TYPE_ARRAY, true)) return;
    if (n && !v) return writer_fail(w, "key '%s': array is NULL", key);
    put_u32(w, &w->kvs, GGUF_TYPE_I32);
    put_u64(w, &w->kvs, n);
    for (uint64_t i = 0; i < n && !w->failed; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        put_u32(w, &w->kvs, u);
    }
}

void gw_tensor(gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
               const void *data, size_t size) {
    if (!w || w->failed) return;
    if (!name) return writer_fail(w, "tensor name is NULL");
    for (size_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name)) return writer_fail(w, "tensor '%s' added twice", name);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS || !ne)
        return writer_fail(w, "tensor '%s' has %d dimensions (must be 1 to %d)", name, n_dims, GGUF_MAX_DIMS);
    uint64_t need;
    if (!gguf_tensor_size(type, n_dims, ne, &need))
        return writer_fail(w, "tensor '%s': type %s with this shape has no valid size", name, format_name(type));
    if (need != size)
        return writer_fail(w, "tensor '%s': %zu bytes given, its type %s and shape need %llu", name, size,
                           format_name(type), (unsigned long long)need);
    if (!data) return writer_fail(w, "tensor '%s': data is NULL", name);
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 16;
        wtensor *t = realloc(w->tensors, cap * sizeof *t);
        if (!t) return writer_fail(w, "out of memory");
        w->tensors = t;
        w->cap_tensors = cap;
    }
    wtensor t = {.type = type, .n_dims = n_dims, .size = size};
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
    t.name = strdup(name);
    t.data = malloc(size);
    if (!t.name || !t.data) {
        free(t.name);
        free(t.data);
        return writer_fail(w, "out of memory");
    }
    memcpy(t.data, data, size);
    w->tensors[w->n_tensors++] = t;
}

/* ---- output ---- */

/* Where the bytes go: a buffer sized in advance, or a file. */
typedef struct {
    uint8_t *buf;
    size_t pos;
    FILE *f;
    bool io_error;
} sink;

static void emit(sink *s, const void *p, size_t n) {
    if (!n) return;
    if (s->f) {
        if (!s->io_error && fwrite(p, 1, n, s->f) != n) s->io_error = true;
    } else {
        memcpy(s->buf + s->pos, p, n);
    }
    s->pos += n;
}

static void emit_zeros(sink *s, uint64_t n) {
    static const uint8_t zeros[256];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        emit(s, zeros, k);
        n -= k;
    }
}

static uint64_t pad_to(uint64_t pos, uint64_t align) { return (align - pos % align) % align; }

/* Encodes everything before the tensor data (header, metadata, tensor
 * infos) into head, and returns the total file size (0 on failure). */
static uint64_t layout(gguf_writer *w, bytes *head) {
    if (!w) return 0;
    bool write_alignment = w->alignment != DEFAULT_ALIGNMENT;
    put(w, head, "GGUF", 4);
    put_u32(w, head, 3);
    put_u64(w, head, w->n_tensors);
    put_u64(w, head, w->n_kv + write_alignment);
    if (write_alignment) {
        static const char key[] = "general.alignment";
        put_str(w, head, key, sizeof key - 1);
        put_u32(w, head, GGUF_TYPE_U32);
        put_u32(w, head, w->alignment);
    }
    put(w, head, w->kvs.p, w->kvs.len);
    uint64_t offset = 0, end = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        offset += pad_to(offset, w->alignment);
        put_str(w, head, t->name, strlen(t->name));
        put_u32(w, head, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(w, head, (uint64_t)t->ne[d]);
        put_u32(w, head, (uint32_t)t->type);
        put_u64(w, head, offset);
        offset += t->size;
        end = offset;
    }
    if (w->failed) return 0;
    uint64_t data_start = head->len + (w->n_tensors ? pad_to(head->len, w->alignment) : 0);
    return data_start + end;
}

/* Writes the file through s; head is from layout(). No padding after the last tensor. */
static void write_all(const gguf_writer *w, const bytes *head, sink *s) {
    emit(s, head->p, head->len);
    if (!w->n_tensors) return;
    emit_zeros(s, pad_to(head->len, w->alignment));
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        uint64_t pad = pad_to(offset, w->alignment);
        emit_zeros(s, pad);
        emit(s, w->tensors[i].data, w->tensors[i].size);
        offset += pad + w->tensors[i].size;
    }
}

static int report(gguf_writer *w, char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s", w ? w->why : "gguf writer: out of memory");
    return -1;
}

int gguf_writer_to_buffer(gguf_writer *w, uint8_t **out, size_t *out_size, char *err, size_t errlen) {
    *out = NULL;
    *out_size = 0;
    bytes head = {0};
    uint64_t total = layout(w, &head);
    if (!w || w->failed) {
        free(head.p);
        return report(w, err, errlen);
    }
    uint8_t *buf = total <= SIZE_MAX ? malloc(total ? (size_t)total : 1) : NULL;
    if (!buf) {
        free(head.p);
        writer_fail(w, "out of memory for a %llu-byte file", (unsigned long long)total);
        return report(w, err, errlen);
    }
    sink s = {.buf = buf};
    write_all(w, &head, &s);
    free(head.p);
    *out = buf;
    *out_size = (size_t)total;
    return 0;
}

int gguf_writer_save(gguf_writer *w, const char *path, char *err, size_t errlen) {
    bytes head = {0};
    layout(w, &head);
    if (!w || w->failed) {
        free(head.p);
        return report(w, err, errlen);
    }
    /* Write beside the target and rename, so a failed write never leaves a half file under its name. */
    size_t n = strlen(path) + 5;
    char *tmp = malloc(n);
    FILE *f = tmp ? (snprintf(tmp, n, "%s.tmp", path), fopen(tmp, "wb")) : NULL;
    if (!f) {
        free(head.p);
        if (tmp) writer_fail(w, "cannot create '%s'", tmp);
        else writer_fail(w, "out of memory");
        free(tmp);
        return report(w, err, errlen);
    }
    sink s = {.f = f};
    write_all(w, &head, &s);
    free(head.p);
    bool ok = !s.io_error && fclose(f) == 0;
    if (!ok && s.io_error) fclose(f);
    if (ok && rename(tmp, path) == 0) {
        free(tmp);
        return 0;
    }
    remove(tmp);
    writer_fail(w, "cannot write '%s'", path);
    free(tmp);
    return report(w, err, errlen);
}
