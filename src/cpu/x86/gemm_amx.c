/* AMX-INT8 GEMMs for prefill over the packed Q4_0 / Q8_0 / MXFP4 / Q4_K / Q5_K / Q6_K
 * layouts (cpu/pack.h).
 *
 * A packed group is already what a tile multiply wants as its B operand: chunk
 * vector k of a block holds bytes 4k..4k+3 of the 16 rows, which is row k of a
 * (K/4) x (16 columns x 4 bytes) B tile. So per 32-element block b:
 *
 *   A (nt x 32 bytes)  the activation quants of block b of the nt token rows,
 *                      loaded with the activation row stride;
 *   B (8 x 64 bytes)   the block's 8 chunk vectors (Q8_0: straight from the
 *                      weight; Q4_0: nibbles widened to q - 8 in a scratch tile;
 *                      MXFP4: to their grid values, scales from E8M0 bytes);
 *   C (nt x 16 int32)  = A . B by tdpbssd, the exact integer dot of every
 *                      (token, row) pair of the block.
 *
 * C goes through memory into AVX-512 registers, one per token, where
 * acc = fma(d_w * d_x, (float)isum, acc) adds the block in order: the float
 * steps of the _ref twin, so results are bit-identical with it (and with the
 * VNNI kernels, which matmul uses for decode and for leftover tokens). Two
 * blocks are in flight per iteration so the tile unit works while the previous
 * block's C is scaled. That is the Q4_0 / Q8_0 scheme: one C tile per block,
 * because each block has its own float scale. The K-quants have integer
 * sub-block scales, which their kernels fold into the B tiles (below), so a
 * whole super-block stays in the tile unit.
 *
 * The caller (matmul) uses these for calls of up to PACK_TOK_WIDE tokens; the Linux
 * permission for the tile state is taken at feature detection (cpu_features).
 * Each call saves the thread's tile configuration and puts it back at the end. */
#include "base/status.h"
#include "cpu/unroll.h"
#include "cpu/x86/simd_avx512.h"
#include "cpu/x86/x86_kernels.h"
#include "quant/blocks.h"

#include <stddef.h>
#include <string.h>

#define CHUNK_VEC 64
/* Most 32-element blocks per row (the wide kernels' n_in bound, cpu/pack.h):
 * the activation scales of a call are precomputed on the stack. */
#define AMX_NB_MAX (PACK_WIDE_N_IN_MAX / 32)
#define UNROLL VT_UNROLL(16)
/* Token rows of one A / C tile. */
#define AMX_TILE_TOK 16
_Static_assert(PACK_TOK_WIDE == 2 * AMX_TILE_TOK, "a wide call is two token tiles");

/* The ldtilecfg operand: palette 1, per tile its bytes per row and rows. */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* The caller's tile configuration, put back when a GEMM ends: another AMX user
 * in the process (llama.cpp's ggml, in vt's own tests and benchmarks) may set
 * its configuration once per thread and rely on it staying. */
static void save_config(tile_config *saved) { __asm__ __volatile__("sttilecfg %0" : "=m"(*saved)); }
static void restore_config(const tile_config *saved) {
    if (saved->palette)
        __asm__ __volatile__("ldtilecfg %0" : : "m"(*saved));
    else
        _tile_release();
}

/* Tiles of the Q4_0 / Q8_0 kernels: 0, 1 activations (A) of token tiles 0 and 1
 * (n0, n1 rows of 32 bytes); 2, 3 weights (B, 8 x 64 bytes) of even and odd
 * blocks; 4, 5 the results (C) of an even block for token tiles 0, 1; 6, 7 of an
 * odd one. A token tile with no rows stays unconfigured. */
static void configure(int n0, int n1) {
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    const int n[2] = {n0, n1};
    for (int i = 0; i < 2; i++) {
        if (n[i] == 0) continue;
        c.rows[i] = c.rows[4 + i] = c.rows[6 + i] = (uint8_t)n[i];
        c.colsb[i] = 32;
        c.colsb[4 + i] = c.colsb[6 + i] = 64;
    }
    c.rows[2] = c.rows[3] = 8;
    c.colsb[2] = c.colsb[3] = 64;
    /* ldtilecfg through asm with a memory operand: GCC 12's _tile_loadconfig does
     * not tell the optimiser that it reads the config, and the stores above
     * were dropped as dead. */
    __asm__ __volatile__("ldtilecfg %0" : : "m"(c));
}

/* Q4_0 chunk vectors of one block (4 x 64 bytes) as a signed B tile: rows 0..3
 * the low nibbles (elements 4k..), rows 4..7 the high ones (16 + 4k..), each
 * minus 8. */
