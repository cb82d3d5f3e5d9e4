/* AVX2 dots of the 256-element super-block types with Q8_K activations:
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
 *
 * Per super-block the integer sums are exact: unsigned weight quants (maddubs
 * needs an unsigned first operand) times int8 activations, scaled by the 16-bit
 * sub-block scales with madd. Types whose quants are centred (Q3_K: q - 4,
 * Q6_K: q - 32) are computed as unsigned and corrected with the activation's
 * bsums (sums of 16 quants): sum sc * (q - c) * x = sum sc * q * x - c * sum sc * bsum.
 * Mins (Q2_K, Q4_K, Q5_K) likewise come from bsums, into a second float
 * accumulator subtracted at the end. The 8 int32 lanes are scaled by d_w * d_x
 * and accumulated in float. As in dot_legacy_avx2.c every
 * kernel is one routine over NR rows, so dot and dot_rows agree bit for bit. */
#include "cpu/x86/simd_avx2.h"
#include "cpu/x86/x86_kernels.h"
#include "quant/blocks.h"

#include <string.h>

/* Scale vectors. Sub-block scales are widened once per super-block to int16
 * and then broadcast with one byte shuffle per use (no scalar -> vector moves in
 * the inner loop). */

/* Byte-shuffle masks, built once at compile time (loop indices are not always
 * unrolled, and a mask built from a run-time index costs more than the shuffle).
 * bcast_masks[i]: int16 element i in every element. pair_masks[k]: element 2k
 * in the low lane, 2k + 1 in the high lane. */
#define M2(i) (2 * (i)), (2 * (i) + 1)
#define M16(i) M2(i), M2(i), M2(i), M2(i), M2(i), M2(i), M2(i), M2(i)
#define MPAIR(k) M2(2 * (k)), M2(2 * (k)), M2(2 * (k)), M2(2 * (k)), M2(2 * (k)), M2(2 * (k)), \
                 M2(2 * (k)), M2(2 * (k)), M2(2 * (k) + 1), M2(2 * (k) + 1), M2(2 * (k) + 1),  \
                 M2(2 * (k) + 1), M2(2 * (k) + 1), M2(2 * (k) + 1), M2(2 * (k) + 1), M2(2 * (k) + 1)
static const uint8_t bcast_masks[8][32] __attribute__((aligned(32))) = {
    {M16(0), M16(0)}, {M16(1), M16(1)}, {M16(2), M16(2)}, {M16(3), M16(3)},
    {M16(4), M16(4)}, {M16(5), M16(5)}, {M16(6), M16(6)}, {M16(7), M16(7)},
};
static const uint8_t pair_masks[4][32] __attribute__((aligned(32))) = {
    {MPAIR(0)}, {MPAIR(1)}, {MPAIR(2)}, {MPAIR(3)},
};
#undef M2
#undef M16
#undef MPAIR

/* From 8 int16 scales (the same in both lanes), scale i in every element. */
VT_INLINE __m256i bcast_scale(__m256i scales8x2, int i) {
    return _mm256_shuffle_epi8(scales8x2, _mm256_load_si256((const __m256i *)bcast_masks[i]));
}
/* From 8 int16 scales (the same in both lanes), scale 2k in the low lane and
 * 2k + 1 in the high lane: the scales of the 32 quants of chunk k when one scale
 * covers 16 quants. */
VT_INLINE __m256i pair_scale(__m256i scales8x2, int k) {
    return _mm256_shuffle_epi8(scales8x2, _mm256_load_si256((const __m256i *)pair_masks[k]));
}

/* sum over the 16 groups of bsums[g] * scales16[g] as 8 int32 lanes. */
VT_INLINE __m256i bsums_dot(const block_q8_K *x, __m256i scales16) {
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), scales16);
}

/* Per-row accumulators of a K-quant dot: main term and min/offset term. */
typedef struct {
    __m256 acc;
    __m256 acc_m; /* subtracted at the end */
} k_acc;

/* ---- Q4_K, Q5_K: 8 sub-blocks of 32, 6-bit scale and min each ------------------------- */

/* The 8 scales (bytes 0..7) and 8 mins (bytes 8..15) from the 12 packed bytes
 * (q4_K_scale_words). */
VT_INLINE __m128i unpack_q4_K_scales(const uint8_t *p) {
    uint32_t s[4];
    q4_K_scale_words(p, s);
    return _mm_setr_epi32((int)s[0], (int)s[1], (int)s[2], (int)s[3]);
}

