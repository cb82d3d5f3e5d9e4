/* The aarch64 kernels of the dispatch table, listed in arm_kernels.c's rows.
 * Declarations only (no intrinsics), so kernels.c and arm_kernels.c build
 * without ISA flags. Each
 * dot_<type>_<isa> / dot_rows_<type>_<isa> follows the contracts in cpu/kernels.h.
 *
 * Tiers and files:
 *   neon       plain ASIMD (every aarch64 core): *_neon.c
 *   neon_dot   + sdot (ARMv8.2 dotprod): *_neon_dot.c, the int8 types only, and
 *              the packed GEMMs (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4); the float dots and
 *              the quantizers are the plain ones
 *   neon_i8mm  + smmla: *_neon_i8mm.c, on top of neon_dot where it pays: the
 *              packed Q8_0 GEMM at the 4-token prefill tile */
#ifndef VT_CPU_ARM_ARM_KERNELS_H
#define VT_CPU_ARM_ARM_KERNELS_H

#include "cpu/kernels.h"

#include <stddef.h>
#include <stdint.h>

/* The thirteen int8-domain weight types, one set per tier:
 * dot_legacy_<isa>.c and dot_k_<isa>.c. */
#define ARM_DECLARE_INT8_DOTS(isa)                                                         \
    CPU_DECLARE_DOT(q4_0, isa)                                                             \
    CPU_DECLARE_DOT(q4_1, isa)                                                             \
    CPU_DECLARE_DOT(q5_0, isa)                                                             \
    CPU_DECLARE_DOT(q5_1, isa)                                                             \
    CPU_DECLARE_DOT(q8_0, isa)                                                             \
    CPU_DECLARE_DOT(iq4_nl, isa)                                                           \
    CPU_DECLARE_DOT(q2_K, isa)                                                             \
    CPU_DECLARE_DOT(q3_K, isa)                                                             \
    CPU_DECLARE_DOT(q4_K, isa)                                                             \
    CPU_DECLARE_DOT(q5_K, isa)                                                             \
    CPU_DECLARE_DOT(q6_K, isa)                                                             \
    CPU_DECLARE_DOT(iq4_xs, isa)                                                           \
    CPU_DECLARE_DOT(mxfp4, isa)

ARM_DECLARE_INT8_DOTS(neon)
ARM_DECLARE_INT8_DOTS(neon_dot)

/* dot_float_neon.c */
CPU_DECLARE_DOT(f32, neon)
CPU_DECLARE_DOT(f16, neon)
CPU_DECLARE_DOT(bf16, neon)

/* quant_act_neon.c: bit-identical with quant_row_*_ref */
/* vec_neon.c */
void silu_mul_neon(float *g, const float *u, int64_t n);
void rms_norm_neon(const float *x, const float *w, int64_t n, float eps, float *out);
/* attn_neon.c (cpu/attention_impl.h): the soft-cap and GELU, for the cpu_kernels row */
void attn_softcap_neon(float *s, int64_t n, float cap);
void gelu_mul_neon(float *g, const float *u, int64_t n);

/* deltanet_neon.c: the Gated DeltaNet kernels (cpu/deltanet_impl.h) */
extern const dn_kernels dn_kernels_neon;

void quantize_q8_0_neon(const float *x, void *y, int64_t n);
void quantize_q8_1_neon(const float *x, void *y, int64_t n);
void quantize_q8_K_neon(const float *x, void *y, int64_t n);
void quantize_f16_neon(const float *x, void *y, int64_t n);
void quantize_bf16_neon(const float *x, void *y, int64_t n);

/* gemm_neon_dot.c: packed-layout GEMMs (cpu/pack.h), sdot by element */
CPU_DECLARE_GEMM(q4_0, neon_dot)
CPU_DECLARE_GEMM(q4_1, neon_dot)
CPU_DECLARE_GEMM(q5_0, neon_dot)
CPU_DECLARE_GEMM(q5_1, neon_dot)
CPU_DECLARE_GEMM(q8_0, neon_dot)
CPU_DECLARE_GEMM(q4_K, neon_dot)
CPU_DECLARE_GEMM(q5_K, neon_dot)
CPU_DECLARE_GEMM(q6_K, neon_dot)
CPU_DECLARE_GEMM(mxfp4, neon_dot)
/* gemm_neon_i8mm.c: Q8_0 with smmla for the 4-token tile (fewer tokens: sdot) */
CPU_DECLARE_GEMM(q8_0, neon_i8mm)

#undef ARM_DECLARE_INT8_DOTS

/* arm_kernels.c: the rows of the dispatch table (cpu/kernels.h), tiers ascending */
extern const cpu_type_row arm_type_rows[];
extern const size_t arm_n_type_rows;
extern const cpu_tier_row arm_tier_rows[];
extern const size_t arm_n_tier_rows;

#endif
