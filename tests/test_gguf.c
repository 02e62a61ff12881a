/* GGUF reader and writer: round trips of every value and tensor type, the
 * real model files, and hostile input (truncation at every byte, flipped
 * bytes, huge counts and sizes, bad alignment, bad types). Every parse of
 * hostile input runs on a heap copy of exactly its size, so ASan sees any
 * read past the end. */
#include "tests/test.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "kernels/formats.h"

#include <stdint.h>
#include <unistd.h>

/* ---- a byte builder for hand-made files ---- */

typedef struct { uint8_t b[4096]; size_t n; } fbuf;

static void fb_bytes(fbuf *f, const void *p, size_t n) {
    if (f->n + n > sizeof f->b) { fprintf(stderr, "fbuf overflow\n"); exit(2); }
    memcpy(f->b + f->n, p, n);
    f->n += n;
}
static void fb_u8(fbuf *f, uint8_t v) { fb_bytes(f, &v, 1); }
static void fb_u32(fbuf *f, uint32_t v) { for (int i = 0; i < 4; i++) fb_u8(f, (uint8_t)(v >> 8 * i)); }
static void fb_u64(fbuf *f, uint64_t v) { for (int i = 0; i < 8; i++) fb_u8(f, (uint8_t)(v >> 8 * i)); }
static void fb_str(fbuf *f, const char *s) { fb_u64(f, strlen(s)); fb_bytes(f, s, strlen(s)); }
static void fb_header(fbuf *f, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    f->n = 0;
    fb_bytes(f, "GGUF", 4);
    fb_u32(f, version);
    fb_u64(f, n_tensors);
    fb_u64(f, n_kv);
}
static void fb_pad(fbuf *f, size_t align) { while (f->n % align) fb_u8(f, 0); }
static void fb_tensor_info(fbuf *f, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
    fb_str(f, name);
    fb_u32(f, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) fb_u64(f, ne[d]);
    fb_u32(f, type);
    fb_u64(f, off);
}

/* Parses a heap copy of exactly n bytes. Returns the rc; err gets the message. */
static int parse_copy(const uint8_t *p, size_t n, char *err, size_t errlen) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    gguf_file g;
    int rc = gguf_open_memory(copy, n, &g, err, errlen);
    if (rc == 0) {
        /* Touch everything the reader hands out: all of it must be in the buffer. */
        unsigned sum = 0;
        for (uint64_t i = 0; i < g.n_tensors; i++)
            sum += g.tensors[i].data[0] + g.tensors[i].data[g.tensors[i].size - 1];
        for (uint64_t i = 0; i < g.n_kv; i++) {
            const gguf_kv *kv = &g.kv[i];
            if (kv->data_size) sum += kv->data[0] + kv->data[kv->data_size - 1];
            if (kv->type == GGUF_TYPE_ARRAY && kv->arr_type == GGUF_TYPE_STRING && kv->arr_n < 4096) {
                gguf_str s[4096];
                if (gguf_arr_strings(kv, s))
                    for (uint64_t k = 0; k < kv->arr_n; k++) sum += s[k].len ? (uint8_t)s[k].ptr[s[k].len - 1] : 0;
            }
        }
        (void)sum;
    }
    gguf_close(&g);
    free(copy);
    return rc;
}

static bool one_line(const char *s) { return strncmp(s, "gguf: ", 6) == 0 && !strchr(s, '\n') && strlen(s) > 8; }

/* Expects a clean failure whose message contains want. */
#define EXPECT_ERROR(f, want) do { \
    char err_[256] = ""; \
    int rc_ = parse_copy((f)->b, (f)->n, err_, sizeof err_); \
    CHECKF(rc_ == -1 && one_line(err_) && strstr(err_, want), "want error with '%s', got rc %d '%s'", want, rc_, err_); \
} while (0)

#define EXPECT_OK(f) do { \
    char err_[256] = ""; \
    int rc_ = parse_copy((f)->b, (f)->n, err_, sizeof err_); \
    CHECKF(rc_ == 0, "want success, got '%s'", err_); \
} while (0)

/* ---- round trip: every value type ---- */

/* An encoded array header + elements, for gw_kv_encoded. */
static void enc_arr_i32(fbuf *f, const int32_t *v, uint64_t n) {
    fb_u32(f, GGUF_TYPE_I32);
    fb_u64(f, n);
    for (uint64_t i = 0; i < n; i++) fb_u32(f, (uint32_t)v[i]);
}

