/* The serving engine: batched requests give exactly the tokens each gives alone
 * (against the engine with one request and against vt_context), preemption under
 * a small KV budget, prefix cache reuse, stop conditions, text, logprobs, aborts,
 * and a second thread adding/aborting while the loop steps (run under TSan). */
#include "engine_util.h"
#include "test.h"
#include "vt.h"

#include "engine/engine.h"
#include "model/synth.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define MAX_REQ 64
#define MAX_GEN 512

typedef struct result {
    int32_t tokens[MAX_GEN];
    int32_t n;
    char text[16384];
    size_t text_len;
    vt_finish finish;
    int32_t n_cached;
    int32_t n_prompt;
    int outputs;
} result;

static vt_model *g_model;

static int32_t *tokenize(const char *s, int64_t *n) {
    int32_t *ids = NULL;
    CHECK_OK(vt_tokenize(g_model, s, strlen(s), true, false, &ids, n));
    return ids;
}

/* Greedy reference through vt_context: prompt in one batch, then one token per call. */
static void ref_context(const int32_t *prompt, int64_t n_prompt, int32_t n_gen, int32_t *out) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = 2;
    test_greedy_context(g_model, &cp, prompt, (int32_t)n_prompt, n_gen, out);
}

static vt_engine_params small_params(void) {
    vt_engine_params p = vt_engine_default_params();
    p.n_threads = 2;
    p.n_ctx = 1024;
    p.max_seqs = 16;
    p.max_batch_tokens = 256;
    return p;
}

static void collect(const vt_output *o, void *arg) {
    result *r = test_result_of(arg, o);
    if (!r) return;
    r->outputs++;
    if (o->token >= 0 && r->n < MAX_GEN) r->tokens[r->n++] = o->token;
    CHECK(r->text_len + o->text_len < sizeof r->text);
    if (r->text_len + o->text_len < sizeof r->text) {
        memcpy(r->text + r->text_len, o->text, o->text_len);
        r->text_len += o->text_len;
        r->text[r->text_len] = 0;
    }
    CHECK(r->finish == VT_FINISH_NONE); /* nothing after the finishing output */
    r->finish = o->finish;
    r->n_cached = o->n_cached;
    r->n_prompt = o->n_prompt;
    CHECK_EQ_INT(o->n_generated, r->n);
}

static void run_all(vt_engine *e, result *res, int32_t n, const uint64_t *ids) {
    test_requests c = {ids, n, res, sizeof *res};
    test_engine_drain(e, collect, NULL, &c);
}

/* Run prompts together (or one engine per prompt when alone) with greedy sampling. */
static void run_engine(const vt_engine_params *p, int32_t *const *prompts, const int64_t *n_prompts,
                       int32_t n, int32_t max_tokens, bool alone, result *res,
                       vt_engine_stats *st) {
    memset(res, 0, sizeof(result) * (size_t)n);
    uint64_t ids[MAX_REQ];
    vt_engine *e = NULL;
    for (int32_t k = 0; k < n; k++) {
        if (!e) CHECK_OK(vt_engine_create(g_model, p, &e));
        if (!e) return;
        vt_request_params q = {.prompt = prompts[k], .n_prompt = n_prompts[k],
                               .sampling = vt_sampling_default(), .max_tokens = max_tokens,
                               .ignore_eos = true};
        CHECK_OK(vt_engine_add(e, &q, &ids[k]));
        if (alone) {
            run_all(e, res + k, 1, ids + k);
            if (st) vt_engine_stats_get(e, st);
            vt_engine_free(e);
            e = NULL;
        }
    }
    if (!alone) {
        run_all(e, res, n, ids);
        if (st) vt_engine_stats_get(e, st);
        vt_engine_free(e);
    }
}

static bool same_tokens(const result *a, const result *b) {
    return a->n == b->n && !memcmp(a->tokens, b->tokens, sizeof(int32_t) * (size_t)a->n);
}

static const char *k_prompts[8] = {
    "Once upon a time",
    "The little dog",
    "Lily and Tom went to the park. They saw a big tree and",
    "One day",
    "Sam had a red ball. He liked to play with it every day. One day the ball",
    "The sun",
    "There was a girl named Sue who loved to sing",
    "A cat",
};

