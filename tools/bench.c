/* vt bench: vt against the reference llama.cpp on the same GGUF, in one program.
 *
 * The protocol is ../shared/BENCH.md's: both engines get the same file, the same
 * prompt token ids, the same thread count, n_ctx and batch size. Workloads follow
 * llama-bench's names: ppN (prefill of N tokens in batches of n_batch), tgN (N
 * single-token decode steps from an empty cache) and tgN@dD (N steps after a
 * D-token prompt, which is not timed). For each (model, threads, workload):
 *   1. A/A calibration: llama.cpp against itself, r pairs; the min..max of those
 *      ratios is the noise band.
 *   2. A/B: vt, llama.cpp, vt, llama.cpp, ... r counted pairs; the figure is the
 *      median of the per-pair ratios vt/llama.cpp. Inside the band it is a tie.
 * Every measurement runs in its own forked child, which loads the engine and the
 * model, runs the workload once as a warm-up and once timed, and reports wall
 * time, CPU seconds (getrusage RUSAGE_SELF around the timed run: spinning shows
 * here) and its peak RSS; so RSS and state are clean and neither engine sees the
 * other. llama.cpp is dlopen'd (tools/llama_dl.c); vt never links it.
 *
 * The D-token prompt of tgN@dD is prefilled once per engine, model and thread
 * count: that first child saves the sequence's state (vt_seq_state_get,
 * llama_state_seq_get_data) to a file of a folder the run removes at its end,
 * and every run of a later child, warm-up (of DEPTH_WARM_STEPS steps) and
 * timed, starts from the state restored from it, as the first child's runs do. What is timed, the N steps
 * from the same cache contents, is unchanged; a deep cell no longer costs a
 * D-token prefill per measurement (llama.cpp's dominated it).
 * --depth-prefill prefills in every run instead (the warm-up's prompt then
 * at most n_batch tokens).
 *
 * --bandwidth measures the machine's read bandwidth (a sum over 1 GiB) with the
 * pair's thread count just before every counted decode pair, and reports each
 * decode figure as the median over pairs of tokens/s over the bound of that
 * pair, bandwidth / weight bytes per token: on a VM whose speed drifts by
 * minutes, a bound measured once is not the bound of a later run. */
#include "cmds.h"
#include "opts.h"
#include "rope_opts.h"
#include "cpu/matmul.h"
#include "model/forward.h"
#include "llama_dl.h"
#include "vt.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 16
#define MAX_REPS 100
#define MAX_THREADS 1024 /* -t */
#define DEPTH_WARM_STEPS 16 /* a warm-up's decode steps from a restored depth */

typedef enum { ENG_VT, ENG_LLAMA } engine_id;
static const char *engine_name[] = {"vt", "llama.cpp"};

typedef struct workload {
    char name[32];
    int32_t n_prompt; /* ppN: tokens prefilled and timed */
    int32_t n_gen;    /* tgN: decode steps timed */
    int32_t depth;    /* tgN@dD: prompt before the steps, not timed */
} workload;

typedef struct bench_cfg {
    const char *models[MAX_LIST];
    int n_models;
    workload work[MAX_LIST];
    int n_work;
    int threads[MAX_LIST];
    int n_threads;
    int reps;
    int n_ctx, n_batch;
    int flash_attn;     /* llama.cpp: -1 auto, 0 off, 1 on */
    bool llama_mmap;    /* llama.cpp reads its weights through a map of the file */
    bool do_aa, do_vt, do_llama;
    bool interleave;    /* pair i of every workload before pair i + 1 of any */
    bool bandwidth;
    uint64_t *bw_buf;   /* --bandwidth: 1 GiB read before each decode pair (not forked) */
    size_t bw_words;
    const char *json_path;
    const char *llama_dir;
    bool depth_prefill; /* --depth-prefill: no saved depth states */
    char state_dir[256]; /* tgN@dD's saved states ("" until the run makes it) */
    rope_opts rope;                 /* --rope-* (rope_opts.h), for both engines: rope.params */
} bench_cfg;

/* One measurement, as the child reports it through a pipe. */
typedef struct meas {
    int ok;
    double wall_s;   /* the timed run */
    double cpu_s;    /* user + system of the whole child process during it */
    long max_rss_kb; /* peak RSS of the child */
    int32_t tokens;
    uint64_t weight_bytes;
    uint64_t step_bytes; /* vt only: weight bytes one decode step reads */
    int nopf;            /* vt only: weight types whose decode GEMMs run without software prefetch */
    char desc[96];
    char err[256];
} meas;

/* ---- timing ----------------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

/* ---- the two engines behind one shape ------------------------------------------------ */

typedef struct engine {
    engine_id id;
    llama_dl *llama;
    vt_model *vm;
    vt_context *vc;
    int32_t n_batch;
} engine;

static bool engine_open(engine *e, engine_id id, const bench_cfg *c, const char *model, int threads,
                        meas *m) {
    memset(e, 0, sizeof *e);
    e->id = id;
    e->n_batch = c->n_batch;
    if (id == ENG_LLAMA) {
        e->llama = llama_dl_open(c->llama_dir, model, c->n_ctx, c->n_batch, threads, c->flash_attn, c->llama_mmap,
                                 c->rope.params, m->err,
                                 sizeof m->err);
        if (!e->llama) return false;
        m->weight_bytes = llama_dl_model_bytes(e->llama);
        snprintf(m->desc, sizeof m->desc, "%s", llama_dl_desc(e->llama));
        return true;
    }
    vt_model_params mp = vt_model_default_params();
    mp.rope = c->rope.params;
    if (vt_model_load(model, &mp, &e->vm) != VT_OK) goto vt_fail;
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = c->n_ctx;
    cp.n_batch = c->n_batch;
    cp.n_seq = 1;
    cp.n_threads = threads;
    if (vt_context_create(e->vm, &cp, &e->vc) != VT_OK) goto vt_fail;
    m->weight_bytes = vt_model_weight_bytes(e->vm);
    m->step_bytes = vt_model_step_bytes(e->vm);
    m->nopf = fwd_hw_prefetch_types(e->vm); /* set by the context's probe */
    snprintf(m->desc, sizeof m->desc, "%s", vt_model_desc(e->vm));
    return true;
vt_fail:
    snprintf(m->err, sizeof m->err, "vt: %s", vt_last_error());
    return false;
}

static int32_t engine_n_vocab(const engine *e) {
    return e->id == ENG_LLAMA ? llama_dl_n_vocab(e->llama) : vt_model_n_vocab(e->vm);
}

static void engine_clear(engine *e) {
    if (e->id == ENG_LLAMA) llama_dl_clear(e->llama);
    else vt_seq_clear(e->vc, 0);
}

