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
 *   vf_zero() vf_set1(x) vf_mul vf_add vf_fma(a, b, c) vf_cvt(vi) vf_store(p, v)
 *   vf_f16(p)            GEMM_VL halves as floats; vf_e8m0_half(p): GEMM_VL E8M0
 *                        bytes as halved floats (mxfp4_e8m0_half)
 *   GEMM_KEEP(v)         pins an accumulator in a register (KEEP_REG on AVX2,
 *                        whose 16 registers GCC otherwise spills; nothing on AVX-512)
 * and the shape of the tiles (the only things that differ between tiers):
 *   GEMM_LEGACY_NV(nt)   row vectors of a group a pass of nt tokens takes over
 *                        Q4_0 / Q8_0 / MXFP4 groups (at most GEMM_NVG; fewer make
 *                        several passes over a group)
 *   GEMM_LEGACY_NS(leg, nt)  streams such a pass reads (1 or 2): 2 takes group g
 *                        of the call together with group g + n_groups / 2 (see
 *                        legacy_tiles), where the registers hold twice the tile
 *   GEMM_LEGACY_TURNS(leg, nt)  1: a two-stream pass takes each block of one
 *                        group, then of the other, so its integer tile is one
 *                        group's (legacy_rows); 0 (the default): both at once
 *   GEMM_SPLIT_SUMS      1: a block's sums over its elements 0..15 and 16..31 in
 *                        two accumulators (32 registers: more chains); 0: in one
 *   GEMM_BIAS_IN_ACC     1: a block's sum starts at pack_xblock.bias; 0: it is added
 *                        at the end (a run of int16 sums cannot hold it) */
#include "cpu/pack.h"
#include "cpu/unroll.h"
#include "quant/blocks.h"

#include <assert.h>
#include <stddef.h>

#ifndef GEMM_SFX
#error "define GEMM_SFX (the tier suffix) and the primitives before including gemm_impl.h"
#endif

#define CHUNK_VEC 64
#define GEMM_NVG (PACK_ROWS / GEMM_VL)
#define GEMM_NV_MAX 2
/* row vectors a pass takes at most: GEMM_LEGACY_NV x GEMM_LEGACY_NS, or a K-quant
 * pass of two streams in turns (GEMM_K_TURNS); GEMM_NV_MAX of them at once in a
 * K-quant's integer tile */
#define GEMM_PASS_MAX 4
/* Between the turns of two streams: the activations both turns read are loaded
 * again in the second, instead of the first turn's registers being kept (and
 * spilled) across it. */
#define TURN_BARRIER() __asm__ volatile("" ::: "memory")
/* Older tier files (the variants bench/gemm_ab compiles) do not name the turns. */
#ifndef GEMM_LEGACY_TURNS
#define GEMM_LEGACY_TURNS(leg, nt) 0
#endif
#ifndef GEMM_K_TURNS
#define GEMM_K_TURNS 0
#endif
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

/* The prefetch streams of a pass over ns groups gs bytes apart (from g on):
 * offsets next[s] .. until from stream s's group. A pass is followed by the one
 * over the next group of each stream, the next in memory, so an offset past its
 * group's end is already the right line of the group that stream reads next:
 * each stream is one linear run through its groups. */
VT_INLINE void prefetch_streams(const uint8_t *g, size_t gs, const int ns, size_t next[], size_t until) {
    for (int s = 0; s < ns; s++)
        for (; next[s] < until; next[s] += CHUNK_VEC) prefetch(g + (size_t)s * gs + next[s]);
}

/* Byte offset, in its group, of row vector i's (< GEMM_NVG) part of a vector of
 * row_bytes bytes a row (4: a chunk vector; 2: f16 scales; 1: E8M0 scales). */
VT_INLINE size_t vec_off(const int i, const size_t row_bytes) { return (size_t)i * GEMM_VL * row_bytes; }

/* Output offset of row vector i in its group's row of outputs. */
VT_INLINE int64_t vec_row(const int i) { return (int64_t)i * GEMM_VL; }

/* Row vector r of a pass over ns streams of nv row vectors (from v0 on) each:
 * vector v0 + r % nv of stream r / nv, whose group lies gs bytes (its outputs
 * ys floats) after the previous stream's. Its byte offset from the pass's first
 * group, and its output offset. */
VT_INLINE size_t pass_off(const int r, const int v0, const int nv, size_t gs, const size_t row_bytes) {
    return (size_t)(r / nv) * gs + vec_off(v0 + r % nv, row_bytes);
}
VT_INLINE int64_t pass_row(const int r, const int v0, const int nv, int64_t ys) {
    return (int64_t)(r / nv) * ys + vec_row(v0 + r % nv);
}

/* ---- Q4_0, Q5_0, Q8_0, MXFP4 (x Q8_0), Q4_1, Q5_1 (x Q8_1) ------------------------------
 *
 * Q4_0 nibbles are unsigned (0..15) and the -8 offset is taken out exactly with
 * the block's activation sum (pack_xblock.bias = -8 * sum x), so the 8 chunks
 * of a block (low and high nibbles of 4) fit one run. Q5_0 is Q4_0 with each
 * nibble's fifth bit or'ed in at bit 4 (q5_quants: one shift of the block's
 * high-bit vector serves a chunk's 16 rows) and the offset 16; its quants up to
 * 31 sum in two runs of 4 chunks. Q4_1 and Q5_1 are unsigned without an offset;
 * their min comes in per block as m_w * s_x (pack_xblock.s), and their
 * activations are Q8_1 blocks. These three take the float steps of their quant
 * module _ref dots (a multiply and an add, no fma: cpu/pack.h), so that their
 * packed GEMMs give the file-layout _ref's bits. MXFP4 maps each nibble through the grid to
 * v + 12 (0..24, bias -12 * sum x): its low and high nibbles sum in two runs of
 * 4 chunks. Q8_0 widens every product sum to int32 (vi_dot). The weights of a
 * chunk are unpacked once and used for every token of the tile, which is what
 * makes prefill compute-bound rather than unpack-bound. */

enum { LEG_Q4_0, LEG_Q8_0, LEG_MXFP4, LEG_Q5_0, LEG_Q4_1, LEG_Q5_1 };

