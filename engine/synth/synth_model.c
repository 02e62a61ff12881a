/* The model writer (see synth_model.h). Weights are uniform random,
 * scaled so every layer matters: each projection keeps unit variance and
 * the output norm is large, so logits spread widely. */
#include "engine/synth/synth_model.h"
#include "engine/gguf/gguf_write.h"
#include "engine/text/tokenizer.h"
#include "kernels/formats.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void synth_spec_default(synth_spec *s) {
    memset(s, 0, sizeof *s);
    s->arch = ARCH_LLAMA;
    s->n_embd = 64; s->n_layer = 2; s->n_head = 4; s->n_head_kv = 2; s->n_ff = 128;
    s->n_vocab = 512; s->n_ctx = 4096;
    s->mix = "Q8_0";
    s->seed = 1;
    s->name = "synthetic";
}

int synth_spec_preset(synth_spec *s, const char *name) {
    synth_spec_default(s);
    if (!strcmp(name, "tiny")) {
        s->name = "tiny";
        return 0;
    }
    if (!strcmp(name, "llama-1b")) {
        s->n_embd = 2048; s->n_layer = 16; s->n_head = 32; s->n_head_kv = 8; s->n_ff = 8192;
        s->n_vocab = 128256; s->rope_base = 500000.0f; s->name = "llama-1b shape (random)";
        return 0;
    }
    if (!strcmp(name, "qwen2-0.5b")) {
        s->arch = ARCH_QWEN2;
        s->n_embd = 896; s->n_layer = 24; s->n_head = 14; s->n_head_kv = 2; s->n_ff = 4864;
        s->n_vocab = 151936; s->tied = 1; s->name = "qwen2-0.5b shape (random)";
        return 0;
    }
    return -1;
}

/* ---- deterministic randomness ---------------------------------------- */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *state) {   /* [-1, 1) */
    return (float)((splitmix64(state) >> 40) * (1.0 / (1ull << 23))) - 1.0f;
}

/* ---- formats per tensor ----------------------------------------------- */
typedef struct { int main, embd, output, more_bits; } mix_types;

static int parse_mix(const char *mix, mix_types *t) {
    static const struct { const char *name; int main, embd, output, more; } mixes[] = {
        { "F32", FMT_F32, FMT_F32, FMT_F32, FMT_F32 },
        { "F16", FMT_F16, FMT_F16, FMT_F16, FMT_F16 },
        { "BF16", FMT_BF16, FMT_BF16, FMT_BF16, FMT_BF16 },
        { "Q8_0", FMT_Q8_0, FMT_Q8_0, FMT_Q8_0, FMT_Q8_0 },
        { "Q4_0", FMT_Q4_0, FMT_Q4_0, FMT_Q6_K, FMT_Q4_0 },
        { "Q4_1", FMT_Q4_1, FMT_Q4_1, FMT_Q6_K, FMT_Q4_1 },
        { "Q5_0", FMT_Q5_0, FMT_Q5_0, FMT_Q6_K, FMT_Q5_0 },
        { "Q5_1", FMT_Q5_1, FMT_Q5_1, FMT_Q6_K, FMT_Q5_1 },
        { "Q4_K_M", FMT_Q4_K, FMT_Q4_K, FMT_Q6_K, FMT_Q6_K },
        { "Q5_K_M", FMT_Q5_K, FMT_Q5_K, FMT_Q6_K, FMT_Q6_K },
        { "Q6_K", FMT_Q6_K, FMT_Q6_K, FMT_Q6_K, FMT_Q6_K },
    };
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
        if (!strcmp(mix, mixes[i].name)) {
            *t = (mix_types){ mixes[i].main, mixes[i].embd, mixes[i].output, mixes[i].more };
            return 0;
        }
    }
    return -1;
}

