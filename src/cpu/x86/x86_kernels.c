/* The x86 rows of the dispatch table (see cpu/kernels.h: one row per type and
 * tier, tiers ascending; kernels.c applies them). Built without ISA flags: it
 * only stores function pointers, never runs a kernel. */
#include "cpu/x86/x86_kernels.h"

/* The file-layout dot of type t on the tier of suffix sfx, with its multi-row form. */
#define DOT(t, sfx) .dot = dot_##t##_##sfx, .dot_rows = dot_rows_##t##_##sfx

const cpu_type_row x86_type_rows[] = {
    /* AVX2 + FMA + F16C */
    {.type = VT_DTYPE_F32, .isa = CPU_ISA_AVX2, DOT(f32, avx2)},
    {.type = VT_DTYPE_F16, .isa = CPU_ISA_AVX2, DOT(f16, avx2), .quantize_act = quantize_f16_avx2},
    {.type = VT_DTYPE_BF16, .isa = CPU_ISA_AVX2, DOT(bf16, avx2), .quantize_act = quantize_bf16_avx2},
    {.type = VT_DTYPE_Q4_0, .isa = CPU_ISA_AVX2, DOT(q4_0, avx2), .gemm = gemm_q4_0_avx2,
     .gemm_nopf = gemm_q4_0_avx2_nopf},
    {.type = VT_DTYPE_Q4_1, .isa = CPU_ISA_AVX2, DOT(q4_1, avx2), .gemm = gemm_q4_1_avx2,
     .gemm_nopf = gemm_q4_1_avx2_nopf},
    {.type = VT_DTYPE_Q5_0, .isa = CPU_ISA_AVX2, DOT(q5_0, avx2), .gemm = gemm_q5_0_avx2,
     .gemm_nopf = gemm_q5_0_avx2_nopf},
    {.type = VT_DTYPE_Q5_1, .isa = CPU_ISA_AVX2, DOT(q5_1, avx2), .gemm = gemm_q5_1_avx2,
     .gemm_nopf = gemm_q5_1_avx2_nopf},
    {.type = VT_DTYPE_Q8_0, .isa = CPU_ISA_AVX2, DOT(q8_0, avx2), .quantize_act = quantize_q8_0_avx2,
     .gemm = gemm_q8_0_avx2, .gemm_nopf = gemm_q8_0_avx2_nopf},
    {.type = VT_DTYPE_Q8_1, .isa = CPU_ISA_AVX2, .quantize_act = quantize_q8_1_avx2},
    {.type = VT_DTYPE_Q2_K, .isa = CPU_ISA_AVX2, DOT(q2_K, avx2)},
    {.type = VT_DTYPE_Q3_K, .isa = CPU_ISA_AVX2, DOT(q3_K, avx2)},
    {.type = VT_DTYPE_Q4_K, .isa = CPU_ISA_AVX2, DOT(q4_K, avx2), .gemm = gemm_q4_K_avx2,
     .gemm_nopf = gemm_q4_K_avx2_nopf},
    {.type = VT_DTYPE_Q5_K, .isa = CPU_ISA_AVX2, DOT(q5_K, avx2), .gemm = gemm_q5_K_avx2,
     .gemm_nopf = gemm_q5_K_avx2_nopf},
    {.type = VT_DTYPE_Q6_K, .isa = CPU_ISA_AVX2, DOT(q6_K, avx2), .gemm = gemm_q6_K_avx2,
     .gemm_nopf = gemm_q6_K_avx2_nopf},
    {.type = VT_DTYPE_Q8_K, .isa = CPU_ISA_AVX2, .quantize_act = quantize_q8_K_avx2},
    {.type = VT_DTYPE_IQ4_NL, .isa = CPU_ISA_AVX2, DOT(iq4_nl, avx2)},
    {.type = VT_DTYPE_IQ4_XS, .isa = CPU_ISA_AVX2, DOT(iq4_xs, avx2)},
    {.type = VT_DTYPE_MXFP4, .isa = CPU_ISA_AVX2, DOT(mxfp4, avx2), .gemm = gemm_mxfp4_avx2,
     .gemm_nopf = gemm_mxfp4_avx2_nopf},

    /* AVX-512 VNNI: the packed GEMMs (the dots stay AVX2's). The decode kernel
     * without software prefetch of Q4_0 (Q4_1, Q5_0, Q5_1) is its prefill one;
     * Q8_0's differ at 1-2 tokens (gemm8_avx512.c's 8-row tiles in decode) */
    {.type = VT_DTYPE_Q4_0, .isa = CPU_ISA_AVX512, .gemm = gemm_q4_0_avx512,
     .gemm_cached = gemm_q4_0_avx512_cached, .gemm_nopf = gemm_q4_0_avx512_cached},
    {.type = VT_DTYPE_Q4_1, .isa = CPU_ISA_AVX512, .gemm = gemm_q4_1_avx512,
     .gemm_cached = gemm_q4_1_avx512_cached, .gemm_nopf = gemm_q4_1_avx512_cached},
    {.type = VT_DTYPE_Q5_0, .isa = CPU_ISA_AVX512, .gemm = gemm_q5_0_avx512,
     .gemm_cached = gemm_q5_0_avx512_cached, .gemm_nopf = gemm_q5_0_avx512_cached},
    {.type = VT_DTYPE_Q5_1, .isa = CPU_ISA_AVX512, .gemm = gemm_q5_1_avx512,
     .gemm_cached = gemm_q5_1_avx512_cached, .gemm_nopf = gemm_q5_1_avx512_cached},
    {.type = VT_DTYPE_Q8_0, .isa = CPU_ISA_AVX512, .gemm = gemm_q8_0_avx512,
     .gemm_cached = gemm_q8_0_avx512_cached, .gemm_nopf = gemm_q8_0_avx512_nopf},
    {.type = VT_DTYPE_Q4_K, .isa = CPU_ISA_AVX512, .gemm = gemm_q4_K_avx512, .gemm_nopf = gemm_q4_K_avx512_nopf},
    {.type = VT_DTYPE_Q5_K, .isa = CPU_ISA_AVX512, .gemm = gemm_q5_K_avx512, .gemm_nopf = gemm_q5_K_avx512_nopf},
    {.type = VT_DTYPE_Q6_K, .isa = CPU_ISA_AVX512, .gemm = gemm_q6_K_avx512, .gemm_nopf = gemm_q6_K_avx512_nopf},
    {.type = VT_DTYPE_MXFP4, .isa = CPU_ISA_AVX512, .gemm = gemm_mxfp4_avx512,
     .gemm_cached = gemm_mxfp4_avx512_nopf, .gemm_nopf = gemm_mxfp4_avx512_nopf},

    /* AVX-512 with AMX-INT8: tile GEMMs for prefill */
    {.type = VT_DTYPE_Q4_0, .isa = CPU_ISA_AVX512, .amx = true, .gemm_wide = gemm_q4_0_amx},
    {.type = VT_DTYPE_Q8_0, .isa = CPU_ISA_AVX512, .amx = true, .gemm_wide = gemm_q8_0_amx},
    {.type = VT_DTYPE_Q4_K, .isa = CPU_ISA_AVX512, .amx = true, .gemm_wide = gemm_q4_K_amx},
    {.type = VT_DTYPE_Q5_K, .isa = CPU_ISA_AVX512, .amx = true, .gemm_wide = gemm_q5_K_amx},
    {.type = VT_DTYPE_Q6_K, .isa = CPU_ISA_AVX512, .amx = true, .gemm_wide = gemm_q6_K_amx},
    {.type = VT_DTYPE_MXFP4, .isa = CPU_ISA_AVX512, .amx = true, .gemm_wide = gemm_mxfp4_amx},
};
const size_t x86_n_type_rows = sizeof x86_type_rows / sizeof x86_type_rows[0];

const cpu_tier_row x86_tier_rows[] = {
    {.isa = CPU_ISA_AVX2, .silu_mul = silu_mul_avx2, .rms_norm = rms_norm_avx2, .gelu_mul = gelu_mul_avx2,
     .softcap = attn_softcap_avx2, .dn = &dn_kernels_avx2},
    {.isa = CPU_ISA_AVX512, .gelu_mul = gelu_mul_avx512, .softcap = attn_softcap_avx512, .dn = &dn_kernels_avx512},
};
const size_t x86_n_tier_rows = sizeof x86_tier_rows / sizeof x86_tier_rows[0];
