/* Prometheus text rendering of the server's counters and histograms. */
#include "server/metrics.h"

#include <string.h>

/* Upper bounds in seconds, shared by the three latency histograms. */
static const double bucket_le[METRICS_N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                    0.25,  0.5,    1,     2.5,  5,     10,  30};

void metrics_init(metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void metrics_free(metrics *m) { pthread_mutex_destroy(&m->mu); }

static void observe(metrics *m, histogram *h, double v) {
    int b = 0;
    while (b < METRICS_N_BUCKETS && v > bucket_le[b]) b++;
    pthread_mutex_lock(&m->mu);
    h->counts[b]++;
    h->sum += v;
    h->n++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_observe_ttft(metrics *m, double s) { observe(m, &m->ttft_s, s); }
void metrics_observe_itl(metrics *m, double s) { observe(m, &m->inter_token_s, s); }
void metrics_observe_request(metrics *m, double s) { observe(m, &m->request_s, s); }

void metrics_count_status(metrics *m, int status) {
    int k = status / 100;
    if (k < 1 || k > 5) return;
    pthread_mutex_lock(&m->mu);
    m->requests_by_status[k]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_count_client_abort(metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->aborted_by_client++;
    pthread_mutex_unlock(&m->mu);
}

static void gauge(strbuf *o, const char *name, const char *type, const char *help, double v);

void metrics_render_conns(strbuf *o, int64_t open, uint64_t refused_per_peer, uint64_t refused_full,
                          uint64_t evicted) {
    gauge(o, "vt_http_connections_open", "gauge", "TCP connections open", (double)open);
    sb_printf(o, "# HELP vt_http_connections_refused_total connections closed at accept: a peer over its limit, "
                 "or the server full with nothing idle to evict\n"
                 "# TYPE vt_http_connections_refused_total counter\n"
                 "vt_http_connections_refused_total{reason=\"per_peer\"} %llu\n"
                 "vt_http_connections_refused_total{reason=\"full\"} %llu\n",
              (unsigned long long)refused_per_peer, (unsigned long long)refused_full);
    gauge(o, "vt_http_connections_evicted_total", "counter", "idle connections closed to admit a new one",
          (double)evicted);
}

static void render_hist(strbuf *o, const char *name, const char *help, const histogram *h) {
    sb_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int b = 0; b < METRICS_N_BUCKETS; b++) {
        cum += h->counts[b];
        sb_printf(o, "%s_bucket{le=\"%g\"} %llu\n", name, bucket_le[b], (unsigned long long)cum);
    }
    cum += h->counts[METRICS_N_BUCKETS];
    sb_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    sb_printf(o, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->n);
}

static void gauge(strbuf *o, const char *name, const char *type, const char *help, double v) {
    sb_printf(o, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

void metrics_render(metrics *m, const vt_engine_stats *st, int loading, strbuf *o) {
    pthread_mutex_lock(&m->mu);
    metrics snap = *m; /* copy under the lock, format outside it */
    pthread_mutex_unlock(&m->mu);

    gauge(o, "vt_model_loading", "gauge", "1 while the model is loading", loading ? 1 : 0);
    if (st) {
        gauge(o, "vt_requests_running", "gauge", "sequences being decoded", st->running);
        gauge(o, "vt_requests_waiting", "gauge", "requests queued for prefill", st->waiting);
        gauge(o, "vt_kv_blocks_total", "gauge", "KV cache blocks", (double)st->kv_blocks_total);
        gauge(o, "vt_kv_blocks_free", "gauge", "KV cache blocks not held by a sequence",
              (double)st->kv_blocks_free);
        gauge(o, "vt_kv_blocks_cached", "gauge", "free KV blocks that still hold a reusable prefix",
              (double)st->kv_blocks_cached);
        double used = (double)(st->kv_blocks_total - st->kv_blocks_free);
        gauge(o, "vt_kv_blocks_used", "gauge", "KV cache blocks held by sequences", used);
        gauge(o, "vt_kv_cache_usage_ratio", "gauge", "used / total KV blocks",
              st->kv_blocks_total ? used / (double)st->kv_blocks_total : 0);
        gauge(o, "vt_prefix_cache_queries_total", "counter", "KV blocks looked up in the prefix cache",
              (double)st->prefix_queries);
        gauge(o, "vt_prefix_cache_hits_total", "counter", "KV blocks served from the prefix cache",
              (double)st->prefix_hits);
        if (st->state_slots_total > 0) { /* hybrids */
            gauge(o, "vt_state_slots_total", "gauge", "recurrent-state slots (sequences + snapshots)",
                  (double)st->state_slots_total);
            gauge(o, "vt_state_slots_free", "gauge", "state slots not held by a sequence",
                  (double)st->state_slots_free);
            gauge(o, "vt_state_snapshots", "gauge", "prefix-cache snapshots of the recurrent state",
                  (double)st->state_snapshots);
            gauge(o, "vt_state_restores_total", "counter", "admissions that started from a state snapshot",
                  (double)st->state_restores);
        }
        gauge(o, "vt_preemptions_total", "counter", "sequences preempted for KV space",
              (double)st->preemptions);
        gauge(o, "vt_prompt_tokens_total", "counter", "prompt tokens processed",
              (double)st->prompt_tokens);
        gauge(o, "vt_generation_tokens_total", "counter", "tokens generated",
              (double)st->generated_tokens);
        gauge(o, "vt_engine_steps_total", "counter", "engine steps (batched forward passes)",
              (double)st->steps);
    }
    sb_printf(o, "# HELP vt_http_requests_total HTTP requests answered, by status class\n"
                 "# TYPE vt_http_requests_total counter\n");
    for (int k = 1; k <= 5; k++) {
        sb_printf(o, "vt_http_requests_total{status=\"%dxx\"} %llu\n", k,
                  (unsigned long long)snap.requests_by_status[k]);
    }
    gauge(o, "vt_requests_aborted_by_client_total", "counter",
          "generation requests whose client went away before the end", (double)snap.aborted_by_client);
    render_hist(o, "vt_time_to_first_token_seconds", "queueing to first generated token", &snap.ttft_s);
    render_hist(o, "vt_inter_token_latency_seconds", "time between tokens of one choice",
                &snap.inter_token_s);
    render_hist(o, "vt_request_duration_seconds", "queueing to finish of one choice", &snap.request_s);
}
