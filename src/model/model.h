/* A loaded model: hyperparameters, weights (views into the mmap'd GGUF) and the
 * tokenizer. Architectures: llama (Llama 2/3, Mistral, TinyLlama, SmolLM, and
 * Mixtral-style experts), qwen2 (Q/K/V biases, NeoX rope), qwen3 (per-head Q/K
 * RMSNorm, NeoX rope), qwen3moe (qwen3's attention, a mixture-of-experts
 * FFN), gemma2 and gemma3 (GEGLU FFN, embeddings scaled by sqrt(n_embd), RMSNorm
 * before and after attention and FFN, sliding-window layers in a pattern;
 * gemma2: soft-capped attention scores and logits; gemma3: QK-norm and a rope
 * base of its own on the sliding layers). Gemma's RMSNorm multiplies by
 * (1 + w); llama.cpp's converter stores 1 + w in the GGUF, so the norm is the
 * plain one here too. olmo2 has no norms before attention and FFN, only after
 * (as gemma's post-norms), and its QK-norm spans the whole Q and K rows of a
 * token, all heads together. smollm3 is llama with no rope on every 4th
 * layer (NoPE: il % 4 == 3). granite is llama with multipliers: embeddings,
 * each sublayer's output before its residual add, the attention scale and the
 * logits (divided). gpt-oss: Q/K/V/O biases, a sink logit per head, a sliding
 * window on alternate layers, YaRN rope, experts with biases, a router bias and
 * the clamped SwiGLU; its FFN norm is post_attention_norm. phi3 (Phi-3.5,
 * Phi-4): one attn_qkv matrix for Q, K and V and one ffn_up holding gate and up
 * (vt keeps them as row slices: wq/wk/wv, w_gate/w_up), NeoX rope with the
 * LongRoPE factors rope_factors_short / _long and rope.scaling.attn_factor; its
 * sliding_window key is ignored, as llama.cpp does. glm4: post-norms after
 * attention and FFN (gemma's), rope on the first rope.dimension_count
 * dimensions of each head (adjacent pairs), fused gate/up, Q/K/V biases where
 * the file has them. mistral3: llama, plus YaRN's beta and log-multiplier keys
 * and the attention temperature. muse-glimmer: the embeddings RMS-normed,
 * norms before and after attention and FFN (the post-norms at epsilon 1e-8),
 * QK-norm, a sigmoid gate (attn_gate) on the attention output, sliding windows
 * on 3 of every 4 layers with rope there only (the full layers are NoPE), the
 * logits times logit_scale then soft-capped. They differ only in the flags
 * below, so one forward pass serves all.
 *
 * Mixture of experts (n_expert > 0): a router ffn_gate_inp (n_expert, n_embd)
 * scores every expert per token; the token goes to the n_expert_used best
 * (softmax over all, top-k, the k weights renormalised to sum 1, as llama.cpp's
 * build_moe_ffn with norm_w for qwen3moe and llama), and its FFN output is the
 * weighted sum of those experts' SwiGLU FFNs. The file holds each of gate, up,
 * down as one 3-D tensor (ne = [n_in, n_out, n_expert]: expert e is the 2-D
 * matrix at e * n_out rows). vt keeps every expert as row slices of moe_ff_slice
 * rows (gate, up) and moe_down_slice rows (down), each its own mm_weight, so
 * the forward pass can hand a step's (expert, slice) pairs to threads as work
 * items and a decode step reads only the chosen experts' rows.
 *
 * qwen35moe (Qwen3.5/3.6-A3B) is qwen35's hybrid (model/qwen35.h) with qwen3moe's
 * routing (softmax, top-k, renormalised) plus a shared expert per layer
 * (ffn_{gate,up,down}_shexp, expert_shared_feed_forward_length rows, default
 * feed_forward_length) that every token runs, scaled by sigmoid(x . ffn_gate_inp_shexp)
 * and added to the routed sum before the residual add, as llama.cpp's
 * models/qwen35moe.cpp. */
