/* Inline AVX-512 helpers shared by the *_avx512.c and *_amx.c kernel files.
 * Include only from files built with the AVX-512 flags. */
#ifndef VT_CPU_X86_SIMD_AVX512_H
#define VT_CPU_X86_SIMD_AVX512_H

#include "cpu/x86/simd_avx2.h"

/* The 4 bytes at p in every 32-bit lane. */
VT_INLINE __m512i bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* 16 halves at p as floats. */
VT_INLINE __m512 load_f16x16(const void *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* The halved E8M0 scales of 16 rows (bytes at e) as floats (mxfp4_e8m0_half):
 * (e - 1) << 23, or 0x200000 << e for e < 2. */
VT_INLINE __m512 e8m0_half_x16(const uint8_t *e) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
    const __m512i norm = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    const __mmask16 small = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, norm, sub));
}

/* Byte j (0..3) of every 32-bit lane, zero-extended to 32 bits. */
VT_INLINE __m512i lane_byte(__m512i v, int j) {
    return _mm512_and_si512(_mm512_srli_epi32(v, 8 * j), _mm512_set1_epi32(0xff));
}

/* The 6-bit scales and mins of a packed Q4_K super-block tile (cpu/pack.h: the
 * 12 scale bytes of the 16 rows as three vectors of little-endian words u0..u2):
 * byte j of each lane of sc_lo / mn_lo is sub-block j's scale / min, of sc_hi /
 * mn_hi sub-block 4 + j's. */
VT_INLINE void q4_K_scales_x16(const uint8_t *sp, __m512i *sc_lo, __m512i *sc_hi, __m512i *mn_lo,
                               __m512i *mn_hi) {
    const __m512i u0 = _mm512_loadu_si512(sp), u1 = _mm512_loadu_si512(sp + 64),
                  u2 = _mm512_loadu_si512(sp + 128);
    const __m512i k6 = _mm512_set1_epi8(0x3f), k4 = _mm512_set1_epi8(0x0f), k2 = _mm512_set1_epi8(0x03);
    *sc_lo = _mm512_and_si512(u0, k6);
    *mn_lo = _mm512_and_si512(u1, k6);
    *sc_hi = _mm512_or_si512(_mm512_and_si512(u2, k4),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), k2), 4));
    *mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), k4),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), k2), 4));
}

/* exp(x) for x <= 0: exp_neg_f32x8 (simd_avx2.h) on 16 lanes, the same
 * polynomial and the same bits per lane for finite x. */
VT_INLINE __m512 exp_neg_f32x16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(EXP_NEG_LO);
    const __mmask16 ok = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    x = _mm512_max_ps(x, lo);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_NEG_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_NEG_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_NEG_LN2_LO), r);
    __m512 p = _mm512_set1_ps(EXP_NEG_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_NEG_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_NEG_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_NEG_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_NEG_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_NEG_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(ok, p, _mm512_castsi512_ps(e));
}

#endif