/* A format by its name in formats.h ("Q8_0", "F16"); -1 if none. */
static int format_by_name(const char *name) {
    for (int type = 0; type < FMT_COUNT_MAX; type++) {
        const format_info *f = format_get(type);
        if (f && !strcmp(f->name, name)) return type;
    }
    return -1;
}

/* A K-quant needs rows that are a multiple of 256; otherwise fall back as
 * the usual quantizer does (Q4_K/Q5_K → Q5_0, Q6_K → Q8_0). */
static int fit_type(int type, int64_t n_in) {
    if (n_in % QK_K == 0) return type;
    if (type == FMT_Q4_K || type == FMT_Q5_K) return FMT_Q5_0;
    if (type == FMT_Q6_K) return FMT_Q8_0;
    return type;
}

/* Layers that get more bits in a _M mix: the first and last eighth, and every third between. */
static int more_bits_layer(int il, int n_layer) {
    int e = n_layer / 8;
    return il < e || il >= n_layer - e || (il - e) % 3 == 2;
}

typedef struct {
    gguf_writer *w;
    uint64_t rng;
    float *rowbuf;
    size_t rowcap;
    int failed;
} writer_ctx;

/* A matrix of n_out rows of n_in random values with the given scale. */
static void put_matrix(writer_ctx *C, const char *name, int type, int64_t n_in, int64_t n_out, float scale) {
    type = fit_type(type, n_in);
    size_t row_bytes = format_row_bytes(type, n_in);
    uint8_t *data = malloc(row_bytes * (size_t)n_out);
    float *row = malloc((size_t)n_in * sizeof *row);
    if (!data || !row) { C->failed = 1; free(data); free(row); return; }
    for (int64_t r = 0; r < n_out; r++) {
        for (int64_t i = 0; i < n_in; i++) row[i] = uniform(&C->rng) * scale;
        format_quantize_row(type, row, data + (size_t)r * row_bytes, n_in);
    }
    int64_t ne[2] = { n_in, n_out };
    gw_tensor(C->w, name, type, 2, ne, data, row_bytes * (size_t)n_out);
    free(data);
    free(row);
}

static void put_vector(writer_ctx *C, const char *name, int64_t n, float center, float spread) {
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) { C->failed = 1; return; }
    for (int64_t i = 0; i < n; i++) v[i] = center + spread * uniform(&C->rng);
    int64_t ne[1] = { n };
    gw_tensor(C->w, name, FMT_F32, 1, ne, v, (size_t)n * sizeof *v);
    free(v);
}

/* ---- built-in vocabulary ---------------------------------------------- */
/* SentencePiece-style: <unk>, <s>, </s>, 256 byte tokens, then pieces made
 * from common letters, so text tokenizes to something readable. */
static void put_builtin_vocab(gguf_writer *w, int n_vocab) {
    static const char *words[] = { "the", "and", "a", "to", "of", "was", "he", "she", "it", "in",
        "once", "upon", "time", "there", "little", "girl", "boy", "dog", "cat", "play", "sun",
        "happy", "big", "red", "ball", "tree", "park", "day", "friend", "said", "saw", "went" };
    static const char letters[] = "etaoinshrdlucmfwypvbgkjqxz";
    char **tok = calloc((size_t)n_vocab, sizeof *tok);
    size_t *lens = calloc((size_t)n_vocab, sizeof *lens);
    float *scores = calloc((size_t)n_vocab, sizeof *scores);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    if (!tok || !lens || !scores || !types) goto out;
    int n = 0;
    char buf[64];
#define ADD(str, type) do { tok[n] = strdup(str); lens[n] = strlen(str); types[n] = (type); \
                            scores[n] = -(float)n; n++; } while (0)
    ADD("<unk>", 2); ADD("<s>", 3); ADD("</s>", 3);
    for (int b = 0; b < 256 && n < n_vocab; b++) { snprintf(buf, sizeof buf, "<0x%02X>", b); ADD(buf, 6); }
    for (int i = 0; letters[i] && n < n_vocab; i++) {
        snprintf(buf, sizeof buf, "%c", letters[i]); ADD(buf, 1);
        if (n < n_vocab) { snprintf(buf, sizeof buf, "\xe2\x96\x81%c", letters[i]); ADD(buf, 1); }
    }
    for (size_t i = 0; i < sizeof words / sizeof words[0] && n < n_vocab; i++) {
        snprintf(buf, sizeof buf, "\xe2\x96\x81%s", words[i]); ADD(buf, 1);
    }
    for (int i = 0; n < n_vocab; i++) {   /* two-letter pieces, then three */
        int a = i % 26, b = (i / 26) % 26, c = i / 676;
        if (c == 0) snprintf(buf, sizeof buf, "%c%c", letters[a], letters[b]);
        else snprintf(buf, sizeof buf, "\xe2\x96\x81%c%c%c", letters[a], letters[b], letters[(c - 1) % 26]);
        int dup = 0;
        for (int j = 259; j < n && !dup; j++) dup = !strcmp(tok[j], buf);
        if (dup) { snprintf(buf, sizeof buf, "<extra_%d>", n); ADD(buf, 4); }
        else ADD(buf, 1);
    }
