/* End-to-end checks of the engine core:
 * - the reference fixtures: stories260K reproduces every greedy id of the
 *   reference implementation; the quantized fixtures match the reference
 *   prompt tokens exactly and its logits within the stated tolerance,
 *   teacher-forced;
 * - synthetic models of each architecture: chunked prefill equals one-shot
 *   prefill, and a sequence alone equals the same sequence batched beside
 *   another, bit for bit;
 * - a loaded model keeps nothing of its file: truncating or rewriting it
 *   changes no logit, on every kernel path;
 * - model_load names what is wrong in a bad file. */
#include "tests/test.h"
#include "engine/sched/generate.h"
#include "engine/gguf/gguf_write.h"
#include "runtime/pool.h"
#include "runtime/rss.h"
#include "engine/synth/synth_model.h"
#include "engine/text/tokenizer.h"
#include <cjson/cJSON.h>
#include <math.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <unistd.h>


static int json_ints(const cJSON *arr, int32_t **out) {
    int n = cJSON_GetArraySize(arr);
    *out = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) (*out)[i] = (int32_t)cJSON_GetArrayItem(arr, i)->valuedouble;
    return n;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

static void hex_decode(const char *hex, char *out, size_t *n) {
    size_t k = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[k++] = (char)v;
    }
    *n = k;
}

