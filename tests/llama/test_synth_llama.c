/* Synthetic models (src/model/synth.c) are valid for the reference llama.cpp:
 * each arch and a spread of weight types loads, has the shape and parameter count
 * asked for, and runs a batch plus a few decode steps to finite logits of the
 * expected scale. Also: the generator is reproducible (same bytes for the same
 * seed, whatever the thread count) and rejects shapes a type cannot hold. */
#include "llama_ref.h"
#include "model/synth.h"
#include "test.h"

#include "llama.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

static char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* Expected parameter count of a synth model. */
static uint64_t n_params(const synth_params *p, int64_t n_vocab) {
    int64_t hd = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    int64_t q = hd * p->n_head, kv = hd * p->n_head_kv;
    const int64_t ff_exp = p->n_ff_exp && strcmp(p->arch, "llama") ? p->n_ff_exp : p->n_ff;
    const int64_t ffn = p->n_expert ? p->n_embd * p->n_expert + 3 * p->n_embd * ff_exp * p->n_expert
                                    : 3 * p->n_embd * p->n_ff;
    int64_t per_layer = 2 * p->n_embd + p->n_embd * (q + 2 * kv) + q * p->n_embd + ffn;
    if (!strcmp(p->arch, "olmo2")) per_layer += q + kv; /* post-norms for pre-norms, whole-row QK-norm */
    if (!strcmp(p->arch, "qwen2")) per_layer += q + 2 * kv;
    if (!strcmp(p->arch, "qwen3") || !strcmp(p->arch, "qwen3moe") || !strcmp(p->arch, "gemma3")) per_layer += 2 * hd;
    const bool gemma = !strncmp(p->arch, "gemma", 5);
    if (gemma) per_layer += 2 * p->n_embd; /* the post-norms */
    const bool tied = p->tied || !strcmp(p->arch, "gemma2");
    return (uint64_t)(n_vocab * p->n_embd * (tied ? 1 : 2) + p->n_embd + p->n_layer * per_layer);
}

static void check_model(const synth_params *p, const char *label) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, label);
    vt_status s = synth_write(p, path);
    CHECK_MSG(s == VT_OK, "%s: %s", label, vt_last_error());
    if (s != VT_OK) return;

    llama_ref *r = llama_ref_open(path, 64, 2);
    CHECK_MSG(r != NULL, "%s: llama.cpp does not load it", label);
    if (!r) return;
    const struct llama_model *m = llama_ref_model(r);
    int32_t n_vocab = llama_ref_n_vocab(r);
    int64_t want_vocab = p->vocab_path ? n_vocab : p->n_vocab;
    CHECK_EQ_INT(n_vocab, want_vocab);
    CHECK_EQ_INT(llama_model_n_embd(m), p->n_embd);
    CHECK_EQ_INT(llama_model_n_layer(m), p->n_layer);
    CHECK_EQ_INT(llama_model_n_head(m), p->n_head);
    CHECK_EQ_INT(llama_model_n_head_kv(m), p->n_head_kv);
    CHECK_EQ_INT(llama_model_n_ctx_train(m), p->n_ctx);
    CHECK_EQ_INT(llama_model_n_params(m), n_params(p, n_vocab));
    if (p->n_expert) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s.expert_count", p->arch);
        char val[32] = "";
        CHECK(llama_model_meta_val_str(m, buf, val, sizeof val) > 0);
        CHECK_EQ_INT(atoll(val), p->n_expert);
    }
    if (!strcmp(p->arch, "llama") || !strcmp(p->arch, "smollm3") || !strcmp(p->arch, "granite"))
        CHECK_EQ_INT(llama_model_rope_type(m), LLAMA_ROPE_TYPE_NORM);
    else CHECK_EQ_INT(llama_model_rope_type(m), LLAMA_ROPE_TYPE_NEOX);

    enum { N = 8 };
    int32_t toks[N];
    toks[0] = llama_ref_bos(r) >= 0 ? llama_ref_bos(r) : 1;
    for (int i = 1; i < N; i++) toks[i] = (int32_t)((i * 7919) % n_vocab);
    float *logits = malloc((size_t)N * (size_t)n_vocab * sizeof(float));
    bool ok = llama_ref_eval(r, toks, N, logits);
    CHECK_MSG(ok, "%s: llama_decode failed", label);
    if (ok) {
        /* Final norm gives rms 1, the head has N(0, 0.02) rows of n_embd: logits
         * have a spread near 0.02 * sqrt(n_embd), never NaN. */
        double sum2 = 0;
        long bad = 0;
        for (long i = 0; i < (long)N * n_vocab; i++) {
            if (!isfinite(logits[i])) bad++;
            sum2 += (double)logits[i] * logits[i];
        }
        double rms = sqrt(sum2 / ((double)N * n_vocab));
        double expect = 0.02 * sqrt((double)p->n_embd);
        if (!strcmp(p->arch, "granite")) expect /= 8.0; /* synth's logit_scale */
        CHECK_MSG(bad == 0, "%s: %ld non-finite logits", label, bad);
        CHECK_MSG(rms > 0.5 * expect && rms < 2.0 * expect, "%s: logit rms %.4f, expected about %.4f",
                  label, rms, expect);
        printf("%-28s n_params %10llu  logit rms %.4f (expect ~%.4f)\n", label,
               (unsigned long long)llama_model_n_params(m), rms, expect);
    }
    int32_t gen[4];
    CHECK_MSG(llama_ref_greedy(r, toks, N, 4, gen), "%s: greedy decode failed", label);
    free(logits);
    llama_ref_close(r);
    unlink(path);
}

