/* NEON dots of the 256-element super-block types with Q8_K activations, included
 * by dot_k_neon.c (plain ASIMD) and dot_k_neon_dot.c (sdot) with ARM_SFX set:
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
 *
 * Per super-block everything up to one int32 is exact integer math:
 *  - each sub-block's dot (16 or 32 quants) lands in 4 int32 lanes
 *    (neon_common.h); four of them are folded by pairwise adds into one vector
 *    of four sub-block totals, which is multiplied by the four sub-block scales
 *    (int32 lanes) and summed across lanes;
 *  - centred types (Q3_K: q - 4, Q6_K: q - 32) are dotted as unsigned quants and
 *    corrected with the activation's bsums: sum sc (q - c) x = sum sc q x -
 *    c sum sc bsum, so no per-quant subtraction is spent;
 *  - mins (Q2_K, Q4_K, Q5_K) come from the bsums too, into a second sum.
 * Then the super-block adds d * isum (and dmin * summ) into float sums, as the
 * ref does, only in another order. The bit twiddles that assemble quants use shift-and-insert
 * (sli/sri) to merge the high bits in one instruction. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "cpu/unroll.h"
#include "quant/blocks.h"

#include <math.h>

#ifndef ARM_SFX
#error "define ARM_SFX (the tier suffix) before including dot_k_impl.h"
#endif

/* Four int32 scales from bytes s[0..3] (unsigned) and s[4..7]. */
VT_INLINE void widen_u8x8(uint8x8_t s, int32x4_t out[2]) {
    const uint16x8_t w = vmovl_u8(s);
    out[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w)));
    out[1] = vreinterpretq_s32_u32(vmovl_high_u16(w));
}
VT_INLINE void widen_s8x16(int8x16_t s, int32x4_t out[4]) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(s)), hi = vmovl_high_s8(s);
    out[0] = vmovl_s16(vget_low_s16(lo));
    out[1] = vmovl_high_s16(lo);
    out[2] = vmovl_s16(vget_low_s16(hi));
    out[3] = vmovl_high_s16(hi);
}

/* sum_k sc[k] * total(p[k]) over 16 sub-block dots (scales as 4 int32 vectors). */
VT_INLINE int32_t scaled_sum16(const int32x4_t p[16], const int32x4_t sc[4]) {
    int32x4_t v = vmulq_s32(hsum4_i32(p[0], p[1], p[2], p[3]), sc[0]);
    v = vmlaq_s32(v, hsum4_i32(p[4], p[5], p[6], p[7]), sc[1]);
    v = vmlaq_s32(v, hsum4_i32(p[8], p[9], p[10], p[11]), sc[2]);
    v = vmlaq_s32(v, hsum4_i32(p[12], p[13], p[14], p[15]), sc[3]);
    return vaddvq_s32(v);
}

/* sum_g bsums[g] * sc16[g] over the 16 groups of 16 (sc16 as 2 int16 vectors). */
VT_INLINE int32_t bsums_dot16(const block_q8_K *x, int16x8_t sc_lo, int16x8_t sc_hi) {
    const int16x8_t b0 = vld1q_s16(x->bsums), b1 = vld1q_s16(x->bsums + 8);
    int32x4_t v = vmull_s16(vget_low_s16(b0), vget_low_s16(sc_lo));
    v = vmlal_high_s16(v, b0, sc_lo);
    v = vmlal_s16(v, vget_low_s16(b1), vget_low_s16(sc_hi));
    v = vmlal_high_s16(v, b1, sc_hi);
    return vaddvq_s32(v);
}

/* ---- Q4_K, Q5_K: 8 sub-blocks of 32, 6-bit scale and min each ------------------------- */

/* The 8 scales (bytes 0..7) and 8 mins (bytes 8..15) from the 12 packed bytes
 * (q4_K_scale_words). */
VT_INLINE uint8x16_t unpack_q4_K_scales(const uint8_t *p) {
    uint32_t s[4];
    q4_K_scale_words(p, s);
    return vcombine_u8(vcreate_u8(s[0] | (uint64_t)s[1] << 32), vcreate_u8(s[2] | (uint64_t)s[3] << 32));
}

