/* AVX2/FMA/F16C attention kernels (see cpu/attention.h).
 *
 * Scores (float K, dim-major): one ymm holds dimension d of 8 consecutive keys,
 * so a tile of up to 4 query rows x 16 keys keeps 8 accumulators, each lane the
 * FMA chain over d of one (query, key) pair; per d it costs 2 key loads (widened
 * on the fly from F16/BF16), 4 broadcasts and 8 FMAs, with no horizontal sums.
 * Keys that would take a vector past the block's end use the same chain in
 * scalar FMAs, so every score has the same bits whatever its neighbours.
 *
 * Accumulation (V row-major, any dtype): two query heads at a time, a 32-float
 * slice of both output rows in registers across the rows of the piece, each V
 * load (widened on the fly) feeding two FMAs.
 *
 * Q8_0 rows are dequantized one row at a time into a stack buffer. */
#include "cpu/attention.h"

#include "base/fp16.h"
#include "cpu/x86/simd_avx2.h"
#include "cpu/x86/x86_kernels.h"
#include "quant/blocks.h"

#include <math.h>

const attn_kv_ops *attn_ops_get_avx2(vt_dtype type);

#define UNROLL _Pragma("GCC unroll 16")

/* ---- loads of 8 stored values as floats --------------------------------------------- */

