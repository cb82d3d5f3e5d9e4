/* Parity gate: vt's logits match the reference llama.cpp's on the same file.
 *
 * Models: the four real tiny models of ../shared/models (TinyStories-656K-Q8_0;
 * TinyStories-656K-Q2_K, whose matrices are IQ4_NL; llama-2-tiny-random, F16;
 * stories260K, F32) and synthetic llama models in each of the 15 weight types
 * (qwen2 and qwen3 in F16, Q8_0, Q4_0, Q4_K and Q6_K), written at test time by
 * src/model/synth.c (2 layers, n_embd 256, 4 heads / 2 KV heads, head_dim 64,
 * n_ff 512, generated vocabulary of 512).
 *
 * Prompt: BOS, 8 fixed pseudo-random ids, then llama.cpp's greedy continuation to
 * 32 tokens. Both engines get the same 32 ids. vt is run twice: one batch of 32
 * (the prefill path) and 32 single-token steps (the decode path).
 *
 * Tolerances (stated, and printed with every table):
 *   - logits: NMSE = sum (vt - ref)^2 / sum ref^2 per position; the maximum over
 *     the 32 positions must be <= PARITY_NMSE (1e-3). A wrong kernel, rope or
 *     norm gives NMSE of 1e-2..1. llama.cpp against itself (A/A below: its batch
 *     against its step-by-step logits) differs by up to 2.6e-4 on the synthetic
 *     qwen3/qwen2 K-quant and IQ4_XS models from position 15 on (with flash
 *     attention on or off), 1e-8..1e-5 elsewhere, so the bound sits 4x above
 *     llama.cpp's own floor. Measured vt vs llama.cpp (895aa34): F32/F16 2e-7..1.5e-6,
 *     BF16 ~2e-5, quantized types 1e-4..5.6e-4. The last come from the first: a
 *     float difference of ~5e-4 relative (NMSE ~1e-7) before an activation is
 *     quantized to q8 flips the rounding of 1-2% of its values, one step each
 *     (a lone Q8_0 output head on F32 layers already shows 2e-5).
 *   - greedy tokens: wherever llama.cpp's top-1 leads its top-2 by more than
 *     PARITY_GAP (0.2) times the RMS of that position's logits (about six times
 *     the RMS error that PARITY_NMSE allows), vt's argmax must equal llama.cpp's.
 *
 * Mixture of experts: synthetic qwen3moe and Mixtral-style llama models with a
 * real vocabulary (qwen2's, from ../shared/models/vocab): 2 layers, n_embd 256,
 * 4 heads / 2 KV heads of 64, 16 experts of 512 rows, 4 used per token (routing
 * softmax, top-k, renormalised), written by vt synth in F16, Q8_0, Q4_0 and
 * Q4_K, and by llama.cpp's own quantizer (llama_model_quantize) from the F16
 * file to Q4_K_M, Q4_0 and Q8_0 (ffn_gate_inp stays F32 there, down_exps of
 * some layers become Q6_K); the llama ones in F16 and llama.cpp's Q4_K_M.
 * Same tolerances, but for near ties of the router:
 * where llama.cpp's k-th and (k+1)-th expert of a token, in some layer, are
 * within PARITY_TIE_MARGIN in log-probability (read from its ffn_moe_probs
 * through cb_eval, tests/llama/llama_ref.h), float noise of the size PARITY_NMSE
 * allows may pick the other expert, and that row's logits then move by
 * 1e-3..1e-2 NMSE (measured: F16 one flip at margin 2.6e-4, NMSE 2.9e-3, every
 * other row 1e-9..2e-6; Q4_0 flips at 5.3e-3 and 8.3e-3, NMSE 9e-3 and 1.4e-2).
 * Those rows (a few of 32; the table's "ties") are held to PARITY_NMSE_TIE and
 * left out of the argmax rule; every other row is held to PARITY_NMSE.
 *
 * Dense families (gemma3, gemma2, olmo2, smollm3): synthetic models with the
 * vocabulary their models ship with (gemma-4's, 262144 tokens; llama-bpe's for
 * olmo2 and smollm3), 3 layers with sliding windows of 8 positions (smollm3: 4
 * layers, no window, sharper attention so that its rope-less 4th layer shows;
 * dense_params), written by vt synth in F16 and Q4_K (granite also Q8_0 and
 * Q4_0: the large vocabularies are most of a row's cost) and by llama.cpp's
 * quantizer from the F16 file to Q4_K_M. smollm3 is held to
 * PARITY_NMSE (measured 2e-6 F16, 3e-4..6.5e-4 quantized); the families with
 * post-norms to PARITY_NMSE_POSTNORM (2.5e-3), 3-4x llama.cpp's own floor on
 * these models (A/A, its batch against its steps: 6.3e-4 on gemma3 Q4_K, 7.5e-4
 * on olmo2 Q4_K): the norms after attention and FFN rescale each sublayer's
 * output to RMS 1, so a q8 rounding flip in its input moves the residual more
 * than in llama. Measured vt vs llama.cpp: F16 1e-6..2.5e-6, Q8_0/Q4_0
 * 4e-4..1.2e-3, Q4_K and llama.cpp's Q4_K_M 6e-4..1.5e-3; greedy agreement as
 * for llama.
 *
 * gpt-oss: synthetic 3-layer models (n_embd 256, 4 heads / 2 KV heads of 64,
 * 16 experts of 512, 4 used) with llama-bpe's vocabulary, a sliding window of 8
 * on layers 0 and 2 (the 32 positions reach past it), sinks, Q/K/V/O and expert
 * biases and YaRN (factor 4, original context 16), by vt synth in F16, Q8_0 and
 * Q8_0 with MXFP4 experts, and by llama.cpp's quantizer (MXFP4_MOE, Q8_0) from
 * the F16 file; its router's near ties are gaps of the biased logits
 * (SOFTMAX_WEIGHT: the softmax runs over the chosen k only), and wider: the
 * vt synth Q8_0 file flipped an expert at a gap of 0.0212 (that row's NMSE
 * 1.9e-2), so rows within PARITY_TIE_MARGIN_OSS (0.05) are the ties, held to
 * PARITY_NMSE_TIE_OSS (0.1: the F16 file's flip at a gap of 2e-4 moved its
 * row by 5.2e-2; a flipped expert carries its full softmax weight over k = 4).
 * The rows after a flip also move (its K/V differ): the F16 file's rows after
 * the tie at position 27 are at 6e-5..1.5e-4, the ones before at ~1e-6. A
 * fourth F16 file (swabase) ropes its sliding layers on a base of their own
 * (rope.freq_base_swa 10000, the full layers 1e6), YaRN's ramp from each:
 * 3.2e-6; on the full layers' base 8.1e-3, without YaRN 2.6e-2.
 *
 * YaRN: synthetic llama and qwen3 (F16) with rope.scaling.type yarn, factor 4,
 * original context 16, under the same tolerances; the llama one has a
 * context_length of 16 too, so that its positions 16..31 are past the training
 * context (both engines run a context of 64 = 16 x 4, as far as the scaling
 * reaches; vt refuses more). The same past a context_length of 16 in a file
 * with no rope scaling at all, the scaling given to both engines as an override
 * (llama.cpp's llama_context_params rope_scaling_type / rope_freq_scale /
 * yarn_orig_ctx, vt_model_params.rope: --rope-scaling yarn --rope-scale 4
 * --yarn-orig-ctx 16; --rope-scaling linear --rope-scale 4 --yarn-attn-factor 1.5;
 * YaRN x4 with --yarn-ext-factor 0.5 --yarn-beta-fast 16 --yarn-beta-slow 2
 * --rope-freq-base 50000), attention sharpened (qk_std 0.08) so that the rope
 * shows. Measured: 2e-6..4e-6; vt on linear where llama.cpp runs YaRN (or the
 * other way) gives 0.68 (0.81), a mix of 0.5 against 1 0.62.
 *
 * phi3, glm4, mistral3: synthetic 3-layer models (dense_params; attention
 * sharpened, qk_std 0.08, so that rope details show) with phi-3's vocabulary,
 * gpt-2's for glm4 (GLM-4's own is not in ../shared) and llama-spm's for
 * mistral3 (likewise; both only for cost), written by vt synth in F16 and one
 * quantized type, and by llama.cpp's quantizer to Q4_K_M. phi3: fused attn_qkv
 * and ffn_up, LongRoPE with the short factors (original context 256: llama.cpp
 * pads its context of 64 to 256, so both engines are within it) and, in the
 * "long" row, the long ones (original context 16); glm4 (post-norms, held to
 * PARITY_NMSE_POSTNORM): half-head rope, fused ffn_up, Q/K/V biases (the "qkv"
 * row: one attn_qkv with one attn_qkv.bias);
 * mistral3: YaRN factor 4 past an original context of 16 with its beta and
 * log-multiplier keys, and the query temperature (0.1) from position 16 on.
 * Measured: F16 2e-6..9e-6; quantized 3.5e-4..7.6e-4 (glm4's Q4_K_M 1.5e-3).
 * Swapping phi3's long factors for the short ones gives NMSE 0.9; dropping
 * mistral3's temperature 7e-3, its beta keys 0.7.
 *
 * YaRN on sliding-window layers (F16, gpt-2's vocabulary for cost; held to
 * PARITY_NMSE_POSTNORM): a context_length of 16, YaRN x4 from 16. llama.cpp
 * ropes each layer on its own base and scale (get_rope_freq_base/scale), and
 * ggml derives YaRN's ramp and magnitude from those: gemma3's sliding layers
 * (base 10000, never scaled) keep the magnitude 1 while its full layers (base
 * 1e6) take 1 + 0.1 ln 4; gemma2's sliding layers, on a base of 1e6 of their
 * own (the full ones 10000), share the scale but not the ramp's ends. olmo2
 * (OLMo 3: layers 0 and 1 slide, on base 5e5 as layer 2) ropes its sliding
 * layers plainly (scale 1, no ramp, magnitude 1, as its graph passes them) and
 * its full layer with YaRN; muse-glimmer ropes its sliding layers only, on
 * their own base and scale 1, where YaRN's ramp mixes two equal angles and its
 * magnitude cancels: its row runs past the original context and fails where
 * the sliding layers are scaled. Measured: olmo2 3.7e-6, muse-glimmer 2.4e-6;
 * olmo2 without YaRN 9.9e-2, with its sliding layers scaled as the full one
 * 0.34 (at scale 1 with the full layer's mix and magnitude 0.11); muse-glimmer
 * with its sliding layers scaled 0.37 (the full layers' magnitude 9.3e-2),
 * without YaRN unchanged (2.4e-6: llama.cpp's YaRN does not move it).
 *
 * muse-glimmer: 4 layers (windows of 8 on layers 0-2, with rope on base 10000
 * there; layer 3 attends fully, without rope), its attention gate, QK-norm, pre
 * and post norms, logits times 2 then capped at 5; gpt-2's vocabulary (for
 * cost); vt synth's F16 and Q8_0, llama.cpp's Q4_K_M; held to
 * PARITY_NMSE_POSTNORM. Measured: F16 2.2e-6, Q8_0 7.4e-4, Q4_K_M 1.3e-3;
 * without the gate 0.8, with rope on the full layer 5e-2, without the logit
 * scale 0.24.
 *
 * Per-layer sliding_window_pattern arrays (one bool per layer, F16, gpt-2's
 * vocabulary; PARITY_NMSE_POSTNORM): muse-glimmer's "0110" (layers 1 and 2
 * slide, with rope; 0 and 3 attend fully without), off any period, which
 * llama.cpp reads layer by layer; gemma3's default period 6 as an array over 7
 * layers (layer 5 attends fully, 6 slides again), which its llama.cpp ignores,
 * keeping that period. Measured: muse-glimmer 3.5e-6, gemma3 3.1e-6; vt
 * reading muse-glimmer's array as its default period 4 1.36, gemma3's with
 * every layer sliding 8.5e-2, either with the length as the period 1.36 and
 * 0.16.
 *
 * VT_PARITY_ENGINE=llama replaces vt by a second llama.cpp (A/A: its batch and
 * its step-by-step logits against its own batch), to see the harness's floor.
 * VT_PARITY_ONLY=substring runs only the models whose label contains it,
 * VT_PARITY_SHARD=k/n the k-th of n shares of them (see selected);
 * VT_PARITY_MODEL=file runs that one file instead of the suite. */
