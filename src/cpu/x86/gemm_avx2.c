/* The AVX2 tier's packed GEMMs (cpu/pack.h): cpu/x86/gemm_impl.h on 8 rows a ymm.
 * maddubs against the broadcast 4 activation bytes gives two int16 pair sums per
 * row lane; runs of them are widened to the row's 32-bit lane by madd with ones.
 * Q8_0 uses the sign trick (|w| times x with w's sign), its products widened one
 * chunk at a time. With 16 registers the tiles are small: one or two tokens
 * take all 16 rows of a group in one pass (decode reads the group once, in
 * order, each activation broadcast feeding both halves), three or four one
 * half at a time. */
#include "cpu/x86/gemm_ymm.h"
#include "cpu/x86/x86_kernels.h"

#define GEMM_SFX avx2
#define GEMM_LEGACY_NV(nt) ((nt) <= 2 ? 2 : 1)
#define GEMM_SPLIT_SUMS 0
#define GEMM_BIAS_IN_ACC 0
#define GEMM_Q8_BIASED 0
#define GEMM_NIB_HI16_SHIFT 0
#define GEMM_KEEP(v) KEEP_REG(v)

VT_INLINE vi nib_hi16(vi raw) { return nib_hi(raw); }
VT_INLINE vi q8_w(vi raw) { return _mm256_sign_epi8(raw, raw); }
VT_INLINE vi q8_x(vi x, vi raw) { return _mm256_sign_epi8(x, raw); }
VT_INLINE vi run_dot(vi acc, vi w, vi x) { return _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, x)); }
VT_INLINE vi run_i32(vi run) { return _mm256_madd_epi16(run, _mm256_set1_epi16(1)); }
VT_INLINE vi vi_dot(vi acc, vi w, vi x) { return _mm256_add_epi32(acc, run_i32(_mm256_maddubs_epi16(w, x))); }

#include "cpu/x86/gemm_impl.h"

GEMM_LEGACY(q4_0, LEG_Q4_0, , true)
GEMM_LEGACY(q8_0, LEG_Q8_0, , true)
GEMM_LEGACY(mxfp4, LEG_MXFP4, , true)
GEMM_LEGACY(q4_0, LEG_Q4_0, _nopf, false)
GEMM_LEGACY(q8_0, LEG_Q8_0, _nopf, false)
GEMM_LEGACY(mxfp4, LEG_MXFP4, _nopf, false)

/* ---- K-quants (Q4_K, Q5_K, Q6_K x Q8_K), 8 rows x up to 2 (Q6_K: 4) tokens a pass ------
 *
 * Per 32-element sub-block the maddubs pair sums of the 8 chunks fit int16
 * (Q4_K: 8 * 2 * 15 * 128 < 2^15), so one madd with the row's scale as an int16
 * pair (sc, sc) gives sc * sum exactly. Q5_K quants reach 31, so four chunks
 * share an int16 sum (4 * 2 * 31 * 128 < 2^15); Q6_K quants reach 63, so only
 * two. The -32 offset of Q6_K and the mins of Q4_K and Q5_K come from the
 * activation's bsums with madd against int16 pairs of the rows' scales or mins.
 * 16 registers hold the Q4_K / Q5_K tiles of two tokens and 8 rows, so a
 * 4-token call makes four passes over the group (all but the first from L1 /
 * L2); Q6_K madds every product sum at once and takes four tokens a pass
 * (q6_K_half). One token takes all 16 rows in one pass (k_one, q6_K_one). */

/* Byte j (0..3) of every 32-bit lane as the int16 pair (v, v): one pshufb. */
static const uint8_t lane_byte_ctrl[4][32] __attribute__((aligned(32))) = {
#define LBC(k) {k, 0x80, k, 0x80, 4 + k, 0x80, 4 + k, 0x80, 8 + k, 0x80, 8 + k, 0x80, 12 + k, 0x80, 12 + k, 0x80, \
                k, 0x80, k, 0x80, 4 + k, 0x80, 4 + k, 0x80, 8 + k, 0x80, 8 + k, 0x80, 12 + k, 0x80, 12 + k, 0x80}
    LBC(0), LBC(1), LBC(2), LBC(3)
#undef LBC
};

