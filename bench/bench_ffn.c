/* The gated FFN's first half two ways, alternated in one process:
 *
 *   split: mm_compute_multi on {gate, up} into two float arrays, a barrier, then
 *          silu_mul and the quantization for the down projection (the pass
 *          before mm_compute_glu existed, two steps);
 *   fused: mm_compute_glu (one step; h never leaves the cache as floats).
 *
 * Both give the same bytes (checked once). The weights of L layers (default 4:
 * 75 MiB of Q4_0 at 2048 x 8192, past the L3) are used in turn, as in a pass.
 * Every round times each variant once over all layers, so a VM whose speed
 * drifts moves both alike; the figure is the median over rounds of us per
 * token and of fused / split within a round.
 *
 *   bench_ffn [-T q4_0|q8_0|q4_K] [-n TOKENS] [-t THREADS] [-r ROUNDS] [-L LAYERS]
 *             [-d N_IN] [-f N_FF]
 *
 * q4_K: gate and up in Q4_K, down in Q6_K (h in Q8_K), as in Q4_K_M files. */
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

static uint64_t rng = 0x243f6a8885a308d3ull;
static float rng_uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

typedef struct {
    const mm_weight *gate, *up;
    vt_dtype down_type;
    const void *xq;
    int64_t n_tok, n_ff;
    float *g, *u;
    uint8_t *hq;
    tp_pool *pool;
    int fused;
} ffn_job;

