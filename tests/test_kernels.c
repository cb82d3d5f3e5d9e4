/* cpu/kernels: every SIMD kernel in the dispatch table against its _ref twin.
 *
 * Bounds (S = sum_i |w_i * x_i| over the dequantized row, the scale of the dot
 * before cancellation):
 *  - quantized weight types: the integer math is the ref's, only the float
 *    accumulation order differs, so |simd - ref| <= 2e-6 * S per row;
 *  - F32/F16/BF16: float accumulation (ref: double), |simd - ref| <= 1e-5 * S
 *    for rows up to 4097 elements (float eps 6e-8 times ~n/32 + log terms);
 *  - activation quantizers: bit-identical bytes (including roundf ties);
 *  - dot_rows: bit-identical with dot for nr = 1..4 (matmul relies on it).
 *  - packed GEMMs (cpu/pack.h), every tier that has one: bit-identical with the
 *    pack_gemm_ref twin for n_tok 1..4, 1..3 groups and a partial last group
 *    (n_out 5, 16, 37, 48), rows of 1, 2, 3, 7, 64 blocks (the 32-element types'
 *    narrow kernels also 428, n_in 13696, GLM-4's FFN width, at n_out 37); and the twin within
 *    2e-6 * S of the quant module's dot on the file-layout row (Q5_0, Q4_1 and
 *    Q5_1: bit-identical with it, pack.h). The last row of
 *    each weight has every quant byte 0xff and token 1 all quants -127, so the
 *    integer sums reach their largest magnitude (the kernels' int16 bounds).
 * Shapes: 1..8 blocks, 7, 33 and 64 blocks; float rows of 1..40, 100, 4097.
 * Weights are both ref-quantized floats and random bytes (with sane fp16 scales),
 * so every bit pattern of the packed quants is exercised. The test re-runs itself
 * with VT_ISA=ref to check that the dispatch falls back to the scalar kernels. */
#include "base/fp16.h"
#include "cpu/cpu_features.h"
#include "cpu/kernels.h"
#include "cpu/pack.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "test.h"

#include <spawn.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rng_uniform(void) { return (rng_u32() & 0xffffff) / 16777216.0f * 2.0f - 1.0f; }
/* roughly normal with occasional outliers, like activations */
static float rng_act(void) {
    float v = rng_uniform() + rng_uniform() + rng_uniform();
    if ((rng_u32() & 63) == 0) v *= 8;
    return v;
}

static const vt_dtype weight_types[] = {
    VT_DTYPE_F32,  VT_DTYPE_F16,  VT_DTYPE_BF16, VT_DTYPE_Q4_0,   VT_DTYPE_Q4_1,
    VT_DTYPE_Q5_0, VT_DTYPE_Q5_1, VT_DTYPE_Q8_0, VT_DTYPE_Q2_K,   VT_DTYPE_Q3_K,
    VT_DTYPE_Q4_K, VT_DTYPE_Q5_K, VT_DTYPE_Q6_K, VT_DTYPE_IQ4_NL, VT_DTYPE_IQ4_XS,
    VT_DTYPE_MXFP4,
};
#define N_WEIGHT_TYPES ((int)(sizeof weight_types / sizeof weight_types[0]))

/* Byte offsets of the fp16 scale fields of one block, -1 terminated. */
static const int *f16_fields(vt_dtype t) {
    static const int d0[] = {0, -1}, d01[] = {0, 2, -1}, q2k[] = {80, 82, -1}, q3k[] = {108, -1},
                     q6k[] = {208, -1}, none[] = {-1};
    switch (t) {
    case VT_DTYPE_Q4_0: case VT_DTYPE_Q5_0: case VT_DTYPE_Q8_0: case VT_DTYPE_IQ4_NL:
    case VT_DTYPE_IQ4_XS: return d0;
    case VT_DTYPE_Q4_1: case VT_DTYPE_Q5_1: case VT_DTYPE_Q4_K: case VT_DTYPE_Q5_K: return d01;
    case VT_DTYPE_Q2_K: return q2k;
    case VT_DTYPE_Q3_K: return q3k;
    case VT_DTYPE_Q6_K: return q6k;
    default: return none;
    }
}

