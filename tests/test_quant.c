/* quant/: traits, row sizes, name lookup; per type the round-trip error of the
 * reference quantizer, the reference dot product against the float dot of the
 * dequantized rows, and odd inputs (zeros, negative zero, one huge value).
 * Bit-exactness with ggml itself is tests/llama/test_quant_ggml.c. */
#include "quant/blocks.h"
#include "quant/quant.h"
#include "test.h"

#include <stdint.h>

static uint64_t rng_state = 12345;
static float rng_normal(void) {
    /* Box-Muller over a splitmix64 stream */
    uint64_t z1 = (rng_state += 0x9E3779B97F4A7C15ull), z2 = (rng_state += 0x9E3779B97F4A7C15ull);
    z1 = (z1 ^ (z1 >> 30)) * 0xBF58476D1CE4E5B9ull, z1 ^= z1 >> 27;
    z2 = (z2 ^ (z2 >> 30)) * 0xBF58476D1CE4E5B9ull, z2 ^= z2 >> 27;
    double u = ((z1 >> 11) + 1.0) / 9007199254740993.0, v = (z2 >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

typedef struct type_case {
    vt_dtype type;
    const char *name;
    vt_dtype dot_type;
    double max_nmse;     /* round trip of N(0,1) data */
    double max_dot_err;  /* |dot_ref - float dot of the quantized rows| / sum |w_i x_i| */
    double max_true_err; /* |dot_ref - exact dot| / (|w| |x|) */
} type_case;

/* Bounds are ~2-5x what these quantizers reach on N(0,1) rows of 4096 (the
 * printed table); the *_1 types' dot carries s = fp16(d * sum) rounding. */
static const type_case cases[] = {
    {VT_DTYPE_F32, "f32", VT_DTYPE_F32, 0, 1e-7, 1e-7},
    {VT_DTYPE_F16, "f16", VT_DTYPE_F16, 1e-7, 1e-7, 2e-5},
    {VT_DTYPE_BF16, "bf16", VT_DTYPE_BF16, 1e-5, 1e-7, 2e-4},
    {VT_DTYPE_Q4_0, "q4_0", VT_DTYPE_Q8_0, 1.5e-2, 1e-6, 5e-3},
    {VT_DTYPE_Q4_1, "q4_1", VT_DTYPE_Q8_1, 1.2e-2, 1e-4, 5e-3},
    {VT_DTYPE_Q5_0, "q5_0", VT_DTYPE_Q8_0, 4e-3, 1e-6, 3e-3},
    {VT_DTYPE_Q5_1, "q5_1", VT_DTYPE_Q8_1, 3e-3, 1e-4, 3e-3},
    {VT_DTYPE_Q8_0, "q8_0", VT_DTYPE_Q8_0, 1e-4, 1e-6, 1e-3},
    {VT_DTYPE_Q2_K, "q2_K", VT_DTYPE_Q8_K, 0.15, 1e-6, 2e-2},
    {VT_DTYPE_Q3_K, "q3_K", VT_DTYPE_Q8_K, 5e-2, 1e-6, 1e-2},
    {VT_DTYPE_Q4_K, "q4_K", VT_DTYPE_Q8_K, 1.2e-2, 1e-6, 5e-3},
    {VT_DTYPE_Q5_K, "q5_K", VT_DTYPE_Q8_K, 3e-3, 1e-6, 3e-3},
    {VT_DTYPE_Q6_K, "q6_K", VT_DTYPE_Q8_K, 8e-4, 1e-6, 2e-3},
    {VT_DTYPE_IQ4_NL, "iq4_nl", VT_DTYPE_Q8_0, 1.2e-2, 1e-6, 5e-3},
    {VT_DTYPE_IQ4_XS, "iq4_xs", VT_DTYPE_Q8_K, 1.2e-2, 1e-6, 5e-3},
    {VT_DTYPE_MXFP4, "mxfp4", VT_DTYPE_Q8_0, 5e-2, 1e-6, 1e-2},
    /* activation types: round trip only (no dot_ref) */
    {VT_DTYPE_Q8_1, "q8_1", VT_DTYPE_Q8_1, 1e-4, 0, 0},
    {VT_DTYPE_Q8_K, "q8_K", VT_DTYPE_Q8_K, 1e-4, 0, 0},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

enum { N = 4096 };

static void *quantize(vt_dtype t, const float *x, int64_t n) {
    size_t bytes;
    if (!quant_row_bytes(t, n, &bytes)) return NULL;
    void *q = calloc(1, bytes);
    quant_traits_get(t)->quant_ref(x, q, n);
    return q;
}

static float *dequantize(vt_dtype t, const void *q, int64_t n) {
    float *y = malloc((size_t)n * sizeof(float));
    quant_traits_get(t)->dequant_ref(q, y, n);
    return y;
}

static void test_traits(void) {
    for (int i = 0; i < N_CASES; i++) {
        const quant_traits *t = quant_traits_get(cases[i].type);
        CHECK_MSG(t != NULL, "%s", cases[i].name);
        if (!t) continue;
        CHECK_MSG(!strcmp(t->name, cases[i].name), "%s vs %s", t->name, cases[i].name);
        CHECK(quant_traits_by_name(cases[i].name) == t);
        CHECK_MSG(t->dot_type == cases[i].dot_type, "%s dot type %d", t->name, (int)t->dot_type);
        CHECK(t->dequant_ref && t->quant_ref);
        CHECK(t->quantized == (t->block_elems > 1));
        CHECK(t->dot_ref != NULL || cases[i].type == VT_DTYPE_Q8_1 || cases[i].type == VT_DTYPE_Q8_K);
    }
    CHECK_EQ_INT(quant_traits_get(VT_DTYPE_Q4_K)->block_bytes, sizeof(block_q4_K));
    CHECK_EQ_INT(quant_traits_get(VT_DTYPE_IQ4_XS)->block_elems, 256);
    CHECK_EQ_INT(quant_traits_get(VT_DTYPE_Q5_1)->block_bytes, 24);
    CHECK(quant_traits_get((vt_dtype)4) == NULL); /* ggml's removed q4_2 */
    CHECK(quant_traits_get((vt_dtype)-1) == NULL);
    CHECK(quant_traits_get(VT_DTYPE_COUNT) == NULL);
    CHECK(quant_traits_by_name("Q4_K") == NULL); /* names are ggml's, case-sensitive */
    CHECK(quant_traits_by_name("q4_k") == NULL);
    CHECK(quant_traits_by_name("") == NULL);
    CHECK(quant_traits_by_name(NULL) == NULL);
    CHECK_EQ_INT(iq4nl_values[0], -127);
    CHECK_EQ_INT(iq4nl_values[15], 113);
    CHECK_EQ_INT(quant_traits_get(VT_DTYPE_MXFP4)->block_bytes, 17);
    CHECK(quant_traits_by_name("mxfp4") == quant_traits_get(VT_DTYPE_MXFP4));
    /* E8M0 halved: 2^(e - 128), the two smallest subnormal */
    CHECK(mxfp4_e8m0_half(128) == 1.0f && mxfp4_e8m0_half(127) == 0.5f && mxfp4_e8m0_half(2) == ldexpf(1, -126));
    CHECK(mxfp4_e8m0_half(1) == ldexpf(1, -127) && mxfp4_e8m0_half(0) == ldexpf(1, -128));
}

static void test_row_bytes(void) {
    size_t b = 0;
    CHECK(quant_row_bytes(VT_DTYPE_Q4_0, 64, &b) && b == 36);
    CHECK(quant_row_bytes(VT_DTYPE_Q4_K, 512, &b) && b == 288);
    CHECK(quant_row_bytes(VT_DTYPE_Q6_K, 4096, &b) && b == 16 * 210);
    CHECK(quant_row_bytes(VT_DTYPE_F16, 7, &b) && b == 14);
    CHECK(quant_row_bytes(VT_DTYPE_BF16, 0, &b) && b == 0);
    CHECK(quant_row_bytes(VT_DTYPE_IQ4_NL, 96, &b) && b == 54);
    CHECK(!quant_row_bytes(VT_DTYPE_Q4_K, 255, &b));  /* not a multiple of 256 */
    CHECK(!quant_row_bytes(VT_DTYPE_Q8_0, 33, &b));
    CHECK(!quant_row_bytes(VT_DTYPE_Q8_0, -32, &b));
    CHECK(!quant_row_bytes(VT_DTYPE_F32, INT64_MAX, &b)); /* bytes overflow size_t */
    CHECK(!quant_row_bytes((vt_dtype)5, 32, &b));
}

/* Round trip and dot product on N(0,1) rows. */
static void test_accuracy(void) {
    float *w = malloc(N * sizeof(float)), *x = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) w[i] = rng_normal();
    for (int i = 0; i < N; i++) x[i] = rng_normal();
    double exact = 0, nw = 0, nx = 0;
    for (int i = 0; i < N; i++) exact += (double)w[i] * x[i], nw += (double)w[i] * w[i], nx += (double)x[i] * x[i];

    printf("%-7s %10s %12s %12s\n", "type", "nmse", "dot vs deq", "dot vs true");
    for (int c = 0; c < N_CASES; c++) {
        const type_case *tc = &cases[c];
        const quant_traits *t = quant_traits_get(tc->type);
        void *wq = quantize(tc->type, w, N);
        float *wd = dequantize(tc->type, wq, N);
        const double nmse = test_nmse(wd, w, N);
        CHECK_MSG(nmse <= tc->max_nmse, "%s: nmse %.3g > %.3g", tc->name, nmse, tc->max_nmse);
        double dot_err = 0, true_err = 0;
        if (t->dot_ref) {
            void *xq = quantize(t->dot_type, x, N);
            float *xd = dequantize(t->dot_type, xq, N);
            double deq = 0, mag = 0;
            for (int i = 0; i < N; i++) deq += (double)wd[i] * xd[i], mag += fabs((double)wd[i] * xd[i]);
            const double d = t->dot_ref(N, wq, xq);
            dot_err = fabs(d - deq) / mag;
            true_err = fabs(d - exact) / sqrt(nw * nx);
            CHECK_MSG(dot_err <= tc->max_dot_err, "%s: dot %.9g vs dequantized %.9g (rel %.3g)",
                      tc->name, d, deq, dot_err);
            CHECK_MSG(true_err <= tc->max_true_err, "%s: dot %.6g vs exact %.6g (rel %.3g)", tc->name,
                      d, exact, true_err);
            free(xq);
            free(xd);
        }
        printf("%-7s %10.3g %12.3g %12.3g\n", tc->name, nmse, dot_err, true_err);
        free(wq);
        free(wd);
    }
    free(w);
    free(x);
}

/* Zeros, negative zeros, constant rows, one huge value among small ones. */
static void test_odd_inputs(void) {
    float *x = malloc(N * sizeof(float));
    for (int c = 0; c < N_CASES; c++) {
        const type_case *tc = &cases[c];
        for (int variant = 0; variant < 4; variant++) {
            for (int i = 0; i < N; i++) {
                switch (variant) {
                case 0: x[i] = 0.0f; break;
                case 1: x[i] = -0.0f; break;
                case 2: x[i] = 0.25f; break;
                default: x[i] = (i == 1000) ? 1.0e4f : rng_normal() * 1e-3f; break;
                }
            }
            void *q = quantize(tc->type, x, N);
            float *y = dequantize(tc->type, q, N);
            int non_finite = 0, nonzero = 0;
            for (int i = 0; i < N; i++) {
                if (!isfinite(y[i])) non_finite++;
                if (y[i] != 0.0f) nonzero++;
            }
            CHECK_MSG(non_finite == 0, "%s variant %d: %d non-finite", tc->name, variant, non_finite);
            if (variant <= 1) CHECK_MSG(nonzero == 0, "%s: zeros give %d nonzero", tc->name, nonzero);
            if (variant == 2) {
                /* a constant positive row: every type reproduces it to within 1% */
                double worst = 0;
                for (int i = 0; i < N; i++) worst = fmax(worst, fabs(y[i] - 0.25) / 0.25);
                CHECK_MSG(worst < 0.01, "%s: constant row off by %.3g", tc->name, worst);
            }
            if (variant == 3) {
                /* the outlier owns its block's scale: it survives to within 1%
                 * (MXFP4, a power-of-two scale on a grid whose top steps are
                 * 8 and 12: to the nearer of them, within 25%) */
                const float tol = tc->type == VT_DTYPE_MXFP4 ? 2500.0f : 100.0f;
                CHECK_MSG(fabsf(y[1000] - 1.0e4f) < tol, "%s: outlier %g", tc->name, y[1000]);
            }
            const quant_traits *t = quant_traits_get(tc->type);
            if (t->dot_ref && variant <= 1) {
                float *ones = malloc(N * sizeof(float));
                for (int i = 0; i < N; i++) ones[i] = 1.0f;
                void *xq = quantize(t->dot_type, ones, N);
                CHECK_MSG(t->dot_ref(N, q, xq) == 0.0f, "%s: dot with zero row", tc->name);
                free(xq);
                free(ones);
            }
            free(q);
            free(y);
        }
    }
    free(x);
}

/* The activation quantizers are the traits' quant_ref, and Q8_1's s and Q8_K's
 * bsums hold what the dot kernels expect. */
static void test_activation_quantizers(void) {
    float x[512];
    for (int i = 0; i < 512; i++) x[i] = rng_normal();
    block_q8_1 q1[16];
    quant_row_q8_1_ref(x, q1, 512);
    for (int b = 0; b < 16; b++) {
        int sum = 0;
        for (int j = 0; j < 32; j++) sum += q1[b].qs[j];
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
        CHECK(q1[b].s == f32_to_f16(sum * (amax / 127))); /* s = fp16(d * sum q), d unrounded */
    }
    block_q8_K qk[2];
    quant_row_q8_K_ref(x, qk, 512);
    int bad = 0;
    for (int b = 0; b < 2; b++) {
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += qk[b].qs[16 * g + j];
            if (sum != qk[b].bsums[g]) bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    vt_f16 h[4];
    vt_bf16 bh[4];
    const float v[4] = {1.0f, -2.5f, 65504.0f, 1e-8f};
    quant_row_f16_ref(v, h, 4);
    quant_row_bf16_ref(v, bh, 4);
    CHECK(h[0] == 0x3c00 && h[1] == 0xc100 && h[2] == 0x7bff);
    CHECK(bh[0] == 0x3f80 && bh[1] == 0xc020);
    block_q8_0 q0;
    quant_row_q8_0_ref(x, &q0, 32);
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    CHECK(q0.d == f32_to_f16(amax / 127));
}

int main(void) {
    test_traits();
    test_row_bytes();
    test_accuracy();
    test_odd_inputs();
    test_activation_quantizers();
    return test_finish();
}
