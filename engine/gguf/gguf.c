/* GGUF reader. The file is parsed in one pass with a bounds-checked cursor:
 * nothing is read or allocated before the bytes (or, for counts, enough
 * bytes for that many items) are known to be in the file. Values stay in
 * the map; only keys, tensor names and the two tables are allocated. */
#include "engine/gguf/gguf.h"
#include "kernels/formats.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
#define DEFAULT_ALIGNMENT 32
#define MAX_ARRAY_DEPTH 16   /* arrays of arrays; deeper nesting is hostile */

/* Smallest encodings, used to bound counts by the bytes that are left. */
#define MIN_KV_BYTES 13      /* key length (8) + type (4) + a 1-byte value */
#define MIN_TENSOR_BYTES 32  /* name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8) */
#define ARRAY_HEADER_BYTES 12 /* element type (4) + count (8) */

static const uint8_t scalar_size[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_U8] = 1, [GGUF_TYPE_I8] = 1, [GGUF_TYPE_U16] = 2, [GGUF_TYPE_I16] = 2,
    [GGUF_TYPE_U32] = 4, [GGUF_TYPE_I32] = 4, [GGUF_TYPE_F32] = 4, [GGUF_TYPE_BOOL] = 1,
    [GGUF_TYPE_U64] = 8, [GGUF_TYPE_I64] = 8, [GGUF_TYPE_F64] = 8,
};

static const char *const type_names[GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const char *gguf_type_name(int type) {
    return type >= 0 && type < GGUF_TYPE_COUNT ? type_names[type] : "unknown";
}

/* ---- little-endian loads (byte by byte: no alignment or host-order assumptions) ---- */

static uint16_t rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd_u64(const uint8_t *p) { return (uint64_t)rd_u32(p) | (uint64_t)rd_u32(p + 4) << 32; }

/* ---- error text ---- */

/* A name from the file made safe for a one-line message: printable ASCII only, cut at 64. */
static const char *shown(const char *s, uint64_t len, char buf[80]) {
    uint64_t n = len < 64 ? len : 64;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = c >= 32 && c < 127 ? (char)c : '?';
    }
    strcpy(buf + n, len > 64 ? "..." : "");
    return buf;
}

typedef struct {
    const uint8_t *p;
    uint64_t size, pos;
    char *err;
    size_t errlen;
} cursor;

static int fail(cursor *c, const char *fmt, ...) {
    if (c->err && c->errlen) {
        int n = snprintf(c->err, c->errlen, "gguf: ");
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < c->errlen) vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static uint64_t left(const cursor *c) { return c->size - c->pos; }

/* Fails unless n more bytes are in the file; `what` names them. */
static int need(cursor *c, uint64_t n, const char *what) {
    if (n <= left(c)) return 0;
    return fail(c, "%s at byte %llu needs %llu bytes but the file ends at %llu",
                what, (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)c->size);
}

static int take_u32(cursor *c, uint32_t *v, const char *what) {
    if (need(c, 4, what)) return -1;
    *v = rd_u32(c->p + c->pos);
    c->pos += 4;
    return 0;
}

static int take_u64(cursor *c, uint64_t *v, const char *what) {
    if (need(c, 8, what)) return -1;
    *v = rd_u64(c->p + c->pos);
    c->pos += 8;
    return 0;
}

static int take_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len;
    if (take_u64(c, &len, what)) return -1;
    if (len > left(c))
        return fail(c, "%s at byte %llu has length %llu but only %llu bytes are left in the file",
                    what, (unsigned long long)(c->pos - 8), (unsigned long long)len,
                    (unsigned long long)left(c));
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += len;
    return 0;
}

/* ---- values ---- */

