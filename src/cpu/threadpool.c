/* The threadpool: persistent workers, one wake-up per tp_run.
 *
 * Why this shape: the engine before vt paid a full wake + barrier on every op and
 * spent 47% of decode in threadpool synchronisation with every core spinning.
 * Here the pool is woken once per forward pass (tp_run), dependent steps inside
 * it are separated by tp_barrier (a counter barrier that spins, and sleeps only
 * when a partner has lost its core), and between tp_run calls workers spin for a short, bounded time and
 * then sleep on a futex, so an idle process uses no CPU.
 *
 * Protocol
 *   run_seq    the job in flight: (generation << 16) | n_active, 64 bits, so it
 *              never repeats. A worker runs the job when it sees run_seq change
 *              to a value whose n_active is above its index. The job's fields
 *              (fn, ctx, nth, bar_base) are written by the caller before its
 *              seq_cst store of run_seq and read by workers after their acquire
 *              load of it; the caller writes them again only after the run has
 *              ended, which needs every thread of the run to have arrived.
 *   run_gen    the futex word workers sleep on between jobs, bumped after each
 *              store of run_seq.
 *   n_sleeping workers inside (or about to enter) futex_wait on run_gen. tp_run
 *              issues the futex_wake syscall only when it is non-zero, so a hot
 *              pool is woken with one atomic store and one increment. Both sides
 *              use seq_cst (Dekker): the sleeper increments n_sleeping, reads
 *              run_gen, then run_seq, and sleeps on the run_gen it read only if
 *              run_seq is unchanged; the caller stores run_seq, bumps run_gen,
 *              then reads n_sleeping. Either the sleeper sees the new run_seq, or
 *              the caller sees the sleeper and wakes it, and futex_wait itself
 *              re-checks run_gen, so a wake cannot be lost.
 *   parking    a worker that sees a run without it parks: it sleeps on park_gen
 *              (counted in n_parked) at once, without the idle spin, and no run
 *              without it wakes it, so a shrunk pool costs nothing per run. The
 *              caller wakes parked threads (bumps park_gen, futex_wake) only for
 *              a run of more threads than the last run posted before it: a
 *              worker below that run's count took part in it, so it cannot have
 *              seen a run without it since, and waits in the ordinary way. A run
 *              of one thread posts nothing (no worker sees it), so it leaves
 *              that count as it was, and passes on the caller alone between
 *              passes on a shrunk pool wake no parked thread.
 *              Dekker as for n_sleeping (n_parked, park_gen, run_seq). A worker
 *              may miss any number of runs without it; never one with it, which
 *              cannot end before it arrives.
 *   the end    every thread of the run, the caller included, passes one more
 *              barrier after fn, so tp_run returns when all of them are done.
 *   bar_arrived
 *              the barrier: a counter of arrivals that only grows. A run counts
 *              its barriers from bar_base, the counter when the run began (then
 *              quiescent: every arrival of the last run has happened, and threads
 *              outside a run never arrive). Instance k of a run (k = 0, 1, ...;
 *              the last is the end) is complete when the counter reaches
 *              bar_base + (k + 1) * nth, nth being the run's. A thread reads nth,
 *              bar_base and the run's spin (bar_spin_*) before its arrival: once
 *              it has arrived, the run may end and the caller write the next
 *              run's. A waiter of an old run still spinning sees the counter only
 *              grow, so the next run (of any nth) cannot hold it. A waiter spins
 *              for bar_spin_ns, then sleeps on bar_gen (bumped by each completing
 *              arrival, which wakes sleepers when bar_sleeping > 0).
 *   claim      the tp_claim counters. A thread in step k of a run (between its
 *              barriers k - 1 and k) reads (bar_arrived - bar_base) / nth == k
 *              (barrier k cannot complete before it arrives), so step k draws
 *              from claim[k & 1]. The caller zeroes both before a run. The last
 *              arrival of barrier k, when k is not the end, resets claim[k & 1]
 *              for step k + 2: every claim of step k happened before that
 *              arrival, and barrier k + 1 (there is one: k is not the end)
 *              orders the reset before any claim of step k + 2.
 *   take       the tp_take counters: three sets of one per thread (by step mod
 *              3), each word (taken from the front, taken from the back), 32 bits
 *              each, moved by compare-and-swap only while their sum is below the
 *              owner's item count. The caller zeroes sets 0 and 1 (owners below
 *              the run's nth) before a run. The arrival that returns v at barrier
 *              k of a run (k = (v - bar_base) / nth), when k is not the end,
 *              zeroes counter (v - bar_base) % nth of set (k + 2) % 3 for step
 *              k + 2: the nth arrivals of barrier k zero every owner of the set;
 *              its last takes were in step k - 1 (or in an earlier run), all
 *              before barrier k - 1 completed, and its next are in step k + 2,
 *              after this thread's arrival at barrier k + 1. So every arrival
 *              resets one counter, one store, and no thread needs to know its own
 *              index in tp_barrier.
 *              The end resets no claim and no take counter: its arrivals may
 *              come from threads outside the next run, whose stores nothing would
 *              order before that run's steps; the caller's zeroing covers the
 *              next run's first two steps instead, whatever its nth, and every
 *              counter a run uses is zero when its step begins.
 *   stats      the caller times each run (two clock reads); a thread whose
 *              barrier wait outlasts the spin phase (it slept, or lost its core
 *              while it spun) adds the time from its first clock read to the end
 *              of the wait to wait_ns (a relaxed RMW on a line of its own), so
 *              the hot path, a barrier that completes within 64 pause rounds,
 *              reads no clock. Workers do not count their wait at the end, which
 *              may finish after the caller has read wait_ns.
 *
 * Every spin loop pauses (pause / yield) and, after a bounded number of rounds,
 * calls sched_yield, so oversubscription (more threads than cores) does not turn
 * into a livelock: a waiting thread gives its core to the thread it waits for.
 *
 * Under load (other processes on our cores, or more threads than the cores this
 * process may run on) a spinning waiter steals time from the thread it waits
 * for. So a barrier waiter spins for a bounded time and then sleeps on a futex;
 * a run of more threads than the CPUs in the pool's affinity mask
 * (tp_usable_cpus) is oversubscribed by construction and its waiters spin far
 * less before they yield and sleep, as do the idle workers after such a run.
 * A run's count, not the pool's, decides its barriers' spin and its workers'
 * idle spin after it, so a pool that tp_elastic runs on the CPUs it may use
 * (where an oversubscribed pool's decode passes start) waits, in and between
 * runs, as a pool of that size would. The results do not depend on any of
 * this: only who waits how. */
