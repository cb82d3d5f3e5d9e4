/* vt_context: the low-level evaluation API of vt.h over the forward pass, with
 * a fixed share of the paged KV cache per sequence: n_ctx tokens of blocks in
 * every group of the cache (a sliding-window group keeps them all here; the
 * serving engine is the one that releases what a window has passed). */
#include "base/size.h"
#include "cpu/threadpool.h"
#include "kvcache/kv_cache.h"
#include "model/forward.h"

#include <stdlib.h>
#include <string.h>

struct vt_context {
    vt_model *model;
    vt_context_params p;
    tp_pool *pool;
    kv_cache kv;
    fwd_ctx *fwd;
    int64_t max_blocks_per_seq;
    int32_t n_groups;
    int32_t *tables;   /* (n_groups, n_seq, max_blocks_per_seq) */
    int64_t *n_blocks; /* (n_seq) blocks held */
    int32_t *len;      /* (n_seq) tokens in the cache */
    float *logits;     /* (n_logits, n_vocab) of the last batch */
    int64_t n_logits, cap_logits;
    /* per-batch scratch of up to n_batch tokens */
    int32_t *rows;
    fwd_seq *seqs;
};

vt_context_params vt_context_default_params(void) {
    vt_context_params p = {.n_ctx = 0, .n_seq = 1, .n_batch = 512, .n_threads = 0,
                           .kv_block = 16, .type_k = VT_KV_F16, .type_v = VT_KV_F16};
    return p;
}

void vt_context_free(vt_context *c) {
    if (!c) return;
    fwd_destroy(c->fwd);
    kv_cache_free(&c->kv);
    tp_destroy(c->pool);
    free(c->tables);
    free(c->n_blocks);
    free(c->len);
    free(c->logits);
    free(c->rows);
    free(c->seqs);
    free(c);
}

vt_status vt_context_create(vt_model *model, const vt_context_params *params, vt_context **out) {
    *out = NULL;
    vt_context_params p = params ? *params : vt_context_default_params();
    if (p.n_ctx <= 0) p.n_ctx = (int32_t)model->hp.n_ctx_train;
    if (p.n_seq <= 0) p.n_seq = 1;
    if (p.n_batch <= 0) p.n_batch = 512;
    if (p.kv_block <= 0) p.kv_block = 16;
    if (p.n_threads <= 0) p.n_threads = tp_default_threads();
    if (p.n_ctx > (1 << 24) || p.n_seq > 4096 || p.n_batch > (1 << 20) || p.kv_block > 4096 ||
        p.n_threads > 1024)
        return vt_errorf(VT_E_RANGE, "context parameters out of range (n_ctx %d, n_seq %d, n_batch %d)",
                         p.n_ctx, p.n_seq, p.n_batch);
    vt_dtype tk, tv;
    VT_TRY(kv_dtype_of(p.type_k, &tk));
    VT_TRY(kv_dtype_of(p.type_v, &tv));

    vt_context *c = calloc(1, sizeof *c);
    if (!c) return vt_errorf(VT_E_NOMEM, "out of memory");
    c->model = model;
    c->p = p;
    vt_status s;
    if ((s = tp_create(p.n_threads, &c->pool)) != VT_OK) goto fail;
    c->max_blocks_per_seq = (p.n_ctx + p.kv_block - 1) / p.kv_block;
    const model_hparams *hp = &model->hp;
    kv_group_spec specs[KV_MAX_GROUPS];
    int32_t *layer_group = malloc(sizeof(int32_t) * (size_t)hp->n_layer);
    if (!layer_group) {
        s = vt_errorf(VT_E_NOMEM, "out of memory");
        goto fail;
    }
    s = fwd_kv_groups(model, specs, layer_group, &c->n_groups);
    for (int32_t g = 0; g < c->n_groups; g++) /* a STATE group: one slot per sequence */
        specs[g].n_blocks = specs[g].kind == KV_GROUP_STATE ? p.n_seq : c->max_blocks_per_seq * p.n_seq;
    if (s == VT_OK)
        s = kv_cache_init_groups(&c->kv, tk, tv, hp->n_layer, hp->n_head_kv, hp->head_dim,
                                 p.kv_block, specs, c->n_groups, layer_group);
    free(layer_group);
    if (s != VT_OK) goto fail;
    if ((s = fwd_create(model, &c->kv, c->pool, p.n_batch, &c->fwd)) != VT_OK) goto fail;
    fwd_set_n_ctx(c->fwd, p.n_ctx);
    c->tables = malloc(sizeof(int32_t) * (size_t)(c->n_groups * c->max_blocks_per_seq * p.n_seq));
    c->n_blocks = calloc((size_t)p.n_seq, sizeof(int64_t));
    c->len = calloc((size_t)p.n_seq, sizeof(int32_t));
    c->rows = malloc(sizeof(int32_t) * (size_t)p.n_batch);
    c->seqs = malloc(sizeof(fwd_seq) * (size_t)p.n_seq);
    if (!c->tables || !c->n_blocks || !c->len || !c->rows || !c->seqs) {
        s = vt_errorf(VT_E_NOMEM, "out of memory");
        goto fail;
    }
    /* sequence q keeps state slot q for the context's life (its first table entry);
     * the forward pass zeroes it where the sequence starts again at position 0 */
    for (int32_t g = 0; g < c->n_groups; g++)
        if (c->kv.groups[g].spec.kind == KV_GROUP_STATE)
            for (int32_t q = 0; q < p.n_seq; q++)
                c->tables[(g * p.n_seq + q) * c->max_blocks_per_seq] = kv_pool_alloc(&c->kv.groups[g].pool);
    *out = c;
    return VT_OK;
fail:
    vt_context_free(c);
    return s;
}

