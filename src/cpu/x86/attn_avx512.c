/* AVX-512 instantiation of the attention kernels, the soft-cap and GELU
 * (cpu/attention_impl.h): 16 lanes, so a block of 16 slots is one vector and
 * its tail a masked one; score tiles of 8 query rows x 16 keys with two chains
 * per score (over the two halves of the head dimensions: 8 to 16 independent
 * FMA chains, enough for both FMA ports where one chain a row would wait on FMA
 * latency), accumulation tiles of 4 rows x 64 outputs. Partial vectors are
 * masked loads and stores. Q8_0 stores are quant_ref's. */
#include "cpu/x86/simd_avx512.h"
#include "cpu/x86/x86_kernels.h"
#include "quant/quant.h"

#define ATTN_SFX avx512
#define VL 16
#define ATTN_TR 8
#define ATTN_TG 1
#define ATTN_SPLIT 2
#define ATTN_AR 4
#define ATTN_AG 4

typedef __m512 vf;
typedef __mmask16 vm;

VT_INLINE vf vf_zero(void) { return _mm512_setzero_ps(); }
VT_INLINE vf vf_set1(float x) { return _mm512_set1_ps(x); }
VT_INLINE vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
VT_INLINE void vf_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
VT_INLINE vf vf_load_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
VT_INLINE vf bf16_widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
VT_INLINE vf vf_load_bf16(const uint16_t *p) { return bf16_widen(_mm256_loadu_si256((const __m256i *)p)); }
VT_INLINE vf vf_load_i8(const int8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}
VT_INLINE void vf_store_f16(uint16_t *p, vf v) {
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
VT_INLINE __mmask16 lanes(int64_t nl) { return (__mmask16)((1u << nl) - 1); }
VT_INLINE vf vf_load_part_f32(const float *p, int64_t nl) { return _mm512_maskz_loadu_ps(lanes(nl), p); }
VT_INLINE vf vf_load_part_f16(const uint16_t *p, int64_t nl) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes(nl), p));
}
VT_INLINE vf vf_load_part_bf16(const uint16_t *p, int64_t nl) {
    return bf16_widen(_mm256_maskz_loadu_epi16(lanes(nl), p));
}
VT_INLINE void vf_store_part(float *p, vf v, int64_t nl) { _mm512_mask_storeu_ps(p, lanes(nl), v); }
#define vf_load_part_f32 vf_load_part_f32
#define vf_store_part vf_store_part
VT_INLINE vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
VT_INLINE vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
VT_INLINE vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
VT_INLINE vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
VT_INLINE vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
VT_INLINE vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
VT_INLINE vf vf_abs(vf a) { return _mm512_abs_ps(a); }
VT_INLINE vf vf_copysign(vf mag, vf sgn) {
    /* integer ops: AVX-512F (the float and/or need DQ, which the tier does not check) */
    const __m512i sb = _mm512_set1_epi32((int32_t)0x80000000u);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sb, _mm512_castps_si512(mag)),
                                               _mm512_and_si512(sb, _mm512_castps_si512(sgn))));
}
VT_INLINE vm vf_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
VT_INLINE vm vf_le(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
VT_INLINE vf vf_sel(vm m, vf a, vf b) { return _mm512_mask_blend_ps(m, b, a); }
VT_INLINE float vf_hsum(vf v) { return _mm512_reduce_add_ps(v); }
VT_INLINE float vf_hmax(vf v) { return _mm512_reduce_max_ps(v); }
VT_INLINE vf vf_exp_neg(vf x) { return exp_neg_f32x16(x); }
#define ATTN_F16_SCALAR(h) f16c_to_f32(h)
#define ATTN_QUANT_Q8_0(src, dst, n) quant_traits_get(VT_DTYPE_Q8_0)->quant_ref((src), (dst), (n))

#include "cpu/attention_impl.h"
