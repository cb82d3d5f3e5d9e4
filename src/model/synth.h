/* Synthetic models: a GGUF of a real architecture and shape with random weights.
 *
 * Speed does not depend on weight values, so benchmarks of real shapes (a 1B-class
 * llama) and parity tests for every weight type run on files written here. The
 * weights are N(0, 0.02), the norms 1.0, the qwen2 Q/K/V biases N(0, 0.02). Every
 * value depends only on (seed, tensor name, row), so a file is reproducible
 * whatever the thread count.
 *
 * The metadata keys and tensor names are the ones llama.cpp reads:
 *   general.architecture, general.name, general.file_type,
 *   <arch>.block_count .context_length .embedding_length .feed_forward_length
 *   <arch>.attention.head_count .head_count_kv .layer_norm_rms_epsilon
 *   <arch>.attention.key_length .value_length (qwen2/qwen3, or head_dim != n_embd/n_head)
 *   <arch>.rope.freq_base .rope.dimension_count
 *   token_embd.weight (n_embd, n_vocab)  output_norm.weight (n_embd)
 *   output.weight (n_embd, n_vocab), absent when tied
 *   blk.N.attn_norm.weight (n_embd)
 *   blk.N.attn_q.weight (n_embd, n_head*head_dim)  attn_k/attn_v (n_embd, n_head_kv*head_dim)
 *   blk.N.attn_output.weight (n_head*head_dim, n_embd)
 *   blk.N.ffn_norm.weight (n_embd)  ffn_gate/ffn_up (n_embd, n_ff)  ffn_down (n_ff, n_embd)
 *   qwen2: blk.N.attn_q.bias / attn_k.bias / attn_v.bias
 *   qwen3, gemma3: blk.N.attn_q_norm.weight / attn_k_norm.weight (head_dim)
 *   gemma2, gemma3: blk.N.post_attention_norm.weight / post_ffw_norm.weight (n_embd);
 *     gemma2 has no output.weight (always tied); rms epsilon 1e-6, rope base 10000;
 *     <arch>.attention.sliding_window (gemma2 writes it always: 4096 unless
 *     n_swa says) and .sliding_window_pattern (u32; one bool per layer where
 *     swa_pattern_arr or swa_layers says, so too for olmo2, gpt-oss and
 *     muse-glimmer), .rope.freq_base_swa, .attn_logit_softcapping,
 *     .final_logit_softcapping where set
 *   olmo2: no attn_norm / ffn_norm; post_attention_norm / post_ffw_norm (n_embd);
 *     attn_q_norm (n_head*head_dim) / attn_k_norm (n_head_kv*head_dim), whole-row
 *     QK-norm; never tied; .attention.sliding_window (OLMo 3) where n_swa > 0
 *   smollm3: llama's tensors and keys (its NoPE layers are implied by the arch)
 *   granite: llama's, plus <arch>.embedding_scale 12, .residual_scale 0.22,
 *     .attention.scale 2 / sqrt(head_dim), .logit_scale 8
 *   phi3: blk.N.attn_qkv.weight (n_embd, n_head*head_dim + 2*n_head_kv*head_dim) in place
 *     of attn_q/k/v; ffn_up.weight (n_embd, 2*n_ff), gate rows then up rows, and no
 *     ffn_gate; rope_factors_long.weight / rope_factors_short.weight (head_dim / 2),
 *     1 + 7 x^2 and 1 + 0.5 x^2 over x = i / (n - 1); .rope.scaling.original_context_length
 *     (yarn_orig_ctx, else n_ctx) and .rope.scaling.attn_factor
 *     sqrt(1 + ln(n_ctx / orig) / ln(orig)) (1 where n_ctx <= orig), as Phi-3's converter
 *   glm4: llama's attention with Q/K/V biases (fused_qkv: one attn_qkv.weight and
 *     attn_qkv.bias), post_attention_norm / post_ffw_norm,
 *     phi3's fused ffn_up, rope over head_dim / 2 (rope.dimension_count)
 *   muse-glimmer: gemma3's norms and QK-norm, blk.N.attn_gate.weight (n_embd, n_head*head_dim)
 *     N(0, 0.2); never tied; .attention.sliding_window (required), .sliding_window_pattern,
 *     .logit_scale 2, .final_logit_softcapping and .rope.freq_base_swa where set
 *   mistral3: llama's tensors; .attention.temperature_scale 0.1; with yarn_factor also
 *     .rope.scaling.yarn_beta_fast 16, .yarn_beta_slow 2, .yarn_log_multiplier 1
 * gpt-oss (llama.cpp's LLM_ARCH_OPENAI_MOE) is a mixture of experts with, per layer,
 *   blk.N.attn_q.bias / attn_k.bias / attn_v.bias / attn_output.bias, N(0, 0.02)
 *   blk.N.attn_sinks.weight (n_head), N(0, 1), so that the sinks weigh in the softmax
 *   blk.N.post_attention_norm.weight in place of ffn_norm
 *   blk.N.ffn_gate_inp.bias (n_expert), ffn_gate_exps.bias / ffn_up_exps.bias
 *   (n_ff_exp, n_expert), ffn_down_exps.bias (n_embd, n_expert), N(0, 0.02)
 *   <arch>.expert_feed_forward_length, .attention.sliding_window (required),
 *   .rope.freq_base_swa where set
 * Mixture of experts (qwen3moe, which has qwen3's Q/K norms, or llama with
 * n_expert > 0: Mixtral's layout) replaces ffn_gate/up/down by
 *   <arch>.expert_count .expert_used_count (qwen3moe: .expert_feed_forward_length)
 *   blk.N.ffn_gate_inp.weight (n_embd, n_expert), F32 as llama.cpp's quantizer keeps it
 *   blk.N.ffn_gate_exps/ffn_up_exps (n_embd, n_ff_exp, n_expert)
 *   blk.N.ffn_down_exps (n_ff_exp, n_embd, n_expert)
 * The router's weights are N(0, 3 / sqrt(n_embd)): router logits of spread
 * about 3, so a token's experts are clearly chosen (at 0.02 the softmax would
 * be nearly flat and the top-k a matter of rounding; at 1 / sqrt(n_embd) an
 * eighth of the tokens had a layer whose k-th and (k+1)-th expert were within
 * 0.02 in logit, where any float noise may swap them).
 * qwen35 (the Qwen3.5/3.6 dense hybrid; keys and tensors in model/qwen35.h) has qwen3's
 * Q/K norms, a full-attention attn_q of twice the heads (query and gate per head),
 * post_attention_norm in place of ffn_norm, rope over head_dim / 4 dimensions with
 * rope.dimension_sections, and in its linear layers attn_qkv, attn_gate, ssm_conv1d
 * (N(0, 0.3)), ssm_dt.bias, ssm_a (-exp(N(0, 1)): decays in (0, 1)), ssm_alpha,
 * ssm_beta, ssm_norm (ones), ssm_out.
 * qwen35moe is qwen35 with qwen3moe's experts (and .expert_feed_forward_length) plus a
 * shared expert per layer: <arch>.expert_shared_feed_forward_length,
 *   blk.N.ffn_gate_inp_shexp.weight [n_embd, 1] F32 (as llama.cpp's converter writes it),
 *   N(0, 1 / sqrt(n_embd)): gates sigmoid(g) of g about N(0, 1), so the gate shows
 *   blk.N.ffn_gate_shexp/ffn_up_shexp (n_embd, n_ff_shexp), ffn_down_shexp (n_ff_shexp, n_embd)
 * qwen35 and qwen35moe with n_nextn > 0 also carry that many multi-token-prediction
 *   layers after the n_layer trunk ones (block_count = n_layer + n_nextn,
 *   <arch>.nextn_predict_layers): a full-attention block with the arch's FFN plus
 *   blk.N.nextn.eh_proj (2 n_embd, n_embd), nextn.enorm, nextn.hnorm,
 *   nextn.shared_head_norm (n_embd), as llama.cpp's converter names them.
 * (shapes in GGUF order: ne[0], the row length, first).
 *
 * The tokenizer comes from a vocabulary GGUF (every tokenizer.* key is copied)
 * or, without one, is a generated SentencePiece vocabulary of n_vocab tokens:
 * <unk> <s> </s>, the 256 byte tokens <0x00>..<0xFF>, then "▁t<i>" pieces.
 * control_tokens then renames the last tokens of either (padding and reserved
 * tokens in the real vocabularies of ../shared/models/vocab) to control tokens
 * with the given texts: at most SYNTH_MAX_CONTROL, none that is already a token,
 * and none over the first 259. */
