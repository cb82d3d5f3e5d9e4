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

vt_status kv_groups_from_windows(int64_t n_layer, const int64_t *window, kv_group_spec *specs,
                                 int32_t *layer_group, int32_t *n_groups) {
    int32_t n = 0;
    for (int64_t il = 0; il < n_layer; il++) {
        const int64_t w = window ? window[il] : 0;
        if (w < 0)
            return vt_errorf(VT_E_INVALID, "layer %lld: sliding window %lld", (long long)il, (long long)w);
        /* FULL goes first whatever the layer order, so a model with any full
         * layer has it as group 0 */
        if (w == 0 && (n == 0 || specs[0].kind != KV_GROUP_FULL)) {
            if (n == KV_MAX_GROUPS) goto too_many;
            memmove(specs + 1, specs, sizeof *specs * (size_t)n);
            for (int64_t j = 0; j < il; j++) layer_group[j]++;
            specs[0] = (kv_group_spec){.kind = KV_GROUP_FULL};
            n++;
        }
        int32_t g = 0;
        while (g < n && !(w == 0 ? specs[g].kind == KV_GROUP_FULL
                                 : specs[g].kind == KV_GROUP_SWA && specs[g].window == w))
            g++;
        if (g == n) {
            if (n == KV_MAX_GROUPS) goto too_many;
            specs[n++] = (kv_group_spec){.kind = KV_GROUP_SWA, .window = w};
        }
        layer_group[il] = g;
    }
    *n_groups = n;
    return VT_OK;
too_many:
    return vt_errorf(VT_E_UNSUPPORTED, "the layers need more than %d KV cache groups (distinct windows)",
                     KV_MAX_GROUPS);
}

static vt_status pool_init(kv_pool *p, int64_t n_blocks) {
    p->n_blocks = n_blocks;
    p->free_list = malloc((size_t)n_blocks * sizeof *p->free_list);
    p->ref = calloc((size_t)n_blocks, sizeof *p->ref);
    if (!p->free_list || !p->ref)
        return vt_errorf(VT_E_NOMEM, "KV cache: out of memory for %lld block ids", (long long)n_blocks);
    /* Lowest ids on top, so allocation order is predictable. */
    for (int64_t i = 0; i < n_blocks; i++) p->free_list[i] = (int32_t)(n_blocks - 1 - i);
    p->n_free = n_blocks;
    return VT_OK;
}

