/* cpu/threadpool: barriers order plain memory, tp_run can be called many times,
 * oversubscription (more threads than cores) does not deadlock, an idle pool
 * sleeps, n_threads = 1 runs inline, tp_run_n runs of changing width keep every
 * barrier, claim and take exact, and tp_elastic picks the counts it should for
 * fed measurements. Also meant to run under TSan
 * (-DVT_SANITIZE=thread): every cross-thread access here is plain memory ordered
 * only by tp_run / tp_barrier, so a missing edge is a TSan report. */
#include "cpu/threadpool.h"
#include "test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#define MAX_T 16

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* ---- barrier phases ---------------------------------------------------------
 * In phase k each thread writes slot[ith] = k (plain store), barrier, then reads
 * every other slot, which must equal k, barrier. A barrier that lets one thread
 * through early shows up as a wrong value (and as a TSan race). */
typedef struct {
    tp_pool *pool;
    int n_phases;
    int64_t slot[MAX_T];
    int bad[MAX_T];      /* per thread: mismatches seen */
    int calls[MAX_T];    /* per thread: times fn ran */
} phase_ctx;

static void phase_fn(void *vctx, int ith, int nth) {
    phase_ctx *c = vctx;
    c->calls[ith]++;
    for (int k = 1; k <= c->n_phases; k++) {
        c->slot[ith] = k;
        tp_barrier(c->pool);
        for (int j = 0; j < nth; j++)
            if (c->slot[j] != k) c->bad[ith]++;
        tp_barrier(c->pool);
    }
}

/* Barrier phases on all threads of an existing pool: 0 mismatches, fn once per run. */
static void test_barriers_on(tp_pool *pool, int n_threads) {
    phase_ctx c;
    memset(&c, 0, sizeof c);
    c.pool = pool;
    c.n_phases = 20;
    for (int r = 0; r < 10; r++) tp_run(pool, phase_fn, &c);
    int bad = 0;
    for (int i = 0; i < n_threads; i++) bad += c.bad[i] + (c.calls[i] != 10);
    CHECK_MSG(bad == 0, "%d threads: %d bad phases or calls on the full pool", n_threads, bad);
}

static void test_barriers(int n_threads, int n_runs, int n_phases) {
    tp_pool *pool = NULL;
    CHECK_OK(tp_create(n_threads, &pool));
    if (!pool) return;
    CHECK_EQ_INT(tp_n_threads(pool), n_threads);
    phase_ctx c;
    memset(&c, 0, sizeof c);
    c.pool = pool;
    c.n_phases = n_phases;
    for (int r = 0; r < n_runs; r++) tp_run(pool, phase_fn, &c);
    int bad = 0;
    for (int i = 0; i < n_threads; i++) {
        bad += c.bad[i];
        CHECK_EQ_INT(c.calls[i], n_runs);
    }
    CHECK_MSG(bad == 0, "%d threads: %d barrier mismatches", n_threads, bad);
    /* How long this takes is bench_threadpool's (the phase_pair column), never a
     * pass/fail here: a loaded machine slows it, correctness does not change. */
    printf("  %d threads: %d runs x %d barrier pairs\n", n_threads, n_runs, n_phases);
    tp_destroy(pool);
}

/* ---- tp_claim: in every step of every run, the claims of all threads hand out
 * each index of [0, n) exactly once, whatever the other steps claimed. Steps
 * with no claims sit between claiming ones, so both counters are reused. ------ */
#define CLAIM_N 97
#define CLAIM_STEPS 6

typedef struct {
    tp_pool *pool;
    int grain;
    unsigned char got[CLAIM_STEPS][CLAIM_N]; /* per step: times index i was handed out */
    int n_claims[MAX_T];
} claim_ctx;

static void claim_fn(void *vctx, int ith, int nth) {
    (void)nth;
    claim_ctx *c = vctx;
    for (int s = 0; s < CLAIM_STEPS; s++) {
        if (s % 3 != 2) /* every third step claims nothing */
            for (int64_t i; (i = tp_claim(c->pool, c->grain)) < CLAIM_N;) {
                c->n_claims[ith]++;
                for (int64_t j = i; j < i + c->grain && j < CLAIM_N; j++) {
                    /* plain read-modify-write: two threads with one index race (TSan) */
                    c->got[s][j]++;
                }
            }
        tp_barrier(c->pool);
    }
}

static void test_claim(int n_threads, int n_runs) {
    tp_pool *pool = NULL;
    CHECK_OK(tp_create(n_threads, &pool));
    if (!pool) return;
    int bad = 0, threads_claimed = 0;
    for (int r = 0; r < n_runs; r++) {
        claim_ctx c;
        memset(&c, 0, sizeof c);
        c.pool = pool;
        c.grain = 1 + r % 5;
        tp_run(pool, claim_fn, &c);
        for (int s = 0; s < CLAIM_STEPS; s++)
            for (int i = 0; i < CLAIM_N; i++) bad += c.got[s][i] != (s % 3 != 2);
        for (int t = 0; t < n_threads; t++) threads_claimed += c.n_claims[t] > 0;
    }
    CHECK_MSG(bad == 0, "%d threads: %d indices not handed out exactly once", n_threads, bad);
    CHECK(threads_claimed >= n_runs); /* at least one thread claimed in every run */
    printf("  %d threads: %d runs of claims, on average %.2f threads claimed\n", n_threads, n_runs,
           (double)threads_claimed / n_runs);
    tp_destroy(pool);
}