VT_INLINE void widen_q4_0(const uint8_t *v, uint8_t *tile) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
    UNROLL
    for (int k = 0; k < 4; k++) {
        const __m512i raw = _mm512_loadu_si512(v + k * CHUNK_VEC);
        _mm512_storeu_si512(tile + k * CHUNK_VEC, _mm512_sub_epi8(_mm512_and_si512(raw, m4), eight));
        _mm512_storeu_si512(tile + (4 + k) * CHUNK_VEC,
                            _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(raw, 4), m4), eight));
    }
}

/* MXFP4 chunk vectors of one block as a signed B tile: as widen_q4_0, each
 * nibble mapped through the grid (mxfp4_values, -12..12). */
VT_INLINE void widen_mxfp4(const uint8_t *v, uint8_t *tile) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i grid = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mxfp4_values));
    UNROLL
    for (int k = 0; k < 4; k++) {
        const __m512i raw = _mm512_loadu_si512(v + k * CHUNK_VEC);
        _mm512_storeu_si512(tile + k * CHUNK_VEC, _mm512_shuffle_epi8(grid, _mm512_and_si512(raw, m4)));
        _mm512_storeu_si512(tile + (4 + k) * CHUNK_VEC,
                            _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4)));
    }
}

/* acc[m] += (d_w * d_x[m]) * (float)C[m] for the n token rows of C. */
VT_INLINE void scale_block(const int32_t *c, __m512 dw, const float *dx, int n, __m512 *acc) {
    UNROLL
    for (int m = 0; m < 16; m++) {
        if (m == n) break;
        const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(dx[m]));
        acc[m] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * m)), acc[m]);
    }
}

/* Block blk's products for both token tiles: B tile B from bmem, A tiles 0 / 1
 * (the tile operands of the intrinsics must be literal numbers), C tiles C0 / C1. */
#define BLOCK_DP(blk, bmem, B, C0, C1)                                                      \
    do {                                                                                    \
        _tile_loadd(B, bmem, CHUNK_VEC);                                                    \
        _tile_loadd(0, xa + (size_t)(blk) * sizeof(block_q8_0), x_stride);                  \
        _tile_zero(C0);                                                                     \
        _tile_dpbssd(C0, 0, B);                                                             \
        if (n1) {                                                                           \
            _tile_loadd(1, xa + 16 * x_stride + (size_t)(blk) * sizeof(block_q8_0), x_stride); \
            _tile_zero(C1);                                                                 \
            _tile_dpbssd(C1, 1, B);                                                         \
        }                                                                                   \
    } while (0)
#define BLOCK_ST(p, C0, C1)                                                                 \
    do {                                                                                    \
        _tile_stored(C0, ct[p][0], 64);                                                     \
        if (n1) _tile_stored(C1, ct[p][1], 64);                                             \
    } while (0)

/* One group of 16 rows against n0 + n1 <= 32 tokens (two token tiles, so each B
 * operand serves both); B_OF(b, scratch) gives block b's B operand, DW_OF(b)
 * its 16 weight scales. Blocks
 * alternate between tiles 2/4/5 and 3/6/7: block b's C is stored and scaled
 * while the tile unit multiplies b + 1. Token tile 0 accumulates in registers,
 * tile 1 in a small array (32 accumulators and the scales do not fit). */
#define AMX_GROUP(name, NAME_UP, B_OF, DW_OF)                                               \
    static void name##_group_amx(int64_t nb, const uint8_t *g, const uint8_t *xa,           \
                                 size_t x_stride, const float *dx, int n0, int n1,          \
                                 float *y, int64_t ldy) {                                   \
        const size_t qb = PACK_QB_##NAME_UP;                                                \
        _Alignas(64) uint8_t bt[2][8 * CHUNK_VEC];                                          \
        _Alignas(64) int32_t ct[2][2][16 * 16];                                             \
        _Alignas(64) __m512 acc1[16];                                                       \
        (void)bt, (void)qb;                                                                 \
        __m512 acc[16];                                                                     \
        UNROLL                                                                              \
        for (int m = 0; m < 16; m++) acc[m] = acc1[m] = _mm512_setzero_ps();                \
        for (int64_t b = 0; b <= nb; b++) {                                                 \
            if (b < nb) {                                                                   \
                if (b & 1)                                                                  \
                    BLOCK_DP(b, B_OF(b, bt[1]), 3, 6, 7);                                   \
                else                                                                        \
                    BLOCK_DP(b, B_OF(b, bt[0]), 2, 4, 5);                                   \
            }                                                                               \
            if (b == 0) continue;                                                           \
            const int64_t p = b - 1; /* the block to scale */                              \
            if (p & 1)                                                                      \
                BLOCK_ST(1, 6, 7);                                                          \
            else                                                                            \
                BLOCK_ST(0, 4, 5);                                                          \
            const __m512 dw = DW_OF(p);                                                     \
            scale_block(ct[p & 1][0], dw, dx + p * PACK_TOK_WIDE, n0, acc);                 \
            if (n1) scale_block(ct[p & 1][1], dw, dx + p * PACK_TOK_WIDE + 16, n1, acc1);   \
        }                                                                                   \
        for (int m = 0; m < n0; m++) _mm512_storeu_ps(y + m * ldy, acc[m]);                 \
        for (int m = 0; m < n1; m++) _mm512_storeu_ps(y + (16 + m) * ldy, acc1[m]);         \
    }

