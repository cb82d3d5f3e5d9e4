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
        dn_conv1d_silu_ref(x, n_ch, n_tok, n_ch, w, kernel, st, out, n_ch);
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
            dn_conv1d_silu_ref(out2 + t * n_ch, n_ch, m, n_ch, w, kernel, st, out2 + t * n_ch, n_ch);
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

int main(void) {
    test_conv();
    test_small_ops();
    test_delta_rule();
    test_delta_rule_alias();
    return test_finish();
}