/* ---- tp_take: in every step each owner's items [0, n) are handed out exactly
 * once (n changes from step to step and owner to owner, so a counter left from
 * an earlier step shows up); every fourth step takes nothing, so each of the
 * three counter sets is reset across unused steps too. In every fourth step
 * thread 1 starts only when thread 0 has run out of items, so thread 0 must
 * have taken all of thread 1's share from the back (and thread 1 none of it):
 * what a static split could not do. ------------------------------------------ */
#define TAKE_N 40
#define TAKE_STEPS 8

typedef struct {
    tp_pool *pool;
    int run;
    unsigned char got[TAKE_STEPS][MAX_T][TAKE_N]; /* times item i of owner o was handed out */
    unsigned char by[TAKE_STEPS][MAX_T][TAKE_N];  /* the thread that took it */
    _Atomic int first_done[TAKE_STEPS];
} take_ctx;

static int64_t take_n(int run, int s, int owner) { return (run * 7 + s * 13 + owner * 5) % TAKE_N; }

static void take_fn(void *vctx, int ith, int nth) {
    take_ctx *c = vctx;
    for (int s = 0; s < TAKE_STEPS; s++) {
        const bool late = s % 4 == 1;
        if (late && ith == 1)
            while (!atomic_load_explicit(&c->first_done[s], memory_order_acquire)) sched_yield();
        if (s % 4 != 3)
            for (int d = 0; d < nth; d++) {
                const int owner = (ith + d) % nth;
                for (int64_t i; (i = tp_take(c->pool, owner, take_n(c->run, s, owner), d > 0)) >= 0;) {
                    c->got[s][owner][i]++; /* plain: two threads with one item race (TSan) */
                    c->by[s][owner][i] = (unsigned char)ith;
                }
            }
        if (late && ith == 0) atomic_store_explicit(&c->first_done[s], 1, memory_order_release);
        tp_barrier(c->pool);
    }
}

static void test_take(int n_threads, int n_runs) {
    tp_pool *pool = NULL;
    CHECK_OK(tp_create(n_threads, &pool));
    if (!pool) return;
    take_ctx *c = malloc(sizeof *c);
    int bad = 0, own_taken_late = 0, stolen = 0;
    for (int r = 0; r < n_runs; r++) {
        memset(c, 0, sizeof *c);
        c->pool = pool;
        c->run = r;
        tp_run(pool, take_fn, c);
        for (int s = 0; s < TAKE_STEPS; s++)
            for (int o = 0; o < n_threads; o++)
                for (int i = 0; i < TAKE_N; i++) {
                    const int want = s % 4 != 3 && i < take_n(r, s, o);
                    bad += c->got[s][o][i] != want;
                    if (want && s % 4 == 1 && o == 1) own_taken_late += c->by[s][o][i] == 1;
                    if (want) stolen += c->by[s][o][i] != o;
                }
    }
    CHECK_MSG(bad == 0, "%d threads: %d items not handed out exactly once", n_threads, bad);
    CHECK_MSG(own_taken_late == 0, "%d threads: a late thread still took %d of its items", n_threads,
              own_taken_late);
    CHECK(stolen > 0);
    printf("  %d threads: %d runs of takes, %d items taken from another thread's share\n", n_threads, n_runs,
           stolen);
    free(c);
    tp_destroy(pool);
}

/* ---- tp_run_n: runs of 1, all, 2, all - 1, ... threads in turn, so every
 * change of nth meets the barrier count and the claim and take counters a run
 * of another width left. Each run is 1 to 7 steps, one barrier after each; in
 * step s each thread writes its slot of buffer s % 2 and checks the other
 * buffer, which all threads wrote in step s - 1, and per (run, step) the step
 * claims, takes, both or neither. So steps of every index mod 2 and mod 3 claim
 * and take (steps 0 and 1 too, whose counters only the caller's zeroing cleans),
 * and the last step, whose counters no barrier resets, falls at every index. In
 * each run: exactly threads 0 .. n_active - 1 run fn, with nth = n_active and
 * tp_run_threads = n_active; every claimed index and every owner's taken items
 * are handed out exactly once. In every other taking step thread 1 starts only
 * when thread 0 is out of work (stealing across widths), and in every third run
 * the last thread dawdles before the end, so the others sleep in the end's
 * barrier. In odd runs the end is the last step's barrier, so that step's claim
 * counter too is left as it was. Pinned to one CPU (test_affinity), a worker is often still in the
 * end's barrier when the next run, which may leave it out, begins. --------- */
#define RUNN_STEPS_MAX 7

