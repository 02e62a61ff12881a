/* libFuzzer target: a request body as the router reads it (UTF-8 check, no
 * NUL, cJSON_ParseWithOpts with the end required, an object), then the
 * field checks of every generating endpoint: check_model_field for the
 * OpenAI ones and parse_gen_opts for GEN_CHAT (/v1/chat/completions),
 * GEN_COMPLETION (/v1/completions) and GEN_LLAMA (/completion, /infill),
 * against a server with the stories260K tokenizer (logit_bias strings are
 * tokenized). Checks: an accepted body leaves the options in range (stop
 * count, top logprobs, logit bias ids inside the vocabulary, max_tokens
 * within the slot context); a rejected one has a 4xx status (never 500
 * except out of memory) and a NUL-terminated one-line message. */
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"
#include "engine/model/model.h"
#include "server/request_json.h"
#include "server/utf8.h"

/* errors.c answers through http.c; the fuzzer never answers a request */
void http_add_header(http_req *r, const char *name, const char *value) { (void)r; (void)name; (void)value; }
void http_respond(http_req *r, int status, const char *content_type, const char *body, size_t len) {
    (void)r; (void)status; (void)content_type; (void)body; (void)len;
}
/* request_json.c seeds requests without a seed from the loop's clock */
uint64_t uv_hrtime(void) {
    static uint64_t t;
    return t += 1000;
}
static server srv;
static model mdl;

static void setup(void) {
    if (srv.model) return;
    const char *shared = getenv("HEARTH_SHARED");
    char path[4096];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared ? shared : "../shared");
    gguf_file g;
    char err[256];
    if (gguf_open(path, &g, err, sizeof err)) {
        fprintf(stderr, "fuzz: cannot load %s: %s (set HEARTH_SHARED)\n", path, err);
        abort();
    }
    mdl.tok = tokenizer_load(&g, err, sizeof err);
    gguf_close(&g);
    if (!mdl.tok) { fprintf(stderr, "fuzz: %s: %s\n", path, err); abort(); }
    mdl.p.n_vocab = tokenizer_n_vocab(mdl.tok);
    mdl.name = (char *)"stories260K";
    srv.model = &mdl;
    srv.model_id = (char *)"stories260K";
    srv.model_file = (char *)"stories260K.gguf";
    srv.n_ctx = 512;
    srv.o.n_parallel = 4;
}

static void check_error(const api_error *e) {
    if (e->status < 400 || e->status > 499) {
        if (!(e->status == 500 && strstr(e->message, "memory"))) abort();
    }
    if (!memchr(e->message, 0, sizeof e->message) || strchr(e->message, '\n')) abort();
    if (!memchr(e->param, 0, sizeof e->param)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    if (!utf8_valid((const char *)data, size) || memchr(data, 0, size)) return 0;
    char *b = malloc(size + 1);
    if (!b) return 0;
    memcpy(b, data, size);
    b[size] = 0;
    const char *end = NULL;
    cJSON *body = cJSON_ParseWithOpts(b, &end, true);
    if (!body) {
        if (!end || end < b || end > b + size) abort();   /* the 400 names this byte */
        free(b);
        return 0;
    }
    if (cJSON_IsObject(body)) {
        const gen_kind kinds[3] = { GEN_CHAT, GEN_COMPLETION, GEN_LLAMA };
        for (int k = 0; k < 3; k++) {
            api_error e;
            memset(&e, 0, sizeof e);
            gen_opts o;
            gen_opts_init(&o);
            bool ok = (kinds[k] == GEN_LLAMA || check_model_field(&srv, body, &e)) &&
                      parse_gen_opts(&srv, body, kinds[k], &o, &e);
            if (!ok) {
                check_error(&e);
            } else {
                const sampler_params *sp = &o.jp.sampling;
                if (o.jp.n_stop < 0 || o.jp.n_stop > ENGINE_MAX_STOP) abort();
                for (int i = 0; i < o.jp.n_stop; i++) if (!o.jp.stop[i]) abort();
                if (o.jp.n_top_logprobs < 0 || o.jp.n_top_logprobs > ENGINE_MAX_TOP_LOGPROBS) abort();
                if (o.jp.max_tokens < -1 || o.jp.max_tokens > srv.n_ctx) abort();
                if (sp->n_logit_bias > 1024) abort();   /* the cap holds after text entries are tokenized */
                for (int i = 0; i < sp->n_logit_bias; i++)
                    if (sp->logit_bias[i].id < 0 || sp->logit_bias[i].id >= mdl.p.n_vocab) abort();
            }
            gen_opts_free(&o);
        }
    }
    cJSON_Delete(body);
    free(b);
    return 0;
}
