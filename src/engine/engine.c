/* vt_engine: continuous batching over the paged KV cache (see engine.h for the
 * request model and scheduler.c for the step planner).
 *
 * A step: take new requests and aborts from the inbox (the only state other
 * threads touch, under a mutex), plan the batch, run one forward pass over all
 * its tokens with logits only for rows that sample, then per sampled row: pick
 * the token, compute logprobs if asked (log-softmax of the raw logits), append the token,
 * turn it into text and check the stop conditions. Outputs live in per-step
 * buffers that stay valid until the next step. */
#include "engine/engine.h"

#include "base/size.h"
#include "base/status.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ENGINE_MAX_LOGPROBS 20
#define ENGINE_MAX_STOP 64
#define ENGINE_MAX_STOP_LEN 4096

vt_engine_params vt_engine_default_params(void) {
    vt_engine_params p = {.n_threads = 0, .n_ctx = 0, .max_seqs = 16, .max_batch_tokens = 512,
                          .kv_block = 16, .kv_tokens = 0, .kv_bytes = 0, .type_k = VT_KV_F16,
                          .type_v = VT_KV_F16, .prefix_cache = true, .max_queue = 256};
    return p;
}

vt_sampling vt_sampling_default(void) {
    vt_sampling s = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                     .repeat_penalty = 1.0f, .presence_penalty = 0.0f, .frequency_penalty = 0.0f,
                     .penalty_last_n = 64, .seed = 0, .n_logprobs = 0};
    return s;
}

/* ---- growable arrays ------------------------------------------------------------ */

static bool grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return true;
    int64_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static bool grow32(void **p, int32_t *cap, int64_t need, size_t elem) {
    int64_t c = *cap;
    bool ok = grow(p, &c, need, elem);
    *cap = (int32_t)c;
    return ok;
}

/* ---- requests --------------------------------------------------------------------- */

static void request_free(request *r) {
    if (!r) return;
    free(r->tokens);
    free(r->blocks[0]);
    free(r->block_hash);
    sampler_free(r->smp);
    grammar_matcher_free(r->gm);
    free(r->gtext);
    free(r->preserve);
    for (int32_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->stop_len);
    free(r->pending);
    free(r->pooled);
    free(r);
}

static vt_status sampling_check(const vt_sampling *s, sampler_params *sp) {
    sp->temperature = s->temperature < 0 ? 0 : s->temperature;
    sp->top_k = s->top_k;
    sp->top_p = s->top_p;
    sp->min_p = s->min_p;
    sp->repeat_penalty = s->repeat_penalty;
    sp->presence_penalty = s->presence_penalty;
    sp->frequency_penalty = s->frequency_penalty;
    sp->penalty_last_n = s->penalty_last_n;
    sp->seed = s->seed;
    sp->bias = s->logit_bias;
    sp->n_bias = s->n_logit_bias > 0 && s->logit_bias ? s->n_logit_bias : 0;
    if (s->n_logprobs < -1 || s->n_logprobs > ENGINE_MAX_LOGPROBS)
        return vt_errorf(VT_E_INVALID, "n_logprobs %d is outside [-1, %d]", s->n_logprobs,
                         ENGINE_MAX_LOGPROBS);
    if (sampler_params_check(sp) != VT_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", vt_last_error());
        return vt_errorf(VT_E_INVALID, "%s", msg);
    }
    return VT_OK;
}

/* The vocabulary's bytes as a grammar trie, built once (by whichever thread adds
 * the first request with a grammar) and read-only after. */
static vt_status engine_grammar_vocab(vt_engine *e, const grammar_vocab **out) {
    pthread_mutex_lock(&e->mu);
    *out = e->gvocab;
    pthread_mutex_unlock(&e->mu);
    if (*out) return VT_OK;
    const int32_t nv = e->n_vocab;
    int64_t *off = malloc(sizeof(int64_t) * ((size_t)nv + 1));
    bool *eog = malloc((size_t)nv);
    char *bytes = NULL;
    size_t cap = 0;
    vt_status st = VT_OK;
    if (!off || !eog) goto nomem;
    off[0] = 0;
    for (int32_t i = 0; i < nv; i++) {
        eog[i] = tok_is_eog(e->tok, i);
        char small[256];
        int64_t n = tok_piece(e->tok, i, false, small, sizeof small);
        if (n < 0) n = 0;
        if ((size_t)off[i] + (size_t)n > cap) {
            size_t c = cap ? cap * 2 : (size_t)nv * 8;
            while (c < (size_t)off[i] + (size_t)n) c *= 2;
            char *b = realloc(bytes, c);
            if (!b) goto nomem;
            bytes = b;
            cap = c;
        }
        if (n == 0) {
            /* a control token: no text (bytes may still be NULL) */
        } else if ((size_t)n <= sizeof small) memcpy(bytes + off[i], small, (size_t)n);
        else tok_piece(e->tok, i, false, bytes + off[i], (size_t)n);
        off[i + 1] = off[i] + n;
    }
    grammar_vocab *v = NULL;
    st = grammar_vocab_create(nv, bytes ? bytes : "", off, eog, tok_strips_first_space(e->tok), &v);
    if (st == VT_OK) {
        pthread_mutex_lock(&e->mu);
        if (e->gvocab) grammar_vocab_free(v); /* another thread was first */
        else e->gvocab = v;
        *out = e->gvocab;
        pthread_mutex_unlock(&e->mu);
    }
    goto done;
nomem:
    st = vt_errorf(VT_E_NOMEM, "out of memory for the grammar's vocabulary trie");
done:
    free(off);
    free(eog);
    free(bytes);
    return st;
}

/* A grammar's <text> token reference: the one token the text encodes to
 * (special tokens recognised), as llama.cpp resolves it. */
static int32_t engine_token_find(void *ud, const char *s, size_t n) {
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    if (tok_encode((const tokenizer *)ud, s, n, false, true, &ids, &n_ids) != VT_OK) return -1;
    const int32_t id = n_ids == 1 ? ids[0] : -1;
    free(ids);
    return id;
}

static vt_status engine_grammar_parse(const vt_engine *e, const char *text, size_t len, grammar **out) {
    const grammar_tokens tk = {.n_vocab = e->n_vocab, .find = engine_token_find, .ud = (void *)e->tok};
    return grammar_parse_tokens(text, len, NULL, &tk, out);
}

/* Grammars by text, so that requests with the same one share its DFA and mask
 * cache; up to ENGINE_IDLE_GRAMMARS unused ones stay warm for the next. */
#define ENGINE_IDLE_GRAMMARS 8

typedef struct engine_grammar {
    uint64_t hash;
    char *text;
    size_t len;
    grammar *g;
    int32_t refs;
    uint64_t used;
} engine_grammar;

