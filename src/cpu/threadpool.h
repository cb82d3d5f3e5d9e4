/* The threadpool: persistent workers, woken once per forward pass.
 *
 * tp_run(pool, fn, ctx) runs fn(ctx, ith, nth) on every thread, the caller being
 * thread 0, and returns when all are done; tp_run_n runs it on the first
 * n_active threads only (nth = n_active), the others staying asleep. Inside
 * fn, dependent steps are separated by tp_barrier(), which all nth threads must
 * call the same number of times. Between ops workers stay hot (they spin on the
 * barrier); between tp_run calls they spin briefly and then sleep on a futex,
 * so an idle vt uses no CPU.
 *
 * tp_elastic (below) picks n_active for decode passes: fewer threads while a
 * partner keeps losing its core to another process, all of them otherwise (but
 * never more than the CPUs the process may use). */
#ifndef VT_CPU_THREADPOOL_H
#define VT_CPU_THREADPOOL_H

#include "base/status.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tp_pool tp_pool;
typedef void (*tp_fn)(void *ctx, int ith, int nth);

/* n_threads >= 1 (the caller counts as one). */
vt_status tp_create(int n_threads, tp_pool **out);
void tp_destroy(tp_pool *pool);
int tp_n_threads(const tp_pool *pool);
/* tp_usable_cpus() as tp_create read it: the CPUs the pool counts itself
 * against (tp_oversubscribed, the barriers' spin), for tp_elastic_init. */
int tp_n_cpus(const tp_pool *pool);
/* More threads than tp_usable_cpus() when the pool was created. The barrier
 * waiters of a run of more threads than those CPUs spin far less before they
 * yield and sleep, and so do the idle workers after it; a run of fewer, on a
 * pool tp_elastic runs at the CPUs or below, spins in and after it as a pool of
 * that many threads would. */
bool tp_oversubscribed(const tp_pool *pool);

void tp_run(tp_pool *pool, tp_fn fn, void *ctx);
/* tp_run on threads 0 .. n_active - 1 (1 <= n_active <= tp_n_threads): fn sees
 * nth = n_active, and the other workers neither run fn nor take part in its
 * barriers (they sleep, and are not woken, until a run includes them again).
 * n_active = 1 runs fn on the caller alone. n_active may change from one run to
 * the next. */
void tp_run_n(tp_pool *pool, int n_active, tp_fn fn, void *ctx);
/* The nth of the run in flight (inside fn: fn's nth); outside a run, that of
 * the last run (tp_n_threads before the first). Code that splits work by the
 * pool, not by fn's nth, must use this, not tp_n_threads. */
int tp_run_threads(const tp_pool *pool);
/* Called by every thread of the run inside fn. */
void tp_barrier(tp_pool *pool);

/* What the last tp_run / tp_run_n measured, for tp_elastic. wait_ns: time the
 * run's threads spent in barriers past the spin phase (asleep on the futex,
 * which a balanced step never reaches: only a partner that lost its core makes
 * one), summed over threads; the workers' wait at the run's end is not counted
 * (the caller's is). Read by the caller after the run. */
typedef struct {
    int n_active;    /* the run's nth */
    int64_t wall_ns; /* tp_run_n's own wall time, on the caller's monotonic clock */
    int64_t wait_ns; /* barrier time past the spin phase, summed over the threads */
} tp_run_stats;
tp_run_stats tp_last_run(const tp_pool *pool);

/* Dynamic work sharing inside one step (between two barriers): the calls of all
 * threads in a step draw from one counter, which is 0 when the step begins;
 * returns its value before n was added. For the tail of a step whose threads do
 * not run at the same speed. Only in runs of more than one thread (nth > 1). */
int64_t tp_claim(tp_pool *pool, int64_t n);

/* Work stealing inside one step (between two barriers). Each thread owner has
 * a static share of the step, items [0, n) (n < 2^31, the same n in every call
 * for that owner in that step): the owner takes them front to back
 * (back = false), and a thread out of work takes another's from the back (back
 * = true). Returns the item, or -1 when none is left; each item is returned
 * once per step. When threads run evenly each takes only its own items, in
 * order, as a static split would; when one is held up (its core preempted),
 * the others take its last items. owner < nth; only in runs of more than one
 * thread (nth > 1). */
int64_t tp_take(tp_pool *pool, int owner, int64_t n, bool back);

/* Static split of [0, n) into nth contiguous ranges, rounded to `grain`. */
static inline void tp_range(int64_t n, int64_t grain, int ith, int nth, int64_t *begin,
                            int64_t *end) {
    int64_t chunks = (n + grain - 1) / grain;
    int64_t per = chunks / nth, rem = chunks % nth;
    int64_t c0 = ith * per + (ith < rem ? ith : rem);
    int64_t c1 = c0 + per + (ith < rem ? 1 : 0);
    *begin = c0 * grain < n ? c0 * grain : n;
    *end = c1 * grain < n ? c1 * grain : n;
}

