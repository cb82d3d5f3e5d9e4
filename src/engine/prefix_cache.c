#include "engine/prefix_cache.h"

#include "base/status.h"

#include <stdlib.h>
#include <string.h>

static inline uint64_t mix64(uint64_t z) {
    /* the splitmix64 / murmur3 finalizer: full avalanche */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t pcache_hash(uint64_t parent, const int32_t *tokens, int64_t n) {
    uint64_t h = mix64(parent ^ 0x243f6a8885a308d3ull) + (uint64_t)n;
    for (int64_t i = 0; i < n; i++) h = mix64(h ^ ((uint64_t)(uint32_t)tokens[i] * 0x9e3779b97f4a7c15ull));
    /* 0 stands for "no parent": keep real hashes away from it */
    return h ? h : 1;
}

vt_status pcache_init(pcache *c, kv_pool *pool, int64_t block_size, bool enabled) {
    memset(c, 0, sizeof *c);
    c->pool = pool;
    c->enabled = enabled;
    c->block_size = block_size;
    const size_t nb = (size_t)pool->n_blocks;
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)nb) cap <<= 1;
    c->table_mask = cap - 1;
    c->hash = calloc(nb, sizeof *c->hash);
    c->parent = calloc(nb, sizeof *c->parent);
    c->tokens = enabled ? malloc(nb * (size_t)c->block_size * sizeof *c->tokens) : NULL;
    c->indexed = calloc(nb, 1);
    c->in_lru = calloc(nb, 1);
    c->lru_prev = malloc(nb * sizeof *c->lru_prev);
    c->lru_next = malloc(nb * sizeof *c->lru_next);
    c->table = malloc(cap * sizeof *c->table);
    if (!c->hash || !c->parent || (enabled && !c->tokens) || !c->indexed || !c->in_lru ||
        !c->lru_prev || !c->lru_next || !c->table) {
        pcache_free(c);
        return vt_errorf(VT_E_NOMEM, "prefix cache: out of memory for %zu blocks", nb);
    }
    for (uint64_t i = 0; i < cap; i++) c->table[i] = -1;
    c->lru_head = c->lru_tail = -1;
    return VT_OK;
}

void pcache_free(pcache *c) {
    free(c->hash);
    free(c->parent);
    free(c->tokens);
    free(c->indexed);
    free(c->in_lru);
    free(c->lru_prev);
    free(c->lru_next);
    free(c->table);
    memset(c, 0, sizeof *c);
}

static void lru_push(pcache *c, int32_t b) {
    VT_ASSERT(!c->in_lru[b]);
    c->lru_prev[b] = c->lru_tail;
    c->lru_next[b] = -1;
    if (c->lru_tail >= 0) c->lru_next[c->lru_tail] = b;
    else c->lru_head = b;
    c->lru_tail = b;
    c->in_lru[b] = 1;
    c->n_lru++;
}

static void lru_remove(pcache *c, int32_t b) {
    VT_ASSERT(c->in_lru[b]);
    const int32_t p = c->lru_prev[b], n = c->lru_next[b];
    if (p >= 0) c->lru_next[p] = n;
    else c->lru_head = n;
    if (n >= 0) c->lru_prev[n] = p;
    else c->lru_tail = p;
    c->in_lru[b] = 0;
    c->n_lru--;
}

/* Slot of `block` in the table (it must be there). */
static uint64_t table_slot_of(const pcache *c, int32_t block) {
    for (uint64_t i = c->hash[block] & c->table_mask;; i = (i + 1) & c->table_mask) {
        VT_ASSERT(c->table[i] >= 0);
        if (c->table[i] == block) return i;
    }
}

/* Linear probing with backward-shift deletion: no tombstones. */
static void table_remove(pcache *c, int32_t block) {
    uint64_t i = table_slot_of(c, block);
    for (;;) {
        c->table[i] = -1;
        uint64_t j = i;
        for (;;) {
            j = (j + 1) & c->table_mask;
            const int32_t b = c->table[j];
            if (b < 0) return;
            const uint64_t home = c->hash[b] & c->table_mask;
            /* b may move to i if its home is not in (i, j] (cyclically) */
            const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
            if (!stays) {
                c->table[i] = b;
                i = j;
                break;
            }
        }
    }
}

static void unindex(pcache *c, int32_t block) {
    table_remove(c, block);
    c->indexed[block] = 0;
    c->n_indexed--;
}

int32_t pcache_alloc(pcache *c) {
    int32_t b = kv_pool_alloc(c->pool);
    if (b >= 0) return b;
    if (c->lru_head < 0) return -1;
    const int32_t victim = c->lru_head;
    lru_remove(c, victim);
    unindex(c, victim);
    VT_ASSERT(kv_pool_release(c->pool, victim) == 0);
    c->evictions++;
    b = kv_pool_alloc(c->pool);
    VT_ASSERT(b >= 0);
    return b;
}

int64_t pcache_available(const pcache *c) { return c->pool->n_free + c->n_lru; }

void pcache_retain(pcache *c, int32_t block) {
    if (c->in_lru[block]) lru_remove(c, block);
    kv_pool_retain(c->pool, block);
}

void pcache_release(pcache *c, int32_t block) {
    const int32_t left = kv_pool_release(c->pool, block);
    if (left == 1 && c->indexed[block]) lru_push(c, block);
}

int32_t pcache_lookup(const pcache *c, uint64_t parent, uint64_t hash, const int32_t *tokens) {
    if (!c->enabled) return -1;
    const size_t bytes = (size_t)c->block_size * sizeof(int32_t);
    for (uint64_t i = hash & c->table_mask;; i = (i + 1) & c->table_mask) {
        const int32_t b = c->table[i];
        if (b < 0) return -1;
        if (c->hash[b] == hash && c->parent[b] == parent &&
            !memcmp(c->tokens + (size_t)b * (size_t)c->block_size, tokens, bytes))
            return b;
    }
}

bool pcache_insert(pcache *c, int32_t block, uint64_t parent, uint64_t hash,
                   const int32_t *tokens) {
    if (!c->enabled || c->indexed[block]) return false;
    uint64_t i = hash & c->table_mask;
    for (;; i = (i + 1) & c->table_mask) {
        const int32_t b = c->table[i];
        if (b < 0) break;
        if (c->hash[b] == hash) return false; /* same key (or a collision): keep the first */
    }
    VT_ASSERT(c->n_indexed < c->pool->n_blocks);
    c->table[i] = block;
    c->hash[block] = hash;
    c->parent[block] = parent;
    memcpy(c->tokens + (size_t)block * (size_t)c->block_size, tokens,
           (size_t)c->block_size * sizeof(int32_t));
    c->indexed[block] = 1;
    c->n_indexed++;
    kv_pool_retain(c->pool, block); /* the cache's own reference */
    return true;
}

bool pcache_evict_lru(pcache *c) {
    const int32_t b = c->lru_head;
    if (b < 0) return false;
    lru_remove(c, b);
    unindex(c, b);
    VT_ASSERT(kv_pool_release(c->pool, b) == 0);
    c->evictions++;
    return true;
}

void pcache_evict_all(pcache *c) {
    while (c->lru_head >= 0) {
        const int32_t b = c->lru_head;
        lru_remove(c, b);
        unindex(c, b);
        VT_ASSERT(kv_pool_release(c->pool, b) == 0);
        c->evictions++;
    }
}