static uint64_t text_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static vt_status engine_grammar_get(vt_engine *e, const char *text, size_t len, grammar **out) {
    const uint64_t h = text_hash(text, len);
    for (int32_t i = 0; i < e->n_grammars; i++) {
        engine_grammar *eg = &e->grammars[i];
        if (eg->text && eg->hash == h && eg->len == len && !memcmp(eg->text, text, len)) {
            if (grammar_cache_large(eg->g)) { /* retire it: new requests get a fresh one */
                free(eg->text);
                eg->text = NULL;
                continue;
            }
            eg->refs++;
            eg->used = (uint64_t)e->st.steps;
            *out = eg->g;
            return VT_OK;
        }
    }
    if (!grow32((void **)&e->grammars, &e->cap_grammars, e->n_grammars + 1, sizeof *e->grammars))
        return vt_errorf(VT_E_NOMEM, "out of memory");
    engine_grammar eg = {.hash = h, .len = len, .refs = 1, .used = (uint64_t)e->st.steps};
    eg.text = malloc(len + 1);
    if (!eg.text) return vt_errorf(VT_E_NOMEM, "out of memory");
    memcpy(eg.text, text, len);
    vt_status st = engine_grammar_parse(e, text, len, &eg.g);
    if (st != VT_OK) {
        free(eg.text);
        return st;
    }
    e->grammars[e->n_grammars++] = eg;
    *out = eg.g;
    return VT_OK;
}

static void engine_grammar_put(vt_engine *e, grammar *g) {
    int32_t idle = 0;
    for (int32_t i = 0; i < e->n_grammars; i++) {
        if (e->grammars[i].g == g) e->grammars[i].refs--;
        idle += e->grammars[i].refs == 0;
    }
    for (int32_t i = 0; i < e->n_grammars; i++) { /* retired ones go when unused */
        if (!e->grammars[i].text && e->grammars[i].refs == 0) {
            grammar_free(e->grammars[i].g);
            e->grammars[i--] = e->grammars[--e->n_grammars];
            idle--;
        }
    }
    while (idle > ENGINE_IDLE_GRAMMARS) { /* the least recently used idle one goes */
        int32_t old = -1;
        for (int32_t i = 0; i < e->n_grammars; i++)
            if (e->grammars[i].refs == 0 && (old < 0 || e->grammars[i].used < e->grammars[old].used)) old = i;
        grammar_free(e->grammars[old].g);
        free(e->grammars[old].text);
        e->grammars[old] = e->grammars[--e->n_grammars];
        idle--;
    }
}

static vt_status request_create(vt_engine *e, const vt_request_params *q, request **out) {
    *out = NULL;
    sampler_params sp;
    if ((q->pooling < VT_POOLING_NONE || q->pooling > VT_POOLING_LAST) && q->pooling != VT_POOLING_TOKENS)
        return vt_errorf(VT_E_INVALID, "pooling %d is not one of none, mean, cls, last, tokens", (int)q->pooling);
    if (q->pooling == VT_POOLING_NONE) VT_TRY(sampling_check(&q->sampling, &sp));
    if (q->n_stop < 0 || q->n_stop > ENGINE_MAX_STOP || (q->n_stop > 0 && !q->stop))
        return vt_errorf(VT_E_INVALID, "%d stop strings (at most %d)", q->n_stop, ENGINE_MAX_STOP);
    if (q->n_preserve < 0 || q->n_preserve > VT_MAX_PRESERVE || (q->n_preserve > 0 && !q->preserve))
        return vt_errorf(VT_E_INVALID, "%d preserved tokens (at most %d)", q->n_preserve, VT_MAX_PRESERVE);
    for (int32_t i = 0; i < q->n_preserve; i++) {
        if (q->preserve[i] < 0 || q->preserve[i] >= e->n_vocab)
            return vt_errorf(VT_E_INVALID, "preserved token %d: id %d is outside the vocabulary [0, %d)", i,
                             q->preserve[i], e->n_vocab);
    }
    for (int32_t i = 0; i < q->n_stop; i++) {
        if (!q->stop[i]) return vt_errorf(VT_E_INVALID, "stop string %d is NULL", i);
        const size_t n = strlen(q->stop[i]);
        if (n > ENGINE_MAX_STOP_LEN)
            return vt_errorf(VT_E_INVALID, "stop string %d is %zu bytes (at most %d)", i, n,
                             ENGINE_MAX_STOP_LEN);
    }

    int32_t *ids = NULL;
    int64_t n_ids = 0;
    const int32_t *prompt = q->prompt;
    if (!prompt) {
        if (!q->prompt_text && q->prompt_text_len)
            return vt_errorf(VT_E_INVALID, "request has neither prompt tokens nor prompt text");
        VT_TRY(tok_encode(e->tok, q->prompt_text ? q->prompt_text : "", q->prompt_text_len, true,
                          true, &ids, &n_ids));
        prompt = ids;
    } else {
        n_ids = q->n_prompt;
    }
    vt_status s = VT_OK;
    request *r = NULL;
    if (n_ids <= 0) {
        s = vt_errorf(VT_E_INVALID, "the prompt is empty (it needs at least one token)");
        goto fail;
    }
    if (n_ids > e->n_ctx) {
        s = vt_errorf(VT_E_RANGE, "the prompt is %lld tokens, longer than the context of %d tokens",
                      (long long)n_ids, e->n_ctx);
        goto fail;
    }
    for (int64_t i = 0; i < n_ids; i++) {
        if (prompt[i] < 0 || prompt[i] >= e->n_vocab) {
            s = vt_errorf(VT_E_INVALID, "prompt token %lld: id %d is outside the vocabulary [0, %d)",
                          (long long)i, prompt[i], e->n_vocab);
            goto fail;
        }
    }

    r = calloc(1, sizeof *r);
    if (!r) goto oom;
    r->cap_tokens = e->n_ctx + 1;
    r->tokens = malloc(sizeof(int32_t) * (size_t)r->cap_tokens);
    r->blocks[0] = malloc(sizeof(int32_t) * (size_t)(e->max_blocks_per_seq * e->kv.n_groups));
    for (int32_t g = 1; r->blocks[0] && g < e->kv.n_groups; g++)
        r->blocks[g] = r->blocks[0] + g * e->max_blocks_per_seq;
    r->block_hash = malloc(sizeof(uint64_t) * (size_t)e->max_blocks_per_seq);
    if (!r->tokens || !r->blocks[0] || !r->block_hash) goto oom;
    if (e->state_group >= 0) r->blocks[e->state_group][0] = -1; /* no state slot yet */
    memcpy(r->tokens, prompt, sizeof(int32_t) * (size_t)n_ids);
    r->n_tokens = n_ids;
    r->n_prompt = (int32_t)n_ids;
    r->user = q->user;
    r->n_logprobs = q->sampling.n_logprobs;
    r->max_tokens = q->max_tokens;
    r->ignore_eos = q->ignore_eos;
    if (q->n_stop > 0) {
        r->stop = calloc((size_t)q->n_stop, sizeof(char *));
        r->stop_len = calloc((size_t)q->n_stop, sizeof(size_t));
        if (!r->stop || !r->stop_len) goto oom;
        for (int32_t i = 0; i < q->n_stop; i++) {
            const size_t n = strlen(q->stop[i]);
            if (n == 0) continue; /* an empty stop string would match everywhere: ignore it */
            r->stop[r->n_stop] = malloc(n + 1);
            if (!r->stop[r->n_stop]) goto oom;
            memcpy(r->stop[r->n_stop], q->stop[i], n + 1);
            r->stop_len[r->n_stop++] = n;
        }
    }
    if (q->n_preserve > 0) {
        r->preserve = malloc(sizeof(int32_t) * (size_t)q->n_preserve);
        if (!r->preserve) goto oom;
        memcpy(r->preserve, q->preserve, sizeof(int32_t) * (size_t)q->n_preserve);
        r->n_preserve = q->n_preserve;
    }
    r->pooling = q->pooling;
    if (r->pooling != VT_POOLING_NONE) { /* an embedding: no sampler */
        const int64_t rows = r->pooling == VT_POOLING_TOKENS ? n_ids : 1;
        if (rows * e->model->hp.n_embd > INT32_MAX) {
            s = vt_errorf(VT_E_RANGE, "the embeddings of %lld tokens of %lld values are more than one output holds",
                          (long long)n_ids, (long long)e->model->hp.n_embd);
            goto fail;
        }
        r->pooled = calloc((size_t)rows * (size_t)e->model->hp.n_embd, sizeof(float));
        if (!r->pooled) goto oom;
        free(ids);
        *out = r;
        return VT_OK;
    }
    if ((s = sampler_create(&sp, e->n_vocab, &r->smp)) != VT_OK) goto fail;
    for (int64_t i = 0; i < n_ids; i++) sampler_accept(r->smp, prompt[i]);
    if (q->grammar) { /* checked here; compiled and shared on the engine loop (engine_grammar_get) */
        const grammar_vocab *gv = NULL;
        grammar *g = NULL;
        if ((s = engine_grammar_parse(e, q->grammar, q->grammar_len, &g)) != VT_OK) goto fail;
        grammar_free(g);
        if ((s = engine_grammar_vocab(e, &gv)) != VT_OK) goto fail;
        r->gtext = malloc(q->grammar_len + 1);
        if (!r->gtext) goto oom;
        memcpy(r->gtext, q->grammar, q->grammar_len);
        r->gtext[q->grammar_len] = 0;
        r->gtext_len = q->grammar_len;
    }
    free(ids);
    *out = r;
    return VT_OK;
oom:
    s = vt_errorf(VT_E_NOMEM, "out of memory for a request of %lld tokens", (long long)n_ids);
fail:
    free(ids);
    request_free(r);
    return s;
}

