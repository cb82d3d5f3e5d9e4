/* The primitives of cpu/x86/gemm_impl.h on 8 rows a ymm that do not depend on how
 * the int8 products are summed: shared by gemm_avx2.c (maddubs) and
 * gemm8_avx512.c (vpdpbusd), which add those. */
#ifndef VT_CPU_X86_GEMM_YMM_H
#define VT_CPU_X86_GEMM_YMM_H

#include "cpu/x86/simd_avx2.h"

#define GEMM_VL 8

typedef __m256i vi;
typedef __m256 vf;

VT_INLINE vi vi_load(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
VT_INLINE vi vi_bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
VT_INLINE vi vi_set1(int32_t c) { return _mm256_set1_epi32(c); }
VT_INLINE vi vi_zero(void) { return _mm256_setzero_si256(); }
VT_INLINE vi vi_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
VT_INLINE vi vi_sra(vi a, const int n) { return _mm256_srai_epi32(a, n); }
VT_INLINE vi nib_lo(vi raw) { return _mm256_and_si256(raw, _mm256_set1_epi8(0x0f)); }
VT_INLINE vi nib_hi(vi raw) { return _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0f)); }
VT_INLINE vi mxfp4_grid(vi nib) {
    const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                         12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    return _mm256_shuffle_epi8(lut, nib);
}

VT_INLINE vf vf_zero(void) { return _mm256_setzero_ps(); }
VT_INLINE vf vf_set1(float x) { return _mm256_set1_ps(x); }
VT_INLINE vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
VT_INLINE vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
VT_INLINE vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
VT_INLINE vf vf_cvt(vi a) { return _mm256_cvtepi32_ps(a); }
VT_INLINE void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
VT_INLINE vf vf_f16(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
/* (e - 1) << 23, or 0x200000 << e for e < 2 */
VT_INLINE vf vf_e8m0_half(const uint8_t *e) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e));
    const __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(norm, sub, small));
}

#endif
