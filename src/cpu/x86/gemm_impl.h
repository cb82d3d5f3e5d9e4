/* The x86 GEMMs over the packed layouts of cpu/pack.h, written once over a small
 * set of vector primitives and instantiated by each ISA file, the way
 * cpu/attention_impl.h is for attention and llamafile's tinyBLAS for its GEMMs:
 * gemm_avx2.c (8 rows a ymm, maddubs), gemm_avx512.c (16 rows a zmm, VNNI
 * vpdpbusd) and gemm8_avx512.c (8 rows a ymm with vpdpbusd: the AVX-512 tier's
 * Q8_0 decode). gemm_amx.c is its own design.
 *
 * A 64-byte chunk vector holds 4 quant bytes of each of the 16 rows of a group;
 * a row vector is GEMM_VL rows of it (GEMM_NVG of them a group). The integer dot
 * of a block ends in one 32-bit lane per row, with no horizontal reduction, and
 * one fma per block and token updates GEMM_VL outputs. The integer sums are
 * exact in any order and the float steps are those of the _ref twins in pack.c
 * (sc = d_w * d_x, acc = fma(sc, (float)isum, acc)), so every tier and tile
 * gives the _ref bits.
 *
 * The including file defines, before the #include:
 *   GEMM_SFX             the tier suffix: the GEMMs are gemm_<type>_<GEMM_SFX>[_variant]
 *   GEMM_VL              rows a vector (8 or 16)
 *   vi, vf               the integer and float vector types (GEMM_VL 32-bit lanes)
 *   vi_load(p) vi_bcast32(p) vi_set1(c) vi_zero() vi_add(a, b) vi_sra(a, n)
 *                        (int32 lanes; bcast32: the 4 bytes at p in every lane)
 *   nib_lo(raw) nib_hi(raw)    the low / high nibble of every byte (0..15)
 *   nib_hi16(raw)        the high nibbles as the dot's operand: nib_hi, or 16 x it
 *                        where GEMM_NIB_HI16_SHIFT is 4 (its sums are shifted back)
 *   mxfp4_grid(nib)      MXFP4 nibbles mapped to their grid value + 12 (0..24)
 *   q8_w(raw), q8_x(x, raw)    a Q8_0 chunk as the dot's unsigned operand and the
 *                        activation against it: |w| and x with w's sign, or w + 128
 *                        and x where GEMM_Q8_BIASED (pack_xblock.bias takes the
 *                        128 out)
 *   vi_dot(acc, w, x)    acc + the sums of 4 products u8 w x s8 x per 32-bit lane
 *   run_dot(acc, w, x)   the same into a run: int16 pair sums (maddubs) or int32
 *                        lanes; a run ends in run_i32(run), its int32 lanes, and
 *                        is exact while each int16 lane (2 products a chunk) stays
 *                        below 2^15: 8 chunks of quants up to 15 against int8, 4
 *                        up to 31, 2 up to 63
 *   vf_zero() vf_set1(x) vf_mul vf_fma(a, b, c) vf_cvt(vi) vf_store(p, v)
 *   vf_f16(p)            GEMM_VL halves as floats; vf_e8m0_half(p): GEMM_VL E8M0
 *                        bytes as halved floats (mxfp4_e8m0_half)
 *   GEMM_KEEP(v)         pins an accumulator in a register (KEEP_REG on AVX2,
 *                        whose 16 registers GCC otherwise spills; nothing on AVX-512)
 * and the shape of the tiles (the only things that differ between tiers):
 *   GEMM_LEGACY_NV(nt)   row vectors a pass of nt tokens takes over a Q4_0 / Q8_0 /
 *                        MXFP4 group: fewer than GEMM_NVG make several passes over
 *                        a group, more take that many groups at once
 *   GEMM_SPLIT_SUMS      1: a block's sums over its elements 0..15 and 16..31 in
 *                        two accumulators (32 registers: more chains); 0: in one
 *   GEMM_BIAS_IN_ACC     1: a block's sum starts at pack_xblock.bias; 0: it is added
 *                        at the end (a run of int16 sums cannot hold it) */
#include "cpu/pack.h"
#include "cpu/unroll.h"
#include "quant/blocks.h"

#ifndef GEMM_SFX
#error "define GEMM_SFX (the tier suffix) and the primitives before including gemm_impl.h"
#endif