typedef struct {
    tp_pool *pool;
    int run, n_steps, n_active;
    int calls[MAX_T];
    int bad_nth[MAX_T], bad_barrier[MAX_T]; /* per thread */
    int64_t slot[2][MAX_T];
    unsigned char claimed[RUNN_STEPS_MAX][CLAIM_N];
    unsigned char taken[RUNN_STEPS_MAX][MAX_T][TAKE_N];
    _Atomic int first_done[RUNN_STEPS_MAX];
} runn_ctx;

static bool runn_claims(int run, int s) { return (run * 5 + s) % 3 != 1; }
static bool runn_takes(int run, int s) { return (run * 3 + s) % 4 != 2; }
static int64_t runn_tag(int run, int s) { return (int64_t)run * 64 + s; }

static void runn_fn(void *vctx, int ith, int nth) {
    runn_ctx *c = vctx;
    c->calls[ith]++; /* plain: two threads with one index race (TSan) */
    if (nth != c->n_active || tp_run_threads(c->pool) != nth || ith >= nth) c->bad_nth[ith]++;
    for (int s = 0; s < c->n_steps; s++) {
        if (s > 0)
            for (int j = 0; j < nth; j++)
                if (c->slot[(s - 1) % 2][j] != runn_tag(c->run, s - 1)) c->bad_barrier[ith]++;
        c->slot[s % 2][ith] = runn_tag(c->run, s);
        if (nth > 1 && runn_claims(c->run, s))
            for (int64_t i; (i = tp_claim(c->pool, 1 + c->run % 3)) < CLAIM_N;)
                for (int64_t j = i; j < i + 1 + c->run % 3 && j < CLAIM_N; j++) c->claimed[s][j]++;
        const bool late = nth > 1 && (c->run + s) % 2 == 1;
        if (late && ith == 1)
            while (!atomic_load_explicit(&c->first_done[s], memory_order_acquire)) sched_yield();
        if (nth > 1 && runn_takes(c->run, s))
            for (int d = 0; d < nth; d++) {
                const int owner = (ith + d) % nth;
                for (int64_t i; (i = tp_take(c->pool, owner, take_n(c->run, s, owner), d > 0)) >= 0;)
                    c->taken[s][owner][i]++;
            }
        if (late && ith == 0) atomic_store_explicit(&c->first_done[s], 1, memory_order_release);
        if (s < c->n_steps - 1 || c->run % 2 == 0) tp_barrier(c->pool); /* else the end closes the step */
    }
    if (c->run % 3 == 0 && ith == nth - 1 && nth > 1)
        for (int k = 0; k < 20; k++) sched_yield();
}

static void test_run_n(int n_threads, int n_runs) {
    tp_pool *pool = NULL;
    CHECK_OK(tp_create(n_threads, &pool));
    if (!pool) return;
    runn_ctx *c = malloc(sizeof *c);
    int bad_calls = 0, bad_nth = 0, bad_barrier = 0, bad_claim = 0, bad_take = 0, bad_stats = 0;
    for (int r = 0; r < n_runs; r++) {
        /* 1, all, 2, all - 1, 1, all, all, 2, ...: shrink, grow, stay; and
         * all - 1, 1, all - 1, where the run of one posts nothing and the
         * second all - 1 must not need to wake the thread parked by the first */
        static const int pattern[] = {1, 0, 2, -1, 1, 0, 0, 2, -1, -1, 1, -1};
        const int p = pattern[r % (int)(sizeof pattern / sizeof pattern[0])];
        int n_active = p > 0 ? p : n_threads + p;
        if (n_active < 1) n_active = 1;
        if (n_active > n_threads) n_active = n_threads;
        memset(c, 0, sizeof *c);
        c->pool = pool;
        c->run = r;
        c->n_steps = 1 + r * 5 % RUNN_STEPS_MAX; /* coprime with the pattern's 12 */
        c->n_active = n_active;
        tp_run_n(pool, n_active, runn_fn, c);
        for (int i = 0; i < n_threads; i++) {
            bad_calls += c->calls[i] != (i < n_active);
            bad_nth += c->bad_nth[i];
            bad_barrier += c->bad_barrier[i];
        }
        for (int s = 0; s < c->n_steps; s++) {
            for (int i = 0; i < CLAIM_N; i++) bad_claim += c->claimed[s][i] != (n_active > 1 && runn_claims(r, s));
            for (int o = 0; o < n_threads; o++)
                for (int i = 0; i < TAKE_N; i++)
                    bad_take += c->taken[s][o][i] !=
                                (n_active > 1 && o < n_active && runn_takes(r, s) && i < take_n(r, s, o));
        }
        const tp_run_stats st = tp_last_run(pool);
        bad_stats += st.n_active != n_active || st.wall_ns < 0 || st.wait_ns < 0;
    }
    CHECK_MSG(bad_calls == 0, "%d threads: %d threads ran fn other than once when active, never when not",
              n_threads, bad_calls);
    CHECK_MSG(bad_nth == 0, "%d threads: %d calls saw another nth than n_active", n_threads, bad_nth);
    CHECK_MSG(bad_barrier == 0, "%d threads: %d barrier mismatches across widths", n_threads, bad_barrier);
    CHECK_MSG(bad_claim == 0, "%d threads: %d claimed indices not handed out exactly once", n_threads, bad_claim);
    CHECK_MSG(bad_take == 0, "%d threads: %d items not taken exactly once", n_threads, bad_take);
    CHECK_EQ_INT(bad_stats, 0);
    /* and the full width still works after all of that */
    test_barriers_on(pool, n_threads);
    printf("  %d threads: %d runs of 1..%d threads\n", n_threads, n_runs, n_threads);
    free(c);
    tp_destroy(pool);
}

