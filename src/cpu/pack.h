/* Row-interleaved ("packed") weight layouts for the GEMM kernels.
 *
 * The file layout stores each weight row as consecutive blocks, so a kernel that
 * computes several rows at once reads several short streams and jumps; the
 * hardware prefetcher never ramps up and one core streams a third of what it
 * can. A packed weight stores groups of PACK_ROWS = 16 consecutive rows as one
 * contiguous run in which the rows are interleaved in 4-byte chunks:
 *
 *   chunk vector (64 bytes) = [row 0: 4 bytes][row 1: 4 bytes] ... [row 15: 4 bytes]
 *
 * so one 512-bit load (or two 256-bit loads, or four 128-bit NEON registers of 4
 * rows) holds the same 4 quant bytes of 16 rows, and a vpdpbusd / maddubs against
 * the broadcast matching 4 activation bytes (on ARM sdot by element) leaves one
 * row's partial dot in each 32-bit lane. The kernels then keep one float
 * accumulator lane per row and never reduce horizontally. Scales are gathered
 * per block into vectors of 16 (fp16, int8 or packed 6-bit words).
 * A group is read as one sequential stream, scales next to their quants. The
 * bytes per group equal 16 file rows exactly (nothing is added).
 *
 * Kernels (matmul packs a type only where the tier has one): all nine types
 * (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q4_K, Q5_K, Q6_K) on AVX2, AVX-512 VNNI
 * (x86/gemm_avx2.c, gemm_avx512.c) and NEON dotprod (arm/gemm_neon_dot.c, also
 * used by the i8mm tier, which has smmla for Q8_0 at 4 tokens); AMX wide tiles
 * for all but Q4_1, Q5_0 and Q5_1 (those run AVX-512's narrow tiles in prefill).
 * Plain NEON and ref: none.
 *
 * Group layouts (nb = blocks per row, per block b in order; "16 x" = rows 0..15):
 *   Q4_0  blocks in pairs: d of block 2p (16 f16), d of 2p + 1 | qs of 2p | qs of
 *         2p + 1, where qs of a block is 4 chunk vectors, chunk k = bytes
 *         qs[4k..4k+3] (low nibbles: elements 4k..4k+3, high nibbles: elements
 *         16+4k..16+4k+3); an odd nb's last block is d | qs. A pair is 576 bytes,
 *         9 cache lines, so every quant vector of a group of even nb is aligned
 *         (pack_pair_d, pack_pair_qs)
 *   Q8_0  as Q4_0 with 8 chunk vectors per block (elements 4k..4k+3); pairs of
 *         1088 bytes, 17 lines. (Until 2026-12-04 both types kept all scales in
 *         one region and all quants in another: two streams per group, each
 *         restarting every group, which a core streamed 9-21% slower on the
 *         Zen 5 VM; BENCHMARKS.md)
 *   Q5_0  as Q4_0 (pairs: d of 2p, d of 2p + 1 | qs of 2p | qs of 2p + 1; an odd
 *         nb's last block d | qs) with 5 chunk vectors a block: Q4_0's 4 of
 *         nibbles, then one of fifth bits, row r's 4 bytes (its 32-bit lane) the
 *         block's qh rearranged so that one shift of the whole vector puts chunk
 *         k's fifth bits at bit 4 of their bytes: bit 2k of byte i is the fifth
 *         bit of element 4k + i (the low nibble of qs[4k + i]), bit 2k + 1 that of
 *         element 16 + 4k + i (its high nibble), as Q5_K's qh bits 2j, 2j + 1
 *         (pack_q5_high_bits). A pair is 704 bytes, 11 cache lines
 *         (pack_pair_d, pack_pair_qs with PACK_QB_Q5_0)
 *   Q4_1, Q5_1  per block a tile of whole cache lines (320, 384 bytes): d[16],
 *         m[16] (f16) | Q4_0's 4 nibble vectors (Q5_1: Q5_0's 5 vectors)
 *         (pack_dm_tile)
 *   MXFP4 blocks in quads: the E8M0 scale bytes of blocks 4q .. 4q + 3 (16 bytes
 *         each, one per row) | qs of 4q | ... | qs of 4q + 3, qs as Q4_0's (4
 *         chunk vectors, low nibbles elements 4k.., high nibbles 16 + 4k..); a
 *         quad is 1088 bytes, 17 cache lines, and the last quad of an nb that
 *         is not a multiple of 4 holds its nb % 4 blocks the same way
 *         (pack_mxfp4_e, pack_mxfp4_qs)
 *   Q4_K  per super-block a 2304-byte tile: d[16], dmin[16] (f16) | 3 vectors of
 *         16 u32 (the 12 scale bytes as three little-endian words) | 32 chunk
 *         vectors (chunk 8j + c = bytes qs[32j + 4c ..]: low nibbles sub-block 2j,
 *         high nibbles 2j + 1); scales next to their quants, so the group reads
 *         as one stream in address order (with a separate scale region the
 *         kernels' linear prefetch left the quants of long rows unprefetched)
 *   Q5_K  per super-block a 2816-byte tile: the Q4_K tile above, same offsets, then
 *         8 chunk vectors of high bits (chunk c = bytes qh[4c..4c+3]): bit 2j of
 *         qh[l] is the fifth bit of the low nibble of quant byte 32j + l (element
 *         64j + l), bit 2j + 1 that of its high nibble (element 64j + 32 + l); the
 *         high bits come last so that the Q4_K part, and Q4_K code, work unchanged
 *   Q6_K  per super-block 16 f16 scales d and a 3328-byte tile of four quarters,
 *         in the order the kernels compute it. Quarter q = 2h + u (h: the half of
 *         128 elements, u: the 16-element half of each of its four 32-element
 *         runs m = 0..3; ql[64h + 32 (m & 1) + l] holds element 128h + 32m + l in
 *         its low (m < 2) or high nibble, bits 2m..2m+1 of qh[32h + l] its top
 *         two bits) is 832 bytes, 13 lines: the int8 scales of its sub-blocks
 *         j = 8h + 2m + u, m = 0..3 (16 rows each: 64 bytes), then for c = 0..3
 *         three chunk vectors, the ones the decode kernels load together: bytes
 *         ql[64h + 16u + 4c ..] (k = 0), ql[64h + 32 + 16u + 4c ..] (k = 1),
 *         qh[32h + 16u + 4c ..] (k = 2) (pack_q6_K_*, PACK_Q6_K_VEC below; with
 *         the four of each k in a row, which the kernels then read out of
 *         order, a core streamed Q6_K 16% slower from memory on the Zen 5 VM,
 *         bench/gemm_ab, 2026-12-05). Super-blocks in pairs: d of 2p, d of
 *         2p + 1 | tile of 2p | tile of 2p + 1, 6720 bytes, 105 lines; an odd
 *         nb's last super-block is tile | d. A group reads as one stream in
 *         address order. (Until 2026-12-04 the group held three regions, all d,
 *         all scales, then the quants, and the kernels read each quarter's
 *         chunks from three places: the hardware prefetcher lost the stream at
 *         every group, and a core streamed Q6_K at about half Q4_K's rate from
 *         memory; BENCHMARKS.md)
 *
 * Rows past n_out in the last group are zero (zero scales: they compute 0).
 *
 * Arithmetic (the same in every tier, so all tiers agree bit for bit and an
 * output never depends on the token tile or the thread that computes it): per
 * output the block's integer dot is exact, then acc = fmaf(s, (float)isum, acc)
 * block by block in order, s the product of the weight and activation scales:
 *   Q4_0  isum = sum (q - 8) x;              s = d_w * d_x
 *   Q5_0  isum = sum (q - 16) x (q = nibble + 16 * fifth bit, 0..31); s = d_w * d_x,
 *         but acc = acc + s * (float)isum, two roundings: quant_dot_q5_0_ref's
 *         steps, so the packed GEMM gives the file-layout _ref's bits
 *   Q4_1, Q5_1  isum = sum q x (x: Q8_1); likewise the _ref dot's steps,
 *         acc = acc + ((d_w * d_x) * (float)isum + m_w * s_x), s_x the Q8_1
 *         block's s (d_x * sum x, f16)
 *   Q8_0  isum = sum q x;                    s = d_w * d_x
 *   MXFP4 isum = sum v[q] x (v: mxfp4_values, the doubled E2M1 grid);
 *                                            s = e8m0_half(e_w) * d_x
 *   Q4_K  isum = sum_j sc_j sum q x;         s = d_w * d_x, then
 *         acc = fmaf(-(dmin_w * d_x), (float)(sum_j m_j (bsum_2j + bsum_2j+1)), acc)
 *   Q5_K  as Q4_K, with q = nibble + 16 * high bit (0..31)
 *   Q6_K  isum = sum_j sc_j sum (q - 32) x;  s = d_w * d_x */
