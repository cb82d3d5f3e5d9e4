/* What a layer is, decided once at load from its weights and the hyperparameters
 * (layer_kind_decide), so that the forward pass reads one small descriptor per
 * layer instead of re-testing weights, hyperparameters and the architecture
 * inside its layer loop. The families, by the rows they take:
 *
 *   family        mixer     rope               qk_norm  gate    ffn         out (attn/ffn)  also
 *   llama         attn      base               none     none    dense, moe  add/add, add/moe
 *   qwen2         attn      base               none     none    dense       add/add         qkv_bias
 *   qwen3         attn      base               head     none    dense       add/add
 *   qwen3moe      attn      base               head     none    moe         add/moe
 *   gemma2        attn      base (swa: its own base where the file sets one)
 *                                              none     none    dense GELU  post_norm/post_norm
 *   gemma3        attn      swa on sliding layers, base on the others
 *                                              head     none    dense GELU  post_norm/post_norm
 *   olmo2         attn      base               row      none    dense       post_norm/post_norm  no pre-norm
 *   smollm3       attn      none on every 4th  none     none    dense       add/add
 *   granite       attn      base (none: unfinetuned) none none  dense       scaled/scaled
 *   gpt-oss       attn      base               none     none    moe         bias/moe        qkv_bias, sinks
 *   phi3          attn      base               none     none    dense       add/add
 *   glm4          attn      base               none     none    dense       post_norm/post_norm  qkv_bias
 *   mistral3      attn      base               none     none    dense       add/add         q_temp
 *   muse-glimmer  attn      swa or base on sliding layers, none on full ones
 *                                              head     matrix  dense       post_norm/post_norm
 *   qwen35        deltanet, every full_attn_interval-th attn (base, head, in_q)
 *                                                               dense       add/add
 *   qwen35moe     as qwen35                                     moe_shared  add/moe_shared
 *
 * gpt-oss's experts have biases and a clamped SwiGLU: ffn=moe split (moe_split).
 *
 * How an attention layer attends (window, sinks, soft-cap) stays in
 * layer_weights' attn (cpu/attention.h), which the kernels read. */
#ifndef VT_MODEL_LAYER_KIND_H
#define VT_MODEL_LAYER_KIND_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How the layer mixes tokens. */
typedef enum layer_mixer {
    LAYER_MIXER_ATTN,     /* softmax attention over the layer's KV cache group */
    LAYER_MIXER_DELTANET, /* qwen35's Gated DeltaNet (layer_weights' lin), its state in the STATE group */
} layer_mixer;

/* Which rope table rotates Q and K. */
typedef enum layer_rope {
    LAYER_ROPE_NONE, /* NoPE: not rotated (smollm3's every 4th layer, granite unfinetuned, muse-glimmer's
                        full layers) */
    LAYER_ROPE_BASE, /* rope.freq_base and the global scale */
    LAYER_ROPE_SWA,  /* the sliding layers' own base and scale (gemma's local base) */
} layer_rope;

/* RMSNorm of Q and K before rope. */
typedef enum layer_qk_norm {
    LAYER_QK_NORM_NONE,
    LAYER_QK_NORM_HEAD, /* per head, (head_dim) weights: qwen3, gemma3, qwen35, muse-glimmer */
    LAYER_QK_NORM_ROW,  /* a token's whole Q row and whole K row: olmo2 */
} layer_qk_norm;

/* The attention output times sigmoid(gate) before the output projection. */
typedef enum layer_gate {
    LAYER_GATE_NONE,
    LAYER_GATE_IN_Q,   /* qwen35: each head's gate follows its query in wq's output */
    LAYER_GATE_MATRIX, /* muse-glimmer: attn_gate (wg), a fourth matrix beside Q/K/V */
} layer_gate;

typedef enum layer_ffn {
    LAYER_FFN_DENSE,      /* act(x Wg^T) * (x Wu^T), then down; act is hp.ffn_act (SiLU or GELU);
                             fused gate/up (phi3, glm4) are row slices of one matrix */
    LAYER_FFN_MOE,        /* routed experts */
    LAYER_FFN_MOE_SHARED, /* routed experts plus the gated shared expert (qwen35moe) */
} layer_ffn;

/* How a sublayer's output joins the residual stream x. */
typedef enum layer_out {
    LAYER_OUT_NONE,       /* nothing (the stream before the first layer) */
    LAYER_OUT_ADD,        /* x += out */
    LAYER_OUT_POST_NORM,  /* x += RMSNorm(out) * post-norm (gemma, olmo2, glm4, muse-glimmer) */
    LAYER_OUT_SCALED,     /* x += out * residual_scale (granite) */
    LAYER_OUT_BIAS,       /* x += out + bo, the bias added to out first (gpt-oss's attention) */
    LAYER_OUT_MOE,        /* x += the routed experts' weighted sum */
    LAYER_OUT_MOE_SHARED, /* x += that sum + the shared expert's output times its gate */
} layer_out;

typedef struct layer_kind {
    layer_mixer mixer;
    /* attention layers only (the rest of how they attend is attn_layer_cfg): */
    layer_rope rope;
    layer_qk_norm qk_norm;
    layer_gate gate;
    bool qkv_bias;      /* Q, K, V biases (qwen2, gpt-oss, phi3 / glm4 where the file has them) */
    bool q_temp;        /* mistral3's query temperature (hp.attn_temp_scale) */
    /* every layer: */
    bool pre_norm;      /* RMSNorm before the mixer and before the FFN (all but olmo2; the forward
                           pass hands step_norm_quant the weights, NULL where there are none) */
    layer_out attn_out; /* how the mixer's output joins x */
    layer_ffn ffn;
    /* MoE layers only: */
    bool moe_split;     /* the experts need gate and up as floats: biases, or an activation
                           mm_compute_glu does not fuse (gpt-oss) */
    bool shexp_apart;   /* LAYER_FFN_MOE_SHARED: the shared expert's activation type is not the
                           routed experts', so it cannot read their input and runs after them
                           as its own dense FFN (three barriers more) instead of among their
                           work items */
    layer_out ffn_out;  /* how the FFN's output joins x (in the next layer's first step) */
} layer_kind;

struct vt_model;

/* Layer il's kind from m's loaded weights and hyperparameters (and, for the
 * rope, whether the sliding layers rotate with a base or scale of their own).
 * VT_E_UNSUPPORTED for a layer vt would run only partly: a QK-norm on Q alone
 * or K alone, a pre-norm before the mixer but not before the FFN (or the
 * reverse). */
vt_status layer_kind_decide(const struct vt_model *m, int64_t il, layer_kind *out);

/* Every layer's kind into m->layers[il].kind (vt_model_load, once the weights
 * are loaded); the first error of layer_kind_decide. */
vt_status layer_kind_fill(struct vt_model *m);

/* A short line for messages and tests: "attn rope=swa qk=head gate=matrix
 * norms=sandwich ffn=dense out=post_norm/post_norm", the attention fields only
 * for attention layers, " split" and " apart" after the ffn where moe_split and
 * shexp_apart are set. Returns out. */
const char *layer_kind_str(const layer_kind *k, char *out, size_t cap);

#endif
