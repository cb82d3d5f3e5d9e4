/* NEON dots of the float types: F32 x F32, F16 x F16, BF16 x BF16.
 *
 * Products are accumulated in float, 16 elements per step into four 4-wide FMA
 * accumulators per row, then summed; the tail (n % 16) is done one element at a
 * time. F16 is widened with fcvtl (base ASIMD), BF16 by a 16-bit left shift. The
 * _ref twins accumulate in double, so results differ by float rounding (bounded
 * in tests/test_kernels.c). One routine over NR rows, so dot and dot_rows agree
 * bit for bit. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "cpu/unroll.h"
#include "base/fp16.h"

#include <math.h>

/* Eight elements at p + i as two float vectors. */
VT_INLINE void load8_f32(const void *p, int64_t i, float32x4_t v[2]) {
    v[0] = vld1q_f32((const float *)p + i);
    v[1] = vld1q_f32((const float *)p + i + 4);
}
VT_INLINE void load8_f16(const void *p, int64_t i, float32x4_t v[2]) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16((const uint16_t *)p + i));
    v[0] = vcvt_f32_f16(vget_low_f16(h));
    v[1] = vcvt_high_f32_f16(h);
}
VT_INLINE void load8_bf16(const void *p, int64_t i, float32x4_t v[2]) {
    const uint16x8_t h = vld1q_u16((const uint16_t *)p + i);
    v[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    v[1] = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
}
VT_INLINE float load1_f32(const void *p, int64_t i) { return ((const float *)p)[i]; }
VT_INLINE float load1_f16(const void *p, int64_t i) { return f16_arm(((const uint16_t *)p)[i]); }
VT_INLINE float load1_bf16(const void *p, int64_t i) { return bf16_to_f32(((const uint16_t *)p)[i]); }

#define FLOAT_KERNEL(name)                                                                 \
    VT_INLINE void name##_rows(int64_t n, const uint8_t *w, size_t ws, const void *x,      \
                               float *s, const int nr) {                                   \
        float32x4_t acc[CPU_DOT_ROWS_MAX][4];                                              \
        VT_UNROLL(4) for (int r = 0; r < nr; r++)                                          \
            for (int k = 0; k < 4; k++) acc[r][k] = vdupq_n_f32(0.0f);                     \
        int64_t i = 0;                                                                     \
        for (; i + 16 <= n; i += 16) {                                                     \
            float32x4_t xa[2], xb[2];                                                      \
            load8_##name(x, i, xa);                                                        \
            load8_##name(x, i + 8, xb);                                                    \
            VT_UNROLL(4) for (int r = 0; r < nr; r++) {                                    \
                const void *wr = w + (size_t)r * ws;                                       \
                float32x4_t wa[2], wb[2];                                                  \
                load8_##name(wr, i, wa);                                                   \
                load8_##name(wr, i + 8, wb);                                               \
                acc[r][0] = vfmaq_f32(acc[r][0], wa[0], xa[0]);                            \
                acc[r][1] = vfmaq_f32(acc[r][1], wa[1], xa[1]);                            \
                acc[r][2] = vfmaq_f32(acc[r][2], wb[0], xb[0]);                            \
                acc[r][3] = vfmaq_f32(acc[r][3], wb[1], xb[1]);                            \
            }                                                                              \
        }                                                                                  \
        VT_UNROLL(4) for (int r = 0; r < nr; r++) {                                        \
            const void *wr = w + (size_t)r * ws;                                           \
            const float32x4_t a = vaddq_f32(vaddq_f32(acc[r][0], acc[r][1]),               \
                                            vaddq_f32(acc[r][2], acc[r][3]));              \
            float tail = 0.0f;                                                             \
            for (int64_t j = i; j < n; j++)                                                \
                tail = fmaf(load1_##name(wr, j), load1_##name(x, j), tail);                \
            s[r] = vaddvq_f32(a) + tail;                                                   \
        }                                                                                  \
    }

FLOAT_KERNEL(f32)
FLOAT_KERNEL(f16)
FLOAT_KERNEL(bf16)

#define ARM_SFX neon
CPU_DEFINE_DOT(f32, ARM_SFX)
CPU_DEFINE_DOT(f16, ARM_SFX)
CPU_DEFINE_DOT(bf16, ARM_SFX)
