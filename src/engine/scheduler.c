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
 * Every group of the KV cache has its own pool and block table: a step takes
 * blocks for the new tokens in all of them or in none, and a sliding-window
 * group first releases the blocks its window has passed (vLLM's
 * SlidingWindowManager), so it holds about window / block_size + 1 blocks per
 * sequence however long the sequence grows. A SWA pool holds every sequence's
 * window and one step's tokens (kv_swa_pool_blocks, llama.cpp's window + ubatch
 * cells); where it alone is short for a running request's chunk, the chunk is
 * cut to what it covers before anyone is preempted. A prefix hit must hold in every
 * group: the full group's run of cached blocks, and in each SWA group the blocks
 * that the window of the first token to compute reaches.
 *
 * A request never needs more than max_blocks_per_seq blocks and each pool has
 * at least that many (a SWA pool at least its window's worth for every
 * sequence), so a request running alone always fits.
 *
 * A hybrid's STATE group is no pool of blocks: a request takes one slot on
 * admission (a copy of the snapshot its prefix hit ends at, or a slot the
 * forward pass zeroes at position 0), and a prefill chunk passes at most one of
 * the request's snapshot points before its end, where the forward pass copies the
 * state (sched_snapshot_begin; one at the chunk's end is copied after the step,
 * engine.h). Its pool has a slot for every running request beyond the
 * snapshots, so a slot is always there for an admission (evicting the least
 * recently used snapshot when none is free). */
#include "engine/engine.h"

#include <string.h>

static int64_t blocks_for(const vt_engine *e, int64_t n_tokens) {
    return (n_tokens + e->p.kv_block - 1) / e->p.kv_block;
}

static bool is_state(const vt_engine *e, int32_t g) { return g == e->state_group; }

/* ---- hybrids' state slots and snapshots ---- */

static bool snapshots_on(const vt_engine *e) {
    return e->state_group >= 0 && e->pc[e->state_group].enabled;
}

/* The last snapshot point of r: the block boundary a repeat of its prompt reuses
 * (a hit leaves at least the last prompt token to compute). */
static int64_t last_snapshot(const vt_engine *e, const request *r) {
    return (r->n_prompt - 1) / e->p.kv_block * e->p.kv_block;
}

/* r's first snapshot point after n tokens, or 0 when there is none. */
static int64_t next_snapshot(const vt_engine *e, const request *r, int64_t n) {
    const int64_t last = last_snapshot(e, r);
    if (!snapshots_on(e) || last <= n) return 0;
    const int64_t m = (n / e->snapshot_interval + 1) * e->snapshot_interval;
    return m < last ? m : last;
}

/* The tokens of a chunk of n from r's first `from`, cut so that it passes at most
 * one snapshot point before its end (the forward pass copies the state at one; a
 * point at the end is copied after the step). */
static int64_t snapshot_cut(const vt_engine *e, const request *r, int64_t from, int64_t n) {
    const int64_t stop = next_snapshot(e, r, from);
    const int64_t stop2 = stop ? next_snapshot(e, r, stop) : 0;
    return stop2 && from + n > stop2 ? stop2 - from : n;
}

void sched_snapshot_begin(vt_engine *e, sched_item *it) {
    request *r = it->req;
    it->snap_pos = 0;
    it->snap_slot = -1;
    const int64_t stop = next_snapshot(e, r, r->n_computed);
    if (stop == 0 || stop >= r->n_computed + it->n) return; /* none inside the chunk */
    pcache *pc = &e->pc[e->state_group];
    /* the room of max_snapshots, counting the slots this step has taken already */
    while (pc->n_indexed + e->snap_in_flight >= e->max_snapshots && pcache_evict_lru(pc)) {}
    if (pc->n_indexed + e->snap_in_flight >= e->max_snapshots) return;
    const int32_t slot = pcache_alloc(pc);
    if (slot < 0) return;
    e->snap_in_flight++;
    it->snap_pos = stop;
    it->snap_slot = slot;
}

