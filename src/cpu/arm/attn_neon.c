/* NEON attention kernels (see cpu/attention.h), the same design as
 * x86/attn_avx2.c: scores over dim-major float K with one (query, key) pair per
 * lane (4 query rows x 16 keys, 16 accumulators), keys past a vector's reach in
 * scalar FMAs with the same chain; accumulation over row-major V two heads at a
 * time; Q8_0 rows dequantized one at a time.
 *
 * Plain ASIMD (every aarch64 core). Stores are the activation quantizers of
 * quant_act_neon.c, which write the same bytes as the scalar stores; exp is
 * vec_neon.c's polynomial. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "cpu/attention.h"
#include "base/fp16.h"
#include "quant/blocks.h"

#include <math.h>
#include <string.h>

const attn_kv_ops *attn_ops_get_neon(vt_dtype type);

#define UNROLL _Pragma("GCC unroll 16")

/* ---- loads of 4 stored values as floats --------------------------------------------- */

VT_INLINE float32x4_t load4_f32(const float *p) { return vld1q_f32(p); }
VT_INLINE float32x4_t load4_f16(const vt_f16 *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
VT_INLINE float32x4_t load4_bf16(const vt_bf16 *p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}
VT_INLINE float load1_f32(const float *p) { return *p; }
VT_INLINE float load1_f16(const vt_f16 *p) { return f16_arm(*p); }
VT_INLINE float load1_bf16(const vt_bf16 *p) { return bf16_to_f32(*p); }

static void row_to_f32(const float *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static void row_to_f16(const float *src, vt_f16 *dst, int64_t n) { quantize_f16_neon(src, dst, n); }
static void row_to_bf16(const float *src, vt_bf16 *dst, int64_t n) { quantize_bf16_neon(src, dst, n); }

/* ---- float K and V kernels, one set per dtype ------------------------------------------ */

#define FLOAT_KERNELS(t, elem_t)                                                               \
    VT_INLINE void score_tile_##t(const elem_t *k, int64_t bs, int64_t hd, const float *q,      \
                                  const int nr, const int ng, float scale, float *s,            \
                                  int64_t s_stride, int64_t valid) {                            \
        float32x4_t a[4][4];                                                                    \
        UNROLL                                                                                  \
        for (int r = 0; r < nr; r++)                                                            \
            UNROLL                                                                              \
            for (int g = 0; g < ng; g++) a[r][g] = vdupq_n_f32(0);                              \
        for (int64_t d = 0; d < hd; d++) {                                                      \
            float32x4_t kv[4];                                                                  \
            UNROLL                                                                              \
            for (int g = 0; g < ng; g++) kv[g] = load4_##t(k + d * bs + 4 * g);                 \
            UNROLL                                                                              \
            for (int r = 0; r < nr; r++) {                                                      \
                const float qd = q[r * hd + d];                                                 \
                UNROLL                                                                          \
                for (int g = 0; g < ng; g++) a[r][g] = vfmaq_n_f32(a[r][g], kv[g], qd);         \
            }                                                                                   \
        }                                                                                       \
        UNROLL                                                                                  \
        for (int r = 0; r < nr; r++)                                                            \
            UNROLL                                                                              \
            for (int g = 0; g < ng; g++) {                                                      \
                float tmp[4];                                                                   \
                vst1q_f32(tmp, vmulq_n_f32(a[r][g], scale));                                    \
                const int64_t m = valid - 4 * g < 4 ? valid - 4 * g : 4;                        \
                for (int64_t l = 0; l < m; l++) s[r * s_stride + 4 * g + l] = tmp[l];           \
            }                                                                                   \
    }                                                                                           \
    /* All n_q query rows against ng groups of keys, 4 rows per tile. */                       \
    VT_INLINE void score_rows_##t(const elem_t *k, int64_t bs, int64_t hd, const float *q,      \
                                  int64_t n_q, const int ng, float scale, float *s,             \
                                  int64_t s_stride, int64_t valid) {                            \
        int64_t r = 0;                                                                          \
        for (; r + 4 <= n_q; r += 4)                                                            \
            score_tile_##t(k, bs, hd, q + r * hd, 4, ng, scale, s + r * s_stride, s_stride, valid); \
        for (; r < n_q; r++)                                                                    \
            score_tile_##t(k, bs, hd, q + r * hd, 1, ng, scale, s + r * s_stride, s_stride, valid); \
    }                                                                                           \
    static void store_k_##t##_neon(void *kblk, int64_t bs, int64_t slot, const float *src,      \
                                   int64_t hd) {                                                \
        elem_t row[ATTN_HEAD_DIM_MAX], *k = kblk;                                               \
        row_to_##t(src, row, hd);                                                               \
        for (int64_t d = 0; d < hd; d++) k[d * bs + slot] = row[d];                             \
    }                                                                                           \
    static void scores_##t##_neon(const void *kblk, int64_t bs, int64_t s0, int64_t n,          \
                                  const float *q, int64_t n_q, int64_t hd, float scale,         \
                                  float *s, int64_t s_stride) {                                 \
        const elem_t *kb = (const elem_t *)kblk + s0;                                           \
        const int64_t room = bs - s0; /* keys a vector may load without leaving the block */   \
        int64_t j = 0;                                                                          \
        for (; j < n && j + 16 <= room; j += 16) /* 16 keys per tile */                        \
            score_rows_##t(kb + j, bs, hd, q, n_q, 4, scale, s + j, s_stride, n - j < 16 ? n - j : 16); \
        for (; j < n && j + 4 <= room; j += 4) /* then 4 at a time */                          \
            score_rows_##t(kb + j, bs, hd, q, n_q, 1, scale, s + j, s_stride, n - j < 4 ? n - j : 4); \
        for (; j < n; j++) /* the same chain as a vector lane */                                \
            for (int64_t r = 0; r < n_q; r++) {                                                 \
                float a = 0;                                                                    \
                for (int64_t d = 0; d < hd; d++) a = fmaf(q[r * hd + d], load1_##t(kb + d * bs + j), a); \
                s[r * s_stride + j] = a * scale;                                                \
            }                                                                                   \
    }                                                                                           \
    static void store_v_##t##_neon(void *vrow, const float *src, int64_t hd) {                  \
        row_to_##t(src, vrow, hd);                                                              \
    }                                                                                           \
    static void accum_##t##_neon(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, \
                                 int64_t n, int64_t hd, const float *w, int64_t w_stride) {     \
        const elem_t *v = vrows;                                                                \
        int64_t r = 0;                                                                          \
        for (; r + 2 <= n_q; r += 2) {                                                          \
            float *aa = acc + r * acc_stride, *ab = aa + acc_stride;                            \
            const float *wa = w + r * w_stride, *wb = wa + w_stride;                            \
            int64_t i = 0;                                                                      \
            for (; i + 16 <= hd; i += 16) {                                                     \
                float32x4_t a[4], b[4];                                                         \
                UNROLL                                                                          \
                for (int c = 0; c < 4; c++) {                                                   \
                    a[c] = vld1q_f32(aa + i + 4 * c);                                           \
                    b[c] = vld1q_f32(ab + i + 4 * c);                                           \
                }                                                                               \
                for (int64_t j = 0; j < n; j++) {                                               \
                    const elem_t *vj = v + j * hd + i;                                          \
                    UNROLL                                                                      \
                    for (int c = 0; c < 4; c++) {                                               \
                        const float32x4_t vv = load4_##t(vj + 4 * c);                           \
                        a[c] = vfmaq_n_f32(a[c], vv, wa[j]);                                    \
                        b[c] = vfmaq_n_f32(b[c], vv, wb[j]);                                    \
                    }                                                                           \
                }                                                                               \
                UNROLL                                                                          \
                for (int c = 0; c < 4; c++) {                                                   \
                    vst1q_f32(aa + i + 4 * c, a[c]);                                            \
                    vst1q_f32(ab + i + 4 * c, b[c]);                                            \
                }                                                                               \
            }                                                                                   \
            for (; i + 4 <= hd; i += 4) {                                                       \
                float32x4_t a0 = vld1q_f32(aa + i), b0 = vld1q_f32(ab + i);                     \
                for (int64_t j = 0; j < n; j++) {                                               \
                    const float32x4_t vv = load4_##t(v + j * hd + i);                           \
                    a0 = vfmaq_n_f32(a0, vv, wa[j]);                                            \
                    b0 = vfmaq_n_f32(b0, vv, wb[j]);                                            \
                }                                                                               \
                vst1q_f32(aa + i, a0);                                                          \
                vst1q_f32(ab + i, b0);                                                          \
            }                                                                                   \
            for (; i < hd; i++)                                                                 \
                for (int64_t j = 0; j < n; j++) {                                               \
                    const float vv = load1_##t(v + j * hd + i);                                 \
                    aa[i] = fmaf(wa[j], vv, aa[i]);                                             \
                    ab[i] = fmaf(wb[j], vv, ab[i]);                                             \
                }                                                                               \
        }                                                                                       \
        for (; r < n_q; r++) {                                                                  \
            float *aa = acc + r * acc_stride;                                                   \
            const float *wa = w + r * w_stride;                                                 \
            int64_t i = 0;                                                                      \
            for (; i + 4 <= hd; i += 4) {                                                       \
                float32x4_t a0 = vld1q_f32(aa + i);                                             \
                for (int64_t j = 0; j < n; j++) a0 = vfmaq_n_f32(a0, load4_##t(v + j * hd + i), wa[j]); \
                vst1q_f32(aa + i, a0);                                                          \
            }                                                                                   \
            for (; i < hd; i++)                                                                 \
                for (int64_t j = 0; j < n; j++) aa[i] = fmaf(wa[j], load1_##t(v + j * hd + i), aa[i]); \
        }                                                                                       \
    }

FLOAT_KERNELS(f32, float)
FLOAT_KERNELS(f16, vt_f16)
FLOAT_KERNELS(bf16, vt_bf16)
#undef FLOAT_KERNELS

/* ---- Q8_0 (K row-major like V) ---------------------------------------------------------- */

static void q8_0_row_f32(const block_q8_0 *b, int64_t hd, float *out) {
    for (int64_t i = 0; i < hd / QK8_0; i++) {
        const float d = f16_arm(b[i].d);
        for (int j = 0; j < QK8_0; j += 16) {
            const int8x16_t q = vld1q_s8(b[i].qs + j);
            const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
            float *t = out + i * QK8_0 + j;
            vst1q_f32(t, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
            vst1q_f32(t + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), d));
            vst1q_f32(t + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
            vst1q_f32(t + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), d));
        }
    }
}

