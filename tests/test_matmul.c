/* cpu/matmul: y = x W^T through the dispatch table, against the _ref path, and
 * bit-identical for any thread count.
 *
 * - Values: every output equals the type's _ref dot of the ref-quantized
 *   activation row with the weight row within the test_kernels bounds
 *   (|y - ref| <= 2e-6 * S quantized, 1e-5 * S float; S = sum |w_i x_i|).
 * - Determinism: the same step (mm_quantize, tp_barrier, mm_compute) run under
 *   pools of 1, 2, 3 and 4 threads gives the same bytes; mm_compute_multi over
 *   three weights gives the same bytes as three mm_compute calls.
 * - Shapes: odd n_out (37, 53: partial 16-row groups), n_tok 1..9 (decode, and
 *   every tail past the 4-token tile), strides ldx > n_in and ldy > n_out.
 * - Packed layouts (cpu/pack.h): mm_weight_prepare packs exactly the types the
 *   dispatch table has a GEMM for; a long-row case (n_in 8192, n_out 387, 37
 *   tokens) crosses the token blocks and weight chunks of the packed path and
 *   must give, for every token, the bytes of a 1-token step (so batched and
 *   token-by-token evaluation agree exactly), for 1, 2 and 3 threads, the same
 *   bytes for each thread count, and every output written. With 2 and 3
 *   threads each share of the 1-token steps is taken in several items
 *   (tp_take); the file-layout types F16 and IQ4_NL go through the same case,
 *   and Q5_0 also at n_in 13696 (GLM-4's FFN width, not a multiple of 256: the
 *   rows llama.cpp's K-quant mixes store in Q5_0), 428 blocks a row.
 * - Fused gate/up (mm_compute_glu): the bytes of mm_compute_multi on {gate, up},
 *   silu_mul and mm_quantize, for 1..4 threads, h blocks of Q8_0, Q8_K and F16,
 *   partial row groups, token blocks and tiles with tails, file-layout weights,
 *   and a decode step long enough for shares of several items; and the same
 *   bytes in pieces on one thread (mm_compute_glu_act_cols by columns,
 *   mm_compute_rows by rows), as the MoE step runs a shared expert.
 * - Arena (mm_arena): weights packed into one arena give the bytes of weights
 *   packed alone, take exactly mm_weight_packed_size each (0 for the file
 *   layout), and an arena short by a byte refuses the last one with
 *   VT_E_NOMEM and leaves it unpacked; mm_weight_free leaves arena memory to
 *   mm_arena_free (under ASan a free of it would be reported).
 * - Mixed types in one mm_compute_multi decode step (Q4_0, Q8_0, MXFP4, Q5_0:
 *   one activation type, four xblock offsets): each weight's bytes of mm_compute.
 * - Expert slices: mm_weights over the experts of one 3-D tensor, packed into
 *   an arena, compute the bytes of each expert's rows on their own.
 * - Prefetch choice (mm_probe_prefetch): it belongs to each weight: a probe of
 *   one model's weights leaves another's choice alone, a second probe of the
 *   same weights changes nothing, VT_PREFETCH=hw sets the undecided ones.
 * - A late thread: a 2-thread mm_compute_multi and mm_compute_glu step whose
 *   second thread starts only once the first is out of work: the first has
 *   then written every output (it took the second's share, which a static
 *   split cannot), and the bytes are those of one thread. Prefill (40 tokens:
 *   three weights of two types; gate/up) and decode (1 and 4 tokens: Q4_0 /
 *   Q8_0 weights, the Q4_K / Q6_K mix, F16 in the file layout, gate/up with h
 *   in Q8_0 and Q8_K), whose shares are taken in items too.
 * - Pairing of groups: each packed GEMM of the dispatch table of every tier up
 *   to the selected one (gemm, cached, nopf), called directly on 1, 2, 3 and 5
 *   groups of distinct rows (a span
 *   that starts at the second group of six) for 1..PACK_TOK_MAX tokens, gives
 *   the bytes of its pack_gemm_ref twin and leaves the outputs around the span
 *   untouched: the kernels that read group g together with g + n/2 of a call
 *   must neither skip nor double a group, nor reach past the call's groups.
 * - Errors: bad row length, unknown and activation-only types. */
#include "base/size.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "cpu/pack.h"
#include "cpu/threadpool.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "test.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static float rng_uniform(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((rng_state >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

typedef struct {
    const mm_weight *const *ws;
    float *const *ys;
    const int64_t *ldys;
    int n_w;
    const float *x;
    int64_t ldx, n_tok;
    void *xq;
    tp_pool *pool;
    int multi; /* 1: one mm_compute_multi; 0: one mm_compute per weight */
} step_ctx;

static void step_fn(void *vctx, int ith, int nth) {
    step_ctx *c = vctx;
    mm_quantize(c->ws[0]->type, c->x, c->ldx, c->n_tok, c->ws[0]->n_in, c->xq, ith, nth);
    tp_barrier(c->pool);
    if (c->multi) {
        mm_compute_multi(c->ws, c->ys, c->ldys, c->n_w, c->xq, c->n_tok, c->pool, ith);
    } else {
        for (int i = 0; i < c->n_w; i++) {
            if (i > 0) tp_barrier(c->pool); /* each call is a step of its own (matmul.h) */
            mm_compute(c->ws[i], c->xq, c->n_tok, c->ys[i], c->ldys[i], c->pool, ith);
        }
    }
}

#define N_W 3

