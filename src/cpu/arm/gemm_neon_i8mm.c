/* smmla GEMM over the packed Q8_0 layout of cpu/pack.h, ARMv8.6 i8mm.
 *
 * smmla multiplies a 2 x 8 int8 matrix by the transpose of another 2 x 8 and
 * adds the 2 x 2 int32 result: 32 multiply-adds per instruction against the 16
 * of sdot, but only when two weight rows meet two tokens. So this kernel takes
 * tokens in pairs, and only the full 4-token tile (prefill) comes here; fewer
 * tokens go to the sdot kernel of gemm_neon_dot.c, which computes the same
 * numbers.
 *
 * Operands from the packed layout: two consecutive chunk vectors k, k + 1 of a
 * row quad hold 4 + 4 bytes of rows 4q .. 4q + 3; zip1/zip2 of their 32-bit lanes
 * give [row 4q: 8 bytes | row 4q + 1: 8 bytes] and the same for rows 4q + 2, 4q + 3,
 * which is smmla's left operand for elements 8m .. 8m + 7. The right operand is
 * [token t0: 8 bytes | token t1: 8 bytes] (zip1/zip2 of 64-bit lanes), built once
 * per block. Accumulator lanes are (row a, t0), (row a, t1), (row b, t0),
 * (row b, t1); the scales are arranged the same way, and uzp1/uzp2 turn the
 * result back into per-token row vectors at the end. Per block the integer sums are exact and the float steps are the ref twin's
 * (acc = fma(d_w * d_x, (float)isum, acc) per output), so results are
 * bit-identical with pack_gemm_ref and with the sdot kernels.
 *
 * Register tile: 8 rows (two quads) x 2 token pairs: 8 int and 8 float
 * accumulators, 8 right operands; each left operand (one zip) feeds 2 smmla.
 *
 * Q4_0 has no smmla kernel: its nibbles need the and/shift of the sdot kernel
 * plus the zips, and the count came out above the sdot kernel's (336 against
 * 321 instructions per block of 16 rows x 4 tokens), so the i8mm tier keeps the
 * sdot GEMM for it. Q4_K and Q6_K have none either: the same nibble split and
 * zips, plus the per-sub-block scales in the (row pair, token pair) lane order
 * and either zips of the activations in every pass or a scratch copy of them;
 * counted on paper, a 4-token Q4_K smmla tile that fits the 32 registers comes
 * out about 10% below the sdot one (2450 instructions per super-block of 16 rows
 * x 4 tokens), not enough to carry a second kernel unmeasured. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "cpu/unroll.h"
#include "quant/blocks.h"

#define CHUNK_VEC (4 * PACK_ROWS)
#define UNROLL VT_UNROLL(16)

VT_INLINE int8x16_t zip_lo32(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s32(vzip1q_s32(vreinterpretq_s32_s8(a), vreinterpretq_s32_s8(b)));
}
VT_INLINE int8x16_t zip_hi32(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s32(vzip2q_s32(vreinterpretq_s32_s8(a), vreinterpretq_s32_s8(b)));
}
VT_INLINE int8x16_t zip_lo64(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
VT_INLINE int8x16_t zip_hi64(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

/* Right operands of block b for the token pair (t0, t1): rhs[m] covers elements
 * 8m .. 8m + 7; and the scale layout (dx_t0, dx_t1, dx_t0, dx_t1). */
VT_INLINE void pair_rhs(const block_q8_0 *x0, const block_q8_0 *x1, int8x16_t rhs[4], float32x4_t *dx) {
    const int8x16_t a0 = vld1q_s8(x0->qs), a1 = vld1q_s8(x0->qs + 16);
    const int8x16_t b0 = vld1q_s8(x1->qs), b1 = vld1q_s8(x1->qs + 16);
    rhs[0] = zip_lo64(a0, b0);
    rhs[1] = zip_hi64(a0, b0);
    rhs[2] = zip_lo64(a1, b1);
    rhs[3] = zip_hi64(a1, b1);
    const float d0 = f16_arm(x0->d), d1 = f16_arm(x1->d);
    *dx = vcombine_f32(vset_lane_f32(d1, vdup_n_f32(d0), 1), vset_lane_f32(d1, vdup_n_f32(d0), 1));
}