#define Q4_0_B(blk, scratch) (widen_q4_0(g + pack_pair_qs(nb, blk, qb), (scratch)), (scratch))
#define Q8_0_B(blk, scratch) (g + pack_pair_qs(nb, blk, qb))
#define MXFP4_B(blk, scratch) (widen_mxfp4(g + pack_mxfp4_qs(nb, blk), (scratch)), (scratch))
#define PAIR_DW(blk) load_f16x16(g + pack_pair_d(blk, qb))
#define MXFP4_DW(blk) e8m0_half_x16(g + pack_mxfp4_e(blk))
AMX_GROUP(q4_0, Q4_0, Q4_0_B, PAIR_DW)
AMX_GROUP(q8_0, Q8_0, Q8_0_B, PAIR_DW)
AMX_GROUP(mxfp4, MXFP4, MXFP4_B, MXFP4_DW)

/* The exported GEMMs: pack_gemm_fn for n_tok <= PACK_TOK_WIDE. */
#define AMX_GEMM(name)                                                                      \
    void gemm_##name##_amx(int64_t n_in, const void *w, int64_t n_groups, const void *x,     \
                           size_t x_stride, const pack_xblock *xs, int n_tok, float *y,     \
                           int64_t ldy) {                                                   \
        const int64_t nb = n_in / 32;                                                       \
        (void)xs; /* the tiles take signed quants: no offset to take out */                 \
        VT_ASSERT(nb <= AMX_NB_MAX && n_tok >= 1 && n_tok <= PACK_TOK_WIDE);               \
        /* d_x of every (block, token) */                                                   \
        _Alignas(64) float dx[AMX_NB_MAX * PACK_TOK_WIDE];                                  \
        for (int m = 0; m < n_tok; m++) {                                                   \
            const block_q8_0 *xr = (const block_q8_0 *)((const uint8_t *)x + (size_t)m * x_stride); \
            for (int64_t b = 0; b < nb; b++) dx[b * PACK_TOK_WIDE + m] = f16c_to_f32(xr[b].d); \
        }                                                                                   \
        const int n0 = n_tok < AMX_TILE_TOK ? n_tok : AMX_TILE_TOK, n1 = n_tok - n0;        \
        const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_##name);          \
        const uint8_t *xa = (const uint8_t *)x + offsetof(block_q8_0, qs);                  \
        tile_config saved;                                                                  \
        save_config(&saved);                                                                \
        configure(n0, n1);                                                                  \
        for (int64_t gi = 0; gi < n_groups; gi++)                                           \
            name##_group_amx(nb, (const uint8_t *)w + (size_t)gi * group_bytes, xa, x_stride, \
                             dx, n0, n1, y + gi * PACK_ROWS, ldy);                          \
        restore_config(&saved);                                                             \
    }

AMX_GEMM(q4_0)
AMX_GEMM(q8_0)
AMX_GEMM(mxfp4)

/* ---- Q4_K ------------------------------------------------------------------------ */

/* A packed super-block tile (cpu/pack.h): d[16], dmin[16], 3 scale vectors, then
 * 32 chunk vectors; chunks 8j..8j+7 hold sub-block 2j in their low nibbles and
 * 2j + 1 in their high ones.
 *
 * The sub-block scales go into the B tiles, so the tiles sum a whole super-block
 * and only its two results leave the tile unit (storing a C tile per sub-block
 * cost more than the multiplies). sc = 8 sh + sl with sl, sh in 0..7, and
 *   B_lo = sl * q,  B_hi = sh * q   (bytes: 15 * 7 = 105 < 128)
 *   isum = sum_k sc_k sum q x = C_lo + 8 C_hi
 * exactly, in int32 (|isum| < 63 * 15 * 128 * 256 < 2^31): the integer of the
 * _ref twin, converted once, bit for bit. A 16-bit multiply forms both bytes of
 * a word at once without carries (each product < 256), and the 4 bytes of a
 * chunk are one row's, so one scale per word. The rows of a B tile are the 8
 * chunk vectors of sub-block 2j then the 8 of 2j + 1: one K = 64 step against
 * the activation bytes 64j .. 64j + 63. The mins term is integer (vpdpwssd), as
 * in the VNNI kernel, over the pair sums S_k = bsum_2k + bsum_2k+1 (|S_k| <=
 * 32 * 128: an int16), two per lane.
 *
 * A call takes up to two token tiles (PACK_TOK_WIDE = 32 tokens), so each
 * widened B tile serves both, and the scaling of super-block b - 1 runs on the
 * vector units while the tile unit multiplies b.
 *   tiles 0, 1  A: 64 activation bytes of token tiles 0 and 1
 *   tiles 2, 3  B_lo, B_hi (16 x 64 bytes)
 *   tiles 4, 5  C_lo, C_hi of token tile 0; 6, 7 of token tile 1
 * The accumulators of 32 tokens do not fit the registers with the scales, so
 * they live in a small array (L1) across the super-blocks. */
