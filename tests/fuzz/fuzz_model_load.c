/* libFuzzer target: the metadata of written models, mutated, through
 * model_load and one forward step. Three small models (llama, qwen2,
 * qwen3, written by the model writer) are kept open; an input picks one
 * (byte 0) and then holds records of 6 bytes: which hyperparameter key
 * (of the architecture's, or general.architecture), what to do with it
 * (set as u32, i32, u64 or f32, set to a string, remove it) and a 32-bit
 * value (either taken as is or, for small ones, an index into edge values
 * such as 0, 1, 65536, 65537, 2^31, 2^32 - 1). The file is written again
 * with those changes (tensors and other keys unchanged) and loaded.
 * Checks: a refusal is one non-empty line; a model that loads runs one
 * step of 3 tokens (ASan sees any read past a buffer sized from a
 * hyperparameter) and gives n_vocab logits. */
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/gguf_rewrite.h"
#include "engine/model/model.h"
#include "engine/sched/generate.h"
#include "engine/synth/synth_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *suffixes[] = {
    "embedding_length", "block_count", "attention.head_count", "attention.head_count_kv",
    "feed_forward_length", "context_length", "attention.key_length", "attention.value_length",
    "rope.dimension_count", "attention.layer_norm_rms_epsilon", "rope.freq_base",
};
#define N_SUFFIX (sizeof suffixes / sizeof suffixes[0])
static const uint32_t edges[] = { 0, 1, 2, 3, 4, 8, 16, 31, 32, 33, 64, 65535, 65536, 65537, 1u << 20,
                                  1u << 30, (1u << 30) + 1, 1u << 31, 0xffffffffu, 0x7fffffffu };
static const char *archs[3] = { "llama", "qwen2", "qwen3" };

static gguf_file base[3];
static char base_path[3][64], out_path[64];

static void setup(void) {
    static int done;
    if (done) return;
    done = 1;
    snprintf(out_path, sizeof out_path, "/tmp/fuzz-model-load-%d.gguf", (int)getpid());
    for (int a = 0; a < 3; a++) {
        synth_spec s;
        synth_spec_default(&s);
        s.arch = (model_arch)a;
        s.n_embd = 32; s.n_layer = 1; s.n_head = 4; s.n_head_kv = 2; s.n_ff = 64; s.n_vocab = 320; s.n_ctx = 64;
        s.mix = a == 1 ? "Q8_0" : "F32";
        s.tied = a == 1;
        char err[256];
        snprintf(base_path[a], sizeof base_path[a], "/tmp/fuzz-model-base-%d-%d.gguf", (int)getpid(), a);
        if (synth_model_write(&s, base_path[a], err, sizeof err) || gguf_open(base_path[a], &base[a], err, sizeof err)) {
            fprintf(stderr, "fuzz: cannot write a base model: %s\n", err);
            abort();
        }
        unlink(base_path[a]);   /* the map stays */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    if (size < 1) return 0;
    int a = data[0] % 3;
    data++; size--;
    enum { MAX_OV = 12 };
    gguf_override ov[MAX_OV];
    char keys[MAX_OV][96], strs[MAX_OV][16];
    int n = 0;
    for (; size >= 6 && n < MAX_OV; data += 6, size -= 6, n++) {
        unsigned which = data[0] % (N_SUFFIX + 1);
        if (which == N_SUFFIX) snprintf(keys[n], sizeof keys[n], "general.architecture");
        else snprintf(keys[n], sizeof keys[n], "%s.%s", archs[a], suffixes[which]);
        uint32_t v;
        memcpy(&v, data + 2, 4);
        if (v < 0x100) v = edges[v % (sizeof edges / sizeof edges[0])];
        ov[n] = (gguf_override){ keys[n], data[1] % 6, v, 0, NULL };
        if (ov[n].kind == RW_U64 && (data[1] & 0x80)) ov[n].u = (uint64_t)v << 32 | v;
        if (ov[n].kind == RW_F32) memcpy(&ov[n].f, &v, 4);
        if (ov[n].kind == RW_STR) {
            snprintf(strs[n], sizeof strs[n], "%s", archs[v % 3]);
            if (v & 0x100) strs[n][0] = 'x';
            ov[n].s = strs[n];
        }
    }
    char err[512];
    if (gguf_rewrite(&base[a], ov, n, out_path, err, sizeof err)) abort();
    err[0] = 0;
    model *m = model_load(out_path, err, sizeof err);
    unlink(out_path);
    if (!m) {
        if (!err[0] || strchr(err, '\n')) abort();   /* one line, saying why */
        return 0;
    }
    generator *g = gen_new(m, 16, 4, NULL);
    if (g) {
        int32_t toks[3] = { 1, 5, m->p.n_vocab - 1 };
        const float *logits = gen_eval(g, toks, 3, NULL);
        if (!logits) abort();
        volatile float sum = 0;
        for (int i = 0; i < m->p.n_vocab; i++) sum += logits[i];
        gen_free(g);
    }
    model_free(m);
    return 0;
}