/* One reference case. */
static void check_case(const cJSON *c, hpool *pool) {
    const char *model_file = cJSON_GetObjectItem(c, "model")->valuestring;
    const char *prompt = cJSON_GetObjectItem(c, "prompt")->valuestring;
    bool add_special = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_special"));
    bool parse_special = cJSON_IsTrue(cJSON_GetObjectItem(c, "parse_special"));
    char rel[256];
    snprintf(rel, sizeof rel, "%s/%s", strstr(model_file, "stories") ? "models" : "fixtures", model_file);
    char err[512];
    model *m = model_load(test_path(rel), err, sizeof err);
    CHECKF(m != NULL, "%s: %s", model_file, err);
    if (!m) return;

    int32_t *want_prompt, *want_tokens, *ids = NULL;
    int n_want_prompt = json_ints(cJSON_GetObjectItem(c, "prompt_tokens"), &want_prompt);
    int n_tokens = json_ints(cJSON_GetObjectItem(c, "tokens"), &want_tokens);
    int n_prompt = tokenizer_encode(m->tok, prompt, strlen(prompt), add_special, parse_special, &ids);
    bool same_prompt = n_prompt == n_want_prompt && !memcmp(ids, want_prompt, sizeof(int32_t) * (size_t)n_prompt);
    CHECKF(same_prompt, "%s '%s': prompt tokens differ (%d vs %d)", model_file, prompt, n_prompt, n_want_prompt);

    int n_vocab = m->p.n_vocab;
    generator *g = gen_new(m, 512, 64, pool);
    CHECK(g != NULL);
    const float *logits = gen_eval(g, want_prompt, n_want_prompt, NULL);
    bool stories = strstr(model_file, "stories") != NULL;
    const cJSON *steps = cJSON_GetObjectItem(c, "steps");
    int mismatched_ids = 0, out_of_tol = 0, argmax_wrong = 0;
    double worst = 0, worst_frac = 0;
    for (int i = 0; i < n_tokens && logits; i++) {
        int best = argmax(logits, n_vocab);
        if (best != want_tokens[i]) mismatched_ids++;
        const cJSON *top = cJSON_GetObjectItem(cJSON_GetArrayItem(steps, i), "top");
        double scale = 0, gap;
        for (int k = 0; k < cJSON_GetArraySize(top); k++)
            scale = fmax(scale, fabs(cJSON_GetArrayItem(cJSON_GetArrayItem(top, k), 1)->valuedouble));
        double tol = 0.04 * scale + 0.1;
        for (int k = 0; k < cJSON_GetArraySize(top); k++) {
            const cJSON *e = cJSON_GetArrayItem(top, k);
            int id = cJSON_GetArrayItem(e, 0)->valueint;
            double d = fabs(logits[id] - cJSON_GetArrayItem(e, 1)->valuedouble);
            if (d > worst) worst = d;
            if (d / tol > worst_frac) worst_frac = d / tol;
            if (d > tol) out_of_tol++;
        }
        gap = cJSON_GetArrayItem(cJSON_GetArrayItem(top, 0), 1)->valuedouble -
              cJSON_GetArrayItem(cJSON_GetArrayItem(top, 1), 1)->valuedouble;
        if (gap > 2 * tol && best != want_tokens[i]) argmax_wrong++;
        /* teacher-forced: feed the reference token, not our pick */
        logits = gen_eval(g, &want_tokens[i], 1, NULL);
    }
    CHECKF(logits != NULL, "%s: evaluation failed", model_file);
    if (stories) {
        CHECKF(mismatched_ids == 0, "%s '%s': %d of %d greedy ids differ", model_file, prompt, mismatched_ids, n_tokens);
        /* the reference text, decoded from the ids */
        const cJSON *hex = cJSON_GetObjectItem(c, "text_bytes_hex");
        char *want_text = malloc(strlen(hex->valuestring) / 2 + 1);
        size_t want_len, got_len;
        hex_decode(hex->valuestring, want_text, &want_len);
        /* a continuation: decoded as the engine streams it, leading space kept */
        char *got = malloc(want_len + 256);
        detok_stream ds;
        detok_init(&ds, m->tok, false);
        ds.at_start = false;
        got_len = 0;
        for (int i = 0; i < n_tokens && got_len + 64 < want_len + 256; i++)
            got_len += detok_push(&ds, want_tokens[i], got + got_len, 64);
        got_len += detok_flush(&ds, got + got_len, 64);
        CHECKF(got_len == want_len && !memcmp(got, want_text, want_len), "%s: decoded text differs", model_file);
        free(got);
        free(want_text);
    }
    CHECKF(out_of_tol == 0, "%s '%s': %d logits outside tolerance (worst diff %.4f)", model_file, prompt, out_of_tol, worst);
    CHECKF(argmax_wrong == 0, "%s '%s': argmax differs at %d clear steps", model_file, prompt, argmax_wrong);
    char shown[29];   /* the prompt's start on one line */
    snprintf(shown, sizeof shown, "%s", prompt);
    for (char *c = shown; *c; c++) if ((unsigned char)*c < 0x20) *c = ' ';
    printf("  %-24s %-28.28s prompt %s, worst logit diff %.4f (%.0f%% of tolerance), %d/%d argmax agree\n",
           model_file, shown, same_prompt ? "ok" : "DIFFERS", worst, 100 * worst_frac, n_tokens - mismatched_ids, n_tokens);
    free(want_prompt); free(want_tokens); free(ids);
    gen_free(g);
    model_free(m);
}

static void test_reference_fixtures(hpool *pool) {
    char *json = test_read_file(test_path("fixtures/reference.json"), NULL);
    if (!json) { SKIP("fixtures/reference.json not found under %s", test_shared_dir()); return; }
    cJSON *root = cJSON_Parse(json);
    CHECK(root && cJSON_IsArray(root));
    for (int i = 0; root && i < cJSON_GetArraySize(root); i++) check_case(cJSON_GetArrayItem(root, i), pool);
    cJSON_Delete(root);
    free(json);
}

/* ---- synthetic models: invariants ------------------------------------- */
static char tmpdir[256];

static model *synth(const synth_spec *s, const char *name) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, name);
    int rc = synth_model_write(s, path, err, sizeof err);
    CHECKF(rc == 0, "%s: %s", name, err);
    if (rc) return NULL;
    model *m = model_load(path, err, sizeof err);
    CHECKF(m != NULL, "%s: %s", name, err);
    return m;
}

