/* The serving engine's internals (vt_engine of vt.h), shared by engine.c (the API,
 * the step, sampling and text) and scheduler.c (which requests run this step).
 *
 * A request's tokens are its prompt followed by what it generated; its KV cache
 * holds the first n_computed of them. Each step brings every scheduled request
 * closer to n_computed == n_tokens: a decode computes its one newest token, a
 * prefill a chunk of its prompt. When a step completes a request's tokens, the
 * logits of its last one are sampled and the new token is appended. Preemption
 * (recompute, as vLLM) frees a request's blocks and sets n_computed back to 0, so
 * its prompt + generated tokens are prefilled again later; its sampler (RNG and
 * penalty window) is kept, so generation continues exactly as it would have.
 *
 * Hybrids (a STATE group in the cache, e.g. qwen35's linear layers): a running
 * request owns one state slot, blocks[state_group][0], taken on admission and
 * given back with its blocks (finish, abort, preemption: a preempted request is
 * recomputed from its tokens, the state with it). The state's pool has max_seqs
 * slots for running requests plus the prefix cache's snapshots: copies of a
 * request's state when its n_computed stood at chosen block boundaries of its
 * prompt (taken by the forward pass inside a step's chunk, or after a chunk that
 * ends there: sched_snapshot_begin), indexed by the chain hash of the
 * block that ends there. A prefix hit needs the KV blocks (every attention group)
 * and the snapshot at its end: it is the longest such prefix, so when snapshots
 * were evicted a hit falls back to a shorter prefix that has one. */
#ifndef VT_ENGINE_ENGINE_H
#define VT_ENGINE_ENGINE_H

#include "cpu/threadpool.h"
#include "kvcache/kv_cache.h"
#include "engine/prefix_cache.h"
#include "engine/sampler.h"
#include "grammar/grammar.h"
#include "model/forward.h"
#include "model/model.h"
#include "vt.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct request {
    uint64_t id;
    void *user;
    int32_t *tokens;      /* (cap_tokens) prompt, then generated tokens */
    int64_t n_tokens, cap_tokens;
    int32_t n_prompt;     /* of the original request */
    int64_t n_computed;   /* tokens whose K/V are in the cache */
    /* One block table per group of the KV cache, (max_blocks_per_seq) each, all
     * n_blocks long; a SWA group's blocks [0, n_released[g]) were released as its
     * window passed them (entries -1). */
    int32_t *blocks[KV_MAX_GROUPS];
    int64_t n_blocks;
    int64_t n_released[KV_MAX_GROUPS];
    uint64_t *block_hash; /* (max_blocks_per_seq) chain hashes of full blocks */
    int64_t n_hashed;     /* full blocks hashed (and offered to the prefix cache) */
    int32_t n_cached;     /* prompt tokens served by the prefix cache (first admission) */
    bool admitted_once;
    bool running;

    sampler *smp;
    char *gtext;            /* the request's GBNF (owned), or NULL */
    size_t gtext_len;
    int32_t *preserve;      /* (n_preserve) control tokens rendered as their text (owned) */
    int32_t n_preserve;
    grammar *gram;          /* its compiled form, shared in e->grammars (engine loop only) */
    grammar_matcher *gm;    /* its state over the engine's gvocab, made at the first sample */
    int32_t n_logprobs;
    int32_t max_tokens;   /* <= 0: no limit */
    bool ignore_eos;
    char **stop;          /* (n_stop) owned copies */
    size_t *stop_len;
    int32_t n_stop;
    int32_t n_generated;

    char *pending;        /* text not yet emitted: incomplete UTF-8 or a possible stop start */
    size_t n_pending, cap_pending;

    vt_pooling pooling;   /* != VT_POOLING_NONE: an embedding request (no sampler) */
    float *pooled;        /* (n_embd) the sum of the rows so far (mean), the first or last row */
} request;

/* One request in this step's batch: n tokens from n_computed on. */
typedef struct sched_item {
    request *req;
    int64_t n;
    /* hybrids: a snapshot the forward pass takes inside this chunk (sched_snapshot_begin):
     * r's state after its first snap_pos tokens into STATE slot snap_slot; snap_pos 0: none */
    int64_t snap_pos;
    int32_t snap_slot;
} sched_item;

struct vt_engine {
    vt_model *model;
    const tokenizer *tok;
    size_t max_piece;           /* bytes of the longest token's text: what one token adds to an output */
    vt_engine_params p;
    int32_t n_ctx;              /* effective: min(n_ctx, KV capacity) */
    int64_t max_blocks_per_seq;
    int32_t n_vocab;

    tp_pool *pool;
    kv_cache kv;                /* its groups: kv.n_groups, FULL (if any) first */
    pcache pc[KV_MAX_GROUPS];   /* one index and allocator per group */
    int32_t state_group;        /* the STATE group, -1: none (not a hybrid) */
    int64_t snapshot_interval;  /* tokens, a multiple of kv_block */
    int64_t max_snapshots;      /* state snapshots kept at most (the pool has max_seqs more slots) */
    int64_t snap_in_flight;     /* snapshot slots taken by this step's items, not indexed yet */
    size_t state_seq_bytes;     /* one slot, all layers of the STATE group */
    fwd_ctx *fwd;

