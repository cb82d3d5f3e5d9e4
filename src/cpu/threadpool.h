/* The threadpool: persistent workers, woken once per forward pass.
 *
 * tp_run(pool, fn, ctx) runs fn(ctx, ith, nth) on every thread, the caller being
 * thread 0, and returns when all are done. Inside fn, dependent steps are
 * separated by tp_barrier(), which all nth threads must call the same number of
 * times. Between ops workers stay hot (they spin on the barrier); between
 * tp_run calls they spin briefly and then sleep on a futex, so an idle vt uses
 * no CPU. */
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
/* More threads than tp_usable_cpus() when the pool was created: its waiters spin
 * far less before they yield and sleep. */
bool tp_oversubscribed(const tp_pool *pool);

void tp_run(tp_pool *pool, tp_fn fn, void *ctx);
/* Called by every thread inside fn. */
void tp_barrier(tp_pool *pool);

/* Dynamic work sharing inside one step (between two barriers): the calls of all
 * threads in a step draw from one counter, which is 0 when the step begins;
 * returns its value before n was added. For the tail of a step whose threads do
 * not run at the same speed. Only in pools of more than one thread: a pool of
 * one has no barrier that could reset the counter. */
int64_t tp_claim(tp_pool *pool, int64_t n);

/* Work stealing inside one step (between two barriers). Each thread owner has
 * a static share of the step, items [0, n) (n < 2^31, the same n in every call
 * for that owner in that step): the owner takes them front to back
 * (back = false), and a thread out of work takes another's from the back (back
 * = true). Returns the item, or -1 when none is left; each item is returned
 * once per step. When threads run evenly each takes only its own items, in
 * order, as a static split would; when one is held up (its core preempted),
 * the others take its last items. Only in pools of more than one thread. */
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

/* The default thread count: the physical cores among the CPUs this process may
 * run on (sched_getaffinity), capped by a cgroup v2 CPU quota; fallback: the
 * usable CPUs. */
int tp_default_threads(void);
/* CPUs in this thread's affinity mask (fallback: online CPUs); at least 1. */
int tp_usable_cpus(void);

#endif
