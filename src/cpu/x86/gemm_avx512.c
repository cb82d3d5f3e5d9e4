/* AVX-512 VNNI GEMMs over the packed layouts of cpu/pack.h.
 *
 * One zmm holds the same 4 quant bytes of the 16 rows of a group; vpdpbusd
 * against the broadcast 4 activation bytes adds that chunk's products into each
 * row's 32-bit lane, so a block's integer dot ends in one lane per row with no
 * horizontal reduction, and one fma per block and token updates 16 outputs.
 * vpdpbusd multiplies unsigned by signed bytes: 4-bit quants are used as
 * unsigned nibbles (Q5_K's with the fifth bit merged in) and Q8_0 quants are
 * biased by +128 (xor 0x80); the offset is taken out exactly by starting each
 * block's integer sum at -c * sum(x) (c = 8 or 128: pack_xblock.bias, with the
 * activation scale as f32 beside it), or for Q6_K at -32 * bsum of each
 * 16-element sub-block.
 * The weight vectors of a block are unpacked once and used for every token of
 * the tile (up to PACK_TOK_MAX), which is what makes prefill compute-bound
 * rather than unpack-bound. The integer math is exact and the float steps are
 * those of the _ref twins in pack.c, so results are bit-identical with them. */
#include "cpu/unroll.h"
#include "cpu/x86/simd_avx512.h"
#include "cpu/x86/x86_kernels.h"
#include "quant/blocks.h"

#include <string.h>

#define CHUNK_VEC 64
/* Q4_K and Q5_K groups are runs of per-super-block tiles (cpu/pack.h) */
#define TILE_Q4_K (PACK_ROWS * sizeof(block_q4_K))
#define TILE_Q5_K (PACK_ROWS * sizeof(block_q5_K))
/* Register tiles: every small loop fully unrolled, so arrays of vectors stay in
 * registers (GCC at -O2 would otherwise keep them on the stack). */
#define UNROLL VT_UNROLL(16)
/* Software prefetch. The hardware prefetcher alone leaves decode at ~50% of
 * the bandwidth a plain read loop gets (Q4_K at 25%: its regions restart every
 * 18 KiB), so every kernel also prefetches the group ahead of the block being
 * computed, as one linear stream (every layout reads in address order).
 *
 * The distances were measured on the Zen 5 VM, decode (one token) over 256 MiB
 * of groups, rows of 2048 and 8192, 31-41 rounds in one process alternating
 * the kernels, against the one linear stream 3 KiB (2 KiB for the K-quants)
 * ahead that a Sapphire Rapids VM had preferred. Median of per-round ratios:
 *   Q8_0 / Q4_0, PF_DIST 6 KiB: +9% / +4% (2048), +29% / +45% (8192); 4 KiB
 *     +5% / -6%, 8 KiB about the same as 6, 12 KiB less (with the old layout
 *     of two regions, each its own stream); the pair layout and one stream
 *     6 KiB ahead then read +4% / +13% (2048), +4% / +3% (8192) over that in a
 *     fast hour of the VM, +9% / +21%, +8% / 0% in a slow one (4 KiB and 8 KiB
 *     within 4% of 6);
 *   Q6_K (old layout of three regions, each its own stream), 8 quarters
 *     (6.6 KiB): +57% (2048), +114% (8192); 3 quarters +8% / +50%; its tiles
 *     (2026-12-04) take PF_DIST_K: 3 and 8 KiB within 2%;
 *   Q4_K, PF_DIST_K 5 KiB: +10..22% (2048), +13..17% (8192); 2 KiB was the old
 *     distance, 4 and 8 KiB close to 5;
 *   Q5_K, a tile + 4 KiB: +18% / +17% over a tile + 256 bytes.
 * A second stream 16 KiB ahead with the T1 hint (into L2), on top of the
 * 6 KiB one, read Q4_0 / Q8_0 +2..26% / 0..+10% faster in gemm_ab (more at
 * rows of 8192), Q4_K 6-22% slower; but in the forward pass (1B, tg128, 3
 * alternated runs each) Q4_0 decoded +1.5% / -1% at 1 / 2 threads and Q8_0
 * -10% / -8%, so it is not used (the AVX2 tier's kernels: -12..+21% by row
 * length in gemm_ab alone).
 * The K-quant kernels issue their prefetches a quarter super-block at a time,
 * as the work goes (one burst of 36 / 52 lines per super-block stalled on the
 * fill buffers). Q5_K reads the high bits at the end of its tile from the start
 * of the tile's work, so its stream runs more than a tile ahead.
 * Every decode kernel also comes without software prefetch (the _nopf GEMMs,
 * matmul.h mm_probe_prefetch): on 2026-12-05 the same VM streamed every layout
 * faster with the hardware prefetcher alone, a plain read loop 25-27 GB/s and
 * the same loop with one prefetch a line 14-19, and gemm_ab at one token read
 * Q4_K / Q6_K / Q4_0 / Q8_0 +17% / +18% / +14% / +0% faster without (rows of
 * 5632, 11 rounds; Q4_K / Q6_K +8% / +18% on rows of 2048). */
#ifndef PF_DIST /* the distances can be set with -D to compare them (bench/gemm_ab) */
#define PF_DIST 6144
#endif
#ifndef PF_DIST_K
#define PF_DIST_K 5120
#endif
#ifndef PF_DIST_Q5_K
#define PF_DIST_Q5_K (TILE_Q5_K + 4096)
#endif

/* Into L1. The decode attention's KV prefetch went twice as fast with T1
 * (cpu/attention.c); these streams do not: T1 instead of T0 read Q4_0 / Q8_0 /
 * Q4_K / Q6_K at 0.78 / 0.82 / 0.85 / 0.93 (gemm_ab, rows of 2048, 11 rounds,
 * 2026-12-05). #ifndef-guarded to compare them again. */
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

