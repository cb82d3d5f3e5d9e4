#include "cpu/attention.h"

#include "base/fp16.h"
#include "cpu/cpu_features.h"
#include "quant/blocks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scalar kernels -------------------------------------------------------------- */

/* Float K types: dim-major, element (slot, d) at d * bs + slot. The stored
 * type is a constant argument of these inlined bodies, one wrapper per type. */
enum { REF_F32, REF_F16, REF_BF16 };

static inline float ref_load(const void *p, int64_t i, const int t) {
    switch (t) {
    case REF_F16: return f16_to_f32(((const vt_f16 *)p)[i]);
    case REF_BF16: return bf16_to_f32(((const vt_bf16 *)p)[i]);
    default: return ((const float *)p)[i];
    }
}
static inline void ref_put(void *p, int64_t i, float x, const int t) {
    switch (t) {
    case REF_F16: ((vt_f16 *)p)[i] = f32_to_f16(x); break;
    case REF_BF16: ((vt_bf16 *)p)[i] = f32_to_bf16(x); break;
    default: ((float *)p)[i] = x; break;
    }
}
static inline void store_k_float_ref(void *kblk, int64_t bs, int64_t slot, const float *src, int64_t hd,
                                     const int t) {
    for (int64_t d = 0; d < hd; d++) ref_put(kblk, d * bs + slot, src[d], t);
}
static inline void scores_float_ref(const void *kblk, int64_t bs, int64_t s0, int64_t n, const float *q,
                                    int64_t n_q, int64_t hd, float scale, float *s, int64_t s_stride, const int t) {
    for (int64_t r = 0; r < n_q; r++)
        for (int64_t j = 0; j < n; j++) {
            float a = 0;
            for (int64_t d = 0; d < hd; d++) a += q[r * hd + d] * ref_load(kblk, d * bs + s0 + j, t);
            s[r * s_stride + j] = a * scale;
        }
}
static inline void store_v_float_ref(void *vrow, const float *src, int64_t hd, const int t) {
    for (int64_t i = 0; i < hd; i++) ref_put(vrow, i, src[i], t);
}
static inline void accum_float_ref(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, int64_t n,
                                   int64_t hd, const float *w, int64_t w_stride, const int t) {
    for (int64_t r = 0; r < n_q; r++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < hd; i++)
                acc[r * acc_stride + i] += w[r * w_stride + j] * ref_load(vrows, j * hd + i, t);
}

static void store_k_f32_ref(void *k, int64_t bs, int64_t slot, const float *src, int64_t hd) {
    store_k_float_ref(k, bs, slot, src, hd, REF_F32);
}
static void store_k_f16_ref(void *k, int64_t bs, int64_t slot, const float *src, int64_t hd) {
    store_k_float_ref(k, bs, slot, src, hd, REF_F16);
}
static void store_k_bf16_ref(void *k, int64_t bs, int64_t slot, const float *src, int64_t hd) {
    store_k_float_ref(k, bs, slot, src, hd, REF_BF16);
}
static void scores_f32_ref(const void *k, int64_t bs, int64_t s0, int64_t n, const float *q, int64_t n_q,
                           int64_t hd, float scale, float *s, int64_t s_stride) {
    scores_float_ref(k, bs, s0, n, q, n_q, hd, scale, s, s_stride, REF_F32);
}
static void scores_f16_ref(const void *k, int64_t bs, int64_t s0, int64_t n, const float *q, int64_t n_q,
                           int64_t hd, float scale, float *s, int64_t s_stride) {
    scores_float_ref(k, bs, s0, n, q, n_q, hd, scale, s, s_stride, REF_F16);
}
static void scores_bf16_ref(const void *k, int64_t bs, int64_t s0, int64_t n, const float *q, int64_t n_q,
                            int64_t hd, float scale, float *s, int64_t s_stride) {
    scores_float_ref(k, bs, s0, n, q, n_q, hd, scale, s, s_stride, REF_BF16);
}
static void store_v_f32_ref(void *v, const float *src, int64_t hd) { store_v_float_ref(v, src, hd, REF_F32); }
static void store_v_f16_ref(void *v, const float *src, int64_t hd) { store_v_float_ref(v, src, hd, REF_F16); }
static void store_v_bf16_ref(void *v, const float *src, int64_t hd) { store_v_float_ref(v, src, hd, REF_BF16); }
static void accum_f32_ref(float *acc, int64_t acc_stride, int64_t n_q, const void *v, int64_t n, int64_t hd,
                          const float *w, int64_t w_stride) {
    accum_float_ref(acc, acc_stride, n_q, v, n, hd, w, w_stride, REF_F32);
}
static void accum_f16_ref(float *acc, int64_t acc_stride, int64_t n_q, const void *v, int64_t n, int64_t hd,
                          const float *w, int64_t w_stride) {
    accum_float_ref(acc, acc_stride, n_q, v, n, hd, w, w_stride, REF_F16);
}
static void accum_bf16_ref(float *acc, int64_t acc_stride, int64_t n_q, const void *v, int64_t n, int64_t hd,
                           const float *w, int64_t w_stride) {
    accum_float_ref(acc, acc_stride, n_q, v, n, hd, w, w_stride, REF_BF16);
}