/* Random bytes for n elements of a block type, fp16 scales set to small sane values. */
static void random_row(vt_dtype t, void *dst, int64_t n) {
    const quant_traits *tr = quant_traits_get(t);
    size_t bytes;
    quant_row_bytes(t, n, &bytes);
    uint8_t *p = dst;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rng_u32();
    const int *f = f16_fields(t);
    for (int64_t b = 0; b < n / tr->block_elems; b++)
        for (int k = 0; f[k] >= 0; k++) {
            vt_f16 h = f32_to_f16(rng_uniform() * 0.01f);
            memcpy(p + b * tr->block_bytes + f[k], &h, 2);
        }
    if (t == VT_DTYPE_MXFP4) /* E8M0 scales 2^-13 .. 2^2, subnormal now and then */
        for (int64_t b = 0; b < n / tr->block_elems; b++)
            p[b * tr->block_bytes] = (uint8_t)(rng_u32() % 8 == 0 ? rng_u32() % 2 : 114 + rng_u32() % 16);
}

/* A row of all-ones quant bytes (every quant, scale and min at its maximum) with
 * sane fp16 scales: against activations of one sign it drives the integer sums
 * to their largest magnitude, which the int16 bounds of the SIMD kernels
 * (maddubs pair sums added before a madd) must hold. */
static void saturated_row(vt_dtype t, void *dst, int64_t n) {
    const quant_traits *tr = quant_traits_get(t);
    size_t bytes;
    quant_row_bytes(t, n, &bytes);
    uint8_t *p = dst;
    memset(p, 0xff, bytes);
    const int *f = f16_fields(t);
    const vt_f16 h = f32_to_f16(0.01f);
    for (int64_t b = 0; b < n / tr->block_elems; b++)
        for (int k = 0; f[k] >= 0; k++) memcpy(p + b * tr->block_bytes + f[k], &h, 2);
    if (t == VT_DTYPE_MXFP4) /* a scale of 2^-7; the codes 0xf are -12 x 2 */
        for (int64_t b = 0; b < n / tr->block_elems; b++) p[b * tr->block_bytes] = 121;
}

static double abs_dot_scale(const float *w, const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)w[i] * x[i]);
    return s;
}

/* ---- dots ---------------------------------------------------------------------------- */

static void check_dot_type(const cpu_kernels *simd, const cpu_kernels *ref, vt_dtype t) {
    const quant_traits *tr = quant_traits_get(t);
    const quant_traits *dt = quant_traits_get(tr->dot_type);
    if (!simd->dot[t] || simd->dot_isa[t] == CPU_ISA_REF) {
        printf("  %-7s no SIMD kernel, skipped\n", tr->name);
        return;
    }
    int64_t lens[64];
    int n_lens = 0;
    if (tr->quantized) {
        static const int nbs[] = {1, 2, 3, 4, 5, 6, 7, 8, 33, 64};
        for (size_t i = 0; i < sizeof nbs / sizeof nbs[0]; i++) lens[n_lens++] = nbs[i] * tr->block_elems;
    } else {
        for (int i = 1; i <= 40; i++) lens[n_lens++] = i;
        lens[n_lens++] = 100;
        lens[n_lens++] = 4097;
    }
    const double tol = tr->quantized ? 2e-6 : 1e-5;
    const int rows = 4;
    double worst = 0, nmse_num = 0, nmse_den = 0;
    int bad = 0, bad_rows = 0;
    for (int li = 0; li < n_lens; li++) {
        const int64_t n = lens[li];
        size_t wrow, xrow;
        VT_ASSERT(quant_row_bytes(t, n, &wrow) && quant_row_bytes(tr->dot_type, n, &xrow));
        float *xf = malloc(n * sizeof(float)), *wf = malloc(n * sizeof(float));
        float *xd = malloc(n * sizeof(float)), *wd = malloc(n * sizeof(float));
        uint8_t *w = malloc(wrow * rows), *x = malloc(xrow);
        for (int64_t i = 0; i < n; i++) xf[i] = rng_act();
        dt->quant_ref(xf, x, n);
        dt->dequant_ref(x, xd, n);
        for (int variant = 0; variant < 2; variant++) {
            for (int r = 0; r < rows; r++) {
                if (variant == 0 || !tr->quantized) {
                    for (int64_t i = 0; i < n; i++) wf[i] = rng_uniform() * (1 + r);
                    tr->quant_ref(wf, w + r * wrow, n);
                } else {
                    random_row(t, w + r * wrow, n);
                }
            }
            float s_rows[CPU_DOT_ROWS_MAX];
            for (int r = 0; r < rows; r++) {
                const uint8_t *wr = w + r * wrow;
                const float a = simd->dot[t](n, wr, x);
                const float e = ref->dot[t](n, wr, x);
                tr->dequant_ref(wr, wd, n);
                const double S = abs_dot_scale(wd, xd, n);
                const double err = fabs((double)a - e);
                if (S > 0 && err / S > worst) worst = err / S;
                nmse_num += err * err;
                nmse_den += (double)e * e;
                if (!(err <= tol * S + 1e-30)) {
                    if (bad < 5)
                        fprintf(stderr, "  %s n=%lld row %d variant %d: simd %.9g ref %.9g (S %.3g)\n",
                                tr->name, (long long)n, r, variant, a, e, S);
                    bad++;
                }
            }
            /* dot_rows agrees with dot bit for bit, for every nr */
            for (int nr = 1; nr <= CPU_DOT_ROWS_MAX; nr++) {
                simd->dot_rows[t](n, w, wrow, x, s_rows, nr);
                for (int r = 0; r < nr; r++) {
                    const float a = simd->dot[t](n, w + r * wrow, x);
                    if (memcmp(&a, &s_rows[r], sizeof a)) bad_rows++;
                }
            }
        }
        free(xf), free(wf), free(xd), free(wd), free(w), free(x);
    }
    const double nmse = nmse_den > 0 ? nmse_num / nmse_den : nmse_num;
    CHECK_MSG(bad == 0, "%s: %d rows past %.0e * S (worst %.2e)", tr->name, bad, tol, worst);
    CHECK_MSG(bad_rows == 0, "%s: dot_rows differs from dot in %d outputs", tr->name, bad_rows);
    CHECK_MSG(nmse < 1e-10, "%s: nmse %.3g", tr->name, nmse);
    printf("  %-7s %-6s worst |err|/S %.2e  nmse %.2e\n", tr->name, cpu_isa_str(simd->dot_isa[t]),
           worst, nmse);
}

