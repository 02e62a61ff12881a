/* GGUF writer (version 3): builds metadata and tensors in memory, then
 * writes the file with the requested alignment. Used by the model writer,
 * the demo model and the tests. */
#ifndef HEARTH_GGUF_WRITE_H
#define HEARTH_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);

void gw_set_alignment(gguf_writer *w, uint32_t alignment);  /* default 32; also written as general.alignment when not 32 */
void gw_kv_u32(gguf_writer *w, const char *key, uint32_t v);
void gw_kv_i32(gguf_writer *w, const char *key, int32_t v);
void gw_kv_u64(gguf_writer *w, const char *key, uint64_t v);
void gw_kv_f32(gguf_writer *w, const char *key, float v);
void gw_kv_bool(gguf_writer *w, const char *key, bool v);
void gw_kv_str(gguf_writer *w, const char *key, const char *v);
void gw_kv_str_n(gguf_writer *w, const char *key, const char *v, size_t len);
/* Arrays: elements are copied. */
void gw_kv_arr_str(gguf_writer *w, const char *key, const char *const *v, const size_t *lens, uint64_t n);
void gw_kv_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n);
void gw_kv_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
/* Any scalar element type (GGUF_TYPE_*), n elements of raw little-endian data. */
void gw_kv_arr_raw(gguf_writer *w, const char *key, int elem_type, const void *v, uint64_t n);

/* Add a tensor; data (size bytes, must match type and shape) is copied. */
void gw_tensor(gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
               const void *data, size_t size);

/* Write the file (0, or -1 with err). Any earlier failure (allocation) is reported here. */
int gguf_writer_save(gguf_writer *w, const char *path, char *err, size_t errlen);
/* Serialize to a malloc'd buffer (tests, fuzz corpora). */
int gguf_writer_to_buffer(gguf_writer *w, uint8_t **out, size_t *out_size, char *err, size_t errlen);

/* Added by the GGUF reader: any value (GGUF_TYPE_*, even an unknown id),
 * given already encoded as the file stores it (for an array: element type,
 * count, elements). Copied unchecked: for nested arrays and for tests that
 * need malformed files. */
void gw_kv_encoded(gguf_writer *w, const char *key, uint32_t type, const void *value, size_t size);

#endif