/* Bytes of one file-layout block of a legacy type (a group holds 16 of each). */
VT_INLINE size_t leg_blk(const int type) {
    switch (type) {
    case LEG_Q4_0: return sizeof(block_q4_0);
    case LEG_Q8_0: return sizeof(block_q8_0);
    case LEG_MXFP4: return sizeof(block_mxfp4);
    case LEG_Q5_0: return sizeof(block_q5_0);
    case LEG_Q4_1: return sizeof(block_q4_1);
    default: return sizeof(block_q5_1);
    }
}
/* Q5_0, Q5_1: a fifth bit per quant; Q4_1, Q5_1: a min per block, Q8_1 activations */
VT_INLINE bool leg_q5(const int type) { return type == LEG_Q5_0 || type == LEG_Q5_1; }
VT_INLINE bool leg_min(const int type) { return type == LEG_Q4_1 || type == LEG_Q5_1; }
/* quant bytes a block of a group */
VT_INLINE size_t leg_qb(const int type) {
    return type == LEG_Q8_0 ? PACK_QB_Q8_0 : leg_q5(type) ? PACK_QB_Q5_0 : PACK_QB_Q4_0;
}
/* Byte offsets in a group of nb blocks of block b's quants and of its 16 f16
 * scales d (Q4_1 / Q5_1: the mins m follow at + 2 * PACK_ROWS); not MXFP4's. */
VT_INLINE size_t leg_qs(const int type, int64_t nb, int64_t b) {
    if (type == LEG_MXFP4) return pack_mxfp4_qs(nb, b);
    if (leg_min(type)) return pack_dm_tile(b, leg_qb(type)) + 4 * PACK_ROWS;
    return pack_pair_qs(nb, b, leg_qb(type));
}
VT_INLINE size_t leg_d(const int type, int64_t b) {
    return leg_min(type) ? pack_dm_tile(b, leg_qb(type)) : pack_pair_d(b, leg_qb(type));
}

/* Q5_0 / Q5_1 quants of chunk k from its nibbles and the block's high-bit
 * vector; the tiers without the K-quant primitives (GEMM_LEGACY_ONLY) take
 * neither type. */
#ifndef GEMM_LEGACY_ONLY
#define LEG_Q5_DOUBLED GEMM_Q5_DOUBLED
VT_INLINE void leg_q5_quants(vi raw, vi qh, const int k, vi *lo, vi *hi) { q5_quants(raw, qh, k, lo, hi); }
#else
#define LEG_Q5_DOUBLED 0
VT_INLINE void leg_q5_quants(vi raw, vi qh, const int k, vi *lo, vi *hi) {
    (void)raw, (void)qh, (void)k;
    *lo = *hi = vi_zero();
}
#endif

/* The weights of one row vector against elements 4k.. (wa) and 16 + 4k..
 * (wb), from its chunk vector k at p: Q4_0's, Q4_1's and MXFP4's low and high
 * nibbles, Q5_0's and Q5_1's with their fifth bits (the block's high-bit
 * vector follows its 4 chunk vectors), Q8_0's chunks k and 4 + k (ra, rb: the
 * raw chunks q8_x reads; ra for the others). */
VT_INLINE void legacy_w(const int type, const bool split, const uint8_t *p, const int k, vi *ra, vi *rb, vi *wa,
                        vi *wb) {
    *ra = *rb = vi_load(p);
    if (type == LEG_Q8_0) {
        *rb = vi_load(p + 4 * CHUNK_VEC);
        *wa = q8_w(*ra);
        *wb = q8_w(*rb);
    } else if (leg_q5(type)) {
        leg_q5_quants(*ra, vi_load(p + (4 - k) * CHUNK_VEC), k, wa, wb);
    } else if (type == LEG_MXFP4) {
        *wa = mxfp4_grid(nib_lo(*ra));
        *wb = mxfp4_grid(nib_hi(*ra));
    } else {
        *wa = nib_lo(*ra);
        *wb = split ? nib_hi16(*ra) : nib_hi(*ra);
    }
}

/* The products of one row vector's weights (legacy_w) with one token's
 * broadcast activation bytes xa, xb into its sums sa (and sb where split). */
VT_INLINE void legacy_dot(const int type, const bool split, vi *sa, vi *sb, vi ra, vi rb, vi wa, vi wb, vi xa, vi xb) {
    if (type == LEG_Q8_0) {
        *sa = vi_dot(*sa, wa, q8_x(xa, ra));
        if (split) *sb = vi_dot(*sb, wb, q8_x(xb, rb));
        else *sa = vi_dot(*sa, wb, q8_x(xb, rb));
    } else {
        *sa = run_dot(*sa, wa, xa);
        if (split) *sb = run_dot(*sb, wb, xb);
        else *sa = run_dot(*sa, wb, xb);
    }
    GEMM_KEEP(*sa);
    if (split) GEMM_KEEP(*sb);
}

/* Block b of ns streams of nv row vectors each (from vector v0 on: see
 * pass_off; the streams' groups gs bytes apart), nt tokens: its integer sums
 * and float steps into acc[t][a0 + r] for row vector r of the pass; xr[t]:
 * token t's activation row (Q8_0 blocks, Q8_1 for Q4_1 / Q5_1). */
