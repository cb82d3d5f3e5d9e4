/* Gated DeltaNet: the linear-attention layer of the Qwen3.5/3.6 hybrids (qwen35, qwen35moe).
 *
 * The specification is llama.cpp's models/qwen35.cpp and delta-net-base.cpp with the CPU
 * ops ssm_conv, l2_norm, softplus and gated_delta_net. Per layer and token, after the fused
 * input projections (qkv: (2 * n_k_heads * d_k + n_v_heads * d_v), z: (n_v_heads * d_v),
 * alpha and beta: (n_v_heads)):
 *
 *   1. a short causal conv1d over time (kernel K, usually 4) on every qkv channel, with
 *      the last K-1 inputs kept as state per sequence, then silu;
 *   2. q and k (per k-head) L2-normalised: x / max(|x|, eps);
 *   3. per v-head h: g = softplus(alpha[h] + dt_bias[h]) * a[h] (a = -exp(A_log), so g <= 0,
 *      a log decay), beta = sigmoid(beta_raw[h]); v-head h reads k-head h % n_k_heads
 *      (ggml_repeat_4d tiles the k heads; the fused op takes h % H_k too);
 *   4. the gated delta rule on the state S of the head, (d_v, d_k), S[j][i] for value j,
 *      key i (llama.cpp's layout, rows contiguous in the key index):
 *          S   = exp(g) * S
 *          u   = beta * (v - S k)
 *          S   = S + u k^T
 *          out = scale * S q,          scale = 1 / sqrt(d_k)
 *   5. out per head RMS-normed (weight ssm_norm, shared by heads) times silu(z).
 *
 * The recurrent form (dn_delta_rule_ref) is the decode step and the definition; the
 * chunked form (dn_delta_rule_chunked_ref) computes the same thing for prefill, chunk by
 * chunk of DN_CHUNK tokens, in the WY form of the Gated DeltaNet paper (Yang et al. 2024,
 * and llama.cpp's build_delta_net_chunking): with G_t the cumulative log decay inside the
 * chunk, L[t][s] = beta_t (k_t . k_s) exp(G_t - G_s) for s < t, and (I + L) solved by
 * forward substitution:
 *          (I + L) U = beta * V                  the corrected values
 *          (I + L) W = beta * exp(G) * K         the state's share of them
 *          V'  = U - W S^T                       (rows: tokens)
 *          o_t = scale * (exp(G_t) S q_t + sum_{s <= t} (q_t . k_s) exp(G_t - G_s) V'_s)
 *          S   = exp(G_last) S + sum_s exp(G_last - G_s) V'_s k_s^T
 * Every exponent is <= 0 (g <= 0), so nothing overflows. The two forms differ by float
 * rounding only (tests/test_deltanet.c states the bound).
 *
 * Which form prefill runs: the recurrent one, at every run length. On a CPU the SIMD
 * recurrent kernel (cpu/deltanet_impl.h) keeps a block of state rows in L1 through a tile
 * of tokens, so it is bound by arithmetic: four vector ops per state element and token
 * (two dots, the decay, the update). The chunked form spends three multiply-adds per
 * element and token on its three state products (W S^T, Q S^T, the state update) plus
 * about 5 n / (2 d) on the chunk's own n x n products and the forward substitution (1.25
 * at n = 64, d = 128), so at these head sizes it does no less arithmetic, only in larger
 * products; bench/bench_deltanet.c compares the two per run length and tier, and the
 * chunked form has not been the faster one. It stays as the tested second form (the
 * GPU-shaped one llama.cpp builds as a graph); llama.cpp's CPU backend also runs the
 * recurrent loop for prefill (its fused gated_delta_net op). The recurrent form also keeps
 * a prompt's bits independent of how it is split into prefill chunks.
 *
 * State per sequence and linear layer: conv (K - 1) * conv_channels floats plus
 * n_v_heads * d_v * d_k floats for S. */
#ifndef VT_CPU_DELTANET_H
#define VT_CPU_DELTANET_H

#include <stdint.h>

/* Tokens per chunk of the chunked form (llama.cpp's CS for the scalar-gate case). */
#define DN_CHUNK 64

/* Causal conv1d with state, then silu, for n_tokens tokens of n_ch channels.
 * x: (n_tokens, n_ch), row stride x_stride floats; out: the same shape, row stride
 * out_stride; out may be x (each input is read before its slot is written).
 * w: (kernel, n_ch), time-major, row stride ld: w[i * ld + c] multiplies the input
 * i - (kernel - 1) steps from the current one (the file holds it channel-major,
 * (n_ch, kernel): the model transposes it once at load). state: (kernel - 1, n_ch), row
 * stride ld, the last kernel - 1 inputs oldest first (zeros for a new sequence); updated
 * to the last kernel - 1 inputs seen. kernel >= 1, ld >= n_ch. Channels are independent,
 * and a channel's bits do not depend on where it falls in a call (every tier: a SIMD
 * tier's tail channels run the vector formula on padded lanes), so a caller may split
 * the channels among calls (threads) at any boundary: ld is the row stride of the whole,
 * w, state, x and out point at the first channel of the part. */
