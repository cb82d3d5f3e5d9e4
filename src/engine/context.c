/* vt_context: the low-level evaluation API of vt.h over the forward pass, with
 * a fixed share of the paged KV cache per sequence: n_ctx tokens of blocks in
 * every full-attention group. A sliding-window group releases the blocks its
 * window has passed (kv_release_passed, as the serving engine does) and its
 * pool holds only every sequence's window plus one pass
 * (kv_swa_pool_blocks): a batch runs in passes of up to n_batch tokens, each
 * cut short where a sliding-window pool has no block left, and before each
 * pass every sequence lets go of what the window of its next token no longer
 * sees. */
#include "engine/context.h"

#include "base/size.h"
#include "cpu/threadpool.h"
#include "kvcache/kv_cache.h"
#include "model/forward.h"

#include <stddef.h>
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
    int64_t *n_blocks; /* (n_seq) table length (the same in every attention group) */
    int64_t *n_released; /* (n_groups, n_seq) SWA: table entries [0, n) released */
    bool has_swa;        /* a group is KV_GROUP_SWA */
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
    free(c->n_released);
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
    VT_TRY(model_check_n_ctx(model, p.n_ctx)); /* never past the training context unscaled */
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
    for (int32_t g = 0; g < c->n_groups; g++) { /* a STATE group: one slot per sequence */
        const int64_t all = c->max_blocks_per_seq * p.n_seq;
        specs[g].n_blocks = specs[g].kind == KV_GROUP_STATE ? p.n_seq : all;
        if (specs[g].kind == KV_GROUP_SWA) {
            const int64_t w = kv_swa_pool_blocks(specs[g].window, p.kv_block, p.n_seq, p.n_batch);
            if (w < all) specs[g].n_blocks = w;
            c->has_swa = true;
        }
    }
    if (s == VT_OK)
        s = kv_cache_init_groups(&c->kv, tk, tv, hp->n_layer, hp->n_head_kv, hp->head_dim,
                                 p.kv_block, specs, c->n_groups, layer_group);
    free(layer_group);
    if (s != VT_OK) goto fail;
    if ((s = fwd_create(model, &c->kv, c->pool, p.n_batch, &c->fwd)) != VT_OK) goto fail;
    fwd_set_n_ctx(c->fwd, p.n_ctx);
    c->tables = malloc(sizeof(int32_t) * (size_t)(c->n_groups * c->max_blocks_per_seq * p.n_seq));
    c->n_blocks = calloc((size_t)p.n_seq, sizeof(int64_t));
    c->n_released = calloc((size_t)(c->n_groups * p.n_seq), sizeof(int64_t));
    c->len = calloc((size_t)p.n_seq, sizeof(int32_t));
    c->rows = malloc(sizeof(int32_t) * (size_t)p.n_batch);
    c->seqs = malloc(sizeof(fwd_seq) * (size_t)p.n_seq);
    if (!c->tables || !c->n_blocks || !c->n_released || !c->len || !c->rows || !c->seqs) {
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

static int32_t *table_of(const vt_context *c, int32_t g, int32_t q) {
    return c->tables + (g * c->p.n_seq + q) * c->max_blocks_per_seq;
}

/* Let go of the blocks of sequence q's SWA groups that the window of its token
 * at position next no longer reaches. */
static void release_passed(vt_context *c, int32_t q, int64_t next) {
    for (int32_t g = 0; g < c->n_groups; g++)
        kv_release_passed(&c->kv, g, table_of(c, g, q), c->n_blocks[q], &c->n_released[g * c->p.n_seq + q],
                          next, kv_release_to_pool, &c->kv);
}

/* One more block for sequence q in every attention group, or none (false) when a
 * pool has no free block (only a SWA pool can run out). */
static bool grow_one(vt_context *c, int32_t q) {
    if (c->n_blocks[q] >= c->max_blocks_per_seq) return false;
    for (int32_t g = 0; g < c->n_groups; g++)
        if (c->kv.groups[g].spec.kind != KV_GROUP_STATE && c->kv.groups[g].pool.n_free == 0) return false;
    for (int32_t g = 0; g < c->n_groups; g++) {
        if (c->kv.groups[g].spec.kind == KV_GROUP_STATE) continue;
        const int32_t blk = kv_pool_alloc(&c->kv.groups[g].pool);
        VT_ASSERT(blk >= 0);
        table_of(c, g, q)[c->n_blocks[q]] = blk;
    }
    c->n_blocks[q]++;
    return true;
}

/* Blocks of sequence q past the first len tokens' go back (a failed batch's). */
static void trim_blocks(vt_context *c, int32_t q, int64_t len) {
    const int64_t keep = (len + c->p.kv_block - 1) / c->p.kv_block;
    for (; c->n_blocks[q] > keep; c->n_blocks[q]--)
        for (int32_t g = 0; g < c->n_groups; g++)
            if (c->kv.groups[g].spec.kind != KV_GROUP_STATE)
                kv_pool_release(&c->kv.groups[g].pool, table_of(c, g, q)[c->n_blocks[q] - 1]);
}

vt_status vt_decode(vt_context *c, const vt_batch *b) {
    int32_t stack[128];
    const int32_t n_seq = c->p.n_seq;
    int32_t *next = n_seq <= 64 ? stack : malloc(sizeof(int32_t) * 2 * (size_t)n_seq);
    if (!next) return vt_errorf(VT_E_NOMEM, "out of memory");
    int32_t *done = next + n_seq; /* each sequence's length after the passes that ran */
    vt_status s = check_batch(c, b, next);
    if (s != VT_OK) goto out;
    memcpy(done, c->len, sizeof(int32_t) * (size_t)n_seq);

    int64_t n_logits = 0;
    for (int32_t i = 0; i < b->n_tokens; i++)
        n_logits += b->logits ? (b->logits[i] != 0) : (i == b->n_tokens - 1);
    const size_t nv = (size_t)c->model->hp.n_vocab;
    if (n_logits > c->cap_logits) {
        float *l = realloc(c->logits, (size_t)n_logits * nv * sizeof(float));
        if (!l) {
            s = vt_errorf(VT_E_NOMEM, "out of memory for %lld logit rows", (long long)n_logits);
            goto out;
        }
        c->logits = l;
        c->cap_logits = n_logits;
    }

    c->n_logits = 0; /* until this batch succeeds, vt_get_logits has nothing */
    /* Run in passes of up to n_batch tokens, in order. A full-attention group
     * has each sequence's share reserved; a SWA pool holds every sequence's
     * window and the block of its next token, so a pass always takes at least
     * one token. */
    int64_t out_row = 0;
    for (int32_t i0 = 0, n = 0; i0 < b->n_tokens; i0 += n) {
        for (int32_t q = 0; c->has_swa && q < n_seq; q++) release_passed(c, q, done[q]);
        int64_t nl = 0;
        for (n = 0; n < c->p.n_batch && i0 + n < b->n_tokens; n++) {
            const int32_t gi = i0 + n, q = b->seq[gi];
            if (b->pos[gi] / c->p.kv_block >= c->n_blocks[q] && !grow_one(c, q)) break;
            if (b->logits ? b->logits[gi] != 0 : gi == b->n_tokens - 1) c->rows[nl++] = n;
        }
        VT_ASSERT(n > 0);
        for (int32_t q = 0; q < n_seq; q++) {
            for (int32_t g = 0; g < c->n_groups; g++) c->seqs[q].blocks[g] = table_of(c, g, q);
            c->seqs[q].n_blocks = c->n_blocks[q];
            c->seqs[q].snap_pos = 0; /* no prefix-cache snapshots here */
        }
        fwd_batch fb = {.n_tokens = n, .token = b->token + i0, .pos = b->pos + i0,
                        .seq = b->seq + i0, .seqs = c->seqs, .n_seqs = n_seq,
                        .logit_rows = c->rows, .n_logits = nl,
                        .logits = c->logits + (size_t)out_row * nv};
        if ((s = fwd_run(c->fwd, &fb)) != VT_OK) goto fail;
        for (int64_t r = 0; r < nl; r++) {
            if (fwd_logits_finite(fb.logits + (size_t)r * nv, (int64_t)nv)) continue;
            /* never sampled from: the sequences keep their lengths (see fail) */
            const int32_t gi = i0 + c->rows[r];
            char step[160];
            snprintf(step, sizeof step, "decode of batch token %d (sequence %d, position %d)", gi, b->seq[gi],
                     b->pos[gi]);
            s = model_nonfinite_error(c->model, step);
            goto fail;
        }
        for (int32_t i = 0; i < n; i++) done[b->seq[i0 + i]] = b->pos[i0 + i] + 1;
        out_row += nl;
    }
    memcpy(c->len, next, sizeof(int32_t) * (size_t)n_seq);
    for (int32_t q = 0; c->has_swa && q < n_seq; q++) release_passed(c, q, c->len[q]);
    c->n_logits = n_logits;
    goto out;
fail:
    /* The cache as before the batch, but where a window has passed blocks in
     * an earlier pass: those are gone, so with SWA groups each sequence keeps
     * the passes that completed. Blocks past what a sequence keeps go back. */
    if (c->has_swa) memcpy(c->len, done, sizeof(int32_t) * (size_t)n_seq);
    for (int32_t q = 0; q < n_seq; q++) trim_blocks(c, q, c->len[q]);
out:
    if (next != stack) free(next);
    return s;
}

const float *vt_get_logits(vt_context *c, int32_t i) {
    if (i < 0 || i >= c->n_logits) return NULL;
    return c->logits + (size_t)i * (size_t)c->model->hp.n_vocab;
}

void vt_seq_clear(vt_context *c, int32_t seq) {
    if (seq < 0 || seq >= c->p.n_seq) return;
    for (int32_t g = 0; g < c->n_groups; g++) {
        int64_t *released = &c->n_released[g * c->p.n_seq + seq];
        for (int64_t i = *released; c->kv.groups[g].spec.kind != KV_GROUP_STATE && i < c->n_blocks[seq]; i++)
            kv_pool_release(&c->kv.groups[g].pool, table_of(c, g, seq)[i]);
        *released = 0;
    }
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
    /* a sliding-window group may have released blocks the window of token n
     * still needs: then there is no going back either */
    for (int32_t g = 0; g < c->n_groups; g++) {
        const kv_group_spec *sp = &c->kv.groups[g].spec;
        if (c->n_released[g * c->p.n_seq + seq] > kv_first_needed_block(sp->kind, sp->window, c->p.kv_block, n))
            return vt_errorf(VT_E_UNSUPPORTED,
                             "sequence %d: the sliding window has passed the blocks token %d needs", seq, n);
    }
    const int64_t keep = (n + c->p.kv_block - 1) / c->p.kv_block;
    for (int32_t g = 0; g < c->n_groups; g++)
        for (int64_t i = keep; i < c->n_blocks[seq]; i++)
            kv_pool_release(&c->kv.groups[g].pool, table_of(c, g, seq)[i]);
    c->n_blocks[seq] = keep;
    c->len[seq] = n;
    return VT_OK;
}
const kv_cache *context_kv(const vt_context *c) { return &c->kv; }

int32_t vt_seq_len(const vt_context *c, int32_t seq) {
    return seq >= 0 && seq < c->p.n_seq ? c->len[seq] : -1;
}

/* ---- a sequence's state (vt.h) -------------------------------------------------
 * The bytes: a seq_state_head, then per group in order the sequence's share of
 * it: a STATE group, each of its layers' slot (state_bytes); an attention group,
 * for each block the sequence still holds (table entries released .. n_blocks),
 * per layer of the group, per kv head, the head's K block then its V block
 * (kv_k_head / kv_v_row: block_size slots each, in the layout the attention
 * kernels read, which depends on the block size and dtypes only). Whole blocks
 * travel, the slots past the length included: they are never read. */

#define SEQ_STATE_MAGIC "VTSEQST1" /* the last character is the format's version */

typedef struct seq_state_head {
    char magic[8];
    /* the shape a state fits: the same model and cache layout (compared as a whole) */
    int64_t n_vocab, n_embd, n_layer, n_head_kv, head_dim, block_size, type_k, type_v, n_groups;
    int64_t kind[KV_MAX_GROUPS], window[KV_MAX_GROUPS], state_bytes[KV_MAX_GROUPS], group_layers[KV_MAX_GROUPS];
    /* the sequence */
    int64_t len, n_blocks, released[KV_MAX_GROUPS];
} seq_state_head;

static seq_state_head state_head_of(const vt_context *c, int32_t seq) {
    seq_state_head h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, SEQ_STATE_MAGIC, sizeof h.magic);
    const kv_cache *kv = &c->kv;
    h.n_vocab = c->model->hp.n_vocab;
    h.n_embd = c->model->hp.n_embd;
    h.n_layer = kv->n_layer;
    h.n_head_kv = kv->n_head_kv;
    h.head_dim = kv->head_dim;
    h.block_size = kv->block_size;
    h.type_k = kv->type_k;
    h.type_v = kv->type_v;
    h.n_groups = c->n_groups;
    for (int32_t g = 0; g < c->n_groups; g++) {
        const kv_group *G = &kv->groups[g];
        h.kind[g] = G->spec.kind;
        h.window[g] = G->spec.kind == KV_GROUP_SWA ? G->spec.window : 0;
        h.state_bytes[g] = G->spec.kind == KV_GROUP_STATE ? (int64_t)G->spec.state_bytes : 0;
        h.group_layers[g] = G->n_layer;
        h.released[g] = c->n_released[g * c->p.n_seq + seq];
    }
    h.len = c->len[seq];
    h.n_blocks = c->n_blocks[seq];
    return h;
}