/* ---- tp_last_run: a thread held up well past the spin phase (20 ms asleep
 * before a barrier) makes its partner sleep in that barrier, which wait_ns
 * counts, whether the sleeper is the caller or a worker. Only that it is
 * counted, never how long: a loaded machine changes the figure. ------------- */
typedef struct {
    tp_pool *pool;
    int late;               /* the thread that sleeps before the barrier */
    _Atomic int other_here; /* the other thread is at the barrier (or about to be) */
} stats_ctx;

static void stats_fn(void *vctx, int ith, int nth) {
    stats_ctx *c = vctx;
    if (ith == c->late && nth > 1) {
        while (!atomic_load_explicit(&c->other_here, memory_order_acquire)) sched_yield();
        struct timespec t = {0, 20 * 1000 * 1000};
        nanosleep(&t, NULL);
    } else {
        atomic_store_explicit(&c->other_here, 1, memory_order_release);
    }
    tp_barrier(c->pool);
}

static void test_stats(void) {
    tp_pool *pool = NULL;
    CHECK_OK(tp_create(2, &pool));
    if (!pool) return;
    for (int late = 0; late < 2; late++) {
        /* A waiter that itself loses its core while it spins (a loaded machine)
         * may see the barrier complete before its spin phase ends, and count
         * nothing: so at least one of several runs, never a figure. */
        int counted = 0, bad = 0;
        for (int r = 0; r < 10 && !counted; r++) {
            stats_ctx c = {pool, late, 0};
            tp_run(pool, stats_fn, &c);
            const tp_run_stats st = tp_last_run(pool);
            counted = st.wait_ns > 0;
            /* each thread waits at most the run: the sum, at most 2 runs */
            bad += st.n_active != 2 || st.wait_ns < 0 || st.wait_ns > 2 * st.wall_ns;
        }
        CHECK_MSG(counted, "thread %d late by 20 ms: no barrier wait counted in 10 runs", late);
        CHECK_EQ_INT(bad, 0);
    }
    stats_ctx c = {pool, 0, 0};
    tp_run_n(pool, 1, stats_fn, &c); /* alone: no barrier to wait in */
    CHECK_EQ_INT(tp_last_run(pool).n_active, 1);
    CHECK_EQ_INT(tp_last_run(pool).wait_ns, 0);
    tp_destroy(pool);
}

/* ---- tp_elastic, fed measurements of a fake machine: the wall time and barrier
 * wait of a decode pass at each thread count. No clock: deterministic, and the
 * bounds below are counts of passes (windows and trials), never times. ------- */
typedef struct {
    int64_t wall[MAX_T + 1], wait[MAX_T + 1]; /* [n]: a pass on n threads */
} fake_machine;

/* tp_elastic's timing as threadpool.c sets it: passes per window, per trial (a
 * settling pass and the measured ones), between probes of one thread more. */
#define EL_WINDOW 8
#define EL_TRIAL 9
#define EL_PROBE_EVERY 256
#define EL_LONG 5000 /* passes of a steady state */
#define EL_FIRST 1    /* a fresh policy's first pass only keys its window to the pass size */

/* Runs `passes` decode passes of n_tokens on m through e; hist[n] += passes on
 * n threads (hist may be NULL). Returns the count the last pass picked. */
static int elastic_drive(tp_elastic *e, const fake_machine *m, int64_t n_tokens, int passes, int *hist) {
    int n = 0;
    for (int p = 0; p < passes; p++) {
        n = tp_elastic_pick(e, n_tokens);
        if (hist) hist[n]++;
        const tp_run_stats st = {.n_active = n, .wall_ns = m->wall[n], .wait_ns = m->wait[n]};
        tp_elastic_record(e, n_tokens, &st);
    }
    return n;
}

/* A fresh policy for n_threads on n_cpus CPUs, and hist zeroed. */
static void elastic_fresh(tp_elastic *e, int n_threads, int n_cpus, bool enabled, int *hist) {
    tp_elastic_init(e, n_threads, n_cpus, enabled);
    memset(hist, 0, (MAX_T + 1) * sizeof *hist);
}

/* Decode passes of one token on m until e's count (not a trial's) is n: how
 * many, or -1 when it is not after max_passes. */
