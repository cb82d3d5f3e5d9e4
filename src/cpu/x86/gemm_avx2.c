/* The AVX2 tier's packed GEMMs (cpu/pack.h): cpu/x86/gemm_impl.h on 8 rows a ymm.
 * maddubs against the broadcast 4 activation bytes gives two int16 pair sums per
 * row lane; runs of them are widened to the row's 32-bit lane by madd, with ones
 * or with the int16 pair (sc, sc) of a K-quant sub-block's scale. Q8_0 uses the
 * sign trick (|w| times x with w's sign), its products widened one chunk at a
 * time. With 16 registers the tiles are small: one token (Q4_0, Q8_0, MXFP4:
 * also two) takes all 16 rows of a group in one pass, so decode reads the group
 * once, in order, each activation broadcast feeding both halves; one token
 * reads two such groups, g and g + n/2 of the call (two streams: gemm_impl.h
 * legacy_tiles), Q4_0 and Q8_0 both tiles at once, MXFP4 (whose split sums
 * and grid table leave no registers for two tiles) and the K-quants (whose
 * one-group tile already holds a group's two halves) in turns, a block or
 * super-block of one group, then of the other, the integer tile one group's
 * and only the float accumulators both groups'; larger tiles
 * take one half a pass (Q4_K / Q5_K two tokens, the others four), and only the
 * first pass over a group prefetches (the second rereads its lines from L1 / L2). */
#include "cpu/x86/gemm_ymm.h"
#include "cpu/x86/x86_kernels.h"

#define GEMM_SFX avx2
#define GEMM_LEGACY_NV(nt) ((nt) <= 2 ? 2 : 1)
#define GEMM_LEGACY_NS(leg, nt) ((nt) == 1 ? 2 : 1)
#define GEMM_LEGACY_TURNS(leg, nt) ((leg) == LEG_MXFP4)
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

#define GEMM_K_TOK 2
#define GEMM_K_NV(nt) ((nt) == 1 ? 2 : 1)
#define GEMM_K_NS1(kq) 2
#define GEMM_K_TURNS 1 /* a one-token tile already holds a group's two halves */
#define GEMM_K_ROLL_J(nt) ((nt) == 1)
#define GEMM_Q5_RUN 4
#define GEMM_Q5_DOUBLED 0
#define GEMM_PF_DIST_K PF_DIST
#define GEMM_PF_DIST_Q5_K PF_DIST

VT_INLINE vi vi_and(vi a, vi b) { return _mm256_and_si256(a, b); }
VT_INLINE vi vi_or(vi a, vi b) { return _mm256_or_si256(a, b); }
VT_INLINE vi vi_srl(vi a, const int n) { return _mm256_srli_epi32(a, n); }
VT_INLINE vi vi_sll(vi a, const int n) { return _mm256_slli_epi32(a, n); }
VT_INLINE vi vi_bytes(int8_t c) { return _mm256_set1_epi8(c); }
VT_INLINE vi vi_dot16(vi acc, vi a, vi b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
VT_INLINE vi run_scaled(vi run, vi sc) { return _mm256_madd_epi16(run, sc); }
VT_INLINE vf vf_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }

/* Byte j (0..3) of every 32-bit lane as the int16 pair (v, v): one pshufb. */
static const uint8_t lane_byte_ctrl[4][32] __attribute__((aligned(32))) = {
#define LBC(k) {k, 0x80, k, 0x80, 4 + k, 0x80, 4 + k, 0x80, 8 + k, 0x80, 8 + k, 0x80, 12 + k, 0x80, 12 + k, 0x80, \
                k, 0x80, k, 0x80, 4 + k, 0x80, 4 + k, 0x80, 8 + k, 0x80, 8 + k, 0x80, 12 + k, 0x80, 12 + k, 0x80}
    LBC(0), LBC(1), LBC(2), LBC(3)
#undef LBC
};
VT_INLINE vi k_scale(vi s, const int j) {
    return _mm256_shuffle_epi8(s, _mm256_load_si256((const __m256i *)lane_byte_ctrl[j]));
}
VT_INLINE vi k_min_pair(vi s, const int j) { return k_scale(s, j); }

/* Bit k (0..7) of every byte of qh at bit 4, the other bits cleared. 16-bit
 * shifts are fine: the bit that lands at bit 4 of a byte comes from the same
 * byte for shifts of at most 4. */
VT_INLINE vi q5_K_bit4(vi qh, const int k) {
    const vi s = k < 4 ? _mm256_slli_epi16(qh, 4 - k) : k > 4 ? _mm256_srli_epi16(qh, k - 4) : qh;
    return _mm256_and_si256(s, _mm256_set1_epi8(0x10));
}
VT_INLINE void q5_quants(vi raw, vi qh, const int j, vi *lo, vi *hi) {
    *lo = _mm256_or_si256(nib_lo(raw), q5_K_bit4(qh, 2 * j));
    *hi = _mm256_or_si256(nib_hi(raw), q5_K_bit4(qh, 2 * j + 1));
}

#define GEMM_Q6_TOK 4
#define GEMM_Q6_RUN(nt) ((nt) == 1 ? 2 : 1)
#define GEMM_Q6_BY_CHUNK(nt) 0

VT_INLINE vi vi_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
VT_INLINE vi vi_i8(const uint8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
/* (sc, sc) int16 pairs */
VT_INLINE vi q6_scale(const uint8_t *p) {
    const vi s = vi_i8(p);
    return _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(s, 16));
}
VT_INLINE vi q6_quants(vi ls, vi hb, const int m) {
    const vi lq = _mm256_and_si256(m < 2 ? ls : _mm256_srli_epi16(ls, 4), _mm256_set1_epi8(0x0f));
    vi hq;
    switch (m) {
    case 0: hq = _mm256_slli_epi16(hb, 4); break;
    case 1: hq = _mm256_slli_epi16(hb, 2); break;
    case 2: hq = hb; break;
    default: hq = _mm256_srli_epi16(hb, 2); break;
    }
    return _mm256_or_si256(lq, _mm256_and_si256(hq, _mm256_set1_epi8(0x30)));
}

#include "cpu/x86/gemm_impl.h"

GEMM_LEGACY(q4_0, LEG_Q4_0, , true)
GEMM_LEGACY(q8_0, LEG_Q8_0, , true)
GEMM_LEGACY(mxfp4, LEG_MXFP4, , true)
GEMM_LEGACY(q4_1, LEG_Q4_1, , true)
GEMM_LEGACY(q5_0, LEG_Q5_0, , true)
GEMM_LEGACY(q5_1, LEG_Q5_1, , true)
GEMM_LEGACY(q4_0, LEG_Q4_0, _nopf, false)
GEMM_LEGACY(q4_1, LEG_Q4_1, _nopf, false)
GEMM_LEGACY(q5_0, LEG_Q5_0, _nopf, false)
GEMM_LEGACY(q5_1, LEG_Q5_1, _nopf, false)
GEMM_LEGACY(q8_0, LEG_Q8_0, _nopf, false)
GEMM_LEGACY(mxfp4, LEG_MXFP4, _nopf, false)
GEMM_KQUANT(q4_K, KQ_Q4_K, , true)
GEMM_KQUANT(q5_K, KQ_Q5_K, , true)
GEMM_KQUANT(q6_K, KQ_Q6_K, , true)
GEMM_KQUANT(q4_K, KQ_Q4_K, _nopf, false)
GEMM_KQUANT(q5_K, KQ_Q5_K, _nopf, false)
GEMM_KQUANT(q6_K, KQ_Q6_K, _nopf, false)