static void check_type(vt_dtype type, tp_pool *const *pools, int n_pools) {
    const quant_traits *tr = quant_traits_get(type);
    const quant_traits *at = quant_traits_get(tr->dot_type);
    const int64_t n_in = tr->block_elems >= 256 ? 512 : 96;
    const int64_t ldx = n_in + 3;
    const int64_t n_outs[N_W] = {37, 53, 16};
    const int64_t toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 20, 24, 37}; /* 16+: wide tiles, narrow tails */
    size_t row_bytes;
    VT_ASSERT(quant_row_bytes(type, n_in, &row_bytes));

    mm_weight w[N_W];
    const mm_weight *wp[N_W];
    uint8_t *wdata[N_W];
    for (int i = 0; i < N_W; i++) {
        wdata[i] = malloc(row_bytes * n_outs[i]);
        float *f = malloc(n_in * sizeof(float));
        for (int64_t o = 0; o < n_outs[i]; o++) {
            for (int64_t k = 0; k < n_in; k++) f[k] = rng_uniform();
            tr->quant_ref(f, wdata[i] + o * row_bytes, n_in);
        }
        free(f);
        CHECK_OK(mm_weight_init(&w[i], type, n_in, n_outs[i], wdata[i]));
        CHECK_OK(mm_weight_prepare(&w[i]));
        CHECK((w[i].packed != NULL) == (cpu_kernels_get()->gemm[type] != NULL));
        wp[i] = &w[i];
    }
    const size_t act_stride = mm_act_row_bytes(type, n_in);
    size_t act_min;
    VT_ASSERT(quant_row_bytes(tr->dot_type, n_in, &act_min));
    CHECK(act_stride >= act_min && act_stride % 64 == 0);

    int bad_value = 0, bad_det = 0, bad_multi = 0;
    for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
        const int64_t n_tok = toks[ti];
        float *x = malloc(n_tok * ldx * sizeof(float));
        for (int64_t k = 0; k < n_tok * ldx; k++) x[k] = rng_uniform() * 2;
        void *xq = malloc(act_stride * n_tok);
        float *y[2][N_W]; /* [0]: the 1-thread result, [1]: the current one */
        int64_t ldys[N_W];
        for (int i = 0; i < N_W; i++) {
            ldys[i] = n_outs[i] + 5;
            y[0][i] = malloc(n_tok * ldys[i] * sizeof(float));
            y[1][i] = malloc(n_tok * ldys[i] * sizeof(float));
        }
        for (int p = 0; p < n_pools; p++) {
            /* 2 and 4 threads: the decode kernels without software prefetch, same bits */
            for (int i = 0; i < N_W; i++) mm_weight_set_prefetch(&w[i], p % 2 == 0);
            for (int multi = 0; multi < 2; multi++) {
                const int slot = (p == 0 && multi == 0) ? 0 : 1;
                for (int i = 0; i < N_W; i++) memset(y[slot][i], 0xff, n_tok * ldys[i] * sizeof(float));
                step_ctx c = {wp, y[slot], ldys, N_W, x, ldx, n_tok, xq, pools[p], multi};
                tp_run(pools[p], step_fn, &c);
                if (slot == 0) continue;
                for (int i = 0; i < N_W; i++)
                    for (int64_t t = 0; t < n_tok; t++)
                        if (memcmp(y[0][i] + t * ldys[i], y[1][i] + t * ldys[i], n_outs[i] * sizeof(float))) {
                            if (multi) bad_multi++;
                            else bad_det++;
                        }
            }
        }
        for (int i = 0; i < N_W; i++) mm_weight_set_prefetch(&w[i], true);
        /* values of the 1-thread result against the scalar reference */
        uint8_t *xr = malloc(act_min);
        float *wd = malloc(n_in * sizeof(float)), *xd = malloc(n_in * sizeof(float));
        for (int64_t t = 0; t < n_tok; t++) {
            at->quant_ref(x + t * ldx, xr, n_in);
            at->dequant_ref(xr, xd, n_in);
            for (int i = 0; i < N_W; i++)
                for (int64_t o = 0; o < n_outs[i]; o++) {
                    const uint8_t *wr = wdata[i] + o * row_bytes;
                    const float e = tr->dot_ref(n_in, wr, xr);
                    tr->dequant_ref(wr, wd, n_in);
                    double S = 0;
                    for (int64_t k = 0; k < n_in; k++) S += fabs((double)wd[k] * xd[k]);
                    const double tol = (tr->quantized ? 2e-6 : 1e-5) * S + 1e-30;
                    const float a = y[0][i][t * ldys[i] + o];
                    if (!(fabs((double)a - e) <= tol)) {
                        if (bad_value < 3)
                            fprintf(stderr, "  %s n_tok %lld w%d out %lld: %.9g vs ref %.9g\n", tr->name,
                                    (long long)n_tok, i, (long long)o, a, e);
                        bad_value++;
                    }
                }
        }
        free(xr), free(wd), free(xd), free(x), free(xq);
        for (int i = 0; i < N_W; i++) free(y[0][i]), free(y[1][i]);
    }
    CHECK_MSG(bad_value == 0, "%s: %d outputs off the ref", tr->name, bad_value);
    CHECK_MSG(bad_det == 0, "%s: %d rows differ between thread counts", tr->name, bad_det);
    CHECK_MSG(bad_multi == 0, "%s: %d rows differ between mm_compute_multi and mm_compute", tr->name,
              bad_multi);
    for (int i = 0; i < N_W; i++) {
        mm_weight_free(&w[i]);
        free(wdata[i]);
    }
}

/* Long rows through the packed path's blocking and a decode step's items:
 * every token of a 37-token step equals a 1-token step bit for bit, the same
 * for 1..3 threads, and the ref within bounds. */
static void check_blocking(vt_dtype type, int64_t n_in, tp_pool *const *pools) {
    const quant_traits *tr = quant_traits_get(type);
    const quant_traits *at = quant_traits_get(tr->dot_type);
    /* 25 units of 16 rows: at 2 and 3 threads, shares of several decode items for
     * every type; 101 tokens: at least two full token blocks and a tail, even for
     * long rows, whose blocks hold MM_TOK_BLOCK_MIN (matmul.c) tokens */
    const int64_t n_out = 387, n_tok = 101;
    size_t rb, act_min;
    VT_ASSERT(quant_row_bytes(type, n_in, &rb) && quant_row_bytes(tr->dot_type, n_in, &act_min));
    uint8_t *wd = malloc(rb * n_out);
    float *f = malloc(n_in * sizeof(float));
    for (int64_t o = 0; o < n_out; o++) {
        for (int64_t k = 0; k < n_in; k++) f[k] = rng_uniform();
        tr->quant_ref(f, wd + o * rb, n_in);
    }
    mm_weight w;
    CHECK_OK(mm_weight_init(&w, type, n_in, n_out, wd));
    CHECK_OK(mm_weight_prepare(&w));
    const mm_weight *wp[1] = {&w};
    float *x = malloc(n_tok * n_in * sizeof(float));
    for (int64_t k = 0; k < n_tok * n_in; k++) x[k] = rng_uniform() * 2;
    const size_t xs = mm_act_row_bytes(type, n_in);
    void *xq = malloc(xs * n_tok);
    const size_t y_bytes = n_tok * n_out * sizeof(float);
    float *y1 = malloc(y_bytes), *yb = malloc(y_bytes), *y_first = malloc(y_bytes);
    const int64_t ld[1] = {n_out};
    int bad_tok = 0, bad_threads = 0, bad_value = 0;
    for (int p = 0; p < 3; p++) {
        /* the whole step, then each token alone (rows 0 of x, y shifted);
         * NaN bytes first, so an output no thread wrote cannot match */
        memset(yb, 0xff, y_bytes);
        memset(y1, 0xff, y_bytes);
        float *ys[1] = {yb};
        step_ctx c = {wp, ys, ld, 1, x, n_in, n_tok, xq, pools[p], 0};
        tp_run(pools[p], step_fn, &c);
        /* every token alone at 1 thread; at 2 and 3 a 1-token step splits its
         * rows the same way whatever the token, so the first, middle and last
         * show it (the full set at every count made this test the longest of
         * the qemu job) */
        bool tok_ok = true;
        for (int64_t t = 0; t < n_tok; t++) {
            if (p > 0 && t != 0 && t != n_tok / 2 && t != n_tok - 1) continue;
            float *ys1[1] = {y1 + t * n_out};
            step_ctx c1 = {wp, ys1, ld, 1, x + t * n_in, n_in, 1, xq, pools[p], 0};
            tp_run(pools[p], step_fn, &c1);
            tok_ok &= !memcmp(y1 + t * n_out, yb + t * n_out, n_out * sizeof(float));
        }
        if (!tok_ok) bad_tok++;
        if (p == 0) memcpy(y_first, yb, y_bytes);
        else if (memcmp(y_first, yb, y_bytes)) bad_threads++;
    }
    uint8_t *xr = malloc(act_min);
    float *wf = malloc(n_in * sizeof(float)), *xd = malloc(n_in * sizeof(float));
    for (int64_t t = 0; t < n_tok; t += 6) {
        at->quant_ref(x + t * n_in, xr, n_in);
        at->dequant_ref(xr, xd, n_in);
        for (int64_t o = t % 5; o < n_out; o += 5) { /* a sample of rows: the ref is slow */
            const float e = tr->dot_ref(n_in, wd + o * rb, xr);
            tr->dequant_ref(wd + o * rb, wf, n_in);
            double S = 0;
            for (int64_t k = 0; k < n_in; k++) S += fabs((double)wf[k] * xd[k]);
            if (!(fabs((double)yb[t * n_out + o] - e) <= 2e-6 * S)) bad_value++;
        }
    }
    CHECK_MSG(bad_tok == 0, "%s, n_in %lld: a %lld-token step differs from 1-token steps (%d thread counts)",
              tr->name, (long long)n_in, (long long)n_tok, bad_tok);
    CHECK_MSG(bad_threads == 0, "%s, n_in %lld: long rows differ between 1 thread and %d other thread counts",
              tr->name, (long long)n_in, bad_threads);
    CHECK_MSG(bad_value == 0, "%s, n_in %lld: %d long-row outputs off the ref", tr->name, (long long)n_in,
              bad_value);
    mm_weight_free(&w);
    free(wd), free(f), free(x), free(xq), free(y1), free(yb), free(y_first), free(xr), free(wf), free(xd);
}