/* ---- create / free ------------------------------------------------------------- */

void vt_engine_free(vt_engine *e) {
    if (!e) return;
    for (int32_t i = 0; i < e->n_running; i++) request_free(e->running[i]);
    for (int32_t i = 0; i < e->n_waiting; i++) request_free(e->waiting[i]);
    for (int32_t i = 0; i < e->n_inbox; i++) request_free(e->inbox[i]);
    fwd_destroy(e->fwd);
    for (int32_t g = 0; g < KV_MAX_GROUPS; g++) pcache_free(&e->pc[g]);
    kv_cache_free(&e->kv);
    tp_destroy(e->pool);
    free(e->running);
    free(e->waiting);
    free(e->items);
    free(e->b_token);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_rows);
    free(e->b_seqs);
    free(e->logits);
    free(e->scratch_lp);
    for (int32_t i = 0; i < e->n_grammars; i++) {
        grammar_free(e->grammars[i].g);
        free(e->grammars[i].text);
    }
    free(e->grammars);
    grammar_vocab_free(e->gvocab); /* after the requests' matchers */
    free(e->outs);
    free(e->out_text_off);
    free(e->out_top_off);
    free(e->out_err_off);
    free(e->text);
    free(e->tops);
    free(e->out_embd_off);
    free(e->embd_out);
    free(e->b_erows);
    free(e->embd);
    free(e->inbox);
    free(e->aborts);
    free(e->live);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

