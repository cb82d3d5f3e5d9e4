/* Encoding speed of a long prompt: 256 KiB of English-like text and 100000
 * spaces (one long whitespace word), through the SPM and byte-level BPE
 * vocabularies. tests/test_tokenizer checks these inputs for correctness; the
 * time lives here. Prints the best of 5 per case and one JSON line. Never
 * asserts on time.
 *
 *   bench_tokenizer [VOCAB.gguf ...]   (default: the llama-spm and llama-bpe
 *                                       vocabularies under VT_TEST_MODELS) */
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static double best_of_5(const tokenizer *t, const char *s, size_t n, int64_t *n_ids) {
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        int32_t *ids = NULL;
        const double t0 = now_ms();
        if (tok_encode(t, s, n, false, false, &ids, n_ids) != VT_OK) {
            fprintf(stderr, "bench_tokenizer: %s\n", vt_last_error());
            return -1;
        }
        const double dt = now_ms() - t0;
        free(ids);
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    const char *dir = getenv("VT_TEST_MODELS") ? getenv("VT_TEST_MODELS") : "../shared/models";
    char def[2][4096];
    snprintf(def[0], sizeof def[0], "%s/vocab/ggml-vocab-llama-spm.gguf", dir);
    snprintf(def[1], sizeof def[1], "%s/vocab/ggml-vocab-llama-bpe.gguf", dir);
    const char *paths[16] = {def[0], def[1]};
    int n_paths = 2;
    if (argc > 1) {
        n_paths = 0;
        for (int i = 1; i < argc && n_paths < 16; i++) paths[n_paths++] = argv[i];
    }
    const size_t n = 1 << 18;
    char *text = malloc(n), *spaces = malloc(100000);
    if (!text || !spaces) return 1;
    for (size_t i = 0; i < n; i++) text[i] = "the quick brown fox jumps over  lazy dogs 123\n"[i % 46];
    memset(spaces, ' ', 100000);
    printf("%-40s %12s %10s %14s\n", "vocabulary", "case", "tokens", "best_ms");
    char json[4096];
    int o = snprintf(json, sizeof json, "{\"bench\":\"tokenizer\",\"results\":[");
    for (int p = 0; p < n_paths; p++) {
        tokenizer *t;
        if (tok_load_file(paths[p], &t) != VT_OK) {
            fprintf(stderr, "bench_tokenizer: %s\n", vt_last_error());
            return 1;
        }
        const char *name = strrchr(paths[p], '/') ? strrchr(paths[p], '/') + 1 : paths[p];
        static const char *const cases[2] = {"text_256k", "spaces_100k"};
        for (int c = 0; c < 2; c++) {
            int64_t n_ids = 0;
            const double ms = c ? best_of_5(t, spaces, 100000, &n_ids) : best_of_5(t, text, n, &n_ids);
            if (ms < 0) return 1;
            printf("%-40s %12s %10lld %14.2f\n", name, cases[c], (long long)n_ids, ms);
            if (o < (int)sizeof json)
                o += snprintf(json + o, sizeof json - (size_t)o, "%s{\"vocab\":\"%s\",\"case\":\"%s\",\"tokens\":%lld,\"ms\":%.2f}",
                              p || c ? "," : "", name, cases[c], (long long)n_ids, ms);
        }
        tok_free(t);
    }
    printf("%s]}\n", json);
    free(text);
    free(spaces);
    return 0;
}
