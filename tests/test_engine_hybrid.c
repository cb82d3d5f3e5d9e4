/* The serving engine on hybrid models (recurrent layers whose state lives in the
 * cache's STATE group; engine.h): on small synthetic models of each hybrid
 * architecture in k_models,
 *   - 8 prompts batched give the tokens (and the bits of their logprobs) each gives
 *     alone, and alone the tokens of vt_context; also with a tiny token budget
 *     (chunked prefills mixed with decodes);
 *   - preemption under a tiny KV budget, recompute from the tokens: the same;
 *   - prefix-cache hits restore a state snapshot and the KV blocks: the same bits as
 *     a cold run, the hit counted; evicted snapshots fall back to a shorter prefix;
 *     snapshots are taken inside a prefill pass, so a prompt takes no more passes
 *     than its token budget asks;
 *   - a soak of random requests (aborts, sampling, random budgets and snapshot
 *     capacities): the accounting adds up after every few steps, and at the end every
 *     KV block and state slot is free;
 *   - the state of one sequence takes the bytes the hyperparameters say.
 * `test_engine_hybrid MODEL.gguf` runs the same on a file instead (its state figure
 * from the file's own keys). VT_SOAK_REQUESTS overrides the soak's count. */
#include "engine_util.h"
#include "test.h"
#include "vt.h"

#include "engine/engine.h"
#include "model/model.h"
#include "model/qwen35.h"
#include "model/synth.h"

#include <unistd.h>

/* A hybrid to test: its architecture and what differs from the common shape. */
typedef struct hybrid_model {
    const char *arch;
    void (*setup)(synth_params *sp); /* NULL: nothing */
} hybrid_model;

/* Qwen3.6-35B-A3B's kind: routed experts (4 of 8 used) and the shared expert */
static void setup_moe(synth_params *sp) {
    sp->n_expert = 8;
    sp->n_expert_used = 4;
    sp->n_ff_exp = 32;
    sp->n_ff_shexp = 64;
}

static const hybrid_model k_models[] = {
    {.arch = "qwen35"},
    {.arch = "qwen35moe", .setup = setup_moe},
};

#define MAX_REQ 64
#define MAX_GEN 64

typedef struct result {
    int32_t tokens[MAX_GEN];
    float logprob[MAX_GEN];
    int32_t n;
    vt_finish finish;
    int32_t n_cached;
} result;

static vt_model *g_model;

static uint64_t rng_state = 0x5eed;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}
static int32_t rnd_in(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); }

static vt_engine_params small_params(void) {
    vt_engine_params p = vt_engine_default_params();
    p.n_threads = 2;
    p.n_ctx = 512;
    p.max_seqs = 8;
    p.max_batch_tokens = 256;
    return p;
}

/* The STATE group's accounting: every running request holds its own slot, nobody
 * else holds one; references = running + indexed snapshots. */
static void check_slots(vt_engine *e) {
    const int32_t sg = e->state_group;
    CHECK(sg >= 0);
    if (sg < 0) return;
    const kv_pool *p = &e->kv.groups[sg].pool;
    int64_t refs = 0, zero = 0;
    for (int64_t b = 0; b < p->n_blocks; b++) refs += p->ref[b], zero += p->ref[b] == 0;
    for (int32_t i = 0; i < e->n_running; i++) {
        const int32_t s = e->running[i]->blocks[sg][0];
        CHECK(s >= 0 && s < p->n_blocks && p->ref[s] == 1 && !e->pc[sg].indexed[s]);
        for (int32_t j = 0; j < i; j++) CHECK(e->running[j]->blocks[sg][0] != s);
    }
    for (int32_t i = 0; i < e->n_waiting; i++) CHECK(e->waiting[i]->blocks[sg][0] == -1);
    CHECK_MSG(refs == e->n_running + e->pc[sg].n_indexed, "state refs %lld, running %d, snapshots %lld",
              (long long)refs, e->n_running, (long long)e->pc[sg].n_indexed);
    CHECK_EQ_INT(zero, p->n_free);
    CHECK(e->pc[sg].n_indexed <= p->n_blocks - e->p.max_seqs); /* the bound */
}