#define CHUNK_VEC 64
#define GEMM_NVG (PACK_ROWS / GEMM_VL)
#define GEMM_NV_MAX 2
/* Q4_K and Q5_K groups are runs of per-super-block tiles (cpu/pack.h) */
#define TILE_Q4_K (PACK_ROWS * sizeof(block_q4_K))
#define TILE_Q5_K (PACK_ROWS * sizeof(block_q5_K))
/* Register tiles: every small loop fully unrolled, so arrays of vectors stay in
 * registers (GCC at -O2 would otherwise keep them on the stack). */
#define UNROLL VT_UNROLL(16)

#define GEMM_NAME_(t, sfx, var) gemm_##t##_##sfx##var
#define GEMM_NAME(t, sfx, var) GEMM_NAME_(t, sfx, var)

/* Software prefetch: the hardware prefetcher alone left decode well below the
 * bandwidth a plain read loop gets on the machines measured, so every kernel
 * also prefetches ahead of the block being computed, as one linear stream per
 * group (every layout reads in address order), into L1. Every kernel also comes
 * without (the _nopf GEMMs, matmul.h mm_probe_prefetch picks at load), because
 * some machines stream faster without. The figures: BENCHMARKS.md, "x86 GEMM
 * prefetch distances". #ifndef-guarded to compare them (bench/gemm_ab). */
#ifndef PF_DIST
#define PF_DIST 6144
#endif
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T0
#endif
VT_INLINE void prefetch(const void *p) { _mm_prefetch((const char *)p, PF_HINT); }

/* Prefetch every line from *next up to `until`. */
VT_INLINE void prefetch_to(const uint8_t **next, const uint8_t *until) {
    while (*next < until) {
        prefetch(*next);
        *next += CHUNK_VEC;
    }
}

/* The prefetch streams of a pass over ng groups at once (gb bytes each, from g
 * on): offsets next[h] .. until of group h, where an offset past its end is the
 * same group of the next pass, ng * gb on. So each stream runs into the group it
 * reads next: one linear stream over two groups would leave the first PF_DIST
 * bytes of every second group to be prefetched only after they were read. For
 * ng = 1 this is the linear stream. */
VT_INLINE void prefetch_groups(const uint8_t *g, size_t gb, const int ng, size_t next[], size_t until) {
    for (int h = 0; h < ng; h++)
        for (; next[h] < until; next[h] += CHUNK_VEC)
            prefetch(g + h * gb + next[h] + (next[h] >= gb ? (size_t)(ng - 1) * gb : 0));
}

/* Byte offset, from a pass's first group, of row vector i's part of a vector of
 * row_bytes bytes a row (4: a chunk vector; 2: f16 scales; 1: E8M0 scales). */
VT_INLINE size_t vec_off(const int i, size_t gb, const size_t row_bytes) {
    return (size_t)(i / GEMM_NVG) * gb + (size_t)(i % GEMM_NVG) * GEMM_VL * row_bytes;
}

/* Output offset of row vector i in the pass's first row of outputs. */
VT_INLINE int64_t vec_row(const int i) { return (int64_t)(i / GEMM_NVG) * PACK_ROWS + (i % GEMM_NVG) * GEMM_VL; }

/* ---- Q4_0, Q8_0, MXFP4 (x Q8_0) ---------------------------------------------------------
 *
 * Q4_0 nibbles are unsigned (0..15) and the -8 offset is taken out exactly with
 * the block's activation sum (pack_xblock.bias = -8 * sum x), so the 8 chunks
 * of a block (low and high nibbles of 4) fit one run. MXFP4 maps each nibble
 * through the grid to v + 12 (0..24, bias -12 * sum x): its low and high nibbles
 * sum in two runs of 4 chunks. Q8_0 widens every product sum to int32 (vi_dot). The
 * weights of a chunk are unpacked once and used for every token of the tile,
 * which is what makes prefill compute-bound rather than unpack-bound. */

enum { LEG_Q4_0, LEG_Q8_0, LEG_MXFP4 };

/* Rows of nv row vectors from vector v0 on (one group's, or those of nv /
 * GEMM_NVG groups gb bytes apart), nt tokens, one pass over their blocks. */
