/* Mixture-of-experts routing and activations, in the float steps of llama.cpp's
 * build_moe_ffn (src/llama-graph.cpp) and the ggml CPU ops it builds, so that a
 * token's experts are the ones llama.cpp picks and its weights the same to
 * rounding:
 *
 *   MOE_GATING_SOFTMAX         probs = softmax(logits) over all n experts (max
 *                              subtracted, the sum in double, scaled by 1/sum);
 *                              the k largest; their probs divided by their sum
 *                              (clamped below at 2^-14): qwen3moe, llama
 *                              (Mixtral), norm_w = true.
 *   MOE_GATING_SOFTMAX_WEIGHT  the k largest logits (plus the router bias);
 *                              weights = softmax over those k: gpt-oss.
 *
 * The choice is ordered best first, the lower index first on a tie, and the
 * layer's output is sum_j w_j * expert_j(x) added in that order. */
#ifndef VT_MODEL_MOE_H
#define VT_MODEL_MOE_H

#include <stdint.h>

typedef enum moe_gating {
    MOE_GATING_SOFTMAX,
    MOE_GATING_SOFTMAX_WEIGHT,
} moe_gating;

/* An expert's activation of (gate, up). */
typedef enum moe_act {
    MOE_ACT_SILU,       /* SiLU(gate) * up: qwen3moe, llama */
    MOE_ACT_SWIGLU_OAI, /* moe_swiglu_oai: gpt-oss */
} moe_act;

/* gpt-oss's clamped SwiGLU (LLM_FFN_SWIGLU_OAI_MOE: ggml_swiglu_oai). */
#define MOE_OAI_ALPHA 1.702f
#define MOE_OAI_LIMIT 7.0f

/* One token: choose k of the n experts (1 <= k <= n) from its router logits
 * (plus bias, where not NULL), into sel (k expert ids, best first) and w
 * (their weights). scratch: n floats (may be logits itself, which is then
 * overwritten). */
void moe_select(const float *logits, const float *bias, int64_t n, int64_t k, moe_gating gating,
                float *scratch, int32_t *sel, float *w);

/* g[i] = x * sigmoid(alpha * x) * (y + 1) with x = min(g[i], limit) and
 * y = clamp(u[i], -limit, limit), as ggml's swiglu_oai computes it. */
void moe_swiglu_oai(float *g, const float *u, int64_t n, float alpha, float limit);

#endif