/* Checks the value of `type` at the cursor and moves past it. `key` is for errors. */
static int skip_value(cursor *c, uint32_t type, int depth, const char *key) {
    if (type >= GGUF_TYPE_COUNT)
        return fail(c, "key '%s' has unknown value type %u at byte %llu", key, type,
                    (unsigned long long)c->pos);
    if (type == GGUF_TYPE_STRING) {
        gguf_str s;
        return take_str(c, &s, "string value");
    }
    if (type != GGUF_TYPE_ARRAY) {
        if (need(c, scalar_size[type], "value")) return -1;
        /* A bool is one byte that must be 0 or 1: anything else is corruption. */
        if (type == GGUF_TYPE_BOOL && c->p[c->pos] > 1)
            return fail(c, "key '%s' has bool value %u at byte %llu (must be 0 or 1)", key,
                        c->p[c->pos], (unsigned long long)c->pos);
        c->pos += scalar_size[type];
        return 0;
    }
    if (depth >= MAX_ARRAY_DEPTH)
        return fail(c, "key '%s' nests arrays deeper than %d at byte %llu", key, MAX_ARRAY_DEPTH,
                    (unsigned long long)c->pos);
    uint32_t elem;
    uint64_t n;
    if (take_u32(c, &elem, "array element type") || take_u64(c, &n, "array length")) return -1;
    if (elem >= GGUF_TYPE_COUNT)
        return fail(c, "key '%s' is an array of unknown value type %u at byte %llu", key, elem,
                    (unsigned long long)(c->pos - 12));
    uint64_t min_bytes = elem == GGUF_TYPE_STRING ? 8 : elem == GGUF_TYPE_ARRAY ? ARRAY_HEADER_BYTES
                                                                                : scalar_size[elem];
    if (n > left(c) / min_bytes)
        return fail(c, "key '%s' array of %llu %s at byte %llu does not fit in the %llu bytes left",
                    key, (unsigned long long)n, gguf_type_name((int)elem),
                    (unsigned long long)(c->pos - 12), (unsigned long long)left(c));
    if (elem != GGUF_TYPE_STRING && elem != GGUF_TYPE_ARRAY && elem != GGUF_TYPE_BOOL) {
        c->pos += n * min_bytes;   /* cannot overflow: checked against the bytes left */
        return 0;
    }
    for (uint64_t i = 0; i < n; i++)
        if (skip_value(c, elem, depth + 1, key)) return -1;
    return 0;
}

/* Integer values as int64 / uint64; false when the type is not an integer or the value does not fit. */
static bool int_as_i64(int type, const uint8_t *p, int64_t *out) {
    uint64_t u;
    switch (type) {
    case GGUF_TYPE_U8:  *out = p[0]; return true;
    case GGUF_TYPE_I8:  { int8_t v; memcpy(&v, p, 1); *out = v; return true; }
    case GGUF_TYPE_U16: *out = rd_u16(p); return true;
    case GGUF_TYPE_I16: { uint16_t b = rd_u16(p); int16_t v; memcpy(&v, &b, 2); *out = v; return true; }
    case GGUF_TYPE_U32: *out = rd_u32(p); return true;
    case GGUF_TYPE_I32: { uint32_t b = rd_u32(p); int32_t v; memcpy(&v, &b, 4); *out = v; return true; }
    case GGUF_TYPE_U64: u = rd_u64(p); if (u > INT64_MAX) return false; *out = (int64_t)u; return true;
    case GGUF_TYPE_I64: { u = rd_u64(p); int64_t v; memcpy(&v, &u, 8); *out = v; return true; }
    default: return false;
    }
}

static bool int_as_u64(int type, const uint8_t *p, uint64_t *out) {
    if (type == GGUF_TYPE_U64) { *out = rd_u64(p); return true; }
    int64_t v;
    if (!int_as_i64(type, p, &v) || v < 0) return false;
    *out = (uint64_t)v;
    return true;
}

static bool num_as_f64(int type, const uint8_t *p, double *out) {
    if (type == GGUF_TYPE_F32) { uint32_t b = rd_u32(p); float f; memcpy(&f, &b, 4); *out = f; return true; }
    if (type == GGUF_TYPE_F64) { uint64_t b = rd_u64(p); memcpy(out, &b, 8); return true; }
    if (type == GGUF_TYPE_U64) { *out = (double)rd_u64(p); return true; }
    int64_t v;
    if (!int_as_i64(type, p, &v)) return false;
    *out = (double)v;
    return true;
}

/* ---- tensor sizes ---- */

/* Block geometry of a tensor type, from formats.c. A type it does not
 * describe has no known size, so such a tensor cannot be bounds-checked. */
static bool type_block(int type, uint64_t *elems, uint64_t *bytes) {
    const format_info *f = format_get(type);
    if (!f || f->block_elems < 1 || f->block_bytes < 1) return false;
    *elems = (uint64_t)f->block_elems;
    *bytes = f->block_bytes;
    return true;
}

