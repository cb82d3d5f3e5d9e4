/* AVX2 GEMMs over the packed layouts of cpu/pack.h (Q4_0, Q8_0).
 *
 * A 64-byte chunk vector holds 4 quant bytes of each of the 16 rows of a group;
 * here it is two ymm halves of 8 rows, processed one half at a time (AVX2 has
 * 16 registers). maddubs against the broadcast 4 activation bytes gives two
 * int16 pair sums per row lane; madd with ones finishes the row's 32-bit lane.
 * Q4_0 nibbles are unsigned (0..15) and the -8 offset is taken out exactly with
 * the block's activation sum, so all 8 chunk products of a block fit int16
 * (8 * 2 * 15 * 128 < 2^15) and one madd per block suffices. Q8_0 uses the
 * sign trick (|w| times x with w's sign). The integer sums are exact and the
 * float steps those of the _ref twins, so results are bit-identical with them
 * (and with the AVX-512 kernels). */
#include "cpu/x86/simd_avx2.h"
#include "cpu/x86/x86_kernels.h"
#include "quant/blocks.h"

#define CHUNK_VEC 64
/* Register tiles: every small loop fully unrolled, so arrays of vectors stay in
 * registers (GCC at -O2 would otherwise keep them on the stack). */
#define UNROLL _Pragma("GCC unroll 16")
/* Software prefetch distance in the quant stream (bytes), as in gemm_avx512.c. */
#define PF_AHEAD 2048

VT_INLINE void prefetch(const void *p) { _mm_prefetch((const char *)p, _MM_HINT_T0); }

VT_INLINE __m256i bcast32_256(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}


/* Rows 8 * half .. 8 * half + 7 of one group, nt tokens. */
VT_INLINE void q4_0_half(int64_t nb, const uint8_t *g, int half, const block_q8_0 *const *xr,
                         const int32_t *xs, float *y, int64_t ldy, const int nt) {
    const uint8_t *d = g + 16 * half, *qs = g + nb * 2 * PACK_ROWS + 32 * half;
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256 acc[PACK_TOK_MAX];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + b * 2 * PACK_ROWS)));
        const uint8_t *v = qs + b * 4 * CHUNK_VEC;
        UNROLL
        for (int k = 0; k < 4; k++) prefetch(v + PF_AHEAD + k * CHUNK_VEC);
        if ((b & 1) == 0) prefetch(d + b * 2 * PACK_ROWS + PF_AHEAD / 8);
        __m256i p[PACK_TOK_MAX];
        UNROLL
        for (int t = 0; t < nt; t++) p[t] = _mm256_setzero_si256();
        UNROLL
        for (int k = 0; k < 4; k++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(v + k * CHUNK_VEC));
            const __m256i lo = _mm256_and_si256(raw, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            UNROLL
            for (int t = 0; t < nt; t++) {
                const int8_t *xq = xr[t][b].qs + 4 * k;
                p[t] = _mm256_add_epi16(p[t], _mm256_maddubs_epi16(lo, bcast32_256(xq)));
                p[t] = _mm256_add_epi16(p[t], _mm256_maddubs_epi16(hi, bcast32_256(xq + 16)));
            }
        }
        UNROLL
        for (int t = 0; t < nt; t++) {
            const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(p[t], ones), _mm256_set1_epi32(-8 * xs[t * nb + b]));
            const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(f16c_to_f32(xr[t][b].d)));
            acc[t] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ldy + 8 * half, acc[t]);
}

VT_INLINE void q8_0_half(int64_t nb, const uint8_t *g, int half, const block_q8_0 *const *xr,
                         const int32_t *xs, float *y, int64_t ldy, const int nt) {
    (void)xs;
    const uint8_t *d = g + 16 * half, *qs = g + nb * 2 * PACK_ROWS + 32 * half;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[PACK_TOK_MAX];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + b * 2 * PACK_ROWS)));
        const uint8_t *v = qs + b * 8 * CHUNK_VEC;
        UNROLL
        for (int k = 0; k < 8; k++) prefetch(v + PF_AHEAD + k * CHUNK_VEC);
        if ((b & 3) == 0) prefetch(d + b * 2 * PACK_ROWS + PF_AHEAD / 16);
        __m256i s[PACK_TOK_MAX];
        UNROLL
        for (int t = 0; t < nt; t++) s[t] = _mm256_setzero_si256();
        UNROLL
        for (int k = 0; k < 8; k++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(v + k * CHUNK_VEC));
            const __m256i aw = _mm256_sign_epi8(raw, raw);
            UNROLL
            for (int t = 0; t < nt; t++) {
                const __m256i xv = _mm256_sign_epi8(bcast32_256(xr[t][b].qs + 4 * k), raw);
                s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xv), ones));
            }
        }
        UNROLL
        for (int t = 0; t < nt; t++) {
            const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(f16c_to_f32(xr[t][b].d)));
            acc[t] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s[t]), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ldy + 8 * half, acc[t]);
}

#define LEGACY_GEMM(name)                                                                   \
    void gemm_##name##_avx2(int64_t n_in, const void *w, int64_t n_groups, const void *x,    \
                            size_t x_stride, const int32_t *xs, int n_tok, float *y,        \
                            int64_t ldy) {                                                  \
        const int64_t nb = n_in / 32;                                                       \
        const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_##name);           \
        const block_q8_0 *xr[PACK_TOK_MAX];                                                 \
        for (int t = 0; t < n_tok; t++)                                                     \
            xr[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride);        \
        for (int64_t gi = 0; gi < n_groups; gi++) {                                         \
            const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;               \
            float *yg = y + gi * PACK_ROWS;                                                 \
            for (int half = 0; half < 2; half++) {                                          \
                switch (n_tok) {                                                            \
                case 4: name##_half(nb, g, half, xr, xs, yg, ldy, 4); break;                \
                case 3: name##_half(nb, g, half, xr, xs, yg, ldy, 3); break;                \
                case 2: name##_half(nb, g, half, xr, xs, yg, ldy, 2); break;                \
                default: name##_half(nb, g, half, xr, xs, yg, ldy, 1); break;               \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }

LEGACY_GEMM(q4_0)
LEGACY_GEMM(q8_0)