static void test_values_round_trip(void) {
    gguf_writer *w = gguf_writer_new();
    uint8_t u8 = 200; int8_t i8 = -5; uint16_t u16 = 60000; int16_t i16 = -30000;
    uint8_t le[8];
    gw_kv_encoded(w, "v.u8", GGUF_TYPE_U8, &u8, 1);
    gw_kv_encoded(w, "v.i8", GGUF_TYPE_I8, &i8, 1);
    le[0] = (uint8_t)u16; le[1] = (uint8_t)(u16 >> 8);
    gw_kv_encoded(w, "v.u16", GGUF_TYPE_U16, le, 2);
    uint16_t i16b; memcpy(&i16b, &i16, 2);
    le[0] = (uint8_t)i16b; le[1] = (uint8_t)(i16b >> 8);
    gw_kv_encoded(w, "v.i16", GGUF_TYPE_I16, le, 2);
    gw_kv_u32(w, "v.u32", 4000000000u);
    gw_kv_i32(w, "v.i32", -2000000000);
    gw_kv_f32(w, "v.f32", 1e-5f);
    gw_kv_bool(w, "v.bool", true);
    gw_kv_bool(w, "v.bool0", false);
    gw_kv_str(w, "v.str", "hello, gguf");
    gw_kv_str_n(w, "v.str_nul", "a\0b", 3);
    gw_kv_str(w, "v.empty", "");
    gw_kv_u64(w, "v.u64", 1ull << 40);
    gw_kv_u64(w, "v.u64max", UINT64_MAX);
    int64_t i64 = -(1ll << 50); uint64_t i64b; memcpy(&i64b, &i64, 8);
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(i64b >> 8 * i);
    gw_kv_encoded(w, "v.i64", GGUF_TYPE_I64, le, 8);
    double f64 = 0.1; uint64_t f64b; memcpy(&f64b, &f64, 8);
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(f64b >> 8 * i);
    gw_kv_encoded(w, "v.f64", GGUF_TYPE_F64, le, 8);
    double big = 1e300; uint64_t bigb; memcpy(&bigb, &big, 8);
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(bigb >> 8 * i);
    gw_kv_encoded(w, "v.f64big", GGUF_TYPE_F64, le, 8);

    /* arrays of every scalar type */
    const char *strs[] = {"one", "", "three\xe2\x9c\x93"};
    gw_kv_arr_str(w, "a.str", strs, NULL, 3);
    const float fs[] = {1.5f, -2.25f, 3e10f};
    gw_kv_arr_f32(w, "a.f32", fs, 3);
    const int32_t is[] = {-1, 0, 2147483647, -2147483647 - 1};
    gw_kv_arr_i32(w, "a.i32", is, 4);
    const uint8_t u8s[] = {0, 255, 7};
    gw_kv_arr_raw(w, "a.u8", GGUF_TYPE_U8, u8s, 3);
    const uint8_t i8s[] = {0x80, 0x7f};              /* -128, 127 */
    gw_kv_arr_raw(w, "a.i8", GGUF_TYPE_I8, i8s, 2);
    const uint8_t u16s[] = {0xff, 0xff, 1, 0};       /* 65535, 1 */
    gw_kv_arr_raw(w, "a.u16", GGUF_TYPE_U16, u16s, 2);
    const uint8_t i16s[] = {0x00, 0x80};             /* -32768 */
    gw_kv_arr_raw(w, "a.i16", GGUF_TYPE_I16, i16s, 1);
    const uint8_t u32s[] = {0xff, 0xff, 0xff, 0xff};
    gw_kv_arr_raw(w, "a.u32", GGUF_TYPE_U32, u32s, 1);
    const uint8_t bools[] = {1, 0, 1};
    gw_kv_arr_raw(w, "a.bool", GGUF_TYPE_BOOL, bools, 3);
    const uint8_t u64s[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 5, 0, 0, 0, 0, 0, 0, 0};
    gw_kv_arr_raw(w, "a.u64", GGUF_TYPE_U64, u64s, 2);
    gw_kv_arr_raw(w, "a.i64", GGUF_TYPE_I64, u64s, 2);  /* -1, 5 */
    uint8_t f64s[8];
    for (int i = 0; i < 8; i++) f64s[i] = (uint8_t)(f64b >> 8 * i);
    gw_kv_arr_raw(w, "a.f64", GGUF_TYPE_F64, f64s, 1);
    gw_kv_arr_raw(w, "a.empty", GGUF_TYPE_U32, NULL, 0);

    /* nested: [[1,2],[],[3]] of i32, [["x","yz"]] of strings, [[[ -7 ]]] */
    fbuf nest = {.n = 0};
    fb_u32(&nest, GGUF_TYPE_ARRAY); fb_u64(&nest, 3);
    enc_arr_i32(&nest, (int32_t[]){1, 2}, 2);
    enc_arr_i32(&nest, NULL, 0);
    enc_arr_i32(&nest, (int32_t[]){3}, 1);
    gw_kv_encoded(w, "n.i32", GGUF_TYPE_ARRAY, nest.b, nest.n);
    nest.n = 0;
    fb_u32(&nest, GGUF_TYPE_ARRAY); fb_u64(&nest, 1);
    fb_u32(&nest, GGUF_TYPE_STRING); fb_u64(&nest, 2); fb_str(&nest, "x"); fb_str(&nest, "yz");
    gw_kv_encoded(w, "n.str", GGUF_TYPE_ARRAY, nest.b, nest.n);
    nest.n = 0;
    fb_u32(&nest, GGUF_TYPE_ARRAY); fb_u64(&nest, 1);
    fb_u32(&nest, GGUF_TYPE_ARRAY); fb_u64(&nest, 1);
    enc_arr_i32(&nest, (int32_t[]){-7}, 1);
    gw_kv_encoded(w, "n.deep", GGUF_TYPE_ARRAY, nest.b, nest.n);

    uint8_t *buf; size_t size; char err[256];
    CHECKF(gguf_writer_to_buffer(w, &buf, &size, err, sizeof err) == 0, "%s", err);
    gguf_writer_free(w);

    gguf_file g;
    int rc = gguf_open_memory(buf, size, &g, err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    if (rc) { free(buf); return; }
    CHECK(g.version == 3 && g.n_tensors == 0 && g.alignment == 32);
    CHECK(gguf_find_kv(&g, "general.alignment") == NULL);   /* default alignment is not written */

    uint32_t u; int64_t v; float f; bool b; gguf_str s;
    CHECK(gguf_get_u32(&g, "v.u8", &u) && u == 200);
    CHECK(!gguf_get_u32(&g, "v.i8", &u));                   /* negative does not fit */
    CHECK(gguf_get_i64(&g, "v.i8", &v) && v == -5);
    CHECK(gguf_get_u32(&g, "v.u16", &u) && u == 60000);
    CHECK(gguf_get_i64(&g, "v.i16", &v) && v == -30000);
    CHECK(gguf_get_u32(&g, "v.u32", &u) && u == 4000000000u);
    CHECK(gguf_get_i64(&g, "v.u32", &v) && v == 4000000000ll);
    CHECK(gguf_get_i64(&g, "v.i32", &v) && v == -2000000000);
    CHECK(!gguf_get_u32(&g, "v.i32", &u));
    CHECK(gguf_get_f32(&g, "v.f32", &f) && f == 1e-5f);
    CHECK(!gguf_get_u32(&g, "v.f32", &u));                  /* floats are not integers */
    CHECK(gguf_get_f32(&g, "v.u32", &f) && f == 4e9f);       /* integers convert to float */
    CHECK(gguf_get_bool(&g, "v.bool", &b) && b);
    CHECK(gguf_get_bool(&g, "v.bool0", &b) && !b);
    CHECK(!gguf_get_bool(&g, "v.u8", &b));
    CHECK(gguf_get_str(&g, "v.str", &s) && gguf_str_eq(s, "hello, gguf"));
    CHECK(!gguf_str_eq(s, "hello, ggu") && !gguf_str_eq(s, "hello, gguf!"));
    CHECK(gguf_get_str(&g, "v.str_nul", &s) && s.len == 3 && !memcmp(s.ptr, "a\0b", 3));
    CHECK(gguf_get_str(&g, "v.empty", &s) && s.len == 0 && gguf_str_eq(s, ""));
    char *dup = gguf_str_dup((gguf_str){"abc", 2});
    CHECK(dup && !strcmp(dup, "ab"));
    free(dup);
    CHECK(!gguf_get_str(&g, "v.u32", &s));
    CHECK(!gguf_get_u32(&g, "v.str", &u));
    CHECK(!gguf_get_u32(&g, "v.u64", &u));                  /* 2^40 does not fit u32 */
    CHECK(gguf_get_i64(&g, "v.u64", &v) && v == 1ll << 40);
    CHECK(!gguf_get_i64(&g, "v.u64max", &v));               /* does not fit i64 */
    CHECK(gguf_get_i64(&g, "v.i64", &v) && v == -(1ll << 50));
    CHECK(gguf_get_f32(&g, "v.f64", &f) && f == 0.1f);
    CHECK(!gguf_get_f32(&g, "v.f64big", &f));               /* out of float range */
    CHECK(!gguf_get_u32(&g, "missing", &u) && !gguf_get_str(&g, "missing", &s));

    const gguf_kv *kv = gguf_find_kv(&g, "a.str");
    gguf_str ss[3];
    CHECK(kv && kv->type == GGUF_TYPE_ARRAY && kv->arr_type == GGUF_TYPE_STRING && kv->arr_n == 3);
    CHECK(kv && gguf_arr_strings(kv, ss) && gguf_str_eq(ss[0], "one") && gguf_str_eq(ss[1], "") &&
          gguf_str_eq(ss[2], "three\xe2\x9c\x93"));
    double d;
    kv = gguf_find_kv(&g, "a.f32");
    CHECK(kv && gguf_arr_f64(kv, 1, &d) && d == -2.25 && gguf_arr_f64(kv, 2, &d) && d == (double)3e10f);
    CHECK(kv && !gguf_arr_f64(kv, 3, &d) && !gguf_arr_i64(kv, 0, &v));
    CHECK(kv && !gguf_arr_strings(kv, ss));
    kv = gguf_find_kv(&g, "a.i32");
    CHECK(kv && gguf_arr_i64(kv, 2, &v) && v == 2147483647 && gguf_arr_i64(kv, 3, &v) && v == -2147483648ll);
    CHECK(kv && gguf_arr_f64(kv, 0, &d) && d == -1.0);
    kv = gguf_find_kv(&g, "a.u8");
    CHECK(kv && gguf_arr_i64(kv, 1, &v) && v == 255);
    kv = gguf_find_kv(&g, "a.i8");
    CHECK(kv && gguf_arr_i64(kv, 0, &v) && v == -128 && gguf_arr_i64(kv, 1, &v) && v == 127);
    kv = gguf_find_kv(&g, "a.u16");
    CHECK(kv && gguf_arr_i64(kv, 0, &v) && v == 65535 && gguf_arr_i64(kv, 1, &v) && v == 1);
    kv = gguf_find_kv(&g, "a.i16");
    CHECK(kv && gguf_arr_i64(kv, 0, &v) && v == -32768);
    kv = gguf_find_kv(&g, "a.u32");
    CHECK(kv && gguf_arr_i64(kv, 0, &v) && v == 4294967295ll);
    kv = gguf_find_kv(&g, "a.bool");
    CHECK(kv && kv->arr_type == GGUF_TYPE_BOOL && kv->arr_n == 3 && kv->data[0] == 1 && kv->data[1] == 0);
    kv = gguf_find_kv(&g, "a.u64");
    CHECK(kv && !gguf_arr_i64(kv, 0, &v) && gguf_arr_i64(kv, 1, &v) && v == 5);
    CHECK(kv && gguf_arr_f64(kv, 0, &d) && d == 18446744073709551615.0);
    kv = gguf_find_kv(&g, "a.i64");
    CHECK(kv && gguf_arr_i64(kv, 0, &v) && v == -1);
    kv = gguf_find_kv(&g, "a.f64");
    CHECK(kv && gguf_arr_f64(kv, 0, &d) && d == 0.1);
    kv = gguf_find_kv(&g, "a.empty");
    CHECK(kv && kv->arr_n == 0 && !gguf_arr_i64(kv, 0, &v));

    gguf_kv e, e2, e3;
    kv = gguf_find_kv(&g, "n.i32");
    CHECK(kv && kv->arr_type == GGUF_TYPE_ARRAY && kv->arr_n == 3);
    CHECK(kv && gguf_arr_elem(kv, 0, &e) && e.type == GGUF_TYPE_ARRAY && e.arr_type == GGUF_TYPE_I32 &&
          e.arr_n == 2 && gguf_arr_i64(&e, 1, &v) && v == 2);
    CHECK(kv && gguf_arr_elem(kv, 1, &e) && e.arr_n == 0);
    CHECK(kv && gguf_arr_elem(kv, 2, &e) && e.arr_n == 1 && gguf_arr_i64(&e, 0, &v) && v == 3);
    CHECK(kv && !gguf_arr_elem(kv, 3, &e));
    kv = gguf_find_kv(&g, "n.str");
    CHECK(kv && gguf_arr_elem(kv, 0, &e) && e.arr_type == GGUF_TYPE_STRING && gguf_arr_strings(&e, ss) &&
          gguf_str_eq(ss[0], "x") && gguf_str_eq(ss[1], "yz"));
    kv = gguf_find_kv(&g, "n.deep");
    CHECK(kv && gguf_arr_elem(kv, 0, &e) && gguf_arr_elem(&e, 0, &e2) && e2.arr_type == GGUF_TYPE_I32 &&
          gguf_arr_i64(&e2, 0, &v) && v == -7);
    kv = gguf_find_kv(&g, "a.str");
    CHECK(kv && gguf_arr_elem(kv, 2, &e3) && e3.type == GGUF_TYPE_STRING && e3.data_size == 8 + 8);
    gguf_close(&g);
    gguf_close(&g);   /* closing twice is harmless */
    free(buf);
}

/* ---- round trip: every tensor type ---- */

typedef struct { int type; int64_t block_elems; size_t block_bytes; } type_size;
/* The sizes the GGUF format defines (independent of formats.c). */
static const type_size tensor_types[] = {
    {FMT_F32, 1, 4}, {FMT_F16, 1, 2}, {FMT_BF16, 1, 2}, {FMT_Q8_0, 32, 34}, {FMT_Q4_0, 32, 18},
    {FMT_Q4_1, 32, 20}, {FMT_Q5_0, 32, 22}, {FMT_Q5_1, 32, 24}, {FMT_Q4_K, 256, 144},
    {FMT_Q5_K, 256, 176}, {FMT_Q6_K, 256, 210},
};
#define N_TYPES (sizeof tensor_types / sizeof tensor_types[0])

/* Adds one tensor of each type (shape [2 blocks, 3] plus a 3-d and 4-d one) with patterned data. */
static gguf_writer *tensor_writer(uint32_t alignment) {
    gguf_writer *w = gguf_writer_new();
    if (alignment) gw_set_alignment(w, alignment);
    gw_kv_str(w, "general.architecture", "test");
    for (size_t i = 0; i < N_TYPES; i++) {
        const type_size *t = &tensor_types[i];
        int64_t ne[2] = {2 * t->block_elems, 3};
        size_t size = 2 * 3 * t->block_bytes;
        uint8_t *data = malloc(size);
        for (size_t k = 0; k < size; k++) data[k] = (uint8_t)(k * 7 + i);
        char name[32];
        snprintf(name, sizeof name, "t.%s", format_name(t->type));
        gw_tensor(w, name, t->type, 2, ne, data, size);
        free(data);
    }
    float x[2 * 3 * 4 * 5];
    for (int k = 0; k < 120; k++) x[k] = (float)k;
    gw_tensor(w, "t.3d", FMT_F32, 3, (int64_t[]){2, 3, 20}, x, sizeof x);
    gw_tensor(w, "t.4d", FMT_F32, 4, (int64_t[]){2, 3, 4, 5}, x, sizeof x);
    gw_tensor(w, "t.1", FMT_F16, 1, (int64_t[]){1}, x, 2);   /* 2 bytes: next tensor needs padding */
    return w;
}

static void check_tensors(const gguf_file *g, uint64_t alignment) {
    CHECK(g->n_tensors == N_TYPES + 3);
    CHECK(g->alignment == alignment && g->data_offset % alignment == 0);
    for (size_t i = 0; i < N_TYPES; i++) {
        const type_size *t = &tensor_types[i];
        char name[32];
        snprintf(name, sizeof name, "t.%s", format_name(t->type));
        const gguf_tensor *gt = gguf_find_tensor(g, name);
        CHECKF(gt != NULL, "%s missing", name);
        if (!gt) continue;
        size_t size = 2 * 3 * t->block_bytes;
        CHECKF(gt->size == size, "%s size %llu, want %zu", name, (unsigned long long)gt->size, size);
        CHECK(gt->type == t->type && gt->n_dims == 2 && gt->ne[0] == 2 * t->block_elems && gt->ne[1] == 3 &&
              gt->ne[2] == 1 && gt->ne[3] == 1);
        CHECK(gt->offset % alignment == 0 && gt->data == g->map + g->data_offset + gt->offset);
        bool same = true;
        for (size_t k = 0; k < size && gt->size == size; k++) same &= gt->data[k] == (uint8_t)(k * 7 + i);
        CHECKF(same, "%s data differs", name);
        uint64_t want;
        CHECK(gguf_tensor_size(t->type, 2, gt->ne, &want) && want == size);
    }
    const gguf_tensor *t3 = gguf_find_tensor(g, "t.3d"), *t4 = gguf_find_tensor(g, "t.4d");
    CHECK(t3 && t3->n_dims == 3 && t3->ne[2] == 20 && t3->ne[3] == 1 && t3->size == 480);
    CHECK(t4 && t4->n_dims == 4 && t4->ne[3] == 5 && t4->size == 480);
    if (t4) { float x; memcpy(&x, t4->data + 4 * 119, 4); CHECK(x == 119.0f); }
    CHECK(!gguf_find_tensor(g, "t.none"));
}

static void test_tensors_round_trip(void) {
    uint32_t aligns[] = {0, 1, 64, 4096};
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
        gguf_writer *w = tensor_writer(aligns[a]);
        uint8_t *buf, *buf2; size_t size, size2; char err[256];
        int rc = gguf_writer_to_buffer(w, &buf, &size, err, sizeof err);
        CHECKF(rc == 0, "%s", err);
        gguf_writer_free(w);
        if (rc) continue;
        /* deterministic: the same input gives the same bytes */
        w = tensor_writer(aligns[a]);
        CHECK(gguf_writer_to_buffer(w, &buf2, &size2, err, sizeof err) == 0 && size2 == size && !memcmp(buf, buf2, size));
        gguf_writer_free(w);
        free(buf2);
        gguf_file g;
        rc = gguf_open_memory(buf, size, &g, err, sizeof err);
        CHECKF(rc == 0, "alignment %u: %s", aligns[a], err);
        if (rc == 0) {
            uint64_t want = aligns[a] ? aligns[a] : 32;
            check_tensors(&g, want);
            uint32_t u;
            CHECK(gguf_get_u32(&g, "general.alignment", &u) == (want != 32) && (want == 32 || u == want));
            gguf_close(&g);
        }
        free(buf);
    }

    /* save to a file and read it back through mmap */
    char path[] = "/tmp/test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    gguf_writer *w = tensor_writer(0);
    char err[256];
    CHECKF(gguf_writer_save(w, path, err, sizeof err) == 0, "%s", err);
    gguf_writer_free(w);
    gguf_file g;
    int rc = gguf_open(path, &g, err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(g.owns_map);
        check_tensors(&g, 32);
        gguf_close(&g);
    }
    unlink(path);
}

