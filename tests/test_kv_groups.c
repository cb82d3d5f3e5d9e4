/* The KV cache of layer groups (kvcache/kv_cache.h) and sliding-window attention
 * end to end, on small synthetic llama models with <arch>.attention.sliding_window:
 *   - the groups a set of windows makes; a recurrent-state group's slots;
 *   - a window as long as the context gives the bits of no window;
 *   - a small window is a window: positions past the horizon of n_layer windows
 *     give bit-identical logits whatever the tokens before it, and differ before;
 *   - the engine (chunked prefill, batching, blocks released as the window
 *     passes them, preemption, prefix-cache hits through every group) generates
 *     the tokens of vt_context (which releases them too); a sliding-window group
 *     never holds more blocks than its window and a step's tokens span;
 *   - every block of every group is free at the end;
 *   - the engine part again on a Gemma-3-shaped gemma3 model (5 sliding layers
 *     to 1 global), and on a synthetic gpt-oss (mixture of experts, sinks,
 *     biases, a window on alternate layers). */
#include "engine_util.h"
#include "test.h"
#include "vt.h"

#include "engine/engine.h"
#include "model/synth.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define N_CTX 512
#define BS 16

static vt_model *make_model(const char *arch, int64_t n_layer, int64_t n_swa, int64_t pattern) {
    synth_params sp = synth_default_params();
    sp.n_layer = n_layer;
    sp.n_embd = 64;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.n_ff = 128;
    sp.n_ctx = N_CTX;
    sp.n_threads = 1;
    sp.arch = arch;
    sp.n_swa = n_swa;
    sp.swa_pattern = pattern;
    if (!strcmp(arch, "gemma3")) { /* its local and global rope bases */
        sp.rope_freq_base = 1e6f;
        sp.rope_freq_base_swa = 10000.0f;
    }
    sp.seed = 7;
    if (!strcmp(arch, "gpt-oss")) { /* 4 experts of 64 rows, 2 per token, sinks, biases */
        sp.n_expert = 4;
        sp.n_expert_used = 2;
        sp.n_ff_exp = 64;
    }
    return test_synth_load(&sp, NULL);
}