static int elastic_passes_to(tp_elastic *e, const fake_machine *m, int n, int max_passes, int *hist) {
    for (int p = 0; p < max_passes; p++) {
        if (e->n == n) return p;
        elastic_drive(e, m, 1, 1, hist);
    }
    return e->n == n ? max_passes : -1;
}

/* A fresh policy for n_threads on n_cpus that must run every one of EL_LONG
 * passes on m at n_stay threads, from the first. */
static void elastic_check_stays(int n_threads, int n_cpus, bool enabled, const fake_machine *m, int n_stay,
                                const char *what) {
    tp_elastic e;
    int hist[MAX_T + 1];
    elastic_fresh(&e, n_threads, n_cpus, enabled, hist);
    const int last = elastic_drive(&e, m, 1, EL_LONG, hist);
    CHECK_MSG(last == n_stay && hist[n_stay] == EL_LONG, "%s: %d of %d passes on %d threads", what, hist[n_stay],
              EL_LONG, n_stay);
}

static void test_elastic(void) {
    /* balanced: no thread ever sleeps in a barrier, so all 2 (or 4) stay */
    const fake_machine idle2 = {.wall = {0, 18000, 10000}};
    const fake_machine idle4 = {.wall = {0, 18000, 10000, 7000, 5500}};
    /* one core taken: 2 threads run in lockstep with the preempted one and
     * wait a lot; the caller alone, on the free core, is faster */
    const fake_machine busy2 = {.wall = {0, 18000, 25000}, .wait = {0, 0, 9000}};
    /* the same waits, but the caller alone is slower: stay at 2 */
    const fake_machine busy2_slow1 = {.wall = {0, 40000, 25000}, .wait = {0, 0, 9000}};
    /* 4 threads, one core taken: 3 are the fastest, and balanced; 4 sleep one
     * thread's worth (the wall), so 3 are awake on average */
    const fake_machine busy4 = {.wall = {0, 40000, 26000, 20000, 30000}, .wait = {0, 0, 0, 0, 3 * 10000}};
    /* a high wait just below the share that starts a trial (0.2 per waiting thread) */
    const fake_machine low_wait2 = {.wall = {0, 18000, 25000}, .wait = {0, 0, 4000}};
    /* -t 4 on 2 CPUs (issue 30 item 12), nothing else running: on average 2
     * threads awake, 2 asleep; 3 threads are no faster than 4 (one fewer
     * never wins), 2 are */
    const fake_machine over2 = {.wall = {0, 40000, 20000, 31000, 30000}, .wait = {0, 0, 0, 31000, 2 * 30000}};
    /* -t 4 on 2 CPUs, one taken by another process: about one thread's worth
     * of progress at every count; each count is faster than the one above */
    const fake_machine over1 = {.wall = {0, 20000, 30000, 36000, 40000},
                                .wait = {0, 0, 21000, 64800, 112000}};
    /* the waits of over1, but 1 thread is slower than 4 and 3 no faster: the
     * estimate (1) aims too low, 2 are the fastest */
    const fake_machine over1_best2 = {.wall = {0, 50000, 25000, 40000, 40000},
                                      .wait = {0, 0, 0, 72000, 112000}};
    /* the waits of over1, and no fewer threads are faster */
    const fake_machine over1_none = {.wall = {0, 50000, 45000, 42000, 40000},
                                     .wait = {0, 0, 21000, 64800, 112000}};
    tp_elastic e;
    int hist[MAX_T + 1];

    elastic_check_stays(2, 2, true, &idle2, 2, "2 threads, idle");
    elastic_check_stays(4, 4, true, &idle4, 4, "4 threads, idle");
    elastic_check_stays(2, 2, true, &low_wait2, 2, "2 threads, a wait below the share");

    /* shrinks under a high wait when one fewer is faster, and stays shrunk but
     * for probes of 2 now and then */
    elastic_fresh(&e, 2, 2, true, hist);
    CHECK_EQ_INT(elastic_drive(&e, &busy2, 1, 100, NULL), 1);
    CHECK_EQ_INT(e.n, 1);
    elastic_drive(&e, &busy2, 1, EL_LONG, hist);
    CHECK_MSG(hist[2] > 0 && hist[2] < EL_LONG / 10, "shrunk: %d of %d passes on 2 threads", hist[2], EL_LONG);
    CHECK_EQ_INT(e.n, 1);
    /* prefill keeps all threads, and its passes leave the decode count alone */
    CHECK_EQ_INT(tp_elastic_pick(&e, 512), 2);
    const tp_run_stats prefill = {.n_active = 2, .wall_ns = 900000, .wait_ns = 0};
    tp_elastic_record(&e, 512, &prefill);
    CHECK_EQ_INT(e.n, 1);
    /* the load goes away: a probe of 2 finds it faster, and 2 stay */
    CHECK_EQ_INT(elastic_drive(&e, &idle2, 1, 600, NULL), 2);
    CHECK_EQ_INT(e.n, 2);
    memset(hist, 0, sizeof hist);
    elastic_drive(&e, &idle2, 1, EL_LONG, hist);
    CHECK_EQ_INT(hist[2], EL_LONG);

    /* a high wait but one fewer is slower: trials now and then, never kept */
    elastic_fresh(&e, 2, 2, true, hist);
    elastic_drive(&e, &busy2_slow1, 1, EL_LONG, hist);
    CHECK_MSG(hist[1] > 0 && hist[1] < EL_LONG / 10, "1 thread slower: %d of %d passes on it", hist[1], EL_LONG);
    CHECK_EQ_INT(e.n, 2);

    /* 4 threads, one core taken: down to 3, not further (3 do not wait), and
     * probes of 4 do not bring it back */
    elastic_fresh(&e, 4, 4, true, hist);
    elastic_drive(&e, &busy4, 1, EL_LONG, hist);
    CHECK_EQ_INT(e.n, 3);
    CHECK_EQ_INT(hist[1] + hist[2], 0);
    CHECK_MSG(hist[4] < EL_LONG / 10, "4 threads, 3 best: %d of %d passes on 4", hist[4], EL_LONG);

    /* -t 4 on 2 CPUs (issue 30 item 12): decode passes run on 2 threads from
     * the first, as -t 2 would, never on 3 or 4 while the budget is 2 CPUs;
     * prefill keeps all 4 */
    elastic_fresh(&e, 4, 2, true, hist);
    CHECK_EQ_INT(tp_elastic_pick(&e, 1), 2);
    CHECK_EQ_INT(tp_elastic_pick(&e, TP_ELASTIC_TOKENS_MAX), 2);
    CHECK_EQ_INT(tp_elastic_pick(&e, 512), 4);
    elastic_check_stays(4, 2, true, &over2, 2, "4 threads on 2 CPUs, nothing else running");
    elastic_check_stays(4, 2, true, &over1_best2, 2, "4 threads on 2 CPUs, 2 balanced");
    /* with one of the 2 CPUs taken: from 2 straight to 1 in one window and one
     * trial, and only probes of 2 */
    elastic_fresh(&e, 4, 2, true, hist);
    int p = elastic_passes_to(&e, &over1, 1, 1000, hist);
    CHECK_MSG(p == EL_FIRST + EL_WINDOW + EL_TRIAL, "4 threads on 1 free CPU of 2: %d passes to 1 thread", p);
    CHECK_EQ_INT(hist[2], EL_FIRST + EL_WINDOW);
    CHECK_EQ_INT(hist[3] + hist[4], 0);
    memset(hist, 0, sizeof hist);
    elastic_drive(&e, &over1, 1, EL_LONG, hist);
    CHECK_EQ_INT(e.n, 1);
    CHECK_EQ_INT(hist[3] + hist[4], 0);
    CHECK_MSG(hist[2] > 0 && hist[2] < EL_LONG / 10, "on 1 free CPU: %d of %d passes on 2 threads", hist[2], EL_LONG);
    /* no fewer than 2 is faster: trials of 1 now and then, backing off, and
     * never a pass on 3 or 4 */
    elastic_fresh(&e, 4, 2, true, hist);
    elastic_drive(&e, &over1_none, 1, EL_LONG, hist);
    CHECK_EQ_INT(e.n, 2);
    CHECK_EQ_INT(hist[3] + hist[4], 0);
    CHECK_MSG(hist[1] > 0 && hist[2] > EL_LONG * 9 / 10, "4 on 2 CPUs, 1 slower: %d, %d passes on 1, 2", hist[1],
              hist[2]);

    /* 4 threads on 4 CPUs, the same machines. Over2's waits: straight to 2
     * (the threads awake), in one window and one trial, though 3 would not
     * have been faster */
    elastic_fresh(&e, 4, 4, true, hist);
    p = elastic_passes_to(&e, &over2, 2, 1000, hist);
    CHECK_MSG(p >= 0 && p <= EL_FIRST + EL_WINDOW + EL_TRIAL, "4 threads, 2 awake: %d passes to 2 threads", p);
    CHECK_EQ_INT(hist[3], 0);
    /* the estimate aims too low (1 is slower than 4): the next window tries
     * halfway back up, 2, which wins; 1 was tried once */
    elastic_fresh(&e, 4, 4, true, hist);
    p = elastic_passes_to(&e, &over1_best2, 2, 1000, hist);
    CHECK_MSG(p >= 0 && p <= EL_FIRST + 2 * (EL_WINDOW + EL_TRIAL), "estimate too low: %d passes to 2 threads", p);
    CHECK_EQ_INT(hist[1], EL_TRIAL);
    CHECK_EQ_INT(hist[3], 0);
    /* no fewer threads are faster: a descent (1, 2, 3, each lost) now and then,
     * backing off as one thread fewer did */
    elastic_fresh(&e, 4, 4, true, hist);
    elastic_drive(&e, &over1_none, 1, EL_LONG, hist);
    CHECK_EQ_INT(e.n, 4);
    CHECK_MSG(hist[1] > 0 && hist[2] > 0 && hist[3] > 0, "no fewer faster: %d, %d, %d passes on 1, 2, 3", hist[1],
              hist[2], hist[3]);
    CHECK_MSG(hist[4] > EL_LONG * 9 / 10, "no fewer faster: %d of %d passes on 4 threads", hist[4], EL_LONG);

    /* the load goes away after a shrink to 1 of 4 (4 CPUs): a probe that wins
     * is followed by the next at once, so the pool is whole again within one
     * probe interval and three windows and trials, not three intervals */
    elastic_fresh(&e, 4, 4, true, hist);
    CHECK_EQ_INT(elastic_drive(&e, &over1, 1, 100, NULL), 1);
    p = elastic_passes_to(&e, &idle4, 4, 2000, NULL);
    CHECK_MSG(p >= 0 && p <= EL_PROBE_EVERY + 3 * EL_WINDOW + 3 * EL_TRIAL, "load gone: %d passes from 1 to 4 threads",
              p);

    /* like with like: a trial meeting a pass of another size starts over, at
     * the count it had */
    elastic_fresh(&e, 2, 2, true, hist);
    int n = 2;
    for (p = 0; p < 100 && n == 2; p++) {
        n = tp_elastic_pick(&e, 1);
        const tp_run_stats st = {.n_active = n, .wall_ns = busy2.wall[n], .wait_ns = busy2.wait[n]};
        if (n == 2) tp_elastic_record(&e, 1, &st);
    }
    CHECK_EQ_INT(n, 1); /* a trial of 1 began */
    const tp_run_stats two = {.n_active = 1, .wall_ns = 30000, .wait_ns = 0};
    tp_elastic_record(&e, 2, &two); /* a pass of 2 tokens (the engine picked up a sequence) */
    CHECK_EQ_INT(tp_elastic_pick(&e, 2), 2);
    CHECK_EQ_INT(tp_elastic_pick(&e, 1), 2);

    /* disabled (VT_TP_ELASTIC=0): never changes; a pool of one has nothing to pick */
    elastic_check_stays(2, 2, false, &busy2, 2, "disabled");
    elastic_check_stays(4, 2, false, &over1, 4, "disabled, 4 threads on 2 CPUs");
    elastic_fresh(&e, 1, 1, true, hist);
    CHECK_EQ_INT(elastic_drive(&e, &busy2, 1, 100, NULL), 1);
    unsetenv("VT_TP_ELASTIC");
    CHECK(tp_elastic_env());
    setenv("VT_TP_ELASTIC", "1", 1);
    CHECK(tp_elastic_env());
    setenv("VT_TP_ELASTIC", "0", 1);
    CHECK(!tp_elastic_env());
    unsetenv("VT_TP_ELASTIC");
    printf("  tp_elastic: shrinks (straight to the threads awake, at most the CPUs), stays, probes back, "
           "grows, keeps prefill and other sizes apart\n");
}

