/* cpu/deltanet: the Gated DeltaNet scalar kernels against a naive float64 reference, and
 * the chunked form of the delta rule against the recurrent one.
 *
 * Bounds, as NMSE = sum (x - ref)^2 / sum ref^2 over all outputs and the final state:
 *  - the conv, the small ops and the recurrent rule against float64: <= 1e-10 (float
 *    rounding is ~1e-7 relative per op, squared ~1e-14; the state carries errors through
 *    up to 300 steps);
 *  - the chunked form against float64 and against the recurrent form: <= 1e-9, over
 *    1..300 tokens, chunk edges 63/64/65/128/129 included, from a zero and from a non-zero
 *    state, with d_k != d_v. Looser: the forward substitution through (I + L) amplifies
 *    rounding where a strong decay (-40) sits inside a chunk;
 *  - splitting a token run across calls (the engine's prefill chunks) gives the same
 *    bits for the conv and the recurrent rule, and is within the bound for the chunked.
 * Decays are drawn as the model makes them (softplus(x) * -exp(A_log)), from mild to
 * strong (log decay down to -40, where exp(G) underflows to 0). */
#include "cpu/deltanet.h"
#include "cpu/kernels.h"
#include "cpu/threadpool.h"
#include "test.h"

#include <stdint.h>

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rng_uniform(void) { return (rng_u32() & 0xffffff) / 16777216.0f * 2.0f - 1.0f; }

static double nmse_f(const float *x, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)x[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}
static double nmse_ff(const float *x, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)x[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* ---- conv1d ---- */

static void conv_f64(const float *x, int64_t n_tok, int64_t n_ch, const float *w, int64_t kernel,
                     const float *state0, double *out) {
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t c = 0; c < n_ch; c++) {
            double s = 0;
            for (int64_t i = 0; i < kernel; i++) {
                const int64_t src = t - (kernel - 1) + i; /* < 0: from the state */
                const double xi = src >= 0 ? x[src * n_ch + c] : state0[(kernel - 1 + src) * n_ch + c];
                s += xi * w[i * n_ch + c];
            }
            out[t * n_ch + c] = s / (1.0 + exp(-s));
        }
}

static void test_conv(void) {
    const int64_t n_ch = 37, n_tok = 50;
    const int64_t kernels[] = {1, 2, 4};
    for (int ki = 0; ki < 3; ki++) {
        const int64_t kernel = kernels[ki], ns = kernel - 1;
        float *x = malloc(sizeof(float) * n_tok * n_ch), *w = malloc(sizeof(float) * kernel * n_ch);
        float *st0 = malloc(sizeof(float) * (ns + 1) * n_ch), *st = malloc(sizeof(float) * (ns + 1) * n_ch);
        float *out = malloc(sizeof(float) * n_tok * n_ch), *out2 = malloc(sizeof(float) * n_tok * n_ch);
        double *ref = malloc(sizeof(double) * n_tok * n_ch);
        for (int64_t i = 0; i < n_tok * n_ch; i++) x[i] = 2 * rng_uniform();
        for (int64_t i = 0; i < kernel * n_ch; i++) w[i] = rng_uniform();
        for (int64_t i = 0; i < ns * n_ch; i++) st0[i] = 2 * rng_uniform();

        memcpy(st, st0, sizeof(float) * ns * n_ch);
        dn_conv1d_silu_ref(x, n_ch, n_tok, n_ch, w, kernel, st, n_ch, out, n_ch);
        conv_f64(x, n_tok, n_ch, w, kernel, st0, ref);
        const double e = nmse_f(out, ref, n_tok * n_ch);
        CHECK_MSG(e <= 1e-10, "conv kernel %lld nmse %g", (long long)kernel, e);
        /* the state holds the last kernel-1 inputs */
        int ok = 1;
        for (int64_t i = 0; i < ns; i++)
            for (int64_t c = 0; c < n_ch; c++)
                ok &= st[i * n_ch + c] == x[(n_tok - ns + i) * n_ch + c];
        CHECK_MSG(ok, "conv kernel %lld final state", (long long)kernel);

        /* split into runs of 1, 3, 7, ... tokens, in place: the same bits */
        memcpy(st, st0, sizeof(float) * ns * n_ch);
        memcpy(out2, x, sizeof(float) * n_tok * n_ch);
        for (int64_t t = 0, len = 1; t < n_tok; t += len, len = len * 2 + 1) {
            const int64_t m = n_tok - t < len ? n_tok - t : len;
            dn_conv1d_silu_ref(out2 + t * n_ch, n_ch, m, n_ch, w, kernel, st, n_ch, out2 + t * n_ch, n_ch);
        }
        CHECK_MSG(memcmp(out, out2, sizeof(float) * n_tok * n_ch) == 0,
                  "conv kernel %lld split/in-place differs", (long long)kernel);
        free(x), free(w), free(st0), free(st), free(out), free(out2), free(ref);
    }
}

