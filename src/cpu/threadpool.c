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
 *   run_gen    generation of the current job; a worker runs the job when it sees
 *              run_gen change. It is also the futex word workers sleep on.
 *   n_sleeping workers inside (or about to enter) futex_wait. tp_run issues the
 *              futex_wake syscall only when it is non-zero, so a hot pool is
 *              woken with one atomic increment. Both sides use seq_cst (Dekker):
 *              either the worker sees the new generation before sleeping, or the
 *              caller sees the sleeper and wakes it; futex_wait itself re-checks
 *              the word, so a wake cannot be lost.
 *   the end    every thread, the caller included, passes one more tp_barrier
 *              after fn, so tp_run returns when all of them are done.
 *   bar_arrived
 *              the barrier: a counter of arrivals that only grows; barrier
 *              instance k is complete when it reaches (k + 1) * nth. A waiter
 *              spins for bar_spin_ns, then sleeps on bar_gen (bumped by each
 *              completing arrival, which wakes sleepers when bar_sleeping > 0).
 *   claim      the tp_claim counters. A thread between barrier instances k - 1
 *              and k reads bar_arrived / nth == k (barrier k cannot complete
 *              before it arrives), so step k draws from claim[k & 1]. The last
 *              arrival of barrier k resets claim[k & 1] for step k + 2; every
 *              claim of step k happened before that arrival, and barrier k + 1
 *              orders the reset before any claim of step k + 2.
 *   take       the tp_take counters: three sets of one per thread (by step mod
 *              3), each word (taken from the front, taken from the back), 32 bits
 *              each, moved by compare-and-swap only while their sum is below the
 *              owner's item count. The arrival that returns v from barrier k
 *              (k = v / nth) zeroes counter v % nth of set (k + 2) % 3: its last
 *              takes were in step k - 1, all before barrier k - 1 completed, and
 *              its next are in step k + 2, after this thread's arrival at barrier
 *              k + 1. So every arrival resets one counter, one store, and no
 *              thread needs to know its own index in tp_barrier.
 *
 * Every spin loop pauses (pause / yield) and, after a bounded number of rounds,
 * calls sched_yield, so oversubscription (more threads than cores) does not turn
 * into a livelock: a waiting thread gives its core to the thread it waits for.
 *
 * Under load (other processes on our cores, or more threads than the cores this
 * process may run on) a spinning waiter steals time from the thread it waits
 * for. So a barrier waiter spins for a bounded time and then sleeps on a futex;
 * a pool with more threads than the CPUs in its affinity mask (tp_usable_cpus)
 * is oversubscribed by construction and spins far less before it yields and
 * sleeps. The results do not depend on any of this: only who waits how. */
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
/* The same two spins in an oversubscribed pool: a partner we wait for is most
 * likely waiting for a core, so give ours up almost at once. */
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

struct tp_pool {
    int n_threads;
    bool oversubscribed;  /* n_threads > tp_usable_cpus() at creation */
    int spin_rounds;      /* pause rounds before sched_yield */
    int64_t idle_spin_ns; /* idle spin after a job before sleeping */
    tp_worker *workers; /* [n_threads - 1]: threads 1..n-1 */

    /* written by the caller before bumping run_gen, read by workers after */
    tp_fn fn;
    void *ctx;
    int stop;

