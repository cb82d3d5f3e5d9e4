/* Float types and the 32-element "legacy" block quants (Q4_0 .. Q8_1).
 *
 * Q4_0/Q5_0/Q8_0 are symmetric: one fp16 scale d per block, x = d * q with q
 * centred (q - 8, q - 16, or signed q). Q4_1/Q5_1 add an fp16 offset m: x = d*q + m.
 * In the 4- and 5-bit types byte j of qs holds element j in its low nibble and
 * element j + 16 in its high nibble; Q5's fifth bits sit in the 32-bit qh
 * (bit j for element j). Scales are chosen from the block's max (|max| for the
 * symmetric types, min and max for the offset ones), as ggml's *_ref
 * quantizers do; ggml_quantize_chunk without an importance matrix runs exactly
 * those, so the same arithmetic in the same order gives the same bytes.
 *
 * The dot products follow ggml's generic vec_dot kernels: integer sums per
 * block (two half-sums for the nibble types), scaled and accumulated in float;
 * the float types accumulate products in double. */
#include "quant/quant_impl.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- f32, f16, bf16 ----------------------------------------------------------- */

void quant_dequant_f32_ref(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_row_f32_ref(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

float quant_dot_f32_ref(int64_t n, const void *w, const void *x) {
    const float *a = w, *b = x;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(a[i] * b[i]);
    return (float)sum;
}

/* f16 and bf16 as f32: each element converted to f32 (exact) and back with
 * base/fp16.h's name##_to_f32 / f32_to_##name, the products accumulated in
 * double. */
#define HALF_TYPE(name, half_t)                                                            \
    void quant_dequant_##name##_ref(const void *src, float *dst, int64_t n) {              \
        const half_t *h = src;                                                             \
        for (int64_t i = 0; i < n; i++) dst[i] = name##_to_f32(h[i]);                      \
    }                                                                                      \
    void quant_row_##name##_ref(const float *src, void *dst, int64_t n) {                  \
        half_t *h = dst;                                                                   \
        for (int64_t i = 0; i < n; i++) h[i] = f32_to_##name(src[i]);                      \
    }                                                                                      \
    float quant_dot_##name##_ref(int64_t n, const void *w, const void *x) {                \
        const half_t *a = w, *b = x;                                                       \
        double sum = 0.0;                                                                  \
        for (int64_t i = 0; i < n; i++) sum += (double)(name##_to_f32(a[i]) * name##_to_f32(b[i])); \
        return (float)sum;                                                                 \
    }
HALF_TYPE(f16, vt_f16)
HALF_TYPE(bf16, vt_bf16)
#undef HALF_TYPE

/* ---- shared block helpers ------------------------------------------------------- */

static void min_max(const float *x, int n, float *min_out, float *max_out) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

/* ---- q4_0 ------------------------------------------------------------------------- */

void quant_row_q4_0_ref(const float *src, void *dst, int64_t n) {
    block_q4_0 *y = dst;
    for (int64_t b = 0; b < n / QK4_0; b++, src += QK4_0) {
        const float max = quant_signed_absmax(src, QK4_0, NULL);
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const float lo = src[j] * id;
            const float hi = src[j + QK4_0 / 2] * id;
            const uint8_t qlo = (uint8_t)quant_min_i(15, (int8_t)(lo + 8.5f));
            const uint8_t qhi = (uint8_t)quant_min_i(15, (int8_t)(hi + 8.5f));
            y[b].qs[j] = (uint8_t)(qlo | (qhi << 4));
        }
    }
}

void quant_dequant_q4_0_ref(const void *src, float *dst, int64_t n) {
    const block_q4_0 *x = src;
    for (int64_t b = 0; b < n / QK4_0; b++, dst += QK4_0) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[j] = ((x[b].qs[j] & 0x0F) - 8) * d;
            dst[j + QK4_0 / 2] = ((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

float quant_dot_q4_0_ref(int64_t n, const void *w, const void *xq) {
    const block_q4_0 *x = w;
    const block_q8_0 *y = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK4_0; b++) {
        int lo = 0, hi = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            lo += ((x[b].qs[j] & 0x0F) - 8) * y[b].qs[j];
            hi += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + QK4_0 / 2];
        }
        sum += (lo + hi) * f16_to_f32(x[b].d) * f16_to_f32(y[b].d);
    }
    return sum;
}

/* ---- q4_1 ------------------------------------------------------------------------- */

