/* Embedding jobs in the batch engine, against the model run directly:
 * - mean, CLS and last-token pooling of the final hidden states (after
 *   output_norm), L2-normalized, equal a pass computed here through the
 *   backend with every row's state asked for;
 * - an embedding alone == beside other embeddings and a generating stream,
 *   bit for bit; chunked prefill (a small batch) changes nothing;
 * - controls: other prompts give other embeddings; the pooling matters;
 * - the model's pooling_type default (last token for decoder models). */
#include "tests/engine_run.h"
#include "engine/model/backend.h"
#include "engine/synth/synth_model.h"
#include <math.h>
#include <unistd.h>

static void submit(engine *e, engine_run *r, const int32_t *prompt, int n, embed_pooling pool, int max_tokens) {
    job_params p;
    job_params_default(&p);
    p.embed = pool;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    p.sampling.temperature = 0;
    engine_run_submit(e, r, prompt, n, &p);
}

/* Waits for the job's end and frees its lock. */
static void run_wait(engine_run *r) {
    engine_run_wait(r);
    engine_run_destroy(r);
}

static engine *make_engine(const model *m, int slots, int batch) {
    engine_config c = test_engine_config(slots, 256, batch);
    return test_engine_create(m, &c);
}

/* The pooled embedding computed here: one batch of the whole prompt with
 * every row's final state, pooled in position order and L2-normalized. */
static void direct(const model *m, const int32_t *toks, int n, embed_pooling pool, float *out) {
    int E = m->p.n_embd;
    backend_config bc = { .n_slots = 1, .n_ctx = 256, .max_batch = n, .pool = NULL };
    backend_state *bs = m->backend->create(m, &bc);
    int32_t pos[256], slot[256] = {0};
    uint8_t want[256] = {0}, all[256];
    float *states = malloc(sizeof(float) * (size_t)n * E);
    for (int i = 0; i < n; i++) { pos[i] = i; all[i] = 1; }
    fwd_batch b = { n, toks, pos, slot, want, all, states };
    CHECK(bs && m->backend->run(bs, &b, NULL) == 0);
    for (int d = 0; d < E; d++) {
        double v = 0;
        if (pool == EMBED_MEAN) { for (int i = 0; i < n; i++) v += states[(size_t)i * E + d]; v /= n; }
        else v = states[(size_t)(pool == EMBED_CLS ? 0 : n - 1) * E + d];
        out[d] = (float)v;
    }
    double ss = 0;
    for (int d = 0; d < E; d++) ss += (double)out[d] * out[d];
    for (int d = 0; d < E; d++) out[d] = (float)(out[d] / sqrt(ss));
    free(states);
    m->backend->destroy(bs);
}

static double max_diff(const float *a, const float *b, int n) {
    double w = 0;
    for (int i = 0; i < n; i++) w = fmax(w, fabs((double)a[i] - b[i]));
    return w;
}

static void test_pooling(const model *m, const char *name) {
    int E = m->p.n_embd, V = m->p.n_vocab;
    int32_t a[90], b[40], c[7];
    for (int i = 0; i < 90; i++) a[i] = (i * 37 + 5) % V;
    for (int i = 0; i < 40; i++) b[i] = (i * 11 + 3) % V;
    for (int i = 0; i < 7; i++) c[i] = (i * 5 + 1) % V;
    const embed_pooling pools[3] = { EMBED_MEAN, EMBED_CLS, EMBED_LAST };
    float want[3][1024];
    for (int k = 0; k < 3; k++) {
        direct(m, a, 90, pools[k], want[k]);
        /* alone, in chunks of 16 */
        engine *e = make_engine(m, 4, 16);
        engine_run alone;
        submit(e, &alone, a, 90, pools[k], -1);
        run_wait(&alone);
        CHECKF(alone.finish == FINISH_STOP && alone.n_embd == E && alone.n_prompt == 90 && alone.n_generated == 0,
               "%s pooling %d: finish %d, %d dims", name, k, alone.finish, alone.n_embd);
        double d = max_diff(alone.embd, want[k], E);
        CHECKF(d < 2e-6, "%s pooling %d: differs from the direct pass by %g", name, k, d);
        double norm = 0;
        for (int i = 0; i < E; i++) norm += (double)alone.embd[i] * alone.embd[i];
        CHECKF(fabs(norm - 1) < 1e-5, "%s pooling %d: |e|^2 = %g", name, k, norm);
        /* beside another embedding and a generating stream, one engine, a wider batch */
        engine_run other, stream, beside;
        submit(e, &stream, c, 7, EMBED_OFF, 40);
        submit(e, &other, b, 40, pools[k], -1);
        submit(e, &beside, a, 90, pools[k], -1);
        run_wait(&other); run_wait(&beside); run_wait(&stream);
        CHECKF(!memcmp(alone.embd, beside.embd, sizeof(float) * (size_t)E), "%s pooling %d: alone and beside others differ",
               name, k);
        CHECK(stream.n_generated == 40);
        /* control: another prompt gives another embedding */
        CHECK(memcmp(other.embd, alone.embd, sizeof(float) * (size_t)E) != 0);
        engine_destroy(e);
        e = make_engine(m, 1, 128);   /* one shot */
        engine_run shot;
        submit(e, &shot, a, 90, pools[k], -1);
        run_wait(&shot);
        CHECKF(!memcmp(alone.embd, shot.embd, sizeof(float) * (size_t)E), "%s pooling %d: chunked and one-shot differ", name, k);
        /* last-token pooling may reuse a resident prefix: the same again */
        if (pools[k] == EMBED_LAST) {
            engine_run again;
            submit(e, &again, a, 90, pools[k], -1);
            run_wait(&again);
            CHECK(!memcmp(alone.embd, again.embd, sizeof(float) * (size_t)E));
        }
        engine_destroy(e);
    }
    /* control: the poolings differ */
    CHECK(max_diff(want[0], want[1], E) > 1e-3 && max_diff(want[0], want[2], E) > 1e-3);
}

int main(void) {
    char dir[] = "/tmp/hearth-test-embed-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char path[300], err[512];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    synth_spec s;
    synth_spec_default(&s);
    s.n_embd = 128; s.n_ff = 256; s.n_layer = 2; s.mix = "Q8_0"; s.seed = 11;
    CHECKF(synth_model_write(&s, path, err, sizeof err) == 0, "%s", err);
    model *m = model_load(path, err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    if (m) {
        CHECKF(m->p.pooling == 3, "a decoder without pooling_type: pooling %d, want 3 (last)", m->p.pooling);
        test_pooling(m, "llama");
        model_free(m);
    }
    unlink(path);
    rmdir(dir);
    const char *gemma = test_path("fixtures/gemma3-tiny-Q8_0.gguf");
    m = access(gemma, R_OK) ? NULL : model_load(gemma, err, sizeof err);
    if (!m) SKIP("fixtures/gemma3-tiny-Q8_0.gguf not loaded from %s", test_shared_dir());
    else {
        test_pooling(m, "gemma3");   /* sliding-window layers, rings in the engine */
        model_free(m);
    }
    return test_summary("embed");
}
