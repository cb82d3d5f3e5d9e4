/* Mixture-of-experts models (qwen3moe; llama with Mixtral-style experts) on
 * small synthetic files (src/model/synth.c):
 * - logits bit-identical for 1, 2 and 3 threads, prefill and decode, with every
 *   pass on all threads (VT_SOLO_KIB=0, so the (expert, slice) items are
 *   claimed by several threads) and with the default;
 * - one prompt alone and the same prompt in a batch beside two others (other
 *   tokens for its experts, other item lists) give bit-identical logits, in
 *   the prefill batch and in the decode steps after it;
 * - shapes where an expert is several slices wide and tall (n_ff_exp 320 =
 *   256 + 64, n_embd 512 = 2 x 256) and where it is one slice;
 * - vt_model_step_bytes counts only the experts a token routes to;
 * - vt_engine_stats' weight count: a step of one decode reads the step bytes;
 *   a prefill and a step of three decodes read each layer's chosen experts
 *   once, between n_used and T x n_used of them per layer, and the bytes of
 *   the rest of the weights once;
 * - moe_select (both gatings, ties, a bias, k = n) and gpt-oss's clamped
 *   SwiGLU on hand-computed values;
 * - the experts' unfused path (gpt-oss: biases, clamped SwiGLU): with zero
 *   biases and SiLU it gives the fused path's bits; with gpt-oss's activation,
 *   a router bias that reroutes and nonzero biases, the same bits on 1, 2 and
 *   3 threads and other logits than without. */
#include "model/model.h"
#include "model/moe.h"
#include "model/synth.h"
#include "test.h"
#include "vt.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_PROMPT 40
#define N_GEN 8
#define N_ROWS (N_PROMPT + N_GEN)

static char g_dir[] = "/tmp/vt_test_moe_XXXXXX";

static vt_model *synth_model(const char *label, const char *arch, vt_dtype type, int64_t n_embd,
                             int64_t ff_exp, int64_t n_expert, int64_t n_used, size_t *file_expert_bytes) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s.gguf", g_dir, label);
    synth_params sp = synth_default_params();
    sp.arch = arch;
    sp.type = type;
    sp.n_embd = n_embd;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.head_dim = 64;
    sp.n_ff = ff_exp;
    sp.n_ff_exp = ff_exp;
    sp.n_expert = n_expert;
    sp.n_expert_used = n_used;
    sp.n_threads = 2;
    sp.seed = 7;
    vt_status s = synth_write(&sp, path);
    CHECK_MSG(s == VT_OK, "%s: synth: %s", label, vt_last_error());
    if (s != VT_OK) return NULL;
    vt_model *m = NULL;
    s = vt_model_load(path, NULL, &m);
    CHECK_MSG(s == VT_OK, "%s: load: %s", label, vt_last_error());
    size_t row = 0;
    quant_row_bytes(type, n_embd, &row);
    *file_expert_bytes = (size_t)(3 * n_expert * ff_exp) * row; /* gate, up, down: same bytes each */
    unlink(path);
    return m;
}

static void prompt_of(int k, int32_t n_vocab, int32_t *out, int n) {
    uint64_t h = 0x9E3779B97F4A7C15ull * (uint64_t)(k + 1);
    for (int i = 0; i < n; i++) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        out[i] = 3 + (int32_t)((h >> 33) % (uint64_t)(n_vocab - 3));
    }
}

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* Sequence 0 alone: the prompt in one batch, then N_GEN greedy steps; the
 * logits of all N_ROWS rows into out, the generated ids into gen. */
static bool run_alone(vt_model *m, int threads, const int32_t *prompt, float *out, int32_t *gen) {
    const int nv = vt_model_n_vocab(m);
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = threads;
    vt_context *c = NULL;
    if (vt_context_create(m, &cp, &c) != VT_OK) return false;
    int32_t pos[N_PROMPT], seq[N_PROMPT] = {0};
    int8_t want[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) pos[i] = i, want[i] = 1;
    vt_batch b = {N_PROMPT, prompt, pos, seq, want};
    bool ok = vt_decode(c, &b) == VT_OK;
    for (int i = 0; ok && i < N_PROMPT; i++) memcpy(out + (size_t)i * nv, vt_get_logits(c, i), sizeof(float) * nv);
    int32_t tok = ok ? argmax(out + (size_t)(N_PROMPT - 1) * nv, nv) : 0;
    for (int g = 0; ok && g < N_GEN; g++) {
        int32_t p = N_PROMPT + g, s0 = 0;
        gen[g] = tok;
        vt_batch bs = {1, &tok, &p, &s0, NULL};
        ok = vt_decode(c, &bs) == VT_OK;
        if (!ok) break;
        const float *l = vt_get_logits(c, 0);
        memcpy(out + (size_t)(N_PROMPT + g) * nv, l, sizeof(float) * nv);
        tok = argmax(l, nv);
    }
    vt_context_free(c);
    return ok;
}

