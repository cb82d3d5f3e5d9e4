/* The engine and vt_context on a Gemma-3-shaped model (vt synth's gemma3: 5
 * sliding layers to 1 global, the sliding ones on a rope base of their own,
 * GELU, post-norms, QK-norm), window W, prompts of about 3 windows:
 *   - vt_context lets go of the sliding-window blocks its window has passed:
 *     its SWA pool holds one window and one pass (kv_swa_pool_blocks), between
 *     calls a sequence holds only its window's blocks, and a prompt fed in
 *     awkward pieces (passes cut where the pool runs out) gives the same tokens;
 *   - 8 prompts batched (chunked prefill) give the tokens of each alone, and of
 *     vt_context; after every step a sequence's SWA group holds no more blocks
 *     than its window and that step's tokens span (the request's counters);
 *     the engine's SWA pool holds one window per sequence and one step, and a
 *     chunk it cannot cover is cut, not preempted;
 *   - a pool too small for all: preemption and recompute, the same tokens;
 *   - prefix-cache hits give the tokens of a cold run, and follow vLLM's rule:
 *     a hit needs, in the SWA group, only the blocks the window of the first
 *     token to compute reaches. Where other requests have evicted a prompt's
 *     early SWA blocks but not its window, the hit is whole; where they evicted
 *     the window, the hit falls back (to what the cache still serves, here
 *     nothing) although the full-attention group still holds every block. The
 *     attention kernels assert that no released block is ever read;
 *   - every block of every group is free at the end;
 *   - a vt_decode batch that fails in a later pass keeps, with sliding layers,
 *     the passes that completed (vt.h), and leaves no block behind. */
#include "engine_util.h"
#include "test.h"
#include "vt.h"

#include "base/mapfile.h"
#include "engine/context.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/synth.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { W = 32, BS = 16, N_CTX = 512, N_PROMPTS = 8, N_GEN = 16, MAX_PROMPT = 128 };

/* Set tensor `name`'s first element (F32) in the GGUF at path to NaN. */
static void poison(const char *path, const char *name) {
    mapfile mf;
    gguf_file f;
    CHECK_OK(mapfile_open(path, &mf));
    CHECK_OK(gguf_parse(mf.data, mf.size, path, &f));
    const gguf_tensor *t = gguf_find_tensor(&f, name);
    CHECK(t && t->type == VT_DTYPE_F32);
    const long off = t ? (long)(f.data_offset + t->offset) : 0;
    gguf_free(&f);
    mapfile_close(&mf);
    FILE *fp = fopen(path, "r+b");
    const float nan = NAN;
    CHECK(fp && fseek(fp, off, SEEK_SET) == 0 && fwrite(&nan, sizeof nan, 1, fp) == 1);
    if (fp) fclose(fp);
}

static void poison_head(const char *path) { poison(path, "output_norm.weight"); }

/* window 0: no sliding layers; nan_head: a NaN in output_norm.weight (every
 * logit NaN, the KV cache as it should be) */
static vt_model *make_model_ex(int64_t window, bool nan_head) {
    synth_params sp = synth_default_params();
    sp.arch = "gemma3";
    sp.n_layer = 6;
    sp.n_swa = window;
    sp.swa_pattern = window ? 6 : 0;
    sp.n_embd = 64;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.n_ff = 128;
    sp.n_ctx = N_CTX;
    sp.rope_freq_base = 1e6f;
    sp.rope_freq_base_swa = 10000.0f;
    sp.n_threads = 1;
    sp.seed = 3;
    return test_synth_load(&sp, nan_head ? poison_head : NULL);
}

static vt_model *make_model(void) { return make_model_ex(W, false); }

/* A batch that fails in its last pass (non-finite logits): with sliding layers
 * the sequence keeps the passes that completed (their window has let go of
 * blocks), without them the cache is as before; no block is left over. */
