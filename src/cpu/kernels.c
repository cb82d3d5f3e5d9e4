/* The dispatch table (see kernels.h): the ref entries from the quant traits,
 * then the arch's rows (x86/x86_kernels.c, arm/arm_kernels.c) by apply_rows'
 * rule. Compiled without ISA flags: it only stores function pointers, so
 * building it never runs an instruction the CPU lacks. */
#include "cpu/kernels.h"

#include "base/fp16.h"
#include "cpu/attention.h"

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
REF_ROWS(MXFP4)

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
    case VT_DTYPE_MXFP4: return dot_rows_ref_MXFP4;
    default: return NULL;
    }
}

static void silu_mul_ref(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* GELU as ggml's CPU backend computes it (GGML_GELU_FP16): x rounded to f16,
 * looked up in a table of gelu over every f16 value, itself rounded to f16;
 * 0 below -10 and x above 10. The same table, so GEGLU models match llama.cpp
 * bit for bit before the down projection's activations are quantized. Filled
 * once, with the kernel table (cpu_kernels_get). */
vt_f16 cpu_gelu_table[1 << 16];

static void gelu_table_fill(void) {
    const float c = 0.79788456080286535587989211986876f, a = 0.044715f;
    for (uint32_t i = 0; i < (1u << 16); i++) {
        vt_f16 h;
        const uint16_t b = (uint16_t)i;
        memcpy(&h, &b, sizeof h);
        const float x = f16_to_f32(h);
        cpu_gelu_table[i] = f32_to_f16(0.5f * x * (1.0f + tanhf(c * x * (1.0f + a * x * x))));
    }
}

static void gelu_mul_ref(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        if (x <= -10.0f) {
            g[i] = 0.0f;
        } else if (x >= 10.0f) {
            g[i] = x * u[i];
        } else {
            const vt_f16 h = f32_to_f16(x);
            uint16_t b;
            memcpy(&b, &h, sizeof b);
            g[i] = f16_to_f32(cpu_gelu_table[b]) * u[i];
        }
    }
}

static void rms_norm_ref(const float *x, const float *w, int64_t n, float eps, float *out) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
}

static void fill_ref(cpu_kernels *k) {
    k->silu_mul = silu_mul_ref;
    k->gelu_mul = gelu_mul_ref;
    k->softcap = attn_softcap_ref;
    static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;
    pthread_once(&gelu_once, gelu_table_fill);
    k->rms_norm = rms_norm_ref;
    k->dn = dn_kernels_ref;
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

/* The one rule that turns the rows into a table: a row applies where its tier
 * is at most the table's and, for an amx row, the CPU has the tiles; rows apply
 * in order (each arch lists them by ascending tier), and an applied row replaces,
 * for its type, each group of fields it fills: {dot, dot_rows}, {quantize_act},
 * {gemm, gemm_cached, gemm_nopf} (a tier's packed GEMMs come as one set, never
 * mixed with another tier's) and {gemm_wide}. So every entry is the kernel of
 * the highest tier this CPU runs that has one, and the ref entry otherwise. */
static void apply_rows(cpu_kernels *k, cpu_isa isa, const cpu_type_row *rows, size_t n) {
    const bool amx = cpu_features_get()->amx_int8;
    for (size_t i = 0; i < n; i++) {
        const cpu_type_row *r = &rows[i];
        VT_ASSERT(i == 0 || r->isa >= rows[i - 1].isa); /* ascending tiers */
        if (r->isa > isa || (r->amx && !amx)) continue;
        const vt_dtype t = r->type;
        if (r->dot) {
            VT_ASSERT(r->dot_rows);
            k->dot[t] = r->dot;
            k->dot_rows[t] = r->dot_rows;
            k->dot_isa[t] = r->isa;
        }
        if (r->quantize_act) {
            k->quantize_act[t] = r->quantize_act;
            k->quantize_isa[t] = r->isa;
        }
        if (r->gemm) {
            k->gemm[t] = r->gemm;
            k->gemm_cached[t] = r->gemm_cached;
            k->gemm_nopf[t] = r->gemm_nopf;
            k->gemm_isa[t] = r->isa;
        }
        if (r->gemm_wide) k->gemm_wide[t] = r->gemm_wide;
    }
}

static void apply_tier_rows(cpu_kernels *k, cpu_isa isa, const cpu_tier_row *rows, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (rows[i].isa > isa) continue;
        /* each group from the rows that have it (a higher tier may carry only some) */
        if (rows[i].silu_mul) {
            k->silu_mul = rows[i].silu_mul;
            k->rms_norm = rows[i].rms_norm;
        }
        if (rows[i].gelu_mul) k->gelu_mul = rows[i].gelu_mul;
        if (rows[i].softcap) k->softcap = rows[i].softcap;
        if (rows[i].dn) k->dn = *rows[i].dn;
    }
}

#if defined(__x86_64__)
/* The AVX-512 kernels need VNNI (vpdpbusd) and DQ on top of the F/BW/VL the tier
 * implies; the tier check already covers the OS saving ZMM state. */
static bool have_avx512_vnni(void) {
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512dq");
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
#if defined(__x86_64__)
    /* The AVX512 tier is the AVX2 rows plus the AVX-512 GEMMs where the CPU has
     * VNNI; without them it runs (and reports) avx2. */
    if (isa == CPU_ISA_AVX512 && !have_avx512_vnni()) isa = CPU_ISA_AVX2;
    if (isa > CPU_ISA_AVX512) isa = CPU_ISA_REF;
#elif defined(__aarch64__)
    if (isa < CPU_ISA_NEON) isa = CPU_ISA_REF;
#else
    isa = CPU_ISA_REF;
#endif
    fill_ref(out);
#if defined(__x86_64__)
    apply_rows(out, isa, x86_type_rows, x86_n_type_rows);
    apply_tier_rows(out, isa, x86_tier_rows, x86_n_tier_rows);
#elif defined(__aarch64__)
    if (isa != CPU_ISA_REF) {
        apply_rows(out, isa, arm_type_rows, arm_n_type_rows);
        apply_tier_rows(out, isa, arm_tier_rows, arm_n_tier_rows);
    }
#endif
    out->isa = isa;
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