#define TILE_Q4_K (PACK_ROWS * sizeof(block_q4_K))
#define Q4K_NB_MAX (AMX_NB_MAX * 32 / QK_K)

/* Per (super-block, token): the pair sums S_2p | S_2p+1 << 16, p = 0..3. */
static _Thread_local _Alignas(64) int32_t q4k_pair_sums[Q4K_NB_MAX * PACK_TOK_WIDE * 4];

static void configure_q4_K(int n0, int n1) {
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    const int n[2] = {n0, n1};
    for (int i = 0; i < 2; i++) {
        if (n[i] == 0) continue; /* an unused tile stays unconfigured */
        c.rows[i] = c.rows[4 + 2 * i] = c.rows[5 + 2 * i] = (uint8_t)n[i];
        c.colsb[i] = c.colsb[4 + 2 * i] = c.colsb[5 + 2 * i] = 64;
    }
    c.rows[2] = c.rows[3] = 16;
    c.colsb[2] = c.colsb[3] = 64;
    __asm__ __volatile__("ldtilecfg %0" : : "m"(c)); /* see configure() */
}

/* A scale digit of each row as a 16-bit lane value in both words of its lane. */
VT_INLINE __m512i word_pair(__m512i d) { return _mm512_or_si512(d, _mm512_slli_epi32(d, 16)); }

/* B_lo and B_hi of pair j (v: its 8 chunk vectors); sl / sh: the digits of
 * sub-blocks 2j ([0]) and 2j + 1 ([1]) as word pairs. */
VT_INLINE void widen_q4_K_folded(const uint8_t *v, const __m512i sl[2], const __m512i sh[2],
                                 uint8_t *blo, uint8_t *bhi) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    UNROLL
    for (int c = 0; c < 8; c++) {
        const __m512i raw = _mm512_loadu_si512(v + c * CHUNK_VEC);
        const __m512i lo = _mm512_and_si512(raw, m4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        _mm512_store_si512(blo + c * CHUNK_VEC, _mm512_mullo_epi16(lo, sl[0]));
        _mm512_store_si512(bhi + c * CHUNK_VEC, _mm512_mullo_epi16(lo, sh[0]));
        _mm512_store_si512(blo + (8 + c) * CHUNK_VEC, _mm512_mullo_epi16(hi, sl[1]));
        _mm512_store_si512(bhi + (8 + c) * CHUNK_VEC, _mm512_mullo_epi16(hi, sh[1]));
    }
}

/* Q5_K (cpu/pack.h): the Q4_K tile, then 8 chunk vectors of fifth bits (bit 2j
 * of a byte of qh chunk c goes with the low nibble of the same byte of quant
 * chunk 8j + c, bit 2j + 1 with its high nibble). With q = nibble + 16 h in
 * 0..31 the folded products reach 7 * 31 = 217, past a signed byte, so the B
 * tiles hold unsigned bytes and the multiply is tdpbsud (signed activations x
 * unsigned weights). Everything else is the Q4_K kernel: the same scales, mins
 * and pair sums, and isum = C_lo + 8 C_hi exactly (|isum| < 63 * 31 * 128 * 256
 * < 2^31). */
#define TILE_Q5_K (PACK_ROWS * sizeof(block_q5_K))
#define KQ_TILE(q5) ((q5) ? TILE_Q5_K : TILE_Q4_K)

/* Bit `bit` of every byte of h, moved to bit 4 (a 16-bit shift; the bits that
 * cross into the other byte of the word are masked off). */
VT_INLINE __m512i fifth_bit(__m512i h, int bit) {
    const __m512i s = bit <= 4 ? _mm512_slli_epi16(h, (unsigned)(4 - bit)) : _mm512_srli_epi16(h, (unsigned)(bit - 4));
    return _mm512_and_si512(s, _mm512_set1_epi8(0x10));
}

