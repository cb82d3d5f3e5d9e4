/* sdot GEMMs over the packed layouts of cpu/pack.h (Q4_0, Q8_0), ARMv8.2 dotprod.
 *
 * A 64-byte chunk vector holds 4 quant bytes of each of the 16 rows of a group:
 * four q registers of 4 rows each. The indexed form of sdot,
 *   sdot acc.4s, w.16b, x.4b[lane]
 * dots each row's 4 bytes with the same 4 activation bytes (a lane of the token's
 * block, loaded once per block), so every 32-bit lane of the accumulator is one
 * row's partial dot: no broadcast, no horizontal reduction. Q4_0 nibbles are
 * dotted unsigned (0..15) and the -8 offset comes out exactly with the block's
 * activation sum (pack_block_sums): the accumulator starts at -8 * sum. Per
 * block the integer sums are exact, then acc = fma(d_w * d_x, (float)isum, acc)
 * per (row, token) lane as the _ref twins do, so results are bit-identical with
 * them (and with every other tier).
 *
 * Register tile: up to 8 accumulators of each kind (int per block, float per
 * row). One or two tokens take all 16 rows at once; three or four tokens take
 * the group as two halves of 8 rows, so the 32 vector registers never spill. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "quant/blocks.h"

#define CHUNK_VEC (4 * PACK_ROWS)
#define UNROLL _Pragma("GCC unroll 16")

/* Rows 4 * q0 .. 4 * (q0 + nq) - 1 of one group (nq row quads), nt tokens. */
VT_INLINE void q8_0_tile(int64_t nb, const uint8_t *g, const block_q8_0 *const *xr, float *y,
                         int64_t ldy, const int q0, const int nq, const int nt) {
    const uint8_t *d = g, *qs = g + nb * PACK_ROWS * sizeof(uint16_t);
    float32x4_t acc[PACK_TOK_MAX][4];
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nq; q++) acc[t][q] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *v = qs + b * 8 * CHUNK_VEC;
        int8x16_t x0[PACK_TOK_MAX], x1[PACK_TOK_MAX];
        float dx[PACK_TOK_MAX];
        UNROLL for (int t = 0; t < nt; t++) {
            x0[t] = vld1q_s8(xr[t][b].qs);
            x1[t] = vld1q_s8(xr[t][b].qs + 16);
            dx[t] = f16_arm(xr[t][b].d);
        }
        int32x4_t p[PACK_TOK_MAX][4];
        UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nq; q++) p[t][q] = vdupq_n_s32(0);
        UNROLL for (int k = 0; k < 8; k++) {
            UNROLL for (int q = 0; q < nq; q++) {
                const int8x16_t wq = vld1q_s8((const int8_t *)(v + k * CHUNK_VEC + 16 * (q0 + q)));
                UNROLL for (int t = 0; t < nt; t++) {
                    if (k < 4) p[t][q] = vdotq_laneq_s32(p[t][q], wq, x0[t], k & 3);
                    else p[t][q] = vdotq_laneq_s32(p[t][q], wq, x1[t], k & 3);
                }
            }
        }
        UNROLL for (int q = 0; q < nq; q++) {
            const float16x4_t h = vreinterpret_f16_u8(vld1_u8(d + b * 2 * PACK_ROWS + 8 * (q0 + q)));
            const float32x4_t dw = vcvt_f32_f16(h);
            UNROLL for (int t = 0; t < nt; t++)
                acc[t][q] = vfmaq_f32(acc[t][q], vmulq_n_f32(dw, dx[t]), vcvtq_f32_s32(p[t][q]));
        }
    }
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nq; q++)
        vst1q_f32(y + t * ldy + 4 * (q0 + q), acc[t][q]);
}

