/* sdot GEMMs over the packed layouts of cpu/pack.h (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q4_K, Q5_K, Q6_K, MXFP4), ARMv8.2 dotprod.
 *
 * A 64-byte chunk vector holds 4 quant bytes of each of the 16 rows of a group:
 * four q registers of 4 rows each. The indexed form of sdot,
 *   sdot acc.4s, w.16b, x.4b[lane]
 * dots each row's 4 bytes with the same 4 activation bytes (a lane of the token's
 * block, loaded once per block), so every 32-bit lane of the accumulator is one
 * row's partial dot: no broadcast, no horizontal reduction. Q4_0 nibbles are
 * dotted unsigned (0..15) and the -8 offset comes out exactly with the block's
 * activation sum (pack_xblock.bias): the accumulator starts at -8 * sum. Per
 * block the integer sums are exact, then acc = fma(d_w * d_x, (float)isum, acc)
 * per (row, token) lane as the _ref twins do, so results are bit-identical with
 * them (and with every other tier).
 *
 * Register tile (Q4_0, Q8_0, MXFP4; the K-quants' below): up to 8 accumulators
 * of each kind (int per block, float per row). One or two tokens take all 16
 * rows at once; three or four tokens take the group as two halves of 8 rows, so
 * the 32 vector registers never spill. One token takes two groups at once, g
 * and g + n_groups / 2 of the call (the last of an odd count alone), so decode
 * reads two long streams (x86/gemm_impl.h legacy_tiles says why); the sums
 * and float steps of each row are those of its group alone. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "cpu/unroll.h"
#include "quant/blocks.h"

#include <stddef.h>

#define CHUNK_VEC (4 * PACK_ROWS)
#define UNROLL VT_UNROLL(16)
/* vdotq_laneq_s32 with a lane that the unrolled loops make a constant; not
 * optimizing (a Debug build), nothing is unrolled and the lane goes through a
 * switch, which the intrinsic's constant-immediate rule needs. */
#ifdef __OPTIMIZE__
#define DOT_LANE(acc, w, x, lane) vdotq_laneq_s32(acc, w, x, lane)
#else
static inline int32x4_t dot_lane_unoptimized(int32x4_t acc, int8x16_t w, int8x16_t x, int lane) {
    switch (lane & 3) {
    case 0: return vdotq_laneq_s32(acc, w, x, 0);
    case 1: return vdotq_laneq_s32(acc, w, x, 1);
    case 2: return vdotq_laneq_s32(acc, w, x, 2);
    default: return vdotq_laneq_s32(acc, w, x, 3);
    }
}
#define DOT_LANE(acc, w, x, lane) dot_lane_unoptimized(acc, w, x, lane)
#endif

/* Row quads a legacy-type tile takes at most: 4 quads of 2 groups. */
#define TILE_QUADS_MAX 8

/* Quad r of a tile over ns streams of nq row quads each (from quad q0 on): quad
 * q0 + r % nq of stream r / nq, whose group lies gs bytes (its outputs ys
 * floats) after the previous stream's. Its byte offset from the tile's first
 * group in a vector of row_bytes bytes a row (4: a chunk vector; 2: f16 scales;
 * 1: E8M0 scales), and its output offset. */
VT_INLINE size_t quad_off(const int r, const int q0, const int nq, size_t gs, const size_t row_bytes) {
    return (size_t)(r / nq) * gs + (size_t)(q0 + r % nq) * 4 * row_bytes;
}
VT_INLINE int64_t quad_row(const int r, const int q0, const int nq, int64_t ys) {
    return (int64_t)(r / nq) * ys + 4 * (q0 + r % nq);
}

/* Rows 4 * q0 .. 4 * (q0 + nq) - 1 (nq row quads) of ns groups gs bytes apart
 * (outputs ys floats apart), nt tokens. */
VT_INLINE void q8_0_tile(int64_t nb, const uint8_t *g, size_t gs, const int ns, const block_q8_0 *const *xr,
                         const pack_xblock *xs, float *y, int64_t ys, int64_t ldy, const int q0, const int nq,
                         const int nt) {
    (void)xs;
    const int nr = ns * nq;
    float32x4_t acc[PACK_TOK_MAX][TILE_QUADS_MAX];
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nr; q++) acc[t][q] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *v = g + pack_pair_qs(nb, b, PACK_QB_Q8_0);
        int8x16_t x0[PACK_TOK_MAX], x1[PACK_TOK_MAX];
        float dx[PACK_TOK_MAX];
        UNROLL for (int t = 0; t < nt; t++) {
            x0[t] = vld1q_s8(xr[t][b].qs);
            x1[t] = vld1q_s8(xr[t][b].qs + 16);
            dx[t] = f16_arm(xr[t][b].d);
        }
        int32x4_t p[PACK_TOK_MAX][TILE_QUADS_MAX];
        UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nr; q++) p[t][q] = vdupq_n_s32(0);
        UNROLL for (int k = 0; k < 8; k++) {
            UNROLL for (int q = 0; q < nr; q++) {
                const int8x16_t wq = vld1q_s8((const int8_t *)(v + k * CHUNK_VEC + quad_off(q, q0, nq, gs, 4)));
                UNROLL for (int t = 0; t < nt; t++) {
                    if (k < 4) p[t][q] = DOT_LANE(p[t][q], wq, x0[t], k & 3);
                    else p[t][q] = DOT_LANE(p[t][q], wq, x1[t], k & 3);
                }
            }
        }
        UNROLL for (int q = 0; q < nr; q++) {
            const float16x4_t h = vreinterpret_f16_u8(vld1_u8(g + pack_pair_d(b, PACK_QB_Q8_0) + quad_off(q, q0, nq, gs, 2)));
            const float32x4_t dw = vcvt_f32_f16(h);
            UNROLL for (int t = 0; t < nt; t++)
                acc[t][q] = vfmaq_f32(acc[t][q], vmulq_n_f32(dw, dx[t]), vcvtq_f32_s32(p[t][q]));
        }
    }
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nr; q++)
        vst1q_f32(y + t * ldy + quad_row(q, q0, nq, ys), acc[t][q]);
}

