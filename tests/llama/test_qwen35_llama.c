/* qwen35 against the reference llama.cpp. Parity: synthetic qwen35 models (4 layers, 3
 * linear and 1 full attention, n_embd 256, heads 4/2 of 64, linear layers 2 k / 4 v heads
 * of 64) with the real Qwen3.5 vocabulary (151936 tokens), written by vt synth in F16,
 * Q8_0, Q4_0 and Q4_K and by llama.cpp's quantizer (Q4_K_M from the F16 file): the logits
 * of the first 32 positions (one batch, and token by token) and of a 1-token prompt within
 * PARITY_NMSE per position (PARITY_NMSE_Q4_0 for Q4_0), argmax agreement where llama.cpp's
 * choice is clear, greedy continuations of 100- and 600-token prompts (llama.cpp's
 * chunked delta rule over 2 and 10 chunks) agreeing where vt's choice is clear, and vt's
 * logits the same bits whether the prompt is prefilled in one chunk or in chunks of 64.
 *
 * qwen35moe (Qwen3.5/3.6-A3B's layout): the same shape and rows with a tied head, 16
 * routed experts of 256 rows (4 per token, softmax, top-k, renormalised) and a shared
 * expert of 256 rows behind its sigmoid gate, in F16 (carrying one multi-token-prediction
 * layer, which both engines skip; llama.cpp's Q4_K_M of it too), Q8_0, Q4_0 and Q4_K.
 * Rows where llama.cpp's router came within PARITY_TIE_MARGIN of another expert choice
 * are held to PARITY_NMSE_TIE and left out of the argmax rule, as in test_parity.c.
 * Measured (vt vs llama.cpp, 32 positions): F16 8e-7, Q4_K_M 1.1e-4, Q8_0 4.4e-4, Q4_0
 * 4.1e-3, Q4_K 1.9e-4; tie rows up to 1.7e-3.
 *
 * llama.cpp runs on one thread (its results do not depend on it, and its spinning
 * barriers crawl when ctest shares the cores). VT_PARITY_ONLY=substring runs only the
 * rows whose label contains it; VT_LLAMA_REPACK=off (tests/llama/llama_ref.c) turns off
 * llama.cpp's repacked GEMMs, which changes none of these numbers.
 *
 * First: the file vt synth --arch qwen35 writes (4 layers,
 * 3 linear and 1 full attention, a generated vocabulary) loads in llama.cpp and
 * its logits are finite, for a prompt that crosses llama.cpp's 64-token chunks (its
 * chunked delta rule) and one decoded token by token (its recurrent step), and both
 * paths give the same logits within 1e-6 NMSE (llama.cpp with itself); vt on that file
 * within 1e-6 of llama.cpp, the same bits in one batch, runs of 7 or token by token. */
#include "llama_ref.h"
#include "model/synth.h"
#include "test.h"

#include "quant/quant.h"
#include "vt.h"

#include <unistd.h>

/* vt's logits of toks[0..n) (one sequence) in runs of `per` tokens into out (n, n_vocab). */
static bool vt_eval(const char *path, const int32_t *toks, int32_t n, int32_t per, int32_t n_threads, float *out) {
    vt_model *m = NULL;
    vt_context *ctx = NULL;
    bool ok = false;
    vt_model_params mp = vt_model_default_params();
    if (vt_model_load(path, &mp, &m) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        return false;
    }
    const int32_t nv = vt_model_n_vocab(m);
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = n_threads;
    if (vt_context_create(m, &cp, &ctx) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        goto done;
    }
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n), *seq = calloc((size_t)n, sizeof(int32_t));
    int8_t *want = malloc((size_t)n);
    for (int32_t i = 0; i < n; i++) pos[i] = i, want[i] = 1;
    for (int32_t i0 = 0; i0 < n; i0 += per) {
        const int32_t k = n - i0 < per ? n - i0 : per;
        vt_batch b = {.n_tokens = k, .token = toks + i0, .pos = pos + i0, .seq = seq + i0, .logits = want + i0};
        if (vt_decode(ctx, &b) != VT_OK) {
            fprintf(stderr, "vt: decode at %d: %s\n", i0, vt_last_error());
            goto done2;
        }
        for (int32_t j = 0; j < k; j++)
            memcpy(out + (size_t)(i0 + j) * (size_t)nv, vt_get_logits(ctx, j), sizeof(float) * (size_t)nv);
    }
    ok = true;
