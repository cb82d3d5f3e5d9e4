/* IEEE half and bfloat16 conversions, bit-exact with ggml's scalar versions
 * (round to nearest even, NaN kept quiet). */
#ifndef VT_BASE_FP16_H
#define VT_BASE_FP16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t vt_f16;
typedef uint16_t vt_bf16;

static inline uint32_t fp32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float fp32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Half to float, branch-free (the method of Maratos' FP16 library that ggml uses). */
static inline float f16_to_f32(vt_f16 h) {
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const uint32_t exp_offset = 0xE0u << 23;
    const float exp_scale = 0x1.0p-112f;
    const float normalized = fp32_from_bits((two_w >> 4) + exp_offset) * exp_scale;
    const uint32_t magic_mask = 126u << 23;
    const float magic_bias = 0.5f;
    const float denormalized = fp32_from_bits((two_w >> 17) | magic_mask) - magic_bias;
    const uint32_t denormalized_cutoff = 1u << 27;
    const uint32_t result =
        sign | (two_w < denormalized_cutoff ? fp32_bits(denormalized) : fp32_bits(normalized));
    return fp32_from_bits(result);
}

static inline vt_f16 f32_to_f16(float f) {
    const float scale_to_inf = 0x1.0p+112f;
    const float scale_to_zero = 0x1.0p-110f;
    float base = (f < 0 ? -f : f) * scale_to_inf * scale_to_zero;
    const uint32_t w = fp32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = fp32_from_bits((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = fp32_bits(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (vt_f16)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

static inline float bf16_to_f32(vt_bf16 h) { return fp32_from_bits((uint32_t)h << 16); }

static inline vt_bf16 f32_to_bf16(float f) {
    uint32_t u = fp32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (vt_bf16)((u >> 16) | 64); /* quiet NaN */
    return (vt_bf16)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

#endif