#include "llama_ref.h"
#include "model/synth.h"
#include "test.h"
#include "vt.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PARITY_NMSE 1e-3
#define PARITY_NMSE_POSTNORM 2.5e-3
#define PARITY_GAP 0.2
#define PARITY_TIE_MARGIN 0.02
#define PARITY_NMSE_TIE 5e-2
/* gpt-oss (see above): its ties are gaps of router logits */
#define PARITY_TIE_MARGIN_OSS 0.05
#define PARITY_NMSE_TIE_OSS 1e-1
#define N_POS 32
#define N_FIXED 8
#define N_THREADS 2 /* vt's threads: its threaded split is under test */
#define N_THREADS_REF 1 /* llama.cpp's: its results do not depend on them, and its
                           spinning barriers crawl when ctest shares the cores */
#define N_CTX 64

static bool aa_mode;
static float g_margin[N_POS];
static int32_t g_moe_k; /* experts per token of the model under test, 0: dense */
static double g_nmse = PARITY_NMSE; /* the bound of the model under test */
static bool g_moe_logits; /* its router's ffn_moe_probs are logits (gpt-oss) */
static const vt_rope_params *g_rope; /* both engines' rope override, NULL: the file's */
static double g_tie_margin = PARITY_TIE_MARGIN, g_nmse_tie = PARITY_NMSE_TIE; /* the model's */

