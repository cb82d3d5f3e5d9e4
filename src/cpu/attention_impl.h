/* The SIMD attention kernels (cpu/attention.h's attn_kv_ops), the soft-cap and
 * GELU, written once over a handful of vector primitives and instantiated by
 * each ISA file (x86/attn_avx2.c, x86/attn_avx512.c, arm/attn_neon.c), the way
 * arm/dot_k_impl.h is for the K-quant dots and llamafile's tinyBLAS for GEMMs.
 * One design, so a variant or a fix lands in every tier at once.
 *
 * The including file defines, before the #include:
 *   ATTN_SFX           the tier suffix (avx2, avx512, neon): names end in _<ATTN_SFX>
 *   VL                 floats per vector
 *   vf, vm             the float vector and lane mask types
 *   vf_zero() vf_set1(x) vf_load(p) vf_store(p, v)         f32, unaligned
 *   vf_load_f16(p) vf_load_bf16(p)   VL halves / bfloat16 as floats (exact)
 *   vf_load_i8(p)                    VL int8 as floats (exact)
 *   vf_store_f16(p, v)               VL floats as halves, round to nearest even
 *   vf_fma(a, b, c)                  a * b + c, one rounding
 *   vf_add vf_sub vf_mul vf_div vf_max vf_abs, vf_copysign(mag, sgn)
 *   vf_lt(a, b) vf_le(a, b) -> vm;  vf_sel(m, a, b): lanes of m from a, else b
 *   vf_hsum(v) vf_hmax(v)            across the lanes (a fixed order per tier)
 *   vf_exp_neg(x)                    exp(x) for x <= 0 (the Cephes polynomial
 *                                    of x86/simd_avx2.h, about 1 ulp; 0 below the
 *                                    smallest normal; -inf gives 0)
 *   ATTN_F16_SCALAR(h)               one half as a float (exact)
 *   ATTN_QUANT_Q8_0(src, dst, n)     a row to Q8_0 (the bytes of quant_ref)
 * optionally vf_load_part_f32 / _f16 / _bf16(p, nl), vf_store_part(p, v, nl):
 * the first nl < VL lanes, the others 0 and never touched (AVX-512 masks);
 * without them a copy through a stack vector does the same;
 * and the shapes of the register tiles (how many of the ISA's registers they
 * fill is the only thing that differs between tiers):
 *   ATTN_TR, ATTN_TG   score tile: query rows x vectors of keys (TG * VL == 16)
 *   ATTN_SPLIT         1 or 2 FMA chains per score, over the first and second
 *                      half of the head dimensions, summed at the end (2 where
 *                      a tile has too few independent chains to hide FMA latency)
 *   ATTN_AR, ATTN_AG   accumulation tile: query rows x vectors of output
 *
 * Scores (float K, dim-major): a vector holds dimension d of VL consecutive keys,
 * so each lane is the FMA chain (or ATTN_SPLIT chains) over d of one (query, key)
 * pair, scaled at the end. Keys past the last full vector a block holds load as a
 * partial vector through the same chain, so a score's bits never depend on which
 * other keys or query rows share the call, nor on the tile that computed it
 * (attn_partial relies on it). Items of several tokens (more than 4 query rows)
 * widen each F16/BF16 tile of keys to f32 once and run the f32 tile on it: the
 * same values, so the same bits.
 *
 * Accumulation (V row-major): ATTN_AR query rows x ATTN_AG vectors of output in
 * registers across the rows of the piece, each V load feeding every row; each
 * output is the FMA chain over the rows j ascending. V is widened as it loads,
 * also for items of several tokens (widening 16 rows first for all the query
 * rows, as K, was slower on AVX2 and no faster on AVX-512).
 *
 * Q8_0 rows (K and V row-major) are dequantized one row at a time.
 *
 * exp_sum: the max in four vector chains, then vf_exp_neg on every score (the
 * tail as a partial vector padded with -inf, which gives 0), summed per lane and
 * reduced once. softcap: cap * tanh(s / cap) with vf_tanh (Cephes' tanhf: an odd
 * polynomial below |x| 0.625, (1 - e) / (1 + e) with e = exp(-2|x|) above; about
 * 2 ulp). gelu_mul: ggml's f16 table (cpu_gelu_table), converted and clamped in
 * vectors, looked up lane by lane: the bits of gelu_mul_ref. */