/* widen_q4_K_folded for Q5_K pair j: hv is the super-block's 8 qh chunk vectors. */
VT_INLINE void widen_q5_K_folded(const uint8_t *v, const uint8_t *hv, int j, const __m512i sl[2],
                                 const __m512i sh[2], uint8_t *blo, uint8_t *bhi) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    UNROLL
    for (int c = 0; c < 8; c++) {
        const __m512i raw = _mm512_loadu_si512(v + c * CHUNK_VEC), h = _mm512_loadu_si512(hv + c * CHUNK_VEC);
        const __m512i lo = _mm512_or_si512(_mm512_and_si512(raw, m4), fifth_bit(h, 2 * j));
        const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(raw, 4), m4), fifth_bit(h, 2 * j + 1));
        _mm512_store_si512(blo + c * CHUNK_VEC, _mm512_mullo_epi16(lo, sl[0]));
        _mm512_store_si512(bhi + c * CHUNK_VEC, _mm512_mullo_epi16(lo, sh[0]));
        _mm512_store_si512(blo + (8 + c) * CHUNK_VEC, _mm512_mullo_epi16(hi, sl[1]));
        _mm512_store_si512(bhi + (8 + c) * CHUNK_VEC, _mm512_mullo_epi16(hi, sh[1]));
    }
}

/* acc[t] += the scaled super-block b for the nt tokens, from its C tiles in ct
 * (ct[tt][0] = C_lo, ct[tt][1] = C_hi of token tile tt). */
static void q4_K_scale_sb(const uint8_t *tile, int32_t (*ct)[2][16 * 16], const float *dxb,
                          const int32_t *psb, int nt, float *acc) {
    const __m512 dw = load_f16x16(tile), dmw = load_f16x16(tile + 2 * PACK_ROWS);
    __m512i sc_lo, sc_hi, mn_lo, mn_hi;
    q4_K_scales_x16(tile + 4 * PACK_ROWS, &sc_lo, &sc_hi, &mn_lo, &mn_hi);
    __m512i mpair[4];
    UNROLL
    for (int p = 0; p < 4; p++) {
        const __m512i mn = p < 2 ? mn_lo : mn_hi;
        mpair[p] = _mm512_or_si512(lane_byte(mn, 2 * (p & 1)),
                                   _mm512_slli_epi32(lane_byte(mn, 2 * (p & 1) + 1), 16));
    }
    for (int t = 0; t < nt; t++) {
        const int tt = t >> 4, m = t & 15;
        const __m512i lo = _mm512_load_si512(ct[tt][0] + 16 * m), hi = _mm512_load_si512(ct[tt][1] + 16 * m);
        const __m512i isum = _mm512_add_epi32(lo, _mm512_slli_epi32(hi, 3));
        __m512i imin = _mm512_setzero_si512();
        UNROLL
        for (int p = 0; p < 4; p++) imin = _mm512_dpwssd_epi32(imin, mpair[p], _mm512_set1_epi32(psb[t * 4 + p]));
        const __m512 xd = _mm512_set1_ps(dxb[t]);
        __m512 a = _mm512_load_ps(acc + 16 * t);
        a = _mm512_fmadd_ps(_mm512_mul_ps(dw, xd), _mm512_cvtepi32_ps(isum), a);
        a = _mm512_fnmadd_ps(_mm512_mul_ps(dmw, xd), _mm512_cvtepi32_ps(imin), a);
        _mm512_store_ps(acc + 16 * t, a);
    }
}

/* tdpbssd for Q4_K's signed B tiles, tdpbsud for Q5_K's unsigned ones. */
#define KQ_DP(q5, c, a, b)                                                                  \
    do {                                                                                    \
        if (q5)                                                                             \
            _tile_dpbsud(c, a, b);                                                          \
        else                                                                                \
            _tile_dpbssd(c, a, b);                                                          \
    } while (0)