/* The prefetch stream of one group of a pair (legacy_group2): offsets
 * *next .. until of the group at gh, where an offset past its end (gb bytes)
 * is the same group of the next pair, 2 * gb on. So each stream runs into the
 * group it reads next: one linear stream over both groups would leave the
 * first PF_DIST bytes of every second group to be prefetched only after they
 * were read (a 4-token decode of Q4_0 rows of 2048, 18 KiB groups, read 15%
 * slower that way). */
VT_INLINE void prefetch_pair_to(const uint8_t *gh, size_t gb, size_t *next, size_t until) {
    for (; *next < until; *next += CHUNK_VEC) prefetch(gh + *next + (*next >= gb ? gb : 0));
}

/* ---- Q4_0 ------------------------------------------------------------------------ */

/* Q4_0's high nibbles are not shifted down: vpdpbusd takes the byte masked to
 * its high half, 16 * hi, and the integer sum of those is shifted right by 4 at
 * the end of the block (exact: every product is a multiple of 16). */
VT_INLINE void q4_0_group(int64_t nb, const uint8_t *g, const block_q8_0 *const *xr,
                          const pack_xblock *xs, float *y, int64_t ldy, const int nt, const bool pf_on) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[PACK_TOK_MAX];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *pf = g + PF_DIST;
    for (int64_t b = 0; b < nb; b++) {
        const __m512 dw = load_f16x16(g + pack_pair_d(b, PACK_QB_Q4_0));
        const uint8_t *v = g + pack_pair_qs(nb, b, PACK_QB_Q4_0);
        if (pf_on) prefetch_to(&pf, g + PF_DIST + (b + 1) * PACK_ROWS * sizeof(block_q4_0));
        __m512i lo[4], hi16[4];
        UNROLL
        for (int k = 0; k < 4; k++) {
            const __m512i raw = _mm512_loadu_si512(v + k * CHUNK_VEC);
            lo[k] = _mm512_and_si512(raw, m4);
            hi16[k] = _mm512_andnot_si512(m4, raw);
        }
        UNROLL
        for (int t = 0; t < nt; t++) {
            const block_q8_0 *xb = xr[t] + b;
            const pack_xblock *xi = xs + t * nb + b;
            __m512i s0 = _mm512_set1_epi32(xi->bias), s1 = _mm512_setzero_si512();
            UNROLL
            for (int k = 0; k < 4; k++) {
                s0 = _mm512_dpbusd_epi32(s0, lo[k], bcast32(xb->qs + 4 * k));
                s1 = _mm512_dpbusd_epi32(s1, hi16[k], bcast32(xb->qs + 16 + 4 * k));
            }
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xi->d));
            const __m512i s = _mm512_add_epi32(s0, _mm512_srai_epi32(s1, 4));
            acc[t] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(s), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

/* ---- Q8_0 ------------------------------------------------------------------------ */

VT_INLINE void q8_0_group(int64_t nb, const uint8_t *g, const block_q8_0 *const *xr,
                          const pack_xblock *xs, float *y, int64_t ldy, const int nt, const bool pf_on) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[PACK_TOK_MAX];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *pf = g + PF_DIST;
    for (int64_t b = 0; b < nb; b++) {
        const __m512 dw = load_f16x16(g + pack_pair_d(b, PACK_QB_Q8_0));
        const uint8_t *v = g + pack_pair_qs(nb, b, PACK_QB_Q8_0);
        if (pf_on) prefetch_to(&pf, g + PF_DIST + (b + 1) * PACK_ROWS * sizeof(block_q8_0));
        __m512i q[8];
        UNROLL
        for (int k = 0; k < 8; k++) q[k] = _mm512_xor_si512(_mm512_loadu_si512(v + k * CHUNK_VEC), flip);
        UNROLL
        for (int t = 0; t < nt; t++) {
            const block_q8_0 *xb = xr[t] + b;
            const pack_xblock *xi = xs + t * nb + b;
            __m512i s0 = _mm512_set1_epi32(xi->bias), s1 = _mm512_setzero_si512();
            UNROLL
            for (int k = 0; k < 4; k++) {
                s0 = _mm512_dpbusd_epi32(s0, q[k], bcast32(xb->qs + 4 * k));
                s1 = _mm512_dpbusd_epi32(s1, q[4 + k], bcast32(xb->qs + 16 + 4 * k));
            }
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xi->d));
            acc[t] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

/* Q8_0 for one or two tokens (decode), in 256-bit halves of the group (rows
 * 0..7, 8..15): the same integer sums and float steps as q8_0_group, so the same
 * bits. From memory it read +8% / +11% over the 512-bit kernel at one token
 * (gemm_ab, rows of 2048 / 8192, Zen 5 VM, 2026-12-05) and +16% at two, as fast
 * as the AVX2 tier's kernel or faster, which had read 9% faster than the 512-bit
 * one; Q4_0 in halves read the same as its 512-bit kernel, so it keeps that. */