/* ---- packed GEMMs ------------------------------------------------------------------- */

/* One packed GEMM kernel (up to tok_max tokens per call) against its ref twin. */
static void check_gemm_kernel(pack_gemm_fn kern, const char *isa, vt_dtype t, int tok_max) {
    const quant_traits *tr = quant_traits_get(t);
    const quant_traits *dt = quant_traits_get(tr->dot_type);
    const pack_gemm_fn ref = pack_gemm_ref(t);
    CHECK(ref != NULL);
    static const int nbs[] = {1, 2, 3, 7, 64, 428};
    static const int64_t n_outs[] = {5, 16, 37, 48};
    const size_t n_nbs = tr->block_elems == 32 && tok_max <= PACK_TOK_MAX ? 6 : 5;
    int bad_bits = 0, bad_value = 0, bad_exact = 0, cases = 0;
    double worst = 0;
    /* these twins take the file-layout _ref dot's float steps: its very bits */
    const bool exact = t == VT_DTYPE_Q5_0 || t == VT_DTYPE_Q4_1 || t == VT_DTYPE_Q5_1;
    for (size_t bi = 0; bi < n_nbs; bi++) {
        const int64_t n = nbs[bi] * tr->block_elems;
        size_t wrow, xrow;
        VT_ASSERT(quant_row_bytes(t, n, &wrow) && quant_row_bytes(tr->dot_type, n, &xrow));
        const size_t x_stride = xrow + 8; /* rows not packed back to back */
        for (size_t oi = 0; oi < sizeof n_outs / sizeof n_outs[0]; oi++) {
            if (nbs[bi] == 428 && n_outs[oi] != 37) continue; /* the long rows: one odd group count */
            const int64_t n_out = n_outs[oi], n_groups = (n_out + PACK_ROWS - 1) / PACK_ROWS;
            uint8_t *w = malloc(wrow * n_out), *wp = malloc(wrow * PACK_ROWS * n_groups);
            uint8_t *x = calloc(tok_max, x_stride);
            float *xf = malloc(n * sizeof(float)), *wf = malloc(n * sizeof(float));
            float *wd = malloc(n * sizeof(float)), *xd = malloc(n * sizeof(float) * tok_max);
            pack_xblock *sides = malloc(sizeof(pack_xblock) * tok_max * (n / 32 + 1));
            for (int64_t r = 0; r < n_out; r++) {
                if (r == n_out - 1) {
                    saturated_row(t, w + r * wrow, n);
                } else if (r % 2) {
                    random_row(t, w + r * wrow, n);
                } else {
                    for (int64_t i = 0; i < n; i++) wf[i] = rng_uniform() * (1 + r % 5);
                    tr->quant_ref(wf, w + r * wrow, n);
                }
            }
            for (int64_t g = 0; g < n_groups; g++) {
                const int nr = (int)(n_out - g * PACK_ROWS < PACK_ROWS ? n_out - g * PACK_ROWS : PACK_ROWS);
                pack_group(t, n, w + g * PACK_ROWS * wrow, wrow, nr, wp + g * PACK_ROWS * wrow);
            }
            for (int tk = 0; tk < tok_max; tk++) {
                /* token 1: all quants -127, against the saturated last row */
                for (int64_t i = 0; i < n; i++) xf[i] = tk == 1 ? -1.0f : rng_act();
                dt->quant_ref(xf, x + tk * x_stride, n);
                dt->dequant_ref(x + tk * x_stride, xd + tk * n, n);
            }
            if (pack_needs_xblocks(t)) pack_xblocks(t, x, x_stride, tok_max, n / 32, sides);
            const int64_t ldy = n_groups * PACK_ROWS + 3;
            float *ya = malloc(sizeof(float) * ldy * tok_max), *ye = malloc(sizeof(float) * ldy * tok_max);
            for (int nt = 1; nt <= tok_max; nt++) {
                memset(ya, 0, sizeof(float) * ldy * tok_max);
                memset(ye, 0, sizeof(float) * ldy * tok_max);
                kern(n, wp, n_groups, x, x_stride, sides, nt, ya, ldy);
                ref(n, wp, n_groups, x, x_stride, sides, nt, ye, ldy);
                cases++;
                if (memcmp(ya, ye, sizeof(float) * ldy * tok_max)) {
                    if (bad_bits < 3)
                        fprintf(stderr, "  gemm %s n=%lld n_out=%lld nt=%d: differs from the ref twin\n",
                                tr->name, (long long)n, (long long)n_out, nt);
                    bad_bits++;
                }
                if (nt != tok_max) continue;
                for (int tk = 0; tk < nt; tk++)
                    for (int64_t r = 0; r < n_out; r++) {
                        const float e = tr->dot_ref(n, w + r * wrow, x + tk * x_stride);
                        tr->dequant_ref(w + r * wrow, wd, n);
                        const double S = abs_dot_scale(wd, xd + tk * n, n);
                        const double err = fabs((double)ye[tk * ldy + r] - e);
                        if (S > 0 && err / S > worst) worst = err / S;
                        if (!(err <= 2e-6 * S + 1e-30)) bad_value++;
                        if (exact && memcmp(&ye[tk * ldy + r], &e, sizeof e)) bad_exact++;
                    }
            }
            free(w), free(wp), free(x), free(xf), free(wf), free(wd), free(xd), free(sides), free(ya), free(ye);
        }
    }
    CHECK_MSG(bad_bits == 0, "gemm %s (%s): %d of %d cases differ from pack_gemm_ref", tr->name,
              isa, bad_bits, cases);
    CHECK_MSG(bad_value == 0, "gemm %s: the ref twin is off the quant dot in %d outputs (worst %.2e)",
              tr->name, bad_value, worst);
    CHECK_MSG(bad_exact == 0, "gemm %s: the ref twin differs from the quant module's _ref dot in %d outputs",
              tr->name, bad_exact);
    printf("  gemm %-7s %-6s %d cases bit-identical with the twin, worst |err|/S %.2e\n", tr->name,
           isa, cases, worst);
}

