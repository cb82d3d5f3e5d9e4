/* The Gated DeltaNet kernels on AVX2 + FMA: cpu/deltanet_impl.h over 8-lane primitives. */
#include "cpu/deltanet.h"
#include "cpu/x86/simd_avx2.h"
#include "cpu/x86/x86_kernels.h"

#define DN_SFX avx2
typedef __m256 vf;
#define VF_W 8
#define vf_load(p) _mm256_loadu_ps(p)
#define vf_store(p, v) _mm256_storeu_ps((p), (v))
#define vf_set1(x) _mm256_set1_ps(x)
#define vf_zero() _mm256_setzero_ps()
#define vf_add(a, b) _mm256_add_ps((a), (b))
#define vf_sub(a, b) _mm256_sub_ps((a), (b))
#define vf_mul(a, b) _mm256_mul_ps((a), (b))
#define vf_div(a, b) _mm256_div_ps((a), (b))
#define vf_fma(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define vf_hsum(v) hsum_f32x8(v)
#define vf_exp_neg(v) exp_neg_f32x8(v)

/* [a0+a1, a2+a3, b0+b1, b2+b3 | ...], twice, then the two 128-bit halves */
VT_INLINE void vf_hsum4(vf a, vf b, vf c, vf d, float s[4]) {
    const vf abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_storeu_ps(s, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}

/* silu as silu_mul_avx2: e = exp(-|x|), x / (1 + e) for x >= 0, x e / (1 + e) below */
VT_INLINE vf vf_silu(vf x) {
    const vf e = exp_neg_f32x8(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
    const vf neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_div_ps(_mm256_blendv_ps(x, _mm256_mul_ps(x, e), neg), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

#include "cpu/deltanet_impl.h"