typedef struct result {
    double nmse_batch, nmse_step; /* max over positions (but router ties) */
    double tie_batch, tie_step;   /* max over the router-tie positions */
    int eligible, agree_batch, agree_step, ties;
} result;

/* vt on the same ids: logits of every position, as a batch or as single steps. */
static bool vt_eval(const char *path, const int32_t *toks, int32_t n, int32_t n_vocab, bool steps,
                    float *out) {
    vt_model *m = NULL;
    vt_context *ctx = NULL;
    bool ok = false;
    vt_model_params mp = vt_model_default_params();
    mp.rope = g_rope;
    if (vt_model_load(path, &mp, &m) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        return false;
    }
    if (vt_model_n_vocab(m) != n_vocab) {
        fprintf(stderr, "vt: %s: n_vocab %d, llama.cpp says %d\n", path, vt_model_n_vocab(m), n_vocab);
        goto done;
    }
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_threads = N_THREADS;
    if (vt_context_create(m, &cp, &ctx) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        goto done;
    }
    int32_t pos[N_POS], seq[N_POS];
    int8_t want[N_POS];
    for (int32_t i = 0; i < n; i++) pos[i] = i, seq[i] = 0, want[i] = 1;
    int32_t per = steps ? 1 : n;
    for (int32_t i0 = 0; i0 < n; i0 += per) {
        vt_batch b = {.n_tokens = per, .token = toks + i0, .pos = pos + i0, .seq = seq + i0, .logits = want + i0};
        if (vt_decode(ctx, &b) != VT_OK) {
            fprintf(stderr, "vt: decode at %d: %s\n", i0, vt_last_error());
            goto done;
        }
        for (int32_t j = 0; j < per; j++) {
            const float *l = vt_get_logits(ctx, j);
            if (!l) {
                fprintf(stderr, "vt: no logits for position %d\n", i0 + j);
                goto done;
            }
            memcpy(out + (size_t)(i0 + j) * (size_t)n_vocab, l, (size_t)n_vocab * sizeof(float));
        }
    }
    ok = true;
done:
    vt_context_free(ctx);
    vt_model_free(m);
    return ok;
}

static double row_rms(const float *x, int32_t n) {
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s / n);
}

static void compare(const float *ref, const float *got, int32_t n_vocab, double *max_nmse, double *max_tie,
                    int *eligible, int *agree, bool count_eligible) {
    *max_nmse = *max_tie = 0;
    int agr = 0, elig = 0;
    for (int p = 0; p < N_POS; p++) {
        const float *r = ref + (size_t)p * n_vocab, *g = got + (size_t)p * n_vocab;
        double e = test_nmse(g, r, n_vocab);
        if (getenv("VT_PARITY_VERBOSE")) fprintf(stderr, "pos %2d nmse %.3g margin %.3g\n", p, e, g_margin[p]);
        if (g_margin[p] < g_tie_margin) {
            if (!(e <= *max_tie)) *max_tie = e;
            continue;
        }
        if (!(e <= *max_nmse)) *max_nmse = e; /* NaN sticks */
        float gap;
        int32_t top = llama_ref_argmax(r, n_vocab, &gap);
        if (gap > PARITY_GAP * row_rms(r, n_vocab)) {
            elig++;
            if (llama_ref_argmax(g, n_vocab, NULL) == top) agr++;
        }
    }
    *agree = agr;
    if (count_eligible) *eligible = elig;
}