typedef struct {
    const mm_weight *gate, *up;
    vt_dtype down_type;
    const float *x;
    int64_t n_tok;
    void *xq, *hq;
    tp_pool *pool;
} glu_ctx;

static void glu_step(void *vctx, int ith, int nth) {
    glu_ctx *c = vctx;
    mm_quantize(c->gate->type, c->x, c->gate->n_in, c->n_tok, c->gate->n_in, c->xq, ith, nth);
    tp_barrier(c->pool);
    mm_compute_glu(c->gate, c->up, c->down_type, c->xq, c->n_tok, c->hq, c->pool, ith);
}

/* mm_compute_glu against the unfused steps, byte for byte. */
static void check_glu(vt_dtype type, vt_dtype down_type, int64_t n_in, int64_t ff, int64_t n_tok,
                      tp_pool *const *pools) {
    const quant_traits *tr = quant_traits_get(type);
    size_t rb;
    VT_ASSERT(quant_row_bytes(type, n_in, &rb));
    mm_weight w[2];
    uint8_t *wd[2];
    float *f = malloc(n_in * sizeof(float));
    for (int i = 0; i < 2; i++) {
        wd[i] = malloc(rb * ff);
        for (int64_t o = 0; o < ff; o++) {
            for (int64_t k = 0; k < n_in; k++) f[k] = rng_uniform();
            tr->quant_ref(f, wd[i] + o * rb, n_in);
        }
        CHECK_OK(mm_weight_init(&w[i], type, n_in, ff, wd[i]));
        CHECK_OK(mm_weight_prepare(&w[i]));
    }
    float *x = malloc(n_tok * n_in * sizeof(float));
    for (int64_t k = 0; k < n_tok * n_in; k++) x[k] = rng_uniform() * 2;
    const size_t xs = mm_act_row_bytes(type, n_in), hs = mm_act_row_bytes(down_type, ff);
    void *xq = malloc(xs * n_tok);
    uint8_t *want = calloc(n_tok, hs), *got = malloc(n_tok * hs);
    /* the unfused steps on one thread */
    float *g = malloc(n_tok * ff * sizeof(float)), *u = malloc(n_tok * ff * sizeof(float));
    const mm_weight *ws[2] = {&w[0], &w[1]};
    float *ys[2] = {g, u};
    const int64_t ld[2] = {ff, ff};
    step_ctx c = {ws, ys, ld, 2, x, n_in, n_tok, xq, pools[0], 1};
    tp_run(pools[0], step_fn, &c);
    for (int64_t t = 0; t < n_tok; t++) {
        cpu_kernels_get()->silu_mul(g + t * ff, u + t * ff, ff);
        mm_quantize(down_type, g + t * ff, ff, 1, ff, want + t * hs, 0, 1);
    }
    size_t hmin;
    VT_ASSERT(quant_row_bytes(quant_traits_get(down_type)->dot_type, ff, &hmin));
    int bad = 0;
    for (int p = 0; p < 4; p++) {
        memset(got, 0xa5, n_tok * hs);
        glu_ctx gc = {&w[0], &w[1], down_type, x, n_tok, xq, got, pools[p]};
        tp_run(pools[p], glu_step, &gc);
        for (int64_t t = 0; t < n_tok; t++)
            if (memcmp(want + t * hs, got + t * hs, hmin)) bad++;
    }
    CHECK_MSG(bad == 0, "%s -> %s, n_in %lld, ff %lld, %lld tokens: %d rows of h differ from the unfused steps",
              tr->name, quant_traits_get(down_type)->name, (long long)n_in, (long long)ff,
              (long long)n_tok, bad);
    /* in pieces of 1, 2, 3, ... units on the calling thread: h by columns
     * (mm_compute_glu_act_cols), up by rows (mm_compute_rows); the same bytes */
    memset(got, 0xa5, n_tok * hs);
    const int64_t unit = mm_glu_unit(down_type);
    for (int64_t c0 = 0, k = 1; c0 < ff; c0 += k * unit, k++)
        mm_compute_glu_act_cols(&w[0], &w[1], cpu_kernels_get()->silu_mul, down_type, xq, n_tok, got, c0,
                                c0 + k * unit < ff ? c0 + k * unit : ff);
    bad = 0;
    for (int64_t t = 0; t < n_tok; t++)
        if (memcmp(want + t * hs, got + t * hs, hmin)) bad++;
    float *u2 = malloc(n_tok * ff * sizeof(float));
    for (int64_t r0 = 0, k = 1; r0 < ff; r0 += k * 16, k++)
        mm_compute_rows(&w[1], xq, n_tok, u2, ff, r0, r0 + k * 16 < ff ? r0 + k * 16 : ff);
    CHECK_MSG(bad == 0 && memcmp(u2, u, n_tok * ff * sizeof(float)) == 0,
              "%s -> %s, ff %lld, %lld tokens: in pieces, %d rows of h differ (up's rows %s)", tr->name,
              quant_traits_get(down_type)->name, (long long)ff, (long long)n_tok, bad,
              memcmp(u2, u, n_tok * ff * sizeof(float)) ? "differ" : "agree");
    free(u2);
    for (int i = 0; i < 2; i++) mm_weight_free(&w[i]), free(wd[i]);
    free(f), free(x), free(xq), free(want), free(got), free(g), free(u);
}