static void test_reproducible(void) {
    synth_params p = synth_default_params();
    p.type = VT_DTYPE_Q4_K;
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/rep-a.gguf", tmpdir);
    snprintf(b, sizeof b, "%s/rep-b.gguf", tmpdir);
    p.n_threads = 1;
    CHECK_OK(synth_write(&p, a));
    p.n_threads = 3;
    CHECK_OK(synth_write(&p, b));
    size_t na = 0, nb = 0;
    char *da = read_file(a, &na), *db = read_file(b, &nb);
    CHECK(da && db && na == nb && na > 0 && !memcmp(da, db, na));
    free(db);
    p.seed = 2;
    CHECK_OK(synth_write(&p, b));
    db = read_file(b, &nb);
    CHECK(da && db && na == nb && memcmp(da, db, na) != 0); /* another seed, other weights */
    free(da);
    free(db);
    unlink(a);
    unlink(b);
}

static void test_rejects(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/bad.gguf", tmpdir);
    synth_params p = synth_default_params();
    p.type = VT_DTYPE_Q4_K;
    p.n_embd = 128; /* not a multiple of 256 */
    p.n_head = 2;
    CHECK_EQ_INT(synth_write(&p, path), VT_E_INVALID);
    CHECK(strstr(vt_last_error(), "multiple of 256") != NULL);
    p = synth_default_params();
    p.arch = "gpt2";
    CHECK_EQ_INT(synth_write(&p, path), VT_E_INVALID);
    p = synth_default_params();
    p.n_head_kv = 3;
    CHECK_EQ_INT(synth_write(&p, path), VT_E_INVALID);
    p = synth_default_params();
    p.n_vocab = 100;
    CHECK_EQ_INT(synth_write(&p, path), VT_E_INVALID);
    p = synth_default_params();
    p.arch = "qwen3moe"; /* without experts */
    CHECK_EQ_INT(synth_write(&p, path), VT_E_INVALID);
    p.n_expert = 4;
    p.n_expert_used = 5;
    CHECK_EQ_INT(synth_write(&p, path), VT_E_INVALID);
    p = synth_default_params();
    p.arch = "qwen2";
    p.n_expert = 4;
    CHECK_EQ_INT(synth_write(&p, path), VT_E_INVALID);
    p = synth_default_params();
    p.type = VT_DTYPE_Q8_K; /* a dot-only type */
    CHECK_EQ_INT(synth_write(&p, path), VT_E_INVALID);
    CHECK(access(path, F_OK) != 0);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vt-synth-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    CHECK(llama_ref_init());

    struct {
        const char *arch;
        vt_dtype type;
        bool tied;
    } cases[] = {
        {"llama", VT_DTYPE_F32, false},   {"llama", VT_DTYPE_F16, true},
        {"llama", VT_DTYPE_Q4_0, false},  {"llama", VT_DTYPE_Q4_K, false},
        {"llama", VT_DTYPE_IQ4_XS, true}, {"qwen2", VT_DTYPE_BF16, false},
        {"qwen2", VT_DTYPE_Q8_0, true},   {"qwen2", VT_DTYPE_Q3_K, false},
        {"qwen3", VT_DTYPE_Q6_K, false},  {"qwen3", VT_DTYPE_Q5_1, true},
        {"qwen3", VT_DTYPE_IQ4_NL, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        synth_params p = synth_default_params();
        p.arch = cases[i].arch;
        p.type = cases[i].type;
        p.tied = cases[i].tied;
        p.seed = 100 + i;
        char label[64];
        snprintf(label, sizeof label, "%s-%s%s", p.arch, quant_traits_get(p.type)->name,
                 p.tied ? "-tied" : "");
        check_model(&p, label);
    }
    /* a real vocabulary, mixed types, a head_dim that is not n_embd / n_head */
    const char *vocab = test_model_path("vocab/ggml-vocab-llama-spm.gguf");
    if (vocab) {
        synth_params p = synth_default_params();
        p.vocab_path = vocab;
        p.type = VT_DTYPE_Q4_K;
        p.output_type = VT_DTYPE_Q6_K;
        p.embd_type = VT_DTYPE_Q8_0;
        p.n_layer = 1;
        check_model(&p, "llama-spm-q4_k-mix");
    }
    {
        synth_params p = synth_default_params();
        p.arch = "qwen3";
        p.head_dim = 128; /* 4 heads x 128 = 512 != n_embd 256, as in real Qwen3 */
        p.type = VT_DTYPE_Q8_0;
        check_model(&p, "qwen3-q8_0-hd128");
    }
    /* mixture of experts: qwen3moe (expert width of its own) and Mixtral-style llama */
    {
        synth_params p = synth_default_params();
        p.arch = "qwen3moe";
        p.head_dim = 64;
        p.n_expert = 8;
        p.n_expert_used = 2;
        p.n_ff_exp = 256;
        p.type = VT_DTYPE_Q4_K;
        check_model(&p, "qwen3moe-q4_k-8x2");
        p.arch = "llama";
        p.type = VT_DTYPE_Q8_0;
        p.n_ff_exp = 0;
        check_model(&p, "llama-experts-q8_0-8x2");
    }
    /* gemma: sliding windows in a pattern, post-norms, soft-caps, gemma3's QK-norm
     * and local rope base */
    {
        synth_params p = synth_default_params();
        p.arch = "gemma3";
        p.n_layer = 3;
        p.n_swa = 4;
        p.swa_pattern = 3;
        p.rope_freq_base_swa = 10000.0f;
        p.rope_freq_base = 1e6f;
        p.type = VT_DTYPE_Q4_0;
        check_model(&p, "gemma3-q4_0-swa4");
        p.arch = "gemma2";
        p.swa_pattern = 2;
        p.attn_softcap = 50.0f;
        p.final_softcap = 30.0f;
        p.type = VT_DTYPE_Q8_0;
        check_model(&p, "gemma2-q8_0-swa4");
        p = synth_default_params();
        p.arch = "olmo2";
        p.type = VT_DTYPE_Q4_K;
        check_model(&p, "olmo2-q4_K");
        p.n_swa = 4;
        p.swa_pattern = 2;
        p.n_layer = 3;
        p.type = VT_DTYPE_F16;
        check_model(&p, "olmo2-f16-swa4");
        p = synth_default_params();
        p.arch = "smollm3";
        p.n_layer = 4;
        p.type = VT_DTYPE_Q8_0;
        check_model(&p, "smollm3-q8_0");
        p.arch = "granite";
        p.n_layer = 2;
        p.type = VT_DTYPE_Q4_K;
        check_model(&p, "granite-q4_K");
    }
    test_reproducible();
    test_rejects();
    rmdir(tmpdir);
    return test_finish();
}