/* ---- writer errors ---- */

static void expect_writer_error(gguf_writer *w, const char *want) {
    uint8_t *buf = (uint8_t *)1; size_t size = 1; char err[256] = "";
    int rc = gguf_writer_to_buffer(w, &buf, &size, err, sizeof err);
    CHECKF(rc == -1 && buf == NULL && strstr(err, want) && !strchr(err, '\n'), "want '%s', got %d '%s'", want, rc, err);
    CHECK(gguf_writer_save(w, "/tmp/test_gguf_never_written", err, sizeof err) == -1 && access("/tmp/test_gguf_never_written", F_OK) != 0);
    gguf_writer_free(w);
}

static void test_writer_errors(void) {
    gguf_writer *w = gguf_writer_new();
    gw_set_alignment(w, 3);
    expect_writer_error(w, "alignment 3");
    w = gguf_writer_new();
    gw_set_alignment(w, 0);
    expect_writer_error(w, "alignment 0");
    w = gguf_writer_new();
    gw_kv_u32(w, "k", 1);
    gw_kv_str(w, "k", "again");
    gw_kv_u32(w, "later", 2);         /* ignored after the failure; the first error is kept */
    expect_writer_error(w, "key 'k' added twice");
    w = gguf_writer_new();
    gw_kv_u32(w, "general.alignment", 64);
    expect_writer_error(w, "gw_set_alignment");
    float x[64] = {0};
    w = gguf_writer_new();
    gw_tensor(w, "t", FMT_F32, 1, (int64_t[]){4}, x, 16);
    gw_tensor(w, "t", FMT_F32, 1, (int64_t[]){4}, x, 16);
    expect_writer_error(w, "tensor 't' added twice");
    w = gguf_writer_new();
    gw_tensor(w, "t", FMT_F32, 1, (int64_t[]){4}, x, 15);
    expect_writer_error(w, "15 bytes given");
    w = gguf_writer_new();
    gw_tensor(w, "t", FMT_Q4_0, 1, (int64_t[]){16}, x, 9);
    expect_writer_error(w, "no valid size");
    w = gguf_writer_new();
    gw_tensor(w, "t", FMT_F32, 0, (int64_t[]){4}, x, 16);
    expect_writer_error(w, "0 dimensions");
    w = gguf_writer_new();
    gw_tensor(w, "t", FMT_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, x, 4);
    expect_writer_error(w, "5 dimensions");
    w = gguf_writer_new();
    gw_kv_arr_raw(w, "a", GGUF_TYPE_STRING, x, 1);
    expect_writer_error(w, "not a scalar type");
    w = gguf_writer_new();
    gw_kv_str(w, NULL, "x");
    expect_writer_error(w, "NULL");
    /* a NULL writer (allocation failed) is safe to use and reports the failure */
    gw_kv_u32(NULL, "k", 1);
    char err[128] = "";
    uint8_t *buf; size_t size;
    CHECK(gguf_writer_to_buffer(NULL, &buf, &size, err, sizeof err) == -1 && strstr(err, "out of memory"));
    CHECK(gguf_writer_save(NULL, "/tmp/test_gguf_never_written", err, sizeof err) == -1);
    /* a file in a directory that does not exist */
    w = gguf_writer_new();
    gw_kv_u32(w, "k", 1);
    CHECK(gguf_writer_save(w, "/nonexistent-dir/x.gguf", err, sizeof err) == -1 && strstr(err, "cannot create"));
    gguf_writer_free(w);
}