/* The KV groups' accounting, as in test_engine_soak. */
static void check_blocks(vt_engine *e) {
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        if (g == e->state_group) continue;
        const kv_pool *p = &e->kv.groups[g].pool;
        int64_t refs = 0, held = 0, zero = 0;
        for (int64_t b = 0; b < p->n_blocks; b++) refs += p->ref[b], zero += p->ref[b] == 0;
        for (int32_t i = 0; i < e->n_running; i++)
            held += e->running[i]->n_blocks - e->running[i]->n_released[g];
        for (int32_t i = 0; i < e->n_waiting; i++) CHECK(e->waiting[i]->n_blocks == 0);
        CHECK_MSG(refs == held + e->pc[g].n_indexed, "group %d: refs %lld, held %lld, indexed %lld", g,
                  (long long)refs, (long long)held, (long long)e->pc[g].n_indexed);
        CHECK_EQ_INT(zero, p->n_free);
    }
    check_slots(e);
}

/* Everything free: no request holds a block or slot; after evicting the caches
 * nothing is referenced at all. */
static void check_all_free(vt_engine *e) {
    vt_engine_stats st;
    vt_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.running + st.waiting, 0);
    CHECK_EQ_INT(st.kv_blocks_free, st.kv_blocks_total);
    CHECK_EQ_INT(st.state_slots_free, st.state_slots_total);
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        const kv_pool *p = &e->kv.groups[g].pool;
        CHECK_EQ_INT(p->n_free + e->pc[g].n_lru, p->n_blocks);
        pcache_evict_all(&e->pc[g]);
        CHECK_EQ_INT(p->n_free, p->n_blocks);
        for (int64_t b = 0; b < p->n_blocks; b++) CHECK(p->ref[b] == 0);
    }
}

static void collect(const vt_output *o, void *arg) {
    result *r = test_result_of(arg, o);
    if (!r) return;
    if (o->token >= 0 && r->n < MAX_GEN) r->logprob[r->n] = o->logprob, r->tokens[r->n++] = o->token;
    CHECK(r->finish == VT_FINISH_NONE);
    r->finish = o->finish;
    r->n_cached = o->n_cached;
}

static void check_every_3(vt_engine *e, int step, void *arg) {
    if (step % 3 == 0) check_blocks(e);
}

static void run_all(vt_engine *e, result *res, int32_t n, const uint64_t *ids) {
    test_requests c = {ids, n, res, sizeof *res};
    test_engine_drain(e, collect, check_every_3, &c);
}

static void add(vt_engine *e, const int32_t *prompt, int64_t n_prompt, int32_t max_tokens, uint64_t *id) {
    vt_request_params q = {.prompt = prompt, .n_prompt = n_prompt, .sampling = vt_sampling_default(),
                           .max_tokens = max_tokens, .ignore_eos = true};
    CHECK_OK(vt_engine_add(e, &q, id));
}

/* Prompts together in one engine (or one engine per prompt when alone), greedy. */
static void run_engine(const vt_engine_params *p, int32_t *const *prompts, const int64_t *n_prompts, int32_t n,
                       int32_t max_tokens, bool alone, result *res, vt_engine_stats *st) {
    memset(res, 0, sizeof(result) * (size_t)n);
    uint64_t ids[MAX_REQ];
    vt_engine *e = NULL;
    for (int32_t k = 0; k < n; k++) {
        if (!e) CHECK_OK(vt_engine_create(g_model, p, &e));
        if (!e) return;
        add(e, prompts[k], n_prompts[k], max_tokens, &ids[k]);
        if (alone) {
            run_all(e, res + k, 1, ids + k);
            if (st) vt_engine_stats_get(e, st);
            check_all_free(e);
            vt_engine_free(e);
            e = NULL;
        }
    }
    if (!alone) {
        run_all(e, res, n, ids);
        if (st) vt_engine_stats_get(e, st);
        check_all_free(e);
        vt_engine_free(e);
    }
}