static void test_failed_batch(void) {
    for (int swa = 0; swa < 2; swa++) {
        vt_model *m = make_model_ex(swa ? W : 0, true);
        if (!m) return;
        vt_context_params cp = vt_context_default_params();
        cp.n_ctx = N_CTX;
        cp.n_batch = 24;
        cp.n_threads = 1;
        cp.kv_block = BS;
        vt_context *c = NULL;
        CHECK_OK(vt_context_create(m, &cp, &c));
        if (c) {
            int32_t tok[100], pos[100], seq[100] = {0};
            for (int32_t i = 0; i < 100; i++) tok[i] = 3 + i, pos[i] = i;
            const vt_batch b = {.n_tokens = 100, .token = tok, .pos = pos, .seq = seq};
            CHECK_EQ_INT(vt_decode(c, &b), VT_E_NUMERIC); /* passes 0, 24, 48, 72, 96: the last has the logits */
            CHECK(vt_get_logits(c, 0) == NULL);
            const kv_cache *kv = context_kv(c);
            const int32_t len = vt_seq_len(c, 0);
            CHECK_EQ_INT(len, swa ? 96 : 0);
            const kv_pool *full = &kv->groups[0].pool;
            CHECK_EQ_INT(full->n_blocks - full->n_free, (len + BS - 1) / BS);
            if (swa) {
                const kv_pool *sw = &kv->groups[1].pool;
                CHECK(sw->n_blocks - sw->n_free <= kv_span_blocks(W - 1, BS));
                /* and the sequence goes on from there */
                const vt_batch rest = {.n_tokens = 4, .token = tok + 96, .pos = pos + 96, .seq = seq};
                CHECK_EQ_INT(vt_decode(c, &rest), VT_E_NUMERIC);
                CHECK_EQ_INT(vt_seq_len(c, 0), 96);
                /* going back: not past the blocks the window has released */
                CHECK_EQ_INT(vt_seq_keep(c, 0, 10), VT_E_UNSUPPORTED);
                CHECK_EQ_INT(vt_seq_len(c, 0), 96);
                CHECK_OK(vt_seq_keep(c, 0, 95)); /* its window still starts in block 4 */
                CHECK_EQ_INT(vt_seq_len(c, 0), 95);
            }
            vt_seq_clear(c, 0);
            for (int32_t g = 0; g < kv->n_groups; g++)
                CHECK_EQ_INT(kv->groups[g].pool.n_free, kv->groups[g].pool.n_blocks);
        }
        vt_context_free(c);
        vt_model_free(m);
    }
}

/* The SWA group of the model's cache (group 1: FULL comes first). */
static const kv_group *swa_group(const kv_cache *kv) {
    CHECK(kv->n_groups == 2 && kv->groups[0].spec.kind == KV_GROUP_FULL &&
          kv->groups[1].spec.kind == KV_GROUP_SWA && kv->groups[1].spec.window == W);
    return &kv->groups[1];
}

/* Greedy tokens of vt_context: the prompt in two calls split at `split` (0: one
 * call), passes of up to n_batch tokens, then one token a call. Checks the SWA pool's
 * size and that between calls the sequence holds only its window's blocks. */