VT_INLINE __m256 load8_f32(const float *p) { return _mm256_loadu_ps(p); }
VT_INLINE __m256 load8_f16(const vt_f16 *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
VT_INLINE __m256 load8_bf16(const vt_bf16 *p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
VT_INLINE float load1_f32(const float *p) { return *p; }
VT_INLINE float load1_f16(const vt_f16 *p) { return f16c_to_f32(*p); }
VT_INLINE float load1_bf16(const vt_bf16 *p) { return bf16_to_f32(*p); }

/* ---- f32 rows to the stored dtype ----------------------------------------------------- */

static void row_to_f16(const float *src, vt_f16 *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = f32_to_f16(src[i]);
}
static void row_to_f32(const float *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static void row_to_bf16(const float *src, vt_bf16 *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = f32_to_bf16(src[i]);
}

/* ---- float K and V kernels, one set per dtype ------------------------------------------ */

/* Scores of nr <= 4 query rows against ng (1 or 2) groups of 8 keys at k (the
 * head's block plus the first key), written for the first `valid` keys. */
#define FLOAT_KERNELS(t, elem_t)                                                               \
    VT_INLINE void score_tile_##t(const elem_t *k, int64_t bs, int64_t hd, const float *q,      \
                                  const int nr, const int ng, float scale, float *s,            \
                                  int64_t s_stride, int64_t valid) {                            \
        __m256 a[4][2];                                                                         \
        UNROLL                                                                                  \
        for (int r = 0; r < nr; r++)                                                            \
            UNROLL                                                                              \
            for (int g = 0; g < ng; g++) a[r][g] = _mm256_setzero_ps();                         \
        for (int64_t d = 0; d < hd; d++) {                                                      \
            __m256 kv[2];                                                                       \
            UNROLL                                                                              \
            for (int g = 0; g < ng; g++) kv[g] = load8_##t(k + d * bs + 8 * g);                 \
            UNROLL                                                                              \
            for (int r = 0; r < nr; r++) {                                                      \
                const __m256 qb = _mm256_broadcast_ss(q + r * hd + d);                          \
                UNROLL                                                                          \
                for (int g = 0; g < ng; g++) a[r][g] = _mm256_fmadd_ps(qb, kv[g], a[r][g]);     \
            }                                                                                   \
        }                                                                                       \
        const __m256 sc = _mm256_set1_ps(scale);                                                \
        UNROLL                                                                                  \
        for (int r = 0; r < nr; r++)                                                            \
            UNROLL                                                                              \
            for (int g = 0; g < ng; g++) {                                                      \
                const __m256 v = _mm256_mul_ps(a[r][g], sc);                                    \
                float *dst = s + r * s_stride + 8 * g, tmp[8];                                  \
                if (valid >= 8 * g + 8) {                                                       \
                    _mm256_storeu_ps(dst, v);                                                   \
                    continue;                                                                   \
                }                                                                               \
                _mm256_storeu_ps(tmp, v);                                                       \
                for (int64_t l = 0; l < valid - 8 * g; l++) dst[l] = tmp[l];                    \
            }                                                                                   \
    }                                                                                           \
    /* All n_q query rows against ng groups of keys, 4 rows per tile. */                       \
    VT_INLINE void score_rows_##t(const elem_t *k, int64_t bs, int64_t hd, const float *q,      \
                                  int64_t n_q, const int ng, float scale, float *s,             \
                                  int64_t s_stride, int64_t valid) {                            \
        int64_t r = 0;                                                                          \
        for (; r + 4 <= n_q; r += 4)                                                            \
            score_tile_##t(k, bs, hd, q + r * hd, 4, ng, scale, s + r * s_stride, s_stride, valid); \
        for (; r < n_q; r++)                                                                    \
            score_tile_##t(k, bs, hd, q + r * hd, 1, ng, scale, s + r * s_stride, s_stride, valid); \
    }                                                                                           \
    void store_k_##t##_avx2(void *kblk, int64_t bs, int64_t slot, const float *src,             \
                            int64_t hd) {                                                       \
        elem_t row[ATTN_HEAD_DIM_MAX], *k = kblk;                                               \
        row_to_##t(src, row, hd);                                                               \
        for (int64_t d = 0; d < hd; d++) k[d * bs + slot] = row[d];                             \
    }                                                                                           \
    static void scores_##t##_avx2(const void *kblk, int64_t bs, int64_t s0, int64_t n,          \
                                  const float *q, int64_t n_q, int64_t hd, float scale,         \
                                  float *s, int64_t s_stride) {                                 \
        const elem_t *kb = (const elem_t *)kblk + s0;                                           \
        const int64_t room = bs - s0; /* keys a vector may load without leaving the block */   \
        int64_t j = 0;                                                                          \
        while (j < n && j + 8 <= room) {                                                        \
            const int ng = j + 16 <= room && n - j > 8 ? 2 : 1;                                 \
            const int64_t valid = n - j < 8 * ng ? n - j : 8 * ng;                              \
            if (ng == 2)                                                                        \
                score_rows_##t(kb + j, bs, hd, q, n_q, 2, scale, s + j, s_stride, valid);       \
            else                                                                                \
                score_rows_##t(kb + j, bs, hd, q, n_q, 1, scale, s + j, s_stride, valid);       \
            j += 8 * ng;                                                                        \
        }                                                                                       \
        for (; j < n; j++) /* the same chain as a vector lane */                                \
            for (int64_t r = 0; r < n_q; r++) {                                                 \
                float a = 0;                                                                    \
                for (int64_t d = 0; d < hd; d++) a = fmaf(q[r * hd + d], load1_##t(kb + d * bs + j), a); \
                s[r * s_stride + j] = a * scale;                                                \
            }                                                                                   \
    }                                                                                           \
    void store_v_##t##_avx2(void *vrow, const float *src, int64_t hd) {                         \
        row_to_##t(src, vrow, hd);                                                              \
    }                                                                                           \
    static void accum_##t##_avx2(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, \
                                 int64_t n, int64_t hd, const float *w, int64_t w_stride) {     \
        const elem_t *v = vrows;                                                                \
        int64_t r = 0;                                                                          \
        for (; r + 2 <= n_q; r += 2) {                                                          \
            float *aa = acc + r * acc_stride, *ab = aa + acc_stride;                            \
            const float *wa = w + r * w_stride, *wb = wa + w_stride;                            \
            int64_t i = 0;                                                                      \
            for (; i + 32 <= hd; i += 32) {                                                     \
                __m256 a[4], b[4];                                                              \
                UNROLL                                                                          \
                for (int c = 0; c < 4; c++) {                                                   \
                    a[c] = _mm256_loadu_ps(aa + i + 8 * c);                                     \
                    b[c] = _mm256_loadu_ps(ab + i + 8 * c);                                     \
                }                                                                               \
                for (int64_t j = 0; j < n; j++) {                                               \
                    const elem_t *vj = v + j * hd + i;                                          \
                    const __m256 x = _mm256_broadcast_ss(wa + j), y = _mm256_broadcast_ss(wb + j); \
                    UNROLL                                                                      \
                    for (int c = 0; c < 4; c++) {                                               \
                        const __m256 vv = load8_##t(vj + 8 * c);                                \
                        a[c] = _mm256_fmadd_ps(x, vv, a[c]);                                    \
                        b[c] = _mm256_fmadd_ps(y, vv, b[c]);                                    \
                    }                                                                           \
                }                                                                               \
                UNROLL                                                                          \
                for (int c = 0; c < 4; c++) {                                                   \
                    _mm256_storeu_ps(aa + i + 8 * c, a[c]);                                     \
                    _mm256_storeu_ps(ab + i + 8 * c, b[c]);                                     \
                }                                                                               \
            }                                                                                   \
            for (; i + 8 <= hd; i += 8) {                                                       \
                __m256 a0 = _mm256_loadu_ps(aa + i), b0 = _mm256_loadu_ps(ab + i);              \
                for (int64_t j = 0; j < n; j++) {                                               \
                    const __m256 vv = load8_##t(v + j * hd + i);                                \
                    a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wa + j), vv, a0);                  \
                    b0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wb + j), vv, b0);                  \
                }                                                                               \
                _mm256_storeu_ps(aa + i, a0);                                                   \
                _mm256_storeu_ps(ab + i, b0);                                                   \
            }                                                                                   \
            for (; i < hd; i++)                                                                 \
                for (int64_t j = 0; j < n; j++) {                                               \
                    const float vv = load1_##t(v + j * hd + i);                                 \
                    aa[i] = fmaf(wa[j], vv, aa[i]);                                             \
                    ab[i] = fmaf(wb[j], vv, ab[i]);                                             \
                }                                                                               \
        }                                                                                       \
        for (; r < n_q; r++) {                                                                  \
            float *aa = acc + r * acc_stride;                                                   \
            const float *wa = w + r * w_stride;                                                 \
            int64_t i = 0;                                                                      \
            for (; i + 8 <= hd; i += 8) {                                                       \
                __m256 a0 = _mm256_loadu_ps(aa + i);                                            \
                for (int64_t j = 0; j < n; j++)                                                 \
                    a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wa + j), load8_##t(v + j * hd + i), a0); \
                _mm256_storeu_ps(aa + i, a0);                                                   \
            }                                                                                   \
            for (; i < hd; i++)                                                                 \
                for (int64_t j = 0; j < n; j++) aa[i] = fmaf(wa[j], load1_##t(v + j * hd + i), aa[i]); \
        }                                                                                       \
    }

