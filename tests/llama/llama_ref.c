/* llama_ref: see llama_ref.h. */
#include "llama_ref.h"

#include "ggml-backend.h"
#include "llama.h"
#include "../../tools/llama_rope.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifndef VT_LLAMA_BINS
#error "VT_LLAMA_BINS must name the directory of the reference llama.cpp libraries"
#endif

struct llama_ref {
    struct llama_model *model;
    struct llama_context *ctx;
    const struct llama_vocab *vocab;
    int32_t n_vocab;
    int32_t n_ctx;
    /* llama_ref_watch_router */
    int32_t watch_k, watch_n;
    bool watch_logits; /* ffn_moe_probs holds logits (gpt-oss's SOFTMAX_WEIGHT), not probabilities */
    float *watch_margin;
};

/* ggml's scheduler asks about every node (ask), then hands over those it said
 * yes to once computed: the router probabilities "ffn_moe_probs-<layer>",
 * (n_expert, n_tokens) F32, of the batch at positions 0.. (one ubatch). */
static bool router_probe(struct ggml_tensor *t, bool ask, void *user) {
    llama_ref *r = user;
    const bool want = r->watch_margin && !strncmp(t->name, "ffn_moe_probs-", 14) && t->type == GGML_TYPE_F32;
    if (ask || !want) return want || !ask;
    const int64_t ne = t->ne[0], k = r->watch_k;
    for (int64_t tok = 0; tok < t->ne[1] && tok < r->watch_n; tok++) {
        const float *p = (const float *)((const char *)t->data + tok * t->nb[1]);
        if (k <= 0 || k >= ne) continue;
        /* the k-th and (k+1)-th largest: k + 1 rounds of "largest not yet taken" */
        float top[2] = {-INFINITY, -INFINITY};
        uint8_t taken[1024] = {0};
        for (int64_t j = 0; j <= k && ne <= 1024; j++) {
            int64_t best = -1;
            for (int64_t e = 0; e < ne; e++)
                if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
            taken[best] = 1;
            if (j >= k - 1) top[j - (k - 1)] = p[best];
        }
        const float margin = r->watch_logits ? top[0] - top[1] : logf(top[0]) - logf(top[1]);
        if (margin < r->watch_margin[tok]) r->watch_margin[tok] = margin;
    }
    return true;
}

/* Keep warnings and errors (they explain a failed load), drop the rest. A
 * continuation (GGML_LOG_LEVEL_CONT) belongs to the previous line's level. */