/* The same tokens and the same bits of every logprob. */
static bool same(const result *a, const result *b) {
    return a->n == b->n && !memcmp(a->tokens, b->tokens, sizeof(int32_t) * (size_t)a->n) &&
           !memcmp(a->logprob, b->logprob, sizeof(float) * (size_t)a->n);
}

/* Greedy reference through vt_context: the prompt in one batch, then token by token. */
static void ref_context(const int32_t *prompt, int64_t n_prompt, int32_t n_gen, int32_t *out) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 1;
    test_greedy_context(g_model, &cp, prompt, (int32_t)n_prompt, n_gen, out);
}

static int32_t *random_prompt(int64_t n) {
    const int32_t nv = vt_model_n_vocab(g_model);
    int32_t *t = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) t[i] = rnd_in(3, nv - 1);
    return t;
}

static void test_batched_equals_alone(void) {
    int32_t *prompts[8];
    int64_t n_prompts[8];
    const int64_t lens[8] = {5, 40, 17, 100, 1, 63, 33, 120};
    for (int k = 0; k < 8; k++) n_prompts[k] = lens[k], prompts[k] = random_prompt(lens[k]);
    const int32_t n_gen = 24;
    static result alone[8], together[8], other[8];
    vt_engine_params p = small_params();
    run_engine(&p, prompts, n_prompts, 8, n_gen, true, alone, NULL);
    for (int k = 0; k < 8; k += 3) {
        int32_t ref[MAX_GEN];
        ref_context(prompts[k], n_prompts[k], n_gen, ref);
        CHECK_MSG(alone[k].n == n_gen && !memcmp(alone[k].tokens, ref, sizeof(int32_t) * n_gen),
                  "prompt %d: the engine alone differs from vt_context", k);
    }
    vt_engine_stats st;
    run_engine(&p, prompts, n_prompts, 8, n_gen, false, together, &st);
    for (int k = 0; k < 8; k++) {
        CHECK_EQ_INT(alone[k].n, n_gen);
        CHECK_MSG(same(&alone[k], &together[k]), "prompt %d: batched differs from alone", k);
        CHECK_EQ_INT(together[k].finish, VT_FINISH_LENGTH);
    }
    CHECK(st.steps < 8 * n_gen); /* they really ran together */
    CHECK_EQ_INT(st.preemptions, 0);
    CHECK_EQ_INT(st.state_slots_total, p.max_seqs + 2 * p.max_seqs);

    /* a tiny token budget: prefill chunks beside other sequences' decodes */
    p.max_batch_tokens = 7;
    p.max_seqs = 3;
    run_engine(&p, prompts, n_prompts, 8, n_gen, false, other, NULL);
    for (int k = 0; k < 8; k++) CHECK_MSG(same(&alone[k], &other[k]), "prompt %d: chunked prefill differs", k);

    /* too few KV blocks for all at once: preemption frees state and blocks, the
     * request is recomputed from its tokens */
    p = small_params();
    p.kv_tokens = 192; /* 12 blocks of 16; the longest request needs 9 */
    for (int cache = 1; cache >= 0; cache--) {
        p.prefix_cache = cache;
        run_engine(&p, prompts, n_prompts, 8, n_gen, false, other, &st);
        CHECK_MSG(st.preemptions > 0, "preemptions %lld", (long long)st.preemptions);
        for (int k = 0; k < 8; k++)
            CHECK_MSG(same(&alone[k], &other[k]), "prompt %d: preempted run (prefix cache %d) differs", k, cache);
        if (!cache) CHECK_EQ_INT(st.state_restores, 0);
    }
    printf("batched: 8 x %d tokens identical alone/together/chunked/preempted (%lld preemptions)\n", n_gen,
           (long long)st.preemptions);
    for (int k = 0; k < 8; k++) free(prompts[k]);
}

