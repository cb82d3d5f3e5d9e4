/* Engine soak: 1,000 requests with random prompts (many sharing prefixes), random
 * max_tokens, sampling, stop strings and logprobs, random aborts, over engines
 * with random budgets (KV tokens, batch tokens, sequences, block size, threads,
 * prefix cache on/off). Every request must finish exactly once, and afterwards
 * every block is free again: free + cached == total, no reference but the
 * cache's, and after evicting the cache no reference at all. Run under ASan it
 * also shows that nothing leaks. VT_SOAK_REQUESTS overrides the count. */
#include "engine_util.h"
#include "test.h"
#include "vt.h"

#include "engine/engine.h"
#include "model/synth.h"

#include <stdint.h>

static uint64_t rng_state = 0x5eed;
static uint32_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}
static int32_t rnd_in(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); }

typedef struct track {
    uint64_t id;
    int32_t max_tokens;
    int32_t n_seen;
    bool finished;
} track;

/* The block accounting must add up after every step, in every group of the cache. */
static void check_blocks(vt_engine *e) {
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        const kv_pool *p = &e->kv.groups[g].pool;
        int64_t refs = 0, held = 0;
        for (int64_t b = 0; b < p->n_blocks; b++) {
            refs += p->ref[b];
            if (p->ref[b] < 0) CHECK(0);
        }
        for (int32_t i = 0; i < e->n_running; i++)
            held += e->running[i]->n_blocks - e->running[i]->n_released[g];
        for (int32_t i = 0; i < e->n_waiting; i++) CHECK(e->waiting[i]->n_blocks == 0);
        CHECK_MSG(refs == held + e->pc[g].n_indexed, "group %d: refs %lld, held %lld, indexed %lld", g,
                  (long long)refs, (long long)held, (long long)e->pc[g].n_indexed);
        int64_t zero = 0;
        for (int64_t b = 0; b < p->n_blocks; b++) zero += p->ref[b] == 0;
        CHECK_EQ_INT(zero, p->n_free);
    }
}

static int64_t soak_engine(vt_model *m, int32_t n_requests, int64_t *total_tokens,
                           int64_t *n_aborted, vt_engine_stats *st_out) {
    const int32_t nv = vt_model_n_vocab(m);
    vt_engine_params p = vt_engine_default_params();
    const int32_t bsz[3] = {8, 16, 32};
    p.kv_block = bsz[rnd() % 3];
    p.n_threads = rnd_in(1, 2); /* CI has 2 cores: more threads only spin */
    p.n_ctx = rnd_in(64, 320);
    p.max_seqs = rnd_in(1, 16);
    p.max_batch_tokens = rnd_in(8, 256);
    p.kv_tokens = rnd_in(p.kv_block, 1024);
    p.prefix_cache = rnd() % 4 != 0;
    p.max_queue = rnd_in(4, 64);
    p.type_k = p.type_v = rnd() % 2 ? VT_KV_F16 : VT_KV_F32;
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(m, &p, &e));
    if (!e) return 0;

    /* a few shared prefixes, so the cache gets hits and evictions */
    int32_t bases[4][200];
    for (int b = 0; b < 4; b++) {
        bases[b][0] = 1;
        for (int i = 1; i < 200; i++) bases[b][i] = rnd_in(3, nv - 1);
    }
    const char *stops[3] = {"the", "a", ". "};
    track *tr = calloc((size_t)n_requests, sizeof *tr);
    int32_t n_added = 0, n_done = 0, n_steps = 0;
    int64_t aborted = 0;
    while (n_done < n_requests) {
        /* add a burst (until the queue says busy) */
        const int32_t burst = rnd_in(0, 6);
        for (int32_t k = 0; k < burst && n_added < n_requests; k++) {
            int32_t prompt[400];
            const int32_t n = rnd_in(1, e->n_ctx < 150 ? e->n_ctx : 150);
            const int b = (int)(rnd() % 5);
            const int32_t shared = b < 4 ? rnd_in(0, n < 200 ? n : 200) : 0;
            for (int32_t i = 0; i < n; i++)
                prompt[i] = i < shared ? bases[b][i] : rnd_in(3, nv - 1);
            vt_request_params q = {.prompt = prompt, .n_prompt = n,
                                   .sampling = vt_sampling_default(),
                                   .max_tokens = rnd_in(0, 12), .ignore_eos = rnd() % 2};
            if (q.max_tokens == 0 && p.n_ctx > 100) q.max_tokens = 1; /* keep it short */
            if (rnd() % 2) {
                q.sampling.temperature = 0.8f;
                q.sampling.top_k = rnd_in(0, 50);
                q.sampling.top_p = 0.9f;
                q.sampling.seed = rnd();
            }
            q.sampling.n_logprobs = rnd() % 3 ? 0 : rnd_in(1, 20);
            if (rnd() % 3 == 0) {
                q.stop = stops;
                q.n_stop = rnd_in(1, 3);
            }
            uint64_t id;
            const vt_status s = vt_engine_add(e, &q, &id);
            if (s == VT_E_BUSY) break;
            CHECK_OK(s);
            if (s != VT_OK) {
                tr[n_added].finished = true;
                n_added++;
                n_done++;
                continue;
            }
            tr[n_added++] = (track){.id = id, .max_tokens = q.max_tokens};
        }
        /* abort a random earlier request now and then (it may be done already) */
        if (n_added > 0 && rnd() % 5 == 0) {
            track *t = &tr[rnd() % (uint32_t)n_added];
            const vt_status s = vt_engine_abort(e, t->id);
            CHECK(s == VT_OK || (s == VT_E_NOT_FOUND && t->finished));
        }
        const vt_output *outs;
        int32_t n_outs;
        CHECK_OK(vt_engine_step(e, &outs, &n_outs));
        n_steps++;
        for (int32_t i = 0; i < n_outs; i++) {
            const vt_output *o = &outs[i];
            track *t = NULL;
            for (int32_t k = n_added; k-- > 0 && !t;)
                if (tr[k].id == o->id) t = &tr[k];
            CHECK(t != NULL);
            if (!t) continue;
            CHECK(!t->finished);
            if (o->token >= 0) {
                t->n_seen++;
                (*total_tokens)++;
                CHECK(o->token < nv);
                CHECK(o->logprob <= 0);
            }
            CHECK_EQ_INT(o->n_generated, t->n_seen);
            if (t->max_tokens > 0) CHECK(t->n_seen <= t->max_tokens);
            CHECK(o->finish != VT_FINISH_ERROR);
            if (o->finish != VT_FINISH_NONE) {
                t->finished = true;
                n_done++;
                aborted += o->finish == VT_FINISH_ABORT;
            }
        }
        if (n_steps % 7 == 0) check_blocks(e);
        CHECK(n_steps < 200000);
        if (n_steps >= 200000) break;
    }
    CHECK(!vt_engine_has_work(e));
    check_blocks(e);
    vt_engine_stats st;
    vt_engine_stats_get(e, &st);
    CHECK_EQ_INT(st.running + st.waiting, 0);
    CHECK_EQ_INT(st.kv_blocks_free, st.kv_blocks_total);
    for (int32_t g = 0; g < e->kv.n_groups; g++) {
        const kv_pool *p = &e->kv.groups[g].pool;
        const pcache *pc = &e->pc[g];
        CHECK_EQ_INT(p->n_free + pc->n_lru, p->n_blocks);
        for (int64_t b = 0; b < p->n_blocks; b++)
            CHECK(p->ref[b] == 0 || (p->ref[b] == 1 && pc->indexed[b] && pc->in_lru[b]));
        pcache_evict_all(&e->pc[g]);
        CHECK_EQ_INT(p->n_free, p->n_blocks);
        for (int64_t b = 0; b < p->n_blocks; b++) CHECK(p->ref[b] == 0);
    }
    *n_aborted += aborted;
    *st_out = st;
    free(tr);
    vt_engine_free(e);
    return n_steps;
}

