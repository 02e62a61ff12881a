/* `hearth template (-m MODEL | -f FILE.jinja) [--vars JSON_FILE|-]`: render
 * a chat template with the variables given and print exactly the result, so
 * a template can be checked by hand (and by the tests). With -m, bos_token
 * and eos_token default to the model's token texts. Errors (with the
 * template's line) go to stderr, exit 1. */
#include "server/commands.h"
#include "server/cli_args.h"
#include "engine/gguf/gguf.h"
#include "engine/text/jinja.h"
#include "engine/text/tokenizer.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_all(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *p = malloc(cap);
    while (p) {
        if (n + 1 >= cap) {
            char *q = cap < ((size_t)1 << 30) ? realloc(p, cap * 2) : NULL;
            if (!q) { free(p); p = NULL; break; }
            p = q;
            cap *= 2;
        }
        size_t k = fread(p + n, 1, cap - n - 1, f);
        if (!k) break;
        n += k;
    }
    if (p) p[n] = 0;
    if (f != stdin) fclose(f);
    *len = n;
    return p;
}

static int usage(void) {
    fprintf(stderr, "usage: hearth template (-m MODEL.gguf | -f FILE.jinja) [--vars JSON_FILE|-]\n");
    return 2;
}

/* The model's template and BOS/EOS texts (malloc'd), or false with a message. */
static bool from_model(const char *path, char **src, char **bos, char **eos) {
    char err[512];
    gguf_file g;
    if (gguf_open(path, &g, err, sizeof err)) { fprintf(stderr, "hearth template: %s: %s\n", path, err); return false; }
    gguf_str s;
    if (!gguf_get_str(&g, "tokenizer.chat_template", &s)) {
        fprintf(stderr, "hearth template: %s has no tokenizer.chat_template\n", path);
        gguf_close(&g);
        return false;
    }
    *src = gguf_str_dup(s);
    tokenizer *t = tokenizer_load(&g, err, sizeof err);
    if (t) {
        const char *b = tokenizer_bos(t) >= 0 ? tokenizer_token_text(t, tokenizer_bos(t)) : NULL;
        const char *e = tokenizer_eos(t) >= 0 ? tokenizer_token_text(t, tokenizer_eos(t)) : NULL;
        *bos = strdup(b ? b : "");
        *eos = strdup(e ? e : "");
        tokenizer_free(t);
    }
    gguf_close(&g);
    return *src != NULL;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *vars_path = NULL, *v;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(); return 0; }
        if (arg_is(argc, argv, &i, "-m", "--model", &v)) { if (!(model = v)) return 2; }
        else if (arg_is(argc, argv, &i, "-f", "--file", &v)) { if (!(file = v)) return 2; }
        else if (arg_is(argc, argv, &i, "--vars", NULL, &v)) { if (!(vars_path = v)) return 2; }
        else { fprintf(stderr, "hearth template: unknown argument '%s'\n", argv[i]); return usage(); }
    }
    if (!model == !file) return usage();
    char *src = NULL, *bos = NULL, *eos = NULL;
    size_t len = 0;
    int rc = 1;
    cJSON *vars = NULL;
    jinja_template *t = NULL;
    if (model) {
        if (!from_model(model, &src, &bos, &eos)) goto out;
        len = strlen(src);
    } else if (!(src = read_all(file, &len))) {
        fprintf(stderr, "hearth template: cannot read %s\n", file);
        goto out;
    }
    if (vars_path) {
        size_t vn;
        char *text = read_all(vars_path, &vn);
        if (!text) { fprintf(stderr, "hearth template: cannot read %s\n", vars_path); goto out; }
        vars = cJSON_ParseWithLength(text, vn);
        free(text);
        if (!cJSON_IsObject(vars)) { fprintf(stderr, "hearth template: --vars must hold a JSON object\n"); goto out; }
    } else if (!(vars = cJSON_CreateObject())) {
        goto out;
    }
    if (bos && !cJSON_GetObjectItemCaseSensitive(vars, "bos_token")) cJSON_AddStringToObject(vars, "bos_token", bos);
    if (eos && !cJSON_GetObjectItemCaseSensitive(vars, "eos_token")) cJSON_AddStringToObject(vars, "eos_token", eos);
    char err[512];
    if (!(t = jinja_parse(src, len, NULL, err, sizeof err))) {
        fprintf(stderr, "hearth template: %s: %s\n", model ? model : file, err);
        goto out;
    }
    char *outp = jinja_render(t, vars, err, sizeof err);
    if (!outp) { fprintf(stderr, "hearth template: %s: %s\n", model ? model : file, err); goto out; }
    fwrite(outp, 1, strlen(outp), stdout);
    free(outp);
    rc = fflush(stdout) ? 1 : 0;
out:
    jinja_free(t);
    cJSON_Delete(vars);
    free(src);
    free(bos);
    free(eos);
    return rc;
}
