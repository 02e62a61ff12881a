/* The plan as data:
 * - every architecture's plan (synthetic models of each, and every fixture
 *   that loads) passes plan_check: each step reads and writes rows of the
 *   widths its buffers hold and its weights take, and reads a buffer at the
 *   width it was written at;
 * - planted controls: a plan with one width, weight or order changed is
 *   caught;
 * - the architectures differ by steps alone: the counts of each step kind
 *   follow the hyperparameters (bias steps for qwen2, head norms for
 *   qwen3, none for llama; post-norms, a second rope base and windowed
 *   attention on gemma3's local layers);
 * - the CPU backend runs a plan and fills its KV cache where the plan's
 *   KV_STORE steps say. */
#include "tests/test.h"
#include "engine/model/backend.h"
#include "engine/model/plan.h"
#include "engine/synth/synth_model.h"
#include "runtime/pool.h"
#include <unistd.h>

static char tmpdir[256];

static model *synth(model_arch arch, const char *mix, int tied, int head_dim, const char *name) {
    synth_spec s;
    synth_spec_default(&s);
    s.arch = arch; s.mix = mix; s.tied = tied; s.head_dim = head_dim;
    s.n_embd = 128; s.n_ff = 320; s.n_layer = 3; s.seed = 7;
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, name);
    int rc = synth_model_write(&s, path, err, sizeof err);
    CHECKF(rc == 0, "%s: %s", name, err);
    if (rc) return NULL;
    model *m = model_load(path, err, sizeof err);
    CHECKF(m != NULL, "%s: %s", name, err);
    return m;
}

static int count(const plan *p, step_op op) {
    int n = 0;
    for (int i = 0; i < p->n_steps; i++) n += p->steps[i].op == op;
    return n;
}

/* A copy of p's steps the caller may break (freed with plan_free). */
static plan *copy_plan(const plan *p) {
    plan *c = malloc(sizeof *c);
    *c = *p;
    c->steps = malloc(sizeof *c->steps * (size_t)p->n_steps);
    memcpy(c->steps, p->steps, sizeof *c->steps * (size_t)p->n_steps);
    return c;
}

static int find(const plan *p, step_op op, int layer) {
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].op == op && p->steps[i].layer == layer) return i;
    return -1;
}

/* Each planted change must be caught; the unchanged copy passes. */
static void check_controls(const plan *p, const char *name) {
    char err[256];
    plan *c = copy_plan(p);
    CHECKF(plan_check(c, err, sizeof err) == 0, "%s: the copy fails: %s", name, err);
    plan_free(c);

    int mm = find(p, STEP_MATMUL, 1), qkv = find(p, STEP_MATMUL_N, 0), glu = find(p, STEP_GLU, 1);
    int rope = find(p, STEP_ROPE, 0), att = find(p, STEP_ATTENTION, 1), logits = find(p, STEP_LOGITS, -1);
    CHECK(mm >= 0 && qkv >= 0 && glu >= 0 && rope >= 0 && att >= 0 && logits >= 0);
    if (mm < 0 || qkv < 0 || glu < 0 || rope < 0 || att < 0 || logits < 0) return;

    struct { const char *what; int step; } cases[] = {
        { "an output wider than the weight's rows", mm }, { "a fused output of another width", qkv },
        { "a GLU reading an up row of another width", glu }, { "rope over more heads than the buffer", rope },
        { "attention over heads of another size", att }, { "logits through a weight of other width", logits },
        { "a step reading a buffer before anyone wrote it", qkv }, { "a residual add into rows of another width", mm },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        c = copy_plan(p);
        plan_step *s = &c->steps[cases[k].step];
        switch (k) {
        case 0: s->out_w[0] += 32; break;
        case 1: s->out_w[1] -= 32; break;
        case 2: s->in2_w -= 32; break;
        case 3: s->n_head += 1; break;
        case 4: s->head_dim += 2; break;
        case 5: { static hweight w; w = *s->w[0]; w.n_in += 32; s->w[0] = &w; break; }
        case 6: {   /* the layer's input norm dropped: q|k|v reads xb before it exists */
            int norm = cases[k].step - 1;
            memmove(&c->steps[norm], &c->steps[norm + 1], sizeof *c->steps * (size_t)(c->n_steps - norm - 1));
            c->n_steps--;
            break;
        }
        case 7: s->add = BUF_HB; break;
        }
        CHECKF(plan_check(c, err, sizeof err) != 0, "%s: control not caught: %s", name, cases[k].what);
        plan_free(c);
    }
}