int main(void) {
    const char *path = test_model_path("stories260K.gguf");
    if (!path) return test_finish();
    vt_model *m = NULL;
    CHECK_OK(vt_model_load(path, NULL, &m));
    if (!m) return test_finish();
    int32_t total = 1000;
    const char *env = getenv("VT_SOAK_REQUESTS");
    if (env && atoi(env) > 0) total = atoi(env);
#if defined(__SANITIZE_THREAD__)
    if (!env) total = 200; /* TSan: the engine is single-threaded here; keep it short */
#endif
    const int32_t per_engine = 125;
    int64_t tokens = 0, aborted = 0, steps = 0, preempt = 0, hits = 0, queries = 0;
    for (int32_t done = 0; done < total; done += per_engine) {
        vt_engine_stats st = {0};
        const int32_t n = total - done < per_engine ? total - done : per_engine;
        steps += soak_engine(m, n, &tokens, &aborted, &st);
        preempt += st.preemptions;
        hits += st.prefix_hits;
        queries += st.prefix_queries;
    }
    printf("soak: %d requests, %lld tokens, %lld aborted, %lld steps, %lld preemptions, "
           "prefix hits %lld / %lld blocks\n",
           total, (long long)tokens, (long long)aborted, (long long)steps, (long long)preempt,
           (long long)hits, (long long)queries);
    if (total >= 1000) { /* the full run must have exercised every path */
        CHECK(preempt > 0);
        CHECK(hits > 0);
        CHECK(aborted > 0);
    }
    vt_model_free(m);

    /* The same on a model with sliding-window layers (a synthetic gemma3,
     * window 20 on layers 0 and 1 of 3, Gemma 3's pattern cut short): two
     * groups of blocks, SWA blocks released as windows pass, prefix hits that
     * must hold in both; every block of both free at the end. */
    synth_params sp = synth_default_params();
    sp.n_layer = 3;
    sp.n_embd = 64;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.n_ff = 128;
    sp.n_ctx = 512;
    sp.n_threads = 1;
    sp.arch = "gemma3";
    sp.rope_freq_base = 1e6f;
    sp.rope_freq_base_swa = 10000.0f;
    sp.n_swa = 20;
    sp.swa_pattern = 3;
    m = test_synth_load(&sp, NULL);
    if (!m) return test_finish();
    rng_state = 0x5a1d; /* its own draw of engines, whatever the first part consumed */
    int64_t swa_steps = 0, swa_preempt = 0, swa_hits = 0;
    const int32_t swa_total = total >= 1000 ? 500 : total / 2 + 1;
    for (int32_t done = 0; done < swa_total; done += per_engine) {
        vt_engine_stats st = {0};
        const int32_t n = swa_total - done < per_engine ? swa_total - done : per_engine;
        swa_steps += soak_engine(m, n, &tokens, &aborted, &st);
        swa_preempt += st.preemptions;
        swa_hits += st.prefix_hits;
    }
    printf("soak, sliding windows: %d requests, %lld steps, %lld preemptions, %lld prefix hits\n",
           swa_total, (long long)swa_steps, (long long)swa_preempt, (long long)swa_hits);
    if (total >= 1000) {
        CHECK(swa_preempt > 0);
        CHECK(swa_hits > 0);
    }
    vt_model_free(m);
    return test_finish();
}