static void check_gemm_type(const cpu_kernels *simd, vt_dtype t) {
    if (!pack_has_layout(t)) return;
    if (!simd->gemm[t]) {
        printf("  gemm %-7s no packed kernel in tier %s, skipped\n", quant_traits_get(t)->name,
               cpu_isa_str(simd->isa));
        return;
    }
    check_gemm_kernel(simd->gemm[t], cpu_isa_str(simd->gemm_isa[t]), t, PACK_TOK_MAX);
    if (simd->gemm_cached[t]) check_gemm_kernel(simd->gemm_cached[t], "cached", t, PACK_TOK_MAX);
    if (simd->gemm_nopf[t]) check_gemm_kernel(simd->gemm_nopf[t], "nopf", t, PACK_TOK_MAX);
    if (simd->gemm_wide[t]) check_gemm_kernel(simd->gemm_wide[t], "amx", t, PACK_TOK_WIDE);
}

/* ---- small vector ops ------------------------------------------------------------------- */

/* gelu_mul (ggml's f16 table): against the tanh formula in double, within the
 * f16 roundings of x and of gelu(x) (about 2^-10 relative each, plus the slope
 * of gelu at x); exactly 0 below -10 and x * u above 10. */
static void check_gelu_mul(const cpu_kernels *k) {
    enum { N = 2001 };
    static float g[N], u[N];
    for (int i = 0; i < N; i++) {
        g[i] = -12.0f + 24.0f * (float)i / (float)(N - 1);
        u[i] = 1.0f + (float)(i % 7) * 0.25f;
    }
    float x[N];
    memcpy(x, g, sizeof x);
    k->gelu_mul(g, u, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        const double xd = x[i], want = 0.5 * xd * (1.0 + tanh(0.7978845608028654 * xd * (1.0 + 0.044715 * xd * xd))) * u[i];
        const double tol = 3e-3 * fabs(want) + 2e-3 * u[i] * fabs(xd) + 1e-6;
        if (x[i] <= -10.0f && g[i] != 0.0f) bad++;
        else if (x[i] >= 10.0f && g[i] != x[i] * u[i]) bad++;
        else if (fabs(g[i] - want) > tol) bad++;
    }
    CHECK_MSG(bad == 0, "gelu_mul: %d of %d values off", bad, N);
}