/* Payload bytes of a state with head h (whose shape is this context's). */
static size_t state_payload(const vt_context *c, const seq_state_head *h) {
    const kv_cache *kv = &c->kv;
    size_t n = 0;
    for (int32_t g = 0; g < c->n_groups; g++) {
        const kv_group *G = &kv->groups[g];
        if (G->spec.kind == KV_GROUP_STATE) {
            n += (size_t)G->n_layer * G->spec.state_bytes;
        } else {
            const size_t per_block = (size_t)G->n_layer * (size_t)kv->n_head_kv * (size_t)kv->block_size *
                                     (kv->row_bytes_k + kv->row_bytes_v);
            n += (size_t)(h->n_blocks - h->released[g]) * per_block;
        }
    }
    return n;
}

/* Copy sequence seq's share of the cache out to `out`, or in from `in` (the
 * other one NULL), in the order of the bytes above. */
static void state_copy(const vt_context *c, int32_t seq, const seq_state_head *h, uint8_t *out, const uint8_t *in) {
    const kv_cache *kv = &c->kv;
    const size_t kb = (size_t)kv->block_size * kv->row_bytes_k, vb = (size_t)kv->block_size * kv->row_bytes_v;
#define STATE_COPY(cache, n)                                       \
    do {                                                           \
        if (out) memcpy(out, (cache), (n)), out += (n);            \
        else memcpy((cache), in, (n)), in += (n);                  \
    } while (0)
    for (int32_t g = 0; g < c->n_groups; g++) {
        const int32_t *table = table_of(c, g, seq);
        const bool state = kv->groups[g].spec.kind == KV_GROUP_STATE;
        for (int64_t i = state ? 0 : h->released[g]; i < (state ? 1 : h->n_blocks); i++) {
            for (int64_t il = 0; il < kv->n_layer; il++) {
                if (kv->layer_group[il] != g) continue;
                if (state) {
                    STATE_COPY(kv_state_slot(kv, il, table[0]), kv->groups[g].spec.state_bytes);
                    continue;
                }
                const kv_layer l = kv_layer_of(kv, il);
                for (int64_t hd = 0; hd < kv->n_head_kv; hd++) {
                    STATE_COPY(kv_k_head(&l, table[i], hd), kb);
                    STATE_COPY(kv_v_row(&l, table[i], hd, 0), vb);
                }
            }
        }
    }
#undef STATE_COPY
}