void dn_conv1d_silu_ref(const float *x, int64_t x_stride, int64_t n_tokens, int64_t n_ch,
                        const float *w, int64_t kernel, float *state, int64_t ld, float *out,
                        int64_t out_stride);

/* x[i] *= 1 / max(sqrt(sum x^2), eps) over n floats, in place (ggml_l2_norm). */
void dn_l2_norm_ref(float *x, int64_t n, float eps);

/* Per-head gates of one token: g[h] = softplus(alpha[h] + dt_bias[h]) * a[h] (softplus
 * as ggml: x above 20 passes through), beta[h] = 1 / (1 + exp(-beta_raw[h])). g may be
 * alpha, beta may be beta_raw. */
void dn_gates_ref(const float *alpha, const float *beta_raw, const float *dt_bias,
                  const float *a, int64_t n_heads, float *g, float *beta);

/* The recurrent gated delta rule (above) for one head over n_tokens tokens, in order.
 * q, k: (n_tokens, d_k) with row strides q_stride, k_stride (L2-normalised by the
 * caller); v: (n_tokens, d_v), stride v_stride; g, beta: one float per token, stride
 * gb_stride; state: (d_v, d_k), updated; out: (n_tokens, d_v), stride out_stride. out
 * may alias v row for row (v_t is read before out_t is written). */
void dn_delta_rule_ref(int64_t n_tokens, int64_t d_k, int64_t d_v, const float *q,
                       int64_t q_stride, const float *k, int64_t k_stride, const float *v,
                       int64_t v_stride, const float *g, const float *beta, int64_t gb_stride,
                       float scale, float *state, float *out, int64_t out_stride);

/* Floats of scratch the chunked form needs for heads of this shape (the ref's and every
 * tier's). */
int64_t dn_chunk_scratch_floats(int64_t d_k, int64_t d_v);

/* The chunked form of dn_delta_rule_ref, same arguments and results (within rounding),
 * plus scratch of dn_chunk_scratch_floats(d_k, d_v) floats. out must not alias q, k or v. */
void dn_delta_rule_chunked_ref(int64_t n_tokens, int64_t d_k, int64_t d_v, const float *q,
                               int64_t q_stride, const float *k, int64_t k_stride,
                               const float *v, int64_t v_stride, const float *g,
                               const float *beta, int64_t gb_stride, float scale, float *state,
                               float *out, int64_t out_stride, float *scratch);

/* The output gate of one head: out[i] = x[i] * r * w[i] * silu(z[i]), r = 1 / sqrt(mean(x^2)
 * + eps) (ggml_rms_norm, squares summed in double as the rms_norm kernel), silu(z) =
 * z / (1 + exp(-z)). out may be x. */
void dn_gated_norm_ref(const float *x, const float *z, const float *w, int64_t n, float eps,
                       float *out);

/* The kernels of one ISA tier, as the dispatch table holds them (cpu/kernels.h: cpu_kernels.dn,
 * chosen once for this CPU; VT_ISA=ref gives dn_kernels_ref). The SIMD tiers (avx2, avx512,
 * neon) are one source, cpu/deltanet_impl.h, over each ISA's float-vector primitives; they
 * take the same arguments as the _ref twins above and differ from them by float rounding
 * (fused multiply-adds, sums in vector lanes, a polynomial exp in the silu and the chunked
 * form's decay factors; tests/test_deltanet.c states the bounds). Like the refs:
 *  - delta_rule gives the same bits however a run of tokens is split across calls (the
 *    engine's prefill chunks), so a prompt prefilled in one chunk or in many matches;
 *  - each head's results depend on that head's inputs only, so threads that split the
 *    heads give the same bits at any thread count;
 *  - delta_rule_chunked needs dn_chunk_scratch_floats(d_k, d_v) floats of scratch. */
typedef struct dn_kernels {
    void (*conv1d_silu)(const float *x, int64_t x_stride, int64_t n_tokens, int64_t n_ch,
                        const float *w, int64_t kernel, float *state, int64_t ld, float *out,
                        int64_t out_stride);
    void (*l2_norm)(float *x, int64_t n, float eps);
    void (*delta_rule)(int64_t n_tokens, int64_t d_k, int64_t d_v, const float *q,
                       int64_t q_stride, const float *k, int64_t k_stride, const float *v,
                       int64_t v_stride, const float *g, const float *beta, int64_t gb_stride,
                       float scale, float *state, float *out, int64_t out_stride);
    void (*delta_rule_chunked)(int64_t n_tokens, int64_t d_k, int64_t d_v, const float *q,
                               int64_t q_stride, const float *k, int64_t k_stride,
                               const float *v, int64_t v_stride, const float *g,
                               const float *beta, int64_t gb_stride, float scale, float *state,
                               float *out, int64_t out_stride, float *scratch);
    void (*gated_norm)(const float *x, const float *z, const float *w, int64_t n, float eps,
                       float *out);
} dn_kernels;

/* The scalar twins as a table. */
extern const dn_kernels dn_kernels_ref;

#endif