/* The SIMD gelu_mul and softcap of tier `isa` (cpu/attention_impl.h) against
 * the ref's. gelu_mul: bit for bit, x every f16 value (the table's whole
 * domain, both clamps, infinities; NaN stays NaN), then values between them,
 * lengths with tails. softcap (Cephes' tanhf in vectors): within 4e-7
 * relative of tanhf (a few ulp), over both branches (|x / cap| below and above
 * 0.625), exp's underflow (|x / cap| > 44), zeros and subnormals, with tails. */
static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

static void check_act_tier(const cpu_kernels *simd, const cpu_kernels *ref) {
    enum { N = (1 << 16) + 13 };
    static float g[N], u[N], gr[N];
    uint64_t seed = 7;
    for (int i = 0; i < N; i++) {
        if (i < (1 << 16)) {
            const vt_f16 h = (vt_f16)i;
            g[i] = f16_to_f32(h);
        } else {
            g[i] = 24.0f * frand(&seed);
        }
        u[i] = 2.0f * frand(&seed);
    }
    g[N - 1] = 10.0f;
    g[N - 2] = -10.0f;
    g[N - 3] = nextafterf(10.0f, 0.0f);
    g[N - 4] = nextafterf(-10.0f, 0.0f);
    int64_t bad = 0;
    static const int64_t lens[] = {N, 1, 7, 17, 1003};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li], off = N - n;
        memcpy(gr, g, sizeof g);
        float *gs = malloc(sizeof g);
        memcpy(gs, g, sizeof g);
        ref->gelu_mul(gr + off, u + off, n);
        simd->gelu_mul(gs + off, u + off, n);
        for (int64_t i = 0; i < N; i++)
            bad += memcmp(&gs[i], &gr[i], sizeof(float)) != 0 && !(isnan(gs[i]) && isnan(gr[i]));
        free(gs);
    }
    CHECK_MSG(bad == 0, "%s gelu_mul: %lld values differ from the ref", cpu_isa_str(simd->isa), (long long)bad);

    static const float caps[] = {0.5f, 30.0f, 50.0f};
    double worst = 0;
    int64_t signs = 0;
    for (size_t ci = 0; ci < sizeof caps / sizeof caps[0]; ci++) {
        enum { M = 4099 };
        static float s[M], sr[M];
        for (int i = 0; i < M; i++) {
            const float r = frand(&seed);
            s[i] = i % 4 == 0 ? r * caps[ci] : i % 4 == 1 ? r * 100.0f * caps[ci] : i % 4 == 2 ? r * 1e-6f : r * 1e-40f;
        }
        s[0] = 0.0f;
        s[1] = -0.0f;
        s[2] = 0.625f * caps[ci];
        s[3] = -nextafterf(0.625f, 0.0f) * caps[ci];
        memcpy(sr, s, sizeof s);
        ref->softcap(sr, M, caps[ci]);
        simd->softcap(s, M, caps[ci]);
        for (int i = 0; i < M; i++) {
            const double e = sr[i] == s[i] ? 0 : fabs((double)s[i] - sr[i]) / fabs((double)sr[i]);
            worst = e > worst ? e : worst;
            signs += signbit(s[i]) != signbit(sr[i]);
        }
    }
    printf("  %s softcap worst relative error %.2e (bound 4e-7)\n", cpu_isa_str(simd->isa), worst);
    CHECK_MSG(worst <= 4e-7 && signs == 0, "%s softcap: worst relative error %.3g, %lld signs differ",
              cpu_isa_str(simd->isa), worst, (long long)signs);
}

/* silu_mul against the ref over |x| up to 100 (where exp(-x) under- and
 * overflows), zeros and lengths with tails. */
