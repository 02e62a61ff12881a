/* Counters and histograms in Prometheus text format (see metrics.h). */
#include "server/metrics.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double ttft_bounds[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
static const double itl_bounds[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5 };
static const double dur_bounds[] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300 };

static void hist_init(histogram *h, const double *b, int n) {
    memset(h, 0, sizeof *h);
    h->bounds = b;
    h->n_bounds = n;
}

void metrics_init(metrics *m) {
    memset(m, 0, sizeof *m);
    hist_init(&m->ttft, ttft_bounds, (int)(sizeof ttft_bounds / sizeof *ttft_bounds));
    hist_init(&m->itl, itl_bounds, (int)(sizeof itl_bounds / sizeof *itl_bounds));
    hist_init(&m->duration, dur_bounds, (int)(sizeof dur_bounds / sizeof *dur_bounds));
}

void metrics_request(metrics *m, const char *route, int status) {
    for (int i = 0; i < m->n_req; i++)
        if (m->req[i].status == status && !strcmp(m->req[i].route, route)) { m->req[i].n++; return; }
    if (m->n_req == METRICS_MAX_KEYS) {   /* full (many odd statuses): fold into "other" */
        route = "other";
        status = 0;
        for (int i = 0; i < m->n_req; i++)
            if (m->req[i].status == 0 && !strcmp(m->req[i].route, route)) { m->req[i].n++; return; }
        m->n_req--;
    }
    m->req[m->n_req].route = route;
    m->req[m->n_req].status = status;
    m->req[m->n_req++].n = 1;
}

void metrics_observe(histogram *h, double s) {
    int i = 0;
    while (i < h->n_bounds && s > h->bounds[i]) i++;
    if (i < h->n_bounds) h->counts[i]++;
    h->n++;
    h->sum += s;
}

/* ---- the text ------------------------------------------------------------ */
typedef struct { char *p; size_t len, cap; bool oom; } out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
    if (o->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) { o->oom = true; return; }
        if ((size_t)n < o->cap - o->len) { o->len += (size_t)n; return; }
        size_t cap = o->cap * 2 + (size_t)n;
        char *np = realloc(o->p, cap);
        if (!np) { o->oom = true; return; }
        o->p = np;
        o->cap = cap;
    }
}