VT_INLINE void legacy_block(const int type, int64_t nb, int64_t b, const uint8_t *g, size_t gs, const int ns,
                            const int v0, const int nv, const uint8_t *const *xr, const pack_xblock *xs,
                            const int nt, vf acc[PACK_TOK_MAX][GEMM_PASS_MAX], const int a0) {
    const bool q5 = leg_q5(type), min = leg_min(type);
    const size_t xblk = min ? sizeof(block_q8_1) : sizeof(block_q8_0);
    const size_t xoff = min ? offsetof(block_q8_1, qs) : offsetof(block_q8_0, qs);
    const int nr = ns * nv; /* row vectors of the pass */
    const bool bias = type == LEG_Q8_0 ? GEMM_Q8_BIASED : !min;
    /* sums of elements 0..15, 16..31 apart */
    const bool split = GEMM_SPLIT_SUMS || type == LEG_MXFP4 || q5;
    const uint8_t *v = g + leg_qs(type, nb, b);
    vi sa[PACK_TOK_MAX][GEMM_PASS_MAX], sb[PACK_TOK_MAX][GEMM_PASS_MAX];
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nr; r++) {
            sa[t][r] = GEMM_BIAS_IN_ACC && bias ? vi_set1(xs[t * nb + b].bias) : vi_zero();
            if (split) sb[t][r] = vi_zero();
        }
    UNROLL
    for (int k = 0; k < 4; k++) {
        if (nt == 1) {
            /* one token: each row vector's weights right before its dots, so
             * those of a two-stream pass are not all live at once */
            const int8_t *xq = (const int8_t *)(xr[0] + (size_t)b * xblk + xoff);
            const vi xa = vi_bcast32(xq + 4 * k), xb = vi_bcast32(xq + 16 + 4 * k);
            UNROLL
            for (int r = 0; r < nr; r++) {
                vi ra, rb, wa, wb;
                legacy_w(type, split, v + pass_off(r, v0, nv, gs, 4) + k * CHUNK_VEC, k, &ra, &rb, &wa, &wb);
                legacy_dot(type, split, &sa[0][r], &sb[0][r], ra, rb, wa, wb, xa, xb);
            }
            continue;
        }
        /* several tokens: the weights of the pass once, for every token */
        vi ra[GEMM_PASS_MAX], rb[GEMM_PASS_MAX], wa[GEMM_PASS_MAX], wb[GEMM_PASS_MAX];
        UNROLL
        for (int r = 0; r < nr; r++)
            legacy_w(type, split, v + pass_off(r, v0, nv, gs, 4) + k * CHUNK_VEC, k, &ra[r], &rb[r], &wa[r],
                     &wb[r]);
        UNROLL
        for (int t = 0; t < nt; t++) {
            const int8_t *xq = (const int8_t *)(xr[t] + (size_t)b * xblk + xoff);
            const vi xa = vi_bcast32(xq + 4 * k), xb = vi_bcast32(xq + 16 + 4 * k);
            UNROLL
            for (int r = 0; r < nr; r++) legacy_dot(type, split, &sa[t][r], &sb[t][r], ra[r], rb[r], wa[r], wb[r], xa, xb);
        }
    }
    UNROLL
    for (int r = 0; r < nr; r++) {
        const vf dw = type == LEG_MXFP4 ? vf_e8m0_half(g + pass_off(r, v0, nv, gs, 1) + pack_mxfp4_e(b))
                                        : vf_f16(g + pass_off(r, v0, nv, gs, 2) + leg_d(type, b));
        const vf mw = min ? vf_f16(g + pass_off(r, v0, nv, gs, 2) + leg_d(type, b) + 2 * PACK_ROWS) : vf_zero();
        UNROLL
        for (int t = 0; t < nt; t++) {
            const pack_xblock *xi = xs + t * nb + b;
            vi s;
            if (type == LEG_Q8_0) s = split ? vi_add(sa[t][r], sb[t][r]) : sa[t][r];
            else if (type == LEG_MXFP4) s = vi_add(run_i32(sa[t][r]), run_i32(sb[t][r]));
            else if (q5) s = vi_add(run_i32(sa[t][r]), vi_sra(run_i32(sb[t][r]), LEG_Q5_DOUBLED));
            else if (split) s = vi_add(run_i32(sa[t][r]), vi_sra(run_i32(sb[t][r]), GEMM_NIB_HI16_SHIFT));
            else s = run_i32(sa[t][r]);
            if (bias && !GEMM_BIAS_IN_ACC) s = vi_add(s, vi_set1(xi->bias));
            /* Q5_0, Q4_1, Q5_1: the float steps of the quant module's _ref dot */
            const vf sd = vf_mul(vf_mul(dw, vf_set1(xi->d)), vf_cvt(s));
            const int a = a0 + r;
            if (min) acc[t][a] = vf_add(acc[t][a], vf_add(sd, vf_mul(mw, vf_set1(xi->s))));
            else if (type == LEG_Q5_0) acc[t][a] = vf_add(acc[t][a], sd);
            else acc[t][a] = vf_fma(vf_mul(dw, vf_set1(xi->d)), vf_cvt(s), acc[t][a]);
        }
    }
}

/* Rows of ns streams of nv row vectors each (from vector v0 on: see pass_off;
 * the streams' groups gs bytes apart, their outputs ys floats), nt tokens, one
 * pass over their blocks. Two streams where the tier asks for turns
 * (GEMM_LEGACY_TURNS) take each block of one group, then of the other: the
 * integer tile holds one group's row vectors at a time, the float
 * accumulators both groups'. */
VT_INLINE void legacy_rows(const int type, int64_t nb, const uint8_t *g, size_t gs, const int ns, const int v0,
                           const int nv, const uint8_t *const *xr, const pack_xblock *xs, float *y, int64_t ys,
                           int64_t ldy, const int nt, const bool pf_on) {
    const size_t blk = leg_blk(type);
    const int nr = ns * nv; /* row vectors of the pass */
    const bool turns = ns == 2 && GEMM_LEGACY_TURNS(type, nt);
    vf acc[PACK_TOK_MAX][GEMM_PASS_MAX];
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nr; r++) acc[t][r] = vf_zero();
    size_t pf[2] = {PF_DIST, PF_DIST};
    for (int64_t b = 0; b < nb; b++) {
        if (pf_on) prefetch_streams(g, gs, ns, pf, PF_DIST + (size_t)(b + 1) * PACK_ROWS * blk);
        if (turns) {
            UNROLL
            for (int s = 0; s < ns; s++) {
                if (s) TURN_BARRIER();
                legacy_block(type, nb, b, g + (size_t)s * gs, 0, 1, v0, nv, xr, xs, nt, acc, s * nv);
            }
        } else {
            legacy_block(type, nb, b, g, gs, ns, v0, nv, xr, xs, nt, acc, 0);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nr; r++) vf_store(y + t * ldy + pass_row(r, v0, nv, ys), acc[t][r]);
}

/* All groups of a call, nt tokens, in passes of GEMM_LEGACY_NV(nt) row vectors
 * of a group (a group takes several passes where that is fewer than its
 * GEMM_NVG; only the first prefetches, the others reread its lines from L1 /
 * L2).
 *
 * Two streams: where the tier asks for them (GEMM_LEGACY_NS: its registers
 * hold two groups' tiles, or one group's tile and both groups' float
 * accumulators where they take turns, GEMM_LEGACY_TURNS), a pass reads group
 * g together with group g + h, h = n_groups / 2, for g < h, and the last group
 * of an odd count alone. One
 * sequential stream per thread read decode's weights more slowly than a plain
 * read loop over the same bytes (bench/gemm_ab), and `vt bench --bandwidth`
 * reads four; two far streams, each long and in address order, keep two runs
 * of lines in flight, where two adjacent groups would be one stream with a
 * jump. Pairs stay within the call: matmul.c hands a thread items of groups
 * (runs of its share, or of another's it takes), each its own call, so
 * partners never cross into another thread's groups. Per row the sums and float steps are those of one
 * group alone, so the bits do not depend on pairing. */