vt_status kv_cache_init_groups(kv_cache *kv, vt_dtype type_k, vt_dtype type_v, int64_t n_layer,
                               int64_t n_head_kv, int64_t head_dim, int64_t block_size,
                               const kv_group_spec *specs, int32_t n_groups,
                               const int32_t *layer_group) {
    memset(kv, 0, sizeof *kv);
    if (block_size <= 0 || n_groups <= 0 || n_groups > KV_MAX_GROUPS || n_layer <= 0)
        return vt_errorf(VT_E_INVALID, "KV cache: %d groups of blocks of %lld tokens is invalid",
                         n_groups, (long long)block_size);
    kv->type_k = type_k;
    kv->type_v = type_v;
    kv->n_layer = n_layer;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->block_size = block_size;
    kv->n_groups = n_groups;
    if (!quant_row_bytes(type_k, head_dim, &kv->row_bytes_k) ||
        !quant_row_bytes(type_v, head_dim, &kv->row_bytes_v))
        return vt_errorf(VT_E_UNSUPPORTED,
                         "KV cache type %s/%s needs a head size that is a multiple of its block "
                         "(head size %lld)",
                         quant_traits_get(type_k)->name, quant_traits_get(type_v)->name,
                         (long long)head_dim);
    kv->block_bytes_k = kv->row_bytes_k * (size_t)block_size * (size_t)n_head_kv;
    kv->block_bytes_v = kv->row_bytes_v * (size_t)block_size * (size_t)n_head_kv;
    vt_status s = VT_OK;
    kv->layer_group = malloc(sizeof(int32_t) * (size_t)n_layer);
    kv->layer_index = malloc(sizeof(int32_t) * (size_t)n_layer);
    if (!kv->layer_group || !kv->layer_index) {
        s = vt_errorf(VT_E_NOMEM, "KV cache: out of memory");
        goto fail;
    }
    for (int64_t il = 0; il < n_layer; il++) {
        const int32_t g = layer_group ? layer_group[il] : 0;
        if (g < 0 || g >= n_groups) {
            s = vt_errorf(VT_E_INVALID, "KV cache: layer %lld in group %d of %d", (long long)il, g, n_groups);
            goto fail;
        }
        kv->layer_group[il] = g;
        kv->layer_index[il] = (int32_t)kv->groups[g].n_layer++;
    }
    for (int32_t g = 0; g < n_groups; g++) {
        kv_group *G = &kv->groups[g];
        const kv_group_spec *sp = &specs[g];
        G->spec = *sp;
        if (sp->n_blocks <= 0 || sp->n_blocks > INT32_MAX || G->n_layer == 0 ||
            (sp->kind == KV_GROUP_SWA && sp->window < 1) ||
            (sp->kind == KV_GROUP_STATE && sp->state_bytes == 0)) {
            s = vt_errorf(VT_E_INVALID,
                          "KV cache group %d: %lld blocks, %lld layers, window %lld, state %zu bytes "
                          "is invalid",
                          g, (long long)sp->n_blocks, (long long)G->n_layer, (long long)sp->window,
                          sp->state_bytes);
            goto fail;
        }
        const size_t per_k = sp->kind == KV_GROUP_STATE ? sp->state_bytes : kv->block_bytes_k;
        const size_t per_v = sp->kind == KV_GROUP_STATE ? 0 : kv->block_bytes_v;
        size_t units;
        if (!size_mul((size_t)sp->n_blocks, (size_t)G->n_layer, &units) ||
            !size_mul(per_k, units, &G->k_bytes) || !size_mul(per_v, units, &G->v_bytes)) {
            s = vt_errorf(VT_E_NOMEM, "KV cache size overflows");
            goto fail;
        }
        /* zeroed: the K kernels may load a whole vector of slots past the last
         * valid one inside a block (those lanes are discarded, but are read); in
         * huge pages: every decode step sweeps a sequence's blocks (base/hugemem.h) */
        G->k = hugemem_alloc(G->k_bytes);
        G->v = G->v_bytes ? hugemem_alloc(G->v_bytes) : NULL;
        if (!G->k || (G->v_bytes && !G->v)) {
            s = vt_errorf(VT_E_NOMEM, "KV cache: cannot allocate %.1f MiB (%lld blocks of %lld tokens)",
                          (double)(G->k_bytes + G->v_bytes) / (1024.0 * 1024.0),
                          (long long)sp->n_blocks, (long long)block_size);
            goto fail;
        }
        if ((s = pool_init(&G->pool, sp->n_blocks)) != VT_OK) goto fail;
    }
    return VT_OK;
fail:
    kv_cache_free(kv);
    return s;
}

vt_status kv_cache_init(kv_cache *kv, vt_dtype type_k, vt_dtype type_v, int64_t n_layer,
                        int64_t n_head_kv, int64_t head_dim, int64_t block_size, int64_t n_blocks) {
    const kv_group_spec full = {.kind = KV_GROUP_FULL, .n_blocks = n_blocks};
    return kv_cache_init_groups(kv, type_k, type_v, n_layer, n_head_kv, head_dim, block_size, &full, 1,
                                NULL);
}

void kv_cache_free(kv_cache *kv) {
    for (int32_t g = 0; g < KV_MAX_GROUPS; g++) {
        kv_group *G = &kv->groups[g];
        hugemem_free(G->k, G->k_bytes);
        hugemem_free(G->v, G->v_bytes);
        free(G->pool.free_list);
        free(G->pool.ref);
    }
    free(kv->layer_group);
    free(kv->layer_index);
    memset(kv, 0, sizeof *kv);
}

