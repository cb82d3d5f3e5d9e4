/* Layer kinds (model/layer_kind.h): on a small synthetic model of every family,
 * each layer's descriptor, as layer_kind_str prints it, is the one its row below
 * says (gpt-oss's experts split, a qwen35moe shared expert of another activation
 * type than its experts apart; OLMo 3 under YaRN ropes its sliding layers in a
 * group of their own); a QK-norm on K alone is refused; moe_split follows
 * the expert biases. */
#include "engine_util.h"
#include "test.h"
#include "vt.h"

#include "model/layer_kind.h"
#include "model/model.h"
#include "model/synth.h"

#define N_LAYER 4

/* A family, what differs from the common shape (4 layers, n_embd 64, 4 heads of
 * 16, 2 KV heads, n_ff 64) and the kinds of its layers 0..3. */
typedef struct kind_case {
    const char *arch;
    void (*setup)(synth_params *sp); /* NULL: nothing */
    const char *kinds[N_LAYER];
} kind_case;

#define ALL4(s) {s, s, s, s}
#define DENSE "norms=pre ffn=dense out=add/add"
#define SANDWICH "norms=sandwich ffn=dense out=post_norm/post_norm"
#define SHARED "norms=pre ffn=moe_shared out=add/moe_shared"
#define APART "norms=pre ffn=moe_shared apart out=add/moe_shared"
#define OLMO2 "norms=post ffn=dense out=post_norm/post_norm"

static void setup_moe(synth_params *sp) {
    sp->n_expert = 4;
    sp->n_expert_used = 2;
    sp->n_ff_exp = 32;
}
static void setup_gpt_oss(synth_params *sp) {
    setup_moe(sp);
    sp->n_swa = 8;
}
static void setup_shexp(synth_params *sp) {
    setup_moe(sp);
    sp->n_ff_shexp = 32;
}
/* experts in Q8_0 beside an F32 shared expert: two activation types */
static void setup_shexp_apart(synth_params *sp) {
    setup_shexp(sp);
    sp->exp_type = VT_DTYPE_Q8_0;
}
/* sliding layers 0 and 2, rotating with a base of their own */
static void setup_swa(synth_params *sp) {
    sp->n_swa = 8;
    sp->swa_pattern = 2;
    sp->rope_freq_base = 1e6f;
    sp->rope_freq_base_swa = 10000.0f;
}
static void setup_gemma2(synth_params *sp) { /* sliding, on the global base */
    sp->n_swa = 8;
    sp->swa_pattern = 2;
}
static void setup_muse(synth_params *sp) { /* sliding 0..2, full 3 */
    sp->n_swa = 8;
    sp->swa_pattern = 4;
    sp->rope_freq_base = 1e6f;
    sp->rope_freq_base_swa = 10000.0f;
}
static void setup_glm4(synth_params *sp) { sp->fused_qkv = true; }
/* OLMo 3 with YaRN: sliding 0..2 on plain rope (their own group), full 3 scaled */
static void setup_olmo3_yarn(synth_params *sp) {
    sp->n_swa = 8;
    sp->swa_pattern = 4;
    sp->yarn_factor = 4.0f;
}
/* the same pattern as one bool per layer (OLMo 3's converter) */
static void setup_olmo3_arr(synth_params *sp) {
    setup_olmo3_yarn(sp);
    sp->swa_pattern_arr = true;
}
static void setup_muse_arr(synth_params *sp) {
    setup_muse(sp);
    sp->swa_pattern_arr = true;
}
/* a per-layer array off any period (layers 1 and 2 slide), which llama.cpp's
 * muse-glimmer reads layer by layer */
static void setup_muse_layers(synth_params *sp) {
    setup_muse(sp);
    sp->swa_layers = "0110";
}
/* gemma3's default period 6 as an array (its llama.cpp ignores the array; of
 * 4 layers all slide) */
static void setup_gemma3_arr(synth_params *sp) {
    setup_swa(sp);
    sp->swa_pattern = 6;
    sp->swa_pattern_arr = true;
}

