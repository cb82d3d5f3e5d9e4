/* Serving throughput: vt's engine against llama.cpp with the same number of
 * parallel sequences in one context.
 *
 *   bench_engine_llama -m MODEL.gguf [-t THREADS] [-c 1,4,16] [-p PROMPT] [-n GEN]
 *                      [-r PAIRS] [--json]
 *
 * For each concurrency c: c requests, each a distinct prompt of PROMPT random token
 * ids and GEN greedy tokens (no EOS stop), all arriving at once.
 *   vt:        vt_engine (max_seqs c, max_batch_tokens 512), stepping until done.
 *   llama.cpp: one context with n_seq_max = c; the prompts in batches of n_batch 512
 *              (one seq_id per prompt), then one llama_decode per step carrying one
 *              token per sequence; argmax of each row (the greedy sampler).
 * Reported: total generated tokens / wall time (prefill included), and the decode
 * rate (tokens after every request has its first one, over that time).
 * Then time to first token of a request that arrives while 4 others decode (both
 * engines put its prompt in the same batch as the 4 decodes).
 * And vt's weight bytes read per generated token over the same decode steps
 * (vt_engine_stats.weight_bytes_read), beside one sequence's
 * (vt_model_step_bytes): batching shares each weight among a step's tokens, and
 * in a mixture-of-experts layer each expert that any of them chose is read once,
 * so the table also gives the distinct experts per MoE layer per step.
 * Mixture-of-experts and hybrid (qwen35, qwen35moe: one recurrent-state slot per
 * sequence on both sides) files run like any other; bench/make-models.sh writes
 * them at the real models' layer shapes.
 *
 * Every measurement runs in a forked child (load, warm-up, timed run); vt and
 * llama.cpp alternate, PAIRS pairs, medians reported. Speed does not depend on the
 * weights, so a synthetic 1B-class model is the usual subject:
 *   vt synth --layers 16 --embd 2048 --heads 32 --kv-heads 8 --ff 8192 --ctx 2048 \
 *     --vocab-from ../shared/models/vocab/ggml-vocab-llama-spm.gguf --type q4_0 -o 1b-q4_0.gguf */
#include "../tests/llama/llama_ref.h"
#include "llama.h"
#include "vt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
    const char *model;
    int threads;
    int conc[16];
    int n_conc;
    int prompt, gen, pairs;
    bool json;
} opts;

typedef struct result {
    double wall_s, decode_s;
    long long tokens, decode_tokens;
    double ttft_s;
    /* vt only, over the decode steps: weight bytes read per generated token, and
     * distinct experts per MoE layer per step (0: no MoE layers); and one
     * sequence's bytes per token (vt_model_step_bytes) */
    double bytes_per_tok, experts_per_layer, step_bytes;
    int ok;
} result;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void make_prompt(int32_t *p, int n, int which, int n_vocab, int bos) {
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(which + 1);
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = 3 + (int32_t)((x >> 33) % (uint64_t)(n_vocab - 3));
    }
    if (bos >= 0) p[0] = bos;
}

/* ---- vt ------------------------------------------------------------------------- */

static vt_engine *vt_open(vt_model *m, const opts *o, int c) {
    vt_engine_params p = vt_engine_default_params();
    p.n_threads = o->threads;
    p.n_ctx = o->prompt * 2 + o->gen + 16;
    p.max_seqs = c + 1;
    p.max_batch_tokens = 512;
    p.kv_tokens = (int64_t)(c + 1) * p.n_ctx;
    p.prefix_cache = false; /* distinct prompts anyway; llama.cpp has none */
    p.state_snapshots = -1; /* hybrids: no prefix-cache state snapshots either */
    vt_engine *e = NULL;
    if (vt_engine_create(m, &p, &e) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        return NULL;
    }
    return e;
}