/* Check the whole batch before touching the cache: ids, sequences, positions
 * that continue each sequence, room in the context. */
static vt_status check_batch(vt_context *c, const vt_batch *b, int32_t *next) {
    if (b->n_tokens <= 0 || !b->token || !b->pos || !b->seq)
        return vt_errorf(VT_E_INVALID, "empty or incomplete batch");
    memcpy(next, c->len, sizeof(int32_t) * (size_t)c->p.n_seq);
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const int32_t s = b->seq[i], tok = b->token[i];
        if (s < 0 || s >= c->p.n_seq)
            return vt_errorf(VT_E_INVALID, "batch token %d: sequence %d out of range [0, %d)", i, s,
                             c->p.n_seq);
        if (tok < 0 || tok >= c->model->hp.n_vocab)
            return vt_errorf(VT_E_INVALID, "batch token %d: id %d out of range [0, %lld)", i, tok,
                             (long long)c->model->hp.n_vocab);
        if (b->pos[i] != next[s])
            return vt_errorf(VT_E_INVALID,
                             "batch token %d: position %d does not continue sequence %d (length %d)",
                             i, b->pos[i], s, next[s]);
        if (next[s] >= c->p.n_ctx)
            return vt_errorf(VT_E_RANGE, "sequence %d would exceed the context of %d tokens", s,
                             c->p.n_ctx);
        next[s]++;
    }
    return VT_OK;
}

