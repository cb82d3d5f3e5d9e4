/* AVX2/FMA/F16C attention kernels (see cpu/attention.h). */
#include "cpu/attention.h"

#include "base/fp16.h"

#include <immintrin.h>

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float dot_f32_avx2(const float *q, const void *k, int64_t n) {
    const float *kk = k;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kk + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(kk + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kk + i), a0);
    float s = hsum256(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += q[i] * kk[i];
    return s;
}
static void axpy_f32_avx2(float *acc, const void *v, float w, int64_t n) {
    const float *vv = v;
    const __m256 wv = _mm256_set1_ps(w);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(vv + i), _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] += w * vv[i];
}
static void store_f32_avx2(void *dst, const float *src, int64_t n) {
    float *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = src[i];
}

static float dot_f16_avx2(const float *q, const void *k, int64_t n) {
    const vt_f16 *kk = k;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i),
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kk + i))), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8),
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kk + i + 8))), a1);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i),
                             _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kk + i))), a0);
    float s = hsum256(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += q[i] * f16_to_f32(kk[i]);
    return s;
}
static void axpy_f16_avx2(float *acc, const void *v, float w, int64_t n) {
    const vt_f16 *vv = v;
    const __m256 wv = _mm256_set1_ps(w);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i,
                         _mm256_fmadd_ps(wv, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vv + i))),
                                         _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] += w * f16_to_f32(vv[i]);
}
static void store_f16_avx2(void *dst, const float *src, int64_t n) {
    vt_f16 *d = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = f32_to_f16(src[i]);
}

static const attn_kv_ops ops_f32_avx2 = {dot_f32_avx2, axpy_f32_avx2, store_f32_avx2};
static const attn_kv_ops ops_f16_avx2 = {dot_f16_avx2, axpy_f16_avx2, store_f16_avx2};

const attn_kv_ops *attn_ops_get_avx2(vt_dtype type);
const attn_kv_ops *attn_ops_get_avx2(vt_dtype type) {
    switch (type) {
    case VT_DTYPE_F32: return &ops_f32_avx2;
    case VT_DTYPE_F16: return &ops_f16_avx2;
    default: return NULL; /* BF16 and Q8_0 use the scalar kernels for now */
    }
}
