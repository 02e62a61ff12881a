/* A job's parameters as a request leaves them unset (engine.h). Apart
 * from engine.c so that request parsing links without the engine. */
#include "engine/sched/engine.h"
#include <string.h>

void job_params_default(job_params *p) {
    memset(p, 0, sizeof *p);
    sampler_params_default(&p->sampling);
    p->max_tokens = -1;
    p->id_slot = -1;
    p->cache_prompt = true;
}