VT_INLINE void q4_0_tile(int64_t nb, const uint8_t *g, size_t gs, const int ns, const block_q8_0 *const *xr,
                         const pack_xblock *xs, float *y, int64_t ys, int64_t ldy, const int q0, const int nq,
                         const int nt) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int nr = ns * nq;
    float32x4_t acc[PACK_TOK_MAX][TILE_QUADS_MAX];
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nr; q++) acc[t][q] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *v = g + pack_pair_qs(nb, b, PACK_QB_Q4_0);
        int8x16_t x0[PACK_TOK_MAX], x1[PACK_TOK_MAX];
        float dx[PACK_TOK_MAX];
        int32x4_t p[PACK_TOK_MAX][TILE_QUADS_MAX];
        UNROLL for (int t = 0; t < nt; t++) {
            x0[t] = vld1q_s8(xr[t][b].qs);
            x1[t] = vld1q_s8(xr[t][b].qs + 16);
            dx[t] = xs[t * nb + b].d;
            const int32x4_t start = vdupq_n_s32(xs[t * nb + b].bias);
            UNROLL for (int q = 0; q < nr; q++) p[t][q] = start;
        }
        UNROLL for (int k = 0; k < 4; k++) {
            UNROLL for (int q = 0; q < nr; q++) {
                const uint8x16_t raw = vld1q_u8(v + k * CHUNK_VEC + quad_off(q, q0, nq, gs, 4));
                const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(raw, m4));
                const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
                UNROLL for (int t = 0; t < nt; t++) {
                    p[t][q] = DOT_LANE(p[t][q], lo, x0[t], k);
                    p[t][q] = DOT_LANE(p[t][q], hi, x1[t], k);
                }
            }
        }
        UNROLL for (int q = 0; q < nr; q++) {
            const float16x4_t h = vreinterpret_f16_u8(vld1_u8(g + pack_pair_d(b, PACK_QB_Q4_0) + quad_off(q, q0, nq, gs, 2)));
            const float32x4_t dw = vcvt_f32_f16(h);
            UNROLL for (int t = 0; t < nt; t++)
                acc[t][q] = vfmaq_f32(acc[t][q], vmulq_n_f32(dw, dx[t]), vcvtq_f32_s32(p[t][q]));
        }
    }
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nr; q++)
        vst1q_f32(y + t * ldy + quad_row(q, q0, nq, ys), acc[t][q]);
}

/* One token over two groups (tile##_pair), each its own function built without
 * GCC's pre-allocation scheduler, which hoists the loads of the unrolled block
 * and spills the tile (see the K-quants below). */
#define LEGACY_PAIR(tile)                                                                              \
    static __attribute__((noinline)) void tile##_pair(int64_t nb, const uint8_t *g, size_t gs,           \
                                                      const block_q8_0 *const *xr, const pack_xblock *xs, \
                                                      float *y, int64_t ys, int64_t ldy) {               \
        tile(nb, g, gs, 2, xr, xs, y, ys, ldy, 0, 4, 1);                                                \
    }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-schedule-insns")
#endif
LEGACY_PAIR(q8_0_tile)
LEGACY_PAIR(q4_0_tile)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* One group of 16 rows (4 row quads) for n_tok tokens over tile(ARGS..., q0,
 * nq, nt): all four quads a tile for 1-2 tokens, two halves for 3-4 (the
 * accumulators of 4 quads x 4 tokens would not fit the registers). */
#define GROUP_TILES(tile, n_tok, ...)                                                               \
    switch (n_tok) {                                                                                \
    case 1: tile(__VA_ARGS__, 0, 4, 1); break;                                                      \
    case 2: tile(__VA_ARGS__, 0, 4, 2); break;                                                      \
    case 3: tile(__VA_ARGS__, 0, 2, 3); tile(__VA_ARGS__, 2, 2, 3); break;                          \
    default: tile(__VA_ARGS__, 0, 2, 4); tile(__VA_ARGS__, 2, 2, 4); break;                         \
    }

/* The body of a legacy-type GEMM over tile (q8_0_tile, q4_0_tile, mxfp4_tile):
 * all groups of the call for n_tok tokens. One token: groups g and g + h (h =
 * n_groups / 2) a tile, all 16 rows of each, then the last of an odd count; one
 * group a tile otherwise, all 16 rows for 2 tokens, two halves for 3-4. */
#define LEGACY_GEMM_BODY(tile, blk)                                                                 \
    const int64_t nb = n_in / 32;                                                                   \
    const size_t gb = (size_t)nb * PACK_ROWS * sizeof(blk);                                         \
    const block_q8_0 *xr[PACK_TOK_MAX];                                                             \
    for (int t = 0; t < n_tok; t++) xr[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride); \
    const uint8_t *w8 = w;                                                                          \
    int64_t gi = 0;                                                                                 \
    if (n_tok == 1 && n_groups >= 2) {                                                              \
        const int64_t h = n_groups / 2;                                                             \
        for (; gi < h; gi++)                                                                        \
            tile##_pair(nb, w8 + (size_t)gi * gb, (size_t)h * gb, xr, xs, y + gi * PACK_ROWS, h * PACK_ROWS, ldy); \
        gi = 2 * h;                                                                                 \
    }                                                                                               \
    for (; gi < n_groups; gi++) {                                                                   \
        const uint8_t *g = w8 + (size_t)gi * gb;                                                    \
        float *yg = y + gi * PACK_ROWS;                                                             \
        GROUP_TILES(tile, n_tok, nb, g, 0, 1, xr, xs, yg, 0, ldy)                                   \
    }