static void context_generate(vt_model *m, const int32_t *prompt, int32_t n, int32_t split, int32_t n_batch,
                             int32_t *out) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = n_batch;
    cp.n_threads = 1;
    cp.kv_block = BS;
    vt_context *c = NULL;
    CHECK_OK(vt_context_create(m, &cp, &c));
    if (!c) return;
    const kv_cache *kv = context_kv(c);
    const kv_group *swa = swa_group(kv);
    CHECK_EQ_INT(swa->spec.n_blocks, kv_swa_pool_blocks(W, BS, 1, n_batch));
    CHECK(swa->spec.n_blocks * 4 < kv->groups[0].spec.n_blocks); /* not the context's */
    const int32_t nv = vt_model_n_vocab(m);
    int32_t pos[MAX_PROMPT + N_GEN], seq[MAX_PROMPT + N_GEN] = {0};
    for (int32_t i = 0; i < n; i++) pos[i] = i;
    for (int32_t a = 0; a < n;) {
        const int32_t e = a < split ? split : n;
        const vt_batch b = {.n_tokens = e - a, .token = prompt + a, .pos = pos + a, .seq = seq};
        CHECK_OK(vt_decode(c, &b));
        CHECK_EQ_INT(vt_seq_len(c, 0), e);
        a = e;
        /* positions (e - W, e) are all the next token needs */
        CHECK(swa->pool.n_blocks - swa->pool.n_free <= kv_span_blocks(W - 1, BS));
    }
    for (int32_t k = 0; k < N_GEN; k++) {
        out[k] = test_argmax(vt_get_logits(c, 0), nv);
        const int32_t p = n + k;
        const vt_batch b = {.n_tokens = 1, .token = &out[k], .pos = &p, .seq = seq};
        if (k + 1 < N_GEN) CHECK_OK(vt_decode(c, &b));
        CHECK(swa->pool.n_blocks - swa->pool.n_free <= kv_span_blocks(W - 1, BS));
    }
    CHECK(swa->pool.n_used_max <= swa->spec.n_blocks);
    vt_seq_clear(c, 0);
    CHECK_EQ_INT(swa->pool.n_free, swa->pool.n_blocks);
    CHECK_EQ_INT(kv->groups[0].pool.n_free, kv->groups[0].pool.n_blocks);
    vt_context_free(c);
}

typedef test_gen gen; /* N_GEN tokens of it */
_Static_assert(N_GEN <= TEST_GEN_MAX, "a request's tokens fit a test_gen");

static vt_engine_params engine_params(int32_t max_seqs) {
    vt_engine_params p = vt_engine_default_params();
    p.n_threads = 1;
    p.n_ctx = N_CTX;
    p.kv_block = BS;
    p.max_seqs = max_seqs;
    p.max_batch_tokens = 64; /* prefill in chunks */
    return p;
}

/* After a step: each running request's SWA group holds the blocks of its
 * window and of the tokens its last step computed, no more. last_n: tokens of
 * each request's last step, by id. */
static void check_held(const vt_engine *e, int64_t *last_n) {
    for (int32_t i = 0; i < e->n_running; i++) {
        const request *r = e->running[i];
        for (int32_t k = 0; k < e->n_items; k++)
            if (e->items[k].req == r) last_n[r->id % 64] = e->items[k].n;
        const int64_t n_step = last_n[r->id % 64];
        const int64_t held = r->n_blocks - r->n_released[1];
        CHECK_EQ_INT(r->n_blocks - r->n_released[0], r->n_blocks); /* the full group keeps all */
        const int64_t bound = kv_span_blocks(W - 1 + (n_step > 0 ? n_step : 1), BS);
        CHECK_MSG(held <= bound, "request %llu holds %lld SWA blocks at %lld tokens, step of %lld (bound %lld)",
                  (unsigned long long)r->id, (long long)held, (long long)r->n_computed, (long long)n_step,
                  (long long)bound);
        for (int64_t j = 0; j < r->n_released[1]; j++) CHECK(r->blocks[1][j] == -1);
    }
}

/* The tokens of requests ids[0..n) into out[0..n); after each step, check_held. */
typedef struct run_state {
    test_requests req; /* first: test_collect_tokens' arg is also a test_requests */
    int64_t last_n[64];
} run_state;

static void after_step(vt_engine *e, int step, void *arg) { check_held(e, ((run_state *)arg)->last_n); }

/* Add prompts[0..n) (all at once), step until done; out[k] gets prompt k's
 * greedy tokens. keep: leave the engine for the caller (else check every block
 * is free and destroy it). */
static vt_engine *engine_run(vt_model *m, vt_engine *e, const vt_engine_params *p, int32_t *const *prompts,
                             const int32_t *np, int n, gen *out, bool keep) {
    if (!e) CHECK_OK(vt_engine_create(m, p, &e));
    if (!e) return NULL;
    uint64_t ids[N_PROMPTS];
    memset(out, 0, sizeof *out * (size_t)n);
    for (int k = 0; k < n; k++) {
        vt_request_params q = {.prompt = prompts[k], .n_prompt = np[k], .sampling = vt_sampling_default(),
                               .max_tokens = N_GEN, .ignore_eos = true};
        CHECK_OK(vt_engine_add(e, &q, &ids[k]));
    }
    run_state rs = {.req = {ids, n, out, sizeof *out}};
    test_engine_drain(e, test_collect_tokens, after_step, &rs);
    if (keep) return e;
    vt_engine_stats st;
    vt_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.kv_blocks_free, st.kv_blocks_total);
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        pcache_evict_all(&e->pc[g]);
        CHECK_EQ_INT(e->kv.groups[g].pool.n_free, e->kv.groups[g].pool.n_blocks);
    }
    vt_engine_free(e);
    return NULL;
}

