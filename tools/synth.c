/* vt synth: write a synthetic GGUF (random weights, real shape) for tests and
 * benchmarks. The generator is src/model/synth.c. */
#include "cmds.h"
#include "model/synth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void print_usage(FILE *f) {
    fprintf(f,
            "usage: vt synth [options] -o OUT.gguf\n\n"
            "Write a model with random N(0, 0.02) weights and norms of 1.0, reproducible from\n"
            "the seed, in the shape and weight type given.\n\n"
            "options:\n"
            "  --arch A          llama | qwen2 | qwen3 | qwen3moe (default llama)\n"
            "  --layers N        blocks (default 2)\n"
            "  --embd N          embedding width (default 256)\n"
            "  --heads N         attention heads (default 4)\n"
            "  --kv-heads N      KV heads (default 2)\n"
            "  --head-dim N      per-head width (default embd / heads)\n"
            "  --ff N            feed-forward width (default 512)\n"
            "  --experts N       mixture of experts: N experts per layer (qwen3moe; llama:\n"
            "                    Mixtral's layout, experts --ff wide)\n"
            "  --experts-used N  experts per token (default 2)\n"
            "  --expert-ff N     qwen3moe: rows of an expert's gate/up (default --ff)\n"
            "  --ctx N           context_length (default 256)\n"
            "  --vocab-from F    copy the tokenizer.* keys of GGUF F (vocab size from it)\n"
            "  --vocab N         generated SentencePiece vocabulary of N tokens (default 512)\n"
            "  --type T          matrices: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k\n"
            "                    q4_k q5_k q6_k iq4_nl iq4_xs (default f32)\n"
            "  --embd-type T     token_embd.weight (default: --type)\n"
            "  --output-type T   output.weight (default: --type)\n"
            "  --tied            no output.weight (the head reuses token_embd)\n"
            "  --rope-base F     rope.freq_base (default 10000 llama, 1e6 qwen)\n"
            "  --yarn F          YaRN rope scaling by factor F\n"
            "  --yarn-orig-ctx N its original context length (default --ctx)\n"
            "  --seed N          (default 1)\n"
            "  -t N              threads (default: physical cores)\n"
            "  -q                no progress line\n"
            "  -o OUT            output file (required)\n\n"
            "The 1B-class benchmark shape:\n"
            "  vt synth --layers 16 --embd 2048 --heads 32 --kv-heads 8 --ff 8192 --ctx 2048 \\\n"
            "     --vocab-from ../shared/models/vocab/ggml-vocab-llama-spm.gguf --type q4_0 -o 1b-q4_0.gguf\n"
            "Qwen3-30B-A3B's layer shape, 4 layers:\n"
            "  vt synth --arch qwen3moe --layers 4 --embd 2048 --heads 32 --kv-heads 4 --head-dim 128 \\\n"
            "     --ff 6144 --experts 128 --experts-used 8 --expert-ff 768 --ctx 4096 \\\n"
            "     --vocab-from ../shared/models/vocab/ggml-vocab-qwen2.gguf --type q4_k -o moe.gguf\n");
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

static bool parse_type(const char *s, vt_dtype *out) {
    static const vt_dtype allowed[] = {
        VT_DTYPE_F32,  VT_DTYPE_F16,  VT_DTYPE_BF16, VT_DTYPE_Q4_0,   VT_DTYPE_Q4_1,
        VT_DTYPE_Q5_0, VT_DTYPE_Q5_1, VT_DTYPE_Q8_0, VT_DTYPE_Q2_K,   VT_DTYPE_Q3_K,
        VT_DTYPE_Q4_K, VT_DTYPE_Q5_K, VT_DTYPE_Q6_K, VT_DTYPE_IQ4_NL, VT_DTYPE_IQ4_XS,
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
    p.progress = true;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n = 0;
        bool ok = true, takes = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            print_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--tied")) {
            p.tied = true;
            takes = false;
        } else if (!strcmp(a, "-q")) {
            p.progress = false;
            takes = false;
        } else if (!v) {
            fprintf(stderr, "vt synth: %s needs a value\n", a);
            return 2;
        } else if (!strcmp(a, "--arch")) {
            p.arch = v;
        } else if (!strcmp(a, "--vocab-from")) {
            p.vocab_path = v;
        } else if (!strcmp(a, "-o")) {
            out = v;
        } else if (!strcmp(a, "--type")) {
            ok = parse_type(v, &p.type);
        } else if (!strcmp(a, "--embd-type")) {
            ok = parse_type(v, &p.embd_type);
        } else if (!strcmp(a, "--output-type")) {
            ok = parse_type(v, &p.output_type);
        } else if (!strcmp(a, "--rope-base")) {
            char *end;
            p.rope_freq_base = strtof(v, &end);
            ok = *end == 0 && p.rope_freq_base > 0;
        } else if (!strcmp(a, "--yarn")) {
            char *end;
            p.yarn_factor = strtof(v, &end);
            ok = *end == 0 && p.yarn_factor > 0;
        } else if (!strcmp(a, "--seed")) {
            ok = parse_i64(v, &n);
            p.seed = (uint64_t)n;
        } else {
            ok = parse_i64(v, &n);
            if (!strcmp(a, "--layers")) p.n_layer = n;
            else if (!strcmp(a, "--embd")) p.n_embd = n;
            else if (!strcmp(a, "--heads")) p.n_head = n;
            else if (!strcmp(a, "--kv-heads")) p.n_head_kv = n;
            else if (!strcmp(a, "--head-dim")) p.head_dim = n;
            else if (!strcmp(a, "--ff")) p.n_ff = n;
            else if (!strcmp(a, "--experts")) p.n_expert = n;
            else if (!strcmp(a, "--experts-used")) p.n_expert_used = n;
            else if (!strcmp(a, "--expert-ff")) p.n_ff_exp = n;
            else if (!strcmp(a, "--ctx")) p.n_ctx = n;
            else if (!strcmp(a, "--yarn-orig-ctx")) p.yarn_orig_ctx = n;
            else if (!strcmp(a, "--vocab")) p.n_vocab = n;
            else if (!strcmp(a, "-t")) p.n_threads = (int)(n < 0 || n > 1024 ? -1 : n), ok = ok && n >= 0 && n <= 1024;
            else {
                fprintf(stderr, "vt synth: unknown option '%s'\n\n", a);
                print_usage(stderr);
                return 2;
            }
        }
        if (!ok) {
            fprintf(stderr, "vt synth: bad value '%s' for %s\n", v ? v : "", a);
            return 2;
        }
        if (takes) i++;
    }
    if (!out) {
        fprintf(stderr, "vt synth: -o OUT is required\n\n");
        print_usage(stderr);
        return 2;
    }
    vt_status s = synth_write(&p, out);
    if (s != VT_OK) {
        fprintf(stderr, "vt synth: %s\n", vt_last_error());
        return 1;
    }
    return 0;
}