/* Logits bit-identical across thread counts (all passes shared, then the default). */
static void check_threads(vt_model *m, const char *label) {
    const int nv = vt_model_n_vocab(m);
    const size_t n = (size_t)N_ROWS * (size_t)nv;
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    int32_t prompt[N_PROMPT], gen[N_GEN], gen2[N_GEN];
    prompt_of(0, nv, prompt, N_PROMPT);
    CHECK(run_alone(m, 1, prompt, ref, gen));
    setenv("VT_SOLO_KIB", "0", 1);
    for (int t = 2; t <= 3; t++) {
        CHECK(run_alone(m, t, prompt, got, gen2));
        CHECK_MSG(!memcmp(ref, got, n * sizeof(float)), "%s: logits differ at %d threads", label, t);
    }
    unsetenv("VT_SOLO_KIB");
    CHECK(run_alone(m, 2, prompt, got, gen2));
    CHECK_MSG(!memcmp(ref, got, n * sizeof(float)), "%s: logits differ at 2 threads (default)", label);
    /* not degenerate: the prompt's rows predict many different tokens */
    int top[N_PROMPT], distinct = 0;
    for (int i = 0; i < N_PROMPT; i++) {
        top[i] = argmax(ref + (size_t)i * nv, nv);
        bool seen = false;
        for (int j = 0; j < i; j++) seen = seen || top[j] == top[i];
        distinct += !seen;
    }
    CHECK_MSG(distinct >= N_PROMPT / 3, "%s: the prompt's rows predict %d distinct tokens of %d", label, distinct,
              N_PROMPT);
    free(ref);
    free(got);
}

/* Sequence 0's prompt in one batch beside sequences 1 and 2 (other prompts,
 * interleaved), then its decode steps beside theirs: the same bits as alone. */
