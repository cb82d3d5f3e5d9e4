/* The paged KV cache: a pool of fixed-size blocks and per-block reference counts.
 *
 * Storage is (n_layer, n_head_kv, n_blocks, block_size x head_dim) for K and for V,
 * each in its own dtype (F16 by default, BF16, F32 or Q8_0). A sequence owns a
 * block table: token position p lives in block table[p / block_size] at slot
 * p % block_size. Head-major blocks keep one head's slots contiguous, which is
 * what attention streams through; inside a head's block V is row-major and K is
 * laid out as cpu/attention.h says (dim-major for the float types).
 *
 * Blocks are reference counted so that the prefix cache can share full blocks
 * between sequences; a block returns to the free list when its count drops to 0. */
#ifndef VT_KVCACHE_KV_CACHE_H
#define VT_KVCACHE_KV_CACHE_H

#include "quant/quant.h"
#include "vt.h"

#include <stddef.h>
#include <stdint.h>

typedef struct kv_cache {
    vt_dtype type_k, type_v;
    int64_t n_layer, n_head_kv, head_dim;
    int64_t block_size; /* tokens per block */
    int64_t n_blocks;
    size_t row_bytes_k, row_bytes_v;     /* one head's row of head_dim */
    size_t block_bytes_k, block_bytes_v; /* one layer's block, all heads */
    uint8_t *k, *v;

    int32_t *free_list; /* stack of free block ids */
    int64_t n_free;
    int32_t *ref;       /* (n_blocks) reference counts */
} kv_cache;

/* The dtype that stores a vt_kv_type; VT_E_INVALID for an unknown one. */
vt_status kv_dtype_of(vt_kv_type t, vt_dtype *out);

/* Bytes of K+V storage per token (all layers). */
size_t kv_bytes_per_token(vt_dtype type_k, vt_dtype type_v, int64_t n_layer, int64_t n_head_kv,
                          int64_t head_dim);

/* Allocate n_blocks blocks. VT_E_NOMEM (saying how much) if the memory is not there;
 * VT_E_UNSUPPORTED if head_dim does not fit the block size of a quantized type. */
vt_status kv_cache_init(kv_cache *kv, vt_dtype type_k, vt_dtype type_v, int64_t n_layer,
                        int64_t n_head_kv, int64_t head_dim, int64_t block_size, int64_t n_blocks);
void kv_cache_free(kv_cache *kv);

/* Take a free block (ref = 1), or -1 when none is free. */
int32_t kv_block_alloc(kv_cache *kv);
void kv_block_retain(kv_cache *kv, int32_t block);
/* Drop one reference; returns the remaining count (0: the block is free again). */
int32_t kv_block_release(kv_cache *kv, int32_t block);

/* One head's K in a block: block_size slots in the layout of cpu/attention.h
 * (the attention kernels' store_k and scores agree on it). Storage is layer,
 * then head, then block: one head's blocks with consecutive ids (what a
 * sequence gets from a fresh cache) are consecutive bytes, so a decode step's
 * attention reads each head's keys as one stream rather than 2 KiB pieces one
 * layer-block apart. */
static inline uint8_t *kv_k_head(const kv_cache *kv, int64_t layer, int32_t block, int64_t head) {
    return kv->k + (((size_t)layer * (size_t)kv->n_head_kv + (size_t)head) * (size_t)kv->n_blocks +
                    (size_t)block) * (size_t)kv->block_size * kv->row_bytes_k;
}
static inline uint8_t *kv_v_row(const kv_cache *kv, int64_t layer, int32_t block, int64_t head,
                                int64_t slot) {
    return kv->v + ((((size_t)layer * (size_t)kv->n_head_kv + (size_t)head) * (size_t)kv->n_blocks +
                     (size_t)block) * (size_t)kv->block_size + (size_t)slot) * kv->row_bytes_v;
}

#endif