/* ---- small ops ---- */

static void test_small_ops(void) {
    float x[67], y[67], z[67], w[67], o[67];
    for (int i = 0; i < 67; i++) x[i] = 3 * rng_uniform(), z[i] = 4 * rng_uniform(), w[i] = rng_uniform();

    memcpy(y, x, sizeof x);
    dn_l2_norm_ref(y, 67, 1e-6f);
    double ss = 0, ref[67];
    for (int i = 0; i < 67; i++) ss += (double)x[i] * x[i];
    for (int i = 0; i < 67; i++) ref[i] = x[i] / sqrt(ss);
    CHECK(nmse_f(y, ref, 67) <= 1e-12);
    float zero[4] = {0};
    dn_l2_norm_ref(zero, 4, 1e-6f); /* eps keeps a zero vector finite */
    CHECK(zero[0] == 0 && zero[3] == 0);

    dn_gated_norm_ref(x, z, w, 67, 1e-6f, o);
    for (int i = 0; i < 67; i++)
        ref[i] = x[i] / sqrt(ss / 67 + 1e-6) * w[i] * (z[i] / (1 + exp(-(double)z[i])));
    CHECK(nmse_f(o, ref, 67) <= 1e-12);
    memcpy(y, x, sizeof x);
    dn_gated_norm_ref(y, z, w, 67, 1e-6f, y); /* in place */
    CHECK(memcmp(y, o, sizeof o) == 0);

    const float alpha[5] = {-30, -1, 0, 2, 25}, dt[5] = {0.5f, 0.1f, -0.2f, 0, 0};
    const float a[5] = {-1, -0.5f, -8, -0.01f, -2}, braw[5] = {-40, -1, 0, 3, 40};
    float g[5], b[5];
    dn_gates_ref(alpha, braw, dt, a, 5, g, b);
    for (int h = 0; h < 5; h++) {
        const double xx = (double)alpha[h] + dt[h];
        const double gr = log1p(exp(xx)) * a[h], br = 1 / (1 + exp(-(double)braw[h]));
        CHECK_MSG(fabs(g[h] - gr) <= 1e-5 * fabs(gr) + 1e-12, "g[%d] %g vs %g", h, g[h], gr);
        CHECK_MSG(fabs(b[h] - br) <= 1e-6 * br + 1e-30, "beta[%d] %g vs %g", h, b[h], br);
        CHECK(g[h] <= 0);
    }
}

/* ---- delta rule ---- */

typedef struct {
    int64_t n, d_k, d_v;
    float *q, *k, *v, *g, *beta, *state0;
} dr_case;

static void l2(float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    for (int64_t i = 0; i < n; i++) x[i] = (float)(x[i] / sqrt(s));
}

