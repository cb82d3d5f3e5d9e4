/* vt synth: write a synthetic GGUF (random weights, real shape) for tests and
 * benchmarks. The generator is src/model/synth.c. */
#include "base/outfile.h"
#include "cmds.h"
#include "opts.h"
#include "model/synth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void more_help(FILE *f) {
    fprintf(f, "The 1B-class benchmark shape:\n"
               "  vt synth --layers 16 --embd 2048 --heads 32 --kv-heads 8 --ff 8192 --ctx 2048 \\\n"
               "     --vocab-from ../shared/models/vocab/ggml-vocab-llama-spm.gguf --type q4_0 -o 1b-q4_0.gguf\n"
               "Qwen3-30B-A3B's layer shape, 4 layers:\n"
               "  vt synth --arch qwen3moe --layers 4 --embd 2048 --heads 32 --kv-heads 4 --head-dim 128 \\\n"
               "     --ff 6144 --experts 128 --experts-used 8 --expert-ff 768 --ctx 4096 \\\n"
               "     --vocab-from ../shared/models/vocab/ggml-vocab-qwen2.gguf --type q4_k -o moe.gguf\n"
               "Qwen3.6-35B-A3B's layer shape, 4 layers (3 Gated DeltaNet, 1 full attention):\n"
               "  vt synth --arch qwen35moe --layers 4 --embd 2048 --heads 16 --kv-heads 2 --head-dim 256 \\\n"
               "     --ff 512 --experts 256 --experts-used 8 --expert-ff 512 --shared-ff 512 --ssm-state 128 \\\n"
               "     --ssm-k-heads 16 --ssm-v-heads 32 --ctx 4096 \\\n"
               "     --vocab-from ../shared/models/vocab/ggml-vocab-qwen35.gguf --type q4_k -o q36moe.gguf\n"
               "gpt-oss-20b's layer shape, 2 layers, MXFP4 experts:\n"
               "  vt synth --arch gpt-oss --layers 2 --embd 2880 --heads 64 --kv-heads 8 --head-dim 64 \\\n"
               "     --ff 2880 --experts 32 --experts-used 4 --expert-ff 2880 --swa 128 --ctx 4096 \\\n"
               "     --yarn-factor 32 --yarn-orig-ctx 4096 --rope-base 150000 --type q8_0 --expert-type mxfp4 \\\n"
               "     --vocab-from ../shared/models/vocab/ggml-vocab-llama-bpe.gguf -o gpt-oss.gguf\n");
}

static bool parse_i64(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 0);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static bool parse_type(const char *s, vt_dtype *out);

/* OPT_FN parsers: the value into the synth_params field dst */
static bool opt_i64(const char *o, const char *v, void *dst) {
    if (parse_i64(v, dst)) return true;
    fprintf(stderr, "vt synth: %s: '%s' is not an integer\n", o, v);
    return false;
}
static bool opt_seed(const char *o, const char *v, void *dst) {
    int64_t n;
    if (!opt_i64(o, v, &n)) return false;
    *(uint64_t *)dst = (uint64_t)n;
    return true;
}
static bool opt_threads(const char *o, const char *v, void *dst) {
    int64_t n;
    if (!parse_i64(v, &n) || n < 0 || n > 1024) {
        fprintf(stderr, "vt synth: %s: '%s' is not an integer in [0, 1024]\n", o, v);
        return false;
    }
    *(int *)dst = (int)n;
    return true;
}
static bool opt_rope(const char *o, const char *v, void *dst) {
    char *end;
    const float x = strtof(v, &end);
    if (end == v || *end || !(x > 0)) {
        fprintf(stderr, "vt synth: %s: '%s' is not a positive number\n", o, v);
        return false;
    }
    *(float *)dst = x;
    return true;
}
static bool opt_type(const char *o, const char *v, void *dst) {
    if (parse_type(v, dst)) return true;
    fprintf(stderr, "vt synth: %s: unknown type '%s'\n", o, v);
    return false;
}

static bool parse_type(const char *s, vt_dtype *out) {
    static const vt_dtype allowed[] = {
        VT_DTYPE_F32,  VT_DTYPE_F16,  VT_DTYPE_BF16, VT_DTYPE_Q4_0,   VT_DTYPE_Q4_1,
        VT_DTYPE_Q5_0, VT_DTYPE_Q5_1, VT_DTYPE_Q8_0, VT_DTYPE_Q2_K,   VT_DTYPE_Q3_K,
        VT_DTYPE_Q4_K, VT_DTYPE_Q5_K, VT_DTYPE_Q6_K, VT_DTYPE_IQ4_NL, VT_DTYPE_IQ4_XS,
        VT_DTYPE_MXFP4,
    };
    for (size_t i = 0; s && i < sizeof allowed / sizeof allowed[0]; i++) {
        const quant_traits *t = quant_traits_get(allowed[i]);
        if (t && !strcasecmp(t->name, s)) {
            *out = allowed[i];
            return true;
        }
    }
    return false;
}