/* Sequence 0's state: its size, a copy out, a copy back in (vt.h, llama_dl.h). */
static size_t engine_state_size(engine *e) {
    return e->id == ENG_LLAMA ? llama_dl_state_size(e->llama) : vt_seq_state_size(e->vc, 0);
}

static bool engine_state_get(engine *e, void *buf, size_t size) {
    return e->id == ENG_LLAMA ? llama_dl_state_get(e->llama, buf, size) : vt_seq_state_get(e->vc, 0, buf, size) == VT_OK;
}

static bool engine_state_set(engine *e, const void *buf, size_t size, char *err, size_t err_len) {
    const bool ok = e->id == ENG_LLAMA ? llama_dl_state_set(e->llama, buf, size)
                                       : vt_seq_state_set(e->vc, 0, buf, size) == VT_OK;
    if (!ok)
        snprintf(err, err_len, "%s: restoring a saved state of %zu bytes failed%s%s", engine_name[e->id], size,
                 e->id == ENG_VT ? ": " : "", e->id == ENG_VT ? vt_last_error() : "");
    return ok;
}

/* tokens[0..n) at positions pos0.., in batches of n_batch; logits for the last. */
static bool engine_decode(engine *e, const int32_t *tokens, int32_t n, int32_t pos0, char *err, size_t err_len) {
    static int32_t pos[4096], seq[4096];
    for (int32_t i0 = 0; i0 < n; i0 += e->n_batch) {
        int32_t k = n - i0 < e->n_batch ? n - i0 : e->n_batch;
        bool ok;
        if (e->id == ENG_LLAMA) {
            ok = llama_dl_decode(e->llama, tokens + i0, k, pos0 + i0);
            if (!ok) snprintf(err, err_len, "llama_decode failed at position %d", pos0 + i0);
        } else {
            for (int32_t j = 0; j < k; j++) pos[j] = pos0 + i0 + j, seq[j] = 0;
            vt_batch b = {.n_tokens = k, .token = tokens + i0, .pos = pos, .seq = seq, .logits = NULL};
            ok = vt_decode(e->vc, &b) == VT_OK && vt_get_logits(e->vc, 0) != NULL;
            if (!ok) snprintf(err, err_len, "vt_decode failed at position %d: %s", pos0 + i0, vt_last_error());
        }
        if (!ok) return false;
    }
    return true;
}

static void engine_close(engine *e) {
    if (e->id == ENG_LLAMA) {
        llama_dl_close(e->llama);
    } else {
        vt_context_free(e->vc);
        vt_model_free(e->vm);
    }
}

/* ---- one measurement in a child ------------------------------------------------------- */

/* Deterministic prompt ids, the same for both engines. */
static void make_tokens(int32_t *t, int32_t n, int32_t n_vocab) {
    uint64_t s = 0x243F6A8885A308D3ull;
    for (int32_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (int32_t)((s >> 33) % (uint64_t)(n_vocab > 1 ? n_vocab : 1));
    }
}

/* A tgN@dD's depth as a saved state (bytes of engine_state_get), or none. */
typedef struct depth_state {
    void *buf;
    size_t size;
} depth_state;

/* Run w once; *timed_s and *timed_cpu cover only the timed part. With ds, the
 * depth is the state restored from it, not a prefill. */
static bool run_workload(engine *e, const workload *w, const int32_t *toks, const depth_state *ds, double *timed_s,
                         double *timed_cpu, char *err, size_t err_len) {
    engine_clear(e);
    if (ds && !engine_state_set(e, ds->buf, ds->size, err, err_len)) return false;
    if (w->n_prompt > 0) {
        double c0 = cpu_s(), t0 = now_s();
        if (!engine_decode(e, toks, w->n_prompt, 0, err, err_len)) return false;
        *timed_s = now_s() - t0;
        *timed_cpu = cpu_s() - c0;
        return true;
    }
    if (!ds && w->depth > 0 && !engine_decode(e, toks, w->depth, 0, err, err_len)) return false;
    double c0 = cpu_s(), t0 = now_s();
    for (int32_t i = 0; i < w->n_gen; i++) {
        if (!engine_decode(e, toks + w->depth + i, 1, w->depth + i, err, err_len)) return false;
    }
    *timed_s = now_s() - t0;
    *timed_cpu = cpu_s() - c0;
    return true;
}

/* The file of the saved depth of (engine, model, threads, w) in the run's folder. */
static void state_path(const bench_cfg *c, engine_id id, const char *model, int threads, const workload *w,
                       char *path, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the model's path */
    for (const char *p = model; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    snprintf(path, len, "%s/%s-%016llx-t%d-d%d.state", c->state_dir, id == ENG_VT ? "vt" : "llama",
             (unsigned long long)h, threads, (int)w->depth);
}

/* The saved depth of w: read from its file, or (the first child) prefilled
 * now and written there, through a temporary name, for the children after. */
static bool depth_load(engine *e, const bench_cfg *c, const char *model, int threads, const workload *w,
                       const int32_t *toks, depth_state *ds, char *err, size_t err_len) {
    char path[512], tmp[530];
    state_path(c, e->id, model, threads, w, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (f) {
        long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
        ds->buf = size > 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)size) : NULL;
        ds->size = ds->buf && fread(ds->buf, 1, (size_t)size, f) == (size_t)size ? (size_t)size : 0;
        fclose(f);
        if (!ds->size) snprintf(err, err_len, "%.200s: cannot read the saved depth", path);
        return ds->size > 0;
    }
    engine_clear(e);
    if (!engine_decode(e, toks, w->depth, 0, err, err_len)) return false;
    ds->size = engine_state_size(e);
    ds->buf = ds->size ? malloc(ds->size) : NULL;
    if (!ds->buf || !engine_state_get(e, ds->buf, ds->size)) {
        snprintf(err, err_len, "%s: cannot save the state of a %d-token prompt (%zu bytes)", engine_name[e->id],
                 (int)w->depth, ds->size);
        return false;
    }
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    f = fopen(tmp, "wb");
    bool ok = f && fwrite(ds->buf, 1, ds->size, f) == ds->size;
    if (f) ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, err_len, "%.180s: %.60s", tmp, strerror(errno));
        unlink(tmp);
        return false;
    }
    return true;
}