static void check_errors(void) {
    mm_weight w;
    uint8_t buf[64] = {0};
    CHECK(mm_weight_init(&w, VT_DTYPE_Q4_0, 48, 1, buf) == VT_E_FORMAT);
    CHECK(strstr(vt_last_error(), "48") != NULL);
    CHECK(mm_weight_init(&w, VT_DTYPE_Q4_K, 32, 1, buf) == VT_E_FORMAT);
    CHECK(mm_weight_init(&w, (vt_dtype)5, 32, 1, buf) == VT_E_UNSUPPORTED);
    CHECK(mm_weight_init(&w, VT_DTYPE_Q8_K, 256, 1, buf) == VT_E_UNSUPPORTED);
    CHECK(mm_weight_init(&w, VT_DTYPE_Q8_0, 0, 1, buf) == VT_E_RANGE);
    CHECK(mm_weight_init(&w, VT_DTYPE_F32, INT64_MAX / 2, 8, buf) == VT_E_RANGE);
    CHECK_OK(mm_weight_init(&w, VT_DTYPE_Q8_0, 64, 1, buf));
    CHECK(w.row_bytes == 68 && w.packed == NULL);
    CHECK(mm_act_row_bytes(VT_DTYPE_Q4_K, 256) == size_align_up(sizeof(block_q8_K), 64));
    CHECK(mm_act_row_bytes(VT_DTYPE_Q4_0, 33) == 0);
}

/* Four weights of mixed types (one in the file layout) in an arena against the
 * same weights packed alone, at 2 threads and 3 tokens. */
static void check_arena(tp_pool *pool) {
    enum { N = 4 };
    static const vt_dtype types[N] = {VT_DTYPE_Q4_0, VT_DTYPE_Q4_K, VT_DTYPE_IQ4_NL, VT_DTYPE_Q6_K};
    const int64_t n_in = 512, n_out = 37, n_tok = 3;
    uint8_t *wd[N];
    mm_weight alone[N], in[N], short_w;
    size_t need = 0;
    for (int i = 0; i < N; i++) {
        const quant_traits *tr = quant_traits_get(types[i]);
        size_t rb;
        VT_ASSERT(quant_row_bytes(types[i], n_in, &rb));
        wd[i] = malloc(rb * n_out);
        float f[512];
        for (int64_t o = 0; o < n_out; o++) {
            for (int64_t k = 0; k < n_in; k++) f[k] = rng_uniform();
            tr->quant_ref(f, wd[i] + o * rb, n_in);
        }
        CHECK_OK(mm_weight_init(&alone[i], types[i], n_in, n_out, wd[i]));
        CHECK_OK(mm_weight_prepare(&alone[i]));
        CHECK_OK(mm_weight_init(&in[i], types[i], n_in, n_out, wd[i]));
        const size_t sz = mm_weight_packed_size(&in[i]);
        CHECK_MSG((sz > 0) == (alone[i].packed != NULL) && sz % 64 == 0,
                  "%s: packed size %zu against a packed copy %p", tr->name, sz, alone[i].packed);
        need += sz;
    }
    mm_arena a;
    CHECK_OK(mm_arena_init(&a, need));
    for (int i = 0; i < N; i++) CHECK_OK(mm_weight_prepare_in(&in[i], &a));
    CHECK_MSG(a.used == need, "arena: %zu bytes used, %zu expected", a.used, need);
    float x[3 * 512], y0[3 * 37], y1[3 * 37];
    for (int64_t k = 0; k < n_tok * n_in; k++) x[k] = rng_uniform();
    void *xq = malloc(mm_act_row_bytes(VT_DTYPE_Q4_K, n_in) * n_tok);
    const int64_t ld[1] = {n_out};
    for (int i = 0; i < N; i++) {
        const mm_weight *w0[1] = {&alone[i]}, *w1[1] = {&in[i]};
        float *ys0[1] = {y0}, *ys1[1] = {y1};
        memset(y0, 0xff, sizeof y0);
        memset(y1, 0, sizeof y1);
        step_ctx c0 = {w0, ys0, ld, 1, x, n_in, n_tok, xq, pool, 0}, c1 = {w1, ys1, ld, 1, x, n_in, n_tok, xq, pool, 0};
        tp_run(pool, step_fn, &c0);
        tp_run(pool, step_fn, &c1);
        CHECK_MSG(!memcmp(y0, y1, sizeof y0), "%s: in an arena, outputs differ from packed alone",
                  quant_traits_get(types[i])->name);
    }
    /* room for all but the last byte of the last weight (where it is packed:
     * the ref and plain NEON tiers pack nothing) */
    CHECK_OK(mm_weight_init(&short_w, types[N - 1], n_in, n_out, wd[N - 1]));
    const size_t last = mm_weight_packed_size(&short_w);
    if (last > 0) {
        mm_arena small;
        CHECK_OK(mm_arena_init(&small, last - 1));
        CHECK(mm_weight_prepare_in(&short_w, &small) == VT_E_NOMEM && short_w.packed == NULL);
        mm_arena_free(&small);
    }
    for (int i = 0; i < N; i++) mm_weight_free(&alone[i]), mm_weight_free(&in[i]), free(wd[i]);
    mm_arena_free(&a);
    CHECK(a.base == NULL && a.cap == 0);
    free(xq);
}

/* The experts of a 3-D tensor (ne = [n_in, n_out, n_expert]) as MoE runs
 * them: one mm_weight per expert on its slice at data + e * n_out * row_bytes,
 * packed into one arena, give the bytes of each expert's rows copied out and
 * packed alone. */