void gemm_q8_0_neon_dot(int64_t n_in, const void *w, int64_t n_groups, const void *x,
                        size_t x_stride, const pack_xblock *xs, int n_tok, float *y, int64_t ldy) {
    LEGACY_GEMM_BODY(q8_0_tile, block_q8_0)
}

void gemm_q4_0_neon_dot(int64_t n_in, const void *w, int64_t n_groups, const void *x,
                        size_t x_stride, const pack_xblock *xs, int n_tok, float *y, int64_t ldy) {
    LEGACY_GEMM_BODY(q4_0_tile, block_q4_0)
}

/* Q5_0 (q5: offset 16 through pack_xblock.bias), Q4_1 (min) and Q5_1 (q5, min)
 * as q4_0_tile: the fifth bits of chunk k are bits 2k and 2k + 1 of each byte of
 * the block's high-bit vector (cpu/pack.h), shifted to bit 4 and or'ed into the
 * low and high nibbles (quants 0..31: still exact as sdot's signed bytes); the
 * mins add m_w * s_x per block and row (pack_xblock.s). The float steps are
 * those of the quant module's _ref dots (multiplies and adds, no fma), as the
 * ref twins. Q4_1 / Q5_1 activations are Q8_1 blocks. */
VT_INLINE void leg5_tile(const bool q5, const bool min, int64_t nb, const uint8_t *g, const uint8_t *const *xr,
                         const pack_xblock *xs, float *y, int64_t ldy, const int q0, const int nq, const int nt) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), bit4 = vdupq_n_u8(0x10);
    const size_t qb = q5 ? PACK_QB_Q5_0 : PACK_QB_Q4_0;
    const size_t xblk = min ? sizeof(block_q8_1) : sizeof(block_q8_0);
    const size_t xoff = min ? offsetof(block_q8_1, qs) : offsetof(block_q8_0, qs);
    float32x4_t acc[PACK_TOK_MAX][4];
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nq; q++) acc[t][q] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        const size_t d_at = min ? pack_dm_tile(b, qb) : pack_pair_d(b, qb);
        const uint8_t *v = g + (min ? pack_dm_tile(b, qb) + 4 * PACK_ROWS : pack_pair_qs(nb, b, qb));
        int8x16_t x0[PACK_TOK_MAX], x1[PACK_TOK_MAX];
        float dx[PACK_TOK_MAX];
        int32x4_t p[PACK_TOK_MAX][4];
        UNROLL for (int t = 0; t < nt; t++) {
            const int8_t *xq = (const int8_t *)(xr[t] + (size_t)b * xblk + xoff);
            x0[t] = vld1q_s8(xq);
            x1[t] = vld1q_s8(xq + 16);
            dx[t] = xs[t * nb + b].d;
            const int32x4_t start = vdupq_n_s32(min ? 0 : xs[t * nb + b].bias);
            UNROLL for (int q = 0; q < nq; q++) p[t][q] = start;
        }
        UNROLL for (int k = 0; k < 4; k++) {
            const int8x16_t sh_lo = vdupq_n_s8((int8_t)(4 - 2 * k)), sh_hi = vdupq_n_s8((int8_t)(3 - 2 * k));
            UNROLL for (int q = 0; q < nq; q++) {
                const uint8x16_t raw = vld1q_u8(v + k * CHUNK_VEC + 16 * (q0 + q));
                uint8x16_t ulo = vandq_u8(raw, m4), uhi = vshrq_n_u8(raw, 4);
                if (q5) {
                    const uint8x16_t h = vld1q_u8(v + 4 * CHUNK_VEC + 16 * (q0 + q));
                    ulo = vorrq_u8(ulo, vandq_u8(vshlq_u8(h, sh_lo), bit4));
                    uhi = vorrq_u8(uhi, vandq_u8(vshlq_u8(h, sh_hi), bit4));
                }
                const int8x16_t lo = vreinterpretq_s8_u8(ulo), hi = vreinterpretq_s8_u8(uhi);
                UNROLL for (int t = 0; t < nt; t++) {
                    p[t][q] = DOT_LANE(p[t][q], lo, x0[t], k);
                    p[t][q] = DOT_LANE(p[t][q], hi, x1[t], k);
                }
            }
        }
        UNROLL for (int q = 0; q < nq; q++) {
            const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(g + d_at + 8 * (q0 + q))));
            const float32x4_t mw =
                min ? vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(g + d_at + 2 * PACK_ROWS + 8 * (q0 + q))))
                    : vdupq_n_f32(0);
            UNROLL for (int t = 0; t < nt; t++) {
                const float32x4_t sd = vmulq_f32(vmulq_n_f32(dw, dx[t]), vcvtq_f32_s32(p[t][q]));
                if (min) acc[t][q] = vaddq_f32(acc[t][q], vaddq_f32(sd, vmulq_n_f32(mw, xs[t * nb + b].s)));
                else acc[t][q] = vaddq_f32(acc[t][q], sd);
            }
        }
    }
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nq; q++)
        vst1q_f32(y + t * ldy + 4 * (q0 + q), acc[t][q]);
}

/* gemm_<name>_neon_dot over leg5_tile, one group at a time (GROUP_TILES); blk:
 * the type's file block */
#define LEG5_GEMM(name, q5, min, blk)                                                                   \
    void gemm_##name##_neon_dot(int64_t n_in, const void *w, int64_t n_groups, const void *x,          \
                                size_t x_stride, const pack_xblock *xs, int n_tok, float *y, int64_t ldy) { \
        const int64_t nb = n_in / 32;                                                                  \
        const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(blk);                               \
        const uint8_t *xr[PACK_TOK_MAX];                                                               \
        for (int t = 0; t < n_tok; t++) xr[t] = (const uint8_t *)x + (size_t)t * x_stride;             \
        for (int64_t gi = 0; gi < n_groups; gi++) {                                                    \
            const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;                          \
            float *yg = y + gi * PACK_ROWS;                                                            \
            GROUP_TILES(leg5_tile, n_tok, q5, min, nb, g, xr, xs, yg, ldy)                             \
        }                                                                                              \
    }