void sched_snapshot_end(vt_engine *e, sched_item *it, bool ok) {
    if (it->snap_pos <= 0) return; /* none (sched_plan's items start with 0) */
    pcache *pc = &e->pc[e->state_group];
    request *r = it->req;
    const int64_t bs = e->p.kv_block, b = it->snap_pos / bs - 1;
    if (ok) {
        VT_ASSERT(r->n_hashed > b);
        const uint64_t parent = b ? r->block_hash[b - 1] : 0;
        const int32_t *t = r->tokens + b * bs;
        if (pcache_lookup(pc, parent, r->block_hash[b], t) < 0)
            pcache_insert(pc, it->snap_slot, parent, r->block_hash[b], t);
    }
    pcache_release(pc, it->snap_slot); /* indexed: the cache's reference alone (cached); else free */
    e->snap_in_flight--;
    it->snap_pos = 0;
    it->snap_slot = -1;
}

/* Copy one slot's state (every layer of the STATE group) to another. */
static void state_copy(vt_engine *e, int32_t dst, int32_t src) {
    const size_t bytes = e->kv.groups[e->state_group].spec.state_bytes;
    for (int64_t il = 0; il < e->kv.n_layer; il++)
        if (e->kv.layer_group[il] == e->state_group)
            memcpy(kv_state_slot(&e->kv, il, dst), kv_state_slot(&e->kv, il, src), bytes);
}

void sched_snapshot(vt_engine *e, request *r) {
    const int64_t n = r->n_computed, bs = e->p.kv_block;
    if (n <= 0 || n % bs || n > last_snapshot(e, r) || next_snapshot(e, r, n - 1) != n) return;
    pcache *pc = &e->pc[e->state_group];
    const int64_t b = n / bs - 1;
    VT_ASSERT(r->n_hashed > b);
    const uint64_t parent = b ? r->block_hash[b - 1] : 0;
    const int32_t *t = r->tokens + b * bs;
    if (pcache_lookup(pc, parent, r->block_hash[b], t) >= 0) return; /* kept already */
    /* at most max_snapshots, counting those the step's pass took and not yet indexed:
     * the least recently used one makes room (snapshots are only ever held for a
     * moment, in admit) */
    while (pc->n_indexed + e->snap_in_flight >= e->max_snapshots && pcache_evict_lru(pc)) {}
    if (pc->n_indexed + e->snap_in_flight >= e->max_snapshots) return;
    const int32_t slot = pcache_alloc(pc);
    if (slot < 0) return;
    state_copy(e, slot, r->blocks[e->state_group][0]);
    pcache_insert(pc, slot, parent, r->block_hash[b], t);
    pcache_release(pc, slot); /* the cache's reference alone: cached */
}

int64_t sched_blocks_total(const vt_engine *e) {
    int64_t n = 0;
    for (int32_t g = 0; g < e->kv.n_groups; g++) n += is_state(e, g) ? 0 : e->kv.groups[g].pool.n_blocks;
    return n;
}

int64_t sched_blocks_available(const vt_engine *e) {
    int64_t n = 0;
    for (int32_t g = 0; g < e->kv.n_groups; g++) n += is_state(e, g) ? 0 : pcache_available(&e->pc[g]);
    return n;
}

int64_t sched_blocks_cached(const vt_engine *e) {
    int64_t n = 0;
    for (int32_t g = 0; g < e->kv.n_groups; g++) n += is_state(e, g) ? 0 : e->pc[g].n_lru;
    return n;
}

/* The first block of group g that a sequence with n_computed tokens in the
 * cache still reads (0 but for SWA groups). */
static int64_t first_needed(const vt_engine *e, int32_t g, int64_t n_computed) {
    const kv_group_spec *sp = &e->kv.groups[g].spec;
    return kv_first_needed_block(sp->kind, sp->window, e->p.kv_block, n_computed);
}

void sched_release_blocks(vt_engine *e, request *r) {
    /* Release the newest first: the LRU then evicts a sequence's tail before its
     * head, which keeps the reusable prefix longest. */
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        if (is_state(e, g)) {
            if (r->blocks[g][0] >= 0) pcache_release(&e->pc[g], r->blocks[g][0]);
            r->blocks[g][0] = -1;
            continue;
        }
        for (int64_t i = r->n_blocks; i-- > r->n_released[g];)
            pcache_release(&e->pc[g], r->blocks[g][i]);
        r->n_released[g] = 0;
    }
    r->n_blocks = 0;
    r->n_computed = 0;
    r->n_hashed = 0;
}