static void test_groups(void) {
    kv_group_spec specs[KV_MAX_GROUPS];
    int32_t lg[8], n = 0;
    const int64_t w1[5] = {8, 0, 8, 0, 16};
    CHECK_OK(kv_groups_from_windows(5, w1, specs, lg, &n));
    CHECK_EQ_INT(n, 3);
    CHECK(specs[0].kind == KV_GROUP_FULL && specs[1].kind == KV_GROUP_SWA && specs[1].window == 8 &&
          specs[2].kind == KV_GROUP_SWA && specs[2].window == 16);
    const int32_t want[5] = {1, 0, 1, 0, 2};
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(lg[i], want[i]);
    const int64_t w2[2] = {8, 8};
    CHECK_OK(kv_groups_from_windows(2, w2, specs, lg, &n));
    CHECK(n == 1 && specs[0].kind == KV_GROUP_SWA && lg[0] == 0 && lg[1] == 0);
    const int64_t w3[5] = {1, 2, 3, 4, 5};
    CHECK_EQ_INT(kv_groups_from_windows(5, w3, specs, lg, &n), VT_E_UNSUPPORTED);

    /* the first block a window still needs */
    CHECK_EQ_INT(kv_first_needed_block(KV_GROUP_SWA, 20, 16, 20), 0); /* sees 1..20 */
    CHECK_EQ_INT(kv_first_needed_block(KV_GROUP_SWA, 20, 16, 36), 1); /* sees 17..36 */
    CHECK_EQ_INT(kv_first_needed_block(KV_GROUP_FULL, 0, 16, 1000), 0);
    /* the most blocks n positions touch; a SWA pool of one window and one pass
     * (Gemma 3's window of 1024 and a pass of 512: llama.cpp's 1536 cells) */
    CHECK_EQ_INT(kv_span_blocks(1, 16), 1);
    CHECK_EQ_INT(kv_span_blocks(16, 16), 2);
    CHECK_EQ_INT(kv_span_blocks(17, 16), 2);
    CHECK_EQ_INT(kv_span_blocks(18, 16), 3);
    CHECK_EQ_INT(kv_span_blocks(1024, 16), 65);
    CHECK_EQ_INT(kv_swa_pool_blocks(1024, 16, 1, 512) * 16, 1536);
    CHECK_EQ_INT(kv_swa_pool_blocks(20, 16, 3, 1), 9);
    /* vLLM's hit rule: FULL needs every block, SWA only its window's (window 20,
     * blocks of 16: the token at 16 h needs blocks from (16 h - 19) / 16 on) */
    const int32_t f1[4] = {1, 2, -1, 4};
    CHECK_EQ_INT(kv_longest_hit(KV_GROUP_FULL, 0, 16, f1, 4), 2);
    CHECK_EQ_INT(kv_longest_hit(KV_GROUP_FULL, 0, 16, f1, 0), 0);
    const int32_t h1[6] = {-1, 3, 4, -1, 7, 8}, h2[4] = {-1, 3, -1, 6}, h3[4] = {-1, -1, 5, 6};
    CHECK_EQ_INT(kv_longest_hit(KV_GROUP_SWA, 20, 16, h1, 6), 6); /* needs 4 and 5 */
    CHECK_EQ_INT(kv_longest_hit(KV_GROUP_SWA, 20, 16, h1, 5), 3); /* 5 needs 3: 3 needs 1 and 2 */
    CHECK_EQ_INT(kv_longest_hit(KV_GROUP_SWA, 20, 16, h2, 4), 0); /* 4 needs 2, 3 needs 2, 2 needs 0 */
    CHECK_EQ_INT(kv_longest_hit(KV_GROUP_SWA, 20, 16, h3, 4), 4);
    CHECK_EQ_INT(kv_longest_hit(KV_GROUP_SWA, 20, 16, h3, 2), 0);

    /* a cache of FULL, SWA and STATE groups: storage, pools, slots */
    kv_cache kv;
    const kv_group_spec gs[3] = {{.kind = KV_GROUP_FULL, .n_blocks = 6},
                                 {.kind = KV_GROUP_SWA, .window = 8, .n_blocks = 3},
                                 {.kind = KV_GROUP_STATE, .state_bytes = 100, .n_blocks = 2}};
    const int32_t layer_group[4] = {1, 0, 2, 1};
    CHECK_OK(kv_cache_init_groups(&kv, VT_DTYPE_F16, VT_DTYPE_F16, 4, 2, 32, 16, gs, 3, layer_group));
    CHECK_EQ_INT(kv.groups[0].n_layer, 1);
    CHECK_EQ_INT(kv.groups[1].n_layer, 2);
    CHECK_EQ_INT(kv.groups[2].n_layer, 1);
    const kv_layer l0 = kv_layer_of(&kv, 0), l3 = kv_layer_of(&kv, 3);
    CHECK(l0.group == 1 && l0.window == 8 && l0.n_blocks == 3 && l3.k > l0.k);
    CHECK((size_t)(l3.k - l0.k) == kv.block_bytes_k * 3);
    const int32_t s0 = kv_pool_alloc(&kv.groups[2].pool), s1 = kv_pool_alloc(&kv.groups[2].pool);
    CHECK(s0 >= 0 && s1 >= 0 && s0 != s1 && kv_pool_alloc(&kv.groups[2].pool) == -1);
    uint8_t *a = kv_state_slot(&kv, 2, s0), *b = kv_state_slot(&kv, 2, s1);
    CHECK(a[0] == 0 && a[99] == 0 && (b - a == 100 || a - b == 100));
    kv_pool_release(&kv.groups[2].pool, s0);
    CHECK_EQ_INT(kv.groups[2].pool.n_free, 1);
    /* a sequence's SWA table lets go of what the window of its next token has
     * passed (window 8, blocks of 16: at 24, positions 17.. are needed) */
    int32_t table[3];
    for (int i = 0; i < 3; i++) table[i] = kv_pool_alloc(&kv.groups[1].pool);
    CHECK(table[2] >= 0 && kv.groups[1].pool.n_free == 0 && kv.groups[1].pool.n_used_max == 3);
    int64_t released = 0;
    CHECK_EQ_INT(kv_release_passed(&kv, 1, table, 3, &released, 24, kv_release_to_pool, &kv), 1);
    CHECK(released == 1 && table[0] == -1 && kv.groups[1].pool.n_free == 1);
    CHECK_EQ_INT(kv_release_passed(&kv, 1, table, 3, &released, 24, kv_release_to_pool, &kv), 0);
    CHECK_EQ_INT(kv_release_passed(&kv, 1, table, 3, &released, 100, kv_release_to_pool, &kv), 2);
    CHECK(released == 3 && kv.groups[1].pool.n_free == 3);
    CHECK_EQ_INT(kv_release_passed(&kv, 0, table, 3, &released, 100, kv_release_to_pool, &kv), 0); /* FULL */
    kv_cache_free(&kv);
    /* a window < 1, a group without layers */
    const kv_group_spec bad[2] = {{.kind = KV_GROUP_SWA, .window = 0, .n_blocks = 2},
                                  {.kind = KV_GROUP_FULL, .n_blocks = 2}};
    CHECK_EQ_INT(kv_cache_init_groups(&kv, VT_DTYPE_F16, VT_DTYPE_F16, 1, 1, 32, 16, bad, 1, NULL),
                 VT_E_INVALID);
    const kv_group_spec two[2] = {{.kind = KV_GROUP_FULL, .n_blocks = 2}, {.kind = KV_GROUP_FULL, .n_blocks = 2}};
    CHECK_EQ_INT(kv_cache_init_groups(&kv, VT_DTYPE_F16, VT_DTYPE_F16, 1, 1, 32, 16, two, 2, NULL),
                 VT_E_INVALID);
}