LEG5_GEMM(q5_0, true, false, block_q5_0)
LEG5_GEMM(q4_1, false, true, block_q4_1)
LEG5_GEMM(q5_1, true, true, block_q5_1)

/* ---- K-quants (Q4_K, Q5_K, Q6_K x Q8_K) ------------------------------------------------
 *
 * Per sub-block each row quad's sdots land in one int32 vector (one lane per
 * row), which is multiplied by that sub-block's scales of the 4 rows (int32
 * lanes) into the super-block's isum: sc * sum exactly, as the ref twins. The
 * constant parts come from the activation's bsums: Q6_K's -32 offset by
 * starting each sub-block's sum at -32 * bsum_j (so the quants are dotted as
 * unsigned 0..63); Q4_K's mins with sdot as well, the bsum pairs split into
 * bytes as 128 * hi + lo (hi in -32..31, lo in 0..127), against the rows' 6-bit
 * mins as 4 bytes per lane. Q5_K is the Q4_K kernel with each nibble's fifth
 * bit (the tile's 8 high-bit chunk vectors) moved to bit 4 and or'ed in before
 * the sdots: quants 0..31, still exact. Float steps per super-block as pack.h
 * states.
 *
 * Register tiles: a super-block keeps two sub-block sums, isum and the float
 * accumulator per (row quad, token) live, so one token takes all 16 rows in one
 * pass (decode: the group is read once, in order), two tokens two halves of 8
 * rows and three or four tokens four passes of one quad each: the weights are
 * unpacked once per pass and used by every token. One token reads two groups,
 * g and g + n_groups / 2 of the call (two streams, as the legacy types): a
 * tile over both at once would need twice those registers, so they take
 * turns, a super-block of one group, then of the other, and only the float
 * accumulators are both groups'. */

/* GCC's pre-allocation scheduler (on at -O2 for aarch64) hoists the loads of a
 * whole unrolled super-block ahead of their use and then spills 40-190 vectors
 * per super-block; without it the tiles stay in registers (GCC 12). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-schedule-insns")
#endif

#define TILE_Q4_K (PACK_ROWS * sizeof(block_q4_K))
#define TILE_Q5_K (PACK_ROWS * sizeof(block_q5_K))
/* Software prefetch as the x86 K-quant kernels do: one linear stream over the
 * group (and on into the next), PF_DIST_K bytes ahead, a quarter super-block
 * per quarter of the work, from the first pass over a group only. No ARM core
 * has tuned the distance: it is just under one Q4_K tile (PACK_ROWS rows of
 * 144 bytes), so each line is asked for about one tile's work before the
 * kernel reads it, long enough for a memory round trip at one core's pace and
 * short enough that the lines are still in L1 when their tile comes. The Q4_0,
 * Q8_0 and Q6_K kernels here issue no prefetches (x86's prefetch every layout
 * as one linear stream). */
#define PF_DIST_K 2048
/* Q5_K reads the high bits at the end of its tile from the start of the tile's
 * work, so its stream runs a whole tile ahead (as on x86). */
#define PF_DIST_Q5_K (TILE_Q5_K + 256)

/* Quads q0 .. q0 + nq - 1 (16 bytes each) of the chunk vector at v, with one
 * multi-register load where they are adjacent. */
VT_INLINE void load_quads(const uint8_t *v, const int q0, const int nq, uint8x16_t out[4]) {
    if (nq == 4) {
        const uint8x16x4_t a = vld1q_u8_x4(v);
        UNROLL for (int q = 0; q < 4; q++) out[q] = a.val[q];
    } else if (nq == 2) {
        const uint8x16x2_t a = vld1q_u8_x2(v + 16 * q0);
        out[0] = a.val[0];
        out[1] = a.val[1];
    } else {
        out[0] = vld1q_u8(v + 16 * q0);
    }
}

/* Four fp16 at p as floats (exact). */
VT_INLINE float32x4_t load_f16x4(const uint8_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p)));
}

VT_INLINE void prefetch_lines(const uint8_t *p, const int n_lines) {
    UNROLL for (int i = 0; i < n_lines; i++) __builtin_prefetch(p + 64 * i, 0, 3);
}

/* Byte k (0..3) of every 32-bit lane of v, masked with `mask`, as int32 lanes. */
VT_INLINE int32x4_t lane_byte(uint32x4_t v, const int k, uint32x4_t mask) {
    switch (k) {
    case 0: break;
    case 1: v = vshrq_n_u32(v, 8); break;
    case 2: v = vshrq_n_u32(v, 16); break;
    default: v = vshrq_n_u32(v, 24); break;
    }
    return vreinterpretq_s32_u32(vandq_u32(v, mask));
}

/* Scale of sub-block j (0..7) of rows 4q .. 4q + 3 from the tile's three scale
 * vectors sv (the 12 scale bytes as words u0, u1, u2): j < 4 is u0 & 63 of byte
 * j, j >= 4 is the low nibble of u2's byte j - 4 under the top 2 bits of u0's. */
VT_INLINE int32x4_t q4_K_scale(const uint8_t *sv, const int q, const int j) {
    const uint8x16_t u0 = vld1q_u8(sv + 16 * q);
    if (j < 4) return lane_byte(vreinterpretq_u32_u8(u0), j, vdupq_n_u32(0x3f));
    const uint8x16_t u2 = vld1q_u8(sv + 2 * CHUNK_VEC + 16 * q);
    const uint32x4_t hi = vreinterpretq_u32_u8(vsliq_n_u8(u2, vshrq_n_u8(u0, 6), 4));
    if (j == 7) return vreinterpretq_s32_u32(vshrq_n_u32(hi, 24));
    return lane_byte(hi, j - 4, vdupq_n_u32(0xff));
}

