/* NEON dots of the 32-element block types, included by dot_legacy_neon.c (plain
 * ASIMD) and dot_legacy_neon_dot.c (sdot) with ARM_SFX set to the tier:
 * Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 x Q8_0 and Q4_1, Q5_1 x Q8_1.
 *
 * Per block the integer dot is exact (neon_common.h), then its 4 int32 lanes are
 * converted and accumulated in float with d_w * d_x, even blocks into one
 * accumulator and odd blocks into another (two fma chains in flight), summed at
 * the end. Each kernel is one always-inline routine over NR weight rows sharing
 * the activation loads; dot (NR = 1) and dot_rows (NR = 2..4) run the same
 * operations per row in the same order, so they agree bit for bit.
 *
 * Q4_0 decodes without a subtraction: with v = qs ^ 0x88 each nibble holds q - 8
 * as a 4-bit two's complement number, so (v << 4) and (v & 0xf0), read as int8,
 * are 16 (q_lo - 8) and 16 (q_hi - 8). The block's integer dot is then exactly
 * 16 times the ref's, and the scale carries the 1/16 (a power of two: the float
 * result is the same as the ref's unscaled product). */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "cpu/unroll.h"
#include "quant/blocks.h"

#include <math.h>

#ifndef ARM_SFX
#error "define ARM_SFX (the tier suffix) before including dot_legacy_impl.h"
#endif

/* Masks (0xff where set) of the 32 fifth bits of a Q5 block: m[0] for elements
 * 0..15 (qh bits 0..15), m[1] for 16..31. */
VT_INLINE void q5_high_masks(const uint8_t qh[4], uint8x16_t m[2]) {
    static const uint8_t idx_lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t idx_hi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t u;
    memcpy(&u, qh, 4);
    const uint8x16_t rep = vreinterpretq_u8_u32(vdupq_n_u32(u));
    const uint8x16_t b = vld1q_u8(bit);
    m[0] = vtstq_u8(vqtbl1q_u8(rep, vld1q_u8(idx_lo)), b);
    m[1] = vtstq_u8(vqtbl1q_u8(rep, vld1q_u8(idx_hi)), b);
}

/* The 32 weights of one block as int8 (elements 0..15 in q[0], 16..31 in q[1]). */
VT_INLINE void q4_0_bytes(const block_q4_0 *b, int8x16_t q[2]) {
    const uint8x16_t v = veorq_u8(vld1q_u8(b->qs), vdupq_n_u8(0x88));
    q[0] = vreinterpretq_s8_u8(vshlq_n_u8(v, 4));
    q[1] = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0xf0)));
}
VT_INLINE void q5_0_bytes(const block_q5_0 *b, int8x16_t q[2]) {
    /* (nibble | hbit << 4) - 16 == nibble | (hbit ? 0 : 0xf0) as int8 */
    uint8x16_t m[2];
    q5_high_masks(b->qh, m);
    const uint8x16_t v = vld1q_u8(b->qs), f0 = vdupq_n_u8(0xf0);
    q[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0f)), vbicq_u8(f0, m[0])));
    q[1] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), vbicq_u8(f0, m[1])));
}
VT_INLINE void q8_0_bytes(const block_q8_0 *b, int8x16_t q[2]) {
    q[0] = vld1q_s8(b->qs);
    q[1] = vld1q_s8(b->qs + 16);
}
VT_INLINE void iq4_nl_bytes(const block_iq4_nl *b, int8x16_t q[2]) {
    const int8x16_t grid = vld1q_s8(iq4nl_values);
    const uint8x16_t v = vld1q_u8(b->qs);
    q[0] = vqtbl1q_s8(grid, vandq_u8(v, vdupq_n_u8(0x0f)));
    q[1] = vqtbl1q_s8(grid, vshrq_n_u8(v, 4));
}
VT_INLINE void mxfp4_bytes(const block_mxfp4 *b, int8x16_t q[2]) {
    const int8x16_t grid = vld1q_s8(mxfp4_values);
    const uint8x16_t v = vld1q_u8(b->qs);
    q[0] = vqtbl1q_s8(grid, vandq_u8(v, vdupq_n_u8(0x0f)));
    q[1] = vqtbl1q_s8(grid, vshrq_n_u8(v, 4));
}
VT_INLINE void q4_1_bytes(const block_q4_1 *b, int8x16_t q[2]) {
    const uint8x16_t v = vld1q_u8(b->qs);
    q[0] = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f)));
    q[1] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
}
VT_INLINE void q5_1_bytes(const block_q5_1 *b, int8x16_t q[2]) {
    uint8x16_t m[2];
    q5_high_masks(b->qh, m);
    const uint8x16_t v = vld1q_u8(b->qs), b4 = vdupq_n_u8(0x10);
    q[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0f)), vandq_u8(m[0], b4)));
    q[1] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), vandq_u8(m[1], b4)));
}

