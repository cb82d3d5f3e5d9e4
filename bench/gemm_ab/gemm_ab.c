/* Decode GEMM variants against each other in one process (bench/gemm_ab/gemm_ab.sh
 * builds it). Each variant is one compile of a GEMM source (a commit's file, a
 * changed constant) whose gemm_<type>_<isa> was renamed to GEMM_AB_FN(i); the
 * script passes GEMM_AB_DECLS, GEMM_AB_FNS and GEMM_AB_NAMES.
 *
 * The weights are 256 MiB of packed groups (far past any cache), read for one
 * token, the work of a decode step. Every round calls each variant once over
 * all of them, in turn, so a VM whose speed drifts by 2x within a minute moves
 * all variants alike; the figure per variant is the median over rounds of its
 * GB/s divided by the first variant's in the same round. The outputs of every
 * variant must equal the first one's bit for bit (unless GEMM_AB_NO_CHECK is
 * set: gemm_ab.sh says when that is useful).
 *
 * N_TOK (default 1, at most PACK_TOK_MAX) tokens share the read, as in a
 * decode step of that many sequences. KIB (default 262144: 256 MiB) sets the
 * weights' size: a few hundred KiB stay in L2 and measure the kernels as a
 * prefill token block runs them (each call is then repeated until 256 MiB
 * have been read, and the figure is still GB/s of weights).
 *
 *   gemm_ab TYPE N_IN ROUNDS [N_TOK [KIB]] */
#include "cpu/matmul.h"
#include "cpu/pack.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DECL(f)                                                                                    \
    void f(int64_t n_in, const void *w, int64_t n_groups, const void *x, size_t x_stride,          \
           const pack_xblock *xs, int n_tok, float *y, int64_t ldy);
GEMM_AB_DECLS
static const pack_gemm_fn fns[] = {GEMM_AB_FNS};
static const char *const names[] = {GEMM_AB_NAMES};
#define N_VAR ((int)(sizeof fns / sizeof fns[0]))
#define MAX_ROUNDS 200
#define WEIGHT_BYTES ((size_t)256 << 20)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v[0..n) and prints its median (min..max). */
static void print_spread(const char *fmt, double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    printf(fmt, v[n / 2], v[0], v[n - 1]);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: %s TYPE N_IN ROUNDS [N_TOK [KIB]]\n", argv[0]);
        return 2;
    }
    vt_dtype type = VT_DTYPE_COUNT;
    for (int t = 0; t < VT_DTYPE_COUNT; t++) {
        const quant_traits *tr = quant_traits_get((vt_dtype)t);
        if (tr && !strcmp(tr->name, argv[1])) type = (vt_dtype)t;
    }
    const int64_t n_in = atoll(argv[2]);
    const int rounds = atoi(argv[3]), n_tok = argc >= 5 ? atoi(argv[4]) : 1;
    const long long kib = argc == 6 ? atoll(argv[5]) : (long long)(WEIGHT_BYTES >> 10);
    size_t rb;
    if (type == VT_DTYPE_COUNT || n_in <= 0 || rounds < 1 || rounds > MAX_ROUNDS || n_tok < 1 ||
        n_tok > PACK_TOK_MAX || kib < 1 || kib > (long long)(WEIGHT_BYTES >> 10) ||
        !quant_row_bytes(type, n_in, &rb) || (size_t)kib << 10 < rb * PACK_ROWS) {
        fprintf(stderr,
                "gemm_ab: bad type, row length, rounds (1..%d), tokens (1..%d) or KiB (one group .. %lld)\n",
                MAX_ROUNDS, PACK_TOK_MAX, (long long)(WEIGHT_BYTES >> 10));
        return 2;
    }
    const int64_t n_out = (int64_t)(((size_t)kib << 10) / rb) / PACK_ROWS * PACK_ROWS;
    const size_t wbytes = rb * (size_t)n_out;
    const int calls = wbytes >= WEIGHT_BYTES ? 1 : (int)(WEIGHT_BYTES / wbytes);
    /* random quants; every block's fp16 scale (at its offset in the block) set to ~0.01 */
    const quant_traits *tr = quant_traits_get(type);
    const size_t d_off = type == VT_DTYPE_Q6_K ? 208 : 0;
    uint8_t *wd = malloc(wbytes);
    float *x = malloc(sizeof(float) * (size_t)(n_in * n_tok));
    const size_t x_stride = mm_act_row_bytes(type, n_in);
    void *xq = malloc(x_stride * (size_t)n_tok);
    pack_xblock *xs = malloc(sizeof(pack_xblock) * (size_t)(n_in / 32 * n_tok));
    const size_t y_bytes = sizeof(float) * (size_t)(n_out * n_tok);
    float *y = malloc(y_bytes), *y0 = malloc(y_bytes);
    if (!wd || !x || !xq || !xs || !y || !y0) return 1;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < wbytes; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        wd[i] = (uint8_t)(s >> 56);
    }
    for (size_t b = 0; b + tr->block_bytes <= wbytes; b += tr->block_bytes) wd[b + d_off] = 0x1f, wd[b + d_off + 1] = 0x20;
    mm_weight w;
    if (mm_weight_init(&w, type, n_in, n_out, wd) != VT_OK || mm_weight_prepare(&w) != VT_OK || !w.packed) {
        fprintf(stderr, "gemm_ab: %s has no packed layout on this CPU\n", tr->name);
        return 1;
    }
    free(wd);
    for (int64_t i = 0; i < n_in * n_tok; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    mm_quantize(type, x, n_in, n_tok, n_in, xq, 0, 1);
    if (pack_needs_xblocks(type)) pack_xblocks(type, xq, x_stride, n_tok, n_in / 32, xs);

    static double gbs[16][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        for (int v = 0; v < N_VAR; v++) {
            const double t0 = now_s();
            for (int c = 0; c < calls; c++)
                fns[v](n_in, w.packed, n_out / PACK_ROWS, xq, x_stride, xs, n_tok, y, n_out);
            gbs[v][r] = (double)wbytes * calls / (now_s() - t0) / 1e9;
            if (v == 0) memcpy(y0, y, y_bytes);
            else if (!getenv("GEMM_AB_NO_CHECK") && memcmp(y0, y, y_bytes) != 0) {
                fprintf(stderr, "gemm_ab: %s computes other bits than %s\n", names[v], names[0]);
                return 1;
            }
        }
    printf("%s, rows of %lld, %.2f MiB of groups (%d calls a round), %d token%s, %d rounds\n", tr->name,
           (long long)n_in, (double)wbytes / 1048576.0, calls, n_tok, n_tok > 1 ? "s" : "", rounds);
    for (int v = 0; v < N_VAR; v++) {
        double g[MAX_ROUNDS], ratio[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) g[r] = gbs[v][r], ratio[r] = gbs[v][r] / gbs[0][r];
        printf("  %-10s", names[v]);
        print_spread("GB/s %6.2f (%.2f..%.2f)", g, rounds);
        print_spread("   / first: %.3f (%.3f..%.3f)\n", ratio, rounds);
    }
    mm_weight_free(&w);
    return 0;
}