static void test_batched_equals_alone(void) {
    int32_t *prompts[8];
    int64_t n_prompts[8];
    for (int k = 0; k < 8; k++) prompts[k] = tokenize(k_prompts[k], &n_prompts[k]);
    const int32_t n_gen = 40;
    static result alone[8], together[8], tight[8];
    vt_engine_params p = small_params();
    run_engine(&p, prompts, n_prompts, 8, n_gen, true, alone, NULL);
    vt_engine_stats st;
    run_engine(&p, prompts, n_prompts, 8, n_gen, false, together, &st);
    for (int k = 0; k < 8; k++) {
        int32_t ref[64];
        ref_context(prompts[k], n_prompts[k], n_gen, ref);
        CHECK_EQ_INT(alone[k].n, n_gen);
        CHECK_MSG(!memcmp(alone[k].tokens, ref, sizeof(int32_t) * n_gen),
                  "prompt %d: engine alone differs from vt_context", k);
        CHECK_MSG(same_tokens(&alone[k], &together[k]), "prompt %d: batched differs from alone", k);
        CHECK_EQ_INT(together[k].finish, VT_FINISH_LENGTH);
        CHECK_EQ_INT(together[k].n_prompt, n_prompts[k]);
        CHECK_EQ_INT(together[k].outputs, n_gen);
    }
    CHECK(st.steps < 8 * n_gen); /* they really ran together */
    CHECK_EQ_INT(st.preemptions, 0);
    CHECK_EQ_INT(st.generated_tokens, 8 * n_gen);
    CHECK_EQ_INT(st.running + st.waiting, 0);
    CHECK_EQ_INT(st.kv_blocks_free, st.kv_blocks_total);

    /* Tiny token budget: prefills are chunked across steps, same tokens. */
    p.max_batch_tokens = 7;
    p.max_seqs = 3;
    run_engine(&p, prompts, n_prompts, 8, n_gen, false, tight, NULL);
    for (int k = 0; k < 8; k++)
        CHECK_MSG(same_tokens(&alone[k], &tight[k]), "prompt %d: chunked prefill differs", k);

    /* KV budget too small for all at once: preemption, same tokens. */
    p = small_params();
    p.kv_tokens = 160; /* 10 blocks; 8 requests need ~4 each */
    run_engine(&p, prompts, n_prompts, 8, n_gen, false, tight, &st);
    CHECK_MSG(st.preemptions > 0, "preemptions %lld", (long long)st.preemptions);
    for (int k = 0; k < 8; k++) {
        CHECK_MSG(same_tokens(&alone[k], &tight[k]), "prompt %d: preempted run differs", k);
        CHECK_EQ_INT(tight[k].finish, VT_FINISH_LENGTH);
    }
    CHECK_EQ_INT(st.kv_blocks_free, st.kv_blocks_total);
    /* the same without the prefix cache (recompute from scratch) */
    p.prefix_cache = false;
    run_engine(&p, prompts, n_prompts, 8, n_gen, false, tight, &st);
    CHECK(st.preemptions > 0);
    CHECK_EQ_INT(st.prefix_hits, 0);
    for (int k = 0; k < 8; k++)
        CHECK_MSG(same_tokens(&alone[k], &tight[k]), "prompt %d: preempted (no cache) differs", k);
    printf("batched: 8 x %d tokens identical alone/together/chunked/preempted (%lld preemptions)\n",
           n_gen, (long long)st.preemptions);
    for (int k = 0; k < 8; k++) free(prompts[k]);
}

static void test_prefix_cache(void) {
    /* 100-token shared prefix, then two different tails */
    int64_t n1;
    int32_t *a = tokenize("Once upon a time, there was a little girl named Lily. She loved to play "
                          "outside in the sunshine. One day, she saw a big, red ball in the park. "
                          "She ran to it and picked it up. It was soft and bouncy. Lily wanted to "
                          "play with the ball all day long. She threw it high in the sky and caught it "
                          "again. Her mom called her home for lunch, so she took the ball with her "
                          "and ran back to the house.",
                          &n1);
    VT_ASSERT(n1 > 110);
    int32_t *pa = malloc(sizeof(int32_t) * 120), *pb = malloc(sizeof(int32_t) * 120);
    memcpy(pa, a, sizeof(int32_t) * 110);
    memcpy(pb, a, sizeof(int32_t) * 100);
    int64_t nt;
    int32_t *tail = tokenize("The dog barked at the cat", &nt);
    for (int i = 0; i < 10; i++) pb[100 + i] = tail[1 + i % (nt - 1)]; /* skip BOS */
    int32_t *prompts[2] = {pa, pb};
    int64_t n_prompts[2] = {110, 110};

    static result with[2], without[2];
    vt_engine_params p = small_params();
    p.prefix_cache = false;
    run_engine(&p, prompts, n_prompts, 2, 24, true, without, NULL);

    /* sequentially in one engine: the second request finds the first's blocks */
    p.prefix_cache = true;
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    if (!e) return;
    memset(with, 0, sizeof with);
    uint64_t ids[2];
    for (int k = 0; k < 2; k++) {
        vt_request_params q = {.prompt = prompts[k], .n_prompt = 110,
                               .sampling = vt_sampling_default(), .max_tokens = 24,
                               .ignore_eos = true};
        CHECK_OK(vt_engine_add(e, &q, &ids[k]));
        run_all(e, with + k, 1, ids + k);
    }
    vt_engine_stats st;
    vt_engine_stats_get(e, &st);
    CHECK_EQ_INT(with[0].n_cached, 0);
    CHECK_MSG(with[1].n_cached >= 96, "n_cached %d", with[1].n_cached);
    CHECK(st.prefix_hits >= 6);
    CHECK(st.prefix_queries >= st.prefix_hits);
    CHECK(st.kv_blocks_cached > 0);
    CHECK_EQ_INT(st.kv_blocks_free, st.kv_blocks_total);
    for (int k = 0; k < 2; k++)
        CHECK_MSG(same_tokens(&with[k], &without[k]), "request %d: prefix cache changed tokens", k);

    /* the same prompt again: everything but the last token comes from the cache */
    result again;
    memset(&again, 0, sizeof again);
    uint64_t id3;
    vt_request_params q = {.prompt = pb, .n_prompt = 110, .sampling = vt_sampling_default(),
                           .max_tokens = 24, .ignore_eos = true};
    CHECK_OK(vt_engine_add(e, &q, &id3));
    run_all(e, &again, 1, &id3);
    CHECK_EQ_INT(again.n_cached, 96 + 0); /* (110 - 1) / 16 = 6 blocks */
    CHECK(same_tokens(&again, &without[1]));

    /* every cached block can be evicted; then nothing is referenced at all */
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        const kv_pool *p = &e->kv.groups[g].pool;
        pcache_evict_all(&e->pc[g]);
        CHECK_EQ_INT(p->n_free, p->n_blocks);
        for (int64_t b = 0; b < p->n_blocks; b++) CHECK(p->ref[b] == 0);
    }
    vt_engine_free(e);
    printf("prefix cache: n_cached %d, hits %lld of %lld queried blocks\n", with[1].n_cached,
           (long long)st.prefix_hits, (long long)st.prefix_queries);
    free(a);
    free(tail);
    free(pa);
    free(pb);
}