#include "cpu/threadpool.h"

#include "base/size.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void cpu_relax(void) { _mm_pause(); }
#elif defined(__aarch64__)
static inline void cpu_relax(void) { __asm__ __volatile__("yield" ::: "memory"); }
#else
static inline void cpu_relax(void) { __asm__ __volatile__("" ::: "memory"); }
#endif

/* Pause rounds before a waiting thread starts calling sched_yield. Large enough
 * that a barrier between two hot threads never yields (a barrier costs well
 * under 1 µs), small enough that a descheduled partner gets the core quickly. */
#define TP_SPIN_BEFORE_YIELD 2000
#define TP_SPIN_OVERSUBSCRIBED 32
/* How long an idle worker keeps spinning after a job before it sleeps (ns).
 * Covers the gap between back-to-back tp_run calls inside one decode step
 * (sampling, bookkeeping) without burning a core when the engine is idle.
 * Overridable with VT_TP_SPIN_US. */
#define TP_IDLE_SPIN_NS_DEFAULT 100000
/* How long a thread spins in a barrier before it sleeps on a futex (ns). Steps
 * are balanced, so a barrier normally completes in well under a microsecond;
 * when it does not, the thread we wait for has usually lost its core to another
 * process, and sleeping frees our core for it (the scheduler moves it over)
 * instead of making it wait out that process's time slice. */
#define TP_BARRIER_SPIN_NS_DEFAULT 50000
/* The same two spins in an oversubscribed pool (idle) or run (barriers): a
 * partner we wait for is most likely waiting for a core, so give ours up almost
 * at once. */
#define TP_IDLE_SPIN_NS_OVERSUBSCRIBED 10000
#define TP_BARRIER_SPIN_NS_OVERSUBSCRIBED 2000

#define CACHE_LINE 64

/* tp_take's counter of one owner: items taken from the front (low 32 bits) and
 * from the back (high 32 bits). */
typedef struct {
    _Alignas(CACHE_LINE) _Atomic uint64_t taken;
} tp_take_counter;

typedef struct tp_worker {
    tp_pool *pool;
    int ith;
    pthread_t thread;
} tp_worker;

/* run_seq: the generation above RUN_ACTIVE_BITS, the run's n_active below. */
#define RUN_ACTIVE_BITS 16
_Static_assert(1024 < (1 << RUN_ACTIVE_BITS), "n_active fits run_seq's low bits");

static inline int run_active(uint64_t seq) { return (int)(seq & ((1u << RUN_ACTIVE_BITS) - 1)); }

