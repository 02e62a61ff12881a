/* Counters and histograms for GET /metrics (Prometheus text format). */
#ifndef HEARTH_METRICS_H
#define HEARTH_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include "engine/sched/engine.h"

#define HIST_MAX_BUCKETS 16

typedef struct histogram {
    const double *bounds;     /* upper bounds in seconds, ascending */
    int n_bounds;
    uint64_t counts[HIST_MAX_BUCKETS];   /* per bucket, not cumulative */
    uint64_t n;               /* all observations (+Inf) */
    double sum;
} histogram;

#define METRICS_MAX_KEYS 64

typedef struct metrics {
    struct { const char *route; int status; uint64_t n; } req[METRICS_MAX_KEYS];
    int n_req;
    uint64_t prompt_tokens, generated_tokens, cached_tokens;
    double prompt_seconds, generated_seconds;   /* engine time of finished generations */
    histogram ttft, itl, duration;
} metrics;

void metrics_init(metrics *m);
/* route: a static string naming the endpoint ("chat", "other", ...). */
void metrics_request(metrics *m, const char *route, int status);
void metrics_observe(histogram *h, double seconds);
/* One loaded model's engine figures: its series carry {model="id"}. */
typedef struct metrics_model {
    const char *id;
    engine_stats es;
    bool have_pc;             /* its prompt cache is on: pc holds its figures */
    prompt_cache_stats pc;
} metrics_model;

/* The whole exposition as a malloc'd string: the server's counters, then
 * each of the n loaded models' engine and prompt-cache series (n may be 0).
 * llama: llama-server's llamacpp:* names too, for dashboards made for it
 * (unlabelled, as it serves one model: engine figures summed over all). */
char *metrics_render(const metrics *m, const metrics_model *models, int n, int in_flight, bool llama);

#endif
