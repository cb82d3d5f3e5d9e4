/* Attention over the paged KV cache.
 *
 * The KV dtype is resolved once per call into an attn_kv_ops table of typed
 * kernels (dot of an f32 query with a stored K row, accumulate of a stored V row,
 * store of an f32 row); the inner loops never branch on dtype.
 *
 * Each K/V piece (the rows of one block, a tile at a time) is converted once to
 * f32 and serves every query head of the group: scores for all heads, then one
 * accumulation pass that keeps the output rows in registers.
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

/* A K or V piece is converted to f32 in tiles of at most this many floats
 * (ATTN_TILE_FLOATS / head_dim rows, at least one). */
#define ATTN_TILE_FLOATS 4096

/* Kernels of one KV dtype on one ISA tier. Attention resolves two tables (K, V)
 * once per call; the f32 kernels (scores, accum, exp_sum) are the tier's and the
 * same in every table of that tier, only rows and store depend on the dtype. */
typedef struct attn_kv_ops {
    /* n_rows stored rows of hd (contiguous) as f32: returns src itself where the
     * storage is f32, else converts into tile (n_rows * hd floats). */
    const float *(*rows)(const void *src, int64_t n_rows, int64_t hd, float *tile);
    void (*store)(void *dst, const float *src, int64_t n); /* dst = convert(src) */
    /* s[r * s_stride + j] = scale * (q_r . k_j) for r < n_q, j < n_k; q_r and k_j
     * rows of hd, contiguous. */
    void (*scores)(const float *q, int64_t n_q, const float *k, int64_t n_k, int64_t hd,
                   float scale, float *s, int64_t s_stride);
    /* acc_r[i] += sum over j ascending of w[r * w_stride + j] * v_j[i], r < n_q,
     * acc_r = acc + r * acc_stride. */
    void (*accum)(float *acc, int64_t acc_stride, int64_t n_q, const float *v, int64_t n_k,
                  int64_t hd, const float *w, int64_t w_stride);
    /* s[j] = exp(s[j] - m) for j < n (every s[j] <= m); returns their sum. */
    float (*exp_sum)(float *s, int64_t n, float m);
} attn_kv_ops;

/* The scalar f32 kernels, for ISA tables that keep some of them. */
void attn_scores_ref(const float *q, int64_t n_q, const float *k, int64_t n_k, int64_t hd,
                     float scale, float *s, int64_t s_stride);
void attn_accum_ref(float *acc, int64_t acc_stride, int64_t n_q, const float *v, int64_t n_k,
                    int64_t hd, const float *w, int64_t w_stride);
float attn_exp_sum_ref(float *s, int64_t n, float m);

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
