/* Small AVX2 vector ops of the forward pass. */
#include "cpu/x86/simd_avx2.h"
#include "cpu/x86/x86_kernels.h"

#include <math.h>

/* silu(x) = x / (1 + e^-x), with e = exp(-|x|) <= 1 from the x <= 0 kernel:
 * x / (1 + e) for x >= 0, x * e / (1 + e) below. */
void silu_mul_avx2(float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = exp_neg_f32x8(_mm256_or_ps(x, sign)); /* exp(-|x|) */
        const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
        const __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, e), neg);
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(num, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* The squares in float as the ref takes them, summed in 16 double lanes (four
 * chains, the adds' latency hidden), the lanes added in a fixed order; the
 * scaling is the ref's two float multiplies. */
void rms_norm_avx2(const float *x, const float *w, int64_t n, float eps, float *out) {
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int h = 0; h < 2; h++) {
            const __m256 v = _mm256_loadu_ps(x + i + 8 * h), sq = _mm256_mul_ps(v, v);
            acc[2 * h] = _mm256_add_pd(acc[2 * h], _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
            acc[2 * h + 1] = _mm256_add_pd(acc[2 * h + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
        }
    double lane[4];
    _mm256_storeu_pd(lane, _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
    double sum = (lane[0] + lane[1]) + (lane[2] + lane[3]);
    for (; i < n; i++) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    const __m256 s = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) out[i] = (x[i] * scale) * w[i];
}