int cmd_synth(int argc, char **argv) {
    synth_params p = synth_default_params();
    const char *out = NULL;
    bool quiet = false;
    const opt table[] = {
        {.name = {"--arch"}, .kind = OPT_STR, .dst = &p.arch, .arg = "A", .help = "llama | qwen2 | qwen3 | qwen3moe | gemma2 | gemma3 |\nolmo2 | smollm3 | granite | qwen35 | qwen35moe | gpt-oss |\nphi3 | glm4 | mistral3 | muse-glimmer (default llama)"},
        {.name = {"--layers"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_layer, .arg = "N", .help = "blocks (default 2)"},
        {.name = {"--embd"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_embd, .arg = "N",
         .help = "embedding width (default 256)"},
        {.name = {"--heads"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_head, .arg = "N",
         .help = "attention heads (default 4)"},
        {.name = {"--kv-heads"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_head_kv, .arg = "N",
         .help = "KV heads (default 2)"},
        {.name = {"--head-dim"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.head_dim, .arg = "N",
         .help = "per-head width (default embd / heads)"},
        {.name = {"--ff"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_ff, .arg = "N",
         .help = "feed-forward width (default 512)"},
        {.name = {"--experts"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_expert, .arg = "N",
         .help = "mixture of experts: N experts per layer (qwen3moe,\nqwen35moe; llama: Mixtral's layout, experts --ff wide)"},
        {.name = {"--experts-used"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_expert_used, .arg = "N",
         .help = "experts per token (default 2)"},
        {.name = {"--expert-ff"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_ff_exp, .arg = "N",
         .help = "qwen3moe, qwen35moe, gpt-oss: rows of an expert's gate/up\n(default --ff)"},
        {.name = {"--shared-ff"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_ff_shexp, .arg = "N",
         .help = "qwen35moe: rows of the shared expert's gate/up (default --ff)"},
        {.name = {"--nextn"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_nextn, .arg = "N",
         .help = "qwen35, qwen35moe: N multi-token-prediction layers after\nthe trunk (default 0)"},
        {.name = {"--swa"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_swa, .arg = "N",
         .help = "llama, gemma, olmo2, gpt-oss and muse-glimmer (required):\na sliding window of N positions (default none)"},
        {.name = {"--swa-pattern"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.swa_pattern, .arg = "N",
         .help = "... on layers il % N < N - 1 (0, the default: every layer;\ngpt-oss: no key, period 2)"},
        {.name = {"--swa-pattern-array"}, .kind = OPT_FLAG, .dst = &p.swa_pattern_arr,
         .help = "gemma2, gemma3, olmo2, gpt-oss, muse-glimmer: write that\npattern as one bool per layer (OLMo 3's converter's form)"},
        {.name = {"--swa-layers"}, .kind = OPT_STR, .dst = &p.swa_layers, .arg = "BITS",
         .help = "the same arches: the per-layer array itself, one 0 or 1\nper layer (1: slides), e.g. 0110 for 4 layers"},
        {.name = {"--swa-rope-base"}, .kind = OPT_FN, .fn = opt_rope, .dst = &p.rope_freq_base_swa, .arg = "F",
         .help = "gemma, muse-glimmer, gpt-oss: rope.freq_base_swa, the\nsliding layers' base"},
        {.name = {"--attn-softcap"}, .kind = OPT_FN, .fn = opt_rope, .dst = &p.attn_softcap, .arg = "F",
         .help = "gemma2: attn_logit_softcapping (default: none written, 50)"},
        {.name = {"--final-softcap"}, .kind = OPT_FN, .fn = opt_rope, .dst = &p.final_softcap, .arg = "F",
         .help = "gemma, muse-glimmer: final_logit_softcapping"},
        {.name = {"--ssm-state"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.ssm_d_state, .arg = "N",
         .help = "qwen35: head size of the linear layers (default --head-dim)"},
        {.name = {"--ssm-k-heads"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.ssm_n_k_heads, .arg = "N",
         .help = "qwen35: q/k heads of the linear layers (default --kv-heads)"},
        {.name = {"--ssm-v-heads"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.ssm_n_v_heads, .arg = "N",
         .help = "qwen35: v heads of the linear layers (default --heads)"},
        {.name = {"--ssm-conv"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.ssm_conv_kernel, .arg = "N",
         .help = "qwen35: conv kernel of the linear layers (default 4)"},
        {.name = {"--full-attn-interval"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.full_attn_interval, .arg = "N",
         .help = "qwen35: every N-th layer attends fully (default 4)"},
        {.name = {"--ctx"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_ctx, .arg = "N",
         .help = "context_length (default 256)"},
        {.name = {"--vocab-from"}, .kind = OPT_STR, .dst = &p.vocab_path, .arg = "F",
         .help = "copy the tokenizer.* keys of GGUF F (vocab size from it)"},
        {.name = {"--control-tokens"}, .kind = OPT_STR, .dst = &p.control_tokens, .arg = "LIST",
         .help = "comma-separated texts that replace the vocabulary's last\ntokens as control tokens (a chat format's markers)"},
        {.name = {"--vocab"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.n_vocab, .arg = "N",
         .help = "generated SentencePiece vocabulary of N tokens (default 512)"},
        {.name = {"--type"}, .kind = OPT_FN, .fn = opt_type, .dst = &p.type, .arg = "T",
         .help = "matrices: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k\n"
                 "q4_k q5_k q6_k iq4_nl iq4_xs mxfp4 (default f32)"},
        {.name = {"--expert-type"}, .kind = OPT_FN, .fn = opt_type, .dst = &p.exp_type, .arg = "T",
         .help = "ffn_*_exps (default: --type)"},
        {.name = {"--yarn-factor"}, .kind = OPT_FN, .fn = opt_rope, .dst = &p.yarn_factor, .arg = "F",
         .help = "rope.scaling.type yarn with this factor (default none)"},
        {.name = {"--yarn-orig-ctx"}, .kind = OPT_FN, .fn = opt_i64, .dst = &p.yarn_orig_ctx, .arg = "N",
         .help = "its rope.scaling.original_context_length (default --ctx;\nphi3: LongRoPE's, long factors in contexts past it)"},
        {.name = {"--embd-type"}, .kind = OPT_FN, .fn = opt_type, .dst = &p.embd_type, .arg = "T",
         .help = "token_embd.weight (default: --type)"},
        {.name = {"--output-type"}, .kind = OPT_FN, .fn = opt_type, .dst = &p.output_type, .arg = "T",
         .help = "output.weight (default: --type)"},
        {.name = {"--tied"}, .kind = OPT_FLAG, .dst = &p.tied, .help = "no output.weight (the head reuses token_embd)"},
        {.name = {"--rope-base"}, .kind = OPT_FN, .fn = opt_rope, .dst = &p.rope_freq_base, .arg = "F",
         .help = "rope.freq_base (default 10000 llama, 1e6 qwen)"},
        {.name = {"--seed"}, .kind = OPT_FN, .fn = opt_seed, .dst = &p.seed, .arg = "N", .help = "(default 1)"},
        {.name = {"-t", "--threads"}, .kind = OPT_FN, .fn = opt_threads, .dst = &p.n_threads, .arg = "N",
         .help = "threads (default: physical cores)"},
        {.name = {"-q", "--quiet"}, .kind = OPT_FLAG, .dst = &quiet, .help = "no progress line"},
        {.name = {"-o", "--output"}, .kind = OPT_STR, .dst = &out, .arg = "OUT",
         .help = "output file (required; written to a temporary name, then renamed)"},
    };
    const opts_cmd cmd = {.name = "synth", .usage = "vt synth [options] -o OUT.gguf",
                          .intro = "Write a model with random N(0, 0.02) weights and norms of 1.0, reproducible from\n"
                                   "the seed, in the shape and weight type given.\n",
                          .opts = table, .n_opts = (int)(sizeof table / sizeof table[0]), .more = more_help};
    const int prc = opts_parse(&cmd, argc, argv, NULL, NULL, NULL);
    if (prc >= 0) return prc;
    p.progress = !quiet;
    if (!out) {
        fprintf(stderr, "vt synth: -o OUT is required\n\n");
        opts_usage(&cmd, stderr);
        return 2;
    }
    outfile_cleanup_on_signals(); /* Ctrl-C while writing leaves no temporary file */
    vt_status s = synth_write(&p, out);
    if (s != VT_OK) {
        fprintf(stderr, "vt synth: %s\n", vt_last_error());
        return 1;
    }
    return 0;
}