/* ---- elastic thread count for decode ---------------------------------------
 *
 * Work stealing lets a free thread take a preempted partner's items, but every
 * barrier still waits for the partner to arrive, which it does only when the
 * scheduler gives it a core again (time slices of milliseconds, against steps
 * of microseconds): the pool runs in lockstep with its slowest thread. So when
 * the threads of recent decode passes spent a large share of their time asleep
 * in barriers, tp_elastic tries fewer threads for a few passes and keeps that
 * only when passes got faster; while shrunk it now and then tries one more and
 * grows when that is faster. Balanced threads never sleep in a barrier, so an
 * unloaded pool never leaves the count it starts at.
 *
 * It starts at the pool's threads, or at the CPUs the process may use (n_cpus)
 * when the pool has more threads than that: with more threads than CPUs some
 * thread always waits for a core, and n_cpus is as high as a probe could grow
 * back to anyway. So -t 4 on two CPUs decodes on 2 threads from its first pass,
 * as -t 2 would, instead of spending a window and a trial oversubscribed first
 * (a large share of a generation of a hundred tokens), and goes below 2 only
 * through the trials below.
 *
 * How many fewer: the sleep itself says how many threads really ran. A window's
 * summed barrier sleep over its wall time is the mean number of threads asleep
 * in a barrier, so n less that is the mean number awake: running, or waiting
 * for a core that another process holds. A shrink trial goes straight to that
 * estimate (rounded), and never above the CPUs the process may use (n_cpus:
 * with more threads than CPUs some thread always waits for a core), nor above
 * n - 1. So -t 4 on four CPUs with two or three of them taken tries 1 or 2
 * threads at once rather than 3, then 2, then 1, each a trial of its own. The estimate
 * is a mean, and can aim too low (a load that comes and goes; a thread that
 * lost its core while it spun in a barrier counts as asleep): when a trial
 * below n - 1 loses, the next window tries halfway from it back up to n (at
 * least one more), without waiting, and only a lost trial of n - 1 holds off
 * the next one (1, 2, 4, ... windows). A trial that wins makes its count the
 * count, whatever lies between.
 *
 * Growing stays one thread at a time (the full count can be slower than one
 * more than now while one more is faster, with several cores taken), never
 * above n_cpus, every TP_ELASTIC_PROBE_EVERY passes; after a grow that won, the
 * next one up is tried at the next window, as the load that made us shrink is
 * then likely leaving.
 *
 * Pure bookkeeping, no clock of its own: the caller asks tp_elastic_pick for a
 * pass's thread count, runs it with tp_run_n, and feeds tp_last_run back with
 * tp_elastic_record. Only passes of at most TP_ELASTIC_TOKENS_MAX tokens (decode)
 * are elastic, and passes are compared only with passes of the same size; the
 * results do not depend on the count where fn's results do not depend on nth
 * (forward.c's do not). The same measurements give the same counts. */
#define TP_ELASTIC_TOKENS_MAX 8

typedef struct {
    bool enabled;
    int n_max;        /* the pool's threads */
    int n_cpus;       /* the CPUs the process may use: no count above it is tried */
    int n;            /* the count decode passes run at: min(n_max, n_cpus) at first */
    int n_try;        /* a trial in progress: the count tried (below n, or n + 1); 0: none */
    int lost;         /* the count of a shrink trial below n - 1 that lost, while the wait
                         stays high; 0: none */
    int64_t key;      /* tokens per pass of the passes measured (0: none yet) */
    int passes;       /* passes in the current window or trial */
    int64_t wall_ns;  /* their wall times, summed */
    int64_t wait_ns;  /* their barrier waits, summed */
    int64_t ref_ns;   /* mean pass at n over the last window: what a trial must beat */
    int since_probe;  /* passes at n < min(n_max, n_cpus) since the last trial, counted up
                         to TP_ELASTIC_PROBE_EVERY (after a grow that won: a whole interval,
                         so the next one up is tried at once) */
    int hold;         /* windows to pass before the next shrink trial */
    int backoff;      /* hold set by the next lost trial of n - 1 */
} tp_elastic;

/* A policy for a pool of n_threads on a process that may use n_cpus CPUs
 * (tp_n_cpus of the pool; <= 0: as many as n_threads); decode passes start at
 * the smaller of the two. Disabled, it always picks n_threads. */
void tp_elastic_init(tp_elastic *e, int n_threads, int n_cpus, bool enabled);
/* false when the environment says VT_TP_ELASTIC=0 (fixed thread count), else true. */
bool tp_elastic_env(void);
/* The thread count for a pass of n_tokens tokens. */
int tp_elastic_pick(const tp_elastic *e, int64_t n_tokens);
/* What the pass of n_tokens picked by tp_elastic_pick measured (tp_last_run).
 * Returns true when the count for later passes changed. */
bool tp_elastic_record(tp_elastic *e, int64_t n_tokens, const tp_run_stats *st);

/* The default thread count: the physical cores among the CPUs this process may
 * run on (sched_getaffinity), capped by a cgroup v2 CPU quota; fallback: the
 * usable CPUs. */
int tp_default_threads(void);
/* CPUs in this thread's affinity mask (fallback: online CPUs); at least 1. */
int tp_usable_cpus(void);

#endif
