/* Qwen3.5/3.6 hybrids (llama.cpp's qwen35 and qwen35moe): the layer pattern, the
 * linear-attention (Gated DeltaNet) hyperparameters and the linear layer's core.
 *
 * Keys (llama.cpp's llama-arch.cpp, load_arch_hparams of models/qwen35.cpp), <arch> being
 * qwen35 or qwen35moe:
 *   <arch>.ssm.conv_kernel       K, the causal conv's taps (>= 1)
 *   <arch>.ssm.state_size        d_state: the head size of the linear layers' q, k and v
 *   <arch>.ssm.group_count       n_k_heads: q/k heads of the linear layers
 *   <arch>.ssm.time_step_rank    n_v_heads: v heads (a multiple of n_k_heads)
 *   <arch>.ssm.inner_size        d_inner = n_v_heads * d_state
 *   <arch>.attention.recurrent_layers   bool per layer (true: linear; i32 or u32 too, not 0:
 *                                       linear, as llama.cpp's get_arr), or one number for
 *                                       every layer (llama.cpp's get_key_or_arr), or else
 *   <arch>.full_attention_interval      n (default 4): layer il is full attention when
 *                                       (il + 1) % n == 0, linear otherwise
 *   <arch>.nextn_predict_layers  the multi-token-prediction layers at the end of
 *                                block_count: not part of the trunk. Their tensors (a
 *                                full-attention block with the layer's FFN, plus
 *                                nextn.eh_proj, .enorm, .hnorm, .shared_head_norm) are
 *                                never read, as llama.cpp skips them unless a draft
 *                                context asks (they serve speculative decoding). A file
 *                                of the MTP layers alone (no blk.0.attn_norm) is refused.
 *   <arch>.rope.dimension_sections  4 ints (M-RoPE); for text every section turns at the
 *                                token's position, so it is NeoX rope over n_rot dims.
 *
 * Tensors of a linear layer il (blk.il.*; n_embd in, shapes as ggml's ne):
 *   attn_qkv   (n_embd, 2 * n_k_heads * d_state + d_inner)   q | k | v, fused
 *   attn_gate  (n_embd, d_inner)                              z, the output gate
 *   ssm_beta, ssm_alpha  (n_embd, n_v_heads)
 *   ssm_conv1d (K, conv_ch)    ssm_dt.bias (n_v_heads)   ssm_a (n_v_heads) = -exp(A_log)
 *   ssm_norm   (d_state)       ssm_out (d_inner, n_embd)
 * A full-attention layer has attn_q of twice the heads (per head: head_dim of query,
 * then head_dim of gate, sigmoid(gate) scales the attention output), attn_k, attn_v,
 * attn_output, attn_q_norm, attn_k_norm. Both kinds: attn_norm, post_attention_norm, and
 * the FFN (dense SwiGLU for qwen35; routed experts plus a gated shared expert for
 * qwen35moe).
 *
 * The recurrent state of one sequence in one linear layer (a STATE slot of the KV cache,
 * zeroed for a new sequence): conv (K - 1, conv_ch) floats, then the delta-rule states,
 * (n_v_heads, d_state, d_state) floats (cpu/deltanet.h has the layouts). */
#ifndef VT_MODEL_QWEN35_H
#define VT_MODEL_QWEN35_H

#include "cpu/matmul.h"
#include "cpu/threadpool.h"
#include "gguf/gguf.h"
#include "kvcache/kv_cache.h"
#include "vt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits on what a file may declare (sanity, not the real models' sizes). */
#define Q35_MAX_CONV_KERNEL 64
#define Q35_MAX_STATE 1024
#define Q35_MAX_HEADS 1024

typedef struct q35_hparams {
    int64_t n_layer;    /* trunk layers: block_count - nextn_predict_layers */
    int64_t n_nextn;    /* multi-token-prediction layers after the trunk (not run) */
    int64_t conv_kernel;
    int64_t d_state;
    int64_t n_k_heads, n_v_heads;
    int64_t d_inner;    /* n_v_heads * d_state */
    int64_t key_dim;    /* n_k_heads * d_state */
    int64_t conv_ch;    /* 2 * key_dim + d_inner: q | k | v */
    int64_t rope_sections[4];
    bool *is_linear;    /* (n_layer) true: a Gated DeltaNet layer; false: gated full attention */
} q35_hparams;