VT_INLINE void legacy_tiles(const int type, int64_t nb, const uint8_t *w, int64_t n_groups, size_t gb,
                            const uint8_t *const *xr, const pack_xblock *xs, float *y, int64_t ldy,
                            const int nt, const bool pf_on) {
    const int nv = GEMM_LEGACY_NV(nt);
    int64_t gi = 0;
    if (GEMM_LEGACY_NS(type, nt) == 2 && n_groups >= 2) {
        const int64_t h = n_groups / 2;
        for (; gi < h; gi++)
            for (int v0 = 0; v0 < GEMM_NVG; v0 += nv)
                legacy_rows(type, nb, w + gi * gb, (size_t)h * gb, 2, v0, nv, xr, xs, y + gi * PACK_ROWS,
                            h * PACK_ROWS, ldy, nt, pf_on && v0 == 0);
        gi = 2 * h;
    }
    for (; gi < n_groups; gi++)
        for (int v0 = 0; v0 < GEMM_NVG; v0 += nv)
            legacy_rows(type, nb, w + gi * gb, 0, 1, v0, nv, xr, xs, y + gi * PACK_ROWS, 0, ldy, nt,
                        pf_on && v0 == 0);
}

/* The body of an exported legacy-type GEMM (pack_gemm_fn). */
VT_INLINE void legacy_gemm(const int type, int64_t n_in, const void *w, int64_t n_groups, const void *x,
                           size_t x_stride, const pack_xblock *xs, int n_tok, float *y, int64_t ldy,
                           const bool pf_on) {
    const int64_t nb = n_in / 32;
    const size_t gb = (size_t)nb * PACK_ROWS * leg_blk(type);
    const uint8_t *xr[PACK_TOK_MAX];
    for (int t = 0; t < n_tok; t++) xr[t] = (const uint8_t *)x + (size_t)t * x_stride;
    switch (n_tok) {
    case 4: legacy_tiles(type, nb, w, n_groups, gb, xr, xs, y, ldy, 4, pf_on); break;
    case 3: legacy_tiles(type, nb, w, n_groups, gb, xr, xs, y, ldy, 3, pf_on); break;
    case 2: legacy_tiles(type, nb, w, n_groups, gb, xr, xs, y, ldy, 2, pf_on); break;
    default: legacy_tiles(type, nb, w, n_groups, gb, xr, xs, y, ldy, 1, pf_on); break;
    }
}

/* gemm_<t>_<GEMM_SFX><var>: t q4_0, q4_1, q5_0, q5_1, q8_0 or mxfp4, LEG its LEG_ constant */
#define GEMM_LEGACY(t, LEG, var, pf_on)                                                           \
    void GEMM_NAME(t, GEMM_SFX, var)(int64_t n_in, const void *w, int64_t n_groups, const void *x, \
                                     size_t x_stride, const pack_xblock *xs, int n_tok, float *y,  \
                                     int64_t ldy) {                                                \
        legacy_gemm(LEG, n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy, pf_on);               \
    }

#ifndef GEMM_LEGACY_ONLY
/* ---- Q4_K, Q5_K (x Q8_K) ----------------------------------------------------------------
 *
 * The including file also defines (gemm8_avx512.c, which takes only Q8_0, defines
 * GEMM_LEGACY_ONLY instead):
 *   vi_and vi_or(a, b) vi_srl vi_sll(a, n) (32-bit lanes) vi_bytes(c) (c in every byte)
 *   k_scale(s, j)        byte j (0..3) of every lane of s as the scale operand of
 *                        run_scaled: the int16 pair (v, v), or v as int32
 *   run_scaled(run, sc)  a run's int32 lanes times a sub-block scale (madd of the
 *                        int16 pair sums with (sc, sc), or mullo)
 *   k_min_pair(s, j)     byte j of every lane as the int16 pair (v, v)
 *   vi_dot16(acc, a, b)  acc + the sums of the 2 products of int16 pairs per lane
 *   q5_quants(raw, qh, j, lo, hi)  the quants of sub-blocks 2j and 2j + 1 from a
 *                        chunk of nibbles and its chunk of high bits (bits 2j
 *                        and 2j + 1 of each byte), as dot operands (the legacy
 *                        Q5_0 / Q5_1 kernels above use it for chunk j's low and
 *                        high nibbles); where GEMM_Q5_DOUBLED, hi is twice the quant
 *                        (one shift of the high bits serves both nibbles) and the
 *                        kernel doubles the low sub-block's scale to match and
 *                        halves the super-block's integer sum at the end (exact:
 *                        it is even, and |2 isum| < 2^27)
 *   vf_fnma(a, b, c)     c - a * b, one rounding
 * and the tiles:
 *   GEMM_K_TOK           tokens a tile takes
 *   GEMM_K_NV(nt)        row vectors a pass of nt tokens takes (<= GEMM_NVG)
 *   GEMM_K_NS1(kq)       streams a one-token pass over KQ_ type kq reads (1 or 2,
 *                        as GEMM_LEGACY_NS: kq_gemm)
 *   GEMM_K_TURNS         1: such a two-stream pass takes each super-block of one
 *                        group, then of the other (k45_rows), so the integer tile
 *                        is one group's GEMM_K_NV(1) row vectors; 0 (the
 *                        default): both groups' at once
 *   GEMM_Q5_RUN          chunks a Q5_K run sums (quants up to 31: 4 in int16)
 *   GEMM_K_ROLL_J(nt)    1: a tile of nt tokens keeps a super-block's quarters as
 *                        a loop (less code), 0: unrolled
 *   GEMM_PF_DIST_K, GEMM_PF_DIST_Q5_K   the prefetch distances
 *
 * Per 32-element sub-block the products sum in runs of chunks, each multiplied
 * by the row's sub-block scale into the super-block's int32 sum; the mins come
 * from the activation's bsums with int16 pairs of the rows' mins. Prefetches go
 * out a quarter super-block at a time, as the work goes (one burst per
 * super-block stalled on the fill buffers). */

