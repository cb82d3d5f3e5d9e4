/* The cost of the threadpool's two synchronisation points, in ns:
 *   barrier      one tp_barrier inside a running job (all threads hot)
 *   run_hot      one empty tp_run, issued back to back (workers still spinning)
 *   run_cold     one empty tp_run after the workers went to sleep (futex wake)
 *   phase_pair   tests/test_threadpool's barrier workload: each thread writes its
 *                slot, barrier, reads every slot, barrier; per pair, 100 runs of
 *                100 pairs (the test checks the values, this times them)
 * for 1, 2 and 4 threads (or the counts given on the command line; the test's
 * shapes, which oversubscribe a 2-core machine, are `bench_threadpool 2 3 4 8`).
 * Prints a table and one JSON line. Never asserts on time.
 *
 *   bench_threadpool [n_threads ...] */
#include "cpu/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

typedef struct {
    tp_pool *pool;
    int n_barriers;
} bar_ctx;

static void barrier_fn(void *vctx, int ith, int nth) {
    bar_ctx *c = vctx;
    for (int i = 0; i < c->n_barriers; i++) tp_barrier(c->pool);
}

static void empty_fn(void *vctx, int ith, int nth) {}

#define PHASE_MAX_T 1024
typedef struct {
    tp_pool *pool;
    int n_phases;
    volatile long long slot[PHASE_MAX_T];
    long long bad;
} phase_ctx;

static void phase_fn(void *vctx, int ith, int nth) {
    phase_ctx *c = vctx;
    long long bad = 0;
    for (int k = 1; k <= c->n_phases; k++) {
        c->slot[ith] = k;
        tp_barrier(c->pool);
        for (int j = 0; j < nth; j++) bad += c->slot[j] != k;
        tp_barrier(c->pool);
    }
    if (bad && ith == 0) c->bad += bad;
}

typedef struct {
    int n_threads;
    double barrier_ns, run_hot_ns, run_cold_ns, phase_pair_ns;
} result;

static int measure(int n_threads, result *r) {
    tp_pool *pool = NULL;
    if (tp_create(n_threads, &pool) != VT_OK) {
        fprintf(stderr, "bench_threadpool: %s\n", vt_last_error());
        return 1;
    }
    r->n_threads = n_threads;

    /* barrier: best of 5 runs of 20000 barriers */
    bar_ctx bc = {pool, 20000};
    tp_run(pool, barrier_fn, &bc); /* warm */
    double best = 1e30;
    for (int k = 0; k < 5; k++) {
        double t0 = now_ns();
        tp_run(pool, barrier_fn, &bc);
        double dt = (now_ns() - t0) / bc.n_barriers;
        if (dt < best) best = dt;
    }
    r->barrier_ns = best;

    /* hot tp_run: best of 5 batches of 20000 */
    best = 1e30;
    for (int k = 0; k < 5; k++) {
        const int n = 20000;
        double t0 = now_ns();
        for (int i = 0; i < n; i++) tp_run(pool, empty_fn, NULL);
        double dt = (now_ns() - t0) / n;
        if (dt < best) best = dt;
    }
    r->run_hot_ns = best;

    /* cold tp_run: sleep past the idle spin, then time one run; median of 21 */
    double cold[21];
    for (int k = 0; k < 21; k++) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
        double t0 = now_ns();
        tp_run(pool, empty_fn, NULL);
        cold[k] = now_ns() - t0;
    }
    for (int i = 1; i < 21; i++)
        for (int j = i; j > 0 && cold[j - 1] > cold[j]; j--) {
            double t = cold[j];
            cold[j] = cold[j - 1];
            cold[j - 1] = t;
        }
    r->run_cold_ns = cold[10];

    /* the test's phases: 100 runs of 100 pairs, per pair */
    if (n_threads <= PHASE_MAX_T) {
        static phase_ctx pc;
        pc.pool = pool;
        pc.n_phases = 100;
        pc.bad = 0;
        double t0 = now_ns();
        for (int k = 0; k < 100; k++) tp_run(pool, phase_fn, &pc);
        r->phase_pair_ns = (now_ns() - t0) / (100.0 * pc.n_phases);
        if (pc.bad) fprintf(stderr, "bench_threadpool: %lld barrier mismatches\n", pc.bad);
    }
    tp_destroy(pool);
    return 0;
}

int main(int argc, char **argv) {
    int counts[16] = {1, 2, 4};
    int n = 3;
    if (argc > 1) {
        n = 0;
        for (int i = 1; i < argc && n < 16; i++) {
            int t = atoi(argv[i]);
            if (t >= 1) counts[n++] = t;
        }
    }
    result res[16];
    printf("threadpool (%d physical cores)\n", tp_default_threads());
    printf("%8s %12s %12s %12s %14s\n", "threads", "barrier_ns", "run_hot_ns", "run_cold_ns", "phase_pair_ns");
    for (int i = 0; i < n; i++) {
        if (measure(counts[i], &res[i])) return 1;
        printf("%8d %12.1f %12.1f %12.1f %14.1f\n", res[i].n_threads, res[i].barrier_ns,
               res[i].run_hot_ns, res[i].run_cold_ns, res[i].phase_pair_ns);
    }
    printf("{\"bench\":\"threadpool\",\"cores\":%d,\"results\":[", tp_default_threads());
    for (int i = 0; i < n; i++)
        printf("%s{\"threads\":%d,\"barrier_ns\":%.1f,\"run_hot_ns\":%.1f,\"run_cold_ns\":%.1f,"
               "\"phase_pair_ns\":%.1f}",
               i ? "," : "", res[i].n_threads, res[i].barrier_ns, res[i].run_hot_ns,
               res[i].run_cold_ns, res[i].phase_pair_ns);
    printf("]}\n");
    return 0;
}