/* decay_mode 0: mild (g in [-0.3, 0]), 1: mixed up to -8, 2: some tokens at -40 */
static dr_case make_case(int64_t n, int64_t d_k, int64_t d_v, int decay_mode, int warm_state) {
    dr_case c = {.n = n, .d_k = d_k, .d_v = d_v};
    c.q = malloc(sizeof(float) * n * d_k), c.k = malloc(sizeof(float) * n * d_k);
    c.v = malloc(sizeof(float) * n * d_v), c.g = malloc(sizeof(float) * n);
    c.beta = malloc(sizeof(float) * n), c.state0 = calloc((size_t)(d_k * d_v), sizeof(float));
    for (int64_t t = 0; t < n; t++) {
        for (int64_t i = 0; i < d_k; i++) c.q[t * d_k + i] = rng_uniform(), c.k[t * d_k + i] = rng_uniform();
        l2(c.q + t * d_k, d_k), l2(c.k + t * d_k, d_k);
        for (int64_t j = 0; j < d_v; j++) c.v[t * d_v + j] = 2 * rng_uniform();
        const float u = (rng_uniform() + 1) / 2;
        c.g[t] = decay_mode == 0 ? -0.3f * u : decay_mode == 1 ? -8 * u * u * u : (rng_u32() % 16 == 0 ? -40 : -u);
        c.beta[t] = (rng_uniform() + 1) / 2;
    }
    if (warm_state)
        for (int64_t i = 0; i < d_k * d_v; i++) c.state0[i] = rng_uniform();
    return c;
}
static void free_case(dr_case *c) { free(c->q), free(c->k), free(c->v), free(c->g), free(c->beta), free(c->state0); }

/* out (n, d_v) and state (d_v, d_k) in float64 */
static void delta_f64(const dr_case *c, float scale, double *out, double *state) {
    for (int64_t i = 0; i < c->d_k * c->d_v; i++) state[i] = c->state0[i];
    for (int64_t t = 0; t < c->n; t++) {
        const float *q = c->q + t * c->d_k, *k = c->k + t * c->d_k, *v = c->v + t * c->d_v;
        const double decay = exp((double)c->g[t]);
        for (int64_t j = 0; j < c->d_v; j++) {
            double *row = state + j * c->d_k, sk = 0, sq = 0;
            for (int64_t i = 0; i < c->d_k; i++) row[i] *= decay, sk += row[i] * k[i];
            const double u = (v[j] - sk) * c->beta[t];
            for (int64_t i = 0; i < c->d_k; i++) row[i] += u * k[i], sq += row[i] * q[i];
            out[t * c->d_v + j] = sq * scale;
        }
    }
}

static void run_float(const dr_case *c, int chunked, float scale, float *out, float *state,
                      int64_t split) {
    memcpy(state, c->state0, sizeof(float) * c->d_k * c->d_v);
    float *scratch = malloc(sizeof(float) * dn_chunk_scratch_floats(c->d_k, c->d_v));
    for (int64_t t = 0; t < c->n; t += split) {
        const int64_t m = c->n - t < split ? c->n - t : split;
        if (chunked)
            dn_delta_rule_chunked_ref(m, c->d_k, c->d_v, c->q + t * c->d_k, c->d_k, c->k + t * c->d_k,
                                      c->d_k, c->v + t * c->d_v, c->d_v, c->g + t, c->beta + t, 1,
                                      scale, state, out + t * c->d_v, c->d_v, scratch);
        else
            dn_delta_rule_ref(m, c->d_k, c->d_v, c->q + t * c->d_k, c->d_k, c->k + t * c->d_k, c->d_k,
                              c->v + t * c->d_v, c->d_v, c->g + t, c->beta + t, 1, scale, state,
                              out + t * c->d_v, c->d_v);
    }
    free(scratch);
}