done2:
    free(pos), free(seq), free(want);
done:
    vt_context_free(ctx);
    vt_model_free(m);
    return ok;
}

static double nmse(const float *x, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]), den += (double)ref[i] * ref[i];
    return den > 0 ? num / den : num;
}

/* ---- parity on the real vocabulary ---------------------------------------------------- */

/* Per position. F16: 1.2e-6 measured. The quantized types' activations are rounded to
 * Q8_0/Q8_K, where a float difference before the rounding flips a few values
 * (tests/llama/test_parity.c: 1e-4..5.6e-4 for the transformer archs); in the hybrid the
 * delta rule's state carries such a difference on rather than averaging it out: measured
 * 1.5e-4 (Q4_K_M), 3e-4 (Q8_0), 9.8e-4 (Q4_K). 2e-3 is twice the worst; a wrong kernel,
 * rope or norm gives 1e-2..1. */
#define PARITY_NMSE 2e-3
#define PARITY_GAP 0.2   /* argmax must agree where top-1 leads top-2 by this x RMS */
/* Q4_0 weights: vt and llama.cpp differ by 1e-3 NMSE already on a 1-token prompt, and
 * by up to 1.2e-2 (qwen35) / 4.1e-3 (qwen35moe) over the first 32 positions, argmax and
 * greedy agreeing. The cause is the rounding of activations to Q8_0, and it starts at
 * the token embedding: vt quantizes as ggml's reference quantize_row_q8_0_ref does
 * (id = 1 / d with d = amax / 127, roundf: half away from zero), llama.cpp's x86 CPU
 * backend as its AVX quantize_row_q8_0 does (id = 127 / amax, round half to even). The
 * two differ only where x * id lands within an ulp of k + 0.5. A Q4_0 embedding row,
 * RMS-normed, lies on the lattice j * d * s (j in -8..7, amax = 8 d s in every block),
 * so x * id = 15.875 j: the elements with j = +-4 (about an eighth) sit exactly on
 * such a tie in the first layer's input, and a good share round the other way. The
 * delta rule's state then carries that difference through the later positions. With
 * llama.cpp's rule in vt's quantizer (tried, not kept: it would break vt's bit-exact
 * SIMD/ref contract and the golden hashes), this row measured 6.9e-5 (1 token: 0) and
 * Q8_0 6.5e-5 (from 3e-4); with F32 embeddings and Q4_0 elsewhere, 6.7e-4 (1 token: 0).
 * So the looser bound is llama.cpp's x86 rounding rule, not a vt defect; matching it
 * (an activation quantizer apart from the weight quantizer, per ISA) is left to issue
 * 27's follow-up. */
#define PARITY_NMSE_Q4_0 2.5e-2

static double row_rms(const float *x, int32_t n) {
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s / n);
}

/* vt: prompt prefilled in runs of `per`, then n_gen greedy tokens into gen; the last
 * prompt position's logits into last; gaps[i]: top-1 minus top-2 over RMS at step i. */