VT_INLINE void q8_0_few(int64_t nb, const uint8_t *g, const block_q8_0 *const *xr,
                        const pack_xblock *xs, float *y, int64_t ldy, const int nt, const bool pf_on) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    __m256 acc[2][2];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    const uint8_t *pf = g + PF_DIST;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *v = g + pack_pair_qs(nb, b, PACK_QB_Q8_0);
        if (pf_on) prefetch_to(&pf, g + PF_DIST + (b + 1) * PACK_ROWS * sizeof(block_q8_0));
        __m256i s[2][2][2]; /* [token][half][even / odd chunk] */
        UNROLL
        for (int t = 0; t < nt; t++)
            UNROLL
            for (int h = 0; h < 2; h++) {
                s[t][h][0] = _mm256_set1_epi32(xs[t * nb + b].bias);
                s[t][h][1] = _mm256_setzero_si256();
            }
        UNROLL
        for (int k = 0; k < 8; k++) {
            __m256i w[2];
            UNROLL
            for (int h = 0; h < 2; h++)
                w[h] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(v + k * CHUNK_VEC + 32 * h)), flip);
            UNROLL
            for (int t = 0; t < nt; t++) {
                const __m256i xv = _mm512_castsi512_si256(bcast32(xr[t][b].qs + 4 * k));
                UNROLL
                for (int h = 0; h < 2; h++) s[t][h][k & 1] = _mm256_dpbusd_epi32(s[t][h][k & 1], w[h], xv);
            }
        }
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + pack_pair_d(b, PACK_QB_Q8_0) + 16 * h)));
            UNROLL
            for (int t = 0; t < nt; t++) {
                const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(xs[t * nb + b].d));
                const __m256i st = _mm256_add_epi32(s[t][h][0], s[t][h][1]);
                acc[t][h] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(st), acc[t][h]);
            }
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) {
        _mm256_storeu_ps(y + t * ldy, acc[t][0]);
        _mm256_storeu_ps(y + t * ldy + 8, acc[t][1]);
    }
}

/* Two groups at once (rows 0..15 of g and of g + gb), for 4-token tiles: each
 * activation broadcast feeds two vpdpbusd and the float steps of a block are
 * spread over twice the integer work, 16 int32 and 8 float accumulators. Per
 * row the arithmetic of q4_0_group / q8_0_group (q8: which; integer sums are
 * exact in any order), so the same bits. The one-group kernels read up to 2
 * loads per vpdpbusd and ran Q4_0 at ~560 GFLOP/s (bench_matmul -n 128, 1
 * thread, Zen 5 VM); this one at 640-700 (+15..25% over the shapes 2048 x 4096
 * .. 512 x 8192), Q8_0 +30..40%; a 512-token prefill of the 1B models +12..38%
 * at 1 and 2 threads (2 alternated runs each). In decode batches of 4 it reads
 * Q4_0 / Q8_0 as fast as one group at rows of 2048 and 17-25% faster at 8192
 * (gemm_ab -n 4). */
VT_INLINE void legacy_group2(int64_t nb, const uint8_t *g, size_t gb, const block_q8_0 *const *xr,
                             const pack_xblock *xs, float *y, int64_t ldy, const int nt, const bool pf_on,
                             const bool q8) {
    const size_t qb = q8 ? PACK_QB_Q8_0 : PACK_QB_Q4_0;
    const size_t blk = q8 ? sizeof(block_q8_0) : sizeof(block_q4_0);
    const __m512i m4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[2][PACK_TOK_MAX];
    UNROLL
    for (int h = 0; h < 2; h++)
        UNROLL
        for (int t = 0; t < nt; t++) acc[h][t] = _mm512_setzero_ps();
    size_t pf[2] = {PF_DIST, PF_DIST};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *v = g + pack_pair_qs(nb, b, qb);
        UNROLL
        for (int h = 0; h < 2 && pf_on; h++)
            prefetch_pair_to(g + h * gb, gb, &pf[h], PF_DIST + (size_t)(b + 1) * PACK_ROWS * blk);
        __m512i s0[2][PACK_TOK_MAX], s1[2][PACK_TOK_MAX];
        UNROLL
        for (int t = 0; t < nt; t++) {
            s0[0][t] = s0[1][t] = _mm512_set1_epi32(xs[t * nb + b].bias);
            s1[0][t] = s1[1][t] = _mm512_setzero_si512();
        }
        UNROLL
        for (int k = 0; k < 4; k++) {
            /* the weights against elements 4k.. (wa) and 16 + 4k.. (wb): Q4_0's
             * low and high nibbles (the high ones as 16 * hi), Q8_0's chunks k
             * and 4 + k, biased by +128 */
            __m512i wa[2], wb[2];
            UNROLL
            for (int h = 0; h < 2; h++) {
                const __m512i raw = _mm512_loadu_si512(v + h * gb + k * CHUNK_VEC);
                if (q8) {
                    wa[h] = _mm512_xor_si512(raw, flip);
                    wb[h] = _mm512_xor_si512(_mm512_loadu_si512(v + h * gb + (4 + k) * CHUNK_VEC), flip);
                } else {
                    wa[h] = _mm512_and_si512(raw, m4);
                    wb[h] = _mm512_andnot_si512(m4, raw);
                }
            }
            UNROLL
            for (int t = 0; t < nt; t++) {
                const __m512i xa = bcast32(xr[t][b].qs + 4 * k), xb = bcast32(xr[t][b].qs + 16 + 4 * k);
                UNROLL
                for (int h = 0; h < 2; h++) {
                    s0[h][t] = _mm512_dpbusd_epi32(s0[h][t], wa[h], xa);
                    s1[h][t] = _mm512_dpbusd_epi32(s1[h][t], wb[h], xb);
                }
            }
        }
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m512 dw = load_f16x16(g + h * gb + pack_pair_d(b, qb));
            UNROLL
            for (int t = 0; t < nt; t++) {
                const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xs[t * nb + b].d));
                const __m512i s = _mm512_add_epi32(s0[h][t], q8 ? s1[h][t] : _mm512_srai_epi32(s1[h][t], 4));
                acc[h][t] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(s), acc[h][t]);
            }
        }
    }
    UNROLL
    for (int h = 0; h < 2; h++)
        UNROLL
        for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + h * PACK_ROWS + t * ldy, acc[h][t]);
}