VT_INLINE __m256i lane_byte_pair(__m256i v, int j) {
    return _mm256_shuffle_epi8(v, _mm256_load_si256((const __m256i *)lane_byte_ctrl[j]));
}

/* The same of 32 bytes at p (32-byte aligned). */
VT_INLINE __m256i byte_pair(const uint8_t *p, int j) {
    return lane_byte_pair(_mm256_load_si256((const __m256i *)p), j);
}

/* The 6-bit scales and mins of the 8 rows whose three scale words start at sp
 * (a K-quant tile's scale vectors + 32 * half), a byte per sub-block in each
 * row's 32-bit lane: ks[0] scales of sub-blocks 0..3, ks[1] of 4..7, ks[2] mins
 * of 0..3, ks[3] of 4..7. */
VT_INLINE void k_scales(const uint8_t *sp, __m256i ks[4]) {
    const __m256i u0 = _mm256_loadu_si256((const __m256i *)sp);
    const __m256i u1 = _mm256_loadu_si256((const __m256i *)(sp + CHUNK_VEC));
    const __m256i u2 = _mm256_loadu_si256((const __m256i *)(sp + 2 * CHUNK_VEC));
    const __m256i k6 = _mm256_set1_epi8(0x3f), k4 = _mm256_set1_epi8(0x0f), k2 = _mm256_set1_epi8(0x03);
    ks[0] = _mm256_and_si256(u0, k6);
    ks[1] = _mm256_or_si256(_mm256_and_si256(u2, k4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k2), 4));
    ks[2] = _mm256_and_si256(u1, k6);
    ks[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k2), 4));
}

VT_INLINE void q4_K_half(int64_t nb, const uint8_t *g, int half, const block_q8_K *const *xr,
                         float *y, int64_t ldy, const int nt, const bool pf_on) {
    const uint8_t *dd = g, *scv = g + 4 * PACK_ROWS, *qs = scv + 3 * CHUNK_VEC; /* + b * TILE_Q4_K */
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[2];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    const uint8_t *pf = g + PF_DIST;
    for (int64_t b = 0; b < nb; b++) {
        __m256i ks[4];
        k_scales(scv + b * TILE_Q4_K + 32 * half, ks);
        const __m256i sc_lo = ks[0], sc_hi = ks[1], mn_lo = ks[2], mn_hi = ks[3];
        const uint8_t *v = qs + b * TILE_Q4_K + 32 * half;
        if (pf_on && half == 0) prefetch_to(&pf, g + PF_DIST + (b + 1) * PACK_ROWS * sizeof(block_q4_K));
        __m256i isum[2], imin[2];
        UNROLL
        for (int t = 0; t < nt; t++) isum[t] = imin[t] = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i plo[2], phi[2];
            UNROLL
            for (int t = 0; t < nt; t++) plo[t] = phi[t] = _mm256_setzero_si256();
            UNROLL
            for (int c = 0; c < 8; c++) {
                const __m256i raw = _mm256_loadu_si256((const __m256i *)(v + (8 * j + c) * CHUNK_VEC));
                const __m256i lo = _mm256_and_si256(raw, m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                UNROLL
                for (int t = 0; t < nt; t++) {
                    const int8_t *xq = xr[t][b].qs + 64 * j + 4 * c;
                    plo[t] = _mm256_add_epi16(plo[t], _mm256_maddubs_epi16(lo, vi_bcast32(xq)));
                    phi[t] = _mm256_add_epi16(phi[t], _mm256_maddubs_epi16(hi, vi_bcast32(xq + 32)));
                    KEEP_REG(plo[t]);
                    KEEP_REG(phi[t]);
                }
            }
            const __m256i sa = lane_byte_pair(2 * j < 4 ? sc_lo : sc_hi, (2 * j) & 3);
            const __m256i sb = lane_byte_pair(2 * j + 1 < 4 ? sc_lo : sc_hi, (2 * j + 1) & 3);
            UNROLL
            for (int t = 0; t < nt; t++)
                isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(plo[t], sa),
                                                                     _mm256_madd_epi16(phi[t], sb)));
        }
        UNROLL
        for (int j = 0; j < 8; j++) {
            const __m256i pair = lane_byte_pair(j < 4 ? mn_lo : mn_hi, j & 3);
            UNROLL
            for (int t = 0; t < nt; t++)
                imin[t] = _mm256_add_epi32(imin[t], _mm256_madd_epi16(pair, vi_bcast32(xr[t][b].bsums + 2 * j)));
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dd + b * TILE_Q4_K + 16 * half)));
        const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dd + b * TILE_Q4_K + 32 + 16 * half)));
        UNROLL
        for (int t = 0; t < nt; t++) {
            const __m256 xd = _mm256_set1_ps(xr[t][b].d);
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(isum[t]), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmw, xd), _mm256_cvtepi32_ps(imin[t]), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ldy + 8 * half, acc[t]);
}

