/* libFuzzer target for tokenizer loading: a GGUF through gguf_parse and then
 * tok_load, which reads the tokenizer.ggml.* metadata (model, pre, tokens,
 * scores, token types, merges, special ids, flags). A vocabulary that loads is
 * exercised: a fixed set of texts is encoded in all four add_special x
 * parse_special modes, every id must be inside the vocabulary, and every piece
 * and the decoding are taken. fuzz_tokenizer fuzzes the texts over the real
 * vocabularies; this target fuzzes the vocabularies.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVT_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_vocab
 *   ./build-fuzz/fuzz_vocab -max_total_time=60 fuzz/corpus/vocab */
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const texts[] = {
    "Hello world! It's 2024, isn't it?",
    " <s>leading space</s> <|im_start|>user\n\t<unk>",
    "\xc3\xbc\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 \xff\xfe broken utf-8 \xc0",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa   \n\n\n  1234567890",
    "",
};

static void exercise(const tokenizer *t, const char *s) {
    const size_t n = strlen(s);
    char *text = malloc(n ? n : 1); /* exact size: a read past the end trips ASan */
    if (!text) abort();
    memcpy(text, s, n);
    for (int mode = 0; mode < 4; mode++) {
        int32_t *ids = NULL;
        int64_t n_ids = 0;
        if (tok_encode(t, text, n, mode & 1, mode & 2, &ids, &n_ids) != VT_OK) continue;
        char buf[64];
        for (int64_t i = 0; i < n_ids; i++) {
            if (ids[i] < 0 || ids[i] >= tok_n_vocab(t)) abort();
            if (tok_piece(t, ids[i], mode & 2, buf, sizeof buf) < 0) abort();
        }
        char *out = NULL;
        size_t len = 0;
        if (tok_decode(t, ids, n_ids, mode & 2, &out, &len) != VT_OK) abort();
        if (strlen(out) > len) abort();
        free(out);
        free(ids);
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    gguf_file f;
    if (gguf_parse(copy, size, "fuzz", &f) == VT_OK) {
        tokenizer *t = NULL;
        if (tok_load(&f, &t) == VT_OK) {
            gguf_free(&f); /* the tokenizer must own what it kept */
            free(copy);
            copy = NULL;
            for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) exercise(t, texts[i]);
            (void)tok_bos(t);
            (void)tok_is_eog(t, tok_eos(t));
            tok_free(t);
        } else {
            gguf_free(&f);
        }
    }
    free(copy);
    return 0;
}