struct tp_pool {
    int n_threads;
    int n_cpus;           /* tp_usable_cpus() at creation */
    bool oversubscribed;  /* n_threads > n_cpus */
    int64_t idle_spin_ns, idle_spin_ns_over; /* idle spin after a run before sleeping: a run of
                                                at most n_cpus threads, of more */
    tp_worker *workers; /* [n_threads - 1]: threads 1..n-1 */

    /* the job: written by the caller before storing run_seq, read by the run's
     * workers after (see run_seq at the top) */
    tp_fn fn;
    void *ctx;
    int nth;           /* the run's threads (tp_run_threads) */
    uint64_t bar_base; /* bar_arrived when the run began */
    int bar_spin_rounds;   /* pause rounds before sched_yield in a barrier: by nth against n_cpus */
    int64_t bar_spin_ns;   /* spin before sleeping in a barrier: by nth against n_cpus */
    int stop;

    /* the caller's own */
    uint64_t seq;          /* the last run_seq it stored */
    int prev_active;       /* the nth of the last run posted (of more than one thread) */
    tp_run_stats last;     /* tp_last_run */

    _Alignas(CACHE_LINE) _Atomic uint64_t run_seq;
    _Atomic uint32_t run_gen; /* futex word: bumped after each store of run_seq */
    _Alignas(CACHE_LINE) _Atomic int n_sleeping;
    _Alignas(CACHE_LINE) _Atomic uint32_t park_gen; /* futex word of parked workers */
    _Atomic int n_parked;
    _Atomic int64_t wait_ns; /* the run's barrier waits past the spin phase */
    _Alignas(CACHE_LINE) _Atomic uint64_t bar_arrived;
    _Alignas(CACHE_LINE) _Atomic uint32_t bar_gen; /* futex word: bumped per completed barrier */
    _Atomic int bar_sleeping;                      /* threads asleep in a barrier */
    struct {
        _Alignas(CACHE_LINE) _Atomic int64_t n;
    } claim[2]; /* tp_claim, by step parity */
    tp_take_counter *take; /* [3 * n_threads]: tp_take, set (step % 3), owner */
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void futex_wait_u32(_Atomic uint32_t *addr, uint32_t expected) {
    /* Returns on wake, on EAGAIN (value already changed) or on a signal; the
     * caller re-checks the condition in every case. */
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Spin helper: call with an incrementing counter; pauses, and yields the core
 * once the counter passes spin_rounds. */
static inline void spin_wait_step(int spin_rounds, int *rounds) {
    if (*rounds < spin_rounds) {
        (*rounds)++;
        cpu_relax();
    } else {
        sched_yield();
    }
}

/* Parked (see parking at the top): sleep until a run includes thread ith. */
static uint64_t worker_park(tp_pool *pool, int ith) {
    uint64_t s;
    atomic_fetch_add_explicit(&pool->n_parked, 1, memory_order_seq_cst);
    for (;;) {
        const uint32_t pg = atomic_load_explicit(&pool->park_gen, memory_order_seq_cst);
        s = atomic_load_explicit(&pool->run_seq, memory_order_seq_cst);
        if (ith < run_active(s)) break;
        futex_wait_u32(&pool->park_gen, pg);
    }
    atomic_fetch_sub_explicit(&pool->n_parked, 1, memory_order_relaxed);
    return s;
}

/* Wait for a run past `seen` that includes thread ith: spin (idle_spin_ns, or
 * far less after a run of more threads than the CPUs, see the top), then
 * sleep; park at the first run without it. */
static uint64_t worker_wait_job(tp_pool *pool, int ith, uint64_t seen) {
    uint64_t s;
    int rounds = 0;
    int64_t deadline = 0;
    const bool over = run_active(seen) > pool->n_cpus;
    const int spin_rounds = over ? TP_SPIN_OVERSUBSCRIBED : TP_SPIN_BEFORE_YIELD;
    for (unsigned i = 0;; i++) {
        s = atomic_load_explicit(&pool->run_seq, memory_order_acquire);
        if (s != seen) return ith < run_active(s) ? s : worker_park(pool, ith);
        if ((i & 63) == 63) {
            int64_t t = now_ns();
            if (deadline == 0) {
                deadline = t + (over ? pool->idle_spin_ns_over : pool->idle_spin_ns);
            } else if (t >= deadline) {
                break;
            }
        }
        spin_wait_step(spin_rounds, &rounds);
    }
    for (;;) {
        atomic_fetch_add_explicit(&pool->n_sleeping, 1, memory_order_seq_cst);
        const uint32_t g = atomic_load_explicit(&pool->run_gen, memory_order_seq_cst);
        s = atomic_load_explicit(&pool->run_seq, memory_order_seq_cst);
        if (s == seen) futex_wait_u32(&pool->run_gen, g);
        atomic_fetch_sub_explicit(&pool->n_sleeping, 1, memory_order_relaxed);
        s = atomic_load_explicit(&pool->run_seq, memory_order_acquire);
        if (s != seen) return ith < run_active(s) ? s : worker_park(pool, ith);
    }
}

static void barrier_wait(tp_pool *pool, bool end, bool count);

static void *worker_main(void *arg) {
    tp_worker *w = arg;
    tp_pool *pool = w->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = worker_wait_job(pool, w->ith, seen);
        if (pool->stop) break;
        pool->fn(pool->ctx, w->ith, run_active(seen));
        barrier_wait(pool, true, false); /* the job's end: tp_run returns when all threads pass it */
    }
    return NULL;
}

vt_status tp_create(int n_threads, tp_pool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return vt_errorf(VT_E_RANGE, "threadpool: n_threads %d outside [1, 1024]", n_threads);
    tp_pool *pool = aligned_alloc(CACHE_LINE, size_align_up(sizeof *pool, CACHE_LINE));
    if (!pool) return vt_errorf(VT_E_NOMEM, "threadpool: out of memory");
    memset(pool, 0, sizeof *pool);
    pool->n_threads = n_threads;
    pool->nth = n_threads;
    pool->prev_active = n_threads;
    /* Oversubscribed: the thread we wait for may be waiting for our core, so
     * yield almost at once instead of spinning out a time slice. The CPUs that
     * count are those this process may run on (taskset, cgroup cpusets), not
     * those the machine has. */
    pool->n_cpus = tp_usable_cpus();
    pool->oversubscribed = n_threads > pool->n_cpus;
    pool->idle_spin_ns = TP_IDLE_SPIN_NS_DEFAULT;
    pool->idle_spin_ns_over = TP_IDLE_SPIN_NS_OVERSUBSCRIBED;
    const char *env = getenv("VT_TP_SPIN_US");
    if (env && *env) {
        long us = strtol(env, NULL, 10);
        if (us >= 0 && us <= 1000000) pool->idle_spin_ns = pool->idle_spin_ns_over = (int64_t)us * 1000;
    }
    if (n_threads > 1) {
        pool->workers = calloc((size_t)(n_threads - 1), sizeof *pool->workers);
        pool->take = aligned_alloc(CACHE_LINE, 3 * (size_t)n_threads * sizeof *pool->take);
        if (!pool->workers || !pool->take) {
            free(pool->workers);
            free(pool->take);
            free(pool);
            return vt_errorf(VT_E_NOMEM, "threadpool: out of memory for %d workers", n_threads);
        }
        for (int i = 0; i < 3 * n_threads; i++) atomic_init(&pool->take[i].taken, 0);
    }
    for (int i = 1; i < n_threads; i++) {
        tp_worker *w = &pool->workers[i - 1];
        w->pool = pool;
        w->ith = i;
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            /* Stop and join the workers that did start. */
            pool->n_threads = i;
            tp_destroy(pool);
            return vt_errorf(VT_E_NOMEM, "threadpool: pthread_create for worker %d of %d: %s",
                             i, n_threads, strerror(rc));
        }
    }
    *out = pool;
    return VT_OK;
}