/* min term: sum_j mins[j] * (bsums[2j] + bsums[2j + 1]) */
VT_INLINE int32_t q45_K_mins(const block_q8_K *x, uint8x16_t packed) {
    const int16x8_t pairs = vpaddq_s16(vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8));
    const int16x8_t mins = vreinterpretq_s16_u16(vmovl_high_u8(packed));
    return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(mins)), pairs, mins));
}

/* sum_j sc[j] * total(p[j]) over 8 sub-block dots. */
VT_INLINE int32_t scaled_sum8(const int32x4_t p[8], uint8x16_t packed) {
    int32x4_t sc[2];
    widen_u8x8(vget_low_u8(packed), sc);
    const int32x4_t v = vmlaq_s32(vmulq_s32(hsum4_i32(p[0], p[1], p[2], p[3]), sc[0]),
                                  hsum4_i32(p[4], p[5], p[6], p[7]), sc[1]);
    return vaddvq_s32(v);
}

VT_INLINE void q4_K_block(const block_q4_K *w, const block_q8_K *x, float *acc, float *acc_m) {
    const uint8x16_t packed = unpack_q4_K_scales(w->scales);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const uint8x16x4_t q0 = vld1q_u8_x4(w->qs), q1 = vld1q_u8_x4(w->qs + 64);
    const uint8x16_t qv[8] = {q0.val[0], q0.val[1], q0.val[2], q0.val[3],
                              q1.val[0], q1.val[1], q1.val[2], q1.val[3]};
    int32x4_t p[8];
    VT_UNROLL(8) for (int j = 0; j < 4; j++) {
        /* 32 bytes: low nibbles are sub-block 2j, high nibbles sub-block 2j + 1 */
        const int8x16x4_t xv = vld1q_s8_x4(x->qs + 64 * j);
        const uint8x16_t a = qv[2 * j], b = qv[2 * j + 1];
        p[2 * j] = i8dot32(vreinterpretq_s8_u8(vandq_u8(a, m4)), vreinterpretq_s8_u8(vandq_u8(b, m4)),
                           xv.val[0], xv.val[1]);
        p[2 * j + 1] = i8dot32(vreinterpretq_s8_u8(vshrq_n_u8(a, 4)), vreinterpretq_s8_u8(vshrq_n_u8(b, 4)),
                               xv.val[2], xv.val[3]);
    }
    const int32_t isum = scaled_sum8(p, packed), summ = q45_K_mins(x, packed);
    *acc = fmaf(x->d * f16_arm(w->d), (float)isum, *acc);
    *acc_m = fmaf(x->d * f16_arm(w->dmin), (float)summ, *acc_m);
}

VT_INLINE void q5_K_block(const block_q5_K *w, const block_q8_K *x, float *acc, float *acc_m) {
    const uint8x16_t packed = unpack_q4_K_scales(w->scales);
    const uint8x16_t m5 = vdupq_n_u8(0x1f);
    const uint8x16x4_t q0 = vld1q_u8_x4(w->qs), q1 = vld1q_u8_x4(w->qs + 64);
    const uint8x16_t qv[8] = {q0.val[0], q0.val[1], q0.val[2], q0.val[3],
                              q1.val[0], q1.val[1], q1.val[2], q1.val[3]};
    /* bit 2j of qh[l] is the fifth bit of element 64j + l, bit 2j + 1 of 64j + 32 + l */
    uint8x16_t h0 = vld1q_u8(w->qh), h1 = vld1q_u8(w->qh + 16);
    int32x4_t p[8];
    VT_UNROLL(8) for (int j = 0; j < 4; j++) {
        const int8x16x4_t xv = vld1q_s8_x4(x->qs + 64 * j);
        const uint8x16_t a = qv[2 * j], b = qv[2 * j + 1];
        /* low: (h << 4) | (q & 0x0f), keep 5 bits; high: (q >> 4) | ((h << 3) & 0xf0), 5 bits */
        const uint8x16_t la = vandq_u8(vsliq_n_u8(a, h0, 4), m5), lb = vandq_u8(vsliq_n_u8(b, h1, 4), m5);
        const uint8x16_t ha = vandq_u8(vsriq_n_u8(vshlq_n_u8(h0, 3), a, 4), m5);
        const uint8x16_t hb = vandq_u8(vsriq_n_u8(vshlq_n_u8(h1, 3), b, 4), m5);
        h0 = vshrq_n_u8(h0, 2);
        h1 = vshrq_n_u8(h1, 2);
        p[2 * j] = i8dot32(vreinterpretq_s8_u8(la), vreinterpretq_s8_u8(lb), xv.val[0], xv.val[1]);
        p[2 * j + 1] = i8dot32(vreinterpretq_s8_u8(ha), vreinterpretq_s8_u8(hb), xv.val[2], xv.val[3]);
    }
    const int32_t isum = scaled_sum8(p, packed), summ = q45_K_mins(x, packed);
    *acc = fmaf(x->d * f16_arm(w->d), (float)isum, *acc);
    *acc_m = fmaf(x->d * f16_arm(w->dmin), (float)summ, *acc_m);
}