/* One group of Q4_K (q5 false) or Q5_K (q5 true) rows, a constant after inlining. */
VT_INLINE void kq_group_amx(const bool q5, int64_t nb, const uint8_t *g, const uint8_t *x,
                            size_t x_stride, const float *dx, const int32_t *ps, int n0, int n1,
                            float *y, int64_t ldy) {
    const size_t tile_bytes = KQ_TILE(q5);
    _Alignas(64) uint8_t bt[2][2][16 * CHUNK_VEC]; /* [pair parity][lo, hi] */
    _Alignas(64) int32_t ct[2][2][2][16 * 16];     /* [super-block parity][token tile][lo, hi] */
    _Alignas(64) float acc[PACK_TOK_WIDE * 16];
    const int nt = n0 + n1;
    memset(acc, 0, sizeof(float) * 16 * (size_t)nt);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = g + b * tile_bytes, *v = tile + 4 * PACK_ROWS + 3 * CHUNK_VEC;
        const uint8_t *xa = x + (size_t)b * sizeof(block_q8_K) + offsetof(block_q8_K, qs);
        __m512i sc_lo, sc_hi, mn_lo, mn_hi;
        q4_K_scales_x16(tile + 4 * PACK_ROWS, &sc_lo, &sc_hi, &mn_lo, &mn_hi);
        _tile_zero(4);
        _tile_zero(5);
        if (n1) {
            _tile_zero(6);
            _tile_zero(7);
        }
        for (int j = 0; j < 4; j++) {
            __m512i sl[2], sh[2];
            UNROLL
            for (int h = 0; h < 2; h++) {
                const __m512i sc = lane_byte(j < 2 ? sc_lo : sc_hi, (2 * j + h) & 3);
                sl[h] = word_pair(_mm512_and_si512(sc, _mm512_set1_epi32(7)));
                sh[h] = word_pair(_mm512_srli_epi32(sc, 3));
            }
            if (q5)
                widen_q5_K_folded(v + 8 * j * CHUNK_VEC, tile + TILE_Q4_K, j, sl, sh, bt[j & 1][0],
                                  bt[j & 1][1]);
            else
                widen_q4_K_folded(v + 8 * j * CHUNK_VEC, sl, sh, bt[j & 1][0], bt[j & 1][1]);
            _tile_loadd(2, bt[j & 1][0], CHUNK_VEC);
            _tile_loadd(3, bt[j & 1][1], CHUNK_VEC);
            _tile_loadd(0, xa + 64 * j, x_stride);
            KQ_DP(q5, 4, 0, 2);
            KQ_DP(q5, 5, 0, 3);
            if (n1) {
                _tile_loadd(1, xa + 16 * x_stride + 64 * j, x_stride);
                KQ_DP(q5, 6, 1, 2);
                KQ_DP(q5, 7, 1, 3);
            }
        }
        /* super-block b - 1 scales while b multiplies */
        if (b > 0)
            q4_K_scale_sb(tile - tile_bytes, ct[(b - 1) & 1], dx + (b - 1) * PACK_TOK_WIDE,
                          ps + (b - 1) * PACK_TOK_WIDE * 4, nt, acc);
        _tile_stored(4, ct[b & 1][0][0], 64);
        _tile_stored(5, ct[b & 1][0][1], 64);
        if (n1) {
            _tile_stored(6, ct[b & 1][1][0], 64);
            _tile_stored(7, ct[b & 1][1][1], 64);
        }
    }
    q4_K_scale_sb(g + (nb - 1) * tile_bytes, ct[(nb - 1) & 1], dx + (nb - 1) * PACK_TOK_WIDE,
                  ps + (nb - 1) * PACK_TOK_WIDE * 4, nt, acc);
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ldy, _mm512_load_ps(acc + 16 * t));
}

/* The Q4_K / Q5_K GEMM: the activation scales and pair sums, then the groups. */
VT_INLINE void kq_gemm_amx(const bool q5, int64_t n_in, const void *w, int64_t n_groups,
                           const void *x, size_t x_stride, const pack_xblock *xs, int n_tok, float *y,
                           int64_t ldy) {
    const int64_t nb = n_in / QK_K;
    (void)xs; /* the mins come from the Q8_K bsums */
    VT_ASSERT(nb <= Q4K_NB_MAX && n_tok >= 1 && n_tok <= PACK_TOK_WIDE);
    /* d_x and the bsum pair sums of every (super-block, token) */
    _Alignas(64) float dx[Q4K_NB_MAX * PACK_TOK_WIDE];
    for (int t = 0; t < n_tok; t++) {
        const block_q8_K *xr = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride);
        for (int64_t b = 0; b < nb; b++) {
            dx[b * PACK_TOK_WIDE + t] = xr[b].d;
            int32_t *pp = q4k_pair_sums + (b * PACK_TOK_WIDE + t) * 4;
            for (int p = 0; p < 4; p++) {
                const int16_t *bs = xr[b].bsums + 4 * p;
                const uint16_t s0 = (uint16_t)(bs[0] + bs[1]), s1 = (uint16_t)(bs[2] + bs[3]);
                pp[p] = (int32_t)((uint32_t)s0 | (uint32_t)s1 << 16);
            }
        }
    }
    const int n0 = n_tok < AMX_TILE_TOK ? n_tok : AMX_TILE_TOK, n1 = n_tok - n0;
    const size_t group_bytes = (size_t)nb * KQ_TILE(q5);
    tile_config saved;
    save_config(&saved);
    configure_q4_K(n0, n1);
    for (int64_t gi = 0; gi < n_groups; gi++)
        kq_group_amx(q5, nb, (const uint8_t *)w + (size_t)gi * group_bytes, (const uint8_t *)x,
                     x_stride, dx, q4k_pair_sums, n0, n1, y + gi * PACK_ROWS, ldy);
    restore_config(&saved);
}