/* Full greedy output text of a prompt (max_tokens, EOS stops). */
static void run_text(vt_engine *e, const char *prompt, int32_t max_tokens, const char *const *stop,
                     int32_t n_stop, bool ignore_eos, result *res) {
    memset(res, 0, sizeof *res);
    vt_request_params q = {.prompt_text = prompt, .prompt_text_len = strlen(prompt),
                           .sampling = vt_sampling_default(), .max_tokens = max_tokens,
                           .stop = stop, .n_stop = n_stop, .ignore_eos = ignore_eos};
    uint64_t id;
    CHECK_OK(vt_engine_add(e, &q, &id));
    run_all(e, res, 1, &id);
}

static void test_text_and_stops(void) {
    vt_engine_params p = small_params();
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    if (!e) return;
    const tokenizer *tok = g_model->tok;

    /* EOS: stories end; without ignore_eos the request stops with STOP at EOS */
    result r;
    run_text(e, "Once upon a time", 400, NULL, 0, false, &r);
    CHECK(r.n > 0);
    const bool hit_eos = r.finish == VT_FINISH_STOP;
    if (hit_eos) CHECK(tok_is_eog(tok, r.tokens[r.n - 1]));
    else CHECK_EQ_INT(r.finish, VT_FINISH_LENGTH);
    for (int32_t i = 0; i + 1 < r.n; i++) CHECK(!tok_is_eog(tok, r.tokens[i]));
    /* text == llama.cpp-style detokenize of the generated tokens */
    char *dec = NULL;
    size_t dec_len = 0;
    CHECK_OK(tok_decode(tok, r.tokens, r.n, false, &dec, &dec_len));
    CHECK_EQ_INT(r.text_len, dec_len);
    CHECK(dec && !memcmp(r.text, dec, dec_len));
    CHECK(r.text_len > 0 && r.text[0] != ' ');
    printf("text (%d tokens, %s): %.60s...\n", r.n, hit_eos ? "eos" : "length", r.text);

    /* max_tokens */
    result m;
    run_text(e, "Once upon a time", 5, NULL, 0, true, &m);
    CHECK_EQ_INT(m.n, 5);
    CHECK_EQ_INT(m.finish, VT_FINISH_LENGTH);
    CHECK(!memcmp(m.tokens, r.tokens, sizeof(int32_t) * 5));

    /* a stop string from the middle of the text: text ends right before it */
    if (r.text_len > 40) {
        char stop[16];
        memcpy(stop, r.text + 30, 6);
        stop[6] = 0;
        const char *first = strstr(r.text, stop);
        const size_t keep = (size_t)(first - r.text);
        const char *stops[2] = {"zzzzqqq", stop};
        result s;
        run_text(e, "Once upon a time", 400, stops, 2, false, &s);
        CHECK_EQ_INT(s.finish, VT_FINISH_STOP);
        CHECK_EQ_INT(s.text_len, keep);
        CHECK(!memcmp(s.text, r.text, keep));
        CHECK(s.n < r.n);
        CHECK(!memcmp(s.tokens, r.tokens, sizeof(int32_t) * (size_t)s.n));
        /* a stop string that never matches changes nothing */
        const char *never[1] = {"Zebra!"};
        result s2;
        run_text(e, "Once upon a time", 400, never, 1, false, &s2);
        CHECK(same_tokens(&s2, &r));
        CHECK_EQ_INT(s2.text_len, r.text_len);
    }

    /* context full: n_ctx 24 and a 5-token prompt give 19 tokens, LENGTH */
    vt_engine_params pc = small_params();
    pc.n_ctx = 24;
    vt_engine *e2 = NULL;
    CHECK_OK(vt_engine_create(g_model, &pc, &e2));
    if (e2) {
        result c;
        run_text(e2, "Once upon a time", 0, NULL, 0, true, &c);
        int64_t np;
        int32_t *pt = tokenize("Once upon a time", &np);
        CHECK_EQ_INT(c.n, 24 - np);
        CHECK_EQ_INT(c.finish, VT_FINISH_LENGTH);
        CHECK(!memcmp(c.tokens, r.tokens, sizeof(int32_t) * (size_t)(c.n < r.n ? c.n : r.n)));
        /* a prompt longer than the context: VT_E_RANGE naming both numbers */
        int32_t longp[30] = {1};
        for (int i = 1; i < 30; i++) longp[i] = 300 + i;
        vt_request_params q = {.prompt = longp, .n_prompt = 30, .sampling = vt_sampling_default()};
        uint64_t id;
        CHECK_EQ_INT(vt_engine_add(e2, &q, &id), VT_E_RANGE);
        CHECK(strstr(vt_last_error(), "30") && strstr(vt_last_error(), "24"));
        q.n_prompt = 0;
        CHECK_EQ_INT(vt_engine_add(e2, &q, &id), VT_E_INVALID);
        longp[3] = 100000;
        q.n_prompt = 5;
        CHECK_EQ_INT(vt_engine_add(e2, &q, &id), VT_E_INVALID);
        longp[3] = 5;
        q.sampling.top_p = 2.0f;
        CHECK_EQ_INT(vt_engine_add(e2, &q, &id), VT_E_INVALID);
        q.sampling = vt_sampling_default();
        q.sampling.n_logprobs = 21;
        CHECK_EQ_INT(vt_engine_add(e2, &q, &id), VT_E_INVALID);
        q.sampling.n_logprobs = -2;
        CHECK_EQ_INT(vt_engine_add(e2, &q, &id), VT_E_INVALID);
        free(pt);
        vt_engine_free(e2);
    }
    free(dec);
    vt_engine_free(e);
}