static bool same(const gen *g, const int32_t *want) {
    return g->n == N_GEN && !memcmp(g->tok, want, sizeof(int32_t) * N_GEN);
}

/* Prompt a after prompt b on an engine that still holds a's cached blocks:
 * which of a's blocks each group still serves, and the hit vLLM's rule allows. */
static void prefix_after(vt_model *m, int32_t *a, int32_t na, int32_t *b, int32_t nb, const int32_t *want,
                         int64_t *full_hits, int64_t *expect, bool *early_gone) {
    vt_engine_params p = engine_params(1); /* a SWA pool of a few blocks, a full one of 32 */
    gen got[1];
    vt_engine *e = engine_run(m, NULL, &p, &a, &na, 1, got, true);
    if (!e) return;
    CHECK(same(&got[0], want));
    e = engine_run(m, e, &p, &b, &nb, 1, got, true);
    /* a's chain of whole blocks, looked up in each group's index */
    const int64_t max_blocks = (na - 1) / BS;
    bool in_full[MAX_PROMPT / BS], in_swa[MAX_PROMPT / BS];
    uint64_t parent = 0;
    for (int64_t i = 0; i < max_blocks; i++) {
        const uint64_t h = pcache_hash(parent, a + i * BS, BS);
        in_full[i] = pcache_lookup(&e->pc[0], parent, h, a + i * BS) >= 0;
        in_swa[i] = pcache_lookup(&e->pc[1], parent, h, a + i * BS) >= 0;
        parent = h;
    }
    int64_t f = 0;
    while (f < max_blocks && in_full[f]) f++;
    int64_t best = 0; /* by brute force: every block of [window start, h) cached */
    for (int64_t h = 1; h <= f; h++) {
        bool ok = true;
        for (int64_t i = h * BS - W + 1 > 0 ? (h * BS - W + 1) / BS : 0; i < h; i++) ok = ok && in_swa[i];
        if (ok) best = h;
    }
    *full_hits = f;
    *expect = best;
    *early_gone = !in_swa[0];
    e = engine_run(m, e, &p, &a, &na, 1, got, false);
    CHECK_EQ_INT(got[0].n_cached, best * BS);
    CHECK_MSG(same(&got[0], want), "a prefix hit of %lld blocks (of %lld in the full group) changed the tokens",
              (long long)best, (long long)f);
}