/* chunked prefill == one-shot prefill, and alone == batched beside another sequence */
static void check_invariants(const model *m, const char *name, hpool *pool) {
    int n_vocab = m->p.n_vocab, n = 40;
    int32_t toks[40], other[40];
    for (int i = 0; i < n; i++) { toks[i] = (i * 37 + 5) % n_vocab; other[i] = (i * 11 + 3) % n_vocab; }

    generator *one = gen_new(m, 128, 64, pool), *chunked = gen_new(m, 128, 7, pool);
    float *a = malloc(sizeof(float) * n_vocab), *b = malloc(sizeof(float) * n_vocab);
    memcpy(a, gen_eval(one, toks, n, NULL), sizeof(float) * n_vocab);
    memcpy(b, gen_eval(chunked, toks, n, NULL), sizeof(float) * n_vocab);
    CHECKF(!memcmp(a, b, sizeof(float) * n_vocab), "%s: chunked prefill differs from one-shot", name);

    /* the same sequence in slot 1 beside another sequence in slot 0, in one batch */
    backend_config bc = { .n_slots = 2, .n_ctx = 128, .max_batch = 2 * n, .pool = pool };
    backend_state *bs = m->backend->create(m, &bc);
    CHECK(bs != NULL);
    int32_t tok[80], pos[80], slot[80];
    uint8_t want[80] = {0};
    for (int i = 0; i < n; i++) {
        tok[2 * i] = other[i]; pos[2 * i] = i; slot[2 * i] = 0;
        tok[2 * i + 1] = toks[i]; pos[2 * i + 1] = i; slot[2 * i + 1] = 1;
    }
    want[2 * n - 1] = 1;
    fwd_batch batch = { 2 * n, tok, pos, slot, want, NULL, NULL };
    CHECK(m->backend->run(bs, &batch, b) == 0);
    CHECKF(!memcmp(a, b, sizeof(float) * n_vocab), "%s: batched beside another slot differs from alone", name);
    /* and a planted control: a different sequence gives different logits */
    fwd_batch solo = { 1, &other[n - 1], &pos[2 * n - 2], &slot[0], want + 2 * n - 1, NULL, NULL };
    CHECK(m->backend->run(bs, &solo, b) == 0);
    CHECKF(memcmp(a, b, sizeof(float) * n_vocab) != 0, "%s: control: other sequence should differ", name);
    m->backend->destroy(bs);
    free(a); free(b);
    gen_free(one); gen_free(chunked);
}

