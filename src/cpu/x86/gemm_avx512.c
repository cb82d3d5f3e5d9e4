/* The AVX-512 VNNI tier's packed GEMMs (cpu/pack.h): cpu/x86/gemm_impl.h on 16
 * rows a zmm. One zmm holds the same 4 quant bytes of the 16 rows of a group;
 * vpdpbusd against the broadcast 4 activation bytes adds that chunk's products
 * into each row's 32-bit lane. vpdpbusd multiplies unsigned by signed bytes:
 * 4-bit quants are used as unsigned nibbles (Q4_0's high ones as 16 x the
 * nibble, saving a shift per chunk; its sums are shifted back once a block, exact
 * since every product is a multiple of 16) and Q8_0 quants are biased by +128
 * (xor 0x80), the offset taken out exactly by starting each block's integer sum
 * at pack_xblock.bias. 32 registers: one- and four-token tiles of the legacy
 * types take two groups at once, g and g + n/2 of the call (gemm_impl.h
 * legacy_tiles): one token reads two streams, and at four each activation
 * broadcast feeds two vpdpbusd, the float steps of a block spread over twice the
 * integer work (matmul.c chunks prefill weights in even numbers of groups). The K-quants take up to four
 * tokens in one pass over the group (one token: two groups at once, g and
 * g + n/2, as two streams), their int32 sub-block sums multiplied by the
 * scales (mullo); Q6_K at one or two tokens reads each chunk vector of a quarter
 * once for its four sub-blocks. */
#include "cpu/x86/simd_avx512.h"
#include "cpu/x86/x86_kernels.h"

#define GEMM_SFX avx512
#define GEMM_VL 16
#define GEMM_LEGACY_NV(nt) 1
/* two groups at two and three tokens would not fit the 32 registers */
#define GEMM_LEGACY_NS(leg, nt) ((nt) == 2 || (nt) == 3 ? 1 : 2)
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
VT_INLINE vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
VT_INLINE vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
VT_INLINE vf vf_cvt(vi a) { return _mm512_cvtepi32_ps(a); }
VT_INLINE void vf_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
VT_INLINE vf vf_f16(const uint8_t *p) { return load_f16x16(p); }
VT_INLINE vf vf_e8m0_half(const uint8_t *e) { return e8m0_half_x16(e); }

#define GEMM_K_TOK 4
#define GEMM_K_NV(nt) 1
/* the one-token pair tiles keep a little more live than 32 registers hold
 * (some of it goes to the stack); 1 keeps one group a tile */
#define GEMM_K_NS1(kq) 2
#define GEMM_K_ROLL_J(nt) 0
#define GEMM_Q5_RUN 8
#define GEMM_Q5_DOUBLED 1
/* The K-quant streams: Q4_K's regions restart every 18 KiB, and Q5_K reads the
 * high bits at the end of its tile from the start of the tile's work, so its
 * stream runs more than a tile ahead. */
#ifndef PF_DIST_K
#define PF_DIST_K 5120
#endif
#ifndef PF_DIST_Q5_K
#define PF_DIST_Q5_K (TILE_Q5_K + 4096)
#endif
#define GEMM_PF_DIST_K PF_DIST_K
#define GEMM_PF_DIST_Q5_K PF_DIST_Q5_K

VT_INLINE vi vi_and(vi a, vi b) { return _mm512_and_si512(a, b); }
VT_INLINE vi vi_or(vi a, vi b) { return _mm512_or_si512(a, b); }
VT_INLINE vi vi_srl(vi a, const int n) { return _mm512_srli_epi32(a, n); }
VT_INLINE vi vi_sll(vi a, const int n) { return _mm512_slli_epi32(a, n); }
VT_INLINE vi vi_bytes(int8_t c) { return _mm512_set1_epi8(c); }
VT_INLINE vi vi_dot16(vi acc, vi a, vi b) { return _mm512_dpwssd_epi32(acc, a, b); }
VT_INLINE vi run_scaled(vi run, vi sc) { return _mm512_mullo_epi32(run, sc); }
VT_INLINE vi k_scale(vi s, const int j) { return lane_byte(s, j); }
VT_INLINE vi k_min_pair(vi s, const int j) {
    const vi m = lane_byte(s, j);
    return _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
}
VT_INLINE vf vf_fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }

/* Bit k (0..7) of every byte of qh at bit 4; the other bits are garbage that the
 * caller masks off. 16-bit shifts are fine: the bit that lands at bit 4 of a
 * byte comes from the same byte for shifts of at most 4. */
VT_INLINE vi q5_K_bit4(vi qh, const int k) {
    return k < 4 ? _mm512_slli_epi16(qh, 4 - k) : k > 4 ? _mm512_srli_epi16(qh, k - 4) : qh;
}
/* Bits 2j, 2j + 1 at bits 4, 5: lo = nibble | bit 4, hi = (nibble << 1) | bit 5. */
VT_INLINE void q5_quants(vi raw, vi qh, const int j, vi *lo, vi *hi) {
    const vi hb = q5_K_bit4(qh, 2 * j);
    *lo = _mm512_ternarylogic_epi32(nib_lo(raw), hb, _mm512_set1_epi8(0x10), 0xf8);
    *hi = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(raw, 3), _mm512_set1_epi8(0x1e)), hb,
                                    _mm512_set1_epi8(0x20), 0xf8);
}

#define GEMM_Q6_TOK 4
#define GEMM_Q6_RUN(nt) 4
#define GEMM_Q6_BY_CHUNK(nt) ((nt) <= 2)

VT_INLINE vi vi_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
VT_INLINE vi vi_i8(const uint8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)); }
VT_INLINE vi q6_scale(const uint8_t *p) { return vi_i8(p); }
/* The select keeps the nibble from lq and bits 4..5 from the aligned pair. */
VT_INLINE vi q6_quants(vi ls, vi hb, const int m) {
    vi lq, hq;
    switch (m) {
    case 0: lq = ls; hq = _mm512_slli_epi16(_mm512_and_si512(hb, _mm512_set1_epi8(0x03)), 4); break;
    case 1: lq = ls; hq = _mm512_slli_epi16(_mm512_and_si512(hb, _mm512_set1_epi8(0x0c)), 2); break;
    case 2: lq = _mm512_srli_epi16(ls, 4); hq = _mm512_and_si512(hb, _mm512_set1_epi8(0x30)); break;
    default: lq = _mm512_srli_epi16(ls, 4); hq = _mm512_srli_epi16(_mm512_and_si512(hb, _mm512_set1_epi8((char)0xc0)), 2); break;
    }
    return _mm512_ternarylogic_epi32(lq, hq, _mm512_set1_epi8(0x0f), 0xe4); /* m4 ? lq : hq (bitwise) */
}

#include "cpu/x86/gemm_impl.h"

/* gemm_<type>_avx512 streams its weights from memory with software prefetch
 * (decode, of up to 4 sequences); the _cached twin, for the tiles of a prefill
 * token block, which find their chunk of groups in L2 (all but the first tile),
 * issues none: there the prefetches only took load slots. Q8_0 for one or two
 * tokens reads 8 rows a vector (gemm8_avx512.c), which streams from memory
 * faster than the 16-row tile. Q4_1, Q5_0 and Q5_1 as Q4_0. MXFP4's _nopf serves both decode without
 * prefetch and prefill (gemm_cached). */
GEMM_LEGACY(q4_0, LEG_Q4_0, , true)
GEMM_LEGACY(q4_0, LEG_Q4_0, _cached, false)
GEMM_LEGACY(q4_1, LEG_Q4_1, , true)
GEMM_LEGACY(q4_1, LEG_Q4_1, _cached, false)
GEMM_LEGACY(q5_0, LEG_Q5_0, , true)
GEMM_LEGACY(q5_0, LEG_Q5_0, _cached, false)
GEMM_LEGACY(q5_1, LEG_Q5_1, , true)
GEMM_LEGACY(q5_1, LEG_Q5_1, _cached, false)
GEMM_LEGACY(q8_0, LEG_Q8_0, _cached, false)
GEMM_LEGACY(mxfp4, LEG_MXFP4, , true)
GEMM_LEGACY(mxfp4, LEG_MXFP4, _nopf, false)
GEMM_KQUANT(q4_K, KQ_Q4_K, , true)
GEMM_KQUANT(q5_K, KQ_Q5_K, , true)
GEMM_KQUANT(q6_K, KQ_Q6_K, , true)
GEMM_KQUANT(q4_K, KQ_Q4_K, _nopf, false)
GEMM_KQUANT(q5_K, KQ_Q5_K, _nopf, false)
GEMM_KQUANT(q6_K, KQ_Q6_K, _nopf, false)

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