#ifndef VT_MODEL_SYNTH_H
#define VT_MODEL_SYNTH_H

#include "base/status.h"
#include "quant/quant.h"

#include <stdbool.h>
#include <stdint.h>

#define SYNTH_MAX_CONTROL 64

typedef struct synth_params {
    const char *arch;       /* "llama", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "olmo2", "smollm3",
                               "granite", "qwen35", "qwen35moe", "gpt-oss", "phi3", "glm4", "mistral3" or
                               "muse-glimmer" */
    int64_t n_layer;
    int64_t n_embd;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;       /* 0: n_embd / n_head */
    int64_t n_ff;
    int64_t n_expert;       /* experts per layer (qwen3moe, qwen35moe; llama: 0 for a dense FFN) */
    int64_t n_expert_used;  /* experts per token */
    int64_t n_ff_exp;       /* rows of an expert's gate/up; 0: n_ff (llama's experts are always n_ff) */
    int64_t n_ctx;          /* context_length */
    int64_t n_vocab;        /* generated vocabulary size (>= 259); ignored with vocab_path */
    const char *vocab_path; /* GGUF to copy tokenizer.* from, or NULL */
    const char *control_tokens; /* comma-separated texts that replace the last tokens of the
                                   vocabulary as control tokens (a chat format's markers, as
                                   real vocabularies have them), or NULL */
    vt_dtype type;          /* the matrices */
    vt_dtype embd_type;     /* token_embd.weight; VT_DTYPE_COUNT: same as type */
    vt_dtype output_type;   /* output.weight; VT_DTYPE_COUNT: same as type */
    vt_dtype exp_type;      /* ffn_*_exps; VT_DTYPE_COUNT: same as type (MXFP4: gpt-oss's) */
    bool tied;              /* no output.weight: the head reuses token_embd */
    float rope_freq_base;   /* 0: 10000 (llama) or 1e6 (qwen) */
    float yarn_factor;      /* > 0: rope.scaling.type yarn with this factor */
    int64_t yarn_orig_ctx;  /* its rope.scaling.original_context_length (0: n_ctx; phi3: LongRoPE's) */
    float rms_eps;          /* 0: 1e-5 (llama) or 1e-6 (qwen) */
    int64_t n_swa;          /* > 0: attention.sliding_window (llama; gpt-oss: required), on the layers of */
    int64_t swa_pattern;    /* attention.sliding_window_pattern (model_hparams; gpt-oss: 0 writes no key,
                               which is period 2) */
    bool swa_pattern_arr;   /* gemma2, gemma3, olmo2, gpt-oss, muse-glimmer: that pattern (gpt-oss's 0: its
                               period 2) as one bool per layer, true where the layer slides (as OLMo 3's
                               converter writes it); needs n_swa */
    const char *swa_layers; /* the same arches: the array as n_layer characters, '1' where layer il
                               slides, '0' where it attends fully (in place of swa_pattern); NULL: none */
    float rope_freq_base_swa; /* > 0: rope.freq_base_swa (gemma2, gemma3, muse-glimmer, gpt-oss) */
    float attn_softcap;     /* > 0: attn_logit_softcapping (gemma2; 0: its default 50) */
    float final_softcap;    /* > 0: final_logit_softcapping (gemma2, gemma3) */
    bool fused_qkv;         /* glm4: one attn_qkv.weight and attn_qkv.bias (phi3: always, no bias) */
    float qk_std;           /* > 0: attn_q and attn_k weights N(0, qk_std), for sharper
                               attention (scores grow with its square); 0: 0.02 */
    /* qwen35 (hybrid, model/qwen35.h): Gated DeltaNet layers, one in full_attn_interval
     * attending fully; 0 picks the default in brackets */
    int64_t ssm_d_state;      /* linear layers' head size [head_dim] */
    int64_t ssm_n_k_heads;    /* their q/k heads [n_head_kv] */
    int64_t ssm_n_v_heads;    /* their v heads [n_head] */
    int64_t ssm_conv_kernel;  /* [4] */
    int64_t full_attn_interval; /* [4] */
    int64_t n_ff_shexp;       /* qwen35moe: rows of the shared expert [n_ff] */
    int64_t n_nextn;          /* qwen35, qwen35moe: multi-token-prediction layers after the trunk [0] */
    uint64_t seed;
    int n_threads;          /* 0: physical cores */
    bool progress;          /* progress line on stderr */
} synth_params;

/* A small llama: 2 layers, n_embd 256, 4 heads / 2 KV heads, n_ff 512, ctx 256,
 * generated vocabulary of 512, F32, seed 1. */
synth_params synth_default_params(void);

/* Write the model to path. VT_E_INVALID names the parameter that is wrong (an
 * unknown arch, heads that do not divide n_embd, a row length that is not a
 * multiple of the type's block size, a type vt cannot write); VT_E_IO and
 * VT_E_FORMAT come from reading the vocabulary or writing the file. */
vt_status synth_write(const synth_params *p, const char *path);

/* llama.cpp's general.file_type for a file whose matrices are all `type` (the
 * "_S" mix for K-quants); -1 for a type with no file type. */
int synth_file_type(vt_dtype type);

#endif