static void check_model(const model *m, const char *name) {
    const plan *p = m->plan;
    const model_params *mp = &m->p;
    CHECK(p != NULL);
    if (!p) return;
    char err[256];
    CHECKF(plan_check(p, err, sizeof err) == 0, "%s: %s", name, err);
    int L = mp->n_layer;
    CHECKF(count(p, STEP_EMBED) == 1 && count(p, STEP_LOGITS) == 1, "%s", name);
    CHECKF(count(p, STEP_ROPE_ANGLES) == (mp->swa_window ? 2 : 1), "%s: one set of angles per rope base", name);
    CHECKF(count(p, STEP_RMSNORM) == (mp->post_norms ? 4 : 2) * L, "%s: norms", name);
    /* the local layers, and only they, attend through the window at their own base */
    int local = 0, windowed = 0, swa_rope = 0;
    for (int il = 0; il < L; il++) local += m->layers[il].local;
    for (int i = 0; i < p->n_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (s->op == STEP_ATTENTION && s->window) windowed += s->window == mp->swa_window && m->layers[s->layer].local;
        if (s->op == STEP_ROPE && s->in == BUF_ROPE_SWA) swa_rope += m->layers[s->layer].local;
    }
    CHECKF(windowed == local && swa_rope == 2 * local, "%s: %d local layers, %d windowed, %d local ropes", name,
           local, windowed, swa_rope);
    if (mp->arch == ARCH_GEMMA3) CHECKF(local > 0 && local < L, "%s: gemma3 has local and global layers", name);
    CHECKF(count(p, STEP_ATTENTION) == L && count(p, STEP_KV_STORE) == L && count(p, STEP_GLU) == L, "%s", name);
    CHECKF(count(p, STEP_MATMUL_N) == 2 * L && count(p, STEP_MATMUL) == 2 * L && count(p, STEP_ROPE) == 2 * L, "%s", name);
    CHECKF(count(p, STEP_BIAS) == (mp->qkv_bias ? 3 * L : 0), "%s: bias steps", name);
    CHECKF(count(p, STEP_HEAD_NORM) == (mp->qk_norm ? 2 * L : 0), "%s: head norms", name);
    /* the buffers hold what the model's shapes say */
    CHECK(p->buf_w[BUF_X] == mp->n_embd && p->buf_w[BUF_Q] == mp->n_head * mp->head_dim);
    CHECK(p->buf_w[BUF_K] == mp->n_head_kv * mp->head_dim && p->buf_w[BUF_HB] == mp->n_ff);
    CHECK(p->buf_w[BUF_ROPE] == mp->n_rot);
    /* each step's weights are the model's own, in layer order */
    for (int i = 0; i < p->n_steps; i++) {
        const plan_step *s = &p->steps[i];
        if (s->op == STEP_MATMUL_N && s->n_out == 3) CHECK(s->w[0] == &m->layers[s->layer].wq);
        if (s->op == STEP_LOGITS) CHECK(s->w[0] == &m->output);
    }
    check_controls(p, name);
}

/* The CPU backend stores each layer's K where the plan's KV_STORE says:
 * after one token at position 3 of slot 1, that position of every layer is
 * written and position 2 is still zero. */
static void check_kv(const model *m, hpool *pool) {
    backend_config bc = { .n_slots = 2, .n_ctx = 16, .max_batch = 4, .pool = pool };
    backend_state *bs = m->backend->create(m, &bc);
    CHECK(bs != NULL);
    if (!bs) return;
    kv_cache *kv = m->backend->kv(bs);
    int32_t tok = 5, pos = 3, slot = 1;
    uint8_t want = 1;
    float *logits = malloc(sizeof(float) * (size_t)m->p.n_vocab);
    fwd_batch b = { 1, &tok, &pos, &slot, &want, NULL, NULL };
    CHECK(m->backend->run(bs, &b, logits) == 0);
    for (int l = 0; l < kv->n_layer; l++) {
        const uint16_t *k = kv_k_head(kv, l, 1, 0, 3), *before = kv_k_head(kv, l, 1, 0, 2);
        bool any = false, none = true;
        for (int d = 0; d < kv->head_dim; d++) { any |= k[d] != 0; none &= before[d] == 0; }
        CHECKF(any && none, "layer %d: KV not stored where the plan says", l);
    }
    /* a bad batch runs nothing */
    int32_t bad_pos = 16;
    fwd_batch bad = { 1, &tok, &bad_pos, &slot, &want, NULL, NULL };
    CHECK(m->backend->run(bs, &bad, logits) == -1);
    free(logits);
    m->backend->destroy(bs);

    /* a batch of more rows than one slot's context, spread over slots, runs
     * (a full cache bounds no batch) */
    backend_config wide = { .n_slots = 4, .n_ctx = 8, .max_batch = 32, .pool = pool };
    bs = m->backend->create(m, &wide);
    CHECK(bs != NULL);
    if (!bs) return;
    int32_t toks[32], ps[32], sl[32];
    uint8_t wants[32] = {0};
    for (int i = 0; i < 32; i++) { toks[i] = i + 1; ps[i] = i % 8; sl[i] = i / 8; }
    wants[31] = 1;
    logits = malloc(sizeof(float) * (size_t)m->p.n_vocab);
    fwd_batch big = { 32, toks, ps, sl, wants, NULL, NULL };
    CHECKF(m->backend->run(bs, &big, logits) == 0, "a 32-row batch over 4 slots of 8 positions was refused");
    free(logits);
    m->backend->destroy(bs);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hearth-test-plan-XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    hpool *pool = pool_create(2);
    static const struct { model_arch arch; const char *mix; int tied, head_dim; } cases[] = {
        { ARCH_LLAMA, "Q4_0", 0, 0 }, { ARCH_QWEN2, "Q8_0", 1, 0 }, { ARCH_QWEN3, "Q4_K_M", 1, 64 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s-%s", model_arch_name(cases[i].arch), cases[i].mix);
        model *m = synth(cases[i].arch, cases[i].mix, cases[i].tied, cases[i].head_dim, name);
        if (!m) continue;
        check_model(m, name);
        check_kv(m, pool);
        model_free(m);
    }
    /* every fixture this build loads */
    static const char *fixtures[] = { "llama3-tiny-Q4_0.gguf", "qwen2-tiny-Q8_0.gguf", "qwen3-tiny-Q4_K_M.gguf",
                                      "gemma3-tiny-Q8_0.gguf", "phi3-tiny-Q4_0.gguf" };
    int loaded = 0;
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        char rel[128], err[512];
        snprintf(rel, sizeof rel, "fixtures/%s", fixtures[i]);
        model *m = model_load(test_path(rel), err, sizeof err);
        CHECKF(m != NULL, "%s", err);
        if (!m) continue;
        loaded++;
        check_model(m, fixtures[i]);
        model_free(m);
    }
    CHECKF(loaded == 5, "only %d fixtures loaded", loaded);
    pool_destroy(pool);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary("plan");
}