static void child_main(int fd, engine_id id, const bench_cfg *c, const char *model, int threads, const workload *w) {
    meas m = {0};
    engine e;
    if (engine_open(&e, id, c, model, threads, &m)) {
        int32_t n = w->n_prompt + w->depth + w->n_gen;
        int32_t *toks = malloc((size_t)n * sizeof *toks);
        make_tokens(toks, n, engine_n_vocab(&e));
        depth_state ds = {0};
        const bool saved = w->depth > 0 && c->state_dir[0];
        /* Without a saved depth, the warm-up of tgN@dD prompts at most n_batch
         * tokens before its steps: the timed run's own D-token prompt, untimed
         * and just before the steps, touches every weight and every cache row
         * they read, so a second D-token prompt would only double the cost. */
        workload warm = *w;
        if (!saved && warm.depth > c->n_batch) warm.depth = c->n_batch;
        /* With a saved depth, a warm-up of a few steps from it reads every
         * weight and the whole restored cache, all that the timed steps read. */
        if (saved && warm.n_gen > DEPTH_WARM_STEPS) warm.n_gen = DEPTH_WARM_STEPS;
        double s = 0, cs = 0;
        if ((!saved || depth_load(&e, c, model, threads, w, toks, &ds, m.err, sizeof m.err)) &&
            run_workload(&e, &warm, toks, saved ? &ds : NULL, &s, &cs, m.err, sizeof m.err) &&
            run_workload(&e, w, toks, saved ? &ds : NULL, &s, &cs, m.err, sizeof m.err)) {
            m.ok = 1;
            m.wall_s = s;
            m.cpu_s = cs;
            m.tokens = w->n_prompt > 0 ? w->n_prompt : w->n_gen;
        }
        free(ds.buf);
        free(toks);
        engine_close(&e);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    m.max_rss_kb = ru.ru_maxrss;
    ssize_t wr = write(fd, &m, sizeof m);
    _exit(wr == (ssize_t)sizeof m ? 0 : 1);
}

static meas measure(engine_id id, const bench_cfg *c, const char *model, int threads, const workload *w) {
    meas m = {0};
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(m.err, sizeof m.err, "pipe: %s", strerror(errno));
        return m;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(m.err, sizeof m.err, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return m;
    }
    if (pid == 0) {
        close(fds[0]);
        child_main(fds[1], id, c, model, threads, w);
    }
    close(fds[1]);
    size_t got = 0;
    while (got < sizeof m) {
        ssize_t r = read(fds[0], (char *)&m + got, sizeof m - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got != sizeof m) {
        memset(&m, 0, sizeof m);
        if (WIFSIGNALED(status))
            snprintf(m.err, sizeof m.err, "%s child killed by signal %d (%s)", engine_name[id], WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        else
            snprintf(m.err, sizeof m.err, "%s child exited %d without a result", engine_name[id],
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    return m;
}

/* ---- statistics ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *x, int n) {
    if (n <= 0) return NAN;
    double tmp[MAX_REPS * 2];
    memcpy(tmp, x, (size_t)n * sizeof *x);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

static void min_max(const double *x, int n, double *lo, double *hi) {
    *lo = INFINITY, *hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (x[i] < *lo) *lo = x[i];
        if (x[i] > *hi) *hi = x[i];
    }
    if (n == 0) *lo = *hi = NAN;
}

typedef struct engine_stats {
    int n;
    double tps[MAX_REPS], cpu_per_tok[MAX_REPS];
    long max_rss_kb;
    uint64_t weight_bytes, step_bytes;
    int n_nopf; /* measurements with a type whose decode GEMMs ran without software prefetch */
    char desc[96];
    char err[256];
} engine_stats;

static void stats_add(engine_stats *s, const meas *m) {
    if (!m->ok) {
        if (!s->err[0]) snprintf(s->err, sizeof s->err, "%s", m->err);
        return;
    }
    s->tps[s->n] = m->tokens / m->wall_s;
    s->cpu_per_tok[s->n] = m->cpu_s / m->tokens;
    s->n++;
    if (m->max_rss_kb > s->max_rss_kb) s->max_rss_kb = m->max_rss_kb;
    s->weight_bytes = m->weight_bytes;
    s->step_bytes = m->step_bytes;
    s->n_nopf += m->nopf > 0;
    snprintf(s->desc, sizeof s->desc, "%s", m->desc);
}

typedef struct row {
    const char *model;
    int threads;
    const workload *w;
    engine_stats st[2];
    double ratio[MAX_REPS], aa[MAX_REPS];
    int n_ratio, n_aa;
    double pair_tps[2][MAX_REPS]; /* per engine, t/s of counted pair i (NAN: failed or not run) */
    double pair_bw[MAX_REPS];     /* GB/s read just before counted pair i (NAN: not measured) */
} row;

/* ---- read bandwidth ----------------------------------------------------------------------- */

typedef struct bw_job {
    const uint64_t *p;
    size_t n;
    int streams; /* 1 or BW_STREAMS */
    uint64_t sum;
} bw_job;

/* One 8-byte load per 64-byte line: the memory system still moves every line,
 * and the loop's own work stays far below it, so this reads the line-fill
 * bandwidth a streaming kernel can get (a sum of every word would measure the
 * adder at one thread). Two patterns, the better one counts: four streams per
 * thread, each prefetched 16 lines ahead, as a decode GEMM reads (on the Zen 5
 * VM that read 41.5 / 71.4 GB/s at 1 / 2 threads where one plain stream read
 * 31.9 / 58.9, and vt's 100M decode had already streamed more than the
 * one-stream figure), and one plain stream (later the same VM read 15 GB/s with
 * four streams at 1 thread and 28 with one, while vt's decode streamed 24). */
#define BW_STREAMS 4
static void *bw_sum(void *arg) {
    bw_job *j = arg;
    j->sum = 0;
    if (j->streams == 1) {
        for (size_t i = 0; i < j->n; i += 8) j->sum += j->p[i];
        return NULL;
    }
    const size_t per = j->n / BW_STREAMS / 8 * 8;
    const uint64_t *s[BW_STREAMS];
    uint64_t a[BW_STREAMS] = {0};
    for (int k = 0; k < BW_STREAMS; k++) s[k] = j->p + (size_t)k * per;
    for (size_t i = 0; i < per; i += 8)
        for (int k = 0; k < BW_STREAMS; k++) {
            __builtin_prefetch(s[k] + i + 8 * 16);
            a[k] += s[k][i];
        }
    for (int k = 0; k < BW_STREAMS; k++) j->sum += a[k];
    return NULL;
}

/* Best of 3 passes of each pattern over 1 GiB with nth threads, in GB/s (1e9 bytes). */
static double measure_bandwidth(uint64_t *buf, size_t n_words, int nth) {
    double best = 0;
    for (int rep = 0; rep < 6; rep++) {
        pthread_t th[MAX_THREADS];
        bw_job jobs[MAX_THREADS];
        size_t per = n_words / (size_t)nth / (8 * BW_STREAMS) * (8 * BW_STREAMS);
        double t0 = now_s();
        for (int i = 0; i < nth; i++) {
            jobs[i] = (bw_job){.p = buf + (size_t)i * per, .n = per, .streams = rep % 2 ? 1 : BW_STREAMS};
            if (i > 0) pthread_create(&th[i], NULL, bw_sum, &jobs[i]);
        }
        bw_sum(&jobs[0]);
        uint64_t sink = jobs[0].sum;
        for (int i = 1; i < nth; i++) {
            pthread_join(th[i], NULL);
            sink += jobs[i].sum;
        }
        double dt = now_s() - t0;
        if (sink == 42) fprintf(stderr, " "); /* keep the sum alive */
        double gbs = (double)(per * (size_t)nth * sizeof(uint64_t)) / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

static meas measure_progress(engine_id id, const bench_cfg *c, row *r, const char *phase);

/* One A/A pair (llama.cpp against itself) of row r. */
static void run_aa_pair(const bench_cfg *c, row *r) {
    const meas a = measure_progress(ENG_LLAMA, c, r, "A/A");
    const meas b = measure_progress(ENG_LLAMA, c, r, "A/A");
    if (a.ok && b.ok) r->aa[r->n_aa++] = (a.tokens / a.wall_s) / (b.tokens / b.wall_s);
}

/* Counted A/B pair i of row r: vt, then llama.cpp; a decode pair's bandwidth
 * bound first. */
static void run_ab_pair(const bench_cfg *c, row *r, int i) {
    meas m[2] = {{0}, {0}};
    r->pair_bw[i] = c->bw_buf && r->w->n_gen > 0 ? measure_bandwidth(c->bw_buf, c->bw_words, r->threads) : NAN;
    const bool on[2] = {c->do_vt, c->do_llama};
    for (int e = 0; e < 2; e++) {
        r->pair_tps[e][i] = NAN;
        if (!on[e]) continue;
        m[e] = measure_progress((engine_id)e, c, r, "A/B");
        stats_add(&r->st[e], &m[e]);
        if (m[e].ok) r->pair_tps[e][i] = m[e].tokens / m[e].wall_s;
    }
    if (m[ENG_VT].ok && m[ENG_LLAMA].ok) r->ratio[r->n_ratio++] = r->pair_tps[ENG_VT][i] / r->pair_tps[ENG_LLAMA][i];
}

/* ---- options ------------------------------------------------------------------------------ */

static void more_help(FILE *f) {
    fprintf(f, "--llama-dir defaults to %s.\n", llama_dl_default_dir() ? llama_dl_default_dir() : "(none built in)");
}

static bool parse_workload(const char *s, workload *w) {
    memset(w, 0, sizeof *w);
    int a = 0, d = 0, used = 0;
    if (sscanf(s, "pp%d%n", &a, &used) == 1 && s[used] == 0 && a > 0 && a <= 4096) {
        w->n_prompt = a;
    } else if (sscanf(s, "tg%d@d%d%n", &a, &d, &used) == 2 && s[used] == 0 && a > 0 && a <= 4096 && d > 0 &&
               d <= 65536) {
        w->n_gen = a;
        w->depth = d;
    } else if (sscanf(s, "tg%d%n", &a, &used) == 1 && s[used] == 0 && a > 0 && a <= 4096) {
        w->n_gen = a;
    } else {
        return false;
    }
    snprintf(w->name, sizeof w->name, "%s", s);
    return true;
}

static int split_list(char *s, char **items, int max) {
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ",")) items[n++] = tok;
    return n;
}

static bool opt_model(const char *o, const char *v, void *dst) {
    bench_cfg *c = dst;
    if (c->n_models == MAX_LIST) {
        fprintf(stderr, "vt bench: %s: at most %d models\n", o, MAX_LIST);
        return false;
    }
    c->models[c->n_models++] = v;
    return true;
}

static bool opt_llama_fa(const char *o, const char *v, void *dst) {
    int x;
    if (!opt_on_off(o, v, &x)) return false;
    *(int *)dst = x == 2 ? -1 : x;
    return true;
}

static bool opt_llama_mmap(const char *o, const char *v, void *dst) {
    if (strcmp(v, "on") && strcmp(v, "off")) {
        fprintf(stderr, "vt bench: %s takes on or off, not '%s'\n", o, v);
        return false;
    }
    *(bool *)dst = !strcmp(v, "on");
    return true;
}

static bool parse_args(int argc, char **argv, bench_cfg *c, int *exit_code) {
    memset(c, 0, sizeof *c);
    c->flash_attn = -1;
    c->llama_dir = llama_dl_default_dir();
    const char *engine = "both", *w_list = "pp128,pp512,tg128,tg128@d512", *t_list = "1,2";
    long long reps = 5, n_ctx = 0, n_batch = 512;
    bool no_aa = false;
    static char wbuf[512], tbuf[128];
    const opt table[] = {
        {.name = {"-m", "--model"}, .kind = OPT_FN, .fn = opt_model, .dst = c, .arg = "FILE", .repeat = true,
         .help = "model (repeatable)"},
        {.name = {"-w"}, .kind = OPT_STR, .dst = &w_list, .arg = "LIST",
         .help = "workloads, e.g. pp128,pp512,tg128,tg128@d512 (default all four)"},
        {.name = {"-t", "--threads"}, .kind = OPT_STR, .dst = &t_list, .arg = "LIST",
         .help = "thread counts (default 1,2)"},
        {.name = {"-r"}, .kind = OPT_INT, .dst = &reps, .arg = "N", .lo = 1, .hi = MAX_REPS,
         .help = "counted pairs per workload (default 5, at least 1)"},
        {.name = {"-c", "--ctx-size"}, .kind = OPT_INT, .dst = &n_ctx, .arg = "N", .lo = 0, .hi = 1 << 20,
         .help = "n_ctx for both engines (default: what the workloads need,\n"
                 "rounded up to 256 within what the models allow)"},
        {.name = {"-b", "--batch-size"}, .kind = OPT_INT, .dst = &n_batch, .arg = "N", .lo = 1, .hi = 4096,
         .help = "batch size for both engines (default 512)"},
        {.name = {"--engine"}, .kind = OPT_STR, .dst = &engine, .arg = "E",
         .help = "both | vt | llama (default both, or vt without llama.cpp)"},
        {.name = {"--no-aa"}, .kind = OPT_FLAG, .dst = &no_aa, .help = "skip the A/A calibration"},
        {.name = {"--depth-prefill"}, .kind = OPT_FLAG, .dst = &c->depth_prefill,
         .help = "prefill tgN@dD's D tokens in every run, rather than once per\n"
                 "engine, model and thread count with the state saved and restored"},
        {.name = {"--interleave"}, .kind = OPT_FLAG, .dst = &c->interleave,
         .help = "run pair i of every workload before pair i + 1 of any, and\n"
                 "report each engine's change from the first workload of a\n"
                 "kind (ppN, tgN) to the others as the median of per-pair ratios"},
        {.name = {"--llama-dir"}, .kind = OPT_STR, .dst = &c->llama_dir, .arg = "DIR",
         .help = "llama.cpp libraries (default: below)"},
        {.name = {"--llama-fa"}, .kind = OPT_FN, .fn = opt_llama_fa, .dst = &c->flash_attn, .arg = "M",
         .help = "llama.cpp flash attention: auto | on | off (default auto)"},
        {.name = {"--llama-mmap"}, .kind = OPT_FN, .fn = opt_llama_mmap, .dst = &c->llama_mmap, .arg = "M",
         .help = "llama.cpp weights through a map of the file: on | off (default\n"
                 "off: in memory of its own, as vt holds its packed weights;\n"
                 "BENCHMARKS.md says why)"},
        {.name = {"--bandwidth"}, .kind = OPT_FLAG, .dst = &c->bandwidth,
         .help = "measure read bandwidth, report decode as a fraction of the bound"},
        {.name = {"--json"}, .kind = OPT_STR, .dst = &c->json_path, .arg = "FILE",
         .help = "also write every figure as JSON (- for stdout)"},
    };
    ROPE_OPTS_TABLE(all, table, &c->rope);
    const opts_cmd cmd = {.name = "bench", .usage = "vt bench -m MODEL [-m MODEL ...] [options]",
                          .intro = "vt against the reference llama.cpp on the same file (../shared/BENCH.md):\n"
                                   "A/A calibration of llama.cpp for the noise band, then alternated A/B pairs;\n"
                                   "each measurement in a fresh child process with one warm-up run.\n",
                          .opts = all, .n_opts = all_n, .more = more_help};
    const int prc = opts_parse(&cmd, argc, argv, NULL, NULL, NULL);
    if (prc >= 0) {
        *exit_code = prc;
        return false;
    }
    if (!rope_opts_finish("bench", &c->rope)) return false;
    c->reps = (int)reps;
    c->n_ctx = (int)n_ctx;
    c->n_batch = (int)n_batch;
    c->do_aa = !no_aa;
    snprintf(wbuf, sizeof wbuf, "%s", w_list);
    snprintf(tbuf, sizeof tbuf, "%s", t_list);
    if (c->n_models == 0) {
        fprintf(stderr, "vt bench: -m MODEL is required\n\n");
        opts_usage(&cmd, stderr);
        return false;
    }
    if (c->reps < 1 || c->reps > MAX_REPS) {
        fprintf(stderr, "vt bench: -r must be 1..%d\n", MAX_REPS);
        return false;
    }
    if (c->n_batch < 1 || c->n_batch > 4096) {
        fprintf(stderr, "vt bench: -b must be 1..4096\n");
        return false;
    }
    char *items[MAX_LIST];
    int n = split_list(wbuf, items, MAX_LIST);
    for (int i = 0; i < n; i++) {
        if (!parse_workload(items[i], &c->work[c->n_work++])) {
            fprintf(stderr, "vt bench: bad workload '%s' (ppN, tgN, tgN@dD)\n", items[i]);
            return false;
        }
    }
    n = split_list(tbuf, items, MAX_LIST);
    for (int i = 0; i < n; i++) {
        int t = atoi(items[i]);
        if (t < 1 || t > MAX_THREADS) {
            fprintf(stderr, "vt bench: bad thread count '%s'\n", items[i]);
            return false;
        }
        c->threads[c->n_threads++] = t;
    }
    if (c->n_work == 0 || c->n_threads == 0) {
        fprintf(stderr, "vt bench: empty -w or -t list\n");
        return false;
    }
    int need = 0;
    for (int i = 0; i < c->n_work; i++) {
        int k = c->work[i].n_prompt + c->work[i].depth + c->work[i].n_gen;
        if (k > need) need = k;
    }
    if (c->n_ctx == 0) c->n_ctx = (need + 255) / 256 * 256;
    if (c->n_ctx < need) {
        fprintf(stderr, "vt bench: -c %d is less than the %d tokens the workloads need\n", c->n_ctx, need);
        return false;
    }
    char why[512];
    bool have_llama = llama_dl_probe(c->llama_dir, why, sizeof why);
    if (!strcmp(engine, "vt")) {
        c->do_vt = true;
    } else if (!strcmp(engine, "llama")) {
        c->do_llama = true;
    } else if (!strcmp(engine, "both")) {
        c->do_vt = true;
        c->do_llama = true;
    } else {
        fprintf(stderr, "vt bench: --engine both|vt|llama\n");
        return false;
    }
    if (c->do_llama && !have_llama) {
        fprintf(stderr, "vt bench: llama.cpp is missing (%s): measuring vt alone, no ratios\n", why);
        c->do_llama = false;
        if (!c->do_vt) return false;
    }
    if (!c->do_llama || !c->do_vt) c->do_aa = c->do_aa && c->do_llama;
    /* the default context within what each model allows vt (a file whose
     * context_length is below the rounding), and a -c past it refused here,
     * once, not by each measurement; one it cannot read fails its
     * measurements instead, with vt's message */
    for (int i = 0; c->do_vt && i < c->n_models; i++) {
        int32_t max = 0;
        if (vt_model_probe_n_ctx_max(c->models[i], c->rope.params, &max) != VT_OK) continue;
        if (n_ctx != 0 && c->n_ctx > max) {
            fprintf(stderr,
                    "vt bench: -c %d is past the %d tokens of context that %s allows: use -c %d or less, or "
                    "extend its context (--rope-scaling yarn --rope-scale N)\n",
                    c->n_ctx, max, c->models[i], max);
            return false;
        }
        if (need > max) {
            fprintf(stderr,
                    "vt bench: the workloads need %d tokens of context, past the %d that %s allows: shorten them "
                    "(-w), or extend its context (--rope-scaling yarn --rope-scale N)\n",
                    need, max, c->models[i]);
            return false;
        }
        if (c->n_ctx > max) c->n_ctx = max;
    }
    return true;
}

/* ---- output ------------------------------------------------------------------------------- */

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void machine_line(char *buf, size_t n) {
    char model[256] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    bool avx2 = false, avx512 = false, fma = false, f16c = false, vnni = false;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                snprintf(model, sizeof model, "%s", c + 2);
                model[strcspn(model, "\n")] = 0;
            }
        } else if (!strncmp(line, "flags", 5)) {
            avx2 = strstr(line, " avx2") != NULL;
            avx512 = strstr(line, " avx512f") != NULL;
            fma = strstr(line, " fma") != NULL;
            f16c = strstr(line, " f16c") != NULL;
            vnni = strstr(line, "avx512_vnni") != NULL;
        }
    }
    if (f) fclose(f);
    snprintf(buf, n, "%s, %ld cores, flags:%s%s%s%s%s", model, sysconf(_SC_NPROCESSORS_ONLN), avx2 ? " avx2" : "",
             fma ? " fma" : "", f16c ? " f16c" : "", avx512 ? " avx512f" : "", vnni ? " avx512_vnni" : "");
}

/* The median (min..max) of the per-pair values in x (n of them) as "%+.1f%% (..)"
 * of their change from 1, or "-" when there are none. */
static void change_cell(char *buf, size_t len, const double *x, int n) {
    if (n == 0) {
        snprintf(buf, len, "-");
        return;
    }
    double lo, hi;
    min_max(x, n, &lo, &hi);
    snprintf(buf, len, "%+.1f%% (%+.1f..%+.1f)", 100.0 * (median(x, n) - 1.0), 100.0 * (lo - 1.0),
             100.0 * (hi - 1.0));
}

/* --interleave: each engine's change from the first workload of a kind (prefill or
 * decode) to each later one of that kind, as the median (min..max) of the ratios
 * of runs of the same pair index, which ran within the same minute or two.
 *
 * "vt falls no more than llama.cpp" (vt_b / vt_a >= llama_b / llama_a) is the
 * same statement as vt/llama at b >= vt/llama at a, and that form is the one a
 * VM whose speed flips by 1.5x within minutes can still answer: each of its
 * ratios comes from one A/B pair run back to back, where the engines' own
 * changes compare runs minutes apart. So the table also gives the change of
 * the per-pair ratio (pair i of b over pair i of a) against the noise of such
 * a change: the quotients of the two workloads' A/A bands (lo_b / hi_a ..
 * hi_b / lo_a), widened to be symmetric about no change (3 A/A pairs can miss
 * 1 on one side, which says they were few, not that one workload favours
 * llama.cpp). Above it vt falls less, below it more, inside it the same. */
static void print_changes(const bench_cfg *c, const row *rows, int n_rows) {
    printf("\nchange from the first workload of its kind, median (min..max) of per-pair ratios:\n\n");
    printf("| model | th | from -> to | vt | llama.cpp | vt/llama | A/A noise | vt falls |\n"
           "|---|---:|---|---:|---:|---:|---|---|\n");
    for (int k = 0; k < n_rows; k += c->n_work) {
        const row *g = &rows[k];
        for (int wi = 1; wi < c->n_work; wi++) {
            const bool decode = g[wi].w->n_gen > 0;
            int w0 = 0;
            while (w0 < wi && (g[w0].w->n_gen > 0) != decode) w0++;
            if (w0 == wi) continue;
            const row *a = &g[w0], *b = &g[wi];
            char cell[3][64], noise[48] = "-", verdict[16] = "-";
            double ch[3][MAX_REPS];
            int n[3] = {0, 0, 0};
            for (int i = 0; i < c->reps; i++) {
                for (int e = 0; e < 2; e++) {
                    const double x = a->pair_tps[e][i], y = b->pair_tps[e][i];
                    if (isfinite(x) && isfinite(y) && x > 0) ch[e][n[e]++] = y / x;
                }
                const double ra = a->pair_tps[ENG_VT][i] / a->pair_tps[ENG_LLAMA][i];
                const double rb = b->pair_tps[ENG_VT][i] / b->pair_tps[ENG_LLAMA][i];
                if (isfinite(ra) && isfinite(rb) && ra > 0) ch[2][n[2]++] = rb / ra;
            }
            for (int e = 0; e < 3; e++) change_cell(cell[e], sizeof cell[e], ch[e], n[e]);
            if (a->n_aa > 0 && b->n_aa > 0) {
                double alo, ahi, blo, bhi;
                min_max(a->aa, a->n_aa, &alo, &ahi);
                min_max(b->aa, b->n_aa, &blo, &bhi);
                const double h = fmax(fabs(blo / ahi - 1.0), fabs(bhi / alo - 1.0));
                const double lo = 1.0 - h, hi = 1.0 + h;
                snprintf(noise, sizeof noise, "%+.1f..%+.1f%%", 100.0 * (lo - 1.0), 100.0 * (hi - 1.0));
                if (n[2] > 0) {
                    const double m = median(ch[2], n[2]);
                    snprintf(verdict, sizeof verdict, "%s", m > hi ? "less" : m < lo ? "more" : "the same");
                }
            }
            printf("| %s | %d | %s -> %s | %s | %s | %s | %s | %s |\n", base_name(b->model), b->threads,
                   a->w->name, b->w->name, cell[ENG_VT], cell[ENG_LLAMA], cell[2], noise, verdict);
        }
    }
}

/* Engine e's decode t/s as a fraction of the bandwidth bound, median over the
 * pairs that have both; NAN if none. The bytes a step reads are vt's count for
 * the file (all weights but the embedding table's other rows), the same bound
 * for both engines; without a vt run, all the weights. */
static double bound_fraction(const bench_cfg *c, const row *r, int e) {
    double f[MAX_REPS];
    int n = 0;
    const uint64_t bytes = r->st[ENG_VT].step_bytes ? r->st[ENG_VT].step_bytes : r->st[ENG_LLAMA].weight_bytes;
    for (int i = 0; i < c->reps && bytes > 0; i++)
        if (isfinite(r->pair_bw[i]) && isfinite(r->pair_tps[e][i]) && r->pair_bw[i] > 0)
            f[n++] = r->pair_tps[e][i] * (double)bytes / (r->pair_bw[i] * 1e9);
    return n ? median(f, n) : NAN;
}

static void print_table(const bench_cfg *c, const row *rows, int n_rows) {
    printf("\n| model | size | th | test | vt t/s | llama.cpp t/s | vt/llama | A/A band | verdict |"
           " CPU-s/tok vt | CPU-s/tok llama | RSS MiB vt | RSS MiB llama |%s\n",
           c->bandwidth ? " vt % of bound | llama % of bound |" : "");
    printf("|---|---:|---:|---|---:|---:|---:|---|---|---:|---:|---:|---:|%s\n", c->bandwidth ? "---:|---:|" : "");
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        char tps[2][64], cpt[2][32], rss[2][32];
        for (int e = 0; e < 2; e++) {
            const engine_stats *s = &r->st[e];
            if (s->n == 0) {
                snprintf(tps[e], sizeof tps[e], "%s", s->err[0] ? "error" : "-");
                snprintf(cpt[e], sizeof cpt[e], "-");
                snprintf(rss[e], sizeof rss[e], "-");
                continue;
            }
            double lo, hi;
            min_max(s->tps, s->n, &lo, &hi);
            snprintf(tps[e], sizeof tps[e], "%.2f (%.2f–%.2f)", median(s->tps, s->n), lo, hi);
            snprintf(cpt[e], sizeof cpt[e], "%.4f", median(s->cpu_per_tok, s->n));
            snprintf(rss[e], sizeof rss[e], "%.0f", (double)s->max_rss_kb / 1024.0);
        }
        char ratio[32] = "-", band[48] = "-", verdict[16] = "-";
        double rmed = median(r->ratio, r->n_ratio);
        if (r->n_ratio > 0) snprintf(ratio, sizeof ratio, "%.3f", rmed);
        if (r->n_aa > 0) {
            double lo, hi;
            min_max(r->aa, r->n_aa, &lo, &hi);
            snprintf(band, sizeof band, "%.3f–%.3f", lo, hi);
            if (r->n_ratio > 0)
                snprintf(verdict, sizeof verdict, "%s", rmed > hi ? "faster" : rmed < lo ? "slower" : "tie");
        }
        const engine_stats *any = r->st[ENG_LLAMA].n ? &r->st[ENG_LLAMA] : &r->st[ENG_VT];
        printf("| %s | %.0f MiB | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", base_name(r->model),
               (double)any->weight_bytes / 1048576.0, r->threads, r->w->name, tps[ENG_VT], tps[ENG_LLAMA], ratio,
               band, verdict, cpt[ENG_VT], cpt[ENG_LLAMA], rss[ENG_VT], rss[ENG_LLAMA]);
        if (c->bandwidth) {
            for (int e = 0; e < 2; e++) {
                const double fr = bound_fraction(c, r, e);
                if (isfinite(fr)) printf(" %.0f%% |", 100.0 * fr);
                else printf(" - |");
            }
        }
        printf("\n");
        for (int e = 0; e < 2; e++)
            if (r->st[e].err[0]) printf("  %s error: %s\n", engine_name[e], r->st[e].err);
    }
    int n_vt = 0, n_nopf = 0;
    for (int i = 0; i < n_rows; i++)
        if (rows[i].w->n_gen > 0) n_vt += rows[i].st[ENG_VT].n, n_nopf += rows[i].st[ENG_VT].n_nopf;
    if (n_vt > 0)
        printf("\nvt decode GEMMs without software prefetch for some weight type (the load-time probe, "
               "VT_PREFETCH): %d of %d decode measurements\n", n_nopf, n_vt);
}