/* Logits of every position of tokens[0..n) through vt_context. */
static float *context_logits(vt_model *m, const int32_t *tokens, int32_t n) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = 96; /* several passes, and chunks of 256 positions crossed */
    cp.n_threads = 1;
    cp.kv_block = BS;
    vt_context *c = NULL;
    CHECK_OK(vt_context_create(m, &cp, &c));
    if (!c) return NULL;
    const int32_t nv = vt_model_n_vocab(m);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n), *seq = calloc((size_t)n, sizeof(int32_t));
    int8_t *want = malloc((size_t)n);
    for (int32_t i = 0; i < n; i++) pos[i] = i, want[i] = 1;
    const vt_batch b = {.n_tokens = n, .token = tokens, .pos = pos, .seq = seq, .logits = want};
    float *out = malloc(sizeof(float) * (size_t)n * (size_t)nv);
    CHECK_OK(vt_decode(c, &b));
    for (int32_t i = 0; i < n; i++) memcpy(out + (size_t)i * nv, vt_get_logits(c, i), sizeof(float) * (size_t)nv);
    vt_context_free(c);
    free(pos);
    free(seq);
    free(want);
    return out;
}

static void test_window_semantics(void) {
    enum { N = 300 };
    int32_t t1[N], t2[N];
    uint64_t s = 11;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        t1[i] = t2[i] = 3 + (int32_t)((s >> 33) % 500);
        if (i > 0 && i < 100) t2[i] = 3 + (t1[i] + 17) % 500; /* the prompts differ in 1..99 */
    }
    vt_model *full = make_model("llama", 2, 0, 0), *wide = make_model("llama", 2, N_CTX, 0), *wide_mix = make_model("llama", 3, N_CTX, 2);
    vt_model *full3 = make_model("llama", 3, 0, 0);
    if (!full || !wide || !wide_mix || !full3) return;
    const int32_t nv = vt_model_n_vocab(full);
    const size_t bytes = sizeof(float) * (size_t)N * (size_t)nv;
    float *a = context_logits(full, t1, N), *b = context_logits(wide, t1, N);
    CHECK_MSG(memcmp(a, b, bytes) == 0, "a window of n_ctx changed the logits of a 2-layer model");
    free(a);
    free(b);
    a = context_logits(full3, t1, N);
    b = context_logits(wide_mix, t1, N);
    CHECK_MSG(memcmp(a, b, bytes) == 0, "a window of n_ctx on 2 of 3 layers changed the logits");
    free(a);
    free(b);

    /* window 24 on both layers: position p sees tokens (p - 2 * 23, p] */
    vt_model *narrow = make_model("llama", 2, 24, 0);
    if (narrow) {
        a = context_logits(narrow, t1, N);
        b = context_logits(narrow, t2, N);
        int64_t same_after = 0, differ_before = 0;
        for (int p = 0; p < N; p++) {
            const bool same = memcmp(a + (size_t)p * nv, b + (size_t)p * nv, sizeof(float) * (size_t)nv) == 0;
            if (p >= 99 + 2 * 23 + 1) same_after += same;
            else if (p >= 1) differ_before += !same;
        }
        CHECK_EQ_INT(same_after, N - (99 + 2 * 23 + 1));
        CHECK_EQ_INT(differ_before, 99 + 2 * 23);
        free(a);
        free(b);
        /* and without a window the tail does depend on the head */
        a = context_logits(full, t1, N);
        b = context_logits(full, t2, N);
        CHECK(memcmp(a + (size_t)(N - 1) * nv, b + (size_t)(N - 1) * nv, sizeof(float) * (size_t)nv) != 0);
        free(a);
        free(b);
    }
    vt_model_free(full);
    vt_model_free(wide);
    vt_model_free(wide_mix);
    vt_model_free(full3);
    vt_model_free(narrow);
}

