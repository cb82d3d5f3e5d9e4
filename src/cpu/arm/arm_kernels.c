/* The aarch64 part of the dispatch table (see arm_kernels.h). Built without ISA
 * flags: it only stores function pointers, never runs a kernel. */
#include "cpu/arm/arm_kernels.h"

#define SET_DOT(T, t, isa)                                                                 \
    do {                                                                                   \
        k->dot[VT_DTYPE_##T] = dot_##t##_##isa;                                            \
        k->dot_rows[VT_DTYPE_##T] = dot_rows_##t##_##isa;                                  \
        k->dot_isa[VT_DTYPE_##T] = CPU_ISA_##isa##_TIER;                                   \
    } while (0)
#define CPU_ISA_neon_TIER CPU_ISA_NEON
#define CPU_ISA_neon_dot_TIER CPU_ISA_NEON_DOT

#define SET_INT8_DOTS(isa)                                                                 \
    do {                                                                                   \
        SET_DOT(Q4_0, q4_0, isa);                                                          \
        SET_DOT(Q4_1, q4_1, isa);                                                          \
        SET_DOT(Q5_0, q5_0, isa);                                                          \
        SET_DOT(Q5_1, q5_1, isa);                                                          \
        SET_DOT(Q8_0, q8_0, isa);                                                          \
        SET_DOT(IQ4_NL, iq4_nl, isa);                                                      \
        SET_DOT(Q2_K, q2_K, isa);                                                          \
        SET_DOT(Q3_K, q3_K, isa);                                                          \
        SET_DOT(Q4_K, q4_K, isa);                                                          \
        SET_DOT(Q5_K, q5_K, isa);                                                          \
        SET_DOT(Q6_K, q6_K, isa);                                                          \
        SET_DOT(IQ4_XS, iq4_xs, isa);                                                      \
    } while (0)

#define SET_QUANT(T, t)                                                                    \
    do {                                                                                   \
        k->quantize_act[VT_DTYPE_##T] = quantize_##t##_neon;                               \
        k->quantize_isa[VT_DTYPE_##T] = CPU_ISA_NEON;                                      \
    } while (0)

void cpu_kernels_fill_arm(cpu_kernels *k, cpu_isa isa) {
    if (isa < CPU_ISA_NEON) return;
    SET_DOT(F32, f32, neon);
    SET_DOT(F16, f16, neon);
    SET_DOT(BF16, bf16, neon);
    SET_INT8_DOTS(neon);
    SET_QUANT(Q8_0, q8_0);
    SET_QUANT(Q8_1, q8_1);
    SET_QUANT(Q8_K, q8_K);
    SET_QUANT(F16, f16);
    SET_QUANT(BF16, bf16);
    k->silu_mul = silu_mul_neon;
    k->rms_norm = rms_norm_neon;
    k->isa = CPU_ISA_NEON;
    if (isa >= CPU_ISA_NEON_DOT) {
        SET_INT8_DOTS(neon_dot);
        /* packed GEMMs need sdot (the plain tier keeps the file layout and dot_rows) */
        k->gemm[VT_DTYPE_Q4_0] = gemm_q4_0_neon_dot;
        k->gemm[VT_DTYPE_Q8_0] = gemm_q8_0_neon_dot;
        k->gemm[VT_DTYPE_Q4_K] = gemm_q4_K_neon_dot;
        k->gemm[VT_DTYPE_Q5_K] = gemm_q5_K_neon_dot;
        k->gemm[VT_DTYPE_Q6_K] = gemm_q6_K_neon_dot;
        k->gemm_isa[VT_DTYPE_Q4_0] = k->gemm_isa[VT_DTYPE_Q8_0] = CPU_ISA_NEON_DOT;
        k->gemm_isa[VT_DTYPE_Q4_K] = k->gemm_isa[VT_DTYPE_Q5_K] = CPU_ISA_NEON_DOT;
        k->gemm_isa[VT_DTYPE_Q6_K] = CPU_ISA_NEON_DOT;
        k->isa = CPU_ISA_NEON_DOT;
    }
    if (isa >= CPU_ISA_NEON_I8MM) {
        /* smmla pays where two rows meet two tokens, and (with the packed
         * layout's zips) only for Q8_0 at 4 tokens; everything else, the Q4_0,
         * Q4_K, Q5_K and Q6_K GEMMs included, stays sdot */
        k->gemm[VT_DTYPE_Q8_0] = gemm_q8_0_neon_i8mm;
        k->gemm_isa[VT_DTYPE_Q8_0] = CPU_ISA_NEON_I8MM;
        k->isa = CPU_ISA_NEON_I8MM;
    }
}
