/* Flag parsing helpers (see cli_args.h). */
#include "server/cli_args.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool arg_is(int argc, char **argv, int *i, const char *name, const char *alt, const char **value) {
    const char *a = argv[*i];
    if (strcmp(a, name) && (!alt || strcmp(a, alt))) return false;
    if (*i + 1 >= argc) {
        fprintf(stderr, "hearth: %s needs a value\n", a);
        *value = NULL;
        return true;
    }
    *value = argv[++*i];
    return true;
}

bool arg_int(const char *flag, const char *v, int lo, int hi, int *out) {
    if (!v) return false;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "hearth: %s wants an integer in [%d, %d], got '%s'\n", flag, lo, hi, v);
        return false;
    }
    *out = (int)x;
    return true;
}

bool arg_float(const char *flag, const char *v, float *out) {
    if (!v) return false;
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || end == v || *end || !isfinite(x)) {
        fprintf(stderr, "hearth: %s wants a number, got '%s'\n", flag, v);
        return false;
    }
    *out = x;
    return true;
}

int arg_sampling(int argc, char **argv, int *i, sampler_params *sp) {
    const char *v;
    int n;
    if (arg_is(argc, argv, i, "--temp", NULL, &v)) return arg_float("--temp", v, &sp->temperature) ? 1 : -1;
    if (arg_is(argc, argv, i, "--top-k", NULL, &v)) return arg_int("--top-k", v, 0, 1 << 30, &sp->top_k) ? 1 : -1;
    if (arg_is(argc, argv, i, "--top-p", NULL, &v)) return arg_float("--top-p", v, &sp->top_p) ? 1 : -1;
    if (arg_is(argc, argv, i, "--min-p", NULL, &v)) return arg_float("--min-p", v, &sp->min_p) ? 1 : -1;
    if (arg_is(argc, argv, i, "--repeat-penalty", NULL, &v)) return arg_float("--repeat-penalty", v, &sp->repeat_penalty) ? 1 : -1;
    if (arg_is(argc, argv, i, "--presence-penalty", NULL, &v)) return arg_float("--presence-penalty", v, &sp->presence_penalty) ? 1 : -1;
    if (arg_is(argc, argv, i, "--frequency-penalty", NULL, &v)) return arg_float("--frequency-penalty", v, &sp->frequency_penalty) ? 1 : -1;
    if (arg_is(argc, argv, i, "--repeat-last-n", NULL, &v)) return arg_int("--repeat-last-n", v, -1, 1 << 30, &sp->penalty_last_n) ? 1 : -1;
    if (arg_is(argc, argv, i, "--seed", NULL, &v)) {
        if (!arg_int("--seed", v, 0, 0x7fffffff, &n)) return -1;
        sp->seed = (uint64_t)n;
        return 1;
    }
    return 0;
}