/* Q8_0: rows of hd / 32 blocks (kv_cache_init requires hd % 32 == 0), K row-major
 * like V; rows are widened with the quant module's dequantizer. */
static void store_k_q8_0_ref(void *kblk, int64_t bs, int64_t slot, const float *src, int64_t hd) {
    (void)bs;
    quant_traits_get(VT_DTYPE_Q8_0)->quant_ref(src, (block_q8_0 *)kblk + slot * (hd / QK8_0), hd);
}
static void scores_q8_0_ref(const void *kblk, int64_t bs, int64_t s0, int64_t n, const float *q,
                            int64_t n_q, int64_t hd, float scale, float *s, int64_t s_stride) {
    (void)bs;
    float row[ATTN_HEAD_DIM_MAX];
    for (int64_t j = 0; j < n; j++) {
        quant_traits_get(VT_DTYPE_Q8_0)->dequant_ref((const block_q8_0 *)kblk + (s0 + j) * (hd / QK8_0), row, hd);
        for (int64_t r = 0; r < n_q; r++) {
            float a = 0;
            for (int64_t d = 0; d < hd; d++) a += q[r * hd + d] * row[d];
            s[r * s_stride + j] = a * scale;
        }
    }
}
static void store_v_q8_0_ref(void *vrow, const float *src, int64_t hd) {
    quant_traits_get(VT_DTYPE_Q8_0)->quant_ref(src, vrow, hd);
}
static void accum_q8_0_ref(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, int64_t n,
                           int64_t hd, const float *w, int64_t w_stride) {
    float row[ATTN_HEAD_DIM_MAX];
    for (int64_t j = 0; j < n; j++) {
        quant_traits_get(VT_DTYPE_Q8_0)->dequant_ref((const block_q8_0 *)vrows + j * (hd / QK8_0), row, hd);
        for (int64_t r = 0; r < n_q; r++)
            for (int64_t i = 0; i < hd; i++) acc[r * acc_stride + i] += w[r * w_stride + j] * row[i];
    }
}

static float exp_sum_ref(float *s, int64_t n, float *m_out) {
    float m = -INFINITY, l = 0;
    for (int64_t j = 0; j < n; j++) m = s[j] > m ? s[j] : m;
    for (int64_t j = 0; j < n; j++) l += (s[j] = expf(s[j] - m));
    *m_out = m;
    return l;
}