#ifndef VT_CPU_PACK_H
#define VT_CPU_PACK_H

#include "quant/quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PACK_ROWS 16
/* Most tokens one kernel call computes (its register tile). */
#define PACK_TOK_MAX 4
/* Most tokens one wide kernel call computes (two 16-row tiles), and the longest
 * rows (n_in) a wide kernel takes. */
#define PACK_TOK_WIDE 32
#define PACK_WIDE_N_IN_MAX 16384

/* Quant bytes of one block of a Q4_0 / Q8_0 / Q5_0 group (16 rows; Q5_0: 4
 * nibble vectors and one of fifth bits). */
#define PACK_QB_Q4_0 (PACK_ROWS * 16)
#define PACK_QB_Q8_0 (PACK_ROWS * 32)
#define PACK_QB_Q5_0 (PACK_ROWS * 20)

/* Byte offsets, in a Q4_0 / Q8_0 group of nb blocks with qb quant bytes per
 * block, of block b's 16 f16 scales and of its quants (the pairs above). */
static inline size_t pack_pair_d(int64_t b, size_t qb) {
    return (size_t)(b >> 1) * (4 * PACK_ROWS + 2 * qb) + (size_t)(b & 1) * 2 * PACK_ROWS;
}
static inline size_t pack_pair_qs(int64_t nb, int64_t b, size_t qb) {
    const size_t pair = (size_t)(b >> 1) * (4 * PACK_ROWS + 2 * qb);
    if (!(b & 1) && b == nb - 1) return pair + 2 * PACK_ROWS; /* an odd nb's last block */
    return pair + 4 * PACK_ROWS + (size_t)(b & 1) * qb;
}

