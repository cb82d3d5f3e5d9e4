/* Attention over the paged KV cache.
 *
 * The KV dtype is resolved once per call into an attn_kv_ops table of typed
 * kernels (the scores of query rows against a block's keys, the accumulation
 * of weighted value rows, the stores); the inner loops never branch on dtype.
 *
 * The SIMD tiers are one implementation over small vector primitives
 * (cpu/attention_impl.h), instantiated by x86/attn_avx2.c, x86/attn_avx512.c and
 * arm/attn_neon.c; the scalar tier (attention.c) is their _ref twin.
 *
 * Layout of one head inside a block (kv_k_head, kv_v_row): V is row-major (a
 * slot's head_dim values together) in every dtype. K is dim-major for the float
 * types (F32, F16, BF16: dimension d of slot s at d * block_size + s), so a
 * vector load holds one dimension of consecutive keys and the score of each
 * (query, key) pair is one lane's FMA chain over d: no horizontal sums, no
 * conversion pass, and a score's bits never depend on which other keys or
 * queries share the call. Q8_0 K stays row-major (its blocks run along d).
 *
 * Work is cut into items of (tokens, kv head, KV chunk): an item covers every query
 * head that shares the kv head (GQA), for up to ATTN_ROWS / n_rep consecutive
 * tokens of one sequence, and ATTN_CHUNK positions of the sequence.
 * Each item leaves a partial (max, sum, unnormalised output) and a combine step
 * merges the chunks of a (token, head) in chunk order. The chunk size is fixed, so
 * the result does not depend on the thread count, while long contexts still spread
 * over all threads in decode. */
#ifndef VT_CPU_ATTENTION_H
#define VT_CPU_ATTENTION_H

#include "cpu/cpu_features.h"
#include "kvcache/kv_cache.h"

#include <stdint.h>

#define ATTN_CHUNK 256

/* Largest head size (kernels keep one converted row of it on the stack). */
#define ATTN_HEAD_DIM_MAX 1024

/* Kernels of one KV dtype on one ISA tier. Attention resolves two tables (K, V)
 * once per call and uses the K half of one and the V half of the other. */
typedef struct attn_kv_ops {
    /* K of slot `slot` = src (hd floats), in the head's block at kblk (bs slots). */
    void (*store_k)(void *kblk, int64_t bs, int64_t slot, const float *src, int64_t hd);
    /* s[r * s_stride + j] = scale * (q_r . k_{s0 + j}) for r < n_q, j < n; q_r rows
     * of hd, contiguous; keys s0 .. s0 + n - 1 of the head's block at kblk. */
    void (*scores)(const void *kblk, int64_t bs, int64_t s0, int64_t n, const float *q,
                   int64_t n_q, int64_t hd, float scale, float *s, int64_t s_stride);
    /* The V row of a slot = src (hd floats). */
    void (*store_v)(void *vrow, const float *src, int64_t hd);
    /* acc_r[i] += sum over j ascending of w[r * w_stride + j] * v_j[i], r < n_q,
     * acc_r = acc + r * acc_stride; v_j the n consecutive rows from vrows. */
    void (*accum)(float *acc, int64_t acc_stride, int64_t n_q, const void *vrows, int64_t n,
                  int64_t hd, const float *w, int64_t w_stride);
    /* *m = max of s[0 .. n-1] (n > 0), then s[j] = exp(s[j] - *m); returns their sum. */
    float (*exp_sum)(float *s, int64_t n, float *m);
    /* s[i] = cap * tanh(s[i] / cap), i < n (cap > 0): attn_softcap_ref's contract;
     * SIMD tiers within a few ulp of tanhf. */
    void (*softcap)(float *s, int64_t n, float cap);
} attn_kv_ops;

/* Kernels for K/V rows of `type` on this CPU (VT_ISA=ref: scalar). NULL if the
 * type cannot be a KV type. */
const attn_kv_ops *attn_ops_get(vt_dtype type);
const attn_kv_ops *attn_ops_get_ref(vt_dtype type);
/* The table of tier `isa` (capped at this CPU's; tests compare tiers). */
const attn_kv_ops *attn_ops_get_isa(vt_dtype type, cpu_isa isa);