/* One request through engine e; its result. */
static void run_one(vt_engine *e, const int32_t *prompt, int64_t n, int32_t n_gen, result *res) {
    memset(res, 0, sizeof *res);
    uint64_t id;
    add(e, prompt, n, n_gen, &id);
    run_all(e, res, 1, &id);
}

static void test_prefix_cache(void) {
    /* A 100 tokens; B its first 80 and 20 others; C its first 90 and 10 others */
    const int64_t n = 100;
    int32_t *a = random_prompt(n), *b = random_prompt(n), *c = random_prompt(n);
    memcpy(b, a, sizeof(int32_t) * 80);
    memcpy(c, a, sizeof(int32_t) * 90);
    const int32_t n_gen = 16;
    result cold[3], hit;
    vt_engine_params p = small_params();
    p.prefix_cache = false;
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    if (!e) return;
    int32_t *prompts[3] = {a, b, c};
    for (int k = 0; k < 3; k++) run_one(e, prompts[k], n, n_gen, &cold[k]);
    vt_engine_free(e);

    /* snapshots every 32 tokens and at 96, the last block boundary before A's last token */
    p.prefix_cache = true;
    p.state_snapshot_interval = 32;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    if (!e) return;
    run_one(e, a, n, n_gen, &hit);
    CHECK(same(&hit, &cold[0]));
    CHECK_EQ_INT(hit.n_cached, 0);
    vt_engine_stats st;
    vt_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.state_snapshots, 3); /* 32, 64, 96 */
    CHECK_EQ_INT(st.state_restores, 0);
    /* the prefill in two passes, as the budget of 256 allows, not one per snapshot point:
     * 0-64 (32's snapshot taken inside the pass, 64's after it), then 64-100 (96's inside);
     * then a decode step per token after the first */
    CHECK_EQ_INT(st.steps, 2 + n_gen - 1);
    /* A again: everything up to 96 from the cache, state included */
    run_one(e, a, n, n_gen, &hit);
    CHECK_EQ_INT(hit.n_cached, 96);
    CHECK_MSG(same(&hit, &cold[0]), "A: a prefix hit changed the output");
    /* B: KV blocks up to 80, the last snapshot there is 64 */
    run_one(e, b, n, n_gen, &hit);
    CHECK_EQ_INT(hit.n_cached, 64);
    CHECK_MSG(same(&hit, &cold[1]), "B: a prefix hit changed the output");
    vt_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.state_restores, 2);
    CHECK(st.prefix_hits >= 6 + 4);
    check_all_free(e);
    vt_engine_free(e);

    /* room for 2 snapshots: A's 32 is evicted by its 96; C (shares 90) falls back to
     * 64; with 1, only 96 stays and C has no hit at all */
    for (int cap = 2; cap >= 1; cap--) {
        p.state_snapshots = cap;
        CHECK_OK(vt_engine_create(g_model, &p, &e));
        if (!e) return;
        run_one(e, a, n, n_gen, &hit);
        vt_engine_stats_get(e, &st);
        CHECK_EQ_INT(st.state_snapshots, cap);
        CHECK_EQ_INT(st.state_slots_total, p.max_seqs + cap);
        run_one(e, c, n, n_gen, &hit);
        CHECK_EQ_INT(hit.n_cached, cap == 2 ? 64 : 0);
        CHECK_MSG(same(&hit, &cold[2]), "C with %d snapshots: output differs", cap);
        vt_engine_stats_get(e, &st);
        CHECK_EQ_INT(st.state_restores, cap == 2);
        check_all_free(e);
        vt_engine_free(e);
    }
    /* no snapshots at all: no hits, the same output */
    p.state_snapshots = -1;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    if (e) {
        run_one(e, a, n, n_gen, &hit);
        run_one(e, a, n, n_gen, &hit);
        CHECK_EQ_INT(hit.n_cached, 0);
        CHECK(same(&hit, &cold[0]));
        vt_engine_stats_get(e, &st);
        CHECK_EQ_INT(st.state_slots_total, p.max_seqs);
        check_all_free(e);
        vt_engine_free(e);
    }
    printf("prefix cache: hits at 96 and 64 tokens restore state snapshots, same bits as cold\n");
    free(a), free(b), free(c);
}