static void test_delta_rule(void) {
    const int64_t lens[] = {1, 2, 63, 64, 65, 128, 129, 300};
    const int64_t shapes[][2] = {{16, 16}, {32, 32}, {16, 24}};
    double worst_rec = 0, worst_chunk = 0, worst_cr = 0;
    for (int si = 0; si < 3; si++)
        for (int li = 0; li < 8; li++)
            for (int mode = 0; mode < 3; mode++) {
                const int64_t n = lens[li], d_k = shapes[si][0], d_v = shapes[si][1];
                dr_case c = make_case(n, d_k, d_v, mode, (li + mode) % 2);
                const float scale = 1.0f / sqrtf((float)d_k);
                double *out64 = malloc(sizeof(double) * n * d_v), *st64 = malloc(sizeof(double) * d_k * d_v);
                float *out_r = malloc(sizeof(float) * n * d_v), *st_r = malloc(sizeof(float) * d_k * d_v);
                float *out_c = malloc(sizeof(float) * n * d_v), *st_c = malloc(sizeof(float) * d_k * d_v);
                float *out_s = malloc(sizeof(float) * n * d_v), *st_s = malloc(sizeof(float) * d_k * d_v);
                delta_f64(&c, scale, out64, st64);
                run_float(&c, 0, scale, out_r, st_r, n);
                run_float(&c, 1, scale, out_c, st_c, n);

                double e;
                e = fmax(nmse_f(out_r, out64, n * d_v), nmse_f(st_r, st64, d_k * d_v));
                worst_rec = fmax(worst_rec, e);
                CHECK_MSG(e <= 1e-10, "recurrent n=%lld d=%lld/%lld mode %d nmse %g", (long long)n,
                          (long long)d_k, (long long)d_v, mode, e);
                e = fmax(nmse_f(out_c, out64, n * d_v), nmse_f(st_c, st64, d_k * d_v));
                worst_chunk = fmax(worst_chunk, e);
                CHECK_MSG(e <= 1e-9, "chunked n=%lld d=%lld/%lld mode %d nmse %g", (long long)n,
                          (long long)d_k, (long long)d_v, mode, e);
                e = fmax(nmse_ff(out_c, out_r, n * d_v), nmse_ff(st_c, st_r, d_k * d_v));
                worst_cr = fmax(worst_cr, e);
                CHECK_MSG(e <= 1e-9, "chunked vs recurrent n=%lld mode %d nmse %g", (long long)n, mode, e);

                /* the recurrent rule split token by token and in runs of 7: the same bits */
                run_float(&c, 0, scale, out_s, st_s, 1);
                CHECK(memcmp(out_s, out_r, sizeof(float) * n * d_v) == 0);
                CHECK(memcmp(st_s, st_r, sizeof(float) * d_k * d_v) == 0);
                run_float(&c, 0, scale, out_s, st_s, 7);
                CHECK(memcmp(out_s, out_r, sizeof(float) * n * d_v) == 0);
                /* the chunked form split in runs of 50 (chunks not on DN_CHUNK edges) */
                run_float(&c, 1, scale, out_s, st_s, 50);
                e = fmax(nmse_ff(out_s, out_r, n * d_v), nmse_ff(st_s, st_r, d_k * d_v));
                CHECK_MSG(e <= 1e-9, "chunked split n=%lld nmse %g", (long long)n, e);

                free(out64), free(st64), free(out_r), free(st_r), free(out_c), free(st_c);
                free(out_s), free(st_s);
                free_case(&c);
            }
    printf("worst nmse: recurrent %.3g, chunked %.3g, chunked vs recurrent %.3g\n", worst_rec,
           worst_chunk, worst_cr);
}

/* out may alias v in the recurrent form (the engine writes the output over v) */
static void test_delta_rule_alias(void) {
    dr_case c = make_case(20, 16, 16, 1, 1);
    float *out = malloc(sizeof(float) * 20 * 16), *st = malloc(sizeof(float) * 256);
    float *st2 = malloc(sizeof(float) * 256);
    run_float(&c, 0, 0.25f, out, st, 20);
    memcpy(st2, c.state0, sizeof(float) * 256);
    dn_delta_rule_ref(20, 16, 16, c.q, 16, c.k, 16, c.v, 16, c.g, c.beta, 1, 0.25f, st2, c.v, 16);
    CHECK(memcmp(out, c.v, sizeof(float) * 20 * 16) == 0);
    CHECK(memcmp(st, st2, sizeof(float) * 256) == 0);
    free(out), free(st), free(st2);
    free_case(&c);
}

/* ---- the SIMD tiers against their _ref twins ---- */

