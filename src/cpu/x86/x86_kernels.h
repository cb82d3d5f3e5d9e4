/* The x86 kernels of the dispatch table, listed in x86_kernels.c's rows.
 * Declarations only (no intrinsics), so the rows build without ISA flags. Each dot_<type>_<isa> and
 * dot_rows_<type>_<isa> follows the contracts in cpu/kernels.h. */
#ifndef VT_CPU_X86_X86_KERNELS_H
#define VT_CPU_X86_X86_KERNELS_H

#include "cpu/kernels.h"

#include <stddef.h>
#include <stdint.h>

/* dot_legacy_avx2.c */
CPU_DECLARE_DOT(q4_0, avx2)
CPU_DECLARE_DOT(q4_1, avx2)
CPU_DECLARE_DOT(q5_0, avx2)
CPU_DECLARE_DOT(q5_1, avx2)
CPU_DECLARE_DOT(q8_0, avx2)
CPU_DECLARE_DOT(iq4_nl, avx2)
CPU_DECLARE_DOT(mxfp4, avx2)
/* dot_k_avx2.c */
CPU_DECLARE_DOT(q2_K, avx2)
CPU_DECLARE_DOT(q3_K, avx2)
CPU_DECLARE_DOT(q4_K, avx2)
CPU_DECLARE_DOT(q5_K, avx2)
CPU_DECLARE_DOT(q6_K, avx2)
CPU_DECLARE_DOT(iq4_xs, avx2)
/* dot_float_avx2.c */
CPU_DECLARE_DOT(f32, avx2)
CPU_DECLARE_DOT(f16, avx2)
CPU_DECLARE_DOT(bf16, avx2)

/* quant_act_avx2.c */
void quantize_q8_0_avx2(const float *x, void *y, int64_t n);
void quantize_q8_1_avx2(const float *x, void *y, int64_t n);
void quantize_q8_K_avx2(const float *x, void *y, int64_t n);
void quantize_f16_avx2(const float *x, void *y, int64_t n);
void quantize_bf16_avx2(const float *x, void *y, int64_t n);

/* attn_avx2.c, attn_avx512.c (cpu/attention_impl.h): the soft-cap and GELU of
 * each tier, for the cpu_kernels rows */
void attn_softcap_avx2(float *s, int64_t n, float cap);
void gelu_mul_avx2(float *g, const float *u, int64_t n);
void attn_softcap_avx512(float *s, int64_t n, float cap);
void gelu_mul_avx512(float *g, const float *u, int64_t n);

/* vec_avx2.c: small vector ops */
void silu_mul_avx2(float *g, const float *u, int64_t n);
void rms_norm_avx2(const float *x, const float *w, int64_t n, float eps, float *out);

/* deltanet_avx2.c, deltanet_avx512.c: the Gated DeltaNet kernels (cpu/deltanet_impl.h) */
extern const dn_kernels dn_kernels_avx2, dn_kernels_avx512;

/* gemm_avx2.c: packed-layout GEMMs (cpu/pack.h) */
CPU_DECLARE_GEMM(q4_0, avx2)
CPU_DECLARE_GEMM(q4_1, avx2)
CPU_DECLARE_GEMM(q5_0, avx2)
CPU_DECLARE_GEMM(q5_1, avx2)
CPU_DECLARE_GEMM(q8_0, avx2)
CPU_DECLARE_GEMM(q4_K, avx2)
CPU_DECLARE_GEMM(q5_K, avx2)
CPU_DECLARE_GEMM(q6_K, avx2)
CPU_DECLARE_GEMM(mxfp4, avx2)
/* ... and without software prefetch (gemm_nopf) */
CPU_DECLARE_GEMM(q4_0, avx2_nopf)
CPU_DECLARE_GEMM(q4_1, avx2_nopf)
CPU_DECLARE_GEMM(q5_0, avx2_nopf)
CPU_DECLARE_GEMM(q5_1, avx2_nopf)
CPU_DECLARE_GEMM(q8_0, avx2_nopf)
CPU_DECLARE_GEMM(q4_K, avx2_nopf)
CPU_DECLARE_GEMM(q5_K, avx2_nopf)
CPU_DECLARE_GEMM(q6_K, avx2_nopf)
CPU_DECLARE_GEMM(mxfp4, avx2_nopf)
/* gemm_avx512.c: the same with AVX-512 VNNI */
CPU_DECLARE_GEMM(q4_0, avx512)
CPU_DECLARE_GEMM(q4_1, avx512)
CPU_DECLARE_GEMM(q5_0, avx512)
CPU_DECLARE_GEMM(q5_1, avx512)
CPU_DECLARE_GEMM(q8_0, avx512)
CPU_DECLARE_GEMM(q4_K, avx512)
CPU_DECLARE_GEMM(q5_K, avx512)
CPU_DECLARE_GEMM(q6_K, avx512)
CPU_DECLARE_GEMM(mxfp4, avx512)
/* ... and for prefill token blocks, without software prefetch (gemm_cached) */
CPU_DECLARE_GEMM(q4_0, avx512_cached)
CPU_DECLARE_GEMM(q4_1, avx512_cached)
CPU_DECLARE_GEMM(q5_0, avx512_cached)
CPU_DECLARE_GEMM(q5_1, avx512_cached)
CPU_DECLARE_GEMM(q8_0, avx512_cached)
/* ... without software prefetch (gemm_nopf; Q4_0's, Q4_1's, Q5_0's and Q5_1's are avx512_cached) */
CPU_DECLARE_GEMM(q8_0, avx512_nopf)
CPU_DECLARE_GEMM(q4_K, avx512_nopf)
CPU_DECLARE_GEMM(q5_K, avx512_nopf)
CPU_DECLARE_GEMM(q6_K, avx512_nopf)
CPU_DECLARE_GEMM(mxfp4, avx512_nopf)
/* gemm8_avx512.c: the AVX-512 tier's Q8_0 decode, 8 rows a ymm */
CPU_DECLARE_GEMM(q8_0, avx512_y)
CPU_DECLARE_GEMM(q8_0, avx512_y_nopf)
/* gemm_amx.c: AMX-INT8 tile GEMMs for n_tok <= PACK_TOK_WIDE (two 16-token tiles) */
CPU_DECLARE_GEMM(q4_0, amx)
CPU_DECLARE_GEMM(q8_0, amx)
CPU_DECLARE_GEMM(q4_K, amx)
CPU_DECLARE_GEMM(q5_K, amx)
CPU_DECLARE_GEMM(q6_K, amx)
CPU_DECLARE_GEMM(mxfp4, amx)

/* x86_kernels.c: the rows of the dispatch table (cpu/kernels.h), tiers ascending */
extern const cpu_type_row x86_type_rows[];
extern const size_t x86_n_type_rows;
extern const cpu_tier_row x86_tier_rows[];
extern const size_t x86_n_tier_rows;

#endif