VT_INLINE void legacy_rows(const int type, int64_t nb, const uint8_t *g, size_t gb, const int v0, const int nv,
                           const block_q8_0 *const *xr, const pack_xblock *xs, float *y, int64_t ldy,
                           const int nt, const bool pf_on) {
    const size_t blk = type == LEG_Q4_0 ? sizeof(block_q4_0) : type == LEG_Q8_0 ? sizeof(block_q8_0) : sizeof(block_mxfp4);
    const size_t qb = type == LEG_Q4_0 ? PACK_QB_Q4_0 : PACK_QB_Q8_0;
    const int ng = nv > GEMM_NVG ? nv / GEMM_NVG : 1;
    const bool bias = type != LEG_Q8_0 || GEMM_Q8_BIASED;
    const bool split = GEMM_SPLIT_SUMS || type == LEG_MXFP4; /* sums of elements 0..15, 16..31 apart */
    vf acc[PACK_TOK_MAX][GEMM_NV_MAX];
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nv; r++) acc[t][r] = vf_zero();
    size_t pf[GEMM_NV_MAX] = {PF_DIST, PF_DIST};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *v = g + (type == LEG_MXFP4 ? pack_mxfp4_qs(nb, b) : pack_pair_qs(nb, b, qb));
        if (pf_on) prefetch_groups(g, gb, ng, pf, PF_DIST + (size_t)(b + 1) * PACK_ROWS * blk);
        vi sa[PACK_TOK_MAX][GEMM_NV_MAX], sb[PACK_TOK_MAX][GEMM_NV_MAX];
        UNROLL
        for (int t = 0; t < nt; t++)
            UNROLL
            for (int r = 0; r < nv; r++) {
                sa[t][r] = GEMM_BIAS_IN_ACC && bias ? vi_set1(xs[t * nb + b].bias) : vi_zero();
                if (split) sb[t][r] = vi_zero();
            }
        UNROLL
        for (int k = 0; k < 4; k++) {
            /* the weights against elements 4k.. (wa) and 16 + 4k.. (wb): Q4_0's
             * and MXFP4's low and high nibbles, Q8_0's chunks k and 4 + k */
            vi ra[GEMM_NV_MAX], rb[GEMM_NV_MAX], wa[GEMM_NV_MAX], wb[GEMM_NV_MAX];
            UNROLL
            for (int r = 0; r < nv; r++) {
                const uint8_t *p = v + vec_off(v0 + r, gb, 4) + k * CHUNK_VEC;
                ra[r] = vi_load(p);
                if (type == LEG_Q8_0) {
                    rb[r] = vi_load(p + 4 * CHUNK_VEC);
                    wa[r] = q8_w(ra[r]);
                    wb[r] = q8_w(rb[r]);
                } else if (type == LEG_Q4_0) {
                    wa[r] = nib_lo(ra[r]);
                    wb[r] = split ? nib_hi16(ra[r]) : nib_hi(ra[r]);
                } else {
                    wa[r] = mxfp4_grid(nib_lo(ra[r]));
                    wb[r] = mxfp4_grid(nib_hi(ra[r]));
                }
            }
            UNROLL
            for (int t = 0; t < nt; t++) {
                const vi xa = vi_bcast32(xr[t][b].qs + 4 * k), xb = vi_bcast32(xr[t][b].qs + 16 + 4 * k);
                UNROLL
                for (int r = 0; r < nv; r++) {
                    if (type == LEG_Q8_0) {
                        sa[t][r] = vi_dot(sa[t][r], wa[r], q8_x(xa, ra[r]));
                        if (split) sb[t][r] = vi_dot(sb[t][r], wb[r], q8_x(xb, rb[r]));
                        else sa[t][r] = vi_dot(sa[t][r], wb[r], q8_x(xb, rb[r]));
                    } else {
                        sa[t][r] = run_dot(sa[t][r], wa[r], xa);
                        if (split) sb[t][r] = run_dot(sb[t][r], wb[r], xb);
                        else sa[t][r] = run_dot(sa[t][r], wb[r], xb);
                    }
                    GEMM_KEEP(sa[t][r]);
                    if (split) GEMM_KEEP(sb[t][r]);
                }
            }
        }
        UNROLL
        for (int r = 0; r < nv; r++) {
            const vf dw = type == LEG_MXFP4 ? vf_e8m0_half(g + vec_off(v0 + r, gb, 1) + pack_mxfp4_e(b))
                                            : vf_f16(g + vec_off(v0 + r, gb, 2) + pack_pair_d(b, qb));
            UNROLL
            for (int t = 0; t < nt; t++) {
                const pack_xblock *xi = xs + t * nb + b;
                vi s;
                if (type == LEG_Q8_0) s = split ? vi_add(sa[t][r], sb[t][r]) : sa[t][r];
                else if (type == LEG_MXFP4) s = vi_add(run_i32(sa[t][r]), run_i32(sb[t][r]));
                else if (split) s = vi_add(run_i32(sa[t][r]), vi_sra(run_i32(sb[t][r]), GEMM_NIB_HI16_SHIFT));
                else s = run_i32(sa[t][r]);
                if (bias && !GEMM_BIAS_IN_ACC) s = vi_add(s, vi_set1(xi->bias));
                acc[t][r] = vf_fma(vf_mul(dw, vf_set1(xi->d)), vf_cvt(s), acc[t][r]);
            }
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nv; r++) vf_store(y + t * ldy + vec_row(v0 + r), acc[t][r]);
}

