/* NEON attention kernels per KV dtype (see cpu/attention.h): the dot of an f32
 * query with a stored K row, acc += w * V row, and the store of an f32 row.
 *
 * Plain ASIMD (every aarch64 core). Dots accumulate in four float vectors and
 * finish with a scalar tail; stores are the activation quantizers of
 * quant_act_neon.c, which write the same bytes as the scalar stores. */
#include "cpu/arm/arm_kernels.h"
#include "cpu/arm/neon_common.h"
#include "cpu/attention.h"
#include "base/fp16.h"
#include "quant/blocks.h"

#include <math.h>

const attn_kv_ops *attn_ops_get_neon(vt_dtype type);

VT_INLINE float hsum4x4(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t d) {
    return vaddvq_f32(vaddq_f32(vaddq_f32(a, b), vaddq_f32(c, d)));
}

static float attn_dot_f32(const float *q, const void *k, int64_t n) {
    const float *kk = k;
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(q + i), vld1q_f32(kk + i));
        a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), vld1q_f32(kk + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(q + i + 8), vld1q_f32(kk + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(q + i + 12), vld1q_f32(kk + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, vld1q_f32(q + i), vld1q_f32(kk + i));
    float s = hsum4x4(a0, a1, a2, a3);
    for (; i < n; i++) s += q[i] * kk[i];
    return s;
}
static void attn_axpy_f32(float *acc, const void *v, float w, int64_t n) {
    const float *vv = v;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), vld1q_f32(vv + i), w));
    for (; i < n; i++) acc[i] += w * vv[i];
}
static void attn_store_f32(void *dst, const float *src, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

/* 8 halves (or bf16) at p as two float vectors */
VT_INLINE void f16x8_load(const vt_f16 *p, float32x4_t v[2]) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
    v[0] = vcvt_f32_f16(vget_low_f16(h));
    v[1] = vcvt_high_f32_f16(h);
}
VT_INLINE void bf16x8_load(const vt_bf16 *p, float32x4_t v[2]) {
    const uint16x8_t h = vld1q_u16(p);
    v[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    v[1] = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
}

#define HALF_OPS(name, elem_t, load8, to_f32, store_row)                                   \
    static float attn_dot_##name(const float *q, const void *k, int64_t n) {            \
        const elem_t *kk = k;                                                              \
        float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;                        \
        int64_t i = 0;                                                                     \
        for (; i + 16 <= n; i += 16) {                                                     \
            float32x4_t ka[2], kb[2];                                                      \
            load8(kk + i, ka);                                                             \
            load8(kk + i + 8, kb);                                                         \
            a0 = vfmaq_f32(a0, vld1q_f32(q + i), ka[0]);                                   \
            a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), ka[1]);                               \
            a2 = vfmaq_f32(a2, vld1q_f32(q + i + 8), kb[0]);                               \
            a3 = vfmaq_f32(a3, vld1q_f32(q + i + 12), kb[1]);                              \
        }                                                                                  \
        for (; i + 8 <= n; i += 8) {                                                       \
            float32x4_t ka[2];                                                             \
            load8(kk + i, ka);                                                             \
            a0 = vfmaq_f32(a0, vld1q_f32(q + i), ka[0]);                                   \
            a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), ka[1]);                               \
        }                                                                                  \
        float s = hsum4x4(a0, a1, a2, a3);                                                 \
        for (; i < n; i++) s += q[i] * to_f32(kk[i]);                                      \
        return s;                                                                          \
    }                                                                                      \
    static void attn_axpy_##name(float *acc, const void *v, float w, int64_t n) {        \
        const elem_t *vv = v;                                                              \
        int64_t i = 0;                                                                     \
        for (; i + 8 <= n; i += 8) {                                                       \
            float32x4_t x[2];                                                              \
            load8(vv + i, x);                                                              \
            vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), x[0], w));                  \
            vst1q_f32(acc + i + 4, vfmaq_n_f32(vld1q_f32(acc + i + 4), x[1], w));          \
        }                                                                                  \
        for (; i < n; i++) acc[i] += w * to_f32(vv[i]);                                    \
    }                                                                                      \
    static void attn_store_##name(void *dst, const float *src, int64_t n) {              \
        store_row(src, dst, n);                                                            \
    }

HALF_OPS(f16, vt_f16, f16x8_load, f16_arm, quantize_f16_neon)
HALF_OPS(bf16, vt_bf16, bf16x8_load, bf16_to_f32, quantize_bf16_neon)

/* Q8_0 rows: 16 int8 -> 4 float vectors */
VT_INLINE void i8x16_to_f32(int8x16_t v, float32x4_t f[4]) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_high_s8(v);
    f[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    f[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
    f[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    f[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

static float attn_dot_q8_0(const float *q, const void *k, int64_t n) {
    const block_q8_0 *b = k;
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / QK8_0; i++, q += QK8_0) {
        float32x4_t f[8];
        i8x16_to_f32(vld1q_s8(b[i].qs), f);
        i8x16_to_f32(vld1q_s8(b[i].qs + 16), f + 4);
        float32x4_t s0 = vmulq_f32(vld1q_f32(q), f[0]), s1 = vmulq_f32(vld1q_f32(q + 4), f[1]);
        for (int j = 2; j < 8; j += 2) {
            s0 = vfmaq_f32(s0, vld1q_f32(q + 4 * j), f[j]);
            s1 = vfmaq_f32(s1, vld1q_f32(q + 4 * j + 4), f[j + 1]);
        }
        acc = vfmaq_n_f32(acc, vaddq_f32(s0, s1), f16_arm(b[i].d));
    }
    return vaddvq_f32(acc);
}
static void attn_axpy_q8_0(float *acc, const void *v, float w, int64_t n) {
    const block_q8_0 *b = v;
    for (int64_t i = 0; i < n / QK8_0; i++, acc += QK8_0) {
        const float d = w * f16_arm(b[i].d);
        float32x4_t f[8];
        i8x16_to_f32(vld1q_s8(b[i].qs), f);
        i8x16_to_f32(vld1q_s8(b[i].qs + 16), f + 4);
        for (int j = 0; j < 8; j++) vst1q_f32(acc + 4 * j, vfmaq_n_f32(vld1q_f32(acc + 4 * j), f[j], d));
    }
}
static void attn_store_q8_0(void *dst, const float *src, int64_t n) { quantize_q8_0_neon(src, dst, n); }

static const attn_kv_ops ops_f32_neon = {attn_dot_f32, attn_axpy_f32, attn_store_f32};
static const attn_kv_ops ops_f16_neon = {attn_dot_f16, attn_axpy_f16, attn_store_f16};
static const attn_kv_ops ops_bf16_neon = {attn_dot_bf16, attn_axpy_bf16, attn_store_bf16};
static const attn_kv_ops ops_q8_0_neon = {attn_dot_q8_0, attn_axpy_q8_0, attn_store_q8_0};

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
