/* `hearth mkmodel`: the model writer from the command line. */
#include "server/commands.h"
#include "server/cli_args.h"
#include "engine/synth/synth_model.h"
#include <stdio.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr,
        "usage: hearth mkmodel -o OUT.gguf [--shape tiny|llama-1b|qwen2-0.5b] [options]\n"
        "  --arch llama|qwen2|qwen3   --mix F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q5_1|Q4_K_M|Q5_K_M|Q6_K\n"
        "  --embd N --layers N --heads N --kv-heads N --head-dim N --ff N --vocab N --ctx N\n"
        "  --tied                     no output.weight (tied embeddings)\n"
        "  --embd-type F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q5_1|Q4_K|Q5_K|Q6_K   token_embd's format (default: the mix's)\n"
        "  --seed N --name TEXT\n"
        "  --vocab-json tokenizer.json [--pre llama-bpe|qwen2|gpt2|smollm]   --vocab-gguf VOCAB.gguf\n");
}

int cmd_mkmodel(int argc, char **argv) {
    synth_spec s;
    synth_spec_default(&s);
    const char *out = NULL, *v;
    int seed;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool ok = true;
        if (arg_is(argc, argv, &i, "-o", "--out", &v)) ok = (out = v) != NULL;
        else if (arg_is(argc, argv, &i, "--shape", NULL, &v)) {
            /* a shape resets the spec: give it first */
            if (!v || synth_spec_preset(&s, v)) { fprintf(stderr, "hearth mkmodel: unknown shape '%s'\n", v ? v : ""); return 2; }
        }
        else if (arg_is(argc, argv, &i, "--arch", NULL, &v)) {
            ok = v != NULL;
            if (ok && !strcmp(v, "llama")) s.arch = ARCH_LLAMA;
            else if (ok && !strcmp(v, "qwen2")) s.arch = ARCH_QWEN2;
            else if (ok && !strcmp(v, "qwen3")) s.arch = ARCH_QWEN3;
            else { fprintf(stderr, "hearth mkmodel: unknown architecture '%s'\n", v ? v : ""); return 2; }
        }
        else if (arg_is(argc, argv, &i, "--mix", NULL, &v)) ok = (s.mix = v) != NULL;
        else if (arg_is(argc, argv, &i, "--embd", NULL, &v)) ok = arg_int(a, v, 32, 1 << 16, &s.n_embd);
        else if (arg_is(argc, argv, &i, "--layers", NULL, &v)) ok = arg_int(a, v, 1, 512, &s.n_layer);
        else if (arg_is(argc, argv, &i, "--heads", NULL, &v)) ok = arg_int(a, v, 1, 1024, &s.n_head);
        else if (arg_is(argc, argv, &i, "--kv-heads", NULL, &v)) ok = arg_int(a, v, 1, 1024, &s.n_head_kv);
        else if (arg_is(argc, argv, &i, "--head-dim", NULL, &v)) ok = arg_int(a, v, 2, 1024, &s.head_dim);
        else if (arg_is(argc, argv, &i, "--ff", NULL, &v)) ok = arg_int(a, v, 32, 1 << 18, &s.n_ff);
        else if (arg_is(argc, argv, &i, "--vocab", NULL, &v)) ok = arg_int(a, v, 320, 1 << 22, &s.n_vocab);
        else if (arg_is(argc, argv, &i, "--ctx", NULL, &v)) ok = arg_int(a, v, 16, 1 << 24, &s.n_ctx);
        else if (arg_is(argc, argv, &i, "--embd-type", NULL, &v)) ok = (s.embd_type = v) != NULL;
        else if (arg_is(argc, argv, &i, "--seed", NULL, &v)) { ok = arg_int(a, v, 0, 0x7fffffff, &seed); s.seed = (uint64_t)seed; }
        else if (arg_is(argc, argv, &i, "--name", NULL, &v)) ok = (s.name = v) != NULL;
        else if (arg_is(argc, argv, &i, "--vocab-json", NULL, &v)) ok = (s.vocab_json = v) != NULL;
        else if (arg_is(argc, argv, &i, "--pre", NULL, &v)) ok = (s.vocab_pre = v) != NULL;
        else if (arg_is(argc, argv, &i, "--vocab-gguf", NULL, &v)) ok = (s.vocab_gguf = v) != NULL;
        else if (!strcmp(a, "--tied")) s.tied = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
        else { fprintf(stderr, "hearth mkmodel: unknown option '%s'\n", a); usage(); return 2; }
        if (!ok) return 2;
    }
    if (!out) { usage(); return 2; }
    char err[512];
    if (synth_model_write(&s, out, err, sizeof err)) { fprintf(stderr, "hearth mkmodel: %s\n", err); return 1; }
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