/* The exported legacy-type GEMMs: 4-token tiles two groups at a time (matmul.c
 * chunks prefill weights in even numbers of groups), the rest one by one.
 * gemm_<type>_avx512 streams its weights from memory with software prefetch
 * (decode, of up to 4 sequences); the _cached twin, for the tiles of a prefill
 * token block, which find their chunk of groups in L2 (all but the first
 * tile), issues none: there the prefetches only took load slots, and the pair
 * kernels ran 10-25% slower with them (bench_matmul -n 128, Q4_0 / Q8_0). The
 * K-quant kernels keep theirs in prefill: without, Q4_K ran 13% slower and
 * Q6_K the same (3 alternated runs). */
#define LEGACY_GEMM(name, suffix, pf_on, few) /* few: the group kernel for 1-2 tokens */   \
    void gemm_##name##_avx512##suffix(int64_t n_in, const void *w, int64_t n_groups,         \
                                      const void *x, size_t x_stride, const pack_xblock *xs, \
                                      int n_tok, float *y, int64_t ldy) {                   \
        const int64_t nb = n_in / 32;                                                       \
        const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_##name);           \
        const block_q8_0 *xr[PACK_TOK_MAX];                                                 \
        for (int t = 0; t < n_tok; t++)                                                     \
            xr[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride);        \
        int64_t gi = 0;                                                                     \
        if (n_tok == 4)                                                                     \
            for (; gi + 2 <= n_groups; gi += 2)                                             \
                legacy_group2(nb, (const uint8_t *)w + (size_t)gi * group_bytes, group_bytes, \
                              xr, xs, y + gi * PACK_ROWS, ldy, 4, pf_on, QB8_##name);       \
        for (; gi < n_groups; gi++) {                                                       \
            const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;               \
            float *yg = y + gi * PACK_ROWS;                                                 \
            switch (n_tok) {                                                                \
            case 4: name##_group(nb, g, xr, xs, yg, ldy, 4, pf_on); break;                  \
            case 3: name##_group(nb, g, xr, xs, yg, ldy, 3, pf_on); break;                  \
            case 2: few(nb, g, xr, xs, yg, ldy, 2, pf_on); break;                           \
            default: few(nb, g, xr, xs, yg, ldy, 1, pf_on); break;                          \
            }                                                                               \
        }                                                                                   \
    }

#define QB8_q4_0 false
#define QB8_q8_0 true
LEGACY_GEMM(q4_0, , true, q4_0_group)
LEGACY_GEMM(q8_0, , true, q8_0_few)
LEGACY_GEMM(q4_0, _cached, false, q4_0_group)
LEGACY_GEMM(q8_0, _cached, false, q8_0_group)
LEGACY_GEMM(q8_0, _nopf, false, q8_0_few)
#undef QB8_q4_0
#undef QB8_q8_0

/* ---- Q4_K ------------------------------------------------------------------------ */

VT_INLINE void q4_K_group(int64_t nb, const uint8_t *g, const block_q8_K *const *xr, float *y,
                          int64_t ldy, const int nt, const bool pf_on) {
    const uint8_t *dd = g, *scv = g + 4 * PACK_ROWS, *qs = scv + 3 * CHUNK_VEC; /* + b * TILE_Q4_K */
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[PACK_TOK_MAX];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *pf = g + PF_DIST_K;
    for (int64_t b = 0; b < nb; b++) {
        const __m512 dw = load_f16x16(dd + b * TILE_Q4_K);
        const __m512 dmw = load_f16x16(dd + b * TILE_Q4_K + 2 * PACK_ROWS);
        const uint8_t *sp = scv + b * TILE_Q4_K;
        __m512i sc_lo, sc_hi, mn_lo, mn_hi;
        q4_K_scales_x16(sp, &sc_lo, &sc_hi, &mn_lo, &mn_hi);
        __m512i isum[PACK_TOK_MAX], imin[PACK_TOK_MAX];
        UNROLL
        for (int t = 0; t < nt; t++) isum[t] = imin[t] = _mm512_setzero_si512();
        const uint8_t *v = qs + b * TILE_Q4_K;
        UNROLL
        for (int j = 0; j < 4; j++) {
            /* a quarter of the super-block's lines per quarter of its work */
            if (pf_on) prefetch_to(&pf, g + PF_DIST_K + b * TILE_Q4_K + (j + 1) * TILE_Q4_K / 4);
            __m512i slo[PACK_TOK_MAX], shi[PACK_TOK_MAX];
            UNROLL
            for (int t = 0; t < nt; t++) slo[t] = shi[t] = _mm512_setzero_si512();
            UNROLL
            for (int c = 0; c < 8; c++) {
                const __m512i raw = _mm512_loadu_si512(v + (8 * j + c) * CHUNK_VEC);
                const __m512i lo = _mm512_and_si512(raw, m4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
                UNROLL
                for (int t = 0; t < nt; t++) {
                    const int8_t *xq = xr[t][b].qs + 64 * j + 4 * c;
                    slo[t] = _mm512_dpbusd_epi32(slo[t], lo, bcast32(xq));
                    shi[t] = _mm512_dpbusd_epi32(shi[t], hi, bcast32(xq + 32));
                }
            }
            /* sub-blocks 2j and 2j + 1 */
            const __m512i sa = lane_byte((2 * j) < 4 ? sc_lo : sc_hi, (2 * j) & 3);
            const __m512i sb = lane_byte((2 * j + 1) < 4 ? sc_lo : sc_hi, (2 * j + 1) & 3);
            UNROLL
            for (int t = 0; t < nt; t++)
                isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(slo[t], sa),
                                                                     _mm512_mullo_epi32(shi[t], sb)));
        }
        /* mins: sum_j m_j (bsum_2j + bsum_2j+1) with int16 pairs (m_j, m_j) */
        UNROLL
        for (int j = 0; j < 8; j++) {
            const __m512i m = lane_byte(j < 4 ? mn_lo : mn_hi, j & 3);
            const __m512i pair = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
            UNROLL
            for (int t = 0; t < nt; t++) imin[t] = _mm512_dpwssd_epi32(imin[t], pair, bcast32(xr[t][b].bsums + 2 * j));
        }
        UNROLL
        for (int t = 0; t < nt; t++) {
            const __m512 xd = _mm512_set1_ps(xr[t][b].d);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, xd), _mm512_cvtepi32_ps(isum[t]), acc[t]);
            acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dmw, xd), _mm512_cvtepi32_ps(imin[t]), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

