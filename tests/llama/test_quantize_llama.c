/* vt quantize against llama.cpp's llama_model_quantize: for the same input and
 * file type, every tensor gets the same type and byte-identical data, the files
 * list the tensors in the same order with the same general.file_type, and the vt
 * output loads in llama.cpp.
 *
 * Inputs: stories260K.gguf (F32, rows of 64 and 172: the K types fall back),
 * TinyStories-656K-Q8_0.gguf (already quantized, tied embeddings: requantized),
 * llama-2-tiny-random.gguf (F16, rows of 8: everything falls back to F16), and two
 * synthetic llama models written here with rows of 256 (8 layers, GQA 4; one with
 * output.weight, one tied), which exercise the Q4_K_M/Q5_K_M layer mixes, and
 * two synthetic qwen3moe models (2 layers of 4 and of 8 experts, rows of 256):
 * the 3-D expert tensors, the F32 router, MXFP4_MOE and the 8-expert rules;
 * a synthetic gpt-oss (its biases, sinks and MXFP4_MOE's MXFP4 experts); a synthetic
 * qwen35moe with an MTP layer (the hybrid's linear layers, the shared expert).
 *
 * vt's gguf.h and ggml's gguf.h share names, so this file uses only ggml's
 * (files are read and written with it) and runs vt as the real binary (VT_BIN). */
#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h" /* ggml's GGUF API: an independent reader of vt's output */
#include "llama.h"
#include "llama_ref.h"
#include "model/synth.h"
#include "test.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_dir[256];