static void check_batch(vt_model *m, const char *label) {
    const int nv = vt_model_n_vocab(m);
    float *ref = malloc(sizeof(float) * (size_t)N_ROWS * nv);
    int32_t prompts[3][N_PROMPT], gen[N_GEN];
    for (int k = 0; k < 3; k++) prompt_of(k, nv, prompts[k], N_PROMPT);
    CHECK(run_alone(m, 2, prompts[0], ref, gen));
    const int lens[3] = {N_PROMPT, 17, 9};
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 128;
    cp.n_seq = 3;
    cp.n_threads = 2;
    vt_context *c = NULL;
    CHECK_OK(vt_context_create(m, &cp, &c));
    if (!c) return;
    int32_t tok[3 * N_PROMPT], pos[3 * N_PROMPT], seq[3 * N_PROMPT];
    int8_t want[3 * N_PROMPT];
    int n = 0, row0[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        for (int k = 0; k < 3; k++) {
            if (i >= lens[k]) continue;
            if (k == 0) row0[i] = n;
            tok[n] = prompts[k][i], pos[n] = i, seq[n] = k, want[n] = 1;
            n++;
        }
    vt_batch b = {n, tok, pos, seq, want};
    CHECK_OK(vt_decode(c, &b));
    int bad = 0;
    for (int i = 0; i < N_PROMPT; i++)
        bad += memcmp(vt_get_logits(c, row0[i]), ref + (size_t)i * nv, sizeof(float) * nv) != 0;
    CHECK_MSG(bad == 0, "%s: prompt in a batch: %d of %d rows differ from alone", label, bad, N_PROMPT);
    /* decode: sequence 0 follows its greedy path; 1 and 2 go on with token 5 */
    bad = 0;
    for (int g = 0; g < N_GEN; g++) {
        int32_t t3[3] = {gen[g], 5, 5}, p3[3] = {N_PROMPT + g, lens[1] + g, lens[2] + g}, s3[3] = {2, 0, 1};
        /* sequence 0 in the middle of the batch */
        int32_t tt[3] = {t3[2], t3[0], t3[1]}, pp[3] = {p3[2], p3[0], p3[1]};
        int8_t w3[3] = {1, 1, 1};
        vt_batch bs = {3, tt, pp, s3, w3};
        CHECK_OK(vt_decode(c, &bs));
        bad += memcmp(vt_get_logits(c, 1), ref + (size_t)(N_PROMPT + g) * nv, sizeof(float) * nv) != 0;
    }
    CHECK_MSG(bad == 0, "%s: decode in a batch: %d of %d steps differ from alone", label, bad, N_GEN);
    vt_context_free(c);
    free(ref);
}

/* The unfused expert path on m (qwen3moe), by setting the gpt-oss fields. */
static void check_split(vt_model *m, const char *label) {
    model_hparams *hp = &m->hp;
    const int nv = vt_model_n_vocab(m);
    const size_t n = (size_t)N_ROWS * (size_t)nv;
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float)), *oai = malloc(n * sizeof(float));
    int32_t prompt[N_PROMPT], gen[N_GEN];
    prompt_of(1, nv, prompt, N_PROMPT);
    CHECK(run_alone(m, 2, prompt, ref, gen));
    const int64_t ne = hp->n_expert, nf = hp->n_ff_exp, d = hp->n_embd;
    float *zf = calloc((size_t)(ne * nf), sizeof(float)), *zd = calloc((size_t)(ne * d), sizeof(float));
    float *bf = malloc(sizeof(float) * (size_t)(ne * nf)), *bd = malloc(sizeof(float) * (size_t)(ne * d)),
          *br = malloc(sizeof(float) * (size_t)ne);
    for (int64_t i = 0; i < ne * nf; i++) bf[i] = 0.05f * (float)((i * 7919) % 13 - 6);
    for (int64_t i = 0; i < ne * d; i++) bd[i] = 0.01f * (float)((i * 104729) % 11 - 5);
    for (int64_t i = 0; i < ne; i++) br[i] = i == 1 ? 2.0f : 0.0f;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        m->layers[il].exp_gate_b = zf;
        m->layers[il].exp_up_b = zf;
        m->layers[il].exp_down_b = zd;
    }
    CHECK(run_alone(m, 2, prompt, got, gen));
    CHECK_MSG(!memcmp(ref, got, n * sizeof(float)), "%s: the unfused path with zero biases differs", label);
    /* gpt-oss's pieces: its activation, biases, its routing */
    hp->act = MOE_ACT_SWIGLU_OAI;
    hp->gating = MOE_GATING_SOFTMAX_WEIGHT;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        m->layers[il].exp_gate_b = bf;
        m->layers[il].exp_up_b = bf;
        m->layers[il].exp_down_b = bd;
        m->layers[il].router_b = br;
    }
    CHECK(run_alone(m, 1, prompt, oai, gen));
    setenv("VT_SOLO_KIB", "0", 1);
    for (int t = 2; t <= 3; t++) {
        CHECK(run_alone(m, t, prompt, got, gen));
        CHECK_MSG(!memcmp(oai, got, n * sizeof(float)), "%s: gpt-oss pieces differ at %d threads", label, t);
    }
    unsetenv("VT_SOLO_KIB");
    double e = 0;
    for (int i = 0; i < N_ROWS; i++) e += test_nmse(oai + (size_t)i * nv, ref + (size_t)i * nv, nv);
    CHECK_MSG(e / N_ROWS > 1e-3, "%s: gpt-oss pieces changed the logits by NMSE %.3g only", label, e / N_ROWS);
    hp->act = MOE_ACT_SILU;
    hp->gating = MOE_GATING_SOFTMAX;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        m->layers[il].exp_gate_b = m->layers[il].exp_up_b = m->layers[il].exp_down_b = NULL;
        m->layers[il].router_b = NULL;
    }
    free(zf);
    free(zd);
    free(bf);
    free(bd);
    free(br);
    free(ref);
    free(got);
    free(oai);
}

/* vt_engine_stats' weight count over the steps of an engine: request A's
 * prompt (one pass of N_PROMPT tokens), A's decode alone, B's and C's prompts
 * beside A's decode, then A, B and C decoding together. Each step must read
 * every weight but the experts, the embedding table and the head once, the
 * head (logits in every step here), one embedding row per token, and as many
 * experts as its MoE layers chose, each once: exp_bytes / n_expert apiece. */
