/* NEON attention kernels (see cpu/attention.h): stored rows widened to f32
 * tiles, scores and accumulation on the tiles, two query heads at a time so
 * each K or V load feeds two FMAs.
 *
 * Plain ASIMD (every aarch64 core). Stores are the activation quantizers of
 * quant_act_neon.c, which write the same bytes as the scalar stores; exp keeps
 * the scalar kernel. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "cpu/attention.h"
#include "base/fp16.h"
#include "quant/blocks.h"

#include <math.h>
#include <string.h>

const attn_kv_ops *attn_ops_get_neon(vt_dtype type);

/* ---- rows and stores per dtype ---------------------------------------------------- */

static const float *rows_f32_neon(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    (void)n_rows, (void)hd, (void)tile;
    return src;
}
static void store_f32_neon(void *dst, const float *src, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static const float *rows_f16_neon(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    const vt_f16 *h = src;
    const int64_t n = n_rows * hd;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t x = vreinterpretq_f16_u16(vld1q_u16(h + i));
        vst1q_f32(tile + i, vcvt_f32_f16(vget_low_f16(x)));
        vst1q_f32(tile + i + 4, vcvt_high_f32_f16(x));
    }
    for (; i < n; i++) tile[i] = f16_arm(h[i]);
    return tile;
}
static void store_f16_neon(void *dst, const float *src, int64_t n) { quantize_f16_neon(src, dst, n); }

static const float *rows_bf16_neon(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    const vt_bf16 *h = src;
    const int64_t n = n_rows * hd;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t x = vld1q_u16(h + i);
        vst1q_f32(tile + i, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(x), 16)));
        vst1q_f32(tile + i + 4, vreinterpretq_f32_u32(vshll_high_n_u16(x, 16)));
    }
    for (; i < n; i++) tile[i] = bf16_to_f32(h[i]);
    return tile;
}
static void store_bf16_neon(void *dst, const float *src, int64_t n) { quantize_bf16_neon(src, dst, n); }

static const float *rows_q8_0_neon(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    const block_q8_0 *b = src;
    for (int64_t i = 0; i < n_rows * hd / QK8_0; i++) {
        const float d = f16_arm(b[i].d);
        for (int j = 0; j < QK8_0; j += 16) {
            const int8x16_t q = vld1q_s8(b[i].qs + j);
            const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
            float *t = tile + i * QK8_0 + j;
            vst1q_f32(t, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
            vst1q_f32(t + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), d));
            vst1q_f32(t + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
            vst1q_f32(t + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), d));
        }
    }
    return tile;
}
static void store_q8_0_neon(void *dst, const float *src, int64_t n) { quantize_q8_0_neon(src, dst, n); }

/* ---- f32 tile kernels ------------------------------------------------------------- */

/* The four sums of a..d, in lanes 0..3. */
VT_INLINE float32x4_t hsum_f32x4x4(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t d) {
    return vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d));
}

/* Four rows of k against the query rows qa and qb (qb may equal qa). */
VT_INLINE void scores4(const float *qa, const float *qb, const float *k, int64_t hd, float scale,
                       float *sa, float *sb) {
    const float *k0 = k, *k1 = k + hd, *k2 = k + 2 * hd, *k3 = k + 3 * hd;
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 4 <= hd; i += 4) {
        const float32x4_t x = vld1q_f32(qa + i), y = vld1q_f32(qb + i);
        const float32x4_t r0 = vld1q_f32(k0 + i), r1 = vld1q_f32(k1 + i), r2 = vld1q_f32(k2 + i),
                          r3 = vld1q_f32(k3 + i);
        a0 = vfmaq_f32(a0, x, r0);
        a1 = vfmaq_f32(a1, x, r1);
        a2 = vfmaq_f32(a2, x, r2);
        a3 = vfmaq_f32(a3, x, r3);
        b0 = vfmaq_f32(b0, y, r0);
        b1 = vfmaq_f32(b1, y, r1);
        b2 = vfmaq_f32(b2, y, r2);
        b3 = vfmaq_f32(b3, y, r3);
    }
    float ta[4], tb[4];
    vst1q_f32(ta, hsum_f32x4x4(a0, a1, a2, a3));
    vst1q_f32(tb, hsum_f32x4x4(b0, b1, b2, b3));
    for (; i < hd; i++)
        for (int j = 0; j < 4; j++) {
            ta[j] += qa[i] * k[j * hd + i];
            tb[j] += qb[i] * k[j * hd + i];
        }
    for (int j = 0; j < 4; j++) {
        sa[j] = ta[j] * scale;
        sb[j] = tb[j] * scale;
    }
}

VT_INLINE float dot1(const float *q, const float *k, int64_t hd) {
    float32x4_t a = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 4 <= hd; i += 4) a = vfmaq_f32(a, vld1q_f32(q + i), vld1q_f32(k + i));
    float s = vaddvq_f32(a);
    for (; i < hd; i++) s += q[i] * k[i];
    return s;
}