int main(void) {
    test_failed_batch();
    vt_model *m = make_model();
    if (!m) return test_finish();
    const int32_t np[N_PROMPTS] = {100, 96, 81, 110, 97, 120, 90, 105};
    int32_t *prompts[N_PROMPTS];
    uint64_t s = 21;
    for (int k = 0; k < N_PROMPTS; k++) {
        prompts[k] = malloc(sizeof(int32_t) * MAX_PROMPT);
        for (int i = 0; i < np[k]; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            prompts[k][i] = 3 + (int32_t)((s >> 33) % 500);
        }
    }
    memcpy(prompts[7], prompts[0], 64 * sizeof(int32_t)); /* 4 whole blocks shared */

    /* vt_context: the prompt in one call, and in pieces whose passes start off
     * the block boundaries (at 46 with passes of 24: a pass would need one
     * block more than the pool has, and is cut) */
    int32_t want[N_PROMPTS][N_GEN], alt[N_GEN];
    for (int k = 0; k < N_PROMPTS; k++) {
        context_generate(m, prompts[k], np[k], 0, 64, want[k]);
        context_generate(m, prompts[k], np[k], 46, 24, alt);
        CHECK_MSG(!memcmp(alt, want[k], sizeof alt), "prompt %d: vt_context in passes of 24 differs", k);
    }

    gen got[N_PROMPTS];
    /* each alone */
    vt_engine_params p = engine_params(1);
    for (int k = 0; k < N_PROMPTS; k++) {
        engine_run(m, NULL, &p, &prompts[k], &np[k], 1, &got[k], false);
        CHECK_MSG(same(&got[k], want[k]), "prompt %d alone differs from vt_context", k);
    }
    /* alone in steps of 46 tokens: the second chunk starts at 46, where its
     * window and tokens span one block more than the SWA pool of one window
     * and one step holds: the scheduler cuts it instead of preempting */
    p = engine_params(1);
    p.max_batch_tokens = 46;
    vt_engine *e = engine_run(m, NULL, &p, &prompts[0], &np[0], 1, &got[0], true);
    if (e) {
        CHECK_EQ_INT(e->kv.groups[1].spec.n_blocks, kv_swa_pool_blocks(W, BS, 1, 46));
        CHECK(e->swa_cuts > 0);
        CHECK_EQ_INT(e->st.preemptions, 0);
        engine_run(m, e, &p, prompts, np, 0, got, false);
    }
    CHECK_MSG(same(&got[0], want[0]), "prompt 0 in cut chunks differs");
    /* batched: all 8 at once, prefill chunks next to decodes */
    p = engine_params(8);
    p.prefix_cache = false;
    engine_run(m, NULL, &p, prompts, np, N_PROMPTS, got, false);
    for (int k = 0; k < N_PROMPTS; k++) CHECK_MSG(same(&got[k], want[k]), "prompt %d batched differs", k);

    /* a full pool too small for all: preemption and recompute */
    p = engine_params(8);
    p.kv_tokens = 300;
    e = engine_run(m, NULL, &p, prompts, np, N_PROMPTS, got, true);
    if (e) {
        vt_engine_stats st;
        vt_engine_stats_get(e, &st);
        CHECK(st.preemptions > 0);
        engine_run(m, e, &p, prompts, np, 0, got, false);
    }
    for (int k = 0; k < N_PROMPTS; k++) CHECK_MSG(same(&got[k], want[k]), "prompt %d with preemption differs", k);

    /* prefix hits: prompt 7 after prompt 0 (4 shared blocks), prompt 0 again */
    p = engine_params(8);
    e = engine_run(m, NULL, &p, &prompts[0], &np[0], 1, got, true);
    int32_t *again[2] = {prompts[7], prompts[0]};
    const int32_t np_again[2] = {np[7], np[0]};
    for (int k = 0; e && k < 2; k++) {
        e = engine_run(m, e, &p, &again[k], &np_again[k], 1, &got[k], k == 0);
        CHECK_EQ_INT(got[k].n_cached, k == 0 ? 64 : (np[0] - 1) / BS * BS);
        CHECK_MSG(same(&got[k], want[k == 0 ? 7 : 0]), "prompt %d from the prefix cache differs", k == 0 ? 7 : 0);
    }

    /* prompt 0 after another prompt evicted some of its cached SWA blocks: a
     * short one evicts the early blocks only (the window's remain: a whole
     * hit), a long one the window's too (no hit, though the full group still
     * holds every block) */
    int64_t full_hits, expect;
    bool early_gone;
    int32_t *b = prompts[2];
    prefix_after(m, prompts[0], np[0], b, 20, want[0], &full_hits, &expect, &early_gone);
    CHECK(early_gone && full_hits == (np[0] - 1) / BS && expect == full_hits);
    prefix_after(m, prompts[0], np[0], b, np[2], want[0], &full_hits, &expect, &early_gone);
    CHECK(full_hits == (np[0] - 1) / BS && expect < full_hits);
    printf("prefix after a long prompt: %lld of %lld blocks served\n", (long long)expect, (long long)full_hits);

    for (int k = 0; k < N_PROMPTS; k++) free(prompts[k]);
    vt_model_free(m);
    return test_finish();
}