/* ---- real files ---- */

static void test_real_files(void) {
    gguf_file g;
    char err[256];
    const char *path = test_path("models/stories260K.gguf");
    if (access(path, R_OK) != 0) {
        SKIP("%s not found", path);
    } else {
        int rc = gguf_open(path, &g, err, sizeof err);
        CHECKF(rc == 0, "%s", err);
        if (rc == 0) {
            gguf_str s;
            uint32_t u;
            float eps;
            CHECK(gguf_get_str(&g, "general.architecture", &s) && gguf_str_eq(s, "llama"));
            CHECK(gguf_get_u32(&g, "llama.block_count", &u) && u == 5);
            CHECK(gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &eps) && eps > 0 && eps < 1e-3f);
            const gguf_kv *kv = gguf_find_kv(&g, "tokenizer.ggml.tokens");
            CHECK(kv && kv->type == GGUF_TYPE_ARRAY && kv->arr_type == GGUF_TYPE_STRING && kv->arr_n == 512);
            gguf_str toks[512];
            CHECK(kv && kv->arr_n == 512 && gguf_arr_strings(kv, toks) && gguf_str_eq(toks[0], "<unk>") &&
                  gguf_str_eq(toks[1], "<s>") && gguf_str_eq(toks[2], "</s>"));
            CHECK(g.n_tensors == 48);
            const gguf_tensor *t = gguf_find_tensor(&g, "token_embd.weight");
            CHECK(t && t->type == FMT_F32 && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512 && t->size == 64 * 512 * 4);
            uint64_t end = 0;
            for (uint64_t i = 0; i < g.n_tensors; i++) {
                uint64_t e = g.data_offset + g.tensors[i].offset + g.tensors[i].size;
                if (e > end) end = e;
            }
            CHECK(end <= g.size && end > g.data_offset);
            gguf_close(&g);
        }
    }
    path = test_path("models/ggml-vocab-llama-spm.gguf");
    if (access(path, R_OK) != 0) {
        SKIP("%s not found", path);
    } else {
        int rc = gguf_open(path, &g, err, sizeof err);
        CHECKF(rc == 0, "%s", err);
        if (rc == 0) {
            gguf_str s;
            bool b;
            CHECK(gguf_get_str(&g, "general.architecture", &s) && gguf_str_eq(s, "llama"));
            CHECK(gguf_get_str(&g, "tokenizer.ggml.model", &s) && gguf_str_eq(s, "llama"));
            CHECK(gguf_get_bool(&g, "tokenizer.ggml.add_bos_token", &b));
            const gguf_kv *kv = gguf_find_kv(&g, "tokenizer.ggml.tokens");
            CHECK(kv && kv->arr_n == 32000 && kv->arr_type == GGUF_TYPE_STRING);
            gguf_str *toks = kv ? malloc(kv->arr_n * sizeof *toks) : NULL;
            CHECK(toks && gguf_arr_strings(kv, toks) && gguf_str_eq(toks[1], "<s>"));
            free(toks);
            kv = gguf_find_kv(&g, "tokenizer.ggml.scores");
            double d;
            CHECK(kv && kv->arr_type == GGUF_TYPE_F32 && kv->arr_n == 32000 && gguf_arr_f64(kv, 31999, &d));
            CHECK(g.n_tensors == 0);
            gguf_close(&g);
        }
    }
    /* open errors */
    CHECK(gguf_open("/nonexistent/x.gguf", &g, err, sizeof err) == -1 && one_line(err) && strstr(err, "cannot open"));
    CHECK(gguf_open("/tmp", &g, err, sizeof err) == -1 && strstr(err, "not a regular file"));
    char empty[] = "/tmp/test_gguf_empty_XXXXXX";
    int fd = mkstemp(empty);
    if (fd >= 0) {
        close(fd);
        CHECK(gguf_open(empty, &g, err, sizeof err) == -1 && strstr(err, "empty"));
        unlink(empty);
    }
    /* a tiny error buffer still gets a terminated (cut) message */
    char tiny[10];
    CHECK(gguf_open("/nonexistent/x.gguf", &g, tiny, sizeof tiny) == -1 && strlen(tiny) == 9);
}