FLOAT_KERNELS(f32, float)
FLOAT_KERNELS(f16, vt_f16)
FLOAT_KERNELS(bf16, vt_bf16)
#undef FLOAT_KERNELS

/* ---- Q8_0 (K row-major like V) ---------------------------------------------------------- */

static void q8_0_row_f32(const block_q8_0 *b, int64_t hd, float *out) {
    for (int64_t i = 0; i < hd / QK8_0; i++) {
        const __m256 d = _mm256_set1_ps(f16c_to_f32(b[i].d));
        for (int j = 0; j < QK8_0; j += 8) {
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + j)));
            _mm256_storeu_ps(out + i * QK8_0 + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
        }
    }
}

static void store_k_q8_0_avx2(void *kblk, int64_t bs, int64_t slot, const float *src, int64_t hd) {
    (void)bs;
    quant_traits_get(VT_DTYPE_Q8_0)->quant_ref(src, (block_q8_0 *)kblk + slot * (hd / QK8_0), hd);
}
static void scores_q8_0_avx2(const void *kblk, int64_t bs, int64_t s0, int64_t n, const float *q,
                             int64_t n_q, int64_t hd, float scale, float *s, int64_t s_stride) {
    (void)bs;
    float row[ATTN_HEAD_DIM_MAX];
    for (int64_t j = 0; j < n; j++) {
        q8_0_row_f32((const block_q8_0 *)kblk + (s0 + j) * (hd / QK8_0), hd, row);
        for (int64_t r = 0; r < n_q; r++) {
            __m256 a = _mm256_setzero_ps();
            for (int64_t i = 0; i < hd; i += 8)
                a = _mm256_fmadd_ps(_mm256_loadu_ps(q + r * hd + i), _mm256_loadu_ps(row + i), a);
            s[r * s_stride + j] = hsum_f32x8(a) * scale;
        }
    }
}
static void store_v_q8_0_avx2(void *vrow, const float *src, int64_t hd) {
    quant_traits_get(VT_DTYPE_Q8_0)->quant_ref(src, vrow, hd);
}
static void accum_q8_0_avx2(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, int64_t n,
                            int64_t hd, const float *w, int64_t w_stride) {
    float row[ATTN_HEAD_DIM_MAX];
    for (int64_t j = 0; j < n; j++) {
        q8_0_row_f32((const block_q8_0 *)vrows + j * (hd / QK8_0), hd, row);
        for (int64_t r = 0; r < n_q; r++) {
            float *a = acc + r * acc_stride;
            const __m256 x = _mm256_set1_ps(w[r * w_stride + j]);
            for (int64_t i = 0; i < hd; i += 8)
                _mm256_storeu_ps(a + i, _mm256_fmadd_ps(x, _mm256_loadu_ps(row + i), _mm256_loadu_ps(a + i)));
        }
    }
}