/* ---- Q5_K ------------------------------------------------------------------------ */

/* Bit k (0..7) of every byte of qh at bit 4; the other bits are garbage that the
 * caller masks off. 16-bit shifts are fine: the bit that lands at bit 4 of a
 * byte comes from the same byte for shifts of at most 4. */
VT_INLINE __m512i q5_K_bit4(__m512i qh, const int k) {
    return k < 4 ? _mm512_slli_epi16(qh, 4 - k) : k > 4 ? _mm512_srli_epi16(qh, k - 4) : qh;
}

/* Q4_K's group kernel with the fifth bit merged into each nibble before the
 * vpdpbusd (quants 0..31, still unsigned); the tile's Q4_K part is read the same
 * way and the float steps are Q4_K's. One shift of the high bits serves both
 * nibbles of a chunk: it puts bit 2j at bit 4, so bit 2j + 1 lands at bit 5, and
 * the high-nibble quant is taken at twice its value (nibble at bits 1..4, high
 * bit at 5). The low sub-block's scale is doubled to match and the super-block's
 * integer sum halved at the end, exactly (it is even, and |2 isum| < 2^27).
 * Against a shift per nibble: +6% at 1 token, +3% at 4 with the weights in L2
 * (bench_matmul 256x2048); the same within noise when they stream from L3. */
VT_INLINE void q5_K_group(int64_t nb, const uint8_t *g, const block_q8_K *const *xr, float *y,
                          int64_t ldy, const int nt, const bool pf_on) {
    const uint8_t *dd = g, *scv = g + 4 * PACK_ROWS, *qs = scv + 3 * CHUNK_VEC; /* + b * TILE_Q5_K */
    const uint8_t *qhp = qs + 32 * CHUNK_VEC;
    const __m512i m4 = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    const __m512i m1e = _mm512_set1_epi8(0x1e), b5 = _mm512_set1_epi8(0x20);
    __m512 acc[PACK_TOK_MAX];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *pf = g + PF_DIST_Q5_K;
    for (int64_t b = 0; b < nb; b++) {
        const __m512 dw = load_f16x16(dd + b * TILE_Q5_K);
        const __m512 dmw = load_f16x16(dd + b * TILE_Q5_K + 2 * PACK_ROWS);
        __m512i sc_lo, sc_hi, mn_lo, mn_hi;
        q4_K_scales_x16(scv + b * TILE_Q5_K, &sc_lo, &sc_hi, &mn_lo, &mn_hi);
        __m512i isum[PACK_TOK_MAX], imin[PACK_TOK_MAX];
        UNROLL
        for (int t = 0; t < nt; t++) isum[t] = imin[t] = _mm512_setzero_si512();
        const uint8_t *v = qs + b * TILE_Q5_K, *vh = qhp + b * TILE_Q5_K;
        UNROLL
        for (int j = 0; j < 4; j++) {
            /* a quarter of the super-block's lines per quarter of its work */
            if (pf_on) prefetch_to(&pf, g + PF_DIST_Q5_K + b * TILE_Q5_K + (j + 1) * TILE_Q5_K / 4);
            __m512i slo[PACK_TOK_MAX], shi[PACK_TOK_MAX];
            UNROLL
            for (int t = 0; t < nt; t++) slo[t] = shi[t] = _mm512_setzero_si512();
            UNROLL
            for (int c = 0; c < 8; c++) {
                const __m512i raw = _mm512_loadu_si512(v + (8 * j + c) * CHUNK_VEC);
                const __m512i qh = _mm512_loadu_si512(vh + c * CHUNK_VEC);
                /* bits 2j, 2j + 1 at bits 4, 5: lo = nibble | bit 4, hi = (nibble << 1) | bit 5 */
                const __m512i hb = q5_K_bit4(qh, 2 * j);
                const __m512i lo = _mm512_ternarylogic_epi32(_mm512_and_si512(raw, m4), hb, b4, 0xf8);
                const __m512i hi = _mm512_ternarylogic_epi32(
                    _mm512_and_si512(_mm512_srli_epi16(raw, 3), m1e), hb, b5, 0xf8);
                UNROLL
                for (int t = 0; t < nt; t++) {
                    const int8_t *xq = xr[t][b].qs + 64 * j + 4 * c;
                    slo[t] = _mm512_dpbusd_epi32(slo[t], lo, bcast32(xq));
                    shi[t] = _mm512_dpbusd_epi32(shi[t], hi, bcast32(xq + 32));
                }
            }
            /* sub-blocks 2j and 2j + 1 */
            const __m512i sa = _mm512_slli_epi32(lane_byte((2 * j) < 4 ? sc_lo : sc_hi, (2 * j) & 3), 1);
            const __m512i sb = lane_byte((2 * j + 1) < 4 ? sc_lo : sc_hi, (2 * j + 1) & 3);
            UNROLL
            for (int t = 0; t < nt; t++)
                isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(slo[t], sa),
                                                                     _mm512_mullo_epi32(shi[t], sb)));
        }
        UNROLL
        for (int t = 0; t < nt; t++) isum[t] = _mm512_srai_epi32(isum[t], 1); /* the doubling out */
        /* mins: as Q4_K */
        UNROLL
        for (int j = 0; j < 8; j++) {
            const __m512i m = lane_byte(j < 4 ? mn_lo : mn_hi, j & 3);
            const __m512i pair = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
            UNROLL
            for (int t = 0; t < nt; t++) imin[t] = _mm512_dpwssd_epi32(imin[t], pair, bcast32(xr[t][b].bsums + 2 * j));
        }
        UNROLL
        for (int t = 0; t < nt; t++) {
            const __m512 xd = _mm512_set1_ps(xr[t][b].d);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, xd), _mm512_cvtepi32_ps(isum[t]), acc[t]);
            acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dmw, xd), _mm512_cvtepi32_ps(imin[t]), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