static bool vt_greedy(vt_model *m, const int32_t *prompt, int32_t n, int32_t per, int32_t n_gen, int32_t *gen,
                      float *last, float *gaps) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = 2;
    vt_context *c = NULL;
    if (vt_context_create(m, &cp, &c) != VT_OK) return false;
    const int32_t nv = vt_model_n_vocab(m);
    int32_t seq0 = 0, pos[1024], seqs[1024] = {0};
    for (int32_t i = 0; i < 1024; i++) pos[i] = i;
    bool ok = true;
    for (int32_t i0 = 0; ok && i0 < n; i0 += per) {
        const int32_t k = n - i0 < per ? n - i0 : per;
        vt_batch b = {.n_tokens = k, .token = prompt + i0, .pos = pos + i0, .seq = seqs};
        ok = vt_decode(c, &b) == VT_OK;
    }
    if (ok) memcpy(last, vt_get_logits(c, 0), sizeof(float) * (size_t)nv);
    for (int32_t g = 0; ok && g < n_gen; g++) {
        const float *l = vt_get_logits(c, 0);
        float gap;
        gen[g] = llama_ref_argmax(l, nv, &gap);
        gaps[g] = gap / (float)row_rms(l, nv);
        vt_batch b = {.n_tokens = 1, .token = &gen[g], .pos = pos + n + g, .seq = &seq0};
        ok = vt_decode(c, &b) == VT_OK;
    }
    vt_context_free(c);
    return ok;
}

/* qwen35moe: near ties of llama.cpp's router (tests/llama/test_parity.c says why): rows
 * where some layer's k-th and (k+1)-th expert are within PARITY_TIE_MARGIN in
 * log-probability are held to PARITY_NMSE_TIE and left out of the argmax rule. */
#define PARITY_TIE_MARGIN 0.02
#define PARITY_NMSE_TIE 5e-2

/* moe_k: experts per token (0: dense), to watch llama.cpp's router for near ties. */
/* VT_PARITY_ONLY=substring: only the rows whose label contains it. */
static bool selected(const char *label) {
    const char *only = getenv("VT_PARITY_ONLY");
    return !only || strstr(label, only);
}