kv_layer kv_layer_of(const kv_cache *kv, int64_t il) {
    const int32_t g = kv->layer_group[il];
    const kv_group *G = &kv->groups[g];
    VT_ASSERT(G->spec.kind != KV_GROUP_STATE);
    const size_t units = (size_t)kv->layer_index[il] * (size_t)G->spec.n_blocks;
    return (kv_layer){.k = G->k + units * kv->block_bytes_k,
                      .v = G->v + units * kv->block_bytes_v,
                      .n_blocks = G->spec.n_blocks,
                      .block_size = kv->block_size,
                      .head_dim = kv->head_dim,
                      .row_bytes_k = kv->row_bytes_k,
                      .row_bytes_v = kv->row_bytes_v,
                      .group = g,
                      .kind = G->spec.kind,
                      .window = G->spec.kind == KV_GROUP_SWA ? G->spec.window : 0};
}

int32_t kv_pool_alloc(kv_pool *p) {
    if (p->n_free == 0) return -1;
    int32_t b = p->free_list[--p->n_free];
    VT_ASSERT(p->ref[b] == 0);
    p->ref[b] = 1;
    if (p->n_blocks - p->n_free > p->n_used_max) p->n_used_max = p->n_blocks - p->n_free;
    return b;
}

void kv_pool_retain(kv_pool *p, int32_t block) {
    VT_ASSERT(block >= 0 && block < p->n_blocks);
    if (p->ref[block] == 0) {
        /* Reviving a free block (the prefix cache does this): take it off the free list. */
        for (int64_t i = 0; i < p->n_free; i++) {
            if (p->free_list[i] == block) {
                p->free_list[i] = p->free_list[--p->n_free];
                break;
            }
        }
        if (p->n_blocks - p->n_free > p->n_used_max) p->n_used_max = p->n_blocks - p->n_free;
    }
    p->ref[block]++;
}

int32_t kv_pool_release(kv_pool *p, int32_t block) {
    VT_ASSERT(block >= 0 && block < p->n_blocks && p->ref[block] > 0);
    if (--p->ref[block] == 0) p->free_list[p->n_free++] = block;
    return p->ref[block];
}

void kv_release_to_pool(void *kv_cache_ptr, int32_t group, int32_t block) {
    kv_cache *kv = kv_cache_ptr;
    kv_pool_release(&kv->groups[group].pool, block);
}

int64_t kv_release_passed(const kv_cache *kv, int32_t g, int32_t *blocks, int64_t n_blocks,
                          int64_t *n_released, int64_t next, kv_release_fn release, void *ctx) {
    const kv_group_spec *sp = &kv->groups[g].spec;
    int64_t end = kv_first_needed_block(sp->kind, sp->window, kv->block_size, next);
    if (end > n_blocks) end = n_blocks;
    int64_t n = 0;
    for (int64_t i = *n_released; i < end; i++, n++) {
        VT_ASSERT(blocks[i] >= 0);
        release(ctx, g, blocks[i]);
        blocks[i] = -1;
    }
    if (end > *n_released) *n_released = end;
    return n;
}

int64_t kv_longest_hit(kv_group_kind kind, int64_t window, int64_t block_size, const int32_t *hit,
                       int64_t max_hits) {
    /* From the longest candidate down: h is served when its needed blocks
     * [first, h) are all there. Where block i - 1 is missing, every candidate
     * in [i, h] needs it too (the first needed block only moves forward with
     * h), so the next candidate is i - 1: each block is looked at once. */
    for (int64_t h = max_hits; h > 0;) {
        const int64_t first = kv_first_needed_block(kind, window, block_size, h * block_size);
        int64_t i = h;
        while (i > first && hit[i - 1] >= 0) i--;
        if (i == first) return h;
        h = i - 1;
    }
    return 0;
}