/* Publish run_seq for a run of n_active threads (see run_seq, n_sleeping and
 * parking at the top). */
static void post_run(tp_pool *pool, int n_active) {
    pool->seq = ((pool->seq >> RUN_ACTIVE_BITS) + 1) << RUN_ACTIVE_BITS | (uint64_t)n_active;
    atomic_store_explicit(&pool->run_seq, pool->seq, memory_order_seq_cst);
    atomic_fetch_add_explicit(&pool->run_gen, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&pool->n_sleeping, memory_order_seq_cst) > 0) futex_wake_all(&pool->run_gen);
    if (n_active > pool->prev_active && atomic_load_explicit(&pool->n_parked, memory_order_seq_cst) > 0) {
        atomic_fetch_add_explicit(&pool->park_gen, 1, memory_order_seq_cst);
        futex_wake_all(&pool->park_gen);
    }
}

void tp_destroy(tp_pool *pool) {
    if (!pool) return;
    if (pool->n_threads > 1) {
        pool->stop = 1;
        pool->prev_active = 0; /* so that post_run wakes the parked workers too */
        post_run(pool, pool->n_threads);
        for (int i = 1; i < pool->n_threads; i++) pthread_join(pool->workers[i - 1].thread, NULL);
    }
    free(pool->workers);
    free(pool->take);
    free(pool);
}

int tp_n_threads(const tp_pool *pool) { return pool->n_threads; }

int tp_n_cpus(const tp_pool *pool) { return pool->n_cpus; }

