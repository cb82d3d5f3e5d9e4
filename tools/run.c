/* vt run: generate text from a prompt, streaming it to stdout; timings to stderr. */
#include "base/log.h"
#include "cmds.h"

#pragma weak cmd_chat /* absent without the server libraries */
#include "opts.h"
#include "rope_opts.h"
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

static bool parse_kv_type(const char *opt, const char *s, void *dst) {
    static const struct { const char *name; vt_kv_type t; } types[] = {
        {"f16", VT_KV_F16}, {"bf16", VT_KV_BF16}, {"f32", VT_KV_F32}, {"q8_0", VT_KV_Q8_0}};
    for (size_t i = 0; s && i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(s, types[i].name)) {
            *(vt_kv_type *)dst = types[i].t;
            return true;
        }
    fprintf(stderr, "vt: %s: unknown KV cache type '%s' (f16, bf16, f32, q8_0)\n", opt, s ? s : "");
    return false;
}

/* llama.cpp's -e: \n \r \t \' \" \\ \xHH in the prompt, in place. */
static void process_escapes(char *s) {
    char *o = s;
    for (const char *p = s; *p; p++) {
        if (*p != '\\' || !p[1]) {
            *o++ = *p;
            continue;
        }
        const char c = *++p;
        if (c == 'n') *o++ = '\n';
        else if (c == 'r') *o++ = '\r';
        else if (c == 't') *o++ = '\t';
        else if (c == '\'' || c == '"' || c == '\\') *o++ = c;
        else if (c == 'x' && p[1] && p[2] && strchr("0123456789abcdefABCDEF", p[1]) &&
                 strchr("0123456789abcdefABCDEF", p[2])) {
            const char hex[3] = {p[1], p[2], 0};
            *o++ = (char)strtol(hex, NULL, 16);
            p += 2;
        } else {
            *o++ = '\\';
            *o++ = c;
        }
    }
    *o = 0;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
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
    if (f != stdin) fclose(f);
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
    long long n_predict = 128, n_threads = 0, n_ctx = 0, n_batch = 512, n_ubatch = 512, seed = -1,
              last_n = 64, top_k = 40;
    double temp = 0.8, top_p = 0.95, min_p = 0.05, rep = 1.0, pres = 0.0, freq = 0.0;
    bool ignore_eos = false, display_prompt = true, escape = false, verbose_prompt = false, log_disable = false,
         mlock = false;
    vt_kv_type tk = VT_KV_F16, tv = VT_KV_F16;
    enum { ROW_BATCH = 6, ROW_UBATCH = 7 };
    static const char *const on_off[] = {"on", "off", "auto", "true", "false", "1", "0", "yes", "no", NULL};
    const opt table[] = {
        {.name = {"-m", "--model"}, .kind = OPT_STR, .dst = &model_path, .arg = "FILE", .help = "GGUF model"},
        {.name = {"-p", "--prompt"}, .kind = OPT_STR, .dst = &prompt, .arg = "TEXT",
         .help = "prompt (default: empty, generation starts from BOS)"},
        {.name = {"-f", "--file"}, .kind = OPT_STR, .dst = &prompt_file, .arg = "FILE",
         .help = "read the prompt from FILE ('-': stdin)"},
        {.name = {"-n", "--n-predict"}, .kind = OPT_INT, .dst = &n_predict, .arg = "N", .lo = -1, .hi = 1 << 24,
         .help = "tokens to generate (default 128; -1: until EOS or context end)"},
        {.name = {"-t", "--threads"}, .kind = OPT_INT, .dst = &n_threads, .arg = "N", .lo = 0, .hi = 1024,
         .help = "threads (default: the physical cores this process may use)"},
        {.name = {"-c", "--ctx-size"}, .kind = OPT_INT, .dst = &n_ctx, .arg = "N", .lo = 0, .hi = 1 << 24,
         .help = "context size (default: min(training context, 4096); with\n"
                 "--rope-scale or --yarn-orig-ctx, the context they reach)"},
        [ROW_BATCH] = {.name = {"-b", "--batch-size"}, .kind = OPT_INT, .dst = &n_batch, .arg = "N", .lo = 1,
                       .hi = 1 << 16, .help = "prompt tokens per forward pass (default 512)"},
        [ROW_UBATCH] = {.name = {"-ub", "--ubatch-size"}, .kind = OPT_INT, .dst = &n_ubatch, .arg = "N", .lo = 1,
                        .hi = 1 << 16,
                        .help = "the same as -b: vt's batch is one forward pass, llama.cpp's\n"
                                "micro-batch (given both, the smaller counts)"},
        {.name = {"--temp", "--temperature"}, .kind = OPT_FLOAT, .dst = &temp, .arg = "T", .flo = 0, .fhi = 100,
         .help = "temperature (default 0.8; 0 = greedy)"},
        {.name = {"--top-k"}, .kind = OPT_INT, .dst = &top_k, .arg = "K", .lo = 0, .hi = 1 << 24,
         .help = "(default 40; 0 = off)"},
        {.name = {"--top-p"}, .kind = OPT_FLOAT, .dst = &top_p, .arg = "P", .flo = 0, .fhi = 1,
         .help = "(default 0.95; 1 = off)"},
        {.name = {"--min-p"}, .kind = OPT_FLOAT, .dst = &min_p, .arg = "P", .flo = 0, .fhi = 1,
         .help = "(default 0.05; 0 = off)"},
        {.name = {"--repeat-penalty"}, .kind = OPT_FLOAT, .dst = &rep, .arg = "X", .flo = 0.0001, .fhi = 100,
         .help = "(default 1.0 = off)"},
        {.name = {"--repeat-last-n"}, .kind = OPT_INT, .dst = &last_n, .arg = "N", .lo = 0, .hi = 1 << 20,
         .help = "penalty window (default 64)"},
        {.name = {"--presence-penalty"}, .kind = OPT_FLOAT, .dst = &pres, .arg = "X", .flo = -100, .fhi = 100,
         .help = "(default 0)"},
        {.name = {"--frequency-penalty"}, .kind = OPT_FLOAT, .dst = &freq, .arg = "X", .flo = -100, .fhi = 100,
         .help = "(default 0)"},
        {.name = {"-s", "--seed"}, .kind = OPT_INT, .dst = &seed, .arg = "N", .lo = -1, .hi = INT64_MAX,
         .help = "sampling seed (default: random)"},
        {.name = {"-ctk", "--cache-type-k"}, .kind = OPT_FN, .fn = parse_kv_type, .dst = &tk, .arg = "T",
         .help = "f16 (default), bf16, f32, q8_0"},
        {.name = {"-ctv", "--cache-type-v"}, .kind = OPT_FN, .fn = parse_kv_type, .dst = &tv, .arg = "T",
         .help = "the same for V"},
        {.name = {"--ignore-eos"}, .kind = OPT_FLAG, .dst = &ignore_eos,
         .help = "keep generating past end-of-generation tokens"},
        {.name = {"--no-display-prompt"}, .kind = OPT_FLAG, .dst = &display_prompt, .clear = true,
         .help = "do not echo the prompt"},
        {.name = {"-e", "--escape"}, .kind = OPT_FLAG, .dst = &escape,
         .help = "process escapes in the prompt: \\n \\r \\t \\' \\\" \\\\ \\xHH"},
        {.name = {"--no-escape"}, .kind = OPT_FLAG, .dst = &escape, .clear = true,
         .help = "take the prompt as it is (default)"},
        {.name = {"--verbose-prompt"}, .kind = OPT_FLAG, .dst = &verbose_prompt,
         .help = "print the prompt's tokens (id and piece) on stderr first"},
        {.name = {"--log-disable"}, .kind = OPT_FLAG, .dst = &log_disable,
         .help = "no log lines, progress or timings on stderr (errors still are)"},
        {.name = {"--mlock"}, .kind = OPT_FLAG, .dst = &mlock,
         .help = "lock the packed weights in RAM (a warning if ulimit -l refuses)"},
        {.name = {"--no-mmap"}, .kind = OPT_FLAG,
         .help = "accepted: vt copies the weights into memory of its own anyway"},
        {.name = {"-ngl", "--gpu-layers", "--n-gpu-layers"}, .kind = OPT_STR, .arg = "N",
         .help = "accepted and ignored: vt runs on the CPU", .note = "vt runs on the CPU; ignored"},
        {.name = {"-fa", "--flash-attn"}, .kind = OPT_MAYBE, .fn = opt_on_off, .choices = on_off,
         .arg = "on|off|auto", .help = "accepted: vt's attention is always fused (flash-style)"},
        {.name = {"-co", "--color"}, .kind = OPT_MAYBE, .fn = opt_on_off, .choices = on_off,
         .arg = "on|off|auto", .help = "accepted: vt prints no colours"},
    };
    /* -i / -cnv: an interactive chat, as llama.cpp's users expect (vt chat) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-i") || !strcmp(a, "-cnv") || !strcmp(a, "--interactive") || !strcmp(a, "--conversation")) {
            if (!cmd_chat) {
                fprintf(stderr, "vt run: %s needs vt chat, which this build lacks (no server libraries)\n", a);
                return 2;
            }
            return cmd_chat(argc, argv);
        }
    }
    rope_opts rope;
    ROPE_OPTS_TABLE(all, table, &rope);
    const opts_cmd cmd = {.name = "run", .usage = "vt run -m MODEL [options]", .opts = all, .n_opts = all_n};
    int counts[sizeof all / sizeof all[0]];
    const int prc = opts_parse(&cmd, argc, argv, NULL, NULL, counts);
    if (prc >= 0) return prc;
    if (!rope_opts_finish("run", &rope)) return 2;
    if (counts[ROW_UBATCH] && (!counts[ROW_BATCH] || n_ubatch < n_batch)) n_batch = n_ubatch;
    if (log_disable) log_set_level(LOG_NONE);
    if (!model_path) {
        fprintf(stderr, "vt run: -m MODEL is required\n");
        opts_usage(&cmd, stderr);
        return 2;
    }
    if (prompt && prompt_file) {
        fprintf(stderr, "vt run: -p and -f both give the prompt: use one\n");
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
    if (escape) {
        if (!prompt_buf) {
            prompt_buf = strdup(prompt);
            if (!prompt_buf) {
                fprintf(stderr, "vt run: out of memory\n");
                return 1;
            }
        }
        process_escapes(prompt_buf);
        prompt = prompt_buf;
        prompt_len = strlen(prompt_buf);
    }

    int rc = 1;
    vt_model *model = NULL;
    vt_context *ctx = NULL;
    sampler *smp = NULL;
    int32_t *ids = NULL;
    const double t_load0 = now_ms();
    vt_model_params mp = vt_model_default_params();
    mp.progress = isatty(STDERR_FILENO) && !log_disable;
    mp.use_mlock = mlock;
    mp.rope = rope.params;
    if (vt_model_load(model_path, &mp, &model) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        goto done;
    }
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = (int32_t)(n_ctx > 0 ? n_ctx : (vt_model_n_ctx_default(model) < 4096 ? vt_model_n_ctx_default(model) : 4096));
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

    if (verbose_prompt) {
        fprintf(stderr, "vt: prompt: %lld tokens\n", (long long)n_ids);
        for (int64_t i = 0; i < n_ids; i++) {
            char piece[128];
            int64_t k = vt_token_piece(model, ids[i], piece, sizeof piece);
            if (k < 0) k = 0;
            if (k > (int64_t)sizeof piece) k = sizeof piece;
            fprintf(stderr, "vt: %6d -> '%.*s'\n", ids[i], (int)k, piece);
        }
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

    rc = 0;
    if (log_disable) goto done;
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
done:
    free(ids);
    free(prompt_buf);
    sampler_free(smp);
    vt_context_free(ctx);
    vt_model_free(model);
    return rc;
}