static void scores_neon(const float *q, int64_t n_q, const float *k, int64_t n_k, int64_t hd,
                        float scale, float *s, int64_t s_stride) {
    for (int64_t r = 0; r < n_q; r += 2) {
        const int64_t rb = r + 1 < n_q ? r + 1 : r; /* odd n_q: the last head twice */
        const float *qa = q + r * hd, *qb = q + rb * hd;
        float *sa = s + r * s_stride, *sb = s + rb * s_stride;
        int64_t j = 0;
        for (; j + 4 <= n_k; j += 4) scores4(qa, qb, k + j * hd, hd, scale, sa + j, sb + j);
        for (; j < n_k; j++) {
            sa[j] = dot1(qa, k + j * hd, hd) * scale;
            sb[j] = dot1(qb, k + j * hd, hd) * scale;
        }
    }
}

static void accum_neon(float *acc, int64_t acc_stride, int64_t n_q, const float *v, int64_t n_k,
                       int64_t hd, const float *w, int64_t w_stride) {
    int64_t r = 0;
    for (; r + 2 <= n_q; r += 2) {
        float *aa = acc + r * acc_stride, *ab = aa + acc_stride;
        const float *wa = w + r * w_stride, *wb = wa + w_stride;
        int64_t i = 0;
        for (; i + 16 <= hd; i += 16) {
            float32x4_t a0 = vld1q_f32(aa + i), a1 = vld1q_f32(aa + i + 4), a2 = vld1q_f32(aa + i + 8),
                        a3 = vld1q_f32(aa + i + 12);
            float32x4_t b0 = vld1q_f32(ab + i), b1 = vld1q_f32(ab + i + 4), b2 = vld1q_f32(ab + i + 8),
                        b3 = vld1q_f32(ab + i + 12);
            for (int64_t j = 0; j < n_k; j++) {
                const float *vj = v + j * hd + i;
                const float x = wa[j], y = wb[j];
                const float32x4_t v0 = vld1q_f32(vj), v1 = vld1q_f32(vj + 4), v2 = vld1q_f32(vj + 8),
                                  v3 = vld1q_f32(vj + 12);
                a0 = vfmaq_n_f32(a0, v0, x);
                a1 = vfmaq_n_f32(a1, v1, x);
                a2 = vfmaq_n_f32(a2, v2, x);
                a3 = vfmaq_n_f32(a3, v3, x);
                b0 = vfmaq_n_f32(b0, v0, y);
                b1 = vfmaq_n_f32(b1, v1, y);
                b2 = vfmaq_n_f32(b2, v2, y);
                b3 = vfmaq_n_f32(b3, v3, y);
            }
            vst1q_f32(aa + i, a0);
            vst1q_f32(aa + i + 4, a1);
            vst1q_f32(aa + i + 8, a2);
            vst1q_f32(aa + i + 12, a3);
            vst1q_f32(ab + i, b0);
            vst1q_f32(ab + i + 4, b1);
            vst1q_f32(ab + i + 8, b2);
            vst1q_f32(ab + i + 12, b3);
        }
        for (; i + 4 <= hd; i += 4) {
            float32x4_t a0 = vld1q_f32(aa + i), b0 = vld1q_f32(ab + i);
            for (int64_t j = 0; j < n_k; j++) {
                const float32x4_t v0 = vld1q_f32(v + j * hd + i);
                a0 = vfmaq_n_f32(a0, v0, wa[j]);
                b0 = vfmaq_n_f32(b0, v0, wb[j]);
            }
            vst1q_f32(aa + i, a0);
            vst1q_f32(ab + i, b0);
        }
        for (; i < hd; i++)
            for (int64_t j = 0; j < n_k; j++) {
                aa[i] = fmaf(wa[j], v[j * hd + i], aa[i]);
                ab[i] = fmaf(wb[j], v[j * hd + i], ab[i]);
            }
    }
    for (; r < n_q; r++) {
        float *aa = acc + r * acc_stride;
        const float *wa = w + r * w_stride;
        int64_t i = 0;
        for (; i + 4 <= hd; i += 4) {
            float32x4_t a0 = vld1q_f32(aa + i);
            for (int64_t j = 0; j < n_k; j++) a0 = vfmaq_n_f32(a0, vld1q_f32(v + j * hd + i), wa[j]);
            vst1q_f32(aa + i, a0);
        }
        for (; i < hd; i++)
            for (int64_t j = 0; j < n_k; j++) aa[i] = fmaf(wa[j], v[j * hd + i], aa[i]);
    }
}

#define NEON_OPS(t) {rows_##t##_neon, store_##t##_neon, scores_neon, accum_neon, attn_exp_sum_ref}
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