void quant_row_q4_1_ref(const float *src, void *dst, int64_t n) {
    block_q4_1 *y = dst;
    for (int64_t b = 0; b < n / QK4_1; b++, src += QK4_1) {
        float min, max;
        min_max(src, QK4_1, &min, &max);
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        y[b].m = f32_to_f16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const float lo = (src[j] - min) * id;
            const float hi = (src[j + QK4_1 / 2] - min) * id;
            const uint8_t qlo = (uint8_t)quant_min_i(15, (int8_t)(lo + 0.5f));
            const uint8_t qhi = (uint8_t)quant_min_i(15, (int8_t)(hi + 0.5f));
            y[b].qs[j] = (uint8_t)(qlo | (qhi << 4));
        }
    }
}

void quant_dequant_q4_1_ref(const void *src, float *dst, int64_t n) {
    const block_q4_1 *x = src;
    for (int64_t b = 0; b < n / QK4_1; b++, dst += QK4_1) {
        const float d = f16_to_f32(x[b].d);
        const float m = f16_to_f32(x[b].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            dst[j] = (x[b].qs[j] & 0x0F) * d + m;
            dst[j + QK4_1 / 2] = (x[b].qs[j] >> 4) * d + m;
        }
    }
}

float quant_dot_q4_1_ref(int64_t n, const void *w, const void *xq) {
    const block_q4_1 *x = w;
    const block_q8_1 *y = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK4_1; b++) {
        int lo = 0, hi = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            lo += (x[b].qs[j] & 0x0F) * y[b].qs[j];
            hi += (x[b].qs[j] >> 4) * y[b].qs[j + QK4_1 / 2];
        }
        sum += (f16_to_f32(x[b].d) * f16_to_f32(y[b].d)) * (lo + hi) +
               f16_to_f32(x[b].m) * f16_to_f32(y[b].s);
    }
    return sum;
}

/* ---- q5_0 ------------------------------------------------------------------------- */

void quant_row_q5_0_ref(const float *src, void *dst, int64_t n) {
    block_q5_0 *y = dst;
    for (int64_t b = 0; b < n / QK5_0; b++, src += QK5_0) {
        const float max = quant_signed_absmax(src, QK5_0, NULL);
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const float lo = src[j] * id;
            const float hi = src[j + QK5_0 / 2] * id;
            const uint8_t qlo = (uint8_t)quant_min_i(31, (int8_t)(lo + 16.5f));
            const uint8_t qhi = (uint8_t)quant_min_i(31, (int8_t)(hi + 16.5f));
            y[b].qs[j] = (uint8_t)((qlo & 0x0F) | ((qhi & 0x0F) << 4));
            qh |= ((qlo & 0x10u) >> 4) << j;
            qh |= ((qhi & 0x10u) >> 4) << (j + QK5_0 / 2);
        }
        memcpy(y[b].qh, &qh, sizeof qh);
    }
}

void quant_dequant_q5_0_ref(const void *src, float *dst, int64_t n) {
    const block_q5_0 *x = src;
    for (int64_t b = 0; b < n / QK5_0; b++, dst += QK5_0) {
        const float d = f16_to_f32(x[b].d);
        uint32_t qh;
        memcpy(&qh, x[b].qh, sizeof qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int hlo = ((qh >> j) << 4) & 0x10;
            const int hhi = (qh >> (j + 12)) & 0x10;
            dst[j] = (((x[b].qs[j] & 0x0F) | hlo) - 16) * d;
            dst[j + QK5_0 / 2] = (((x[b].qs[j] >> 4) | hhi) - 16) * d;
        }
    }
}

float quant_dot_q5_0_ref(int64_t n, const void *w, const void *xq) {
    const block_q5_0 *x = w;
    const block_q8_0 *y = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK5_0; b++) {
        uint32_t qh;
        memcpy(&qh, x[b].qh, sizeof qh);
        int lo = 0, hi = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int hlo = ((qh >> j) << 4) & 0x10;
            const int hhi = (qh >> (j + 12)) & 0x10;
            lo += (((x[b].qs[j] & 0x0F) | hlo) - 16) * y[b].qs[j];
            hi += (((x[b].qs[j] >> 4) | hhi) - 16) * y[b].qs[j + QK5_0 / 2];
        }
        sum += (f16_to_f32(x[b].d) * f16_to_f32(y[b].d)) * (lo + hi);
    }
    return sum;
}

/* ---- q5_1 ------------------------------------------------------------------------- */

