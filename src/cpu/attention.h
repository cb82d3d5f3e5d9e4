/* Attention over the paged KV cache.
 *
 * The KV dtype is resolved once per call into an attn_kv_ops table of typed
 * kernels (dot of an f32 query with a stored K row, accumulate of a stored V row,
 * store of an f32 row); the inner loops never branch on dtype.
 *
 * Work is cut into items of (token, kv head, KV chunk): an item covers every query
 * head that shares the kv head (GQA) and ATTN_CHUNK positions of the sequence.
 * Each item leaves a partial (max, sum, unnormalised output) and a combine step
 * merges the chunks of a (token, head) in chunk order. The chunk size is fixed, so
 * the result does not depend on the thread count, while long contexts still spread
 * over all threads in decode. */
#ifndef VT_CPU_ATTENTION_H
#define VT_CPU_ATTENTION_H

#include "engine/kv_cache.h"

#include <stdint.h>

#define ATTN_CHUNK 256

typedef struct attn_kv_ops {
    float (*dot)(const float *q, const void *k, int64_t n);           /* q . k */
    void (*axpy)(float *acc, const void *v, float w, int64_t n);      /* acc += w * v */
    void (*store)(void *dst, const float *src, int64_t n);           /* dst = convert(src) */
} attn_kv_ops;

/* Kernels for K/V rows of `type` on this CPU (VT_ISA=ref: scalar). NULL if the
 * type cannot be a KV type. */
const attn_kv_ops *attn_ops_get(vt_dtype type);
const attn_kv_ops *attn_ops_get_ref(vt_dtype type);

/* Partial attention for one item: query heads [h0, h0 + n_rep) of one token (q
 * rows of head_dim, contiguous), kv head g, positions [p0, p1) of the sequence
 * whose block table is `blocks`. Writes for each head r the partial
 * part + r * part_stride = {m, l, acc[head_dim]}. */
void attn_partial(const kv_cache *kv, const attn_kv_ops *kops, const attn_kv_ops *vops,
                  int64_t layer, const int32_t *blocks, int64_t g, const float *q, int64_t n_rep,
                  int64_t p0, int64_t p1, float scale, float *part, int64_t part_stride);

/* Floats of one partial: m, l, acc[head_dim]. */
static inline int64_t attn_part_floats(int64_t head_dim) { return head_dim + 2; }

/* Merge n_chunks partials (in order) into out[head_dim]. */
void attn_combine(const float *parts, int64_t n_chunks, int64_t stride, int64_t head_dim,
                  float *out);

#endif
