/* AVX2 activation quantizers: f32 -> Q8_0, Q8_1, Q8_K, F16, BF16.
 *
 * Each is bit-identical with the quant module's quant_row_*_ref: the same float
 * operations in the same order (a scale from the block's max, one multiply,
 * then the ref's rounding rule). Two details matter:
 *  - Q8_0/Q8_1 round with roundf (half away from zero), not the vector unit's
 *    half-to-even; round_half_away() below reproduces roundf exactly.
 *  - x * id must be rounded to float before it is rounded to an integer, so
 *    this file forbids FMA contraction (GCC and clang would otherwise fuse the
 *    multiply with the following subtraction).
 * Q8_K rounds half to even (the ref's nearest_int), which is what cvtps does in
 * the default rounding mode. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "cpu/x86/simd_avx2.h"
#include "cpu/x86/x86_kernels.h"
#include "base/fp16.h"
#include "quant/blocks.h"

#include <math.h>

/* roundf for |v| < 2^23: truncate, then step away from zero when the dropped
 * fraction is at least one half (v - trunc(v) is exact). */
VT_INLINE __m256i round_half_away(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    const __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
    const __m256 up = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                    _mm256_or_ps(_mm256_set1_ps(1.0f), sign));
    return _mm256_cvttps_epi32(_mm256_add_ps(t, up));
}

/* Four vectors of 8 int32 (elements 0..31 in order) -> 32 int8, saturating. */
VT_INLINE __m256i pack_i32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b); /* a0-3 b0-3 | a4-7 b4-7 */
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i abcd = _mm256_packs_epi16(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 ... */
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One 32-element block: q = roundf(x * id) with d = amax / 127. Returns d and
 * (in *sum) the sum of the quants. */
VT_INLINE float q8_block_32(const float *x, int8_t *q, int *sum) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_and_ps(v[k], abs_mask));
    }
    const float d = hmax_f32x8(amax) / 127;
    const float id = d ? 1.0f / d : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i qi[4];
    for (int k = 0; k < 4; k++) qi[k] = round_half_away(_mm256_mul_ps(v[k], idv));
    if (sum) {
        const __m256i s = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
        *sum = hsum_i32x8(s);
    }
    _mm256_storeu_si256((__m256i *)q, pack_i32_to_i8(qi[0], qi[1], qi[2], qi[3]));
    return d;
}

void quantize_q8_0_avx2(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float d = q8_block_32(x + b * QK8_0, y[b].qs, NULL);
        y[b].d = f32_to_f16(d);
    }
}

void quantize_q8_1_avx2(const float *x, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / QK8_1; b++) {
        int sum;
        const float d = q8_block_32(x + b * QK8_1, y[b].qs, &sum);
        y[b].d = f32_to_f16(d);
        y[b].s = f32_to_f16(sum * d);
    }
}

void quantize_q8_K_avx2(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        __m256 amax_v = _mm256_setzero_ps();
        for (int k = 0; k < QK_K / 8; k++)
            amax_v = _mm256_max_ps(amax_v, _mm256_and_ps(_mm256_loadu_ps(x + 8 * k), abs_mask));
        const float amax = hmax_f32x8(amax_v);
        if (!amax) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* the ref keeps the sign of the FIRST element of largest magnitude */
        float max = 0;
        const __m256 target = _mm256_set1_ps(amax);
        for (int k = 0; k < QK_K / 8; k++) {
            const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + 8 * k), abs_mask);
            const int m = _mm256_movemask_ps(_mm256_cmp_ps(a, target, _CMP_EQ_OQ));
            if (m) {
                max = x[8 * k + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i hi = _mm256_set1_epi32(127);
        for (int k = 0; k < QK_K / 32; k++) {
            __m256i qi[4];
            for (int j = 0; j < 4; j++) {
                const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 32 * k + 8 * j), is);
                qi[j] = _mm256_min_epi32(_mm256_cvtps_epi32(v), hi);
            }
            const __m256i q8 = pack_i32_to_i8(qi[0], qi[1], qi[2], qi[3]);
            _mm256_storeu_si256((__m256i *)(y[b].qs + 32 * k), q8);
            /* two bsums of 16: widen to int16 and add pairs */
            const __m256i w = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q8),
                                                _mm256_set1_epi16(1));
            /* w: 8 int32, lanes 0-3 sum elements 0..15, lanes 4-7 elements 16..31 */
            const __m128i lo = _mm256_castsi256_si128(w), hi4 = _mm256_extracti128_si256(w, 1);
            __m128i s = _mm_hadd_epi32(lo, hi4); /* l0+l1 l2+l3 h0+h1 h2+h3 */
            s = _mm_hadd_epi32(s, s);
            y[b].bsums[2 * k] = (int16_t)_mm_extract_epi32(s, 0);
            y[b].bsums[2 * k + 1] = (int16_t)_mm_extract_epi32(s, 1);
        }
        y[b].d = 1 / iscale;
    }
}

void quantize_f16_avx2(const float *x, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(y + i), h);
    }
    for (; i < n; i++) y[i] = f32_to_f16(x[i]);
}

void quantize_bf16_avx2(const float *x, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        /* round to nearest even: u + 0x7fff + ((u >> 16) & 1), then >> 16 */
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
        /* NaN: keep the top half and set the quiet bit (as f32_to_bf16) */
        const __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
        const __m256i nan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7f800000));
        const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
        r = _mm256_blendv_epi8(r, qnan, nan);
        /* 8 x uint32 (each < 2^16) -> 8 x uint16 */
        const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(y + i), packed);
    }
    for (; i < n; i++) y[i] = f32_to_bf16(x[i]);
}
