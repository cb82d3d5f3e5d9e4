/* The AVX-512 VNNI tier's Q8_0 decode (one or two tokens): cpu/x86/gemm_impl.h on
 * 8 rows a ymm with vpdpbusd, each group in one pass of its two halves, as the
 * AVX2 tier reads it (gemm_avx2.c); one token takes two groups at once, g and
 * g + n/2 of the call (two streams: gemm_impl.h legacy_tiles), in the 32 ymm
 * registers AVX-512 VL gives. It streams from memory faster than the
 * 16-row tile of gemm_avx512.c, which takes three and four tokens; the figures
 * are in BENCHMARKS.md ("x86 GEMM prefetch distances"). */
#include "cpu/x86/gemm_ymm.h"
#include "cpu/x86/x86_kernels.h"

#define GEMM_SFX avx512_y
#define GEMM_LEGACY_ONLY
#define GEMM_LEGACY_NV(nt) ((nt) <= 2 ? 2 : 1)
#define GEMM_LEGACY_NS(leg, nt) ((nt) == 1 ? 2 : 1)
#define GEMM_SPLIT_SUMS 1
#define GEMM_BIAS_IN_ACC 1
#define GEMM_Q8_BIASED 1
#define GEMM_NIB_HI16_SHIFT 4
#define GEMM_KEEP(v) ((void)0)

VT_INLINE vi nib_hi16(vi raw) { return _mm256_andnot_si256(_mm256_set1_epi8(0x0f), raw); }
VT_INLINE vi q8_w(vi raw) { return _mm256_xor_si256(raw, _mm256_set1_epi8((char)0x80)); }
VT_INLINE vi q8_x(vi x, vi raw) {
    (void)raw;
    return x;
}
VT_INLINE vi vi_dot(vi acc, vi w, vi x) { return _mm256_dpbusd_epi32(acc, w, x); }
VT_INLINE vi run_dot(vi acc, vi w, vi x) { return _mm256_dpbusd_epi32(acc, w, x); }
VT_INLINE vi run_i32(vi run) { return run; }

#include "cpu/x86/gemm_impl.h"

GEMM_LEGACY(q8_0, LEG_Q8_0, , true)
GEMM_LEGACY(q8_0, LEG_Q8_0, _nopf, false)