vt_status vt_engine_create(vt_model *model, const vt_engine_params *params, vt_engine **out) {
    *out = NULL;
    vt_engine_params p = params ? *params : vt_engine_default_params();
    const vt_engine_params d = vt_engine_default_params();
    if (p.n_threads <= 0) p.n_threads = tp_default_threads();
    if (p.n_ctx <= 0) p.n_ctx = (int32_t)model->hp.n_ctx_train;
    if (p.max_seqs <= 0) p.max_seqs = d.max_seqs;
    if (p.max_batch_tokens <= 0) p.max_batch_tokens = d.max_batch_tokens;
    if (p.kv_block <= 0) p.kv_block = d.kv_block;
    if (p.max_queue <= 0) p.max_queue = d.max_queue;
    if (p.n_threads > 1024 || p.n_ctx > (1 << 24) || p.max_seqs > 4096 ||
        p.max_batch_tokens > (1 << 20) || p.kv_block > 4096 || p.max_queue > (1 << 20) ||
        p.state_snapshots > (1 << 20) || p.state_snapshot_interval > (1 << 24))
        return vt_errorf(VT_E_RANGE,
                         "engine parameters out of range (threads %d, n_ctx %d, max_seqs %d, "
                         "max_batch_tokens %d, kv_block %d, max_queue %d, state_snapshots %d, "
                         "state_snapshot_interval %d)",
                         p.n_threads, p.n_ctx, p.max_seqs, p.max_batch_tokens, p.kv_block,
                         p.max_queue, p.state_snapshots, p.state_snapshot_interval);
    VT_TRY(model_check_n_ctx(model, p.n_ctx)); /* never past the training context unscaled */
    vt_dtype tk, tv;
    VT_TRY(kv_dtype_of(p.type_k, &tk));
    VT_TRY(kv_dtype_of(p.type_v, &tv));
    const model_hparams *hp = &model->hp;

    /* The groups of the cache. A sliding-window group needs, per running
     * sequence, the blocks its window spans and one step's new tokens
     * (kv_swa_pool_blocks; the scheduler cuts a chunk it cannot cover): so
     * many blocks, never more than the full groups have; the budget (kv_tokens,
     * kv_bytes) is what remains for the full-attention layers. */
    kv_group_spec specs[KV_MAX_GROUPS];
    int32_t n_groups;
    int32_t *layer_group = malloc(sizeof(int32_t) * (size_t)hp->n_layer);
    if (!layer_group) return vt_errorf(VT_E_NOMEM, "out of memory");
    vt_status s = fwd_kv_groups(model, specs, layer_group, &n_groups);
    if (s != VT_OK) {
        free(layer_group);
        return s;
    }
    int64_t n_full_layers = 0;
    for (int64_t il = 0; il < hp->n_layer; il++)
        n_full_layers += specs[layer_group[il]].kind == KV_GROUP_FULL;
    const int64_t bs = p.kv_block;
    int64_t swa_blocks[KV_MAX_GROUPS] = {0};
    size_t swa_bytes = 0;
    for (int32_t g = 0; g < n_groups; g++) {
        if (specs[g].kind != KV_GROUP_SWA) continue;
        int64_t n_layer_g = 0;
        for (int64_t il = 0; il < hp->n_layer; il++) n_layer_g += layer_group[il] == g;
        swa_blocks[g] = kv_swa_pool_blocks(specs[g].window, bs, p.max_seqs, p.max_batch_tokens);
        swa_bytes += (size_t)swa_blocks[g] * (size_t)bs *
                     kv_bytes_per_token(tk, tv, n_layer_g, hp->n_head_kv, hp->head_dim);
    }

    int64_t kv_tokens = p.kv_tokens;
    if (kv_tokens <= 0 && p.kv_bytes > 0) {
        const size_t per = kv_bytes_per_token(tk, tv, n_full_layers, hp->n_head_kv, hp->head_dim);
        const size_t left = p.kv_bytes > swa_bytes ? p.kv_bytes - swa_bytes : 0;
        kv_tokens = per ? (int64_t)(left / per) : (int64_t)p.max_seqs * p.n_ctx;
        if (kv_tokens < p.kv_block) {
            free(layer_group);
            return vt_errorf(VT_E_RANGE, "KV budget of %zu bytes holds %lld tokens, less than one block of %d",
                             p.kv_bytes, (long long)kv_tokens, p.kv_block);
        }
    }
    if (kv_tokens <= 0) kv_tokens = (int64_t)p.max_seqs * p.n_ctx;
    int64_t n_blocks = (kv_tokens + p.kv_block - 1) / p.kv_block;
    if (n_blocks > INT32_MAX / 2) n_blocks = INT32_MAX / 2;
    for (int32_t g = 0; g < n_groups; g++)
        specs[g].n_blocks =
            specs[g].kind == KV_GROUP_SWA && swa_blocks[g] < n_blocks ? swa_blocks[g] : n_blocks;
    /* A hybrid's recurrent state: a slot per running sequence, and the prefix
     * cache's snapshots (engine.h) */
    int32_t state_group = -1;
    int64_t n_snapshots = 0;
    for (int32_t g = 0; g < n_groups; g++) {
        if (specs[g].kind != KV_GROUP_STATE) continue;
        state_group = g;
        n_snapshots = !p.prefix_cache || p.state_snapshots < 0 ? 0
                      : p.state_snapshots == 0                 ? 2 * (int64_t)p.max_seqs
                                                               : p.state_snapshots;
        specs[g].n_blocks = p.max_seqs + n_snapshots;
    }

    vt_engine *e = calloc(1, sizeof *e);
    if (!e) {
        free(layer_group);
        return vt_errorf(VT_E_NOMEM, "out of memory");
    }
    pthread_mutex_init(&e->mu, NULL);
    e->model = model;
    e->tok = model->tok;
    for (int32_t i = 0; e->tok && i < tok_n_vocab(e->tok); i++) {
        const int64_t n = tok_piece(e->tok, i, false, NULL, 0);
        if (n > 0 && (size_t)n > e->max_piece) e->max_piece = (size_t)n;
    }
    e->p = p;
    e->n_vocab = (int32_t)hp->n_vocab;
    /* A request alone must always fit the pool, or it could wait forever. */
    e->n_ctx = p.n_ctx;
    if (n_blocks * p.kv_block < e->n_ctx) e->n_ctx = (int32_t)(n_blocks * p.kv_block);
    e->max_blocks_per_seq = (e->n_ctx + p.kv_block - 1) / p.kv_block;
    e->next_id = 1;
    e->state_group = state_group;
    e->max_snapshots = n_snapshots;
    {
        const int64_t every = p.state_snapshot_interval > 0 ? p.state_snapshot_interval : 256;
        e->snapshot_interval = (every + p.kv_block - 1) / p.kv_block * p.kv_block;
    }

    if ((s = tp_create(p.n_threads, &e->pool)) != VT_OK) goto fail;
    if ((s = kv_cache_init_groups(&e->kv, tk, tv, hp->n_layer, hp->n_head_kv, hp->head_dim,
                                  p.kv_block, specs, n_groups, layer_group)) != VT_OK)
        goto fail;
    for (int32_t g = 0; g < n_groups; g++)
        if ((s = pcache_init(&e->pc[g], &e->kv.groups[g].pool, p.kv_block,
                             p.prefix_cache && (g != state_group || n_snapshots > 0))) != VT_OK)
            goto fail;
    if (state_group >= 0)
        e->state_seq_bytes = e->kv.groups[state_group].spec.state_bytes * (size_t)e->kv.groups[state_group].n_layer;
    if ((s = fwd_create(model, &e->kv, e->pool, p.max_batch_tokens, &e->fwd)) != VT_OK) goto fail;
    fwd_set_n_ctx(e->fwd, e->n_ctx);
    const size_t ms = (size_t)p.max_seqs, mb = (size_t)p.max_batch_tokens;
    e->running = malloc(ms * sizeof *e->running);
    e->items = malloc(ms * sizeof *e->items);
    e->b_token = malloc(mb * sizeof(int32_t));
    e->b_pos = malloc(mb * sizeof(int32_t));
    e->b_seq = malloc(mb * sizeof(int32_t));
    e->b_rows = malloc(ms * sizeof(int32_t));
    e->b_seqs = malloc(ms * sizeof(fwd_seq));
    e->logits = malloc(ms * (size_t)e->n_vocab * sizeof(float));
    e->scratch_lp = malloc((size_t)e->n_vocab * sizeof(float));
    if (!e->running || !e->items || !e->b_token || !e->b_pos || !e->b_seq || !e->b_rows ||
        !e->b_seqs || !e->logits || !e->scratch_lp) {
        s = vt_errorf(VT_E_NOMEM, "out of memory for the engine's batch buffers");
        goto fail;
    }
    e->st.kv_blocks_total = sched_blocks_total(e);
    free(layer_group);
    *out = e;
    return VT_OK;
fail:
    free(layer_group);
    vt_engine_free(e);
    return s;
}

/* ---- thread-safe entry points -------------------------------------------------- */

vt_status vt_engine_add(vt_engine *e, const vt_request_params *q, uint64_t *id) {
    if (id) *id = 0;
    if (!q) return vt_errorf(VT_E_INVALID, "no request");
    request *r;
    VT_TRY(request_create(e, q, &r));
    vt_status s = VT_OK;
    pthread_mutex_lock(&e->mu);
    if (e->shared_st.waiting + e->n_inbox >= e->p.max_queue) {
        s = vt_errorf(VT_E_BUSY, "the queue is full (%d waiting requests)", e->p.max_queue);
    } else if (!grow32((void **)&e->inbox, &e->cap_inbox, e->n_inbox + 1, sizeof *e->inbox) ||
               !grow32((void **)&e->live, &e->cap_live, e->n_live + 1, sizeof *e->live)) {
        s = vt_errorf(VT_E_NOMEM, "out of memory queuing a request");
    } else {
        r->id = e->next_id++;
        e->inbox[e->n_inbox++] = r;
        e->live[e->n_live++] = r->id;
        if (id) *id = r->id;
    }
    pthread_mutex_unlock(&e->mu);
    if (s != VT_OK) request_free(r);
    return s;
}