/* ---- Q6_K: 16 sub-blocks of 16, int8 scales, q = 4 + 2 bits, centred on 32 ---------- */

VT_INLINE void q6_K_block(const block_q6_K *w, const block_q8_K *x, float *acc, float *acc_m) {
    const uint8x16_t m6 = vdupq_n_u8(0x3f);
    const int8x16_t sc8 = vld1q_s8(w->scales);
    int32x4_t p[16];
    VT_UNROLL(8) for (int h = 0; h < 2; h++) {
        const uint8x16x4_t ql = vld1q_u8_x4(w->ql + 64 * h);
        const uint8x16x2_t qh = vld1q_u8_x2(w->qh + 32 * h);
        const int8x16x4_t x0 = vld1q_s8_x4(x->qs + 128 * h), x1 = vld1q_s8_x4(x->qs + 128 * h + 64);
        const int8x16_t xv[8] = {x0.val[0], x0.val[1], x0.val[2], x0.val[3],
                                 x1.val[0], x1.val[1], x1.val[2], x1.val[3]};
        VT_UNROLL(8) for (int g = 0; g < 2; g++) {
            /* elements 32c + 16g + i of this half, c = 0..3: ql[16g + i] (c = 0, 2: low,
             * high nibble), ql[32 + 16g + i] (c = 1, 3), and qh[16g + i] bits 2c, 2c + 1 */
            const uint8x16_t la = ql.val[g], lb = ql.val[2 + g], hb = qh.val[g];
            const uint8x16_t hb2 = vshrq_n_u8(hb, 2);
            const uint8x16_t q0 = vandq_u8(vsliq_n_u8(la, hb, 4), m6);
            const uint8x16_t q1 = vandq_u8(vsliq_n_u8(lb, hb2, 4), m6);
            const uint8x16_t q2 = vandq_u8(vsriq_n_u8(hb, la, 4), m6);
            const uint8x16_t q3 = vsriq_n_u8(hb2, lb, 4); /* top bits of hb2 are 0 */
            p[8 * h + 0 + g] = i8dot16(vreinterpretq_s8_u8(q0), xv[0 + g]);
            p[8 * h + 2 + g] = i8dot16(vreinterpretq_s8_u8(q1), xv[2 + g]);
            p[8 * h + 4 + g] = i8dot16(vreinterpretq_s8_u8(q2), xv[4 + g]);
            p[8 * h + 6 + g] = i8dot16(vreinterpretq_s8_u8(q3), xv[6 + g]);
        }
    }
    int32x4_t sc[4];
    widen_s8x16(sc8, sc);
    const int32_t bias = bsums_dot16(x, vmovl_s8(vget_low_s8(sc8)), vmovl_high_s8(sc8));
    const int32_t isum = scaled_sum16(p, sc) - 32 * bias;
    *acc = fmaf(x->d * f16_arm(w->d), (float)isum, *acc);
    (void)acc_m;
}

/* ---- Q3_K: 16 sub-blocks of 16, 6-bit scales centred on 32, q = 2 + 1 bits - 4 ------- */