/* Each tier this CPU runs (cpu_kernels_build caps at the hardware), once:
 *  - conv1d+silu: <= 1e-12 (the polynomial exp and fused multiply-adds, ~1 ulp per
 *    output), its final state bit-identical (copies), split runs and in place the same bits,
 *    and the channels split among calls at odd boundaries the same bits (a kernel of 10
 *    taps takes the path without the register window);
 *  - l2 norm and output gate: <= 1e-12;
 *  - the recurrent rule: <= 1e-10 against the ref over up to 100 tokens at head dims 64 and
 *    128 and odd ones (vector tails), from a warm state; split across calls (the state
 *    carried) and with out over v: the same bits as one call;
 *  - the chunked form against the recurrent ref: <= 1e-9 (the ref chunked form's bound),
 *    chunk edges included, and split in runs of 50;
 *  - heads split across 1, 2 and 3 threads: the same bits. */
static int n_tiers_tested;

static void tier_conv(const dn_kernels *dk, const char *name) {
    const int64_t chs[] = {37, 160}, kernels[] = {1, 2, 4, 5, 10}, n_tok = 29;
    for (int ci = 0; ci < 2; ci++)
        for (int ki = 0; ki < 5; ki++) {
            const int64_t n_ch = chs[ci], kernel = kernels[ki], ns = kernel - 1;
            float *x = malloc(sizeof(float) * n_tok * n_ch), *w = malloc(sizeof(float) * kernel * n_ch);
            float *st0 = malloc(sizeof(float) * (ns + 1) * n_ch), *st_r = malloc(sizeof(float) * (ns + 1) * n_ch);
            float *st = malloc(sizeof(float) * (ns + 1) * n_ch), *out_r = malloc(sizeof(float) * n_tok * n_ch);
            float *out = malloc(sizeof(float) * n_tok * n_ch), *out2 = malloc(sizeof(float) * n_tok * n_ch);
            for (int64_t i = 0; i < n_tok * n_ch; i++) x[i] = 3 * rng_uniform();
            for (int64_t i = 0; i < kernel * n_ch; i++) w[i] = rng_uniform();
            for (int64_t i = 0; i < ns * n_ch; i++) st0[i] = 2 * rng_uniform();
            memcpy(st_r, st0, sizeof(float) * ns * n_ch);
            memcpy(st, st0, sizeof(float) * ns * n_ch);
            dn_conv1d_silu_ref(x, n_ch, n_tok, n_ch, w, kernel, st_r, n_ch, out_r, n_ch);
            dk->conv1d_silu(x, n_ch, n_tok, n_ch, w, kernel, st, n_ch, out, n_ch);
            const double e = nmse_ff(out, out_r, n_tok * n_ch);
            CHECK_MSG(e <= 1e-12, "%s conv ch %lld kernel %lld nmse %g", name, (long long)n_ch, (long long)kernel, e);
            CHECK_MSG(memcmp(st, st_r, sizeof(float) * ns * n_ch) == 0, "%s conv state", name);
            memcpy(st, st0, sizeof(float) * ns * n_ch);
            memcpy(out2, x, sizeof(float) * n_tok * n_ch);
            for (int64_t t = 0, len = 1; t < n_tok; t += len, len = len * 2 + 1) {
                const int64_t m = n_tok - t < len ? n_tok - t : len;
                dk->conv1d_silu(out2 + t * n_ch, n_ch, m, n_ch, w, kernel, st, n_ch, out2 + t * n_ch, n_ch);
            }
            CHECK_MSG(memcmp(out, out2, sizeof(float) * n_tok * n_ch) == 0, "%s conv split/in-place differs", name);
            /* the channels split among calls at odd boundaries (the forward pass gives each
             * thread a head's channels): the same bits, tails included */
            memcpy(st, st0, sizeof(float) * ns * n_ch);
            const int64_t cuts[] = {0, 5, 13, 30, n_ch};
            for (int p = 0; p + 1 < 5; p++) {
                const int64_t c0 = cuts[p], c1 = cuts[p + 1];
                dk->conv1d_silu(x + c0, n_ch, n_tok, c1 - c0, w + c0, kernel, st + c0, n_ch, out2 + c0, n_ch);
            }
            CHECK_MSG(memcmp(out, out2, sizeof(float) * n_tok * n_ch) == 0 &&
                          memcmp(st, st_r, sizeof(float) * ns * n_ch) == 0,
                      "%s conv ch %lld kernel %lld: split by channel differs", name, (long long)n_ch,
                      (long long)kernel);
            free(x), free(w), free(st0), free(st_r), free(st), free(out_r), free(out), free(out2);
        }
}