static void check_reads(vt_model *m, const char *label, vt_dtype type, int64_t n_embd, size_t exp_bytes,
                        int64_t n_expert, int64_t n_used) {
    size_t row = 0;
    quant_row_bytes(type, n_embd, &row);
    const size_t table = row * (size_t)vt_model_n_vocab(m); /* token_embd; output.weight the same */
    const size_t trunk = vt_model_weight_bytes(m) - 2 * exp_bytes - 2 * table;
    const size_t per_expert = exp_bytes / (size_t)n_expert;
    vt_engine_params p = vt_engine_default_params();
    p.n_threads = 2;
    p.n_ctx = 128;
    p.max_seqs = 4;
    p.prefix_cache = false;
    vt_engine *e = NULL;
    vt_status st = vt_engine_create(m, &p, &e);
    CHECK_MSG(st == VT_OK, "%s: engine: %s", label, vt_last_error());
    if (st != VT_OK) return;
    int32_t prompt[N_PROMPT];
    vt_engine_stats s0, s1;
    vt_engine_stats_get(e, &s0);
    CHECK_MSG(s0.weight_bytes_read == 0 && s0.moe_layer_passes == 0 && s0.moe_experts_read == 0,
              "%s: reads before the first step", label);
    const int64_t tokens[4] = {N_PROMPT, 1, 1 + 2 * N_PROMPT, 3}; /* the tokens of each step */
    for (int step = 0; step < 4; step++) {
        for (int k = 0; k < (step == 0 ? 1 : step == 2 ? 2 : 0); k++) {
            const int which = step == 0 ? 0 : 1 + k;
            prompt_of(which, vt_model_n_vocab(m), prompt, N_PROMPT);
            vt_request_params q = {.prompt = prompt, .n_prompt = N_PROMPT, .sampling = vt_sampling_default(),
                                   .max_tokens = 8, .ignore_eos = true};
            uint64_t id;
            CHECK_OK(vt_engine_add(e, &q, &id));
        }
        const vt_output *outs;
        int32_t n;
        CHECK_OK(vt_engine_step(e, &outs, &n));
        vt_engine_stats_get(e, &s1);
        const int64_t T = tokens[step], layer_passes = s1.moe_layer_passes - s0.moe_layer_passes;
        const int64_t reads = s1.moe_experts_read - s0.moe_experts_read;
        const int64_t most = T * n_used < n_expert ? T * n_used : n_expert;
        CHECK_MSG(layer_passes == 2, "%s step %d: %lld MoE layer passes, want 2", label, step, (long long)layer_passes);
        CHECK_MSG(reads >= 2 * n_used && reads <= 2 * most, "%s step %d: %lld experts read in 2 layers, want %lld..%lld",
                  label, step, (long long)reads, (long long)(2 * n_used), (long long)(2 * most));
        const uint64_t want = trunk + table + (size_t)T * row + (size_t)reads * per_expert;
        CHECK_MSG(s1.weight_bytes_read - s0.weight_bytes_read == want, "%s step %d: %llu bytes read, want %llu",
                  label, step, (unsigned long long)(s1.weight_bytes_read - s0.weight_bytes_read),
                  (unsigned long long)want);
        if (T == 1) { /* one decode: exactly its n_used experts, vt_model_step_bytes (which rounds
                         the experts' share down: within a byte) */
            const uint64_t got = s1.weight_bytes_read - s0.weight_bytes_read, step_bytes = vt_model_step_bytes(m);
            CHECK_EQ_INT(reads, 2 * n_used);
            CHECK_MSG(got - step_bytes <= 1 || step_bytes - got <= 1, "%s: a decode read %llu bytes, step bytes %llu",
                      label, (unsigned long long)got, (unsigned long long)step_bytes);
        }
        s0 = s1;
    }
    vt_engine_free(e);
}

static void check_model(const char *label, const char *arch, vt_dtype type, int64_t n_embd, int64_t ff_exp,
                        int64_t n_expert, int64_t n_used) {
    size_t exp_bytes = 0;
    vt_model *m = synth_model(label, arch, type, n_embd, ff_exp, n_expert, n_used, &exp_bytes);
    if (!m) return;
    /* two layers of experts, of which a token reads n_used / n_expert */
    const size_t all = vt_model_weight_bytes(m), step = vt_model_step_bytes(m);
    const size_t skipped = 2 * exp_bytes - (size_t)((double)(2 * exp_bytes) * (double)n_used / (double)n_expert);
    const size_t embd_rest = all - step - skipped; /* the other rows of token_embd */
    size_t row = 0;
    quant_row_bytes(type, n_embd, &row);
    CHECK_MSG(embd_rest == row * (size_t)(vt_model_n_vocab(m) - 1), "%s: step bytes %zu of %zu", label, step,
              all);
    check_threads(m, label);
    check_batch(m, label);
    check_reads(m, label, type, n_embd, exp_bytes, n_expert, n_used);
    if (!strcmp(arch, "qwen3moe")) check_split(m, label);
    printf("%-22s %s\n", label, vt_model_desc(m));
    vt_model_free(m);
}

