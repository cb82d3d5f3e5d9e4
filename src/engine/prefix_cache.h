/* The prefix cache and the block allocator of the serving engine.
 *
 * Every full KV block that a sequence has computed is indexed by a hash chain:
 *   hash(block i) = H(hash(block i-1), the block's block_size token ids), hash(-1) = 0
 * so a block's key stands for the whole prefix up to its end. A new request walks
 * its prompt block by block and reuses the longest run of indexed blocks. H is a
 * 64-bit multiply-xorshift mix; on a hit the stored parent hash and token ids are
 * compared as well, so a hash collision can only cost a miss, never a wrong hit.
 *
 * Ownership: an indexed block carries one reference held by the cache itself, on
 * top of one per sequence whose block table lists it. A block whose only holder is
 * the cache is "cached": free for all purposes but still reusable; such blocks sit
 * on an LRU list. The pool's free list holds exactly the blocks nobody (not even
 * the cache) references, so the two never disagree. pcache_alloc takes a block
 * from the free list and, when that is empty, evicts the least recently released
 * cached block (unindexes it and drops the cache's reference).
 *
 * With the cache disabled (enabled = false) nothing is ever indexed and this is a
 * plain allocator over the pool. One pcache serves one group of the KV cache
 * (kvcache/kv_cache.h): each group has its own pool, and its own index of the
 * same chain hashes. Not thread-safe: the engine loop owns it. */
#ifndef VT_ENGINE_PREFIX_CACHE_H
#define VT_ENGINE_PREFIX_CACHE_H

#include "kvcache/kv_cache.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct pcache {
    kv_pool *pool;
    bool enabled;
    int64_t block_size;
    /* per block (pool->n_blocks) */
    uint64_t *hash;        /* chain hash of the indexed block */
    uint64_t *parent;      /* hash of the block before it (0 for the first) */
    int32_t *tokens;       /* (n_blocks, block_size) token ids of the indexed block */
    uint8_t *indexed;      /* 1: in the table, the cache holds a reference */
    int32_t *lru_prev, *lru_next; /* LRU links of cached blocks (-1: none) */
    uint8_t *in_lru;
    int32_t lru_head, lru_tail; /* head: the next to evict */
    int64_t n_lru;         /* cached blocks (only the cache references them) */
    int64_t n_indexed;
    /* open-addressing table of block ids keyed by hash (-1: empty) */
    int32_t *table;
    uint64_t table_mask;
    int64_t evictions;
} pcache;

/* Chain hash of one block: parent hash and n token ids. */
uint64_t pcache_hash(uint64_t parent, const int32_t *tokens, int64_t n);

/* An index over pool, whose blocks hold block_size tokens each. */
vt_status pcache_init(pcache *c, kv_pool *pool, int64_t block_size, bool enabled);
void pcache_free(pcache *c);

/* A block for new KV (ref 1, owned by the caller), evicting the least recently
 * used cached block when the free list is empty; -1 when every block is in use. */
int32_t pcache_alloc(pcache *c);
/* Blocks pcache_alloc could hand out now (free + cached). */
int64_t pcache_available(const pcache *c);
/* A sequence takes a reference on a block it found with pcache_lookup. */
void pcache_retain(pcache *c, int32_t block);
/* A sequence drops its reference; an indexed block whose last sequence lets go
 * becomes cached (most recently used end of the LRU). */
void pcache_release(pcache *c, int32_t block);

/* The indexed block for (parent, hash, tokens), or -1. Does not take a reference. */
int32_t pcache_lookup(const pcache *c, uint64_t parent, uint64_t hash, const int32_t *tokens);
/* Index a full, computed block held by the caller. No-op (returns false) when the
 * cache is disabled, the block is already indexed, or another block already has
 * this key (the caller's copy then stays private and is freed normally). */
bool pcache_insert(pcache *c, int32_t block, uint64_t parent, uint64_t hash,
                   const int32_t *tokens);
/* Evict the least recently used cached block; false when none is cached. */
bool pcache_evict_lru(pcache *c);
/* Evict every cached block (ref held only by the cache); used blocks stay indexed. */
void pcache_evict_all(pcache *c);

#endif
