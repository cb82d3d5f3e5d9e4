/* Helpers the engine tests share (test_engine*, test_kv_groups, test_layer_kind,
 * test_server_grammar, llama/test_embed_llama):
 * a synthetic model written and loaded, vt_context's greedy tokens as the
 * reference, and an engine stepped until it is done. Checks count in test.h. */
#ifndef VT_TESTS_ENGINE_UTIL_H
#define VT_TESTS_ENGINE_UTIL_H

#include "test.h"
#include "vt.h"

#include "model/synth.h"

#include <stdint.h>
#include <unistd.h>

/* The index of the largest of l[0..n), the first on a tie; 0 where l is NULL. */
static inline int32_t test_argmax(const float *l, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; l && i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

/* The model sp describes, written to a temporary file, edited there by `edit`
 * (where not NULL: a test that corrupts a tensor, or one that loads the same
 * file into llama.cpp) and loaded; the file is removed. NULL, after a failed
 * check, where a step fails. */
static inline vt_model *test_synth_load(const synth_params *sp, void (*edit)(const char *path)) {
    char path[] = "/tmp/vt_test_synth_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return NULL;
    close(fd);
    vt_model *m = NULL;
    vt_status s = synth_write(sp, path);
    CHECK_MSG(s == VT_OK, "synth %s: %s", sp->arch, vt_last_error());
    if (s == VT_OK) {
        if (edit) edit(path);
        s = vt_model_load(path, NULL, &m);
        CHECK_MSG(s == VT_OK, "load of a synthetic %s: %s", sp->arch, vt_last_error());
    }
    unlink(path);
    return m;
}

/* Greedy tokens of a vt_context made with cp: prompt[0..n_prompt) (n_prompt >= 1)
 * in one call, then one token a call; n_gen tokens into out. */
static inline void test_greedy_context(vt_model *m, const vt_context_params *cp, const int32_t *prompt,
                                       int32_t n_prompt, int32_t n_gen, int32_t *out) {
    vt_context *c = NULL;
    CHECK_OK(vt_context_create(m, cp, &c));
    if (!c) return;
    const int32_t nv = vt_model_n_vocab(m);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n_prompt), *seq = calloc((size_t)n_prompt, sizeof(int32_t));
    for (int32_t i = 0; pos && i < n_prompt; i++) pos[i] = i;
    vt_batch b = {.n_tokens = n_prompt, .token = prompt, .pos = pos, .seq = seq};
    CHECK(pos && seq);
    if (pos && seq) CHECK_OK(vt_decode(c, &b));
    for (int32_t g = 0; pos && seq && g < n_gen; g++) {
        out[g] = test_argmax(vt_get_logits(c, 0), nv);
        const int32_t p = n_prompt + g;
        b = (vt_batch){.n_tokens = 1, .token = &out[g], .pos = &p, .seq = seq};
        if (g + 1 < n_gen) CHECK_OK(vt_decode(c, &b));
    }
    vt_context_free(c);
    free(pos);
    free(seq);
}

/* Requests ids[0..n) and their results: out holds n of `size` bytes each, in
 * the order of ids. */
typedef struct test_requests {
    const uint64_t *ids;
    int32_t n;
    void *out;
    size_t size;
} test_requests;

/* The result of o's request in r; NULL, after a failed check, for an id r does
 * not hold. */
static inline void *test_result_of(const test_requests *r, const vt_output *o) {
    for (int32_t k = 0; k < r->n; k++)
        if (r->ids[k] == o->id) return (char *)r->out + (size_t)k * r->size;
    CHECK_MSG(0, "output for unknown id %llu", (unsigned long long)o->id);
    return NULL;
}

/* The tokens one request generated (TEST_GEN_MAX at most) and the n_cached of
 * its last output. */
#define TEST_GEN_MAX 64
typedef struct test_gen {
    int32_t tok[TEST_GEN_MAX];
    int32_t n, n_cached;
} test_gen;

/* test_engine_drain's on_output where the results are test_gens: arg is the
 * test_requests (or a struct that begins with one). */
static inline void test_collect_tokens(const vt_output *o, void *arg) {
    test_gen *g = test_result_of(arg, o);
    if (g && o->token >= 0 && g->n < TEST_GEN_MAX) {
        g->tok[g->n++] = o->token;
        g->n_cached = o->n_cached;
    }
}

/* Step e until it has no work left (at most 100000 steps): every output to
 * on_output(o, arg), and after each step on_step(e, step, arg) where on_step
 * is not NULL (step counts from 1). */
static inline void test_engine_drain(vt_engine *e, void (*on_output)(const vt_output *o, void *arg),
                                     void (*on_step)(vt_engine *e, int step, void *arg), void *arg) {
    int step = 0;
    while (vt_engine_has_work(e) && step++ < 100000) {
        const vt_output *outs = NULL;
        int32_t n_outs = 0;
        CHECK_OK(vt_engine_step(e, &outs, &n_outs));
        for (int32_t i = 0; i < n_outs; i++) on_output(&outs[i], arg);
        if (on_step) on_step(e, step, arg);
    }
    CHECK(!vt_engine_has_work(e));
}

#endif