/* Q4_1 / Q5_1 (qb PACK_QB_Q4_0 / PACK_QB_Q5_0): the byte offset of block b's
 * tile, d[16] at + 0, m[16] at + 2 * PACK_ROWS, the quants at + 4 * PACK_ROWS. */
static inline size_t pack_dm_tile(int64_t b, size_t qb) { return (size_t)b * (4 * PACK_ROWS + qb); }

/* The high-bit chunk of a Q5_0 / Q5_1 block (layout above) from its qh bytes:
 * out[i] bit 2k = qh bit 4k + i, bit 2k + 1 = qh bit 16 + 4k + i. */
static inline void pack_q5_high_bits(const uint8_t qh[4], uint8_t out[4]) {
    const uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int i = 0; i < 4; i++) {
        uint8_t v = 0;
        for (int k = 0; k < 4; k++)
            v |= (uint8_t)(((h >> (4 * k + i)) & 1) << (2 * k) | ((h >> (16 + 4 * k + i)) & 1) << (2 * k + 1));
        out[i] = v;
    }
}

/* MXFP4: quant bytes of one block of a group, bytes of a quad of blocks, and
 * the byte offsets, in a group of nb blocks, of block b's 16 scale bytes and of
 * its quants (the quads above). */
#define PACK_QB_MXFP4 (PACK_ROWS * 16)
#define PACK_MXFP4_QUAD (4 * PACK_ROWS + 4 * PACK_QB_MXFP4)
static inline size_t pack_mxfp4_e(int64_t b) {
    return (size_t)(b >> 2) * PACK_MXFP4_QUAD + (size_t)(b & 3) * PACK_ROWS;
}
static inline size_t pack_mxfp4_qs(int64_t nb, int64_t b) {
    const int64_t in_quad = nb - (b & ~(int64_t)3) < 4 ? nb - (b & ~(int64_t)3) : 4;
    return (size_t)(b >> 2) * PACK_MXFP4_QUAD + (size_t)in_quad * PACK_ROWS + (size_t)(b & 3) * PACK_QB_MXFP4;
}