/* The 6-bit scales and mins of the row vector whose three scale words start at
 * sp (a tile's scale vectors), a byte per sub-block in each row's lane: ks[0]
 * scales of sub-blocks 0..3, ks[1] of 4..7, ks[2] mins of 0..3, ks[3] of 4..7. */
VT_INLINE void k_scales(const uint8_t *sp, vi ks[4]) {
    const vi u0 = vi_load(sp), u1 = vi_load(sp + CHUNK_VEC), u2 = vi_load(sp + 2 * CHUNK_VEC);
    const vi k6 = vi_bytes(0x3f), k4 = vi_bytes(0x0f), k2 = vi_bytes(0x03);
    ks[0] = vi_and(u0, k6);
    ks[1] = vi_or(vi_and(u2, k4), vi_sll(vi_and(vi_srl(u0, 6), k2), 4));
    ks[2] = vi_and(u1, k6);
    ks[3] = vi_or(vi_and(vi_srl(u2, 4), k4), vi_sll(vi_and(vi_srl(u1, 6), k2), 4));
}

/* Quarter j of super-block b of k45_block: sub-blocks 2j and 2j + 1 into isum. */
VT_INLINE void k45_quarter(const bool q5, const int j, int64_t b, const uint8_t *g, size_t gs, const int ns,
                           const uint8_t *v, const uint8_t *vh, const int v0, const int nv, vi ks[GEMM_NV_MAX][4],
                           const block_q8_K *const *xr, vi isum[PACK_TOK_MAX][GEMM_NV_MAX], const int nt,
                           const uint8_t *pf[2], const bool pf_on) {
    const int nr = ns * nv;
    const size_t tile = q5 ? TILE_Q5_K : TILE_Q4_K;
    const size_t pfd = q5 ? GEMM_PF_DIST_Q5_K : GEMM_PF_DIST_K;
    const int run = q5 ? GEMM_Q5_RUN : 8;
    const bool doubled = q5 && GEMM_Q5_DOUBLED;
    /* a quarter of the super-block's lines per quarter of its work */
    if (pf_on)
        for (int s = 0; s < ns; s++) prefetch_to(&pf[s], g + (size_t)s * gs + pfd + b * tile + (j + 1) * tile / 4);
    /* the scales of sub-blocks 2j and 2j + 1 */
    vi sa[GEMM_NV_MAX], sb[GEMM_NV_MAX];
    UNROLL
    for (int r = 0; r < nr; r++) {
        sa[r] = k_scale(ks[r][j >= 2], (2 * j) & 3);
        sb[r] = k_scale(ks[r][j >= 2], (2 * j + 1) & 3);
        if (doubled) sa[r] = vi_sll(sa[r], 1);
    }
    UNROLL
    for (int c0 = 0; c0 < 8; c0 += run) {
        vi plo[PACK_TOK_MAX][GEMM_NV_MAX], phi[PACK_TOK_MAX][GEMM_NV_MAX];
        UNROLL
        for (int t = 0; t < nt; t++)
            UNROLL
            for (int r = 0; r < nr; r++) plo[t][r] = phi[t][r] = vi_zero();
        UNROLL
        for (int c = c0; c < c0 + run; c++) {
            vi lo[GEMM_NV_MAX], hi[GEMM_NV_MAX];
            UNROLL
            for (int r = 0; r < nr; r++) {
                const vi raw = vi_load(v + (8 * j + c) * CHUNK_VEC + pass_off(r, v0, nv, gs, 4));
                if (q5) {
                    q5_quants(raw, vi_load(vh + c * CHUNK_VEC + pass_off(r, v0, nv, gs, 4)), j, &lo[r], &hi[r]);
                } else {
                    lo[r] = nib_lo(raw);
                    hi[r] = nib_hi(raw);
                }
            }
            UNROLL
            for (int t = 0; t < nt; t++) {
                const int8_t *xq = xr[t][b].qs + 64 * j + 4 * c;
                const vi xlo = vi_bcast32(xq), xhi = vi_bcast32(xq + 32);
                UNROLL
                for (int r = 0; r < nr; r++) {
                    plo[t][r] = run_dot(plo[t][r], lo[r], xlo);
                    phi[t][r] = run_dot(phi[t][r], hi[r], xhi);
                    GEMM_KEEP(plo[t][r]);
                    GEMM_KEEP(phi[t][r]);
                }
            }
        }
        UNROLL
        for (int t = 0; t < nt; t++)
            UNROLL
            for (int r = 0; r < nr; r++)
                isum[t][r] = vi_add(isum[t][r], vi_add(run_scaled(plo[t][r], sa[r]), run_scaled(phi[t][r], sb[r])));
    }
}

/* Super-block b of ns streams of nv row vectors each (from vector v0 on: see
 * pass_off; the streams' groups gs bytes apart), nt tokens (q5: Q5_K): its
 * integer sums and float steps into acc[t][a0 + r] for row vector r of the
 * pass (at most GEMM_NV_MAX of them); pf[s]: stream s's prefetch pointer. */
