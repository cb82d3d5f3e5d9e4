/* vt run: generate text from a prompt, streaming it to stdout; timings to stderr. */
#include "args.h"
#include "cmds.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"
#include "vt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void usage(void) {
    fprintf(stderr,
            "usage: vt run -m MODEL [options]\n"
            "  -m, --model FILE        GGUF model\n"
            "  -p, --prompt TEXT       prompt (default: empty, generation starts from BOS)\n"
            "  -f, --file FILE         read the prompt from a file\n"
            "  -n, --n-predict N       tokens to generate (default 128; -1: until EOS or context end)\n"
            "  -t, --threads N         threads (default: physical cores)\n"
            "  -c, --ctx-size N        context size (default: min(training context, 4096))\n"
            "  -b, --batch-size N      prompt tokens per forward pass (default 512)\n"
            "  --temp T                temperature (default 0.8; 0 = greedy)\n"
            "  --top-k K               (default 40; 0 = off)\n"
            "  --top-p P               (default 0.95; 1 = off)\n"
            "  --min-p P               (default 0.05; 0 = off)\n"
            "  --repeat-penalty X      (default 1.0 = off)\n"
            "  --repeat-last-n N       penalty window (default 64)\n"
            "  --presence-penalty X    (default 0)\n"
            "  --frequency-penalty X   (default 0)\n"
            "  --seed N                sampling seed (default: random)\n"
            "  -ctk, --cache-type-k T  f16 (default), bf16, f32, q8_0\n"
            "  -ctv, --cache-type-v T\n"
            "  --ignore-eos            keep generating past end-of-generation tokens\n"
            "  --no-display-prompt     do not echo the prompt\n");
}

static bool parse_kv_type(const char *opt, const char *s, vt_kv_type *out) {
    static const struct { const char *name; vt_kv_type t; } types[] = {
        {"f16", VT_KV_F16}, {"bf16", VT_KV_BF16}, {"f32", VT_KV_F32}, {"q8_0", VT_KV_Q8_0}};
    for (size_t i = 0; s && i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(s, types[i].name)) {
            *out = types[i].t;
            return true;
        }
    fprintf(stderr, "vt: %s: unknown KV cache type '%s' (f16, bf16, f32, q8_0)\n", opt, s ? s : "");
    return false;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf) buf[n < cap ? n : cap - 1] = 0;
    *len = n;
    return buf;
}

/* Streams token pieces to stdout, holding back an incomplete UTF-8 tail and the
 * leading space of the very first piece (SentencePiece's word-start marker). */
typedef struct streamer {
    char pending[64];
    size_t n_pending;
    bool started;
} streamer;

static void stream_piece(streamer *st, const vt_model *m, int32_t tok) {
    char buf[256];
    int64_t n = vt_token_piece(m, tok, buf, sizeof buf);
    if (n <= 0) return;
    if (n > (int64_t)sizeof buf) n = sizeof buf;
    const char *p = buf;
    if (!st->started && n > 0 && p[0] == ' ') p++, n--;
    if (n == 0) return;
    st->started = true;
    if (st->n_pending + (size_t)n > sizeof st->pending) {
        fwrite(st->pending, 1, st->n_pending, stdout);
        st->n_pending = 0;
    }
    memcpy(st->pending + st->n_pending, p, (size_t)n);
    st->n_pending += (size_t)n;
    size_t ok = tok_utf8_complete_prefix(st->pending, st->n_pending);
    fwrite(st->pending, 1, ok, stdout);
    memmove(st->pending, st->pending + ok, st->n_pending - ok);
    st->n_pending -= ok;
    fflush(stdout);
}

int cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL;
    long long n_predict = 128, n_threads = 0, n_ctx = 0, n_batch = 512, seed = -1, last_n = 64,
              top_k = 40;
    double temp = 0.8, top_p = 0.95, min_p = 0.05, rep = 1.0, pres = 0.0, freq = 0.0;
    bool ignore_eos = false, display_prompt = true;
    vt_kv_type tk = VT_KV_F16, tv = VT_KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
