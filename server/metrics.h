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
/* The whole exposition as a malloc'd string; es / pc may be NULL (loading,
 * cache off). llama: llama-server's llamacpp:* names too, for dashboards
 * made for it. */
char *metrics_render(const metrics *m, const engine_stats *es, const prompt_cache_stats *pc,
                     int in_flight, bool llama);

#endif