static void test_synthetic(hpool *pool) {
    /* embd: token_embd's format where it is not the mix's (the last case is
     * llama.cpp's Q4_0 of a tied model: a Q8_0 embedding, read as the output) */
    static const struct { model_arch arch; const char *mix; int tied; int head_dim; const char *embd; int embd_type; } cases[] = {
        { ARCH_LLAMA, "F32", 0, 0, NULL, FMT_F32 }, { ARCH_LLAMA, "Q4_0", 0, 0, NULL, FMT_Q4_0 },
        { ARCH_QWEN2, "Q8_0", 1, 0, NULL, FMT_Q8_0 }, { ARCH_QWEN3, "Q4_K_M", 1, 64, NULL, FMT_Q4_K },
        { ARCH_LLAMA, "F16", 1, 0, NULL, FMT_F16 }, { ARCH_LLAMA, "Q5_K_M", 0, 0, NULL, FMT_Q5_K },
        { ARCH_QWEN2, "Q4_0", 1, 0, "Q8_0", FMT_Q8_0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        synth_spec s;
        synth_spec_default(&s);
        s.arch = cases[i].arch; s.mix = cases[i].mix; s.tied = cases[i].tied; s.head_dim = cases[i].head_dim;
        s.embd_type = cases[i].embd;
        s.n_embd = 256; s.n_ff = 512; s.seed = 42 + i;
        char name[64];
        snprintf(name, sizeof name, "%s-%s%s%s", model_arch_name(s.arch), s.mix, s.embd_type ? "-embd-" : "",
                 s.embd_type ? s.embd_type : "");
        model *m = synth(&s, name);
        if (!m) continue;
        CHECK(m->p.arch == cases[i].arch);
        CHECK(m->p.tied_embeddings == (cases[i].tied != 0));
        CHECKF(m->tok_embd.type == cases[i].embd_type, "%s: token_embd is %s", name, format_name(m->tok_embd.type));
        check_invariants(m, name, pool);
        model_free(m);
    }
    synth_spec s;   /* a format name the writer does not know is an error, not the mix's */
    synth_spec_default(&s);
    s.embd_type = "Q3_K";
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/bad-embd.gguf", tmpdir);
    CHECK(synth_model_write(&s, path, err, sizeof err) != 0 && strstr(err, "Q3_K"));
}

/* Logits of toks[at, n) fed in chunks of up to 64 at positions at.. into
 * slot 0 of kv (the last row's into out). */
static bool feed(const model *m, backend_state *bs, const int32_t *toks, int at, int n, float *out) {
    int32_t pos[64], slot[64] = {0};
    uint8_t want[64];
    for (int done = at; done < n;) {
        int c = n - done < 64 ? n - done : 64;
        for (int i = 0; i < c; i++) { pos[i] = done + i; want[i] = done + i == n - 1; }
        fwd_batch b = { c, toks + done, pos, slot, want, NULL, NULL };
        if (m->backend->run(bs, &b, out)) return false;
        done += c;
    }
    return true;
}

/* A sliding-window model's ring (window 8 + batch 64 positions): a slot
 * continued where its ring still holds the window gives fresh prefill's
 * logits bit for bit; continued where the ring has moved past the window,
 * it does not (the control), and kv_can_resume says so. */
static void check_window_ring(const model *m, hpool *pool) {
    int V = m->p.n_vocab;
    int32_t P[124], S[70];
    for (int i = 0; i < 124; i++) P[i] = (i * 31 + 7) % V;
    memcpy(S, P, 30 * sizeof *P);
    for (int i = 30; i < 70; i++) S[i] = (i * 13 + 9) % V;
    /* a state for batches of 64 keeps the local layers as rings; one for
     * batches of 128 would need more than the context: every position kept */
    backend_config rc = { .n_slots = 1, .n_ctx = 256, .max_batch = 64, .pool = pool };
    backend_config fc = { .n_slots = 1, .n_ctx = 256, .max_batch = 128, .pool = pool };
    backend_state *rs = m->backend->create(m, &rc), *fs = m->backend->create(m, &fc);
    CHECK(rs && fs);
    if (!rs || !fs) { if (rs) m->backend->destroy(rs); if (fs) m->backend->destroy(fs); return; }
    kv_cache *ring = m->backend->kv(rs), *full = m->backend->kv(fs);
    CHECK(ring->ring == 72 && full->ring == 0);
    CHECK(kv_cache_bytes(ring) < kv_cache_bytes(full));
    float *fresh_p = malloc(sizeof(float) * V), *fresh_s = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * V);
    CHECK(feed(m, fs, P, 0, 100, fresh_p) && feed(m, fs, S, 0, 70, fresh_s));
    CHECK(feed(m, rs, P, 0, 124, got));
    CHECK(kv_can_resume(ring, 0, 124, 99) && !kv_can_resume(ring, 0, 124, 30));
    CHECK(feed(m, rs, P, 99, 100, got));
    CHECKF(!memcmp(got, fresh_p, sizeof(float) * V), "ring: continuing inside the window differs from fresh");
    CHECK(feed(m, rs, P, 0, 124, got));
    CHECK(feed(m, rs, S, 30, 70, got));
    CHECKF(memcmp(got, fresh_s, sizeof(float) * V) != 0, "ring control: a lost window should change the logits");
    CHECK(feed(m, rs, S, 0, 70, got));
    CHECKF(!memcmp(got, fresh_s, sizeof(float) * V), "ring: started over differs from fresh");
    free(fresh_p); free(fresh_s); free(got);
    m->backend->destroy(rs);
    m->backend->destroy(fs);
}

/* The same invariants on the gemma3 and phi3 fixtures: 40 tokens cross
 * gemma3's sliding window of 8 several times, so a local layer's window
 * moves inside a chunk, across chunks and beside another slot. */