int tp_run_threads(const tp_pool *pool) { return pool->nth; }

bool tp_oversubscribed(const tp_pool *pool) { return pool->oversubscribed; }

tp_run_stats tp_last_run(const tp_pool *pool) { return pool->last; }

void tp_run(tp_pool *pool, tp_fn fn, void *ctx) { tp_run_n(pool, pool->n_threads, fn, ctx); }

void tp_run_n(tp_pool *pool, int n_active, tp_fn fn, void *ctx) {
    VT_ASSERT(n_active >= 1 && n_active <= pool->n_threads);
    const int64_t t0 = now_ns();
    pool->nth = n_active;
    atomic_store_explicit(&pool->wait_ns, 0, memory_order_relaxed);
    if (n_active == 1) {
        fn(ctx, 0, 1); /* no barrier, claim or take: nothing of the pool's state moves */
    } else {
        pool->fn = fn;
        pool->ctx = ctx;
        const bool over = n_active > pool->n_cpus;
        pool->bar_spin_rounds = over ? TP_SPIN_OVERSUBSCRIBED : TP_SPIN_BEFORE_YIELD;
        pool->bar_spin_ns = over ? TP_BARRIER_SPIN_NS_OVERSUBSCRIBED : TP_BARRIER_SPIN_NS_DEFAULT;
        /* relaxed: this thread saw the last run end, after its every arrival */
        pool->bar_base = atomic_load_explicit(&pool->bar_arrived, memory_order_relaxed);
        for (int s = 0; s < 2; s++) {
            atomic_store_explicit(&pool->claim[s].n, 0, memory_order_relaxed);
            for (int o = 0; o < n_active; o++)
                atomic_store_explicit(&pool->take[s * pool->n_threads + o].taken, 0, memory_order_relaxed);
        }
        post_run(pool, n_active);
        fn(ctx, 0, n_active);
        barrier_wait(pool, true, true); /* the job's end, passed by every worker of the run too */
        pool->prev_active = n_active; /* posted runs only (see parking at the top) */
    }
    pool->last = (tp_run_stats){
        .n_active = n_active,
        .wall_ns = now_ns() - t0,
        .wait_ns = atomic_load_explicit(&pool->wait_ns, memory_order_relaxed),
    };
}

void tp_barrier(tp_pool *pool) { barrier_wait(pool, false, true); }

/* A barrier of the run in flight; end: the run's last (resets nothing, see the
 * end of take at the top); count: add a wait past the spin phase to wait_ns. */
static void barrier_wait(tp_pool *pool, bool end, bool count) {
    /* Read before arriving: once all have arrived at the end, the caller may
     * write the next run's (see bar_arrived at the top). */
    const uint64_t nth = (uint64_t)pool->nth, base = pool->bar_base;
    if (nth == 1) return;
    const int spin_rounds = pool->bar_spin_rounds;
    const int64_t spin_ns = pool->bar_spin_ns;
    /* One monotonically increasing arrival counter, never reset: the arrival
     * that returns v belongs to barrier instance (v - base) / nth, which is
     * complete when the counter reaches base + ((v - base) / nth + 1) * nth. One
     * RMW per thread and waiters spin on the same line, so a barrier costs two
     * cache-line transfers. The RMWs form a release sequence, so the acquire
     * load that sees the final count synchronises with every arrival. 64 bits
     * never wrap. */
    const uint64_t v = atomic_fetch_add_explicit(&pool->bar_arrived, 1, memory_order_seq_cst) - base;
    const uint64_t k = v / nth, target = base + (k + 1) * nth;
    if (!end) /* one tp_take counter for step k + 2 (see take at the top) */
        atomic_store_explicit(&pool->take[(k + 2) % 3 * (uint64_t)pool->n_threads + v % nth].taken, 0,
                              memory_order_relaxed);
    if (base + v + 1 == target) {
        /* Last arrival: this step's claims are all made; its counter serves
         * the step after next (see claim at the top). */
        if (!end) atomic_store_explicit(&pool->claim[k & 1].n, 0, memory_order_relaxed);
        /* Wake the sleepers, if any (Dekker with the sleeper's bar_sleeping
         * increment, both seq_cst). */
        atomic_fetch_add_explicit(&pool->bar_gen, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&pool->bar_sleeping, memory_order_seq_cst) > 0)
            futex_wake_all(&pool->bar_gen);
        return;
    }
    int rounds = 0;
    int64_t first = 0, deadline = 0;
    for (unsigned i = 0;; i++) {
        if (atomic_load_explicit(&pool->bar_arrived, memory_order_acquire) >= target) {
            /* a spin that outlasted the spin phase without sleeping: this thread
             * lost its core while it spun (under load, or yielding); counted as
             * a sleep would be, at one clock read only past the first */
            if (count && deadline != 0) {
                const int64_t t = now_ns();
                if (t >= deadline) atomic_fetch_add_explicit(&pool->wait_ns, t - first, memory_order_relaxed);
            }
            return;
        }
        /* every 64 pause rounds, and at every round once they are spent: a
         * sched_yield can give the core away for a whole time slice, so an
         * oversubscribed run (32 rounds) whose waiter read the clock only
         * every 64 would yield its wait away uncounted and never sleep */
        if ((i & 63) == 63 || rounds >= spin_rounds) {
            int64_t t = now_ns();
            if (deadline == 0) {
                first = t;
                deadline = t + spin_ns;
            } else if (t >= deadline) {
                break;
            }
        }
        spin_wait_step(spin_rounds, &rounds);
    }
    /* Sleep until the last arrival bumps bar_gen. The generation is read before
     * the completion check, so a bump between the two makes futex_wait return. */
    atomic_fetch_add_explicit(&pool->bar_sleeping, 1, memory_order_seq_cst);
    for (;;) {
        const uint32_t g = atomic_load_explicit(&pool->bar_gen, memory_order_seq_cst);
        if (atomic_load_explicit(&pool->bar_arrived, memory_order_seq_cst) >= target) break;
        futex_wait_u32(&pool->bar_gen, g);
    }
    atomic_fetch_sub_explicit(&pool->bar_sleeping, 1, memory_order_relaxed);
    if (count) atomic_fetch_add_explicit(&pool->wait_ns, now_ns() - first, memory_order_relaxed);
}

