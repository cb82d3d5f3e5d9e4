/* AVX2 dots of the float types: F32 x F32, F16 x F16 (F16C), BF16 x BF16.
 *
 * Products are accumulated in float, 32 elements per step into four 8-wide FMA
 * accumulators, then summed; the tail (n % 32) is done one element at a time.
 * The _ref twins accumulate in double, so results differ by float rounding
 * (bounded in tests/test_kernels.c). One routine over NR rows, as elsewhere, so
 * dot and dot_rows agree bit for bit. */
#include "cpu/x86/simd_avx2.h"
#include "cpu/x86/x86_kernels.h"
#include "base/fp16.h"

#include <math.h>

VT_INLINE __m256 load8_f32(const void *p, int64_t i) { return _mm256_loadu_ps((const float *)p + i); }
VT_INLINE __m256 load8_f16(const void *p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}
VT_INLINE __m256 load8_bf16(const void *p, int64_t i) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}
VT_INLINE float load1_f32(const void *p, int64_t i) { return ((const float *)p)[i]; }
VT_INLINE float load1_f16(const void *p, int64_t i) { return f16c_to_f32(((const uint16_t *)p)[i]); }
VT_INLINE float load1_bf16(const void *p, int64_t i) { return bf16_to_f32(((const uint16_t *)p)[i]); }

/* elem_bytes: size of one element, to step weight rows by byte stride */
#define FLOAT_KERNEL(name, elem_t)                                                         \
    VT_INLINE void name##_rows(int64_t n, const uint8_t *w, size_t ws, const void *x,      \
                               float *s, const int nr) {                                   \
        __m256 acc[CPU_DOT_ROWS_MAX][4];                                                   \
        for (int r = 0; r < nr; r++)                                                       \
            for (int k = 0; k < 4; k++) acc[r][k] = _mm256_setzero_ps();                   \
        int64_t i = 0;                                                                     \
        for (; i + 32 <= n; i += 32) {                                                     \
            const __m256 x0 = load8_##name(x, i), x1 = load8_##name(x, i + 8);             \
            const __m256 x2 = load8_##name(x, i + 16), x3 = load8_##name(x, i + 24);       \
            for (int r = 0; r < nr; r++) {                                                 \
                const void *wr = w + (size_t)r * ws;                                       \
                acc[r][0] = _mm256_fmadd_ps(load8_##name(wr, i), x0, acc[r][0]);           \
                acc[r][1] = _mm256_fmadd_ps(load8_##name(wr, i + 8), x1, acc[r][1]);       \
                acc[r][2] = _mm256_fmadd_ps(load8_##name(wr, i + 16), x2, acc[r][2]);      \
                acc[r][3] = _mm256_fmadd_ps(load8_##name(wr, i + 24), x3, acc[r][3]);      \
            }                                                                              \
        }                                                                                  \
        for (int r = 0; r < nr; r++) {                                                     \
            const void *wr = w + (size_t)r * ws;                                           \
            const __m256 a = _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]),            \
                                           _mm256_add_ps(acc[r][2], acc[r][3]));           \
            float tail = 0.0f;                                                             \
            for (int64_t j = i; j < n; j++)                                                \
                tail = fmaf(load1_##name(wr, j), load1_##name(x, j), tail);                \
            s[r] = hsum_f32x8(a) + tail;                                                   \
        }                                                                                  \
    }                                                                                      \
    CPU_DEFINE_DOT(name, avx2)

FLOAT_KERNEL(f32, float)
FLOAT_KERNEL(f16, uint16_t)
FLOAT_KERNEL(bf16, uint16_t)
