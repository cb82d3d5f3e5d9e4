/* AVX-512 attention kernels for the float KV types (see cpu/attention.h); the
 * stores and Q8_0 stay on the AVX2 tier (attn_avx2.c).
 *
 * Scores (K dim-major): one zmm holds dimension d of 16 consecutive keys, so a
 * block of 16 slots is one vector and its tail a masked one. A tile of up to 8
 * query rows keeps two chains per row, over the first and the second half of
 * the head dimensions, summed at the end: 8 to 16 independent FMA chains,
 * enough to keep both FMA ports busy where one chain per row would wait on FMA
 * latency. Each lane is still the score of one (query, key) pair, so its bits
 * do not depend on the other keys or rows of the call (they differ from the
 * AVX2 tier's single chain by rounding only).
 *
 * Accumulation (V row-major): up to 4 query rows x 64 output floats in 16
 * registers across the rows of the piece, so each V load feeds every row. The
 * order of the sums is the AVX2 tier's: j ascending per output.
 *
 * Items of several tokens (more than 4 rows, cpu/attention.h) widen each F16 /
 * BF16 block to f32 once per call and run the f32 kernels on the copy; a decode
 * item (the n_rep heads of one token) widens as it loads. Same values either
 * way, so the same bits. */
#include "cpu/attention.h"

#include "base/fp16.h"
#include "cpu/x86/simd_avx512.h"
#include "cpu/x86/x86_kernels.h"

#include <math.h>

const attn_kv_ops *attn_ops_get_avx512(vt_dtype type);

#define UNROLL _Pragma("GCC unroll 16")

/* `call` with HD the head size, a constant for the common ones: the query rows
 * of a tile are then fixed offsets from one pointer, not a register each (with
 * 8 rows x 2 chains a runtime head size spills the row pointers). */
#define WITH_HD(hd, call)                                                                      \
    do {                                                                                       \
        if ((hd) == 64) {                                                                      \
            const int64_t HD = 64;                                                             \
            call;                                                                              \
        } else if ((hd) == 128) {                                                              \
            const int64_t HD = 128;                                                            \
            call;                                                                              \
        } else {                                                                               \
            const int64_t HD = (hd);                                                           \
            call;                                                                              \
        }                                                                                      \
    } while (0)

/* ---- 16 stored values as floats (masked lanes load as 0 and read no memory) ---------- */

/* Callers pass a constant full mask where they can, which folds to a plain load. */
VT_INLINE __m512 load16_f32(const float *p, __mmask16 m) {
    return m == 0xffff ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}
