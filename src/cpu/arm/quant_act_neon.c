/* NEON activation quantizers: f32 -> Q8_0, Q8_1, Q8_K, F16, BF16.
 *
 * Each is bit-identical with the quant module's quant_row_*_ref: the same float
 * operations in the same order (a scale from the block's max, one multiply per
 * element, then the ref's rounding rule). NEON has both rounding rules as one
 * instruction: fcvtas (to nearest, ties away from zero) is roundf, which Q8_0
 * and Q8_1 use; fcvtns (ties to even) is the ref's nearest_int for Q8_K. Scales
 * go to fp16 with fcvt, which rounds to nearest even like f32_to_f16. The
 * product x * id is never fused with anything (no adds follow it), so FMA
 * contraction cannot change a result. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "base/fp16.h"
#include "quant/blocks.h"

#include <math.h>

/* 8 vectors of 4 int32 (elements 0..31 in order) -> 32 int8 at q. */
VT_INLINE void store_i32x32_as_i8(const int32x4_t v[8], int8_t *q) {
    const int16x8_t a = vcombine_s16(vqmovn_s32(v[0]), vqmovn_s32(v[1]));
    const int16x8_t b = vcombine_s16(vqmovn_s32(v[2]), vqmovn_s32(v[3]));
    const int16x8_t c = vcombine_s16(vqmovn_s32(v[4]), vqmovn_s32(v[5]));
    const int16x8_t d = vcombine_s16(vqmovn_s32(v[6]), vqmovn_s32(v[7]));
    vst1q_s8(q, vcombine_s8(vqmovn_s16(a), vqmovn_s16(b)));
    vst1q_s8(q + 16, vcombine_s8(vqmovn_s16(c), vqmovn_s16(d)));
}

/* One 32-element block: q = roundf(x * id), d = amax / 127. Returns d and (in
 * *sum, if not NULL) the sum of the quants. */
VT_INLINE float q8_block_32(const float *x, int8_t *q, int *sum) {
    float32x4_t v[8];
    float32x4_t amax = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; k++) {
        v[k] = vld1q_f32(x + 4 * k);
        amax = vmaxq_f32(amax, vabsq_f32(v[k]));
    }
    const float d = vmaxvq_f32(amax) / 127;
    const float id = d ? 1.0f / d : 0.0f;
    int32x4_t qi[8];
    for (int k = 0; k < 8; k++) qi[k] = vcvtaq_s32_f32(vmulq_n_f32(v[k], id));
    if (sum) {
        int32x4_t s = vaddq_s32(vaddq_s32(qi[0], qi[1]), vaddq_s32(qi[2], qi[3]));
        s = vaddq_s32(s, vaddq_s32(vaddq_s32(qi[4], qi[5]), vaddq_s32(qi[6], qi[7])));
        *sum = vaddvq_s32(s);
    }
    store_i32x32_as_i8(qi, q);
    return d;
}

void quantize_q8_0_neon(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float d = q8_block_32(x + b * QK8_0, y[b].qs, NULL);
        y[b].d = f32_to_f16_arm(d);
    }
}

void quantize_q8_1_neon(const float *x, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / QK8_1; b++) {
        int sum;
        const float d = q8_block_32(x + b * QK8_1, y[b].qs, &sum);
        y[b].d = f32_to_f16_arm(d);
        y[b].s = f32_to_f16_arm((float)sum * d);
    }
}

void quantize_q8_K_neon(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float32x4_t amax_v = vdupq_n_f32(0.0f);
        for (int k = 0; k < QK_K / 4; k++) amax_v = vmaxq_f32(amax_v, vabsq_f32(vld1q_f32(x + 4 * k)));
        const float amax = vmaxvq_f32(amax_v);
        if (!amax) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* the ref keeps the sign of the FIRST element of largest magnitude */
        float max = 0;
        const float32x4_t target = vdupq_n_f32(amax);
        for (int k = 0; k < QK_K / 4; k++) {
            const uint32x4_t eq = vceqq_f32(vabsq_f32(vld1q_f32(x + 4 * k)), target);
            if (vmaxvq_u32(eq)) {
                int lane = 0;
                while (fabsf(x[4 * k + lane]) != amax) lane++;
                max = x[4 * k + lane];
                break;
            }
        }
        const float iscale = -127.f / max;
        const int32x4_t hi = vdupq_n_s32(127);
        for (int k = 0; k < QK_K / 32; k++) {
            int32x4_t qi[8];
            for (int j = 0; j < 8; j++)
                qi[j] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 32 * k + 4 * j), iscale)), hi);
            store_i32x32_as_i8(qi, y[b].qs + 32 * k);
            y[b].bsums[2 * k] = vaddlvq_s8(vld1q_s8(y[b].qs + 32 * k));
            y[b].bsums[2 * k + 1] = vaddlvq_s8(vld1q_s8(y[b].qs + 32 * k + 16));
        }
        y[b].d = 1 / iscale;
    }
}

void quantize_f16_neon(const float *x, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(x + i)), vld1q_f32(x + i + 4));
        vst1q_u16(y + i, vreinterpretq_u16_f16(h));
    }
    for (; i < n; i++) y[i] = f32_to_f16(x[i]);
}

/* Four floats -> bf16 as f32_to_bf16: round to nearest even, NaN kept quiet. */
VT_INLINE uint16x4_t bf16x4(float32x4_t f) {
    const uint32x4_t u = vreinterpretq_u32_f32(f);
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint16x4_t r = vshrn_n_u32(vaddq_u32(u, vaddq_u32(lsb, vdupq_n_u32(0x7fff))), 16);
    const uint16x4_t qnan = vorr_u16(vshrn_n_u32(u, 16), vdup_n_u16(64));
    const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
    return vbsl_u16(vmovn_u32(nan), qnan, r);
}

void quantize_bf16_neon(const float *x, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        vst1q_u16(y + i, vcombine_u16(bf16x4(vld1q_f32(x + i)), bf16x4(vld1q_f32(x + i + 4))));
    for (; i < n; i++) y[i] = f32_to_bf16(x[i]);
}
