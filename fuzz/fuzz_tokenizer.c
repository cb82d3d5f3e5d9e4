/* libFuzzer target for the tokenizers: encode the input bytes (all four
 * add_special x parse_special), check every id is in the vocabulary, take every
 * piece, decode, and run the UTF-8 streaming helper over the decoded text.
 *
 * The vocabularies are loaded once: VT_FUZZ_VOCAB (a GGUF path, or several
 * separated by ':'; path@pre loads the file with its tokenizer.ggml.pre replaced
 * by pre, for pre-tokenizers no vocab file here carries), by default
 * vocab/ggml-vocab-llama-spm.gguf, vocab/ggml-vocab-gpt-2.gguf and
 * vocab/ggml-vocab-gpt-2.gguf@gpt-4o (o200k's splitter) under VT_TEST_MODELS
 * (default ../shared/models). The first input byte picks the vocabulary.
 *
 *   cmake -S . -B build-tok-fuzz -DCMAKE_C_COMPILER=clang -DVT_FUZZ=ON
 *   cmake --build build-tok-fuzz --target fuzz_tokenizer
 *   ./build-tok-fuzz/fuzz_tokenizer -max_total_time=60 fuzz/corpus/tokenizer */
#include "base/mapfile.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VOCABS 8

static tokenizer *vocabs[MAX_VOCABS];
static int n_vocabs;

/* spec: a GGUF path, or path@pre */
static void load_one(const char *spec) {
    if (n_vocabs == MAX_VOCABS) return;
    const char *pre = strrchr(spec, '@');
    char path[4096];
    snprintf(path, sizeof path, "%.*s", (int)(pre ? (size_t)(pre - spec) : strlen(spec)), spec);
    tokenizer *t = NULL;
    mapfile m;
    gguf_file g;
    vt_status st = mapfile_open(path, &m);
    if (st == VT_OK) {
        st = gguf_parse(m.data, m.size, path, &g);
        if (st == VT_OK) {
            for (int64_t i = 0; pre && i < g.n_kv; i++)
                if (gguf_str_eq(g.kv[i].key, "tokenizer.ggml.pre") && g.kv[i].type == GGUF_TYPE_STRING)
                    g.kv[i].v.str = (gguf_str){pre + 1, strlen(pre + 1)};
            st = tok_load(&g, &t);
            gguf_free(&g);
        }
        mapfile_close(&m);
    }
    if (st != VT_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", vt_last_error());
        abort();
    }
    vocabs[n_vocabs++] = t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *list = getenv("VT_FUZZ_VOCAB");
    char path[4096];
    if (list && *list) {
        while (*list) {
            size_t n = strcspn(list, ":");
            snprintf(path, sizeof path, "%.*s", (int)n, list);
            load_one(path);
            list += n + (list[n] == ':');
        }
    } else {
        const char *dir = getenv("VT_TEST_MODELS");
        if (!dir || !*dir) dir = "../shared/models";
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", dir);
        load_one(path);
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", dir);
        load_one(path);
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf@gpt-4o", dir);
        load_one(path);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0 || n_vocabs == 0) return 0;
    const tokenizer *t = vocabs[data[0] % n_vocabs];
    /* an exact-size heap copy: reads past the end trip ASan */
    char *text = malloc(size - 1 ? size - 1 : 1);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    for (int mode = 0; mode < 4; mode++) {
        int32_t *ids;
        int64_t n;
        if (tok_encode(t, text, size - 1, mode & 1, mode & 2, &ids, &n) != VT_OK) abort();
        char buf[64];
        for (int64_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= tok_n_vocab(t)) abort();
            if (tok_piece(t, ids[i], mode & 2, buf, sizeof buf) < 0) abort();
        }
        char *s;
        size_t len;
        if (tok_decode(t, ids, n, mode & 2, &s, &len) != VT_OK) abort();
        if (strlen(s) > len) abort();
        if (tok_utf8_complete_prefix(s, len) > len) abort();
        free(s);
        free(ids);
    }
    free(text);
    return 0;
}