static void tier_small_ops(const dn_kernels *dk, const char *name) {
    const int64_t ns[] = {64, 128, 67, 3};
    for (int ni = 0; ni < 4; ni++) {
        const int64_t n = ns[ni];
        float x[128], y[128], yr[128], z[128], w[128], o[128], orf[128];
        for (int64_t i = 0; i < n; i++) x[i] = 3 * rng_uniform(), z[i] = 6 * rng_uniform(), w[i] = rng_uniform();
        memcpy(y, x, sizeof(float) * n), memcpy(yr, x, sizeof(float) * n);
        dk->l2_norm(y, n, 1e-6f);
        dn_l2_norm_ref(yr, n, 1e-6f);
        CHECK_MSG(nmse_ff(y, yr, n) <= 1e-12, "%s l2 norm n %lld", name, (long long)n);
        dk->gated_norm(x, z, w, n, 1e-6f, o);
        dn_gated_norm_ref(x, z, w, n, 1e-6f, orf);
        CHECK_MSG(nmse_ff(o, orf, n) <= 1e-12, "%s gated norm n %lld nmse %g", name, (long long)n, nmse_ff(o, orf, n));
        dk->gated_norm(x, z, w, n, 1e-6f, x); /* in place */
        CHECK(memcmp(x, o, sizeof(float) * n) == 0);
    }
}

/* The case through `rule` (recurrent, or chunked with scratch) in runs of `split`. */
static void run_rule(const dn_kernels *dk, const dr_case *c, int chunked, float scale, float *out, float *state,
                     int64_t split) {
    memcpy(state, c->state0, sizeof(float) * c->d_k * c->d_v);
    float *scratch = malloc(sizeof(float) * dn_chunk_scratch_floats(c->d_k, c->d_v));
    for (int64_t t = 0; t < c->n; t += split) {
        const int64_t m = c->n - t < split ? c->n - t : split;
        if (chunked)
            dk->delta_rule_chunked(m, c->d_k, c->d_v, c->q + t * c->d_k, c->d_k, c->k + t * c->d_k, c->d_k,
                                   c->v + t * c->d_v, c->d_v, c->g + t, c->beta + t, 1, scale, state,
                                   out + t * c->d_v, c->d_v, scratch);
        else
            dk->delta_rule(m, c->d_k, c->d_v, c->q + t * c->d_k, c->d_k, c->k + t * c->d_k, c->d_k,
                           c->v + t * c->d_v, c->d_v, c->g + t, c->beta + t, 1, scale, state, out + t * c->d_v,
                           c->d_v);
    }
    free(scratch);
}