/* Bit k (0..7) of every byte of qh at bit 4, the other bits cleared. 16-bit
 * shifts are fine: the bit that lands at bit 4 of a byte comes from the same
 * byte for shifts of at most 4. */
VT_INLINE __m256i q5_K_bit4(__m256i qh, const int k) {
    const __m256i s = k < 4 ? _mm256_slli_epi16(qh, 4 - k) : k > 4 ? _mm256_srli_epi16(qh, k - 4) : qh;
    return _mm256_and_si256(s, _mm256_set1_epi8(0x10));
}

/* Q4_K or Q5_K (q5: the fifth bits, and a madd every four chunks), one token,
 * all 16 rows in one pass (decode). */
VT_INLINE void k_one(int64_t nb, const uint8_t *g, const block_q8_K *xr, float *y, const bool q5, const bool pf_on) {
    const size_t tile = q5 ? TILE_Q5_K : TILE_Q4_K;
    const int run = q5 ? 4 : 8; /* chunks per int16 sum */
    const uint8_t *dd = g, *scv = g + 4 * PACK_ROWS, *qs = scv + 3 * CHUNK_VEC; /* + b * tile */
    const uint8_t *qhp = qs + 32 * CHUNK_VEC;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    const uint8_t *pf = g + PF_DIST;
    _Alignas(32) uint8_t scb[2][4][32]; /* [half][sc_lo, sc_hi, mn_lo, mn_hi] */
    for (int64_t b = 0; b < nb; b++) {
        UNROLL
        for (int half = 0; half < 2; half++) {
            __m256i ks[4];
            k_scales(scv + b * tile + 32 * half, ks);
            UNROLL
            for (int i = 0; i < 4; i++) _mm256_store_si256((__m256i *)scb[half][i], ks[i]);
        }
        const uint8_t *v = qs + b * tile, *vh = qhp + b * tile;
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int j = 0; j < 4; j++) {
            if (pf_on) prefetch_to(&pf, g + PF_DIST + (size_t)(4 * b + j + 1) * tile / 4);
            __m256i sa[2], sb[2];
            UNROLL
            for (int half = 0; half < 2; half++) {
                sa[half] = byte_pair(scb[half][j >= 2], (2 * j) & 3);
                sb[half] = byte_pair(scb[half][j >= 2], (2 * j + 1) & 3);
            }
            UNROLL
            for (int c0 = 0; c0 < 8; c0 += run) {
                __m256i plo[2], phi[2];
                plo[0] = plo[1] = phi[0] = phi[1] = _mm256_setzero_si256();
                UNROLL
                for (int c = c0; c < c0 + run; c++) {
                    const int8_t *xq = xr[b].qs + 64 * j + 4 * c;
                    const __m256i xlo = vi_bcast32(xq), xhi = vi_bcast32(xq + 32);
                    UNROLL
                    for (int half = 0; half < 2; half++) {
                        const __m256i raw = _mm256_loadu_si256((const __m256i *)(v + (8 * j + c) * CHUNK_VEC + 32 * half));
                        __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                        if (q5) {
                            const __m256i qh = _mm256_loadu_si256((const __m256i *)(vh + c * CHUNK_VEC + 32 * half));
                            lo = _mm256_or_si256(lo, q5_K_bit4(qh, 2 * j));
                            hi = _mm256_or_si256(hi, q5_K_bit4(qh, 2 * j + 1));
                        }
                        plo[half] = _mm256_add_epi16(plo[half], _mm256_maddubs_epi16(lo, xlo));
                        phi[half] = _mm256_add_epi16(phi[half], _mm256_maddubs_epi16(hi, xhi));
                    }
                }
                UNROLL
                for (int half = 0; half < 2; half++)
                    isum[half] = _mm256_add_epi32(isum[half], _mm256_add_epi32(_mm256_madd_epi16(plo[half], sa[half]),
                                                                               _mm256_madd_epi16(phi[half], sb[half])));
            }
        }
        __m256i imin[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        UNROLL
        for (int j = 0; j < 8; j++) {
            const __m256i bs = vi_bcast32(xr[b].bsums + 2 * j);
            UNROLL
            for (int half = 0; half < 2; half++)
                imin[half] = _mm256_add_epi32(imin[half], _mm256_madd_epi16(byte_pair(scb[half][2 + (j >= 4)], j & 3), bs));
        }
        const __m256 xd = _mm256_set1_ps(xr[b].d);
        UNROLL
        for (int half = 0; half < 2; half++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dd + b * tile + 16 * half)));
            const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dd + b * tile + 32 + 16 * half)));
            acc[half] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(isum[half]), acc[half]);
            acc[half] = _mm256_fnmadd_ps(_mm256_mul_ps(dmw, xd), _mm256_cvtepi32_ps(imin[half]), acc[half]);
        }
    }
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + 8, acc[1]);
}
VT_INLINE void q4_K_one(int64_t nb, const uint8_t *g, const block_q8_K *xr, float *y, const bool pf_on) {
    k_one(nb, g, xr, y, false, pf_on);
}
VT_INLINE void q5_K_one(int64_t nb, const uint8_t *g, const block_q8_K *xr, float *y, const bool pf_on) {
    k_one(nb, g, xr, y, true, pf_on);
}