static void check_silu_mul(const cpu_kernels *simd, const cpu_kernels *ref) {
    static const int64_t lens[] = {1, 7, 8, 9, 31, 256, 1003};
    double worst = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li];
        float *g = malloc(sizeof(float) * (size_t)n), *ge = malloc(sizeof(float) * (size_t)n),
              *u = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            g[i] = ge[i] = i % 17 == 0 ? 0.0f : rng_uniform() * (i % 3 ? 8.0f : 100.0f);
            u[i] = rng_uniform() * 2;
        }
        simd->silu_mul(g, u, n);
        ref->silu_mul(ge, u, n);
        for (int64_t i = 0; i < n; i++) {
            /* relative, or absolute for results below 1e-20 (silu of x < -50: the
             * SIMD exp flushes to 0 where expf still has denormal range) */
            const double e = fabs((double)g[i] - ge[i]) / (fabs((double)ge[i]) + 1e-20);
            if (e > worst) worst = e;
        }
        free(g), free(ge), free(u);
    }
    CHECK_MSG(worst < 4e-7, "silu_mul: worst relative error %.2e >= 4e-7", worst);
    printf("  silu_mul worst relative error %.2e (bound 4e-7)\n", worst);
}

/* rms_norm against the ref: rows of several lengths (tails of every size of
 * both tiers' loops) and scales, 2000 of them. The SIMD sum of squares runs in
 * another order, so an output may be off by the ref's scale's last bit: at most
 * 2 ulp (relative 2.4e-7) anywhere, and the rows with any difference are counted
 * (expected: about none). */
static void check_rms_norm(const cpu_kernels *simd, const cpu_kernels *ref) {
    static const int64_t lens[] = {1, 3, 7, 8, 15, 16, 17, 33, 64, 128, 2048, 2051, 5632};
    enum { ROWS = 2000 };
    double worst = 0;
    int differ = 0;
    for (int r = 0; r < ROWS; r++) {
        const int64_t n = lens[r % (sizeof lens / sizeof lens[0])];
        const float scale = r % 5 == 0 ? 1e-3f : r % 5 == 1 ? 300.0f : 1.0f;
        float *x = malloc(sizeof(float) * (size_t)n), *w = malloc(sizeof(float) * (size_t)n),
              *a = malloc(sizeof(float) * (size_t)n), *e = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
            x[i] = rng_uniform() * scale;
            w[i] = 0.5f + rng_uniform();
        }
        simd->rms_norm(x, w, n, 1e-5f, a);
        ref->rms_norm(x, w, n, 1e-5f, e);
        bool same = true;
        for (int64_t i = 0; i < n; i++) {
            same = same && a[i] == e[i];
            const double d = fabs((double)a[i] - e[i]) / (fabs((double)e[i]) + 1e-30);
            if (d > worst) worst = d;
        }
        differ += !same;
        free(x), free(w), free(a), free(e);
    }
    CHECK_MSG(worst <= 2.4e-7, "rms_norm: worst relative error %.2e > 2.4e-7", worst);
    printf("  rms_norm worst relative error %.2e (bound 2.4e-7), %d of %d rows not bit-identical\n",
           worst, differ, ROWS);
}

/* ---- activation quantizers -------------------------------------------------------------- */

static void check_quantizer(const cpu_kernels *simd, vt_dtype d) {
    const quant_traits *tr = quant_traits_get(d);
    if (!simd->quantize_act[d] || simd->quantize_isa[d] == CPU_ISA_REF) {
        printf("  quantize %-5s no SIMD kernel, skipped\n", tr->name);
        return;
    }
    const int64_t be = tr->block_elems;
    int bad = 0, cases = 0;
    for (int kind = 0; kind < 6; kind++) {
        for (int64_t nb = 1; nb <= (be == 1 ? 41 : 9); nb++) {
            const int64_t n = nb * be;
            size_t bytes;
            quant_row_bytes(d, n, &bytes);
            float *x = malloc(n * sizeof(float));
            uint8_t *a = malloc(bytes), *e = malloc(bytes);
            for (int64_t i = 0; i < n; i++) {
                switch (kind) {
                case 0: x[i] = rng_act(); break;
                case 1: x[i] = rng_uniform() * 1e-3f; break;
                case 2: x[i] = 0.0f; break; /* all-zero blocks */
                case 3: /* ties: amax 127 gives scale 1, so k + 0.5 rounds on a tie */
                    x[i] = (i % be == 0) ? 127.0f : (float)((int)(rng_u32() % 200) - 100) + 0.5f;
                    break;
                case 4: /* Q8_K ties: max -127 gives iscale exactly 1 */
                    x[i] = (i % be == 0) ? -127.0f : (float)((int)(rng_u32() % 200) - 100) + 0.5f;
                    break;
                default: /* equal magnitudes of both signs: the first one sets the sign */
                    x[i] = (rng_u32() & 1) ? 3.0f : -3.0f;
                    break;
                }
            }
            simd->quantize_act[d](x, a, n);
            tr->quant_ref(x, e, n);
            if (memcmp(a, e, bytes)) {
                if (bad < 3)
                    fprintf(stderr, "  quantize %s kind %d n=%lld differs\n", tr->name, kind, (long long)n);
                bad++;
            }
            cases++;
            free(x), free(a), free(e);
        }
    }
    CHECK_MSG(bad == 0, "quantize %s: %d of %d cases differ from the ref", tr->name, bad, cases);
    printf("  quantize %-5s %-6s %d cases bit-identical\n", tr->name,
           cpu_isa_str(simd->quantize_isa[d]), cases - bad);
}