/* ---- Q6_K ------------------------------------------------------------------------ */

/* The 6-bit quants of sub-block chunk (m, c) from its low-nibble and high-bit
 * chunk vectors: m selects the nibble (m / 2) and the bit pair (m) as in the file
 * layout. The select keeps the nibble from lq and bits 4..5 from the aligned pair. */
VT_INLINE __m512i q6_K_quants(__m512i la, __m512i lb, __m512i hb, const int m) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i lq, hq;
    switch (m) {
    case 0: lq = la; hq = _mm512_slli_epi16(_mm512_and_si512(hb, _mm512_set1_epi8(0x03)), 4); break;
    case 1: lq = lb; hq = _mm512_slli_epi16(_mm512_and_si512(hb, _mm512_set1_epi8(0x0c)), 2); break;
    case 2: lq = _mm512_srli_epi16(la, 4); hq = _mm512_and_si512(hb, _mm512_set1_epi8(0x30)); break;
    default: lq = _mm512_srli_epi16(lb, 4); hq = _mm512_srli_epi16(_mm512_and_si512(hb, _mm512_set1_epi8((char)0xc0)), 2); break;
    }
    return _mm512_ternarylogic_epi32(lq, hq, m4, 0xe4); /* m4 ? lq : hq (bitwise) */
}

/* The linear prefetch stream of a Q6_K group: up to quarter q of super-block b,
 * PF_DIST_K ahead (a super-block's bytes in the group average its 16 rows'). */
VT_INLINE void q6_K_prefetch(const uint8_t *g, const uint8_t **pf, int64_t b, int q) {
    prefetch_to(pf, g + PF_DIST_K + (size_t)b * PACK_ROWS * sizeof(block_q6_K) +
                        (size_t)(q + 1) * PACK_ROWS * sizeof(block_q6_K) / 4);
}