static bool vt_run(vt_model *m, vt_engine *e, int c, int prompt, int gen, result *r) {
    int32_t *pr = malloc(sizeof(int32_t) * (size_t)prompt);
    const double t0 = now_s();
    for (int k = 0; k < c; k++) {
        make_prompt(pr, prompt, k, vt_model_n_vocab(m), vt_model_bos(m));
        vt_request_params q = {.prompt = pr, .n_prompt = prompt, .sampling = vt_sampling_default(),
                               .max_tokens = gen, .ignore_eos = true};
        q.sampling.n_logprobs = -1; /* as llama.cpp's side: no logprobs */
        uint64_t id;
        if (vt_engine_add(e, &q, &id) != VT_OK) {
            fprintf(stderr, "vt: %s\n", vt_last_error());
            free(pr);
            return false;
        }
    }
    free(pr);
    long long tokens = 0, started = 0, decoded = 0; /* decoded: after every request started */
    double t_all = 0;
    vt_engine_stats s_all = {0}, s_end;
    while (vt_engine_has_work(e)) {
        const vt_output *outs;
        int32_t n;
        if (vt_engine_step(e, &outs, &n) != VT_OK) return false;
        const bool decoding = started == c;
        for (int32_t i = 0; i < n; i++) {
            if (outs[i].token < 0) continue;
            tokens++;
            decoded += decoding;
            if (outs[i].n_generated == 1 && ++started == c) t_all = now_s();
        }
        if (!decoding && started == c) vt_engine_stats_get(e, &s_all);
    }
    const double t1 = now_s();
    vt_engine_stats_get(e, &s_end);
    r->wall_s = t1 - t0;
    r->tokens = tokens;
    r->decode_s = t1 - t_all;
    r->decode_tokens = decoded;
    r->bytes_per_tok = decoded ? (double)(s_end.weight_bytes_read - s_all.weight_bytes_read) / (double)decoded : 0;
    const int64_t layer_passes = s_end.moe_layer_passes - s_all.moe_layer_passes;
    r->experts_per_layer =
        layer_passes ? (double)(s_end.moe_experts_read - s_all.moe_experts_read) / (double)layer_passes : 0;
    r->step_bytes = (double)vt_model_step_bytes(m);
    return tokens == (long long)c * gen;
}

/* TTFT of a request arriving while 4 others decode. */
static bool vt_ttft(vt_model *m, vt_engine *e, int prompt, result *r) {
    int32_t *pr = malloc(sizeof(int32_t) * (size_t)prompt);
    uint64_t ids[5];
    for (int k = 0; k < 4; k++) {
        make_prompt(pr, prompt, 100 + k, vt_model_n_vocab(m), vt_model_bos(m));
        vt_request_params q = {.prompt = pr, .n_prompt = prompt, .sampling = vt_sampling_default(),
                               .max_tokens = 1 << 20, .ignore_eos = true};
        q.sampling.n_logprobs = -1;
        vt_engine_add(e, &q, &ids[k]);
    }
    const vt_output *outs;
    int32_t n;
    for (int s = 0; s < 6; s++) vt_engine_step(e, &outs, &n); /* all in decode now */
    make_prompt(pr, prompt, 200, vt_model_n_vocab(m), vt_model_bos(m));
    vt_request_params q = {.prompt = pr, .n_prompt = prompt, .sampling = vt_sampling_default(),
                           .max_tokens = 4, .ignore_eos = true};
    q.sampling.n_logprobs = -1;
    const double t0 = now_s();
    vt_engine_add(e, &q, &ids[4]);
    bool got = false;
    for (int s = 0; s < 1000 && !got; s++) {
        vt_engine_step(e, &outs, &n);
        for (int32_t i = 0; i < n; i++) got |= outs[i].id == ids[4] && outs[i].token >= 0;
    }
    r->ttft_s = now_s() - t0;
    for (int k = 0; k < 5; k++) vt_engine_abort(e, ids[k]);
    while (vt_engine_has_work(e)) vt_engine_step(e, &outs, &n);
    free(pr);
    return got;
}

static bool vt_measure(const opts *o, int c, result *r) {
    vt_model *m = NULL;
    if (vt_model_load(o->model, NULL, &m) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        return false;
    }
    vt_engine *e = vt_open(m, o, c < 4 ? 4 : c);
    bool ok = e != NULL;
    result warm;
    ok = ok && vt_run(m, e, c, o->prompt, 4, &warm);
    ok = ok && vt_run(m, e, c, o->prompt, o->gen, r);
    if (ok && c == 4) ok = vt_ttft(m, e, o->prompt, r);
    vt_engine_free(e);
    vt_model_free(m);
    return ok;
}

/* ---- llama.cpp --------------------------------------------------------------- */

typedef struct lctx {
    struct llama_model *model;
    struct llama_context *ctx;
    int n_vocab, bos;
    struct llama_batch batch;
} lctx;

