/* quant/ against the reference ggml (libggml-base.so), type by type:
 *   - dequantization is bit-identical to ggml's to_float, on blocks made by
 *     ggml's own quantizer and on random bytes (fp16/bf16/f32 fields made finite);
 *   - quantization is byte-identical to ggml_quantize_chunk (no importance
 *     matrix), or to quantize_row_q8_K_ref / quantize_row_q8_1_ref for the two
 *     activation types ggml_quantize_chunk does not take, on many distributions. */
#include "ggml.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "test.h"

#include <stdint.h>

/* exported by libggml-base but declared only in ggml's private ggml-quants.h */
void quantize_row_q8_K_ref(const float *x, void *y, int64_t k);
void quantize_row_q8_1_ref(const float *x, void *y, int64_t k);
void dequantize_row_q8_K(const void *x, float *y, int64_t k);

static const vt_dtype all_types[] = {
    VT_DTYPE_F32,  VT_DTYPE_F16,  VT_DTYPE_BF16, VT_DTYPE_Q4_0,   VT_DTYPE_Q4_1,  VT_DTYPE_Q5_0,
    VT_DTYPE_Q5_1, VT_DTYPE_Q8_0, VT_DTYPE_Q8_1, VT_DTYPE_Q2_K,   VT_DTYPE_Q3_K,  VT_DTYPE_Q4_K,
    VT_DTYPE_Q5_K, VT_DTYPE_Q6_K, VT_DTYPE_Q8_K, VT_DTYPE_IQ4_NL, VT_DTYPE_IQ4_XS, VT_DTYPE_MXFP4,
};
#define N_TYPES ((int)(sizeof all_types / sizeof all_types[0]))

/* ---- deterministic random numbers -------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float rng_uniform(void) { return (float)((rng_u64() >> 40) * (1.0 / 16777216.0)); } /* [0,1) */
static float rng_normal(void) {
    float u = rng_uniform(), v = rng_uniform();
    if (u < 1e-7f) u = 1e-7f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* Fill one row of n floats with distribution `kind`. */
#define N_KINDS 15
static const char *kind_names[N_KINDS] = {
    "normal", "uniform", "outliers", "positive", "zero-row", "sparse", "tiny",
    "large", "constant", "integers", "neg-zero", "one-huge", "zero-blocks", "ramp", "row-scaled",
};
static void fill_row(float *x, int64_t n, int kind) {
    const float row_scale = powf(10.0f, rng_uniform() * 7 - 4); /* 1e-4 .. 1e3 */
    for (int64_t i = 0; i < n; i++) {
        float v;
        switch (kind) {
        case 0: v = rng_normal(); break;
        case 1: v = (rng_uniform() * 2 - 1) * 1e-2f; break;
        case 2: v = rng_normal() * (rng_uniform() < 0.02f ? 50.0f : 1.0f); break;
        case 3: v = 0.5f + rng_uniform() * 1.5f; break;
        case 4: v = 0.0f; break;
        case 5: v = rng_uniform() < 0.9f ? 0.0f : rng_normal(); break;
        case 6: v = rng_normal() * 1e-6f; break;
        case 7: v = rng_normal() * 2000.0f; break;
        case 8: v = -0.75f; break;
        case 9: v = (float)((int)(rng_u64() % 16) - 8); break;
        case 10: v = (i % 3 == 0) ? -0.0f : (i % 3 == 1 ? 0.0f : rng_normal()); break;
        case 11: v = (i % 97 == 5) ? 1000.0f : rng_normal() * 0.01f; break;
        case 12: v = ((i / 32) % 3 == 1) ? 0.0f : rng_normal(); break;
        case 13: v = (float)(i % 256) / 128.0f - 1.0f; break;
        default: v = rng_normal() * row_scale; break;
        }
        x[i] = v;
    }
}

/* ---- helpers --------------------------------------------------------------------------- */

static void ref_quantize(vt_dtype t, const float *src, void *dst, int64_t nrows, int64_t n_per_row) {
    if (t == VT_DTYPE_Q8_K) {
        quantize_row_q8_K_ref(src, dst, nrows * n_per_row);
    } else if (t == VT_DTYPE_Q8_1) {
        quantize_row_q8_1_ref(src, dst, nrows * n_per_row);
    } else {
        ggml_quantize_chunk((enum ggml_type)t, src, dst, 0, nrows, n_per_row, NULL);
    }
}

/* ggml's dequantizer for t; false if ggml has none (q8_1). */
static bool ref_dequantize(vt_dtype t, const void *src, float *dst, int64_t n) {
    if (t == VT_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return true;
    }
    if (t == VT_DTYPE_Q8_K) {
        dequantize_row_q8_K(src, dst, n);
        return true;
    }
    const struct ggml_type_traits *tt = ggml_get_type_traits((enum ggml_type)t);
    if (!tt->to_float) return false;
    tt->to_float(src, dst, n);
    return true;
}

static void fix_f16(uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    if ((h & 0x7c00) == 0x7c00) h &= (uint16_t)~0x4000;
    memcpy(p, &h, 2);
}
static void fix_bf16(uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    if ((h & 0x7f80) == 0x7f80) h &= (uint16_t)~0x4000;
    memcpy(p, &h, 2);
}
static void fix_f32(uint8_t *p) {
    uint32_t u;
    memcpy(&u, p, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) u &= ~0x40000000u;
    memcpy(p, &u, 4);
}

/* Make the float fields of random blocks finite. */
static void sanitize(vt_dtype t, uint8_t *data, int64_t n_blocks, size_t block_bytes) {
    for (int64_t b = 0; b < n_blocks; b++) {
        uint8_t *p = data + (size_t)b * block_bytes;
        switch (t) {
        case VT_DTYPE_F32: fix_f32(p); break;
        case VT_DTYPE_F16: fix_f16(p); break;
        case VT_DTYPE_BF16: fix_bf16(p); break;
        case VT_DTYPE_Q4_0: case VT_DTYPE_Q5_0: case VT_DTYPE_Q8_0: case VT_DTYPE_IQ4_NL:
        case VT_DTYPE_IQ4_XS:
            fix_f16(p);
            break;
        case VT_DTYPE_Q4_1: case VT_DTYPE_Q5_1: case VT_DTYPE_Q8_1: case VT_DTYPE_Q4_K:
        case VT_DTYPE_Q5_K:
            fix_f16(p);
            fix_f16(p + 2);
            break;
        case VT_DTYPE_Q2_K: fix_f16(p + offsetof(block_q2_K, d)); fix_f16(p + offsetof(block_q2_K, dmin)); break;
        case VT_DTYPE_Q3_K: fix_f16(p + offsetof(block_q3_K, d)); break;
        case VT_DTYPE_Q6_K: fix_f16(p + offsetof(block_q6_K, d)); break;
        case VT_DTYPE_Q8_K: fix_f32(p); break;
        default: break;
        }
    }
}

/* First differing float index (bitwise), or -1. */
static int64_t first_diff_f32(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
    }
    return -1;
}
static int64_t first_diff_bytes(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i]) return (int64_t)i;
    }
    return -1;
}

