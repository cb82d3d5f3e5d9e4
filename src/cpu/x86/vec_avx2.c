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