/* ---- many runs: data written by the caller before tp_run is visible to the
 * workers, data written by workers is visible to the caller after it ---------- */
typedef struct {
    int64_t input;
    int64_t out[MAX_T];
} echo_ctx;

static void echo_fn(void *vctx, int ith, int nth) {
    echo_ctx *c = vctx;
    c->out[ith] = c->input * 31 + ith;
}

static void test_many_runs(int n_threads, int n_runs) {
    tp_pool *pool = NULL;
    CHECK_OK(tp_create(n_threads, &pool));
    if (!pool) return;
    echo_ctx c;
    memset(&c, 0, sizeof c);
    int bad = 0;
    for (int r = 0; r < n_runs; r++) {
        c.input = r;
        tp_run(pool, echo_fn, &c);
        for (int i = 0; i < n_threads; i++)
            if (c.out[i] != (int64_t)r * 31 + i) bad++;
    }
    CHECK_MSG(bad == 0, "%d threads: %d stale outputs", n_threads, bad);
    printf("  %d threads: %d tp_run\n", n_threads, n_runs);
    tp_destroy(pool);
}

/* ---- an idle pool sleeps ------------------------------------------------------ */
static void test_idle_sleeps(void) {
    tp_pool *pool = NULL;
    CHECK_OK(tp_create(4, &pool));
    if (!pool) return;
    echo_ctx c;
    memset(&c, 0, sizeof c);
    for (int r = 0; r < 10; r++) tp_run(pool, echo_fn, &c);
    /* Let the workers finish their idle spin (100 µs by default), then measure
     * 200 ms of idleness: three sleeping workers must use almost no CPU. A pool
     * that never sleeps would burn ~min(3, cores) x 200 ms here. */
    struct timespec settle = {0, 20 * 1000 * 1000};
    nanosleep(&settle, NULL);
    double c0 = cpu_s();
    struct timespec idle = {0, 200 * 1000 * 1000};
    nanosleep(&idle, NULL);
    double used = cpu_s() - c0;
    CHECK_MSG(used < 0.02, "idle pool used %.1f ms CPU in 200 ms", used * 1e3);
    printf("  idle: %.2f ms CPU in 200 ms\n", used * 1e3);
    /* and it still works after sleeping */
    c.input = 7;
    tp_run(pool, echo_fn, &c);
    CHECK_EQ_INT(c.out[3], 7 * 31 + 3);
    tp_destroy(pool);
}