/* The 8 mins of rows 4q .. 4q + 3 as bytes: mins 0..3 and 4..7 of each row's lane. */
VT_INLINE void q4_K_mins(const uint8_t *sv, const int q, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t u1 = vld1q_u8(sv + CHUNK_VEC + 16 * q);
    const uint8x16_t u2 = vld1q_u8(sv + 2 * CHUNK_VEC + 16 * q);
    *lo = vreinterpretq_s8_u8(vandq_u8(u1, vdupq_n_u8(0x3f)));
    *hi = vreinterpretq_s8_u8(vsliq_n_u8(vshrq_n_u8(u2, 4), vshrq_n_u8(u1, 6), 4));
}

/* The 8 bsum pairs p_j = bsums[2j] + bsums[2j + 1] of a Q8_K block as bytes
 * (lo_0..lo_7, hi_0..hi_7), p_j = 128 hi_j + lo_j: |p_j| <= 32 * 128, so hi_j
 * fits -32..31 and the min term takes four sdots instead of 8 widening mlas. */
VT_INLINE int8x16_t bsum_pair_bytes(const block_q8_K *x) {
    const int16x8_t p = vpaddq_s16(vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8));
    const int16x8_t lo = vandq_s16(p, vdupq_n_s16(127)), hi = vshrq_n_s16(p, 7);
    return vuzp1q_s8(vreinterpretq_s8_s16(lo), vreinterpretq_s8_s16(hi));
}

/* Super-block b of rows 4 q0 .. 4 (q0 + nq) - 1 of one Q4_K (q5: Q5_K) group,
 * nt tokens, into acc[t][a0 + q]; pf: issue the group's prefetches (the first
 * pass over it). */
VT_INLINE void q4_K_q5_K_block(int64_t b, const uint8_t *g, const block_q8_K *const *xr, const int q0,
                               const int nq, const int nt, const bool pf, const bool q5,
                               float32x4_t acc[PACK_TOK_MAX][TILE_QUADS_MAX], const int a0) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), bit4 = vdupq_n_u8(0x10);
    const size_t tile_bytes = q5 ? TILE_Q5_K : TILE_Q4_K;
    const size_t pf_dist = q5 ? PF_DIST_Q5_K : PF_DIST_K;
    const uint8_t *tile = g + b * tile_bytes;
    const uint8_t *sv = tile + 4 * PACK_ROWS, *v = sv + 3 * CHUNK_VEC;
    const uint8_t *vh = tile + TILE_Q4_K; /* Q5_K: the 8 high-bit chunk vectors */
    int32x4_t isum[PACK_TOK_MAX][4];
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nq; q++)
        isum[t][q] = vdupq_n_s32(0);
    UNROLL for (int j = 0; j < 4; j++) {
        /* a quarter of the super-block's lines (9, Q5_K 11) per quarter of its work */
        if (pf) prefetch_lines(tile + pf_dist + j * tile_bytes / 4, (int)(tile_bytes / 4 / 64));
        /* Q5_K: bit 2j of a high-bit byte extends the low nibble, bit 2j + 1
         * the high one; shifted to bit 4 (a negative count shifts right) */
        const int8x16_t sh_lo = vdupq_n_s8((int8_t)(4 - 2 * j));
        const int8x16_t sh_hi = vdupq_n_s8((int8_t)(3 - 2 * j));
        int32x4_t plo[PACK_TOK_MAX][4], phi[PACK_TOK_MAX][4];
        UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nq; q++)
            plo[t][q] = phi[t][q] = vdupq_n_s32(0);
        int8x16_t xlo[PACK_TOK_MAX], xhi[PACK_TOK_MAX];
        UNROLL for (int c = 0; c < 8; c++) {
            /* chunk c: elements 64j + 4c .. (low nibbles), 64j + 32 + 4c .. (high) */
            if ((c & 3) == 0)
                UNROLL for (int t = 0; t < nt; t++) {
                    xlo[t] = vld1q_s8(xr[t][b].qs + 64 * j + 4 * c);
                    xhi[t] = vld1q_s8(xr[t][b].qs + 64 * j + 32 + 4 * c);
                }
            uint8x16_t raw[4];
            load_quads(v + (8 * j + c) * CHUNK_VEC, q0, nq, raw);
            UNROLL for (int q = 0; q < nq; q++) {
                uint8x16_t ulo = vandq_u8(raw[q], m4), uhi = vshrq_n_u8(raw[q], 4);
                if (q5) {
                    const uint8x16_t h = vld1q_u8(vh + c * CHUNK_VEC + 16 * (q0 + q));
                    ulo = vorrq_u8(ulo, vandq_u8(vshlq_u8(h, sh_lo), bit4));
                    uhi = vorrq_u8(uhi, vandq_u8(vshlq_u8(h, sh_hi), bit4));
                }
                const int8x16_t lo = vreinterpretq_s8_u8(ulo), hi = vreinterpretq_s8_u8(uhi);
                UNROLL for (int t = 0; t < nt; t++) {
                    plo[t][q] = DOT_LANE(plo[t][q], lo, xlo[t], c & 3);
                    phi[t][q] = DOT_LANE(phi[t][q], hi, xhi[t], c & 3);
                }
            }
        }
        UNROLL for (int q = 0; q < nq; q++) {
            const int32x4_t sa = q4_K_scale(sv, q0 + q, 2 * j);
            const int32x4_t sb = q4_K_scale(sv, q0 + q, 2 * j + 1);
            UNROLL for (int t = 0; t < nt; t++)
                isum[t][q] = vmlaq_s32(vmlaq_s32(isum[t][q], plo[t][q], sa), phi[t][q], sb);
        }
    }
    int8x16_t xm[PACK_TOK_MAX];
    float dx[PACK_TOK_MAX];
    UNROLL for (int t = 0; t < nt; t++) {
        xm[t] = bsum_pair_bytes(&xr[t][b]);
        dx[t] = xr[t][b].d;
    }
    UNROLL for (int q = 0; q < nq; q++) {
        int8x16_t mn_lo, mn_hi;
        q4_K_mins(sv, q0 + q, &mn_lo, &mn_hi);
        const float32x4_t dw = load_f16x4(tile + 8 * (q0 + q));
        const float32x4_t dmw = load_f16x4(tile + 2 * PACK_ROWS + 8 * (q0 + q));
        UNROLL for (int t = 0; t < nt; t++) {
            int32x4_t imin = vdotq_laneq_s32(vdupq_n_s32(0), mn_lo, xm[t], 2);
            imin = vshlq_n_s32(vdotq_laneq_s32(imin, mn_hi, xm[t], 3), 7);
            imin = vdotq_laneq_s32(vdotq_laneq_s32(imin, mn_lo, xm[t], 0), mn_hi, xm[t], 1);
            const int a = a0 + q;
            acc[t][a] = vfmaq_f32(acc[t][a], vmulq_n_f32(dw, dx[t]), vcvtq_f32_s32(isum[t][q]));
            acc[t][a] = vfmsq_f32(acc[t][a], vmulq_n_f32(dmw, dx[t]), vcvtq_f32_s32(imin));
        }
    }
}