VT_INLINE void k45_block(const bool q5, int64_t b, const uint8_t *g, size_t gs, const int ns, const int v0,
                         const int nv, const block_q8_K *const *xr, const int nt, const uint8_t *pf[2],
                         const bool pf_on, vf acc[PACK_TOK_MAX][GEMM_PASS_MAX], const int a0) {
    const int nr = ns * nv;
    const size_t tile = q5 ? TILE_Q5_K : TILE_Q4_K;
    const bool doubled = q5 && GEMM_Q5_DOUBLED;
    const uint8_t *dd = g, *scv = g + 4 * PACK_ROWS, *qs = scv + 3 * CHUNK_VEC; /* + b * tile */
    const uint8_t *qhp = qs + 32 * CHUNK_VEC;
    vi ks[GEMM_NV_MAX][4];
    UNROLL
    for (int r = 0; r < nr; r++) k_scales(scv + b * tile + pass_off(r, v0, nv, gs, 4), ks[r]);
    vi isum[PACK_TOK_MAX][GEMM_NV_MAX], imin[PACK_TOK_MAX][GEMM_NV_MAX];
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nr; r++) isum[t][r] = imin[t][r] = vi_zero();
    const uint8_t *v = qs + b * tile, *vh = qhp + b * tile;
    /* the one-token AVX2 tile runs faster with its quarters as a loop */
    if (GEMM_K_ROLL_J(nt)) {
        VT_UNROLL(1)
        for (int j = 0; j < 4; j++) k45_quarter(q5, j, b, g, gs, ns, v, vh, v0, nv, ks, xr, isum, nt, pf, pf_on);
    } else {
        UNROLL
        for (int j = 0; j < 4; j++) k45_quarter(q5, j, b, g, gs, ns, v, vh, v0, nv, ks, xr, isum, nt, pf, pf_on);
    }
    if (doubled) {
        UNROLL
        for (int t = 0; t < nt; t++)
            UNROLL
            for (int r = 0; r < nr; r++) isum[t][r] = vi_sra(isum[t][r], 1);
    }
    /* mins: sum_j m_j (bsum_2j + bsum_2j+1) with int16 pairs (m_j, m_j) */
    UNROLL
    for (int j = 0; j < 8; j++) {
        UNROLL
        for (int r = 0; r < nr; r++) {
            const vi pair = k_min_pair(ks[r][2 + (j >= 4)], j & 3);
            UNROLL
            for (int t = 0; t < nt; t++) imin[t][r] = vi_dot16(imin[t][r], pair, vi_bcast32(xr[t][b].bsums + 2 * j));
        }
    }
    UNROLL
    for (int r = 0; r < nr; r++) {
        const vf dw = vf_f16(dd + b * tile + pass_off(r, v0, nv, gs, 2));
        const vf dmw = vf_f16(dd + b * tile + 2 * PACK_ROWS + pass_off(r, v0, nv, gs, 2));
        UNROLL
        for (int t = 0; t < nt; t++) {
            const vf xd = vf_set1(xr[t][b].d);
            const int a = a0 + r;
            acc[t][a] = vf_fma(vf_mul(dw, xd), vf_cvt(isum[t][r]), acc[t][a]);
            acc[t][a] = vf_fnma(vf_mul(dmw, xd), vf_cvt(imin[t][r]), acc[t][a]);
        }
    }
}

/* Rows of ns streams of nv row vectors each (from vector v0 on: see pass_off;
 * the streams' groups gs bytes apart, their outputs ys floats), nt tokens (q5:
 * Q5_K). Two streams where the tier asks for turns (GEMM_K_TURNS) take each
 * super-block of one group, then of the other (as legacy_rows). */
VT_INLINE void k45_rows(const bool q5, int64_t nb, const uint8_t *g, size_t gs, const int ns, const int v0,
                        const int nv, const block_q8_K *const *xr, float *y, int64_t ys, int64_t ldy, const int nt,
                        const bool pf_on) {
    const int nr = ns * nv;
    const size_t pfd = q5 ? GEMM_PF_DIST_Q5_K : GEMM_PF_DIST_K;
    const bool turns = ns == 2 && GEMM_K_TURNS;
    vf acc[PACK_TOK_MAX][GEMM_PASS_MAX];
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nr; r++) acc[t][r] = vf_zero();
    const uint8_t *pf[2] = {g + pfd, g + gs + pfd};
    for (int64_t b = 0; b < nb; b++) {
        if (turns) {
            UNROLL
            for (int s = 0; s < ns; s++) {
                if (s) TURN_BARRIER();
                k45_block(q5, b, g + (size_t)s * gs, 0, 1, v0, nv, xr, nt, pf + s, pf_on, acc, s * nv);
            }
        } else {
            k45_block(q5, b, g, gs, ns, v0, nv, xr, nt, pf, pf_on, acc, 0);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nr; r++) vf_store(y + t * ldy + pass_row(r, v0, nv, ys), acc[t][r]);
}

/* ---- Q6_K (x Q8_K) -----------------------------------------------------------------------
 *
 * The including file also defines:
 *   vi_sub(a, b)         int32 lanes
 *   vi_i8(p)             GEMM_VL int8 at p as int32 lanes
 *   q6_scale(p)          GEMM_VL int8 scales at p as run_scaled's operand
 *   q6_quants(ls, hb, m) the 6-bit quants of run m of a quarter from its ql chunk
 *                        (low nibbles for m < 2, high for m >= 2) and its qh chunk
 *                        (bits 2m, 2m + 1), 0..63
 *   GEMM_Q6_TOK          tokens a tile takes
 *   GEMM_Q6_RUN(nt)      chunks a run sums (quants up to 63: 2 fit int16; 1 where
 *                        the tile has no registers for runs), at most 4
 *   GEMM_Q6_BY_CHUNK(nt) 1: a quarter's chunk vectors are read once and feed the
 *                        runs of its four sub-blocks at once (four runs a token
 *                        live; GEMM_Q6_RUN must be 4); 0: one sub-block after the
 *                        other
 * Quants are unsigned (0..63); the -32 offset comes from the activation's bsums:
 * where GEMM_BIAS_IN_ACC, each sub-block's run starts at -32 * its bsum (exact, the
 * run is then scaled as a whole), else it is taken out once per pair of
 * sub-blocks by madd of int16 pairs of the rows' scales times 32 (|sc| * 32 <=
 * 4096 fits int16) with the bsums. */

/* The products of chunk c4 of sub-block run m of quarter qt (sub-block j) into
 * the runs of nt tokens. */
VT_INLINE void q6_chunk(const uint8_t *qt, size_t gs, const int ns, const int v0, const int nv, const int m,
                        const int c4, const int j, const block_q8_K *const *xr, int64_t b,
                        vi run[PACK_TOK_MAX][GEMM_NV_MAX], const int nt) {
    const int nr = ns * nv;
    vi q[GEMM_NV_MAX];
    UNROLL
    for (int r = 0; r < nr; r++) {
        const size_t off = pass_off(r, v0, nv, gs, 4);
        q[r] = q6_quants(vi_load(qt + PACK_Q6_K_VEC(m & 1, c4) + off), vi_load(qt + PACK_Q6_K_VEC(2, c4) + off), m);
    }
    UNROLL
    for (int t = 0; t < nt; t++) {
        const vi x = vi_bcast32(xr[t][b].qs + 16 * j + 4 * c4);
        UNROLL
        for (int r = 0; r < nr; r++) {
            run[t][r] = run_dot(run[t][r], q[r], x);
            GEMM_KEEP(run[t][r]);
        }
    }
}