/* Stop-string hold-back on a synthetic run: text split across tokens. */
static void test_logprobs_and_sampling(void) {
    vt_engine_params p = small_params();
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    if (!e) return;
    int64_t np;
    int32_t *pt = tokenize("Once upon a time", &np);
    vt_request_params q = {.prompt = pt, .n_prompt = np, .sampling = vt_sampling_default(),
                           .max_tokens = 12, .ignore_eos = true};
    q.sampling.n_logprobs = 5;
    uint64_t id;
    CHECK_OK(vt_engine_add(e, &q, &id));
    int seen = 0;
    while (vt_engine_has_work(e)) {
        const vt_output *outs;
        int32_t n;
        CHECK_OK(vt_engine_step(e, &outs, &n));
        for (int32_t i = 0; i < n; i++) {
            const vt_output *o = &outs[i];
            seen++;
            CHECK_EQ_INT(o->n_top, 5);
            if (o->n_top != 5 || !o->top) continue;
            CHECK_EQ_INT(o->top[0].token, o->token); /* greedy: the best is the pick */
            CHECK(fabsf(o->top[0].logprob - o->logprob) < 1e-6f);
            double sum = 0;
            for (int j = 0; j < 5; j++) {
                CHECK(o->top[j].logprob <= 0);
                if (j) CHECK(o->top[j].logprob <= o->top[j - 1].logprob);
                sum += exp(o->top[j].logprob);
            }
            CHECK(sum <= 1.0 + 1e-5);
        }
    }
    CHECK_EQ_INT(seen, 12);

    /* seeded sampling is reproducible, also when batched with others and preempted */
    result solo[4], batch[4];
    for (int pass = 0; pass < 2; pass++) {
        vt_engine_params pp = small_params();
        if (pass) pp.kv_tokens = 64;
        vt_engine *e2 = NULL;
        CHECK_OK(vt_engine_create(g_model, &pp, &e2));
        if (!e2) break;
        result *res = pass ? batch : solo;
        memset(res, 0, sizeof(result) * 4);
        uint64_t ids[4];
        for (int k = 0; k < 4; k++) {
            vt_request_params r = q;
            r.max_tokens = 30;
            r.sampling = vt_sampling_default();
            r.sampling.temperature = 0.9f;
            r.sampling.top_k = 40;
            r.sampling.top_p = 0.95f;
            r.sampling.repeat_penalty = 1.1f;
            r.sampling.seed = 1000 + k;
            CHECK_OK(vt_engine_add(e2, &r, &ids[k]));
            if (!pass) run_all(e2, res + k, 1, ids + k);
        }
        if (pass) {
            run_all(e2, res, 4, ids);
            vt_engine_stats st;
            vt_engine_stats_get(e2, &st);
            CHECK(st.preemptions > 0);
        }
        vt_engine_free(e2);
    }
    for (int k = 0; k < 4; k++) CHECK_MSG(same_tokens(&solo[k], &batch[k]), "seeded request %d", k);
    free(pt);
    vt_engine_free(e);
}

/* The room for a step's outputs cannot be had (the growth of the output arrays
 * fails twice): those steps do nothing and say VT_E_NOMEM, and no request is
 * lost: the running one still gives every token of an undisturbed run and its
 * finish, the one aborted meanwhile is reported once. With n_logprobs -1 the
 * tokens are the same and no logprob comes. */
static void test_output_room_and_no_logprobs(void) {
    int64_t np;
    int32_t *pt = tokenize("Once upon a time", &np);
    result want[2], got[2];
    for (int pass = 0; pass < 2; pass++) {
        vt_engine_params p = small_params();
        vt_engine *e = NULL;
        CHECK_OK(vt_engine_create(g_model, &p, &e));
        if (!e) break;
        result *res = pass ? got : want;
        memset(res, 0, sizeof(result) * 2);
        vt_request_params q = {.prompt = pt, .n_prompt = np, .sampling = vt_sampling_default(),
                               .max_tokens = 10, .ignore_eos = true};
        q.sampling.temperature = 0.8f;
        q.sampling.top_p = 0.9f;
        q.sampling.seed = 7;
        if (pass) q.sampling.n_logprobs = -1;
        uint64_t ids[2];
        CHECK_OK(vt_engine_add(e, &q, &ids[0]));
        CHECK_OK(vt_engine_add(e, &q, &ids[1]));
        const vt_output *outs;
        int32_t n;
        if (pass) {
            e->test_fail_outs = 2;
            CHECK_OK(vt_engine_abort(e, ids[1]));
            for (int i = 0; i < 2; i++) {
                CHECK_EQ_INT(vt_engine_step(e, &outs, &n), VT_E_NOMEM);
                CHECK_EQ_INT(n, 0);
                CHECK(vt_engine_has_work(e));
            }
        }
        int guard = 0;
        double lp_sum = 0;
        test_requests c = {ids, 2, res, sizeof *res};
        while (vt_engine_has_work(e) && guard++ < 1000) {
            CHECK_OK(vt_engine_step(e, &outs, &n));
            for (int32_t i = 0; i < n; i++) {
                collect(&outs[i], &c);
                if (outs[i].token < 0) continue;
                CHECK(pass ? outs[i].logprob == 0.0f : outs[i].logprob <= 0.0f);
                CHECK_EQ_INT(outs[i].n_top, 0);
                lp_sum += outs[i].logprob;
            }
        }
        CHECK(pass ? lp_sum == 0 : lp_sum < 0);
        if (pass) {
            CHECK(same_tokens(&want[0], &got[0]) && got[0].finish == VT_FINISH_LENGTH);
            CHECK(got[1].outputs == 1 && got[1].finish == VT_FINISH_ABORT);
        } else {
            CHECK(want[0].n == 10 && want[1].n == 10);
        }
        vt_engine_free(e);
    }
    free(pt);
}