/* All groups, nt tokens, in passes of GEMM_LEGACY_NV(nt) row vectors: past a
 * group's, a pass takes that many groups at once (any last ones one by one);
 * within it, a group takes several passes, and only the first prefetches (the
 * others reread its lines from L1 / L2). */
VT_INLINE void legacy_tiles(const int type, int64_t nb, const uint8_t *w, int64_t n_groups, size_t gb,
                            const block_q8_0 *const *xr, const pack_xblock *xs, float *y, int64_t ldy,
                            const int nt, const bool pf_on) {
    const int nv = GEMM_LEGACY_NV(nt);
    int64_t gi = 0;
    if (nv > GEMM_NVG)
        for (; gi + nv / GEMM_NVG <= n_groups; gi += nv / GEMM_NVG)
            legacy_rows(type, nb, w + gi * gb, gb, 0, nv, xr, xs, y + gi * PACK_ROWS, ldy, nt, pf_on);
    const int np = nv < GEMM_NVG ? nv : GEMM_NVG;
    for (; gi < n_groups; gi++)
        for (int v0 = 0; v0 < GEMM_NVG; v0 += np)
            legacy_rows(type, nb, w + gi * gb, gb, v0, np, xr, xs, y + gi * PACK_ROWS, ldy, nt, pf_on && v0 == 0);
}

/* The body of an exported legacy-type GEMM (pack_gemm_fn). */
VT_INLINE void legacy_gemm(const int type, int64_t n_in, const void *w, int64_t n_groups, const void *x,
                           size_t x_stride, const pack_xblock *xs, int n_tok, float *y, int64_t ldy,
                           const bool pf_on) {
    const int64_t nb = n_in / 32;
    const size_t blk = type == LEG_Q4_0 ? sizeof(block_q4_0) : type == LEG_Q8_0 ? sizeof(block_q8_0) : sizeof(block_mxfp4);
    const size_t gb = (size_t)nb * PACK_ROWS * blk;
    const block_q8_0 *xr[PACK_TOK_MAX];
    for (int t = 0; t < n_tok; t++) xr[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride);
    switch (n_tok) {
    case 4: legacy_tiles(type, nb, w, n_groups, gb, xr, xs, y, ldy, 4, pf_on); break;
    case 3: legacy_tiles(type, nb, w, n_groups, gb, xr, xs, y, ldy, 3, pf_on); break;
    case 2: legacy_tiles(type, nb, w, n_groups, gb, xr, xs, y, ldy, 2, pf_on); break;
    default: legacy_tiles(type, nb, w, n_groups, gb, xr, xs, y, ldy, 1, pf_on); break;
    }
}

/* gemm_<t>_<GEMM_SFX><var>: t q4_0, q8_0 or mxfp4, LEG its LEG_ constant */
#define GEMM_LEGACY(t, LEG, var, pf_on)                                                           \
    void GEMM_NAME(t, GEMM_SFX, var)(int64_t n_in, const void *w, int64_t n_groups, const void *x, \
                                     size_t x_stride, const pack_xblock *xs, int n_tok, float *y,  \
                                     int64_t ldy) {                                                \
        legacy_gemm(LEG, n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy, pf_on);               \
    }