static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    static enum ggml_log_level last = GGML_LOG_LEVEL_INFO;
    (void)user;
    if (level != GGML_LOG_LEVEL_CONT) last = level;
    if (last == GGML_LOG_LEVEL_WARN || last == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

bool llama_ref_init(void) {
    static int done = 0;
    if (done) return done > 0;
    llama_log_set(getenv("VT_LLAMA_VERBOSE") ? NULL : quiet_log, NULL);
    ggml_backend_load_all_from_path(VT_LLAMA_BINS);
    llama_backend_init();
    done = ggml_backend_dev_count() > 0 ? 1 : -1;
    if (done < 0) fprintf(stderr, "llama_ref: no backend loaded from %s\n", VT_LLAMA_BINS);
    return done > 0;
}

llama_ref *llama_ref_open(const char *path, int32_t n_ctx, int32_t n_threads) {
    return llama_ref_open_rope(path, n_ctx, n_threads, NULL);
}

llama_ref *llama_ref_open_rope(const char *path, int32_t n_ctx, int32_t n_threads, const vt_rope_params *rope) {
    if (!llama_ref_init()) return NULL;
    llama_ref *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    /* VT_LLAMA_REPACK=off: no CPU_REPACK buffers (ggml's interleaved Q4_0/Q4_K/IQ4_NL/Q8_0
     * GEMMs), the plain vec_dot kernels instead; default on, llama.cpp's own default */
    const char *rp = getenv("VT_LLAMA_REPACK");
    if (rp && !strcmp(rp, "off")) mp.use_extra_bufts = false;
    r->model = llama_model_load_from_file(path, mp);
    if (!r->model) {
        fprintf(stderr, "llama_ref: %s: llama.cpp could not load the model\n", path);
        goto fail;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_ctx;
    cp.n_ubatch = (uint32_t)(n_ctx < 512 ? n_ctx : 512);
    cp.n_seq_max = 1;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.no_perf = true;
    cp.cb_eval = router_probe;
    cp.cb_eval_user_data = r;
    /* VT_LLAMA_FLASH_ATTN=on|off|auto (default auto, llama.cpp's own default) */
    const char *fa = getenv("VT_LLAMA_FLASH_ATTN");
    if (fa && !strcmp(fa, "on")) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    if (fa && !strcmp(fa, "off")) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_cparams_rope(&cp, rope);
    r->ctx = llama_init_from_model(r->model, cp);
    if (!r->ctx) {
        fprintf(stderr, "llama_ref: %s: llama.cpp could not create a context\n", path);
        goto fail;
    }
    r->vocab = llama_model_get_vocab(r->model);
    r->n_vocab = llama_vocab_n_tokens(r->vocab);
    r->n_ctx = (int32_t)llama_n_ctx(r->ctx);
    return r;
fail:
    llama_ref_close(r);
    return NULL;
}

void llama_ref_close(llama_ref *r) {
    if (!r) return;
    if (r->ctx) llama_free(r->ctx);
    if (r->model) llama_model_free(r->model);
    free(r);
}

int32_t llama_ref_n_vocab(const llama_ref *r) { return r->n_vocab; }

void llama_ref_watch_router(llama_ref *r, int32_t k, bool logits, float *margins, int32_t n) {
    r->watch_k = k;
    r->watch_logits = logits;
    r->watch_n = n;
    r->watch_margin = margins;
    for (int32_t i = 0; margins && i < n; i++) margins[i] = INFINITY;
}

struct llama_model *llama_ref_model(const llama_ref *r) { return r->model; }

int32_t llama_ref_bos(const llama_ref *r) {
    llama_token t = llama_vocab_bos(r->vocab);
    return t == LLAMA_TOKEN_NULL ? -1 : t;
}

/* Decode tokens[0..n) at positions pos0.. on sequence 0; logits for the
 * positions where want_all, else only for the last. */
static bool decode(llama_ref *r, const int32_t *tokens, int32_t n, int32_t pos0, bool want_all) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int32_t i = 0; i < n; i++) {
        b.token[i] = tokens[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = (int8_t)(want_all || i == n - 1);
    }
    b.n_tokens = n;
    int32_t rc = llama_decode(r->ctx, b);
    llama_batch_free(b);
    if (rc != 0) {
        fprintf(stderr, "llama_ref: llama_decode of %d tokens at %d returned %d\n", n, pos0, rc);
        return false;
    }
    return true;
}

bool llama_ref_eval(llama_ref *r, const int32_t *tokens, int32_t n, float *logits) {
    if (n <= 0 || n > r->n_ctx) {
        fprintf(stderr, "llama_ref: %d tokens do not fit a context of %d\n", n, r->n_ctx);
        return false;
    }
    llama_memory_clear(llama_get_memory(r->ctx), true);
    if (!decode(r, tokens, n, 0, true)) return false;
    for (int32_t i = 0; i < n; i++) {
        const float *l = llama_get_logits_ith(r->ctx, i);
        if (!l) return false;
        memcpy(logits + (size_t)i * (size_t)r->n_vocab, l, (size_t)r->n_vocab * sizeof(float));
    }
    return true;
}

bool llama_ref_eval_steps(llama_ref *r, const int32_t *tokens, int32_t n, float *logits) {
    if (n <= 0 || n > r->n_ctx) {
        fprintf(stderr, "llama_ref: %d tokens do not fit a context of %d\n", n, r->n_ctx);
        return false;
    }
    llama_memory_clear(llama_get_memory(r->ctx), true);
    for (int32_t i = 0; i < n; i++) {
        if (!decode(r, &tokens[i], 1, i, true)) return false;
        const float *l = llama_get_logits_ith(r->ctx, 0);
        if (!l) return false;
        memcpy(logits + (size_t)i * (size_t)r->n_vocab, l, (size_t)r->n_vocab * sizeof(float));
    }
    return true;
}

int32_t llama_ref_argmax(const float *x, int32_t n, float *gap) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    float second = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (i != best && x[i] > second) second = x[i];
    if (gap) *gap = n > 1 ? x[best] - second : INFINITY;
    return best;
}

bool llama_ref_greedy(llama_ref *r, const int32_t *prompt, int32_t n_prompt, int32_t n_gen,
                      int32_t *out) {
    if (n_prompt <= 0 || n_prompt + n_gen > r->n_ctx) {
        fprintf(stderr, "llama_ref: %d + %d tokens do not fit a context of %d\n", n_prompt,
                n_gen, r->n_ctx);
        return false;
    }
    llama_memory_clear(llama_get_memory(r->ctx), true);
    if (!decode(r, prompt, n_prompt, 0, false)) return false;
    for (int32_t i = 0; i < n_gen; i++) {
        const float *l = llama_get_logits_ith(r->ctx, -1);
        if (!l) return false;
        out[i] = llama_ref_argmax(l, r->n_vocab, NULL);
        if (i + 1 < n_gen && !decode(r, &out[i], 1, n_prompt + i, false)) return false;
    }
    return true;
}

/* ---- quantization types ------------------------------------------------------- */

static struct { const char *name; enum llama_ftype id; } ftypes[] = {
    {"F32", LLAMA_FTYPE_ALL_F32},        {"F16", LLAMA_FTYPE_MOSTLY_F16},
    {"BF16", LLAMA_FTYPE_MOSTLY_BF16},   {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},
    {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},   {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},
    {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},   {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},   {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S},
    {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M}, {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L},
    {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S}, {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M},
    {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},   {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL},
    {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS}, {"MXFP4_MOE", LLAMA_FTYPE_MOSTLY_MXFP4_MOE},
};

bool llama_ref_ftype(const char *name, enum llama_ftype *out) {
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++) {
        if (!strcasecmp(ftypes[i].name, name)) return *out = ftypes[i].id, true;
    }
    return false;
}

void llama_ref_print_ftypes(FILE *f) {
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        fprintf(f, "%s%s", i ? " " : "", ftypes[i].name);
}

void llama_ref_gguf_free(struct gguf_context *g) {
    static void (*fn)(struct gguf_context *);
    if (!fn) {
        void *h = dlopen("libggml-base.so", RTLD_NOW | RTLD_NOLOAD);
        fn = (void (*)(struct gguf_context *))(h ? dlsym(h, "gguf_free") : NULL);
        if (h) dlclose(h);
    }
    if (fn) fn(g);
}