/* Scale of sub-block m of a quarter (qt), rows 4q .. 4q + 3, as int32 lanes. */
VT_INLINE int32x4_t q6_K_scale(const uint8_t *qt, const int m, const int q) {
    const int8x16_t s = vld1q_s8((const int8_t *)qt + PACK_Q6_K_SC(m));
    const int16x8_t h = q < 2 ? vmovl_s8(vget_low_s8(s)) : vmovl_high_s8(s);
    return q & 1 ? vmovl_high_s16(h) : vmovl_s16(vget_low_s16(h));
}

/* Super-block b of rows 4 q0 .. 4 (q0 + nq) - 1 of one Q6_K group of nb
 * super-blocks, nt tokens, into acc[t][a0 + q] (as q4_K_q5_K_block). */
VT_INLINE void q6_K_block(int64_t b, const uint8_t *g, int64_t nb, const block_q8_K *const *xr, const int q0,
                          const int nq, const int nt, const bool pf, float32x4_t acc[PACK_TOK_MAX][TILE_QUADS_MAX],
                          const int a0) {
    const uint8x16_t m33 = vdupq_n_u8(0x33);
    const uint8_t *tile = g + pack_q6_K_tile(nb, b);
    int32x4_t isum[PACK_TOK_MAX][4];
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nq; q++)
        isum[t][q] = vdupq_n_s32(0);
    UNROLL for (int h = 0; h < 2; h++) UNROLL for (int u = 0; u < 2; u++) {
        const uint8_t *qt = tile + (2 * h + u) * PACK_Q6_K_QUARTER;
        if (pf) {
            /* the linear position of this quarter super-block, 14 lines
             * covering its 840 bytes (groups are 32-byte aligned, not 64) */
            const size_t quarter = PACK_ROWS * sizeof(block_q6_K) / 4;
            const uintptr_t at =
                (uintptr_t)g + PF_DIST_K + (4 * (uintptr_t)b + 2 * h + u) * quarter;
            prefetch_lines((const uint8_t *)(at & ~(uintptr_t)63), 14);
        }
        /* s = 0: the ql chunks of sub-blocks m = 0 (low nibbles) and m = 2
         * (high); s = 1: the next 32 ql bytes, m = 1 and 3. The qh byte holds
         * the two high bits of m = 0..3 at bits 2m, 2m + 1. */
        UNROLL for (int s = 0; s < 2; s++) {
            const int ja = 8 * h + 2 * s + u, jb = ja + 4; /* sub-blocks of m = s, s + 2 */
            int32x4_t pa[PACK_TOK_MAX][4], pb[PACK_TOK_MAX][4];
            int8x16_t xa[PACK_TOK_MAX], xb[PACK_TOK_MAX];
            UNROLL for (int t = 0; t < nt; t++) {
                xa[t] = vld1q_s8(xr[t][b].qs + 16 * ja);
                xb[t] = vld1q_s8(xr[t][b].qs + 16 * jb);
                const int32x4_t ca = vdupq_n_s32(-32 * xr[t][b].bsums[ja]);
                const int32x4_t cb = vdupq_n_s32(-32 * xr[t][b].bsums[jb]);
                UNROLL for (int q = 0; q < nq; q++) {
                    pa[t][q] = ca;
                    pb[t][q] = cb;
                }
            }
            UNROLL for (int c4 = 0; c4 < 4; c4++) {
                uint8x16_t l[4], hb[4];
                load_quads(qt + PACK_Q6_K_VEC(s, c4), q0, nq, l);
                load_quads(qt + PACK_Q6_K_VEC(2, c4), q0, nq, hb);
                UNROLL for (int q = 0; q < nq; q++) {
                    /* bits 0-1: the high bits of m = s, bits 4-5: of m = s + 2 */
                    const uint8x16_t hm = vandq_u8(s ? vshrq_n_u8(hb[q], 2) : hb[q], m33);
                    /* qa = l & 15 | hm << 4, qb = hm & 0x30 | l >> 4 */
                    const int8x16_t qa = vreinterpretq_s8_u8(vsliq_n_u8(l[q], hm, 4));
                    const int8x16_t qb = vreinterpretq_s8_u8(vsriq_n_u8(hm, l[q], 4));
                    UNROLL for (int t = 0; t < nt; t++) {
                        pa[t][q] = DOT_LANE(pa[t][q], qa, xa[t], c4);
                        pb[t][q] = DOT_LANE(pb[t][q], qb, xb[t], c4);
                    }
                }
            }
            UNROLL for (int q = 0; q < nq; q++) {
                const int32x4_t sa = q6_K_scale(qt, s, q0 + q), sb = q6_K_scale(qt, s + 2, q0 + q);
                UNROLL for (int t = 0; t < nt; t++)
                    isum[t][q] = vmlaq_s32(vmlaq_s32(isum[t][q], pa[t][q], sa), pb[t][q], sb);
            }
        }
    }
    UNROLL for (int q = 0; q < nq; q++) {
        const float32x4_t dw = load_f16x4(g + pack_q6_K_d(nb, b) + 8 * (q0 + q));
        UNROLL for (int t = 0; t < nt; t++) {
            const float32x4_t s = vmulq_n_f32(dw, xr[t][b].d);
            acc[t][a0 + q] = vfmaq_f32(acc[t][a0 + q], s, vcvtq_f32_s32(isum[t][q]));
        }
    }
}

