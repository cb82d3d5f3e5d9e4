#include "cpu/attention.h"

#include "base/fp16.h"
#include "cpu/cpu_features.h"
#include "quant/blocks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scalar kernels per KV dtype ---------------------------------------------- */

static float dot_f32_ref(const float *q, const void *k, int64_t n) {
    const float *kk = k;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += q[i] * kk[i];
    return s;
}
static void axpy_f32_ref(float *acc, const void *v, float w, int64_t n) {
    const float *vv = v;
    for (int64_t i = 0; i < n; i++) acc[i] += w * vv[i];
}
static void store_f32_ref(void *dst, const float *src, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static float dot_f16_ref(const float *q, const void *k, int64_t n) {
    const vt_f16 *kk = k;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += q[i] * f16_to_f32(kk[i]);
    return s;
}
static void axpy_f16_ref(float *acc, const void *v, float w, int64_t n) {
    const vt_f16 *vv = v;
    for (int64_t i = 0; i < n; i++) acc[i] += w * f16_to_f32(vv[i]);
}
static void store_f16_ref(void *dst, const float *src, int64_t n) {
    vt_f16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = f32_to_f16(src[i]);
}

static float dot_bf16_ref(const float *q, const void *k, int64_t n) {
    const vt_bf16 *kk = k;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += q[i] * bf16_to_f32(kk[i]);
    return s;
}
static void axpy_bf16_ref(float *acc, const void *v, float w, int64_t n) {
    const vt_bf16 *vv = v;
    for (int64_t i = 0; i < n; i++) acc[i] += w * bf16_to_f32(vv[i]);
}
static void store_bf16_ref(void *dst, const float *src, int64_t n) {
    vt_bf16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
}

static float dot_q8_0_ref(const float *q, const void *k, int64_t n) {
    const block_q8_0 *b = k;
    float s = 0;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        float bs = 0;
        for (int j = 0; j < QK8_0; j++) bs += q[i * QK8_0 + j] * (float)b[i].qs[j];
        s += bs * f16_to_f32(b[i].d);
    }
    return s;
}
static void axpy_q8_0_ref(float *acc, const void *v, float w, int64_t n) {
    const block_q8_0 *b = v;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float d = w * f16_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++) acc[i * QK8_0 + j] += d * (float)b[i].qs[j];
    }
}
static void store_q8_0_ref(void *dst, const float *src, int64_t n) {
    quant_traits_get(VT_DTYPE_Q8_0)->quant_ref(src, dst, n);
}

static const attn_kv_ops ops_f32_ref = {dot_f32_ref, axpy_f32_ref, store_f32_ref};
static const attn_kv_ops ops_f16_ref = {dot_f16_ref, axpy_f16_ref, store_f16_ref};
static const attn_kv_ops ops_bf16_ref = {dot_bf16_ref, axpy_bf16_ref, store_bf16_ref};
static const attn_kv_ops ops_q8_0_ref = {dot_q8_0_ref, axpy_q8_0_ref, store_q8_0_ref};

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
    float scores_buf[8 * ATTN_CHUNK];
    float *scores = n_rep <= 8 ? scores_buf : malloc(sizeof(float) * (size_t)(n_rep * n));
    VT_ASSERT(n > 0 && n <= ATTN_CHUNK && scores);

    /* Scores: one pass over the K rows serves all n_rep query heads. */
    for (int64_t p = p0; p < p1; p++) {
        const uint8_t *krow = kv_k_row(kv, layer, blocks[p / bs], g, p % bs);
        for (int64_t r = 0; r < n_rep; r++) scores[r * n + (p - p0)] = kops->dot(q + r * hd, krow, hd) * scale;
    }
    for (int64_t r = 0; r < n_rep; r++) {
        float *s = scores + r * n, m = -INFINITY, l = 0;
        for (int64_t j = 0; j < n; j++) m = s[j] > m ? s[j] : m;
        for (int64_t j = 0; j < n; j++) {
            s[j] = expf(s[j] - m);
            l += s[j];
        }
        float *out = part + r * part_stride;
        out[0] = m;
        out[1] = l;
        memset(out + 2, 0, sizeof(float) * (size_t)hd);
    }
    for (int64_t p = p0; p < p1; p++) {
        const uint8_t *vrow = kv_v_row(kv, layer, blocks[p / bs], g, p % bs);
        for (int64_t r = 0; r < n_rep; r++)
            vops->axpy(part + r * part_stride + 2, vrow, scores[r * n + (p - p0)], hd);
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
