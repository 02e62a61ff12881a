/* Hyperparameter bounds (engine/model/model_check.c): released shapes pass;
 * each value out of range and each product past its bound fails with one
 * line; and a file whose head_count x key_length wraps a 32-bit int to a
 * size its tensors match (65537 heads of 65536: 65536) is refused by
 * model_load instead of loading and reading past its buffers. */
#include "tests/test.h"
#include "tests/gguf_rewrite.h"
#include "engine/model/model.h"
#include "engine/model/model_check.h"
#include "engine/synth/synth_model.h"
#include <unistd.h>

static model_params shape(int vocab, int embd, int layer, int head, int head_kv, int head_dim, int ff) {
    model_params p = { 0 };
    p.n_vocab = vocab; p.n_embd = embd; p.n_layer = layer; p.n_head = head; p.n_head_kv = head_kv;
    p.head_dim = head_dim; p.n_ff = ff; p.n_ctx_train = 8192; p.n_rot = head_dim;
    return p;
}

static int one_line(const char *e) { return *e && !strchr(e, '\n'); }

static void test_bounds(void) {
    char err[256];
    /* released shapes: llama 3 1B / 405B, qwen2 0.5B, gemma-like head_dim 256, a 256k vocabulary */
    model_params ok[] = {
        shape(128256, 2048, 16, 32, 8, 64, 8192), shape(128256, 16384, 126, 128, 8, 128, 53248),
        shape(151936, 896, 24, 14, 2, 64, 4864), shape(262144, 1152, 26, 4, 1, 256, 6912),
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int rc = model_check_params(&ok[i], err, sizeof err);
        CHECKF(rc == 0, "shape %zu: %s", i, err);
        ok[i].n_vocab = 0;   /* before the vocabulary is read */
        CHECK(model_check_params(&ok[i], err, sizeof err) == 0);
    }
    struct { model_params p; const char *names; } bad[] = {
        { shape(512, 64, 1, 65537, 65537, 65536, 128), "head_count" },     /* the wrap: 65537 x 65536 = 65536 in int */
        { shape(512, 64, 1, 4096, 4096, 4096, 128), "q_dim" },
        { shape(512, 64, 1, 4, 2, 1 << 14, 128), "head dimension" },
        { shape(512, 1 << 20, 1, 4, 2, 16, 128), "embedding_length" },
        { shape(512, 64, 1, 4, 2, 16, 1 << 21), "feed_forward_length" },
        { shape(512, 64, 1 << 20, 4, 2, 16, 128), "block_count" },
        { shape(512, 131072, 1, 4, 2, 16, 1 << 20), "embedding_length x feed_forward_length" },
        { shape(1 << 23, 131072, 1, 4, 2, 16, 128), "vocabulary size x embedding_length" },
        { shape(1 << 25, 64, 1, 4, 2, 16, 128), "vocabulary size" },
        { shape(512, 64, 1, 4, 8, 16, 128), "head_count_kv" },
        { shape(512, 64, 1, 6, 4, 16, 128), "multiple" },
        { shape(512, 64, 1, 4, 2, 0, 128), "head dimension" },
        { shape(512, 64, 0, 4, 2, 16, 128), "block_count" },
        { shape(512, 1 << 30, 1, 1 << 30, 1 << 30, 1 << 30, 128), "embedding_length" },   /* 2^90: past int64 too */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        int rc = model_check_params(&bad[i].p, err, sizeof err);
        CHECKF(rc == -1 && one_line(err) && strstr(err, bad[i].names), "case %zu: rc %d, '%s'", i, rc, err);
    }
    model_params p = shape(512, 64, 1, 4, 2, 16, 128);
    p.n_rot = 18;
    CHECK(model_check_params(&p, err, sizeof err) == -1 && strstr(err, "rope"));
    p.n_rot = 16;
    p.n_ctx_train = 0;
    CHECK(model_check_params(&p, err, sizeof err) == -1 && strstr(err, "context_length"));
}

/* A real file: one head of 65536 written (q_dim = kv_dim = 65536, so the
 * tensors are [64, 65536]), then its metadata says 65537 heads of 65536. */
static void test_wrapped_file(void) {
    char base[] = "/tmp/hearth-model-check-XXXXXX", bad[64], err[512];
    int fd = mkstemp(base);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    snprintf(bad, sizeof bad, "%s.bad", base);
    synth_spec s;
    synth_spec_default(&s);
    s.n_embd = 64; s.n_layer = 1; s.n_head = 1; s.n_head_kv = 1; s.head_dim = 65536; s.n_ff = 64; s.n_vocab = 320;
    s.mix = "Q8_0";
    int rc = synth_model_write(&s, base, err, sizeof err);
    CHECKF(rc == 0, "%s", err);
    gguf_file g;
    if (!rc && !gguf_open(base, &g, err, sizeof err)) {
        gguf_override ov[] = {
            { "llama.attention.head_count", RW_U32, 65537, 0, NULL },
            { "llama.attention.head_count_kv", RW_U32, 65537, 0, NULL },
            { "llama.attention.key_length", RW_U32, 65536, 0, NULL },
            { "llama.attention.value_length", RW_U32, 65536, 0, NULL },
            { "llama.rope.dimension_count", RW_U32, 64, 0, NULL },
        };
        rc = gguf_rewrite(&g, ov, (int)(sizeof ov / sizeof ov[0]), bad, err, sizeof err);
        CHECKF(rc == 0, "%s", err);
        gguf_close(&g);
        err[0] = 0;
        model *m = model_load(bad, err, sizeof err);
        CHECKF(!m && one_line(err) && strstr(err, "head_count"), "loaded: %s", m ? "a model" : err);
        model_free(m);
    }
    unlink(base);
    unlink(bad);
}

int main(void) {
    test_bounds();
    test_wrapped_file();
    return test_summary("model_check");
}
