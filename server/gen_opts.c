/* A request's generation options (gen.h): set up before parse_gen_opts
 * fills them, freed with the request. Apart from gen.c so that what only
 * parses requests (request_json.c, its fuzz targets) links without the
 * loop and the engine. */
#include "server/gen.h"
#include <stdlib.h>
#include <string.h>

void gen_opts_init(gen_opts *o) {
    memset(o, 0, sizeof *o);
    job_params_default(&o->jp);
}

void gen_opts_free(gen_opts *o) {
    free(o->bias);
    o->bias = NULL;
    free(o->dry_ids);
    o->dry_ids = NULL;
    grammar_free(o->grammar);
    o->grammar = NULL;
    o->jp.grammar = NULL;
    o->jp.sampling.logit_bias = NULL;
    o->jp.sampling.n_logit_bias = 0;
}