static void check_expert_slices(vt_dtype type, tp_pool *pool) {
    enum { N_EXP = 3 };
    const quant_traits *tr = quant_traits_get(type);
    const int64_t n_in = 256, n_out = 40, n_tok = 2; /* 40: a partial row group per expert */
    size_t rb;
    VT_ASSERT(quant_row_bytes(type, n_in, &rb));
    uint8_t *all = malloc(rb * n_out * N_EXP);
    float f[256];
    for (int64_t o = 0; o < n_out * N_EXP; o++) {
        for (int64_t k = 0; k < n_in; k++) f[k] = rng_uniform();
        tr->quant_ref(f, all + o * rb, n_in);
    }
    mm_weight ex[N_EXP], alone[N_EXP];
    uint8_t *copy[N_EXP];
    size_t need = 0;
    for (int e = 0; e < N_EXP; e++) {
        CHECK_OK(mm_weight_init(&ex[e], type, n_in, n_out, all + (size_t)e * n_out * rb));
        need += mm_weight_packed_size(&ex[e]);
        copy[e] = malloc(rb * n_out);
        memcpy(copy[e], all + (size_t)e * n_out * rb, rb * n_out);
        CHECK_OK(mm_weight_init(&alone[e], type, n_in, n_out, copy[e]));
        CHECK_OK(mm_weight_prepare(&alone[e]));
    }
    mm_arena a;
    CHECK_OK(mm_arena_init(&a, need));
    for (int e = 0; e < N_EXP; e++) CHECK_OK(mm_weight_prepare_in(&ex[e], &a));
    CHECK(a.used == need);
    float x[2 * 256], y0[2 * 40], y1[2 * 40];
    for (int64_t k = 0; k < n_tok * n_in; k++) x[k] = rng_uniform();
    void *xq = malloc(mm_act_row_bytes(type, n_in) * n_tok);
    const int64_t ld[1] = {n_out};
    int bad = 0;
    for (int e = 0; e < N_EXP; e++) {
        const mm_weight *w0[1] = {&alone[e]}, *w1[1] = {&ex[e]};
        float *ys0[1] = {y0}, *ys1[1] = {y1};
        memset(y0, 0xff, sizeof y0);
        memset(y1, 0, sizeof y1);
        step_ctx c0 = {w0, ys0, ld, 1, x, n_in, n_tok, xq, pool, 0}, c1 = {w1, ys1, ld, 1, x, n_in, n_tok, xq, pool, 0};
        tp_run(pool, step_fn, &c0);
        tp_run(pool, step_fn, &c1);
        bad += memcmp(y0, y1, sizeof y0) != 0;
    }
    CHECK_MSG(bad == 0, "%s: %d of %d expert slices differ from their rows packed alone", tr->name, bad, N_EXP);
    for (int e = 0; e < N_EXP; e++) mm_weight_free(&ex[e]), mm_weight_free(&alone[e]), free(copy[e]);
    mm_arena_free(&a);
    free(all);
    free(xq);
}

/* Decode over weights of several types with one activation type (Q4_0, Q8_0,
 * MXFP4 and Q5_0 all take Q8_0 rows, each with its own xblocks: mm_compute_multi
 * makes the first type's once per call and must never hand them to another
 * type): mm_compute_multi gives each weight the bytes of its own mm_compute on
 * one thread, for 1..4 tokens and 1..3 threads (long rows: shares of several
 * items). */
static void check_multi_types(tp_pool *const *pools) {
    enum { N = 4 };
    static const vt_dtype order[2][N] = {{VT_DTYPE_Q4_0, VT_DTYPE_Q8_0, VT_DTYPE_MXFP4, VT_DTYPE_Q5_0},
                                         {VT_DTYPE_Q5_0, VT_DTYPE_MXFP4, VT_DTYPE_Q4_0, VT_DTYPE_Q8_0}};
    const int64_t n_in = 8192, n_outs[N] = {387, 200, 150, 70}, ld[N] = {387, 200, 150, 70};
    int bad = 0;
    for (int o = 0; o < 2; o++) {
        mm_weight w[N];
        const mm_weight *wp[N];
        uint8_t *wd[N];
        for (int i = 0; i < N; i++) {
            const quant_traits *tr = quant_traits_get(order[o][i]);
            size_t rb;
            VT_ASSERT(quant_row_bytes(order[o][i], n_in, &rb));
            wd[i] = malloc(rb * n_outs[i]);
            float *f = malloc(n_in * sizeof(float));
            for (int64_t r = 0; r < n_outs[i]; r++) {
                for (int64_t k = 0; k < n_in; k++) f[k] = rng_uniform();
                tr->quant_ref(f, wd[i] + r * rb, n_in);
            }
            free(f);
            CHECK_OK(mm_weight_init(&w[i], order[o][i], n_in, n_outs[i], wd[i]));
            CHECK_OK(mm_weight_prepare(&w[i]));
            wp[i] = &w[i];
        }
        for (int64_t n_tok = 1; n_tok <= 4; n_tok++) {
            float *x = malloc(n_tok * n_in * sizeof(float));
            for (int64_t k = 0; k < n_tok * n_in; k++) x[k] = rng_uniform() * 2;
            void *xq = malloc(mm_act_row_bytes(order[o][0], n_in) * n_tok);
            float *y[2][N];
            for (int i = 0; i < N; i++)
                for (int k = 0; k < 2; k++) y[k][i] = malloc(n_tok * ld[i] * sizeof(float));
            step_ctx c0 = {wp, y[0], ld, N, x, n_in, n_tok, xq, pools[0], 0};
            tp_run(pools[0], step_fn, &c0);
            for (int p = 0; p < 3; p++) {
                for (int i = 0; i < N; i++) memset(y[1][i], 0xff, n_tok * ld[i] * sizeof(float));
                step_ctx c1 = {wp, y[1], ld, N, x, n_in, n_tok, xq, pools[p], 1};
                tp_run(pools[p], step_fn, &c1);
                for (int i = 0; i < N; i++) bad += memcmp(y[0][i], y[1][i], n_tok * ld[i] * sizeof(float)) != 0;
            }
            for (int i = 0; i < N; i++) free(y[0][i]), free(y[1][i]);
            free(x), free(xq);
        }
        for (int i = 0; i < N; i++) mm_weight_free(&w[i]), free(wd[i]);
    }
    CHECK_MSG(bad == 0, "%d weights of mixed-type mm_compute_multi steps differ from mm_compute", bad);
}

/* ---- a late thread: prefill steps whose second thread starts only when the
 * first has run out of work (as when its core is taken for a while). The first
 * must then have taken the second's share too, so when it returns every output
 * is written: a static split would leave half of them; and the bytes are those
 * of one thread. No timing: thread 1 waits for thread 0's flag. ------------ */
typedef struct {
    const mm_weight *const *ws; /* multi: ws[0..n_w); glu: gate, up */
    float *const *ys, *const *want;
    const int64_t *ldys;
    int n_w;
    bool glu;
    vt_dtype down_type;
    uint8_t *hq;
    const uint8_t *want_h;
    const void *xq;
    int64_t n_tok;
    tp_pool *pool;
    int64_t written_first, total; /* outputs (glu: blocks of h) equal to want when thread 0 was done */
    _Atomic int first_done;
} late_ctx;