/* The 16 scales (minus 32) from the 12 packed bytes (q3_K_scale_words). */
VT_INLINE int8x16_t unpack_q3_K_scales(const uint8_t *p) {
    uint32_t s[4];
    q3_K_scale_words(p, s);
    const uint8x16_t v = vcombine_u8(vcreate_u8(s[0] | (uint64_t)s[1] << 32), vcreate_u8(s[2] | (uint64_t)s[3] << 32));
    return vsubq_s8(vreinterpretq_s8_u8(v), vdupq_n_s8(32));
}

VT_INLINE void q3_K_block(const block_q3_K *w, const block_q8_K *x, float *acc, float *acc_m) {
    const uint8x16_t m3 = vdupq_n_u8(7);
    const int8x16_t sc8 = unpack_q3_K_scales(w->scales);
    /* element 128h + 32k + l: bits 2k of qs[32h + l], bit 4h + k of hmask[l] */
    uint8x16_t hm[2] = {vld1q_u8(w->hmask), vld1q_u8(w->hmask + 16)};
    int32x4_t p[16];
    VT_UNROLL(8) for (int h = 0; h < 2; h++) {
        uint8x16_t qs[2] = {vld1q_u8(w->qs + 32 * h), vld1q_u8(w->qs + 32 * h + 16)};
        const int8x16x4_t x0 = vld1q_s8_x4(x->qs + 128 * h), x1 = vld1q_s8_x4(x->qs + 128 * h + 64);
        const int8x16_t xv[8] = {x0.val[0], x0.val[1], x0.val[2], x0.val[3],
                                 x1.val[0], x1.val[1], x1.val[2], x1.val[3]};
        VT_UNROLL(8) for (int k = 0; k < 4; k++) {
            VT_UNROLL(8) for (int g = 0; g < 2; g++) {
                /* (hm << 2) | (qs & 3), 3 bits */
                const uint8x16_t q = vandq_u8(vsliq_n_u8(qs[g], hm[g], 2), m3);
                p[8 * h + 2 * k + g] = i8dot16(vreinterpretq_s8_u8(q), xv[2 * k + g]);
                qs[g] = vshrq_n_u8(qs[g], 2);
                hm[g] = vshrq_n_u8(hm[g], 1);
            }
        }
    }
    int32x4_t sc[4];
    widen_s8x16(sc8, sc);
    const int32_t bias = bsums_dot16(x, vmovl_s8(vget_low_s8(sc8)), vmovl_high_s8(sc8));
    const int32_t isum = scaled_sum16(p, sc) - 4 * bias;
    *acc = fmaf(x->d * f16_arm(w->d), (float)isum, *acc);
    (void)acc_m;
}

/* ---- Q2_K: 16 sub-blocks of 16, 4-bit scale and min, q in 0..3 ------------------------ */

VT_INLINE void q2_K_block(const block_q2_K *w, const block_q8_K *x, float *acc, float *acc_m) {
    const uint8x16_t m2 = vdupq_n_u8(3);
    const uint8x16_t sc8 = vld1q_u8(w->scales);
    int32x4_t p[16];
    VT_UNROLL(8) for (int h = 0; h < 2; h++) {
        uint8x16_t qs[2] = {vld1q_u8(w->qs + 32 * h), vld1q_u8(w->qs + 32 * h + 16)};
        const int8x16x4_t x0 = vld1q_s8_x4(x->qs + 128 * h), x1 = vld1q_s8_x4(x->qs + 128 * h + 64);
        const int8x16_t xv[8] = {x0.val[0], x0.val[1], x0.val[2], x0.val[3],
                                 x1.val[0], x1.val[1], x1.val[2], x1.val[3]};
        VT_UNROLL(8) for (int k = 0; k < 4; k++) {
            VT_UNROLL(8) for (int g = 0; g < 2; g++) {
                const uint8x16_t q = k == 3 ? qs[g] : vandq_u8(qs[g], m2);
                p[8 * h + 2 * k + g] = i8dot16(vreinterpretq_s8_u8(q), xv[2 * k + g]);
                qs[g] = vshrq_n_u8(qs[g], 2);
            }
        }
    }
    int32x4_t sc[4];
    widen_s8x16(vreinterpretq_s8_u8(vandq_u8(sc8, vdupq_n_u8(0x0f))), sc);
    const uint8x16_t mn8 = vshrq_n_u8(sc8, 4);
    const int32_t summ = bsums_dot16(x, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn8))),
                                     vreinterpretq_s16_u16(vmovl_high_u8(mn8)));
    const int32_t isum = scaled_sum16(p, sc);
    *acc = fmaf(x->d * f16_arm(w->d), (float)isum, *acc);
    *acc_m = fmaf(x->d * f16_arm(w->dmin), (float)summ, *acc_m);
}

