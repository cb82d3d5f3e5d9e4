/* Small NEON vector ops of the forward pass (see x86/vec_avx2.c). */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"

#include <math.h>

/* silu(x) = x / (1 + e^-x), with e = exp(-|x|) <= 1: x / (1 + e) for x >= 0,
 * x * e / (1 + e) below. */
void silu_mul_neon(float *g, const float *u, int64_t n) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t x = vld1q_f32(g + i);
        const float32x4_t e = exp_neg_f32x4(vnegq_f32(vabsq_f32(x)));
        const float32x4_t num = vbslq_f32(vcltzq_f32(x), vmulq_f32(x, e), x);
        vst1q_f32(g + i, vmulq_f32(vdivq_f32(num, vaddq_f32(one, e)), vld1q_f32(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* As rms_norm_avx2 with 2-lane doubles: four chains, 8 double lanes, added in
 * a fixed order. */
void rms_norm_neon(const float *x, const float *w, int64_t n, float eps, float *out) {
    float64x2_t acc[4] = {vdupq_n_f64(0), vdupq_n_f64(0), vdupq_n_f64(0), vdupq_n_f64(0)};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int h = 0; h < 2; h++) {
            const float32x4_t v = vld1q_f32(x + i + 4 * h), sq = vmulq_f32(v, v);
            acc[2 * h] = vaddq_f64(acc[2 * h], vcvt_f64_f32(vget_low_f32(sq)));
            acc[2 * h + 1] = vaddq_f64(acc[2 * h + 1], vcvt_high_f64_f32(sq));
        }
    const float64x2_t a = vaddq_f64(vaddq_f64(acc[0], acc[1]), vaddq_f64(acc[2], acc[3]));
    double sum = vgetq_lane_f64(a, 0) + vgetq_lane_f64(a, 1);
    for (; i < n; i++) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    const float32x4_t s = vdupq_n_f32(scale);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(out + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), s), vld1q_f32(w + i)));
    for (; i < n; i++) out[i] = (x[i] * scale) * w[i];
}
