/* mm_compute throughput per weight type, shape, token count and thread count,
 * for the packed layout (mm_weight_prepare) and the file layout (dot_rows).
 * Prints a table (GB/s of weights read, GFLOP/s at 2 flops per multiply-add,
 * us per call) and one JSON line per row. Best of several timed calls, so a
 * shared machine disturbs it less; the cpu column is the process CPU time per
 * call divided by the thread count (time a thread was descheduled does not
 * count), and GB/s and GFLOP/s use the wall time. Never asserts on time.
 *
 *   bench_matmul [-t 1,2] [-n 1,128] [-T q4_0,q8_0,q4_K,q5_K,q6_K] [-s 2048x2048,...] [--rows]
 *
 * Shapes are n_out x n_in. --rows also measures the file layout. */
#include "base/fp16.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "cpu/threadpool.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t rng_next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Random quant bytes with small fp16 scales at the type's scale offsets. */
static void fill_weights(vt_dtype t, uint8_t *p, size_t bytes) {
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        const uint64_t v = rng_next();
        memcpy(p + i, &v, 8);
    }
    const quant_traits *tr = quant_traits_get(t);
    int offs[2] = {0, -1};
    if (t == VT_DTYPE_Q4_K || t == VT_DTYPE_Q5_K || t == VT_DTYPE_Q4_1 || t == VT_DTYPE_Q5_1) offs[1] = 2;
    if (t == VT_DTYPE_Q6_K) offs[0] = 208;
    const vt_f16 d = f32_to_f16(0.01f);
    for (size_t b = 0; b + tr->block_bytes <= bytes; b += tr->block_bytes)
        for (int k = 0; k < 2; k++)
            if (offs[k] >= 0) memcpy(p + b + offs[k], &d, 2);
}

typedef struct {
    const mm_weight *w;
    const void *xq;
    int64_t n_tok;
    float *y;
    tp_pool *pool;
} job;

static void compute_fn(void *ctx, int ith, int nth) {
    job *j = ctx;
    (void)nth;
    mm_compute(j->w, j->xq, j->n_tok, j->y, j->w->n_out, j->pool, ith);
}

static int parse_list(const char *s, int64_t *out, int max) {
    int n = 0;
    while (*s && n < max) {
        out[n++] = strtoll(s, (char **)&s, 10);
        if (*s == ',') s++;
        else if (*s) break;
    }
    return n;
}