#include "base/fp16.h"
#include "cpu/attention.h"
#include "cpu/kernels.h"
#include "cpu/unroll.h"
#include "quant/blocks.h"

#include <math.h>
#include <string.h>

#if !defined(ATTN_SFX) || !defined(VL) || !defined(ATTN_TR) || !defined(ATTN_TG) || !defined(ATTN_SPLIT) || \
    !defined(ATTN_AR) || !defined(ATTN_AG)
#error "define ATTN_SFX, VL and the tile shapes before including attention_impl.h"
#endif
_Static_assert(ATTN_TG * VL == 16, "a score tile is 16 keys");
_Static_assert(ATTN_SPLIT == 1 || ATTN_SPLIT == 2, "one or two chains per score");

#define ATTN_CAT_(a, b) a##_##b
#define ATTN_CAT(a, b) ATTN_CAT_(a, b)
#define ATTN_FN(name) ATTN_CAT(name, ATTN_SFX)
#define ATTN_UNROLL VT_UNROLL(16)

/* Keys a score tile covers, and the widened tile's stride. */
#define ATTN_TW 16

/* The stored float types, a constant argument of the always-inlined kernels. */
enum { KV_F32, KV_F16, KV_BF16 };

/* ---- loads of stored rows as floats -------------------------------------------------- */

VT_INLINE vf kv_load(const void *p, int64_t i, const int t) {
    switch (t) {
    case KV_F16: return vf_load_f16((const vt_f16 *)p + i);
    case KV_BF16: return vf_load_bf16((const vt_bf16 *)p + i);
    default: return vf_load((const float *)p + i);
    }
}

/* The first nl (0 < nl < VL) values at element i, the other lanes 0. */
VT_INLINE vf kv_load_part(const void *p, int64_t i, int64_t nl, const int t) {
#if defined(vf_load_part_f32)
    switch (t) {
    case KV_F16: return vf_load_part_f16((const vt_f16 *)p + i, nl);
    case KV_BF16: return vf_load_part_bf16((const vt_bf16 *)p + i, nl);
    default: return vf_load_part_f32((const float *)p + i, nl);
    }
#else
    if (t == KV_F32) {
        float tmp[VL] = {0};
        memcpy(tmp, (const float *)p + i, sizeof(float) * (size_t)nl);
        return vf_load(tmp);
    }
    uint16_t tmp[VL] = {0};
    memcpy(tmp, (const uint16_t *)p + i, sizeof(uint16_t) * (size_t)nl);
    return t == KV_F16 ? vf_load_f16(tmp) : vf_load_bf16(tmp);
#endif
}

/* Store the first nl (0 < nl <= VL) lanes of v at p. */
VT_INLINE void kv_store_lanes(float *p, vf v, int64_t nl) {
    if (nl >= VL) {
        vf_store(p, v);
        return;
    }
#if defined(vf_store_part)
    vf_store_part(p, v, nl);
#else
    float tmp[VL];
    vf_store(tmp, v);
    memcpy(p, tmp, sizeof(float) * (size_t)nl);
#endif
}