    /* owned by the engine loop (vt_engine_step) */
    request **running;          /* (max_seqs) in admission order, newest last */
    int32_t n_running;
    request **waiting;          /* (cap_waiting) front first */
    int32_t n_waiting, cap_waiting;
    sched_item *items;          /* (max_seqs) this step's schedule */
    int32_t n_items;
    int64_t step_preemptions;   /* in the current plan */
    int64_t swa_cuts;           /* chunks cut short for a SWA pool (scheduler.c), ever */

    int32_t *b_token, *b_pos, *b_seq; /* (max_batch_tokens) */
    int32_t *b_rows;            /* (max_seqs) logit rows */
    fwd_seq *b_seqs;            /* (max_seqs) */
    float *logits;              /* (max_seqs, n_vocab) */
    float *scratch_lp;          /* (n_vocab) */
    grammar_vocab *gvocab;      /* the tokens' bytes as a trie, built at the first grammar
                                   request (under mu; read-only after) */
    struct engine_grammar *grammars; /* (n_grammars) compiled grammars by text, shared by the
                                   requests that use one (their DFA and masks warm); engine loop only */
    int32_t n_grammars, cap_grammars;

    vt_output *outs;
    int32_t n_outs, cap_outs;   /* cap_outs: reserved at the step's start (outs_reserve) */
    int32_t test_fail_outs;     /* tests: the next n growths of the outputs fail as out of memory */
    int32_t test_fail_text;     /* tests: the next n growths of the step's text fail as out of memory */
    size_t *out_text_off;       /* (cap_outs) offsets into text until the step ends */
    int64_t *out_top_off;       /* (cap_outs) offsets into tops, -1: none */
    int64_t *out_err_off;       /* (cap_outs) offsets into text of an error, -1: none */
    char *text;
    size_t n_text, cap_text;
    vt_token_logprob *tops;
    int64_t n_tops, cap_tops;
    int64_t *out_embd_off;      /* (cap_outs) offsets into embd_out, -1: none */
    float *embd_out;            /* pooled vectors of this step's outputs */
    int64_t n_embd_out, cap_embd_out;
    int32_t *b_erows;           /* (max_batch_tokens) embedding rows, once an embedding request came */
    float *embd;                /* (max_batch_tokens, n_embd) their hidden states */

    vt_engine_stats st;         /* loop's counters (running/waiting/kv filled at the end) */

    /* shared with other threads: under mu */
    pthread_mutex_t mu;
    request **inbox;
    int32_t n_inbox, cap_inbox;
    uint64_t *aborts;
    int32_t n_aborts, cap_aborts;
    uint64_t *live;             /* ids added and not yet finished */
    int32_t n_live, cap_live;
    uint64_t next_id;
    int32_t active;             /* waiting + running, as of the last step */
    vt_engine_stats shared_st;  /* copy published at the end of each step */
};

/* Plan this step: schedule running requests (preempting the newest when blocks
 * run out), then admit waiting ones with their cached prefixes, under the token
 * and sequence budgets. Fills e->items. Never fails: a request that cannot get
 * blocks waits. */
void sched_plan(vt_engine *e);

/* Free a request's blocks in every group (back to the prefix cache / free list). */
void sched_release_blocks(vt_engine *e, request *r);

/* Hybrids: when r's first n computed tokens end at one of its snapshot points
 * (block boundaries of its prompt: every snapshot_interval tokens and the last
 * one a repeat of the prompt can reuse), keep a snapshot of its state there in the
 * prefix cache (its block hashes must be up to date). No-op otherwise. */
void sched_snapshot(vt_engine *e, request *r);

/* Hybrids: a chunk need not end at a snapshot point. sched_plan cuts a chunk so that
 * it passes at most one point before its end; where item it passes one, before its
 * last token, sched_snapshot_begin takes a state slot for the forward pass to copy
 * the state into there (fwd_seq's snap_pos and snap_slot: the linear layers run the
 * chunk in two pieces, the same bits) and sets it->snap_pos and it->snap_slot (-1:
 * none, also where the snapshots' room cannot be made); a point at the chunk's end
 * is sched_snapshot's, after the step. So a prompt prefills in as few passes as the
 * token budget allows, not one per snapshot point. After the step (its block hashes
 * up to date), sched_snapshot_end indexes the copy in the prefix cache, or frees the
 * slot where the pass failed (ok false) or that prefix is kept already. */
void sched_snapshot_begin(vt_engine *e, sched_item *it);
void sched_snapshot_end(vt_engine *e, sched_item *it, bool ok);

/* The KV blocks of the engine's cache: all attention groups together (the
 * STATE group's slots are not blocks). */
int64_t sched_blocks_total(const vt_engine *e);
int64_t sched_blocks_available(const vt_engine *e); /* free + cached */
int64_t sched_blocks_cached(const vt_engine *e);

#endif
