/* Small helpers shared by the subcommands' flag parsing. */
#ifndef HEARTH_CLI_ARGS_H
#define HEARTH_CLI_ARGS_H

#include <stdbool.h>
#include "engine/sample/sampler.h"

/* If argv[*i] is `name` (or `alt`), take its value from argv[*i + 1]. */
bool arg_is(int argc, char **argv, int *i, const char *name, const char *alt, const char **value);
/* Parse numbers strictly; print an error naming the flag on failure. */
bool arg_int(const char *flag, const char *v, int lo, int hi, int *out);
bool arg_float(const char *flag, const char *v, float *out);
/* Sampling flags shared by run and bench: --temp, --top-k, --top-p, --min-p,
 * --repeat-penalty, --presence-penalty, --frequency-penalty, --repeat-last-n,
 * --seed. Returns 1 if argv[*i] was one (consumed), 0 if not, -1 on a bad value. */
int arg_sampling(int argc, char **argv, int *i, sampler_params *sp);
#define SAMPLING_FLAGS_HELP \
    "  --temp T               temperature (0 = greedy, default 0.8)\n" \
    "  --top-k K --top-p P --min-p P\n" \
    "  --repeat-penalty R --presence-penalty P --frequency-penalty F --repeat-last-n N\n" \
    "  --seed S               makes sampled output reproducible\n"

#endif