vt_status vt_engine_abort(vt_engine *e, uint64_t id) {
    vt_status s = VT_OK;
    pthread_mutex_lock(&e->mu);
    bool live = false;
    for (int32_t i = 0; i < e->n_live && !live; i++) live = e->live[i] == id;
    bool pending = false;
    for (int32_t i = 0; i < e->n_aborts && !pending; i++) pending = e->aborts[i] == id;
    if (!live) {
        s = vt_errorf(VT_E_NOT_FOUND, "request %llu is unknown or already finished",
                      (unsigned long long)id);
    } else if (!pending) {
        if (!grow32((void **)&e->aborts, &e->cap_aborts, e->n_aborts + 1, sizeof *e->aborts))
            s = vt_errorf(VT_E_NOMEM, "out of memory queuing an abort");
        else
            e->aborts[e->n_aborts++] = id;
    }
    pthread_mutex_unlock(&e->mu);
    return s;
}

bool vt_engine_has_work(vt_engine *e) {
    pthread_mutex_lock(&e->mu);
    const bool w = e->n_inbox > 0 || e->n_aborts > 0 || e->active > 0;
    pthread_mutex_unlock(&e->mu);
    return w;
}

void vt_engine_stats_get(vt_engine *e, vt_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->shared_st;
    out->waiting += e->n_inbox;
    if (out->kv_blocks_total == 0) {
        out->kv_blocks_total = out->kv_blocks_free = sched_blocks_total(e);
    }
    if (out->state_slots_total == 0 && e->state_group >= 0) { /* before the first step */
        out->state_slots_total = out->state_slots_free = e->kv.groups[e->state_group].pool.n_blocks;
        out->state_bytes_per_seq = e->state_seq_bytes;
    }
    pthread_mutex_unlock(&e->mu);
}

/* ---- outputs ------------------------------------------------------------------- */

/* Bytes an error message takes at most in the step's text, its NUL included
 * (as vt_errorf's messages; a longer one is cut). */
#define OUT_ERROR_MAX 1024

/* Room in the step's text for n more bytes and a NUL. */
static bool text_reserve(vt_engine *e, size_t n) {
    const size_t need = e->n_text + n + 1;
    if (need <= e->cap_text) return true;
    if (e->test_fail_text > 0) {
        e->test_fail_text--;
        return false;
    }
    int64_t cap = (int64_t)e->cap_text;
    if (!grow((void **)&e->text, &cap, (int64_t)need, 1)) return false;
    e->cap_text = (size_t)cap;
    return true;
}

static bool text_put(vt_engine *e, const char *s, size_t n) {
    if (!text_reserve(e, n)) return false;
    if (n) memcpy(e->text + e->n_text, s, n);
    e->n_text += n;
    return true;
}

/* Room in the step's text for all its outputs may carry, made before the step
 * touches a request (as outs_reserve does for the outputs): each request's
 * pending bytes, one token's piece for each request it may sample and an error
 * message for each. So the text of an output is never lost to a failed growth:
 * the client gets all of it or, when this room cannot be had, the step does
 * nothing and says VT_E_NOMEM. */
static bool text_reserve_step(vt_engine *e) {
    size_t need = (size_t)e->p.max_seqs * (e->max_piece + OUT_ERROR_MAX + 1);
    for (int32_t i = 0; i < e->n_running; i++) need += e->running[i]->n_pending;
    for (int32_t i = 0; i < e->n_waiting; i++) need += e->waiting[i]->n_pending;
    return text_reserve(e, need);
}

/* Room for n more outputs in this step. The step reserves, before it touches a
 * request, one output for each abort it takes and each request it may schedule,
 * so that out_new cannot fail: a request never ends without its finishing
 * output (the job of a server waiting for it would wait forever). */
static bool outs_reserve(vt_engine *e, int64_t n) {
    const int64_t need = (int64_t)e->n_outs + n;
    if (need <= e->cap_outs) return true;
    if (e->test_fail_outs > 0) {
        e->test_fail_outs--;
        return false;
    }
    int64_t cap = e->cap_outs, c2 = e->cap_outs, c3 = e->cap_outs, c4 = e->cap_outs, c5 = e->cap_outs;
    if (!grow((void **)&e->outs, &cap, need, sizeof *e->outs) ||
        !grow((void **)&e->out_text_off, &c2, need, sizeof *e->out_text_off) ||
        !grow((void **)&e->out_top_off, &c3, need, sizeof *e->out_top_off) ||
        !grow((void **)&e->out_err_off, &c4, need, sizeof *e->out_err_off) ||
        !grow((void **)&e->out_embd_off, &c5, need, sizeof *e->out_embd_off))
        return false;
    VT_ASSERT(cap == c2 && cap == c3 && cap == c4 && cap == c5);
    e->cap_outs = (int32_t)cap;
    return true;
}

/* A new output for r in the room outs_reserve made; text and tops are attached
 * by the caller. */
static vt_output *out_new(vt_engine *e, const request *r, int32_t token) {
    VT_ASSERT(e->n_outs < e->cap_outs);
    const int32_t i = e->n_outs++;
    vt_output *o = &e->outs[i];
    memset(o, 0, sizeof *o);
    o->id = r->id;
    o->user = r->user;
    o->token = token;
    o->n_prompt = r->n_prompt;
    o->n_cached = r->n_cached;
    o->n_generated = r->n_generated;
    e->out_text_off[i] = e->n_text;
    e->out_top_off[i] = -1;
    e->out_err_off[i] = -1;
    e->out_embd_off[i] = -1;
    return o;
}

static void out_error(vt_engine *e, vt_output *o, const char *msg) {
    const int32_t i = (int32_t)(o - e->outs);
    size_t n = strlen(msg);
    if (n > OUT_ERROR_MAX - 1) n = tok_utf8_complete_prefix(msg, OUT_ERROR_MAX - 1);
    e->out_err_off[i] = (int64_t)e->n_text;
    if (text_put(e, msg, n)) e->text[e->n_text++] = 0; /* text_put left room for the NUL */
    else e->out_err_off[i] = -1;                     /* outs_fixup says "out of memory" */
    o->finish = VT_FINISH_ERROR;
}

/* Emit the first n pending bytes of r as the text of output o (its finish set
 * already). text_reserve_step made the room; should it not suffice and the
 * text not grow, nothing is silently dropped: an unfinished output keeps the
 * bytes pending for the next one, a finishing output becomes an error. */
static void emit_pending(vt_engine *e, request *r, vt_output *o, size_t n) {
    const int32_t i = (int32_t)(o - e->outs);
    e->out_text_off[i] = e->n_text;
    if (!text_put(e, r->pending, n)) {
        o->text_len = 0;
        if (o->finish != VT_FINISH_NONE) out_error(e, o, "out of memory for the text of the output");
        return;
    }
    o->text_len = n;
    if (r->n_pending > n) memmove(r->pending, r->pending + n, r->n_pending - n);
    r->n_pending -= n;
}

/* Pointers into the text and tops buffers, once they stop moving. */
static void outs_fixup(vt_engine *e) {
    for (int32_t i = 0; i < e->n_outs; i++) {
        vt_output *o = &e->outs[i];
        o->text = e->text ? e->text + e->out_text_off[i] : "";
        if (!o->text_len) o->text = "";
        o->top = e->out_top_off[i] >= 0 ? e->tops + e->out_top_off[i] : NULL;
        o->error = e->out_err_off[i] >= 0 ? e->text + e->out_err_off[i]
                   : o->finish == VT_FINISH_ERROR ? "out of memory"
                                                  : NULL;
        o->embd = e->out_embd_off[i] >= 0 ? e->embd_out + e->out_embd_off[i] : NULL;
        if (!o->embd) o->n_embd = 0;
    }
}