static void check_parity(const char *label, const char *path, double bound, int32_t moe_k) {
    if (!selected(label)) return;
    llama_ref *r = llama_ref_open(path, 1024, 1); /* one thread: its spinning barriers crawl on shared cores */
    vt_model *m = NULL;
    CHECK_MSG(r != NULL, "%s: llama.cpp refused the file", label);
    CHECK_MSG(vt_model_load(path, NULL, &m) == VT_OK, "%s: %s", label, vt_last_error());
    if (!r || !m) goto done;
    const int32_t nv = llama_ref_n_vocab(r), np = 32;
    CHECK_EQ_INT(vt_model_n_vocab(m), nv);
    int32_t toks[600];
    for (int i = 0; i < 600; i++) toks[i] = (int32_t)((i * 7919u + 13u) % 151000u);
    float *ref = malloc(sizeof(float) * (size_t)np * (size_t)nv), *mine = malloc(sizeof(float) * (size_t)np * (size_t)nv);
    float *steps = malloc(sizeof(float) * (size_t)np * (size_t)nv);
    /* the first 32 positions: one batch and token by token against llama.cpp's batch */
    float margin[32];
    for (int32_t i = 0; i < np; i++) margin[i] = INFINITY;
    if (moe_k) llama_ref_watch_router(r, moe_k, false, margin, np);
    CHECK(llama_ref_eval(r, toks, np, ref));
    if (moe_k) llama_ref_watch_router(r, 0, false, NULL, 0);
    CHECK(vt_eval(path, toks, np, np, 2, mine));
    CHECK(vt_eval(path, toks, np, 1, 1, steps));
    double worst = 0, worst_tie = 0;
    int agree = 0, counted = 0, ties = 0;
    for (int32_t i = 0; i < np; i++) {
        const float *rr = ref + (size_t)i * nv;
        const double e = fmax(nmse(mine + (size_t)i * nv, rr, nv), nmse(steps + (size_t)i * nv, rr, nv));
        if (margin[i] < PARITY_TIE_MARGIN) {
            ties++;
            worst_tie = fmax(worst_tie, e);
            continue;
        }
        worst = fmax(worst, e);
        float gap;
        const int32_t want = llama_ref_argmax(rr, nv, &gap);
        if (gap > PARITY_GAP * row_rms(rr, nv)) {
            counted++;
            agree += llama_ref_argmax(mine + (size_t)i * nv, nv, NULL) == want &&
                     llama_ref_argmax(steps + (size_t)i * nv, nv, NULL) == want;
        }
    }
    CHECK_MSG(worst <= bound, "%s: worst nmse over 32 positions %g", label, worst);
    CHECK_MSG(worst_tie <= PARITY_NMSE_TIE, "%s: worst nmse of the %d router-tie rows %g", label, ties, worst_tie);
    CHECK_MSG(agree == counted, "%s: argmax agrees at %d of %d clear positions", label, agree, counted);
    /* a prompt of 1 token */
    CHECK(llama_ref_eval(r, toks, 1, ref));
    CHECK(vt_eval(path, toks, 1, 1, 1, mine));
    const double e1 = nmse(mine, ref, nv);
    CHECK_MSG(e1 <= (margin[0] < PARITY_TIE_MARGIN ? PARITY_NMSE_TIE : bound), "%s: 1-token prompt nmse %g", label,
              e1);
    /* prompts of 100 and 600 (llama.cpp's chunked delta rule over 2 and 10 chunks): greedy
     * continuations agree where vt's choice is clear; one chunk or chunks of 64: same bits */
    int g_agree = 0, g_counted = 0;
    for (int pi = 0; pi < 2; pi++) {
        const int32_t n = pi ? 600 : 100, n_gen = 4;
        int32_t want[4], got[4], got2[4];
        float gaps[4], gaps2[4];
        CHECK(llama_ref_greedy(r, toks, n, n_gen, want));
        CHECK(vt_greedy(m, toks, n, n, n_gen, got, mine, gaps));
        CHECK(vt_greedy(m, toks, n, 64, n_gen, got2, steps, gaps2));
        CHECK_MSG(memcmp(mine, steps, sizeof(float) * (size_t)nv) == 0, "%s: %d-token prompt in chunks of 64 differs",
                  label, n);
        CHECK(memcmp(got, got2, sizeof got) == 0);
        for (int g = 0; g < n_gen && (g == 0 || got[g - 1] == want[g - 1]); g++)
            if (gaps[g] > PARITY_GAP) g_counted++, g_agree += got[g] == want[g];
    }
    CHECK_MSG(g_agree == g_counted, "%s: greedy agrees at %d of %d clear steps", label, g_agree, g_counted);
    char tie_note[64] = "";
    if (ties) snprintf(tie_note, sizeof tie_note, "  (router ties: %d rows, nmse %.2e)", ties, worst_tie);
    printf("%-24s nmse(32 pos) %.2e  1-tok %.2e  argmax %d/%d  greedy(100,600) %d/%d%s\n", label, worst, e1, agree,
           counted, g_agree, g_counted, tie_note);
    free(ref), free(mine), free(steps);
done:
    vt_model_free(m);
    if (r) llama_ref_close(r);
}

