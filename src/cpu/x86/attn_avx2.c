/* AVX2/FMA/F16C attention kernels (see cpu/attention.h).
 *
 * The stored rows of a piece are first widened to f32 (F16 via F16C, BF16 by a
 * shift, Q8_0 by its scale); scores and accumulation then run on f32 tiles in
 * L1. Both work on two query heads at a time, so each K or V load feeds two
 * FMAs, and the accumulation keeps a 32-float slice of both output rows in
 * registers across all rows of the piece. */
#include "cpu/attention.h"

#include "base/fp16.h"
#include "cpu/x86/simd_avx2.h"
#include "quant/blocks.h"

#include <math.h>

const attn_kv_ops *attn_ops_get_avx2(vt_dtype type);

/* ---- rows and stores per dtype ---------------------------------------------------- */

static const float *rows_f32_avx2(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    (void)n_rows, (void)hd, (void)tile;
    return src;
}
static void store_f32_avx2(void *dst, const float *src, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static const float *rows_f16_avx2(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    const vt_f16 *h = src;
    const int64_t n = n_rows * hd;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(tile + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) tile[i] = f16_to_f32(h[i]);
    return tile;
}
static void store_f16_avx2(void *dst, const float *src, int64_t n) {
    vt_f16 *d = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = f32_to_f16(src[i]);
}

static const float *rows_bf16_avx2(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    const vt_bf16 *h = src;
    const int64_t n = n_rows * hd;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
        _mm256_storeu_ps(tile + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) tile[i] = bf16_to_f32(h[i]);
    return tile;
}
static void store_bf16_avx2(void *dst, const float *src, int64_t n) {
    vt_bf16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
}

static const float *rows_q8_0_avx2(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    const block_q8_0 *b = src;
    for (int64_t i = 0; i < n_rows * hd / QK8_0; i++) {
        const __m256 d = _mm256_set1_ps(f16_to_f32(b[i].d));
        for (int j = 0; j < QK8_0; j += 8) {
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + j)));
            _mm256_storeu_ps(tile + i * QK8_0 + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
        }
    }
    return tile;
}
static void store_q8_0_avx2(void *dst, const float *src, int64_t n) {
    quant_traits_get(VT_DTYPE_Q8_0)->quant_ref(src, dst, n);
}

/* ---- f32 tile kernels ------------------------------------------------------------- */

/* The four sums of a..d, in lanes 0..3. */
VT_INLINE __m128 hsum_f32x8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* Four rows of k against the query rows qa and qb (qb may equal qa). */
VT_INLINE void scores4(const float *qa, const float *qb, const float *k, int64_t hd, float scale,
                       float *sa, float *sb) {
    const float *k0 = k, *k1 = k + hd, *k2 = k + 2 * hd, *k3 = k + 3 * hd;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 8 <= hd; i += 8) {
        const __m256 x = _mm256_loadu_ps(qa + i), y = _mm256_loadu_ps(qb + i);
        const __m256 r0 = _mm256_loadu_ps(k0 + i), r1 = _mm256_loadu_ps(k1 + i),
                     r2 = _mm256_loadu_ps(k2 + i), r3 = _mm256_loadu_ps(k3 + i);
        a0 = _mm256_fmadd_ps(x, r0, a0);
        a1 = _mm256_fmadd_ps(x, r1, a1);
        a2 = _mm256_fmadd_ps(x, r2, a2);
        a3 = _mm256_fmadd_ps(x, r3, a3);
        b0 = _mm256_fmadd_ps(y, r0, b0);
        b1 = _mm256_fmadd_ps(y, r1, b1);
        b2 = _mm256_fmadd_ps(y, r2, b2);
        b3 = _mm256_fmadd_ps(y, r3, b3);
    }
    float ta[4], tb[4];
    _mm_storeu_ps(ta, hsum_f32x8x4(a0, a1, a2, a3));
    _mm_storeu_ps(tb, hsum_f32x8x4(b0, b1, b2, b3));
    for (; i < hd; i++)
        for (int j = 0; j < 4; j++) {
            ta[j] += qa[i] * k[j * hd + i];
            tb[j] += qb[i] * k[j * hd + i];
        }
    for (int j = 0; j < 4; j++) {
        sa[j] = ta[j] * scale;
        sb[j] = tb[j] * scale;
    }
}

VT_INLINE float dot1(const float *q, const float *k, int64_t hd) {
    __m256 a = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= hd; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), a);
    float s = hsum_f32x8(a);
    for (; i < hd; i++) s += q[i] * k[i];
    return s;
}

static void scores_avx2(const float *q, int64_t n_q, const float *k, int64_t n_k, int64_t hd,
                        float scale, float *s, int64_t s_stride) {
    for (int64_t r = 0; r < n_q; r += 2) {
        const int64_t rb = r + 1 < n_q ? r + 1 : r; /* odd n_q: the last head twice */
        const float *qa = q + r * hd, *qb = q + rb * hd;
        float *sa = s + r * s_stride, *sb = s + rb * s_stride;
        int64_t j = 0;
        for (; j + 4 <= n_k; j += 4) scores4(qa, qb, k + j * hd, hd, scale, sa + j, sb + j);
        for (; j < n_k; j++) {
            sa[j] = dot1(qa, k + j * hd, hd) * scale;
            sb[j] = dot1(qb, k + j * hd, hd) * scale;
        }
    }
}