/* acc[i] += (dw * dx) * (float)p[i] for the two quads' lo/hi accumulators. */
VT_INLINE void scale_acc(const uint8_t *d, int q0, float32x4_t dx, const int32x4_t p[2][2],
                         float32x4_t acc[2][2]) {
    UNROLL for (int jq = 0; jq < 2; jq++) {
        const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(d + 8 * (q0 + jq))));
        const float32x4_t s_lo = vmulq_f32(vzip1q_f32(dw, dw), dx); /* rows 4q, 4q + 1 */
        const float32x4_t s_hi = vmulq_f32(vzip2q_f32(dw, dw), dx); /* rows 4q + 2, 4q + 3 */
        acc[jq][0] = vfmaq_f32(acc[jq][0], s_lo, vcvtq_f32_s32(p[jq][0]));
        acc[jq][1] = vfmaq_f32(acc[jq][1], s_hi, vcvtq_f32_s32(p[jq][1]));
    }
}

/* Per-token row vectors from the pair layout, stored at y (token t0) and y + ldy. */
VT_INLINE void store_pair(const float32x4_t acc[2][2], int q0, float *y, int64_t ldy) {
    UNROLL for (int jq = 0; jq < 2; jq++) {
        vst1q_f32(y + 4 * (q0 + jq), vuzp1q_f32(acc[jq][0], acc[jq][1]));
        vst1q_f32(y + ldy + 4 * (q0 + jq), vuzp2q_f32(acc[jq][0], acc[jq][1]));
    }
}

/* Rows 4 q0 .. 4 q0 + 7 of one group for np token pairs starting at xr[0]. */
VT_INLINE void q8_0_mm_half(int64_t nb, const uint8_t *g, const block_q8_0 *const *xr, float *y,
                            int64_t ldy, const int q0, const int np) {
    float32x4_t acc[2][2][2];
    UNROLL for (int i = 0; i < np; i++) UNROLL for (int jq = 0; jq < 2; jq++)
        acc[i][jq][0] = acc[i][jq][1] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *v = g + pack_pair_qs(nb, b, PACK_QB_Q8_0);
        int8x16_t rhs[2][4];
        float32x4_t dx[2];
        int32x4_t p[2][2][2];
        UNROLL for (int i = 0; i < np; i++) {
            pair_rhs(&xr[2 * i][b], &xr[2 * i + 1][b], rhs[i], &dx[i]);
            UNROLL for (int jq = 0; jq < 2; jq++) p[i][jq][0] = p[i][jq][1] = vdupq_n_s32(0);
        }
        UNROLL for (int m = 0; m < 4; m++) {
            UNROLL for (int jq = 0; jq < 2; jq++) {
                const int8x16_t ra = vld1q_s8((const int8_t *)(v + 2 * m * CHUNK_VEC + 16 * (q0 + jq)));
                const int8x16_t rb = vld1q_s8((const int8_t *)(v + (2 * m + 1) * CHUNK_VEC + 16 * (q0 + jq)));
                const int8x16_t lo = zip_lo32(ra, rb), hi = zip_hi32(ra, rb);
                UNROLL for (int i = 0; i < np; i++) {
                    p[i][jq][0] = vmmlaq_s32(p[i][jq][0], lo, rhs[i][m]);
                    p[i][jq][1] = vmmlaq_s32(p[i][jq][1], hi, rhs[i][m]);
                }
            }
        }
        UNROLL for (int i = 0; i < np; i++) scale_acc(g + pack_pair_d(b, PACK_QB_Q8_0), q0, dx[i], p[i], acc[i]);
    }
    UNROLL for (int i = 0; i < np; i++) store_pair(acc[i], q0, y + 2 * i * ldy, ldy);
}

/* Four tokens (the prefill tile) take the smmla path; fewer go to the sdot
 * kernel: with this layout every smmla operand costs a zip, which only two
 * token pairs sharing it amortise (BENCHMARKS.md, ARM64 section). */
void gemm_q8_0_neon_i8mm(int64_t n_in, const void *w, int64_t n_groups, const void *x,
                         size_t x_stride, const pack_xblock *xs, int n_tok, float *y, int64_t ldy) {
    if (n_tok != 4) {
        gemm_q8_0_neon_dot(n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy);
        return;
    }
    const int64_t nb = n_in / QK8_0;
    const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_q8_0);
    const block_q8_0 *xr[4];
    for (int t = 0; t < 4; t++) xr[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride);
    for (int64_t gi = 0; gi < n_groups; gi++) {
        const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;
        q8_0_mm_half(nb, g, xr, y + gi * PACK_ROWS, ldy, 0, 2);
        q8_0_mm_half(nb, g, xr, y + gi * PACK_ROWS, ldy, 2, 2);
    }
}