/* Dequantize n_blocks random blocks with both; returns the number that differ. */
static int64_t random_bytes_diff(const quant_traits *tr, vt_dtype t, int64_t n_blocks) {
    const int64_t n = n_blocks * tr->block_elems;
    uint8_t *q = malloc((size_t)n_blocks * tr->block_bytes);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    for (size_t i = 0; i < (size_t)n_blocks * tr->block_bytes; i++) q[i] = (uint8_t)rng_u64();
    sanitize(t, q, n_blocks, tr->block_bytes);
    ref_dequantize(t, q, b, n);
    tr->dequant_ref(q, a, n);
    int64_t bad = 0;
    for (int64_t k = 0; k < n_blocks; k++) {
        if (first_diff_f32(a + k * tr->block_elems, b + k * tr->block_elems, tr->block_elems) >= 0) bad++;
    }
    free(q);
    free(a);
    free(b);
    return bad;
}

/* ---- the checks ----------------------------------------------------------------------- */

static void check_type(vt_dtype t) {
    const quant_traits *tr = quant_traits_get(t);
    CHECK_MSG(tr != NULL, "type %d", (int)t);
    if (!tr) return;
    const struct ggml_type_traits *gt = ggml_get_type_traits((enum ggml_type)t);
    CHECK_MSG(!strcmp(gt->type_name, tr->name), "%s vs ggml %s", tr->name, gt->type_name);
    CHECK_EQ_INT(gt->blck_size, tr->block_elems);
    CHECK_EQ_INT(gt->type_size, tr->block_bytes);
    CHECK_EQ_INT(gt->is_quantized, tr->quantized);

    /* rows of 1024 (and 96 for block sizes that divide it) */
    const int64_t row_lens[2] = {1024, 96};
    const int n_rows_per_kind = 8;
    int64_t q_rows = 0, q_bad_rows = 0, dq_blocks = 0, dq_bad = 0, rnd_blocks = 0, rnd_bad = 0;
    bool have_ref_dq = true;

    for (int li = 0; li < 2; li++) {
        const int64_t n_per_row = row_lens[li];
        if (n_per_row % tr->block_elems) continue;
        const int64_t nrows = (int64_t)N_KINDS * n_rows_per_kind;
        const int64_t n = nrows * n_per_row;
        size_t row_bytes;
        CHECK(quant_row_bytes(t, n_per_row, &row_bytes));
        const size_t bytes = row_bytes * (size_t)nrows;
        float *src = malloc((size_t)n * sizeof(float));
        uint8_t *q_vt = calloc(1, bytes), *q_ggml = calloc(1, bytes);
        float *dq_vt = malloc((size_t)n * sizeof(float)), *dq_ggml = malloc((size_t)n * sizeof(float));
        for (int64_t r = 0; r < nrows; r++) fill_row(src + r * n_per_row, n_per_row, (int)(r / n_rows_per_kind));

        /* quantize: vt in one call over all rows, ggml per chunk of all rows */
        tr->quant_ref(src, q_vt, n);
        ref_quantize(t, src, q_ggml, nrows, n_per_row);
        for (int64_t r = 0; r < nrows; r++) {
            q_rows++;
            const int64_t d = first_diff_bytes(q_vt + r * row_bytes, q_ggml + r * row_bytes, row_bytes);
            if (d >= 0) {
                if (q_bad_rows < 3) {
                    fprintf(stderr, "  %s quantize row %lld (%s, n=%lld): byte %lld differs: vt %02x ggml %02x\n",
                            tr->name, (long long)r, kind_names[r / n_rows_per_kind],
                            (long long)n_per_row, (long long)d, q_vt[r * row_bytes + d],
                            q_ggml[r * row_bytes + d]);
                }
                q_bad_rows++;
            }
        }

        /* dequantize ggml's blocks */
        if (ref_dequantize(t, q_ggml, dq_ggml, n)) {
            tr->dequant_ref(q_ggml, dq_vt, n);
            for (int64_t b = 0; b < n / tr->block_elems; b++) {
                dq_blocks++;
                const int64_t d = first_diff_f32(dq_vt + b * tr->block_elems,
                                                 dq_ggml + b * tr->block_elems, tr->block_elems);
                if (d >= 0) {
                    if (dq_bad < 3) {
                        fprintf(stderr, "  %s dequant block %lld elem %lld: vt %a ggml %a\n", tr->name,
                                (long long)b, (long long)d, dq_vt[b * tr->block_elems + d],
                                dq_ggml[b * tr->block_elems + d]);
                    }
                    dq_bad++;
                }
            }

            /* dequantize random bytes */
            for (size_t i = 0; i < bytes; i++) q_vt[i] = (uint8_t)rng_u64();
            sanitize(t, q_vt, n / tr->block_elems, tr->block_bytes);
            ref_dequantize(t, q_vt, dq_ggml, n);
            tr->dequant_ref(q_vt, dq_vt, n);
            for (int64_t b = 0; b < n / tr->block_elems; b++) {
                rnd_blocks++;
                if (first_diff_f32(dq_vt + b * tr->block_elems, dq_ggml + b * tr->block_elems,
                                   tr->block_elems) >= 0) {
                    rnd_bad++;
                }
            }
        } else {
            have_ref_dq = false;
        }
        if (have_ref_dq && li == 0) {
            const int64_t extra = tr->quantized ? 8192 : 65536;
            rnd_bad += random_bytes_diff(tr, t, extra);
            rnd_blocks += extra;
        }
        free(src);
        free(q_vt);
        free(q_ggml);
        free(dq_vt);
        free(dq_ggml);
    }
    CHECK_MSG(q_bad_rows == 0, "%s: %lld of %lld quantized rows differ", tr->name,
              (long long)q_bad_rows, (long long)q_rows);
    CHECK_MSG(dq_bad == 0, "%s: %lld of %lld dequantized blocks differ", tr->name,
              (long long)dq_bad, (long long)dq_blocks);
    CHECK_MSG(rnd_bad == 0, "%s: %lld of %lld random blocks differ", tr->name, (long long)rnd_bad,
              (long long)rnd_blocks);
    if (have_ref_dq) {
        printf("%-7s quantize: %4lld rows identical of %4lld | dequant: %5lld + %5lld random blocks, %lld differ\n",
               tr->name, (long long)(q_rows - q_bad_rows), (long long)q_rows, (long long)dq_blocks,
               (long long)rnd_blocks, (long long)(dq_bad + rnd_bad));
    } else {
        printf("%-7s quantize: %4lld rows identical of %4lld | dequant: ggml has no to_float\n",
               tr->name, (long long)(q_rows - q_bad_rows), (long long)q_rows);
    }
}

int main(void) {
    for (int i = 0; i < N_TYPES; i++) check_type(all_types[i]);
    return test_finish();
}