/* ---- the table itself ------------------------------------------------------------------ */

static void check_tables(const cpu_kernels *ref) {
    CHECK(ref->isa == CPU_ISA_REF);
    CHECK(!strcmp(ref->isa_name, "ref"));
    for (int i = 0; i < N_WEIGHT_TYPES; i++) {
        const vt_dtype t = weight_types[i];
        const quant_traits *tr = quant_traits_get(t);
        CHECK_MSG(ref->dot[t] == tr->dot_ref, "%s", tr->name);
        CHECK_MSG(ref->dot_rows[t] != NULL, "%s", tr->name);
        CHECK_MSG(ref->quantize_act[tr->dot_type] != NULL, "%s", tr->name);
    }
    const cpu_kernels *k = cpu_kernels_get();
    CHECK(k == cpu_kernels_get()); /* built once */
    CHECK(!strcmp(cpu_isa_name(), k->isa_name));
    for (int i = 0; i < N_WEIGHT_TYPES; i++) {
        const vt_dtype t = weight_types[i];
        CHECK(k->dot[t] && k->dot_rows[t] && k->quantize_act[quant_traits_get(t)->dot_type]);
    }
#if defined(__x86_64__)
    const cpu_features *f = cpu_features_get();
    if (f->avx2 && f->fma && f->f16c && !getenv("VT_ISA")) CHECK(k->isa >= CPU_ISA_AVX2);
    if (!f->avx2) CHECK(k->isa == CPU_ISA_REF);
#endif
}

/* Child mode: run under VT_ISA=ref, the table must be all scalar. */
static int child_isa_ref(void) {
    const cpu_kernels *k = cpu_kernels_get();
    int ok = k->isa == CPU_ISA_REF && !strcmp(cpu_isa_name(), "ref") &&
             cpu_features_get()->isa == CPU_ISA_REF && !cpu_features_get()->avx2;
    for (int i = 0; i < N_WEIGHT_TYPES; i++) {
        const vt_dtype t = weight_types[i];
        ok = ok && k->dot[t] == quant_traits_get(t)->dot_ref && k->dot_isa[t] == CPU_ISA_REF;
    }
    return ok ? 0 : 3;
}

static void check_isa_env(const char *argv0, const char *value, int expect_isa) {
    char env_isa[64];
    snprintf(env_isa, sizeof env_isa, "VT_ISA=%s", value);
    /* the emulated CPU (qemu-user reads QEMU_CPU) carries over to the child */
    char env_cpu[128] = "";
    if (getenv("QEMU_CPU")) snprintf(env_cpu, sizeof env_cpu, "QEMU_CPU=%s", getenv("QEMU_CPU"));
    char *envp[] = {env_isa, env_cpu[0] ? env_cpu : NULL, NULL};
    char mode[] = "--child-isa";
    char *args[] = {(char *)argv0, mode, NULL};
    pid_t pid;
    int rc;
    /* Cross builds run under an emulator (VT_TEST_EMULATOR, set by CMake): the
     * host cannot exec this binary itself, so the child goes through it too. */
    const char *emu = getenv("VT_TEST_EMULATOR");
    char self[4096];
    const ssize_t len = emu && *emu ? readlink("/proc/self/exe", self, sizeof self - 1) : -1;
    if (len > 0) {
        self[len] = 0;
        char script[4600];
        snprintf(script, sizeof script, "exec %s \"$0\" --child-isa", emu);
        char sh[] = "/bin/sh", c[] = "-c";
        char *sh_args[] = {sh, c, script, self, NULL};
        rc = posix_spawn(&pid, "/bin/sh", NULL, NULL, sh_args, envp);
    } else {
        rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, envp);
    }
    CHECK_MSG(rc == 0, "posix_spawn: %s", strerror(rc));
    if (rc != 0) return;
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == expect_isa,
              "VT_ISA=%s child: status %d", value, status);
}