static const kind_case k_cases[] = {
    {.arch = "llama", .kinds = ALL4("attn rope=base qk=none gate=none " DENSE)},
    {.arch = "llama",
     .setup = setup_moe,
     .kinds = ALL4("attn rope=base qk=none gate=none norms=pre ffn=moe out=add/moe")},
    {.arch = "qwen2", .kinds = ALL4("attn rope=base qk=none gate=none qkv_bias " DENSE)},
    {.arch = "qwen3", .kinds = ALL4("attn rope=base qk=head gate=none " DENSE)},
    {.arch = "qwen3moe",
     .setup = setup_moe,
     .kinds = ALL4("attn rope=base qk=head gate=none norms=pre ffn=moe out=add/moe")},
    {.arch = "gemma2", .setup = setup_gemma2, .kinds = ALL4("attn rope=base qk=none gate=none " SANDWICH)},
    {.arch = "gemma3",
     .setup = setup_swa,
     .kinds = {"attn rope=swa qk=head gate=none " SANDWICH, "attn rope=base qk=head gate=none " SANDWICH,
               "attn rope=swa qk=head gate=none " SANDWICH, "attn rope=base qk=head gate=none " SANDWICH}},
    {.arch = "olmo2", .kinds = ALL4("attn rope=base qk=row gate=none norms=post ffn=dense out=post_norm/post_norm")},
    {.arch = "olmo2",
     .setup = setup_olmo3_yarn,
     .kinds = {"attn rope=swa qk=row gate=none " OLMO2, "attn rope=swa qk=row gate=none " OLMO2,
               "attn rope=swa qk=row gate=none " OLMO2, "attn rope=base qk=row gate=none " OLMO2}},
    {.arch = "smollm3",
     .kinds = {"attn rope=base qk=none gate=none " DENSE, "attn rope=base qk=none gate=none " DENSE,
               "attn rope=base qk=none gate=none " DENSE, "attn rope=none qk=none gate=none " DENSE}},
    {.arch = "granite", .kinds = ALL4("attn rope=base qk=none gate=none norms=pre ffn=dense out=scaled/scaled")},
    {.arch = "gpt-oss",
     .setup = setup_gpt_oss,
     .kinds = ALL4("attn rope=base qk=none gate=none qkv_bias norms=pre ffn=moe split out=bias/moe")},
    {.arch = "phi3", .kinds = ALL4("attn rope=base qk=none gate=none " DENSE)},
    {.arch = "glm4", .setup = setup_glm4, .kinds = ALL4("attn rope=base qk=none gate=none qkv_bias " SANDWICH)},
    {.arch = "mistral3", .kinds = ALL4("attn rope=base qk=none gate=none q_temp " DENSE)},
    {.arch = "muse-glimmer",
     .setup = setup_muse,
     .kinds = {"attn rope=swa qk=head gate=matrix " SANDWICH, "attn rope=swa qk=head gate=matrix " SANDWICH,
               "attn rope=swa qk=head gate=matrix " SANDWICH, "attn rope=none qk=head gate=matrix " SANDWICH}},
    {.arch = "olmo2",
     .setup = setup_olmo3_arr,
     .kinds = {"attn rope=swa qk=row gate=none " OLMO2, "attn rope=swa qk=row gate=none " OLMO2,
               "attn rope=swa qk=row gate=none " OLMO2, "attn rope=base qk=row gate=none " OLMO2}},
    {.arch = "muse-glimmer",
     .setup = setup_muse_arr,
     .kinds = {"attn rope=swa qk=head gate=matrix " SANDWICH, "attn rope=swa qk=head gate=matrix " SANDWICH,
               "attn rope=swa qk=head gate=matrix " SANDWICH, "attn rope=none qk=head gate=matrix " SANDWICH}},
    {.arch = "muse-glimmer",
     .setup = setup_muse_layers,
     .kinds = {"attn rope=none qk=head gate=matrix " SANDWICH, "attn rope=swa qk=head gate=matrix " SANDWICH,
               "attn rope=swa qk=head gate=matrix " SANDWICH, "attn rope=none qk=head gate=matrix " SANDWICH}},
    {.arch = "gemma3", .setup = setup_gemma3_arr, .kinds = ALL4("attn rope=swa qk=head gate=none " SANDWICH)},
    {.arch = "qwen35",
     .kinds = {"deltanet " DENSE, "deltanet " DENSE, "deltanet " DENSE, "attn rope=base qk=head gate=in_q " DENSE}},
    {.arch = "qwen35moe",
     .setup = setup_shexp,
     .kinds = {"deltanet " SHARED, "deltanet " SHARED, "deltanet " SHARED,
               "attn rope=base qk=head gate=in_q " SHARED}},
    {.arch = "qwen35moe",
     .setup = setup_shexp_apart,
     .kinds = {"deltanet " APART, "deltanet " APART, "deltanet " APART, "attn rope=base qk=head gate=in_q " APART}},
};

static vt_model *load_case(const kind_case *c) {
    synth_params sp = synth_default_params();
    sp.arch = c->arch;
    sp.n_layer = N_LAYER;
    sp.n_embd = 64;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.n_ff = 64;
    sp.n_threads = 1;
    if (c->setup) c->setup(&sp);
    return test_synth_load(&sp, NULL);
}

static void test_kinds(void) {
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const kind_case *c = &k_cases[i];
        vt_model *m = load_case(c);
        if (!m) continue;
        CHECK_EQ_INT(m->hp.n_layer, N_LAYER);
        for (int64_t il = 0; il < m->hp.n_layer && il < N_LAYER; il++) {
            char got[160];
            layer_kind_str(&m->layers[il].kind, got, sizeof got);
            CHECK_MSG(!strcmp(got, c->kinds[il]), "%s%s layer %lld: '%s', expected '%s'", c->arch,
                      c->setup ? " (set up)" : "", (long long)il, got, c->kinds[il]);
        }
        vt_model_free(m);
    }
}

/* A per-head QK-norm on one of Q and K only would run half of it: refused. */
static void test_half_qk_norm(void) {
    vt_model *m = load_case(&k_cases[3]); /* qwen3 */
    if (!m) return;
    layer_weights *L = &m->layers[1];
    const float *kn = L->k_norm;
    L->k_norm = NULL;
    layer_kind k;
    CHECK(layer_kind_decide(m, 1, &k) == VT_E_UNSUPPORTED);
    CHECK_MSG(strstr(vt_last_error(), "blk.1") != NULL, "%s", vt_last_error());
    L->k_norm = kn;
    CHECK_OK(layer_kind_decide(m, 1, &k));
    vt_model_free(m);
}

/* moe_split follows the experts' biases, decided at load: a qwen3moe layer given
 * gate biases becomes split, and plain again without them. */
static void test_moe_split(void) {
    vt_model *m = load_case(&k_cases[4]); /* qwen3moe */
    if (!m) return;
    layer_weights *L = &m->layers[2];
    layer_kind k;
    CHECK_OK(layer_kind_decide(m, 2, &k));
    CHECK(!k.moe_split && !k.shexp_apart);
    static const float bias[4 * 32];
    L->exp_gate_b = bias;
    CHECK_OK(layer_kind_decide(m, 2, &k));
    CHECK(k.moe_split);
    L->exp_gate_b = NULL;
    vt_model_free(m);
}

int main(void) {
    test_kinds();
    test_half_qk_norm();
    test_moe_split();
    return test_finish();
}
