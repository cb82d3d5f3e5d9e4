/* The forward pass: one threadpool dispatch evaluates a batch of tokens drawn
 * from many sequences, each attending over its own paged KV cache.
 *
 * The pass is a short list of steps per layer, separated by barriers:
 *   1 residual add + RMSNorm + quantize activations    (rows split by token)
 *   2 Q, K, V matmuls in one step                        (output rows split)
 *   3 bias / QK-norm / RoPE, K and V stored to the cache (split by token)
 *   4 attention partials                                 (token x kv head x chunk)
 *   5 combine partials + quantize for the output proj.   (split by token)
 *   6 attention output projection                        (output rows split)
 *   7 residual add + RMSNorm + quantize                  (split by token)
 *   8 gate and up matmuls, SiLU(gate) * up + quantize    (columns of h split)
 *   9 down projection                                    (output rows split)
 * and at the end the output norm and the logits of the rows that want them.
 * A mixture-of-experts layer replaces 8 and 9 by: the router matmul; routing
 * and grouping the tokens by expert (thread 0); copying each expert's input
 * rows together (when an expert has several tokens); gate/up items, then down
 * items, (expert, row slice) pairs claimed by the threads one at a time; the
 * weighted sum of a token's experts is added in the next step's residual add.
 * qwen35moe's shared expert runs as one more expert of every token: its gate in
 * the router's step, its slices among the gate/up and down items (no barrier
 * more; where its activation type is not the experts', as a dense SwiGLU FFN
 * after them, three barriers more), and its output times the gate is added
 * after the routed sum.
 * A pass too small to share (a tiny model's decode) runs on the calling thread
 * alone, without waking the pool (FWD_SOLO_KIB_DEFAULT in forward.c). */
#ifndef VT_MODEL_FORWARD_H
#define VT_MODEL_FORWARD_H

#include "cpu/threadpool.h"
#include "kvcache/kv_cache.h"
#include "model/model.h"

/* A sequence's block tables, one per group of the KV cache: in the layers of
 * group g, position p is in blocks[g][p / block_size]. Entries a SWA group has
 * released (before the window of every token in the batch) may be -1. */
typedef struct fwd_seq {
    const int32_t *blocks[KV_MAX_GROUPS];
    int64_t n_blocks;
    /* Hybrids: snap_pos > 0: the linear layers copy the sequence's state after its
     * first snap_pos tokens (a position after the first and at or before the last of
     * its tokens in the batch) into STATE slot snap_slot, the engine's prefix-cache
     * snapshot (engine.h); 0: none. */
    int64_t snap_pos;
    int32_t snap_slot;
} fwd_seq;

typedef struct fwd_batch {
    int64_t n_tokens;
    const int32_t *token;   /* (n_tokens) */
    const int32_t *pos;     /* (n_tokens) */
    const int32_t *seq;     /* (n_tokens) index into seqs */
    const fwd_seq *seqs;
    int64_t n_seqs;
    const int32_t *logit_rows; /* (n_logits) batch indices whose logits to compute */
    int64_t n_logits;
    float *logits;             /* (n_logits, n_vocab) out */
    /* Embeddings: the final hidden state after the output norm, in float, of these
     * batch rows (llama.cpp's t_embd, what llama_get_embeddings reads); no logits
     * are computed for them. Disjoint from logit_rows. n_embd_rows 0: none. */
    const int32_t *embd_rows;  /* (n_embd_rows) batch indices */
    int64_t n_embd_rows;
    float *embd;               /* (n_embd_rows, n_embd) out */
} fwd_batch;

typedef struct fwd_ctx fwd_ctx;

/* The groups of the KV cache that m's layers need (kv_groups_from_windows over
 * each layer's attn.window); the caller sets each spec's n_blocks. */
vt_status fwd_kv_groups(const model *m, kv_group_spec specs[KV_MAX_GROUPS],
                        int32_t *layer_group, int32_t *n_groups);

/* Workspace for batches of up to max_tokens tokens and max_logits logit rows.
 * VT_E_INVALID when a layer's window does not fit its group of kv (a SWA group
 * narrower than the layer's window, or a STATE group). The model's first context
 * also probes whether its decode GEMMs stream faster with software prefetch or
 * without (mm_probe_prefetch, cpu/matmul.h). */
vt_status fwd_create(const model *m, kv_cache *kv, tp_pool *pool, int64_t max_tokens,
                     fwd_ctx **out);
/* How many weight types of m have matrices whose decode GEMMs run without
 * software prefetch (after the probe; for vt bench's report). */
int fwd_hw_prefetch_types(const model *m);

void fwd_destroy(fwd_ctx *f);

/* The context length of one sequence, for the rope factors that depend on it:
 * phi3's LongRoPE takes its long factors when n_ctx_seq is past the original
 * context (rope.scaling.original_context_length), the short ones otherwise
 * (the default), as llama.cpp's get_rope_factors does on its n_ctx_seq. */
void fwd_set_n_ctx(fwd_ctx *f, int64_t n_ctx_seq);

/* Evaluate a batch. The caller guarantees: each token's block table covers its
 * position, positions 0..pos-1 of its sequence are already in the cache or earlier
 * in this batch, ids are < n_vocab, n_tokens <= max_tokens. VT_E_NOMEM if the
 * attention scratch for a longer context cannot be grown (nothing is changed). */
vt_status fwd_run(fwd_ctx *f, const fwd_batch *batch);

/* True when every value of row[0..n) is finite (no NaN, no infinity): one pass
 * over the exponent bits, cheap next to the output matmul that made the row.
 * The contexts and the engine check every logits row with it before sampling. */
bool fwd_logits_finite(const float *row, int64_t n);

/* What the passes of a context have read, summed since fwd_create (a benchmark's
 * count of the weight bytes behind each token; a few additions per pass and per
 * MoE layer, so it is always on). weight_bytes counts, per pass: every weight but
 * the expert tensors and the token embedding table; one row of that table per
 * token, or all of it where it is also the head and the pass wants logits; the
 * head only where the pass wants logits; and in each MoE layer the experts its
 * tokens chose, each once (gate, up and down), however many tokens chose it. A
 * pass of one token with logits reads vt_model_step_bytes. */
typedef struct fwd_stats {
    int64_t passes, tokens;
    int64_t moe_layer_passes; /* MoE layers evaluated, summed over passes */
    int64_t moe_experts_read; /* the distinct experts those layers read, summed */
    uint64_t weight_bytes;
    int64_t elastic_passes;   /* passes on fewer threads than the pool (tp_elastic) */
} fwd_stats;

/* f's counts so far; call between passes, from the thread that runs them. */
void fwd_stats_get(const fwd_ctx *f, fwd_stats *out);

/* Barriers per layer, for the record. */
int fwd_barriers_per_layer(void);

#endif