static bool run_model(const char *label, const char *type, const char *path, result *res) {
    memset(res, 0, sizeof *res);
    llama_ref *r = llama_ref_open_rope(path, N_CTX, N_THREADS_REF, g_rope);
    CHECK_MSG(r != NULL, "%s: llama.cpp cannot load %s", label, path);
    if (!r) return false;
    int32_t n_vocab = llama_ref_n_vocab(r);
    size_t n_logits = (size_t)N_POS * (size_t)n_vocab;
    float *ref = malloc(n_logits * sizeof(float)), *got = malloc(n_logits * sizeof(float));
    int32_t toks[N_POS];
    bool ok = ref && got;

    /* BOS, fixed ids, then llama.cpp's greedy continuation */
    toks[0] = llama_ref_bos(r) >= 0 ? llama_ref_bos(r) : 1;
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int i = 1; i <= N_FIXED; i++) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = 3 + (int32_t)((h >> 33) % (uint64_t)(n_vocab - 3));
    }
    ok = ok && llama_ref_greedy(r, toks, N_FIXED + 1, N_POS - N_FIXED - 1, toks + N_FIXED + 1);
    llama_ref_watch_router(r, g_moe_k, g_moe_logits, g_margin, N_POS);
    ok = ok && llama_ref_eval(r, toks, N_POS, ref);
    llama_ref_watch_router(r, 0, false, NULL, 0);
    CHECK_MSG(ok, "%s: llama.cpp evaluation failed", label);

    for (int steps = 0; ok && steps < 2; steps++) {
        bool got_ok;
        if (aa_mode) {
            got_ok = steps ? llama_ref_eval_steps(r, toks, N_POS, got) : llama_ref_eval(r, toks, N_POS, got);
        } else {
            got_ok = vt_eval(path, toks, N_POS, n_vocab, steps, got);
        }
        CHECK_MSG(got_ok, "%s: %s evaluation (%s) failed", label, aa_mode ? "llama.cpp" : "vt",
                  steps ? "steps" : "batch");
        if (!got_ok) {
            ok = false;
            break;
        }
        if (steps) compare(ref, got, n_vocab, &res->nmse_step, &res->tie_step, &res->eligible, &res->agree_step, false);
        else compare(ref, got, n_vocab, &res->nmse_batch, &res->tie_batch, &res->eligible, &res->agree_batch, true);
    }
    for (int p = 0; p < N_POS; p++) res->ties += g_margin[p] < g_tie_margin;
    if (ok) {
        CHECK_MSG(res->tie_batch <= g_nmse_tie && res->tie_step <= g_nmse_tie,
                  "%s: router-tie rows' max NMSE %.3g / %.3g > %.0e", label, res->tie_batch, res->tie_step,
                  g_nmse_tie);
        CHECK_MSG(res->nmse_batch <= g_nmse, "%s: batch max NMSE %.3g > %.1e", label, res->nmse_batch,
                  g_nmse);
        CHECK_MSG(res->nmse_step <= g_nmse, "%s: step max NMSE %.3g > %.1e", label, res->nmse_step,
                  g_nmse);
        CHECK_MSG(res->agree_batch == res->eligible, "%s: batch argmax agrees at %d of %d positions", label,
                  res->agree_batch, res->eligible);
        CHECK_MSG(res->agree_step == res->eligible, "%s: step argmax agrees at %d of %d positions", label,
                  res->agree_step, res->eligible);
        char ties[48] = "";
        if (res->ties)
            snprintf(ties, sizeof ties, " (ties: %d rows, NMSE %.2e)", res->ties,
                     fmax(res->tie_batch, res->tie_step));
        printf("| %-26s | %-6s | %9.2e | %9.2e | %2d/%2d %2d/%2d | %s%s\n", label, type, res->nmse_batch,
               res->nmse_step, res->agree_batch, res->eligible, res->agree_step, res->eligible,
               res->nmse_batch <= g_nmse && res->nmse_step <= g_nmse &&
                       res->agree_batch == res->eligible && res->agree_step == res->eligible &&
                       res->tie_batch <= g_nmse_tie && res->tie_step <= g_nmse_tie
                   ? "ok"
                   : "FAIL",
               ties);
        fflush(stdout);
    }
    free(ref);
    free(got);
    llama_ref_close(r);
    return ok;
}

/* The dense families' synthetic shape: 3 layers of n_embd 256, 4 heads / 2 KV
 * heads of 64, n_ff 512; a window of 8 positions on the sliding layers (the
 * 32 positions are 4 windows), pattern 3 (layers 0 and 1 slide, 2 attends
 * fully; olmo2: OLMo 3's sliding layers, rope base 5e5). gemma3: global rope base 1e6, the sliding layers' 10000; gemma2:
 * every other layer slides, scores capped at 0.1 (they are about that size
 * here, so the cap bends them) and logits at 3 (their top is near 1.6: bent,
 * not flattened, so greedy choices stay clear). */
static synth_params dense_params(const char *arch, const char *vocab) {
    synth_params sp = synth_default_params();
    sp.arch = arch;
    sp.vocab_path = vocab;
    sp.n_layer = 3;
    sp.head_dim = 64;
    sp.n_swa = 8;
    sp.swa_pattern = 3;
    if (!strcmp(arch, "gemma3")) {
        sp.rope_freq_base = 1e6f;
        sp.rope_freq_base_swa = 10000.0f;
    } else if (!strcmp(arch, "gemma2")) {
        sp.swa_pattern = 2;
        sp.attn_softcap = 0.1f;
        sp.final_softcap = 3.0f;
    } else if (!strcmp(arch, "olmo2")) { /* OLMo 3's sliding layers */
        sp.rope_freq_base = 5e5f;
    } else if (!strcmp(arch, "smollm3")) { /* no window; 4 layers: the last without rope,
                                                  attention sharp enough for rope to matter */
        sp.n_swa = 0;
        sp.n_layer = 4;
        sp.qk_std = 0.08f;
    } else if (!strcmp(arch, "granite")) { /* no window; synth writes its multipliers */
        sp.n_swa = 0;
    } else if (!strcmp(arch, "phi3")) { /* no window (llama.cpp ignores Phi's); LongRoPE's
                                           short factors: llama.cpp's context (64 padded to
                                           256) and vt's (64) are within the original 256 */
        sp.n_swa = 0;
        sp.n_ctx = 512;
        sp.yarn_orig_ctx = 256;
        sp.qk_std = 0.08f; /* sharp enough for the factors to matter */
    } else if (!strcmp(arch, "glm4")) { /* rope on half of each head: attention sharp
                                           enough for it to matter */
        sp.n_swa = 0;
        sp.qk_std = 0.08f;
    } else if (!strcmp(arch, "mistral3")) { /* YaRN past an original context of 16,
                                               where the query temperature starts */
        sp.n_swa = 0;
        sp.qk_std = 0.08f;
        sp.yarn_factor = 4.0f;
        sp.yarn_orig_ctx = 16;
    } else if (!strcmp(arch, "muse-glimmer")) { /* 4 layers: 0-2 slide (with rope), 3 attends
                                                   fully without; logits times 2, capped at 5 */
        sp.n_layer = 4;
        sp.swa_pattern = 4;
        sp.rope_freq_base = 1e6f;
        sp.rope_freq_base_swa = 10000.0f;
        sp.final_softcap = 5.0f;
    }
    return sp;
}

/* VT_PARITY_ONLY's filter alone (a prefix check before a file is written). */
static bool filter_matches(const char *label) {
    const char *only = getenv("VT_PARITY_ONLY");
    return !only || !*only || strstr(label, only);
}

/* The filter, then VT_PARITY_SHARD=k/n (CMake registers n ctest entries, so
 * that ctest -j spreads the rows over the cores): labels are numbered in the
 * order they are first asked about, which is the same in every shard, and
 * label i runs in shard i % n. */
static bool selected(const char *label) {
    if (!filter_matches(label)) return false;
    int k = 0, n = 1;
    const char *shard = getenv("VT_PARITY_SHARD");
    if (!shard || sscanf(shard, "%d/%d", &k, &n) != 2 || n < 1 || k < 0 || k >= n) return true;
    static char seen[512][64];
    static int n_seen;
    int i = 0;
    while (i < n_seen && strcmp(seen[i], label)) i++;
    if (i == n_seen && n_seen < 512) snprintf(seen[n_seen++], sizeof seen[0], "%s", label);
    return i % n == k;
}

