/* The AVX-512 VNNI tier's packed GEMMs (cpu/pack.h): cpu/x86/gemm_impl.h on 16
 * rows a zmm. One zmm holds the same 4 quant bytes of the 16 rows of a group;
 * vpdpbusd against the broadcast 4 activation bytes adds that chunk's products
 * into each row's 32-bit lane. vpdpbusd multiplies unsigned by signed bytes:
 * 4-bit quants are used as unsigned nibbles (Q4_0's high ones as 16 x the
 * nibble, saving a shift per chunk; its sums are shifted back once a block, exact
 * since every product is a multiple of 16) and Q8_0 quants are biased by +128
 * (xor 0x80), the offset taken out exactly by starting each block's integer sum
 * at pack_xblock.bias. 32 registers: 4-token tiles of the legacy types take two
 * groups at once, so each activation broadcast feeds two vpdpbusd and the float
 * steps of a block are spread over twice the integer work (matmul.c chunks
 * prefill weights in even numbers of groups). */
#include "cpu/x86/simd_avx512.h"
#include "cpu/x86/x86_kernels.h"

#define GEMM_SFX avx512
#define GEMM_VL 16
#define GEMM_LEGACY_NV(nt) ((nt) == 4 ? 2 : 1)
#define GEMM_SPLIT_SUMS 1
#define GEMM_BIAS_IN_ACC 1
#define GEMM_Q8_BIASED 1
#define GEMM_NIB_HI16_SHIFT 4
#define GEMM_KEEP(v) ((void)0)

typedef __m512i vi;
typedef __m512 vf;

VT_INLINE vi vi_load(const uint8_t *p) { return _mm512_loadu_si512(p); }
VT_INLINE vi vi_bcast32(const void *p) { return bcast32(p); }
VT_INLINE vi vi_set1(int32_t c) { return _mm512_set1_epi32(c); }
VT_INLINE vi vi_zero(void) { return _mm512_setzero_si512(); }
VT_INLINE vi vi_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
VT_INLINE vi vi_sra(vi a, const int n) { return _mm512_srai_epi32(a, n); }
VT_INLINE vi nib_lo(vi raw) { return _mm512_and_si512(raw, _mm512_set1_epi8(0x0f)); }
VT_INLINE vi nib_hi(vi raw) { return _mm512_and_si512(_mm512_srli_epi16(raw, 4), _mm512_set1_epi8(0x0f)); }
VT_INLINE vi nib_hi16(vi raw) { return _mm512_andnot_si512(_mm512_set1_epi8(0x0f), raw); }
VT_INLINE vi mxfp4_grid(vi nib) {
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
    return _mm512_shuffle_epi8(lut, nib);
}
VT_INLINE vi q8_w(vi raw) { return _mm512_xor_si512(raw, _mm512_set1_epi8((char)0x80)); }
VT_INLINE vi q8_x(vi x, vi raw) {
    (void)raw;
    return x;
}
VT_INLINE vi vi_dot(vi acc, vi w, vi x) { return _mm512_dpbusd_epi32(acc, w, x); }
VT_INLINE vi run_dot(vi acc, vi w, vi x) { return _mm512_dpbusd_epi32(acc, w, x); }
VT_INLINE vi run_i32(vi run) { return run; }

VT_INLINE vf vf_zero(void) { return _mm512_setzero_ps(); }
VT_INLINE vf vf_set1(float x) { return _mm512_set1_ps(x); }
VT_INLINE vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
VT_INLINE vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
VT_INLINE vf vf_cvt(vi a) { return _mm512_cvtepi32_ps(a); }
VT_INLINE void vf_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
VT_INLINE vf vf_f16(const uint8_t *p) { return load_f16x16(p); }
/* (e - 1) << 23, or 0x200000 << e for e < 2 */
VT_INLINE vf vf_e8m0_half(const uint8_t *e) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
    const __m512i norm = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), v);
    const __mmask16 small = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, norm, sub));
}

#include "cpu/x86/gemm_impl.h"

/* gemm_<type>_avx512 streams its weights from memory with software prefetch
 * (decode, of up to 4 sequences); the _cached twin, for the tiles of a prefill
 * token block, which find their chunk of groups in L2 (all but the first tile),
 * issues none: there the prefetches only took load slots. Q8_0 for one or two
 * tokens reads 8 rows a vector (gemm8_avx512.c), which streams from memory
 * faster than the 16-row tile. MXFP4's _nopf serves both decode without
 * prefetch and prefill (gemm_cached). */
GEMM_LEGACY(q4_0, LEG_Q4_0, , true)
GEMM_LEGACY(q4_0, LEG_Q4_0, _cached, false)
GEMM_LEGACY(q8_0, LEG_Q8_0, _cached, false)
GEMM_LEGACY(mxfp4, LEG_MXFP4, , true)
GEMM_LEGACY(mxfp4, LEG_MXFP4, _nopf, false)

void gemm_q8_0_avx512(int64_t n_in, const void *w, int64_t n_groups, const void *x, size_t x_stride,
                      const pack_xblock *xs, int n_tok, float *y, int64_t ldy) {
    if (n_tok <= 2) gemm_q8_0_avx512_y(n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy);
    else legacy_gemm(LEG_Q8_0, n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy, true);
}

void gemm_q8_0_avx512_nopf(int64_t n_in, const void *w, int64_t n_groups, const void *x, size_t x_stride,
                           const pack_xblock *xs, int n_tok, float *y, int64_t ldy) {
    if (n_tok <= 2) gemm_q8_0_avx512_y_nopf(n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy);
    else legacy_gemm(LEG_Q8_0, n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy, false);
}

/* The K-quant streams: Q4_K's regions restart every 18 KiB, and Q5_K reads the
 * high bits at the end of its tile from the start of the tile's work, so its
 * stream runs more than a tile ahead. */
#ifndef PF_DIST_K
#define PF_DIST_K 5120
#endif
#ifndef PF_DIST_Q5_K
#define PF_DIST_Q5_K (TILE_Q5_K + 4096)
#endif

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
