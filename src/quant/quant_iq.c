/* Non-linear 4-bit quants: IQ4_NL (blocks of 32, one fp16 scale) and IQ4_XS
 * (super-blocks of 256: fp16 d and a 6-bit signed scale per 32, split into
 * scales_l nibbles and scales_h 2-bit fields). A 4-bit index q maps to
 * iq4nl_values[q]; x = scale * iq4nl_values[q]. Nibble packing is that of Q4_0.
 *
 * The quantizer is the one ggml_quantize_chunk runs (quantize_iq4_nl /
 * quantize_iq4_xs with no importance matrix, 7 scale trials each side), not
 * quantize_row_iq4_nl_ref (which tries none): weights are x^2, each block's scale
 * is the weighted least-squares fit over 15 trial grids. */
#include "quant/quant_impl.h"

#include <math.h>
#include <string.h>

#define GROUP_MAX_EPS 1e-15f
#define IQ4_NTRY 7

/* Index of the grid value nearest to x (the lower one on ties). */
static inline int best_index(const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < val[mid]) hi = mid;
        else lo = mid;
    }
    return x - val[hi - 1] < val[hi] - x ? hi - 1 : hi;
}

/* Best scale for one 32-element block (0 for an all-zero block); L gets the
 * indices for the first trial. */
static float iq4_block_scale(const float *xb, uint8_t *L) {
    const int8_t *values = iq4nl_values;
    float weight[32];
    for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    float amax;
    const float max = quant_signed_absmax(xb, 32, &amax);
    if (amax < GROUP_MAX_EPS) return 0;
    float d = -max / values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        const float al = id * xb[j];
        const int l = best_index(values, al);
        L[j] = (uint8_t)l;
        const float q = values[l];
        const float w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -IQ4_NTRY; itry <= IQ4_NTRY; ++itry) {
        id = (itry + values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            const float al = id * xb[j];
            const int l = best_index(values, al);
            const float q = values[l];
            const float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static void pack_nibbles(const uint8_t *L, uint8_t *qs, int n) {
    for (int i = 0; i < n / 32; ++i) {
        for (int j = 0; j < 16; ++j) qs[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
    }
}

/* ---- iq4_nl --------------------------------------------------------------------------- */

void quant_row_iq4_nl_ref(const float *x, void *dst, int64_t n) {
    block_iq4_nl *y = dst;
    uint8_t L[QK4_NL];
    for (int64_t b = 0; b < n / QK4_NL; b++, x += QK4_NL) {
        const float scale = iq4_block_scale(x, L);
        y[b].d = f32_to_f16(scale);
        const float id = scale ? 1 / scale : 0;
        for (int j = 0; j < QK4_NL; ++j) L[j] = (uint8_t)best_index(iq4nl_values, id * x[j]);
        pack_nibbles(L, y[b].qs, QK4_NL);
    }
}

void quant_dequant_iq4_nl_ref(const void *src, float *y, int64_t n) {
    const block_iq4_nl *x = src;
    for (int64_t b = 0; b < n / QK4_NL; b++, y += QK4_NL) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < QK4_NL / 2; ++j) {
            y[j] = d * iq4nl_values[x[b].qs[j] & 0xf];
            y[j + QK4_NL / 2] = d * iq4nl_values[x[b].qs[j] >> 4];
        }
    }
}

float quant_dot_iq4_nl_ref(int64_t n, const void *w, const void *xq) {
    const block_iq4_nl *x = w;
    const block_q8_0 *y = xq;
    float sumf = 0;
    for (int64_t b = 0; b < n / QK4_NL; ++b) {
        const float d = f16_to_f32(y[b].d) * f16_to_f32(x[b].d);
        int sum1 = 0, sum2 = 0;
        for (int j = 0; j < QK4_NL / 2; ++j) {
            sum1 += y[b].qs[j] * iq4nl_values[x[b].qs[j] & 0xf];
            sum2 += y[b].qs[j + QK4_NL / 2] * iq4nl_values[x[b].qs[j] >> 4];
        }
        sumf += d * (sum1 + sum2);
    }
    return sumf;
}

/* ---- iq4_xs --------------------------------------------------------------------------- */

void quant_row_iq4_xs_ref(const float *x, void *dst, int64_t n) {
    block_iq4_xs *y = dst;
    uint8_t L[QK_K];
    float scales[QK_K / 32];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        for (int ib = 0; ib < QK_K / 32; ++ib) scales[ib] = iq4_block_scale(x + 32 * ib, L + 32 * ib);
        const float max_scale = quant_signed_absmax(scales, QK_K / 32, NULL);
        y[b].scales_h = 0;
        const float d = -max_scale / 32;
        y[b].d = f32_to_f16(d);
        const float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            int l = quant_nearest_int(id * scales[ib]);
            l = quant_max_i(-32, quant_min_i(31, l));
            const float dl = d * l;
            const float idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; ++j) L[32 * ib + j] = (uint8_t)best_index(iq4nl_values, idl * x[32 * ib + j]);
            l += 32;
            const uint8_t l_lo = l & 0xf, l_hi = (uint8_t)(l >> 4);
            if (ib % 2 == 0) y[b].scales_l[ib / 2] = l_lo;
            else y[b].scales_l[ib / 2] |= (uint8_t)(l_lo << 4);
            y[b].scales_h |= (uint16_t)(l_hi << (2 * ib));
        }
        pack_nibbles(L, y[b].qs, QK_K);
    }
}

void quant_dequant_iq4_xs_ref(const void *src, float *y, int64_t n) {
    const block_iq4_xs *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t *qs = x[b].qs;
        const float d = f16_to_f32(x[b].d);
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int ls = ((x[b].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                           (((x[b].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * iq4nl_values[qs[j] & 0xf];
                y[j + 16] = dl * iq4nl_values[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

float quant_dot_iq4_xs_ref(int64_t n, const void *w, const void *xq) {
    const block_iq4_xs *x = w;
    const block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; ++b) {
        const float d4d8 = f16_to_f32(x[b].d) * y[b].d;
        uint16_t h = x[b].scales_h;
        const uint8_t *qs = x[b].qs;
        const int8_t *q8 = y[b].qs;
        for (int ib = 0; ib < QK_K / 32; ib += 2) {
            const uint8_t ls1 = (uint8_t)((x[b].scales_l[ib / 2] & 0xf) | ((h << 4) & 0x30));
            const uint8_t ls2 = (uint8_t)((x[b].scales_l[ib / 2] >> 4) | ((h << 2) & 0x30));
            h >>= 4;
            const float d1 = d4d8 * (ls1 - 32);
            const float d2 = d4d8 * (ls2 - 32);
            for (int k = 0; k < 2; k++) {
                int sum1 = 0, sum2 = 0;
                for (int j = 0; j < 16; ++j) {
                    sum1 += q8[j] * iq4nl_values[qs[j] & 0xf];
                    sum2 += q8[j + 16] * iq4nl_values[qs[j] >> 4];
                }
                sumf += (k == 0 ? d1 : d2) * (sum1 + sum2);
                qs += 16;
                q8 += 32;
            }
        }
    }
    return sumf;
}