/* q4_K_half with the fifth bit merged into each nibble before the maddubs, and
 * a madd every four chunks (see above): Q4_K's integer sums and float steps. */
VT_INLINE void q5_K_half(int64_t nb, const uint8_t *g, int half, const block_q8_K *const *xr,
                         float *y, int64_t ldy, const int nt, const bool pf_on) {
    const uint8_t *dd = g, *scv = g + 4 * PACK_ROWS, *qs = scv + 3 * CHUNK_VEC; /* + b * TILE_Q5_K */
    const uint8_t *qhp = qs + 32 * CHUNK_VEC;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[2];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    const uint8_t *pf = g + PF_DIST;
    for (int64_t b = 0; b < nb; b++) {
        __m256i ks[4];
        k_scales(scv + b * TILE_Q5_K + 32 * half, ks);
        const __m256i sc_lo = ks[0], sc_hi = ks[1], mn_lo = ks[2], mn_hi = ks[3];
        const uint8_t *v = qs + b * TILE_Q5_K + 32 * half, *vh = qhp + b * TILE_Q5_K + 32 * half;
        if (pf_on && half == 0) prefetch_to(&pf, g + PF_DIST + (b + 1) * PACK_ROWS * sizeof(block_q5_K));
        __m256i isum[2], imin[2];
        UNROLL
        for (int t = 0; t < nt; t++) isum[t] = imin[t] = _mm256_setzero_si256();
        UNROLL
        for (int j = 0; j < 4; j++) {
            const __m256i sa = lane_byte_pair(2 * j < 4 ? sc_lo : sc_hi, (2 * j) & 3);
            const __m256i sb = lane_byte_pair(2 * j + 1 < 4 ? sc_lo : sc_hi, (2 * j + 1) & 3);
            UNROLL
            for (int c0 = 0; c0 < 8; c0 += 4) {
                __m256i plo[2], phi[2];
                UNROLL
                for (int t = 0; t < nt; t++) plo[t] = phi[t] = _mm256_setzero_si256();
                UNROLL
                for (int c = c0; c < c0 + 4; c++) {
                    const __m256i raw = _mm256_loadu_si256((const __m256i *)(v + (8 * j + c) * CHUNK_VEC));
                    const __m256i qh = _mm256_loadu_si256((const __m256i *)(vh + c * CHUNK_VEC));
                    const __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, m4), q5_K_bit4(qh, 2 * j));
                    const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
                                                       q5_K_bit4(qh, 2 * j + 1));
                    UNROLL
                    for (int t = 0; t < nt; t++) {
                        const int8_t *xq = xr[t][b].qs + 64 * j + 4 * c;
                        plo[t] = _mm256_add_epi16(plo[t], _mm256_maddubs_epi16(lo, vi_bcast32(xq)));
                        phi[t] = _mm256_add_epi16(phi[t], _mm256_maddubs_epi16(hi, vi_bcast32(xq + 32)));
                        KEEP_REG(plo[t]);
                        KEEP_REG(phi[t]);
                    }
                }
                UNROLL
                for (int t = 0; t < nt; t++)
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(plo[t], sa),
                                                                         _mm256_madd_epi16(phi[t], sb)));
            }
        }
        UNROLL
        for (int j = 0; j < 8; j++) {
            const __m256i pair = lane_byte_pair(j < 4 ? mn_lo : mn_hi, j & 3);
            UNROLL
            for (int t = 0; t < nt; t++)
                imin[t] = _mm256_add_epi32(imin[t], _mm256_madd_epi16(pair, vi_bcast32(xr[t][b].bsums + 2 * j)));
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dd + b * TILE_Q5_K + 16 * half)));
        const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dd + b * TILE_Q5_K + 32 + 16 * half)));
        UNROLL
        for (int t = 0; t < nt; t++) {
            const __m256 xd = _mm256_set1_ps(xr[t][b].d);
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(isum[t]), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmw, xd), _mm256_cvtepi32_ps(imin[t]), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ldy + 8 * half, acc[t]);
}