static bool l_open(const opts *o, int n_seq, lctx *L) {
    memset(L, 0, sizeof *L);
    if (!llama_ref_init()) return false;
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    L->model = llama_model_load_from_file(o->model, mp);
    if (!L->model) return false;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_seq * (o->prompt * 2 + o->gen + 16));
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_seq_max = (uint32_t)n_seq;
    cp.n_threads = o->threads;
    cp.n_threads_batch = o->threads;
    cp.no_perf = true;
    L->ctx = llama_init_from_model(L->model, cp);
    if (!L->ctx) return false;
    const struct llama_vocab *v = llama_model_get_vocab(L->model);
    L->n_vocab = llama_vocab_n_tokens(v);
    L->bos = llama_vocab_bos(v) == LLAMA_TOKEN_NULL ? -1 : llama_vocab_bos(v);
    L->batch = llama_batch_init(512, 0, 1);
    return true;
}

static void l_close(lctx *L) {
    if (L->batch.token) llama_batch_free(L->batch);
    if (L->ctx) llama_free(L->ctx);
    if (L->model) llama_model_free(L->model);
}

typedef struct lseq {
    int32_t *prompt;
    int n_prompt, pos, fed; /* fed: prompt tokens submitted */
    int generated, max_gen;
    int32_t last;
    int row;                /* batch row whose logits sample, -1 */
    bool active;
} lseq;