#define REF_OPS(t)                                                                             \
    {.store_k = store_k_##t##_ref, .scores = scores_##t##_ref, .store_v = store_v_##t##_ref,   \
     .accum = accum_##t##_ref, .exp_sum = exp_sum_ref, .softcap = attn_softcap_ref}
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
/* attention_impl.h as instantiated by x86/attn_avx2.c, x86/attn_avx512.c */
const attn_kv_ops *attn_ops_get_avx2(vt_dtype type);
const attn_kv_ops *attn_ops_get_avx512(vt_dtype type);
#elif defined(__aarch64__)
const attn_kv_ops *attn_ops_get_neon(vt_dtype type); /* attention_impl.h in arm/attn_neon.c */
#endif

const attn_kv_ops *attn_ops_get_isa(vt_dtype type, cpu_isa isa) {
    if (isa > cpu_isa_detected()) isa = cpu_isa_detected();
#if defined(__x86_64__)
    if (isa == CPU_ISA_AVX512) {
        const attn_kv_ops *o = attn_ops_get_avx512(type);
        if (o) return o;
    }
    if (isa == CPU_ISA_AVX2 || isa == CPU_ISA_AVX512) {
        const attn_kv_ops *o = attn_ops_get_avx2(type);
        if (o) return o;
    }
#elif defined(__aarch64__)
    if (isa >= CPU_ISA_NEON) {
        const attn_kv_ops *o = attn_ops_get_neon(type);
        if (o) return o;
    }
#endif
    return attn_ops_get_ref(type);
}

const attn_kv_ops *attn_ops_get(vt_dtype type) { return attn_ops_get_isa(type, cpu_features_get()->isa); }

/* ---- partials and combine ---------------------------------------------------------- */

/* KV blocks the prefetch runs ahead of the one being read (ATTN_PF_BLOCKS
 * blocks of one head: 4 KiB of f16 K at head size 64 and 16 slots), towards
 * L2 in decode (prefetcht1 on x86, pldl2keep on ARM; prefetch_lines says when
 * into L1). Into L1 (prefetcht0), as before, decode was slower than no prefetch at
 * all: bench_attention -D 16 on the Zen 5 VM, one token against 576, KV cold /
 * warm, us a token: none 2357 / 2243, t0 2 blocks 2617 / 2516, t1 2 blocks
 * 1532 / 1447 (3 blocks the same, 4 slower, 8 slower still; t2 as t1, nta as
 * none); at 2048 t0 10480 / 9969, t1 5449 / 5293. In the forward pass (1B
 * Q4_0, tg128 at depth 512, 1 thread, -DVT_FWD_PROFILE, 3 alternated runs)
 * attention 2.91-3.15 -> 1.54-1.65 ms a token. Prefetching V during the scores
 * as well gained nothing (5 runs each, with t0). 0 blocks: no prefetch. */
#ifndef ATTN_PF_BLOCKS
#define ATTN_PF_BLOCKS 2
#endif

/* Prefetch the lines of [p, p + bytes) for reading: into L2 where the item is
 * one token's (decode: the blocks are cold, the weights streamed through since),
 * into L1, as before, where several tokens share it (prefill: the blocks were
 * just written, or read by the item before). For prefill the two measured
 * alike: Q4_K_M pp1024, 1 thread, 2 alternated profile runs, attention 876-881
 * us a token with t0 everywhere, 875-888 with t1, 867-871 with this split. */
#define prefetch_lines(p, bytes, to_l1)                                                        \
    do {                                                                                       \
        const uint8_t *pl_ = (const uint8_t *)(p);                                             \
        if (to_l1)                                                                             \
            for (size_t o_ = 0; o_ < (bytes); o_ += 64) __builtin_prefetch(pl_ + o_, 0, 3);    \
        else                                                                                   \
            for (size_t o_ = 0; o_ < (bytes); o_ += 64) __builtin_prefetch(pl_ + o_, 0, 2);    \
    } while (0)

void attn_partial(const kv_layer *L, const attn_kv_ops *kops, const attn_kv_ops *vops,
                  const int32_t *blocks, int64_t g, const attn_query *aq, int64_t p0, float scale,
                  const attn_layer_cfg *cfg) {
    const int64_t window = cfg ? cfg->window : 0;
    const float softcap = cfg ? cfg->softcap : 0.0f;
    const int64_t hd = L->head_dim, bs = L->block_size, n_rep = aq->n_rep;
    const int64_t rows = aq->n_tok * n_rep;
    /* The last token sees the most keys, the first the earliest; the others'
     * extra scores become zero weights, which leave an accumulator's bits as they
     * are (acc + 0 * v == acc for finite v, and +0 stays +0). */
    const int64_t end = p0 + ATTN_CHUNK, p_last = aq->pos0 + aq->n_tok;
    const int64_t p1 = p_last < end ? p_last : end;
    const int64_t lo = window > 0 && aq->pos0 - window + 1 > p0 ? aq->pos0 - window + 1 : p0;
    VT_ASSERT(p1 > p0 && aq->pos0 + 1 > p0 && hd <= ATTN_HEAD_DIM_MAX);
    if (lo >= p1) { /* the chunk is before every token's window */
        for (int64_t k = 0; k < rows; k++) {
            float *out = aq->part + k * aq->part_stride;
            out[0] = -INFINITY;
            out[1] = 0;
            memset(out + 2, 0, sizeof(float) * (size_t)hd);
        }
        return;
    }
    const int64_t n = p1 - lo;
    /* q rows on the stack up to head size 256 (the heap past that, per item) */
    float scores_buf[ATTN_ROWS * ATTN_CHUNK], q_buf[ATTN_ROWS * 256];
    float *scores = rows <= ATTN_ROWS ? scores_buf : malloc(sizeof(float) * (size_t)(rows * n));
    VT_ASSERT(scores);
    /* The kernels take the rows contiguous: one token's heads already are. */
    const float *q = aq->q;
    float *q_heap = NULL;
    if (aq->n_tok > 1) {
        const size_t row_bytes = sizeof(float) * (size_t)(n_rep * hd);
        float *qc = rows * hd <= ATTN_ROWS * 256 ? q_buf : (q_heap = malloc(row_bytes * (size_t)aq->n_tok));
        VT_ASSERT(qc);
        for (int64_t i = 0; i < aq->n_tok; i++)
            memcpy(qc + i * n_rep * hd, aq->q + i * aq->q_tok_stride, row_bytes);
        q = qc;
    }

    /* Scores, block by block: all rows against each block's keys. A decode
     * step finds a sequence's blocks cold (the weights streamed through
     * since), so both passes prefetch the block ATTN_PF_BLOCKS ahead: here K,
     * in the accumulation V. */
    const size_t k_bytes = (size_t)bs * L->row_bytes_k, v_bytes = (size_t)bs * L->row_bytes_v;
    const bool to_l1 = aq->n_tok > 1;
    const int64_t b_first = lo / bs, b_last = (p1 - 1) / bs;
    for (int64_t b = b_first; b < b_first + ATTN_PF_BLOCKS && b <= b_last; b++)
        prefetch_lines(kv_k_head(L, blocks[b], g), k_bytes, to_l1);
    for (int64_t p = lo; p < p1;) {
        const int64_t slot = p % bs, nr = bs - slot < p1 - p ? bs - slot : p1 - p, b = p / bs;
        VT_ASSERT(blocks[b] >= 0); /* never a block a sliding window released */
        if (ATTN_PF_BLOCKS > 0 && b + ATTN_PF_BLOCKS <= b_last)
            prefetch_lines(kv_k_head(L, blocks[b + ATTN_PF_BLOCKS], g), k_bytes, to_l1);
        kops->scores(kv_k_head(L, blocks[b], g), bs, slot, nr, q, rows, hd, scale,
                     scores + (p - lo), n);
        p += nr;
    }
    if (softcap > 0) kops->softcap(scores, rows * n, softcap); /* one test per item */
    for (int64_t i = 0; i < aq->n_tok; i++) {
        /* token i's keys: [a, e) of the scores */
        const int64_t pi = aq->pos0 + i, e = (pi + 1 < p1 ? pi + 1 : p1) - lo;
        const int64_t a = window > 0 && pi - window + 1 > lo ? pi - window + 1 - lo : 0;
        for (int64_t r = 0; r < n_rep; r++) {
            float *s = scores + (i * n_rep + r) * n;
            float *out = aq->part + (i * n_rep + r) * aq->part_stride;
            if (a < e) {
                out[1] = kops->exp_sum(s + a, e - a, &out[0]);
                memset(s, 0, sizeof(float) * (size_t)a);
                memset(s + e, 0, sizeof(float) * (size_t)(n - e));
            } else {
                out[0] = -INFINITY;
                out[1] = 0;
                memset(s, 0, sizeof(float) * (size_t)n);
            }
        }
    }
    for (int64_t b = b_first; b < b_first + ATTN_PF_BLOCKS && b <= b_last; b++)
        prefetch_lines(kv_v_row(L, blocks[b], g, 0), v_bytes, to_l1);
    for (int64_t k = 0; k < rows; k++)
        memset(aq->part + k * aq->part_stride + 2, 0, sizeof(float) * (size_t)hd);
    for (int64_t p = lo; p < p1;) {
        const int64_t slot = p % bs, nr = bs - slot < p1 - p ? bs - slot : p1 - p, b = p / bs;
        if (ATTN_PF_BLOCKS > 0 && b + ATTN_PF_BLOCKS <= b_last)
            prefetch_lines(kv_v_row(L, blocks[b + ATTN_PF_BLOCKS], g, 0), v_bytes, to_l1);
        vops->accum(aq->part + 2, aq->part_stride, rows, kv_v_row(L, blocks[b], g, slot),
                    nr, hd, scores + (p - lo), n);
        p += nr;
    }
    if (scores != scores_buf) free(scores);
    free(q_heap);
}

void attn_softcap_ref(float *s, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; i++) s[i] = cap * tanhf(s[i] * inv);
}