#ifndef VT_MODEL_MODEL_H
#define VT_MODEL_MODEL_H

#include "base/mapfile.h"
#include "cpu/attention.h"
#include "cpu/matmul.h"
#include "gguf/gguf.h"
#include "model/layer_kind.h"
#include "model/moe.h"
#include "model/qwen35.h"
#include "tokenizer/tokenizer.h"
#include "vt.h"

#include <pthread.h>

typedef enum model_arch {
    MODEL_ARCH_LLAMA,
    MODEL_ARCH_QWEN2,
    MODEL_ARCH_QWEN3,
    MODEL_ARCH_QWEN3MOE,
    MODEL_ARCH_GEMMA2,
    MODEL_ARCH_GEMMA3,
    MODEL_ARCH_OLMO2,
    MODEL_ARCH_SMOLLM3,
    MODEL_ARCH_GRANITE,
    MODEL_ARCH_QWEN35,   /* hybrid: Gated DeltaNet and gated full attention (model/qwen35.h) */
    MODEL_ARCH_GPT_OSS,
    MODEL_ARCH_QWEN35MOE, /* qwen35's hybrid layers, routed experts plus a gated shared expert */
    MODEL_ARCH_PHI3,     /* fused attn_qkv and gate/up, LongRoPE factors */
    MODEL_ARCH_GLM4,     /* fused gate/up, post-norms (gemma's), partial rope */
    MODEL_ARCH_MISTRAL3, /* llama with YaRN's betas and log multiplier, attention temperature */
    MODEL_ARCH_MUSE_GLIMMER, /* gated attention, QK-norm, pre and post norms, rope on sliding layers only */
} model_arch;

/* The dense FFN's gate activation: h = act(x Wg^T) * (x Wu^T). */
typedef enum model_ffn_act {
    MODEL_FFN_SILU, /* SwiGLU: llama, qwen */
    MODEL_FFN_GELU, /* GEGLU, tanh-approximated GELU: gemma2, gemma3 */
} model_ffn_act;

/* The most experts a layer may have (llama.cpp's LLAMA_MAX_EXPERTS). */
#define MODEL_MAX_EXPERTS 1024

typedef enum model_rope {
    MODEL_ROPE_NORM, /* rotate adjacent pairs (x[2i], x[2i+1]): llama */
    MODEL_ROPE_NEOX, /* rotate halves (x[i], x[i + n_rot/2]): qwen2, qwen3 */
} model_rope;

/* The largest training context vt_model_load accepts (the contexts' n_ctx limit too). */
#define MODEL_MAX_CTX (1 << 24)

