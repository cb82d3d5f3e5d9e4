#include "kvcache/kv_cache.h"

#include "base/hugemem.h"
#include "base/size.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

vt_status kv_dtype_of(vt_kv_type t, vt_dtype *out) {
    switch (t) {
    case VT_KV_F16: *out = VT_DTYPE_F16; return VT_OK;
    case VT_KV_BF16: *out = VT_DTYPE_BF16; return VT_OK;
    case VT_KV_F32: *out = VT_DTYPE_F32; return VT_OK;
    case VT_KV_Q8_0: *out = VT_DTYPE_Q8_0; return VT_OK;
    }
    return vt_errorf(VT_E_INVALID, "unknown KV cache type %d", (int)t);
}

size_t kv_bytes_per_token(vt_dtype type_k, vt_dtype type_v, int64_t n_layer, int64_t n_head_kv,
                          int64_t head_dim) {
    size_t rk = 0, rv = 0;
    quant_row_bytes(type_k, head_dim, &rk);
    quant_row_bytes(type_v, head_dim, &rv);
    return (rk + rv) * (size_t)n_head_kv * (size_t)n_layer;
}

vt_status kv_cache_init(kv_cache *kv, vt_dtype type_k, vt_dtype type_v, int64_t n_layer,
                        int64_t n_head_kv, int64_t head_dim, int64_t block_size, int64_t n_blocks) {
    memset(kv, 0, sizeof *kv);
    if (block_size <= 0 || n_blocks <= 0 || n_blocks > INT32_MAX)
        return vt_errorf(VT_E_INVALID, "KV cache: %lld blocks of %lld tokens is invalid",
                         (long long)n_blocks, (long long)block_size);
    kv->type_k = type_k;
    kv->type_v = type_v;
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    if (!quant_row_bytes(type_k, head_dim, &kv->row_bytes_k) ||
        !quant_row_bytes(type_v, head_dim, &kv->row_bytes_v))
        return vt_errorf(VT_E_UNSUPPORTED,
                         "KV cache type %s/%s needs a head size that is a multiple of its block "
                         "(head size %lld)",
                         quant_traits_get(type_k)->name, quant_traits_get(type_v)->name,
                         (long long)head_dim);
    kv->block_bytes_k = kv->row_bytes_k * (size_t)block_size * (size_t)n_head_kv;
    kv->block_bytes_v = kv->row_bytes_v * (size_t)block_size * (size_t)n_head_kv;
    size_t bk, bv;
    if (!size_mul(kv->block_bytes_k, (size_t)(n_blocks * n_layer), &bk) ||
        !size_mul(kv->block_bytes_v, (size_t)(n_blocks * n_layer), &bv))
        return vt_errorf(VT_E_NOMEM, "KV cache size overflows");
    /* zeroed: the K kernels may load a whole vector of slots past the last
     * valid one inside a block (those lanes are discarded, but are read); in
     * huge pages: every decode step sweeps a sequence's blocks (base/hugemem.h) */
    kv->k = hugemem_alloc(bk);
    kv->v = hugemem_alloc(bv);
    kv->free_list = malloc((size_t)n_blocks * sizeof *kv->free_list);
    kv->ref = calloc((size_t)n_blocks, sizeof *kv->ref);
    if (!kv->k || !kv->v || !kv->free_list || !kv->ref) {
        kv_cache_free(kv);
        return vt_errorf(VT_E_NOMEM, "KV cache: cannot allocate %.1f MiB (%lld blocks of %lld tokens)",
                         (double)(bk + bv) / (1024.0 * 1024.0), (long long)n_blocks,
                         (long long)block_size);
    }
    /* Lowest ids on top, so allocation order is predictable. */
    for (int64_t i = 0; i < n_blocks; i++) kv->free_list[i] = (int32_t)(n_blocks - 1 - i);
    kv->n_free = n_blocks;
    return VT_OK;
}

void kv_cache_free(kv_cache *kv) {
    const size_t blocks = (size_t)(kv->n_blocks * kv->n_layer);
    hugemem_free(kv->k, kv->block_bytes_k * blocks);
    hugemem_free(kv->v, kv->block_bytes_v * blocks);
    free(kv->free_list);
    free(kv->ref);
    memset(kv, 0, sizeof *kv);
}

int32_t kv_block_alloc(kv_cache *kv) {
    if (kv->n_free == 0) return -1;
    int32_t b = kv->free_list[--kv->n_free];
    VT_ASSERT(kv->ref[b] == 0);
    kv->ref[b] = 1;
    return b;
}

void kv_block_retain(kv_cache *kv, int32_t block) {
    VT_ASSERT(block >= 0 && block < kv->n_blocks);
    if (kv->ref[block] == 0) {
        /* Reviving a free block (the prefix cache does this): take it off the free list. */
        for (int64_t i = 0; i < kv->n_free; i++) {
            if (kv->free_list[i] == block) {
                kv->free_list[i] = kv->free_list[--kv->n_free];
                break;
            }
        }
    }
    kv->ref[block]++;
}

int32_t kv_block_release(kv_cache *kv, int32_t block) {
    VT_ASSERT(block >= 0 && block < kv->n_blocks && kv->ref[block] > 0);
    if (--kv->ref[block] == 0) kv->free_list[kv->n_free++] = block;
    return kv->ref[block];
}
