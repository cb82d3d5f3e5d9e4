/* libFuzzer target for the GBNF grammar engine (src/grammar): parse arbitrary
 * grammar text; when it compiles, match the bytes after it and walk a few
 * masks over a small fixed vocabulary (multi-byte tokens, a split UTF-8
 * character, an end-of-generation token, the first token's dropped space,
 * token references by id and by text).
 * Checks: parsing succeeds or fails with VT_E_INVALID / VT_E_NOMEM and a
 * message; a mask only allows tokens the matcher then accepts (or refuses with
 * a matching limit's VT_E_RANGE); ASan/UBSan/LSan
 * check memory, and libFuzzer's -timeout catches an expansion that does not stop.
 *
 * Input layout: the grammar up to the first NUL byte (all of the input when
 * there is none); after it, text to match.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVT_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_grammar
 *   ./build-fuzz/fuzz_grammar -max_total_time=60 fuzz/corpus/grammar */
#include "grammar/grammar.h"

#include "base/status.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const TOKENS[] = {"a", "b", "ab", "{", "}", "\"", " a", "", "</s>", "1", " ", "\n",
                                     "-", "x", "é", "\xc3", "\xa9", "true", "[", "]", ",", ":", "\\", "(("};
#define N_TOKENS ((int32_t)(sizeof TOKENS / sizeof TOKENS[0]))
#define EOG 8

static grammar_vocab *vocab(void) {
    static grammar_vocab *v;
    if (v) return v;
    char bytes[256];
    int64_t off[N_TOKENS + 1] = {0};
    bool eog[N_TOKENS] = {0};
    for (int32_t i = 0; i < N_TOKENS; i++) {
        const size_t n = strlen(TOKENS[i]);
        memcpy(bytes + off[i], TOKENS[i], n);
        off[i + 1] = off[i] + (int64_t)n;
    }
    eog[EOG] = true;
    if (grammar_vocab_create(N_TOKENS, bytes, off, eog, true, &v) != VT_OK) abort();
    return v;
}

/* <text> token references: "</s>" (the end-of-generation token, which no
 * reference admits) and any three-byte <x> to some token; others are unknown. */
static int32_t find_token(void *ud, const char *s, size_t n) {
    (void)ud;
    if (n == 4 && !memcmp(s, "</s>", 4)) return EOG;
    return n == 3 ? (int32_t)((uint8_t)s[1] % N_TOKENS) : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const char *nul = memchr(data, 0, size);
    const size_t glen = nul ? (size_t)(nul - text) : size;
    grammar *g = NULL;
    const grammar_tokens tk = {.n_vocab = N_TOKENS, .find = find_token};
    vt_status st = grammar_parse_tokens(text, glen, NULL, &tk, &g);
    if (st != VT_OK) {
        if (st != VT_E_INVALID && st != VT_E_NOMEM) abort();
        if (!vt_last_error()[0]) abort();
        return 0;
    }
    if (nul) (void)grammar_accepts(g, nul + 1, size - glen - 1);
    grammar_matcher *m = NULL;
    if (grammar_matcher_create(g, vocab(), &m) == VT_OK) {
        for (int step = 0; step < 8; step++) {
            const uint32_t *bits;
            int32_t n;
            if (grammar_matcher_mask(m, &bits, &n) != VT_OK || n == 0) break;
            int32_t pick = -1, seen = 0;
            for (int32_t t = 0; t < N_TOKENS; t++) {
                if (!((bits[t >> 5] >> (t & 31)) & 1)) continue;
                seen++;
                if (pick < 0 || (size > 0 && data[(size_t)step % size] % (uint32_t)seen == 0)) pick = t;
            }
            if (seen != n) abort();
            /* the mask allowed it, so the matcher takes it, unless taking it
             * passes a matching limit: a state with token references is masked
             * by its bytes and its ids apart, and accepting unites both sets
             * of stacks, which can exceed GRAMMAR_MAX_STACKS (the request's
             * VT_E_RANGE error, with its message) */
            const vt_status ast = grammar_matcher_accept(m, pick);
            if (ast == VT_E_RANGE && vt_last_error()[0]) break;
            if (ast != VT_OK) abort();
            if (pick == EOG) break;
        }
        grammar_matcher_free(m);
    }
    grammar_free(g);
    return 0;
}
