/* AVX2 dots of the 256-element super-block types with Q8_K activations:
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
 *
 * Per super-block the integer sums are exact: unsigned weight quants (maddubs
 * needs an unsigned first operand) times int8 activations, scaled by the 16-bit
 * sub-block scales with madd. Types whose quants are centred (Q3_K: q - 4,
 * Q6_K: q - 32) are computed as unsigned and corrected with the activation's
 * bsums (sums of 16 quants): sum sc * (q - c) * x = sum sc * q * x - c * sum sc * bsum.
 * Mins (Q2_K, Q4_K, Q5_K) likewise come from bsums. The 8 int32 lanes are then
 * scaled by d_w * d_x and accumulated in float. As in dot_legacy_avx2.c every
 * kernel is one routine over NR rows, so dot and dot_rows agree bit for bit. */
#include "cpu/x86/simd_avx2.h"
#include "cpu/x86/x86_kernels.h"
#include "quant/blocks.h"

#include <math.h>

/* Two 16-bit scales: a for the low 128-bit lane, b for the high one. */
VT_INLINE __m256i scale_pair(int a, int b) {
    return _mm256_set_m128i(_mm_set1_epi16((int16_t)b), _mm_set1_epi16((int16_t)a));
}

/* sum over the 16 groups of bsums[g] * scales16[g] as 8 int32 lanes. */
VT_INLINE __m256i bsums_dot(const block_q8_K *x, __m256i scales16) {
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), scales16);
}

/* ---- Q4_K, Q5_K: 8 sub-blocks of 32, 6-bit scale and min each ------------------------- */

/* Unpack the 12 bytes into scales sc[0..7] and mins sc[8..15]. Sub-blocks 0..3
 * keep their 6 bits in bytes 0..3 (scale) and 4..7 (min); sub-blocks 4..7 take
 * the low/high nibble of bytes 8..11 plus the top two bits of bytes 0..7. */
VT_INLINE void unpack_q4_K_scales(const uint8_t *p, uint8_t sc[16]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = p[j] & 63;
        sc[8 + j] = p[j + 4] & 63;
        sc[4 + j] = (uint8_t)((p[j + 8] & 0x0f) | ((p[j] >> 6) << 4));
        sc[12 + j] = (uint8_t)((p[j + 8] >> 4) | ((p[j + 4] >> 6) << 4));
    }
}

/* sum_g bsums[g] * mins[g / 2] */
VT_INLINE int32_t q45_K_min_sum(const block_q8_K *x, const uint8_t *mins) {
    const __m128i m8 = _mm_loadl_epi64((const __m128i *)mins);
    const __m128i m16 = _mm_cvtepu8_epi16(m8);
    const __m256i mins16 = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    return hsum_i32x8(bsums_dot(x, mins16));
}

VT_INLINE __m256 q4_K_block(const block_q4_K *w, const block_q8_K *x, __m256 acc, float *summ) {
    uint8_t sc[16];
    unpack_q4_K_scales(w->scales, sc);
    const float d = x->d * f16c_to_f32(w->d), dmin = x->d * f16c_to_f32(w->dmin);
    __m256i sumi = _mm256_setzero_si256();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int j = 0; j < 4; j++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * j));
        const __m256i lo = _mm256_and_si256(bits, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        const __m256i xl = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j));
        const __m256i xh = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j + 32));
        const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_set1_epi16(sc[2 * j]));
        const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), _mm256_set1_epi16(sc[2 * j + 1]));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
    }
    *summ = fmaf(dmin, (float)q45_K_min_sum(x, sc + 8), *summ);
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
}

