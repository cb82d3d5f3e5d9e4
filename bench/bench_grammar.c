/* Grammar-constrained generation against free generation through the serving
 * engine, alternated in one process: for each concurrency (default 1 and 16),
 * each round runs C requests of N tokens free, then the same under a GBNF
 * grammar (a JSON object of a fixed shape, as a json_schema request compiles
 * to, with unbounded strings so that it runs N tokens), and reports generated
 * tokens/s of each and their ratio, the median over rounds. The first round
 * also warms the grammar's DFA and masks (the engine keeps a grammar warm
 * across requests, as the server does).
 *
 *   bench_grammar -m MODEL.gguf [-n TOKENS] [-c 1,16] [-r ROUNDS] [-t THREADS] [-g FILE.gbnf]
 *
 * Prints a table and one JSON line per concurrency. Both runs set ignore_eos;
 * a grammar run may still end early where its text completes (the rate is
 * what is compared). */
#include "vt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char DEFAULT_GBNF[] =
    "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws string \",\" ws \"\\\"tags\\\"\" ws \":\" ws \"[\" ws "
    "(string (\",\" ws string)*)? \"]\" ws \"}\" ws\n"
    "string ::= \"\\\"\" char* \"\\\"\" ws\n"
    "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Tokens/s of c requests of n tokens each; grammar NULL: free. */
static double run(vt_engine *e, const int32_t *prompt, int64_t n_prompt, int c, int n, const char *grammar) {
    for (int i = 0; i < c; i++) {
        vt_request_params q = {.prompt = prompt, .n_prompt = n_prompt, .max_tokens = n, .ignore_eos = true};
        q.sampling = vt_sampling_default();
        q.sampling.temperature = 1.0f;
        q.sampling.seed = (uint64_t)i + 1;
        q.sampling.n_logprobs = -1; /* none asked, as a server request without logprobs */
        if (grammar) {
            q.grammar = grammar;
            q.grammar_len = strlen(grammar);
        }
        uint64_t id;
        if (vt_engine_add(e, &q, &id) != VT_OK) {
            fprintf(stderr, "bench_grammar: %s\n", vt_last_error());
            exit(1);
        }
    }
    int64_t tokens = 0;
    const double t0 = now_s();
    while (vt_engine_has_work(e)) {
        const vt_output *outs;
        int32_t k;
        if (vt_engine_step(e, &outs, &k) != VT_OK) {
            fprintf(stderr, "bench_grammar: %s\n", vt_last_error());
            exit(1);
        }
        for (int32_t i = 0; i < k; i++) {
            tokens += outs[i].token >= 0;
            if (outs[i].finish == VT_FINISH_ERROR) fprintf(stderr, "bench_grammar: %s\n", outs[i].error);
        }
    }
    return (double)tokens / (now_s() - t0);
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *gfile = NULL, *cs = "1,16";
    int n = 128, rounds = 5, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v) model_path = argv[++i];
        else if (!strcmp(a, "-n") && v) n = atoi(argv[++i]);
        else if (!strcmp(a, "-c") && v) cs = argv[++i];
        else if (!strcmp(a, "-r") && v) rounds = atoi(argv[++i]);
        else if (!strcmp(a, "-t") && v) threads = atoi(argv[++i]);
        else if (!strcmp(a, "-g") && v) gfile = argv[++i];
        else {
            fprintf(stderr, "usage: bench_grammar -m MODEL.gguf [-n TOKENS] [-c 1,16] [-r ROUNDS] [-t THREADS] [-g FILE.gbnf]\n");
            return 2;
        }
    }
    if (!model_path || n <= 0 || rounds <= 0 || rounds > 100) {
        fprintf(stderr, "bench_grammar: -m MODEL.gguf is required (and -n, -r positive)\n");
        return 2;
    }
    char *grammar = (char *)DEFAULT_GBNF;
    if (gfile) {
        FILE *f = fopen(gfile, "rb");
        if (!f) {
            perror(gfile);
            return 1;
        }
        grammar = calloc(1, 1 << 20);
        if (!grammar || fread(grammar, 1, (1 << 20) - 1, f) == 0) return 1;
        fclose(f);
    }
    vt_model *m = NULL;
    if (vt_model_load(model_path, NULL, &m) != VT_OK) {
        fprintf(stderr, "bench_grammar: %s\n", vt_last_error());
        return 1;
    }
    int32_t *prompt = NULL;
    int64_t n_prompt = 0;
    vt_tokenize(m, "Answer in JSON:", 15, true, false, &prompt, &n_prompt);
    printf("%-6s %-12s %-12s %s\n", "conc", "free tok/s", "grammar", "grammar / free");
    for (const char *p = cs; *p;) {
        const int c = atoi(p);
        vt_engine_params ep = vt_engine_default_params();
        ep.n_threads = threads;
        ep.max_seqs = c > 16 ? c : 16;
        ep.n_ctx = (int32_t)(n_prompt + n + 16);
        vt_engine *e = NULL;
        if (c <= 0 || vt_engine_create(m, &ep, &e) != VT_OK) {
            fprintf(stderr, "bench_grammar: concurrency %d: %s\n", c, vt_last_error());
            return 1;
        }
        double fr[100], gr[100], ratio[100];
        run(e, prompt, n_prompt, c, n, grammar); /* warm: the DFA, the masks, the caches */
        for (int r = 0; r < rounds; r++) {
            fr[r] = run(e, prompt, n_prompt, c, n, NULL);
            gr[r] = run(e, prompt, n_prompt, c, n, grammar);
            ratio[r] = gr[r] / fr[r];
        }
        qsort(fr, (size_t)rounds, sizeof(double), cmp_double);
        qsort(gr, (size_t)rounds, sizeof(double), cmp_double);
        qsort(ratio, (size_t)rounds, sizeof(double), cmp_double);
        printf("%-6d %-12.1f %-12.1f %.3f\n", c, fr[rounds / 2], gr[rounds / 2], ratio[rounds / 2]);
        printf("{\"concurrency\": %d, \"tokens\": %d, \"free_tok_s\": %.1f, \"grammar_tok_s\": %.1f, \"ratio\": %.3f}\n",
               c, n, fr[rounds / 2], gr[rounds / 2], ratio[rounds / 2]);
        vt_engine_free(e);
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
    }
    free(prompt);
    vt_model_free(m);
    if (grammar != DEFAULT_GBNF) free(grammar);
    return 0;
}