static void batch_add(struct llama_batch *b, int32_t tok, int pos, int seq, bool logits) {
    const int i = b->n_tokens++;
    b->token[i] = tok;
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = seq;
    b->logits[i] = logits;
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* One llama.cpp step shaped like a vt_engine step: decodes first, then prompt
 * chunks, under 512 tokens. Returns the tokens sampled, -1 on error; sets
 * *first_of when a sequence got its first token. */
static int l_step(lctx *L, lseq *s, int n_seq, int *first_of) {
    struct llama_batch *b = &L->batch;
    b->n_tokens = 0;
    int budget = 512;
    for (int k = 0; k < n_seq; k++) {
        s[k].row = -1;
        if (s[k].active && s[k].fed == s[k].n_prompt && s[k].generated > 0 && budget > 0) {
            s[k].row = b->n_tokens;
            batch_add(b, s[k].last, s[k].pos++, k, true);
            budget--;
        }
    }
    for (int k = 0; k < n_seq && budget > 0; k++) {
        if (!s[k].active || s[k].fed == s[k].n_prompt) continue;
        while (s[k].fed < s[k].n_prompt && budget > 0) {
            const bool last = s[k].fed == s[k].n_prompt - 1;
            if (last) s[k].row = b->n_tokens;
            batch_add(b, s[k].prompt[s[k].fed++], s[k].pos++, k, last);
            budget--;
        }
    }
    if (b->n_tokens == 0) return 0;
    if (llama_decode(L->ctx, *b) != 0) return -1;
    int sampled = 0;
    for (int k = 0; k < n_seq; k++) {
        if (s[k].row < 0) continue;
        s[k].last = argmax(llama_get_logits_ith(L->ctx, s[k].row), L->n_vocab);
        if (++s[k].generated == 1 && first_of) *first_of = k;
        if (s[k].generated >= s[k].max_gen) s[k].active = false;
        sampled++;
    }
    return sampled;
}

static bool l_run(lctx *L, int c, int prompt, int gen, result *r) {
    llama_memory_clear(llama_get_memory(L->ctx), true);
    lseq *s = calloc((size_t)c, sizeof *s);
    for (int k = 0; k < c; k++) {
        s[k].prompt = malloc(sizeof(int32_t) * (size_t)prompt);
        make_prompt(s[k].prompt, prompt, k, L->n_vocab, L->bos);
        s[k].n_prompt = prompt;
        s[k].max_gen = gen;
        s[k].active = true;
    }
    const double t0 = now_s();
    long long tokens = 0, started = 0, decoded = 0; /* decoded: after every request started */
    double t_all = 0;
    bool ok = true;
    for (;;) {
        int first = -1;
        const int n = l_step(L, s, c, &first);
        if (n < 0) {
            ok = false;
            break;
        }
        if (n == 0) break;
        tokens += n;
        if (t_all > 0) decoded += n;
        if (first >= 0) {
            started = 0;
            for (int k = 0; k < c; k++) started += s[k].generated > 0;
            if (started == c && t_all == 0) t_all = now_s();
        }
    }
    const double t1 = now_s();
    r->wall_s = t1 - t0;
    r->tokens = tokens;
    r->decode_s = t1 - t_all;
    r->decode_tokens = decoded;
    for (int k = 0; k < c; k++) free(s[k].prompt);
    free(s);
    return ok && tokens == (long long)c * gen;
}

static bool l_ttft(lctx *L, int prompt, result *r) {
    llama_memory_clear(llama_get_memory(L->ctx), true);
    lseq s[5];
    memset(s, 0, sizeof s);
    for (int k = 0; k < 5; k++) {
        s[k].prompt = malloc(sizeof(int32_t) * (size_t)prompt);
        make_prompt(s[k].prompt, prompt, k < 4 ? 100 + k : 200, L->n_vocab, L->bos);
        s[k].n_prompt = prompt;
        s[k].max_gen = k < 4 ? 1 << 20 : 4;
        s[k].active = k < 4;
    }
    bool ok = true;
    for (int i = 0; i < 6 && ok; i++) ok = l_step(L, s, 5, NULL) >= 0;
    const double t0 = now_s();
    s[4].active = true;
    while (ok && s[4].generated == 0) ok = l_step(L, s, 5, NULL) >= 0;
    r->ttft_s = now_s() - t0;
    for (int k = 0; k < 5; k++) free(s[k].prompt);
    return ok;
}

static bool l_measure(const opts *o, int c, result *r) {
    lctx L;
    const int n_seq = c < 5 ? 5 : c;
    bool ok = l_open(o, n_seq, &L);
    if (!ok) fprintf(stderr, "llama.cpp: could not load %s\n", o->model);
    result warm;
    ok = ok && l_run(&L, c, o->prompt, 4, &warm);
    ok = ok && l_run(&L, c, o->prompt, o->gen, r);
    if (ok && c == 4) ok = l_ttft(&L, o->prompt, r);
    l_close(&L);
    return ok;
}

/* ---- harness ------------------------------------------------------------------ */

static bool in_child(bool vt, const opts *o, int c, result *r) {
    int fd[2];
    if (pipe(fd) != 0) return false;
    const pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        result x = {0};
        x.ok = vt ? vt_measure(o, c, &x) : l_measure(o, c, &x);
        if (write(fd[1], &x, sizeof x) != (ssize_t)sizeof x) _exit(2);
        _exit(0);
    }
    close(fd[1]);
    memset(r, 0, sizeof *r);
    const bool got = read(fd[0], r, sizeof *r) == (ssize_t)sizeof *r;
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    return got && r->ok;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    opts o = {.threads = 2, .prompt = 64, .gen = 32, .pairs = 3};
    o.conc[0] = 1, o.conc[1] = 4, o.conc[2] = 16, o.n_conc = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v) o.model = argv[++i];
        else if (!strcmp(a, "-t") && v) o.threads = atoi(argv[++i]);
        else if (!strcmp(a, "-p") && v) o.prompt = atoi(argv[++i]);
        else if (!strcmp(a, "-n") && v) o.gen = atoi(argv[++i]);
        else if (!strcmp(a, "-r") && v) o.pairs = atoi(argv[++i]);
        else if (!strcmp(a, "--json")) o.json = true;
        else if (!strcmp(a, "-c") && v) {
            o.n_conc = 0;
            for (char *s = argv[++i]; *s && o.n_conc < 16;) {
                o.conc[o.n_conc++] = (int)strtol(s, &s, 10);
                if (*s == ',') s++;
                else break;
            }
        } else {
            fprintf(stderr,
                    "usage: %s -m MODEL.gguf [-t THREADS] [-c 1,4,16] [-p PROMPT] [-n GEN] "
                    "[-r PAIRS] [--json]\n",
                    argv[0]);
            return 2;
        }
    }
    bool conc_ok = o.n_conc > 0;
    for (int ci = 0; ci < o.n_conc; ci++) conc_ok = conc_ok && o.conc[ci] >= 1 && o.conc[ci] <= 256;
    if (!o.model || o.threads <= 0 || o.prompt < 2 || o.gen < 2 || o.pairs < 1 || o.pairs > 50 || !conc_ok) {
        fprintf(stderr, "usage: %s -m MODEL.gguf (see the top of bench/bench_engine_llama.c)\n",
                argv[0]);
        return 2;
    }
    double load[3] = {0};
    if (getloadavg(load, 3) < 1) load[0] = -1;
    printf("model %s, threads %d, prompt %d, gen %d, pairs %d, load %.2f\n", o.model, o.threads,
           o.prompt, o.gen, o.pairs, load[0]);
    if (load[0] > 0.5) printf("warning: the machine is not idle (load %.2f)\n", load[0]);
    printf("| conc | vt tok/s | llama tok/s | ratio | vt decode tok/s | llama decode tok/s | ratio |\n");
    printf("|-----:|---------:|------------:|------:|----------------:|-------------------:|------:|\n");
    char json[8192];
    size_t jl = (size_t)snprintf(json, sizeof json, "{\"threads\": %d, \"prompt\": %d, \"gen\": %d, \"rows\": [",
                                 o.threads, o.prompt, o.gen);
    double vt_ttft = 0, l_ttft = 0;
    double bytes_tok[16], experts[16], step_bytes = 0; /* vt's, per concurrency */
    for (int ci = 0; ci < o.n_conc; ci++) {
        const int c = o.conc[ci];
        double vt_tps[50], l_tps[50], vt_dps[50], l_dps[50], vtt[50], ltt[50], vbt[50], vex[50];
        int n = 0;
        for (int p = 0; p < o.pairs; p++) {
            result a, b;
            if (!in_child(true, &o, c, &a) || !in_child(false, &o, c, &b)) {
                fprintf(stderr, "concurrency %d: a run failed\n", c);
                return 1;
            }
            vt_tps[n] = (double)a.tokens / a.wall_s;
            l_tps[n] = (double)b.tokens / b.wall_s;
            vt_dps[n] = (double)a.decode_tokens / a.decode_s;
            l_dps[n] = (double)b.decode_tokens / b.decode_s;
            vtt[n] = a.ttft_s;
            ltt[n] = b.ttft_s;
            vbt[n] = a.bytes_per_tok;
            vex[n] = a.experts_per_layer;
            step_bytes = a.step_bytes;
            n++;
        }
        const double vt_m = median(vt_tps, n), l_m = median(l_tps, n);
        const double vt_d = median(vt_dps, n), l_d = median(l_dps, n);
        bytes_tok[ci] = median(vbt, n);
        experts[ci] = median(vex, n);
        printf("| %4d | %8.1f | %11.1f | %5.2f | %15.1f | %18.1f | %5.2f |\n", c, vt_m, l_m,
               vt_m / l_m, vt_d, l_d, vt_d / l_d);
        jl += (size_t)snprintf(json + jl, sizeof json - jl,
                               "%s{\"conc\": %d, \"vt_tps\": %.2f, \"llama_tps\": %.2f, "
                               "\"vt_decode_tps\": %.2f, \"llama_decode_tps\": %.2f, "
                               "\"vt_bytes_per_token\": %.0f, \"vt_experts_per_layer_step\": %.2f}",
                               ci ? ", " : "", c, vt_m, l_m, vt_d, l_d, bytes_tok[ci], experts[ci]);
        if (c == 4) {
            vt_ttft = median(vtt, n);
            l_ttft = median(ltt, n);
        }
        fflush(stdout);
    }
    if (vt_ttft > 0)
        printf("TTFT of a %d-token request arriving while 4 decode: vt %.1f ms, llama.cpp %.1f ms\n",
               o.prompt, 1e3 * vt_ttft, 1e3 * l_ttft);
    /* what a generated token costs in weight reads (vt's count; llama.cpp's mul_mat_id
     * also reads each chosen expert once per batch) */
    printf("\nvt's weight reads in the decode steps (one sequence: %.2f MiB per token)\n",
           step_bytes / (1024.0 * 1024.0));
    printf("| conc | distinct experts / MoE layer / step | MiB read / token | vs one sequence |\n");
    printf("|-----:|------------------------------------:|-----------------:|----------------:|\n");
    for (int ci = 0; ci < o.n_conc; ci++) {
        char ex[32] = "-";
        if (experts[ci] > 0) snprintf(ex, sizeof ex, "%.1f", experts[ci]);
        printf("| %4d | %35s | %16.2f | %15.3f |\n", o.conc[ci], ex, bytes_tok[ci] / (1024.0 * 1024.0),
               step_bytes > 0 ? bytes_tok[ci] / step_bytes : 0);
    }
    snprintf(json + jl, sizeof json - jl,
             "], \"ttft_ms\": {\"vt\": %.2f, \"llama\": %.2f}, \"vt_step_bytes\": %.0f}", 1e3 * vt_ttft,
             1e3 * l_ttft, step_bytes);
    if (o.json) printf("%s\n", json);
    return 0;
}