/* The step of the run this thread is in (see claim at the top). relaxed: this
 * thread's own arrivals bound what it reads. */
static inline uint64_t run_step(tp_pool *pool) {
    return (atomic_load_explicit(&pool->bar_arrived, memory_order_relaxed) - pool->bar_base) / (uint64_t)pool->nth;
}

int64_t tp_claim(tp_pool *pool, int64_t n) {
    VT_ASSERT(pool->nth > 1);
    return atomic_fetch_add_explicit(&pool->claim[run_step(pool) & 1].n, n, memory_order_relaxed);
}

int64_t tp_take(tp_pool *pool, int owner, int64_t n, bool back) {
    const int nth = pool->nth;
    VT_ASSERT(nth > 1 && owner >= 0 && owner < nth && n >= 0 && n < ((int64_t)1 << 31));
    _Atomic uint64_t *c = &pool->take[run_step(pool) % 3 * (uint64_t)pool->n_threads + (uint64_t)owner].taken;
    uint64_t v = atomic_load_explicit(c, memory_order_relaxed);
    for (;;) {
        const int64_t front = (int64_t)(v & 0xffffffffu), from_back = (int64_t)(v >> 32);
        if (front + from_back >= n) return -1;
        const uint64_t next = back ? v + ((uint64_t)1 << 32) : v + 1;
        /* relaxed: the items are disjoint; the step's barriers order their data */
        if (atomic_compare_exchange_weak_explicit(c, &v, next, memory_order_relaxed, memory_order_relaxed))
            return back ? n - 1 - from_back : front;
    }
}

/* ---- elastic thread count (tp_elastic) -------------------------------------- */

/* Passes summed per window: the wait share and the reference a trial must beat
 * are their means, so one pass that met a time slice boundary does not decide. */
#define TP_ELASTIC_WINDOW 8
/* Passes after a change of count that are not measured: the first pass on
 * fewer threads may still meet the scheduler's placement of the old count (the
 * parked thread leaving, the caller moving to the core it frees). */
#define TP_ELASTIC_SETTLE 1
/* Passes measured in a trial. */
#define TP_ELASTIC_TRIAL 8
/* The barrier-wait share that starts a shrink trial: the time the pass's
 * threads slept in barriers, per thread that can have waited (n - 1: all but the
 * slowest), over the pass's wall time. Balanced threads finish a step within the
 * spin and never sleep, so unloaded the share is 0 and the trigger cannot fire.
 * A thread that lost its core for a time slice makes the others sleep for most
 * of it; one thread fewer can win only when that idle time outweighs the lost
 * thread's work, which a share of a fifth or less rarely does (work stealing
 * already hands its items to the others), and each trial costs its passes at a
 * count that may be slower. */
#define TP_ELASTIC_WAIT_SHARE 0.2
/* A trial's count is kept only when its mean pass is at least this much faster
 * than the window before it (3%): passes under load vary, and a tie should leave
 * the count as it is. */