/* Four fp16 scales from p, p + stride, ... (count < 4: the rest are 0), as floats. */
VT_INLINE float32x4_t f16x4_strided(const uint8_t *p, size_t stride, int count) {
    uint16x4_t h;
    if (count == 4) {
        h = vld1_dup_u16((const uint16_t *)p);
        h = vld1_lane_u16((const uint16_t *)(p + stride), h, 1);
        h = vld1_lane_u16((const uint16_t *)(p + 2 * stride), h, 2);
        h = vld1_lane_u16((const uint16_t *)(p + 3 * stride), h, 3);
    } else {
        uint16_t t[4] = {0, 0, 0, 0};
        for (int i = 0; i < count; i++) memcpy(&t[i], p + i * stride, 2);
        h = vld1_u16(t);
    }
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* Four halved E8M0 scales (MXFP4) from p, p + stride, ... (count < 4: the rest
 * are 0), as floats. */
VT_INLINE float32x4_t e8m0x4_strided(const uint8_t *p, size_t stride, int count) {
    float f[4] = {0, 0, 0, 0};
    for (int i = 0; i < count; i++) f[i] = mxfp4_e8m0_half(p[i * stride]);
    return vld1q_f32(f);
}

/* The scales of blocks b .. b + cnt - 1 of a row, by the block's scale field. */
#define SCALE4_F16(wb, cnt) f16x4_strided((const uint8_t *)&(wb)->d, sizeof *(wb), cnt)
#define SCALE4_E8M0(wb, cnt) e8m0x4_strided(&(wb)->e, sizeof *(wb), cnt)

/* The integer dot of block b of row r as 4 float lanes. */
#define BLOCK_DOT(name, block_t, b, r, x0, x1)                                             \
    ({                                                                                     \
        int8x16_t q_[2];                                                                   \
        name##_bytes((const block_t *)(w + (size_t)(r) * ws) + (b), q_);                   \
        vcvtq_f32_s32(i8dot32(q_[0], q_[1], x0, x1));                                      \
    })

/* Blocks are taken four at a time: their scales d_w * d_x are formed as one
 * vector (4 lane loads + 1 convert + 1 multiply per row instead of 4 scalar
 * converts and multiplies), and block b of the group goes into accumulator
 * b & 1 with lane b of that vector. A group of fewer than 4 (the tail) does the
 * same with the missing lanes zero. */
#define GROUP_STEP(name, block_t, k)                                                       \
    do {                                                                                   \
        const int8x16_t x0 = vld1q_s8(x[b + k].qs), x1 = vld1q_s8(x[b + k].qs + 16);       \
        VT_UNROLL(4) for (int r = 0; r < nr; r++)                                          \
            acc[r][k & 1] = vfmaq_laneq_f32(acc[r][k & 1], BLOCK_DOT(name, block_t, b + k, r, x0, x1), \
                                            d4[r], k);                                     \
    } while (0)

#define GROUP_TAIL(name, block_t)                                                          \
    do {                                                                                   \
        float dl[CPU_DOT_ROWS_MAX][4];                                                     \
        VT_UNROLL(4) for (int r = 0; r < nr; r++) vst1q_f32(dl[r], d4[r]);                 \
        for (int k = 0; k < cnt; k++) {                                                    \
            const int8x16_t x0 = vld1q_s8(x[b + k].qs), x1 = vld1q_s8(x[b + k].qs + 16);   \
            VT_UNROLL(4) for (int r = 0; r < nr; r++) {                                    \
                const float32x4_t p = BLOCK_DOT(name, block_t, b + k, r, x0, x1);          \
                if (k & 1) acc[r][1] = vfmaq_n_f32(acc[r][1], p, dl[r][k]);                \
                else acc[r][0] = vfmaq_n_f32(acc[r][0], p, dl[r][k]);                      \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* The cnt blocks from b on, their scales in d4: four unrolled, else the tail. */
#define GROUP_DOTS(name, block_t)                                                          \
    do {                                                                                   \
        if (cnt == 4) {                                                                    \
            GROUP_STEP(name, block_t, 0);                                                  \
            GROUP_STEP(name, block_t, 1);                                                  \
            GROUP_STEP(name, block_t, 2);                                                  \
            GROUP_STEP(name, block_t, 3);                                                  \
        } else {                                                                           \
            GROUP_TAIL(name, block_t);                                                     \
        }                                                                                  \
    } while (0)

/* Symmetric types x Q8_0: s[r] = sum_b d_w d_x * dot_i8(w_b, x_b). `unit` is
 * the factor the bytes function leaves on the integer dot (1/16 for Q4_0),
 * applied once at the end (exact: a power of two). */
#define SYM_KERNEL(name, block_t, unit, scale4)                                            \
    VT_INLINE void name##_rows(int64_t n, const uint8_t *w, size_t ws, const block_q8_0 *x, \
                               float *s, const int nr) {                                   \
        const int64_t nb = n / QK8_0;                                                      \
        float32x4_t acc[CPU_DOT_ROWS_MAX][2];                                              \
        VT_UNROLL(4) for (int r = 0; r < nr; r++)                                          \
            acc[r][0] = acc[r][1] = vdupq_n_f32(0.0f);                                     \
        for (int64_t b = 0; b < nb; b += 4) {                                              \
            const int cnt = nb - b < 4 ? (int)(nb - b) : 4;                                \
            const float32x4_t dx4 = f16x4_strided((const uint8_t *)&x[b].d, sizeof *x, cnt); \
            float32x4_t d4[CPU_DOT_ROWS_MAX];                                              \
            VT_UNROLL(4) for (int r = 0; r < nr; r++) {                                    \
                const block_t *wb = (const block_t *)(w + (size_t)r * ws) + b;             \
                d4[r] = vmulq_f32(scale4(wb, cnt), dx4);                                   \
            }                                                                              \
            GROUP_DOTS(name, block_t);                                                     \
        }                                                                                  \
        VT_UNROLL(4) for (int r = 0; r < nr; r++)                                          \
            s[r] = vaddvq_f32(vaddq_f32(acc[r][0], acc[r][1])) * (unit);                   \
    }

/* Offset types x Q8_1: s[r] = sum_b d_w d_x * dot(q_w, x_b) + sum_b m_w * s_x,
 * the second sum kept in 4 lanes (block b in lane b % 4). */
#define OFS_KERNEL(name, block_t)                                                          \
    VT_INLINE void name##_rows(int64_t n, const uint8_t *w, size_t ws, const block_q8_1 *x, \
                               float *s, const int nr) {                                   \
        const int64_t nb = n / QK8_1;                                                      \
        float32x4_t acc[CPU_DOT_ROWS_MAX][2], summ[CPU_DOT_ROWS_MAX];                      \
        VT_UNROLL(4) for (int r = 0; r < nr; r++)                                          \
            acc[r][0] = acc[r][1] = summ[r] = vdupq_n_f32(0.0f);                           \
        for (int64_t b = 0; b < nb; b += 4) {                                              \
            const int cnt = nb - b < 4 ? (int)(nb - b) : 4;                                \
            const float32x4_t dx4 = f16x4_strided((const uint8_t *)&x[b].d, sizeof *x, cnt); \
            const float32x4_t sx4 = f16x4_strided((const uint8_t *)&x[b].s, sizeof *x, cnt); \
            float32x4_t d4[CPU_DOT_ROWS_MAX];                                              \
            VT_UNROLL(4) for (int r = 0; r < nr; r++) {                                    \
                const block_t *wb = (const block_t *)(w + (size_t)r * ws) + b;             \
                d4[r] = vmulq_f32(f16x4_strided((const uint8_t *)&wb->d, sizeof *wb, cnt), dx4); \
                summ[r] = vfmaq_f32(summ[r], f16x4_strided((const uint8_t *)&wb->m, sizeof *wb, cnt), sx4); \
            }                                                                              \
            GROUP_DOTS(name, block_t);                                                     \
        }                                                                                  \
        VT_UNROLL(4) for (int r = 0; r < nr; r++)                                          \
            s[r] = vaddvq_f32(vaddq_f32(acc[r][0], acc[r][1])) + vaddvq_f32(summ[r]);      \
    }

SYM_KERNEL(q4_0, block_q4_0, 0.0625f, SCALE4_F16)
SYM_KERNEL(q5_0, block_q5_0, 1.0f, SCALE4_F16)
SYM_KERNEL(q8_0, block_q8_0, 1.0f, SCALE4_F16)
SYM_KERNEL(iq4_nl, block_iq4_nl, 1.0f, SCALE4_F16)
SYM_KERNEL(mxfp4, block_mxfp4, 1.0f, SCALE4_E8M0)
OFS_KERNEL(q4_1, block_q4_1)
OFS_KERNEL(q5_1, block_q5_1)

CPU_DEFINE_DOT(q4_0, ARM_SFX)
CPU_DEFINE_DOT(q5_0, ARM_SFX)
CPU_DEFINE_DOT(q8_0, ARM_SFX)
CPU_DEFINE_DOT(iq4_nl, ARM_SFX)
CPU_DEFINE_DOT(mxfp4, ARM_SFX)
CPU_DEFINE_DOT(q4_1, ARM_SFX)
CPU_DEFINE_DOT(q5_1, ARM_SFX)