int main(void) {
    const char *engine = getenv("VT_PARITY_ENGINE");
    aa_mode = engine && !strcmp(engine, "llama");
    CHECK(llama_ref_init());
    printf("parity: %s vs llama.cpp, %d positions, %d/%d threads; tolerance: max NMSE <= %.0e, "
           "argmax equal where llama's top-2 gap > %.1f x logit RMS\n",
           aa_mode ? "llama.cpp (A/A)" : "vt", N_POS, N_THREADS, N_THREADS_REF, PARITY_NMSE, PARITY_GAP);
    printf("| %-26s | %-6s | %-9s | %-9s | argmax b/s   |\n", "model", "type", "NMSE bat", "NMSE step");
    printf("|%s|\n", "----------------------------|--------|-----------|-----------|--------------|-----");
    double worst = 0;
    int n_models = 0;
    clock_t c0 = clock();

    const char *extra = getenv("VT_PARITY_MODEL");
    if (extra && *extra) { /* one given file instead of the suite */
        result res;
        if (run_model(extra, "-", extra, &res)) n_models++;
        printf("parity: %s\n", extra);
        return test_finish();
    }

    static const struct {
        const char *file, *type;
    } real[] = {
        {"TinyStories-656K-Q8_0.gguf", "q8_0"},
        {"TinyStories-656K-Q2_K.gguf", "iq4_nl"},
        {"llama-2-tiny-random.gguf", "f16"},
        {"stories260K.gguf", "f32"},
    };
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        if (!selected(real[i].file)) continue;
        const char *path = test_model_path(real[i].file);
        if (!path) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s", path);
        result res;
        if (run_model(real[i].file, real[i].type, p, &res)) {
            n_models++;
            worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
        }
    }

    char dir[] = "/tmp/vt-parity-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    static const vt_dtype types[] = {
        VT_DTYPE_F32,  VT_DTYPE_F16,  VT_DTYPE_BF16, VT_DTYPE_Q4_0,   VT_DTYPE_Q4_1,
        VT_DTYPE_Q5_0, VT_DTYPE_Q5_1, VT_DTYPE_Q8_0, VT_DTYPE_Q2_K,   VT_DTYPE_Q3_K,
        VT_DTYPE_Q4_K, VT_DTYPE_Q5_K, VT_DTYPE_Q6_K, VT_DTYPE_IQ4_NL, VT_DTYPE_IQ4_XS,
    };
    static const char *archs[] = {"llama", "qwen2", "qwen3"};
    for (size_t a = 0; a < 3; a++) {
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            /* every type on llama; qwen2's biases and qwen3's QK-norm do not depend
             * on it, so those two take one float, the two legacy and two K types
             * (Q4_0: a tied head) */
            if (a > 0 && types[t] != VT_DTYPE_F16 && types[t] != VT_DTYPE_Q8_0 && types[t] != VT_DTYPE_Q4_0 &&
                types[t] != VT_DTYPE_Q4_K && types[t] != VT_DTYPE_Q6_K)
                continue;
            const char *tname = quant_traits_get(types[t])->name;
            char label[64], path[512];
            snprintf(label, sizeof label, "synth-%s-%s", archs[a], tname);
            if (!selected(label)) continue;
            snprintf(path, sizeof path, "%s/%s.gguf", dir, label);
            synth_params sp = synth_default_params();
            sp.arch = archs[a];
            sp.type = types[t];
            sp.seed = 1000 + 100 * a + t;
            sp.n_threads = N_THREADS;
            sp.tied = t % 4 == 3; /* a few tied heads in each arch */
            vt_status s = synth_write(&sp, path);
            CHECK_MSG(s == VT_OK, "%s: synth: %s", label, vt_last_error());
            if (s != VT_OK) continue;
            result res;
            if (run_model(label, tname, path, &res)) {
                n_models++;
                worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
            }
            unlink(path);
        }
    }
    /* YaRN rope scaling (factor 4, original context 16: the ramp covers the
     * first pairs) on both rope layouts; llama's past its training context */
    static const char *yarn_archs[] = {"llama", "qwen3"};
    for (size_t a = 0; a < 2; a++) {
        char label[64], path[512];
        snprintf(label, sizeof label, "synth-%s-yarn-f16", yarn_archs[a]);
        if (!selected(label)) continue;
        snprintf(path, sizeof path, "%s/%s.gguf", dir, label);
        synth_params sp = synth_default_params();
        sp.arch = yarn_archs[a];
        sp.type = VT_DTYPE_F16;
        sp.yarn_factor = 4.0f;
        sp.yarn_orig_ctx = 16;
        if (a == 0) sp.n_ctx = 16; /* context_length 16: the 32 positions pass it */
        sp.seed = 2000 + a;
        sp.n_threads = N_THREADS;
        vt_status s = synth_write(&sp, path);
        CHECK_MSG(s == VT_OK, "%s: synth: %s", label, vt_last_error());
        result res;
        if (s == VT_OK && run_model(label, "f16", path, &res)) {
            n_models++;
            worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
        }
        unlink(path);
    }
    /* the same past a context_length of 16 in a file without rope scaling: both
     * engines take it as an override, YaRN x4 from 16, linear x4 (with a rope
     * magnitude of 1.5), and YaRN x4 with the other fields set: a mix of 0.5,
     * betas 16 and 2, base 50000 */
    static const struct {
        const char *name;
        vt_rope_scaling type;
        int32_t orig_ctx;   /* 0: the file's context_length */
        float ext, attn;    /* < 0: the default */
        float beta_fast, beta_slow, base; /* <= 0: the default */
    } overrides[] = {
        {"yarn", VT_ROPE_SCALING_YARN, 16, -1, -1, 0, 0, 0},
        {"linear", VT_ROPE_SCALING_LINEAR, 0, -1, 1.5f, 0, 0, 0},
        {"yarn-mix", VT_ROPE_SCALING_YARN, 0, 0.5f, -1, 16, 2, 5e4f},
    };
    for (size_t a = 0; a < sizeof overrides / sizeof overrides[0]; a++) {
        char label[64], path[512];
        snprintf(label, sizeof label, "ovr-llama-%s-f16", overrides[a].name); /* "ovr": a rope override */
        if (!selected(label)) continue;
        snprintf(path, sizeof path, "%s/%s.gguf", dir, label);
        synth_params sp = synth_default_params();
        sp.arch = "llama";
        sp.type = VT_DTYPE_F16;
        sp.n_ctx = 16; /* and no rope scaling: the 32 positions pass it */
        sp.qk_std = 0.08f; /* attention sharp enough for the rope to matter */
        sp.seed = 2100 + a;
        sp.n_threads = N_THREADS;
        vt_rope_params rp = vt_rope_default_params();
        rp.scaling_type = overrides[a].type;
        rp.freq_scale = 0.25f;
        rp.yarn_orig_ctx = overrides[a].orig_ctx;
        rp.yarn_ext_factor = overrides[a].ext;
        rp.yarn_attn_factor = overrides[a].attn;
        if (overrides[a].beta_fast > 0) rp.yarn_beta_fast = overrides[a].beta_fast;
        if (overrides[a].beta_slow > 0) rp.yarn_beta_slow = overrides[a].beta_slow;
        rp.freq_base = overrides[a].base;
        vt_status s = synth_write(&sp, path);
        CHECK_MSG(s == VT_OK, "%s: synth: %s", label, vt_last_error());
        result res;
        g_rope = &rp;
        if (s == VT_OK && run_model(label, "f16", path, &res)) {
            n_models++;
            worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
        }
        g_rope = NULL;
        unlink(path);
    }

    /* dense families beyond llama/qwen, on the vocabulary their models ship with */
    static const struct {
        const char *arch, *vocab;
        bool post_norms; /* held to PARITY_NMSE_POSTNORM */
        bool few_types;  /* a vocabulary of 128k+ (most of a row's cost): F16 and Q4_K
                            only; Q8_0 and Q4_0 run on every other family */
    } dense[] = {
        {"gemma3", "vocab/ggml-vocab-gemma-4.gguf", true, true},
        {"gemma2", "vocab/ggml-vocab-gemma-4.gguf", true, true},
        {"olmo2", "vocab/ggml-vocab-llama-bpe.gguf", true, true},
        {"smollm3", "vocab/ggml-vocab-llama-bpe.gguf", false, true},
        {"granite", "vocab/ggml-vocab-gpt-2.gguf", false, false},
    };
    static const vt_dtype dense_types[] = {VT_DTYPE_F16, VT_DTYPE_Q8_0, VT_DTYPE_Q4_0, VT_DTYPE_Q4_K};
    for (size_t a = 0; a < sizeof dense / sizeof dense[0]; a++) {
        g_nmse = dense[a].post_norms ? PARITY_NMSE_POSTNORM : PARITY_NMSE;
        const char *dv = test_model_path(dense[a].vocab);
        if (!dv) continue;
        char vpath[4096];
        snprintf(vpath, sizeof vpath, "%s", dv);
        for (size_t t = 0; t < sizeof dense_types / sizeof dense_types[0]; t++) {
            if (dense[a].few_types && (dense_types[t] == VT_DTYPE_Q8_0 || dense_types[t] == VT_DTYPE_Q4_0)) continue;
            const char *tname = quant_traits_get(dense_types[t])->name;
            char label[64], path[512];
            snprintf(label, sizeof label, "synth-%s-%s", dense[a].arch, tname);
            const bool want_mix = dense_types[t] == VT_DTYPE_F16;
            char qlabel[64];
            snprintf(qlabel, sizeof qlabel, "llamaq-%s-Q4_K_M", dense[a].arch);
            if (!selected(label) && !(want_mix && selected(qlabel))) continue;
            snprintf(path, sizeof path, "%s/%s.gguf", dir, label);
            synth_params sp = dense_params(dense[a].arch, vpath);
            sp.type = dense_types[t];
            sp.seed = 4000 + 100 * a + t;
            sp.n_threads = N_THREADS;
            vt_status s = synth_write(&sp, path);
            CHECK_MSG(s == VT_OK, "%s: synth: %s", label, vt_last_error());
            if (s != VT_OK) continue;
            result res;
            if (selected(label) && run_model(label, tname, path, &res)) {
                n_models++;
                worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
            }
            if (want_mix && selected(qlabel)) { /* llama.cpp's quantizer on the F16 file */
                char qpath[512];
                snprintf(qpath, sizeof qpath, "%s/%s.gguf", dir, qlabel);
                llama_model_quantize_params qp = llama_model_quantize_default_params();
                qp.nthread = N_THREADS;
                const bool qok = llama_ref_ftype("Q4_K_M", &qp.ftype) && llama_model_quantize(path, qpath, &qp) == 0;
                CHECK_MSG(qok, "%s: llama_model_quantize failed", qlabel);
                if (qok && run_model(qlabel, "Q4_K_M", qpath, &res)) {
                    n_models++;
                    worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
                }
                unlink(qpath);
            }
            unlink(path);
        }
    }
    g_nmse = PARITY_NMSE;

    /* phi3, glm4, mistral3: F16, one or two quantized types of vt synth, llama.cpp's
     * Q4_K_M of the F16 file; phi3 also with LongRoPE's long factors (original
     * context 16: both engines' contexts are past it, and so are the positions) */
    static const struct {
        const char *arch, *vocab, *name;
        vt_dtype type;
        bool mix;  /* also llama.cpp's Q4_K_M of this file */
        bool post_norms;
        int64_t orig_ctx; /* > 0: phi3's original context, n_ctx 256 */
    } d3[] = {
        {"phi3", "vocab/ggml-vocab-phi-3.gguf", "f16", VT_DTYPE_F16, true, false, 0},
        {"phi3", "vocab/ggml-vocab-phi-3.gguf", "q4_0", VT_DTYPE_Q4_0, false, false, 0},
        {"phi3", "vocab/ggml-vocab-phi-3.gguf", "long-f16", VT_DTYPE_F16, false, false, 16},
        {"glm4", "vocab/ggml-vocab-gpt-2.gguf", "f16", VT_DTYPE_F16, true, true, 0},
        {"glm4", "vocab/ggml-vocab-gpt-2.gguf", "q8_0", VT_DTYPE_Q8_0, false, true, 0},
        {"mistral3", "vocab/ggml-vocab-llama-spm.gguf", "f16", VT_DTYPE_F16, true, false, 0},
        {"muse-glimmer", "vocab/ggml-vocab-gpt-2.gguf", "f16", VT_DTYPE_F16, true, true, 0},
        {"muse-glimmer", "vocab/ggml-vocab-gpt-2.gguf", "q8_0", VT_DTYPE_Q8_0, false, true, 0},
        {"glm4", "vocab/ggml-vocab-gpt-2.gguf", "qkv-f16", VT_DTYPE_F16, false, true, 0},
        {"mistral3", "vocab/ggml-vocab-llama-spm.gguf", "q8_0", VT_DTYPE_Q8_0, false, false, 0},
        {"gemma3", "vocab/ggml-vocab-gpt-2.gguf", "yarn-f16", VT_DTYPE_F16, false, true, 0},
        {"gemma2", "vocab/ggml-vocab-gpt-2.gguf", "yarn-f16", VT_DTYPE_F16, false, true, 0},
        {"olmo2", "vocab/ggml-vocab-gpt-2.gguf", "yarn-f16", VT_DTYPE_F16, false, true, 0},
        {"muse-glimmer", "vocab/ggml-vocab-gpt-2.gguf", "yarn-f16", VT_DTYPE_F16, false, true, 0},
        {"muse-glimmer", "vocab/ggml-vocab-gpt-2.gguf", "swarr-f16", VT_DTYPE_F16, false, true, 0},
        {"gemma3", "vocab/ggml-vocab-gpt-2.gguf", "swarr-f16", VT_DTYPE_F16, false, true, 0},
    };
    for (size_t a = 0; a < sizeof d3 / sizeof d3[0]; a++) {
        g_nmse = d3[a].post_norms ? PARITY_NMSE_POSTNORM : PARITY_NMSE;
        const char *dv = test_model_path(d3[a].vocab);
        if (!dv) continue;
        char vpath[4096], label[64], qlabel[64], path[512];
        snprintf(vpath, sizeof vpath, "%s", dv);
        snprintf(label, sizeof label, "synth-%s-%s", d3[a].arch, d3[a].name);
        snprintf(qlabel, sizeof qlabel, "llamaq-%s-Q4_K_M", d3[a].arch);
        if (!selected(label) && !(d3[a].mix && selected(qlabel))) continue;
        snprintf(path, sizeof path, "%s/%s.gguf", dir, label);
        synth_params sp = dense_params(d3[a].arch, vpath);
        sp.type = d3[a].type;
        sp.fused_qkv = strstr(d3[a].name, "qkv") != NULL; /* one attn_qkv with its bias */
        if (d3[a].orig_ctx > 0) {
            sp.n_ctx = 256;
            sp.yarn_orig_ctx = d3[a].orig_ctx;
        }
        if (strstr(d3[a].name, "yarn")) { /* YaRN x4 past a context_length of 16 */
            sp.n_ctx = 16;
            sp.yarn_factor = 4.0f;
            sp.yarn_orig_ctx = 16;
            if (!strcmp(d3[a].arch, "gemma2")) { /* sliding layers on a base of their own, scores not capped
                                                   flat, attention sharp enough for the ramp to show */
                sp.rope_freq_base_swa = 1e6f;
                sp.attn_softcap = 50.0f;
                sp.qk_std = 0.08f;
            }
        }
        if (strstr(d3[a].name, "swarr")) { /* sliding_window_pattern as one bool per layer */
            if (!strcmp(d3[a].arch, "muse-glimmer")) {
                sp.swa_layers = "0110"; /* off any period: llama.cpp reads it layer by layer */
            } else { /* gemma3's default period 6 (which llama.cpp keeps, ignoring the array)
                        over 7 layers: 5 attends fully, 6 slides again */
                sp.n_layer = 7;
                sp.swa_pattern = 6;
                sp.swa_pattern_arr = true;
            }
        }
        sp.seed = 6000 + 10 * a;
        sp.n_threads = N_THREADS;
        vt_status s = synth_write(&sp, path);
        CHECK_MSG(s == VT_OK, "%s: synth: %s", label, vt_last_error());
        if (s != VT_OK) continue;
        result res;
        if (selected(label) && run_model(label, quant_traits_get(d3[a].type)->name, path, &res)) {
            n_models++;
            worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
        }
        if (d3[a].mix && selected(qlabel)) { /* llama.cpp's quantizer on the F16 file */
            char qpath[512];
            snprintf(qpath, sizeof qpath, "%s/%s.gguf", dir, qlabel);
            llama_model_quantize_params qp = llama_model_quantize_default_params();
            qp.nthread = N_THREADS;
            const bool qok = llama_ref_ftype("Q4_K_M", &qp.ftype) && llama_model_quantize(path, qpath, &qp) == 0;
            CHECK_MSG(qok, "%s: llama_model_quantize failed", qlabel);
            if (qok && run_model(qlabel, "Q4_K_M", qpath, &res)) {
                n_models++;
                worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
            }
            unlink(qpath);
        }
        unlink(path);
    }
    g_nmse = PARITY_NMSE;

    /* mixture of experts */
    const char *vocab = test_model_path("vocab/ggml-vocab-qwen2.gguf");
    static const vt_dtype moe_types[] = {VT_DTYPE_F16, VT_DTYPE_Q8_0, VT_DTYPE_Q4_0, VT_DTYPE_Q4_K};
    static const char *moe_archs[] = {"qwen3moe", "llama"}, *moe_names[] = {"qwen3moe", "llamamoe"};
    static const char *llama_mixes[] = {"Q4_K_M", "Q4_0", "Q8_0"};
    for (size_t a = 0; vocab && a < 2; a++) {
        char vpath[4096];
        snprintf(vpath, sizeof vpath, "%s", vocab);
        /* llama's experts: F16, and llama.cpp's Q4_K_M of it (the qwen3moe rows cover the rest) */
        const size_t n_types = a == 0 ? sizeof moe_types / sizeof moe_types[0] : 1;
        for (size_t t = 0; t < n_types; t++) {
            const char *tname = quant_traits_get(moe_types[t])->name;
            char label[64], path[512];
            snprintf(label, sizeof label, "synth-%s-%s", moe_names[a], tname);
            const bool want_mixes = moe_types[t] == VT_DTYPE_F16;
            if (!selected(label) && !(want_mixes && filter_matches("llamaq"))) continue;
            snprintf(path, sizeof path, "%s/%s.gguf", dir, label);
            synth_params sp = synth_default_params();
            sp.arch = moe_archs[a];
            sp.type = moe_types[t];
            sp.vocab_path = vpath;
            sp.n_ff = 512;
            sp.n_ff_exp = 512;
            sp.n_expert = 16;
            sp.n_expert_used = 4;
            sp.head_dim = 64;
            sp.seed = 3000 + 100 * a + t;
            sp.n_threads = N_THREADS;
            g_moe_k = (int32_t)sp.n_expert_used;
            vt_status s = synth_write(&sp, path);
            CHECK_MSG(s == VT_OK, "%s: synth: %s", label, vt_last_error());
            if (s != VT_OK) continue;
            result res;
            if (selected(label) && run_model(label, tname, path, &res)) {
                n_models++;
                worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
            }
            /* llama.cpp's quantizer on the F16 file */
            const size_t n_mixes = a == 0 ? sizeof llama_mixes / sizeof llama_mixes[0] : 1;
            for (size_t q = 0; want_mixes && q < n_mixes; q++) {
                char qlabel[64], qpath[512];
                snprintf(qlabel, sizeof qlabel, "llamaq-%s-%s", moe_names[a], llama_mixes[q]);
                if (!selected(qlabel)) continue;
                snprintf(qpath, sizeof qpath, "%s/%s.gguf", dir, qlabel);
                llama_model_quantize_params qp = llama_model_quantize_default_params();
                qp.nthread = N_THREADS;
                const bool known = llama_ref_ftype(llama_mixes[q], &qp.ftype);
                const bool qok = known && llama_model_quantize(path, qpath, &qp) == 0;
                CHECK_MSG(qok, "%s: llama_model_quantize failed", qlabel);
                if (qok && run_model(qlabel, llama_mixes[q], qpath, &res)) {
                    n_models++;
                    worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
                }
                unlink(qpath);
            }
            unlink(path);
        }
    }
    /* gpt-oss: a BPE vocabulary (llama-bpe's; ../shared has no o200k one), a
     * window of 8 on layers 0 and 2 (of 3: the 32 positions pass it), sinks,
     * biases, YaRN; vt synth's F16, Q8_0 and Q8_0 with MXFP4 experts, and
     * llama.cpp's MXFP4_MOE and Q8_0 of the F16 file */
    const char *bpe = test_model_path("vocab/ggml-vocab-llama-bpe.gguf");
    static const struct {
        vt_dtype type, exp_type;
        const char *name;
    } oss_types[] = {
        {VT_DTYPE_F16, VT_DTYPE_COUNT, "f16"},
        {VT_DTYPE_Q8_0, VT_DTYPE_COUNT, "q8_0"},
        {VT_DTYPE_Q8_0, VT_DTYPE_MXFP4, "mxfp4"},
        {VT_DTYPE_F16, VT_DTYPE_COUNT, "swabase-f16"}, /* the sliding layers on a rope base of their own */
    };
    static const char *oss_mixes[] = {"MXFP4_MOE", "Q8_0"};
    for (size_t t = 0; bpe && t < sizeof oss_types / sizeof oss_types[0]; t++) {
        char vpath[4096], label[64], path[512];
        snprintf(vpath, sizeof vpath, "%s", bpe);
        snprintf(label, sizeof label, "synth-gptoss-%s", oss_types[t].name);
        const bool want_mixes = t == 0;
        if (!selected(label) && !(want_mixes && filter_matches("llamaq-gptoss"))) continue;
        snprintf(path, sizeof path, "%s/%s.gguf", dir, label);
        synth_params sp = synth_default_params();
        sp.arch = "gpt-oss";
        sp.type = oss_types[t].type;
        sp.exp_type = oss_types[t].exp_type;
        sp.vocab_path = vpath;
        sp.n_layer = 3;
        sp.n_ff = 512;
        sp.n_ff_exp = 512;
        sp.n_expert = 16;
        sp.n_expert_used = 4;
        sp.head_dim = 64;
        sp.n_swa = 8;
        sp.yarn_factor = 4.0f;
        sp.yarn_orig_ctx = 16;
        if (strstr(oss_types[t].name, "swabase")) sp.rope_freq_base_swa = 10000.0f; /* the full layers' 1e6 */
        sp.seed = 4000 + t;
        sp.n_threads = N_THREADS;
        g_moe_k = (int32_t)sp.n_expert_used;
        g_moe_logits = true;
        g_tie_margin = PARITY_TIE_MARGIN_OSS;
        g_nmse_tie = PARITY_NMSE_TIE_OSS;
        vt_status s = synth_write(&sp, path);
        CHECK_MSG(s == VT_OK, "%s: synth: %s", label, vt_last_error());
        if (s != VT_OK) continue;
        result res;
        if (selected(label) && run_model(label, oss_types[t].name, path, &res)) {
            n_models++;
            worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
        }
        for (size_t q = 0; want_mixes && q < sizeof oss_mixes / sizeof oss_mixes[0]; q++) {
            char qlabel[64], qpath[512];
            snprintf(qlabel, sizeof qlabel, "llamaq-gptoss-%s", oss_mixes[q]);
            if (!selected(qlabel)) continue;
            snprintf(qpath, sizeof qpath, "%s/%s.gguf", dir, qlabel);
            llama_model_quantize_params qp = llama_model_quantize_default_params();
            qp.nthread = N_THREADS;
            const bool known = llama_ref_ftype(oss_mixes[q], &qp.ftype);
            const bool qok = known && llama_model_quantize(path, qpath, &qp) == 0;
            CHECK_MSG(qok, "%s: llama_model_quantize failed", qlabel);
            if (qok && run_model(qlabel, oss_mixes[q], qpath, &res)) {
                n_models++;
                worst = fmax(worst, fmax(res.nmse_batch, res.nmse_step));
            }
            unlink(qpath);
        }
        unlink(path);
    }
    g_moe_logits = false;
    g_tie_margin = PARITY_TIE_MARGIN;
    g_nmse_tie = PARITY_NMSE_TIE;
    rmdir(dir);
    printf("parity: %d models, worst NMSE %.2e (tolerance %.0e), %.1f CPU-s\n", n_models, worst, PARITY_NMSE,
           (double)(clock() - c0) / CLOCKS_PER_SEC);
    return test_finish();
}