/* Read the hybrid's keys for architecture `arch` ("qwen35", "qwen35moe") with
 * block_count layers and a training context of n_ctx_train. Errors name the key:
 * VT_E_FORMAT for a missing one, VT_E_RANGE for a state size of 0, a conv kernel of 0 or
 * longer than the context, heads that do not divide, d_inner != n_v_heads * d_state, a
 * recurrent_layers array of the wrong length, a pattern without any layer of either
 * kind is fine. Free with q35_hparams_free. */
vt_status q35_hparams_load(const gguf_file *g, const char *arch, int64_t block_count,
                           int64_t n_ctx_train, q35_hparams *out);
void q35_hparams_free(q35_hparams *hp);

/* Bytes of one sequence's state in one linear layer. */
size_t q35_state_bytes(const q35_hparams *hp);
/* Linear layers in the trunk. */
int64_t q35_n_linear(const q35_hparams *hp);

/* What a linear layer adds to its projections: the conv weights, time-major (K, conv_ch)
 * (the file's (conv_ch, K) transposed at load), the gates' bias and decay, the norm. */
typedef struct q35_linear_weights {
    const float *conv_w;  /* (K, conv_ch) */
    const float *dt_bias; /* (n_v_heads) */
    const float *a;       /* (n_v_heads) */
    const float *norm_w;  /* (d_state) */
} q35_linear_weights;

/* Floats of scratch q35_linear_core needs (the chunked form's). */
int64_t q35_core_scratch_floats(const q35_hparams *hp);

/* The linear layer between its input projections and ssm_out, for n_tokens consecutive
 * tokens of one sequence, continuing from `state` (q35_state_bytes, zeros for a new
 * sequence; updated):
 *   qkv   (n_tokens, conv_ch), row stride qkv_stride: attn_qkv's output; overwritten
 *   z     (n_tokens, d_inner), stride z_stride: attn_gate's output
 *   alpha, beta (n_tokens, n_v_heads), stride ab_stride: ssm_alpha's and ssm_beta's
 *         outputs; overwritten (by the log decay and the sigmoid)
 *   out   (n_tokens, d_inner), stride out_stride: the gated, normed heads, ssm_out's input
 * chunked: the delta rule's chunked form (prefill) instead of the recurrent one; the two
 * agree within rounding. eps: the RMS norm's (attention.layer_norm_rms_epsilon), also the
 * L2 norm's, as llama.cpp. */
void q35_linear_core(const q35_hparams *hp, const q35_linear_weights *w, float eps, int64_t n_tokens,
                     float *qkv, int64_t qkv_stride, const float *z, int64_t z_stride, float *alpha,
                     float *beta, int64_t ab_stride, float *state, float *out, int64_t out_stride,
                     bool chunked, float *scratch);

/* q35_linear_core for threads, by k-head group: group kh is k-head kh with the v-heads
 * that read it (h = kh, kh + n_k_heads, ...). q35_linear_group runs the group's share of
 * the core: the conv of its channels (q and k of k-head kh, v of its v-heads), the L2
 * norms of its q and k, its v-heads' gates, delta rule and output gate. Groups touch
 * disjoint channels, heads and state, so threads may run them in any order; a group's
 * bits do not depend on which others run (the conv's channels are independent wherever a
 * call splits them, cpu/deltanet.h). Same arguments as the core; the same bits.
 * q35_linear_group_reset zeroes group kh's share of a new sequence's state. */
void q35_linear_group(const q35_hparams *hp, const q35_linear_weights *w, float eps, int64_t kh, int64_t n_tokens,
                      float *qkv, int64_t qkv_stride, const float *z, int64_t z_stride, float *alpha, float *beta,
                      int64_t ab_stride, float *state, float *out, int64_t out_stride, bool chunked, float *scratch);
void q35_linear_group_reset(const q35_hparams *hp, int64_t kh, float *state);
/* Copy group kh's share of a state (src) into another (dst): with every group's, the
 * whole state (a prefix-cache snapshot taken inside a pass). */