static int child_isa(void) {
    const char *v = getenv("VT_ISA");
    if (v && !strcmp(v, "ref")) return child_isa_ref();
    if (v && !strcmp(v, "avx2")) {
        const cpu_kernels *k = cpu_kernels_get();
        return k->isa <= CPU_ISA_AVX2 && !cpu_features_get()->avx512f ? 0 : 4;
    }
    if (v && (!strcmp(v, "neon") || !strcmp(v, "neon_dot"))) {
        /* the cap gives exactly that tier (every aarch64 core has ASIMD) */
        const cpu_isa want = !strcmp(v, "neon") ? CPU_ISA_NEON : CPU_ISA_NEON_DOT;
        const cpu_isa expect = cpu_isa_detected() < want ? cpu_isa_detected() : want;
        const cpu_features *f = cpu_features_get();
        return cpu_kernels_get()->isa == expect && !f->i8mm && (want != CPU_ISA_NEON || !f->asimddp)
                   ? 0 : 6;
    }
    return 5;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--child-isa")) return child_isa();

    /* the kernels under test: the best tier of this CPU, capped by VT_ISA (so
     * VT_ISA=neon on a dotprod core tests the plain NEON kernels) */
    cpu_kernels ref, best;
    cpu_kernels_build(CPU_ISA_REF, &ref);
    cpu_kernels_build(cpu_features_get()->isa, &best);
    printf("detected %s, selected %s\n", cpu_isa_str(cpu_isa_detected()), cpu_isa_name());
    /* VT_EXPECT_ISA: the tier this run must select (scripts/test-arm.sh pins the
     * fallback chosen on a core without dotprod, and the VT_ISA caps) */
    const char *expect = getenv("VT_EXPECT_ISA");
    if (expect && *expect)
        CHECK_MSG(!strcmp(expect, cpu_isa_name()), "VT_EXPECT_ISA=%s but selected %s", expect,
                  cpu_isa_name());
    check_tables(&ref);
    for (int i = 0; i < N_WEIGHT_TYPES; i++) check_dot_type(&best, &ref, weight_types[i]);
    /* packed GEMMs of every tier this CPU has: x86 AVX2 (also run on AVX-512 CPUs)
     * and AVX-512, aarch64 NEON, neon_dot (sdot) and neon_i8mm (smmla) */
#if defined(__x86_64__)
    const int tier_lo = CPU_ISA_AVX2, tier_hi = CPU_ISA_AVX512;
#elif defined(__aarch64__)
    const int tier_lo = CPU_ISA_NEON, tier_hi = (int)cpu_isa_detected();
#else
    const int tier_lo = 1, tier_hi = 0;
#endif
    for (int isa = tier_lo; isa <= tier_hi && isa <= (int)cpu_isa_detected(); isa++) {
        cpu_kernels tier;
        cpu_kernels_build((cpu_isa)isa, &tier);
        for (int i = 0; i < N_WEIGHT_TYPES; i++) check_gemm_type(&tier, weight_types[i]);
    }
    if (cpu_isa_detected() < CPU_ISA_NEON)
        for (int i = 0; i < N_WEIGHT_TYPES; i++)
            CHECK(ref.gemm[weight_types[i]] == NULL && ref.gemm_cached[weight_types[i]] == NULL &&
                  ref.gemm_nopf[weight_types[i]] == NULL);
    static const vt_dtype act_types[] = {VT_DTYPE_Q8_0, VT_DTYPE_Q8_1, VT_DTYPE_Q8_K,
                                         VT_DTYPE_F16, VT_DTYPE_BF16};
    for (size_t i = 0; i < sizeof act_types / sizeof act_types[0]; i++)
        check_quantizer(&best, act_types[i]);
    check_silu_mul(&best, &ref);
    check_gelu_mul(&best);
    for (int isa = CPU_ISA_REF + 1; isa <= (int)cpu_isa_detected(); isa++) {
        cpu_kernels tier;
        cpu_kernels_build((cpu_isa)isa, &tier);
        if (tier.isa == (cpu_isa)isa) check_act_tier(&tier, &ref);
    }
    check_rms_norm(&best, &ref);
    check_isa_env(argv[0], "ref", 0);
#if defined(__x86_64__)
    check_isa_env(argv[0], "avx2", 0);
#elif defined(__aarch64__)
    check_isa_env(argv[0], "neon", 0);
    check_isa_env(argv[0], "neon_dot", 0);
#endif
    return test_finish();
}
