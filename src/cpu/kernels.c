/* The dispatch table (see kernels.h). Compiled without ISA flags: it only stores
 * function pointers, so building it never runs an instruction the CPU lacks. */
#include "cpu/kernels.h"

#if defined(__x86_64__)
#include "cpu/x86/x86_kernels.h"
#elif defined(__aarch64__)
#include "cpu/arm/arm_kernels.h"
#endif

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- scalar multi-row fallbacks: a loop over the type's _ref dot ------------------- */

#define REF_ROWS(T)                                                                        \
    static void dot_rows_ref_##T(int64_t n, const void *w, size_t ws, const void *x,       \
                                 float *s, int nr) {                                       \
        const quant_dot_fn dot = quant_traits_get(VT_DTYPE_##T)->dot_ref;                  \
        for (int r = 0; r < nr; r++) s[r] = dot(n, (const uint8_t *)w + (size_t)r * ws, x); \
    }

REF_ROWS(F32)
REF_ROWS(F16)
REF_ROWS(BF16)
REF_ROWS(Q4_0)
REF_ROWS(Q4_1)
REF_ROWS(Q5_0)
REF_ROWS(Q5_1)
REF_ROWS(Q8_0)
REF_ROWS(Q2_K)
REF_ROWS(Q3_K)
REF_ROWS(Q4_K)
REF_ROWS(Q5_K)
REF_ROWS(Q6_K)
REF_ROWS(IQ4_NL)
REF_ROWS(IQ4_XS)

static cpu_dot_rows_fn ref_rows_for(vt_dtype t) {
    switch (t) {
    case VT_DTYPE_F32: return dot_rows_ref_F32;
    case VT_DTYPE_F16: return dot_rows_ref_F16;
    case VT_DTYPE_BF16: return dot_rows_ref_BF16;
    case VT_DTYPE_Q4_0: return dot_rows_ref_Q4_0;
    case VT_DTYPE_Q4_1: return dot_rows_ref_Q4_1;
    case VT_DTYPE_Q5_0: return dot_rows_ref_Q5_0;
    case VT_DTYPE_Q5_1: return dot_rows_ref_Q5_1;
    case VT_DTYPE_Q8_0: return dot_rows_ref_Q8_0;
    case VT_DTYPE_Q2_K: return dot_rows_ref_Q2_K;
    case VT_DTYPE_Q3_K: return dot_rows_ref_Q3_K;
    case VT_DTYPE_Q4_K: return dot_rows_ref_Q4_K;
    case VT_DTYPE_Q5_K: return dot_rows_ref_Q5_K;
    case VT_DTYPE_Q6_K: return dot_rows_ref_Q6_K;
    case VT_DTYPE_IQ4_NL: return dot_rows_ref_IQ4_NL;
    case VT_DTYPE_IQ4_XS: return dot_rows_ref_IQ4_XS;
    default: return NULL;
    }
}

static void silu_mul_ref(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void rms_norm_ref(const float *x, const float *w, int64_t n, float eps, float *out) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
}

static void fill_ref(cpu_kernels *k) {
    k->silu_mul = silu_mul_ref;
    k->rms_norm = rms_norm_ref;
    for (int t = 0; t < VT_DTYPE_COUNT; t++) {
        const quant_traits *tr = quant_traits_get((vt_dtype)t);
        if (!tr) continue;
        if (tr->dot_ref) {
            k->dot[t] = tr->dot_ref;
            k->dot_rows[t] = ref_rows_for((vt_dtype)t);
            VT_ASSERT(k->dot_rows[t]);
            k->dot_isa[t] = CPU_ISA_REF;
        }
        /* every type some weight type dots with is an activation type */
        const quant_traits *dt = quant_traits_get(tr->dot_type);
        if (dt && dt->quant_ref) {
            k->quantize_act[tr->dot_type] = dt->quant_ref;
            k->quantize_isa[tr->dot_type] = CPU_ISA_REF;
        }
    }
}

#if defined(__x86_64__)
static void fill_avx2(cpu_kernels *k) {
#define SET_DOT(T, t)                                                                      \
    do {                                                                                   \
        k->dot[VT_DTYPE_##T] = dot_##t##_avx2;                                             \
        k->dot_rows[VT_DTYPE_##T] = dot_rows_##t##_avx2;                                   \
        k->dot_isa[VT_DTYPE_##T] = CPU_ISA_AVX2;                                           \
    } while (0)
#define SET_QUANT(T, t)                                                                    \
    do {                                                                                   \
        k->quantize_act[VT_DTYPE_##T] = quantize_##t##_avx2;                               \
        k->quantize_isa[VT_DTYPE_##T] = CPU_ISA_AVX2;                                      \
    } while (0)
    SET_DOT(F32, f32);
    SET_DOT(F16, f16);
    SET_DOT(BF16, bf16);
    SET_DOT(Q4_0, q4_0);
    SET_DOT(Q4_1, q4_1);
    SET_DOT(Q5_0, q5_0);
    SET_DOT(Q5_1, q5_1);
    SET_DOT(Q8_0, q8_0);
    SET_DOT(Q2_K, q2_K);
    SET_DOT(Q3_K, q3_K);
    SET_DOT(Q4_K, q4_K);
    SET_DOT(Q5_K, q5_K);
    SET_DOT(Q6_K, q6_K);
    SET_DOT(IQ4_NL, iq4_nl);
    SET_DOT(IQ4_XS, iq4_xs);
    SET_QUANT(Q8_0, q8_0);
    SET_QUANT(Q8_1, q8_1);
    SET_QUANT(Q8_K, q8_K);
    SET_QUANT(F16, f16);
    SET_QUANT(BF16, bf16);
#undef SET_DOT
#undef SET_QUANT
    k->silu_mul = silu_mul_avx2;
    k->rms_norm = rms_norm_avx2;
    k->gemm[VT_DTYPE_Q4_0] = gemm_q4_0_avx2;
    k->gemm[VT_DTYPE_Q8_0] = gemm_q8_0_avx2;
    k->gemm[VT_DTYPE_Q4_K] = gemm_q4_K_avx2;
    k->gemm[VT_DTYPE_Q5_K] = gemm_q5_K_avx2;
    k->gemm[VT_DTYPE_Q6_K] = gemm_q6_K_avx2;
    k->gemm_nopf[VT_DTYPE_Q4_0] = gemm_q4_0_avx2_nopf;
    k->gemm_nopf[VT_DTYPE_Q8_0] = gemm_q8_0_avx2_nopf;
    k->gemm_nopf[VT_DTYPE_Q4_K] = gemm_q4_K_avx2_nopf;
    k->gemm_nopf[VT_DTYPE_Q5_K] = gemm_q5_K_avx2_nopf;
    k->gemm_nopf[VT_DTYPE_Q6_K] = gemm_q6_K_avx2_nopf;
    for (int t = 0; t < VT_DTYPE_COUNT; t++)
        if (k->gemm[t]) k->gemm_isa[t] = CPU_ISA_AVX2;
}

/* The AVX-512 kernels need VNNI (vpdpbusd) and DQ on top of the F/BW/VL the tier
 * implies; the tier check already covers the OS saving ZMM state. */
static bool have_avx512_vnni(void) {
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512dq");
}

static void fill_avx512(cpu_kernels *k) {
#define SET_GEMM(T, t)                                                                     \
    do {                                                                                   \
        k->gemm[VT_DTYPE_##T] = gemm_##t##_avx512;                                         \
        k->gemm_isa[VT_DTYPE_##T] = CPU_ISA_AVX512;                                        \
    } while (0)
    SET_GEMM(Q4_0, q4_0);
    SET_GEMM(Q8_0, q8_0);
    SET_GEMM(Q4_K, q4_K);
    SET_GEMM(Q5_K, q5_K);
    SET_GEMM(Q6_K, q6_K);
#undef SET_GEMM
    /* Q4_0's decode kernel without software prefetch is its prefill one; Q8_0's differ at
     * 1-2 tokens (q8_0_few in decode) */
    k->gemm_nopf[VT_DTYPE_Q4_0] = gemm_q4_0_avx512_cached;
    k->gemm_nopf[VT_DTYPE_Q8_0] = gemm_q8_0_avx512_nopf;
    k->gemm_nopf[VT_DTYPE_Q4_K] = gemm_q4_K_avx512_nopf;
    k->gemm_nopf[VT_DTYPE_Q5_K] = gemm_q5_K_avx512_nopf;
    k->gemm_nopf[VT_DTYPE_Q6_K] = gemm_q6_K_avx512_nopf;
    k->gemm_cached[VT_DTYPE_Q4_0] = gemm_q4_0_avx512_cached;
    k->gemm_cached[VT_DTYPE_Q8_0] = gemm_q8_0_avx512_cached;
    if (cpu_features_get()->amx_int8) {
        k->gemm_wide[VT_DTYPE_Q4_0] = gemm_q4_0_amx;
        k->gemm_wide[VT_DTYPE_Q8_0] = gemm_q8_0_amx;
        k->gemm_wide[VT_DTYPE_Q4_K] = gemm_q4_K_amx;
        k->gemm_wide[VT_DTYPE_Q5_K] = gemm_q5_K_amx;
        k->gemm_wide[VT_DTYPE_Q6_K] = gemm_q6_K_amx;
    }
}
#endif

void cpu_kernels_build(cpu_isa isa, cpu_kernels *out) {
    memset(out, 0, sizeof *out);
    /* cap at the hardware; a tier of the other architecture means ref */
    const cpu_isa hw = cpu_isa_detected();
    if (isa == CPU_ISA_REF || hw == CPU_ISA_REF || (isa >= CPU_ISA_NEON) != (hw >= CPU_ISA_NEON))
        isa = CPU_ISA_REF;
    else if (isa > hw)
        isa = hw;
    fill_ref(out);
    out->isa = CPU_ISA_REF;
#if defined(__x86_64__)
    if (isa >= CPU_ISA_AVX2 && isa <= CPU_ISA_AVX512) {
        fill_avx2(out);
        out->isa = CPU_ISA_AVX2;
        /* The AVX512 tier is the AVX2 table plus the AVX-512 GEMMs where the CPU
         * has VNNI; without them it runs (and reports) avx2. */
        if (isa == CPU_ISA_AVX512 && have_avx512_vnni()) {
            fill_avx512(out);
            out->isa = CPU_ISA_AVX512;
        }
    }
#endif
#if defined(__aarch64__)
    if (isa >= CPU_ISA_NEON) cpu_kernels_fill_arm(out, isa); /* arm/arm_kernels.c */
#endif
    out->isa_name = cpu_isa_str(out->isa);
}

static cpu_kernels table;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) { cpu_kernels_build(cpu_features_get()->isa, &table); }

const cpu_kernels *cpu_kernels_get(void) {
    pthread_once(&table_once, build_table);
    return &table;
}

const char *cpu_isa_name(void) { return cpu_kernels_get()->isa_name; }