static void test_fixture_invariants(hpool *pool) {
    const char *files[] = { "fixtures/gemma3-tiny-Q8_0.gguf", "fixtures/phi3-tiny-Q4_0.gguf" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char err[512];
        if (access(test_path(files[i]), R_OK)) { SKIP("%s not found under %s", files[i], test_shared_dir()); continue; }
        model *m = model_load(test_path(files[i]), err, sizeof err);
        CHECKF(m != NULL, "%s: %s", files[i], err);
        if (!m) continue;
        if (i == 0) {
            int local = 0;
            for (int il = 0; il < m->p.n_layer; il++) local += m->layers[il].local;
            CHECKF(m->p.swa_window == 8 && local == 5 && !m->layers[5].local, "gemma3: window %d, %d local layers",
                   m->p.swa_window, local);
        }
        check_invariants(m, files[i], pool);
        if (i == 0) check_window_ring(m, pool);
        model_free(m);
    }
}

/* The model writer with a real vocabulary: a qwen2-architecture model with
 * the Qwen3 tokenizer.json and a llama model with the Llama 2 SentencePiece
 * vocab-only GGUF; each loads, tokenizes like its source and runs. */
static void test_synthetic_real_vocab(hpool *pool) {
    synth_spec s;
    synth_spec_default(&s);
    s.arch = ARCH_QWEN2; s.mix = "Q4_0"; s.n_embd = 128; s.n_ff = 256; s.tied = 1;
    s.vocab_json = test_path("models/qwen3-tokenizer.json");
    s.vocab_pre = "qwen2";
    model *m = synth(&s, "qwen2-realvocab");
    if (m) {
        CHECK(tokenizer_n_vocab(m->tok) >= 151643 && m->p.n_vocab == tokenizer_n_vocab(m->tok));
        int32_t *ids = NULL;
        int n = tokenizer_encode(m->tok, "Hello world", 11, false, false, &ids);
        CHECKF(n == 2 && ids[0] == 9707 && ids[1] == 1879, "qwen2 vocab: 'Hello world' -> %d ids", n);
        generator *g = gen_new(m, 64, 16, pool);
        CHECK(g && n > 0 && gen_eval(g, ids, n, NULL) != NULL);
        gen_free(g);
        free(ids);
        model_free(m);
    }
    synth_spec_default(&s);
    s.vocab_gguf = test_path("models/ggml-vocab-llama-spm.gguf");
    m = synth(&s, "llama-spmvocab");
    if (m) {
        CHECK(m->p.n_vocab == 32000);
        int32_t *ids = NULL;
        int n = tokenizer_encode(m->tok, "Hello world", 11, true, false, &ids);
        CHECKF(n == 3 && ids[0] == 1 && ids[1] == 15043 && ids[2] == 3186, "llama vocab: 'Hello world' -> %d ids", n);
        free(ids);
        model_free(m);
    }
}

/* One resident copy of the weights: after load (and the repacking into the
 * kernels' layout), RSS grows by about the file size, not twice it. */