vt_status vt_decode(vt_context *c, const vt_batch *b) {
    int32_t next_stack[64];
    int32_t *next = c->p.n_seq <= 64 ? next_stack : malloc(sizeof(int32_t) * (size_t)c->p.n_seq);
    if (!next) return vt_errorf(VT_E_NOMEM, "out of memory");
    vt_status s = check_batch(c, b, next);
    if (s != VT_OK) goto done;

    /* Blocks: each sequence's share is reserved up front, so this cannot fail. */
    for (int32_t q = 0; q < c->p.n_seq; q++) {
        const int64_t need = (next[q] + c->p.kv_block - 1) / c->p.kv_block;
        for (; c->n_blocks[q] < need; c->n_blocks[q]++)
            for (int32_t g = 0; g < c->n_groups; g++) {
                if (c->kv.groups[g].spec.kind == KV_GROUP_STATE) continue;
                int32_t blk = kv_pool_alloc(&c->kv.groups[g].pool);
                VT_ASSERT(blk >= 0);
                c->tables[(g * c->p.n_seq + q) * c->max_blocks_per_seq + c->n_blocks[q]] = blk;
            }
        for (int32_t g = 0; g < c->n_groups; g++)
            c->seqs[q].blocks[g] = c->tables + (g * c->p.n_seq + q) * c->max_blocks_per_seq;
        c->seqs[q].n_blocks = c->n_blocks[q];
    }

    int64_t n_logits = 0;
    for (int32_t i = 0; i < b->n_tokens; i++)
        n_logits += b->logits ? (b->logits[i] != 0) : (i == b->n_tokens - 1);
    const size_t nv = (size_t)c->model->hp.n_vocab;
    if (n_logits > c->cap_logits) {
        float *l = realloc(c->logits, (size_t)n_logits * nv * sizeof(float));
        if (!l) {
            s = vt_errorf(VT_E_NOMEM, "out of memory for %lld logit rows", (long long)n_logits);
            goto done;
        }
        c->logits = l;
        c->cap_logits = n_logits;
    }

    c->n_logits = 0; /* until this batch succeeds, vt_get_logits has nothing */
    /* Run in slices of n_batch tokens, in order. */
    int64_t out_row = 0;
    for (int32_t i0 = 0; i0 < b->n_tokens; i0 += c->p.n_batch) {
        const int32_t n = b->n_tokens - i0 < c->p.n_batch ? b->n_tokens - i0 : c->p.n_batch;
        int64_t nl = 0;
        for (int32_t i = 0; i < n; i++) {
            const int32_t gi = i0 + i;
            if (b->logits ? b->logits[gi] != 0 : gi == b->n_tokens - 1) c->rows[nl++] = i;
        }
        fwd_batch fb = {.n_tokens = n, .token = b->token + i0, .pos = b->pos + i0,
                        .seq = b->seq + i0, .seqs = c->seqs, .n_seqs = c->p.n_seq,
                        .logit_rows = c->rows, .n_logits = nl,
                        .logits = c->logits + (size_t)out_row * nv};
        if ((s = fwd_run(c->fwd, &fb)) != VT_OK) goto done;
        for (int64_t r = 0; r < nl; r++) {
            if (fwd_logits_finite(fb.logits + (size_t)r * nv, (int64_t)nv)) continue;
            /* never sampled from: the sequences keep their lengths (the cache as before) */
            const int32_t gi = i0 + c->rows[r];
            char step[160];
            snprintf(step, sizeof step, "decode of batch token %d (sequence %d, position %d)", gi, b->seq[gi],
                     b->pos[gi]);
            s = model_nonfinite_error(c->model, step);
            goto done;
        }
        out_row += nl;
    }
    memcpy(c->len, next, sizeof(int32_t) * (size_t)c->p.n_seq);
    c->n_logits = n_logits;
done:
    if (next != next_stack) free(next);
    return s;
}

const float *vt_get_logits(vt_context *c, int32_t i) {
    if (i < 0 || i >= c->n_logits) return NULL;
    return c->logits + (size_t)i * (size_t)c->model->hp.n_vocab;
}

void vt_seq_clear(vt_context *c, int32_t seq) {
    if (seq < 0 || seq >= c->p.n_seq) return;
    for (int32_t g = 0; g < c->n_groups; g++)
        for (int64_t i = 0; c->kv.groups[g].spec.kind != KV_GROUP_STATE && i < c->n_blocks[seq]; i++)
            kv_pool_release(&c->kv.groups[g].pool,
                            c->tables[(g * c->p.n_seq + seq) * c->max_blocks_per_seq + i]);
    c->n_blocks[seq] = 0;
    c->len[seq] = 0;
}

vt_status vt_seq_keep(vt_context *c, int32_t seq, int32_t n) {
    if (seq < 0 || seq >= c->p.n_seq) return vt_errorf(VT_E_RANGE, "sequence %d out of range [0, %d)", seq, c->p.n_seq);
    if (n < 0 || n > c->len[seq])
        return vt_errorf(VT_E_RANGE, "sequence %d: cannot keep %d tokens of %d", seq, n, c->len[seq]);
    if (n == c->len[seq]) return VT_OK;
    if (n == 0) {
        vt_seq_clear(c, seq);
        return VT_OK;
    }
    for (int32_t g = 0; g < c->n_groups; g++)
        if (c->kv.groups[g].spec.kind == KV_GROUP_STATE)
            return vt_errorf(VT_E_UNSUPPORTED, "sequence %d: the model's recurrent state cannot go back to token %d",
                             seq, n);
    const int64_t keep = (n + c->p.kv_block - 1) / c->p.kv_block;
    for (int32_t g = 0; g < c->n_groups; g++)
        for (int64_t i = keep; i < c->n_blocks[seq]; i++)
            kv_pool_release(&c->kv.groups[g].pool, c->tables[(g * c->p.n_seq + seq) * c->max_blocks_per_seq + i]);
    c->n_blocks[seq] = keep;
    c->len[seq] = n;
    return VT_OK;
}

int32_t vt_seq_len(const vt_context *c, int32_t seq) {
    return seq >= 0 && seq < c->p.n_seq ? c->len[seq] : -1;
}