/* The room for a step's text cannot be had (the first step's growth of it
 * fails): that step does nothing and says VT_E_NOMEM, and the request's text is
 * whole, never silently shortened: the tokens and bytes of an undisturbed run,
 * which are its tokens detokenized. With max_tokens 1 that step's output is the
 * finishing one, whose text cannot wait for a later output. */
static void test_text_room(void) {
    const char *prompt = "Once upon a time";
    static const int32_t max_tokens[2] = {1, 12};
    for (int t = 0; t < 2; t++) {
        result want, got;
        for (int pass = 0; pass < 2; pass++) {
            vt_engine_params p = small_params();
            vt_engine *e = NULL;
            CHECK_OK(vt_engine_create(g_model, &p, &e));
            if (!e) return;
            result *res = pass ? &got : &want;
            memset(res, 0, sizeof *res);
            vt_request_params q = {.prompt_text = prompt, .prompt_text_len = strlen(prompt),
                                   .sampling = vt_sampling_default(), .max_tokens = max_tokens[t],
                                   .ignore_eos = true};
            uint64_t id;
            CHECK_OK(vt_engine_add(e, &q, &id));
            test_requests c = {&id, 1, res, sizeof *res};
            if (pass) {
                const vt_output *outs;
                int32_t n;
                e->test_fail_text = 1;
                CHECK_EQ_INT(vt_engine_step(e, &outs, &n), VT_E_NOMEM);
                for (int32_t i = 0; i < n; i++) collect(&outs[i], &c);
                CHECK_EQ_INT(n, 0);
                CHECK(vt_engine_has_work(e));
            }
            test_engine_drain(e, collect, NULL, &c);
            vt_engine_free(e);
        }
        CHECK(want.n == max_tokens[t] && same_tokens(&want, &got) && got.finish == VT_FINISH_LENGTH);
        CHECK_EQ_INT(got.text_len, want.text_len);
        CHECK(!memcmp(got.text, want.text, want.text_len));
        char *dec = NULL;
        size_t dec_len = 0;
        CHECK_OK(tok_decode(g_model->tok, want.tokens, want.n, false, &dec, &dec_len));
        CHECK_MSG(dec && dec_len > 0 && dec_len == got.text_len && !memcmp(dec, got.text, dec_len),
                  "max_tokens %d: text '%.*s' of %zu bytes, the tokens say '%s'", max_tokens[t], (int)got.text_len,
                  got.text, got.text_len, dec ? dec : "");
        free(dec);
    }
}

static void test_abort(void) {
    vt_engine_params p = small_params();
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    if (!e) return;
    CHECK_EQ_INT(vt_engine_abort(e, 12345), VT_E_NOT_FOUND);
    int64_t np;
    int32_t *pt = tokenize("Once upon a time", &np);
    vt_request_params q = {.prompt = pt, .n_prompt = np, .sampling = vt_sampling_default(),
                           .max_tokens = 100, .ignore_eos = true};
    uint64_t a, b, c;
    CHECK_OK(vt_engine_add(e, &q, &a));
    CHECK_OK(vt_engine_add(e, &q, &b));
    CHECK_OK(vt_engine_add(e, &q, &c));
    CHECK_OK(vt_engine_abort(e, c)); /* before it ever ran */
    const vt_output *outs;
    int32_t n;
    for (int i = 0; i < 5; i++) CHECK_OK(vt_engine_step(e, &outs, &n));
    CHECK_OK(vt_engine_abort(e, a));
    CHECK_OK(vt_engine_abort(e, a)); /* twice before the step: still one abort */
    CHECK_OK(vt_engine_step(e, &outs, &n));
    int aborted = 0, other = 0;
    for (int32_t i = 0; i < n; i++) {
        if (outs[i].id == a) {
            aborted++;
            CHECK_EQ_INT(outs[i].finish, VT_FINISH_ABORT);
            CHECK_EQ_INT(outs[i].token, -1);
        } else if (outs[i].id == b) {
            other++;
        }
    }
    CHECK_EQ_INT(aborted, 1);
    CHECK_EQ_INT(other, 1);
    CHECK_EQ_INT(vt_engine_abort(e, a), VT_E_NOT_FOUND);
    CHECK_EQ_INT(vt_engine_abort(e, c), VT_E_NOT_FOUND);
    CHECK_OK(vt_engine_abort(e, b));
    CHECK_OK(vt_engine_step(e, &outs, &n));
    CHECK_EQ_INT(n, 1);
    CHECK(!vt_engine_has_work(e));
    vt_engine_stats st;
    vt_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.kv_blocks_free, st.kv_blocks_total);
    CHECK_OK(vt_engine_step(e, &outs, &n));
    CHECK_EQ_INT(n, 0);

    /* the queue limit */
    vt_engine_params pq = small_params();
    pq.max_queue = 3;
    vt_engine *eq = NULL;
    CHECK_OK(vt_engine_create(g_model, &pq, &eq));
    if (eq) {
        uint64_t id;
        for (int i = 0; i < 3; i++) CHECK_OK(vt_engine_add(eq, &q, &id));
        CHECK_EQ_INT(vt_engine_add(eq, &q, &id), VT_E_BUSY);
        vt_engine_free(eq); /* with requests still queued: no leak */
    }
    free(pt);
    vt_engine_free(e);
}

