/* vt_model_load on files whose GGUF is well formed but whose model is not:
 * absurd hyperparameters (zero or 2^40 sizes, head counts that do not divide,
 * an odd rope dimension, a huge context, NaN epsilon, rope scaling factors out
 * of range: negative, infinite or NaN, an original context of 0, llama 3's
 * rope_freqs of zeros), tensors of the wrong shape or type, a tokenizer larger
 * than the embedding table. Each variant is
 * stories260K rewritten through the gguf writer with one or two edits; each
 * must be refused with a message that names the key or tensor (and the path),
 * without a crash and without a huge allocation (peak RSS is bounded at the
 * end, and ASan aborts on any allocation past its limit).
 *
 * The unedited rewrite must load: a case can only fail for its own edit.
 *
 * Mixture of experts: the same on small synthetic qwen3moe and Mixtral-style
 * llama files (src/model/synth.c): expert counts of 0, more used experts
 * than experts, expert tensors of the wrong shape or missing, and expert
 * tensors in a file that declares no experts (refused as mixture-of-experts,
 * never as a missing ffn_gate). qwen35moe (the hybrid with a shared expert): the
 * same expert counts, a state size of 0, a conv kernel longer than the context, a
 * layer pattern that names a layer without its kind's tensors (either way), the
 * shared expert's tensors missing or misshapen, MTP layer counts (all layers; a file
 * of the MTP layer alone).
 *
 * Gemma: the same on small synthetic gemma2 and gemma3 files: windows of 0 or
 * past the context, a window pattern longer than the layer count, soft-caps of
 * 0 or NaN, a sliding layers' rope base of 0, missing or misshapen post-norms
 * and QK-norms; the same for olmo2 (OLMo 3's windows, whole-row QK-norms, its
 * own head); granite's multipliers (missing, 0, NaN, negative) and biases;
 * phi3's LongRoPE factors (wrong length, zeros, one missing), attention factor,
 * rope scaling and fused attn_qkv / ffn_up; glm4's post-norms, fused ffn_up,
 * biases, rope dimension; mistral3's YaRN betas, log multiplier and temperature;
 * muse-glimmer's window (missing, 0, past the context), pattern, soft-cap (0,
 * NaN), logit scale, rope base of the sliding layers, YaRN's factor, gate,
 * norms, head. Per-layer sliding_window_pattern arrays: bool, i32 and u32
 * elements only (llama.cpp's get_arr), one per layer; where llama.cpp ignores
 * the array (gemma2, gemma3, olmo2, gpt-oss) only its default period's layers;
 * muse-glimmer's read layer by layer, whatever they are. */
#include "base/mapfile.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "quant/quant.h"
#include "test.h"
#include "vt.h"

#include <math.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

typedef enum { K_NONE, K_U32, K_U64, K_I32, K_F32, K_STR, K_BOOLS, K_ARR, K_DROP } kedit_kind;

typedef struct kedit {
    kedit_kind kind;
    const char *key;
    uint64_t u; /* K_U32, K_U64, K_I32 (as int32); K_ARR: the element type (gguf_type) */
    float f;    /* K_F32 */
    const char *s; /* K_STR; K_BOOLS: an array of bools, one per '0' or '1'; K_ARR: one
                      element per digit, of that value */
} kedit;

/* Replace (or with n_dims 0, drop) tensor `name`, or add it when the file has none:
 * zero data of the given shape. */
typedef struct tedit {
    const char *name;
    vt_dtype type;
    uint32_t n_dims;
    int64_t ne[3];
} tedit;

typedef struct bad_case {
    const char *what;
    kedit k[2];
    tedit t[2];
    const char *expect; /* a substring of the error message */
} bad_case;

static uint8_t zeros[1 << 20];

static bool tensor_edit(const bad_case *c, const char *name, const tedit **out) {
    for (int i = 0; i < 2; i++) {
        if (c->t[i].name && !strcmp(c->t[i].name, name)) {
            *out = &c->t[i];
            return true;
        }
    }
    return false;
}

static bool key_edited(const bad_case *c, gguf_str key) {
    for (int i = 0; i < 2; i++)
        if (c->k[i].kind != K_NONE && gguf_str_eq(key, c->k[i].key)) return true;
    return false;
}

static void add_zero_tensor(gguf_writer *w, const tedit *e) {
    if (e->n_dims == 0) return; /* dropped */
    size_t row = 0;
    CHECK(quant_row_bytes(e->type, e->ne[0], &row));
    const size_t bytes = row * (size_t)(e->n_dims > 1 ? e->ne[1] : 1) * (size_t)(e->n_dims > 2 ? e->ne[2] : 1);
    CHECK(bytes <= sizeof zeros);
    CHECK_OK(gguf_writer_add_tensor(w, e->name, e->type, e->n_dims, e->ne, zeros, bytes));
}

/* Write src with c's edits to path. */
static void write_variant(const gguf_file *src, const bad_case *c, const char *path) {
    gguf_writer *w;
    CHECK_OK(gguf_writer_create(&w));
    for (int64_t i = 0; i < src->n_kv; i++) {
        if (!key_edited(c, src->kv[i].key)) CHECK_OK(gguf_writer_copy_kv(w, &src->kv[i]));
    }
    for (int i = 0; i < 2; i++) {
        const kedit *k = &c->k[i];
        switch (k->kind) {
        case K_U32: CHECK_OK(gguf_writer_set_u32(w, k->key, (uint32_t)k->u)); break;
        case K_U64: CHECK_OK(gguf_writer_set_u64(w, k->key, k->u)); break;
        case K_I32: CHECK_OK(gguf_writer_set_i32(w, k->key, (int32_t)k->u)); break;
        case K_F32: CHECK_OK(gguf_writer_set_f32(w, k->key, k->f)); break;
        case K_STR: CHECK_OK(gguf_writer_set_str(w, k->key, k->s)); break;
        case K_BOOLS: {
            uint8_t b[64];
            const size_t n = strlen(k->s);
            CHECK(n <= sizeof b);
            for (size_t j = 0; j < n && j < sizeof b; j++) b[j] = k->s[j] == '1';
            CHECK_OK(gguf_writer_set_arr(w, k->key, GGUF_TYPE_BOOL, b, n));
            break;
        }
        case K_ARR: {
            const gguf_type et = (gguf_type)k->u;
            const size_t n = strlen(k->s), es = gguf_type_size(et);
            uint8_t b[64 * 8] = {0};
            CHECK(n <= 64 && es > 0 && es <= 8);
            for (size_t j = 0; j < n && j < 64 && es <= 8; j++) {
                const int d = k->s[j] - '0';
                const float fd = (float)d;
                const double dd = d;
                const uint64_t ud = (uint64_t)d; /* little-endian, as the writer stores it */
                memcpy(b + j * es, et == GGUF_TYPE_FLOAT32 ? (const void *)&fd
                                   : et == GGUF_TYPE_FLOAT64 ? (const void *)&dd
                                                             : (const void *)&ud, es);
            }
            CHECK_OK(gguf_writer_set_arr(w, k->key, et, b, n));
            break;
        }
        case K_NONE:
        case K_DROP: break;
        }
    }
    for (int64_t i = 0; i < src->n_tensors; i++) {
        const gguf_tensor *t = &src->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        const tedit *e;
        if (!tensor_edit(c, name, &e)) {
            CHECK_OK(gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->bytes));
        } else {
            add_zero_tensor(w, e);
        }
    }
    for (int i = 0; i < 2; i++) {
        if (c->t[i].name && !gguf_find_tensor(src, c->t[i].name)) add_zero_tensor(w, &c->t[i]);
    }
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_destroy(w);
}