VT_INLINE void q4_0_tile(int64_t nb, const uint8_t *g, const block_q8_0 *const *xr,
                         const int32_t *xs, float *y, int64_t ldy, const int q0, const int nq,
                         const int nt) {
    const uint8_t *d = g, *qs = g + nb * PACK_ROWS * sizeof(uint16_t);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float32x4_t acc[PACK_TOK_MAX][4];
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nq; q++) acc[t][q] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *v = qs + b * 4 * CHUNK_VEC;
        int8x16_t x0[PACK_TOK_MAX], x1[PACK_TOK_MAX];
        float dx[PACK_TOK_MAX];
        int32x4_t p[PACK_TOK_MAX][4];
        UNROLL for (int t = 0; t < nt; t++) {
            x0[t] = vld1q_s8(xr[t][b].qs);
            x1[t] = vld1q_s8(xr[t][b].qs + 16);
            dx[t] = f16_arm(xr[t][b].d);
            const int32x4_t start = vdupq_n_s32(-8 * xs[t * nb + b]);
            UNROLL for (int q = 0; q < nq; q++) p[t][q] = start;
        }
        UNROLL for (int k = 0; k < 4; k++) {
            UNROLL for (int q = 0; q < nq; q++) {
                const uint8x16_t raw = vld1q_u8(v + k * CHUNK_VEC + 16 * (q0 + q));
                const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(raw, m4));
                const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
                UNROLL for (int t = 0; t < nt; t++) {
                    p[t][q] = vdotq_laneq_s32(p[t][q], lo, x0[t], k);
                    p[t][q] = vdotq_laneq_s32(p[t][q], hi, x1[t], k);
                }
            }
        }
        UNROLL for (int q = 0; q < nq; q++) {
            const float16x4_t h = vreinterpret_f16_u8(vld1_u8(d + b * 2 * PACK_ROWS + 8 * (q0 + q)));
            const float32x4_t dw = vcvt_f32_f16(h);
            UNROLL for (int t = 0; t < nt; t++)
                acc[t][q] = vfmaq_f32(acc[t][q], vmulq_n_f32(dw, dx[t]), vcvtq_f32_s32(p[t][q]));
        }
    }
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nq; q++)
        vst1q_f32(y + t * ldy + 4 * (q0 + q), acc[t][q]);
}

/* One group for nt tokens: all 16 rows for 1-2 tokens, two halves for 3-4. */
#define GROUP_DISPATCH(tile, ...)                                                          \
    switch (nt) {                                                                          \
    case 1: tile(__VA_ARGS__, 0, 4, 1); break;                                             \
    case 2: tile(__VA_ARGS__, 0, 4, 2); break;                                             \
    case 3: tile(__VA_ARGS__, 0, 2, 3); tile(__VA_ARGS__, 2, 2, 3); break;                 \
    default: tile(__VA_ARGS__, 0, 2, 4); tile(__VA_ARGS__, 2, 2, 4); break;                \
    }

void gemm_q8_0_neon_dot(int64_t n_in, const void *w, int64_t n_groups, const void *x,
                        size_t x_stride, const int32_t *x_sums, int n_tok, float *y, int64_t ldy) {
    (void)x_sums;
    const int64_t nb = n_in / QK8_0;
    const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_q8_0);
    const block_q8_0 *xr[PACK_TOK_MAX];
    for (int t = 0; t < n_tok; t++) xr[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride);
    const int nt = n_tok;
    for (int64_t gi = 0; gi < n_groups; gi++) {
        const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;
        float *yg = y + gi * PACK_ROWS;
        GROUP_DISPATCH(q8_0_tile, nb, g, xr, yg, ldy)
    }
}

void gemm_q4_0_neon_dot(int64_t n_in, const void *w, int64_t n_groups, const void *x,
                        size_t x_stride, const int32_t *x_sums, int n_tok, float *y, int64_t ldy) {
    const int64_t nb = n_in / QK4_0;
    const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_q4_0);
    const block_q8_0 *xr[PACK_TOK_MAX];
    for (int t = 0; t < n_tok; t++) xr[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride);
    const int nt = n_tok;
    for (int64_t gi = 0; gi < n_groups; gi++) {
        const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;
        float *yg = y + gi * PACK_ROWS;
        GROUP_DISPATCH(q4_0_tile, nb, g, xr, x_sums, yg, ldy)
    }
}