/* The scales of sub-block run m of quarter qt, as run_scaled's operands. */
VT_INLINE void q6_scales(const uint8_t *qt, size_t gs, const int ns, const int m, const int v0, const int nv,
                         vi sc[GEMM_NV_MAX]) {
    const int nr = ns * nv;
    UNROLL
    for (int r = 0; r < nr; r++) sc[r] = q6_scale(qt + PACK_Q6_K_SC(m) + pass_off(r, v0, nv, gs, 1));
}

/* A run's start: -32 * bsum_j where the offset goes into the runs, else 0. */
VT_INLINE vi q6_run_start(const block_q8_K *x, const int j) {
    return GEMM_BIAS_IN_ACC ? vi_set1(-32 * x->bsums[j]) : vi_zero();
}

/* Super-block b of ns streams of nv row vectors each (as k45_block), nt tokens:
 * its integer sums and float steps into acc[t][a0 + r]. */
VT_INLINE void q6_block(int64_t nb, int64_t b, const uint8_t *g, size_t gs, const int ns, const int v0, const int nv,
                        const block_q8_K *const *xr, const int nt, const uint8_t *pf[2], const bool pf_on,
                        vf acc[PACK_TOK_MAX][GEMM_PASS_MAX], const int a0) {
    const int run = GEMM_Q6_RUN(nt);
    const int nr = ns * nv;
    const uint8_t *tile = g + pack_q6_K_tile(nb, b);
    vi isum[PACK_TOK_MAX][GEMM_NV_MAX];
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nr; r++) isum[t][r] = vi_zero();
    UNROLL
    for (int h = 0; h < 2; h++) {
        UNROLL
        for (int u = 0; u < 2; u++) {
            /* quarter (h, u): sub-blocks j = 8h + 2m + u, elements 128h + 32m + 16u .. + 16 */
            const uint8_t *qt = tile + (2 * h + u) * PACK_Q6_K_QUARTER;
            /* a quarter super-block per quarter of the work */
            if (pf_on)
                for (int s = 0; s < ns; s++)
                    prefetch_to(&pf[s], g + (size_t)s * gs + GEMM_PF_DIST_K +
                                            (size_t)(4 * b + 2 * h + u + 1) * PACK_ROWS * sizeof(block_q6_K) / 4);
            if (GEMM_Q6_BY_CHUNK(nt)) {
                vi sc[4][GEMM_NV_MAX], s[4][PACK_TOK_MAX][GEMM_NV_MAX];
                UNROLL
                for (int m = 0; m < 4; m++) q6_scales(qt, gs, ns, m, v0, nv, sc[m]);
                UNROLL
                for (int m = 0; m < 4; m++)
                    UNROLL
                    for (int t = 0; t < nt; t++)
                        UNROLL
                        for (int r = 0; r < nr; r++) s[m][t][r] = q6_run_start(xr[t] + b, 8 * h + 2 * m + u);
                UNROLL
                for (int c4 = 0; c4 < 4; c4++)
                    UNROLL
                    for (int m = 0; m < 4; m++) q6_chunk(qt, gs, ns, v0, nv, m, c4, 8 * h + 2 * m + u, xr, b, s[m], nt);
                UNROLL
                for (int m = 0; m < 4; m++)
                    UNROLL
                    for (int t = 0; t < nt; t++)
                        UNROLL
                        for (int r = 0; r < nr; r++) isum[t][r] = vi_add(isum[t][r], run_scaled(s[m][t][r], sc[m][r]));
                continue;
            }
            UNROLL
            for (int m = 0; m < 4; m++) {
                vi sc[GEMM_NV_MAX];
                q6_scales(qt, gs, ns, m, v0, nv, sc);
                UNROLL
                for (int c0 = 0; c0 < 4; c0 += run) {
                    vi s[PACK_TOK_MAX][GEMM_NV_MAX];
                    UNROLL
                    for (int t = 0; t < nt; t++)
                        UNROLL
                        for (int r = 0; r < nr; r++) s[t][r] = q6_run_start(xr[t] + b, 8 * h + 2 * m + u);
                    UNROLL
                    for (int c4 = c0; c4 < c0 + run; c4++) q6_chunk(qt, gs, ns, v0, nv, m, c4, 8 * h + 2 * m + u, xr, b, s, nt);
                    UNROLL
                    for (int t = 0; t < nt; t++)
                        UNROLL
                        for (int r = 0; r < nr; r++) {
                            isum[t][r] = vi_add(isum[t][r], run_scaled(s[t][r], sc[r]));
                            GEMM_KEEP(isum[t][r]);
                        }
                }
            }
        }
        if (!GEMM_BIAS_IN_ACC) {
            /* -32 * the sum over the pairs (j0, j0 + 1) = (8h + 2m, + 1), from
             * quarters (h, 0) and (h, 1), of sc_j * bsum_j */
            const uint8_t *q0 = tile + 2 * h * PACK_Q6_K_QUARTER, *q1 = q0 + PACK_Q6_K_QUARTER;
            UNROLL
            for (int m = 0; m < 4; m++)
                UNROLL
                for (int r = 0; r < nr; r++) {
                    const size_t off = PACK_Q6_K_SC(m) + pass_off(r, v0, nv, gs, 1);
                    const vi sc32 = vi_or(vi_and(vi_sll(vi_i8(q0 + off), 5), vi_set1(0xffff)), vi_sll(vi_i8(q1 + off), 21));
                    UNROLL
                    for (int t = 0; t < nt; t++)
                        isum[t][r] = vi_sub(isum[t][r], vi_dot16(vi_zero(), sc32, vi_bcast32(xr[t][b].bsums + 8 * h + 2 * m)));
                }
        }
    }
    UNROLL
    for (int r = 0; r < nr; r++) {
        const vf dw = vf_f16(g + pack_q6_K_d(nb, b) + pass_off(r, v0, nv, gs, 2));
        UNROLL
        for (int t = 0; t < nt; t++)
            acc[t][a0 + r] = vf_fma(vf_mul(dw, vf_set1(xr[t][b].d)), vf_cvt(isum[t][r]), acc[t][a0 + r]);
    }
}

/* Rows of ns streams of nv row vectors each (as k45_rows, GEMM_K_TURNS too), nt
 * tokens. */