/* Greedy tokens of vt_context: the prompt in one batch, then one token a step. */
static void context_generate(vt_model *m, const int32_t *prompt, int32_t n, int32_t n_gen, int32_t *out) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_threads = 1;
    cp.kv_block = BS;
    test_greedy_context(m, &cp, prompt, n, n_gen, out);
}

enum { N_PROMPTS = 5, N_GEN = 24 };
typedef test_gen gen; /* N_GEN tokens of it */
_Static_assert(N_GEN <= TEST_GEN_MAX, "a request's tokens fit a test_gen");

/* The tokens of requests ids[0..n) into out[0..n); after each step, the
 * sliding-window groups' bound (check_swa_held). */
typedef struct run_state {
    test_requests req; /* first: test_collect_tokens' arg is also a test_requests */
    const vt_engine_params *p;
    int64_t *swa_held_max;
} run_state;

/* Each running request holds every block of a full group, and of a
 * sliding-window group no more than its window and one step's tokens span. */
static void check_swa_held(vt_engine *e, int step, void *arg) {
    run_state *rs = arg;
    const vt_engine_params *p = rs->p;
    for (int32_t i = 0; i < e->n_running; i++) {
        const request *r = e->running[i];
        for (int32_t g = 0; g < e->kv.n_groups; g++) {
            const kv_group_spec *sp = &e->kv.groups[g].spec;
            const int64_t held = r->n_blocks - r->n_released[g];
            if (sp->kind == KV_GROUP_FULL) {
                CHECK_EQ_INT(held, r->n_blocks);
                continue;
            }
            const int64_t bound = (sp->window + p->max_batch_tokens - 2) / p->kv_block + 2;
            CHECK_MSG(held <= bound, "SWA group %d holds %lld blocks at %lld tokens (bound %lld)", g,
                      (long long)held, (long long)r->n_computed, (long long)bound);
            if (held > *rs->swa_held_max) *rs->swa_held_max = held;
        }
    }
}

