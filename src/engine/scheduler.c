/* The step planner (vLLM v1's scheduler, without speculative tokens):
 *
 *   1. Running requests, oldest first, each get min(tokens left to compute, token
 *      budget): 1 for a decode, a chunk for a partial prefill. When the block
 *      pool cannot cover them, the newest running request is preempted (its
 *      blocks freed, it goes back to the front of the waiting queue) until it
 *      can, or until the request itself was the newest.
 *   2. If nothing was preempted, waiting requests are admitted front first while
 *      sequences and tokens remain: each reuses the longest cached prefix (whole
 *      blocks, at most n_tokens - 1 tokens, so the last token is computed and
 *      gives logits) and gets blocks for its first chunk; the first one that
 *      does not fit stops admission (FCFS: nobody overtakes it).
 *
 * A request never needs more than max_blocks_per_seq blocks and the pool has at
 * least that many, so a request running alone always fits. */
#include "engine/engine.h"

#include <string.h>

static int64_t blocks_for(const vt_engine *e, int64_t n_tokens) {
    return (n_tokens + e->p.kv_block - 1) / e->p.kv_block;
}

void sched_release_blocks(vt_engine *e, request *r) {
    /* Release the newest first: the LRU then evicts a sequence's tail before its
     * head, which keeps the reusable prefix longest. */
    for (int64_t i = r->n_blocks; i-- > 0;) pcache_release(&e->pc, r->blocks[i]);
    r->n_blocks = 0;
    r->n_computed = 0;
    r->n_hashed = 0;
}

/* Blocks so that the first n_tokens tokens have a slot; all or nothing. */
static bool grow_blocks(vt_engine *e, request *r, int64_t n_tokens) {
    const int64_t need = blocks_for(e, n_tokens) - r->n_blocks;
    if (need <= 0) return true;
    if (pcache_available(&e->pc) < need) return false;
    for (int64_t i = 0; i < need; i++) {
        const int32_t b = pcache_alloc(&e->pc);
        VT_ASSERT(b >= 0);
        r->blocks[r->n_blocks++] = b;
    }
    return true;
}

static void waiting_push_front(vt_engine *e, request *r) {
    VT_ASSERT(e->n_waiting < e->cap_waiting);
    memmove(e->waiting + 1, e->waiting, sizeof(request *) * (size_t)e->n_waiting);
    e->waiting[0] = r;
    e->n_waiting++;
}

static void preempt_newest(vt_engine *e) {
    request *v = e->running[--e->n_running];
    sched_release_blocks(e, v);
    v->running = false;
    waiting_push_front(e, v);
    e->st.preemptions++;
    e->step_preemptions++;
}

/* Longest cached prefix of r's tokens, in whole blocks: fills r->blocks and
 * r->block_hash with the hits (without taking references) and returns their count. */
static int64_t lookup_prefix(vt_engine *e, request *r, int64_t *n_queried) {
    const int64_t bs = e->p.kv_block;
    const int64_t max_blocks = (r->n_tokens - 1) / bs;
    *n_queried = e->pc.enabled ? max_blocks : 0;
    if (!e->pc.enabled) return 0;
    uint64_t parent = 0;
    int64_t hits = 0;
    for (; hits < max_blocks; hits++) {
        const int32_t *t = r->tokens + hits * bs;
        const uint64_t h = pcache_hash(parent, t, bs);
        const int32_t b = pcache_lookup(&e->pc, parent, h, t);
        if (b < 0) break;
        r->blocks[hits] = b;
        r->block_hash[hits] = h;
        parent = h;
    }
    return hits;
}

static bool admit(vt_engine *e, request *r, int64_t budget, int64_t *n_sched) {
    VT_ASSERT(r->n_blocks == 0 && r->n_computed == 0);
    int64_t n_queried;
    const int64_t hits = lookup_prefix(e, r, &n_queried);
    const int64_t cached = hits * e->p.kv_block;
    const int64_t n = r->n_tokens - cached < budget ? r->n_tokens - cached : budget;
    /* Hits that sit on the LRU stop being available once we hold them. */
    int64_t hits_in_lru = 0;
    for (int64_t i = 0; i < hits; i++) hits_in_lru += e->pc.in_lru[r->blocks[i]];
    const int64_t need = blocks_for(e, cached + n) - hits;
    if (pcache_available(&e->pc) - hits_in_lru < need) return false;

    for (int64_t i = 0; i < hits; i++) pcache_retain(&e->pc, r->blocks[i]);
    r->n_blocks = hits;
    r->n_hashed = hits;
    r->n_computed = cached;
    VT_ASSERT(grow_blocks(e, r, cached + n));
    e->st.prefix_queries += n_queried;
    e->st.prefix_hits += hits;
    if (!r->admitted_once) {
        r->admitted_once = true;
        r->n_cached = (int32_t)cached;
        e->st.prompt_tokens += r->n_prompt;
    }
    *n_sched = n;
    return true;
}

void sched_plan(vt_engine *e) {
    int64_t budget = e->p.max_batch_tokens;
    e->n_items = 0;
    e->step_preemptions = 0;

    for (int32_t i = 0; i < e->n_running && budget > 0; i++) {
        request *r = e->running[i];
        const int64_t left = r->n_tokens - r->n_computed;
        VT_ASSERT(left > 0);
        const int64_t n = left < budget ? left : budget;
        bool fits = true;
        while (!grow_blocks(e, r, r->n_computed + n)) {
            const bool self = e->running[e->n_running - 1] == r;
            preempt_newest(e);
            if (self) {
                fits = false;
                break;
            }
        }
        if (!fits) break; /* r was the newest: everything after it is gone too */
        e->items[e->n_items++] = (sched_item){r, n};
        budget -= n;
    }

    if (e->step_preemptions > 0) return;
    while (e->n_waiting > 0 && e->n_running < e->p.max_seqs && budget > 0) {
        request *r = e->waiting[0];
        int64_t n;
        if (!admit(e, r, budget, &n)) break;
        memmove(e->waiting, e->waiting + 1, sizeof(request *) * (size_t)(e->n_waiting - 1));
        e->n_waiting--;
        r->running = true;
        e->running[e->n_running++] = r;
        e->items[e->n_items++] = (sched_item){r, n};
        budget -= n;
    }
}
