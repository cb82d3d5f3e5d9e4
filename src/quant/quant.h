/* Tensor types: one table of traits per type.
 *
 * vt_dtype values are ggml's type ids, so a GGUF tensor's type field maps
 * straight onto them. Each type has a scalar reference dequantizer and, where
 * vt can write the type, a reference quantizer bit-exact with ggml's
 * ggml_quantize_chunk (no importance matrix). `dot_type` is the type the
 * activations are quantized to before a dot product with a row of this type
 * (as in ggml: Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4, Q8_1 for Q4_1/Q5_1, Q8_K for the
 * K-quants and IQ4_XS, the weight's own type for F32/F16/BF16). */
#ifndef VT_QUANT_QUANT_H
#define VT_QUANT_QUANT_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum vt_dtype {
    VT_DTYPE_F32 = 0,
    VT_DTYPE_F16 = 1,
    VT_DTYPE_Q4_0 = 2,
    VT_DTYPE_Q4_1 = 3,
    VT_DTYPE_Q5_0 = 6,
    VT_DTYPE_Q5_1 = 7,
    VT_DTYPE_Q8_0 = 8,
    VT_DTYPE_Q8_1 = 9,
    VT_DTYPE_Q2_K = 10,
    VT_DTYPE_Q3_K = 11,
    VT_DTYPE_Q4_K = 12,
    VT_DTYPE_Q5_K = 13,
    VT_DTYPE_Q6_K = 14,
    VT_DTYPE_Q8_K = 15,
    VT_DTYPE_IQ4_NL = 20,
    VT_DTYPE_IQ4_XS = 23,
    VT_DTYPE_BF16 = 30,
    VT_DTYPE_MXFP4 = 39,
    VT_DTYPE_COUNT = 40 /* one past the largest ggml id vt knows of */
} vt_dtype;

/* Dequantize n elements (a multiple of block_elems) from src to dst. */
typedef void (*quant_dequant_fn)(const void *src, float *dst, int64_t n);
/* Quantize n elements (a multiple of block_elems) from src to dst. */
typedef void (*quant_quant_fn)(const float *src, void *dst, int64_t n);
/* Dot product of n elements: w is a row of this type, x a row of dot_type. */
typedef float (*quant_dot_fn)(int64_t n, const void *w, const void *x);

typedef struct quant_traits {
    const char *name;        /* ggml's name: "q4_0", "q4_K", "iq4_nl", "bf16" */
    int64_t block_elems;     /* elements per block (1 for float types) */
    size_t block_bytes;      /* bytes per block */
    bool quantized;
    vt_dtype dot_type;
    quant_dequant_fn dequant_ref;
    quant_quant_fn quant_ref; /* NULL where vt cannot write the type */
    quant_dot_fn dot_ref;     /* NULL for dot-only types (Q8_1, Q8_K) */
} quant_traits;

/* Traits of a type, or NULL if vt does not know it. */
const quant_traits *quant_traits_get(vt_dtype type);
/* Traits by ggml name ("q4_0"); NULL if unknown. */
const quant_traits *quant_traits_by_name(const char *name);

/* Bytes of a row of n elements; false if n is not a multiple of the block size
 * or the byte count overflows. */
bool quant_row_bytes(vt_dtype type, int64_t n, size_t *out);

/* How many of the n elements of data (of `type`; n a multiple of its block size)
 * dequantize to NaN or an infinity; the first one's index and value in *first and
 * *first_value (either may be NULL). -1 when the type cannot be read. Scalar, for
 * checks (vt inspect --check, naming the tensor behind a VT_E_NUMERIC), not for
 * hot paths. */
int64_t quant_count_nonfinite(vt_dtype type, const void *data, int64_t n, int64_t *first, float *first_value);

/* Activation quantizers used by matmul (also the quant_ref of these types).
 * n is a multiple of the type's block size (1 for f16/bf16); bit-exact with
 * ggml's quantize_row_*_ref / ggml_fp32_to_*_row. Q8_1 stores s = d * sum(q);
 * Q8_K fills bsums. */
void quant_row_q8_0_ref(const float *src, void *dst, int64_t n);
void quant_row_q8_1_ref(const float *src, void *dst, int64_t n);
void quant_row_q8_K_ref(const float *src, void *dst, int64_t n);
void quant_row_f16_ref(const float *src, void *dst, int64_t n);
void quant_row_bf16_ref(const float *src, void *dst, int64_t n);

#endif