typedef struct track {
    uint64_t id;
    bool finished;
} track;

/* Random requests over one engine with random budgets; every request finishes once. */
static void soak_engine(int32_t n_requests, vt_engine_stats *st_out) {
    const int32_t nv = vt_model_n_vocab(g_model);
    vt_engine_params p = vt_engine_default_params();
    const int32_t bsz[3] = {8, 16, 32};
    p.kv_block = bsz[rnd() % 3];
    p.n_threads = rnd_in(1, 2);
    p.n_ctx = rnd_in(64, 256);
    p.max_seqs = rnd_in(1, 8);
    p.max_batch_tokens = rnd_in(8, 128);
    p.kv_tokens = rnd_in(p.kv_block, 768);
    p.prefix_cache = rnd() % 4 != 0;
    p.state_snapshots = rnd_in(-1, 6);
    p.state_snapshot_interval = rnd_in(1, 64);
    p.max_queue = rnd_in(4, 32);
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    if (!e) return;
    int32_t bases[3][160];
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < 160; i++) bases[b][i] = rnd_in(3, nv - 1);
    track *tr = calloc((size_t)n_requests, sizeof *tr);
    int32_t n_added = 0, n_done = 0, n_steps = 0;
    while (n_done < n_requests && n_steps < 100000) {
        const int32_t burst = rnd_in(0, 4);
        for (int32_t k = 0; k < burst && n_added < n_requests; k++) {
            int32_t prompt[160];
            const int32_t n = rnd_in(1, e->n_ctx < 120 ? e->n_ctx : 120);
            const int b = (int)(rnd() % 4);
            const int32_t shared = b < 3 ? rnd_in(0, n) : 0;
            for (int32_t i = 0; i < n; i++) prompt[i] = i < shared ? bases[b][i] : rnd_in(3, nv - 1);
            vt_request_params q = {.prompt = prompt, .n_prompt = n, .sampling = vt_sampling_default(),
                                   .max_tokens = rnd_in(1, 10), .ignore_eos = rnd() % 2};
            if (rnd() % 2) {
                q.sampling.temperature = 0.8f;
                q.sampling.top_k = rnd_in(0, 50);
                q.sampling.seed = rnd();
            }
            uint64_t id;
            const vt_status s = vt_engine_add(e, &q, &id);
            if (s == VT_E_BUSY) break;
            CHECK_OK(s);
            tr[n_added++] = (track){.id = id, .finished = s != VT_OK};
            n_done += s != VT_OK;
        }
        if (n_added > 0 && rnd() % 6 == 0) {
            track *t = &tr[rnd() % (uint32_t)n_added];
            const vt_status s = vt_engine_abort(e, t->id);
            CHECK(s == VT_OK || (s == VT_E_NOT_FOUND && t->finished));
        }
        const vt_output *outs;
        int32_t n_outs;
        CHECK_OK(vt_engine_step(e, &outs, &n_outs));
        n_steps++;
        for (int32_t i = 0; i < n_outs; i++) {
            track *t = NULL;
            for (int32_t k = n_added; k-- > 0 && !t;)
                if (tr[k].id == outs[i].id) t = &tr[k];
            CHECK(t && !t->finished);
            CHECK(outs[i].finish != VT_FINISH_ERROR);
            if (t && outs[i].finish != VT_FINISH_NONE) t->finished = true, n_done++;
        }
        if (n_steps % 5 == 0) check_blocks(e);
    }
    CHECK(!vt_engine_has_work(e));
    check_blocks(e);
    vt_engine_stats_get(e, st_out);
    check_all_free(e);
    free(tr);
    vt_engine_free(e);
}