static void ffn_step(void *ctx, int ith, int nth) {
    const ffn_job *j = ctx;
    if (j->fused) {
        mm_compute_glu(j->gate, j->up, j->down_type, j->xq, j->n_tok, j->hq, j->pool, ith);
        return;
    }
    const mm_weight *ws[2] = {j->gate, j->up};
    float *ys[2] = {j->g, j->u};
    const int64_t ld[2] = {j->n_ff, j->n_ff}, ff = j->n_ff;
    mm_compute_multi(ws, ys, ld, 2, j->xq, j->n_tok, j->pool, ith);
    tp_barrier(j->pool);
    /* column blocks of 256, as the split pass did, so decode spreads too */
    const int64_t cc = ff % 256 == 0 ? 256 : ff, n_cb = ff / cc;
    const quant_traits *ht = quant_traits_get(quant_traits_get(j->down_type)->dot_type);
    const size_t rb = mm_act_row_bytes(j->down_type, ff), cb = (size_t)(cc / ht->block_elems) * ht->block_bytes;
    int64_t i0, i1;
    tp_range(j->n_tok * n_cb, 1, ith, nth, &i0, &i1);
    for (int64_t it = i0; it < i1; it++) {
        const int64_t t = it / n_cb, c0 = (it % n_cb) * cc;
        cpu_kernels_get()->silu_mul(j->g + t * ff + c0, j->u + t * ff + c0, cc);
        mm_quantize(j->down_type, j->g + t * ff + c0, cc, 1, cc, j->hq + (size_t)t * rb + (size_t)(c0 / cc) * cb, 0, 1);
    }
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *type_name = "q4_0";
    int64_t n_tok = 128, n_in = 2048, ff = 8192;
    int n_threads = 1, rounds = 9, n_layers = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-T") && i + 1 < argc) type_name = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_tok = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-L") && i + 1 < argc) n_layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-d") && i + 1 < argc) n_in = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) ff = strtoll(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [-T q4_0|q8_0|q4_K] [-n TOKENS] [-t THREADS] [-r ROUNDS] [-L LAYERS] [-d N_IN] [-f N_FF]\n", argv[0]);
            return 2;
        }
    }
    vt_dtype type, down;
    if (!strcmp(type_name, "q4_0")) type = down = VT_DTYPE_Q4_0;
    else if (!strcmp(type_name, "q8_0")) type = down = VT_DTYPE_Q8_0;
    else if (!strcmp(type_name, "q4_K")) type = VT_DTYPE_Q4_K, down = VT_DTYPE_Q6_K;
    else {
        fprintf(stderr, "bench_ffn: -T q4_0, q8_0 or q4_K\n");
        return 2;
    }
    if (n_tok < 1 || n_threads < 1 || rounds < 1 || n_layers < 1 || rounds > 1000) return 2;
    const quant_traits *tr = quant_traits_get(type);
    size_t rb;
    if (!quant_row_bytes(type, n_in, &rb) || ff % 256) {
        fprintf(stderr, "bench_ffn: bad shape\n");
        return 2;
    }
    /* weights: one quantized random row repeated would be cached by nothing but
     * the model; quantize a few rows and tile them over the layers */
    enum { N_SRC = 64 };
    uint8_t *src = malloc(rb * N_SRC);
    float *row = malloc(n_in * sizeof(float));
    for (int r = 0; r < N_SRC; r++) {
        for (int64_t k = 0; k < n_in; k++) row[k] = rng_uniform();
        tr->quant_ref(row, src + r * rb, n_in);
    }
    mm_weight *w = calloc(2 * n_layers, sizeof *w);
    uint8_t **wd = calloc(2 * n_layers, sizeof *wd);
    for (int i = 0; i < 2 * n_layers; i++) {
        wd[i] = malloc(rb * ff);
        for (int64_t o = 0; o < ff; o++) memcpy(wd[i] + o * rb, src + ((o * 7 + i) % N_SRC) * rb, rb);
        if (mm_weight_init(&w[i], type, n_in, ff, wd[i]) != VT_OK || mm_weight_prepare(&w[i]) != VT_OK) {
            fprintf(stderr, "bench_ffn: %s\n", vt_last_error());
            return 1;
        }
    }
    const size_t xs = mm_act_row_bytes(type, n_in), hs = mm_act_row_bytes(down, ff);
    float *x = malloc(n_tok * n_in * sizeof(float));
    for (int64_t k = 0; k < n_tok * n_in; k++) x[k] = rng_uniform();
    uint8_t *xq = malloc(xs * n_tok), *hq[2] = {malloc(hs * n_tok), malloc(hs * n_tok)};
    mm_quantize(type, x, n_in, n_tok, n_in, xq, 0, 1);
    float *g = malloc(n_tok * ff * sizeof(float)), *u = malloc(n_tok * ff * sizeof(float));
    tp_pool *pool;
    if (tp_create(n_threads, &pool) != VT_OK) return 1;

    double *us[2], *ratio = malloc(rounds * sizeof(double));
    us[0] = malloc(rounds * sizeof(double));
    us[1] = malloc(rounds * sizeof(double));
    for (int r = -1; r < rounds; r++) { /* round -1: warm-up and the bit check */
        double t[2];
        for (int k = 0; k < 2; k++) {
            const int fused = (r & 1) ? 1 - k : k; /* alternate which goes first */
            const double t0 = now_s();
            for (int l = 0; l < n_layers; l++) {
                ffn_job j = {&w[2 * l], &w[2 * l + 1], down, xq, n_tok, ff, g, u, hq[fused], pool, fused};
                tp_run(pool, ffn_step, &j);
            }
            t[fused] = now_s() - t0;
        }
        if (r < 0) {
            if (memcmp(hq[0], hq[1], hs * n_tok)) {
                fprintf(stderr, "bench_ffn: fused and split outputs differ\n");
                return 1;
            }
            continue;
        }
        for (int k = 0; k < 2; k++) us[k][r] = t[k] * 1e6 / (double)(n_tok * n_layers);
        ratio[r] = t[1] / t[0];
    }
    qsort(us[0], rounds, sizeof(double), cmp_double);
    qsort(us[1], rounds, sizeof(double), cmp_double);
    qsort(ratio, rounds, sizeof(double), cmp_double);
    printf("%s %lldx%lld, %lld tokens, %d threads, %d layers, %d rounds (%s): us per token per layer "
           "split %.2f, fused %.2f; fused / split %.3f (%.3f..%.3f)\n",
           type_name, (long long)ff, (long long)n_in, (long long)n_tok, n_threads, n_layers, rounds,
           cpu_isa_name(), us[0][rounds / 2], us[1][rounds / 2], ratio[rounds / 2], ratio[0], ratio[rounds - 1]);
    tp_destroy(pool);
    for (int i = 0; i < 2 * n_layers; i++) mm_weight_free(&w[i]), free(wd[i]);
    free(w), free(wd), free(src), free(row), free(x), free(xq), free(hq[0]), free(hq[1]), free(g), free(u);
    free(us[0]), free(us[1]), free(ratio);
    return 0;
}