VT_INLINE __m256 q5_K_block(const block_q5_K *w, const block_q8_K *x, __m256 acc, float *summ) {
    uint8_t sc[16];
    unpack_q4_K_scales(w->scales, sc);
    const float d = x->d * f16c_to_f32(w->d), dmin = x->d * f16c_to_f32(w->dmin);
    __m256i sumi = _mm256_setzero_si256();
    const __m256i m4 = _mm256_set1_epi8(0x0f), b5 = _mm256_set1_epi8(0x10);
    const __m256i hbits = _mm256_loadu_si256((const __m256i *)w->qh);
    for (int j = 0; j < 4; j++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * j));
        const __m256i ml = _mm256_set1_epi8((char)(1 << (2 * j)));
        const __m256i mh = _mm256_set1_epi8((char)(2 << (2 * j)));
        const __m256i hl = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, ml), ml), b5);
        const __m256i hh = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, mh), mh), b5);
        const __m256i lo = _mm256_or_si256(_mm256_and_si256(bits, m4), hl);
        const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), hh);
        const __m256i xl = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j));
        const __m256i xh = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j + 32));
        const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_set1_epi16(sc[2 * j]));
        const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), _mm256_set1_epi16(sc[2 * j + 1]));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
    }
    *summ = fmaf(dmin, (float)q45_K_min_sum(x, sc + 8), *summ);
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
}

/* ---- Q6_K: 16 sub-blocks of 16, int8 scales, q = 4 + 2 bits, centred on 32 ---------- */

VT_INLINE __m256 q6_K_block(const block_q6_K *w, const block_q8_K *x, __m256 acc, float *summ) {
    const float d = x->d * f16c_to_f32(w->d);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = w->ql + 64 * h, *qh = w->qh + 32 * h;
        const int8_t *xq = x->qs + 128 * h, *sc = w->scales + 8 * h;
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
        q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m2));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
        for (int k = 0; k < 4; k++) {
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq + 32 * k));
            const __m256i p = _mm256_maddubs_epi16(q[k], xv);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(sc[2 * k], sc[2 * k + 1])));
        }
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(bsums_dot(x, sc16), 5));
    (void)summ;
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
}

/* ---- Q3_K: 16 sub-blocks of 16, 6-bit scales centred on 32, q = 2 + 1 bits - 4 ------- */

/* The 16 scales (minus 32) from the 12 packed bytes: low 4 bits of scale j in the
 * nibbles of bytes 0..7 (j < 8: low nibble of byte j, else high nibble of byte
 * j - 8), the top 2 bits in bytes 8..11 (2 bits per scale, j % 4 picks the byte,
 * j / 4 the bit pair). */
VT_INLINE void unpack_q3_K_scales(const uint8_t *p, int8_t sc[16]) {
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? (p[j] & 0x0f) : (p[j - 8] >> 4);
        const int hi = (p[8 + (j % 4)] >> (2 * (j / 4))) & 3;
        sc[j] = (int8_t)((lo | (hi << 4)) - 32);
    }
}

#define Q3_STEP(k)                                                                         \
    do {                                                                                   \
        const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * (k)), m3);           \
        const __m256i mk = _mm256_set1_epi8((char)(1 << (4 * h + (k))));                   \
        const __m256i hbit = _mm256_cmpeq_epi8(_mm256_and_si256(hm, mk), mk);              \
        const __m256i q3 = _mm256_or_si256(q2, _mm256_and_si256(hbit, b4));                \
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(x->qs + 128 * h + 32 * (k))); \
        const __m256i p = _mm256_maddubs_epi16(q3, xv);                                    \
        sumi = _mm256_add_epi32(                                                           \
            sumi, _mm256_madd_epi16(p, scale_pair(sc[8 * h + 2 * (k)], sc[8 * h + 2 * (k) + 1]))); \
    } while (0)

VT_INLINE __m256 q3_K_block(const block_q3_K *w, const block_q8_K *x, __m256 acc, float *summ) {
    int8_t sc[16];
    unpack_q3_K_scales(w->scales, sc);
    const float d = x->d * f16c_to_f32(w->d);
    const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)w->hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i qs = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * h));
        Q3_STEP(0);
        Q3_STEP(1);
        Q3_STEP(2);
        Q3_STEP(3);
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(bsums_dot(x, sc16), 2));
    (void)summ;
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
}

/* ---- Q2_K: 16 sub-blocks of 16, 4-bit scale and min, q in 0..3 ------------------------ */