VT_INLINE void q6_K_group(int64_t nb, const uint8_t *g, const block_q8_K *const *xr, float *y,
                          int64_t ldy, const int nt, const bool pf_on) {
    const uint8_t *pf = g + PF_DIST_K;
    __m512 acc[PACK_TOK_MAX];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m512 dw = load_f16x16(g + pack_q6_K_d(nb, b));
        const uint8_t *tile = g + pack_q6_K_tile(nb, b);
        __m512i isum[PACK_TOK_MAX];
        UNROLL
        for (int t = 0; t < nt; t++) isum[t] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            UNROLL
            for (int u = 0; u < 2; u++) {
                const uint8_t *qt = tile + (2 * h + u) * PACK_Q6_K_QUARTER;
                if (pf_on) q6_K_prefetch(g, &pf, b, 2 * h + u);
                UNROLL
                for (int m = 0; m < 4; m++) {
                    /* sub-block j = 8h + 2m + u: elements 128h + 32m + 16u .. + 16, as
                     * chunks c = 4u .. 4u + 3 of the h-th half */
                    const int j = 8 * h + 2 * m + u;
                    __m512i sj[PACK_TOK_MAX];
                    UNROLL
                    for (int t = 0; t < nt; t++) sj[t] = _mm512_set1_epi32(-32 * xr[t][b].bsums[j]);
                    UNROLL
                    for (int c4 = 0; c4 < 4; c4++) {
                        const __m512i lsrc = _mm512_loadu_si512(qt + PACK_Q6_K_VEC(m & 1, c4));
                        const __m512i hb = _mm512_loadu_si512(qt + PACK_Q6_K_VEC(2, c4));
                        const __m512i q = q6_K_quants(lsrc, lsrc, hb, m);
                        UNROLL
                        for (int t = 0; t < nt; t++)
                            sj[t] = _mm512_dpbusd_epi32(sj[t], q, bcast32(xr[t][b].qs + 16 * j + 4 * c4));
                    }
                    const __m512i scj = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(qt + PACK_Q6_K_SC(m))));
                    UNROLL
                    for (int t = 0; t < nt; t++) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(sj[t], scj));
                }
            }
        }
        UNROLL
        for (int t = 0; t < nt; t++) {
            const __m512 sc_f = _mm512_mul_ps(dw, _mm512_set1_ps(xr[t][b].d));
            acc[t] = _mm512_fmadd_ps(sc_f, _mm512_cvtepi32_ps(isum[t]), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

/* Q6_K for one or two tokens (decode): the ql/qh chunks of (h, c) are loaded once
 * and give the quants of four sub-blocks, so four accumulators per token are
 * live (the 4-token tile above would spill with sixteen). Same integer sums and
 * float steps, so the same bits. */
VT_INLINE void q6_K_group_few(int64_t nb, const uint8_t *g, const block_q8_K *const *xr, float *y,
                              int64_t ldy, const int nt, const bool pf_on) {
    const uint8_t *pf = g + PF_DIST_K;
    __m512 acc[2];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m512 dw = load_f16x16(g + pack_q6_K_d(nb, b));
        const uint8_t *tile = g + pack_q6_K_tile(nb, b);
        __m512i isum[2];
        UNROLL
        for (int t = 0; t < nt; t++) isum[t] = _mm512_setzero_si512();
        UNROLL
        for (int h = 0; h < 2; h++) {
            UNROLL
            for (int u = 0; u < 2; u++) {
                const uint8_t *qt = tile + (2 * h + u) * PACK_Q6_K_QUARTER;
                if (pf_on) q6_K_prefetch(g, &pf, b, 2 * h + u);
                __m512i s[2][4];
                UNROLL
                for (int t = 0; t < nt; t++)
                    UNROLL
                    for (int m = 0; m < 4; m++) s[t][m] = _mm512_set1_epi32(-32 * xr[t][b].bsums[8 * h + 2 * m + u]);
                UNROLL
                for (int c4 = 0; c4 < 4; c4++) {
                    const int c = 4 * u + c4;
                    const __m512i la = _mm512_loadu_si512(qt + PACK_Q6_K_VEC(0, c4));
                    const __m512i lb = _mm512_loadu_si512(qt + PACK_Q6_K_VEC(1, c4));
                    const __m512i hb = _mm512_loadu_si512(qt + PACK_Q6_K_VEC(2, c4));
                    UNROLL
                    for (int m = 0; m < 4; m++) {
                        const __m512i q = q6_K_quants(m & 1 ? lb : la, m & 1 ? lb : la, hb, m);
                        UNROLL
                        for (int t = 0; t < nt; t++)
                            s[t][m] = _mm512_dpbusd_epi32(s[t][m], q, bcast32(xr[t][b].qs + 128 * h + 32 * m + 4 * c));
                    }
                }
                UNROLL
                for (int m = 0; m < 4; m++) {
                    const __m512i scj = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(qt + PACK_Q6_K_SC(m))));
                    UNROLL
                    for (int t = 0; t < nt; t++) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s[t][m], scj));
                }
            }
        }
        UNROLL
        for (int t = 0; t < nt; t++) {
            const __m512 sc_f = _mm512_mul_ps(dw, _mm512_set1_ps(xr[t][b].d));
            acc[t] = _mm512_fmadd_ps(sc_f, _mm512_cvtepi32_ps(isum[t]), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

#define KQUANT_GEMM(name, suffix, pf_on, few) /* few: the group kernel for 1-2 tokens */ \
    void gemm_##name##_avx512##suffix(int64_t n_in, const void *w, int64_t n_groups,         \
                                      const void *x, size_t x_stride, const pack_xblock *xs, \
                                      int n_tok, float *y, int64_t ldy) {                   \
        (void)xs;                                                                           \
        const int64_t nb = n_in / QK_K;                                                     \
        const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_##name);           \
        const block_q8_K *xr[PACK_TOK_MAX];                                                 \
        for (int t = 0; t < n_tok; t++)                                                     \
            xr[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride);        \
        for (int64_t gi = 0; gi < n_groups; gi++) {                                         \
            const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;               \
            float *yg = y + gi * PACK_ROWS;                                                 \
            switch (n_tok) {                                                                \
            case 4: name##_group(nb, g, xr, yg, ldy, 4, pf_on); break;                      \
            case 3: name##_group(nb, g, xr, yg, ldy, 3, pf_on); break;                      \
            case 2: few(nb, g, xr, yg, ldy, 2, pf_on); break;                               \
            default: few(nb, g, xr, yg, ldy, 1, pf_on); break;                              \
            }                                                                               \
        }                                                                                   \
    }

KQUANT_GEMM(q4_K, , true, q4_K_group)
KQUANT_GEMM(q5_K, , true, q5_K_group)
KQUANT_GEMM(q6_K, , true, q6_K_group_few)
KQUANT_GEMM(q4_K, _nopf, false, q4_K_group)
KQUANT_GEMM(q5_K, _nopf, false, q5_K_group)
KQUANT_GEMM(q6_K, _nopf, false, q6_K_group_few)

/* ---- MXFP4 (x Q8_0) ------------------------------------------------------------------
 *
 * As Q4_0, with each nibble mapped through the grid by vpshufb to v + 12 (0..24,
 * unsigned for vpdpbusd); the offset comes out exactly through pack_xblock.bias
 * (-12 * sum x). The E8M0 scale bytes become floats with integer ops
 * (mxfp4_e8m0_half: (e - 1) << 23, or 0x200000 << e for e < 2). */

/* The halved E8M0 scales of the 16 rows (bytes at e) as floats. */
VT_INLINE __m512 e8m0_half_x16(const uint8_t *e) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
    const __m512i norm = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    const __mmask16 small = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, norm, sub));
}

