/* The paged KV cache, made of layer groups (vLLM V1's KV cache groups).
 *
 * Layers that keep their past the same way form a group, and each group has its
 * own block pool, storage and (in the engine) block table per sequence:
 *   KV_GROUP_FULL   full attention: a sequence keeps a block for every position;
 *   KV_GROUP_SWA    sliding window of `window` positions: a token at p sees keys
 *                   in (p - window, p], so the blocks wholly before the window of
 *                   the next token to compute are released (kv_swa_first_block);
 *                   a sequence holds about window / block_size + 1 blocks, not
 *                   its whole length;
 *   KV_GROUP_STATE  recurrent state (linear attention, issue 27): one fixed-size
 *                   slot of state_bytes per layer for each sequence, no positions.
 * A model whose layers all attend fully has one FULL group: the storage, block
 * ids and bits of the cache before groups.
 *
 * Storage of an attention group is (layers of the group, n_head_kv, n_blocks,
 * block_size x head_dim) for K and for V, each in its own dtype (F16 by default,
 * BF16, F32 or Q8_0). Token position p lives in block table[p / block_size] at
 * slot p % block_size. Head-major blocks keep one head's slots contiguous, which
 * is what attention streams through; inside a head's block V is row-major and K
 * is laid out as cpu/attention.h says (dim-major for the float types).
 *
 * Blocks are reference counted so that the prefix cache can share full blocks
 * between sequences; a block returns to its pool's free list when its count
 * drops to 0. Block ids are per group: the same id in two groups is two blocks. */
#ifndef VT_KVCACHE_KV_CACHE_H
#define VT_KVCACHE_KV_CACHE_H

#include "quant/quant.h"
#include "vt.h"

#include <stddef.h>
#include <stdint.h>

/* Groups a cache can have: full attention, a few window sizes, recurrent state. */
#define KV_MAX_GROUPS 4

typedef enum kv_group_kind { KV_GROUP_FULL, KV_GROUP_SWA, KV_GROUP_STATE } kv_group_kind;

/* What a group keeps, and how many blocks (or state slots) its pool has. */
typedef struct kv_group_spec {
    kv_group_kind kind;
    int64_t window;      /* KV_GROUP_SWA: positions a token sees, itself included (> 0) */
    size_t state_bytes;  /* KV_GROUP_STATE: bytes of one sequence's state in one layer */
    int64_t n_blocks;    /* blocks in the pool (STATE: slots) */
} kv_group_spec;

/* A pool of reference-counted block ids. */
typedef struct kv_pool {
    int64_t n_blocks;
    int32_t *free_list; /* stack of free block ids, lowest on top */
    int64_t n_free;
    int32_t *ref;       /* (n_blocks) reference counts */
    int64_t n_used_max; /* most blocks ever referenced at once (n_blocks - n_free) */
} kv_pool;

typedef struct kv_group {
    kv_group_spec spec;
    int64_t n_layer;     /* layers in the group */
    /* attention: (n_layer, n_head_kv, n_blocks, block_size, row) each; STATE: k only,
     * (n_layer, n_blocks, state_bytes) */
    uint8_t *k, *v;
    size_t k_bytes, v_bytes;
    kv_pool pool;
} kv_group;

typedef struct kv_cache {
    vt_dtype type_k, type_v;
    int64_t n_layer, n_head_kv, head_dim;
    int64_t block_size; /* tokens per block */
    size_t row_bytes_k, row_bytes_v;     /* one head's row of head_dim */
    size_t block_bytes_k, block_bytes_v; /* one layer's block, all heads */
    int32_t n_groups;
    kv_group groups[KV_MAX_GROUPS];
    int32_t *layer_group; /* (n_layer) the group of each layer */
    int32_t *layer_index; /* (n_layer) its index among the group's layers */
} kv_cache;