size_t vt_seq_state_size(const vt_context *c, int32_t seq) {
    if (seq < 0 || seq >= c->p.n_seq) return 0;
    const seq_state_head h = state_head_of(c, seq);
    return sizeof h + state_payload(c, &h);
}

vt_status vt_seq_state_get(const vt_context *c, int32_t seq, void *buf, size_t size) {
    if (seq < 0 || seq >= c->p.n_seq) return vt_errorf(VT_E_RANGE, "sequence %d out of range [0, %d)", seq, c->p.n_seq);
    const seq_state_head h = state_head_of(c, seq);
    const size_t need = sizeof h + state_payload(c, &h);
    if (!buf || size < need)
        return vt_errorf(VT_E_RANGE, "sequence %d: its state needs %zu bytes, the buffer has %zu", seq, need, size);
    memcpy(buf, &h, sizeof h);
    state_copy(c, seq, &h, (uint8_t *)buf + sizeof h, NULL);
    return VT_OK;
}

/* VT_OK where a state of head h fits this context's shape; else which field differs. */
static vt_status state_check_shape(const vt_context *c, const seq_state_head *h) {
    const seq_state_head mine = state_head_of(c, 0);
    static const struct {
        const char *name;
        size_t off;
    } field[] = {
        {"n_vocab", offsetof(seq_state_head, n_vocab)},       {"n_embd", offsetof(seq_state_head, n_embd)},
        {"n_layer", offsetof(seq_state_head, n_layer)},       {"n_head_kv", offsetof(seq_state_head, n_head_kv)},
        {"head_dim", offsetof(seq_state_head, head_dim)},     {"kv_block", offsetof(seq_state_head, block_size)},
        {"type_k", offsetof(seq_state_head, type_k)},         {"type_v", offsetof(seq_state_head, type_v)},
        {"cache groups", offsetof(seq_state_head, n_groups)},
    };
    for (size_t i = 0; i < sizeof field / sizeof field[0]; i++) {
        int64_t a, b;
        memcpy(&a, (const char *)h + field[i].off, sizeof a);
        memcpy(&b, (const char *)&mine + field[i].off, sizeof b);
        if (a != b)
            return vt_errorf(VT_E_INVALID, "the state is of another model or cache: its %s is %lld, this context's %lld",
                             field[i].name, (long long)a, (long long)b);
    }
    for (int32_t g = 0; g < c->n_groups; g++)
        if (h->kind[g] != mine.kind[g] || h->window[g] != mine.window[g] || h->state_bytes[g] != mine.state_bytes[g] ||
            h->group_layers[g] != mine.group_layers[g])
            return vt_errorf(VT_E_INVALID, "the state is of another model: its cache group %d differs from this context's",
                             g);
    return VT_OK;
}