/* ---- hostile input ---- */

/* A small valid file: metadata of several types and two tensors. */
static void small_file(uint8_t **buf, size_t *size) {
    gguf_writer *w = gguf_writer_new();
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_u32(w, "llama.block_count", 2);
    gw_kv_bool(w, "b", true);
    gw_kv_f32(w, "f", 0.5f);
    const char *toks[] = {"a", "bc"};
    gw_kv_arr_str(w, "toks", toks, NULL, 2);
    const int32_t ids[] = {1, 2};
    gw_kv_arr_i32(w, "ids", ids, 2);
    fbuf nest = {.n = 0};
    fb_u32(&nest, GGUF_TYPE_ARRAY); fb_u64(&nest, 1);
    enc_arr_i32(&nest, (int32_t[]){9}, 1);
    gw_kv_encoded(w, "nest", GGUF_TYPE_ARRAY, nest.b, nest.n);
    uint8_t q[34] = {0};
    gw_tensor(w, "w.q8", FMT_Q8_0, 1, (int64_t[]){32}, q, 34);
    float x[3] = {1, 2, 3};
    gw_tensor(w, "w.f32", FMT_F32, 2, (int64_t[]){3, 1}, x, 12);
    char err[256];
    if (gguf_writer_to_buffer(w, buf, size, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(2); }
    gguf_writer_free(w);
}

static void test_truncation(void) {
    uint8_t *buf; size_t size;
    small_file(&buf, &size);
    char err[256];
    CHECK(parse_copy(buf, size, err, sizeof err) == 0);
    int clean = 0;
    for (size_t n = 0; n < size; n++) {
        err[0] = 0;
        int rc = parse_copy(buf, n, err, sizeof err);
        if (rc == -1 && one_line(err)) clean++;
        else fprintf(stderr, "truncated at %zu: rc %d '%s'\n", n, rc, err);
    }
    CHECKF(clean == (int)size, "%d of %zu truncations failed cleanly", clean, size);
    free(buf);
}

static void test_flipped_bytes(void) {
    uint8_t *buf; size_t size;
    small_file(&buf, &size);
    uint8_t *m = malloc(size);
    static const uint8_t patterns[] = {0xff, 0x01, 0x80};
    int ok = 0, failed = 0, bad_msg = 0;
    for (size_t p = 0; p < sizeof patterns; p++)
        for (size_t i = 0; i < size; i++) {
            memcpy(m, buf, size);
            m[i] ^= patterns[p];
            char err[256] = "";
            if (parse_copy(m, size, err, sizeof err) == 0) ok++;
            else { failed++; bad_msg += !one_line(err); }
        }
    /* both outcomes must occur (tensor data flips are harmless, header flips are not) */
    CHECKF(ok > 0 && failed > 0 && bad_msg == 0, "ok %d failed %d bad messages %d", ok, failed, bad_msg);
    free(m);
    free(buf);
}

static void test_hostile_headers(void) {
    fbuf f;
    fb_header(&f, 3, 0, 0);
    EXPECT_OK(&f);                                   /* an empty file with just a header */
    fb_header(&f, 1, 0, 0);
    EXPECT_ERROR(&f, "version 1 is not supported");
    fb_header(&f, 4, 0, 0);
    EXPECT_ERROR(&f, "unknown GGUF version 4");
    fb_header(&f, 0x03000000u, 0, 0);
    EXPECT_ERROR(&f, "big-endian");
    fb_header(&f, 2, 0, 0);
    EXPECT_OK(&f);
    fb_header(&f, 3, 0, 0);
    f.b[0] = 'X';
    EXPECT_ERROR(&f, "not a GGUF file");
    f.n = 10;
    EXPECT_ERROR(&f, "too small");
    fb_header(&f, 3, UINT64_MAX, 0);
    EXPECT_ERROR(&f, "tensor count 18446744073709551615");
    fb_header(&f, 3, 0, UINT64_MAX);
    EXPECT_ERROR(&f, "metadata count 18446744073709551615");
    fb_header(&f, 3, 0, UINT64_MAX / 13 + 1);    /* times the smallest pair size would wrap */
    EXPECT_ERROR(&f, "metadata count");
    fb_header(&f, 3, 0, 1);
    EXPECT_ERROR(&f, "metadata count 1 cannot fit");   /* promised a pair, none there */
}

static void test_hostile_values(void) {
    fbuf f;
    /* string length near UINT64_MAX, as a key and as a value */
    fb_header(&f, 3, 0, 1);
    fb_u64(&f, UINT64_MAX); fb_u32(&f, GGUF_TYPE_U32); fb_u32(&f, 0);
    EXPECT_ERROR(&f, "length 18446744073709551615");
    fb_header(&f, 3, 0, 1);
    fb_str(&f, "k"); fb_u32(&f, GGUF_TYPE_STRING); fb_u64(&f, UINT64_MAX - 3); fb_u32(&f, 0);
    EXPECT_ERROR(&f, "length 18446744073709551612");
    /* array lengths near UINT64_MAX, for each element kind */
    uint32_t elems[] = {GGUF_TYPE_U8, GGUF_TYPE_U64, GGUF_TYPE_STRING, GGUF_TYPE_ARRAY, GGUF_TYPE_BOOL};
    for (size_t i = 0; i < 5; i++) {
        fb_header(&f, 3, 0, 1);
        fb_str(&f, "arr"); fb_u32(&f, GGUF_TYPE_ARRAY); fb_u32(&f, elems[i]); fb_u64(&f, UINT64_MAX);
        fb_u64(&f, 0);
        EXPECT_ERROR(&f, "array of 18446744073709551615");
        fb_header(&f, 3, 0, 1);
        fb_str(&f, "arr"); fb_u32(&f, GGUF_TYPE_ARRAY); fb_u32(&f, elems[i]); fb_u64(&f, UINT64_MAX / 8 + 1);
        EXPECT_ERROR(&f, "does not fit");
    }
    /* unknown value types */
    fb_header(&f, 3, 0, 1);
    fb_str(&f, "k"); fb_u32(&f, 99); fb_u32(&f, 0);
    EXPECT_ERROR(&f, "unknown value type 99");
    fb_header(&f, 3, 0, 1);
    fb_str(&f, "k"); fb_u32(&f, GGUF_TYPE_ARRAY); fb_u32(&f, 13); fb_u64(&f, 0);
    EXPECT_ERROR(&f, "unknown value type 13");
    /* bool 7 is rejected, as a value and as an array element */
    fb_header(&f, 3, 0, 1);
    fb_str(&f, "b"); fb_u32(&f, GGUF_TYPE_BOOL); fb_u8(&f, 7);
    EXPECT_ERROR(&f, "bool value 7");
    fb_header(&f, 3, 0, 1);
    fb_str(&f, "b"); fb_u32(&f, GGUF_TYPE_ARRAY); fb_u32(&f, GGUF_TYPE_BOOL); fb_u64(&f, 2); fb_u8(&f, 1); fb_u8(&f, 7);
    EXPECT_ERROR(&f, "bool value 7");
    fb_header(&f, 3, 0, 1);
    fb_str(&f, "b"); fb_u32(&f, GGUF_TYPE_BOOL); fb_u8(&f, 1);
    EXPECT_OK(&f);
    /* arrays nested too deep: checked before the stack could grow without bound */
    fb_header(&f, 3, 0, 1);
    fb_str(&f, "deep"); fb_u32(&f, GGUF_TYPE_ARRAY);
    for (int i = 0; i < 40; i++) { fb_u32(&f, GGUF_TYPE_ARRAY); fb_u64(&f, 1); }
    fb_u32(&f, GGUF_TYPE_U8); fb_u64(&f, 0);
    EXPECT_ERROR(&f, "nests arrays deeper");
    /* duplicate keys, NUL in a key */
    fb_header(&f, 3, 0, 2);
    fb_str(&f, "k"); fb_u32(&f, GGUF_TYPE_U8); fb_u8(&f, 1);
    fb_str(&f, "k"); fb_u32(&f, GGUF_TYPE_U8); fb_u8(&f, 2);
    EXPECT_ERROR(&f, "key 'k' appears twice");
    fb_header(&f, 3, 0, 1);
    fb_u64(&f, 3); fb_bytes(&f, "a\0b", 3); fb_u32(&f, GGUF_TYPE_U8); fb_u8(&f, 1);
    EXPECT_ERROR(&f, "contains a NUL");
    /* control characters in a name are not echoed into the one-line message */
    fb_header(&f, 3, 0, 1);
    fb_str(&f, "bad\nkey"); fb_u32(&f, 99); fb_u32(&f, 0);
    EXPECT_ERROR(&f, "'bad?key'");
}

/* A file with one tensor info, given fields, and `data` bytes of data. */
static void one_tensor(fbuf *f, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off, size_t data) {
    fb_header(f, 3, 1, 0);
    fb_tensor_info(f, "blk.0.attn_q.weight", n_dims, ne, type, off);
    fb_pad(f, 32);
    for (size_t i = 0; i < data; i++) fb_u8(f, (uint8_t)i);
}

static void test_hostile_tensors(void) {
    fbuf f;
    one_tensor(&f, 2, (uint64_t[]){4, 2}, FMT_F32, 0, 32);
    EXPECT_OK(&f);
    one_tensor(&f, 0, NULL, FMT_F32, 0, 32);
    EXPECT_ERROR(&f, "has 0 dimensions");
    one_tensor(&f, 5, (uint64_t[]){1, 1, 1, 1, 1}, FMT_F32, 0, 32);
    EXPECT_ERROR(&f, "has 5 dimensions");
    one_tensor(&f, 1, (uint64_t[]){0}, FMT_F32, 0, 32);
    EXPECT_ERROR(&f, "dimension 0 is 0");
    one_tensor(&f, 1, (uint64_t[]){UINT64_MAX}, FMT_F32, 0, 32);
    EXPECT_ERROR(&f, "dimension 0 is 18446744073709551615");
    /* each dimension fits, the product does not */
    one_tensor(&f, 4, (uint64_t[]){1ull << 20, 1ull << 20, 1ull << 20, 1ull << 20}, FMT_F32, 0, 32);
    EXPECT_ERROR(&f, "too large");
    one_tensor(&f, 1, (uint64_t[]){(uint64_t)INT64_MAX}, FMT_F32, 0, 32);
    EXPECT_ERROR(&f, "too large");
    one_tensor(&f, 2, (uint64_t[]){1ull << 62, 4}, FMT_F16, 0, 32);
    EXPECT_ERROR(&f, "too large");
    /* large but representable: caught as past the end of the file */
    one_tensor(&f, 2, (uint64_t[]){1ull << 30, 1ull << 20}, FMT_Q4_0, 0, 32);
    EXPECT_ERROR(&f, "runs past end of file");
    one_tensor(&f, 1, (uint64_t[]){9}, FMT_F32, 0, 32);
    EXPECT_ERROR(&f, "runs past end of file (size");
    one_tensor(&f, 1, (uint64_t[]){8}, FMT_F32, UINT64_MAX - 31, 32);   /* offset + size wraps */
    EXPECT_ERROR(&f, "runs past end of file");
    one_tensor(&f, 1, (uint64_t[]){4}, FMT_F32, 16, 32);
    EXPECT_ERROR(&f, "offset 16 is not a multiple of the alignment 32");
    one_tensor(&f, 1, (uint64_t[]){16}, FMT_Q4_0, 0, 32);
    EXPECT_ERROR(&f, "not a whole number of Q4_0 blocks");
    one_tensor(&f, 1, (uint64_t[]){256}, FMT_Q2_K, 0, 32);   /* a real GGUF type hearth has no size for */
    EXPECT_ERROR(&f, format_name(FMT_Q2_K));
    one_tensor(&f, 1, (uint64_t[]){4}, 1000, 0, 32);
    EXPECT_ERROR(&f, "unknown type 1000");
    /* no bytes at all for the data section */
    fb_header(&f, 3, 1, 0);
    fb_tensor_info(&f, "t", 1, (uint64_t[]){4}, FMT_F32, 0);
    EXPECT_ERROR(&f, "starts past end of file");
    /* duplicate tensor names */
    fb_header(&f, 3, 2, 0);
    fb_tensor_info(&f, "t", 1, (uint64_t[]){4}, FMT_F32, 0);
    fb_tensor_info(&f, "t", 1, (uint64_t[]){4}, FMT_F32, 32);
    fb_pad(&f, 32);
    for (int i = 0; i < 64; i++) fb_u8(&f, 0);
    EXPECT_ERROR(&f, "tensor 't' appears twice");
    /* the error names the tensor, its offset and size, and the file size */
    fb_header(&f, 3, 1, 0);
    fb_tensor_info(&f, "blk.0.attn_q.weight", 2, (uint64_t[]){32, 32}, FMT_F32, 64);
    fb_pad(&f, 32);
    char want[160];
    snprintf(want, sizeof want, "tensor 'blk.0.attn_q.weight' data [offset 64, 4096 bytes] runs past end of file (size %zu", f.n);
    EXPECT_ERROR(&f, want);
}

static void test_alignment(void) {
    fbuf f;
    uint64_t bad[] = {0, 3, 48, 1ull << 33 | 1};
    for (size_t i = 0; i < 4; i++) {
        fb_header(&f, 3, 0, 1);
        fb_str(&f, "general.alignment"); fb_u32(&f, GGUF_TYPE_U64); fb_u64(&f, bad[i]);
        EXPECT_ERROR(&f, "must be a non-zero power of two");
    }
    fb_header(&f, 3, 0, 1);
    fb_str(&f, "general.alignment"); fb_u32(&f, GGUF_TYPE_STRING); fb_str(&f, "32");
    EXPECT_ERROR(&f, "general.alignment has type string");
    fb_header(&f, 3, 0, 1);
    fb_str(&f, "general.alignment"); fb_u32(&f, GGUF_TYPE_I32); fb_u32(&f, (uint32_t)-32);
    EXPECT_ERROR(&f, "general.alignment has type i32");
    /* alignment 16 lets a tensor sit at offset 16 */
    fb_header(&f, 3, 1, 1);
    fb_str(&f, "general.alignment"); fb_u32(&f, GGUF_TYPE_U32); fb_u32(&f, 16);
    fb_tensor_info(&f, "t", 1, (uint64_t[]){4}, FMT_F32, 16);
    fb_pad(&f, 16);
    for (int i = 0; i < 32; i++) fb_u8(&f, 0);
    EXPECT_OK(&f);
    /* and alignment 64 does not */
    fb_header(&f, 3, 1, 1);
    fb_str(&f, "general.alignment"); fb_u32(&f, GGUF_TYPE_U32); fb_u32(&f, 64);
    fb_tensor_info(&f, "t", 1, (uint64_t[]){4}, FMT_F32, 16);
    fb_pad(&f, 64);
    for (int i = 0; i < 32; i++) fb_u8(&f, 0);
    EXPECT_ERROR(&f, "not a multiple of the alignment 64");
}

int main(void) {
    test_values_round_trip();
    test_tensors_round_trip();
    test_writer_errors();
    test_real_files();
    test_truncation();
    test_flipped_bytes();
    test_hostile_headers();
    test_hostile_values();
    test_hostile_tensors();
    test_alignment();
    return test_summary("gguf");
}