/* One layer's storage: what the attention kernels and the K/V stores address. */
typedef struct kv_layer {
    uint8_t *k, *v;       /* this layer's (n_head_kv, n_blocks, block_size, row) */
    int64_t n_blocks, block_size, head_dim;
    size_t row_bytes_k, row_bytes_v;
    int32_t group;
    kv_group_kind kind;
    int64_t window;       /* the group's, 0 for FULL */
} kv_layer;

/* The dtype that stores a vt_kv_type; VT_E_INVALID for an unknown one. */
vt_status kv_dtype_of(vt_kv_type t, vt_dtype *out);

/* Bytes of K+V storage per token (n_layer layers). */
size_t kv_bytes_per_token(vt_dtype type_k, vt_dtype type_v, int64_t n_layer, int64_t n_head_kv,
                          int64_t head_dim);

/* The groups of a model whose layer il attends over a window of window[il]
 * positions (0: all of them): FULL first when any layer is full, then one SWA
 * group per distinct window, in order of first appearance. Fills specs (kind,
 * window; n_blocks is the caller's to set), layer_group[n_layer] and *n_groups.
 * VT_E_UNSUPPORTED when there would be more than KV_MAX_GROUPS. */
vt_status kv_groups_from_windows(int64_t n_layer, const int64_t *window, kv_group_spec *specs,
                                 int32_t *layer_group, int32_t *n_groups);

/* Allocate a cache of n_groups groups; layer il belongs to layer_group[il].
 * VT_E_NOMEM (saying how much) if the memory is not there; VT_E_UNSUPPORTED if
 * head_dim does not fit the block size of a quantized type; VT_E_INVALID for a
 * bad spec (no blocks, a window < 1, a group without layers). */
vt_status kv_cache_init_groups(kv_cache *kv, vt_dtype type_k, vt_dtype type_v, int64_t n_layer,
                               int64_t n_head_kv, int64_t head_dim, int64_t block_size,
                               const kv_group_spec *specs, int32_t n_groups,
                               const int32_t *layer_group);
/* One FULL group of n_blocks blocks holding every layer. */
vt_status kv_cache_init(kv_cache *kv, vt_dtype type_k, vt_dtype type_v, int64_t n_layer,
                        int64_t n_head_kv, int64_t head_dim, int64_t block_size, int64_t n_blocks);
void kv_cache_free(kv_cache *kv);

/* Layer il's storage. */
kv_layer kv_layer_of(const kv_cache *kv, int64_t il);

/* Take a free block (ref = 1), or -1 when none is free. */
int32_t kv_pool_alloc(kv_pool *p);
void kv_pool_retain(kv_pool *p, int32_t block);
/* Drop one reference; returns the remaining count (0: the block is free again). */
int32_t kv_pool_release(kv_pool *p, int32_t block);

/* The pool of group 0 (the only one of kv_cache_init). */
static inline kv_pool *kv_pool0(kv_cache *kv) { return &kv->groups[0].pool; }
static inline int32_t kv_block_alloc(kv_cache *kv) { return kv_pool_alloc(kv_pool0(kv)); }
static inline void kv_block_retain(kv_cache *kv, int32_t block) {
    kv_pool_retain(kv_pool0(kv), block);
}
static inline int32_t kv_block_release(kv_cache *kv, int32_t block) {
    return kv_pool_release(kv_pool0(kv), block);
}

/* The first block a sequence of a SWA group still needs once its first n_computed
 * positions are in the cache: the next token, at n_computed, sees positions from
 * n_computed - window + 1 on. Blocks before it can be released; 0 for FULL. */
static inline int64_t kv_first_needed_block(kv_group_kind kind, int64_t window, int64_t block_size,
                                            int64_t n_computed) {
    if (kind != KV_GROUP_SWA || n_computed - window + 1 <= 0) return 0;
    return (n_computed - window + 1) / block_size;
}

/* ---- a sequence's block tables ---------------------------------------------------
 * The serving engine's requests and vt_context's sequences keep, per attention
 * group g, a table blocks[g][0..n_blocks): position p in blocks[g][p / block_size].
 * A SWA group lets go of the blocks in front of its window as the sequence grows
 * (vLLM V1's SlidingWindowManager): table entries [0, n_released) are -1 then,
 * and the blocks went back to whoever hands them out (the pool, or the engine's
 * prefix cache over it). The functions below are the one implementation both
 * use. */

