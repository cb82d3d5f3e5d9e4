/* Block layouts of the GGUF tensor types, byte-compatible with ggml.
 *
 * A quantized row of n elements is n / block_elems consecutive blocks. Each block
 * holds a few fp16 scales and packed integers; the layouts here are the on-disk
 * format, so every size is asserted. K-quants group 256 elements into one
 * super-block with 6-bit or 8-bit sub-block scales. */
#ifndef VT_QUANT_BLOCKS_H
#define VT_QUANT_BLOCKS_H

#include "base/fp16.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK4_NL 32
#define QK_K 256
#define QK_MXFP4 32
#define K_SCALE_SIZE 12

typedef struct { vt_f16 d; uint8_t qs[QK4_0 / 2]; } block_q4_0;            /* x = d * (q - 8) */
typedef struct { vt_f16 d, m; uint8_t qs[QK4_1 / 2]; } block_q4_1;         /* x = d * q + m */
typedef struct { vt_f16 d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0; /* x = d * (q - 16) */
typedef struct { vt_f16 d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
typedef struct { vt_f16 d; int8_t qs[QK8_0]; } block_q8_0;                 /* x = d * q */
typedef struct { vt_f16 d, s; int8_t qs[QK8_1]; } block_q8_1;              /* s = d * sum(q) */
typedef struct { vt_f16 d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl;         /* x = d * kvalues[q] */

typedef struct {
    uint8_t scales[QK_K / 16]; /* 4-bit scale | 4-bit min, per 16 elements */
    uint8_t qs[QK_K / 4];      /* 2-bit quants */
    vt_f16 d, dmin;            /* super-block scales for scales and mins */
} block_q2_K;

typedef struct {
    uint8_t hmask[QK_K / 8]; /* high bit of the 3-bit quants */
    uint8_t qs[QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];      /* 6-bit scales, packed */
    vt_f16 d;
} block_q3_K;

typedef struct {
    vt_f16 d, dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 x (6-bit scale, 6-bit min), packed */
    uint8_t qs[QK_K / 2];
} block_q4_K;

typedef struct {
    vt_f16 d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

typedef struct {
    uint8_t ql[QK_K / 2];      /* low 4 bits */
    uint8_t qh[QK_K / 4];      /* high 2 bits */
    int8_t scales[QK_K / 16];  /* 8-bit scales */
    vt_f16 d;
} block_q6_K;

typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; /* sum of each 16 quants */
} block_q8_K;

typedef struct {
    vt_f16 d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;

/* MXFP4 (OCP microscaling FP4): a shared power-of-two scale as an E8M0 byte
 * (2^(e - 127)) and 32 E2M1 values, nibble-packed as Q4_0 (element j in the low
 * nibble of qs[j], element 16 + j in the high one). x = 2^(e - 127) * fp4(q);
 * ggml keeps the E2M1 values doubled as integers (mxfp4_values) and halves the
 * scale instead (mxfp4_e8m0_half), which is the same number. */
typedef struct { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; } block_mxfp4;

static_assert(sizeof(block_q4_0) == 18, "q4_0 layout");
static_assert(sizeof(block_q4_1) == 20, "q4_1 layout");
static_assert(sizeof(block_q5_0) == 22, "q5_0 layout");
static_assert(sizeof(block_q5_1) == 24, "q5_1 layout");
static_assert(sizeof(block_q8_0) == 34, "q8_0 layout");
static_assert(sizeof(block_q8_1) == 36, "q8_1 layout");
static_assert(sizeof(block_iq4_nl) == 18, "iq4_nl layout");
static_assert(sizeof(block_q2_K) == 84, "q2_K layout");
static_assert(sizeof(block_q3_K) == 110, "q3_K layout");
static_assert(sizeof(block_q4_K) == 144, "q4_K layout");
static_assert(sizeof(block_q5_K) == 176, "q5_K layout");
static_assert(sizeof(block_q6_K) == 210, "q6_K layout");
static_assert(sizeof(block_q8_K) == 292, "q8_K layout");
static_assert(sizeof(block_iq4_xs) == 136, "iq4_xs layout");
static_assert(sizeof(block_mxfp4) == 17, "mxfp4 layout");

/* The non-linear 4-bit grid of IQ4_NL and IQ4_XS. */
extern const int8_t iq4nl_values[16];

/* The 16 E2M1 values, doubled: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives. */
extern const int8_t mxfp4_values[16];

/* 2^(e - 128), the E8M0 scale halved (to go with the doubled values), as ggml's
 * ggml_e8m0_to_fp32_half computes it: e = 0 and 1 are the subnormals 2^-128
 * and 2^-127, e = 255 (NaN in E8M0) is 2^127 as in ggml. */
static inline float mxfp4_e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The 12 scale bytes of a Q4_K / Q5_K super-block as four words of four 6-bit
 * values: the scales of sub-blocks 0..3, of 4..7, then the mins of 0..3, of
 * 4..7. Sub-blocks 0..3 keep their 6 bits in bytes 0..3 (scale) and 4..7 (min);
 * sub-blocks 4..7 take the low / high nibbles of bytes 8..11 plus the top two
 * bits of bytes 0..3 / 4..7. Shared by the scalar reference and the SIMD dots. */
static inline void q4_K_scale_words(const uint8_t p[12], uint32_t out[4]) {
    uint32_t u[3];
    memcpy(u, p, 12);
    out[0] = u[0] & 0x3f3f3f3f;
    out[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
    out[2] = u[1] & 0x3f3f3f3f;
    out[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
}

/* The 16 6-bit scales of a Q3_K super-block (still offset by 32) from its 12
 * bytes, as four words of four: the low 4 bits of scale j in the nibbles of
 * bytes 0..7 (j < 8: low nibble of byte j, else high nibble of byte j - 8), the
 * top 2 bits in bytes 8..11 (byte 8 + j % 4, bit pair j / 4). */
static inline void q3_K_scale_words(const uint8_t p[12], uint32_t out[4]) {
    uint32_t u[3];
    memcpy(u, p, 12);
    const uint32_t k4 = 0x0f0f0f0f, k2 = 0x03030303;
    out[0] = (u[0] & k4) | (((u[2] >> 0) & k2) << 4);
    out[1] = (u[1] & k4) | (((u[2] >> 2) & k2) << 4);
    out[2] = ((u[0] >> 4) & k4) | (((u[2] >> 4) & k2) << 4);
    out[3] = ((u[1] >> 4) & k4) | (((u[2] >> 6) & k2) << 4);
}

#endif