void gemm_q4_K_amx(int64_t n_in, const void *w, int64_t n_groups, const void *x, size_t x_stride,
                   const pack_xblock *xs, int n_tok, float *y, int64_t ldy) {
    kq_gemm_amx(false, n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy);
}

void gemm_q5_K_amx(int64_t n_in, const void *w, int64_t n_groups, const void *x, size_t x_stride,
                   const pack_xblock *xs, int n_tok, float *y, int64_t ldy) {
    kq_gemm_amx(true, n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy);
}

/* ---- Q6_K ------------------------------------------------------------------------ */

/* A packed group (cpu/pack.h): per super-block its d[16] and a tile of four
 * quarters (scales, ql and qh chunk vectors). As for Q4_K the
 * sub-block scales go into the B tiles, here as a 16-bit product split in two:
 *   p = sc * (q - 32) in [-4096, 4096],  p = 128 hi + lo,  lo in 0..127,
 *   hi = p >> 7 in -32..32
 *   isum = sum_j sc_j sum (q - 32) x = C_lo + 128 C_hi
 * exactly in int32 (|isum| <= 4096 * 128 * 256 < 2^31), then converted once:
 * the _ref twin's (float)isum. The products are formed per 16-bit word (even and
 * odd bytes apart) and their two bytes put back in place, so the B tiles keep
 * the chunk order. K step s (activation bytes 64s .. 64s + 63, in half h = s/2 of
 * the super-block) takes B row r from quarter (h, u = r / 4 % 2): its ql chunk
 * vector r % 4 (r < 8) or 4 + r % 4 (r >= 8), low nibbles for even s and high
 * for odd, with the 2-bit field (2 (r / 8) + 4 (s & 1)) of its qh vector
 * 8 + r % 4; B row r is in sub-block 4s + r / 4, whose scales are quarter
 * (h, r / 4 % 2)'s of m = 2 (s & 1) + r / 8. Tiles as the Q4_K kernel's; no mins. */
#define Q6K_NB_MAX Q4K_NB_MAX

/* A signed value of each 32-bit lane in both of its 16-bit words. */
VT_INLINE __m512i word_pair_signed(__m512i d) {
    return _mm512_or_si512(_mm512_and_si512(d, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(d, 16));
}

/* B_lo and B_hi of K step s of one super-block (tile: its quarters). */
VT_INLINE void widen_q6_K_step(const uint8_t *tile, int s, uint8_t *blo, uint8_t *bhi) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(3), m7 = _mm512_set1_epi8(0x7f);
    const __m512i off = _mm512_set1_epi8(32);
    const __mmask64 odd = 0xaaaaaaaaaaaaaaaaull;
    const int h = s >> 1, hi_nib = s & 1;
    __m512i scw[4];
    UNROLL
    for (int i = 0; i < 4; i++)
        scw[i] = word_pair_signed(_mm512_cvtepi8_epi32(_mm_loadu_si128(
            (const __m128i *)(tile + (2 * h + (i & 1)) * PACK_Q6_K_QUARTER + PACK_Q6_K_SC(2 * (s & 1) + (i >> 1))))));
    UNROLL
    for (int r = 0; r < 16; r++) {
        const uint8_t *qt = tile + (2 * h + ((r >> 2) & 1)) * PACK_Q6_K_QUARTER;
        const __m512i raw = _mm512_loadu_si512(qt + PACK_Q6_K_VEC(r >> 3, r & 3));
        const __m512i hb = _mm512_loadu_si512(qt + PACK_Q6_K_VEC(2, r & 3));
        const __m512i nib = _mm512_and_si512(hi_nib ? _mm512_srli_epi16(raw, 4) : raw, m4);
        const __m512i top = _mm512_and_si512(_mm512_srli_epi16(hb, 2 * (r >> 3) + 4 * hi_nib), m3);
        const __m512i q = _mm512_sub_epi8(_mm512_or_si512(nib, _mm512_slli_epi16(top, 4)), off);
        const __m512i pe = _mm512_mullo_epi16(_mm512_srai_epi16(_mm512_slli_epi16(q, 8), 8), scw[r >> 2]);
        const __m512i po = _mm512_mullo_epi16(_mm512_srai_epi16(q, 8), scw[r >> 2]);
        _mm512_store_si512(blo + r * CHUNK_VEC,
                           _mm512_and_si512(_mm512_mask_blend_epi8(odd, pe, _mm512_slli_epi16(po, 8)), m7));
        _mm512_store_si512(bhi + r * CHUNK_VEC,
                           _mm512_mask_blend_epi8(odd, _mm512_srli_epi16(pe, 7), _mm512_slli_epi16(po, 1)));
    }
}

