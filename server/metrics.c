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

/* A label value as the text format wants it: \\, \" and \n escaped. */
static void label_value(out *o, const char *v) {
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') put(o, "\\%c", *v);
        else if (*v == '\n') put(o, "\\n");
        else put(o, "%c", *v);
    }
}

/* One series a model: name{model="id"} value, under one HELP/TYPE. */
typedef double (*model_value)(const metrics_model *mm);

static void per_model(out *o, const char *name, const char *type, const char *help, const metrics_model *ms, int n,
                      bool cache, model_value fn) {
    bool any = false;
    for (int i = 0; i < n; i++) any |= !cache || ms[i].have_pc;
    if (!any) return;
    head(o, name, type, help);
    for (int i = 0; i < n; i++) {
        if (cache && !ms[i].have_pc) continue;
        put(o, "%s{model=\"", name);
        label_value(o, ms[i].id);
        put(o, "\"} %.17g\n", fn(&ms[i]));
    }
}

#define MODEL_VALUE(NAME, EXPR) static double NAME(const metrics_model *mm) { return (double)(EXPR); }
MODEL_VALUE(v_slots_total, mm->es.n_slots)
MODEL_VALUE(v_slots_busy, mm->es.slots_busy)
MODEL_VALUE(v_queue_depth, mm->es.queue_depth)
MODEL_VALUE(v_kv_used, mm->es.kv_cells_used)
MODEL_VALUE(v_kv_total, mm->es.kv_cells_total)
MODEL_VALUE(v_kv_bytes, mm->es.kv_bytes)
MODEL_VALUE(v_steps, mm->es.steps)
MODEL_VALUE(v_engine_prompt, mm->es.prompt_tokens)
MODEL_VALUE(v_engine_generated, mm->es.generated_tokens)
MODEL_VALUE(v_pc_entries, mm->pc.entries)
MODEL_VALUE(v_pc_bytes, mm->pc.bytes)
MODEL_VALUE(v_pc_hits, mm->pc.hits)
MODEL_VALUE(v_pc_misses, mm->pc.misses)
MODEL_VALUE(v_pc_restored, mm->pc.tokens_restored)
MODEL_VALUE(v_pc_evictions, mm->pc.evictions)

/* The series each loaded model has; cache: only while its prompt cache is on. */
static const struct {
    const char *name, *type, *help;
    bool cache;
    model_value fn;
} model_series[] = {
    { "hearth_slots_total", "gauge", "engine slots", false, v_slots_total },
    { "hearth_slots_busy", "gauge", "slots running a job", false, v_slots_busy },
    { "hearth_queue_depth", "gauge", "jobs waiting for a slot", false, v_queue_depth },
    { "hearth_kv_cells_used", "gauge", "KV cache positions holding tokens, all slots", false, v_kv_used },
    { "hearth_kv_cells_total", "gauge", "KV cache positions, all slots", false, v_kv_total },
    { "hearth_kv_bytes", "gauge", "KV cache size in bytes", false, v_kv_bytes },
    { "hearth_engine_steps_total", "counter", "engine steps run", false, v_steps },
    { "hearth_engine_prompt_tokens_total", "counter", "prompt tokens prefilled by the engine", false, v_engine_prompt },
    { "hearth_engine_generated_tokens_total", "counter", "tokens decoded by the engine", false, v_engine_generated },
    { "hearth_prompt_cache_entries", "gauge", "blocks in the prompt-state store", true, v_pc_entries },
    { "hearth_prompt_cache_bytes", "gauge", "bytes of stored prompt state", true, v_pc_bytes },
    { "hearth_prompt_cache_hits_total", "counter", "lookups that restored state", true, v_pc_hits },
    { "hearth_prompt_cache_misses_total", "counter", "lookups that restored nothing", true, v_pc_misses },
    { "hearth_prompt_cache_tokens_restored_total", "counter", "positions restored from the store", true, v_pc_restored },
    { "hearth_prompt_cache_evictions_total", "counter", "blocks evicted by the size cap", true, v_pc_evictions },
};

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
static void llama_compat(out *o, const metrics *m, const metrics_model *ms, int n) {
    double pt = (double)(m->prompt_tokens - (m->cached_tokens < m->prompt_tokens ? m->cached_tokens : m->prompt_tokens));
    counter(o, "llamacpp:prompt_tokens_total", "Number of prompt tokens processed.", (uint64_t)pt);
    counter_s(o, "llamacpp:prompt_seconds_total", "Prompt process time", m->prompt_seconds);
    counter(o, "llamacpp:tokens_predicted_total", "Number of generation tokens processed.", m->generated_tokens);
    counter_s(o, "llamacpp:tokens_predicted_seconds_total", "Predict process time", m->generated_seconds);
    gauge(o, "llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s.",
          m->prompt_seconds > 0 ? pt / m->prompt_seconds : 0);
    gauge(o, "llamacpp:predicted_tokens_seconds", "Average generation throughput in tokens/s.",
          m->generated_seconds > 0 ? (double)m->generated_tokens / m->generated_seconds : 0);
    if (n == 0) return;
    engine_stats es = { 0 };
    for (int i = 0; i < n; i++) {
        es.steps += ms[i].es.steps;
        es.kv_cells_used += ms[i].es.kv_cells_used;
        es.kv_cells_total += ms[i].es.kv_cells_total;
        es.slots_busy += ms[i].es.slots_busy;
        es.queue_depth += ms[i].es.queue_depth;
    }
    counter(o, "llamacpp:n_decode_total", "Total number of llama_decode() calls", es.steps);
    gauge(o, "llamacpp:kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.",
          es.kv_cells_total ? (double)es.kv_cells_used / (double)es.kv_cells_total : 0);
    gauge(o, "llamacpp:kv_cache_tokens", "KV-cache tokens.", (double)es.kv_cells_used);
    gauge(o, "llamacpp:requests_processing", "Number of requests processing.", es.slots_busy);
    gauge(o, "llamacpp:requests_deferred", "Number of requests deferred.", es.queue_depth);
}

char *metrics_render(const metrics *m, const metrics_model *ms, int n, int in_flight, bool llama) {
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
    for (size_t i = 0; i < sizeof model_series / sizeof *model_series; i++)
        per_model(&o, model_series[i].name, model_series[i].type, model_series[i].help, ms, n, model_series[i].cache,
                  model_series[i].fn);
    if (llama) llama_compat(&o, m, ms, n);
    if (o.oom) { free(o.p); return NULL; }
    return o.p;
}