static void json_array(FILE *f, const double *x, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%.6g", i ? ", " : "", x[i]);
    fputc(']', f);
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static const char *flash_attn_name(int flash_attn) {
    return flash_attn < 0 ? "auto" : flash_attn ? "on" : "off";
}

static void write_json(const bench_cfg *c, const row *rows, int n_rows, const char *machine, double load1,
                       const double *bw, FILE *f) {
    fprintf(f, "{\n  \"machine\": ");
    json_string(f, machine);
    fprintf(f, ",\n  \"load_avg_1m\": %.2f,\n  \"n_ctx\": %d,\n  \"n_batch\": %d,\n  \"reps\": %d,\n", load1, c->n_ctx,
            c->n_batch, c->reps);
    fprintf(f, "  \"llama_flash_attn\": \"%s\",\n  \"llama_mmap\": %s,\n",
            flash_attn_name(c->flash_attn), c->llama_mmap ? "true" : "false");
    if (bw) {
        fprintf(f, "  \"bandwidth_gbs\": {");
        for (int i = 0; i < c->n_threads; i++) fprintf(f, "%s\"%d\": %.2f", i ? ", " : "", c->threads[i], bw[i]);
        fprintf(f, "},\n");
    }
    fprintf(f, "  \"results\": [\n");
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        fprintf(f, "    {\"model\": ");
        json_string(f, r->model);
        fprintf(f, ", \"threads\": %d, \"test\": \"%s\"", r->threads, r->w->name);
        for (int e = 0; e < 2; e++) {
            const engine_stats *s = &r->st[e];
            fprintf(f, ",\n     \"%s\": {\"n\": %d", e == ENG_VT ? "vt" : "llama", s->n);
            if (s->n) {
                fprintf(f, ", \"tps_median\": %.6g, \"tps\": ", median(s->tps, s->n));
                json_array(f, s->tps, s->n);
                fprintf(f, ", \"cpu_s_per_token\": ");
                json_array(f, s->cpu_per_tok, s->n);
                fprintf(f, ", \"peak_rss_kb\": %ld, \"weight_bytes\": %llu, \"desc\": ", s->max_rss_kb,
                        (unsigned long long)s->weight_bytes);
                json_string(f, s->desc);
                if (e == ENG_VT) fprintf(f, ", \"decode_nopf\": %d", s->n_nopf);
            }
            if (s->err[0]) {
                fprintf(f, ", \"error\": ");
                json_string(f, s->err);
            }
            fprintf(f, "}");
        }
        fprintf(f, ",\n     \"ratio_vt_llama\": ");
        json_array(f, r->ratio, r->n_ratio);
        if (r->n_ratio) fprintf(f, ", \"ratio_median\": %.6g", median(r->ratio, r->n_ratio));
        fprintf(f, ", \"aa_ratios\": ");
        json_array(f, r->aa, r->n_aa);
        int n_bw = 0;
        double bws[MAX_REPS];
        for (int k = 0; k < c->reps; k++)
            if (isfinite(r->pair_bw[k])) bws[n_bw++] = r->pair_bw[k];
        if (n_bw) {
            fprintf(f, ",\n     \"pair_bandwidth_gbs\": ");
            json_array(f, bws, n_bw);
            for (int e = 0; e < 2; e++) {
                const double fr = bound_fraction(c, r, e);
                if (isfinite(fr)) fprintf(f, ", \"%s_fraction_of_bound\": %.4f", e == ENG_VT ? "vt" : "llama", fr);
            }
        }
        fprintf(f, "}%s\n", i + 1 < n_rows ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
}

/* ---- main --------------------------------------------------------------------------------- */

static int total_runs, done_runs;
static double bench_t0;

static bool tty;

/* One line per measurement on stderr: redrawn in place on a terminal. */
static meas measure_progress(engine_id id, const bench_cfg *c, row *r, const char *phase) {
    fprintf(stderr, "%s[%d/%d %.0fs] %s t=%d %s: %s %s...", tty ? "\r\033[K" : "", done_runs + 1, total_runs,
            now_s() - bench_t0, base_name(r->model), r->threads, r->w->name, phase, engine_name[id]);
    meas m = measure(id, c, r->model, r->threads, r->w);
    done_runs++;
    if (m.ok)
        fprintf(stderr, " %.2f t/s%s", m.tokens / m.wall_s, tty ? "" : "\n");
    else
        fprintf(stderr, "\n  %s: %s\n", engine_name[id], m.err);
    return m;
}

/* The folder of the run's saved depths, in $TMPDIR (or /tmp). */
static bool make_state_dir(bench_cfg *c) {
    const char *tmp = getenv("TMPDIR");
    snprintf(c->state_dir, sizeof c->state_dir, "%s/vt-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(c->state_dir)) {
        fprintf(stderr, "vt bench: cannot make a folder for the saved depths (%s): %s\n", c->state_dir,
                strerror(errno));
        c->state_dir[0] = 0;
        return false;
    }
    return true;
}

static void remove_state_dir(bench_cfg *c) {
    if (!c->state_dir[0]) return;
    DIR *d = opendir(c->state_dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        char path[512];
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", c->state_dir, de->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(c->state_dir);
    c->state_dir[0] = 0;
}

int cmd_bench(int argc, char **argv) {
    bench_cfg c;
    int code = 2;
    if (!parse_args(argc, argv, &c, &code)) return code;
    tty = isatty(2);

    char machine[512];
    machine_line(machine, sizeof machine);
    double load[3] = {0};
    if (getloadavg(load, 3) < 0) load[0] = -1;
    printf("machine: %s\nload average at start: %.2f %.2f %.2f\n", machine, load[0], load[1], load[2]);
    bool deep = false;
    for (int i = 0; i < c.n_work; i++) deep |= c.work[i].depth > 0;
    if (deep && !c.depth_prefill && !make_state_dir(&c)) return 1;
    char depth_note[128];
    if (c.depth_prefill)
        snprintf(depth_note, sizeof depth_note, "the warm-up's prompt at most n_batch tokens");
    else
        snprintf(depth_note, sizeof depth_note,
                 "the depth prefilled once per engine and thread count, then restored; the warm-up %d steps",
                 DEPTH_WARM_STEPS);
    printf("protocol: n_ctx %d, n_batch %d, %d counted pairs, one warm-up per measurement (tgN@dD: %s),"
           " a fresh process per measurement; A/A %s; llama.cpp %s (flash attention %s, mmap %s)\n",
           c.n_ctx, c.n_batch, c.reps, depth_note, c.do_aa ? "on" : "off", c.do_llama ? c.llama_dir : "missing",
           flash_attn_name(c.flash_attn), c.llama_mmap ? "on" : "off");
    const vt_rope_params *rp = c.rope.params;
    if (rp)
        printf("rope: overridden by --rope-* (type %d, freq_scale %g, freq_base %g, yarn_orig_ctx %d), both engines\n",
               (int)rp->scaling_type, (double)rp->freq_scale, (double)rp->freq_base, (int)rp->yarn_orig_ctx);
    if (load[0] > 0.5) printf("warning: the machine is not idle (load %.2f): figures are noisy\n", load[0]);

    double bw[MAX_LIST] = {0};
    const size_t bw_bytes = (size_t)1 << 30;
    if (c.bandwidth) {
        /* kept for the per-pair bounds; MADV_DONTFORK keeps it out of the
         * children, whose peak RSS would otherwise count its shared pages */
        void *buf = mmap(NULL, bw_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED || madvise(buf, bw_bytes, MADV_DONTFORK) != 0) {
            fprintf(stderr, "vt bench: cannot map 1 GiB for --bandwidth: %s\n", strerror(errno));
            return 1;
        }
        memset(buf, 1, bw_bytes);
        c.bw_buf = buf;
        c.bw_words = bw_bytes / sizeof *c.bw_buf;
        for (int i = 0; i < c.n_threads; i++) {
            bw[i] = measure_bandwidth(c.bw_buf, c.bw_words, c.threads[i]);
            printf("read bandwidth, %d thread%s: %.1f GB/s\n", c.threads[i], c.threads[i] > 1 ? "s" : "", bw[i]);
        }
    }

    int n_rows = c.n_models * c.n_threads * c.n_work;
    row *rows = calloc((size_t)n_rows, sizeof *rows);
    if (!rows) return 1;
    int per_row = c.reps * ((c.do_vt ? 1 : 0) + (c.do_llama ? 1 : 0)) + (c.do_aa ? 2 * c.reps : 0);
    total_runs = n_rows * per_row;
    bench_t0 = now_s();

    for (int mi = 0, k = 0; mi < c.n_models; mi++) {
        for (int ti = 0; ti < c.n_threads; ti++, k += c.n_work) {
            row *g = &rows[k]; /* this (model, threads): one row per workload */
            for (int wi = 0; wi < c.n_work; wi++) {
                g[wi].model = c.models[mi];
                g[wi].threads = c.threads[ti];
                g[wi].w = &c.work[wi];
            }
            if (c.interleave) {
                for (int i = 0; c.do_aa && i < c.reps; i++)
                    for (int wi = 0; wi < c.n_work; wi++) run_aa_pair(&c, &g[wi]);
                for (int i = 0; i < c.reps; i++)
                    for (int wi = 0; wi < c.n_work; wi++) run_ab_pair(&c, &g[wi], i);
            } else {
                for (int wi = 0; wi < c.n_work; wi++) {
                    for (int i = 0; c.do_aa && i < c.reps; i++) run_aa_pair(&c, &g[wi]);
                    for (int i = 0; i < c.reps; i++) run_ab_pair(&c, &g[wi], i);
                }
            }
        }
    }
    fprintf(stderr, "%sdone: %d measurements in %.0f s\n", tty ? "\r\033[K" : "", done_runs, now_s() - bench_t0);
    printf("command:");
    for (int i = 0; i < argc; i++) printf(" %s", argv[i]);
    printf("\n");
    print_table(&c, rows, n_rows);
    if (c.interleave) print_changes(&c, rows, n_rows);
    if (c.bandwidth)
        printf("\nbound = read bandwidth / bytes of weights a decode step reads (all but the other rows of the"
               " token embedding table; the KV cache not counted);"
               " the bandwidth is read before each counted decode pair, and %% of bound is the median over pairs\n");
    if (c.json_path) {
        FILE *f = strcmp(c.json_path, "-") ? fopen(c.json_path, "w") : stdout;
        if (!f) {
            fprintf(stderr, "vt bench: %s: %s\n", c.json_path, strerror(errno));
        } else {
            write_json(&c, rows, n_rows, machine, load[0], c.bandwidth ? bw : NULL, f);
            if (f != stdout) fclose(f);
        }
    }
    if (c.bw_buf) munmap(c.bw_buf, bw_bytes);
    remove_state_dir(&c);
    int failed = 0;
    for (int i = 0; i < n_rows; i++)
        for (int e = 0; e < 2; e++) failed += rows[i].st[e].err[0] != 0;
    free(rows);
    return failed ? 1 : 0;
}