#define OPT(s, l) (!strcmp(a, s) || !strcmp(a, l))
#define VAL() ((v = arg_value(argc, argv, &i)) != NULL)
        if (OPT("-h", "--help")) { usage(); return 0; }
        else if (OPT("-m", "--model")) { if (!VAL()) return 2; model_path = v; }
        else if (OPT("-p", "--prompt")) { if (!VAL()) return 2; prompt = v; }
        else if (OPT("-f", "--file")) { if (!VAL()) return 2; prompt_file = v; }
        else if (OPT("-n", "--n-predict")) { if (!VAL() || !arg_int(a, v, -1, 1 << 24, &n_predict)) return 2; }
        else if (OPT("-t", "--threads")) { if (!VAL() || !arg_int(a, v, 0, 1024, &n_threads)) return 2; }
        else if (OPT("-c", "--ctx-size")) { if (!VAL() || !arg_int(a, v, 0, 1 << 24, &n_ctx)) return 2; }
        else if (OPT("-b", "--batch-size")) { if (!VAL() || !arg_int(a, v, 1, 1 << 16, &n_batch)) return 2; }
        else if (OPT("--temp", "--temperature")) { if (!VAL() || !arg_float(a, v, 0, 100, &temp)) return 2; }
        else if (OPT("--top-k", "--top-k")) { if (!VAL() || !arg_int(a, v, 0, 1 << 24, &top_k)) return 2; }
        else if (OPT("--top-p", "--top-p")) { if (!VAL() || !arg_float(a, v, 0, 1, &top_p)) return 2; }
        else if (OPT("--min-p", "--min-p")) { if (!VAL() || !arg_float(a, v, 0, 1, &min_p)) return 2; }
        else if (OPT("--repeat-penalty", "--repeat-penalty")) { if (!VAL() || !arg_float(a, v, 0.0001, 100, &rep)) return 2; }
        else if (OPT("--repeat-last-n", "--repeat-last-n")) { if (!VAL() || !arg_int(a, v, 0, 1 << 20, &last_n)) return 2; }
        else if (OPT("--presence-penalty", "--presence-penalty")) { if (!VAL() || !arg_float(a, v, -100, 100, &pres)) return 2; }
        else if (OPT("--frequency-penalty", "--frequency-penalty")) { if (!VAL() || !arg_float(a, v, -100, 100, &freq)) return 2; }
        else if (OPT("--seed", "-s")) { if (!VAL() || !arg_int(a, v, -1, INT64_MAX, &seed)) return 2; }
        else if (OPT("-ctk", "--cache-type-k")) { if (!VAL() || !parse_kv_type(a, v, &tk)) return 2; }
        else if (OPT("-ctv", "--cache-type-v")) { if (!VAL() || !parse_kv_type(a, v, &tv)) return 2; }
        else if (OPT("--ignore-eos", "--ignore-eos")) ignore_eos = true;
        else if (OPT("--no-display-prompt", "--no-display-prompt")) display_prompt = false;
        else {
            fprintf(stderr, "vt run: unknown option '%s'\n", a);
            usage();
            return 2;
        }