/* Another thread adds and aborts while this one steps. */
typedef struct feeder {
    vt_engine *e;
    const int32_t *prompt;
    int64_t n_prompt;
    atomic_int added;
    atomic_int done;
} feeder;

static void *feeder_main(void *arg) {
    feeder *f = arg;
    uint64_t last = 0;
    for (int i = 0; i < 40; i++) {
        vt_request_params q = {.prompt = f->prompt, .n_prompt = f->n_prompt - (i % 3),
                               .sampling = vt_sampling_default(), .max_tokens = 4 + i % 7,
                               .ignore_eos = true};
        uint64_t id;
        vt_status s = vt_engine_add(f->e, &q, &id);
        if (s == VT_OK) atomic_fetch_add(&f->added, 1);
        if (i % 4 == 3 && last) vt_engine_abort(f->e, last); /* may have finished: either is fine */
        if (s == VT_OK) last = id;
        vt_engine_stats st;
        vt_engine_stats_get(f->e, &st);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&f->done, 1);
    return NULL;
}

static void test_threads(void) {
    vt_engine_params p = small_params();
    p.max_seqs = 4;
    p.kv_tokens = 128;
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    if (!e) return;
    int64_t np;
    int32_t *pt = tokenize("Once upon a time there was", &np);
    feeder f = {.e = e, .prompt = pt, .n_prompt = np};
    pthread_t th;
    pthread_create(&th, NULL, feeder_main, &f);
    int finished = 0;
    while (!atomic_load(&f.done) || vt_engine_has_work(e)) {
        const vt_output *outs;
        int32_t n;
        CHECK_OK(vt_engine_step(e, &outs, &n));
        for (int32_t i = 0; i < n; i++) finished += outs[i].finish != VT_FINISH_NONE;
        if (n == 0) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    pthread_join(th, NULL);
    CHECK_EQ_INT(finished, atomic_load(&f.added));
    vt_engine_stats st;
    vt_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.kv_blocks_free, st.kv_blocks_total);
    CHECK_EQ_INT(st.running + st.waiting, 0);
    printf("threads: %d requests added and finished while stepping\n", finished);
    free(pt);
    vt_engine_free(e);
}

static void test_kv_types(void) {
    /* Every KV dtype runs; batched equals alone within each type. Q8_0 needs a head
     * size of 32: a small synthetic llama. */
    synth_params sp = synth_default_params();
    sp.n_embd = 128;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.n_ff = 256;
    sp.n_threads = 2;
    vt_model *synth = test_synth_load(&sp, NULL);
    const vt_kv_type types[4] = {VT_KV_F16, VT_KV_BF16, VT_KV_F32, VT_KV_Q8_0};
    vt_model *models[2] = {g_model, synth};
    int32_t *prompts[3];
    int64_t n_prompts[3];
    for (int k = 0; k < 3; k++) prompts[k] = tokenize(k_prompts[k], &n_prompts[k]);
    for (int mi = 0; mi < 2 && synth; mi++) {
        vt_model *saved = g_model;
        g_model = models[mi];
        for (int t = 0; t < 4; t++) {
            if (mi == 0 && types[t] == VT_KV_Q8_0) continue; /* head size 8 */
            vt_engine_params p = small_params();
            p.n_ctx = 256;
            p.type_k = p.type_v = types[t];
            p.kv_block = 32;
            static result alone[3], together[3];
            run_engine(&p, prompts, n_prompts, 3, 20, true, alone, NULL);
            run_engine(&p, prompts, n_prompts, 3, 20, false, together, NULL);
            for (int k = 0; k < 3; k++) {
                CHECK_EQ_INT(alone[k].n, 20);
                CHECK_MSG(same_tokens(&alone[k], &together[k]), "model %d kv type %d prompt %d", mi, t, k);
            }
        }
        g_model = saved;
    }
    /* Q8_0 on stories260K (head size 8) is refused with the reason */
    vt_engine_params p = small_params();
    p.type_k = VT_KV_Q8_0;
    vt_engine *e = NULL;
    CHECK_EQ_INT(vt_engine_create(g_model, &p, &e), VT_E_UNSUPPORTED);
    CHECK(e == NULL);
    for (int k = 0; k < 3; k++) free(prompts[k]);
    vt_model_free(synth);
}