enum { K_Q4_K, K_Q5_K, K_Q6_K };

/* Rows 4 q0 .. 4 (q0 + nq) - 1 of ns groups of type kind gs bytes apart
 * (outputs ys floats apart), nt tokens. Two groups (one token) take turns, a
 * super-block of one, then of the other, as x86/gemm_impl.h's K-quant pairs:
 * the integer tile stays one group's, only the float accumulators double. */
VT_INLINE void k_tile(const int kind, int64_t nb, const uint8_t *g, size_t gs, const int ns,
                      const block_q8_K *const *xr, float *y, int64_t ys, int64_t ldy, const int q0, const int nq,
                      const int nt, const bool pf) {
    float32x4_t acc[PACK_TOK_MAX][TILE_QUADS_MAX];
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int r = 0; r < ns * nq; r++) acc[t][r] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        UNROLL for (int s = 0; s < ns; s++) {
            const uint8_t *gr = g + (size_t)s * gs;
            if (kind == K_Q6_K) q6_K_block(b, gr, nb, xr, q0, nq, nt, pf, acc, s * nq);
            else q4_K_q5_K_block(b, gr, xr, q0, nq, nt, pf, kind == K_Q5_K, acc, s * nq);
        }
    }
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int r = 0; r < ns * nq; r++)
        vst1q_f32(y + t * ldy + quad_row(r, q0, nq, ys), acc[t][r]);
}

VT_INLINE void q4_K_tile(int64_t nb, const uint8_t *g, size_t gs, const int ns, const block_q8_K *const *xr,
                         float *y, int64_t ys, int64_t ldy, const int q0, const int nq, const int nt, const bool pf) {
    k_tile(K_Q4_K, nb, g, gs, ns, xr, y, ys, ldy, q0, nq, nt, pf);
}
VT_INLINE void q5_K_tile(int64_t nb, const uint8_t *g, size_t gs, const int ns, const block_q8_K *const *xr,
                         float *y, int64_t ys, int64_t ldy, const int q0, const int nq, const int nt, const bool pf) {
    k_tile(K_Q5_K, nb, g, gs, ns, xr, y, ys, ldy, q0, nq, nt, pf);
}
VT_INLINE void q6_K_tile(int64_t nb, const uint8_t *g, size_t gs, const int ns, const block_q8_K *const *xr,
                         float *y, int64_t ys, int64_t ldy, const int q0, const int nq, const int nt, const bool pf) {
    k_tile(K_Q6_K, nb, g, gs, ns, xr, y, ys, ldy, q0, nq, nt, pf);
}

/* The passes over a group: all 16 rows for 1 token, two halves for 2, four quads
 * for 3-4 (see above); only the first prefetches. Each pass is its own function:
 * inlined side by side into one, their tiles were allocated together and the
 * 4-token Q6_K passes spilled 32 vectors per super-block. */
#define K_PASS(name, q0, nq, nt, pf)                                                       \
    static __attribute__((noinline)) void name##_pass_##q0##_##nt(                         \
        int64_t nb, const uint8_t *g, const block_q8_K *const *xr, float *y, int64_t ldy) { \
        name##_tile(nb, g, 0, 1, xr, y, 0, ldy, q0, nq, nt, pf);                           \
    }
/* One token over groups g and g + h of the call (h = n_groups / 2, ys = h *
 * PACK_ROWS outputs on): two streams, as the legacy types read them. */
#define K_PAIR(name)                                                                       \
    static __attribute__((noinline)) void name##_pair(int64_t nb, const uint8_t *g, size_t gs, \
                                                      const block_q8_K *const *xr, float *y, \
                                                      int64_t ys, int64_t ldy) {           \
        name##_tile(nb, g, gs, 2, xr, y, ys, ldy, 0, 4, 1, true);                          \
    }
#define K_PASSES(name)                                                                     \
    K_PAIR(name)                                                                           \
    K_PASS(name, 0, 4, 1, true)                                                            \
    K_PASS(name, 0, 2, 2, true)                                                            \
    K_PASS(name, 2, 2, 2, false)                                                           \
    K_PASS(name, 0, 1, 3, true)                                                            \
    K_PASS(name, 1, 1, 3, false)                                                           \
    K_PASS(name, 2, 1, 3, false)                                                           \
    K_PASS(name, 3, 1, 3, false)                                                           \
    K_PASS(name, 0, 1, 4, true)                                                            \
    K_PASS(name, 1, 1, 4, false)                                                           \
    K_PASS(name, 2, 1, 4, false)                                                           \
    K_PASS(name, 3, 1, 4, false)