static void accum_avx2(float *acc, int64_t acc_stride, int64_t n_q, const float *v, int64_t n_k,
                       int64_t hd, const float *w, int64_t w_stride) {
    int64_t r = 0;
    for (; r + 2 <= n_q; r += 2) {
        float *aa = acc + r * acc_stride, *ab = aa + acc_stride;
        const float *wa = w + r * w_stride, *wb = wa + w_stride;
        int64_t i = 0;
        for (; i + 32 <= hd; i += 32) {
            __m256 a0 = _mm256_loadu_ps(aa + i), a1 = _mm256_loadu_ps(aa + i + 8),
                   a2 = _mm256_loadu_ps(aa + i + 16), a3 = _mm256_loadu_ps(aa + i + 24);
            __m256 b0 = _mm256_loadu_ps(ab + i), b1 = _mm256_loadu_ps(ab + i + 8),
                   b2 = _mm256_loadu_ps(ab + i + 16), b3 = _mm256_loadu_ps(ab + i + 24);
            for (int64_t j = 0; j < n_k; j++) {
                const float *vj = v + j * hd + i;
                const __m256 x = _mm256_broadcast_ss(wa + j), y = _mm256_broadcast_ss(wb + j);
                const __m256 v0 = _mm256_loadu_ps(vj), v1 = _mm256_loadu_ps(vj + 8),
                             v2 = _mm256_loadu_ps(vj + 16), v3 = _mm256_loadu_ps(vj + 24);
                a0 = _mm256_fmadd_ps(x, v0, a0);
                a1 = _mm256_fmadd_ps(x, v1, a1);
                a2 = _mm256_fmadd_ps(x, v2, a2);
                a3 = _mm256_fmadd_ps(x, v3, a3);
                b0 = _mm256_fmadd_ps(y, v0, b0);
                b1 = _mm256_fmadd_ps(y, v1, b1);
                b2 = _mm256_fmadd_ps(y, v2, b2);
                b3 = _mm256_fmadd_ps(y, v3, b3);
            }
            _mm256_storeu_ps(aa + i, a0);
            _mm256_storeu_ps(aa + i + 8, a1);
            _mm256_storeu_ps(aa + i + 16, a2);
            _mm256_storeu_ps(aa + i + 24, a3);
            _mm256_storeu_ps(ab + i, b0);
            _mm256_storeu_ps(ab + i + 8, b1);
            _mm256_storeu_ps(ab + i + 16, b2);
            _mm256_storeu_ps(ab + i + 24, b3);
        }
        for (; i + 8 <= hd; i += 8) {
            __m256 a0 = _mm256_loadu_ps(aa + i), b0 = _mm256_loadu_ps(ab + i);
            for (int64_t j = 0; j < n_k; j++) {
                const __m256 v0 = _mm256_loadu_ps(v + j * hd + i);
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wa + j), v0, a0);
                b0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wb + j), v0, b0);
            }
            _mm256_storeu_ps(aa + i, a0);
            _mm256_storeu_ps(ab + i, b0);
        }
        for (; i < hd; i++)
            for (int64_t j = 0; j < n_k; j++) {
                aa[i] = fmaf(wa[j], v[j * hd + i], aa[i]);
                ab[i] = fmaf(wb[j], v[j * hd + i], ab[i]);
            }
    }
    for (; r < n_q; r++) {
        float *aa = acc + r * acc_stride;
        const float *wa = w + r * w_stride;
        int64_t i = 0;
        for (; i + 8 <= hd; i += 8) {
            __m256 a0 = _mm256_loadu_ps(aa + i);
            for (int64_t j = 0; j < n_k; j++)
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(wa + j), _mm256_loadu_ps(v + j * hd + i), a0);
            _mm256_storeu_ps(aa + i, a0);
        }
        for (; i < hd; i++)
            for (int64_t j = 0; j < n_k; j++) aa[i] = fmaf(wa[j], v[j * hd + i], aa[i]);
    }
}

/* exp(x) for x <= 0 (Cephes' expf: range reduction by ln 2 in two parts, a
 * degree-6 polynomial, 2^n from the exponent bits); about 1 ulp. Below the
 * smallest normal result it returns 0. */
VT_INLINE __m256 exp_neg_f32x8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3365447f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lo);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

static float exp_sum_avx2(float *s, int64_t n, float m) {
    const __m256 mv = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 e = exp_neg_f32x8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
        _mm256_storeu_ps(s + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    float l = hsum_f32x8(acc);
    for (; j < n; j++) l += (s[j] = expf(s[j] - m));
    return l;
}

#define AVX2_OPS(t) {rows_##t##_avx2, store_##t##_avx2, scores_avx2, accum_avx2, exp_sum_avx2}
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