static void head(out *o, const char *name, const char *type, const char *help) {
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(out *o, const char *name, const char *help, uint64_t v) {
    head(o, name, "counter", help);
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

static void counter_s(out *o, const char *name, const char *help, double seconds) {
    head(o, name, "counter", help);
    put(o, "%s %.17g\n", name, seconds);
}

static void gauge(out *o, const char *name, const char *help, double v) {
    head(o, name, "gauge", help);
    put(o, "%s %.17g\n", name, v);
}

static void hist(out *o, const char *name, const char *help, const histogram *h) {
    head(o, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i < h->n_bounds; i++) {
        cum += h->counts[i];
        put(o, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    put(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->n);
    put(o, "%s_sum %.17g\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->n);
}

/* llama-server's names (its --metrics), from the same counters: its prompt
 * tokens are the ones prefilled (cached ones excluded), its seconds the
 * engine's time on them, its throughputs their ratios. */
static void llama_compat(out *o, const metrics *m, const engine_stats *es) {
    double pt = (double)(m->prompt_tokens - (m->cached_tokens < m->prompt_tokens ? m->cached_tokens : m->prompt_tokens));
    counter(o, "llamacpp:prompt_tokens_total", "Number of prompt tokens processed.", (uint64_t)pt);
    counter_s(o, "llamacpp:prompt_seconds_total", "Prompt process time", m->prompt_seconds);
    counter(o, "llamacpp:tokens_predicted_total", "Number of generation tokens processed.", m->generated_tokens);
    counter_s(o, "llamacpp:tokens_predicted_seconds_total", "Predict process time", m->generated_seconds);
    gauge(o, "llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s.",
          m->prompt_seconds > 0 ? pt / m->prompt_seconds : 0);
    gauge(o, "llamacpp:predicted_tokens_seconds", "Average generation throughput in tokens/s.",
          m->generated_seconds > 0 ? (double)m->generated_tokens / m->generated_seconds : 0);
    if (!es) return;
    counter(o, "llamacpp:n_decode_total", "Total number of llama_decode() calls", es->steps);
    gauge(o, "llamacpp:kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.",
          es->kv_cells_total ? (double)es->kv_cells_used / (double)es->kv_cells_total : 0);
    gauge(o, "llamacpp:kv_cache_tokens", "KV-cache tokens.", (double)es->kv_cells_used);
    gauge(o, "llamacpp:requests_processing", "Number of requests processing.", es->slots_busy);
    gauge(o, "llamacpp:requests_deferred", "Number of requests deferred.", es->queue_depth);
}

char *metrics_render(const metrics *m, const engine_stats *es, const prompt_cache_stats *pc, int in_flight,
                     bool llama) {
    out o = { .cap = 8192 };
    if (!(o.p = malloc(o.cap))) return NULL;
    o.p[0] = 0;
    head(&o, "hearth_requests_total", "counter", "HTTP requests by endpoint and status");
    for (int i = 0; i < m->n_req; i++)
        put(&o, "hearth_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", m->req[i].route,
            m->req[i].status, (unsigned long long)m->req[i].n);
    gauge(&o, "hearth_requests_in_flight", "HTTP requests received and not yet over", in_flight);
    counter(&o, "hearth_prompt_tokens_total", "prompt tokens of finished generations", m->prompt_tokens);
    counter(&o, "hearth_generated_tokens_total", "tokens generated by finished generations", m->generated_tokens);
    counter(&o, "hearth_cached_prompt_tokens_total", "prompt tokens reused from a cache instead of prefilled",
            m->cached_tokens);
    hist(&o, "hearth_time_to_first_token_seconds", "from request arrival to the first generated token", &m->ttft);
    hist(&o, "hearth_inter_token_latency_seconds", "between consecutive generated tokens of one request", &m->itl);
    hist(&o, "hearth_request_duration_seconds", "from request arrival to the end of the generation", &m->duration);
    if (es) {
        gauge(&o, "hearth_slots_total", "engine slots", es->n_slots);
        gauge(&o, "hearth_slots_busy", "slots running a job", es->slots_busy);
        gauge(&o, "hearth_queue_depth", "jobs waiting for a slot", es->queue_depth);
        gauge(&o, "hearth_kv_cells_used", "KV cache positions holding tokens, all slots", (double)es->kv_cells_used);
        gauge(&o, "hearth_kv_cells_total", "KV cache positions, all slots", (double)es->kv_cells_total);
        gauge(&o, "hearth_kv_bytes", "KV cache size in bytes", (double)es->kv_bytes);
        counter(&o, "hearth_engine_steps_total", "engine steps run", es->steps);
        counter(&o, "hearth_engine_prompt_tokens_total", "prompt tokens prefilled by the engine", es->prompt_tokens);
        counter(&o, "hearth_engine_generated_tokens_total", "tokens decoded by the engine", es->generated_tokens);
    }
    if (pc && pc->enabled) {
        gauge(&o, "hearth_prompt_cache_entries", "blocks in the prompt-state store", (double)pc->entries);
        gauge(&o, "hearth_prompt_cache_bytes", "bytes of stored prompt state", (double)pc->bytes);
        counter(&o, "hearth_prompt_cache_hits_total", "lookups that restored state", pc->hits);
        counter(&o, "hearth_prompt_cache_misses_total", "lookups that restored nothing", pc->misses);
        counter(&o, "hearth_prompt_cache_tokens_restored_total", "positions restored from the store",
                pc->tokens_restored);
        counter(&o, "hearth_prompt_cache_evictions_total", "blocks evicted by the size cap", pc->evictions);
    }
    if (llama) llama_compat(&o, m, es);
    if (o.oom) { free(o.p); return NULL; }
    return o.p;
}
