/* Server metrics in Prometheus' text exposition format (version 0.0.4).
 *
 * Counters and latency histograms are updated by the engine thread and the HTTP
 * threads under one mutex; the engine's own numbers (running, waiting, KV
 * blocks, prefix-cache hits, token totals) are read from vt_engine_stats when a
 * scrape renders them. All names start with vt_. */
#ifndef VT_SERVER_METRICS_H
#define VT_SERVER_METRICS_H

#include "server/strbuf.h"
#include "vt.h"

#include <pthread.h>
#include <stdint.h>

#define METRICS_N_BUCKETS 14

typedef struct histogram {
    uint64_t counts[METRICS_N_BUCKETS + 1]; /* the last one is +Inf */
    double sum;
    uint64_t n;
} histogram;

typedef struct metrics {
    pthread_mutex_t mu;
    uint64_t requests_by_status[6]; /* index status / 100 (1xx .. 5xx) */
    uint64_t requests_completion, requests_chat, aborted_by_client;
    histogram ttft_s;          /* seconds from queueing to the first token */
    histogram inter_token_s;   /* seconds between consecutive tokens of one choice */
    histogram request_s;       /* seconds from queueing to the finish */
} metrics;

void metrics_init(metrics *m);
void metrics_free(metrics *m);
void metrics_observe_ttft(metrics *m, double seconds);
void metrics_observe_itl(metrics *m, double seconds);
void metrics_observe_request(metrics *m, double seconds);
void metrics_count_status(metrics *m, int http_status);
void metrics_count_client_abort(metrics *m);
/* The connection admission numbers (conns.h), appended to the exposition text. */
void metrics_render_conns(strbuf *out, int64_t open, uint64_t refused_per_peer, uint64_t refused_full,
                          uint64_t evicted);
/* Append the exposition text. stats may be NULL (model still loading). */
void metrics_render(metrics *m, const vt_engine_stats *stats, int loading, strbuf *out);

#endif
