/* AVX2/FMA/F16C instantiation of the attention kernels, the soft-cap and GELU
 * (cpu/attention_impl.h): 8 lanes; score tiles of 4 query rows x 16 keys with
 * one chain per score (8 accumulators), accumulation tiles of 2 rows x 32
 * outputs. Q8_0 stores are quant_ref's. */
#include "cpu/x86/simd_avx2.h"
#include "cpu/x86/x86_kernels.h"
#include "quant/quant.h"

#define ATTN_SFX avx2
#define VL 8
#define ATTN_TR 4
#define ATTN_TG 2
#define ATTN_SPLIT 1
#define ATTN_AR 2
#define ATTN_AG 4

typedef __m256 vf;
typedef __m256 vm;

VT_INLINE vf vf_zero(void) { return _mm256_setzero_ps(); }
VT_INLINE vf vf_set1(float x) { return _mm256_set1_ps(x); }
VT_INLINE vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
VT_INLINE void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
VT_INLINE vf vf_load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
VT_INLINE vf vf_load_bf16(const uint16_t *p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
VT_INLINE vf vf_load_i8(const int8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
VT_INLINE void vf_store_f16(uint16_t *p, vf v) {
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
VT_INLINE vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
VT_INLINE vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
VT_INLINE vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
VT_INLINE vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
VT_INLINE vf vf_div(vf a, vf b) { return _mm256_div_ps(a, b); }
VT_INLINE vf vf_max(vf a, vf b) { return _mm256_max_ps(a, b); }
VT_INLINE vf vf_abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
VT_INLINE vf vf_copysign(vf mag, vf sgn) {
    const vf sb = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sb, mag), _mm256_and_ps(sb, sgn));
}
VT_INLINE vm vf_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
VT_INLINE vm vf_le(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
VT_INLINE vf vf_sel(vm m, vf a, vf b) { return _mm256_blendv_ps(b, a, m); }
VT_INLINE float vf_hsum(vf v) { return hsum_f32x8(v); }
VT_INLINE float vf_hmax(vf v) { return hmax_f32x8(v); }
VT_INLINE vf vf_exp_neg(vf x) { return exp_neg_f32x8(x); }
#define ATTN_F16_SCALAR(h) f16c_to_f32(h)
#define ATTN_QUANT_Q8_0(src, dst, n) quant_traits_get(VT_DTYPE_Q8_0)->quant_ref((src), (dst), (n))

#include "cpu/attention_impl.h"
