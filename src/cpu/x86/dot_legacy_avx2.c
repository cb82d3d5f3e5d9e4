/* AVX2 dots of the 32-element block types with their activation type:
 * Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 x Q8_0 and Q4_1, Q5_1 x Q8_1.
 *
 * Per block the integer dot is exact (maddubs + madd into 8 int32 lanes), then
 * converted and accumulated in float with the block's d_w * d_x. Each kernel is
 * one always-inline routine over NR weight rows that share the activation loads;
 * dot (NR = 1) and dot_rows (NR = 2..4) run the same operations per row in the
 * same order, so they agree bit for bit. */
#include "cpu/x86/simd_avx2.h"
#include "cpu/x86/x86_kernels.h"
#include "quant/blocks.h"

#include <math.h>

/* Signed bytes of one weight block, per type. */
VT_INLINE __m256i q4_0_bytes(const block_q4_0 *b) {
    return _mm256_sub_epi8(nibbles_to_bytes(b->qs), _mm256_set1_epi8(8));
}
VT_INLINE __m256i q5_0_bytes(const block_q5_0 *b) {
    /* (nibble | hbit << 4) - 16 == nibble - (hbit ? 0 : 16) == nibble | (hbit ? 0 : 0xf0) */
    const __m256i hi = _mm256_andnot_si256(bits_to_bytes(b->qh), _mm256_set1_epi8((char)0xf0));
    return _mm256_or_si256(nibbles_to_bytes(b->qs), hi);
}
VT_INLINE __m256i q8_0_bytes(const block_q8_0 *b) {
    return _mm256_loadu_si256((const __m256i *)b->qs);
}
VT_INLINE __m256i iq4_nl_bytes(const block_iq4_nl *b) {
    const __m128i grid = _mm_loadu_si128((const __m128i *)iq4nl_values);
    return _mm256_shuffle_epi8(_mm256_set_m128i(grid, grid), nibbles_to_bytes(b->qs));
}
VT_INLINE __m256i mxfp4_bytes(const block_mxfp4 *b) {
    const __m128i grid = _mm_loadu_si128((const __m128i *)mxfp4_values);
    return _mm256_shuffle_epi8(_mm256_set_m128i(grid, grid), nibbles_to_bytes(b->qs));
}
/* Unsigned bytes of the offset types. */
VT_INLINE __m256i q4_1_bytes(const block_q4_1 *b) { return nibbles_to_bytes(b->qs); }
VT_INLINE __m256i q5_1_bytes(const block_q5_1 *b) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes(b->qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(nibbles_to_bytes(b->qs), hi);
}

/* The scale of a weight block, by its scale field. */
#define SCALE_F16(wb) f16c_to_f32((wb)->d)
#define SCALE_E8M0(wb) mxfp4_e8m0_half((wb)->e)

/* Symmetric types x Q8_0: s[r] = sum_b d_w d_x * dot_i8(w_b, x_b). */
#define SYM_KERNEL(name, block_t, bytes_fn, scale)                                         \
    VT_INLINE void name##_rows(int64_t n, const uint8_t *w, size_t ws, const block_q8_0 *x, \
                               float *s, const int nr) {                                   \
        const int64_t nb = n / QK8_0;                                                      \
        __m256 acc[CPU_DOT_ROWS_MAX];                                                      \
        for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();                         \
        for (int64_t b = 0; b < nb; b++) {                                                 \
            const __m256i xq = _mm256_loadu_si256((const __m256i *)x[b].qs);               \
            const float dx = f16c_to_f32(x[b].d);                                          \
            for (int r = 0; r < nr; r++) {                                                 \
                const block_t *wb = (const block_t *)(w + (size_t)r * ws) + b;             \
                const __m256 d = _mm256_set1_ps(scale(wb) * dx);                           \
                const __m256 p = _mm256_cvtepi32_ps(dot_s8s8_i32(bytes_fn(wb), xq));       \
                acc[r] = _mm256_fmadd_ps(d, p, acc[r]);                                    \
            }                                                                              \
        }                                                                                  \
        for (int r = 0; r < nr; r++) s[r] = hsum_f32x8(acc[r]);                            \
    }

/* Offset types x Q8_1: s[r] = sum_b d_w d_x * dot_u8(w_b, x_b) + m_w * s_x. */
#define OFS_KERNEL(name, block_t, bytes_fn)                                                \
    VT_INLINE void name##_rows(int64_t n, const uint8_t *w, size_t ws, const block_q8_1 *x, \
                               float *s, const int nr) {                                   \
        const int64_t nb = n / QK8_1;                                                      \
        __m256 acc[CPU_DOT_ROWS_MAX];                                                      \
        float summ[CPU_DOT_ROWS_MAX];                                                      \
        for (int r = 0; r < nr; r++) {                                                     \
            acc[r] = _mm256_setzero_ps();                                                  \
            summ[r] = 0.0f;                                                                \
        }                                                                                  \
        for (int64_t b = 0; b < nb; b++) {                                                 \
            const __m256i xq = _mm256_loadu_si256((const __m256i *)x[b].qs);               \
            const float dx = f16c_to_f32(x[b].d), sx = f16c_to_f32(x[b].s);                \
            for (int r = 0; r < nr; r++) {                                                 \
                const block_t *wb = (const block_t *)(w + (size_t)r * ws) + b;             \
                const __m256 d = _mm256_set1_ps(f16c_to_f32(wb->d) * dx);                  \
                const __m256 p = _mm256_cvtepi32_ps(dot_u8s8_i32(bytes_fn(wb), xq));       \
                acc[r] = _mm256_fmadd_ps(d, p, acc[r]);                                    \
                summ[r] = fmaf(f16c_to_f32(wb->m), sx, summ[r]);                           \
            }                                                                              \
        }                                                                                  \
        for (int r = 0; r < nr; r++) s[r] = hsum_f32x8(acc[r]) + summ[r];                  \
    }

SYM_KERNEL(q4_0, block_q4_0, q4_0_bytes, SCALE_F16)
SYM_KERNEL(q5_0, block_q5_0, q5_0_bytes, SCALE_F16)
SYM_KERNEL(q8_0, block_q8_0, q8_0_bytes, SCALE_F16)
SYM_KERNEL(iq4_nl, block_iq4_nl, iq4_nl_bytes, SCALE_F16)
SYM_KERNEL(mxfp4, block_mxfp4, mxfp4_bytes, SCALE_E8M0)
OFS_KERNEL(q4_1, block_q4_1, q4_1_bytes)
OFS_KERNEL(q5_1, block_q5_1, q5_1_bytes)

/* The exported pair for each type (cpu/kernels.h). */
CPU_DEFINE_DOT(q4_0, avx2)
CPU_DEFINE_DOT(q5_0, avx2)
CPU_DEFINE_DOT(q8_0, avx2)
CPU_DEFINE_DOT(iq4_nl, avx2)
CPU_DEFINE_DOT(mxfp4, avx2)
CPU_DEFINE_DOT(q4_1, avx2)
CPU_DEFINE_DOT(q5_1, avx2)