/* ---- exp ------------------------------------------------------------------------------ */

static float exp_sum_avx2(float *s, int64_t n, float *m_out) {
    /* The max in four independent vector chains (any order gives the same max). */
    __m256 mx[4];
    for (int c = 0; c < 4; c++) mx[c] = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 32 <= n; j += 32)
        for (int c = 0; c < 4; c++) mx[c] = _mm256_max_ps(mx[c], _mm256_loadu_ps(s + j + 8 * c));
    for (; j + 8 <= n; j += 8) mx[0] = _mm256_max_ps(mx[0], _mm256_loadu_ps(s + j));
    float m = hmax_f32x8(_mm256_max_ps(_mm256_max_ps(mx[0], mx[1]), _mm256_max_ps(mx[2], mx[3])));
    for (; j < n; j++) m = s[j] > m ? s[j] : m;
    *m_out = m;

    const __m256 mv = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 e = exp_neg_f32x8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
        _mm256_storeu_ps(s + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    float l = hsum_f32x8(acc);
    for (; j < n; j++) l += (s[j] = expf(s[j] - m));
    return l;
}

#define AVX2_OPS(t) {store_k_##t##_avx2, scores_##t##_avx2, store_v_##t##_avx2, accum_##t##_avx2, exp_sum_avx2}
static const attn_kv_ops ops_f32_avx2 = AVX2_OPS(f32);
static const attn_kv_ops ops_f16_avx2 = AVX2_OPS(f16);
static const attn_kv_ops ops_bf16_avx2 = AVX2_OPS(bf16);
static const attn_kv_ops ops_q8_0_avx2 = AVX2_OPS(q8_0);
#undef AVX2_OPS

const attn_kv_ops *attn_ops_get_avx2(vt_dtype type) {
    switch (type) {
    case VT_DTYPE_F32: return &ops_f32_avx2;
    case VT_DTYPE_F16: return &ops_f16_avx2;
    case VT_DTYPE_BF16: return &ops_bf16_avx2;
    case VT_DTYPE_Q8_0: return &ops_q8_0_avx2;
    default: return NULL;
    }
}