/* ---- n_threads = 1 runs inline -------------------------------------------------- */
typedef struct {
    pthread_t caller, seen;
    int ith, nth;
} inline_ctx;

static void inline_fn(void *vctx, int ith, int nth) {
    inline_ctx *c = vctx;
    c->seen = pthread_self();
    c->ith = ith;
    c->nth = nth;
}

static void barrier_only_fn(void *vctx, int ith, int nth) {
    tp_barrier(vctx); /* must be a no-op with one thread */
}

static void test_single(void) {
    tp_pool *pool = NULL;
    CHECK_OK(tp_create(1, &pool));
    if (!pool) return;
    inline_ctx c = {.caller = pthread_self(), .ith = -1, .nth = -1};
    tp_run(pool, inline_fn, &c);
    CHECK(pthread_equal(c.caller, c.seen));
    CHECK_EQ_INT(c.ith, 0);
    CHECK_EQ_INT(c.nth, 1);
    tp_run(pool, barrier_only_fn, pool);
    tp_destroy(pool);
}

static void test_errors(void) {
    tp_pool *pool = (tp_pool *)&pool;
    CHECK(tp_create(0, &pool) == VT_E_RANGE);
    CHECK(pool == NULL);
    tp_destroy(NULL);
}

/* ---- tp_range partitions [0, n) ------------------------------------------------- */
static void test_range(void) {
    const int64_t ns[] = {0, 1, 5, 31, 32, 33, 100, 1000, 4097};
    const int64_t grains[] = {1, 4, 16, 32};
    int bad = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++)
            for (int nth = 1; nth <= 7; nth++) {
                int64_t expect = 0;
                for (int ith = 0; ith < nth; ith++) {
                    int64_t b, e;
                    tp_range(ns[a], grains[g], ith, nth, &b, &e);
                    if (b != expect || e < b) bad++;
                    if (b % grains[g] != 0 && b != ns[a]) bad++;
                    expect = e;
                }
                if (expect != ns[a]) bad++;
            }
    CHECK_EQ_INT(bad, 0);
}

