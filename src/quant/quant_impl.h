/* Private to src/quant: the per-type scalar reference kernels behind the traits
 * table, and the rounding helpers they share.
 *
 * Bit-exactness with ggml rests on doing the same float operations in the same
 * order: these files are compiled without -ffast-math and without FMA flags, so
 * the compiler neither reassociates nor fuses. Keep it that way. */
#ifndef VT_QUANT_QUANT_IMPL_H
#define VT_QUANT_QUANT_IMPL_H

#include "quant/blocks.h"
#include "quant/quant.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Round to nearest, ties to even, by the 1.5 * 2^23 trick ggml's K-quants use
 * (valid for |f| < 2^22; outside that range it wraps the same way ggml does). */
static inline int quant_nearest_int(float f) {
    float biased = f + 12582912.f;
    int32_t bits;
    memcpy(&bits, &biased, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

static inline int quant_min_i(int a, int b) { return a < b ? a : b; }
static inline int quant_max_i(int a, int b) { return a > b ? a : b; }

/* The element of v[0..n) of largest magnitude, sign kept (the first one on
 * ties, 0 when none is above 0), and that magnitude in *amax (NULL: not
 * wanted): the pick of ggml's quantizers, |v| > amax strictly, so a NaN is
 * passed over. */
static inline float quant_signed_absmax(const float *v, int n, float *amax) {
    float max = 0.0f, a = 0.0f;
    for (int i = 0; i < n; i++) {
        const float av = fabsf(v[i]);
        if (av > a) {
            a = av;
            max = v[i];
        }
    }
    if (amax) *amax = a;
    return max;
}

#define QUANT_DECLARE(t)                                                             \
    void quant_dequant_##t##_ref(const void *src, float *dst, int64_t n);            \
    void quant_row_##t##_ref(const float *src, void *dst, int64_t n);                \
    float quant_dot_##t##_ref(int64_t n, const void *w, const void *x);

/* quant_legacy.c */
QUANT_DECLARE(f32)
QUANT_DECLARE(q4_0)
QUANT_DECLARE(q4_1)
QUANT_DECLARE(q5_0)
QUANT_DECLARE(q5_1)
QUANT_DECLARE(q8_0)
/* f16, bf16, q8_1: quant_row_* are public (quant.h) */
void quant_dequant_f16_ref(const void *src, float *dst, int64_t n);
float quant_dot_f16_ref(int64_t n, const void *w, const void *x);
void quant_dequant_bf16_ref(const void *src, float *dst, int64_t n);
float quant_dot_bf16_ref(int64_t n, const void *w, const void *x);
void quant_dequant_q8_1_ref(const void *src, float *dst, int64_t n);

/* quant_k.c */
QUANT_DECLARE(q2_K)
QUANT_DECLARE(q3_K)
QUANT_DECLARE(q4_K)
QUANT_DECLARE(q5_K)
QUANT_DECLARE(q6_K)
void quant_dequant_q8_K_ref(const void *src, float *dst, int64_t n);

/* quant_iq.c */
QUANT_DECLARE(iq4_nl)
QUANT_DECLARE(iq4_xs)

/* quant_mxfp4.c */
QUANT_DECLARE(mxfp4)

#undef QUANT_DECLARE

#endif