/* acc_m += dmin * sum_g bsums[g] * mins[g / 2] (4 lanes used) */
VT_INLINE __m256 q45_K_mins(const block_q8_K *x, __m128i packed, float dmin, __m256 acc_m) {
    const __m128i mins = _mm_cvtepu8_epi16(_mm_srli_si128(packed, 8));
    const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
    const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    const __m128 m = _mm_cvtepi32_ps(_mm_madd_epi16(pairs, mins));
    return _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_castps128_ps256(m), acc_m);
}

/* Q4_K (qh NULL) and Q5_K (qh: the fifth bits; bit 2j of qh[l] is that of
 * element 64j + l, bit 2j + 1 of 64j + 32 + l). Always inlined with a constant
 * qh, so each type keeps its own straight-line code. */
VT_INLINE void q45_K_block(const uint8_t *scales, vt_f16 wd, vt_f16 wdmin, const uint8_t *qs, const uint8_t *qh,
                           const block_q8_K *x, k_acc *a) {
    const __m128i packed = unpack_q4_K_scales(scales);
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(packed));
    const float d = x->d * f16c_to_f32(wd), dmin = x->d * f16c_to_f32(wdmin);
    const __m256i m4 = _mm256_set1_epi8(0x0f), b5 = _mm256_set1_epi8(0x10);
    __m256i hbits = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
        __m256i lo = _mm256_and_si256(bits, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        if (qh) {
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hbits, 4), b5));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(hbits, 3), b5));
            hbits = _mm256_srli_epi16(hbits, 2);
        }
        const __m256i xl = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j));
        const __m256i xh = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * j + 32));
        const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), bcast_scale(sc, 2 * j));
        const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), bcast_scale(sc, 2 * j + 1));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
    }
    a->acc_m = q45_K_mins(x, packed, dmin, a->acc_m);
    a->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), a->acc);
}
VT_INLINE void q4_K_block(const block_q4_K *w, const block_q8_K *x, k_acc *a) {
    q45_K_block(w->scales, w->d, w->dmin, w->qs, NULL, x, a);
}
VT_INLINE void q5_K_block(const block_q5_K *w, const block_q8_K *x, k_acc *a) {
    q45_K_block(w->scales, w->d, w->dmin, w->qs, w->qh, x, a);
}

/* ---- Q6_K: 16 sub-blocks of 16, int8 scales, q = 4 + 2 bits, centred on 32 ---------- */

VT_INLINE void q6_K_block(const block_q6_K *w, const block_q8_K *x, k_acc *a) {
    const float d = x->d * f16c_to_f32(w->d);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = w->ql + 64 * h, *qh = w->qh + 32 * h;
        const int8_t *xq = x->qs + 128 * h;
        const __m256i sc = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                  : _mm256_permute2x128_si256(sc16, sc16, 0x11);
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
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pair_scale(sc, k)));
        }
    }
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(bsums_dot(x, sc16), 5));
    a->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), a->acc);
}

/* ---- Q3_K: 16 sub-blocks of 16, 6-bit scales centred on 32, q = 2 + 1 bits - 4 ------- */

/* The 16 scales (minus 32) from the 12 packed bytes (q3_K_scale_words). */
VT_INLINE __m128i unpack_q3_K_scales(const uint8_t *p) {
    uint32_t s[4];
    q3_K_scale_words(p, s);
    return _mm_sub_epi8(_mm_setr_epi32((int)s[0], (int)s[1], (int)s[2], (int)s[3]), _mm_set1_epi8(32));
}

VT_INLINE void q3_K_block(const block_q3_K *w, const block_q8_K *x, k_acc *a) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(unpack_q3_K_scales(w->scales));
    const float d = x->d * f16c_to_f32(w->d);
    const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4);
    __m256i hm = _mm256_loadu_si256((const __m256i *)w->hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i qs = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * h));
        const __m256i sc = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                  : _mm256_permute2x128_si256(sc16, sc16, 0x11);
        for (int k = 0; k < 4; k++) {
            /* chunk 4h + k: bits 2k..2k+1 of qs, bit 4h + k of hmask (shifted down as we go) */
            const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), m3);
            const __m256i hbit = _mm256_and_si256(_mm256_slli_epi16(hm, 2), b4);
            hm = _mm256_srli_epi16(hm, 1);
            const __m256i q3 = _mm256_or_si256(q2, hbit);
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(x->qs + 128 * h + 32 * k));
            const __m256i p = _mm256_maddubs_epi16(q3, xv);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pair_scale(sc, k)));
        }
    }
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(bsums_dot(x, sc16), 2));
    a->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), a->acc);
}

