#include "cpu/attention.h"

#include "base/fp16.h"
#include "cpu/cpu_features.h"
#include "quant/blocks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scalar kernels -------------------------------------------------------------- */

static const float *rows_f32_ref(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    (void)n_rows, (void)hd, (void)tile;
    return src;
}
static void store_f32_ref(void *dst, const float *src, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static const float *rows_f16_ref(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    const vt_f16 *h = src;
    for (int64_t i = 0; i < n_rows * hd; i++) tile[i] = f16_to_f32(h[i]);
    return tile;
}
static void store_f16_ref(void *dst, const float *src, int64_t n) {
    vt_f16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = f32_to_f16(src[i]);
}

static const float *rows_bf16_ref(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    const vt_bf16 *h = src;
    for (int64_t i = 0; i < n_rows * hd; i++) tile[i] = bf16_to_f32(h[i]);
    return tile;
}
static void store_bf16_ref(void *dst, const float *src, int64_t n) {
    vt_bf16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
}

/* Q8_0 rows are whole blocks (kv_cache_init requires hd % 32 == 0), so n_rows
 * rows are n_rows * hd / 32 consecutive blocks. */
static const float *rows_q8_0_ref(const void *src, int64_t n_rows, int64_t hd, float *tile) {
    const block_q8_0 *b = src;
    for (int64_t i = 0; i < n_rows * hd / QK8_0; i++) {
        const float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++) tile[i * QK8_0 + j] = d * (float)b[i].qs[j];
    }
    return tile;
}
static void store_q8_0_ref(void *dst, const float *src, int64_t n) {
    quant_traits_get(VT_DTYPE_Q8_0)->quant_ref(src, dst, n);
}

void attn_scores_ref(const float *q, int64_t n_q, const float *k, int64_t n_k, int64_t hd,
                     float scale, float *s, int64_t s_stride) {
    for (int64_t r = 0; r < n_q; r++)
        for (int64_t j = 0; j < n_k; j++) {
            float d = 0;
            for (int64_t i = 0; i < hd; i++) d += q[r * hd + i] * k[j * hd + i];
            s[r * s_stride + j] = d * scale;
        }
}

void attn_accum_ref(float *acc, int64_t acc_stride, int64_t n_q, const float *v, int64_t n_k,
                    int64_t hd, const float *w, int64_t w_stride) {
    for (int64_t r = 0; r < n_q; r++)
        for (int64_t j = 0; j < n_k; j++)
            for (int64_t i = 0; i < hd; i++)
                acc[r * acc_stride + i] += w[r * w_stride + j] * v[j * hd + i];
}

float attn_exp_sum_ref(float *s, int64_t n, float m) {
    float l = 0;
    for (int64_t j = 0; j < n; j++) l += (s[j] = expf(s[j] - m));
    return l;
}

#define REF_OPS(t) {rows_##t##_ref, store_##t##_ref, attn_scores_ref, attn_accum_ref, attn_exp_sum_ref}
static const attn_kv_ops ops_f32_ref = REF_OPS(f32);
static const attn_kv_ops ops_f16_ref = REF_OPS(f16);
static const attn_kv_ops ops_bf16_ref = REF_OPS(bf16);
static const attn_kv_ops ops_q8_0_ref = REF_OPS(q8_0);
#undef REF_OPS

const attn_kv_ops *attn_ops_get_ref(vt_dtype type) {
    switch (type) {
    case VT_DTYPE_F32: return &ops_f32_ref;
    case VT_DTYPE_F16: return &ops_f16_ref;
    case VT_DTYPE_BF16: return &ops_bf16_ref;
    case VT_DTYPE_Q8_0: return &ops_q8_0_ref;
    default: return NULL;
    }
}

#if defined(__x86_64__)
const attn_kv_ops *attn_ops_get_avx2(vt_dtype type);
#elif defined(__aarch64__)
const attn_kv_ops *attn_ops_get_neon(vt_dtype type); /* arm/attn_neon.c */
#endif

const attn_kv_ops *attn_ops_get(vt_dtype type) {
#if defined(__x86_64__)
    const cpu_isa isa = cpu_features_get()->isa;
    if (isa == CPU_ISA_AVX2 || isa == CPU_ISA_AVX512) {
        const attn_kv_ops *o = attn_ops_get_avx2(type);
        if (o) return o;
    }
#elif defined(__aarch64__)
    if (cpu_features_get()->isa >= CPU_ISA_NEON) {
        const attn_kv_ops *o = attn_ops_get_neon(type);
        if (o) return o;
    }
#endif
    return attn_ops_get_ref(type);
}

/* ---- partials and combine ---------------------------------------------------------- */

void attn_partial(const kv_cache *kv, const attn_kv_ops *kops, const attn_kv_ops *vops,
                  int64_t layer, const int32_t *blocks, int64_t g, const float *q, int64_t n_rep,
                  int64_t p0, int64_t p1, float scale, float *part, int64_t part_stride) {
    const int64_t hd = kv->head_dim, bs = kv->block_size, n = p1 - p0;
    const int64_t tile_rows = ATTN_TILE_FLOATS / hd;
    float tile[ATTN_TILE_FLOATS];
    float scores_buf[16 * ATTN_CHUNK];
    float *scores = n_rep <= 16 ? scores_buf : malloc(sizeof(float) * (size_t)(n_rep * n));
    VT_ASSERT(n > 0 && n <= ATTN_CHUNK && tile_rows >= 1 && scores);

    /* Scores: each K piece, converted once, serves all n_rep query heads. */
    for (int64_t p = p0; p < p1;) {
        const int64_t slot = p % bs, left = bs - slot < p1 - p ? bs - slot : p1 - p;
        const int64_t nr = left < tile_rows ? left : tile_rows;
        const float *k = kops->rows(kv_k_row(kv, layer, blocks[p / bs], g, slot), nr, hd, tile);
        kops->scores(q, n_rep, k, nr, hd, scale, scores + (p - p0), n);
        p += nr;
    }
    for (int64_t r = 0; r < n_rep; r++) {
        float *s = scores + r * n, m = -INFINITY;
        for (int64_t j = 0; j < n; j++) m = s[j] > m ? s[j] : m;
        float *out = part + r * part_stride;
        out[0] = m;
        out[1] = kops->exp_sum(s, n, m);
        memset(out + 2, 0, sizeof(float) * (size_t)hd);
    }
    for (int64_t p = p0; p < p1;) {
        const int64_t slot = p % bs, left = bs - slot < p1 - p ? bs - slot : p1 - p;
        const int64_t nr = left < tile_rows ? left : tile_rows;
        const float *v = vops->rows(kv_v_row(kv, layer, blocks[p / bs], g, slot), nr, hd, tile);
        vops->accum(part + 2, part_stride, n_rep, v, nr, hd, scores + (p - p0), n);
        p += nr;
    }
    if (scores != scores_buf) free(scores);
}

void attn_combine(const float *parts, int64_t n_chunks, int64_t stride, int64_t head_dim,
                  float *out) {
    float m = -INFINITY;
    for (int64_t c = 0; c < n_chunks; c++) m = parts[c * stride] > m ? parts[c * stride] : m;
    float l = 0;
    memset(out, 0, sizeof(float) * (size_t)head_dim);
    for (int64_t c = 0; c < n_chunks; c++) {
        const float *p = parts + c * stride;
        const float w = expf(p[0] - m);
        l += w * p[1];
        for (int64_t i = 0; i < head_dim; i++) out[i] += w * p[2 + i];
    }
    const float inv = 1.0f / l;
    for (int64_t i = 0; i < head_dim; i++) out[i] *= inv;
}