#undef ADD
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, lens, (uint64_t)n);
    gw_kv_arr_f32(w, "tokenizer.ggml.scores", scores, (uint64_t)n);
    gw_kv_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n);
    gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gw_kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
out:
    if (tok) for (int i = 0; i < n_vocab; i++) free(tok[i]);
    free(tok); free(lens); free(scores); free(types);
}

/* ---- the model -------------------------------------------------------- */
static void put_hparams(gguf_writer *w, const synth_spec *s, int head_dim) {
    const char *arch = model_arch_name(s->arch);
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    gw_kv_str(w, "general.architecture", arch);
    gw_kv_str(w, "general.name", s->name ? s->name : "synthetic");
    gw_kv_u32(w, KEY("context_length"), (uint32_t)s->n_ctx);
    gw_kv_u32(w, KEY("embedding_length"), (uint32_t)s->n_embd);
    gw_kv_u32(w, KEY("block_count"), (uint32_t)s->n_layer);
    gw_kv_u32(w, KEY("feed_forward_length"), (uint32_t)s->n_ff);
    gw_kv_u32(w, KEY("attention.head_count"), (uint32_t)s->n_head);
    gw_kv_u32(w, KEY("attention.head_count_kv"), (uint32_t)s->n_head_kv);
    if (head_dim != s->n_embd / s->n_head) {
        gw_kv_u32(w, KEY("attention.key_length"), (uint32_t)head_dim);
        gw_kv_u32(w, KEY("attention.value_length"), (uint32_t)head_dim);
    }
    gw_kv_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    if (s->rope_base > 0) gw_kv_f32(w, KEY("rope.freq_base"), s->rope_base);
#undef KEY
}

static void put_layer(writer_ctx *C, const synth_spec *s, const mix_types *t, int il, int head_dim) {
    char name[96];
    int q_dim = s->n_head * head_dim, kv_dim = s->n_head_kv * head_dim;
    int more = more_bits_layer(il, s->n_layer) ? t->more_bits : t->main;
    float in_scale = sqrtf(3.0f / (float)s->n_embd);
#define N(what) (snprintf(name, sizeof name, "blk.%d.%s", il, what), name)
    put_vector(C, N("attn_norm.weight"), s->n_embd, 1.0f, 0.2f);
    put_matrix(C, N("attn_q.weight"), t->main, s->n_embd, q_dim, in_scale);
    put_matrix(C, N("attn_k.weight"), t->main, s->n_embd, kv_dim, in_scale);
    put_matrix(C, N("attn_v.weight"), more, s->n_embd, kv_dim, in_scale);
    put_matrix(C, N("attn_output.weight"), t->main, q_dim, s->n_embd, sqrtf(3.0f / (float)q_dim));
    if (s->arch == ARCH_QWEN2) {
        put_vector(C, N("attn_q.bias"), q_dim, 0.0f, 0.5f);
        put_vector(C, N("attn_k.bias"), kv_dim, 0.0f, 0.5f);
        put_vector(C, N("attn_v.bias"), kv_dim, 0.0f, 0.5f);
    }
    if (s->arch == ARCH_QWEN3) {
        put_vector(C, N("attn_q_norm.weight"), head_dim, 1.0f, 0.2f);
        put_vector(C, N("attn_k_norm.weight"), head_dim, 1.0f, 0.2f);
    }
    put_vector(C, N("ffn_norm.weight"), s->n_embd, 1.0f, 0.2f);
    put_matrix(C, N("ffn_gate.weight"), t->main, s->n_embd, s->n_ff, in_scale);
    put_matrix(C, N("ffn_up.weight"), t->main, s->n_embd, s->n_ff, in_scale);
    put_matrix(C, N("ffn_down.weight"), more, s->n_ff, s->n_embd, sqrtf(3.0f / (float)s->n_ff));
#undef N
}