static void test_parity_vocab(void) {
    const char *vocab = test_model_path("vocab/ggml-vocab-qwen35.gguf");
    if (!vocab) return;
    char vpath[4096];
    snprintf(vpath, sizeof vpath, "%s", vocab);
    static const vt_dtype types[] = {VT_DTYPE_F16, VT_DTYPE_Q8_0, VT_DTYPE_Q4_0, VT_DTYPE_Q4_K};
    static const char *mixes[] = {"Q4_K_M"};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        char label[64], path[] = "/tmp/vt_qwen35_parity_XXXXXX";
        snprintf(label, sizeof label, "synth-qwen35-%s", quant_traits_get(types[t])->name);
        if (!selected(label) && !(types[t] == VT_DTYPE_F16 && selected("llamaq-qwen35-"))) continue;
        const int fd = mkstemp(path);
        CHECK(fd >= 0);
        close(fd);
        synth_params sp = synth_default_params();
        sp.arch = "qwen35";
        sp.type = types[t];
        sp.vocab_path = vpath;
        sp.n_layer = 4;
        sp.n_embd = 256;
        sp.n_head = 4;
        sp.n_head_kv = 2;
        sp.head_dim = 64;
        sp.n_ff = 512;
        sp.n_ctx = 1024;
        sp.seed = 2700 + t;
        sp.n_threads = 2;
        CHECK_OK(synth_write(&sp, path));
        check_parity(label, path, types[t] == VT_DTYPE_Q4_0 ? PARITY_NMSE_Q4_0 : PARITY_NMSE, 0);
        for (size_t q = 0; types[t] == VT_DTYPE_F16 && selected("llamaq-qwen35-") && q < sizeof mixes / sizeof mixes[0]; q++) {
            char qpath[] = "/tmp/vt_qwen35_parityq_XXXXXX";
            const int qfd = mkstemp(qpath);
            close(qfd);
            llama_model_quantize_params qp = llama_model_quantize_default_params();
            qp.nthread = 2;
            const bool ok = llama_ref_ftype(mixes[q], &qp.ftype) && llama_model_quantize(path, qpath, &qp) == 0;
            CHECK_MSG(ok, "llama_model_quantize %s failed", mixes[q]);
            snprintf(label, sizeof label, "llamaq-qwen35-%s", mixes[q]);
            if (ok) check_parity(label, qpath, PARITY_NMSE, 0);
            unlink(qpath);
        }
        unlink(path);
    }
}

/* qwen35moe: the hybrid with 16 routed experts of 256 rows (4 per token) and a shared
 * expert of 256 rows; the F16 file (and so llama.cpp's Q4_K_M of it) also carries one
 * multi-token-prediction layer, which both engines skip. */
static void test_parity_moe(void) {
    const char *vocab = test_model_path("vocab/ggml-vocab-qwen35.gguf");
    if (!vocab) return;
    char vpath[4096];
    snprintf(vpath, sizeof vpath, "%s", vocab);
    static const vt_dtype types[] = {VT_DTYPE_F16, VT_DTYPE_Q8_0, VT_DTYPE_Q4_0, VT_DTYPE_Q4_K};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        char label[64], path[] = "/tmp/vt_qwen35moe_parity_XXXXXX";
        snprintf(label, sizeof label, "synth-qwen35moe-%s", quant_traits_get(types[t])->name);
        if (!selected(label) && !(types[t] == VT_DTYPE_F16 && selected("llamaq-qwen35moe-"))) continue;
        const int fd = mkstemp(path);
        CHECK(fd >= 0);
        close(fd);
        synth_params sp = synth_default_params();
        sp.arch = "qwen35moe";
        sp.type = types[t];
        sp.vocab_path = vpath;
        sp.n_layer = 4;
        sp.n_embd = 256;
        sp.n_head = 4;
        sp.n_head_kv = 2;
        sp.head_dim = 64;
        sp.n_ff = 256;
        sp.n_ff_exp = 256;
        sp.n_expert = 16;
        sp.n_expert_used = 4;
        sp.n_nextn = types[t] == VT_DTYPE_F16;
        sp.tied = true; /* one vocabulary-sized matrix to write and quantize, not two */
        sp.n_ctx = 1024;
        sp.seed = 2750 + t;
        sp.n_threads = 2;
        CHECK_OK(synth_write(&sp, path));
        check_parity(label, path, types[t] == VT_DTYPE_Q4_0 ? PARITY_NMSE_Q4_0 : PARITY_NMSE, (int32_t)sp.n_expert_used);
        if (types[t] == VT_DTYPE_F16 && selected("llamaq-qwen35moe-")) {
            char qpath[] = "/tmp/vt_qwen35moe_parityq_XXXXXX";
            const int qfd = mkstemp(qpath);
            close(qfd);
            llama_model_quantize_params qp = llama_model_quantize_default_params();
            qp.nthread = 2;
            const bool ok = llama_ref_ftype("Q4_K_M", &qp.ftype) && llama_model_quantize(path, qpath, &qp) == 0;
            CHECK_MSG(ok, "llama_model_quantize Q4_K_M failed");
            if (ok) check_parity("llamaq-qwen35moe-Q4_K_M", qpath, PARITY_NMSE, (int32_t)sp.n_expert_used);
            unlink(qpath);
        }
        unlink(path);
    }
}