typedef struct model_hparams {
    model_arch arch;
    int64_t n_vocab;
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;   /* per head, for Q and K and V */
    int64_t n_ff;
    int64_t n_ctx_train;
    int64_t n_rot;      /* rotated dimensions per head (<= head_dim) */
    model_rope rope;
    float rope_freq_base;
    float rope_freq_scale; /* 1 / linear scaling factor */
    float rope_mscale;     /* cos/sin scale (llama.cpp's attn_factor; YaRN's magnitude correction) */
    /* YaRN (rope.scaling.type "yarn"): pair i turns at a blend of the interpolated
     * (freq_scale) and the original angle, all original below yarn_low, all
     * interpolated above yarn_high (ggml's corr dims, beta_fast 32, beta_slow 1) */
    bool rope_yarn;
    float yarn_low, yarn_high;
    /* the same for the sliding-window layers, from their own base and scale
     * (rope_freq_base_swa, _scale_swa below), as ggml ropes each layer on
     * llama.cpp's get_rope_freq_base/scale (rope_mscale_swa is rope_mscale
     * without YaRN); yarn_ext_swa is their extrapolation mix: yarn_ext, but 0
     * where the arch ropes them plainly (olmo2: scale 1, no YaRN, magnitude 1) */
    float yarn_low_swa, yarn_high_swa, rope_mscale_swa;
    float yarn_ext_swa;
    /* rope.scaling.original_context_length (n_ctx_train where absent): phi3's
     * LongRoPE takes its long factors in contexts longer than this, the short
     * ones otherwise (llama.cpp's get_rope_factors on n_ctx_seq) */
    int64_t n_ctx_orig;
    /* vt_model_params.rope (llama.cpp's context overrides, model.c rope_override):
     * YaRN's extrapolation mix (rope_yarn is yarn_ext != 0; 1 for a YaRN file), the
     * original context its ramp and the scaled reach start from (llama.cpp's
     * n_ctx_orig_yarn: the override's, else n_ctx_orig), whether that reach is
     * declared (the file's original_context_length, or an override of the scale or
     * of the original context), and which of those the override gave (messages) */
    float yarn_ext;
    int64_t n_ctx_orig_yarn;
    bool rope_reach_declared;
    bool rope_scale_given, rope_orig_given;
    /* mistral3 (llama 4's temperature tuning): queries times
     * 1 + attn_temp_scale * ln(floor(pos / n_ctx_orig) + 1); 0: none */
    float attn_temp_scale;
    float rms_eps;
    /* llama with <arch>.attention.sliding_window (gpt-oss: always, period 2 by
     * default, as llama.cpp's llama_model_openai_moe): n_swa > 0 positions, on the
     * layers swa_pattern picks (llama.cpp's set_swa_pattern: with a period n > 0
     * layer il slides when il % n < n - 1, the last of each period attends
     * fully; 0: every layer slides). n_swa 0: no sliding window. */
    int64_t n_swa;
    int64_t swa_pattern;
    /* (n_layer) muse-glimmer's per-layer sliding_window_pattern array, read layer
     * by layer as llama.cpp does: 1 where layer il slides; NULL: swa_pattern says
     * (owned by the model) */
    const uint8_t *swa_layers;
    /* the rope of the sliding-window layers (gemma: rope.freq_base_swa, the
     * "local" base; the scale is never scaled there); equal to the global ones
     * where the file has no key of its own */
    float rope_freq_base_swa;
    float rope_freq_scale_swa;
    model_ffn_act ffn_act;
    float embd_scale;      /* the token embeddings are multiplied by it (gemma: sqrt(n_embd)); 1 */
    float attn_scale;      /* scores = attn_scale * q.k (1 / sqrt(head_dim); gemma's query_pre_attn_scalar) */
    float attn_softcap;    /* > 0: scores = c * tanh(scores / c) (gemma2); 0: none */
    float final_softcap;   /* > 0: logits = c * tanh(logits / c) (gemma2, gemma3 where set); 0: none */
    float residual_scale;  /* sublayer outputs times it before the residual add (granite); 1 */
    float logit_scale;     /* logits times 1 / it (granite's logit_scale); 1 */
    float logit_mul;       /* logits times it, before final_softcap (muse-glimmer's logit_scale); 1 */
    float post_norm_eps;   /* the post-norms' RMSNorm epsilon (muse-glimmer: 1e-8); rms_eps */
    int64_t n_expert;      /* experts per FFN; 0: a dense FFN (w_gate, w_up, w_down) */
    int64_t n_expert_used; /* experts per token (<= n_expert) */
    int64_t n_ff_exp;      /* rows of one expert's gate and up */
    moe_gating gating;     /* how the router's logits become choices and weights */
    moe_act act;           /* the experts' activation */
    int64_t n_ff_shexp;    /* rows of the shared expert's gate and up (qwen35moe); 0: none */
} model_hparams;