/* Outputs of c equal to the 1-thread bytes (NaN bytes where none was written). */
static int64_t late_written(const late_ctx *c, int64_t *total) {
    int64_t n = 0;
    *total = 0;
    if (c->glu) {
        const quant_traits *ht = quant_traits_get(quant_traits_get(c->down_type)->dot_type);
        const int64_t ff = c->ws[0]->n_out, nb = ff / ht->block_elems;
        const size_t hs = mm_act_row_bytes(c->down_type, ff);
        for (int64_t t = 0; t < c->n_tok; t++)
            for (int64_t b = 0; b < nb; b++, ++*total) {
                const size_t off = (size_t)t * hs + (size_t)b * ht->block_bytes;
                n += memcmp(c->hq + off, c->want_h + off, ht->block_bytes) == 0;
            }
        return n;
    }
    for (int i = 0; i < c->n_w; i++)
        for (int64_t t = 0; t < c->n_tok; t++)
            for (int64_t o = 0; o < c->ws[i]->n_out; o++, ++*total) {
                const int64_t k = t * c->ldys[i] + o;
                n += memcmp(&c->ys[i][k], &c->want[i][k], sizeof(float)) == 0;
            }
    return n;
}

static void late_fn(void *vctx, int ith, int nth) {
    (void)nth;
    late_ctx *c = vctx;
    if (ith == 1)
        while (!atomic_load_explicit(&c->first_done, memory_order_acquire)) sched_yield();
    if (c->glu) mm_compute_glu(c->ws[0], c->ws[1], c->down_type, c->xq, c->n_tok, c->hq, c->pool, ith);
    else mm_compute_multi(c->ws, c->ys, c->ldys, c->n_w, c->xq, c->n_tok, c->pool, ith);
    if (ith == 0) {
        c->written_first = late_written(c, &c->total);
        atomic_store_explicit(&c->first_done, 1, memory_order_release);
    }
}

/* A late second thread in mm_compute_multi steps over weights of types[i]
 * (n_outs[i] rows of n_in; one dot type), one step of each n_tok in toks: what
 * thread 0 had written when it was out of work, of how many outputs; printed. */
static void late_multi(tp_pool *const *pools, const vt_dtype *types, int n, int64_t n_in, const int64_t *n_outs,
                       const int64_t *toks, int n_toks) {
    enum { N_MAX = 4 };
    VT_ASSERT(n <= N_MAX);
    tp_pool *one = pools[0], *two = pools[1];
    mm_weight w[N_MAX];
    const mm_weight *wp[N_MAX];
    uint8_t *wd[N_MAX];
    float *f = malloc(n_in * sizeof(float));
    for (int i = 0; i < n; i++) {
        const quant_traits *tr = quant_traits_get(types[i]);
        size_t rb;
        VT_ASSERT(quant_row_bytes(types[i], n_in, &rb));
        wd[i] = malloc(rb * n_outs[i]);
        for (int64_t r = 0; r < n_outs[i]; r++) {
            for (int64_t k = 0; k < n_in; k++) f[k] = rng_uniform();
            tr->quant_ref(f, wd[i] + r * rb, n_in);
        }
        CHECK_OK(mm_weight_init(&w[i], types[i], n_in, n_outs[i], wd[i]));
        CHECK_OK(mm_weight_prepare(&w[i]));
        wp[i] = &w[i];
    }
    for (int ti = 0; ti < n_toks; ti++) {
        const int64_t n_tok = toks[ti];
        float *x = malloc(n_tok * n_in * sizeof(float));
        for (int64_t k = 0; k < n_tok * n_in; k++) x[k] = rng_uniform() * 2;
        void *xq = malloc(mm_act_row_bytes(types[0], n_in) * n_tok);
        mm_quantize(types[0], x, n_in, n_tok, n_in, xq, 0, 1);
        float *y[2][N_MAX];
        for (int i = 0; i < n; i++)
            for (int k = 0; k < 2; k++) {
                y[k][i] = malloc(n_tok * n_outs[i] * sizeof(float));
                memset(y[k][i], 0xff, n_tok * n_outs[i] * sizeof(float));
            }
        step_ctx c1 = {wp, y[0], n_outs, n, x, n_in, n_tok, xq, one, 1};
        tp_run(one, step_fn, &c1);
        late_ctx c = {.ws = wp, .ys = y[1], .want = y[0], .ldys = n_outs, .n_w = n, .xq = xq, .n_tok = n_tok,
                      .pool = two};
        tp_run(two, late_fn, &c);
        int64_t total;
        const int64_t written = late_written(&c, &total);
        const char *name = quant_traits_get(types[0])->name;
        CHECK_MSG(c.written_first == c.total, "multi, %s first, %d weights, %lld tokens: the first thread had "
                  "written %lld of %lld outputs when it was out of work (a static split leaves the second's share)",
                  name, n, (long long)n_tok, (long long)c.written_first, (long long)c.total);
        CHECK_MSG(written == total, "multi, %s first, %lld tokens: %lld of %lld outputs differ from 1 thread's", name,
                  (long long)n_tok, (long long)(total - written), (long long)total);
        printf("  a late second thread: multi, %s first, %d weights, %lld tokens: the first wrote %lld of %lld "
               "outputs\n", name, n, (long long)n_tok, (long long)c.written_first, (long long)c.total);
        for (int i = 0; i < n; i++) free(y[0][i]), free(y[1][i]);
        free(x), free(xq);
    }
    for (int i = 0; i < n; i++) mm_weight_free(&w[i]), free(wd[i]);
    free(f);
}

/* The same for mm_compute_glu steps: gate and up of `type` (ff rows of n_in), h
 * for a down projection of down_type. */
static void late_glu(tp_pool *const *pools, vt_dtype type, vt_dtype down_type, int64_t n_in, int64_t ff,
                     const int64_t *toks, int n_toks) {
    tp_pool *one = pools[0], *two = pools[1];
    const quant_traits *tr = quant_traits_get(type);
    mm_weight w[2];
    const mm_weight *wp[2];
    uint8_t *wd[2];
    float *f = malloc(n_in * sizeof(float));
    size_t rb;
    VT_ASSERT(quant_row_bytes(type, n_in, &rb));
    for (int i = 0; i < 2; i++) {
        wd[i] = malloc(rb * ff);
        for (int64_t r = 0; r < ff; r++) {
            for (int64_t k = 0; k < n_in; k++) f[k] = rng_uniform();
            tr->quant_ref(f, wd[i] + r * rb, n_in);
        }
        CHECK_OK(mm_weight_init(&w[i], type, n_in, ff, wd[i]));
        CHECK_OK(mm_weight_prepare(&w[i]));
        wp[i] = &w[i];
    }
    for (int ti = 0; ti < n_toks; ti++) {
        const int64_t n_tok = toks[ti];
        float *x = malloc(n_tok * n_in * sizeof(float));
        for (int64_t k = 0; k < n_tok * n_in; k++) x[k] = rng_uniform() * 2;
        void *xq = malloc(mm_act_row_bytes(type, n_in) * n_tok);
        mm_quantize(type, x, n_in, n_tok, n_in, xq, 0, 1);
        const size_t h_bytes = mm_act_row_bytes(down_type, ff) * n_tok;
        uint8_t *want_h = malloc(h_bytes), *hq = malloc(h_bytes);
        memset(want_h, 0xa5, h_bytes);
        memset(hq, 0xa5, h_bytes);
        glu_ctx g1 = {&w[0], &w[1], down_type, x, n_tok, xq, want_h, one};
        tp_run(one, glu_step, &g1);
        late_ctx cg = {.ws = wp, .glu = true, .down_type = down_type, .hq = hq, .want_h = want_h, .xq = xq,
                       .n_tok = n_tok, .pool = two};
        tp_run(two, late_fn, &cg);
        int64_t total;
        const int64_t written_h = late_written(&cg, &total);
        const char *down = quant_traits_get(down_type)->name;
        CHECK_MSG(cg.written_first == cg.total, "glu, %s -> %s, %lld tokens: the first thread had written %lld of "
                  "%lld blocks of h when it was out of work (a static split leaves the second's share)", tr->name,
                  down, (long long)n_tok, (long long)cg.written_first, (long long)cg.total);
        CHECK_MSG(written_h == total, "glu, %s -> %s, %lld tokens: %lld of %lld blocks of h differ from 1 thread's",
                  tr->name, down, (long long)n_tok, (long long)(total - written_h), (long long)total);
        printf("  a late second thread: glu, %s -> %s, %lld tokens: the first wrote %lld of %lld blocks of h\n",
               tr->name, down, (long long)n_tok, (long long)cg.written_first, (long long)cg.total);
        free(x), free(xq), free(want_h), free(hq);
    }
    for (int i = 0; i < 2; i++) mm_weight_free(&w[i]), free(wd[i]);
    free(f);
}

