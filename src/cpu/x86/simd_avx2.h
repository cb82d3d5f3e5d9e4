/* Inline AVX2 helpers shared by the *_avx2.c kernel files. Include only from
 * files built with -mavx2 -mfma -mf16c. */
#ifndef VT_CPU_X86_SIMD_AVX2_H
#define VT_CPU_X86_SIMD_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define VT_INLINE static inline __attribute__((always_inline))

/* Pins v in a register at this point of the code. In an unrolled register tile
 * that accumulates products (sum += maddubs(...)), GCC 12 otherwise reorders
 * the integer sums, computes every product of the tile first and spills them:
 * the AVX2 4-token Q4_0 tile stored 24 products a block to the stack and ran
 * 34% slower. An accumulator pinned after each update keeps the source's order. */
#define KEEP_REG(v) __asm__("" : "+x"(v))

/* Sum of the 8 floats. */
VT_INLINE float hsum_f32x8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Largest of the 8 floats. */
VT_INLINE float hmax_f32x8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sum of the 8 int32. */
VT_INLINE int32_t hsum_i32x8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* 16 packed bytes -> 32 bytes: the low nibbles in bytes 0..15, the high nibbles
 * in bytes 16..31 (the element order of the 32-element nibble blocks). */
VT_INLINE __m256i nibbles_to_bytes(const uint8_t *p) {
    const __m128i b = _mm_loadu_si128((const __m128i *)p);
    const __m256i lohi = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    return _mm256_and_si256(lohi, _mm256_set1_epi8(0x0f));
}

/* 32 bits -> 32 bytes, byte i = 0xff if bit i is set, else 0. */
VT_INLINE __m256i bits_to_bytes(const uint8_t *p) {
    uint32_t bits;
    memcpy(&bits, p, 4);
    /* byte i takes source byte i / 8 ... */
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int32_t)bits),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    /* ... and tests bit i % 8 of it */
    const __m256i select = _mm256_set1_epi64x((int64_t)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
}

/* Pairwise sums of u8 x s8 products as 8 int32 (4 products each). a in 0..255
 * with |a * b| pairs below 2^15 (always true for the callers: a <= 127). */
VT_INLINE __m256i dot_u8s8_i32(__m256i a_u8, __m256i b_s8) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a_u8, b_s8), _mm256_set1_epi16(1));
}

/* As dot_u8s8_i32 for two signed operands with |a| <= 127: |a| * sign(b, a). */
VT_INLINE __m256i dot_s8s8_i32(__m256i a_s8, __m256i b_s8) {
    return dot_u8s8_i32(_mm256_sign_epi8(a_s8, a_s8), _mm256_sign_epi8(b_s8, a_s8));
}

/* F16 -> F32 of one value via F16C (exact). */
VT_INLINE float f16c_to_f32(uint16_t h) { return _cvtsh_ss(h); }

/* The constants of exp_neg_f32x8 and its wider twins (simd_avx512.h). */
#define EXP_NEG_LO (-87.3365447f)
#define EXP_NEG_LOG2E 1.44269504088896341f
#define EXP_NEG_LN2_HI 0.693359375f
#define EXP_NEG_LN2_LO (-2.12194440e-4f)
#define EXP_NEG_P0 1.9875691500e-4f
#define EXP_NEG_P1 1.3981999507e-3f
#define EXP_NEG_P2 8.3334519073e-3f
#define EXP_NEG_P3 4.1665795894e-2f
#define EXP_NEG_P4 1.6666665459e-1f
#define EXP_NEG_P5 5.0000001201e-1f

/* exp(x) for x <= 0 (Cephes' expf: range reduction by ln 2 in two parts, a
 * degree-6 polynomial, 2^n from the exponent bits); about 1 ulp. Below the
 * smallest normal result it returns 0. */
VT_INLINE __m256 exp_neg_f32x8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(EXP_NEG_LO);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lo);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_NEG_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_NEG_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_NEG_LN2_LO), r);
    __m256 p = _mm256_set1_ps(EXP_NEG_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_NEG_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_NEG_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_NEG_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_NEG_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_NEG_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

#endif