int synth_model_write(const synth_spec *s, const char *path, char *err, size_t errlen) {
    mix_types t;
    if (parse_mix(s->mix, &t)) { snprintf(err, errlen, "unknown format mix '%s'", s->mix); return -1; }
    if (s->embd_type && (t.embd = format_by_name(s->embd_type)) < 0) {
        snprintf(err, errlen, "unknown embedding format '%s'", s->embd_type);
        return -1;
    }
    int head_dim = s->head_dim ? s->head_dim : (s->n_head ? s->n_embd / s->n_head : 0);
    if (s->n_embd <= 0 || s->n_layer <= 0 || s->n_head <= 0 || s->n_head_kv <= 0 || s->n_ff <= 0 ||
        s->n_head % s->n_head_kv || head_dim <= 0 || head_dim % 2 || s->n_embd % QK || s->n_ff % QK ||
        (s->n_head * head_dim) % QK) {
        snprintf(err, errlen, "bad shape: n_embd, n_ff and n_head*head_dim must be multiples of 32, "
                              "n_head a multiple of n_head_kv");
        return -1;
    }
    gguf_writer *w = gguf_writer_new();
    if (!w) { snprintf(err, errlen, "out of memory"); return -1; }
    put_hparams(w, s, head_dim);
    int n_vocab = s->n_vocab;
    if (s->vocab_json) {
        if (vocab_from_tokenizer_json(s->vocab_json, s->vocab_pre, w, &n_vocab, err, errlen)) goto fail;
    } else if (s->vocab_gguf) {
        if (vocab_from_gguf(s->vocab_gguf, w, &n_vocab, err, errlen)) goto fail;
    } else {
        if (n_vocab < 320) { snprintf(err, errlen, "the built-in vocabulary needs n_vocab >= 320"); goto fail; }
        put_builtin_vocab(w, n_vocab);
    }
    if (s->chat_template) gw_kv_str(w, "tokenizer.chat_template", s->chat_template);

    writer_ctx C = { .w = w, .rng = s->seed * 0x2545f4914f6cdd1dull + 7 };
    put_matrix(&C, "token_embd.weight", t.embd, s->n_embd, n_vocab, 1.0f);
    put_vector(&C, "output_norm.weight", s->n_embd, 20.0f, 2.0f);
    if (!s->tied) put_matrix(&C, "output.weight", t.output, s->n_embd, n_vocab, sqrtf(3.0f / (float)s->n_embd));
    for (int il = 0; il < s->n_layer && !C.failed; il++) put_layer(&C, s, &t, il, head_dim);
    if (C.failed) { snprintf(err, errlen, "out of memory writing %s", path); goto fail; }
    if (gguf_writer_save(w, path, err, errlen)) goto fail;
    gguf_writer_free(w);
    return 0;
fail:
    gguf_writer_free(w);
    return -1;
}
