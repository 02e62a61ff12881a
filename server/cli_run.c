/* `hearth run`: generate from a prompt on the command line, streaming the
 * text to stdout and the speeds to stderr. */
#include "server/commands.h"
#include "server/cli_args.h"
#include "engine/sched/generate.h"
#include "runtime/pool.h"
#include "runtime/rss.h"
#include "engine/synth/demo_model.h"
#include "engine/text/tokenizer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(void) {
    fprintf(stderr,
        "usage: hearth run [-m MODEL.gguf] [-p TEXT] [-n N] [options]\n"
        "  -m, --model PATH       GGUF model (default: the built-in demo model, stories260K)\n"
        "  -p, --prompt TEXT      prompt (default \"Once upon a time\")\n"
        "  -n, --n-predict N      tokens to generate (default 128)\n"
        "  -c, --ctx-size N       context length (default 4096, at most the model's)\n"
        "  -t, --threads N        compute threads (default: physical cores)\n"
        "  --backend NAME         what runs the model: auto (the best here, default), cpu, metal-emu (--version lists them)\n"
        "  --special              recognise special tokens in the prompt and print them\n"
        SAMPLING_FLAGS_HELP);
}

int cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *prompt = "Once upon a time", *backend_name = "auto", *v;
    int n_predict = 128, n_ctx = 4096, n_threads = pool_default_threads();
    bool special = false;
    sampler_params sp;
    sampler_params_default(&sp);
    for (int i = 1; i < argc; i++) {
        int r = arg_sampling(argc, argv, &i, &sp);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (arg_is(argc, argv, &i, "-m", "--model", &v)) { if (!(model_path = v)) return 2; }
        else if (arg_is(argc, argv, &i, "-p", "--prompt", &v)) { if (!(prompt = v)) return 2; }
        else if (arg_is(argc, argv, &i, "-n", "--n-predict", &v)) { if (!arg_int("-n", v, 0, 1 << 24, &n_predict)) return 2; }
        else if (arg_is(argc, argv, &i, "-c", "--ctx-size", &v)) { if (!arg_int("-c", v, 16, 1 << 22, &n_ctx)) return 2; }
        else if (arg_is(argc, argv, &i, "-t", "--threads", &v)) { if (!arg_int("-t", v, 1, 1024, &n_threads)) return 2; }
        else if (arg_is(argc, argv, &i, "--backend", NULL, &v)) { if (!(backend_name = v)) return 2; }
        else if (!strcmp(argv[i], "--special")) special = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(); return 0; }
        else { fprintf(stderr, "hearth run: unknown option '%s'\n", argv[i]); usage(); return 2; }
    }

    char err[512], demo[1024];
    if (!model_path) {
        if (demo_model_path(demo, sizeof demo, err, sizeof err)) { fprintf(stderr, "hearth: %s\n", err); return 1; }
        fprintf(stderr, "hearth: no --model given: using " DEMO_MODEL_NOTE "\n");
        model_path = demo;
    }
    kernels_select();
    model_options mo = { backend_name, -1 };
    model *m = model_load_opts(model_path, &mo, err, sizeof err);
    if (!m) { fprintf(stderr, "hearth: %s\n", err); return 1; }
    if (n_ctx > m->p.n_ctx_train) n_ctx = m->p.n_ctx_train;
    fprintf(stderr, "hearth: loaded %s (%s, %.1f MiB of weights); RSS after load %.1f MiB\n", m->name,
            model_arch_name(m->p.arch), m->weight_bytes / 1048576.0, rss_bytes() / 1048576.0);

    int rc = 1;
    int32_t *ids = NULL;
    hpool *pool = pool_create(n_threads);
    generator *g = pool ? gen_new(m, n_ctx, 512, pool) : NULL;
    sampler *smp = sampler_new(&sp, m->p.n_vocab);
    if (!g || !smp) { fprintf(stderr, "hearth: out of memory\n"); goto out; }
    int n_prompt = tokenizer_encode(m->tok, prompt, strlen(prompt), true, special, &ids);
    if (n_prompt <= 0) { fprintf(stderr, "hearth: the prompt encodes to no tokens\n"); goto out; }
    if (n_prompt >= n_ctx) { fprintf(stderr, "hearth: the prompt (%d tokens) does not fit the context (%d)\n", n_prompt, n_ctx); goto out; }
    for (int i = 0; i < n_prompt; i++) sampler_accept(smp, ids[i]);

    fwrite(prompt, 1, strlen(prompt), stdout);
    fflush(stdout);
    double t0 = now_s();
    const float *logits = gen_eval(g, ids, n_prompt, NULL);
    double t1 = now_s();
    detok_stream ds;
    detok_init(&ds, m->tok, special);
    ds.at_start = false;   /* the prompt was printed as given */
    float *work = malloc((size_t)m->p.n_vocab * sizeof *work);
    int n_gen = 0;
    char piece[1024];   /* > tokenizer_max_piece() + 4: a piece is never cut */
    while (logits && work && n_gen < n_predict && g->n_past < n_ctx) {
        memcpy(work, logits, (size_t)m->p.n_vocab * sizeof *work);
        int32_t tok = sampler_sample(smp, work);
        n_gen++;
        if (tokenizer_is_eog(m->tok, tok)) break;
        sampler_accept(smp, tok);
        size_t n = detok_push(&ds, tok, piece, sizeof piece);
        fwrite(piece, 1, n, stdout);
        fflush(stdout);
        logits = gen_eval(g, &tok, 1, NULL);
    }
    size_t n = detok_flush(&ds, piece, sizeof piece);
    fwrite(piece, 1, n, stdout);
    printf("\n");
    double t2 = now_s();
    free(work);
    fprintf(stderr, "prompt: %d tokens in %.3f s (%.1f tok/s) | generation: %d tokens in %.3f s (%.1f tok/s) | %d threads, %s kernels\n",
            n_prompt, t1 - t0, n_prompt / (t1 - t0), n_gen, t2 - t1, n_gen > 0 ? n_gen / (t2 - t1) : 0.0,
            n_threads, m->backend->kernels_name(m));
    rc = 0;
out:
    free(ids);
    sampler_free(smp);
    gen_free(g);
    pool_destroy(pool);
    model_free(m);
    return rc;
}
