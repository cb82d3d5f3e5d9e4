/* The traits table: one row per tensor type vt knows, indexed by ggml type id. */
#include "quant/quant.h"

#include "base/size.h"
#include "quant/quant_impl.h"

#include <math.h>
#include <string.h>

const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};
const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

#define ROW(type_, name_, elems_, bytes_, quantized_, dot_, dq_, q_, dot_fn_)           \
    [type_] = {.name = name_,                                                           \
               .block_elems = elems_,                                                   \
               .block_bytes = bytes_,                                                   \
               .quantized = quantized_,                                                 \
               .dot_type = dot_,                                                        \
               .dequant_ref = dq_,                                                      \
               .quant_ref = q_,                                                         \
               .dot_ref = dot_fn_}

#define BLOCK(t, T, dot_t)                                                              \
    ROW(VT_DTYPE_##T, #t, QK_##T, sizeof(block_##t), true, VT_DTYPE_##dot_t,           \
        quant_dequant_##t##_ref, quant_row_##t##_ref, quant_dot_##t##_ref)

/* block_elems of each block type under a name BLOCK can paste together */
enum {
    QK_Q4_0 = QK4_0, QK_Q4_1 = QK4_1, QK_Q5_0 = QK5_0, QK_Q5_1 = QK5_1, QK_Q8_0 = QK8_0,
    QK_Q2_K = QK_K, QK_Q3_K = QK_K, QK_Q4_K = QK_K, QK_Q5_K = QK_K, QK_Q6_K = QK_K,
    QK_IQ4_NL = QK4_NL, QK_IQ4_XS = QK_K,
};

static const quant_traits traits_table[VT_DTYPE_COUNT] = {
    ROW(VT_DTYPE_F32, "f32", 1, sizeof(float), false, VT_DTYPE_F32, quant_dequant_f32_ref,
        quant_row_f32_ref, quant_dot_f32_ref),
    ROW(VT_DTYPE_F16, "f16", 1, sizeof(vt_f16), false, VT_DTYPE_F16, quant_dequant_f16_ref,
        quant_row_f16_ref, quant_dot_f16_ref),
    ROW(VT_DTYPE_BF16, "bf16", 1, sizeof(vt_bf16), false, VT_DTYPE_BF16,
        quant_dequant_bf16_ref, quant_row_bf16_ref, quant_dot_bf16_ref),
    BLOCK(q4_0, Q4_0, Q8_0),
    BLOCK(q4_1, Q4_1, Q8_1),
    BLOCK(q5_0, Q5_0, Q8_0),
    BLOCK(q5_1, Q5_1, Q8_1),
    BLOCK(q8_0, Q8_0, Q8_0),
    ROW(VT_DTYPE_Q8_1, "q8_1", QK8_1, sizeof(block_q8_1), true, VT_DTYPE_Q8_1,
        quant_dequant_q8_1_ref, quant_row_q8_1_ref, NULL),
    BLOCK(q2_K, Q2_K, Q8_K),
    BLOCK(q3_K, Q3_K, Q8_K),
    BLOCK(q4_K, Q4_K, Q8_K),
    BLOCK(q5_K, Q5_K, Q8_K),
    BLOCK(q6_K, Q6_K, Q8_K),
    ROW(VT_DTYPE_Q8_K, "q8_K", QK_K, sizeof(block_q8_K), true, VT_DTYPE_Q8_K,
        quant_dequant_q8_K_ref, quant_row_q8_K_ref, NULL),
    BLOCK(iq4_nl, IQ4_NL, Q8_0),
    BLOCK(iq4_xs, IQ4_XS, Q8_K),
    ROW(VT_DTYPE_MXFP4, "mxfp4", QK_MXFP4, sizeof(block_mxfp4), true, VT_DTYPE_Q8_0,
        quant_dequant_mxfp4_ref, quant_row_mxfp4_ref, quant_dot_mxfp4_ref),
};

const quant_traits *quant_traits_get(vt_dtype type) {
    if ((int)type < 0 || type >= VT_DTYPE_COUNT) return NULL;
    const quant_traits *t = &traits_table[type];
    return t->name ? t : NULL;
}

const quant_traits *quant_traits_by_name(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < VT_DTYPE_COUNT; i++) {
        if (traits_table[i].name && !strcmp(traits_table[i].name, name)) return &traits_table[i];
    }
    return NULL;
}

bool quant_row_bytes(vt_dtype type, int64_t n, size_t *out) {
    const quant_traits *t = quant_traits_get(type);
    if (!t || n < 0 || n % t->block_elems != 0) return false;
    return size_mul((size_t)(n / t->block_elems), t->block_bytes, out);
}

int64_t quant_count_nonfinite(vt_dtype type, const void *data, int64_t n, int64_t *first, float *first_value) {
    const quant_traits *t = quant_traits_get(type);
    if (!t || !t->dequant_ref || n < 0 || n % t->block_elems != 0) return -1;
    enum { CHUNK = 4096 }; /* a multiple of every block size (at most 256) */
    float buf[CHUNK];
    const int64_t per = CHUNK / t->block_elems * t->block_elems;
    const uint8_t *p = data;
    int64_t count = 0;
    for (int64_t i0 = 0; i0 < n; i0 += per) {
        const int64_t k = n - i0 < per ? n - i0 : per;
        t->dequant_ref(p + (size_t)(i0 / t->block_elems) * t->block_bytes, buf, k);
        for (int64_t i = 0; i < k; i++) {
            if (isfinite(buf[i])) continue;
            if (count++ == 0) {
                if (first) *first = i0 + i;
                if (first_value) *first_value = buf[i];
            }
        }
    }
    return count;
}