int main(void) {
    if (!llama_ref_init()) {
        fprintf(stderr, "no llama.cpp CPU backend\n");
        return 1;
    }
    synth_params sp = synth_default_params();
    sp.arch = "qwen35";
    sp.n_layer = 4; /* 3 linear, 1 full */
    sp.n_embd = 128;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.head_dim = 32;
    sp.n_ff = 256;
    sp.n_ctx = 1024; /* vt_eval's context */
    sp.n_vocab = 512;
    sp.n_threads = 1;
    char path[] = "/tmp/vt_qwen35_llama_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(synth_write(&sp, path));
    llama_ref *r = llama_ref_open(path, 256, 1);
    CHECK_MSG(r != NULL, "llama.cpp refused vt's qwen35 file");
    if (r) {
        const int32_t n = 100, nv = llama_ref_n_vocab(r);
        int32_t toks[100];
        for (int i = 0; i < n; i++) toks[i] = 3 + (i * 37) % 500;
        float *batch = malloc(sizeof(float) * (size_t)n * (size_t)nv);
        float *steps = malloc(sizeof(float) * (size_t)n * (size_t)nv);
        CHECK(llama_ref_eval(r, toks, n, batch));
        CHECK(llama_ref_eval_steps(r, toks, n, steps));
        int finite = 1;
        for (int64_t i = 0; i < (int64_t)n * nv; i++) finite &= isfinite(batch[i]) && isfinite(steps[i]);
        CHECK(finite);
        const double e = nmse(steps, batch, (int64_t)n * nv);
        printf("llama.cpp qwen35: chunked vs recurrent nmse %.3g\n", e);
        CHECK_MSG(e <= 1e-6, "chunked vs recurrent nmse %g", e);

        /* vt: the whole prompt at once, in runs of 7, token by token */
        float *mine = malloc(sizeof(float) * (size_t)n * (size_t)nv);
        float *mine2 = malloc(sizeof(float) * (size_t)n * (size_t)nv);
        CHECK(vt_eval(path, toks, n, n, 1, mine));
        const double ev = nmse(mine, batch, (int64_t)n * nv);
        int agree = 0;
        for (int32_t i = 0; i < n; i++)
            agree += llama_ref_argmax(mine + (size_t)i * nv, nv, NULL) == llama_ref_argmax(batch + (size_t)i * nv, nv, NULL);
        printf("vt vs llama.cpp qwen35: nmse %.3g, argmax agrees at %d of %d positions\n", ev, agree, n);
        CHECK_MSG(ev <= 1e-6, "vt vs llama.cpp nmse %g", ev);
        CHECK(vt_eval(path, toks, n, 7, 2, mine2));
        CHECK_MSG(memcmp(mine, mine2, sizeof(float) * (size_t)n * (size_t)nv) == 0, "runs of 7 on 2 threads differ");
        CHECK(vt_eval(path, toks, n, 1, 1, mine2));
        CHECK_MSG(memcmp(mine, mine2, sizeof(float) * (size_t)n * (size_t)nv) == 0, "token by token differs");
        free(mine), free(mine2);
        free(batch), free(steps);
        llama_ref_close(r);
    }
    unlink(path);
    test_parity_vocab();
    test_parity_moe();
    return test_finish();
}