/* Run the prompts through an engine with p (all at once, or each after the one
 * before finished), checking after every step that each sliding-window group
 * holds no more than its window and one step's tokens span. */
static void engine_generate(vt_model *m, const vt_engine_params *p, int32_t *const *prompts,
                            const int32_t *np, int n, bool one_by_one, gen *out,
                            vt_engine_stats *st_out, int64_t *swa_held_max) {
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(m, p, &e));
    if (!e) return;
    /* a SWA pool is sized by its windows, not by the context */
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        const kv_group_spec *sp = &e->kv.groups[g].spec;
        if (sp->kind != KV_GROUP_SWA) continue;
        const int64_t bs = p->kv_block, mb = p->max_batch_tokens;
        const int64_t want = kv_swa_pool_blocks(sp->window, bs, p->max_seqs, mb);
        /* ... and never more than a full group's (kv_tokens, or max_seqs contexts) */
        const int64_t full = p->kv_tokens > 0 ? (p->kv_tokens + bs - 1) / bs : p->max_seqs * (N_CTX / bs);
        CHECK_EQ_INT(sp->n_blocks, want < full ? want : full);
        if (p->kv_tokens == 0) CHECK(sp->n_blocks * 4 < full);
    }
    uint64_t ids[N_PROMPTS];
    memset(out, 0, sizeof *out * (size_t)n);
    for (int k = 0; k < n; k++) {
        if (!one_by_one || k == 0) {
            for (int j = one_by_one ? k : 0; j < (one_by_one ? k + 1 : n); j++) {
                vt_request_params q = {.prompt = prompts[j], .n_prompt = np[j], .sampling = vt_sampling_default(),
                                       .max_tokens = N_GEN, .ignore_eos = true};
                CHECK_OK(vt_engine_add(e, &q, &ids[j]));
            }
        } else {
            vt_request_params q = {.prompt = prompts[k], .n_prompt = np[k], .sampling = vt_sampling_default(),
                                   .max_tokens = N_GEN, .ignore_eos = true};
            CHECK_OK(vt_engine_add(e, &q, &ids[k]));
        }
        run_state rs = {.req = {ids, n, out, sizeof *out}, .p = p, .swa_held_max = swa_held_max};
        test_engine_drain(e, test_collect_tokens, check_swa_held, &rs);
        if (!one_by_one) break;
    }
    vt_engine_stats st;
    vt_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.kv_blocks_free, st.kv_blocks_total);
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        pcache_evict_all(&e->pc[g]);
        CHECK_EQ_INT(e->kv.groups[g].pool.n_free, e->kv.groups[g].pool.n_blocks);
    }
    *st_out = st;
    vt_engine_free(e);
}

