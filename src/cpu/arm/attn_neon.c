/* NEON instantiation of the attention kernels, the soft-cap and GELU
 * (cpu/attention_impl.h): 4 lanes; score tiles of 4 query rows x 16 keys with
 * one chain per score (16 accumulators), accumulation tiles of 2 rows x 16
 * outputs. Plain ASIMD (every aarch64 core). Stores are the activation
 * quantizers of quant_act_neon.c, which write the same bytes as the scalar
 * stores; exp is neon_common.h's polynomial. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"

#define ATTN_SFX neon
#define VL 4
#define ATTN_TR 4
#define ATTN_TG 4
#define ATTN_SPLIT 1
#define ATTN_AR 2
#define ATTN_AG 4

typedef float32x4_t vf;
typedef uint32x4_t vm;

VT_INLINE vf vf_zero(void) { return vdupq_n_f32(0); }
VT_INLINE vf vf_set1(float x) { return vdupq_n_f32(x); }
VT_INLINE vf vf_load(const float *p) { return vld1q_f32(p); }
VT_INLINE void vf_store(float *p, vf v) { vst1q_f32(p, v); }
VT_INLINE vf vf_load_f16(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
VT_INLINE vf vf_load_bf16(const uint16_t *p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
VT_INLINE vf vf_load_i8(const int8_t *p) {
    int32_t w;
    memcpy(&w, p, 4);
    const int16x8_t h = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
}
VT_INLINE void vf_store_f16(uint16_t *p, vf v) { vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v))); }
VT_INLINE vf vf_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
VT_INLINE vf vf_add(vf a, vf b) { return vaddq_f32(a, b); }
VT_INLINE vf vf_sub(vf a, vf b) { return vsubq_f32(a, b); }
VT_INLINE vf vf_mul(vf a, vf b) { return vmulq_f32(a, b); }
VT_INLINE vf vf_div(vf a, vf b) { return vdivq_f32(a, b); }
VT_INLINE vf vf_max(vf a, vf b) { return vmaxq_f32(a, b); }
VT_INLINE vf vf_abs(vf a) { return vabsq_f32(a); }
VT_INLINE vf vf_copysign(vf mag, vf sgn) { return vbslq_f32(vdupq_n_u32(0x80000000u), sgn, mag); }
VT_INLINE vm vf_lt(vf a, vf b) { return vcltq_f32(a, b); }
VT_INLINE vm vf_le(vf a, vf b) { return vcleq_f32(a, b); }
VT_INLINE vf vf_sel(vm m, vf a, vf b) { return vbslq_f32(m, a, b); }
VT_INLINE float vf_hsum(vf v) { return vaddvq_f32(v); }
VT_INLINE float vf_hmax(vf v) { return vmaxvq_f32(v); }
VT_INLINE vf vf_exp_neg(vf x) { return exp_neg_f32x4(x); }
#define ATTN_F16_SCALAR(h) f16_arm(h)
#define ATTN_QUANT_Q8_0(src, dst, n) quantize_q8_0_neon((src), (dst), (n))

#include "cpu/attention_impl.h"