static void tier_delta_rule(const dn_kernels *dk, const char *name) {
    const int64_t shapes[][2] = {{64, 64}, {128, 128}, {20, 7}, {24, 40}};
    const int64_t lens[] = {1, 5, 33, 100};
    const int64_t clens[] = {1, 63, 64, 65, 130};
    double worst_rec = 0, worst_chunk = 0;
    for (int si = 0; si < 4; si++) {
        const int64_t d_k = shapes[si][0], d_v = shapes[si][1];
        const float scale = 1.0f / sqrtf((float)d_k);
        for (int li = 0; li < 4; li++) {
            const int64_t n = lens[li];
            dr_case c = make_case(n, d_k, d_v, li % 3, li != 0);
            float *out_r = malloc(sizeof(float) * n * d_v), *st_r = malloc(sizeof(float) * d_k * d_v);
            float *out = malloc(sizeof(float) * n * d_v), *st = malloc(sizeof(float) * d_k * d_v);
            float *out2 = malloc(sizeof(float) * n * d_v), *st2 = malloc(sizeof(float) * d_k * d_v);
            run_rule(&dn_kernels_ref, &c, 0, scale, out_r, st_r, n);
            run_rule(dk, &c, 0, scale, out, st, n);
            const double e = fmax(nmse_ff(out, out_r, n * d_v), nmse_ff(st, st_r, d_k * d_v));
            worst_rec = fmax(worst_rec, e);
            CHECK_MSG(e <= 1e-10, "%s recurrent d %lld/%lld n %lld nmse %g", name, (long long)d_k, (long long)d_v,
                      (long long)n, e);
            /* the state carried across calls of 1 and of 7 tokens: the same bits */
            const int64_t splits[] = {1, 7};
            for (int sp = 0; sp < 2; sp++) {
                run_rule(dk, &c, 0, scale, out2, st2, splits[sp]);
                CHECK_MSG(memcmp(out2, out, sizeof(float) * n * d_v) == 0 &&
                              memcmp(st2, st, sizeof(float) * d_k * d_v) == 0,
                          "%s recurrent split %lld differs (d %lld, n %lld)", name, (long long)splits[sp],
                          (long long)d_k, (long long)n);
            }
            /* out over v */
            memcpy(st2, c.state0, sizeof(float) * d_k * d_v);
            dk->delta_rule(n, d_k, d_v, c.q, d_k, c.k, d_k, c.v, d_v, c.g, c.beta, 1, scale, st2, c.v, d_v);
            CHECK_MSG(memcmp(c.v, out, sizeof(float) * n * d_v) == 0, "%s recurrent out over v differs", name);
            free(out_r), free(st_r), free(out), free(st), free(out2), free(st2);
            free_case(&c);
        }
        for (int li = 0; li < 5; li++)
            for (int mode = 0; mode < 3; mode += (d_k >= 64 ? 2 : 1)) {
                const int64_t n = clens[li];
                dr_case c = make_case(n, d_k, d_v, mode, (li + mode) % 2);
                float *out_r = malloc(sizeof(float) * n * d_v), *st_r = malloc(sizeof(float) * d_k * d_v);
                float *out = malloc(sizeof(float) * n * d_v), *st = malloc(sizeof(float) * d_k * d_v);
                run_rule(&dn_kernels_ref, &c, 0, scale, out_r, st_r, n);
                run_rule(dk, &c, 1, scale, out, st, n);
                double e = fmax(nmse_ff(out, out_r, n * d_v), nmse_ff(st, st_r, d_k * d_v));
                worst_chunk = fmax(worst_chunk, e);
                CHECK_MSG(e <= 1e-9, "%s chunked vs recurrent ref d %lld/%lld n %lld mode %d nmse %g", name,
                          (long long)d_k, (long long)d_v, (long long)n, mode, e);
                run_rule(dk, &c, 1, scale, out, st, 50);
                e = fmax(nmse_ff(out, out_r, n * d_v), nmse_ff(st, st_r, d_k * d_v));
                worst_chunk = fmax(worst_chunk, e);
                CHECK_MSG(e <= 1e-9, "%s chunked split 50 d %lld n %lld nmse %g", name, (long long)d_k, (long long)n, e);
                free(out_r), free(st_r), free(out), free(st);
                free_case(&c);
            }
    }
    printf("%s: worst nmse against the recurrent ref: recurrent %.3g, chunked %.3g\n", name, worst_rec, worst_chunk);
}

/* Heads split across threads as the forward pass splits them (tp_range over heads). */
typedef struct {
    const dn_kernels *dk;
    const dr_case *c;
    int64_t n_heads;
    float *state, *out; /* (n_heads, d_v, d_k), (n_tokens, n_heads * d_v) */
    float *scratch;     /* per thread */
    int chunked;
} heads_job;

static void heads_fn(void *ctx, int ith, int nth) {
    heads_job *j = ctx;
    const dr_case *c = j->c;
    const int64_t D = j->n_heads * c->d_v, sf = dn_chunk_scratch_floats(c->d_k, c->d_v);
    int64_t h0, h1;
    tp_range(j->n_heads, 1, ith, nth, &h0, &h1);
    for (int64_t h = h0; h < h1; h++) {
        /* head h: tokens of the case shifted by h (independent inputs per head) */
        const int64_t off = h % c->n;
        float *S = j->state + h * c->d_k * c->d_v, *o = j->out + h * c->d_v;
        const int64_t n = c->n - off;
        if (j->chunked)
            j->dk->delta_rule_chunked(n, c->d_k, c->d_v, c->q + off * c->d_k, c->d_k, c->k + off * c->d_k, c->d_k,
                                      c->v + off * c->d_v, c->d_v, c->g + off, c->beta + off, 1, 0.125f, S, o, D,
                                      j->scratch + ith * sf);
        else
            j->dk->delta_rule(n, c->d_k, c->d_v, c->q + off * c->d_k, c->d_k, c->k + off * c->d_k, c->d_k,
                              c->v + off * c->d_v, c->d_v, c->g + off, c->beta + off, 1, 0.125f, S, o, D);
    }
}

