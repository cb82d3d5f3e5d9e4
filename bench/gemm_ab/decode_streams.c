/* Experiment source for bench/gemm_ab/gemm_ab.sh (not built by CMake): the
 * one-token decode GEMMs of Q8_0 and MXFP4 on AVX-512, read in other memory
 * orders, to measure what limits a decode step that reads one packed stream per
 * thread. It includes this tree's x86/gemm_avx512.c and reuses its helpers, so
 * it follows that file's names (a rewrite of that file must update it). One
 * of, at compile time (gemm_ab.sh NAME=bench/gemm_ab/decode_streams.c:-DVAR_X):
 *   VAR_NOPF  the tree's _nopf kernels (no software prefetch), as decode runs
 *   VAR_FAR   two groups at once, g and g + n/2 of the call's groups: two long
 *             streams per thread, as the --bandwidth loop reads four
 *   VAR_TWO   two adjacent groups at once (g, g + 1)
 *   VAR_DUP   the 4-token pair tiles with the one activation row repeated
 *             (x_stride 0, ldy 0): two streams, four times the integer work
 *   VAR_READ  a plain read of the same bytes (GEMM_AB_NO_CHECK=1: no outputs)
 * All but VAR_READ give the bits of the tree's kernels (per row the same
 * integer sums and float steps; gemm_ab checks). Example, rows of 2880
 * (gpt-oss), 15 rounds:
 *   bench/gemm_ab/gemm_ab.sh q8_0 2880 15 pf=src/cpu/x86/gemm_avx512.c \
 *       nopf=bench/gemm_ab/decode_streams.c:-DVAR_NOPF far=bench/gemm_ab/decode_streams.c:-DVAR_FAR \
 *       two=bench/gemm_ab/decode_streams.c:-DVAR_TWO */
#define gemm_q8_0_avx512 gemm_q8_0_avx512_orig
#define gemm_mxfp4_avx512 gemm_mxfp4_avx512_orig
#include "cpu/x86/gemm_avx512.c"
#undef gemm_q8_0_avx512
#undef gemm_mxfp4_avx512

VT_INLINE void q8_0_one2(int64_t nb, const uint8_t *g, size_t gb, const block_q8_0 *xr, const pack_xblock *xs,
                         float *y0, float *y1) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    __m256 acc[2][2];
    UNROLL
    for (int G = 0; G < 2; G++) acc[G][0] = acc[G][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const size_t qo = pack_pair_qs(nb, b, PACK_QB_Q8_0);
        __m256i s[2][2][2];
        UNROLL
        for (int G = 0; G < 2; G++)
            UNROLL
            for (int h = 0; h < 2; h++) {
                s[G][h][0] = _mm256_set1_epi32(xs[b].bias);
                s[G][h][1] = _mm256_setzero_si256();
            }
        UNROLL
        for (int k = 0; k < 8; k++) {
            const __m256i xv = _mm512_castsi512_si256(bcast32(xr[b].qs + 4 * k));
            UNROLL
            for (int G = 0; G < 2; G++)
                UNROLL
                for (int h = 0; h < 2; h++) {
                    const __m256i w = _mm256_xor_si256(
                        _mm256_loadu_si256((const __m256i *)(g + G * gb + qo + k * CHUNK_VEC + 32 * h)), flip);
                    s[G][h][k & 1] = _mm256_dpbusd_epi32(s[G][h][k & 1], w, xv);
                }
        }
        UNROLL
        for (int G = 0; G < 2; G++)
            UNROLL
            for (int h = 0; h < 2; h++) {
                const __m256 dw = _mm256_cvtph_ps(
                    _mm_loadu_si128((const __m128i *)(g + G * gb + pack_pair_d(b, PACK_QB_Q8_0) + 16 * h)));
                const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(xs[b].d));
                acc[G][h] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(_mm256_add_epi32(s[G][h][0], s[G][h][1])), acc[G][h]);
            }
    }
    _mm256_storeu_ps(y0, acc[0][0]);
    _mm256_storeu_ps(y0 + 8, acc[0][1]);
    _mm256_storeu_ps(y1, acc[1][0]);
    _mm256_storeu_ps(y1 + 8, acc[1][1]);
}