void q35_linear_group_copy(const q35_hparams *hp, int64_t kh, float *dst, const float *src);
/* The delta rule and output gate of v-head h alone, once its group's conv, norms and
 * gates are done (q35_linear_group calls it per v-head). */
void q35_linear_head(const q35_hparams *hp, const q35_linear_weights *w, float eps, int64_t h, int64_t n_tokens,
                     const float *qkv, int64_t qkv_stride, const float *z, int64_t z_stride, const float *alpha,
                     const float *beta, int64_t ab_stride, float *state, float *out, int64_t out_stride, bool chunked,
                     float *scratch);

/* The weights of one linear layer (model.h's layer_weights.lin). */
typedef struct q35_layer {
    mm_weight wqkv;          /* attn_qkv (conv_ch, n_embd) */
    mm_weight wz;            /* attn_gate (d_inner, n_embd) */
    mm_weight walpha, wbeta; /* ssm_alpha, ssm_beta (n_v_heads, n_embd) */
    mm_weight ssm_out;       /* (n_embd, d_inner) */
    q35_linear_weights w;    /* conv (transposed copy, owned by the model), gates, norm */
} q35_layer;

struct vt_model;
struct layer_weights;
struct fwd_batch;

/* model.c's hooks for a qwen35 file: the hybrid keys into m->q35 (and the trunk's layer
 * count into m->hp.n_layer); then layer il's tensors (a linear layer's into L->lin, a
 * full-attention layer's with its gated attn_q) and its FFN. Errors name the tensor. */
vt_status q35_model_hparams(struct vt_model *m);
vt_status q35_load_layer(struct vt_model *m, int64_t il, struct layer_weights *L);
/* The matrices of linear layer L in forward order into out (where not NULL); how many. */
int64_t q35_layer_order(const q35_layer *L, mm_weight **out);

/* The forward pass's buffers for the hybrid layers (model/forward.c), for batches of up
 * to max_tokens tokens on nth threads. */
typedef struct q35_fwd {
    float *qkv;       /* (T, conv_ch) */
    float *z;         /* (T, d_inner) */
    float *alpha, *beta; /* (T, n_v_heads) each */
    float *out;       /* (T, d_inner) */
    float *qg;        /* (T, 2 * n_head * head_dim) gated attn_q's output: per head query, gate */
    float *gate;      /* (T, n_head * head_dim) the attention gates */
    uint8_t *xq2;     /* (T, xq2_stride) the input quantized for ssm_alpha/beta */
    size_t xq2_stride;
    float *scratch;   /* (nth, scratch_floats) */
    int64_t scratch_floats;
    size_t act_bytes; /* the largest activation row the linear layers quantize */
} q35_fwd;

vt_status q35_fwd_create(const struct vt_model *m, int64_t max_tokens, int nth, q35_fwd **out);
void q35_fwd_destroy(q35_fwd *h);

/* Steps 2-6 of a linear layer (model/forward.h) for the batch b: xq holds the normed input
 * quantized for L->lin->wqkv (and h->xq2 for alpha/beta where their activation type
 * differs); on return tmp (T, n_embd) holds ssm_out's output. Each sequence's state is its
 * slot of kv's STATE group for layer il (b->seqs[s].blocks[group][0]), zeroed where the
 * sequence starts (position 0), and copied into fwd_seq's snap_slot after snap_pos tokens
 * where it asks. xq is reused as scratch. Called by every thread of run;
 * ends with a barrier. Four barriers: the input projections (one step where qkv/z and
 * alpha/beta share an activation type, two otherwise), the core as (sequence, k-head
 * group) items claimed one at a time (q35_linear_group: conv, norms, gates, delta rule
 * and output gate in one step), the quantization for ssm_out, ssm_out. */
void q35_fwd_linear(q35_fwd *h, const struct vt_model *m, const struct layer_weights *L, int64_t il,
                    const struct fwd_batch *b, kv_cache *kv, uint8_t *xq, float *tmp, tp_pool *run, int ith,
                    int nth);

#endif
