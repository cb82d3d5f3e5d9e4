/* The aarch64 rows of the dispatch table (see cpu/kernels.h: one row per type
 * and tier, tiers ascending; kernels.c applies them). Built without ISA flags:
 * it only stores function pointers, never runs a kernel. */
#include "cpu/arm/arm_kernels.h"

/* The file-layout dot of type t on the tier of suffix sfx, with its multi-row form. */
#define DOT(t, sfx) .dot = dot_##t##_##sfx, .dot_rows = dot_rows_##t##_##sfx

/* The thirteen int8-domain dots of a tier (dot_legacy_<isa>.c, dot_k_<isa>.c). */
#define INT8_DOTS(sfx, ISA)                                                                \
    {.type = VT_DTYPE_Q4_0, .isa = ISA, DOT(q4_0, sfx)},                                   \
    {.type = VT_DTYPE_Q4_1, .isa = ISA, DOT(q4_1, sfx)},                                   \
    {.type = VT_DTYPE_Q5_0, .isa = ISA, DOT(q5_0, sfx)},                                   \
    {.type = VT_DTYPE_Q5_1, .isa = ISA, DOT(q5_1, sfx)},                                   \
    {.type = VT_DTYPE_Q8_0, .isa = ISA, DOT(q8_0, sfx)},                                   \
    {.type = VT_DTYPE_IQ4_NL, .isa = ISA, DOT(iq4_nl, sfx)},                               \
    {.type = VT_DTYPE_Q2_K, .isa = ISA, DOT(q2_K, sfx)},                                   \
    {.type = VT_DTYPE_Q3_K, .isa = ISA, DOT(q3_K, sfx)},                                   \
    {.type = VT_DTYPE_Q4_K, .isa = ISA, DOT(q4_K, sfx)},                                   \
    {.type = VT_DTYPE_Q5_K, .isa = ISA, DOT(q5_K, sfx)},                                   \
    {.type = VT_DTYPE_Q6_K, .isa = ISA, DOT(q6_K, sfx)},                                   \
    {.type = VT_DTYPE_IQ4_XS, .isa = ISA, DOT(iq4_xs, sfx)},                               \
    {.type = VT_DTYPE_MXFP4, .isa = ISA, DOT(mxfp4, sfx)}

const cpu_type_row arm_type_rows[] = {
    /* plain ASIMD (every aarch64 core): the dots and the activation quantizers */
    {.type = VT_DTYPE_F32, .isa = CPU_ISA_NEON, DOT(f32, neon)},
    {.type = VT_DTYPE_F16, .isa = CPU_ISA_NEON, DOT(f16, neon), .quantize_act = quantize_f16_neon},
    {.type = VT_DTYPE_BF16, .isa = CPU_ISA_NEON, DOT(bf16, neon), .quantize_act = quantize_bf16_neon},
    INT8_DOTS(neon, CPU_ISA_NEON),
    {.type = VT_DTYPE_Q8_0, .isa = CPU_ISA_NEON, .quantize_act = quantize_q8_0_neon},
    {.type = VT_DTYPE_Q8_1, .isa = CPU_ISA_NEON, .quantize_act = quantize_q8_1_neon},
    {.type = VT_DTYPE_Q8_K, .isa = CPU_ISA_NEON, .quantize_act = quantize_q8_K_neon},

    /* + sdot: the int8 dots again, and the packed GEMMs (the plain tier keeps the
     * file layout and dot_rows) */
    INT8_DOTS(neon_dot, CPU_ISA_NEON_DOT),
    {.type = VT_DTYPE_Q4_0, .isa = CPU_ISA_NEON_DOT, .gemm = gemm_q4_0_neon_dot},
    {.type = VT_DTYPE_Q4_1, .isa = CPU_ISA_NEON_DOT, .gemm = gemm_q4_1_neon_dot},
    {.type = VT_DTYPE_Q5_0, .isa = CPU_ISA_NEON_DOT, .gemm = gemm_q5_0_neon_dot},
    {.type = VT_DTYPE_Q5_1, .isa = CPU_ISA_NEON_DOT, .gemm = gemm_q5_1_neon_dot},
    {.type = VT_DTYPE_Q8_0, .isa = CPU_ISA_NEON_DOT, .gemm = gemm_q8_0_neon_dot},
    {.type = VT_DTYPE_Q4_K, .isa = CPU_ISA_NEON_DOT, .gemm = gemm_q4_K_neon_dot},
    {.type = VT_DTYPE_Q5_K, .isa = CPU_ISA_NEON_DOT, .gemm = gemm_q5_K_neon_dot},
    {.type = VT_DTYPE_Q6_K, .isa = CPU_ISA_NEON_DOT, .gemm = gemm_q6_K_neon_dot},
    {.type = VT_DTYPE_MXFP4, .isa = CPU_ISA_NEON_DOT, .gemm = gemm_mxfp4_neon_dot},

    /* + smmla: it pays where two rows meet two tokens, and (with the packed
     * layout's zips) only for Q8_0 at 4 tokens; everything else, the Q4_0, Q5_0,
     * Q4_K, Q5_K and Q6_K GEMMs included, stays sdot */
    {.type = VT_DTYPE_Q8_0, .isa = CPU_ISA_NEON_I8MM, .gemm = gemm_q8_0_neon_i8mm},
};
const size_t arm_n_type_rows = sizeof arm_type_rows / sizeof arm_type_rows[0];

const cpu_tier_row arm_tier_rows[] = {
    {.isa = CPU_ISA_NEON, .silu_mul = silu_mul_neon, .rms_norm = rms_norm_neon, .gelu_mul = gelu_mul_neon,
     .softcap = attn_softcap_neon, .dn = &dn_kernels_neon},
};
const size_t arm_n_tier_rows = sizeof arm_tier_rows / sizeof arm_tier_rows[0];