VT_INLINE void mxfp4_group(int64_t nb, const uint8_t *g, const block_q8_0 *const *xr,
                           const pack_xblock *xs, float *y, int64_t ldy, const int nt, const bool pf_on) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    __m512 acc[PACK_TOK_MAX];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *pf = g + PF_DIST;
    for (int64_t b = 0; b < nb; b++) {
        const __m512 dw = e8m0_half_x16(g + pack_mxfp4_e(b));
        const uint8_t *v = g + pack_mxfp4_qs(nb, b);
        if (pf_on) prefetch_to(&pf, g + PF_DIST + (b + 1) * PACK_ROWS * sizeof(block_mxfp4));
        __m512i lo[4], hi[4];
        UNROLL
        for (int k = 0; k < 4; k++) {
            const __m512i raw = _mm512_loadu_si512(v + k * CHUNK_VEC);
            lo[k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(raw, m4));
            hi[k] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
        }
        UNROLL
        for (int t = 0; t < nt; t++) {
            const block_q8_0 *xb = xr[t] + b;
            const pack_xblock *xi = xs + t * nb + b;
            __m512i s0 = _mm512_set1_epi32(xi->bias), s1 = _mm512_setzero_si512();
            UNROLL
            for (int k = 0; k < 4; k++) {
                s0 = _mm512_dpbusd_epi32(s0, lo[k], bcast32(xb->qs + 4 * k));
                s1 = _mm512_dpbusd_epi32(s1, hi[k], bcast32(xb->qs + 16 + 4 * k));
            }
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xi->d));
            acc[t] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

/* Two groups at once for 4-token tiles (rows 0..15 of g and of g + gb), as
 * legacy_group2: each activation broadcast feeds two vpdpbusd. Per row the
 * arithmetic of mxfp4_group, so the same bits. */
VT_INLINE void mxfp4_group2(int64_t nb, const uint8_t *g, size_t gb, const block_q8_0 *const *xr,
                            const pack_xblock *xs, float *y, int64_t ldy, const bool pf_on) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    __m512 acc[2][PACK_TOK_MAX];
    UNROLL
    for (int h = 0; h < 2; h++)
        UNROLL
        for (int t = 0; t < PACK_TOK_MAX; t++) acc[h][t] = _mm512_setzero_ps();
    size_t pf[2] = {PF_DIST, PF_DIST};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *v = g + pack_mxfp4_qs(nb, b);
        UNROLL
        for (int h = 0; h < 2 && pf_on; h++)
            prefetch_pair_to(g + h * gb, gb, &pf[h], PF_DIST + (size_t)(b + 1) * PACK_ROWS * sizeof(block_mxfp4));
        __m512i s0[2][PACK_TOK_MAX], s1[2][PACK_TOK_MAX];
        UNROLL
        for (int t = 0; t < PACK_TOK_MAX; t++) {
            s0[0][t] = s0[1][t] = _mm512_set1_epi32(xs[t * nb + b].bias);
            s1[0][t] = s1[1][t] = _mm512_setzero_si512();
        }
        UNROLL
        for (int k = 0; k < 4; k++) {
            __m512i wa[2], wb[2];
            UNROLL
            for (int h = 0; h < 2; h++) {
                const __m512i raw = _mm512_loadu_si512(v + h * gb + k * CHUNK_VEC);
                wa[h] = _mm512_shuffle_epi8(lut, _mm512_and_si512(raw, m4));
                wb[h] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
            }
            UNROLL
            for (int t = 0; t < PACK_TOK_MAX; t++) {
                const __m512i xa = bcast32(xr[t][b].qs + 4 * k), xb = bcast32(xr[t][b].qs + 16 + 4 * k);
                UNROLL
                for (int h = 0; h < 2; h++) {
                    s0[h][t] = _mm512_dpbusd_epi32(s0[h][t], wa[h], xa);
                    s1[h][t] = _mm512_dpbusd_epi32(s1[h][t], wb[h], xb);
                }
            }
        }
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m512 dw = e8m0_half_x16(g + h * gb + pack_mxfp4_e(b));
            UNROLL
            for (int t = 0; t < PACK_TOK_MAX; t++) {
                const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xs[t * nb + b].d));
                acc[h][t] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(_mm512_add_epi32(s0[h][t], s1[h][t])), acc[h][t]);
            }
        }
    }
    UNROLL
    for (int h = 0; h < 2; h++)
        UNROLL
        for (int t = 0; t < PACK_TOK_MAX; t++) _mm512_storeu_ps(y + h * PACK_ROWS + t * ldy, acc[h][t]);
}

/* gemm_mxfp4_avx512 streams from memory with software prefetch; _nopf, without,
 * serves both decode without it and prefill's token blocks (gemm_cached), as
 * Q4_0's _cached does. 4-token tiles two groups at a time. */
#define MXFP4_GEMM(suffix, pf_on)                                                               \
    void gemm_mxfp4_avx512##suffix(int64_t n_in, const void *w, int64_t n_groups, const void *x, \
                                   size_t x_stride, const pack_xblock *xs, int n_tok, float *y,  \
                                   int64_t ldy) {                                                \
        const int64_t nb = n_in / QK_MXFP4;                                                      \
        const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_mxfp4);                 \
        const block_q8_0 *xr[PACK_TOK_MAX];                                                      \
        for (int t = 0; t < n_tok; t++)                                                          \
            xr[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride);             \
        for (int64_t gi = 0; gi < n_groups; gi++) {                                              \
            const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;                    \
            float *yg = y + gi * PACK_ROWS;                                                      \
            if (n_tok == 4 && gi + 2 <= n_groups) {                                              \
                mxfp4_group2(nb, g, group_bytes, xr, xs, yg, ldy, pf_on);                        \
                gi++;                                                                            \
                continue;                                                                        \
            }                                                                                    \
            switch (n_tok) {                                                                     \
            case 4: mxfp4_group(nb, g, xr, xs, yg, ldy, 4, pf_on); break;                        \
            case 3: mxfp4_group(nb, g, xr, xs, yg, ldy, 3, pf_on); break;                        \
            case 2: mxfp4_group(nb, g, xr, xs, yg, ldy, 2, pf_on); break;                        \
            default: mxfp4_group(nb, g, xr, xs, yg, ldy, 1, pf_on); break;                       \
            }                                                                                    \
        }                                                                                        \
    }

MXFP4_GEMM(, true)
MXFP4_GEMM(_nopf, false)