static void release_to_pcache(void *ctx, int32_t g, int32_t block) {
    pcache_release(&((vt_engine *)ctx)->pc[g], block);
}

/* Release the blocks of r's SWA groups that the window of its next token has
 * passed: they become free, or cached when the prefix cache indexed them. */
static void release_passed(vt_engine *e, request *r) {
    for (int32_t g = 0; g < e->kv.n_groups; g++)
        kv_release_passed(&e->kv, g, r->blocks[g], r->n_blocks, &r->n_released[g], r->n_computed,
                          release_to_pcache, e);
}

/* Blocks so that the first n_tokens tokens have a slot, in every group; all or
 * nothing. */
static bool grow_blocks(vt_engine *e, request *r, int64_t n_tokens) {
    const int64_t need = blocks_for(e, n_tokens) - r->n_blocks;
    if (need <= 0) return true;
    for (int32_t g = 0; g < e->kv.n_groups; g++)
        if (!is_state(e, g) && pcache_available(&e->pc[g]) < need) return false;
    for (int32_t g = 0; g < e->kv.n_groups; g++)
        for (int64_t i = 0; !is_state(e, g) && i < need; i++) {
            const int32_t b = pcache_alloc(&e->pc[g]);
            VT_ASSERT(b >= 0);
            r->blocks[g][r->n_blocks + i] = b;
        }
    r->n_blocks += need;
    return true;
}

/* Where only a SWA pool is short of blocks for r's next n tokens (it holds each
 * sequence's window and one step's tokens, kv_swa_pool_blocks, while a sequence
 * not scheduled lately still holds its last chunk): the tokens, fewer than n
 * and at least 1, that it covers; 0 where a full group is short too, or no
 * token fits. */
static int64_t swa_fit(const vt_engine *e, const request *r, int64_t n) {
    const int64_t need = blocks_for(e, r->n_computed + n) - r->n_blocks;
    int64_t avail = need;
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        const int64_t a = pcache_available(&e->pc[g]);
        const kv_group_kind kind = e->kv.groups[g].spec.kind;
        if (kind == KV_GROUP_FULL && a < need) return 0;
        if (kind == KV_GROUP_SWA && a < avail) avail = a;
    }
    if (avail >= need) return 0;
    const int64_t m = (r->n_blocks + avail) * e->p.kv_block - r->n_computed;
    return m > 0 ? m : 0;
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

/* Longest cached prefix of r's tokens, in whole blocks, that every group can
 * serve: fills r->block_hash, and r->blocks and r->n_released of each group with
 * the hits (without taking references), and returns their count. The full group
 * (group 0 when there is one) needs every block of the prefix, a SWA group those
 * from the first one the window of the next token reaches, the STATE group a
 * snapshot at the prefix's end (*snap, -1 without a STATE group or a hit). */