/* Takes back one block of group `group` that a sequence lets go (ctx: the owner). */
typedef void (*kv_release_fn)(void *ctx, int32_t group, int32_t block);

/* kv_release_fn over the cache's own pools (ctx: the kv_cache). */
void kv_release_to_pool(void *kv_cache_ptr, int32_t group, int32_t block);

/* Release the blocks of group g's table blocks[0..n_blocks) that the window of
 * the token at position next (the next one to compute) no longer reaches:
 * blocks[*n_released .. kv_first_needed_block(next)) go to release() and become
 * -1, and *n_released moves past them. Nothing for FULL and STATE groups.
 * Returns how many blocks were released. */
int64_t kv_release_passed(const kv_cache *kv, int32_t g, int32_t *blocks, int64_t n_blocks,
                          int64_t *n_released, int64_t next, kv_release_fn release, void *ctx);

/* The most blocks of block_size that n >= 1 consecutive positions can touch. */
static inline int64_t kv_span_blocks(int64_t n, int64_t block_size) {
    return n <= 1 ? 1 : (n - 2 + block_size) / block_size + 1;
}

/* Blocks a SWA group of `window` needs for n_seq sequences computed in passes of
 * up to n_step tokens: each sequence's window and the block of its next token
 * (kv_span_blocks(window)), so every sequence can always advance, plus the
 * blocks a pass of n_step tokens of one sequence adds when it starts on a block
 * boundary (what llama.cpp keeps: window + n_ubatch cells). A pass that would
 * need more is cut short where the pool runs out (vt_context does). */
static inline int64_t kv_swa_pool_blocks(int64_t window, int64_t block_size, int64_t n_seq,
                                         int64_t n_step) {
    return n_seq * kv_span_blocks(window, block_size) + (n_step + block_size - 1) / block_size - 1;
}

/* vLLM V1's prefix-cache hit rule for one group: the longest h <= max_hits such
 * that the first h whole blocks of a prompt can be served from group g's cached
 * blocks, where hit[i] is the cached block of prompt block i in this group (-1:
 * none), i < max_hits. A FULL group needs every block of [0, h); a SWA group
 * only those that the window of the next token (position h * block_size)
 * reaches, [kv_first_needed_block, h): what it released before need not be
 * there, and no other block is ever read. 0 when no prefix can be served. */
int64_t kv_longest_hit(kv_group_kind kind, int64_t window, int64_t block_size, const int32_t *hit,
                       int64_t max_hits);

/* One head's K in a block: block_size slots in the layout of cpu/attention.h
 * (the attention kernels' store_k and scores agree on it). Storage is layer,
 * then head, then block: one head's blocks with consecutive ids (what a
 * sequence gets from a fresh cache) are consecutive bytes, so a decode step's
 * attention reads each head's keys as one stream rather than 2 KiB pieces one
 * layer-block apart. */
static inline uint8_t *kv_k_head(const kv_layer *l, int32_t block, int64_t head) {
    return l->k + ((size_t)head * (size_t)l->n_blocks + (size_t)block) * (size_t)l->block_size *
                      l->row_bytes_k;
}
static inline uint8_t *kv_v_row(const kv_layer *l, int32_t block, int64_t head, int64_t slot) {
    return l->v + (((size_t)head * (size_t)l->n_blocks + (size_t)block) * (size_t)l->block_size +
                   (size_t)slot) * l->row_bytes_v;
}

/* A STATE group's slot of one layer (state_bytes, zeroed at init). */
static inline uint8_t *kv_state_slot(const kv_cache *kv, int64_t il, int32_t slot) {
    const kv_group *g = &kv->groups[kv->layer_group[il]];
    return g->k + ((size_t)kv->layer_index[il] * (size_t)g->spec.n_blocks + (size_t)slot) *
                      g->spec.state_bytes;
}

#endif