/* EOS on a model whose stories end: STOP at the EOS token; ignore_eos runs on. */
static void test_eos(void) {
    const char *path = test_model_path("TinyStories-656K-Q8_0.gguf");
    if (!path) return;
    vt_model *m = NULL;
    CHECK_OK(vt_model_load(path, NULL, &m));
    if (!m) return;
    vt_model *saved = g_model;
    g_model = m;
    vt_engine_params p = small_params();
    p.n_ctx = 512;
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(m, &p, &e));
    if (e) {
        static result r, ign;
        run_text(e, "Once upon a time", 400, NULL, 0, false, &r);
        CHECK_EQ_INT(r.finish, VT_FINISH_STOP);
        CHECK(r.n > 1 && r.n < 400);
        CHECK(vt_model_is_eog(m, r.tokens[r.n - 1]));
        char *dec = NULL;
        size_t dec_len = 0;
        CHECK_OK(tok_decode(m->tok, r.tokens, r.n, false, &dec, &dec_len));
        CHECK(dec && r.text_len == dec_len && !memcmp(r.text, dec, dec_len));
        free(dec);
        run_text(e, "Once upon a time", r.n + 10, NULL, 0, true, &ign);
        CHECK_EQ_INT(ign.n, r.n + 10);
        CHECK_EQ_INT(ign.finish, VT_FINISH_LENGTH);
        CHECK(!memcmp(ign.tokens, r.tokens, sizeof(int32_t) * (size_t)r.n));
        printf("eos: STOP after %d tokens: %.50s...\n", r.n, r.text);
        vt_engine_free(e);
    }
    g_model = saved;
    vt_model_free(m);
}

/* The batching, chunked prefill, preemption and prefix-cache tests again on a
 * small mixture-of-experts model (qwen3moe or gpt-oss: 8 experts, 2 per token),
 * whose passes group each step's tokens by expert: same tokens alone and
 * together. */
static void test_moe_engine(const char *arch) {
    synth_params sp = synth_default_params();
    sp.arch = arch;
    if (!strcmp(arch, "gpt-oss")) sp.n_swa = 16; /* layer 0 slides, layer 1 attends fully */
    sp.n_embd = 128;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.head_dim = 32;
    sp.n_ff = 64;
    sp.n_ff_exp = 64;
    sp.n_expert = 8;
    sp.n_expert_used = 2;
    sp.type = VT_DTYPE_Q8_0;
    sp.n_ctx = 1024; /* small_params' context: vt refuses one past the training context */
    sp.n_threads = 2;
    g_model = test_synth_load(&sp, NULL);
    if (!g_model) return;
    printf("mixture of experts: %s\n", vt_model_desc(g_model));
    test_batched_equals_alone();
    test_prefix_cache();
    vt_model_free(g_model);
    g_model = NULL;
}

/* Embedding requests (vt_request_params.pooling): run each of n prompts with its
 * pooling until finished (after n_gen generation requests of 40 tokens from the
 * prompt's first 5, added first); out[i] gets the vector (d floats). */
static void run_embed(const vt_engine_params *p, const int32_t *tokens, const int64_t *lens, const vt_pooling *pool,
                      int32_t n, int32_t n_gen, float *out, int32_t d, int64_t *preemptions) {
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, p, &e));
    if (!e) return;
    uint64_t ids[64], gid;
    VT_ASSERT(n <= 64);
    for (int32_t i = 0; i < n_gen; i++) {
        vt_request_params g = {.prompt = tokens, .n_prompt = 5, .max_tokens = 40, .ignore_eos = true,
                               .sampling = vt_sampling_default()};
        CHECK_OK(vt_engine_add(e, &g, &gid));
    }
    for (int32_t i = 0; i < n; i++) {
        vt_request_params q = {.prompt = tokens, .n_prompt = lens[i], .pooling = pool[i]};
        CHECK_OK(vt_engine_add(e, &q, &ids[i]));
    }
    int32_t done = 0;
    for (int step = 0; step < 2000 && vt_engine_has_work(e); step++) {
        const vt_output *outs;
        int32_t n_outs;
        CHECK_OK(vt_engine_step(e, &outs, &n_outs));
        for (int32_t k = 0; k < n_outs; k++)
            for (int32_t i = 0; i < n; i++) {
                if (outs[k].id != ids[i]) continue;
                CHECK(outs[k].finish == VT_FINISH_STOP && outs[k].n_embd == d && outs[k].token == -1);
                if (outs[k].embd && outs[k].n_embd == d) memcpy(out + (size_t)i * d, outs[k].embd, sizeof(float) * d);
                done++;
            }
    }
    CHECK_EQ_INT(done, n);
    vt_engine_stats st;
    vt_engine_stats_get(e, &st);
    if (preemptions) *preemptions = st.preemptions;
    vt_engine_free(e);
}

static bool close_vec(const float *a, const float *b, int32_t d, double tol) {
    double err = 0, ref = 0;
    for (int32_t i = 0; i < d; i++) {
        err += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        ref += (double)b[i] * b[i];
    }
    return err <= tol * ref;
}

/* Pooling is consistent with itself, through chunked prefill, batching, the
 * prefix cache and preemption: the mean of a prompt is the mean of the last
 * tokens of its prefixes; cls is the first prefix's last; the mean with a KV
 * cache so small that requests are preempted equals the roomy one. (Parity with
 * llama.cpp: tests/llama/test_embed_llama.c.) */