void quant_row_q5_1_ref(const float *src, void *dst, int64_t n) {
    block_q5_1 *y = dst;
    for (int64_t b = 0; b < n / QK5_1; b++, src += QK5_1) {
        float min, max;
        min_max(src, QK5_1, &min, &max);
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        y[b].m = f32_to_f16(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const float lo = (src[j] - min) * id;
            const float hi = (src[j + QK5_1 / 2] - min) * id;
            const uint8_t qlo = (uint8_t)(lo + 0.5f);
            const uint8_t qhi = (uint8_t)(hi + 0.5f);
            y[b].qs[j] = (uint8_t)((qlo & 0x0F) | ((qhi & 0x0F) << 4));
            qh |= ((qlo & 0x10u) >> 4) << j;
            qh |= ((qhi & 0x10u) >> 4) << (j + QK5_1 / 2);
        }
        memcpy(y[b].qh, &qh, sizeof qh);
    }
}

void quant_dequant_q5_1_ref(const void *src, float *dst, int64_t n) {
    const block_q5_1 *x = src;
    for (int64_t b = 0; b < n / QK5_1; b++, dst += QK5_1) {
        const float d = f16_to_f32(x[b].d);
        const float m = f16_to_f32(x[b].m);
        uint32_t qh;
        memcpy(&qh, x[b].qh, sizeof qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int hlo = ((qh >> j) << 4) & 0x10;
            const int hhi = (qh >> (j + 12)) & 0x10;
            dst[j] = ((x[b].qs[j] & 0x0F) | hlo) * d + m;
            dst[j + QK5_1 / 2] = ((x[b].qs[j] >> 4) | hhi) * d + m;
        }
    }
}

float quant_dot_q5_1_ref(int64_t n, const void *w, const void *xq) {
    const block_q5_1 *x = w;
    const block_q8_1 *y = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK5_1; b++) {
        uint32_t qh;
        memcpy(&qh, x[b].qh, sizeof qh);
        int lo = 0, hi = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int hlo = ((qh >> j) << 4) & 0x10;
            const int hhi = (qh >> (j + 12)) & 0x10;
            lo += ((x[b].qs[j] & 0x0F) | hlo) * y[b].qs[j];
            hi += ((x[b].qs[j] >> 4) | hhi) * y[b].qs[j + QK5_1 / 2];
        }
        sum += (f16_to_f32(x[b].d) * f16_to_f32(y[b].d)) * (lo + hi) +
               f16_to_f32(x[b].m) * f16_to_f32(y[b].s);
    }
    return sum;
}

/* ---- q8_0, q8_1 --------------------------------------------------------------------- */

static float absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    return amax;
}

void quant_row_q8_0_ref(const float *src, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++, src += QK8_0) {
        const float d = absmax(src, QK8_0) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++) y[b].qs[j] = (int8_t)roundf(src[j] * id);
    }
}

void quant_dequant_q8_0_ref(const void *src, float *dst, int64_t n) {
    const block_q8_0 *x = src;
    for (int64_t b = 0; b < n / QK8_0; b++, dst += QK8_0) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < QK8_0; j++) dst[j] = x[b].qs[j] * d;
    }
}

float quant_dot_q8_0_ref(int64_t n, const void *w, const void *xq) {
    const block_q8_0 *x = w;
    const block_q8_0 *y = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        int isum = 0;
        for (int j = 0; j < QK8_0; j++) isum += x[b].qs[j] * y[b].qs[j];
        sum += isum * (f16_to_f32(x[b].d) * f16_to_f32(y[b].d));
    }
    return sum;
}

void quant_row_q8_1_ref(const float *src, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / QK8_1; b++, src += QK8_1) {
        const float d = absmax(src, QK8_1) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_f16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1 / 2; j++) {
            y[b].qs[j] = (int8_t)roundf(src[j] * id);
            y[b].qs[j + QK8_1 / 2] = (int8_t)roundf(src[j + QK8_1 / 2] * id);
            sum += y[b].qs[j] + y[b].qs[j + QK8_1 / 2];
        }
        y[b].s = f32_to_f16(sum * d);
    }
}

/* ggml has no to_float for q8_1; this is the obvious d * q. */
void quant_dequant_q8_1_ref(const void *src, float *dst, int64_t n) {
    const block_q8_1 *x = src;
    for (int64_t b = 0; b < n / QK8_1; b++, dst += QK8_1) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < QK8_1; j++) dst[j] = x[b].qs[j] * d;
    }
}