static void test_rss_after_load(void) {
    if (!rss_bytes()) { SKIP("this platform does not report RSS"); return; }
    /* qemu-user ignores MADV_PAGEOUT and counts its own memory: RSS means
     * nothing there (tests/aarch64/run sets HEARTH_EMULATED). */
    if (getenv("HEARTH_EMULATED")) { SKIP("RSS check under emulation (%s)", getenv("HEARTH_EMULATED")); return; }
    synth_spec s;
    synth_spec_default(&s);
    s.mix = "Q4_0"; s.n_embd = 1024; s.n_ff = 4096; s.n_layer = 4; s.n_head = 16; s.n_head_kv = 4;
    s.n_vocab = 4096;
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/rss.gguf", tmpdir);
    CHECKF(synth_model_write(&s, path, err, sizeof err) == 0, "%s", err);
    FILE *f = fopen(path, "rb");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    uint64_t file_size = (uint64_t)ftell(f);
    fclose(f);
#if defined(__GLIBC__)
    malloc_trim(0);   /* hand back what the writer freed, so it is not counted as "before" */
#endif
    uint64_t before = rss_bytes();
    model *m = model_load(path, err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    /* run it, so every weight the kernels read has been touched */
    generator *g = m ? gen_new(m, 32, 8, NULL) : NULL;
    int32_t toks[4] = { 1, 50, 60, 70 };
    CHECK(g && gen_eval(g, toks, 4, NULL) != NULL);
    gen_free(g);
    uint64_t grown = rss_bytes() - before;
    printf("  RSS after loading and running a %.1f MiB model (%s kernels): +%.1f MiB\n", file_size / 1048576.0,
           kernels_path_name(kernels_current()), grown / 1048576.0);
    CHECKF(grown < file_size + file_size / 10 + (8u << 20), "RSS grew by %llu bytes for a %llu-byte file",
           (unsigned long long)grown, (unsigned long long)file_size);
    model_free(m);
}

/* ---- the file is closed after load ----------------------------------------- */
static bool file_mapped(const char *path) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;   /* not Linux: the truncation below still tells */
    char line[1200];
    bool hit = false;
    while (fgets(line, sizeof line, f)) hit |= strstr(line, path) != NULL;
    fclose(f);
    return hit;
}

/* Logits of a few tokens from a fresh generator (into out). */
static bool eval_tokens(const model *m, hpool *pool, float *out) {
    int32_t toks[6];
    for (int i = 0; i < 6; i++) toks[i] = (int32_t)((i * 37 + 5) % m->p.n_vocab);
    generator *g = gen_new(m, 32, 8, pool);
    const float *l = g ? gen_eval(g, toks, 6, NULL) : NULL;
    if (l) memcpy(out, l, sizeof(float) * (size_t)m->p.n_vocab);
    gen_free(g);
    return l != NULL;
}

/* Nothing of a loaded model points into its file (hearth serve keeps
 * serving while the file is replaced): the file is no longer mapped, and
 * truncating it (a read of a map past the end of its file is SIGBUS) or
 * filling it with garbage changes no logit. On every kernel path: one that
 * does not pack reads every matrix from the copy. */
static void test_file_released(hpool *pool) {
    size_t stories_len = 0;
    char *stories = test_read_file(test_path("models/stories260K.gguf"), &stories_len);
    if (!stories) SKIP("models/stories260K.gguf not found under %s", test_shared_dir());
    for (int p = 0; p < KPATH_COUNT; p++) {
        if (!kernels_path_available((kern_path_id)p) || !kernels_force((kern_path_id)p)) continue;
        for (int c = 0; c < 3; c++) {
            char path[512], err[512];
            snprintf(path, sizeof path, "%s/released-%d.gguf", tmpdir, c);
            if (c == 0) {   /* F32, untied */
                if (!stories) continue;
                FILE *f = fopen(path, "wb");
                CHECK(f && fwrite(stories, 1, stories_len, f) == stories_len);
                if (f) fclose(f);
            } else {        /* a tied Q8_0 qwen2 (its embedding read through the packed output), an untied K-quant mix */
                synth_spec s;
                synth_spec_default(&s);
                s.arch = c == 1 ? ARCH_QWEN2 : ARCH_LLAMA; s.mix = c == 1 ? "Q8_0" : "Q4_K_M"; s.tied = c == 1;
                s.n_embd = 256; s.n_ff = 512; s.seed = 7 + (uint64_t)c;
                CHECKF(synth_model_write(&s, path, err, sizeof err) == 0, "%s", err);
            }
            const char *name = kernels_path_name((kern_path_id)p);
            model *m = model_load(path, err, sizeof err);
            CHECKF(m != NULL, "%s: %s", path, err);
            if (!m) continue;
            CHECKF(!file_mapped(path), "%s case %d: the file is still mapped after load", name, c);
            size_t nv = (size_t)m->p.n_vocab;
            float *a = malloc(sizeof(float) * nv), *b = malloc(sizeof(float) * nv);
            CHECK(eval_tokens(m, pool, a));
            CHECK(truncate(path, 0) == 0);
            CHECK(eval_tokens(m, pool, b));
            CHECKF(!memcmp(a, b, sizeof(float) * nv), "%s case %d: logits changed after the file was truncated", name, c);
            FILE *f = fopen(path, "r+b");
            for (size_t i = 0; f && i < (c ? 1u << 20 : stories_len); i++) fputc(0xa5, f);
            if (f) fclose(f);
            CHECK(eval_tokens(m, pool, b));
            CHECKF(!memcmp(a, b, sizeof(float) * nv), "%s case %d: logits changed after the file was overwritten", name, c);
            free(a); free(b);
            model_free(m);
            unlink(path);
        }
    }
    kernels_select();
    free(stories);
}

