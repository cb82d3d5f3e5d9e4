/* The Gated DeltaNet kernels on NEON (ASIMD, every aarch64 core): cpu/deltanet_impl.h over
 * 4-lane primitives. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "cpu/deltanet.h"

#define DN_SFX neon
typedef float32x4_t vf;
#define VF_W 4
#define vf_load(p) vld1q_f32(p)
#define vf_store(p, v) vst1q_f32((p), (v))
#define vf_set1(x) vdupq_n_f32(x)
#define vf_zero() vdupq_n_f32(0.0f)
#define vf_add(a, b) vaddq_f32((a), (b))
#define vf_sub(a, b) vsubq_f32((a), (b))
#define vf_mul(a, b) vmulq_f32((a), (b))
#define vf_div(a, b) vdivq_f32((a), (b))
#define vf_fma(a, b, c) vfmaq_f32((c), (a), (b))
#define vf_hsum(v) vaddvq_f32(v)
#define vf_exp_neg(v) exp_neg_f32x4(v)

/* pairwise adds: [a0+a1, a2+a3, b0+b1, b2+b3], then across the pairs */
VT_INLINE void vf_hsum4(vf a, vf b, vf c, vf d, float s[4]) {
    vst1q_f32(s, vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d)));
}

/* silu as silu_mul_neon: e = exp(-|x|), x / (1 + e) for x >= 0, x e / (1 + e) below */
VT_INLINE vf vf_silu(vf x) {
    const vf e = exp_neg_f32x4(vnegq_f32(vabsq_f32(x)));
    return vdivq_f32(vbslq_f32(vcltzq_f32(x), vmulq_f32(x, e), x), vaddq_f32(vdupq_n_f32(1.0f), e));
}

#include "cpu/deltanet_impl.h"