#define TP_ELASTIC_GAIN 0.97
/* Passes at a shrunk count between trials of one thread more: the load that
 * made us shrink may be gone (one trial is TP_ELASTIC_SETTLE + TP_ELASTIC_TRIAL
 * passes, a few percent of this). One more, not the full count: with several
 * cores taken, the full count can be slower than one more than now while one
 * more is faster. */
#define TP_ELASTIC_PROBE_EVERY 256
/* A lost shrink trial of n - 1 waits 1, 2, 4, ... up to this many windows before
 * the next shrink trial, so a load that keeps the wait high without making
 * fewer threads faster costs a trial (or the few of one descent, see lost in
 * threadpool.h) only now and then. */
#define TP_ELASTIC_BACKOFF_MAX 64

void tp_elastic_init(tp_elastic *e, int n_threads, int n_cpus, bool enabled) {
    memset(e, 0, sizeof *e);
    e->enabled = enabled && n_threads > 1;
    e->n_max = e->n = n_threads;
    e->n_cpus = n_cpus > 0 ? n_cpus : n_threads;
    /* More threads than CPUs: start where a probe could grow back to anyway.
     * Starting at n_max would run the first passes oversubscribed and take a
     * window and a trial to come down, a large share of a short generation. */
    if (e->enabled && e->n > e->n_cpus) e->n = e->n_cpus;
    e->backoff = 1;
}

bool tp_elastic_env(void) {
    const char *env = getenv("VT_TP_ELASTIC");
    return !(env && !strcmp(env, "0"));
}

static bool elastic_applies(const tp_elastic *e, int64_t n_tokens) {
    return e->enabled && n_tokens >= 1 && n_tokens <= TP_ELASTIC_TOKENS_MAX;
}

int tp_elastic_pick(const tp_elastic *e, int64_t n_tokens) {
    if (!elastic_applies(e, n_tokens)) return e->n_max;
    return e->n_try ? e->n_try : e->n;
}

/* Start measuring afresh (a new window, no trial), keyed to passes of n_tokens. */
static void elastic_restart(tp_elastic *e, int64_t n_tokens) {
    e->key = n_tokens;
    e->n_try = 0;
    e->passes = 0;
    e->wall_ns = e->wait_ns = 0;
}

/* The count a shrink trial from e->n tries, after a window of wall_ns (> 0) in
 * which the threads slept wait_ns in barriers (see threadpool.h): the threads
 * awake on average, n - wait / wall, rounded to the nearest; at most n_cpus;
 * above a lost trial's count (halfway back up to n, at least one more); in
 * [1, n - 1]. Integer arithmetic: the same sums give the same count. */
static int elastic_shrink_to(const tp_elastic *e, int64_t wall_ns, int64_t wait_ns) {
    const int n = e->n;
    const int64_t awake = ((int64_t)n * wall_ns - wait_ns + wall_ns / 2) / wall_ns;
    int to = awake < n ? (int)awake : n;
    if (to > e->n_cpus) to = e->n_cpus;
    if (e->lost > 0) {
        const int up = e->lost + ((n - e->lost) / 2 > 1 ? (n - e->lost) / 2 : 1);
        if (to < up) to = up;
    }
    if (to > n - 1) to = n - 1;
    return to < 1 ? 1 : to;
}