#define K_GEMM(name)                                                                       \
    K_PASSES(name)                                                                         \
    void gemm_##name##_neon_dot(int64_t n_in, const void *w, int64_t n_groups, const void *x, \
                                size_t x_stride, const pack_xblock *xs, int n_tok, float *y,  \
                                int64_t ldy) {                                             \
        (void)xs;                                                                          \
        const int64_t nb = n_in / QK_K;                                                    \
        const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_##name);          \
        const block_q8_K *xr[PACK_TOK_MAX];                                                \
        for (int t = 0; t < n_tok; t++)                                                    \
            xr[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride);       \
        int64_t gi = 0;                                                                    \
        if (n_tok == 1 && n_groups >= 2) {                                                 \
            const int64_t h = n_groups / 2;                                                \
            for (; gi < h; gi++)                                                           \
                name##_pair(nb, (const uint8_t *)w + (size_t)gi * group_bytes, (size_t)h * group_bytes, \
                            xr, y + gi * PACK_ROWS, h * PACK_ROWS, ldy);                   \
            gi = 2 * h;                                                                    \
        }                                                                                  \
        for (; gi < n_groups; gi++) {                                                      \
            const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;              \
            float *yg = y + gi * PACK_ROWS;                                                \
            switch (n_tok) {                                                               \
            case 1: name##_pass_0_1(nb, g, xr, yg, ldy); break;                            \
            case 2:                                                                        \
                name##_pass_0_2(nb, g, xr, yg, ldy);                                       \
                name##_pass_2_2(nb, g, xr, yg, ldy);                                       \
                break;                                                                     \
            case 3:                                                                        \
                name##_pass_0_3(nb, g, xr, yg, ldy);                                       \
                name##_pass_1_3(nb, g, xr, yg, ldy);                                       \
                name##_pass_2_3(nb, g, xr, yg, ldy);                                       \
                name##_pass_3_3(nb, g, xr, yg, ldy);                                       \
                break;                                                                     \
            default:                                                                       \
                name##_pass_0_4(nb, g, xr, yg, ldy);                                       \
                name##_pass_1_4(nb, g, xr, yg, ldy);                                       \
                name##_pass_2_4(nb, g, xr, yg, ldy);                                       \
                name##_pass_3_4(nb, g, xr, yg, ldy);                                       \
                break;                                                                     \
            }                                                                              \
        }                                                                                  \
    }

K_GEMM(q4_K)
K_GEMM(q5_K)
K_GEMM(q6_K)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* ---- MXFP4 (x Q8_0) ------------------------------------------------------------------
 *
 * As Q4_0, with each nibble mapped through the grid by tbl to its signed value
 * (mxfp4_values, -12..12), so sdot needs no offset. The E8M0 scale bytes become
 * floats with integer ops (mxfp4_e8m0_half: (e - 1) << 23, or 0x200000 << e for
 * e < 2). */

/* The halved E8M0 scales of 4 rows (bytes at e) as floats. */
VT_INLINE float32x4_t e8m0_half_x4(const uint8_t *e) {
    uint32_t w;
    memcpy(&w, e, 4);
    const uint32x4_t v = vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(w)))));
    const uint32x4_t norm = vshlq_n_u32(vsubq_u32(v, vdupq_n_u32(1)), 23);
    const uint32x4_t sub = vshlq_u32(vdupq_n_u32(0x00200000), vreinterpretq_s32_u32(v));
    return vreinterpretq_f32_u32(vbslq_u32(vcltq_u32(v, vdupq_n_u32(2)), sub, norm));
}

VT_INLINE void mxfp4_tile(int64_t nb, const uint8_t *g, size_t gs, const int ns, const block_q8_0 *const *xr,
                          const pack_xblock *xs, float *y, int64_t ys, int64_t ldy, const int q0, const int nq,
                          const int nt) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t grid = vld1q_s8(mxfp4_values);
    const int nr = ns * nq;
    float32x4_t acc[PACK_TOK_MAX][TILE_QUADS_MAX];
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nr; q++) acc[t][q] = vdupq_n_f32(0);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *v = g + pack_mxfp4_qs(nb, b);
        int8x16_t x0[PACK_TOK_MAX], x1[PACK_TOK_MAX];
        float dx[PACK_TOK_MAX];
        int32x4_t p[PACK_TOK_MAX][TILE_QUADS_MAX];
        UNROLL for (int t = 0; t < nt; t++) {
            x0[t] = vld1q_s8(xr[t][b].qs);
            x1[t] = vld1q_s8(xr[t][b].qs + 16);
            dx[t] = xs[t * nb + b].d;
            UNROLL for (int q = 0; q < nr; q++) p[t][q] = vdupq_n_s32(0);
        }
        UNROLL for (int k = 0; k < 4; k++) {
            UNROLL for (int q = 0; q < nr; q++) {
                const uint8x16_t raw = vld1q_u8(v + k * CHUNK_VEC + quad_off(q, q0, nq, gs, 4));
                const int8x16_t lo = vqtbl1q_s8(grid, vandq_u8(raw, m4));
                const int8x16_t hi = vqtbl1q_s8(grid, vshrq_n_u8(raw, 4));
                UNROLL for (int t = 0; t < nt; t++) {
                    p[t][q] = DOT_LANE(p[t][q], lo, x0[t], k);
                    p[t][q] = DOT_LANE(p[t][q], hi, x1[t], k);
                }
            }
        }
        UNROLL for (int q = 0; q < nr; q++) {
            const float32x4_t dw = e8m0_half_x4(g + pack_mxfp4_e(b) + quad_off(q, q0, nq, gs, 1));
            UNROLL for (int t = 0; t < nt; t++)
                acc[t][q] = vfmaq_f32(acc[t][q], vmulq_n_f32(dw, dx[t]), vcvtq_f32_s32(p[t][q]));
        }
    }
    UNROLL for (int t = 0; t < nt; t++) UNROLL for (int q = 0; q < nr; q++)
        vst1q_f32(y + t * ldy + quad_row(q, q0, nq, ys), acc[t][q]);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-schedule-insns")
#endif
LEGACY_PAIR(mxfp4_tile)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

void gemm_mxfp4_neon_dot(int64_t n_in, const void *w, int64_t n_groups, const void *x,
                         size_t x_stride, const pack_xblock *xs, int n_tok, float *y, int64_t ldy) {
    LEGACY_GEMM_BODY(mxfp4_tile, block_mxfp4)
}