#define Q2_STEP(k)                                                                         \
    do {                                                                                   \
        const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * (k)), m3);           \
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(x->qs + 128 * h + 32 * (k))); \
        const __m256i p = _mm256_maddubs_epi16(q2, xv);                                    \
        const int is = 8 * h + 2 * (k);                                                    \
        sumi = _mm256_add_epi32(                                                           \
            sumi, _mm256_madd_epi16(p, scale_pair(w->scales[is] & 0x0f, w->scales[is + 1] & 0x0f))); \
    } while (0)

VT_INLINE __m256 q2_K_block(const block_q2_K *w, const block_q8_K *x, __m256 acc, float *summ) {
    const float dall = x->d * f16c_to_f32(w->d), dmin = x->d * f16c_to_f32(w->dmin);
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i qs = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * h));
        Q2_STEP(0);
        Q2_STEP(1);
        Q2_STEP(2);
        Q2_STEP(3);
    }
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)w->scales);
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0f)));
    *summ = fmaf(dmin, (float)hsum_i32x8(bsums_dot(x, mins16)), *summ);
    return _mm256_fmadd_ps(_mm256_set1_ps(dall), _mm256_cvtepi32_ps(sumi), acc);
}

/* ---- IQ4_XS: 8 sub-blocks of 32 on the iq4nl grid, 6-bit scales centred on 32 -------- */

VT_INLINE __m256 iq4_xs_block(const block_iq4_xs *w, const block_q8_K *x, __m256 acc, float *summ) {
    const float d = x->d * f16c_to_f32(w->d);
    const __m128i g = _mm_loadu_si128((const __m128i *)iq4nl_values);
    const __m256i grid = _mm256_set_m128i(g, g);
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const int ls = ((w->scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f) | (((w->scales_h >> (2 * ib)) & 3) << 4);
        const __m256i q = _mm256_shuffle_epi8(grid, nibbles_to_bytes(w->qs + 16 * ib));
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * ib));
        const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(xv, q));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_set1_epi16((int16_t)(ls - 32))));
    }
    (void)summ;
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
}

/* ---- row drivers ------------------------------------------------------------------- */

#define K_KERNEL(name, block_t)                                                            \
    VT_INLINE void name##_rows(int64_t n, const uint8_t *w, size_t ws, const block_q8_K *x, \
                               float *s, const int nr) {                                   \
        const int64_t nb = n / QK_K;                                                       \
        __m256 acc[CPU_DOT_ROWS_MAX];                                                      \
        float summ[CPU_DOT_ROWS_MAX];                                                      \
        for (int r = 0; r < nr; r++) {                                                     \
            acc[r] = _mm256_setzero_ps();                                                  \
            summ[r] = 0.0f;                                                                \
        }                                                                                  \
        for (int64_t b = 0; b < nb; b++)                                                   \
            for (int r = 0; r < nr; r++)                                                   \
                acc[r] = name##_block((const block_t *)(w + (size_t)r * ws) + b, x + b,    \
                                      acc[r], &summ[r]);                                   \
        for (int r = 0; r < nr; r++) s[r] = hsum_f32x8(acc[r]) - summ[r];                  \
    }                                                                                      \
    float dot_##name##_avx2(int64_t n, const void *w, const void *x) {                     \
        float s;                                                                           \
        name##_rows(n, w, 0, x, &s, 1);                                                    \
        return s;                                                                          \
    }                                                                                      \
    void dot_rows_##name##_avx2(int64_t n, const void *w, size_t ws, const void *x,        \
                                float *s, int nr) {                                        \
        switch (nr) {                                                                      \
        case 4: name##_rows(n, w, ws, x, s, 4); break;                                     \
        case 3: name##_rows(n, w, ws, x, s, 3); break;                                     \
        case 2: name##_rows(n, w, ws, x, s, 2); break;                                     \
        default: name##_rows(n, w, ws, x, s, 1); break;                                    \
        }                                                                                  \
    }

K_KERNEL(q2_K, block_q2_K)
K_KERNEL(q3_K, block_q3_K)
K_KERNEL(q4_K, block_q4_K)
K_KERNEL(q5_K, block_q5_K)
K_KERNEL(q6_K, block_q6_K)
K_KERNEL(iq4_xs, block_iq4_xs)