/* ---- finishing ------------------------------------------------------------------ */

static void live_remove(vt_engine *e, uint64_t id) {
    for (int32_t i = 0; i < e->n_live; i++) {
        if (e->live[i] == id) {
            e->live[i] = e->live[--e->n_live];
            return;
        }
    }
}

static void running_remove(vt_engine *e, request *r) {
    for (int32_t i = 0; i < e->n_running; i++) {
        if (e->running[i] == r) {
            memmove(e->running + i, e->running + i + 1,
                    sizeof(request *) * (size_t)(e->n_running - i - 1));
            e->n_running--;
            return;
        }
    }
    VT_ASSERT(0);
}

static bool waiting_remove(vt_engine *e, request *r) {
    for (int32_t i = 0; i < e->n_waiting; i++) {
        if (e->waiting[i] == r) {
            memmove(e->waiting + i, e->waiting + i + 1,
                    sizeof(request *) * (size_t)(e->n_waiting - i - 1));
            e->n_waiting--;
            return true;
        }
    }
    return false;
}

/* Take r out of the engine for good (its output is already built). */
static void retire(vt_engine *e, request *r) {
    if (r->gram) {
        grammar_matcher_free(r->gm);
        r->gm = NULL;
        engine_grammar_put(e, r->gram);
        r->gram = NULL;
    }
    if (r->running) running_remove(e, r);
    else waiting_remove(e, r);
    sched_release_blocks(e, r);
    pthread_mutex_lock(&e->mu);
    live_remove(e, r->id);
    pthread_mutex_unlock(&e->mu);
    request_free(r);
}

/* ---- text and stop strings ------------------------------------------------------ */

static bool pending_put(request *r, const char *s, size_t n) {
    if (n == 0) return true;
    int64_t cap = (int64_t)r->cap_pending;
    if (!grow((void **)&r->pending, &cap, (int64_t)(r->n_pending + n), 1)) return false;
    r->cap_pending = (size_t)cap;
    memcpy(r->pending + r->n_pending, s, n);
    r->n_pending += n;
    return true;
}

/* Append the text of the newly generated token. The first generated piece loses
 * the leading space SPM puts before a word, as llama.cpp's detokenizer does. A
 * control token gives no text unless the request preserves it. */
static bool append_piece(vt_engine *e, request *r, int32_t token) {
    char small[128];
    bool special = false;
    for (int32_t i = 0; i < r->n_preserve && !special; i++) special = r->preserve[i] == token;
    if (r->n_generated == 1) {
        char *t = NULL;
        size_t n = 0;
        if (tok_decode(e->tok, &token, 1, special, &t, &n) != VT_OK) return false;
        const bool ok = pending_put(r, t, n);
        free(t);
        return ok;
    }
    int64_t n = tok_piece(e->tok, token, special, small, sizeof small);
    if (n < 0) return false;
    if ((size_t)n <= sizeof small) return pending_put(r, small, (size_t)n);
    char *big = malloc((size_t)n);
    if (!big) return false;
    tok_piece(e->tok, token, special, big, (size_t)n);
    const bool ok = pending_put(r, big, (size_t)n);
    free(big);
    return ok;
}

/* Earliest match of any stop string in pending, or -1. */
static int64_t stop_match(const request *r) {
    int64_t best = -1;
    if (r->n_pending == 0) return -1; /* pending may still be NULL: no memmem on it */
    for (int32_t i = 0; i < r->n_stop; i++) {
        const char *m = memmem(r->pending, r->n_pending, r->stop[i], r->stop_len[i]);
        if (m && (best < 0 || m - r->pending < best)) best = m - r->pending;
    }
    return best;
}

/* Bytes at the end of pending[0..n) that could start a stop string. */
static size_t stop_holdback(const request *r, size_t n) {
    size_t hold = 0;
    for (int32_t i = 0; i < r->n_stop; i++) {
        const size_t sl = r->stop_len[i];
        for (size_t k = (sl - 1 < n ? sl - 1 : n); k > hold; k--) {
            if (!memcmp(r->pending + n - k, r->stop[i], k)) {
                hold = k;
                break;
            }
        }
    }
    return hold;
}

/* ---- logprobs -------------------------------------------------------------------- */

static float log_softmax_of(const float *l, int32_t n, int32_t token, double *lse_out) {
    float mx = l[0];
    for (int32_t i = 1; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += expf(l[i] - mx);
    const double lse = mx + log(sum);
    *lse_out = lse;
    return (float)(l[token] - lse);
}

/* The k best ids of l (k <= 20), best first, ties to the lower id. */
static void top_logprobs(const float *l, int32_t n, int32_t k, double lse, vt_token_logprob *out) {
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m == k && !(l[i] > out[m - 1].logprob)) continue;
        int32_t j = m < k ? m++ : k - 1;
        while (j > 0 && l[i] > out[j - 1].logprob) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = (vt_token_logprob){i, l[i]};
    }
    for (int32_t i = 0; i < m; i++) out[i].logprob = (float)(out[i].logprob - lse);
}

/* ---- the step ---------------------------------------------------------------------- */

/* Move the inbox to the waiting queue and take the aborts, after reserving an
 * output for each abort and each request the step may schedule; false (nothing
 * taken, aborts and new requests kept for a later step) when that room cannot
 * be had. */