VT_INLINE void q6_rows(int64_t nb, const uint8_t *g, size_t gs, const int ns, const int v0, const int nv,
                       const block_q8_K *const *xr, float *y, int64_t ys, int64_t ldy, const int nt, const bool pf_on) {
    const int nr = ns * nv;
    const bool turns = ns == 2 && GEMM_K_TURNS;
    const uint8_t *pf[2] = {g + GEMM_PF_DIST_K, g + gs + GEMM_PF_DIST_K};
    vf acc[PACK_TOK_MAX][GEMM_PASS_MAX];
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nr; r++) acc[t][r] = vf_zero();
    for (int64_t b = 0; b < nb; b++) {
        if (turns) {
            UNROLL
            for (int s = 0; s < ns; s++) {
                if (s) TURN_BARRIER();
                q6_block(nb, b, g + (size_t)s * gs, 0, 1, v0, nv, xr, nt, pf + s, pf_on, acc, s * nv);
            }
        } else {
            q6_block(nb, b, g, gs, ns, v0, nv, xr, nt, pf, pf_on, acc, 0);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++)
        UNROLL
        for (int r = 0; r < nr; r++) vf_store(y + t * ldy + pass_row(r, v0, nv, ys), acc[t][r]);
}

/* ---- the K-quant GEMMs ------------------------------------------------------------------ */

enum { KQ_Q4_K, KQ_Q5_K, KQ_Q6_K };

/* The integer tile of a one-token pass holds its row vectors of both streams at
 * once, or of one where they take turns: at most GEMM_NV_MAX. */
#define K_NS1_TILE(kq) ((GEMM_K_NS1(kq) == 2 && !GEMM_K_TURNS ? 2 : 1) * GEMM_K_NV(1))
static_assert(K_NS1_TILE(KQ_Q4_K) <= GEMM_NV_MAX && K_NS1_TILE(KQ_Q5_K) <= GEMM_NV_MAX &&
                  K_NS1_TILE(KQ_Q6_K) <= GEMM_NV_MAX,
              "a one-token K-quant tile of more row vectors than GEMM_NV_MAX");

/* One group (ns 2: and its partner gs bytes on, outputs ys floats on), nt
 * tokens, in passes of GEMM_K_NV(nt) row vectors of a group (only the first
 * prefetches: the others reread its lines from L1 / L2). */
VT_INLINE void kq_group(const int type, int64_t nb, const uint8_t *g, size_t gs, const int ns,
                        const block_q8_K *const *xr, float *y, int64_t ys, int64_t ldy, const int nt, const bool pf_on) {
    const int nv = GEMM_K_NV(nt);
    for (int v0 = 0; v0 < GEMM_NVG; v0 += nv) {
        if (type == KQ_Q6_K) q6_rows(nb, g, gs, ns, v0, nv, xr, y, ys, ldy, nt, pf_on && v0 == 0);
        else k45_rows(type == KQ_Q5_K, nb, g, gs, ns, v0, nv, xr, y, ys, ldy, nt, pf_on && v0 == 0);
    }
}

/* The tokens a tile takes: n, at most tok (so the cases past it fold). */
#define K_TILE_NT(n, tok) ((n) < (tok) ? (n) : (tok))

/* The body of an exported K-quant GEMM: each group in tiles of up to the tier's
 * tokens. One token, where the tier asks for two streams (GEMM_K_NS1: both
 * groups' tiles at once, or in turns a super-block each), reads group g
 * together with g + n_groups / 2 as the legacy types do (legacy_tiles says
 * why); more tokens keep one group at a time, all
 * their tiles over it before the next, so a second tile rereads it from cache. */
VT_INLINE void kq_gemm(const int type, int64_t n_in, const void *w, int64_t n_groups, const void *x,
                       size_t x_stride, int n_tok, float *y, int64_t ldy, const bool pf_on) {
    const int tok = type == KQ_Q6_K ? GEMM_Q6_TOK : GEMM_K_TOK;
    const int64_t nb = n_in / QK_K;
    const size_t gb = (size_t)nb * (type == KQ_Q4_K ? TILE_Q4_K : type == KQ_Q5_K ? TILE_Q5_K : PACK_ROWS * sizeof(block_q6_K));
    const block_q8_K *xr[PACK_TOK_MAX];
    for (int t = 0; t < n_tok; t++) xr[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride);
    int64_t gi = 0;
    if (n_tok == 1 && GEMM_K_NS1(type) == 2 && n_groups >= 2) {
        const int64_t h = n_groups / 2;
        for (; gi < h; gi++)
            kq_group(type, nb, (const uint8_t *)w + (size_t)gi * gb, (size_t)h * gb, 2, xr, y + gi * PACK_ROWS,
                     h * PACK_ROWS, ldy, 1, pf_on);
        gi = 2 * h;
    }
    for (; gi < n_groups; gi++) {
        const uint8_t *g = (const uint8_t *)w + (size_t)gi * gb;
        for (int t = 0; t < n_tok; t += tok) {
            float *yg = y + t * ldy + gi * PACK_ROWS;
            switch (K_TILE_NT(n_tok - t, tok)) {
            case 4: kq_group(type, nb, g, 0, 1, xr + t, yg, 0, ldy, K_TILE_NT(4, tok), pf_on); break;
            case 3: kq_group(type, nb, g, 0, 1, xr + t, yg, 0, ldy, K_TILE_NT(3, tok), pf_on); break;
            case 2: kq_group(type, nb, g, 0, 1, xr + t, yg, 0, ldy, 2, pf_on); break;
            default: kq_group(type, nb, g, 0, 1, xr + t, yg, 0, ldy, 1, pf_on); break;
            }
        }
    }
}

/* gemm_<t>_<GEMM_SFX><var>: t q4_K, q5_K or q6_K, KQ its KQ_ constant */
#define GEMM_KQUANT(t, KQ, var, pf_on)                                                            \
    void GEMM_NAME(t, GEMM_SFX, var)(int64_t n_in, const void *w, int64_t n_groups, const void *x, \
                                     size_t x_stride, const pack_xblock *xs, int n_tok, float *y,  \
                                     int64_t ldy) {                                                \
        (void)xs;                                                                                 \
        kq_gemm(KQ, n_in, w, n_groups, x, x_stride, n_tok, y, ldy, pf_on);                        \
    }
#endif
