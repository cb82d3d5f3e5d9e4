/* The prefix cache over a small KV pool: hash chains, hits that compare tokens
 * (a forced hash collision is a miss), LRU eviction order, revival of cached
 * blocks, the reference accounting against kv_cache's free list, the disabled mode. */
#include "test.h"

#include "engine/prefix_cache.h"

static void check_accounting(const pcache *c) {
    int64_t zero = 0, only_cache = 0;
    for (int64_t b = 0; b < c->pool->n_blocks; b++) {
        zero += c->pool->ref[b] == 0;
        only_cache += c->pool->ref[b] == 1 && c->indexed[b] && c->in_lru[b];
        if (c->in_lru[b]) CHECK(c->pool->ref[b] == 1 && c->indexed[b]);
        if (c->indexed[b]) CHECK(c->pool->ref[b] >= 1);
    }
    CHECK_EQ_INT(zero, c->pool->n_free);
    CHECK_EQ_INT(only_cache, c->n_lru);
}

int main(void) {
    const int64_t bs = 4, nb = 6;
    kv_cache kv;
    CHECK_OK(kv_cache_init(&kv, VT_DTYPE_F32, VT_DTYPE_F32, 1, 1, 4, bs, nb));
    pcache c;
    CHECK_OK(pcache_init(&c, kv_pool0(&kv), bs, true));

    /* hashes: deterministic, chained, sensitive to every token and to the parent */
    const int32_t t0[4] = {1, 2, 3, 4}, t1[4] = {5, 6, 7, 8}, t1b[4] = {5, 6, 7, 9};
    const uint64_t h0 = pcache_hash(0, t0, bs), h1 = pcache_hash(h0, t1, bs);
    CHECK(h0 == pcache_hash(0, t0, bs));
    CHECK(h0 != 0 && h1 != 0 && h0 != h1);
    CHECK(pcache_hash(h0, t1b, bs) != h1);
    CHECK(pcache_hash(h1, t1, bs) != h1);
    CHECK(pcache_hash(0, t1, bs) != h1);

    /* a sequence computes two blocks and offers them */
    const int32_t a = pcache_alloc(&c), b = pcache_alloc(&c);
    CHECK(a >= 0 && b >= 0 && a != b);
    CHECK(pcache_insert(&c, a, 0, h0, t0));
    CHECK(pcache_insert(&c, b, h0, h1, t1));
    CHECK(!pcache_insert(&c, b, h0, h1, t1)); /* already indexed */
    CHECK_EQ_INT(kv_pool0(&kv)->ref[a], 2);
    CHECK_EQ_INT(pcache_lookup(&c, 0, h0, t0), a);
    CHECK_EQ_INT(pcache_lookup(&c, h0, h1, t1), b);
    CHECK_EQ_INT(pcache_lookup(&c, h0, pcache_hash(h0, t1b, bs), t1b), -1);
    /* same key, different tokens (a collision): a miss, never a wrong hit */
    CHECK_EQ_INT(pcache_lookup(&c, h0, h1, t1b), -1);
    CHECK_EQ_INT(pcache_lookup(&c, 7, h1, t1), -1); /* wrong parent */
    /* a second block with a key already present stays private */
    const int32_t dup = pcache_alloc(&c);
    CHECK(!pcache_insert(&c, dup, 0, h0, t0));
    CHECK_EQ_INT(kv_pool0(&kv)->ref[dup], 1);
    pcache_release(&c, dup);
    CHECK_EQ_INT(kv_pool0(&kv)->ref[dup], 0);
    check_accounting(&c);

    /* the sequence ends: both blocks become cached (free but reusable) */
    pcache_release(&c, b);
    pcache_release(&c, a);
    CHECK_EQ_INT(c.n_lru, 2);
    CHECK_EQ_INT(pcache_available(&c), nb);
    check_accounting(&c);

    /* a new sequence revives a: off the LRU, two holders again */
    CHECK_EQ_INT(pcache_lookup(&c, 0, h0, t0), a);
    pcache_retain(&c, a);
    CHECK_EQ_INT(kv_pool0(&kv)->ref[a], 2);
    CHECK_EQ_INT(c.n_lru, 1);
    CHECK_EQ_INT(pcache_available(&c), nb - 1);
    check_accounting(&c);

    /* take every free block, then one more: b (the only cached one) is evicted */
    int32_t got[8];
    int n_got = 0;
    while (kv_pool0(&kv)->n_free > 0) got[n_got++] = pcache_alloc(&c);
    CHECK_EQ_INT(n_got, nb - 2);
    const int32_t ev = pcache_alloc(&c);
    CHECK_EQ_INT(ev, b);
    CHECK_EQ_INT(c.evictions, 1);
    CHECK_EQ_INT(pcache_lookup(&c, h0, h1, t1), -1);
    CHECK_EQ_INT(pcache_alloc(&c), -1); /* a is in use: nothing left */
    check_accounting(&c);
    pcache_release(&c, ev);
    for (int i = 0; i < n_got; i++) pcache_release(&c, got[i]);
    pcache_release(&c, a);
    check_accounting(&c);

    /* LRU order: blocks released earlier are evicted first */
    int32_t blk[6];
    uint64_t hs[6];
    int32_t toks[6][4];
    for (int i = 0; i < 6; i++) {
        blk[i] = pcache_alloc(&c);
        CHECK(blk[i] >= 0);
        for (int j = 0; j < 4; j++) toks[i][j] = 100 + 4 * i + j;
        hs[i] = pcache_hash(0, toks[i], bs);
        pcache_insert(&c, blk[i], 0, hs[i], toks[i]); /* may evict a, which is cached */
    }
    CHECK_EQ_INT(pcache_lookup(&c, 0, h0, t0), -1); /* a went when the pool ran dry */
    const int order[6] = {3, 0, 5, 1, 4, 2};
    for (int i = 0; i < 6; i++) pcache_release(&c, blk[order[i]]);
    CHECK_EQ_INT(c.n_lru, 6);
    CHECK_EQ_INT(kv_pool0(&kv)->n_free, 0);
    int32_t taken[3];
    for (int i = 0; i < 3; i++) {
        taken[i] = pcache_alloc(&c);
        CHECK_EQ_INT(taken[i], blk[order[i]]);
        CHECK_EQ_INT(pcache_lookup(&c, 0, hs[order[i]], toks[order[i]]), -1);
    }
    for (int i = 0; i < 3; i++) pcache_release(&c, taken[i]);
    for (int i = 3; i < 6; i++)
        CHECK_EQ_INT(pcache_lookup(&c, 0, hs[order[i]], toks[order[i]]), blk[order[i]]);
    check_accounting(&c);
    pcache_evict_all(&c);
    CHECK_EQ_INT(kv_pool0(&kv)->n_free, nb);
    CHECK_EQ_INT(c.n_indexed, 0);
    for (int64_t i = 0; i < nb; i++) CHECK_EQ_INT(kv_pool0(&kv)->ref[i], 0);
    /* the table still works after all those removals */
    const int32_t z = pcache_alloc(&c);
    CHECK(pcache_insert(&c, z, 0, h0, t0));
    CHECK_EQ_INT(pcache_lookup(&c, 0, h0, t0), z);
    pcache_release(&c, z);
    pcache_evict_all(&c);
    CHECK_EQ_INT(kv_pool0(&kv)->n_free, nb);
    pcache_free(&c);

    /* disabled: a plain allocator, nothing indexed */
    CHECK_OK(pcache_init(&c, kv_pool0(&kv), bs, false));
    pcache_evict_all(&c);
    const int32_t y = pcache_alloc(&c);
    CHECK(!pcache_insert(&c, y, 0, h0, t0));
    CHECK_EQ_INT(pcache_lookup(&c, 0, h0, t0), -1);
    pcache_release(&c, y);
    CHECK_EQ_INT(kv_pool0(&kv)->n_free, nb);
    pcache_free(&c);
    kv_cache_free(&kv);
    return test_finish();
}