vt_status vt_seq_state_set(vt_context *c, int32_t seq, const void *buf, size_t size) {
    if (seq < 0 || seq >= c->p.n_seq) return vt_errorf(VT_E_RANGE, "sequence %d out of range [0, %d)", seq, c->p.n_seq);
    seq_state_head h;
    if (!buf || size < sizeof h || memcmp(buf, SEQ_STATE_MAGIC, sizeof h.magic) != 0)
        return vt_errorf(VT_E_FORMAT, "not a vt sequence state (%zu bytes, no \"%s\" header)", size, SEQ_STATE_MAGIC);
    memcpy(&h, buf, sizeof h);
    VT_TRY(state_check_shape(c, &h));
    /* the sequence: a length this context holds, a table that covers it, and in
     * a sliding-window group nothing released that the next token's window reads */
    const int64_t bs = c->p.kv_block;
    if (h.len < 0 || h.len > c->p.n_ctx || h.n_blocks < (h.len + bs - 1) / bs || h.n_blocks > c->max_blocks_per_seq)
        return vt_errorf(VT_E_FORMAT, "sequence state: length %lld in %lld blocks does not fit a context of %d tokens",
                         (long long)h.len, (long long)h.n_blocks, c->p.n_ctx);
    for (int32_t g = 0; g < c->n_groups; g++) {
        const kv_group_spec *sp = &c->kv.groups[g].spec;
        const int64_t first = kv_first_needed_block(sp->kind, sp->window, bs, h.len);
        if (h.released[g] < 0 || h.released[g] > first)
            return vt_errorf(VT_E_FORMAT, "sequence state: cache group %d released %lld blocks of %lld", g,
                             (long long)h.released[g], (long long)h.n_blocks);
    }
    const size_t need = sizeof h + state_payload(c, &h);
    if (size != need)
        return vt_errorf(VT_E_FORMAT, "sequence state: %zu bytes where its header says %zu", size, need);
    /* room: what the sequence holds now comes back before the state's blocks are taken */
    for (int32_t g = 0; g < c->n_groups; g++) {
        const kv_pool *pool = &c->kv.groups[g].pool;
        if (c->kv.groups[g].spec.kind == KV_GROUP_STATE) continue;
        const int64_t held = c->n_blocks[seq] - c->n_released[g * c->p.n_seq + seq];
        if (h.n_blocks - h.released[g] > pool->n_free + held)
            return vt_errorf(VT_E_NOMEM, "sequence %d: the state needs %lld blocks of cache group %d, %lld are free",
                             seq, (long long)(h.n_blocks - h.released[g]), g, (long long)(pool->n_free + held));
    }
    vt_seq_clear(c, seq);
    for (int32_t g = 0; g < c->n_groups; g++) {
        if (c->kv.groups[g].spec.kind == KV_GROUP_STATE) continue;
        int32_t *table = table_of(c, g, seq);
        for (int64_t i = 0; i < h.n_blocks; i++) table[i] = i < h.released[g] ? -1 : kv_pool_alloc(&c->kv.groups[g].pool);
        c->n_released[g * c->p.n_seq + seq] = h.released[g];
    }
    c->n_blocks[seq] = h.n_blocks;
    c->len[seq] = (int32_t)h.len;
    state_copy(c, seq, &h, NULL, (const uint8_t *)buf + sizeof h);
    return VT_OK;
}