/* ---- Q2_K: 16 sub-blocks of 16, 4-bit scale and min, q in 0..3 ------------------------ */

VT_INLINE void q2_K_block(const block_q2_K *w, const block_q8_K *x, k_acc *a) {
    const float dall = x->d * f16c_to_f32(w->d), dmin = x->d * f16c_to_f32(w->dmin);
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)w->scales);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, _mm_set1_epi8(0x0f)));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0f)));
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i qs = _mm256_loadu_si256((const __m256i *)(w->qs + 32 * h));
        const __m256i sc = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                  : _mm256_permute2x128_si256(sc16, sc16, 0x11);
        for (int k = 0; k < 4; k++) {
            const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), m3);
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(x->qs + 128 * h + 32 * k));
            const __m256i p = _mm256_maddubs_epi16(q2, xv);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pair_scale(sc, k)));
        }
    }
    a->acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(bsums_dot(x, mins16)), a->acc_m);
    a->acc = _mm256_fmadd_ps(_mm256_set1_ps(dall), _mm256_cvtepi32_ps(sumi), a->acc);
}

/* ---- IQ4_XS: 8 sub-blocks of 32 on the iq4nl grid, 6-bit scales centred on 32 -------- */

VT_INLINE void iq4_xs_block(const block_iq4_xs *w, const block_q8_K *x, k_acc *a) {
    const float d = x->d * f16c_to_f32(w->d);
    const __m128i g = _mm_loadu_si128((const __m128i *)iq4nl_values);
    const __m256i grid = _mm256_set_m128i(g, g);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    /* 8 scales as int16: low 4 bits from scales_l nibbles, high 2 from scales_h */
    uint32_t lo4;
    memcpy(&lo4, w->scales_l, 4);
    int16_t ls[8];
    for (int ib = 0; ib < 8; ib++)
        ls[ib] = (int16_t)((((lo4 >> (4 * ib)) & 0x0f) | (((w->scales_h >> (2 * ib)) & 3) << 4)) - 32);
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ls));
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib += 2) {
        /* two sub-blocks: 32 bytes of nibbles; low nibbles of 16 bytes are elements
         * 0..15 of a sub-block, high nibbles 16..31 */
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(w->qs + 16 * ib));
        const __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        const __m256i q0 = _mm256_shuffle_epi8(grid, _mm256_permute2x128_si256(lo, hi, 0x20));
        const __m256i q1 = _mm256_shuffle_epi8(grid, _mm256_permute2x128_si256(lo, hi, 0x31));
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * ib));
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * ib + 32));
        const __m256i p0 = _mm256_maddubs_epi16(_mm256_sign_epi8(q0, q0), _mm256_sign_epi8(x0, q0));
        const __m256i p1 = _mm256_maddubs_epi16(_mm256_sign_epi8(q1, q1), _mm256_sign_epi8(x1, q1));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_madd_epi16(p0, bcast_scale(sc, ib)),
                                                       _mm256_madd_epi16(p1, bcast_scale(sc, ib + 1))));
    }
    a->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), a->acc);
}

/* ---- row drivers ------------------------------------------------------------------- */

#define K_KERNEL(name, block_t)                                                            \
    VT_INLINE void name##_rows(int64_t n, const uint8_t *w, size_t ws, const block_q8_K *x, \
                               float *s, const int nr) {                                   \
        const int64_t nb = n / QK_K;                                                       \
        k_acc a[CPU_DOT_ROWS_MAX];                                                         \
        for (int r = 0; r < nr; r++) a[r].acc = a[r].acc_m = _mm256_setzero_ps();          \
        for (int64_t b = 0; b < nb; b++)                                                   \
            for (int r = 0; r < nr; r++)                                                   \
                name##_block((const block_t *)(w + (size_t)r * ws) + b, x + b, &a[r]);     \
        for (int r = 0; r < nr; r++) s[r] = hsum_f32x8(a[r].acc) - hsum_f32x8(a[r].acc_m); \
    }                                                                                      \
    CPU_DEFINE_DOT(name, avx2)

K_KERNEL(q2_K, block_q2_K)
K_KERNEL(q3_K, block_q3_K)
K_KERNEL(q4_K, block_q4_K)
K_KERNEL(q5_K, block_q5_K)
K_KERNEL(q6_K, block_q6_K)
K_KERNEL(iq4_xs, block_iq4_xs)