static int64_t lookup_prefix(vt_engine *e, request *r, int64_t *n_queried, int32_t *snap) {
    const int64_t bs = e->p.kv_block;
    /* mean, cls and per-token embeddings need every token's hidden state: nothing cached */
    const bool all_rows = r->pooling == VT_POOLING_MEAN || r->pooling == VT_POOLING_CLS ||
                          r->pooling == VT_POOLING_TOKENS;
    const int64_t max_blocks = all_rows ? 0 : (r->n_tokens - 1) / bs;
    const bool enabled = e->pc[0].enabled;
    const bool has_full = e->kv.groups[0].spec.kind == KV_GROUP_FULL;
    for (int32_t g = 0; g < e->kv.n_groups; g++) r->n_released[g] = 0;
    *n_queried = enabled ? max_blocks : 0;
    *snap = -1;
    if (!enabled) return 0;
    uint64_t parent = 0;
    int64_t hits = 0;
    for (; hits < max_blocks; hits++) {
        const int32_t *t = r->tokens + hits * bs;
        const uint64_t h = pcache_hash(parent, t, bs);
        if (has_full) {
            const int32_t b = pcache_lookup(&e->pc[0], parent, h, t);
            if (b < 0) break;
            r->blocks[0][hits] = b;
        }
        r->block_hash[hits] = h;
        parent = h;
    }
    /* The longest prefix of those whose window blocks every SWA group holds
     * (kv_longest_hit, vLLM's rule): each group's longest served prefix no
     * longer than the others', until they agree (a SWA group's served lengths
     * are not all the shorter ones, so one group's answer can undo another's). */
    for (int32_t g = has_full; g < e->kv.n_groups; g++)
        for (int64_t i = 0; !is_state(e, g) && i < hits; i++)
            r->blocks[g][i] = pcache_lookup(&e->pc[g], i ? r->block_hash[i - 1] : 0, r->block_hash[i],
                                            r->tokens + i * bs);
    for (bool moved = true; moved && hits > 0;) {
        moved = false;
        for (int32_t g = has_full; g < e->kv.n_groups; g++) {
            if (is_state(e, g)) continue;
            const kv_group_spec *sp = &e->kv.groups[g].spec;
            const int64_t h = kv_longest_hit(sp->kind, sp->window, bs, r->blocks[g], hits);
            if (h < hits) hits = h, moved = true;
        }
        /* a hybrid's hit restores a state snapshot taken at its end: the longest
         * prefix that has one (the SWA groups then look again) */
        if (e->state_group >= 0 && hits > 0) {
            int64_t h = hits;
            while (h > 0 && (*snap = pcache_lookup(&e->pc[e->state_group], h > 1 ? r->block_hash[h - 2] : 0,
                                                   r->block_hash[h - 1], r->tokens + (h - 1) * bs)) < 0)
                h--;
            if (h < hits) hits = h, moved = true;
        }
    }
    if (hits == 0) *snap = -1;
    for (int32_t g = has_full; g < e->kv.n_groups; g++) {
        if (is_state(e, g)) continue;
        r->n_released[g] = first_needed(e, g, hits * bs);
        for (int64_t i = 0; i < r->n_released[g]; i++) r->blocks[g][i] = -1;
    }
    return hits;
}

static bool admit(vt_engine *e, request *r, int64_t budget, int64_t *n_sched) {
    VT_ASSERT(r->n_blocks == 0 && r->n_computed == 0);
    int64_t n_queried;
    int32_t snap;
    const int64_t hits = lookup_prefix(e, r, &n_queried, &snap);
    const int64_t cached = hits * e->p.kv_block;
    int64_t n = snapshot_cut(e, r, cached, r->n_tokens - cached < budget ? r->n_tokens - cached : budget);
    /* Hits that sit on the LRU stop being available once we hold them. */
    const int64_t need = blocks_for(e, cached + n) - hits;
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        if (is_state(e, g)) continue; /* a slot is always there (the file comment) */
        int64_t hits_in_lru = 0;
        for (int64_t i = r->n_released[g]; i < hits; i++)
            hits_in_lru += e->pc[g].in_lru[r->blocks[g][i]];
        if (pcache_available(&e->pc[g]) - hits_in_lru < need) return false;
    }

    for (int32_t g = 0; g < e->kv.n_groups; g++)
        for (int64_t i = r->n_released[g]; !is_state(e, g) && i < hits; i++)
            pcache_retain(&e->pc[g], r->blocks[g][i]);
    if (e->state_group >= 0) {
        /* the working slot; the snapshot is held meanwhile so that taking the slot
         * cannot evict it */
        pcache *pc = &e->pc[e->state_group];
        if (snap >= 0) pcache_retain(pc, snap);
        const int32_t slot = pcache_alloc(pc);
        VT_ASSERT(slot >= 0);
        if (snap >= 0) {
            state_copy(e, slot, snap);
            pcache_release(pc, snap);
            e->st.state_restores++;
        }
        r->blocks[e->state_group][0] = slot;
    }
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
        int64_t n = snapshot_cut(e, r, r->n_computed, left < budget ? left : budget);
        release_passed(e, r);
        bool fits = true;
        while (!grow_blocks(e, r, r->n_computed + n)) {
            const int64_t m = swa_fit(e, r, n);
            if (m > 0) { /* a shorter chunk before any preemption */
                n = m;
                e->swa_cuts++;
                continue;
            }
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