/* acc[t] += the scaled super-block for the nt tokens from its C tiles. */
static void q6_K_scale_sb(const vt_f16 *d, int32_t (*ct)[2][16 * 16], const float *dxb, int nt,
                          float *acc) {
    const __m512 dw = load_f16x16(d);
    for (int t = 0; t < nt; t++) {
        const int tt = t >> 4, m = t & 15;
        const __m512i lo = _mm512_load_si512(ct[tt][0] + 16 * m), hi = _mm512_load_si512(ct[tt][1] + 16 * m);
        const __m512i isum = _mm512_add_epi32(lo, _mm512_slli_epi32(hi, 7));
        const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(dxb[t]));
        _mm512_store_ps(acc + 16 * t, _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(isum), _mm512_load_ps(acc + 16 * t)));
    }
}

static void q6_K_group_amx(int64_t nb, const uint8_t *g, const uint8_t *x, size_t x_stride,
                           const float *dx, int n0, int n1, float *y, int64_t ldy) {
    _Alignas(64) uint8_t bt[2][2][16 * CHUNK_VEC]; /* [step parity][lo, hi] */
    _Alignas(64) int32_t ct[2][2][2][16 * 16];     /* [super-block parity][token tile][lo, hi] */
    _Alignas(64) float acc[PACK_TOK_WIDE * 16];
    const int nt = n0 + n1;
    memset(acc, 0, sizeof(float) * 16 * (size_t)nt);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = g + pack_q6_K_tile(nb, b);
        const uint8_t *xa = x + (size_t)b * sizeof(block_q8_K) + offsetof(block_q8_K, qs);
        _tile_zero(4);
        _tile_zero(5);
        if (n1) {
            _tile_zero(6);
            _tile_zero(7);
        }
        for (int s = 0; s < 4; s++) {
            widen_q6_K_step(tile, s, bt[s & 1][0], bt[s & 1][1]);
            _tile_loadd(2, bt[s & 1][0], CHUNK_VEC);
            _tile_loadd(3, bt[s & 1][1], CHUNK_VEC);
            _tile_loadd(0, xa + 64 * s, x_stride);
            _tile_dpbssd(4, 0, 2);
            _tile_dpbssd(5, 0, 3);
            if (n1) {
                _tile_loadd(1, xa + 16 * x_stride + 64 * s, x_stride);
                _tile_dpbssd(6, 1, 2);
                _tile_dpbssd(7, 1, 3);
            }
        }
        if (b > 0) /* super-block b - 1 scales while b multiplies */
            q6_K_scale_sb((const vt_f16 *)(g + pack_q6_K_d(nb, b - 1)), ct[(b - 1) & 1], dx + (b - 1) * PACK_TOK_WIDE,
                          nt, acc);
        _tile_stored(4, ct[b & 1][0][0], 64);
        _tile_stored(5, ct[b & 1][0][1], 64);
        if (n1) {
            _tile_stored(6, ct[b & 1][1][0], 64);
            _tile_stored(7, ct[b & 1][1][1], 64);
        }
    }
    q6_K_scale_sb((const vt_f16 *)(g + pack_q6_K_d(nb, nb - 1)), ct[(nb - 1) & 1], dx + (nb - 1) * PACK_TOK_WIDE, nt,
                  acc);
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ldy, _mm512_load_ps(acc + 16 * t));
}

void gemm_q6_K_amx(int64_t n_in, const void *w, int64_t n_groups, const void *x, size_t x_stride,
                   const pack_xblock *xs, int n_tok, float *y, int64_t ldy) {
    const int64_t nb = n_in / QK_K;
    (void)xs;
    VT_ASSERT(nb <= Q6K_NB_MAX && n_tok >= 1 && n_tok <= PACK_TOK_WIDE);
    _Alignas(64) float dx[Q6K_NB_MAX * PACK_TOK_WIDE];
    for (int t = 0; t < n_tok; t++) {
        const block_q8_K *xr = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride);
        for (int64_t b = 0; b < nb; b++) dx[b * PACK_TOK_WIDE + t] = xr[b].d;
    }
    const int n0 = n_tok < AMX_TILE_TOK ? n_tok : AMX_TILE_TOK, n1 = n_tok - n0;
    const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_q6_K);
    tile_config saved;
    save_config(&saved);
    configure_q4_K(n0, n1);
    for (int64_t gi = 0; gi < n_groups; gi++)
        q6_K_group_amx(nb, (const uint8_t *)w + (size_t)gi * group_bytes, (const uint8_t *)x,
                       x_stride, dx, n0, n1, y + gi * PACK_ROWS, ldy);
    restore_config(&saved);
}