static void check_case(const gguf_file *src, const bad_case *c) {
    char path[] = "/tmp/vt_model_bad_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    write_variant(src, c, path);
    vt_model *m = NULL;
    vt_status s = vt_model_load(path, NULL, &m);
    if (!c->expect) {
        CHECK_MSG(s == VT_OK && m, "%s: %s", c->what, vt_last_error());
    } else {
        CHECK_MSG(s != VT_OK && m == NULL, "%s: loaded", c->what);
        CHECK_MSG(strstr(vt_last_error(), c->expect) != NULL, "%s: '%s' not in '%s'", c->what, c->expect,
                  vt_last_error());
        CHECK_MSG(strstr(vt_last_error(), path) != NULL, "%s: path not in '%s'", c->what, vt_last_error());
    }
    vt_model_free(m);
    unlink(path);
}

#define KU32(k, v) {K_U32, "llama." k, (v), 0, NULL}
#define KU64(k, v) {K_U64, "llama." k, (v), 0, NULL}
#define KF32(k, v) {K_F32, "llama." k, 0, (v), NULL}
#define KDROP(k) {K_DROP, k, 0, 0, NULL}

#define Q32(k, v) {K_U32, "qwen3moe." k, (v), 0, NULL}
#define O32(k, v) {K_U32, "gpt-oss." k, (v), 0, NULL}
#define OARR(et, bits) {K_ARR, "gpt-oss.attention.sliding_window_pattern", (et), 0, (bits)}
#define OF32(k, v) {K_F32, "gpt-oss." k, 0, (v), NULL}
#define H32(k, v) {K_U32, "qwen35moe." k, (v), 0, NULL}

/* A small synthetic MoE file of arch (n_embd 64, 4 heads of 16, 2 KV heads, 2
 * layers, 4 experts of 32 rows, 2 used, F32) at path. */
static bool write_moe(const char *arch, const char *path) {
    synth_params sp = synth_default_params();
    sp.arch = arch;
    sp.n_embd = 64;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.n_ff = 32;
    sp.n_ff_exp = 32;
    sp.n_expert = 4;
    sp.n_expert_used = 2;
    sp.n_threads = 1;
    if (!strcmp(arch, "gpt-oss")) sp.n_swa = 4; /* required there */
    sp.full_attn_interval = 2; /* qwen35moe: layer 0 linear, layer 1 full attention */
    vt_status s = synth_write(&sp, path);
    CHECK_MSG(s == VT_OK, "synth %s: %s", arch, vt_last_error());
    return s == VT_OK;
}

static size_t check_moe_cases(const char *arch, const bad_case *cases, size_t n) {
    char path[] = "/tmp/vt_model_bad_moe_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    if (write_moe(arch, path)) {
        mapfile mf;
        gguf_file f;
        CHECK_OK(mapfile_open(path, &mf));
        CHECK_OK(gguf_parse(mf.data, mf.size, path, &f));
        for (size_t i = 0; i < n; i++) check_case(&f, &cases[i]);
        gguf_free(&f);
        mapfile_close(&mf);
    }
    unlink(path);
    return n;
}