/* The int8 scales of sub-block m of a Q6_K quarter, the 8 rows of this half, as int32 lanes. */
VT_INLINE __m256i q6_K_scale(const uint8_t *qt, int m, int half) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(qt + PACK_Q6_K_SC(m) + 8 * half)));
}

/* The 6-bit quants of run m from a ql chunk (low nibbles for m < 2, high for
 * m >= 2) and its qh chunk (bits 2m, 2m + 1). */
VT_INLINE __m256i q6_K_quants(__m256i ls, __m256i hb, const int m) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
    const __m256i lq = _mm256_and_si256(m < 2 ? ls : _mm256_srli_epi16(ls, 4), m4);
    __m256i hq;
    switch (m) {
    case 0: hq = _mm256_slli_epi16(hb, 4); break;
    case 1: hq = _mm256_slli_epi16(hb, 2); break;
    case 2: hq = hb; break;
    default: hq = _mm256_srli_epi16(hb, 2); break;
    }
    return _mm256_or_si256(lq, _mm256_and_si256(hq, top));
}

/* Q6_K, 8 rows x up to 4 tokens a pass: each unpacked chunk of quants feeds
 * every token of the tile, its maddubs pair sums going straight into the
 * token's int32 sum through a madd with the sub-block's scale as an int16 pair
 * (sc, sc), and the -32 offset goes into the same sum as a madd of the
 * sub-block pair's scales times 32 (|sc| * 32 <= 4096 fits int16) with the
 * activation's bsums. Two registers a token (the float and the integer sum),
 * so four tokens fit with the chunk, its quants and the scale pair; with two
 * tokens a pass and the products summed in int16 first, a 4-token call unpacked
 * every chunk twice and ran 91 GFLOP/s (bench_matmul -n 128, 5632 x 2048, one
 * thread, Zen 5 VM). */