    _Alignas(CACHE_LINE) _Atomic uint32_t run_gen;
    _Alignas(CACHE_LINE) _Atomic int n_sleeping;
    _Alignas(CACHE_LINE) _Atomic uint64_t bar_arrived;
    _Alignas(CACHE_LINE) _Atomic uint32_t bar_gen; /* futex word: bumped per completed barrier */
    _Atomic int bar_sleeping;                      /* threads asleep in a barrier */
    int64_t bar_spin_ns;                           /* spin before sleeping in a barrier */
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
 * once the counter passes TP_SPIN_BEFORE_YIELD. */
static inline void spin_wait_step(const tp_pool *pool, int *rounds) {
    if (*rounds < pool->spin_rounds) {
        (*rounds)++;
        cpu_relax();
    } else {
        sched_yield();
    }
}

/* Wait for run_gen to move past `seen`: spin for idle_spin_ns, then sleep. */
static uint32_t worker_wait_job(tp_pool *pool, uint32_t seen) {
    uint32_t g;
    int rounds = 0;
    int64_t deadline = 0;
    for (unsigned i = 0;; i++) {
        g = atomic_load_explicit(&pool->run_gen, memory_order_acquire);
        if (g != seen) return g;
        if ((i & 63) == 63) {
            int64_t t = now_ns();
            if (deadline == 0) {
                deadline = t + pool->idle_spin_ns;
            } else if (t >= deadline) {
                break;
            }
        }
        spin_wait_step(pool, &rounds);
    }
    for (;;) {
        atomic_fetch_add_explicit(&pool->n_sleeping, 1, memory_order_seq_cst);
        g = atomic_load_explicit(&pool->run_gen, memory_order_seq_cst);
        if (g == seen) futex_wait_u32(&pool->run_gen, seen);
        atomic_fetch_sub_explicit(&pool->n_sleeping, 1, memory_order_relaxed);
        g = atomic_load_explicit(&pool->run_gen, memory_order_acquire);
        if (g != seen) return g;
    }
}

static void *worker_main(void *arg) {
    tp_worker *w = arg;
    tp_pool *pool = w->pool;
    uint32_t seen = 0;
    for (;;) {
        seen = worker_wait_job(pool, seen);
        if (pool->stop) break;
        pool->fn(pool->ctx, w->ith, pool->n_threads);
        tp_barrier(pool); /* the job's end: tp_run returns when all threads pass it */
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
    /* Oversubscribed: the thread we wait for may be waiting for our core, so
     * yield almost at once instead of spinning out a time slice. The CPUs that
     * count are those this process may run on (taskset, cgroup cpusets), not
     * those the machine has. */
    pool->oversubscribed = n_threads > tp_usable_cpus();
    pool->idle_spin_ns = pool->oversubscribed ? TP_IDLE_SPIN_NS_OVERSUBSCRIBED : TP_IDLE_SPIN_NS_DEFAULT;
    pool->bar_spin_ns = pool->oversubscribed ? TP_BARRIER_SPIN_NS_OVERSUBSCRIBED : TP_BARRIER_SPIN_NS_DEFAULT;
    pool->spin_rounds = pool->oversubscribed ? TP_SPIN_OVERSUBSCRIBED : TP_SPIN_BEFORE_YIELD;
    const char *env = getenv("VT_TP_SPIN_US");
    if (env && *env) {
        long us = strtol(env, NULL, 10);
        if (us >= 0 && us <= 1000000) pool->idle_spin_ns = (int64_t)us * 1000;
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

void tp_destroy(tp_pool *pool) {
    if (!pool) return;
    if (pool->n_threads > 1) {
        pool->stop = 1;
        atomic_fetch_add_explicit(&pool->run_gen, 1, memory_order_seq_cst);
        futex_wake_all(&pool->run_gen);
        for (int i = 1; i < pool->n_threads; i++) pthread_join(pool->workers[i - 1].thread, NULL);
    }
    free(pool->workers);
    free(pool->take);
    free(pool);
}

int tp_n_threads(const tp_pool *pool) { return pool->n_threads; }

bool tp_oversubscribed(const tp_pool *pool) { return pool->oversubscribed; }

void tp_run(tp_pool *pool, tp_fn fn, void *ctx) {
    const int nth = pool->n_threads;
    if (nth == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    /* seq_cst: pairs with the sleeper's increment of n_sleeping (see top). */
    atomic_fetch_add_explicit(&pool->run_gen, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&pool->n_sleeping, memory_order_seq_cst) > 0)
        futex_wake_all(&pool->run_gen);

    fn(ctx, 0, nth);
    tp_barrier(pool); /* the job's end, passed by every worker too */
}

void tp_barrier(tp_pool *pool) {
    const int nth = pool->n_threads;
    if (nth == 1) return;
    /* One monotonically increasing arrival counter, never reset: the arrival
     * that returns v belongs to barrier instance v / nth, which is complete when
     * the counter reaches (v / nth + 1) * nth. One RMW per thread and waiters
     * spin on the same line, so a barrier costs two cache-line transfers. The
     * RMWs form a release sequence, so the acquire load that sees the final
     * count synchronises with every arrival. 64 bits never wrap. */
    uint64_t v = atomic_fetch_add_explicit(&pool->bar_arrived, 1, memory_order_seq_cst);
    uint64_t target = (v / (uint64_t)nth + 1) * (uint64_t)nth;
    /* one tp_take counter for step k + 2 (see take at the top) */
    atomic_store_explicit(&pool->take[(v / (uint64_t)nth + 2) % 3 * (uint64_t)nth + v % (uint64_t)nth].taken, 0,
                          memory_order_relaxed);
    if (v + 1 == target) {
        /* Last arrival: this step's claims are all made; its counter serves
         * the step after next (see claim at the top). */
        atomic_store_explicit(&pool->claim[(v / (uint64_t)nth) & 1].n, 0, memory_order_relaxed);
        /* Wake the sleepers, if any (Dekker with the sleeper's bar_sleeping
         * increment, both seq_cst). */
        atomic_fetch_add_explicit(&pool->bar_gen, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&pool->bar_sleeping, memory_order_seq_cst) > 0)
            futex_wake_all(&pool->bar_gen);
        return;
    }
    int rounds = 0;
    int64_t deadline = 0;
    for (unsigned i = 0;; i++) {
        if (atomic_load_explicit(&pool->bar_arrived, memory_order_acquire) >= target) return;
        if ((i & 63) == 63) {
            int64_t t = now_ns();
            if (deadline == 0) deadline = t + pool->bar_spin_ns;
            else if (t >= deadline) break;
        }
        spin_wait_step(pool, &rounds);
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
}

int64_t tp_claim(tp_pool *pool, int64_t n) {
    VT_ASSERT(pool->n_threads > 1);
    /* relaxed: this thread's own arrivals bound what it reads (see claim) */
    const uint64_t step =
        atomic_load_explicit(&pool->bar_arrived, memory_order_relaxed) / (uint64_t)pool->n_threads;
    return atomic_fetch_add_explicit(&pool->claim[step & 1].n, n, memory_order_relaxed);
}

int64_t tp_take(tp_pool *pool, int owner, int64_t n, bool back) {
    const int nth = pool->n_threads;
    VT_ASSERT(nth > 1 && owner >= 0 && owner < nth && n >= 0 && n < ((int64_t)1 << 31));
    /* relaxed, as tp_claim: this thread's own arrivals bound the step it reads */
    const uint64_t step = atomic_load_explicit(&pool->bar_arrived, memory_order_relaxed) / (uint64_t)nth;
    _Atomic uint64_t *c = &pool->take[step % 3 * (uint64_t)nth + (uint64_t)owner].taken;
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