static void test_soak(void) {
    int32_t total = 300;
    const char *env = getenv("VT_SOAK_REQUESTS");
    if (env && atoi(env) > 0) total = atoi(env);
    int64_t preempt = 0, restores = 0, steps = 0;
    for (int32_t done = 0; done < total; done += 50) {
        vt_engine_stats st = {0};
        soak_engine(total - done < 50 ? total - done : 50, &st);
        preempt += st.preemptions;
        restores += st.state_restores;
        steps += st.steps;
    }
    printf("soak: %d requests, %lld steps, %lld preemptions, %lld state restores; every block and slot free\n",
           total, (long long)steps, (long long)preempt, (long long)restores);
    if (total >= 300) {
        CHECK(preempt > 0);
        CHECK(restores > 0);
    }
}

/* One sequence's state, from the hyperparameters: conv (K - 1, conv_ch) and delta-rule
 * (n_v_heads, d_state, d_state) floats in each linear layer. */
static void test_state_bytes(size_t want) {
    vt_engine_params p = small_params();
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    if (!e) return;
    vt_engine_stats st;
    vt_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.state_bytes_per_seq, want);
    CHECK_EQ_INT(st.state_slots_total, p.max_seqs * 3); /* running + the default 2 x max_seqs snapshots */
    const kv_group *g = &e->kv.groups[e->state_group];
    CHECK_EQ_INT(g->k_bytes, want * (size_t)st.state_slots_total);
    printf("state: %zu bytes per sequence or snapshot, %lld slots\n", want, (long long)st.state_slots_total);
    vt_engine_free(e);
}

static void run_model(const char *what, size_t state_bytes) {
    printf("hybrid: %s (%s)\n", what, vt_model_desc(g_model));
    test_batched_equals_alone();
    test_prefix_cache();
    test_soak();
    test_state_bytes(state_bytes);
}

/* The state figure from a loaded model's own keys. */
static size_t state_bytes_of(const vt_model *m) {
    const q35_hparams *q = m->q35;
    if (!q) return 0;
    return sizeof(float) * (size_t)q35_n_linear(q) *
           (size_t)((q->conv_kernel - 1) * q->conv_ch + q->n_v_heads * q->d_state * q->d_state);
}

int main(int argc, char **argv) {
    if (argc > 1) { /* a given file */
        CHECK_OK(vt_model_load(argv[1], NULL, &g_model));
        if (g_model) run_model(argv[1], state_bytes_of(g_model));
        vt_model_free(g_model);
        return test_finish();
    }
    for (size_t i = 0; i < sizeof k_models / sizeof k_models[0]; i++) {
        synth_params sp = synth_default_params();
        sp.arch = k_models[i].arch;
        sp.n_layer = 4; /* 3 linear layers, then one attending fully */
        sp.n_embd = 64;
        sp.n_head = 4;
        sp.n_head_kv = 2;
        sp.head_dim = 16;
        sp.n_ff = 96;
        sp.n_ctx = 512;
        sp.n_threads = 1;
        if (k_models[i].setup) k_models[i].setup(&sp);
        g_model = test_synth_load(&sp, NULL);
        if (!g_model) continue;
        /* the figure from the synth parameters (their defaults: model/synth.h) */
        const int64_t d_state = sp.ssm_d_state ? sp.ssm_d_state : sp.head_dim;
        const int64_t n_k = sp.ssm_n_k_heads ? sp.ssm_n_k_heads : sp.n_head_kv;
        const int64_t n_v = sp.ssm_n_v_heads ? sp.ssm_n_v_heads : sp.n_head;
        const int64_t kern = sp.ssm_conv_kernel ? sp.ssm_conv_kernel : 4;
        const int64_t every = sp.full_attn_interval ? sp.full_attn_interval : 4;
        int64_t n_linear = 0;
        for (int64_t il = 0; il < sp.n_layer; il++) n_linear += (il + 1) % every != 0;
        const size_t want = sizeof(float) * (size_t)n_linear *
                            (size_t)((kern - 1) * (2 * n_k * d_state + n_v * d_state) + n_v * d_state * d_state);
        CHECK_EQ_INT(want, state_bytes_of(g_model));
        run_model(k_models[i].arch, want);
        vt_model_free(g_model);
        g_model = NULL;
    }
    return test_finish();
}