int main(int argc, char **argv) {
    int64_t threads[8] = {1, 2}, toks[8] = {1, 128};
    int n_threads = 2, n_toks = 2, rows_too = 0;
    const char *types_arg = "q4_0,q8_0,q4_K,q5_K,q6_K";
    const char *shapes_arg = "2048x2048,2048x8192,8192x2048,32000x2048";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) n_threads = parse_list(argv[++i], threads, 8);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_toks = parse_list(argv[++i], toks, 8);
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) types_arg = argv[++i];
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) shapes_arg = argv[++i];
        else if (!strcmp(argv[i], "--rows")) rows_too = 1;
        else {
            fprintf(stderr, "usage: %s [-t 1,2] [-n 1,128] [-T q4_0,...] [-s 2048x2048,...] [--rows]\n", argv[0]);
            return 2;
        }
    }
    printf("kernels: %s\n", cpu_isa_name());
    printf("| type | shape (out x in) | layout | n_tok | th | us/call | cpu us/call | GB/s | GFLOP/s |\n");
    printf("|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    char types[256], shapes[512];
    snprintf(types, sizeof types, "%s", types_arg);
    for (char *ts = strtok(types, ","); ts; ts = strtok(NULL, ",")) {
        vt_dtype type = VT_DTYPE_COUNT;
        for (int t = 0; t < VT_DTYPE_COUNT; t++) {
            const quant_traits *tr = quant_traits_get((vt_dtype)t);
            if (tr && !strcmp(tr->name, ts)) type = (vt_dtype)t;
        }
        if (type == VT_DTYPE_COUNT) {
            fprintf(stderr, "unknown type %s\n", ts);
            return 2;
        }
        snprintf(shapes, sizeof shapes, "%s", shapes_arg);
        char *save = NULL;
        for (char *ss = strtok_r(shapes, ",", &save); ss; ss = strtok_r(NULL, ",", &save)) {
            int64_t n_out = 0, n_in = 0;
            if (sscanf(ss, "%lldx%lld", (long long *)&n_out, (long long *)&n_in) != 2) return 2;
            size_t rb;
            quant_row_bytes(type, n_in, &rb);
            const size_t wbytes = rb * (size_t)n_out;
            uint8_t *wd = malloc(wbytes);
            fill_weights(type, wd, wbytes);
            int64_t max_tok = 1;
            for (int i = 0; i < n_toks; i++) max_tok = toks[i] > max_tok ? toks[i] : max_tok;
            float *x = malloc(sizeof(float) * (size_t)(max_tok * n_in));
            for (int64_t i = 0; i < max_tok * n_in; i++) x[i] = (float)((rng_next() >> 40) & 0xffff) / 32768.0f - 1.0f;
            const size_t xs = mm_act_row_bytes(type, n_in);
            void *xq = malloc(xs * (size_t)max_tok);
            mm_quantize(type, x, n_in, max_tok, n_in, xq, 0, 1);
            float *y = malloc(sizeof(float) * (size_t)(max_tok * n_out));
            for (int layout = 0; layout < 1 + rows_too; layout++) {
                mm_weight w;
                mm_weight_init(&w, type, n_in, n_out, wd);
                if (layout == 0) mm_weight_prepare(&w);
                const char *lname = w.packed ? "packed" : "rows";
                if (layout == 0 && !w.packed && rows_too) continue; /* the rows pass covers it */
                for (int ti = 0; ti < n_toks; ti++)
                    for (int th = 0; th < n_threads; th++) {
                        tp_pool *pool;
                        if (tp_create((int)threads[th], &pool) != VT_OK) return 1;
                        job j = {&w, xq, toks[ti], y, pool};
                        tp_run(pool, compute_fn, &j); /* warm-up */
                        double best = 1e30, best_cpu = 1e30, spent = 0;
                        for (int rep = 0; rep < 50 && (rep < 3 || spent < 0.3); rep++) {
                            const double t0 = now_s(), c0 = cpu_s();
                            tp_run(pool, compute_fn, &j);
                            const double dt = now_s() - t0, dc = (cpu_s() - c0) / (double)threads[th];
                            spent += dt;
                            if (dt < best) best = dt;
                            if (dc < best_cpu) best_cpu = dc;
                        }
                        tp_destroy(pool);
                        const double gbs = wbytes / best / 1e9;
                        const double gflops = 2.0 * n_out * n_in * toks[ti] / best / 1e9;
                        printf("| %s | %lldx%lld | %s | %lld | %lld | %.1f | %.1f | %.2f | %.1f |\n", ts,
                               (long long)n_out, (long long)n_in, lname, (long long)toks[ti],
                               (long long)threads[th], best * 1e6, best_cpu * 1e6, gbs, gflops);
                        fprintf(stderr,
                                "{\"type\":\"%s\",\"n_out\":%lld,\"n_in\":%lld,\"layout\":\"%s\",\"n_tok\":%lld,"
                                "\"threads\":%lld,\"us\":%.2f,\"cpu_us\":%.2f,\"gbs\":%.3f,\"gflops\":%.2f}\n",
                                ts, (long long)n_out, (long long)n_in, lname, (long long)toks[ti],
                                (long long)threads[th], best * 1e6, best_cpu * 1e6, gbs, gflops);
                        fflush(stdout);
                    }
                mm_weight_free(&w);
            }
            free(wd), free(x), free(xq), free(y);
        }
    }
    return 0;
}