/* ---- errors -------------------------------------------------------------- */
static void expect_load_error(gguf_writer *w, const char *name, const char *needle) {
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, name);
    CHECK(gguf_writer_save(w, path, err, sizeof err) == 0);
    gguf_writer_free(w);
    model *m = model_load(path, err, sizeof err);
    CHECKF(m == NULL && strstr(err, needle), "%s: want an error with '%s', got '%s'", name, needle, err);
    model_free(m);
}

static void test_load_errors(void) {
    char err[512];
    gguf_writer *w = gguf_writer_new();
    gw_kv_str(w, "general.architecture", "mamba");
    expect_load_error(w, "arch", "'mamba'");

    w = gguf_writer_new();
    gw_kv_str(w, "general.architecture", "llama");
    gw_kv_u32(w, "llama.embedding_length", 64);
    gw_kv_u32(w, "llama.block_count", 1);
    gw_kv_u32(w, "llama.attention.head_count", 4);
    gw_kv_u32(w, "llama.feed_forward_length", 64);
    float emb[64 * 8] = {0};
    int64_t ne[2] = { 64, 8 };
    gw_tensor(w, "token_embd.weight", 0, 2, ne, emb, sizeof emb);
    expect_load_error(w, "missing", "output_norm.weight");

    /* an unsupported tensor type: write a Q8_0 tensor, then patch its type id to Q2_K */
    w = gguf_writer_new();
    gw_kv_str(w, "general.architecture", "llama");
    static uint8_t q8[34 * 8 * 8];
    int64_t ne2[2] = { 256, 8 };
    gw_tensor(w, "token_embd.weight", FMT_Q8_0, 2, ne2, q8, sizeof q8);
    uint8_t *buf;
    size_t size;
    CHECK(gguf_writer_to_buffer(w, &buf, &size, err, sizeof err) == 0);
    gguf_writer_free(w);
    /* tensor info: name, u32 n_dims, n_dims x u64, u32 type */
    uint8_t *at = memmem(buf, size, "token_embd.weight", 17);
    CHECK(at != NULL);
    if (at) {
        uint32_t q2k = FMT_Q2_K;
        memcpy(at + 17 + 4 + 2 * 8, &q2k, 4);
        char path[512];
        snprintf(path, sizeof path, "%s/type.gguf", tmpdir);
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, size, f);
        fclose(f);
        model *m = model_load(path, err, sizeof err);
        CHECKF(m == NULL && strstr(err, "Q2_K"), "want an error naming Q2_K, got '%s'", err);
        model_free(m);
    }
    free(buf);

    CHECK(model_load(test_path("no/such/file.gguf"), err, sizeof err) == NULL);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hearth-test-model-XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    hpool *pool = pool_create(2);
    /* the fixtures on every kernel path this CPU runs (weights are repacked
     * at load for the path selected then) */
    for (int p = 0; p < KPATH_COUNT; p++) {
        if (!kernels_path_available((kern_path_id)p) || !kernels_force((kern_path_id)p)) continue;
        printf("kernels: %s\n", kernels_path_name(kernels_current()));
        test_reference_fixtures(pool);
    }
    kernels_select();
    test_synthetic(pool);
    test_fixture_invariants(pool);
    test_synthetic_real_vocab(pool);
    test_rss_after_load();
    test_file_released(pool);
    test_load_errors();
    pool_destroy(pool);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary("model");
}