static void store_k_q8_0_neon(void *kblk, int64_t bs, int64_t slot, const float *src, int64_t hd) {
    (void)bs;
    quantize_q8_0_neon(src, (block_q8_0 *)kblk + slot * (hd / QK8_0), hd);
}
static void scores_q8_0_neon(const void *kblk, int64_t bs, int64_t s0, int64_t n, const float *q,
                             int64_t n_q, int64_t hd, float scale, float *s, int64_t s_stride) {
    (void)bs;
    float row[ATTN_HEAD_DIM_MAX];
    for (int64_t j = 0; j < n; j++) {
        q8_0_row_f32((const block_q8_0 *)kblk + (s0 + j) * (hd / QK8_0), hd, row);
        for (int64_t r = 0; r < n_q; r++) {
            float32x4_t a = vdupq_n_f32(0);
            for (int64_t i = 0; i < hd; i += 4) a = vfmaq_f32(a, vld1q_f32(q + r * hd + i), vld1q_f32(row + i));
            s[r * s_stride + j] = vaddvq_f32(a) * scale;
        }
    }
}
static void store_v_q8_0_neon(void *vrow, const float *src, int64_t hd) { quantize_q8_0_neon(src, vrow, hd); }
static void accum_q8_0_neon(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, int64_t n,
                            int64_t hd, const float *w, int64_t w_stride) {
    float row[ATTN_HEAD_DIM_MAX];
    for (int64_t j = 0; j < n; j++) {
        q8_0_row_f32((const block_q8_0 *)vrows + j * (hd / QK8_0), hd, row);
        for (int64_t r = 0; r < n_q; r++) {
            float *a = acc + r * acc_stride;
            const float x = w[r * w_stride + j];
            for (int64_t i = 0; i < hd; i += 4) vst1q_f32(a + i, vfmaq_n_f32(vld1q_f32(a + i), vld1q_f32(row + i), x));
        }
    }
}

#define NEON_OPS(t) {store_k_##t##_neon, scores_##t##_neon, store_v_##t##_neon, accum_##t##_neon, exp_sum_neon}
static const attn_kv_ops ops_f32_neon = NEON_OPS(f32);
static const attn_kv_ops ops_f16_neon = NEON_OPS(f16);
static const attn_kv_ops ops_bf16_neon = NEON_OPS(bf16);
static const attn_kv_ops ops_q8_0_neon = NEON_OPS(q8_0);
#undef NEON_OPS

/* The NEON kernels for KV rows of `type`, NULL if there are none. */
const attn_kv_ops *attn_ops_get_neon(vt_dtype type) {
    switch (type) {
    case VT_DTYPE_F32: return &ops_f32_neon;
    case VT_DTYPE_F16: return &ops_f16_neon;
    case VT_DTYPE_BF16: return &ops_bf16_neon;
    case VT_DTYPE_Q8_0: return &ops_q8_0_neon;
    default: return NULL;
    }
}