typedef enum { SIZE_OK, SIZE_UNKNOWN_TYPE, SIZE_PARTIAL_BLOCK, SIZE_OVERFLOW, SIZE_BAD_SHAPE } size_status;

static size_status tensor_bytes(int type, int n_dims, const int64_t *ne, uint64_t *out) {
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) return SIZE_BAD_SHAPE;
    for (int d = 0; d < n_dims; d++)
        if (ne[d] < 1) return SIZE_BAD_SHAPE;
    uint64_t elems, bytes;
    if (!type_block(type, &elems, &bytes)) return SIZE_UNKNOWN_TYPE;
    if ((uint64_t)ne[0] % elems) return SIZE_PARTIAL_BLOCK;
    uint64_t blocks = (uint64_t)ne[0] / elems;
    if (blocks > UINT64_MAX / bytes) return SIZE_OVERFLOW;
    uint64_t size = blocks * bytes;
    for (int d = 1; d < n_dims; d++) {
        if (size > UINT64_MAX / (uint64_t)ne[d]) return SIZE_OVERFLOW;
        size *= (uint64_t)ne[d];
    }
    *out = size;
    return SIZE_OK;
}

bool gguf_tensor_size(int type, int n_dims, const int64_t *ne, uint64_t *size) {
    return tensor_bytes(type, n_dims, ne, size) == SIZE_OK;
}

/* ---- parsing ---- */

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Finds a repeated name among n (sorted copies of the pointers); NULL when all differ. */
static const char *find_duplicate(char **names, uint64_t n, bool *oom) {
    *oom = false;
    if (n < 2) return NULL;
    const char **sorted = malloc(n * sizeof *sorted);
    if (!sorted) { *oom = true; return NULL; }
    memcpy(sorted, names, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_name);
    const char *dup = NULL;
    for (uint64_t i = 1; i < n && !dup; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) dup = sorted[i];
    free(sorted);
    return dup;
}

/* Fails when two of the n names (what: "key" or "tensor") are equal; frees
 * names. The metadata keys and the tensor names are checked the same way. */
static int check_unique(cursor *c, char **names, uint64_t n, const char *what) {
    bool oom;
    const char *dup = find_duplicate(names, n, &oom);
    char buf[80];
    int rc = oom ? fail(c, "out of memory")
           : dup ? fail(c, "%s '%s' appears twice", what, shown(dup, strlen(dup), buf)) : 0;
    free(names);
    return rc;
}

static char *copy_name(cursor *c, gguf_str s, const char *what) {
    char buf[80];
    if (memchr(s.ptr, 0, s.len))
        return fail(c, "%s '%s' contains a NUL byte", what, shown(s.ptr, s.len, buf)), NULL;
    char *name = malloc(s.len + 1);
    if (!name) return fail(c, "out of memory"), NULL;
    memcpy(name, s.ptr, s.len);
    name[s.len] = 0;
    return name;
}

static int parse_header(cursor *c, gguf_file *g) {
    if (c->size < 24)
        return fail(c, "file is %llu bytes, too small for a GGUF header (24)", (unsigned long long)c->size);
    if (memcmp(c->p, GGUF_MAGIC, 4))
        return fail(c, "not a GGUF file (magic %02x %02x %02x %02x, expected 'GGUF')",
                    c->p[0], c->p[1], c->p[2], c->p[3]);
    c->pos = 4;
    take_u32(c, &g->version, "version");
    if (g->version == 1)
        return fail(c, "GGUF version 1 is not supported (hearth reads versions 2 and 3)");
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return fail(c, "big-endian GGUF is not supported");
    if (g->version != 2 && g->version != 3)
        return fail(c, "unknown GGUF version %u (hearth reads versions 2 and 3)", g->version);
    take_u64(c, &g->n_tensors, "tensor count");
    take_u64(c, &g->n_kv, "metadata count");
    if (g->n_kv > left(c) / MIN_KV_BYTES)
        return fail(c, "metadata count %llu cannot fit in the %llu bytes after the header",
                    (unsigned long long)g->n_kv, (unsigned long long)left(c));
    if (g->n_tensors > left(c) / MIN_TENSOR_BYTES)
        return fail(c, "tensor count %llu cannot fit in the %llu bytes after the header",
                    (unsigned long long)g->n_tensors, (unsigned long long)left(c));
    return 0;
}

