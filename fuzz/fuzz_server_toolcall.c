/* libFuzzer target for the tool-call parser (src/server/toolcall.c): the first
 * byte picks the format (low 3 bits, over all formats), reasoning (bit 3),
 * starts_in_reasoning (bit 4) and the streaming step (high 3 bits, 1..8); the
 * rest is model output. Checks: the whole parse and the stream fed in steps
 * agree (what was streamed is never taken back: the deltas put together are the
 * whole parse), and ASan/LSan check memory.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVT_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_server_toolcall
 *   ./build-fuzz/fuzz_server_toolcall -max_total_time=60 fuzz/corpus/server_toolcall */
#include "server/toolcall.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct got {
    strbuf content, reasoning, names[TC_MAX_CALLS], args[TC_MAX_CALLS];
    int32_t n;
} got;

static void emit(void *ud, tc_delta_kind kind, int32_t call, const char *s, size_t n) {
    got *g = ud;
    switch (kind) {
    case TC_DELTA_CONTENT: sb_addn(&g->content, s, n); break;
    case TC_DELTA_REASONING: sb_addn(&g->reasoning, s, n); break;
    case TC_DELTA_CALL:
        if (call != g->n) abort(); /* calls come in order */
        sb_addn(&g->names[g->n++], s, n);
        break;
    case TC_DELTA_ARGS:
        if (call < 0 || call >= g->n) abort();
        sb_addn(&g->args[call], s, n);
        break;
    }
}

static void same(const strbuf *a, const strbuf *b) {
    if (a->len != b->len || (a->len && memcmp(a->ptr, b->ptr, a->len))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    tc_options o = {.format = (tc_format)((data[0] & 7) % TC_FORMAT_COUNT),
                    .reasoning = data[0] & 8,
                    .starts_in_reasoning = data[0] & 16};
    size_t step = (size_t)(data[0] >> 5) + 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char *copy = malloc(len ? len : 1); /* exact size: a read past it trips ASan */
    if (!copy) return 0;
    memcpy(copy, text, len);

    tc_result whole;
    tc_parse(&o, copy, len, true, &whole);

    tc_stream st;
    tc_stream_init(&st, &o);
    got *g = calloc(1, sizeof *g);
    if (!g) abort();
    for (size_t i = 0; i < len; i += step) tc_stream_feed(&st, copy + i, len - i < step ? len - i : step, false, emit, g);
    tc_stream_feed(&st, "", 0, true, emit, g);

    same(&g->content, &whole.content);
    same(&g->reasoning, &whole.reasoning);
    if (g->n != whole.n_calls) abort();
    for (int32_t k = 0; k < g->n; k++) {
        same(&g->names[k], &whole.calls[k].name);
        same(&g->args[k], &whole.calls[k].args);
    }

    sb_free(&g->content);
    sb_free(&g->reasoning);
    for (int32_t k = 0; k < TC_MAX_CALLS; k++) {
        sb_free(&g->names[k]);
        sb_free(&g->args[k]);
    }
    free(g);
    tc_stream_free(&st);
    tc_result_free(&whole);
    free(copy);
    return 0;
}