/* ---- IQ4_XS: 8 sub-blocks of 32 on the iq4nl grid, 6-bit scales centred on 32 -------- */

VT_INLINE void iq4_xs_block(const block_iq4_xs *w, const block_q8_K *x, float *acc, float *acc_m) {
    const int8x16_t grid = vld1q_s8(iq4nl_values);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    uint32_t lo4;
    memcpy(&lo4, w->scales_l, 4);
    int32_t ls[8];
    VT_UNROLL(8) for (int ib = 0; ib < 8; ib++)
        ls[ib] = (int32_t)((((lo4 >> (4 * ib)) & 0x0f) | (((w->scales_h >> (2 * ib)) & 3) << 4)) - 32);
    const uint8x16x4_t q0 = vld1q_u8_x4(w->qs), q1 = vld1q_u8_x4(w->qs + 64);
    const uint8x16_t qv[8] = {q0.val[0], q0.val[1], q0.val[2], q0.val[3],
                              q1.val[0], q1.val[1], q1.val[2], q1.val[3]};
    int32x4_t p[8];
    VT_UNROLL(8) for (int ib = 0; ib < 8; ib++) {
        /* 16 bytes: low nibbles elements 0..15 of the sub-block, high nibbles 16..31 */
        const int8x16x2_t xv = vld1q_s8_x2(x->qs + 32 * ib);
        const int8x16_t a = vqtbl1q_s8(grid, vandq_u8(qv[ib], m4));
        const int8x16_t b = vqtbl1q_s8(grid, vshrq_n_u8(qv[ib], 4));
        p[ib] = i8dot32(a, b, xv.val[0], xv.val[1]);
    }
    const int32x4_t v = vmlaq_s32(vmulq_s32(hsum4_i32(p[0], p[1], p[2], p[3]), vld1q_s32(ls)),
                                  hsum4_i32(p[4], p[5], p[6], p[7]), vld1q_s32(ls + 4));
    *acc = fmaf(x->d * f16_arm(w->d), (float)vaddvq_s32(v), *acc);
    (void)acc_m;
}

/* ---- row drivers ------------------------------------------------------------------- */

/* One row per call: a super-block already has 8-16 independent sub-block dots
 * in flight and uses most of the 32 vector registers, so rows are not
 * interleaved (four would spill); dot_rows is a loop over the single-row
 * kernel, bit-identical with it by construction. */
#define K_KERNEL(name, block_t)                                                            \
    float ARM_FN(dot, name)(int64_t n, const void *w, const void *xv) {                    \
        const block_t *wb = w;                                                             \
        const block_q8_K *x = xv;                                                          \
        float acc = 0.0f, acc_m = 0.0f;                                                    \
        for (int64_t b = 0; b < n / QK_K; b++) name##_block(wb + b, x + b, &acc, &acc_m);  \
        return acc - acc_m;                                                                \
    }                                                                                      \
    void ARM_FN(dot_rows, name)(int64_t n, const void *w, size_t ws, const void *x,        \
                                float *s, int nr) {                                        \
        for (int r = 0; r < nr; r++) s[r] = ARM_FN(dot, name)(n, (const uint8_t *)w + (size_t)r * ws, x); \
    }

K_KERNEL(q2_K, block_q2_K)
K_KERNEL(q3_K, block_q3_K)
K_KERNEL(q4_K, block_q4_K)
K_KERNEL(q5_K, block_q5_K)
K_KERNEL(q6_K, block_q6_K)
K_KERNEL(iq4_xs, block_iq4_xs)
