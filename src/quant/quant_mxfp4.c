/* MXFP4: blocks of 32 E2M1 values with one E8M0 scale (quant/blocks.h).
 *
 * The quantizer is ggml's quantize_row_mxfp4_ref (what ggml_quantize_chunk runs
 * for the type, with or without an importance matrix): the block's scale is
 * e = floor(log2(amax)) - 2 + 127, which puts amax in [4, 8) times the halved
 * scale 2^(e - 128) (the doubled grid's top is 12), and each value takes the
 * grid point nearest to it, the first of equals on ties (ggml's linear search
 * over all 16 codes, so +0 wins over -0). The dot is ggml's
 * ggml_vec_dot_mxfp4_q8_0_generic: per block d = d_x * e_half, sum += d *
 * (integer dot). */
#include "quant/quant_impl.h"

#include <math.h>

void quant_dequant_mxfp4_ref(const void *src, float *dst, int64_t n) {
    const block_mxfp4 *x = src;
    for (int64_t b = 0; b < n / QK_MXFP4; b++, dst += QK_MXFP4) {
        const float d = mxfp4_e8m0_half(x[b].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            dst[j] = mxfp4_values[x[b].qs[j] & 0x0f] * d;
            dst[j + QK_MXFP4 / 2] = mxfp4_values[x[b].qs[j] >> 4] * d;
        }
    }
}

/* The code whose grid value times e is nearest to x (the first on ties). */
static inline int best_index_mxfp4(float x, float e) {
    int best = 0;
    float best_err = fabsf(mxfp4_values[0] * e - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf(mxfp4_values[i] * e - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

void quant_row_mxfp4_ref(const float *src, void *dst, int64_t n) {
    block_mxfp4 *y = dst;
    for (int64_t b = 0; b < n / QK_MXFP4; b++, src += QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < QK_MXFP4; j++)
            if (amax < fabsf(src[j])) amax = fabsf(src[j]);
        /* ggml converts the float to uint8_t directly; through int32 gives the
         * same byte where that is defined, and x86's where it is not (amax below
         * 2^-125, whose exponent byte would be negative) */
        const uint8_t e = amax > 0.0f ? (uint8_t)(int32_t)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = mxfp4_e8m0_half(e);
        y[b].e = e;
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            const uint8_t x0 = (uint8_t)best_index_mxfp4(src[j], d);
            const uint8_t x1 = (uint8_t)best_index_mxfp4(src[QK_MXFP4 / 2 + j], d);
            y[b].qs[j] = (uint8_t)(x0 | (x1 << 4));
        }
    }
}

float quant_dot_mxfp4_ref(int64_t n, const void *w, const void *xq) {
    const block_mxfp4 *x = w;
    const block_q8_0 *y = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK_MXFP4; b++) {
        const float d = f16_to_f32(y[b].d) * mxfp4_e8m0_half(x[b].e);
        int lo = 0, hi = 0;
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            lo += y[b].qs[j] * mxfp4_values[x[b].qs[j] & 0x0f];
            hi += y[b].qs[j + QK_MXFP4 / 2] * mxfp4_values[x[b].qs[j] >> 4];
        }
        sum += d * (lo + hi);
    }
    return sum;
}