/* The loops over head_dim go 8 lanes at a time (a fixed inner count GCC's -O2
 * vectorizes), then one by one; each lane's arithmetic is the same either way. */
#define COMBINE_LANES 8

void attn_combine(const float *restrict parts, int64_t n_chunks, int64_t stride, int64_t head_dim,
                  const float *sink, float *restrict out) {
    const int64_t hv = head_dim / COMBINE_LANES * COMBINE_LANES;
    if (n_chunks == 1 && !sink) { /* the general path with w = 1, exactly */
        const float inv = 1.0f / parts[1];
        for (int64_t i = 0; i < hv; i += COMBINE_LANES)
            for (int k = 0; k < COMBINE_LANES; k++) out[i + k] = parts[2 + i + k] * inv;
        for (int64_t i = hv; i < head_dim; i++) out[i] = parts[2 + i] * inv;
        return;
    }
    float m = -INFINITY;
    for (int64_t c = 0; c < n_chunks; c++) m = parts[c * stride] > m ? parts[c * stride] : m;
    /* a sink joins the max and the denominator, as ggml_soft_max_add_sinks */
    if (sink) m = *sink > m ? *sink : m;
    float l = 0;
    memset(out, 0, sizeof(float) * (size_t)head_dim);
    for (int64_t c = 0; c < n_chunks; c++) {
        const float *p = parts + c * stride;
        const float w = expf(p[0] - m);
        l += w * p[1];
        for (int64_t i = 0; i < hv; i += COMBINE_LANES)
            for (int k = 0; k < COMBINE_LANES; k++) out[i + k] += w * p[2 + i + k];
        for (int64_t i = hv; i < head_dim; i++) out[i] += w * p[2 + i];
    }
    if (sink) l += expf(*sink - m);
    const float inv = 1.0f / l;
    for (int64_t i = 0; i < hv; i += COMBINE_LANES)
        for (int k = 0; k < COMBINE_LANES; k++) out[i + k] *= inv;
    for (int64_t i = hv; i < head_dim; i++) out[i] *= inv;
}