static int parse_kvs(cursor *c, gguf_file *g) {
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    if (!g->kv) return fail(c, "out of memory");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        gguf_str key = {0};
        char what[48];
        snprintf(what, sizeof what, "key %llu", (unsigned long long)i);
        if (take_str(c, &key, what) || !(kv->key = copy_name(c, key, what))) return -1;
        uint32_t type;
        if (take_u32(c, &type, "value type")) return -1;
        char buf[80];
        const char *k = shown(kv->key, key.len, buf);
        uint64_t start = c->pos;
        if (skip_value(c, type, 0, k)) return -1;
        kv->type = (int)type;
        kv->data = c->p + start;
        kv->data_size = c->pos - start;
        if (type == GGUF_TYPE_ARRAY) {
            kv->arr_type = (int)rd_u32(kv->data);
            kv->arr_n = rd_u64(kv->data + 4);
            kv->data += ARRAY_HEADER_BYTES;
            kv->data_size -= ARRAY_HEADER_BYTES;
        }
    }
    char **keys = malloc((g->n_kv ? g->n_kv : 1) * sizeof *keys);
    if (!keys) return fail(c, "out of memory");
    for (uint64_t i = 0; i < g->n_kv; i++) keys[i] = g->kv[i].key;
    return check_unique(c, keys, g->n_kv, "key");
}

static int parse_alignment(cursor *c, gguf_file *g) {
    g->alignment = DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find_kv(g, "general.alignment");
    if (!kv) return 0;
    uint64_t a;
    if (!int_as_u64(kv->type, kv->data, &a))
        return fail(c, "general.alignment has type %s, expected an unsigned integer", gguf_type_name(kv->type));
    if (a == 0 || (a & (a - 1)))
        return fail(c, "general.alignment is %llu, must be a non-zero power of two", (unsigned long long)a);
    g->alignment = a;
    return 0;
}