/* Query rows per item the kernels are sized for: an item takes as many tokens
 * of one sequence as fill ATTN_ROWS rows with their n_rep heads (at least one),
 * so each block of K and V, once loaded and widened, serves all of them. 32
 * rows (8 tokens of 4 heads) ran a 512-token prefill's attention 7% faster
 * than 16 rows and 2% slower than 64 (bench_attention, f16 KV, 8 kv heads x 4,
 * head 64; Zen 5 VM, medians of 11 alternated rounds). 64 would halve the
 * items of a short prompt, which many threads share: 128 tokens make 64 units
 * for 20 threads. Settable with -D for such comparisons; bits do not depend on
 * it (attn_partial). */
#ifndef ATTN_ROWS
#define ATTN_ROWS 32
#endif

/* The queries of one item: n_tok tokens of one sequence at the consecutive
 * positions pos0, pos0 + 1, ..., each with the n_rep query heads of one kv head. */
typedef struct attn_query {
    const float *q;       /* head r of token i: q + i * q_tok_stride + r * head_dim */
    int64_t q_tok_stride;
    int64_t n_tok, n_rep;
    int64_t pos0;
    float *part;          /* head r of token i: part + (i * n_rep + r) * part_stride */
    int64_t part_stride;
} attn_query;

/* How one layer attends, decided once per layer (the model fills it in per
 * layer, the forward pass hands it to the kernels, the engine sizes the KV
 * cache's groups from the windows):
 *   window  sliding window: a token at position p sees keys in (p - window, p]
 *           (llama.cpp's LLAMA_SWA_TYPE_STANDARD); 0: every key before it;
 *   sinks   (n_head) learned logits, one per query head, that join the softmax
 *           denominator and nothing else (gpt-oss: ggml_soft_max_add_sinks); NULL:
 *           none;
 *   softcap scores become softcap * tanh(score / softcap) before the softmax
 *           (gemma2's attn_logit_softcapping; the score already scaled, as
 *           llama.cpp, whose gemma2 scales Q first); 0: none.
 * A window is a range of positions, not a mask: the items skip the chunks
 * before it and the kernels score only the keys inside it, so no inner loop
 * tests a position. New variants add a field here (zero: off), so the kernels'
 * signatures stay as they are. */
typedef struct attn_layer_cfg {
    int64_t window;
    const float *sinks;
    float softcap;
} attn_layer_cfg;

/* Partial attention for one item: the queries of aq against kv head g over the
 * chunk of positions that starts at p0 (a multiple of ATTN_CHUNK), of the
 * sequence whose block table in layer L's group is `blocks`. Token i (at pi =
 * pos0 + i) sees positions [lo_i, p1_i): p1_i = min(p0 + ATTN_CHUNK, pi + 1)
 * (causal), lo_i = p0, or with a window > 0, max(p0, pi - window + 1); it gets
 * the partial {m, l, acc[head_dim]} of exactly those keys, or the empty partial
 * {-inf, 0, 0} when the range is empty. Its bits do not depend on which other
 * tokens share the item, and a window that reaches p0 leaves them as without
 * one. Blocks wholly before lo_0 are never read (a SWA group may have released
 * them). The window and the soft-cap are cfg's (NULL: neither; the sinks are
 * attn_combine's); a soft-cap runs kops->softcap over the item's scores. */
void attn_partial(const kv_layer *L, const attn_kv_ops *kops, const attn_kv_ops *vops,
                  const int32_t *blocks, int64_t g, const attn_query *aq, int64_t p0, float scale,
                  const attn_layer_cfg *cfg);

/* s[i] = cap * tanh(s[i] / cap), i < n (cap > 0): the soft-cap of scores and of
 * logits. _ref: tanhf; the kernel table's form may differ in the last bits. */
void attn_softcap_ref(float *s, int64_t n, float cap);

/* The first chunk a token at pos sees with this window (0 without one). */
static inline int64_t attn_first_chunk(int64_t pos, int64_t window) {
    return window > 0 && pos - window + 1 > 0 ? (pos - window + 1) / ATTN_CHUNK : 0;
}

/* Floats of one partial: m, l, acc[head_dim]. */
static inline int64_t attn_part_floats(int64_t head_dim) { return head_dim + 2; }

/* Merge n_chunks partials (in order) into out[head_dim]; out does not overlap
 * the partials (restrict: the loops over head_dim vectorize). sink: the head's
 * sink logit, or NULL. Empty partials {-inf, 0, 0} count for nothing; at least
 * one partial must not be empty. */
void attn_combine(const float *restrict parts, int64_t n_chunks, int64_t stride, int64_t head_dim,
                  const float *sink, float *restrict out);

#endif
