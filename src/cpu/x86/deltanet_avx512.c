/* The Gated DeltaNet kernels on AVX-512: cpu/deltanet_impl.h over 16-lane primitives. */
#include "cpu/deltanet.h"
#include "cpu/x86/simd_avx512.h"
#include "cpu/x86/x86_kernels.h"

#define DN_SFX avx512
typedef __m512 vf;
#define VF_W 16
#define vf_load(p) _mm512_loadu_ps(p)
#define vf_store(p, v) _mm512_storeu_ps((p), (v))
#define vf_set1(x) _mm512_set1_ps(x)
#define vf_zero() _mm512_setzero_ps()
#define vf_add(a, b) _mm512_add_ps((a), (b))
#define vf_sub(a, b) _mm512_sub_ps((a), (b))
#define vf_mul(a, b) _mm512_mul_ps((a), (b))
#define vf_div(a, b) _mm512_div_ps((a), (b))
#define vf_fma(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define vf_exp_neg(v) exp_neg_f32x16(v)

/* the lanes summed as halves, then hsum_f32x8's order */
VT_INLINE float vf_hsum(vf v) {
    return hsum_f32x8(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

/* the halves added, then as the AVX2 tier's: pairwise adds, then the 128-bit halves */
VT_INLINE void vf_hsum4(vf a, vf b, vf c, vf d, float s[4]) {
#define DN_HALF(x) _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps((x), 1))
    const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(DN_HALF(a), DN_HALF(b)), _mm256_hadd_ps(DN_HALF(c), DN_HALF(d)));
#undef DN_HALF
    _mm_storeu_ps(s, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}

/* silu: e = exp(-|x|), x / (1 + e) for x >= 0, x e / (1 + e) below */
VT_INLINE vf vf_silu(vf x) {
    const vf e = exp_neg_f32x16(_mm512_or_ps(x, _mm512_set1_ps(-0.0f)));
    const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_div_ps(_mm512_mask_mul_ps(x, neg, x, e), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

#include "cpu/deltanet_impl.h"