VT_INLINE __m512 load16_f16(const vt_f16 *p, __mmask16 m) {
    return _mm512_cvtph_ps(m == 0xffff ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(m, p));
}
VT_INLINE __m512 load16_bf16(const vt_bf16 *p, __mmask16 m) {
    const __m256i h = m == 0xffff ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#define FLOAT_KERNELS(t, elem_t)                                                               \
    /* Scores of nr <= 8 query rows against the (up to) 16 keys of mask at k. */               \
    VT_INLINE void score_tile_##t(const elem_t *k, int64_t bs, int64_t hd, const float *q,      \
                                  const int nr, __mmask16 mask, float scale, float *s,          \
                                  int64_t s_stride) {                                           \
        const int64_t h = hd / 2;                                                               \
        __m512 a[8], b[8];                                                                      \
        UNROLL                                                                                  \
        for (int r = 0; r < nr; r++) a[r] = b[r] = _mm512_setzero_ps();                         \
        for (int64_t d = 0; d < h; d++) {                                                       \
            const __m512 ka = load16_##t(k + d * bs, mask), kb = load16_##t(k + (d + h) * bs, mask); \
            UNROLL                                                                              \
            for (int r = 0; r < nr; r++) {                                                      \
                a[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r * hd + d]), ka, a[r]);               \
                b[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r * hd + d + h]), kb, b[r]);            \
            }                                                                                   \
        }                                                                                       \
        if (hd & 1) {                                                                           \
            const __m512 kb = load16_##t(k + (hd - 1) * bs, mask);                              \
            UNROLL                                                                              \
            for (int r = 0; r < nr; r++)                                                        \
                b[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r * hd + hd - 1]), kb, b[r]);           \
        }                                                                                       \
        const __m512 sc = _mm512_set1_ps(scale);                                                \
        UNROLL                                                                                  \
        for (int r = 0; r < nr; r++)                                                            \
            _mm512_mask_storeu_ps(s + r * s_stride, mask, _mm512_mul_ps(_mm512_add_ps(a[r], b[r]), sc)); \
    }                                                                                           \
    VT_INLINE void score_rows_##t(const elem_t *k, int64_t bs, int64_t hd, const float *q,      \
                                  int64_t n_q, __mmask16 mask, float scale, float *s,           \
                                  int64_t s_stride) {                                           \
        int64_t r = 0;                                                                          \
        for (; r + 8 <= n_q; r += 8)                                                            \
            score_tile_##t(k, bs, hd, q + r * hd, 8, mask, scale, s + r * s_stride, s_stride);  \
        for (; r + 4 <= n_q; r += 4)                                                            \
            score_tile_##t(k, bs, hd, q + r * hd, 4, mask, scale, s + r * s_stride, s_stride);  \
        for (; r < n_q; r++)                                                                    \
            score_tile_##t(k, bs, hd, q + r * hd, 1, mask, scale, s + r * s_stride, s_stride);  \
    }                                                                                           \
    static void scores_##t##_avx512(const void *kblk, int64_t bs, int64_t s0, int64_t n,        \
                                    const float *q, int64_t n_q, int64_t hd, float scale,       \
                                    float *s, int64_t s_stride) {                               \
        const elem_t *kb = (const elem_t *)kblk + s0;                                           \
        for (int64_t j = 0; j < n; j += 16) {                                                   \
            const __mmask16 mask = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1);     \
            if (WIDEN_##t && n_q > 4) { /* widen once for all the rows */                       \
                _Alignas(64) float kf[ATTN_HEAD_DIM_MAX * 16];                                  \
                if (mask == 0xffff)                                                             \
                    for (int64_t d = 0; d < hd; d++)                                            \
                        _mm512_store_ps(kf + d * 16, load16_##t(kb + j + d * bs, 0xffff));      \
                else                                                                            \
                    for (int64_t d = 0; d < hd; d++)                                            \
                        _mm512_store_ps(kf + d * 16, load16_##t(kb + j + d * bs, mask));        \
                WITH_HD(hd, score_rows_f32(kf, 16, HD, q, n_q, mask, scale, s + j, s_stride));  \
            } else if (mask == 0xffff) {                                                        \
                WITH_HD(hd, score_rows_##t(kb + j, bs, HD, q, n_q, 0xffff, scale, s + j, s_stride)); \
            } else {                                                                            \
                WITH_HD(hd, score_rows_##t(kb + j, bs, HD, q, n_q, mask, scale, s + j, s_stride)); \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    /* acc_r[0 .. 16 ng) += sum over j of w_r[j] * v_j[0 .. 16 ng), r < nr; the last        \
     * vector of each row masked to `mask`. */                                                  \
    VT_INLINE void accum_tile_##t(float *acc, int64_t acc_stride, const int nr, const elem_t *v, \
                                  int64_t hd, int64_t n, const float *w, int64_t w_stride,      \
                                  const int ng, __mmask16 mask) {                               \
        __m512 a[4][4];                                                                         \
        UNROLL                                                                                  \
        for (int r = 0; r < nr; r++)                                                            \
            UNROLL                                                                              \
            for (int g = 0; g < ng; g++)                                                        \
                a[r][g] = _mm512_maskz_loadu_ps(g == ng - 1 ? mask : 0xffff, acc + r * acc_stride + 16 * g); \
        for (int64_t j = 0; j < n; j++) {                                                       \
            __m512 vv[4];                                                                       \
            UNROLL                                                                              \
            for (int g = 0; g < ng; g++)                                                        \
                vv[g] = load16_##t(v + j * hd + 16 * g, g == ng - 1 ? mask : 0xffff);           \
            UNROLL                                                                              \
            for (int r = 0; r < nr; r++) {                                                      \
                const __m512 x = _mm512_set1_ps(w[r * w_stride + j]);                           \
                UNROLL                                                                          \
                for (int g = 0; g < ng; g++) a[r][g] = _mm512_fmadd_ps(x, vv[g], a[r][g]);      \
            }                                                                                   \
        }                                                                                       \
        UNROLL                                                                                  \
        for (int r = 0; r < nr; r++)                                                            \
            UNROLL                                                                              \
            for (int g = 0; g < ng; g++)                                                        \
                _mm512_mask_storeu_ps(acc + r * acc_stride + 16 * g, g == ng - 1 ? mask : 0xffff, a[r][g]); \
    }                                                                                           \
    /* The rows of one column slice, 4 at a time. */                                           \
    VT_INLINE void accum_slice_##t(float *acc, int64_t acc_stride, int64_t n_q, const elem_t *v, \
                                   int64_t hd, int64_t n, const float *w, int64_t w_stride,     \
                                   const int ng, __mmask16 mask) {                              \
        int64_t r = 0;                                                                          \
        for (; r + 4 <= n_q; r += 4)                                                            \
            accum_tile_##t(acc + r * acc_stride, acc_stride, 4, v, hd, n, w + r * w_stride,     \
                           w_stride, ng, mask);                                                 \
        for (; r < n_q; r++)                                                                    \
            accum_tile_##t(acc + r * acc_stride, acc_stride, 1, v, hd, n, w + r * w_stride,     \
                           w_stride, ng, mask);                                                 \
    }                                                                                           \
    static void accum_##t##_avx512(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, \
                                   int64_t n, int64_t hd, const float *w, int64_t w_stride) {   \
        if (WIDEN_##t && n_q > 4) { /* widen 16 rows at a time for all the query rows */         \
            float vf[ATTN_HEAD_DIM_MAX * 16];                                                   \
            for (int64_t j = 0; j < n; j += 16) {                                               \
                const int64_t nj = n - j < 16 ? n - j : 16;                                     \
                const elem_t *v = (const elem_t *)vrows + j * hd;                               \
                int64_t e = 0;                                                                  \
                for (; e + 16 <= nj * hd; e += 16)                                              \
                    _mm512_storeu_ps(vf + e, load16_##t(v + e, 0xffff));                        \
                if (e < nj * hd)                                                                \
                    _mm512_storeu_ps(vf + e, load16_##t(v + e, (__mmask16)((1u << (nj * hd - e)) - 1))); \
                accum_f32_avx512(acc, acc_stride, n_q, vf, nj, hd, w + j, w_stride);            \
            }                                                                                   \
            return;                                                                             \
        }                                                                                       \
        const elem_t *v = vrows;                                                                \
        int64_t i = 0;                                                                          \
        for (; i + 64 <= hd; i += 64)                                                           \
            accum_slice_##t(acc + i, acc_stride, n_q, v + i, hd, n, w, w_stride, 4, 0xffff);    \
        for (; i < hd; i += 16) {                                                               \
            const __mmask16 mask = hd - i >= 16 ? 0xffff : (__mmask16)((1u << (hd - i)) - 1);   \
            accum_slice_##t(acc + i, acc_stride, n_q, v + i, hd, n, w, w_stride, 1, mask);      \
        }                                                                                       \
    }

/* Which types widen a block for items of several tokens (f32 is already wide). */
#define WIDEN_f32 0
#define WIDEN_f16 1
#define WIDEN_bf16 1
FLOAT_KERNELS(f32, float)
FLOAT_KERNELS(f16, vt_f16)
FLOAT_KERNELS(bf16, vt_bf16)
#undef FLOAT_KERNELS
#undef WIDEN_f32
#undef WIDEN_f16
#undef WIDEN_bf16

/* ---- exp ------------------------------------------------------------------------------ */

static float exp_sum_avx512(float *s, int64_t n, float *m_out) {
    __m512 mx[2] = {_mm512_set1_ps(-INFINITY), _mm512_set1_ps(-INFINITY)};
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        mx[0] = _mm512_max_ps(mx[0], _mm512_loadu_ps(s + j));
        mx[1] = _mm512_max_ps(mx[1], _mm512_loadu_ps(s + j + 16));
    }
    if (j < n) { /* n - j < 32: one or two masked vectors; masked lanes stay -inf */
        const int64_t k = n - j;
        const __mmask16 m0 = k >= 16 ? 0xffff : (__mmask16)((1u << k) - 1);
        const __mmask16 m1 = k > 16 ? (__mmask16)((1u << (k - 16)) - 1) : 0;
        mx[0] = _mm512_mask_max_ps(mx[0], m0, mx[0], _mm512_maskz_loadu_ps(m0, s + j));
        mx[1] = _mm512_mask_max_ps(mx[1], m1, mx[1], _mm512_maskz_loadu_ps(m1, s + j + 16));
    }
    const float m = _mm512_reduce_max_ps(_mm512_max_ps(mx[0], mx[1]));
    *m_out = m;

    const __m512 mv = _mm512_set1_ps(m);
    __m512 acc = _mm512_setzero_ps();
    for (j = 0; j < n; j += 16) {
        const __mmask16 mk = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1);
        const __m512 e = exp_neg_f32x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), mv));
        _mm512_mask_storeu_ps(s + j, mk, e);
        acc = _mm512_mask_add_ps(acc, mk, acc, e);
    }
    return _mm512_reduce_add_ps(acc);
}

#define AVX512_OPS(t) {store_k_##t##_avx2, scores_##t##_avx512, store_v_##t##_avx2, accum_##t##_avx512, exp_sum_avx512}
static const attn_kv_ops ops_f32_avx512 = AVX512_OPS(f32);
static const attn_kv_ops ops_f16_avx512 = AVX512_OPS(f16);
static const attn_kv_ops ops_bf16_avx512 = AVX512_OPS(bf16);
#undef AVX512_OPS

/* NULL for the types this tier leaves to AVX2 (Q8_0). */
const attn_kv_ops *attn_ops_get_avx512(vt_dtype type) {
    switch (type) {
    case VT_DTYPE_F32: return &ops_f32_avx512;
    case VT_DTYPE_F16: return &ops_f16_avx512;
    case VT_DTYPE_BF16: return &ops_bf16_avx512;
    default: return NULL;
    }
}
