/* Inline NEON helpers shared by the src/cpu/arm kernel files. Include only from
 * files of this folder (they are built for aarch64, where ASIMD is baseline).
 *
 * The int8 dot primitives have two implementations chosen by the flags of the
 * including file: with __ARM_FEATURE_DOTPROD (the *_neon_dot.c files) one sdot
 * per 16 bytes; without it (the *_neon.c files, e.g. Cortex-A53) a widening
 * multiply pair into int16 and a pairwise add into int32. Both are exact: the
 * int16 lanes hold the sum of two products of magnitude <= 128 * 127 (activation
 * quants never reach -128), so they cannot overflow. Which lanes hold which
 * partial sums differs between the two, but every kernel only uses the lane
 * total of a sub-block, so both tiers compute the same integers. */
#ifndef VT_CPU_ARM_NEON_COMMON_H
#define VT_CPU_ARM_NEON_COMMON_H

#include "cpu/kernels.h"

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#define VT_INLINE static inline __attribute__((always_inline))

/* Token pasting for the tier suffix: ARM_FN(dot, q4_0) -> dot_q4_0_<ARM_SFX>. */
#define ARM_CAT3_(a, b, c) a##_##b##_##c
#define ARM_CAT3(a, b, c) ARM_CAT3_(a, b, c)
#define ARM_FN(op, t) ARM_CAT3(op, t, ARM_SFX)

/* fp16 scale -> float: FCVT (base ARMv8 FP), exact like f16_to_f32. */
VT_INLINE float f16_arm(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, 2);
    return (float)f;
}
/* float -> fp16, round to nearest even (FPCR default), as f32_to_f16 for
 * finite values and infinities. */
VT_INLINE uint16_t f32_to_f16_arm(float x) {
    const __fp16 f = (__fp16)x;
    uint16_t h;
    memcpy(&h, &f, 2);
    return h;
}

/* acc + the dot of 16 int8 pairs, spread over the 4 int32 lanes. */
VT_INLINE int32x4_t i8dot_acc(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), a, b);
    return vpadalq_s16(acc, p);
#endif
}

/* The dot of 16 int8 pairs, spread over the 4 int32 lanes. */
VT_INLINE int32x4_t i8dot16(int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(vdupq_n_s32(0), a, b);
#else
    return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), a, b));
#endif
}

/* The dot of 32 int8 pairs (a0.b0 + a1.b1), spread over the 4 int32 lanes. */
VT_INLINE int32x4_t i8dot32(int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a0, b0), a1, b1);
#else
    const int16x8_t p0 = vmlal_high_s8(vmull_s8(vget_low_s8(a0), vget_low_s8(b0)), a0, b0);
    const int16x8_t p1 = vmlal_high_s8(vmull_s8(vget_low_s8(a1), vget_low_s8(b1)), a1, b1);
    return vpadalq_s16(vpaddlq_s16(p0), p1);
#endif
}

/* {sum p0, sum p1, sum p2, sum p3}: the totals of four sub-block dots. */
VT_INLINE int32x4_t hsum4_i32(int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3) {
    return vpaddq_s32(vpaddq_s32(p0, p1), vpaddq_s32(p2, p3));
}

/* exp(x) for x <= 0: the polynomial of x86/simd_avx2.h's exp_neg_f32x8 (Cephes'
 * expf, about 1 ulp), 0 below the smallest normal result. */
VT_INLINE float32x4_t exp_neg_f32x4(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.3365447f);
    const uint32x4_t under = vcltq_f32(x, lo);
    x = vmaxq_f32(x, lo);
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
    const float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), under));
}

#endif