static int parse_tensor_info(cursor *c, gguf_tensor *t, uint64_t index) {
    char what[48], buf[80];
    snprintf(what, sizeof what, "tensor %llu name", (unsigned long long)index);
    gguf_str name = {0};
    if (take_str(c, &name, what) || !(t->name = copy_name(c, name, "tensor name"))) return -1;
    const char *tn = shown(t->name, name.len, buf);
    uint32_t n_dims;
    if (take_u32(c, &n_dims, "tensor dimension count")) return -1;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return fail(c, "tensor '%s' has %u dimensions (must be 1 to %d)", tn, n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        if (take_u64(c, &ne, "tensor dimension")) return -1;
        if (ne < 1 || ne > INT64_MAX)
            return fail(c, "tensor '%s' dimension %u is %llu (must be 1 to 2^63-1)", tn, d,
                        (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
    }
    uint32_t type;
    if (take_u32(c, &type, "tensor type") || take_u64(c, &t->offset, "tensor offset")) return -1;
    if (type >= FMT_COUNT_MAX)
        return fail(c, "tensor '%s' has unknown type %u", tn, type);
    t->type = (int)type;
    switch (tensor_bytes(t->type, t->n_dims, t->ne, &t->size)) {
    case SIZE_OK: return 0;
    case SIZE_UNKNOWN_TYPE:
        return fail(c, "tensor '%s' has type %s, whose size is unknown", tn, format_name(t->type));
    case SIZE_PARTIAL_BLOCK:
        return fail(c, "tensor '%s' row of %lld elements is not a whole number of %s blocks", tn,
                    (long long)t->ne[0], format_name(t->type));
    default:
        return fail(c, "tensor '%s' of type %s with shape [%lld, %lld, %lld, %lld] is too large", tn,
                    format_name(t->type), (long long)t->ne[0], (long long)t->ne[1],
                    (long long)t->ne[2], (long long)t->ne[3]);
    }
}

static int parse_tensors(cursor *c, gguf_file *g) {
    if (g->n_tensors > left(c) / MIN_TENSOR_BYTES)
        return fail(c, "tensor count %llu cannot fit in the %llu bytes after the metadata",
                    (unsigned long long)g->n_tensors, (unsigned long long)left(c));
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors) return fail(c, "out of memory");
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (parse_tensor_info(c, &g->tensors[i], i)) return -1;

    char **names = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *names);
    if (!names) return fail(c, "out of memory");
    for (uint64_t i = 0; i < g->n_tensors; i++) names[i] = g->tensors[i].name;
    if (check_unique(c, names, g->n_tensors, "tensor")) return -1;

    /* The data section starts at the next multiple of the alignment. A file
     * without tensors may end before that point. */
    uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
    if (pad > left(c)) {
        if (g->n_tensors)
            return fail(c, "data section (after byte %llu, aligned to %llu) starts past end of file (size %llu)",
                        (unsigned long long)c->pos, (unsigned long long)g->alignment,
                        (unsigned long long)c->size);
        pad = left(c);
    }
    g->data_offset = c->pos + pad;
    uint64_t room = c->size - g->data_offset;
    char buf[80];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        const char *tn = shown(t->name, strlen(t->name), buf);
        if (t->offset % g->alignment)
            return fail(c, "tensor '%s' data offset %llu is not a multiple of the alignment %llu", tn,
                        (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (t->offset > room || t->size > room - t->offset)
            return fail(c, "tensor '%s' data [offset %llu, %llu bytes] runs past end of file (size %llu, data section at %llu)",
                        tn, (unsigned long long)t->offset, (unsigned long long)t->size,
                        (unsigned long long)c->size, (unsigned long long)g->data_offset);
        t->data = c->p + g->data_offset + t->offset;
    }
    return 0;
}

int gguf_open_memory(const void *buf, size_t size, gguf_file *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (err && errlen) err[0] = 0;
    cursor c = {.p = buf, .size = size, .err = err, .errlen = errlen};
    out->map = buf;
    out->size = size;
    if (!buf && size) return fail(&c, "no buffer");
    if (parse_header(&c, out) || parse_kvs(&c, out) || parse_alignment(&c, out) || parse_tensors(&c, out)) {
        gguf_close(out);
        return -1;
    }
    return 0;
}

/* ---- files built into the binary ------------------------------------------ */

enum { N_BUILTIN = 4 };
static struct { const char *name; const void *buf; size_t size; } builtin[N_BUILTIN];
static pthread_mutex_t builtin_lock = PTHREAD_MUTEX_INITIALIZER;

int gguf_register_builtin(const char *name, const void *buf, size_t size) {
    int rc = -1;
    pthread_mutex_lock(&builtin_lock);
    for (int i = 0; i < N_BUILTIN; i++) {
        if (builtin[i].name && strcmp(builtin[i].name, name) != 0) continue;
        builtin[i].name = name;
        builtin[i].buf = buf;
        builtin[i].size = size;
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&builtin_lock);
    return rc;
}

static bool find_builtin(const char *name, const void **buf, size_t *size) {
    bool found = false;
    pthread_mutex_lock(&builtin_lock);
    for (int i = 0; i < N_BUILTIN && !found; i++) {
        if (builtin[i].name && strcmp(builtin[i].name, name) == 0) {
            *buf = builtin[i].buf;
            *size = builtin[i].size;
            found = true;
        }
    }
    pthread_mutex_unlock(&builtin_lock);
    return found;
}

int gguf_open(const char *path, gguf_file *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    cursor c = {.err = err, .errlen = errlen};
    size_t np = strlen(GGUF_BUILTIN_PREFIX);
    if (strncmp(path, GGUF_BUILTIN_PREFIX, np) == 0) {
        const void *buf;
        size_t size;
        if (!find_builtin(path + np, &buf, &size)) return fail(&c, "no built-in file '%s'", path + np);
        return gguf_open_memory(buf, size, out, err, errlen);
    }
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (the check below refuses it) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return fail(&c, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(&c, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return fail(&c, "'%s' is empty", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) return fail(&c, "cannot map '%s': %s", path, strerror(map_errno));
    if (gguf_open_memory(map, (size_t)st.st_size, out, err, errlen)) {
        munmap(map, (size_t)st.st_size);
        return -1;
    }
    out->owns_map = true;
    return 0;
}

void gguf_close(gguf_file *g) {
    if (!g) return;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) free(g->kv[i].key);
    if (g->tensors)
        for (uint64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    if (g->owns_map) munmap((void *)g->map, g->size);
    memset(g, 0, sizeof *g);
}

/* ---- lookups ---- */

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key) {
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++)
        if (g->kv[i].key && !strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name) {
    for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++)
        if (g->tensors[i].name && !strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

bool gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    uint64_t v;
    if (!kv || !int_as_u64(kv->type, kv->data, &v) || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

bool gguf_get_i64(const gguf_file *g, const char *key, int64_t *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    return kv && int_as_i64(kv->type, kv->data, out);
}

bool gguf_get_f32(const gguf_file *g, const char *key, float *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    double v;
    if (!kv || !num_as_f64(kv->type, kv->data, &v)) return false;
    if (isfinite(v) && fabs(v) > FLT_MAX) return false;   /* would not fit a float */
    *out = (float)v;
    return true;
}

bool gguf_get_bool(const gguf_file *g, const char *key, bool *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv || kv->type != GGUF_TYPE_BOOL) return false;
    *out = kv->data[0] != 0;
    return true;
}

bool gguf_get_str(const gguf_file *g, const char *key, gguf_str *out) {
    const gguf_kv *kv = gguf_find_kv(g, key);
    if (!kv || kv->type != GGUF_TYPE_STRING || kv->data_size < 8) return false;
    uint64_t len = rd_u64(kv->data);
    if (len > kv->data_size - 8) return false;
    out->ptr = (const char *)kv->data + 8;
    out->len = len;
    return true;
}

/* ---- arrays ---- */

/* Element i of a scalar array, or NULL. */
static const uint8_t *scalar_elem(const gguf_kv *kv, uint64_t i) {
    if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type < 0 || kv->arr_type >= GGUF_TYPE_COUNT) return NULL;
    uint64_t size = scalar_size[kv->arr_type];
    if (!size || i >= kv->arr_n || i >= kv->data_size / size) return NULL;
    return kv->data + i * size;
}

bool gguf_arr_f64(const gguf_kv *kv, uint64_t i, double *out) {
    const uint8_t *p = scalar_elem(kv, i);
    return p && num_as_f64(kv->arr_type, p, out);
}

bool gguf_arr_i64(const gguf_kv *kv, uint64_t i, int64_t *out) {
    const uint8_t *p = scalar_elem(kv, i);
    return p && int_as_i64(kv->arr_type, p, out);
}

bool gguf_arr_strings(const gguf_kv *kv, gguf_str *out) {
    if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING) return false;
    cursor c = {.p = kv->data, .size = kv->data_size};
    for (uint64_t i = 0; i < kv->arr_n; i++)
        if (take_str(&c, &out[i], "string")) return false;
    return true;
}

bool gguf_arr_elem(const gguf_kv *kv, uint64_t i, gguf_kv *out) {
    if (kv->type != GGUF_TYPE_ARRAY || i >= kv->arr_n || kv->arr_type < 0 || kv->arr_type >= GGUF_TYPE_COUNT)
        return false;
    cursor c = {.p = kv->data, .size = kv->data_size};
    for (uint64_t k = 0; k < i; k++)
        if (skip_value(&c, (uint32_t)kv->arr_type, 1, "")) return false;
    uint64_t start = c.pos;
    if (skip_value(&c, (uint32_t)kv->arr_type, 1, "")) return false;
    memset(out, 0, sizeof *out);
    out->type = kv->arr_type;
    out->data = kv->data + start;
    out->data_size = c.pos - start;
    if (out->type == GGUF_TYPE_ARRAY) {
        out->arr_type = (int)rd_u32(out->data);
        out->arr_n = rd_u64(out->data + 4);
        out->data += ARRAY_HEADER_BYTES;
        out->data_size -= ARRAY_HEADER_BYTES;
    }
    return true;
}

/* ---- strings ---- */

bool gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && (n == 0 || !memcmp(s.ptr, c, n));
}

char *gguf_str_dup(gguf_str s) {
    if (s.len >= SIZE_MAX) return NULL;
    char *r = malloc(s.len + 1);
    if (!r) return NULL;
    if (s.len) memcpy(r, s.ptr, s.len);
    r[s.len] = 0;
    return r;
}