static void tier_threads(const dn_kernels *dk, const char *name) {
    const int64_t n_heads = 7, d = 64, n = 70;
    dr_case c = make_case(n, d, d, 1, 1);
    const size_t st_n = (size_t)(n_heads * d * d), out_n = (size_t)(n * n_heads * d);
    float *st1 = malloc(sizeof(float) * st_n), *out1 = calloc(out_n, sizeof(float));
    float *st = malloc(sizeof(float) * st_n), *out = calloc(out_n, sizeof(float));
    float *scratch = malloc(sizeof(float) * 3 * (size_t)dn_chunk_scratch_floats(d, d));
    for (int chunked = 0; chunked < 2; chunked++)
        for (int nth = 1; nth <= 3; nth++) {
            tp_pool *pool = NULL;
            CHECK_OK(tp_create(nth, &pool));
            if (!pool) break;
            for (int64_t h = 0; h < n_heads; h++) memcpy(st + h * d * d, c.state0, sizeof(float) * d * d);
            heads_job j = {.dk = dk, .c = &c, .n_heads = n_heads, .state = st, .out = out, .scratch = scratch,
                           .chunked = chunked};
            tp_run(pool, heads_fn, &j);
            tp_destroy(pool);
            if (nth == 1) {
                memcpy(st1, st, sizeof(float) * st_n), memcpy(out1, out, sizeof(float) * out_n);
            } else {
                CHECK_MSG(memcmp(st, st1, sizeof(float) * st_n) == 0 && memcmp(out, out1, sizeof(float) * out_n) == 0,
                          "%s %s: %d threads differ from 1", name, chunked ? "chunked" : "recurrent", nth);
            }
        }
    free(st1), free(out1), free(st), free(out), free(scratch);
    free_case(&c);
}

static void test_tiers(void) {
    const cpu_isa tiers[] = {CPU_ISA_AVX2, CPU_ISA_AVX512, CPU_ISA_NEON};
    const void *seen[3] = {0};
    /* the ref table through the same checks (against itself it must be exact) */
    tier_threads(&dn_kernels_ref, "ref");
    for (int ti = 0; ti < 3; ti++) {
        cpu_kernels k;
        cpu_kernels_build(tiers[ti], &k);
        const void *id = (const void *)k.dn.delta_rule;
        int dup = id == (const void *)dn_kernels_ref.delta_rule;
        for (int s = 0; s < ti; s++) dup |= seen[s] == id;
        seen[ti] = id;
        if (dup) continue;
        printf("tier %s\n", k.isa_name);
        tier_conv(&k.dn, k.isa_name);
        tier_small_ops(&k.dn, k.isa_name);
        tier_delta_rule(&k.dn, k.isa_name);
        tier_threads(&k.dn, k.isa_name);
        n_tiers_tested++;
    }
    /* VT_ISA=ref's table is the _ref twins */
    cpu_kernels kr;
    cpu_kernels_build(CPU_ISA_REF, &kr);
    CHECK(memcmp(&kr.dn, &dn_kernels_ref, sizeof kr.dn) == 0);
    /* the selected table is one of them: never the ref where the CPU has SIMD */
    const cpu_kernels *sel = cpu_kernels_get();
    CHECK(sel->isa == CPU_ISA_REF || sel->dn.delta_rule != dn_kernels_ref.delta_rule);
    printf("SIMD tiers tested: %d (selected: %s)\n", n_tiers_tested, sel->isa_name);
}

int main(void) {
    test_conv();
    test_small_ops();
    test_delta_rule();
    test_delta_rule_alias();
    test_tiers();
    return test_finish();
}