static void test_engine_windows(const char *arch, int64_t n_layer, int64_t n_swa, int64_t pattern) {
    vt_model *m = make_model(arch, n_layer, n_swa, pattern);
    if (!m) return;
    const int32_t np[N_PROMPTS] = {200, 37, 90, 150, 200};
    int32_t *prompts[N_PROMPTS];
    uint64_t s = 5;
    for (int k = 0; k < N_PROMPTS; k++) {
        prompts[k] = malloc(sizeof(int32_t) * (size_t)np[k]);
        for (int i = 0; i < np[k]; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            prompts[k][i] = 3 + (int32_t)((s >> 33) % 500);
        }
    }
    /* the last prompt shares its first 120 tokens with the first */
    memcpy(prompts[4], prompts[0], 120 * sizeof(int32_t));
    gen want[N_PROMPTS], got[N_PROMPTS];
    for (int k = 0; k < N_PROMPTS; k++) {
        context_generate(m, prompts[k], np[k], N_GEN, want[k].tok);
        want[k].n = N_GEN;
    }

    vt_engine_params p = vt_engine_default_params();
    p.n_threads = 1;
    p.n_ctx = N_CTX;
    p.kv_block = BS;
    p.max_seqs = 4;
    p.max_batch_tokens = 32; /* prefill in chunks */
    vt_engine_stats st;
    int64_t held_max = 0;
    /* batched, with room for all */
    engine_generate(m, &p, prompts, np, N_PROMPTS, false, got, &st, &held_max);
    for (int k = 0; k < N_PROMPTS; k++)
        CHECK_MSG(got[k].n == N_GEN && !memcmp(got[k].tok, want[k].tok, sizeof(int32_t) * N_GEN),
                  "swa %lld pattern %lld: prompt %d batched differs from vt_context", (long long)n_swa,
                  (long long)pattern, k);
    if (n_swa > 0) CHECK(held_max > 0 && held_max < (200 + N_GEN) / BS);

    /* a pool too small for all: preemption and recompute */
    p.kv_tokens = 300;
    engine_generate(m, &p, prompts, np, N_PROMPTS, false, got, &st, &held_max);
    CHECK(st.preemptions > 0 || (n_swa > 0 && pattern == 0)); /* a SWA-only model may fit */
    for (int k = 0; k < N_PROMPTS; k++)
        CHECK_MSG(got[k].n == N_GEN && !memcmp(got[k].tok, want[k].tok, sizeof(int32_t) * N_GEN),
                  "swa %lld pattern %lld: prompt %d with preemption differs", (long long)n_swa,
                  (long long)pattern, k);

    /* one after another: the prefix cache serves prompt 4's shared head through
     * every group (room for 16 sequences: the SWA pool keeps what the window
     * released, cached, instead of evicting it for the prompts in between) */
    p.kv_tokens = 0;
    p.max_seqs = 16;
    engine_generate(m, &p, prompts, np, N_PROMPTS, true, got, &st, &held_max);
    CHECK_EQ_INT(got[4].n_cached, 112); /* 7 whole blocks of the 120 shared tokens */
    CHECK(st.prefix_hits >= 7);
    for (int k = 0; k < N_PROMPTS; k++)
        CHECK_MSG(got[k].n == N_GEN && !memcmp(got[k].tok, want[k].tok, sizeof(int32_t) * N_GEN),
                  "swa %lld pattern %lld: prompt %d one by one (prefix cache) differs", (long long)n_swa,
                  (long long)pattern, k);
    /* the same prompt again: every whole block but the last token's */
    int32_t *again[2] = {prompts[0], prompts[0]};
    const int32_t np_again[2] = {np[0], np[0]};
    engine_generate(m, &p, again, np_again, 2, true, got, &st, &held_max);
    CHECK_EQ_INT(got[1].n_cached, (200 - 1) / BS * BS);
    CHECK(!memcmp(got[1].tok, want[0].tok, sizeof(int32_t) * N_GEN));
    printf("%s swa %lld pattern %lld: most SWA blocks held by a sequence %lld\n", arch, (long long)n_swa,
           (long long)pattern, (long long)held_max);
    for (int k = 0; k < N_PROMPTS; k++) free(prompts[k]);
    vt_model_free(m);
}

int main(void) {
    test_groups();
    test_window_semantics();
    test_engine_windows("llama", 2, 0, 0);   /* one FULL group: the engine as before */
    test_engine_windows("llama", 2, 20, 0);  /* every layer slides: one SWA group, no FULL */
    test_engine_windows("llama", 3, 20, 2);  /* layers 0 and 2 slide, 1 attends fully: two groups */
    test_engine_windows("llama", 3, 40, 3);  /* a window longer than a block and the step */
    /* Gemma 3's shape: 5 sliding layers to 1 global, the sliding ones on a rope
     * base of their own; its SWA pool a fraction of a full group's */
    test_engine_windows("gemma3", 6, 20, 6);
    /* gpt-oss: its experts, sinks and biases; layers 0 and 2 slide */
    test_engine_windows("gpt-oss", 3, 20, 2);
    return test_finish();
}