static void check_late_thread(tp_pool *const *pools) {
    /* prefill, 40 tokens: Q4_0, Q8_0, Q4_0 on one Q8_0 input (token blocks and
     * chunks of the packed path where the tier has one, tiles of the file layout
     * else); gate/up in Q4_0, h in Q8_0 (units of 32 columns) */
    static const vt_dtype legacy[3] = {VT_DTYPE_Q4_0, VT_DTYPE_Q8_0, VT_DTYPE_Q4_0};
    static const int64_t prefill[1] = {40}, decode[2] = {1, 4};
    late_multi(pools, legacy, 3, 4096, (const int64_t[]){256, 80, 48}, prefill, 1);
    late_glu(pools, VT_DTYPE_Q4_0, VT_DTYPE_Q4_0, 1024, 768, prefill, 1);
    /* decode, 1 and 4 tokens: shares of several items (Q4_0 units are 36 KiB
     * at n_in 4096, seven to an item of MM_STEAL_BYTES); the Q4_K_M mix (Q8_K
     * input, xblocks made once per call); the file layout (F16); gate/up with h
     * in Q8_0 (units of 32 columns) and in Q8_K (units of 256) */
    static const vt_dtype kmix[3] = {VT_DTYPE_Q4_K, VT_DTYPE_Q6_K, VT_DTYPE_Q4_K};
    static const vt_dtype f16[1] = {VT_DTYPE_F16};
    late_multi(pools, legacy, 3, 4096, (const int64_t[]){768, 256, 80}, decode, 2);
    late_multi(pools, kmix, 3, 2048, (const int64_t[]){1024, 256, 256}, decode, 2);
    late_multi(pools, f16, 1, 1024, (const int64_t[]){1024}, decode, 2);
    late_glu(pools, VT_DTYPE_Q4_0, VT_DTYPE_Q8_0, 1024, 4096, decode, 2);
    late_glu(pools, VT_DTYPE_Q4_K, VT_DTYPE_Q6_K, 512, 2048, decode, 2);
}

/* Two "models" of two Q4_0 weights each in one process. */
static void check_prefetch_choice(tp_pool *pool) {
    enum { N = 2 };
    static block_q4_0 data[N][16 * 64 / QK4_0]; /* zero blocks: 16 rows of 64 */
    mm_weight a[N], b[N];
    const mm_weight *pa[N], *pb[N];
    for (int i = 0; i < N; i++) {
        CHECK_OK(mm_weight_init(&a[i], VT_DTYPE_Q4_0, 64, 16, data[i]));
        CHECK_OK(mm_weight_init(&b[i], VT_DTYPE_Q4_0, 64, 16, data[i]));
        CHECK_OK(mm_weight_prepare(&a[i]));
        CHECK_OK(mm_weight_prepare(&b[i]));
        CHECK(mm_weight_prefetch(&a[i]) && mm_weight_prefetch(&b[i])); /* the default: software */
        pa[i] = &a[i];
        pb[i] = &b[i];
    }
    mm_weight_set_prefetch(&a[0], false);
    unsetenv("VT_PREFETCH");
    mm_probe_prefetch(pb, N, pool); /* too few bytes to time: software, decided */
    CHECK(!mm_weight_prefetch(&a[0]) && mm_weight_prefetch(&a[1]));
    CHECK(b[0].prefetch == MM_PREFETCH_SW && b[1].prefetch == MM_PREFETCH_SW);
    setenv("VT_PREFETCH", "hw", 1);
    mm_probe_prefetch(pb, N, pool); /* decided: left alone */
    CHECK(mm_weight_prefetch(&b[0]) && mm_weight_prefetch(&b[1]));
    mm_probe_prefetch(pa, N, pool); /* a[1] undecided: hw; a[0] stays */
    CHECK(!mm_weight_prefetch(&a[0]) && !mm_weight_prefetch(&a[1]));
    CHECK(mm_weight_prefetch(&b[0]) && mm_weight_prefetch(&b[1]));
    unsetenv("VT_PREFETCH");
    for (int i = 0; i < N; i++) {
        mm_weight_free(&a[i]);
        mm_weight_free(&b[i]);
    }
}

/* The packed GEMMs of `type` in table k against the ref twin on spans of 1, 2,
 * 3 and 5 groups (see the top of the file). */