/* ---- the synthetic model ------------------------------------------------------------------ */

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float rnd_normal(void) {
    uint64_t a = (rng += 0x9E3779B97F4A7C15ull), b = (rng += 0x9E3779B97F4A7C15ull);
    a = (a ^ (a >> 30)) * 0xBF58476D1CE4E5B9ull, a ^= a >> 31;
    b = (b ^ (b >> 30)) * 0xBF58476D1CE4E5B9ull, b ^= b >> 31;
    double u = ((a >> 11) + 1.0) / 9007199254740993.0, v = (b >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

enum { SYN_EMBD = 256, SYN_FF = 256, SYN_LAYERS = 8, SYN_HEADS = 4, SYN_KV_HEADS = 1 };

/* Write a llama model with random weights and the tokenizer (and other keys)
 * of tok_src, with ggml's GGUF writer. */
static bool write_synthetic(const char *path, const struct gguf_context *tok_src, bool tied) {
    const int64_t kid = gguf_find_key(tok_src, "tokenizer.ggml.tokens");
    if (kid < 0) return false;
    const int64_t n_vocab = (int64_t)gguf_get_arr_n(tok_src, kid);
    const int64_t kv_dim = SYN_EMBD / SYN_HEADS * SYN_KV_HEADS;
    const int64_t per_layer = 2 * SYN_EMBD * SYN_EMBD + 2 * SYN_EMBD * kv_dim + 3 * SYN_EMBD * SYN_FF + 2 * SYN_EMBD;
    const int64_t n_floats = 2 * SYN_EMBD * n_vocab + SYN_EMBD + SYN_LAYERS * per_layer;
    struct ggml_init_params ip = {.mem_size = (size_t)n_floats * 4 + 512 * ggml_tensor_overhead(),
                                  .mem_buffer = NULL, .no_alloc = false};
    struct ggml_context *ctx = ggml_init(ip);
    struct gguf_context *g = gguf_init_empty();
    gguf_set_kv(g, tok_src);
    gguf_set_val_str(g, "general.architecture", "llama");
    gguf_set_val_str(g, "general.name", tied ? "vt-synthetic-tied" : "vt-synthetic");
    gguf_set_val_u32(g, "llama.block_count", SYN_LAYERS);
    gguf_set_val_u32(g, "llama.context_length", 256);
    gguf_set_val_u32(g, "llama.embedding_length", SYN_EMBD);
    gguf_set_val_u32(g, "llama.feed_forward_length", SYN_FF);
    gguf_set_val_u32(g, "llama.attention.head_count", SYN_HEADS);
    gguf_set_val_u32(g, "llama.attention.head_count_kv", SYN_KV_HEADS);
    gguf_set_val_u32(g, "llama.rope.dimension_count", SYN_EMBD / SYN_HEADS);
    gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_val_u32(g, "general.file_type", 0);

    int n_added = 0;
    char name[96];
#define ADD(d0, d1)                                                                              \
    {                                                                                            \
        struct ggml_tensor *t_ = (d1) == 1 ? ggml_new_tensor_1d(ctx, GGML_TYPE_F32, (d0))        \
                                           : ggml_new_tensor_2d(ctx, GGML_TYPE_F32, (d0), (d1)); \
        ggml_set_name(t_, name);                                                                 \
        float *x_ = t_->data;                                                                    \
        const float scale_ = (d1) == 1 ? 0.1f : 0.02f * (1.0f + (float)(n_added % 5));          \
        for (int64_t i_ = 0; i_ < (int64_t)(d0) * (d1); i_++)                                    \
            x_[i_] = ((d1) == 1 ? 1.0f : 0.0f) + scale_ * rnd_normal();                          \
        gguf_add_tensor(g, t_);                                                                  \
        n_added++;                                                                               \
    }
    snprintf(name, sizeof name, "token_embd.weight");
    ADD(SYN_EMBD, n_vocab);
    snprintf(name, sizeof name, "output_norm.weight");
    ADD(SYN_EMBD, 1);
    if (!tied) {
        snprintf(name, sizeof name, "output.weight");
        ADD(SYN_EMBD, n_vocab);
    }
    for (int l = 0; l < SYN_LAYERS; l++) {
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        ADD(SYN_EMBD, 1);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        ADD(SYN_EMBD, SYN_EMBD);
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", l);
        ADD(SYN_EMBD, kv_dim);
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        ADD(SYN_EMBD, kv_dim);
        snprintf(name, sizeof name, "blk.%d.attn_output.weight", l);
        ADD(SYN_EMBD, SYN_EMBD);
        snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
        ADD(SYN_EMBD, 1);
        snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", l);
        ADD(SYN_EMBD, SYN_FF);
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", l);
        ADD(SYN_EMBD, SYN_FF);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        ADD(SYN_FF, SYN_EMBD);
    }
#undef ADD
    const bool ok = gguf_write_to_file(g, path, false);
    llama_ref_gguf_free(g);
    ggml_free(ctx);
    return ok;
}

/* A qwen3moe-shaped model: MOE_LAYERS layers of n_expert experts (ffn_*_exps,
 * ne = [n_in, n_out, n_expert]), an F32 router (ffn_gate_inp) and QK norms,
 * with the tokenizer of tok_src. n_expert 8 takes llama.cpp's 8-expert rules
 * (attn_v / attn_k Q8_0, attn_output Q5_K). */
enum { MOE_EMBD = 256, MOE_FF = 256, MOE_LAYERS = 2, MOE_HEADS = 4, MOE_KV_HEADS = 1, MOE_HEAD_DIM = 64 };

static bool write_synthetic_moe(const char *path, const struct gguf_context *tok_src, int n_expert) {
    const int64_t kid = gguf_find_key(tok_src, "tokenizer.ggml.tokens");
    if (kid < 0) return false;
    const int64_t n_vocab = (int64_t)gguf_get_arr_n(tok_src, kid);
    const int64_t q_dim = MOE_HEADS * MOE_HEAD_DIM, kv_dim = MOE_KV_HEADS * MOE_HEAD_DIM;
    const int64_t per_layer = 2 * MOE_EMBD * q_dim + 2 * MOE_EMBD * kv_dim + 3 * MOE_EMBD * MOE_FF * n_expert +
                              MOE_EMBD * n_expert + 2 * MOE_EMBD + 2 * MOE_HEAD_DIM;
    const int64_t n_floats = 2 * MOE_EMBD * n_vocab + MOE_EMBD + MOE_LAYERS * per_layer;
    struct ggml_init_params ip = {.mem_size = (size_t)n_floats * 4 + 512 * ggml_tensor_overhead(),
                                  .mem_buffer = NULL, .no_alloc = false};
    struct ggml_context *ctx = ggml_init(ip);
    struct gguf_context *g = gguf_init_empty();
    gguf_set_kv(g, tok_src);
    gguf_set_val_str(g, "general.architecture", "qwen3moe");
    gguf_set_val_str(g, "general.name", "vt-synthetic-moe");
    gguf_set_val_u32(g, "qwen3moe.block_count", MOE_LAYERS);
    gguf_set_val_u32(g, "qwen3moe.context_length", 256);
    gguf_set_val_u32(g, "qwen3moe.embedding_length", MOE_EMBD);
    gguf_set_val_u32(g, "qwen3moe.feed_forward_length", MOE_FF);
    gguf_set_val_u32(g, "qwen3moe.expert_feed_forward_length", MOE_FF);
    gguf_set_val_u32(g, "qwen3moe.expert_count", (uint32_t)n_expert);
    gguf_set_val_u32(g, "qwen3moe.expert_used_count", 2);
    gguf_set_val_u32(g, "qwen3moe.attention.head_count", MOE_HEADS);
    gguf_set_val_u32(g, "qwen3moe.attention.head_count_kv", MOE_KV_HEADS);
    gguf_set_val_u32(g, "qwen3moe.attention.key_length", MOE_HEAD_DIM);
    gguf_set_val_u32(g, "qwen3moe.attention.value_length", MOE_HEAD_DIM);
    gguf_set_val_f32(g, "qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
    gguf_set_val_f32(g, "qwen3moe.rope.freq_base", 10000.0f);
    gguf_set_val_u32(g, "general.file_type", 0);

    char name[96];
    int n_added = 0;
#define ADD(d0, d1, d2)                                                                          \
    {                                                                                            \
        struct ggml_tensor *t_ = (d1) == 1   ? ggml_new_tensor_1d(ctx, GGML_TYPE_F32, (d0))      \
                                 : (d2) == 1 ? ggml_new_tensor_2d(ctx, GGML_TYPE_F32, (d0), (d1)) \
                                             : ggml_new_tensor_3d(ctx, GGML_TYPE_F32, (d0), (d1), (d2)); \
        ggml_set_name(t_, name);                                                                 \
        float *x_ = t_->data;                                                                    \
        const float scale_ = (d1) == 1 ? 0.1f : 0.02f * (1.0f + (float)(n_added % 5));          \
        for (int64_t i_ = 0; i_ < (int64_t)(d0) * (d1) * (d2); i_++)                             \
            x_[i_] = ((d1) == 1 ? 1.0f : 0.0f) + scale_ * rnd_normal();                          \
        gguf_add_tensor(g, t_);                                                                  \
        n_added++;                                                                               \
    }
    snprintf(name, sizeof name, "token_embd.weight");
    ADD(MOE_EMBD, n_vocab, 1);
    snprintf(name, sizeof name, "output_norm.weight");
    ADD(MOE_EMBD, 1, 1);
    snprintf(name, sizeof name, "output.weight");
    ADD(MOE_EMBD, n_vocab, 1);
    for (int l = 0; l < MOE_LAYERS; l++) {
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        ADD(MOE_EMBD, 1, 1);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        ADD(MOE_EMBD, q_dim, 1);
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", l);
        ADD(MOE_EMBD, kv_dim, 1);
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        ADD(MOE_EMBD, kv_dim, 1);
        snprintf(name, sizeof name, "blk.%d.attn_output.weight", l);
        ADD(q_dim, MOE_EMBD, 1);
        snprintf(name, sizeof name, "blk.%d.attn_q_norm.weight", l);
        ADD(MOE_HEAD_DIM, 1, 1);
        snprintf(name, sizeof name, "blk.%d.attn_k_norm.weight", l);
        ADD(MOE_HEAD_DIM, 1, 1);
        snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
        ADD(MOE_EMBD, 1, 1);
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", l);
        ADD(MOE_EMBD, n_expert, 1);
        snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", l);
        ADD(MOE_EMBD, MOE_FF, n_expert);
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", l);
        ADD(MOE_EMBD, MOE_FF, n_expert);
        snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", l);
        ADD(MOE_FF, MOE_EMBD, n_expert);
    }
#undef ADD
    const bool ok = gguf_write_to_file(g, path, false);
    llama_ref_gguf_free(g);
    ggml_free(ctx);
    return ok;
}

/* ---- running both quantizers ---------------------------------------------------------------- */

static bool vt_quantize(const char *in, const char *out, const char *type, bool requant) {
    const char *bin = getenv("VT_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "VT_BIN (the vt binary) is not set or not executable\n");
        return false;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' quantize -q -t 2 %s '%s' '%s' %s", bin,
             requant ? "--allow-requantize" : "", in, out, type);
    return system(cmd) == 0;
}

static bool llama_quantize(const char *in, const char *out, enum llama_ftype ftype, bool requant) {
    llama_model_quantize_params p = llama_model_quantize_default_params();
    p.nthread = 2;
    p.ftype = ftype;
    p.allow_requantize = requant;
    return llama_model_quantize(in, out, &p) == 0;
}

/* A GGUF read with ggml's parser, and the whole file in memory. */
typedef struct parsed {
    struct gguf_context *g;
    uint8_t *bytes;
    size_t size;
} parsed;

static bool parse(const char *path, parsed *p) {
    memset(p, 0, sizeof *p);
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    p->g = gguf_init_from_file(path, gp);
    if (!p->g) return false;
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    p->size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    p->bytes = malloc(p->size);
    const bool ok = p->bytes && fread(p->bytes, 1, p->size, f) == p->size;
    fclose(f);
    return ok;
}
static void unparse(parsed *p) {
    if (p->g) llama_ref_gguf_free(p->g);
    free(p->bytes);
}
static const uint8_t *tensor_data(const parsed *p, int64_t i) {
    return p->bytes + gguf_get_data_offset(p->g) + gguf_get_tensor_offset(p->g, i);
}

/* Quantize `in` with both tools to `type` and compare the results. */
static void compare_one(const char *label, const char *in, const char *type, bool requant, bool load) {
    enum llama_ftype ftype = LLAMA_FTYPE_ALL_F32;
    if (!llama_ref_ftype(type, &ftype)) {
        CHECK_MSG(0, "unknown type %s", type);
        return;
    }
    char out_vt[512], out_ll[512];
    snprintf(out_vt, sizeof out_vt, "%s/%s-%s-vt.gguf", tmp_dir, label, type);
    snprintf(out_ll, sizeof out_ll, "%s/%s-%s-llama.gguf", tmp_dir, label, type);
    const bool vt_ok = vt_quantize(in, out_vt, type, requant);
    const bool ll_ok = llama_quantize(in, out_ll, ftype, requant);
    CHECK_MSG(vt_ok, "%s %s: vt quantize failed", label, type);
    CHECK_MSG(ll_ok, "%s %s: llama_model_quantize failed", label, type);
    if (!vt_ok || !ll_ok) return;

    parsed a, b;
    const bool pa = parse(out_vt, &a), pb = parse(out_ll, &b);
    CHECK_MSG(pa, "%s %s: ggml cannot read vt's output", label, type);
    CHECK(pb);
    if (pa && pb) {
        const int64_t na = gguf_get_n_tensors(a.g), nb = gguf_get_n_tensors(b.g);
        CHECK_EQ_INT(na, nb);
        const int64_t n = na < nb ? na : nb;
        int64_t same_type = 0, same_bytes = 0;
        int hist[GGML_TYPE_COUNT] = {0};
        for (int64_t i = 0; i < n; i++) {
            const char *xn = gguf_get_tensor_name(a.g, i), *yn = gguf_get_tensor_name(b.g, i);
            CHECK_MSG(!strcmp(xn, yn), "%s %s: tensor %lld: '%s' vs llama '%s'", label, type,
                      (long long)i, xn, yn);
            const enum ggml_type xt = gguf_get_tensor_type(a.g, i), yt = gguf_get_tensor_type(b.g, i);
            CHECK_MSG(!memcmp(gguf_get_tensor_ne(a.g, i), gguf_get_tensor_ne(b.g, i), 4 * sizeof(int64_t)),
                      "%s %s: '%s' shape differs", label, type, xn);
            if (xt == yt) {
                same_type++;
            } else {
                fprintf(stderr, "  %s %s: '%s' vt %s, llama %s\n", label, type, xn, ggml_type_name(xt),
                        ggml_type_name(yt));
            }
            const size_t sa = gguf_get_tensor_size(a.g, i), sb = gguf_get_tensor_size(b.g, i);
            if (xt == yt && sa == sb && !memcmp(tensor_data(&a, i), tensor_data(&b, i), sa)) same_bytes++;
            hist[xt]++;
        }
        CHECK_MSG(same_type == n, "%s %s: %lld of %lld tensor types differ", label, type,
                  (long long)(n - same_type), (long long)n);
        CHECK_MSG(same_bytes == n, "%s %s: %lld of %lld tensors' data differ", label, type,
                  (long long)(n - same_bytes), (long long)n);
        const int64_t ka = gguf_find_key(a.g, "general.file_type"), kb = gguf_find_key(b.g, "general.file_type");
        CHECK(ka >= 0 && kb >= 0);
        if (ka >= 0 && kb >= 0) {
            CHECK(gguf_get_kv_type(a.g, ka) == GGUF_TYPE_UINT32);
            CHECK_EQ_INT(gguf_get_val_u32(a.g, ka), gguf_get_val_u32(b.g, kb));
        }
        char types[256] = "";
        for (int t = 0; t < GGML_TYPE_COUNT; t++) {
            if (!hist[t]) continue;
            char part[32];
            snprintf(part, sizeof part, " %s:%d", ggml_type_name((enum ggml_type)t), hist[t]);
            strncat(types, part, sizeof types - strlen(types) - 1);
        }
        printf("%-10s %-7s %3lld tensors, %3lld same type, %3lld identical bytes |%s\n", label, type,
               (long long)n, (long long)same_type, (long long)same_bytes, types);
    }
    unparse(&a);
    unparse(&b);

    if (load) {
        struct llama_model_params mp = llama_model_default_params();
        mp.n_gpu_layers = 0;
        struct llama_model *m = llama_model_load_from_file(out_vt, mp);
        CHECK_MSG(m != NULL, "%s %s: llama.cpp cannot load vt's output", label, type);
        if (m) llama_model_free(m);
    }
    unlink(out_vt);
    unlink(out_ll);
}

/* llama_model_quantize warns about every fallback; keep only errors. */
static void errors_only(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(void) {
    if (!getenv("VT_LLAMA_VERBOSE")) llama_log_set(errors_only, NULL);
    ggml_backend_load_all_from_path(VT_LLAMA_BINS);
    llama_backend_init();
    if (ggml_backend_dev_count() == 0) {
        CHECK(!"no llama.cpp backend loaded from " VT_LLAMA_BINS);
        return test_finish();
    }
    const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmp_dir, sizeof tmp_dir, "%s/vt-quantize-XXXXXX", base);
    if (!mkdtemp(tmp_dir)) {
        CHECK(!"mkdtemp");
        return test_finish();
    }

    static const char *all_types[] = {"F32",    "F16",    "BF16",   "Q4_0",   "Q4_1",   "Q5_0",  "Q5_1",
                                      "Q8_0",   "Q2_K",   "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
                                      "Q5_K_S", "Q5_K_M", "Q6_K",   "IQ4_NL", "IQ4_XS"};
    const int n_all = (int)(sizeof all_types / sizeof all_types[0]);

    char stories[4096] = "";
    const char *p = test_model_path("stories260K.gguf");
    if (p) {
        snprintf(stories, sizeof stories, "%s", p);
        for (int i = 0; i < n_all; i++) compare_one("stories", stories, all_types[i], false, i % 4 == 0);
    }
    p = test_model_path("TinyStories-656K-Q8_0.gguf");
    if (p) {
        char path[4096];
        snprintf(path, sizeof path, "%s", p);
        static const char *const t[] = {"Q4_0", "Q4_K_M", "Q6_K", "IQ4_XS", "F16"};
        for (int i = 0; i < 5; i++) compare_one("ts656k-q8", path, t[i], true, i == 1);
    }
    p = test_model_path("llama-2-tiny-random.gguf");
    if (p) {
        char path[4096];
        snprintf(path, sizeof path, "%s", p);
        compare_one("tiny-rand", path, "Q4_K_M", false, false);
        compare_one("tiny-rand", path, "Q8_0", false, false);
    }

    if (stories[0]) {
        parsed tok;
        if (parse(stories, &tok)) {
            /* the synthetic models take stories260K's metadata (tokenizer) */
            static const char *const t[] = {"Q4_0", "Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q3_K_M",
                                            "Q4_K_S", "Q5_K_S", "Q2_K", "Q3_K_L", "IQ4_XS", "BF16"};
            const int nt = (int)(sizeof t / sizeof t[0]);
            for (int tied = 0; tied < 2; tied++) {
                char path[512];
                snprintf(path, sizeof path, "%s/synthetic%s.gguf", tmp_dir, tied ? "-tied" : "");
                CHECK(write_synthetic(path, tok.g, tied));
                for (int i = 0; i < (tied ? 4 : nt); i++) {
                    compare_one(tied ? "syn-tied" : "synthetic", path, t[i], false, i < 3);
                }
                unlink(path);
            }
            /* mixture of experts: 3-D expert tensors, the router kept F32 */
            static const char *const tm[] = {"MXFP4_MOE", "Q4_K_M", "Q4_0", "Q8_0", "Q2_K", "Q3_K_M"};
            for (int e = 0; e < 2; e++) {
                const int n_expert = e ? 8 : 4;
                char path[512], label[32];
                snprintf(path, sizeof path, "%s/synthetic-moe%d.gguf", tmp_dir, n_expert);
                snprintf(label, sizeof label, "moe-%dx", n_expert);
                CHECK(write_synthetic_moe(path, tok.g, n_expert));
                for (int i = 0; i < (int)(sizeof tm / sizeof tm[0]); i++)
                    compare_one(label, path, tm[i], false, e == 0 && i < 2);
                unlink(path);
            }
            unparse(&tok);
        }
    }
    {
        /* mixture of experts: a qwen3moe F16 file from vt synth (3-D expert tensors,
         * the F32 router that llama.cpp's quantizer leaves alone, down_exps that
         * Q4_K_M raises to q6_K in some layers) */
        char path[512];
        snprintf(path, sizeof path, "%s/qwen3moe-f16.gguf", tmp_dir);
        synth_params sp = synth_default_params();
        sp.arch = "qwen3moe";
        sp.type = VT_DTYPE_F16;
        sp.n_layer = 4;
        sp.head_dim = 64;
        sp.n_expert = 8;
        sp.n_expert_used = 2;
        sp.n_ff_exp = 256;
        sp.n_threads = 2;
        vt_status st = synth_write(&sp, path);
        CHECK_MSG(st == VT_OK, "synth qwen3moe: %s", vt_last_error());
        static const char *const t[] = {"Q4_K_M", "Q4_0", "Q8_0", "Q5_K_M"};
        for (int i = 0; st == VT_OK && i < 4; i++) compare_one("qwen3moe", path, t[i], false, i == 0);
        unlink(path);
    }
    {
        /* gpt-oss from vt synth, F16: its 1-D and 2-D biases, sinks and router
         * bias (F32, kept), MXFP4_MOE's MXFP4 experts */
        char path[512];
        snprintf(path, sizeof path, "%s/gpt-oss-f16.gguf", tmp_dir);
        synth_params sp = synth_default_params();
        sp.arch = "gpt-oss";
        sp.type = VT_DTYPE_F16;
        sp.n_layer = 2;
        sp.head_dim = 64;
        sp.n_expert = 8;
        sp.n_expert_used = 2;
        sp.n_ff_exp = 256;
        sp.n_swa = 16;
        sp.n_threads = 2;
        vt_status st = synth_write(&sp, path);
        CHECK_MSG(st == VT_OK, "synth gpt-oss: %s", vt_last_error());
        static const char *const t[] = {"MXFP4_MOE", "Q8_0", "Q4_K_M"};
        for (int i = 0; st == VT_OK && i < 3; i++) compare_one("gpt-oss", path, t[i], false, i == 0);
        unlink(path);
    }
    {
        /* qwen35moe from vt synth, F16, with one MTP layer: the linear layers' tensors
         * (attn_qkv, attn_gate, ssm_*; ssm_conv1d kept F32), the shared expert and its
         * [n_embd, 1] F32 gate (one dimension to ggml: kept), the nextn tensors */
        char path[512];
        snprintf(path, sizeof path, "%s/qwen35moe-f16.gguf", tmp_dir);
        synth_params sp = synth_default_params();
        sp.arch = "qwen35moe";
        sp.type = VT_DTYPE_F16;
        sp.n_layer = 4;
        sp.head_dim = 64;
        sp.n_ff = 256;
        sp.n_expert = 8;
        sp.n_expert_used = 2;
        sp.n_ff_exp = 256;
        sp.n_nextn = 1;
        sp.n_threads = 2;
        vt_status st = synth_write(&sp, path);
        CHECK_MSG(st == VT_OK, "synth qwen35moe: %s", vt_last_error());
        static const char *const t[] = {"Q4_K_M", "Q4_0"};
        for (int i = 0; st == VT_OK && i < 2; i++) compare_one("qwen35moe", path, t[i], false, i == 0);
        unlink(path);
    }
    rmdir(tmp_dir);
    return test_finish();
}