bool tp_elastic_record(tp_elastic *e, int64_t n_tokens, const tp_run_stats *st) {
    if (!elastic_applies(e, n_tokens)) return false; /* prefill: all threads, not measured */
    const int n_was = e->n;
    if (n_tokens != e->key || st->n_active != (e->n_try ? e->n_try : e->n)) {
        /* another pass size (or a pass the caller ran otherwise): compare like
         * with like, so a trial in progress is dropped and the window restarts */
        elastic_restart(e, n_tokens);
        return false;
    }
    if (e->n_try) {
        if (++e->passes <= TP_ELASTIC_SETTLE) return false;
        e->wall_ns += st->wall_ns;
        if (e->passes < TP_ELASTIC_SETTLE + TP_ELASTIC_TRIAL) return false;
        const double mean = (double)e->wall_ns / TP_ELASTIC_TRIAL;
        const bool grow = e->n_try > e->n;
        e->since_probe = 0;
        if (mean < TP_ELASTIC_GAIN * (double)e->ref_ns) {
            e->n = e->n_try;
            e->backoff = 1;
            e->hold = 0;
            e->lost = 0;
            /* a grow that won: the load is likely leaving, try the next one now */
            if (grow) e->since_probe = TP_ELASTIC_PROBE_EVERY;
        } else if (!grow && e->n_try < e->n - 1) {
            e->lost = e->n_try; /* the next window tries between it and n */
        } else if (!grow) {
            e->lost = 0;
            e->hold = e->backoff;
            e->backoff = e->backoff * 2 < TP_ELASTIC_BACKOFF_MAX ? e->backoff * 2 : TP_ELASTIC_BACKOFF_MAX;
        }
        elastic_restart(e, n_tokens);
        return e->n != n_was;
    }
    e->passes++;
    e->wall_ns += st->wall_ns;
    e->wait_ns += st->wait_ns;
    const int top = e->n_max < e->n_cpus ? e->n_max : e->n_cpus;
    /* only where a probe may follow; capped, as only reaching the interval counts */
    if (e->n < top && e->since_probe < TP_ELASTIC_PROBE_EVERY) e->since_probe++;
    if (e->passes < TP_ELASTIC_WINDOW) return false;
    e->ref_ns = e->wall_ns / TP_ELASTIC_WINDOW;
    const int waiting = e->n > 1 ? e->n - 1 : 1;
    const bool high_wait =
        e->wall_ns > 0 && (double)e->wait_ns >= TP_ELASTIC_WAIT_SHARE * (double)e->wall_ns * waiting;
    const bool may_shrink = e->hold == 0;
    if (e->hold > 0) e->hold--;
    if (!high_wait) e->lost = 0; /* the load changed: a lost trial says nothing now */
    const int shrink_to = e->n > 1 && high_wait && may_shrink ? elastic_shrink_to(e, e->wall_ns, e->wait_ns) : 0;
    elastic_restart(e, n_tokens);
    if (shrink_to > 0) e->n_try = shrink_to;
    else if (e->n < top && e->since_probe >= TP_ELASTIC_PROBE_EVERY) e->n_try = e->n + 1;
    return false;
}

/* ---- topology ---------------------------------------------------------------- */

/* Count distinct sibling lists among the CPUs this process may run on: each
 * physical core has one list ("0,16" or "0-1"), shared by its SMT threads. */
static int count_physical_cores(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    enum { MAX_CORES = 1024 };
    static const char *const files[] = {"core_cpus_list", "thread_siblings_list"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char(*seen)[64] = calloc(MAX_CORES, sizeof *seen);
        if (!seen) return 0;
        int n_seen = 0, n_read = 0;
        for (int cpu = 0; cpu < CPU_SETSIZE && n_seen < MAX_CORES; cpu++) {
            if (!CPU_ISSET(cpu, &set)) continue;
            char path[128], line[64] = {0};
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu,
                     files[f]);
            FILE *fp = fopen(path, "r");
            if (!fp) continue;
            if (!fgets(line, sizeof line, fp)) line[0] = 0;
            fclose(fp);
            line[strcspn(line, "\n")] = 0;
            if (!line[0]) continue;
            n_read++;
            int dup = 0;
            for (int k = 0; k < n_seen && !dup; k++) dup = !strcmp(seen[k], line);
            if (!dup) memcpy(seen[n_seen++], line, sizeof line);
        }
        free(seen);
        if (n_read > 0) return n_seen;
    }
    return 0;
}

int tp_usable_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    const long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

/* CPUs' worth of time the cgroup (v2) quotas of this process and its ancestors
 * allow, rounded up, or 0 when none has a quota ("max") or there is no cgroup v2. */
static int cgroup_cpu_quota(void) {
    static const char root[] = "/sys/fs/cgroup";
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[512], dir[600];
    dir[0] = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3) != 0) continue; /* the unified hierarchy */
        line[strcspn(line, "\n")] = 0;
        snprintf(dir, sizeof dir, "%s%s", root, line + 3);
        break;
    }
    fclose(f);
    int quota_cpus = 0;
    for (size_t len = strlen(dir); len >= sizeof root - 1;) {
        char path[640];
        snprintf(path, sizeof path, "%.*s/cpu.max", (int)len, dir);
        FILE *q = fopen(path, "r");
        if (q) {
            long long quota = 0, period = 0;
            if (fscanf(q, "%lld %lld", &quota, &period) == 2 && quota > 0 && period > 0) {
                const long long n = (quota + period - 1) / period;
                if (n < INT_MAX && (quota_cpus == 0 || n < quota_cpus)) quota_cpus = (int)n;
            } /* else "max": no limit at this level */
            fclose(q);
        }
        while (len > sizeof root - 1 && dir[len - 1] != '/') len--; /* up one level */
        if (len <= sizeof root - 1) break;
        len--;
    }
    return quota_cpus;
}

int tp_default_threads(void) {
    int n = count_physical_cores();
    if (n <= 0) n = tp_usable_cpus();
    const int quota = cgroup_cpu_quota();
    if (quota > 0 && quota < n) n = quota;
    return n;
}