static void test_embeddings(void) {
    enum { N = 37 };
    int64_t n_tok = 0;
    int32_t *tok = tokenize("Once upon a time, there was a little girl named Lily who loved to play in the park "
                            "with her friends every day. She was happy.", &n_tok);
    CHECK(n_tok >= N);
    if (n_tok < N) {
        free(tok);
        return;
    }
    const int32_t d = (int32_t)g_model->hp.n_embd;
    float *v = calloc((size_t)(N + 2) * d, sizeof(float));
    int64_t lens[N + 2];
    vt_pooling pool[N + 2];
    for (int32_t k = 0; k < N; k++) { /* the last token of each prefix, then mean and cls of the whole */
        lens[k] = k + 1;
        pool[k] = VT_POOLING_LAST;
    }
    lens[N] = lens[N + 1] = N;
    pool[N] = VT_POOLING_MEAN;
    pool[N + 1] = VT_POOLING_CLS;
    vt_engine_params p = small_params();
    p.max_batch_tokens = 24;
    run_embed(&p, tok, lens, pool, N + 2, 0, v, d, NULL);
    float *mean = calloc((size_t)d, sizeof(float));
    for (int32_t k = 0; k < N; k++)
        for (int32_t i = 0; i < d; i++) mean[i] += v[(size_t)k * d + i] / N;
    CHECK(close_vec(v + (size_t)N * d, mean, d, 1e-8));
    CHECK(close_vec(v + (size_t)(N + 1) * d, v, d, 1e-10));

    /* four means of the whole beside two generations in a cache of 80 tokens:
     * the newest are preempted as the generations grow, and recomputed */
    float w[4 * 64];
    int64_t l4[4] = {N, N, N, N}, pre = 0;
    vt_pooling m4[4] = {VT_POOLING_MEAN, VT_POOLING_MEAN, VT_POOLING_MEAN, VT_POOLING_MEAN};
    vt_engine_params tight = small_params();
    tight.max_batch_tokens = 16;
    tight.kv_tokens = 80;
    tight.n_ctx = 64;
    if (d <= 64) {
        run_embed(&tight, tok, l4, m4, 4, 2, w, d, &pre);
        CHECK(pre > 0);
        for (int i = 0; i < 4; i++) CHECK(close_vec(w + i * d, v + (size_t)N * d, d, 1e-10));
    }
    /* a bad pooling value */
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &p, &e));
    uint64_t id;
    vt_request_params bad = {.prompt = tok, .n_prompt = 3, .pooling = (vt_pooling)7};
    if (e) CHECK(vt_engine_add(e, &bad, &id) == VT_E_INVALID);
    vt_engine_free(e);
    free(mean);
    free(v);
    free(tok);
}

/* vt_seq_keep: a cache cut back to a prefix and continued with other tokens
 * gives the logits of the new tokens evaluated whole (what vt chat's turns
 * rely on); bad lengths are refused and change nothing. */
static void test_seq_keep(void) {
    int64_t n_tok = 0;
    int32_t *tok = tokenize("Once upon a time, there was a little girl named Lily who loved to play in the park "
                            "with her friends every day. She was happy.", &n_tok);
    enum { KEEP = 21, N = 35 };
    CHECK(n_tok >= N);
    if (n_tok < N) {
        free(tok);
        return;
    }
    int32_t other[N], pos[N], seq[N] = {0};
    for (int i = 0; i < N; i++) {
        other[i] = i < KEEP ? tok[i] : tok[N - 1 - i + KEEP];
        pos[i] = i;
    }
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    vt_context *a = NULL, *b = NULL;
    CHECK_OK(vt_context_create(g_model, &cp, &a));
    CHECK_OK(vt_context_create(g_model, &cp, &b));
    if (!a || !b) goto done;
    CHECK_OK(vt_decode(a, &(vt_batch){.n_tokens = 30, .token = tok, .pos = pos, .seq = seq}));
    CHECK(vt_seq_keep(a, 0, 31) == VT_E_RANGE && vt_seq_len(a, 0) == 30);
    CHECK(vt_seq_keep(a, 1, 3) == VT_E_RANGE);
    CHECK_OK(vt_seq_keep(a, 0, KEEP));
    CHECK_EQ_INT(vt_seq_len(a, 0), KEEP);
    CHECK_OK(vt_decode(a, &(vt_batch){.n_tokens = N - KEEP, .token = other + KEEP, .pos = pos + KEEP, .seq = seq}));
    CHECK_OK(vt_decode(b, &(vt_batch){.n_tokens = N, .token = other, .pos = pos, .seq = seq}));
    const float *la = vt_get_logits(a, 0), *lb = vt_get_logits(b, 0);
    const int32_t nv = vt_model_n_vocab(g_model);
    double err = 0, ref = 0;
    for (int32_t i = 0; la && lb && i < nv; i++) {
        err += ((double)la[i] - lb[i]) * ((double)la[i] - lb[i]);
        ref += (double)lb[i] * lb[i];
    }
    CHECK_MSG(la && lb && err <= 1e-10 * ref, "kept + continued vs whole: NMSE %.3g", err / (ref + 1e-30));
    CHECK_OK(vt_seq_keep(a, 0, 0));
    CHECK_EQ_INT(vt_seq_len(a, 0), 0);
done:
    vt_context_free(a);
    vt_context_free(b);
    free(tok);
}

int main(void) {
    /* every pass on the pool, so TSan sees its workers: stories260K's decode
     * steps would otherwise run on the calling thread alone */
    setenv("VT_SOLO_KIB", "0", 1);
    const char *path = test_model_path("stories260K.gguf");
    if (!path) return test_finish();
    CHECK_OK(vt_model_load(path, NULL, &g_model));
    if (!g_model) return test_finish();
    test_batched_equals_alone();
    test_prefix_cache();
    test_text_and_stops();
    test_logprobs_and_sampling();
    test_abort();
    test_output_room_and_no_logprobs();
    test_text_room();
    test_threads();
    test_kv_types();
    test_eos();
    test_embeddings();
    test_seq_keep();
    vt_model_free(g_model);
    g_model = NULL;
    test_moe_engine("qwen3moe");
    test_moe_engine("gpt-oss");
    return test_finish();
}