static size_t check_moe(void) {
    const bad_case qwen[] = {
        {"qwen3moe unedited", {{0}}, {{0}}, NULL},
        {"expert_count 0", {Q32("expert_count", 0)}, {{0}}, "'qwen3moe.expert_count' = 0 is out of range"},
        {"expert_count missing", {KDROP("qwen3moe.expert_count")}, {{0}}, "required key 'qwen3moe.expert_count' is missing"},
        {"expert_count 2048", {Q32("expert_count", 2048)}, {{0}},
         "'qwen3moe.expert_count' = 2048: mixture-of-experts layers of more than 1024 experts are not supported"},
        {"expert_count 8 (tensors hold 4)", {Q32("expert_count", 8)}, {{0}},
         "tensor 'blk.0.ffn_gate_inp.weight' has shape [64, 4, 1], expected [64, 8]"},
        {"expert_used_count 5 > expert_count 4", {Q32("expert_used_count", 5)}, {{0}},
         "'qwen3moe.expert_used_count' = 5 is more than expert_count 4"},
        {"expert_used_count 0", {Q32("expert_used_count", 0)}, {{0}}, "'qwen3moe.expert_used_count' = 0 is out of range"},
        {"expert_used_count missing", {KDROP("qwen3moe.expert_used_count")}, {{0}},
         "required key 'qwen3moe.expert_used_count' is missing"},
        {"expert_feed_forward_length 48", {Q32("expert_feed_forward_length", 48)}, {{0}},
         "tensor 'blk.0.ffn_gate_exps.weight' has shape [64, 32, 4, 1], expected [64, 48, 4]"},
        {"no expert or dense ff length", {KDROP("qwen3moe.expert_feed_forward_length"), KDROP("qwen3moe.feed_forward_length")},
         {{0}}, "required key 'qwen3moe.expert_feed_forward_length' is missing"},
        {"ffn_gate_exps of 3 experts", {{0}}, {{"blk.1.ffn_gate_exps.weight", VT_DTYPE_F32, 3, {64, 32, 3}}},
         "tensor 'blk.1.ffn_gate_exps.weight' has shape [64, 32, 3, 1], expected [64, 32, 4]"},
        {"ffn_down_exps transposed", {{0}}, {{"blk.0.ffn_down_exps.weight", VT_DTYPE_F32, 3, {64, 32, 4}}},
         "tensor 'blk.0.ffn_down_exps.weight' has shape [64, 32, 4, 1], expected [32, 64, 4]"},
        {"ffn_up_exps 2-D", {{0}}, {{"blk.1.ffn_up_exps.weight", VT_DTYPE_F32, 2, {64, 128}}},
         "tensor 'blk.1.ffn_up_exps.weight' has shape [64, 128, 1, 1], expected [64, 32, 4]"},
        {"ffn_up_exps missing", {{0}}, {{"blk.0.ffn_up_exps.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.0.ffn_up_exps.weight' is missing"},
        {"ffn_gate_exps missing", {{0}}, {{"blk.1.ffn_gate_exps.weight", VT_DTYPE_F32, 0, {0}}},
         "'blk.1.ffn_gate_exps.weight' is missing: mixture-of-experts FFNs without a gate are not supported"},
        {"router missing", {{0}}, {{"blk.0.ffn_gate_inp.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.0.ffn_gate_inp.weight' is missing"},
        {"router of 3 experts", {{0}}, {{"blk.0.ffn_gate_inp.weight", VT_DTYPE_F32, 2, {64, 3}}},
         "tensor 'blk.0.ffn_gate_inp.weight' has shape [64, 3, 1], expected [64, 4]"},
        {"ffn_up_exps F16 beside F32 gate", {{0}}, {{"blk.1.ffn_up_exps.weight", VT_DTYPE_F16, 3, {64, 32, 4}}},
         "blk.1: ffn_gate_exps/up_exps need one activation type (f32/f16)"},
    };
    const bad_case llama[] = {
        {"llama with experts unedited", {{0}}, {{0}}, NULL},
        {"llama experts, expert_count dropped", {KDROP("llama.expert_count")}, {{0}},
         "blk.0 has mixture-of-experts tensors (ffn_*_exps) but key 'llama.expert_count' is missing"},
        {"llama experts, expert_count 0", {KU32("expert_count", 0)}, {{0}},
         "blk.0 has mixture-of-experts tensors (ffn_*_exps) but key 'llama.expert_count' is missing"},
        {"llama experts, expert_used_count 9", {KU32("expert_used_count", 9)}, {{0}},
         "'llama.expert_used_count' = 9 is more than expert_count 4"},
        {"llama experts, gate missing", {{0}}, {{"blk.0.ffn_gate_exps.weight", VT_DTYPE_F32, 0, {0}}},
         "mixture-of-experts FFNs without a gate are not supported"},
        {"llama experts, down of 5 experts", {{0}}, {{"blk.1.ffn_down_exps.weight", VT_DTYPE_F32, 3, {32, 64, 5}}},
         "tensor 'blk.1.ffn_down_exps.weight' has shape [32, 64, 5, 1], expected [32, 64, 4]"},
    };
    const bad_case oss[] = {
        {"gpt-oss unedited", {{0}}, {{0}}, NULL},
        {"gpt-oss sliding window 0", {O32("attention.sliding_window", 0)}, {{0}},
         "key 'gpt-oss.attention.sliding_window' = 0 is out of range"},
        {"gpt-oss sliding window missing", {KDROP("gpt-oss.attention.sliding_window")}, {{0}},
         "required key 'gpt-oss.attention.sliding_window' is missing"},
        {"gpt-oss sliding window past the context", {O32("attention.sliding_window", 300)}, {{0}},
         "key 'gpt-oss.attention.sliding_window' = 300 is larger than the context_length 256"},
        {"gpt-oss pattern 3 of 2 layers", {O32("attention.sliding_window_pattern", 3)}, {{0}},
         "key 'gpt-oss.attention.sliding_window_pattern' = 3 is outside 0..block_count (2)"},
        /* a per-layer array: llama.cpp's gpt-oss ignores it (period 2) */
        {"gpt-oss pattern array 10 (loads: its default period 2)", {OARR(GGUF_TYPE_BOOL, "10")}, {{0}}, NULL},
        {"gpt-oss pattern array 11: not period 2", {OARR(GGUF_TYPE_BOOL, "11")}, {{0}},
         "'gpt-oss.attention.sliding_window_pattern': layer 1 slides, where llama.cpp's gpt-oss ignores the array "
         "and keeps its default period of 2"},
        {"gpt-oss pattern array of f32", {OARR(GGUF_TYPE_FLOAT32, "10")}, {{0}},
         "key 'gpt-oss.attention.sliding_window_pattern' is an array of f32: a per-layer pattern is one bool, i32 or u32"},
        {"gpt-oss sinks of 3 heads", {{0}}, {{"blk.1.attn_sinks.weight", VT_DTYPE_F32, 1, {3}}},
         "tensor 'blk.1.attn_sinks.weight' has shape [3, 1, 1], expected [4, 1]"},
        {"gpt-oss sinks 2-D", {{0}}, {{"blk.0.attn_sinks.weight", VT_DTYPE_F32, 2, {4, 2}}},
         "tensor 'blk.0.attn_sinks.weight' has shape [4, 2, 1], expected [4, 1]"},
        {"gpt-oss sinks missing", {{0}}, {{"blk.0.attn_sinks.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.0.attn_sinks.weight' is missing"},
        {"gpt-oss attn_output.bias missing", {{0}}, {{"blk.1.attn_output.bias", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.1.attn_output.bias' is missing"},
        {"gpt-oss post_attention_norm missing", {{0}}, {{"blk.0.post_attention_norm.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.0.post_attention_norm.weight' is missing"},
        {"gpt-oss expert_feed_forward_length missing", {KDROP("gpt-oss.expert_feed_forward_length")}, {{0}},
         "required key 'gpt-oss.expert_feed_forward_length' is missing"},
        {"gpt-oss router bias of 3", {{0}}, {{"blk.0.ffn_gate_inp.bias", VT_DTYPE_F32, 1, {3}}},
         "tensor 'blk.0.ffn_gate_inp.bias' has shape [3, 1, 1], expected [4, 1]"},
        {"gpt-oss gate_exps bias 1-D", {{0}}, {{"blk.0.ffn_gate_exps.bias", VT_DTYPE_F32, 1, {32}}},
         "tensor 'blk.0.ffn_gate_exps.bias' has shape [32, 1, 1], expected [32, 4]"},
        {"gpt-oss down_exps bias transposed", {{0}}, {{"blk.1.ffn_down_exps.bias", VT_DTYPE_F32, 2, {4, 64}}},
         "tensor 'blk.1.ffn_down_exps.bias' has shape [4, 64, 1], expected [64, 4]"},
        {"gpt-oss attn_v.bias alone missing", {{0}}, {{"blk.0.attn_v.bias", VT_DTYPE_F32, 0, {0}}},
         "blk.0: attn_q/k/v biases must be all present or all absent"},
        {"gpt-oss rope.freq_base_swa 0", {OF32("rope.freq_base_swa", 0.0f)}, {{0}},
         "'gpt-oss.rope.freq_base_swa' = 0 is not a positive number"},
    };
    /* qwen35moe (2 layers: 0 Gated DeltaNet, 1 full attention; linear layers 2 k / 4 v
     * heads of 16, conv kernel 4; shared expert of 32 rows) */
    const bad_case hyb[] = {
        {"qwen35moe unedited", {{0}}, {{0}}, NULL},
        {"qwen35moe expert_count 0", {H32("expert_count", 0)}, {{0}}, "'qwen35moe.expert_count' = 0 is out of range"},
        {"qwen35moe expert_used_count 5 > expert_count 4", {H32("expert_used_count", 5)}, {{0}},
         "'qwen35moe.expert_used_count' = 5 is more than expert_count 4"},
        {"qwen35moe ssm.state_size 0", {H32("ssm.state_size", 0)}, {{0}}, "'qwen35moe.ssm.state_size' = 0 is out of range"},
        {"qwen35moe conv kernel 4 > context 2", {H32("context_length", 2)}, {{0}},
         "key 'qwen35moe.ssm.conv_kernel' = 4: the conv kernel is longer than the context (2)"},
        {"qwen35moe interval 4: layer 1 linear without attn_qkv", {H32("full_attention_interval", 4)}, {{0}},
         "required tensor 'blk.1.attn_qkv.weight' is missing (the layer pattern makes layer 1 a linear attention layer)"},
        {"qwen35moe interval 1: layer 0 full attention without attn_q", {H32("full_attention_interval", 1)}, {{0}},
         "required tensor 'blk.0.attn_q.weight' is missing (the layer pattern makes layer 0 a full attention layer)"},
        {"qwen35moe ffn_gate_inp_shexp missing", {{0}}, {{"blk.1.ffn_gate_inp_shexp.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.1.ffn_gate_inp_shexp.weight' is missing"},
        {"qwen35moe ffn_down_shexp transposed", {{0}}, {{"blk.0.ffn_down_shexp.weight", VT_DTYPE_F32, 2, {64, 32}}},
         "tensor 'blk.0.ffn_down_shexp.weight' has shape [64, 32, 1], expected [32, 64]"},
        {"qwen35moe expert_shared_feed_forward_length 64", {H32("expert_shared_feed_forward_length", 64)}, {{0}},
         "tensor 'blk.0.ffn_gate_shexp.weight' has shape [64, 32, 1], expected [64, 64]"},
        {"qwen35moe nextn_predict_layers 2 of 2", {H32("nextn_predict_layers", 2)}, {{0}},
         "key 'qwen35moe.nextn_predict_layers' = 2 leaves no trunk layers of 2"},
        {"qwen35moe MTP layer alone (no blk.0.attn_norm)", {H32("nextn_predict_layers", 1)},
         {{"blk.0.attn_norm.weight", VT_DTYPE_F32, 0, {0}}},
         "the file holds only the 1 multi-token-prediction layers ('qwen35moe.nextn_predict_layers')"},
        {"qwen35moe nextn_predict_layers 1 (loads: layer 1 skipped)", {H32("nextn_predict_layers", 1)}, {{0}}, NULL},
    };
    return check_moe_cases("qwen3moe", qwen, sizeof qwen / sizeof qwen[0]) +
           check_moe_cases("qwen35moe", hyb, sizeof hyb / sizeof hyb[0]) +
           check_moe_cases("llama", llama, sizeof llama / sizeof llama[0]) +
           check_moe_cases("gpt-oss", oss, sizeof oss / sizeof oss[0]);
}

#define G2(k, v) {K_U32, "gemma2." k, (v), 0, NULL}
#define G3(k, v) {K_U32, "gemma3." k, (v), 0, NULL}
#define G2F(k, v) {K_F32, "gemma2." k, 0, (v), NULL}
#define G3F(k, v) {K_F32, "gemma3." k, 0, (v), NULL}
#define G2ARR(et, bits) {K_ARR, "gemma2.attention.sliding_window_pattern", (et), 0, (bits)}
#define G3ARR(et, bits) {K_ARR, "gemma3.attention.sliding_window_pattern", (et), 0, (bits)}

/* cases on a small synthetic gemma or olmo2 file of arch (n_embd 64, 4 heads of 16, 2 KV
 * heads, 2 layers, n_ff 32, context 256, a window of 16 on every other layer) */
static size_t check_gemma_cases(const char *arch, const bad_case *cases, size_t n) {
    char path[] = "/tmp/vt_model_bad_gemma_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    synth_params sp = synth_default_params();
    sp.arch = arch;
    sp.n_embd = 64;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.n_ff = 32;
    sp.n_swa = strcmp(arch, "granite") ? 16 : 0;
    sp.swa_pattern = 2;
    sp.final_softcap = strcmp(arch, "olmo2") ? 30.0f : 0.0f;
    if (!strcmp(arch, "mistral3")) { /* its YaRN keys */
        sp.yarn_factor = 4.0f;
        sp.yarn_orig_ctx = 16;
    }
    sp.n_threads = 1;
    vt_status s = synth_write(&sp, path);
    CHECK_MSG(s == VT_OK, "synth %s: %s", arch, vt_last_error());
    if (s == VT_OK) {
        mapfile mf;
        gguf_file f;
        CHECK_OK(mapfile_open(path, &mf));
        CHECK_OK(gguf_parse(mf.data, mf.size, path, &f));
        for (size_t i = 0; i < n; i++) check_case(&f, &cases[i]);
        gguf_free(&f);
        mapfile_close(&mf);
    }
    unlink(path);
    return n;
}

static size_t check_gemma(void) {
    const bad_case g3[] = {
        {"gemma3 unedited", {{0}}, {{0}}, NULL},
        {"gemma3 without a window (loads: full attention)", {{K_DROP, "gemma3.attention.sliding_window", 0, 0, NULL}}, {{0}}, NULL},
        {"gemma3 sliding window 0", {G3("attention.sliding_window", 0)}, {{0}}, "'gemma3.attention.sliding_window' = 0 is out of range"},
        {"gemma3 sliding window past the context", {G3("attention.sliding_window", 300)}, {{0}},
         "'gemma3.attention.sliding_window' = 300 is larger than the context_length 256"},
        {"gemma3 pattern 3 of 2 layers", {G3("attention.sliding_window_pattern", 3)}, {{0}},
         "'gemma3.attention.sliding_window_pattern' = 3 is more than block_count (2)"},
        {"gemma3 pattern dropped (loads: period 6, past the 2 layers: both slide)",
         {{K_DROP, "gemma3.attention.sliding_window_pattern", 0, 0, NULL}}, {{0}}, NULL},
        {"gemma3 pattern 0 (loads: every layer slides)", {G3("attention.sliding_window_pattern", 0)}, {{0}}, NULL},
        {"gemma3 pattern -1 (i32)", {{K_I32, "gemma3.attention.sliding_window_pattern", (uint64_t)(uint32_t)-1, 0, NULL}},
         {{0}}, "'gemma3.attention.sliding_window_pattern' = -1 is negative"},
        /* a per-layer array: llama.cpp's gemma3 ignores it (period 6: of 2 layers both slide) */
        {"gemma3 pattern array 11 (loads: its default period 6)", {G3ARR(GGUF_TYPE_BOOL, "11")}, {{0}}, NULL},
        {"gemma3 pattern array 11 of i32 (loads)", {G3ARR(GGUF_TYPE_INT32, "11")}, {{0}}, NULL},
        {"gemma3 pattern array 10: not period 6", {G3ARR(GGUF_TYPE_BOOL, "10")}, {{0}},
         "'gemma3.attention.sliding_window_pattern': layer 1 attends fully, where llama.cpp's gemma3 ignores the "
         "array and keeps its default period of 6 (layers 5, 11, ... attend fully"},
        {"gemma3 pattern array of 3 layers", {G3ARR(GGUF_TYPE_BOOL, "111")}, {{0}},
         "'gemma3.attention.sliding_window_pattern' has 3 entries, block_count is 2"},
        {"gemma3 pattern array of u8", {G3ARR(GGUF_TYPE_UINT8, "11")}, {{0}},
         "key 'gemma3.attention.sliding_window_pattern' is an array of u8: a per-layer pattern is one bool, i32 or u32"},
        {"gemma3 pattern array of f32", {G3ARR(GGUF_TYPE_FLOAT32, "11")}, {{0}},
         "key 'gemma3.attention.sliding_window_pattern' is an array of f32"},
        {"gemma3 final soft-cap 0", {G3F("final_logit_softcapping", 0.0f)}, {{0}},
         "'gemma3.final_logit_softcapping' = 0 is not a positive number"},
        {"gemma3 final soft-cap NaN", {G3F("final_logit_softcapping", NAN)}, {{0}},
         "'gemma3.final_logit_softcapping' = nan is not a positive number"},
        {"gemma3 rope.freq_base_swa 0", {G3F("rope.freq_base_swa", 0.0f)}, {{0}},
         "'gemma3.rope.freq_base_swa' = 0 is not a positive number"},
        {"gemma3 post_attention_norm missing", {{0}}, {{"blk.1.post_attention_norm.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.1.post_attention_norm.weight' is missing"},
        {"gemma3 post_ffw_norm [32]", {{0}}, {{"blk.0.post_ffw_norm.weight", VT_DTYPE_F32, 1, {32}}},
         "tensor 'blk.0.post_ffw_norm.weight' has shape [32, 1, 1], expected [64, 1]"},
        {"gemma3 attn_q_norm missing", {{0}}, {{"blk.0.attn_q_norm.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.0.attn_q_norm.weight' is missing"},
        {"gemma3 attn_k_norm [64]", {{0}}, {{"blk.1.attn_k_norm.weight", VT_DTYPE_F32, 1, {64}}},
         "tensor 'blk.1.attn_k_norm.weight' has shape [64, 1, 1], expected [16, 1]"},
    };
    const bad_case g2[] = {
        {"gemma2 unedited", {{0}}, {{0}}, NULL},
        {"gemma2 attention soft-cap 0", {G2F("attn_logit_softcapping", 0.0f)}, {{0}},
         "'gemma2.attn_logit_softcapping' = 0 is not a positive number"},
        {"gemma2 attention soft-cap NaN", {G2F("attn_logit_softcapping", NAN)}, {{0}},
         "'gemma2.attn_logit_softcapping' = nan is not a positive number"},
        {"gemma2 final soft-cap -1", {G2F("final_logit_softcapping", -1.0f)}, {{0}},
         "'gemma2.final_logit_softcapping' = -1 is not a positive number"},
        {"gemma2 sliding window 0", {G2("attention.sliding_window", 0)}, {{0}}, "'gemma2.attention.sliding_window' = 0 is out of range"},
        {"gemma2 sliding window past the context", {G2("attention.sliding_window", 257)}, {{0}},
         "'gemma2.attention.sliding_window' = 257 is larger than the context_length 256"},
        {"gemma2 sliding window -16 (i32)", {{K_I32, "gemma2.attention.sliding_window", (uint64_t)(uint32_t)-16, 0, NULL}}, {{0}},
         "'gemma2.attention.sliding_window' = -16 is out of range"},
        {"gemma2 pattern 4 of 2 layers", {G2("attention.sliding_window_pattern", 4)}, {{0}},
         "'gemma2.attention.sliding_window_pattern' = 4 is more than block_count (2)"},
        /* a per-layer array: llama.cpp's gemma2 ignores it (period 2) */
        {"gemma2 pattern array 10 (loads: its default period 2)", {G2ARR(GGUF_TYPE_BOOL, "10")}, {{0}}, NULL},
        {"gemma2 pattern array 10 of u32 (loads)", {G2ARR(GGUF_TYPE_UINT32, "10")}, {{0}}, NULL},
        {"gemma2 pattern array 11: not period 2", {G2ARR(GGUF_TYPE_BOOL, "11")}, {{0}},
         "'gemma2.attention.sliding_window_pattern': layer 1 slides, where llama.cpp's gemma2 ignores the array"},
        {"gemma2 pattern array of u64", {G2ARR(GGUF_TYPE_UINT64, "10")}, {{0}},
         "key 'gemma2.attention.sliding_window_pattern' is an array of u64"},
        {"gemma2 post_ffw_norm missing", {{0}}, {{"blk.0.post_ffw_norm.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.0.post_ffw_norm.weight' is missing"},
    };
    const bad_case o2[] = {
        {"olmo2 unedited", {{0}}, {{0}}, NULL},
        {"olmo2 sliding window 0", {{K_U32, "olmo2.attention.sliding_window", 0, 0, NULL}}, {{0}},
         "'olmo2.attention.sliding_window' = 0 is out of range"},
        {"olmo2 pattern 3 of 2 layers", {{K_U32, "olmo2.attention.sliding_window_pattern", 3, 0, NULL}}, {{0}},
         "'olmo2.attention.sliding_window_pattern' = 3 is more than block_count (2)"},
        {"olmo2 sliding window past the context", {{K_U32, "olmo2.attention.sliding_window", 300, 0, NULL}}, {{0}},
         "'olmo2.attention.sliding_window' = 300 is larger than the context_length 256"},
        {"olmo2 pattern array 11 (loads: period 4)", {{K_BOOLS, "olmo2.attention.sliding_window_pattern", 0, 0, "11"}},
         {{0}}, NULL},
        {"olmo2 pattern array 10: not period 4", {{K_BOOLS, "olmo2.attention.sliding_window_pattern", 0, 0, "10"}},
         {{0}}, "'olmo2.attention.sliding_window_pattern': layer 1 attends fully, where llama.cpp's olmo2 ignores"},
        {"olmo2 pattern array of 3 layers", {{K_BOOLS, "olmo2.attention.sliding_window_pattern", 0, 0, "111"}},
         {{0}}, "'olmo2.attention.sliding_window_pattern' has 3 entries, block_count is 2"},
        {"olmo2 pattern array of i16", {{K_ARR, "olmo2.attention.sliding_window_pattern", GGUF_TYPE_INT16, 0, "11"}},
         {{0}}, "key 'olmo2.attention.sliding_window_pattern' is an array of i16"},
        {"olmo2 key_length 32: Q rows wider than n_embd", {{K_U32, "olmo2.attention.key_length", 32, 0, NULL},
                                                           {K_U32, "olmo2.attention.value_length", 32, 0, NULL}}, {{0}},
         "olmo2: head_count 4 x key_length 32 is not embedding_length 64"},
        {"olmo2 attn_q_norm per head [16]", {{0}}, {{"blk.0.attn_q_norm.weight", VT_DTYPE_F32, 1, {16}}},
         "tensor 'blk.0.attn_q_norm.weight' has shape [16, 1, 1], expected [64, 1]"},
        {"olmo2 attn_k_norm missing", {{0}}, {{"blk.1.attn_k_norm.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.1.attn_k_norm.weight' is missing"},
        {"olmo2 output.weight missing", {{0}}, {{"output.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'output.weight' is missing"},
        {"olmo2 post_ffw_norm missing", {{0}}, {{"blk.1.post_ffw_norm.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.1.post_ffw_norm.weight' is missing"},
    };
    const bad_case gr[] = {
        {"granite unedited", {{0}}, {{0}}, NULL},
        {"granite logit_scale missing", {{K_DROP, "granite.logit_scale", 0, 0, NULL}}, {{0}},
         "required key 'granite.logit_scale' is missing"},
        {"granite logit_scale 0", {{K_F32, "granite.logit_scale", 0, 0.0f, NULL}}, {{0}},
         "'granite.logit_scale' = 0 is not a positive number"},
        {"granite residual_scale NaN", {{K_F32, "granite.residual_scale", 0, NAN, NULL}}, {{0}},
         "'granite.residual_scale' = nan is not a positive number"},
        {"granite embedding_scale -12", {{K_F32, "granite.embedding_scale", 0, -12.0f, NULL}}, {{0}},
         "'granite.embedding_scale' = -12 is not a positive number"},
        {"granite residual_scale 0 (loads: unset)", {{K_F32, "granite.residual_scale", 0, 0.0f, NULL}}, {{0}}, NULL},
        {"granite attn_output.bias", {{0}}, {{"blk.1.attn_output.bias", VT_DTYPE_F32, 1, {64}}},
         "tensor 'blk.1.attn_output.bias': granite's optional biases are not supported"},
    };
    /* phi3 (synth writes a sliding_window key: ignored, as llama.cpp does; rope
     * factors of n_rot / 2 = 8), glm4, mistral3 (YaRN factor 4, original context 16) */
    const bad_case p3[] = {
        {"phi3 unedited (its sliding window ignored)", {{0}}, {{0}}, NULL},
        {"phi3 rope_factors_long of 7", {{0}}, {{"rope_factors_long.weight", VT_DTYPE_F32, 1, {7}}},
         "tensor 'rope_factors_long.weight' has shape [7, 1, 1], expected [8, 1]"},
        {"phi3 rope_factors_short of zeros", {{0}}, {{"rope_factors_short.weight", VT_DTYPE_F32, 1, {8}}},
         "tensor 'rope_factors_short.weight': factor 0 = 0 is out of range"},
        {"phi3 rope_factors_short missing", {{0}}, {{"rope_factors_short.weight", VT_DTYPE_F32, 0, {0}}},
         "tensor 'rope_factors_short.weight' is missing"},
        {"phi3 attn_factor NaN", {{K_F32, "phi3.rope.scaling.attn_factor", 0, NAN, NULL}}, {{0}},
         "'phi3.rope.scaling.attn_factor' = nan is not a positive number"},
        {"phi3 rope scaling factor -1", {{K_F32, "phi3.rope.scaling.factor", 0, -1.0f, NULL}}, {{0}},
         "key 'phi3.rope.scaling.factor': rope scaling factor -1 is invalid"},
        {"phi3 rope scaling type su", {{K_STR, "phi3.rope.scaling.type", 0, 0, "su"}}, {{0}},
         "rope scaling type 'su' is not supported"},
        {"phi3 attn_qkv of Q rows only", {{0}}, {{"blk.1.attn_qkv.weight", VT_DTYPE_F32, 2, {64, 64}}},
         "tensor 'blk.1.attn_qkv.weight' has shape [64, 64, 1], expected [64, 128]"},
        {"phi3 ffn_up of n_ff rows", {{0}}, {{"blk.0.ffn_up.weight", VT_DTYPE_F32, 2, {64, 32}}},
         "tensor 'blk.0.ffn_up.weight' has shape [64, 32, 1], expected [64, 64]"},
    };
    const bad_case gl[] = {
        {"glm4 unedited", {{0}}, {{0}}, NULL},
        {"glm4 post_attention_norm missing", {{0}}, {{"blk.1.post_attention_norm.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.1.post_attention_norm.weight' is missing"},
        {"glm4 ffn_up of n_ff rows", {{0}}, {{"blk.1.ffn_up.weight", VT_DTYPE_F32, 2, {64, 32}}},
         "tensor 'blk.1.ffn_up.weight' has shape [64, 32, 1], expected [64, 64]"},
        {"glm4 attn_q.bias missing", {{0}}, {{"blk.0.attn_q.bias", VT_DTYPE_F32, 0, {0}}},
         "blk.0: attn_q/k/v biases must be all present or all absent"},
        {"glm4 rope dimension 18 of 16", {{K_U32, "glm4.rope.dimension_count", 18, 0, NULL}}, {{0}},
         "rope.dimension_count 18 is invalid for head size 16"},
        {"glm4 ffn_gate.bias", {{0}}, {{"blk.0.ffn_gate.bias", VT_DTYPE_F32, 1, {32}}},
         "tensor 'blk.0.ffn_gate.bias': FFN biases are not supported"},
    };
    const bad_case m3[] = {
        {"mistral3 unedited", {{0}}, {{0}}, NULL},
        {"mistral3 yarn_beta_fast 0", {{K_F32, "mistral3.rope.scaling.yarn_beta_fast", 0, 0.0f, NULL}}, {{0}},
         "'mistral3.rope.scaling.yarn_beta_fast' = 0 is out of range"},
        {"mistral3 yarn_beta_slow above fast", {{K_F32, "mistral3.rope.scaling.yarn_beta_slow", 0, 64.0f, NULL}}, {{0}},
         "'mistral3.rope.scaling.yarn_beta_fast' = 16 is not above 'mistral3.rope.scaling.yarn_beta_slow' = 64"},
        {"mistral3 yarn_log_multiplier NaN", {{K_F32, "mistral3.rope.scaling.yarn_log_multiplier", 0, NAN, NULL}}, {{0}},
         "'mistral3.rope.scaling.yarn_log_multiplier' = nan is out of range"},
        {"mistral3 temperature_scale NaN", {{K_F32, "mistral3.attention.temperature_scale", 0, NAN, NULL}}, {{0}},
         "'mistral3.attention.temperature_scale' = nan is out of range"},
        {"mistral3 rope scaling factor -4", {{K_F32, "mistral3.rope.scaling.factor", 0, -4.0f, NULL}}, {{0}},
         "key 'mistral3.rope.scaling.factor': rope scaling factor -4 is invalid"},
        {"mistral3 ffn_down.bias", {{0}}, {{"blk.1.ffn_down.bias", VT_DTYPE_F32, 1, {64}}},
         "tensor 'blk.1.ffn_down.bias': FFN biases are not supported"},
    };
#define MG(k, v) {K_U32, "muse-glimmer." k, (v), 0, NULL}
#define MGF(k, v) {K_F32, "muse-glimmer." k, 0, (v), NULL}
#define MGARR(et, bits) {K_ARR, "muse-glimmer.attention.sliding_window_pattern", (et), 0, (bits)}
    const bad_case mg[] = {
        {"muse-glimmer unedited", {{0}}, {{0}}, NULL},
        {"muse-glimmer sliding window missing", {{K_DROP, "muse-glimmer.attention.sliding_window", 0, 0, NULL}}, {{0}},
         "required key 'muse-glimmer.attention.sliding_window' is missing"},
        {"muse-glimmer sliding window 0", {MG("attention.sliding_window", 0)}, {{0}},
         "'muse-glimmer.attention.sliding_window' = 0 is out of range"},
        {"muse-glimmer sliding window past the context", {MG("attention.sliding_window", 300)}, {{0}},
         "'muse-glimmer.attention.sliding_window' = 300 is larger than the context_length 256"},
        {"muse-glimmer pattern missing", {{K_DROP, "muse-glimmer.attention.sliding_window_pattern", 0, 0, NULL}}, {{0}},
         "required key 'muse-glimmer.attention.sliding_window_pattern' is missing"},
        {"muse-glimmer pattern 3 of 2 layers", {MG("attention.sliding_window_pattern", 3)}, {{0}},
         "'muse-glimmer.attention.sliding_window_pattern' = 3 is more than block_count (2)"},
        {"muse-glimmer pattern array 10 (loads: period 2)",
         {{K_BOOLS, "muse-glimmer.attention.sliding_window_pattern", 0, 0, "10"}}, {{0}}, NULL},
        /* llama.cpp's muse-glimmer reads an array layer by layer, any pattern */
        {"muse-glimmer pattern array 01 (loads: layer 0 full, 1 slides)",
         {{K_BOOLS, "muse-glimmer.attention.sliding_window_pattern", 0, 0, "01"}}, {{0}}, NULL},
        {"muse-glimmer pattern array 01 of u32 (loads)", {MGARR(GGUF_TYPE_UINT32, "01")}, {{0}}, NULL},
        {"muse-glimmer pattern array 01 of i32 (loads)", {MGARR(GGUF_TYPE_INT32, "01")}, {{0}}, NULL},
        {"muse-glimmer pattern array of 3 layers", {MGARR(GGUF_TYPE_BOOL, "011")}, {{0}},
         "'muse-glimmer.attention.sliding_window_pattern' has 3 entries, block_count is 2"},
        {"muse-glimmer pattern array of i64", {MGARR(GGUF_TYPE_INT64, "01")}, {{0}},
         "key 'muse-glimmer.attention.sliding_window_pattern' is an array of i64: a per-layer pattern is one bool, "
         "i32 or u32 per layer"},
        {"muse-glimmer pattern array of f32", {MGARR(GGUF_TYPE_FLOAT32, "01")}, {{0}},
         "key 'muse-glimmer.attention.sliding_window_pattern' is an array of f32"},
        {"muse-glimmer final soft-cap 0", {MGF("final_logit_softcapping", 0.0f)}, {{0}},
         "'muse-glimmer.final_logit_softcapping' = 0 is not a positive number"},
        {"muse-glimmer final soft-cap NaN", {MGF("final_logit_softcapping", NAN)}, {{0}},
         "'muse-glimmer.final_logit_softcapping' = nan is not a positive number"},
        {"muse-glimmer logit_scale missing", {{K_DROP, "muse-glimmer.logit_scale", 0, 0, NULL}}, {{0}},
         "required key 'muse-glimmer.logit_scale' is missing"},
        {"muse-glimmer logit_scale NaN", {MGF("logit_scale", NAN)}, {{0}},
         "'muse-glimmer.logit_scale' = nan is not a positive number"},
        {"muse-glimmer rope.freq_base_swa 0", {MGF("rope.freq_base_swa", 0.0f)}, {{0}},
         "'muse-glimmer.rope.freq_base_swa' = 0 is not a positive number"},
        {"muse-glimmer YaRN factor -2",
         {{K_STR, "muse-glimmer.rope.scaling.type", 0, 0, "yarn"}, MGF("rope.scaling.factor", -2.0f)}, {{0}},
         "key 'muse-glimmer.rope.scaling.factor': rope scaling factor -2 is invalid"},
        {"muse-glimmer attn_gate missing", {{0}}, {{"blk.1.attn_gate.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.1.attn_gate.weight' is missing"},
        {"muse-glimmer attn_q_norm [64]", {{0}}, {{"blk.0.attn_q_norm.weight", VT_DTYPE_F32, 1, {64}}},
         "tensor 'blk.0.attn_q_norm.weight' has shape [64, 1, 1], expected [16, 1]"},
        {"muse-glimmer post_ffw_norm missing", {{0}}, {{"blk.0.post_ffw_norm.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.0.post_ffw_norm.weight' is missing"},
        {"muse-glimmer output.weight missing", {{0}}, {{"output.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'output.weight' is missing"},
    };
    return check_gemma_cases("muse-glimmer", mg, sizeof mg / sizeof mg[0]) +
           check_gemma_cases("phi3", p3, sizeof p3 / sizeof p3[0]) +
           check_gemma_cases("glm4", gl, sizeof gl / sizeof gl[0]) +
           check_gemma_cases("mistral3", m3, sizeof m3 / sizeof m3[0]) +
           check_gemma_cases("granite", gr, sizeof gr / sizeof gr[0]) +
           check_gemma_cases("gemma3", g3, sizeof g3 / sizeof g3[0]) +
           check_gemma_cases("gemma2", g2, sizeof g2 / sizeof g2[0]) +
           check_gemma_cases("olmo2", o2, sizeof o2 / sizeof o2[0]);
}

int main(void) {
    const char *p = test_model_path("stories260K.gguf");
    if (!p) return test_finish();
    char path[4096];
    snprintf(path, sizeof path, "%s", p);
    mapfile mf;
    gguf_file f;
    CHECK_OK(mapfile_open(path, &mf));
    CHECK_OK(gguf_parse(mf.data, mf.size, path, &f));

    /* stories260K: n_embd 64, 8 heads (head_dim 8), 4 KV heads, 5 layers, n_ff 172,
     * vocab 512, rope dims 8, all F32. */
    const bad_case cases[] = {
        {"unedited rewrite", {{0}}, {{0}}, NULL},
        {"head_count 0", {KU32("attention.head_count", 0)}, {{0}}, "'llama.attention.head_count' = 0 is out of range"},
        {"head_count_kv 0", {KU32("attention.head_count_kv", 0)}, {{0}}, "'llama.attention.head_count_kv' = 0 is out of range"},
        {"head_count_kv 3 (8 heads)", {KU32("attention.head_count_kv", 3)}, {{0}}, "head_count 8 is not a multiple of head_count_kv 3"},
        {"head_count_kv 16 > head_count", {KU32("attention.head_count_kv", 16)}, {{0}}, "head_count 8 is not a multiple of head_count_kv 16"},
        {"head_count 7 (n_embd 64)", {KU32("attention.head_count", 7), KU32("attention.head_count_kv", 7)}, {{0}},
         "embedding_length 64 is not a multiple of head_count 7"},
        {"head_count 16: K/V shapes no longer match", {KU32("attention.head_count", 16), KU32("rope.dimension_count", 4)}, {{0}},
         "tensor 'blk.0.attn_k.weight' has shape [64, 32, 1], expected [64, 16]"},
        {"head_count 2^32-1", {KU32("attention.head_count", UINT32_MAX)}, {{0}}, "'llama.attention.head_count' = 4294967295 is out of range"},
        {"embedding_length 2^40", {KU64("embedding_length", (uint64_t)1 << 40)}, {{0}},
         "'llama.embedding_length' = 1099511627776 is out of range"},
        {"embedding_length 2^64-1", {KU64("embedding_length", UINT64_MAX)}, {{0}}, "does not fit in i64"},
        {"embedding_length 128 (tensors are 64)", {KU32("embedding_length", 128)}, {{0}},
         "tensor 'token_embd.weight' has shape [64, 512], expected [128, n_vocab]"},
        {"embedding_length as a string", {{K_STR, "llama.embedding_length", 0, 0, "64"}}, {{0}},
         "key 'llama.embedding_length' has type str"},
        {"embedding_length negative (i32)", {{K_I32, "llama.embedding_length", (uint64_t)(uint32_t)-64, 0, NULL}}, {{0}},
         "'llama.embedding_length' = -64 is out of range"},
        {"block_count 0", {KU32("block_count", 0)}, {{0}}, "'llama.block_count' = 0 is out of range"},
        {"block_count 2^31", {KU32("block_count", (uint32_t)1 << 31)}, {{0}},
         "block_count 2147483648 needs at least 19327352832 tensors, the file has 48"},
        {"block_count 6 (5 in the file)", {KU32("block_count", 6)}, {{0}}, "block_count 6 needs at least 54 tensors, the file has 48"},
        {"block_count 5 with 9 per layer but one missing", {{0}}, {{"blk.4.ffn_norm.weight", VT_DTYPE_F32, 0, {0}}},
         "required tensor 'blk.4.ffn_norm.weight' is missing"},
        {"feed_forward_length 0", {KU32("feed_forward_length", 0)}, {{0}}, "'llama.feed_forward_length' = 0 is out of range"},
        {"feed_forward_length 173", {KU32("feed_forward_length", 173)}, {{0}}, "tensor 'blk.0.ffn_gate.weight' has shape"},
        {"rope.dimension_count 7 (odd)", {KU32("rope.dimension_count", 7)}, {{0}}, "rope.dimension_count 7 is invalid for head size 8"},
        {"rope.dimension_count 16 > head size", {KU32("rope.dimension_count", 16)}, {{0}}, "rope.dimension_count 16 is invalid for head size 8"},
        {"rope.dimension_count 0", {KU32("rope.dimension_count", 0)}, {{0}}, "'llama.rope.dimension_count' = 0 is out of range"},
        {"context_length 0", {KU32("context_length", 0)}, {{0}}, "'llama.context_length' = 0 is out of range"},
        {"sliding window 16 on layers 0, 2, 4 (loads)", {KU32("attention.sliding_window", 16), KU32("attention.sliding_window_pattern", 2)}, {{0}}, NULL},
        {"sliding window 0", {KU32("attention.sliding_window", 0)}, {{0}}, "'llama.attention.sliding_window' = 0 is out of range"},
        {"sliding window past the context", {KU32("context_length", 256), KU32("attention.sliding_window", 300)}, {{0}},
         "'llama.attention.sliding_window' = 300 is larger than the context_length 256"},
        {"sliding window pattern 6 of 5 layers", {KU32("attention.sliding_window", 16), KU32("attention.sliding_window_pattern", 6)}, {{0}},
         "'llama.attention.sliding_window_pattern' = 6 is outside 0..block_count (5)"},
        {"sliding window pattern as an array (llama.cpp's llama has no window)",
         {KU32("attention.sliding_window", 16), {K_BOOLS, "llama.attention.sliding_window_pattern", 0, 0, "10101"}}, {{0}},
         "key 'llama.attention.sliding_window_pattern' has type arr, expected an integer"},
        {"context_length 2^31", {KU32("context_length", (uint32_t)1 << 31)}, {{0}},
         "'llama.context_length' = 2147483648 is past vt's context limit of 16777216 tokens"},
        {"context_length 2^24 + 1", {KU32("context_length", (1u << 24) + 1)}, {{0}}, "past vt's context limit"},
        {"context_length 2^60", {KU64("context_length", (uint64_t)1 << 60)}, {{0}}, "'llama.context_length' = 1152921504606846976 is out of range"},
        {"key_length 16 (q/k tensors are 8 per head)", {KU32("attention.key_length", 16), KU32("attention.value_length", 16)}, {{0}},
         "tensor 'blk.0.attn_q.weight' has shape [64, 64, 1], expected [64, 128]"},
        {"value_length != key_length", {KU32("attention.value_length", 4)}, {{0}}, "attention.value_length 4 differs from key_length 8"},
        {"rms epsilon NaN", {KF32("attention.layer_norm_rms_epsilon", NAN)}, {{0}}, "layer_norm_rms_epsilon' = nan is out of range"},
        {"rms epsilon -1", {KF32("attention.layer_norm_rms_epsilon", -1.0f)}, {{0}}, "layer_norm_rms_epsilon' = -1 is out of range"},
        {"rms epsilon missing", {KDROP("llama.attention.layer_norm_rms_epsilon")}, {{0}}, "required key 'llama.attention.layer_norm_rms_epsilon' is missing"},
        {"rope.freq_base 0", {KF32("rope.freq_base", 0.0f)}, {{0}}, "'llama.rope.freq_base' = 0 is not a positive number"},
        {"rope.freq_base inf", {KF32("rope.freq_base", INFINITY)}, {{0}}, "'llama.rope.freq_base' = inf is not a positive number"},
        {"rope scaling factor -2", {KF32("rope.scaling.factor", -2.0f)}, {{0}}, "rope scaling factor -2 is invalid"},
        {"rope scaling factor inf", {KF32("rope.scaling.factor", INFINITY)}, {{0}}, "rope scaling factor inf is invalid"},
        {"rope scaling factor NaN", {KF32("rope.scaling.factor", NAN)}, {{0}}, "rope scaling factor nan is invalid"},
        {"rope scaling original_context_length 0", {KU32("rope.scaling.original_context_length", 0)}, {{0}},
         "'llama.rope.scaling.original_context_length' = 0 is out of range"},
        {"llama's keys under architecture gpt-oss", {{K_STR, "general.architecture", 0, 0, "gpt-oss"}}, {{0}},
         "required key 'gpt-oss.block_count' is missing"},
        {"rope scaling type longrope", {{K_STR, "llama.rope.scaling.type", 0, 0, "longrope"}}, {{0}}, "rope scaling type 'longrope' is not supported"},
        {"rope scaling attn_factor 0", {KF32("rope.scaling.attn_factor", 0.0f)}, {{0}}, "'llama.rope.scaling.attn_factor' = 0 is not a positive number"},
        /* tensors */
        {"token_embd of 256 rows, tokenizer of 512", {{0}},
         {{"token_embd.weight", VT_DTYPE_F32, 2, {64, 256}}, {"output.weight", VT_DTYPE_F32, 2, {64, 256}}},
         "tokenizer has 512 tokens but token_embd only 256 rows"},
        {"token_embd [32, 512]", {{0}}, {{"token_embd.weight", VT_DTYPE_F32, 2, {32, 512}}},
         "tensor 'token_embd.weight' has shape [32, 512], expected [64, n_vocab]"},
        {"token_embd 1-D", {{0}}, {{"token_embd.weight", VT_DTYPE_F32, 1, {64}}}, "tensor 'token_embd.weight' has shape"},
        {"token_embd missing", {{0}}, {{"token_embd.weight", VT_DTYPE_F32, 0, {0}}}, "required tensor 'token_embd.weight' is missing"},
        {"output.weight [64, 511]", {{0}}, {{"output.weight", VT_DTYPE_F32, 2, {64, 511}}},
         "tensor 'output.weight' has shape [64, 511, 1], expected [64, 512]"},
        {"attn_q [64, 32]", {{0}}, {{"blk.3.attn_q.weight", VT_DTYPE_F32, 2, {64, 32}}},
         "tensor 'blk.3.attn_q.weight' has shape [64, 32, 1], expected [64, 64]"},
        {"attn_k transposed [32, 64]", {{0}}, {{"blk.0.attn_k.weight", VT_DTYPE_F32, 2, {32, 64}}},
         "tensor 'blk.0.attn_k.weight' has shape [32, 64, 1], expected [64, 32]"},
        {"ffn_down [64, 172] (transposed)", {{0}}, {{"blk.4.ffn_down.weight", VT_DTYPE_F32, 2, {64, 172}}},
         "tensor 'blk.4.ffn_down.weight' has shape [64, 172, 1], expected [172, 64]"},
        {"output_norm [32]", {{0}}, {{"output_norm.weight", VT_DTYPE_F32, 1, {32}}},
         "tensor 'output_norm.weight' has shape [32, 1, 1], expected [64, 1]"},
        {"attn_norm 2-D", {{0}}, {{"blk.1.attn_norm.weight", VT_DTYPE_F32, 2, {64, 2}}},
         "tensor 'blk.1.attn_norm.weight' has shape [64, 2, 1], expected [64, 1]"},
        {"attn_k F16 beside F32 q/v", {{0}}, {{"blk.2.attn_k.weight", VT_DTYPE_F16, 2, {64, 32}}},
         "blk.2: attn_q/k/v need one activation type (f32/f16/f32)"},
        {"attn_q as Q8_1 (an activation type)", {{0}}, {{"blk.0.attn_q.weight", VT_DTYPE_Q8_1, 2, {64, 64}}},
         "tensor 'blk.0.attn_q.weight': weight type q8_1 is not supported"},
        {"rope_freqs of the wrong length", {{0}}, {{"rope_freqs.weight", VT_DTYPE_F32, 1, {3}}},
         "tensor 'rope_freqs.weight' has shape [3, 1, 1], expected [4, 1]"},
        {"rope_freqs of zeros", {{0}}, {{"rope_freqs.weight", VT_DTYPE_F32, 1, {4}}},
         "tensor 'rope_freqs.weight': factor 0 = 0 is out of range (0, 1e6)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&f, &cases[i]);
    gguf_free(&f);
    mapfile_close(&mf);
    const size_t n_moe = check_moe();
    const size_t n_gemma = check_gemma();

    /* No case may have allocated anything near its absurd sizes. */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    CHECK_MSG(ru.ru_maxrss < 512 * 1024, "peak RSS %ld KiB", ru.ru_maxrss);
    printf("%zu model cases, %zu mixture-of-experts cases, %zu gemma/olmo2/granite cases\n", sizeof cases / sizeof cases[0],
           n_moe, n_gemma);
    return test_finish();
}
