/* GGUF reader (versions 2 and 3). The file is mmap'd; every count, offset,
 * size and string is checked against the file before it is used, so a
 * truncated or hostile file yields a one-line error, never a bad read. */
#ifndef HEARTH_GGUF_H
#define HEARTH_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

enum {
    GGUF_TYPE_U8 = 0, GGUF_TYPE_I8 = 1, GGUF_TYPE_U16 = 2, GGUF_TYPE_I16 = 3,
    GGUF_TYPE_U32 = 4, GGUF_TYPE_I32 = 5, GGUF_TYPE_F32 = 6, GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8, GGUF_TYPE_ARRAY = 9, GGUF_TYPE_U64 = 10, GGUF_TYPE_I64 = 11,
    GGUF_TYPE_F64 = 12, GGUF_TYPE_COUNT
};

#define GGUF_MAX_DIMS 4

/* A string inside the mapped file: not NUL-terminated. */
typedef struct { const char *ptr; uint64_t len; } gguf_str;

typedef struct gguf_kv {
    char *key;              /* NUL-terminated copy */
    int type;               /* GGUF_TYPE_* */
    int arr_type;           /* element type when type == ARRAY */
    uint64_t arr_n;         /* element count when type == ARRAY */
    const uint8_t *data;    /* the value (for arrays: the first element) in the map */
    uint64_t data_size;     /* bytes of the value as stored */
} gguf_kv;

typedef struct gguf_tensor {
    char *name;             /* NUL-terminated copy */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];  /* ne[0] is the row length; unused dims are 1 */
    int type;               /* FMT_* (formats.h) */
    uint64_t offset;        /* relative to the data section */
    const uint8_t *data;    /* in the map; checked to lie inside the file */
    uint64_t size;          /* bytes */
} gguf_tensor;

typedef struct gguf_file {
    const uint8_t *map;
    uint64_t size;
    bool owns_map;          /* mmap'd by gguf_open (unmapped by gguf_close) */
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset;
} gguf_file;

/* 0 on success; -1 with a one-line message in err. */
int gguf_open(const char *path, gguf_file *out, char *err, size_t errlen);
/* Parse a buffer the caller keeps alive (tests, fuzzing). */
int gguf_open_memory(const void *buf, size_t size, gguf_file *out, char *err, size_t errlen);

/* Files built into the binary (the demo model): gguf_open on the path
 * GGUF_BUILTIN_PREFIX name opens the buffer registered under name, which
 * must live as long as the program. 0, or -1 when the (small) table is
 * full; registering a name again replaces its buffer. */
#define GGUF_BUILTIN_PREFIX ":builtin:/"
int gguf_register_builtin(const char *name, const void *buf, size_t size);
void gguf_close(gguf_file *g);

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);

/* Typed getters: return false when the key is missing or its type does not
 * convert (any integer type converts to another if the value fits). */
bool gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out);
bool gguf_get_i64(const gguf_file *g, const char *key, int64_t *out);
bool gguf_get_f32(const gguf_file *g, const char *key, float *out);
bool gguf_get_bool(const gguf_file *g, const char *key, bool *out);
bool gguf_get_str(const gguf_file *g, const char *key, gguf_str *out);

/* Arrays. Element i of a numeric array converted to double / int64. */
bool gguf_arr_f64(const gguf_kv *kv, uint64_t i, double *out);
bool gguf_arr_i64(const gguf_kv *kv, uint64_t i, int64_t *out);
/* All strings of a string array, in order (out has kv->arr_n entries). */
bool gguf_arr_strings(const gguf_kv *kv, gguf_str *out);

const char *gguf_type_name(int type);
bool gguf_str_eq(gguf_str s, const char *c);
/* malloc'd NUL-terminated copy */
char *gguf_str_dup(gguf_str s);

/* Added by the GGUF reader: */
/* Element i of any array (a nested array comes back as an ARRAY kv with no
 * key, usable with gguf_arr_*); false when out of range. O(i) for strings
 * and arrays. */
bool gguf_arr_elem(const gguf_kv *kv, uint64_t i, gguf_kv *out);
/* Bytes of a tensor of this type and shape (formats.c's block sizes,
 * overflow-checked); false for an unknown type, a partial block, a bad
 * shape or a size that does not fit in 64 bits. */
bool gguf_tensor_size(int type, int n_dims, const int64_t *ne, uint64_t *size);

#endif