#undef OPT
#undef VAL
    }
    if (!model_path) {
        fprintf(stderr, "vt run: -m MODEL is required\n");
        usage();
        return 2;
    }
    char *prompt_buf = NULL;
    size_t prompt_len = prompt ? strlen(prompt) : 0;
    if (prompt_file) {
        prompt_buf = read_file(prompt_file, &prompt_len);
        if (!prompt_buf) {
            fprintf(stderr, "vt run: cannot read prompt file '%s'\n", prompt_file);
            return 1;
        }
        prompt = prompt_buf;
    }
    if (!prompt) prompt = "";

    int rc = 1;
    vt_model *model = NULL;
    vt_context *ctx = NULL;
    sampler *smp = NULL;
    int32_t *ids = NULL;
    const double t_load0 = now_ms();
    vt_model_params mp = vt_model_default_params();
    mp.progress = isatty(STDERR_FILENO);
    if (vt_model_load(model_path, &mp, &model) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        goto done;
    }
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = (int32_t)(n_ctx > 0 ? n_ctx : (vt_model_n_ctx_train(model) < 4096 ? vt_model_n_ctx_train(model) : 4096));
    cp.n_batch = (int32_t)n_batch;
    cp.n_threads = (int32_t)n_threads;
    cp.type_k = tk;
    cp.type_v = tv;
    if (vt_context_create(model, &cp, &ctx) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        goto done;
    }
    const double t_load = now_ms() - t_load0;

    int64_t n_ids = 0;
    if (vt_tokenize(model, prompt, prompt_len, true, true, &ids, &n_ids) != VT_OK) {
        fprintf(stderr, "vt: tokenize: %s\n", vt_last_error());
        goto done;
    }
    if (n_ids == 0) {
        fprintf(stderr, "vt: the prompt is empty and the model has no BOS token to start from\n");
        goto done;
    }
    if (n_ids >= cp.n_ctx) {
        fprintf(stderr, "vt: the prompt is %lld tokens, but the context holds %d (use -c)\n",
                (long long)n_ids, cp.n_ctx);
        goto done;
    }

    sampler_params sp = sampler_default_params();
    sp.temperature = (float)temp;
    sp.top_k = (int32_t)top_k;
    sp.top_p = (float)top_p;
    sp.min_p = (float)min_p;
    sp.repeat_penalty = (float)rep;
    sp.presence_penalty = (float)pres;
    sp.frequency_penalty = (float)freq;
    sp.penalty_last_n = (int32_t)last_n;
    sp.seed = seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (sampler_create(&sp, vt_model_n_vocab(model), &smp) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        goto done;
    }
    for (int64_t i = 0; i < n_ids; i++) sampler_accept(smp, ids[i]);

    streamer st = {0};
    if (display_prompt)
        for (int64_t i = 0; i < n_ids; i++) {
            if (ids[i] == vt_model_bos(model)) continue;
            stream_piece(&st, model, ids[i]);
        }

    /* Prompt: one call; the context slices it into n_batch passes. */
    const size_t n_prompt = (size_t)(uint32_t)n_ids; /* 0 < n_ids < n_ctx, checked above */
    int32_t *pos = malloc(sizeof(int32_t) * n_prompt), *seq = calloc(n_prompt, sizeof(int32_t));
    if (!pos || !seq) {
        free(pos);
        free(seq);
        fprintf(stderr, "vt: out of memory\n");
        goto done;
    }
    for (int64_t i = 0; i < n_ids; i++) pos[i] = (int32_t)i;
    const double t_p0 = now_ms();
    vt_batch batch = {.n_tokens = (int32_t)n_ids, .token = ids, .pos = pos, .seq = seq, .logits = NULL};
    vt_status s = vt_decode(ctx, &batch);
    free(pos);
    free(seq);
    if (s != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        goto done;
    }
    const double t_prompt = now_ms() - t_p0;

    const int64_t limit = n_predict < 0 ? cp.n_ctx - n_ids : n_predict;
    int64_t n_gen = 0;
    int32_t cur_pos = (int32_t)n_ids;
    const double t_g0 = now_ms();
    for (; n_gen < limit; n_gen++) {
        const int32_t tok = sampler_sample(smp, vt_get_logits(ctx, 0), NULL);
        if (!ignore_eos && vt_model_is_eog(model, tok)) break;
        sampler_accept(smp, tok);
        stream_piece(&st, model, tok);
        if (n_gen + 1 == limit || cur_pos + 1 >= cp.n_ctx) {
            n_gen++;
            break;
        }
        const int32_t zero = 0;
        vt_batch one = {.n_tokens = 1, .token = &tok, .pos = &cur_pos, .seq = &zero, .logits = NULL};
        if (vt_decode(ctx, &one) != VT_OK) {
            fprintf(stderr, "\nvt: %s\n", vt_last_error());
            goto done;
        }
        cur_pos++;
    }
    const double t_gen = now_ms() - t_g0;
    fwrite(st.pending, 1, st.n_pending, stdout);
    if (isatty(STDOUT_FILENO)) fputc('\n', stdout);
    fflush(stdout);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "\nvt: model        %s\n", vt_model_desc(model));
    fprintf(stderr, "vt: load time    = %10.2f ms\n", t_load);
    fprintf(stderr, "vt: prompt eval  = %10.2f ms / %5lld tokens (%8.2f ms per token, %9.2f tokens per second)\n",
            t_prompt, (long long)n_ids, t_prompt / (double)n_ids, 1e3 * (double)n_ids / t_prompt);
    if (n_gen > 1)
        fprintf(stderr, "vt: eval         = %10.2f ms / %5lld runs   (%8.2f ms per token, %9.2f tokens per second)\n",
                t_gen, (long long)(n_gen - 1), t_gen / (double)(n_gen - 1), 1e3 * (double)(n_gen - 1) / t_gen);
    fprintf(stderr, "vt: peak RSS     = %10.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
    rc = 0;
done:
    free(ids);
    free(prompt_buf);
    sampler_free(smp);
    vt_context_free(ctx);
    vt_model_free(model);
    return rc;
}