static bool take_inbox(vt_engine *e, uint64_t **aborts, int32_t *n_aborts, bool *oom) {
    *aborts = NULL;
    *n_aborts = 0;
    pthread_mutex_lock(&e->mu);
    if (!outs_reserve(e, (int64_t)e->n_aborts + e->p.max_seqs)) {
        pthread_mutex_unlock(&e->mu);
        return false;
    }
    const int64_t need = (int64_t)e->n_waiting + e->n_inbox + e->p.max_seqs;
    if (!grow32((void **)&e->waiting, &e->cap_waiting, need, sizeof *e->waiting)) {
        *oom = true; /* keep them in the inbox for a later step */
    } else {
        if (e->n_inbox > 0)
            memcpy(e->waiting + e->n_waiting, e->inbox, sizeof(request *) * (size_t)e->n_inbox);
        e->n_waiting += e->n_inbox;
        e->n_inbox = 0;
    }
    if (e->n_aborts > 0) {
        *aborts = malloc(sizeof(uint64_t) * (size_t)e->n_aborts);
        if (*aborts) {
            memcpy(*aborts, e->aborts, sizeof(uint64_t) * (size_t)e->n_aborts);
            *n_aborts = e->n_aborts;
            e->n_aborts = 0;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return true;
}

static void process_aborts(vt_engine *e, const uint64_t *ids, int32_t n) {
    for (int32_t k = 0; k < n; k++) {
        request *r = NULL;
        for (int32_t i = 0; i < e->n_running && !r; i++)
            if (e->running[i]->id == ids[k]) r = e->running[i];
        for (int32_t i = 0; i < e->n_waiting && !r; i++)
            if (e->waiting[i]->id == ids[k]) r = e->waiting[i];
        if (!r) continue; /* finished in the meantime */
        vt_output *o = out_new(e, r, -1);
        o->finish = VT_FINISH_ABORT;
        emit_pending(e, r, o, r->n_pending);
        retire(e, r);
    }
}

/* Sample r's next token from its logits row and report it. Returns true when the
 * request finished. */
static bool sample_one(vt_engine *e, request *r, const float *l) {
    int32_t tok;
    if (r->gtext) {
        /* only the tokens that continue the grammar; its end only where complete */
        const uint32_t *allowed;
        int32_t n_allowed;
        vt_status st = VT_OK;
        if (!r->gm) {
            if ((st = engine_grammar_get(e, r->gtext, r->gtext_len, &r->gram)) == VT_OK)
                st = grammar_matcher_create(r->gram, e->gvocab, &r->gm);
        }
        if (st == VT_OK) st = grammar_matcher_mask(r->gm, &allowed, &n_allowed);
        if (st == VT_OK && n_allowed == 0)
            st = vt_errorf(VT_E_INVALID, "grammar: no token of the vocabulary can continue the text");
        if (st == VT_OK) {
            tok = sampler_sample_masked(r->smp, l, allowed, NULL);
            st = grammar_matcher_accept(r->gm, tok);
        }
        if (st != VT_OK) {
            vt_output *o = out_new(e, r, -1);
            char msg[300];
            snprintf(msg, sizeof msg, "%s", vt_last_error());
            emit_pending(e, r, o, r->n_pending);
            out_error(e, o, msg);
            return true;
        }
    } else {
        tok = sampler_sample(r->smp, l, NULL);
    }
    sampler_accept(r->smp, tok);
    r->tokens[r->n_tokens++] = tok;
    r->n_generated++;
    e->st.generated_tokens++;

    vt_output *o = out_new(e, r, tok);
    if (r->n_logprobs >= 0) { /* asked for: one pass for the normaliser, one for the top k */
        double lse;
        o->logprob = log_softmax_of(l, e->n_vocab, tok, &lse);
        const int32_t k = r->n_logprobs < e->n_vocab ? r->n_logprobs : e->n_vocab;
        if (k > 0 && grow((void **)&e->tops, &e->cap_tops, e->n_tops + k, sizeof *e->tops)) {
            top_logprobs(l, e->n_vocab, k, lse, e->tops + e->n_tops);
            e->out_top_off[o - e->outs] = e->n_tops;
            o->n_top = k;
            e->n_tops += k;
        }
    }

    const bool eos = (!r->ignore_eos || r->gtext) && tok_is_eog(e->tok, tok);
    if (!append_piece(e, r, tok)) {
        out_error(e, o, "out of memory detokenizing");
        return true;
    }
    const int64_t m = stop_match(r);
    if (m >= 0) {
        o->finish = VT_FINISH_STOP;
        emit_pending(e, r, o, (size_t)m);
        return true;
    }
    if (eos || (r->gm && grammar_matcher_done(r->gm))) o->finish = VT_FINISH_STOP;
    else if ((r->max_tokens > 0 && r->n_generated >= r->max_tokens) || r->n_tokens >= e->n_ctx)
        o->finish = VT_FINISH_LENGTH;
    if (o->finish != VT_FINISH_NONE) {
        emit_pending(e, r, o, r->n_pending);
        return true;
    }
    const size_t complete = tok_utf8_complete_prefix(r->pending, r->n_pending);
    emit_pending(e, r, o, complete - stop_holdback(r, complete));
    return false;
}

/* An embedding request's rows of this step (its item's n tokens from
 * r->n_computed on, at e->embd + *row): into r->pooled. */
static void pool_rows(vt_engine *e, request *r, int64_t n, int32_t *row) {
    const int64_t d = e->model->hp.n_embd;
    const float *x = e->embd + (size_t)*row * (size_t)d;
    if (r->pooling == VT_POOLING_MEAN) {
        if (r->n_computed == 0) memset(r->pooled, 0, sizeof(float) * (size_t)d); /* anew after a preemption */
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < d; i++) r->pooled[i] += x[j * d + i];
        *row += (int32_t)n;
    } else if (r->pooling == VT_POOLING_TOKENS) {
        memcpy(r->pooled + (size_t)r->n_computed * (size_t)d, x, sizeof(float) * (size_t)(n * d));
        *row += (int32_t)n;
    } else if ((r->pooling == VT_POOLING_CLS && r->n_computed == 0) ||
               (r->pooling == VT_POOLING_LAST && r->n_computed + n == r->n_tokens)) {
        memcpy(r->pooled, x, sizeof(float) * (size_t)d);
        *row += 1;
    }
}

/* The rows of r's item (n tokens, batch rows from nt0 on) whose hidden states
 * its pooling needs, appended to e->b_erows. */
static void embd_rows_of(vt_engine *e, const request *r, int64_t n, int64_t nt0, int32_t *n_erows) {
    if (r->pooling == VT_POOLING_MEAN || r->pooling == VT_POOLING_TOKENS)
        for (int64_t j = 0; j < n; j++) e->b_erows[(*n_erows)++] = (int32_t)(nt0 + j);
    else if (r->pooling == VT_POOLING_CLS && r->n_computed == 0) e->b_erows[(*n_erows)++] = (int32_t)nt0;
    else if (r->pooling == VT_POOLING_LAST && r->n_computed + n == r->n_tokens)
        e->b_erows[(*n_erows)++] = (int32_t)(nt0 + n - 1);
}

/* r's prompt is evaluated: report its pooled vector (the mean divided out) and
 * finish it (an error if a value is not finite). */
static void finish_embedding(vt_engine *e, request *r) {
    /* d: the values reported (every token's with VT_POOLING_TOKENS) */
    const int64_t d = e->model->hp.n_embd * (r->pooling == VT_POOLING_TOKENS ? r->n_tokens : 1);
    if (r->pooling == VT_POOLING_MEAN)
        for (int64_t i = 0; i < d; i++) r->pooled[i] /= (float)r->n_tokens;
    vt_output *o = out_new(e, r, -1);
    if (!fwd_logits_finite(r->pooled, d)) {
        char step[160];
        snprintf(step, sizeof step, "request %llu, the embedding of %lld tokens", (unsigned long long)r->id,
                 (long long)r->n_tokens);
        model_nonfinite_error(e->model, step);
        out_error(e, o, vt_last_error());
        return;
    }
    if (!grow((void **)&e->embd_out, &e->cap_embd_out, e->n_embd_out + d, sizeof(float))) {
        out_error(e, o, "out of memory for an embedding");
        return;
    }
    memcpy(e->embd_out + e->n_embd_out, r->pooled, sizeof(float) * (size_t)d);
    e->out_embd_off[o - e->outs] = e->n_embd_out;
    e->n_embd_out += d;
    o->n_embd = (int32_t)d;
    o->finish = VT_FINISH_STOP;
}

static void publish_stats(vt_engine *e) {
    e->st.running = e->n_running;
    e->st.waiting = e->n_waiting;
    e->st.kv_blocks_total = sched_blocks_total(e);
    e->st.kv_blocks_free = sched_blocks_available(e);
    e->st.kv_blocks_cached = sched_blocks_cached(e);
    if (e->state_group >= 0) {
        const pcache *pc = &e->pc[e->state_group];
        e->st.state_slots_total = pc->pool->n_blocks;
        e->st.state_slots_free = pcache_available(pc);
        e->st.state_snapshots = pc->n_lru;
        e->st.state_bytes_per_seq = e->state_seq_bytes;
    }
    fwd_stats fs;
    fwd_stats_get(e->fwd, &fs);
    e->st.weight_bytes_read = fs.weight_bytes;
    e->st.moe_layer_passes = fs.moe_layer_passes;
    e->st.moe_experts_read = fs.moe_experts_read;
    pthread_mutex_lock(&e->mu);
    e->shared_st = e->st;
    e->active = e->n_running + e->n_waiting;
    pthread_mutex_unlock(&e->mu);
}

vt_status vt_engine_step(vt_engine *e, const vt_output **outs, int32_t *n_outs) {
    *outs = NULL;
    *n_outs = 0;
    e->n_outs = 0;
    e->n_text = 0;
    e->n_tops = 0;
    e->n_embd_out = 0;

    uint64_t *abort_ids;
    int32_t n_abort_ids;
    bool oom = false;
    if (!text_reserve_step(e) || !take_inbox(e, &abort_ids, &n_abort_ids, &oom)) {
        publish_stats(e);
        return vt_errorf(VT_E_NOMEM, "engine step: out of memory for the step's outputs (nothing was done; "
                                     "the requests wait for the next step)");
    }
    process_aborts(e, abort_ids, n_abort_ids);
    free(abort_ids);

    sched_plan(e);
    if (e->n_items > 0) {
        e->st.steps++;
        if (e->state_group >= 0)
            for (int32_t k = 0; k < e->n_items; k++) sched_snapshot_begin(e, &e->items[k]);
        /* the batch: each item's tokens in order, logits for rows that complete it */
        int64_t nt = 0;
        int32_t n_rows = 0, n_erows = 0;
        bool embd_oom = false;
        for (int32_t k = 0; k < e->n_items && !e->b_erows; k++) {
            if (e->items[k].req->pooling == VT_POOLING_NONE) continue;
            /* the first embedding request: the buffers of its rows */
            const size_t mb = (size_t)e->p.max_batch_tokens;
            e->b_erows = malloc(mb * sizeof(int32_t));
            e->embd = malloc(mb * (size_t)e->model->hp.n_embd * sizeof(float));
            if (!e->b_erows || !e->embd) {
                free(e->b_erows);
                free(e->embd);
                e->b_erows = NULL;
                e->embd = NULL;
                embd_oom = true;
            }
        }
        for (int32_t k = 0; k < e->n_items; k++) {
            request *r = e->items[k].req;
            const int64_t n = e->items[k].n;
            if (r->pooling != VT_POOLING_NONE && !embd_oom) embd_rows_of(e, r, n, nt, &n_erows);
            for (int64_t j = 0; j < n; j++) {
                e->b_token[nt] = r->tokens[r->n_computed + j];
                e->b_pos[nt] = (int32_t)(r->n_computed + j);
                e->b_seq[nt] = k;
                nt++;
            }
            if (r->n_computed + n == r->n_tokens && r->pooling == VT_POOLING_NONE)
                e->b_rows[n_rows++] = (int32_t)(nt - 1);
            e->b_seqs[k] = (fwd_seq){.n_blocks = r->n_blocks,
                                     .snap_pos = e->items[k].snap_pos,
                                     .snap_slot = e->items[k].snap_slot};
            for (int32_t g = 0; g < e->kv.n_groups; g++) e->b_seqs[k].blocks[g] = r->blocks[g];
        }
        fwd_batch fb = {.n_tokens = nt, .token = e->b_token, .pos = e->b_pos, .seq = e->b_seq,
                        .seqs = e->b_seqs, .n_seqs = e->n_items, .logit_rows = e->b_rows,
                        .n_logits = n_rows, .logits = e->logits, .embd_rows = e->b_erows,
                        .n_embd_rows = n_erows, .embd = e->embd};
        vt_status fs = embd_oom ? vt_errorf(VT_E_NOMEM, "out of memory for the rows of embedding requests")
                                : fwd_run(e->fwd, &fb);
        if (fs != VT_OK) {
            /* the forward pass could not run: end this step's requests with the reason */
            char msg[512];
            snprintf(msg, sizeof msg, "%s", vt_last_error());
            for (int32_t k = 0; k < e->n_items; k++) {
                request *r = e->items[k].req;
                sched_snapshot_end(e, &e->items[k], false);
                out_error(e, out_new(e, r, -1), msg);
                retire(e, r);
            }
        } else {
            int32_t row = 0, erow = 0;
            const int64_t bs = e->p.kv_block;
            for (int32_t k = 0; k < e->n_items; k++) {
                request *r = e->items[k].req;
                if (r->pooling != VT_POOLING_NONE) pool_rows(e, r, e->items[k].n, &erow);
                r->n_computed += e->items[k].n;
                /* offer newly completed full blocks to the prefix cache of
                 * each group (a SWA group's released ones are gone) */
                while (e->pc[0].enabled && (r->n_hashed + 1) * bs <= r->n_computed) {
                    const int64_t b = r->n_hashed;
                    const uint64_t parent = b ? r->block_hash[b - 1] : 0;
                    const int32_t *t = r->tokens + b * bs;
                    r->block_hash[b] = pcache_hash(parent, t, bs);
                    for (int32_t g = 0; g < e->kv.n_groups; g++)
                        if (g != e->state_group && r->blocks[g][b] >= 0)
                            pcache_insert(&e->pc[g], r->blocks[g][b], parent, r->block_hash[b], t);
                    r->n_hashed++;
                }
                sched_snapshot_end(e, &e->items[k], true);
                if (e->state_group >= 0 && e->pc[0].enabled) sched_snapshot(e, r);
                if (r->n_computed == r->n_tokens && r->pooling != VT_POOLING_NONE) {
                    finish_embedding(e, r);
                    retire(e, r);
                    continue;
                }
                if (r->n_computed == r->n_tokens) {
                    const float *l = e->logits + (size_t)row++ * (size_t)e->n_vocab;
                    if (!fwd_logits_finite(l, e->n_vocab)) {
                        /* this request ends with the reason; the others go on */
                        char step[160];
                        snprintf(step, sizeof step, "request %llu, %s at position %lld",
                                 (unsigned long long)r->id, r->n_generated ? "decode" : "prefill",
                                 (long long)(r->n_tokens - 1));
                        model_nonfinite_error(e->model, step);
                        out_error(e, out_new(e, r, -1), vt_last_error());
                        retire(e, r);
                        continue;
                    }
                    if (sample_one(e, r, l)) retire(e, r);
                }
            }
        }
    }
    outs_fixup(e);
    publish_stats(e);
    *outs = e->outs;
    *n_outs = e->n_outs;
    (void)oom;
    return VT_OK;
}