/* Q6_K: bytes of a quarter, a tile and a pair of super-blocks of 16 rows; byte
 * offsets, in a group of nb super-blocks, of super-block b's 16 f16 scales and
 * of its tile (quarter q at + q * PACK_Q6_K_QUARTER); in a quarter, of the
 * scales of its sub-block m and of its chunk vector (k, c) (layout above). */
#define PACK_Q6_K_QUARTER (13 * 4 * PACK_ROWS)
#define PACK_Q6_K_TILE (4 * PACK_Q6_K_QUARTER)
#define PACK_Q6_K_PAIR (4 * PACK_ROWS + 2 * PACK_Q6_K_TILE)
#define PACK_Q6_K_SC(m) ((m) * PACK_ROWS)
#define PACK_Q6_K_VEC(k, c) ((1 + 3 * (c) + (k)) * 4 * PACK_ROWS)
static inline size_t pack_q6_K_d(int64_t nb, int64_t b) {
    const size_t pair = (size_t)(b >> 1) * PACK_Q6_K_PAIR;
    if (!(b & 1) && b == nb - 1) return pair + PACK_Q6_K_TILE; /* an odd nb's last */
    return pair + (size_t)(b & 1) * 2 * PACK_ROWS;
}
static inline size_t pack_q6_K_tile(int64_t nb, int64_t b) {
    const size_t pair = (size_t)(b >> 1) * PACK_Q6_K_PAIR;
    if (!(b & 1) && b == nb - 1) return pair;
    return pair + 4 * PACK_ROWS + (size_t)(b & 1) * PACK_Q6_K_TILE;
}

/* Whether `type` has a packed layout. */
bool pack_has_layout(vt_dtype type);

/* Pack rows [0, nr) (nr <= PACK_ROWS) of `src` (row stride `row_bytes`, the
 * file layout, rows of n_in elements) into one group at dst (PACK_ROWS *
 * row_bytes bytes); missing rows are zero. */
void pack_group(vt_dtype type, int64_t n_in, const void *src, size_t row_bytes, int nr, void *dst);

/* The activation side of one Q8_0 block, for the packed Q4_0, Q5_0, Q8_0 and
 * MXFP4 GEMMs: its scale as f32, and -c * (the sum of its 32 quants), where c
 * is the offset that makes the weight quants unsigned (8 for Q4_0 nibbles, 16
 * for Q5_0's 5-bit quants, 128 for Q8_0 quants xor 0x80, 12 for MXFP4's grid
 * values), so an unsigned-by-signed integer dot that starts at `bias` ends at
 * the signed dot. For Q4_1 / Q5_1 (unsigned quants, Q8_1 activations) the
 * block's scale and its s (d * sum of the quants, f16 in the block) as f32.
 * Computed once per token block (pack_xblocks) and read by every group,
 * instead of a conversion and a multiply per block and group. */
typedef struct {
    float d;
    union {
        int32_t bias; /* Q4_0, Q5_0, Q8_0, MXFP4 */
        float s;      /* Q4_1, Q5_1 */
    };
} pack_xblock;

/* Packed GEMM over n_groups consecutive groups starting at w (each
 * PACK_ROWS * row_bytes), for n_tok <= PACK_TOK_MAX activation rows of the
 * type's dot type at x (stride x_stride bytes):
 *   y[t * ldy + 16 g + r] = dot(row 16 g + r, x row t)
 * with the arithmetic stated above. n_in a multiple of the block. Where
 * pack_needs_xblocks(type), xs[t * nb + b] is block b of row t (pack_xblocks;
 * nb = n_in / 32), else unused (and may be NULL). */
typedef void (*pack_gemm_fn)(int64_t n_in, const void *w, int64_t n_groups, const void *x,
                             size_t x_stride, const pack_xblock *xs, int n_tok, float *y,
                             int64_t ldy);

/* Whether the gemm of `type` reads pack_xblocks. */
bool pack_needs_xblocks(vt_dtype type);

/* out[t * nb + b] = the activation side of Q8_0 block b of row t, t < n_tok, for
 * weights of `type` (pack_needs_xblocks). */
void pack_xblocks(vt_dtype type, const void *x, size_t x_stride, int64_t n_tok, int64_t nb,
                  pack_xblock *out);

/* The scalar twin every SIMD gemm of `type` is tested against (bit-identical;
 * pack.c), NULL without a packed layout. */
pack_gemm_fn pack_gemm_ref(vt_dtype type);

#endif