static void check_group_pairs(const cpu_kernels *k, vt_dtype type) {
    if (!k->gemm[type]) return;
    const quant_traits *tr = quant_traits_get(type), *dt = quant_traits_get(tr->dot_type);
    enum { N_GROUPS = 6 };
    const int64_t n_in = 2 * (tr->block_elems >= 256 ? tr->block_elems : 64), nb = n_in / 32;
    const int64_t n_out = N_GROUPS * PACK_ROWS, ldy = n_out + 3;
    size_t wrow, xrow;
    VT_ASSERT(quant_row_bytes(type, n_in, &wrow) && quant_row_bytes(tr->dot_type, n_in, &xrow));
    const size_t gb = wrow * PACK_ROWS, x_stride = xrow + 8;
    uint8_t *w = malloc(wrow * n_out), *wp = malloc(gb * N_GROUPS), *x = malloc(x_stride * PACK_TOK_MAX);
    float *f = malloc(n_in * sizeof(float));
    pack_xblock *xs = malloc(sizeof(pack_xblock) * PACK_TOK_MAX * nb);
    float *ya = malloc(sizeof(float) * ldy * PACK_TOK_MAX), *ye = malloc(sizeof(float) * ldy * PACK_TOK_MAX);
    for (int64_t o = 0; o < n_out; o++) {
        for (int64_t i = 0; i < n_in; i++) f[i] = rng_uniform() * (1 + o % 7);
        tr->quant_ref(f, w + o * wrow, n_in);
    }
    for (int g = 0; g < N_GROUPS; g++) pack_group(type, n_in, w + g * gb, wrow, PACK_ROWS, wp + g * gb);
    for (int t = 0; t < PACK_TOK_MAX; t++) {
        for (int64_t i = 0; i < n_in; i++) f[i] = rng_uniform();
        dt->quant_ref(f, x + t * x_stride, n_in);
    }
    if (pack_needs_xblocks(type)) pack_xblocks(type, x, x_stride, PACK_TOK_MAX, nb, xs);
    const pack_gemm_fn ref = pack_gemm_ref(type);
    const pack_gemm_fn kerns[3] = {k->gemm[type], k->gemm_cached[type], k->gemm_nopf[type]};
    static const int64_t spans[] = {1, 2, 3, 5};
    int bad = 0, cases = 0;
    for (int ki = 0; ki < 3; ki++) {
        if (!kerns[ki]) continue;
        for (size_t si = 0; si < sizeof spans / sizeof spans[0]; si++)
            for (int nt = 1; nt <= PACK_TOK_MAX; nt++) {
                memset(ya, 0xff, sizeof(float) * ldy * PACK_TOK_MAX);
                memset(ye, 0xff, sizeof(float) * ldy * PACK_TOK_MAX);
                kerns[ki](n_in, wp + gb, spans[si], x, x_stride, xs, nt, ya + PACK_ROWS, ldy);
                ref(n_in, wp + gb, spans[si], x, x_stride, xs, nt, ye + PACK_ROWS, ldy);
                cases++;
                if (memcmp(ya, ye, sizeof(float) * ldy * PACK_TOK_MAX)) {
                    if (bad < 3)
                        fprintf(stderr, "  %s %s kernel %d: %lld groups, %d tokens differ from the ref twin\n",
                                tr->name, k->isa_name, ki, (long long)spans[si], nt);
                    bad++;
                }
            }
    }
    CHECK_MSG(bad == 0, "%s %s: %d of %d group spans differ from pack_gemm_ref", tr->name, k->isa_name, bad, cases);
    free(w), free(wp), free(x), free(f), free(xs), free(ya), free(ye);
}

int main(void) {
    printf("kernels: %s\n", cpu_isa_name());
    check_errors();
    tp_pool *pools[4] = {0};
    for (int i = 0; i < 4; i++) CHECK_OK(tp_create(i + 1, &pools[i]));
    static const vt_dtype types[] = {
        VT_DTYPE_F32,  VT_DTYPE_F16,  VT_DTYPE_BF16, VT_DTYPE_Q4_0, VT_DTYPE_Q4_1,   VT_DTYPE_Q5_0,
        VT_DTYPE_Q5_1, VT_DTYPE_Q8_0, VT_DTYPE_Q2_K, VT_DTYPE_Q3_K, VT_DTYPE_Q4_K,   VT_DTYPE_Q5_K,
        VT_DTYPE_Q6_K, VT_DTYPE_IQ4_NL, VT_DTYPE_IQ4_XS, VT_DTYPE_MXFP4,
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_type(types[i], pools, 4);
    static const vt_dtype long_types[] = {VT_DTYPE_Q4_0, VT_DTYPE_Q8_0, VT_DTYPE_Q4_K, VT_DTYPE_Q5_K,
                                          VT_DTYPE_Q6_K, VT_DTYPE_MXFP4, VT_DTYPE_F16, VT_DTYPE_IQ4_NL,
                                          VT_DTYPE_Q5_0};
    for (size_t i = 0; i < sizeof long_types / sizeof long_types[0]; i++) check_blocking(long_types[i], 8192, pools);
    check_blocking(VT_DTYPE_Q5_0, 13696, pools); /* GLM-4's ffn_down in a Q4_K_M file */
    static const struct {
        vt_dtype type, down;
        int64_t n_in, ff, n_tok;
    } glus[] = {
        {VT_DTYPE_Q4_0, VT_DTYPE_Q4_0, 96, 416, 5},     /* h in Q8_0, units of 32 columns */
        {VT_DTYPE_Q4_0, VT_DTYPE_Q4_0, 1024, 768, 100}, /* token blocks and tiles with tails */
        {VT_DTYPE_Q4_0, VT_DTYPE_Q8_0, 256, 4096, 1},   /* decode: shares of several items */
        {VT_DTYPE_Q8_0, VT_DTYPE_Q8_0, 64, 4096, 3},
        {VT_DTYPE_Q4_K, VT_DTYPE_Q6_K, 512, 768, 37},   /* h in Q8_K, units of 256 */
        {VT_DTYPE_Q4_K, VT_DTYPE_Q4_K, 1024, 512, 70},
        {VT_DTYPE_Q6_K, VT_DTYPE_Q6_K, 256, 2048, 1},
        {VT_DTYPE_Q5_0, VT_DTYPE_Q5_0, 64, 512, 9},     /* h in Q8_0 for a Q5_0 down */
        {VT_DTYPE_Q5_1, VT_DTYPE_Q4_K, 96, 512, 37},    /* gate / up in Q8_1 */
        {VT_DTYPE_IQ4_NL, VT_DTYPE_Q4_K, 64, 512, 9},   /* file layout */
        {VT_DTYPE_F16, VT_DTYPE_F16, 48, 53, 6},        /* a partial row group */
    };
    for (size_t i = 0; i < sizeof glus / sizeof glus[0]; i++)
        check_glu(glus[i].type, glus[i].down, glus[i].n_in, glus[i].ff, glus[i].n_tok, pools);
    check_arena(pools[1]);
    check_multi_types(pools);
    check_late_thread(pools);
    check_prefetch_choice(pools[1]);
    check_expert_slices(VT_DTYPE_MXFP4, pools[1]);
    check_expert_slices(VT_DTYPE_Q4_K, pools[1]);
    static const vt_dtype pair_types[] = {VT_DTYPE_Q4_0, VT_DTYPE_Q8_0, VT_DTYPE_MXFP4,
                                          VT_DTYPE_Q4_K, VT_DTYPE_Q5_K, VT_DTYPE_Q6_K};
    /* every tier up to the selected one: an AVX-512 CPU runs the AVX2 tier's pairs too */
    for (int isa = CPU_ISA_REF + 1; isa <= (int)cpu_kernels_get()->isa; isa++) {
        cpu_kernels tier;
        cpu_kernels_build((cpu_isa)isa, &tier);
        if (tier.isa != (cpu_isa)isa) continue;
        for (size_t i = 0; i < sizeof pair_types / sizeof pair_types[0]; i++) check_group_pairs(&tier, pair_types[i]);
    }
    for (int i = 0; i < 4; i++) tp_destroy(pools[i]);
    return test_finish();
}