VT_INLINE float kv_load1(const void *p, int64_t i, const int t) {
    switch (t) {
    case KV_F16: return ATTN_F16_SCALAR(((const vt_f16 *)p)[i]);
    case KV_BF16: return bf16_to_f32(((const vt_bf16 *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

/* ---- rows to the stored types ----------------------------------------------------------- */

static void row_to_f16(const float *src, vt_f16 *dst, int64_t n) {
    int64_t i = 0;
    for (; i + VL <= n; i += VL) vf_store_f16(dst + i, vf_load(src + i));
    for (; i < n; i++) dst[i] = f32_to_f16(src[i]);
}

/* K (dim-major): the row converted, then scattered with stride bs. */
VT_INLINE void store_k_float(void *kblk, int64_t bs, int64_t slot, const float *src, int64_t hd, const int t) {
    if (t == KV_F32) {
        float *k = kblk;
        for (int64_t d = 0; d < hd; d++) k[d * bs + slot] = src[d];
        return;
    }
    uint16_t row[ATTN_HEAD_DIM_MAX], *k = kblk;
    if (t == KV_F16)
        row_to_f16(src, row, hd);
    else
        for (int64_t d = 0; d < hd; d++) row[d] = f32_to_bf16(src[d]);
    for (int64_t d = 0; d < hd; d++) k[d * bs + slot] = row[d];
}

VT_INLINE void store_v_float(void *vrow, const float *src, int64_t hd, const int t) {
    if (t == KV_F32)
        memcpy(vrow, src, sizeof(float) * (size_t)hd);
    else if (t == KV_F16)
        row_to_f16(src, vrow, hd);
    else
        for (int64_t d = 0; d < hd; d++) ((vt_bf16 *)vrow)[d] = f32_to_bf16(src[d]);
}

/* ---- scores over dim-major float K -------------------------------------------------------- */

/* Scores of nr query rows (q, rows hd apart) against ng vectors of keys whose
 * dimension d is at element k0 + d * bs (+ g * VL) of k; with `part` the last
 * vector holds only nl keys (the rest 0). Writes the first `valid` keys of each
 * row to s (rows s_stride apart). */
VT_INLINE void score_tile(const void *k, int64_t k0, int64_t bs, int64_t hd, const float *q, const int nr,
                          const int ng, const int part, int64_t nl, float scale, float *s, int64_t s_stride,
                          int64_t valid, const int t) {
    vf a[ATTN_SPLIT][ATTN_TR][ATTN_TG];
    ATTN_UNROLL
    for (int c = 0; c < ATTN_SPLIT; c++)
        ATTN_UNROLL
        for (int r = 0; r < nr; r++)
            ATTN_UNROLL
            for (int g = 0; g < ng; g++) a[c][r][g] = vf_zero();
    const int64_t h = hd / ATTN_SPLIT;
    for (int64_t d = 0; d < h; d++) {
        vf kv[ATTN_SPLIT][ATTN_TG];
        ATTN_UNROLL
        for (int c = 0; c < ATTN_SPLIT; c++)
            ATTN_UNROLL
            for (int g = 0; g < ng; g++) {
                const int64_t at = k0 + (d + c * h) * bs + g * VL;
                kv[c][g] = part && g == ng - 1 ? kv_load_part(k, at, nl, t) : kv_load(k, at, t);
            }
        ATTN_UNROLL
        for (int r = 0; r < nr; r++)
            ATTN_UNROLL
            for (int c = 0; c < ATTN_SPLIT; c++) {
                const vf qb = vf_set1(q[r * hd + d + c * h]);
                ATTN_UNROLL
                for (int g = 0; g < ng; g++) a[c][r][g] = vf_fma(qb, kv[c][g], a[c][r][g]);
            }
    }
    /* an odd head size's last dimension ends the last chain */
    for (int64_t d = ATTN_SPLIT * h; d < hd; d++) {
        vf kv[ATTN_TG];
        ATTN_UNROLL
        for (int g = 0; g < ng; g++) {
            const int64_t at = k0 + d * bs + g * VL;
            kv[g] = part && g == ng - 1 ? kv_load_part(k, at, nl, t) : kv_load(k, at, t);
        }
        ATTN_UNROLL
        for (int r = 0; r < nr; r++) {
            const vf qb = vf_set1(q[r * hd + d]);
            ATTN_UNROLL
            for (int g = 0; g < ng; g++) a[ATTN_SPLIT - 1][r][g] = vf_fma(qb, kv[g], a[ATTN_SPLIT - 1][r][g]);
        }
    }
    const vf sc = vf_set1(scale);
    ATTN_UNROLL
    for (int r = 0; r < nr; r++)
        ATTN_UNROLL
        for (int g = 0; g < ng; g++) {
            if (valid <= g * VL) break;
            const vf sum = ATTN_SPLIT == 2 ? vf_add(a[0][r][g], a[ATTN_SPLIT - 1][r][g]) : a[0][r][g];
            kv_store_lanes(s + r * s_stride + g * VL, vf_mul(sum, sc), valid - g * VL);
        }
}

/* All n_q rows: tiles of ATTN_TR rows, then 4, then 1. */
VT_INLINE void score_rows(const void *k, int64_t k0, int64_t bs, int64_t hd, const float *q, int64_t n_q,
                          const int ng, const int part, int64_t nl, float scale, float *s, int64_t s_stride,
                          int64_t valid, const int t) {
    int64_t r = 0;
    for (; r + ATTN_TR <= n_q; r += ATTN_TR)
        score_tile(k, k0, bs, hd, q + r * hd, ATTN_TR, ng, part, nl, scale, s + r * s_stride, s_stride, valid, t);
    if (ATTN_TR > 4)
        for (; r + 4 <= n_q; r += 4)
            score_tile(k, k0, bs, hd, q + r * hd, 4 < ATTN_TR ? 4 : ATTN_TR, ng, part, nl, scale, s + r * s_stride,
                       s_stride, valid, t);
    for (; r < n_q; r++)
        score_tile(k, k0, bs, hd, q + r * hd, 1, ng, part, nl, scale, s + r * s_stride, s_stride, valid, t);
}

/* `call` with HD the head size, a constant for the common ones: the query rows
 * of a tile are then fixed offsets from one pointer, not a register each. */
#define ATTN_WITH_HD(hd, call)                                                                 \
    do {                                                                                       \
        if ((hd) == 64) {                                                                      \
            const int64_t HD = 64;                                                             \
            call;                                                                              \
        } else if ((hd) == 128) {                                                              \
            const int64_t HD = 128;                                                            \
            call;                                                                              \
        } else {                                                                               \
            const int64_t HD = (hd);                                                           \
            call;                                                                              \
        }                                                                                      \
    } while (0)

/* The keys [j, j + nk) (nk <= 16) of kb (dim d at kb + d * bs) as f32 into kf
 * (dim d at kf + d * 16); keys past nk are 0. */
VT_INLINE void widen_keys(const void *kb, int64_t k0, int64_t bs, int64_t hd, int64_t nk, float *kf, const int t) {
    if (nk == ATTN_TW) {
        for (int64_t d = 0; d < hd; d++)
            ATTN_UNROLL
            for (int g = 0; g < ATTN_TG; g++) vf_store(kf + d * ATTN_TW + g * VL, kv_load(kb, k0 + d * bs + g * VL, t));
        return;
    }
    for (int64_t d = 0; d < hd; d++) {
        int64_t l = 0;
        for (; l < nk; l++) kf[d * ATTN_TW + l] = kv_load1(kb, k0 + d * bs + l, t);
        for (; l < ATTN_TW; l++) kf[d * ATTN_TW + l] = 0;
    }
}

VT_INLINE void scores_float(const void *kblk, int64_t bs, int64_t s0, int64_t n, const float *q, int64_t n_q,
                            int64_t hd, float scale, float *s, int64_t s_stride, const int t) {
    const int64_t room = bs - s0; /* keys a vector may load without leaving the block */
    int64_t j = 0;
    if (t != KV_F32 && n_q > 4) { /* widen 16 keys once for all the rows */
        _Alignas(64) float kf[ATTN_HEAD_DIM_MAX * ATTN_TW];
        for (; j < n; j += ATTN_TW) {
            const int64_t nk = n - j < ATTN_TW ? n - j : ATTN_TW;
            widen_keys(kblk, s0 + j, bs, hd, j + ATTN_TW <= room ? ATTN_TW : nk, kf, t);
            ATTN_WITH_HD(hd, score_rows(kf, 0, ATTN_TW, HD, q, n_q, ATTN_TG, 0, 0, scale, s + j, s_stride, nk,
                                        KV_F32));
        }
        return;
    }
    for (; j < n && j + ATTN_TW <= room && n - j > ATTN_TW - VL; j += ATTN_TW) {
        const int64_t valid = n - j < ATTN_TW ? n - j : ATTN_TW;
        ATTN_WITH_HD(hd, score_rows(kblk, s0 + j, bs, HD, q, n_q, ATTN_TG, 0, 0, scale, s + j, s_stride, valid, t));
    }
    for (; j < n && j + VL <= room; j += VL) {
        const int64_t valid = n - j < VL ? n - j : VL;
        ATTN_WITH_HD(hd, score_rows(kblk, s0 + j, bs, HD, q, n_q, 1, 0, 0, scale, s + j, s_stride, valid, t));
    }
    if (j < n) /* fewer than VL keys left in the block: one partial vector */
        ATTN_WITH_HD(hd, score_rows(kblk, s0 + j, bs, HD, q, n_q, 1, 1, n - j, scale, s + j, s_stride, n - j, t));
}

/* ---- accumulation over row-major V ------------------------------------------------------- */

/* acc_r[0 .. ng VL) += sum over j ascending of w_r[j] * v_j[0 .. ng VL), r < nr,
 * v_j at element v0 + j * hd of v; with `part` the last vector is nl lanes. */
VT_INLINE void accum_tile(float *acc, int64_t acc_stride, const int nr, const void *v, int64_t v0, int64_t hd,
                          int64_t n, const float *w, int64_t w_stride, const int ng, const int part, int64_t nl,
                          const int t) {
    vf a[ATTN_AR][ATTN_AG];
    ATTN_UNROLL
    for (int r = 0; r < nr; r++)
        ATTN_UNROLL
        for (int g = 0; g < ng; g++)
            a[r][g] = part && g == ng - 1 ? kv_load_part(acc + r * acc_stride, g * VL, nl, KV_F32)
                                          : vf_load(acc + r * acc_stride + g * VL);
    for (int64_t j = 0; j < n; j++) {
        vf vv[ATTN_AG];
        ATTN_UNROLL
        for (int g = 0; g < ng; g++) {
            const int64_t at = v0 + j * hd + g * VL;
            vv[g] = part && g == ng - 1 ? kv_load_part(v, at, nl, t) : kv_load(v, at, t);
        }
        ATTN_UNROLL
        for (int r = 0; r < nr; r++) {
            const vf x = vf_set1(w[r * w_stride + j]);
            ATTN_UNROLL
            for (int g = 0; g < ng; g++) a[r][g] = vf_fma(x, vv[g], a[r][g]);
        }
    }
    ATTN_UNROLL
    for (int r = 0; r < nr; r++)
        ATTN_UNROLL
        for (int g = 0; g < ng; g++)
            kv_store_lanes(acc + r * acc_stride + g * VL, a[r][g], part && g == ng - 1 ? nl : VL);
}

/* The rows of one column slice: tiles of ATTN_AR rows, then 1. */
VT_INLINE void accum_slice(float *acc, int64_t acc_stride, int64_t n_q, const void *v, int64_t v0, int64_t hd,
                           int64_t n, const float *w, int64_t w_stride, const int ng, const int part, int64_t nl,
                           const int t) {
    int64_t r = 0;
    for (; r + ATTN_AR <= n_q; r += ATTN_AR)
        accum_tile(acc + r * acc_stride, acc_stride, ATTN_AR, v, v0, hd, n, w + r * w_stride, w_stride, ng, part, nl,
                   t);
    for (; r < n_q; r++)
        accum_tile(acc + r * acc_stride, acc_stride, 1, v, v0, hd, n, w + r * w_stride, w_stride, ng, part, nl, t);
}

VT_INLINE void accum_float(float *acc, int64_t acc_stride, int64_t n_q, const void *v, int64_t n, int64_t hd,
                           const float *w, int64_t w_stride, const int t) {
    int64_t i = 0;
    for (; i + ATTN_AG * VL <= hd; i += ATTN_AG * VL)
        accum_slice(acc + i, acc_stride, n_q, v, i, hd, n, w, w_stride, ATTN_AG, 0, 0, t);
    for (; i + VL <= hd; i += VL) accum_slice(acc + i, acc_stride, n_q, v, i, hd, n, w, w_stride, 1, 0, 0, t);
    if (i < hd) accum_slice(acc + i, acc_stride, n_q, v, i, hd, n, w, w_stride, 1, 1, hd - i, t);
}

/* ---- the float types' tables -------------------------------------------------------------- */

static void ATTN_FN(store_k_f32)(void *kblk, int64_t bs, int64_t slot, const float *src, int64_t hd) {
    store_k_float(kblk, bs, slot, src, hd, KV_F32);
}
static void ATTN_FN(store_k_f16)(void *kblk, int64_t bs, int64_t slot, const float *src, int64_t hd) {
    store_k_float(kblk, bs, slot, src, hd, KV_F16);
}
static void ATTN_FN(store_k_bf16)(void *kblk, int64_t bs, int64_t slot, const float *src, int64_t hd) {
    store_k_float(kblk, bs, slot, src, hd, KV_BF16);
}
static void ATTN_FN(store_v_f32)(void *vrow, const float *src, int64_t hd) { store_v_float(vrow, src, hd, KV_F32); }
static void ATTN_FN(store_v_f16)(void *vrow, const float *src, int64_t hd) { store_v_float(vrow, src, hd, KV_F16); }
static void ATTN_FN(store_v_bf16)(void *vrow, const float *src, int64_t hd) {
    store_v_float(vrow, src, hd, KV_BF16);
}
static void ATTN_FN(scores_f32)(const void *kblk, int64_t bs, int64_t s0, int64_t n, const float *q, int64_t n_q,
                                int64_t hd, float scale, float *s, int64_t s_stride) {
    scores_float(kblk, bs, s0, n, q, n_q, hd, scale, s, s_stride, KV_F32);
}
static void ATTN_FN(scores_f16)(const void *kblk, int64_t bs, int64_t s0, int64_t n, const float *q, int64_t n_q,
                                int64_t hd, float scale, float *s, int64_t s_stride) {
    scores_float(kblk, bs, s0, n, q, n_q, hd, scale, s, s_stride, KV_F16);
}
static void ATTN_FN(scores_bf16)(const void *kblk, int64_t bs, int64_t s0, int64_t n, const float *q, int64_t n_q,
                                 int64_t hd, float scale, float *s, int64_t s_stride) {
    scores_float(kblk, bs, s0, n, q, n_q, hd, scale, s, s_stride, KV_BF16);
}
static void ATTN_FN(accum_f32)(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, int64_t n,
                               int64_t hd, const float *w, int64_t w_stride) {
    accum_float(acc, acc_stride, n_q, vrows, n, hd, w, w_stride, KV_F32);
}
static void ATTN_FN(accum_f16)(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, int64_t n,
                               int64_t hd, const float *w, int64_t w_stride) {
    accum_float(acc, acc_stride, n_q, vrows, n, hd, w, w_stride, KV_F16);
}
static void ATTN_FN(accum_bf16)(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, int64_t n,
                                int64_t hd, const float *w, int64_t w_stride) {
    accum_float(acc, acc_stride, n_q, vrows, n, hd, w, w_stride, KV_BF16);
}

/* ---- Q8_0 (K row-major like V; kv_cache_init requires hd % 32 == 0) ----------------------- */

VT_INLINE void q8_0_row_f32(const block_q8_0 *b, int64_t hd, float *out) {
    for (int64_t i = 0; i < hd / QK8_0; i++) {
        const vf d = vf_set1(ATTN_F16_SCALAR(b[i].d));
        ATTN_UNROLL
        for (int j = 0; j < QK8_0; j += VL) vf_store(out + i * QK8_0 + j, vf_mul(d, vf_load_i8(b[i].qs + j)));
    }
}

static void ATTN_FN(store_k_q8_0)(void *kblk, int64_t bs, int64_t slot, const float *src, int64_t hd) {
    (void)bs;
    ATTN_QUANT_Q8_0(src, (block_q8_0 *)kblk + slot * (hd / QK8_0), hd);
}
static void ATTN_FN(store_v_q8_0)(void *vrow, const float *src, int64_t hd) { ATTN_QUANT_Q8_0(src, vrow, hd); }
static void ATTN_FN(scores_q8_0)(const void *kblk, int64_t bs, int64_t s0, int64_t n, const float *q, int64_t n_q,
                                 int64_t hd, float scale, float *s, int64_t s_stride) {
    (void)bs;
    float row[ATTN_HEAD_DIM_MAX];
    for (int64_t j = 0; j < n; j++) {
        q8_0_row_f32((const block_q8_0 *)kblk + (s0 + j) * (hd / QK8_0), hd, row);
        for (int64_t r = 0; r < n_q; r++) {
            vf a = vf_zero();
            for (int64_t i = 0; i < hd; i += VL) a = vf_fma(vf_load(q + r * hd + i), vf_load(row + i), a);
            s[r * s_stride + j] = vf_hsum(a) * scale;
        }
    }
}
static void ATTN_FN(accum_q8_0)(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, int64_t n,
                                int64_t hd, const float *w, int64_t w_stride) {
    float row[ATTN_HEAD_DIM_MAX];
    for (int64_t j = 0; j < n; j++) {
        q8_0_row_f32((const block_q8_0 *)vrows + j * (hd / QK8_0), hd, row);
        for (int64_t r = 0; r < n_q; r++) {
            float *a = acc + r * acc_stride;
            const vf x = vf_set1(w[r * w_stride + j]);
            for (int64_t i = 0; i < hd; i += VL) vf_store(a + i, vf_fma(x, vf_load(row + i), vf_load(a + i)));
        }
    }
}

/* ---- softmax, soft-cap, GELU ---------------------------------------------------------------- */

static float ATTN_FN(exp_sum)(float *s, int64_t n, float *m_out) {
    vf mx[4];
    ATTN_UNROLL
    for (int c = 0; c < 4; c++) mx[c] = vf_set1(-INFINITY);
    int64_t j = 0;
    for (; j + 4 * VL <= n; j += 4 * VL)
        ATTN_UNROLL
        for (int c = 0; c < 4; c++) mx[c] = vf_max(mx[c], vf_load(s + j + c * VL));
    for (; j + VL <= n; j += VL) mx[0] = vf_max(mx[0], vf_load(s + j));
    float m = vf_hmax(vf_max(vf_max(mx[0], mx[1]), vf_max(mx[2], mx[3])));
    for (; j < n; j++) m = s[j] > m ? s[j] : m;
    *m_out = m;

    const vf mv = vf_set1(m);
    vf acc = vf_zero();
    for (j = 0; j + VL <= n; j += VL) {
        const vf e = vf_exp_neg(vf_sub(vf_load(s + j), mv));
        vf_store(s + j, e);
        acc = vf_add(acc, e);
    }
    if (j < n) { /* the tail padded with -inf, whose exp is 0 */
        float tmp[VL];
        for (int l = 0; l < VL; l++) tmp[l] = j + l < n ? s[j + l] : -INFINITY;
        const vf e = vf_exp_neg(vf_sub(vf_load(tmp), mv));
        vf_store(tmp, e);
        memcpy(s + j, tmp, sizeof(float) * (size_t)(n - j));
        acc = vf_add(acc, e);
    }
    return vf_hsum(acc);
}

/* tanh(x), Cephes' tanhf on VL lanes. */
VT_INLINE vf vf_tanh(vf x) {
    const vf ax = vf_abs(x);
    /* |x| >= 0.625: 1 - 2 / (exp(2|x|) + 1) = (1 - e) / (1 + e), e = exp(-2|x|) */
    const vf e = vf_exp_neg(vf_mul(ax, vf_set1(-2.0f)));
    const vf one = vf_set1(1.0f);
    const vf big = vf_div(vf_sub(one, e), vf_add(one, e));
    /* below: x + x^3 P(x^2) */
    const vf z = vf_mul(x, x);
    vf p = vf_set1(-5.70498872745e-3f);
    p = vf_fma(p, z, vf_set1(2.06390887954e-2f));
    p = vf_fma(p, z, vf_set1(-5.37397155531e-2f));
    p = vf_fma(p, z, vf_set1(1.33314422036e-1f));
    p = vf_fma(p, z, vf_set1(-3.33332819422e-1f));
    const vf small = vf_fma(vf_mul(p, z), ax, ax);
    return vf_copysign(vf_sel(vf_lt(ax, vf_set1(0.625f)), small, big), x);
}

/* s[i] = cap * tanh(s[i] / cap) (attn_softcap_ref's contract). */
void ATTN_FN(attn_softcap)(float *s, int64_t n, float cap) {
    const vf c = vf_set1(cap), inv = vf_set1(1.0f / cap);
    int64_t i = 0;
    for (; i + VL <= n; i += VL) vf_store(s + i, vf_mul(c, vf_tanh(vf_mul(vf_load(s + i), inv))));
    if (i < n) {
        float tmp[VL] = {0};
        memcpy(tmp, s + i, sizeof(float) * (size_t)(n - i));
        vf_store(tmp, vf_mul(c, vf_tanh(vf_mul(vf_load(tmp), inv))));
        memcpy(s + i, tmp, sizeof(float) * (size_t)(n - i));
    }
}

/* g[i] = gelu(g[i]) * u[i] through ggml's f16 table, as gelu_mul_ref, bit for bit:
 * 0 at or below -10, x * u at or above 10. */
VT_INLINE vf gelu_mul_vec(vf x, vf u) {
    vt_f16 h[VL], y[VL];
    vf_store_f16(h, x);
    for (int l = 0; l < VL; l++) y[l] = cpu_gelu_table[h[l]];
    const vf r = vf_mul(vf_load_f16(y), u);
    const vf hi = vf_sel(vf_le(vf_set1(10.0f), x), vf_mul(x, u), r);
    return vf_sel(vf_le(x, vf_set1(-10.0f)), vf_zero(), hi);
}

void ATTN_FN(gelu_mul)(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + VL <= n; i += VL) vf_store(g + i, gelu_mul_vec(vf_load(g + i), vf_load(u + i)));
    if (i < n) {
        float tg[VL] = {0}, tu[VL] = {0};
        memcpy(tg, g + i, sizeof(float) * (size_t)(n - i));
        memcpy(tu, u + i, sizeof(float) * (size_t)(n - i));
        vf_store(tg, gelu_mul_vec(vf_load(tg), vf_load(tu)));
        memcpy(g + i, tg, sizeof(float) * (size_t)(n - i));
    }
}

/* ---- the tables ------------------------------------------------------------------------------- */

#define ATTN_OPS(t)                                                                            \
    {.store_k = ATTN_FN(store_k_##t), .scores = ATTN_FN(scores_##t), .store_v = ATTN_FN(store_v_##t), \
     .accum = ATTN_FN(accum_##t), .exp_sum = ATTN_FN(exp_sum), .softcap = ATTN_FN(attn_softcap)}
static const attn_kv_ops ATTN_FN(ops_f32) = ATTN_OPS(f32);
static const attn_kv_ops ATTN_FN(ops_f16) = ATTN_OPS(f16);
static const attn_kv_ops ATTN_FN(ops_bf16) = ATTN_OPS(bf16);
static const attn_kv_ops ATTN_FN(ops_q8_0) = ATTN_OPS(q8_0);
#undef ATTN_OPS

/* This tier's kernels for KV rows of `type`, NULL if it has none. */
const attn_kv_ops *ATTN_FN(attn_ops_get)(vt_dtype type) {
    switch (type) {
    case VT_DTYPE_F32: return &ATTN_FN(ops_f32);
    case VT_DTYPE_F16: return &ATTN_FN(ops_f16);
    case VT_DTYPE_BF16: return &ATTN_FN(ops_bf16);
    case VT_DTYPE_Q8_0: return &ATTN_FN(ops_q8_0);
    default: return NULL;
    }
}