static void test_select(void) {
    const float logits[5] = {0.0f, 1.0f, 3.0f, 2.0f, 3.0f};
    float scratch[5], w[5];
    int32_t sel[5];
    /* softmax over all, top 2 (a tie: the lower index first), renormalised */
    moe_select(logits, NULL, 5, 2, MOE_GATING_SOFTMAX, scratch, sel, w);
    CHECK_EQ_INT(sel[0], 2);
    CHECK_EQ_INT(sel[1], 4);
    CHECK(fabsf(w[0] - 0.5f) < 1e-7f && fabsf(w[1] - 0.5f) < 1e-7f);
    /* top 3: e^3, e^3, e^2 over their sum */
    moe_select(logits, NULL, 5, 3, MOE_GATING_SOFTMAX, scratch, sel, w);
    CHECK_EQ_INT(sel[2], 3);
    const double z = 2 * exp(3.0) + exp(2.0);
    CHECK(fabs(w[0] - exp(3.0) / z) < 1e-6 && fabs(w[2] - exp(2.0) / z) < 1e-6);
    /* all five: the softmax itself */
    moe_select(logits, NULL, 5, 5, MOE_GATING_SOFTMAX, scratch, sel, w);
    double sum = 0;
    for (int j = 0; j < 5; j++) sum += w[j];
    CHECK(fabs(sum - 1.0) < 1e-6);
    CHECK_EQ_INT(sel[4], 0);
    /* gpt-oss: top-k of logits + bias, softmax over the k only */
    const float bias[5] = {2.5f, 0, 0, 0, -1.0f};
    moe_select(logits, bias, 5, 2, MOE_GATING_SOFTMAX_WEIGHT, scratch, sel, w);
    CHECK_EQ_INT(sel[0], 2); /* 3 */
    CHECK_EQ_INT(sel[1], 0); /* 2.5, above 3's 2 and 4's 2 */
    CHECK(fabs(w[0] - 1.0 / (1.0 + exp(-0.5))) < 1e-6 && fabs(w[0] + w[1] - 1.0) < 1e-6);
    /* scratch may be the logits themselves */
    float l2[5];
    memcpy(l2, logits, sizeof l2);
    moe_select(l2, NULL, 5, 2, MOE_GATING_SOFTMAX, l2, sel, w);
    CHECK_EQ_INT(sel[0], 2);
    CHECK(fabsf(w[1] - 0.5f) < 1e-7f);
}

static void test_swiglu_oai(void) {
    float g[5] = {0.0f, 1.0f, 10.0f, -3.0f, 7.0f};
    const float u[5] = {5.0f, 2.0f, -10.0f, 100.0f, 0.0f};
    moe_swiglu_oai(g, u, 5, MOE_OAI_ALPHA, MOE_OAI_LIMIT);
    const double a = MOE_OAI_ALPHA;
    const double want[5] = {
        0.0,
        1.0 / (1 + exp(-a)) * 3.0,           /* up + 1 */
        7.0 / (1 + exp(-7 * a)) * -6.0,      /* gate clamped to 7, up to -7 */
        -3.0 / (1 + exp(3 * a)) * 8.0,       /* negative gate: no lower clamp */
        7.0 / (1 + exp(-7 * a)) * 1.0,
    };
    for (int i = 0; i < 5; i++)
        CHECK_MSG(fabs(g[i] - want[i]) <= 1e-5 * fabs(want[i]) + 1e-7, "swiglu_oai[%d] = %.7g, want %.7g", i,
                  g[i], want[i]);
}

int main(void) {
    test_select();
    test_swiglu_oai();
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    check_model("qwen3moe-q8_0-sliced", "qwen3moe", VT_DTYPE_Q8_0, 512, 320, 8, 3);
    check_model("qwen3moe-q4_k", "qwen3moe", VT_DTYPE_Q4_K, 256, 256, 6, 2);
    check_model("llama-experts-f16", "llama", VT_DTYPE_F16, 256, 128, 4, 2);
    rmdir(g_dir);
    return test_finish();
}