VT_INLINE void mxfp4_one2(int64_t nb, const uint8_t *g, size_t gb, const block_q8_0 *xr, const pack_xblock *xs,
                          float *y0, float *y1) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const size_t qo = pack_mxfp4_qs(nb, b);
        __m512i s0[2], s1[2];
        UNROLL
        for (int G = 0; G < 2; G++) s0[G] = _mm512_set1_epi32(xs[b].bias), s1[G] = _mm512_setzero_si512();
        UNROLL
        for (int k = 0; k < 4; k++) {
            const __m512i xa = bcast32(xr[b].qs + 4 * k), xb = bcast32(xr[b].qs + 16 + 4 * k);
            UNROLL
            for (int G = 0; G < 2; G++) {
                const __m512i raw = _mm512_loadu_si512(g + G * gb + qo + k * CHUNK_VEC);
                s0[G] = _mm512_dpbusd_epi32(s0[G], _mm512_shuffle_epi8(lut, _mm512_and_si512(raw, m4)), xa);
                s1[G] = _mm512_dpbusd_epi32(s1[G], _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4)), xb);
            }
        }
        UNROLL
        for (int G = 0; G < 2; G++) {
            const __m512 dw = vf_e8m0_half(g + G * gb + pack_mxfp4_e(b));
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xs[b].d));
            acc[G] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(_mm512_add_epi32(s0[G], s1[G])), acc[G]);
        }
    }
    _mm512_storeu_ps(y0, acc[0]);
    _mm512_storeu_ps(y1, acc[1]);
}

#if defined(VAR_FAR)
#define PARTNER(n) ((n) / 2)
#else
#define PARTNER(n) 1
#endif

#define VARIANT(name, one2, single, nopf, cached, blk)                                                          \
    void gemm_##name##_avx512(int64_t n_in, const void *w, int64_t n_groups, const void *x, size_t x_stride,  \
                              const pack_xblock *xs, int n_tok, float *y, int64_t ldy) {                      \
        (void)single;                                                                                          \
        if (n_tok != 1) {                                                                                      \
            nopf(n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy);                                           \
            return;                                                                                            \
        }                                                                                                      \
        const int64_t nb = n_in / 32;                                                                          \
        const size_t gb = (size_t)nb * PACK_ROWS * sizeof(blk);                                                \
        VAR_BODY(one2, nopf, cached)                                                                           \
    }

#if defined(VAR_NOPF)
#define VAR_BODY(one2, nopf, cached) nopf(n_in, w, n_groups, x, x_stride, xs, 1, y, ldy); (void)gb;
#elif defined(VAR_READ) /* a plain read of the same bytes (outputs garbage: GEMM_AB_NO_CHECK=1) */
#define VAR_BODY(one2, nopf, cached)                                                                           \
    const __m512i *p = w;                                                                                      \
    const size_t nl = (size_t)n_groups * gb / 64;                                                              \
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();                                          \
    for (size_t i = 0; i + 2 <= nl; i += 2) {                                                                  \
        a0 = _mm512_or_si512(a0, _mm512_loadu_si512(p + i));                                                   \
        a1 = _mm512_or_si512(a1, _mm512_loadu_si512(p + i + 1));                                               \
    }                                                                                                          \
    _mm512_storeu_si512(y, _mm512_or_si512(a0, a1));
#elif defined(VAR_DUP)
#define VAR_BODY(one2, nopf, cached)                                                                           \
    pack_xblock x4[4 * 8192 / 4];                                                                              \
    for (int t = 0; t < 4; t++) memcpy(x4 + t * nb, xs, sizeof(pack_xblock) * (size_t)nb);                    \
    cached(n_in, w, n_groups, x, 0, x4, 4, y, 0); (void)gb;
#else
#define VAR_BODY(one2, nopf, cached)                                                                           \
    const uint8_t *wb = w;                                                                                     \
    const int64_t part = PARTNER(n_groups);                                                                    \
    int64_t gi = 0;                                                                                            \
    if (part == 1) {                                                                                           \
        for (; gi + 2 <= n_groups; gi += 2)                                                                    \
            one2(nb, wb + (size_t)gi * gb, gb, x, xs, y + gi * PACK_ROWS, y + (gi + 1) * PACK_ROWS);           \
    } else {                                                                                                   \
        for (; gi < part; gi++)                                                                                \
            one2(nb, wb + (size_t)gi * gb, (size_t)part * gb, x, xs, y + gi * PACK_ROWS,                       \
                 y + (gi + part) * PACK_ROWS);                                                                 \
        gi = 2 * part;                                                                                         \
    }                                                                                                          \
    if (gi < n_groups)                                                                                         \
        nopf(n_in, wb + (size_t)gi * gb, n_groups - gi, x, x_stride, xs, 1, y + gi * PACK_ROWS, ldy);
#endif

VARIANT(q8_0, q8_0_one2, 0, gemm_q8_0_avx512_nopf, gemm_q8_0_avx512_cached, block_q8_0)
VARIANT(mxfp4, mxfp4_one2, 0, gemm_mxfp4_avx512_nopf, gemm_mxfp4_avx512_nopf, block_mxfp4)
