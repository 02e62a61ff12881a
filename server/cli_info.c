/* `hearth info`: what a model file is: architecture, shapes, tensor types,
 * vocabulary, chat template; with --plan, the steps its forward pass runs. */
#include "server/commands.h"
#include "server/cli_args.h"
#include "engine/model/model.h"
#include "engine/model/backend.h"
#include "engine/model/plan.h"
#include "engine/text/tokenizer.h"
#include "engine/text/chat_template.h"
#include <stdio.h>
#include <string.h>

int cmd_info(int argc, char **argv) {
    const char *path = NULL, *v;
    bool show_plan = false;
    for (int i = 1; i < argc; i++) {
        if (arg_is(argc, argv, &i, "-m", "--model", &v)) { if (!(path = v)) return 2; }
        else if (!strcmp(argv[i], "--plan")) show_plan = true;
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else { fprintf(stderr, "usage: hearth info [--plan] -m MODEL.gguf\n"); return 2; }
    }
    if (!path) { fprintf(stderr, "usage: hearth info [--plan] -m MODEL.gguf\n"); return 2; }
    char err[512];
    model *m = model_load(path, err, sizeof err);
    if (!m) { fprintf(stderr, "hearth: %s\n", err); return 1; }
    /* the model keeps nothing of its file: the file facts come from the file */
    gguf_file f;
    if (gguf_open(path, &f, err, sizeof err)) { fprintf(stderr, "hearth: %s: %s\n", path, err); model_free(m); return 1; }
    const model_params *p = &m->p;
    printf("file:          %s (GGUF v%u, %llu tensors, %llu metadata keys)\n", path, f.version,
           (unsigned long long)f.n_tensors, (unsigned long long)f.n_kv);
    printf("name:          %s\n", m->name);
    printf("architecture:  %s\n", model_arch_name(p->arch));
    printf("layers:        %d\n", p->n_layer);
    printf("embedding:     %d\n", p->n_embd);
    printf("heads:         %d (kv %d, head dim %d, rope dims %d, %s rope, base %g)\n", p->n_head, p->n_head_kv,
           p->head_dim, p->n_rot, p->rope_neox ? "neox" : "normal", (double)p->rope_base);
    printf("feed-forward:  %d\n", p->n_ff);
    printf("context:       %d (trained)\n", p->n_ctx_train);
    printf("features:      %s%s%s%s\n", p->qkv_bias ? "q/k/v bias, " : "", p->qk_norm ? "q/k norm, " : "",
           p->tied_embeddings ? "tied embeddings, " : "", m->rope_freqs ? "rope freq factors" : "");
    printf("weights:       %.2f MiB\n", (double)m->weight_bytes / (1 << 20));

    /* tensor types: count per type */
    int count[FMT_COUNT_MAX] = {0};
    for (uint64_t t = 0; t < f.n_tensors; t++)
        if (f.tensors[t].type >= 0 && f.tensors[t].type < FMT_COUNT_MAX) count[f.tensors[t].type]++;
    printf("tensor types: ");
    for (int t = 0; t < FMT_COUNT_MAX; t++) if (count[t]) printf(" %s x%d", format_name(t), count[t]);
    printf("\n");

    gguf_str s;
    const char *tm = gguf_get_str(&f, "tokenizer.ggml.model", &s) ? "" : "?";
    printf("vocabulary:    %d tokens, %.*s%s tokenizer", tokenizer_n_vocab(m->tok),
           (int)(tm[0] ? 0 : s.len), tm[0] ? "" : s.ptr, tm);
    if (gguf_get_str(&f, "tokenizer.ggml.pre", &s)) printf(" (pre %.*s)", (int)s.len, s.ptr);
    printf(", bos %d, eos %d\n", tokenizer_bos(m->tok), tokenizer_eos(m->tok));
    if (m->chat_template) {
        char err[256];
        chat_template *t = chat_template_load(m->chat_template, NULL, NULL, err, sizeof err);
        if (t) printf("chat template: present (%zu bytes of Jinja; hearth template -m shows a render)\n", strlen(m->chat_template));
        else printf("chat template: present but does not parse: %s\n", err);
        chat_template_free(t);
    } else {
        printf("chat template: none\n");
    }
    if (show_plan) {
        const plan *pl = m->plan;
        printf("\nplan:          %d steps, run by the %s backend (%s kernels)\nbuffers:      ", pl->n_steps,
               m->backend->name, m->backend->kernels_name(m));
        for (int b = 0; b < BUF_COUNT; b++)
            if (pl->buf_w[b]) printf(" %s[%d]", plan_buf_name((plan_buf)b), pl->buf_w[b]);
        printf(" (floats a row)\n");
        plan_print(pl, stdout);
    }
    gguf_close(&f);
    model_free(m);
    return 0;
}