typedef struct layer_weights {
    const float *attn_norm;        /* (n_embd), NULL where the arch has none (olmo2) */
    mm_weight wq;                  /* (n_head * head_dim, n_embd) */
    mm_weight wk, wv;              /* (n_head_kv * head_dim, n_embd) */
    mm_weight wo;                  /* (n_embd, n_head * head_dim) */
    mm_weight wg;                  /* (n_head * head_dim, n_embd) muse-glimmer's attn_gate: the attention
                                      output times sigmoid(x Wg^T) before wo; empty elsewhere */
    const float *bq, *bk, *bv;     /* Q/K/V biases (qwen2, gpt-oss), all three or NULL */
    const float *bo;               /* (n_embd) attention output bias (gpt-oss), or NULL */
    const float *q_norm, *k_norm;  /* qwen3 per-head norms (head_dim), or NULL */
    const float *q_norm_row;       /* (n_head * head_dim) olmo2: RMSNorm of a token's whole Q row, or NULL */
    const float *k_norm_row;       /* (n_head_kv * head_dim) the same for K, or NULL */
    const float *ffn_norm;         /* (n_embd), NULL where the arch has none (olmo2);
                                      gpt-oss's post_attention_norm */
    const float *attn_post_norm;   /* (n_embd) gemma: RMSNorm of the attention output before the
                                      residual add, or NULL */
    const float *ffn_post_norm;    /* (n_embd) gemma: the same for the FFN output, or NULL */
    mm_weight w_gate, w_up;        /* (n_ff, n_embd) */
    mm_weight w_down;              /* (n_embd, n_ff) */
    attn_layer_cfg attn;           /* sliding window, sinks: how this layer attends */
    bool no_rope;                  /* Q and K are not rotated (smollm3's NoPE layers) */
    /* mixture of experts (n_expert > 0; then w_gate/up/down are empty) */
    mm_weight router;              /* ffn_gate_inp (n_expert, n_embd) */
    mm_weight *exp_gate, *exp_up;  /* (n_expert * moe_n_ff_slices): [e * n + s] holds rows
                                      [s * moe_ff_slice, +moe_ff_slice) of expert e's (n_ff_exp, n_embd) */
    mm_weight *exp_down;           /* (n_expert * moe_n_down_slices): [e * n + s] holds rows
                                      [s * moe_down_slice, ...) of expert e's (n_embd, n_ff_exp) */
    const float *router_b;         /* (n_expert) router bias (gpt-oss), or NULL */
    const float *exp_gate_b, *exp_up_b; /* (n_expert, n_ff_exp) expert biases (gpt-oss), or NULL */
    const float *exp_down_b;       /* (n_expert, n_embd), or NULL */
    /* the shared expert (n_ff_shexp > 0, qwen35moe): a SwiGLU FFN every token runs,
     * its output times sigmoid(x . shexp_gate_inp) added to the routed experts' sum */
    mm_weight shexp_gate, shexp_up; /* (n_ff_shexp, n_embd) */
    mm_weight shexp_down;          /* (n_embd, n_ff_shexp) */
    const float *shexp_gate_inp;   /* (n_embd) ffn_gate_inp_shexp, F32 */
    /* qwen35: a linear (Gated DeltaNet) layer's weights, or NULL for an attention layer,
     * whose wq then has a gate after each head's query when attn_gated */
    q35_layer *lin;
    bool attn_gated;
    layer_kind kind;               /* what the layer is, for the forward pass (model/layer_kind.h) */
} layer_weights;

struct vt_model {
    char *path;
    mapfile map;
    gguf_file gguf;
    model_hparams hp;
    tokenizer *tok;