/* ---- the CPUs this process may use ----------------------------------------------
 * Pinned to one CPU (as `taskset -c 0` would), the default is one thread and a
 * pool of 2 or 4 knows it is oversubscribed, whatever the machine has; the
 * barriers still order memory with both threads on one core. The affinity of
 * the calling thread is restored afterwards. */
static void test_affinity(void) {
    cpu_set_t old, one;
    CHECK(sched_getaffinity(0, sizeof old, &old) == 0);
    CHECK_EQ_INT(tp_usable_cpus(), CPU_COUNT(&old));
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &old)) first = c;
    if (first < 0) return;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    CHECK_EQ_INT(tp_usable_cpus(), 1);
    CHECK_EQ_INT(tp_default_threads(), 1);
    tp_pool *pool = NULL;
    CHECK_OK(tp_create(1, &pool));
    if (pool) CHECK(!tp_oversubscribed(pool));
    tp_destroy(pool);
    CHECK_OK(tp_create(2, &pool)); /* workers inherit the one-CPU mask */
    if (pool) {
        CHECK(tp_oversubscribed(pool));
        CHECK_EQ_INT(tp_n_cpus(pool), 1);
        /* what forward.c gives its decode policy: it starts on the one CPU */
        tp_elastic e;
        tp_elastic_init(&e, tp_n_threads(pool), tp_n_cpus(pool), true);
        CHECK_EQ_INT(tp_elastic_pick(&e, 1), 1);
    }
    tp_destroy(pool);
    test_barriers(4, 20, 50);
    test_claim(3, 200);
    test_run_n(3, 200);
    CHECK(sched_setaffinity(0, sizeof old, &old) == 0);
    CHECK_OK(tp_create(CPU_COUNT(&old), &pool));
    if (pool) CHECK(!tp_oversubscribed(pool) && tp_n_cpus(pool) == CPU_COUNT(&old));
    tp_destroy(pool);
    printf("  pinned to CPU %d: 1 default thread, pools of 2+ oversubscribed\n", first);
}

int main(void) {
    int cores = tp_default_threads();
    CHECK(cores >= 1 && cores <= 4096);
    printf("tp_default_threads() = %d\n", cores);
    test_errors();
    test_single();
    test_range();
    /* 3 and 4 threads oversubscribe the 2-core CI machine on purpose. */
    test_barriers(2, 200, 200);
    test_barriers(3, 100, 100);
    test_barriers(4, 100, 100);
    test_barriers(8, 20, 50);
    test_claim(2, 2000);
    test_claim(3, 500);
    test_take(2, 300);
    test_take(3, 100);
    test_run_n(2, 2000);
    test_run_n(3, 1000);
    test_run_n(4, 600);
    test_stats();
    test_elastic();
    test_many_runs(2, 10000);
    test_many_runs(4, 10000);
    test_idle_sleeps();
    test_affinity();
    return test_finish();
}