VT_INLINE void q6_K_half(int64_t nb, const uint8_t *g, int half, const block_q8_K *const *xr,
                         float *y, int64_t ldy, const int nt, const bool pf_on) {
    const __m256i lo16 = _mm256_set1_epi32(0xffff);
    const uint8_t *pf = g + PF_DIST;
    __m256 acc[PACK_TOK_MAX];
    UNROLL
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = g + pack_q6_K_tile(nb, b);
        __m256i isum[PACK_TOK_MAX];
        UNROLL
        for (int t = 0; t < nt; t++) isum[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            UNROLL
            for (int u = 0; u < 2; u++) {
                const uint8_t *qt = tile + (2 * h + u) * PACK_Q6_K_QUARTER + 32 * half;
                /* a quarter super-block per quarter of the work (2026-12-04, tiles:
                 * +61% / +7% on rows of 2048 / 8192 over the old regions; one burst
                 * per super-block read rows of 8192 27% slower than those) */
                if (pf_on && half == 0)
                    prefetch_to(&pf, g + PF_DIST + (size_t)(4 * b + 2 * h + u + 1) * PACK_ROWS * sizeof(block_q6_K) / 4);
                for (int m = 0; m < 4; m++) {
                    const int j = 8 * h + 2 * m + u;
                    const __m256i scj = q6_K_scale(qt - 32 * half, m, half);
                    const __m256i pair = _mm256_or_si256(_mm256_and_si256(scj, lo16), _mm256_slli_epi32(scj, 16));
                    UNROLL
                    for (int c4 = 0; c4 < 4; c4++) {
                        const __m256i ls = _mm256_loadu_si256((const __m256i *)(qt + PACK_Q6_K_VEC(m & 1, c4)));
                        const __m256i hb = _mm256_loadu_si256((const __m256i *)(qt + PACK_Q6_K_VEC(2, c4)));
                        const __m256i q = q6_K_quants(ls, hb, m);
                        UNROLL
                        for (int t = 0; t < nt; t++) {
                            const __m256i p = _mm256_maddubs_epi16(q, vi_bcast32(xr[t][b].qs + 16 * j + 4 * c4));
                            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, pair));
                            KEEP_REG(isum[t]);
                        }
                    }
                }
            }
            /* offset: -32 * the sum over the pairs (j0, j0 + 1) = (8h + 2m, + 1),
             * from quarters (h, 0) and (h, 1), of sc_j * bsum_j */
            const uint8_t *q0 = tile + 2 * h * PACK_Q6_K_QUARTER, *q1 = q0 + PACK_Q6_K_QUARTER;
            UNROLL
            for (int m = 0; m < 4; m++) {
                const __m256i sc2 = _mm256_or_si256(_mm256_and_si256(q6_K_scale(q0, m, half), lo16),
                                                    _mm256_slli_epi32(q6_K_scale(q1, m, half), 16));
                const __m256i sc32 = _mm256_slli_epi16(sc2, 5);
                UNROLL
                for (int t = 0; t < nt; t++)
                    isum[t] = _mm256_sub_epi32(isum[t], _mm256_madd_epi16(sc32, vi_bcast32(xr[t][b].bsums + 8 * h + 2 * m)));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + pack_q6_K_d(nb, b) + 16 * half)));
        UNROLL
        for (int t = 0; t < nt; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xr[t][b].d)), _mm256_cvtepi32_ps(isum[t]), acc[t]);
    }
    UNROLL
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ldy + 8 * half, acc[t]);
}

/* tok: the tokens a pass over a group takes (the register tile of name##_half);
 * TILE_NT keeps the cases past it, never taken, within the tile's arrays. */