    vt_dtype embd_type;            /* token_embd rows, dequantized on lookup */
    const uint8_t *embd;           /* (n_vocab, embd_row_bytes) */
    size_t embd_row_bytes;
    const float *output_norm;      /* (n_embd) */
    mm_weight output;              /* (n_vocab, n_embd), token_embd when tied */
    const float *rope_freqs;       /* (n_rot / 2) llama3 frequency factors, or NULL */
    const float *embd_norm;        /* (n_embd) ones: muse-glimmer's unweighted RMSNorm of the
                                      embeddings, or NULL */
    const float *rope_long, *rope_short; /* (n_rot / 2) phi3's LongRoPE factors (both or neither;
                                            the forward pass picks one per context), or NULL */
    layer_weights *layers;         /* (n_layer) */
    int64_t moe_ff_slice, moe_n_ff_slices;     /* expert gate/up rows per slice, slices per expert */
    int64_t moe_down_slice, moe_n_down_slices; /* expert down rows per slice, slices per expert */
    mm_arena arena;                /* the packed copies of the matrices, in forward order */
    q35_hparams *q35;              /* qwen35's hybrid hyperparameters, or NULL */

    void **owned;                  /* buffers the model allocated (converted norms) */
    int64_t n_owned, cap_owned;
    size_t weight_bytes;
    size_t expert_bytes;           /* of weight_bytes, in the experts' 3-D tensors */
    size_t step_bytes;             /* read by one decode step (vt_model_step_bytes) */
    char desc[256];

    /* model_nonfinite_error's scan of the weights, done once, on the first error */
    pthread_mutex_t scan_mu;
    bool scan_done;
    char scan_result[256];         /* "tensor '...': element N is nan", or "" */
};

typedef struct vt_model model;

/* The model's matrices in the order a forward pass reads them (attention, then
 * the dense FFN or the router and every expert slice; the head last), into out
 * where it is not NULL; returns how many. */
int64_t model_matrices(model *m, mm_weight **out);

/* VT_E_NUMERIC for a logits row with a NaN or an infinity, produced at `step`
 * (a phrase for the message: "decode of batch token 3 (sequence 0, position 7)").
 * The message also names the first weight tensor of the file that holds a
 * non-finite value, or says that all are finite (then the activations
 * overflowed). The weights are scanned once per model, on the first such error;
 * thread-safe. */
vt_status model_nonfinite_error(vt_model *m, const char *step);

/* Loading helpers for architecture modules (model/qwen35.c): a vector as F32 (a
 * converted copy where stored otherwise), a matrix (n_in, n_out) as an mm_weight, the
 * layer's FFN (dense or experts, as load_weights), a buffer the model frees. Missing
 * required tensors and wrong shapes are VT_E_FORMAT naming the tensor. */
vt_status model_load_vec(model *m, const char *name, int64_t n, bool required, const float **out);
vt_status model_load_mat(model *m, const char *name, int64_t n_in, int64_t n_out, bool required,
                         mm_weight *w);
vt_status model_load_ffn(model *m, int64_t il, layer_weights *L);
vt_status model_own_buffer(model *m, void *p);

/* Contexts past the training context. The longest context a model runs is its
 * context_length, or, where the file declares rope scaling (linear or YaRN with a
 * factor > 1) and rope.scaling.original_context_length, that original length times
 * the factor if it reaches further (gpt-oss: 4096 x 32; Qwen3 with YaRN: 32768 x 4
 * past a context_length of 40960). Scaling without the original length adds
 * nothing: context_length is then the scaled context already (HF's
 * max_position_embeddings of Gemma 3 or LLaMA-2-32K). The caller's rope override
 * (vt_model_params.rope: a scale or an original context) declares a reach of its
 * own, from that original context (or the file's) times its factor, as llama.cpp's
 * --rope-scale / --yarn-orig-ctx extend a model. model_n_ctx_max gives that
 * length (at most MODEL_MAX_CTX); model_check_n_ctx is VT_OK for an n_ctx within
 * it and otherwise VT_E_RANGE with a message that names n_ctx, the keys and the
 * largest context allowed: vt never extrapolates rope silently. */
int64_t model_n_ctx_max(const model *m);
vt_status model_check_n_ctx(const model *m, int64_t n_ctx);

/* Rows of token_embd for tokens[0..n) into out (n, n_embd). Ids are checked by
 * the caller. */
void model_embed_rows(const model *m, const int32_t *tokens, int64_t n, float *out);

#endif