#define TILE_NT(n, tok) ((n) < (tok) ? (n) : (tok))
#define KQUANT_GEMM(name, suffix, pf_on, tok)                                                \
    void gemm_##name##_avx2##suffix(int64_t n_in, const void *w, int64_t n_groups,           \
                                    const void *x, size_t x_stride, const pack_xblock *xs,   \
                                    int n_tok, float *y, int64_t ldy) {                     \
        (void)xs;                                                                           \
        const int64_t nb = n_in / QK_K;                                                     \
        const size_t group_bytes = (size_t)nb * PACK_ROWS * sizeof(block_##name);           \
        const block_q8_K *xr[PACK_TOK_MAX];                                                 \
        for (int t = 0; t < n_tok; t++)                                                     \
            xr[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride);        \
        for (int64_t gi = 0; gi < n_groups; gi++) {                                         \
            const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;               \
            if (n_tok == 1) {                                                               \
                name##_one(nb, g, xr[0], y + gi * PACK_ROWS, pf_on);                        \
                continue;                                                                   \
            }                                                                               \
            for (int t = 0; t < n_tok; t += tok) {                                          \
                const int nt = TILE_NT(n_tok - t, tok);                                     \
                float *yg = y + t * ldy + gi * PACK_ROWS;                                   \
                for (int half = 0; half < 2; half++) {                                      \
                    switch (nt) {                                                           \
                    case 4: name##_half(nb, g, half, xr + t, yg, ldy, TILE_NT(4, tok), pf_on); break; \
                    case 3: name##_half(nb, g, half, xr + t, yg, ldy, TILE_NT(3, tok), pf_on); break; \
                    case 2: name##_half(nb, g, half, xr + t, yg, ldy, 2, pf_on); break;     \
                    default: name##_half(nb, g, half, xr + t, yg, ldy, 1, pf_on); break;    \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }

/* Q6_K, one token, all 16 rows in one pass (decode). */
VT_INLINE void q6_K_one(int64_t nb, const uint8_t *g, const block_q8_K *xr, float *y, const bool pf_on) {
    const __m256i lo16 = _mm256_set1_epi32(0xffff);
    const uint8_t *pf = g + PF_DIST;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = g + pack_q6_K_tile(nb, b);
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        __m256i corr[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int h = 0; h < 2; h++) {
            UNROLL
            for (int u = 0; u < 2; u++) {
                const uint8_t *qt = tile + (2 * h + u) * PACK_Q6_K_QUARTER;
                if (pf_on) prefetch_to(&pf, g + PF_DIST + (size_t)(4 * b + 2 * h + u + 1) * PACK_ROWS * sizeof(block_q6_K) / 4);
                UNROLL
                for (int m = 0; m < 4; m++) {
                    const int j = 8 * h + 2 * m + u;
                    __m256i p01[2], p23[2];
                    p01[0] = p01[1] = p23[0] = p23[1] = _mm256_setzero_si256();
                    UNROLL
                    for (int c4 = 0; c4 < 4; c4++) {
                        const __m256i xv = vi_bcast32(xr[b].qs + 16 * j + 4 * c4);
                        UNROLL
                        for (int half = 0; half < 2; half++) {
                            const __m256i ls = _mm256_loadu_si256((const __m256i *)(qt + PACK_Q6_K_VEC(m & 1, c4) + 32 * half));
                            const __m256i hb = _mm256_loadu_si256((const __m256i *)(qt + PACK_Q6_K_VEC(2, c4) + 32 * half));
                            const __m256i p = _mm256_maddubs_epi16(q6_K_quants(ls, hb, m), xv);
                            if (c4 < 2) p01[half] = _mm256_add_epi16(p01[half], p);
                            else p23[half] = _mm256_add_epi16(p23[half], p);
                        }
                    }
                    UNROLL
                    for (int half = 0; half < 2; half++) {
                        const __m256i scj = q6_K_scale(qt, m, half);
                        const __m256i pair = _mm256_or_si256(_mm256_and_si256(scj, lo16), _mm256_slli_epi32(scj, 16));
                        isum[half] = _mm256_add_epi32(isum[half], _mm256_add_epi32(_mm256_madd_epi16(p01[half], pair),
                                                                                   _mm256_madd_epi16(p23[half], pair)));
                    }
                }
            }
            const uint8_t *q0 = tile + 2 * h * PACK_Q6_K_QUARTER, *q1 = q0 + PACK_Q6_K_QUARTER;
            UNROLL
            for (int m = 0; m < 4; m++) {
                const __m256i bs = vi_bcast32(xr[b].bsums + 8 * h + 2 * m);
                UNROLL
                for (int half = 0; half < 2; half++) {
                    const __m256i sc2 = _mm256_or_si256(_mm256_and_si256(q6_K_scale(q0, m, half), lo16),
                                                        _mm256_slli_epi32(q6_K_scale(q1, m, half), 16));
                    corr[half] = _mm256_add_epi32(corr[half], _mm256_madd_epi16(sc2, bs));
                }
            }
        }
        const __m256 xd = _mm256_set1_ps(xr[b].d);
        UNROLL
        for (int half = 0; half < 2; half++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + pack_q6_K_d(nb, b) + 16 * half)));
            const __m256i s = _mm256_sub_epi32(isum[half], _mm256_slli_epi32(corr[half], 5));
            acc[half] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(s), acc[half]);
        }
    }
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + 8, acc[1]);
}

KQUANT_GEMM(q4_K, , true, 2)
KQUANT_GEMM(q5_K, , true, 2)
KQUANT_GEMM(q6_K, , true, 4)
KQUANT_GEMM(q4_K, _nopf, false, 2)
KQUANT_GEMM(q5_K, _nopf, false, 2)
KQUANT_GEMM(q6_K, _nopf, false, 4)
