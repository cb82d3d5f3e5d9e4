#include "model/forward.h"

#include "cpu/attention.h"
#include "base/hugemem.h"
#include "base/log.h"
#include "base/size.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "model/moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A pass whose work (mean layer weight bytes x tokens) is below this runs on
 * the calling thread alone: its 9 barriers per layer and the cache lines that
 * cross cores cost more than a second thread saves. stories260K (about 200 KiB
 * a layer) decodes at 15.0k tokens/s on 2 threads and 26.2k on 1, and
 * prefills 128 tokens faster on 2 (37.6k against 27.6k tokens/s): both sides
 * of the line (Zen 5 VM). VT_SOLO_KIB overrides it; 0 always uses every
 * thread. Results do not depend on the choice (bit-identical across thread
 * counts). */
#define FWD_SOLO_KIB_DEFAULT 2048

typedef struct attn_group {
    int32_t t0, n_tok, n_chunks;
} attn_group;
typedef struct attn_item {
    int32_t group, chunk;
} attn_item;
/* The attention items of the layers with one window (0: full attention): an item
 * is a (group, chunk) for every chunk from the first the group's first token sees
 * with that window. cost_off: prefix sums of the items' costs, for a split that
 * gives each thread the same work, not the same count. */
typedef struct attn_plan {
    int64_t window;
    attn_item *items;
    int64_t *cost_off; /* (n_items + 1) */
    int64_t n_items, items_cap;
} attn_plan;

/* Built with -DVT_FWD_PROFILE, thread 0 times each step of every pass (with the
 * barrier that ends it) and fwd_destroy prints the sums per token to stderr,
 * passes of one token (decode) apart from the others: where a pass's time
 * goes, by step. Steps: 0 embed, 1-9 as numbered in forward_worker (summed
 * over layers), 10 the logits. */
#define FWD_PROF_STEPS 11
#ifdef VT_FWD_PROFILE
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
#define PROF_MARK(f, ith, step, t_prev)                                     \
    do {                                                                    \
        if ((ith) == 0) {                                                   \
            const double now_ = now_s();                                    \
            (f)->prof_s[(f)->batch->n_tokens > 1][step] += now_ - (t_prev); \
            (t_prev) = now_;                                                \
        }                                                                   \
    } while (0)
#define PROF_START(ith) ((ith) == 0 ? now_s() : 0)
#else
#define PROF_MARK(f, ith, step, t_prev) ((void)(t_prev))
#define PROF_START(ith) 0.0
#endif

struct fwd_ctx {
    const model *m;
    kv_cache *kv;
    kv_layer *lv;    /* (n_layer) each layer's storage in the cache */
    tp_pool *pool;   /* all threads; a pass runs on tp_run_threads(pool) of them */
    tp_elastic elastic; /* how many of pool's threads a decode pass runs on (threadpool.h) */
    size_t layer_bytes; /* weight bytes of the mean layer */
    size_t solo_bytes;  /* layer_bytes x tokens below which a pass runs on the caller alone
                           (0: never) */
    int64_t max_tokens;
    const attn_kv_ops *kops, *vops;
    void (*rms_norm)(const float *x, const float *w, int64_t n, float eps, float *out);
    void (*ffn_act_mul)(float *g, const float *u, int64_t n); /* the dense FFN's act(g) * u */

    void *work;    /* the mapping the buffers below are carved from */
    size_t work_bytes;
    float *x;      /* (T, n_embd) residual stream */
    float *tmp;    /* (T, n_embd) output of the attention / FFN projections */
    float *q;      /* (T, n_head * head_dim) */
    float *k, *v;  /* (T, n_head_kv * head_dim) */
    float *attn;   /* (T, n_head * head_dim) */
    float *gate;   /* (T, n_head * head_dim) muse-glimmer's attention gate logits, or NULL */
    float *rope;   /* (T, n_rot) cos, sin pairs */
    float *rope_swa; /* (T, n_rot) the same with the sliding layers' base and scale, or NULL: rope */
    const float *rope_factors; /* (n_rot / 2) the frequency factors: llama3's, or phi3's LongRoPE
                                  short / long ones for this context (fwd_set_n_ctx), or NULL */
    float *norm;   /* (nth_max, max(n_embd, head_dim)) per-thread row scratch */
    uint8_t *xq;   /* (T, act_row_max) quantized activations */
    uint8_t *hq;   /* (T, act_row_max) SiLU(gate) * up quantized for the down projection */
    size_t act_row_max;
    float *parts;  /* attention partials (hugemem) */
    size_t parts_cap; /* floats */
    int64_t *chunk_off; /* (T + 1) prefix sums of chunks per token */
    /* Attention items: a group is a run of tokens of one sequence at consecutive
     * positions inside one chunk (they share their chunk count); an item is a
     * (group, chunk), done for every kv head, planned once per pass for each
     * distinct window of the layers (layer il uses plans[layer_plan[il]]). */
    attn_group *groups; /* (T) */
    attn_plan plans[KV_MAX_GROUPS];
    int n_plans;
    int8_t *layer_plan; /* (n_layer) */
    int nth_max;

    /* Mixture of experts (model.h), rebuilt per layer: the tokens each expert
     * was chosen by, as "grouped rows" (an expert's tokens in order, experts in
     * index order), and the (expert, slice) work items of the gate/up and down
     * steps, which threads claim one at a time. */
    tp_pool *one;      /* a pool of one: mm_* calls that compute a whole weight on the calling thread */
    float *router;     /* (T, n_expert) router logits */
    int32_t *sel;      /* (T, n_expert_used) chosen experts per token, best first */
    float *sel_w;      /* (T, n_expert_used) their renormalised weights */
    int32_t *slot;     /* (T, n_expert_used) grouped row of each choice */
    int32_t *row_tok;  /* (T * n_expert_used) token of each grouped row */
    int64_t *exp_off;  /* (n_expert + 1) first grouped row of each expert */
    int32_t *exp_fill; /* (n_expert) scratch while grouping */
    int32_t *exp_order; /* (n_expert) experts with tokens, the most tokens first */
    int64_t n_active;  /* experts with tokens in this layer */
    bool gather;       /* some expert has several tokens: xe holds the grouped rows */
    uint8_t *xe;       /* (T * n_expert_used, act_row_max) grouped input rows */
    uint8_t *he;       /* (T * n_expert_used, he_stride) quantized SiLU(gate) * up, grouped */
    size_t he_stride;  /* room per row of he: the widest layer's mm_act_row_bytes(down type, n_ff_exp) */
    uint8_t *hs;       /* (nth_max, T * hs_stride) per-thread rows of one gate/up slice */
    size_t hs_stride;
    float *gu;         /* (nth_max, 2, T, moe_ff_slice) per-thread gate and up of one slice
                          (experts with biases or another activation: layer_kind's moe_split), or NULL */
    float *ye;         /* (T * n_expert_used, n_embd) expert outputs, grouped */
    float *shg;        /* (T) sigmoid of the shared expert's gate per token (n_ff_shexp > 0), or NULL */
    q35_fwd *hy;       /* qwen35's linear layers and gated attention (model/qwen35.h), or NULL */

    fwd_stats st;       /* fwd_stats_get; moe_ffn's thread 0 adds each MoE layer's experts */
    size_t trunk_bytes; /* weights every pass reads: all but the experts, the embedding table, the head */
    size_t head_bytes;  /* the output head (the embedding table where tied) */

    const fwd_batch *batch; /* the batch being run */
#ifdef VT_FWD_PROFILE
    double prof_s[2][FWD_PROF_STEPS]; /* thread 0's seconds per step: decode, others */
    int64_t prof_tokens[2], prof_passes[2];
#endif
};

int fwd_barriers_per_layer(void) { return 9; }

void fwd_stats_get(const fwd_ctx *f, fwd_stats *out) { *out = f->st; }

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }


/* The piece of `bytes` at *off from base (NULL while only sizing), and *off
 * past it, to the next cache line. */
static void *carve(uint8_t *base, size_t *off, size_t bytes) {
    void *p = base ? base + *off : NULL;
    *off += size_align_up(bytes, 64);
    return p;
}

/* Software prefetch or not for decode, weight by weight (cpu/matmul.h): the
 * model's first context probes its matrices on its pool. */
static void choose_prefetch(const model *m, tp_pool *pool) {
    const int64_t n = model_matrices((model *)m, NULL);
    mm_weight **ws = malloc(sizeof *ws * (size_t)n);
    if (!ws) return; /* the weights keep software prefetch */
    model_matrices((model *)m, ws);
    mm_probe_prefetch((const mm_weight *const *)ws, n, pool);
    free(ws);
}

vt_status fwd_kv_groups(const model *m, kv_group_spec specs[KV_MAX_GROUPS],
                        int32_t *layer_group, int32_t *n_groups) {
    const int64_t n_layer = m->hp.n_layer;
    int64_t *w = malloc(sizeof(int64_t) * (size_t)n_layer);
    int32_t *lg = malloc(sizeof(int32_t) * (size_t)n_layer);
    if (!w || !lg) {
        free(w), free(lg);
        return vt_errorf(VT_E_NOMEM, "out of memory");
    }
    /* the attention layers' groups; the linear layers of a hybrid share one STATE group */
    int64_t n_attn = 0;
    for (int64_t il = 0; il < n_layer; il++)
        if (!m->layers[il].lin) w[n_attn++] = m->layers[il].attn.window;
    vt_status s = n_attn > 0 ? kv_groups_from_windows(n_attn, w, specs, lg, n_groups) : VT_OK;
    if (n_attn == 0) *n_groups = 0;
    if (s == VT_OK && n_attn < n_layer && *n_groups == KV_MAX_GROUPS)
        s = vt_errorf(VT_E_UNSUPPORTED, "the layers need more than %d KV cache groups", KV_MAX_GROUPS);
    if (s == VT_OK) {
        const int32_t state_group = *n_groups;
        for (int64_t il = 0, ia = 0; il < n_layer; il++)
            layer_group[il] = m->layers[il].lin ? state_group : lg[ia++];
        if (n_attn < n_layer)
            specs[(*n_groups)++] = (kv_group_spec){.kind = KV_GROUP_STATE, .state_bytes = q35_state_bytes(m->q35)};
    }
    free(w), free(lg);
    return s;
}

int fwd_hw_prefetch_types(const model *m) {
    const int64_t n = model_matrices((model *)m, NULL);
    mm_weight **ws = malloc(sizeof *ws * (size_t)n);
    if (!ws) return 0;
    model_matrices((model *)m, ws);
    bool hw[VT_DTYPE_COUNT] = {false};
    int count = 0;
    for (int64_t i = 0; i < n; i++)
        if (!mm_weight_prefetch(ws[i]) && !hw[ws[i]->type]) hw[ws[i]->type] = true, count++;
    free(ws);
    return count;
}

vt_status fwd_create(const model *m, kv_cache *kv, tp_pool *pool, int64_t max_tokens,
                     fwd_ctx **out) {
    const model_hparams *hp = &m->hp;
    fwd_ctx *f = calloc(1, sizeof *f);
    if (!f) return vt_errorf(VT_E_NOMEM, "out of memory");
    f->m = m;
    f->kv = kv;
    f->pool = pool;
    f->lv = malloc(sizeof *f->lv * (size_t)hp->n_layer);
    f->layer_plan = malloc((size_t)hp->n_layer);
    if (!f->lv || !f->layer_plan) {
        fwd_destroy(f);
        return vt_errorf(VT_E_NOMEM, "out of memory");
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const int64_t w = m->layers[il].attn.window;
        const kv_group_spec *gs = &kv->groups[kv->layer_group[il]].spec;
        if (m->layers[il].lin) { /* a linear layer keeps one state slot per sequence */
            if (gs->kind != KV_GROUP_STATE || gs->state_bytes != q35_state_bytes(m->q35)) {
                fwd_destroy(f);
                return vt_errorf(VT_E_INVALID, "layer %lld is linear attention; its KV cache group is not its state",
                                 (long long)il);
            }
            f->layer_plan[il] = 0;
            continue;
        }
        if (w < 0 || gs->kind == KV_GROUP_STATE ||
            (gs->kind == KV_GROUP_SWA && (w == 0 || w > gs->window))) {
            fwd_destroy(f);
            return vt_errorf(VT_E_INVALID,
                             "layer %lld attends over a window of %lld positions (0: all); its KV cache "
                             "group is %s of %lld",
                             (long long)il, (long long)w,
                             gs->kind == KV_GROUP_STATE ? "a state group" : "a window",
                             gs->kind == KV_GROUP_SWA ? (long long)gs->window : 0LL);
        }
        f->lv[il] = kv_layer_of(kv, il);
        int p = 0;
        while (p < f->n_plans && f->plans[p].window != w) p++;
        if (p == f->n_plans) {
            if (f->n_plans == KV_MAX_GROUPS) {
                fwd_destroy(f);
                return vt_errorf(VT_E_UNSUPPORTED, "the layers have more than %d distinct windows",
                                 KV_MAX_GROUPS);
            }
            f->plans[f->n_plans++].window = w;
        }
        f->layer_plan[il] = (int8_t)p;
    }
    f->max_tokens = max_tokens;
    f->rope_factors = m->rope_freqs ? m->rope_freqs : m->rope_short;
    f->kops = attn_ops_get(kv->type_k);
    f->rms_norm = cpu_kernels_get()->rms_norm;
    f->ffn_act_mul = hp->ffn_act == MODEL_FFN_GELU ? cpu_kernels_get()->gelu_mul : cpu_kernels_get()->silu_mul;
    f->vops = attn_ops_get(kv->type_v);
    f->nth_max = tp_n_threads(pool);
    /* Which threads compute what never changes a bit of the results (the
     * kernels, attention items and MoE items: test_matmul, test_model and
     * test_moe at 1, 2 and 3 threads), so the count may change between any two
     * passes, mid-sequence too. */
    tp_elastic_init(&f->elastic, f->nth_max, tp_n_cpus(pool), tp_elastic_env());
    size_t lb = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const layer_weights *Li = &m->layers[il];
        const mm_weight *ws[] = {&Li->wq, &Li->wk, &Li->wv, &Li->wo, &Li->w_gate, &Li->w_up, &Li->w_down, &Li->router};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) lb += ws[i]->row_bytes * (size_t)ws[i]->n_out;
        const mm_weight *sh[] = {&Li->shexp_gate, &Li->shexp_up, &Li->shexp_down};
        for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) lb += sh[i]->row_bytes * (size_t)sh[i]->n_out;
        if (Li->lin) {
            mm_weight *lw[5];
            for (int64_t i = 0, n = q35_layer_order(Li->lin, lw); i < n; i++) lb += lw[i]->row_bytes * (size_t)lw[i]->n_out;
        }
    }
    /* the experts a token reads */
    if (hp->n_expert > 0 && hp->n_layer > 0) {
        const layer_weights *L0 = &m->layers[0];
        lb += (size_t)(hp->n_layer * hp->n_expert_used) *
              ((L0->exp_gate[0].row_bytes + L0->exp_up[0].row_bytes) * (size_t)hp->n_ff_exp +
               L0->exp_down[0].row_bytes * (size_t)hp->n_embd);
    }
    f->layer_bytes = hp->n_layer > 0 ? lb / (size_t)hp->n_layer : 0;
    const size_t table = m->embd_row_bytes * (size_t)hp->n_vocab;
    const bool tied = m->output.data == m->embd;
    f->head_bytes = tied ? table : m->output.row_bytes * (size_t)m->output.n_out;
    const size_t not_trunk = m->expert_bytes + table + (tied ? 0 : f->head_bytes);
    f->trunk_bytes = m->weight_bytes > not_trunk ? m->weight_bytes - not_trunk : 0;
    f->solo_bytes = (size_t)FWD_SOLO_KIB_DEFAULT << 10;
    const char *env = getenv("VT_SOLO_KIB");
    if (env && *env) {
        const long kib = strtol(env, NULL, 10);
        if (kib >= 0 && kib <= (1L << 30)) f->solo_bytes = (size_t)kib << 10;
    }
    const size_t T = (size_t)max_tokens, d = (size_t)hp->n_embd,
                 qd = (size_t)(hp->n_head * hp->head_dim), kvd = (size_t)(hp->n_head_kv * hp->head_dim);
    const layer_weights *L = &m->layers[0];
    size_t act = mm_act_row_bytes(L->wq.type, hp->n_embd), he = 0, hs = 0;
    bool split = false;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        L = &m->layers[il];
        act = max_sz(act, mm_act_row_bytes(L->wq.type, hp->n_embd));
        act = max_sz(act, mm_act_row_bytes(L->wo.type, (int64_t)qd));
        if (hp->n_expert == 0) {
            act = max_sz(act, mm_act_row_bytes(L->w_gate.type, hp->n_embd));
            act = max_sz(act, mm_act_row_bytes(L->w_down.type, hp->n_ff));
        } else {
            act = max_sz(act, mm_act_row_bytes(L->router.type, hp->n_embd));
            act = max_sz(act, mm_act_row_bytes(L->exp_gate[0].type, hp->n_embd));
            he = max_sz(he, mm_act_row_bytes(L->exp_down[0].type, hp->n_ff_exp));
            hs = max_sz(hs, mm_act_row_bytes(L->exp_down[0].type, m->moe_ff_slice));
            split = split || L->kind.moe_split;
            if (hp->n_ff_shexp > 0) {
                act = max_sz(act, mm_act_row_bytes(L->shexp_gate.type, hp->n_embd));
                act = max_sz(act, mm_act_row_bytes(L->shexp_down.type, hp->n_ff_shexp));
            }
        }
    }
    if (m->q35) {
        const vt_status st = q35_fwd_create(m, max_tokens, f->nth_max, &f->hy);
        if (st != VT_OK) {
            fwd_destroy(f);
            return st;
        }
        act = max_sz(act, f->hy->act_bytes);
    }
    f->he_stride = size_align_up(he, 64);
    f->hs_stride = size_align_up(hs, 64);
    const size_t TK = T * (size_t)hp->n_expert_used; /* grouped rows */
    act = max_sz(act, mm_act_row_bytes(m->output.type, hp->n_embd));
    f->act_row_max = size_align_up(act, 64);
    bool gate_matrix = false, rope_swa = false; /* some layer's attn_gate; rope with the sliding base */
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const layer_kind *K = &m->layers[il].kind;
        gate_matrix = gate_matrix || (K->mixer == LAYER_MIXER_ATTN && K->gate == LAYER_GATE_MATRIX);
        rope_swa = rope_swa || (K->mixer == LAYER_MIXER_ATTN && K->rope == LAYER_ROPE_SWA);
    }
    /* The activations: one mapping in huge pages (base/hugemem.h), carved in
     * cache-line-aligned pieces. The first pass sizes it (no base yet), the
     * second hands out the pieces. */
    for (int pass = 0; pass < 2; pass++) {
        uint8_t *base = f->work;
        size_t off = 0;
        f->x = carve(base, &off, T * d * sizeof(float));
        f->tmp = carve(base, &off, T * d * sizeof(float));
        f->q = carve(base, &off, T * qd * sizeof(float));
        f->k = carve(base, &off, T * kvd * sizeof(float));
        f->v = carve(base, &off, T * kvd * sizeof(float));
        f->attn = carve(base, &off, T * qd * sizeof(float));
        f->gate = gate_matrix ? carve(base, &off, T * qd * sizeof(float)) : NULL;
        f->rope = carve(base, &off, T * (size_t)hp->n_rot * sizeof(float));
        f->rope_swa = rope_swa ? carve(base, &off, T * (size_t)hp->n_rot * sizeof(float)) : NULL;
        f->norm = carve(base, &off, (size_t)f->nth_max * max_sz(d, (size_t)hp->head_dim) * sizeof(float));
        f->xq = carve(base, &off, T * f->act_row_max);
        f->hq = carve(base, &off, T * f->act_row_max);
        f->xe = carve(base, &off, TK * f->act_row_max);
        f->he = carve(base, &off, TK * f->he_stride);
        f->hs = carve(base, &off, (size_t)f->nth_max * T * f->hs_stride);
        f->ye = carve(base, &off, TK * d * sizeof(float));
        f->gu = split ? carve(base, &off, (size_t)f->nth_max * 2 * T * (size_t)m->moe_ff_slice * sizeof(float))
                      : NULL;
        if (pass == 0 && !(f->work = hugemem_alloc(off))) break;
        f->work_bytes = off;
    }
    f->chunk_off = malloc((T + 1) * sizeof(int64_t));
    f->groups = malloc(T * sizeof(attn_group));
    bool moe_ok = true;
    if (hp->n_expert > 0) {
        const size_t ne = (size_t)hp->n_expert;
        f->router = malloc(T * ne * sizeof(float));
        f->sel = malloc(TK * sizeof(int32_t));
        f->sel_w = malloc(TK * sizeof(float));
        f->slot = malloc(TK * sizeof(int32_t));
        f->row_tok = malloc(TK * sizeof(int32_t));
        f->exp_off = malloc((ne + 1) * sizeof(int64_t));
        f->exp_fill = malloc(ne * sizeof(int32_t));
        f->exp_order = malloc(ne * sizeof(int32_t));
        f->shg = hp->n_ff_shexp > 0 ? malloc(T * sizeof(float)) : NULL;
        moe_ok = f->router && f->sel && f->sel_w && f->slot && f->row_tok && f->exp_off && f->exp_fill &&
                 f->exp_order && (f->shg || hp->n_ff_shexp == 0) && tp_create(1, &f->one) == VT_OK;
    }
    if (!f->work || !f->chunk_off || !f->groups || !moe_ok) {
        fwd_destroy(f);
        return vt_errorf(VT_E_NOMEM, "out of memory for a %lld-token batch workspace",
                         (long long)max_tokens);
    }
    choose_prefetch(m, pool);
    *out = f;
    return VT_OK;
}

void fwd_destroy(fwd_ctx *f) {
    if (!f) return;
#ifdef VT_FWD_PROFILE
    for (int kind = 0; kind < 2; kind++) {
        if (f->prof_tokens[kind] == 0) continue;
        const double per = 1e6 / (double)f->prof_tokens[kind];
        double sum = 0;
        fprintf(stderr, "fwd profile, %s: %lld passes, %lld tokens, us/token by step:",
                kind ? "batches" : "decode", (long long)f->prof_passes[kind],
                (long long)f->prof_tokens[kind]);
        for (int k = 0; k < FWD_PROF_STEPS; k++) {
            fprintf(stderr, " %d:%.1f", k, f->prof_s[kind][k] * per);
            sum += f->prof_s[kind][k];
        }
        fprintf(stderr, " all:%.1f\n", sum * per);
    }
#endif
    tp_destroy(f->one);
    q35_fwd_destroy(f->hy);
    free(f->router);
    free(f->sel);
    free(f->sel_w);
    free(f->slot);
    free(f->row_tok);
    free(f->exp_off);
    free(f->exp_fill);
    free(f->exp_order);
    free(f->shg);
    hugemem_free(f->work, f->work_bytes);
    hugemem_free(f->parts, f->parts_cap * sizeof(float));
    free(f->chunk_off);
    free(f->groups);
    for (int p = 0; p < f->n_plans; p++) {
        free(f->plans[p].items);
        free(f->plans[p].cost_off);
    }
    free(f->lv);
    free(f->layer_plan);
    free(f);
}

/* ---- small fused ops ------------------------------------------------------------ */

static void rope_apply(float *x, const float *cs, int64_t n_rot, model_rope mode) {
    const int64_t half = n_rot / 2;
    if (mode == MODEL_ROPE_NORM) {
        for (int64_t i = 0; i < half; i++) {
            const float c = cs[2 * i], s = cs[2 * i + 1];
            const float x0 = x[2 * i], x1 = x[2 * i + 1];
            x[2 * i] = x0 * c - x1 * s;
            x[2 * i + 1] = x0 * s + x1 * c;
        }
    } else {
        for (int64_t i = 0; i < half; i++) {
            const float c = cs[2 * i], s = cs[2 * i + 1];
            const float x0 = x[i], x1 = x[i + half];
            x[i] = x0 * c - x1 * s;
            x[i + half] = x0 * s + x1 * c;
        }
    }
}

/* cos/sin of each rotated pair for position pos, computed the way ggml does
 * (the angle advanced by repeated multiplication) so both engines agree; swa:
 * with the sliding-window layers' base, scale, YaRN ramp, mix and magnitude. */
static void rope_table(const model_hparams *hp, const float *freq_factors, bool swa, int32_t pos, float *cs) {
    const float freq_base = swa ? hp->rope_freq_base_swa : hp->rope_freq_base;
    const float freq_scale = swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale;
    const float ms = swa ? hp->rope_mscale_swa : hp->rope_mscale;
    const float low = swa ? hp->yarn_low_swa : hp->yarn_low, high = swa ? hp->yarn_high_swa : hp->yarn_high;
    const float ext = swa ? hp->yarn_ext_swa : hp->yarn_ext;
    const float theta_scale = powf(freq_base, -2.0f / (float)hp->n_rot);
    float theta = (float)pos;
    for (int64_t i = 0; i < hp->n_rot / 2; i++) {
        const float ff = freq_factors ? freq_factors[i] : 1.0f;
        const float extrap = theta / ff;
        float t = freq_scale * extrap;
        if (ext != 0.0f) { /* ggml's rope_yarn: the ramp times ext_factor */
            const float y = ((float)i - low) / fmaxf(0.001f, high - low);
            const float ramp = (1 - fminf(1, fmaxf(0, y))) * ext;
            t = t * (1 - ramp) + extrap * ramp;
        }
        cs[2 * i] = cosf(t) * ms;
        cs[2 * i + 1] = sinf(t) * ms;
        theta *= theta_scale;
    }
}

/* ---- the pass ------------------------------------------------------------------------ */

static inline int64_t n_chunks_for(int32_t pos) { return (pos + ATTN_CHUNK) / ATTN_CHUNK; }

/* Partials, in units of one partial: kv head g major, then tokens (their first
 * chunk at chunk_off), then the n_rep heads of g, then the token's nch chunks.
 * So the chunks that combine merges are adjacent, and the rows of one item
 * (tokens of a group x heads) are evenly spaced. C: chunks in the batch. */
static inline int64_t part_row(int64_t C, int64_t chunk_off, int64_t g, int64_t r, int64_t n_rep,
                               int64_t nch) {
    return (g * C + chunk_off) * n_rep + r * nch;
}

/* Thread ith's units [u0, u1) of n_kv x n_items, unit u = (kv head u / n_items,
 * item u % n_items) costing that item's cost: the units whose cost-ordered start
 * falls in the thread's share of the total. Head-major, so a thread's run of
 * units reads one kv head's K and V for all its items while they are in cache
 * (item-major order cycled through every head's K and V per item). Which thread
 * runs a unit never changes its result, only when it finishes. */
static void split_by_cost(const int64_t *cost_off, int64_t n_items, int64_t n_kv, int ith, int nth,
                          int64_t *u0, int64_t *u1) {
    const int64_t n_units = n_items * n_kv, per_head = cost_off[n_items], total = per_head * n_kv;
    int64_t bound[2];
    for (int e = 0; e < 2; e++) {
        const int64_t x = total / nth * (ith + e) + total % nth * (ith + e) / nth;
        int64_t lo = 0, hi = n_units; /* first unit whose start >= x */
        while (lo < hi) {
            const int64_t u = lo + (hi - lo) / 2;
            const int64_t start = (u / n_items) * per_head + cost_off[u % n_items];
            if (start < x)
                lo = u + 1;
            else
                hi = u;
        }
        bound[e] = lo;
    }
    *u0 = bound[0];
    *u1 = ith == nth - 1 ? n_units : bound[1];
}

/* The MoE output of token t, sum over its choices j (best first) of
 * sel_w[t, j] * ye[slot[t, j]], into out (n_embd): each product rounded, then
 * added in that order, as llama.cpp's build_moe_ffn (ggml_mul, then ggml_add of
 * the views in order). */
static void moe_combine(const fwd_ctx *f, int64_t t, float *out) {
    const int64_t d = f->m->hp.n_embd, k = f->m->hp.n_expert_used;
    const float w0 = f->sel_w[t * k];
    const float *y0 = f->ye + (size_t)f->slot[t * k] * (size_t)d;
    for (int64_t i = 0; i < d; i++) out[i] = w0 * y0[i];
    for (int64_t j = 1; j < k; j++) {
        const float w = f->sel_w[t * k + j];
        const float *y = f->ye + (size_t)f->slot[t * k + j] * (size_t)d;
        for (int64_t i = 0; i < d; i++) {
            const float p = w * y[i];
            out[i] += p;
        }
    }
}

/* Residual add of a sublayer's output as `add` says (layer_kind.h: tmp
 * RMS-normed with post first (gemma), scaled by the residual scale (granite),
 * plus tmp_b (n_embd) (gpt-oss's attention output bias, added to tmp first as
 * llama.cpp's build_attn); or the last layer's experts, and its shared expert
 * from tmp), RMSNorm with w (none where w is NULL), quantize for weights of
 * w_type (and, where xq2 is not NULL, also for weights of type2 into xq2):
 * token rows split among threads. Rows listed in `rows` (NULL: all T) go to xq
 * row i. */
static void step_norm_quant(fwd_ctx *f, int64_t T, layer_out add, const float *post, const float *tmp_b,
                            const float *w, vt_dtype w_type, vt_dtype type2, uint8_t *xq2, const int32_t *rows,
                            int ith, int nth) {
    const model_hparams *hp = &f->m->hp;
    const int64_t d = hp->n_embd;
    const size_t rb = mm_act_row_bytes(w_type, d), rb2 = xq2 ? mm_act_row_bytes(type2, d) : 0;
    float *scratch = f->norm + (size_t)ith * (size_t)(d > hp->head_dim ? d : hp->head_dim);
    int64_t i0, i1;
    tp_range(T, 1, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t t = rows ? rows[i] : i;
        float *x = f->x + t * d;
        switch (add) {
        case LAYER_OUT_NONE:
            break;
        case LAYER_OUT_POST_NORM: /* gemma: the sublayer's output normed first */
            f->rms_norm(f->tmp + t * d, post, d, hp->post_norm_eps, scratch);
            for (int64_t j = 0; j < d; j++) x[j] += scratch[j];
            break;
        case LAYER_OUT_SCALED: { /* granite */
            const float rs = hp->residual_scale;
            for (int64_t j = 0; j < d; j++) x[j] += f->tmp[t * d + j] * rs;
            break;
        }
        case LAYER_OUT_BIAS: /* gpt-oss */
            for (int64_t j = 0; j < d; j++) {
                const float o = f->tmp[t * d + j] + tmp_b[j];
                x[j] += o;
            }
            break;
        case LAYER_OUT_ADD:
            for (int64_t j = 0; j < d; j++) x[j] += f->tmp[t * d + j];
            break;
        case LAYER_OUT_MOE:
        case LAYER_OUT_MOE_SHARED:
            moe_combine(f, t, scratch);
            if (add == LAYER_OUT_MOE_SHARED) { /* qwen35moe: plus the shared expert (in tmp) times its gate */
                const float g = f->shg[t];
                for (int64_t j = 0; j < d; j++) {
                    const float p = f->tmp[t * d + j] * g;
                    scratch[j] += p;
                }
            }
            for (int64_t j = 0; j < d; j++) x[j] += scratch[j];
            break;
        }
        const float *src = x; /* no norm before the sublayer (olmo2) */
        if (w) {
            f->rms_norm(x, w, d, hp->rms_eps, scratch);
            src = scratch;
        }
        mm_quantize(w_type, src, d, 1, d, f->xq + (size_t)i * rb, 0, 1);
        if (xq2) mm_quantize(type2, src, d, 1, d, xq2 + (size_t)i * rb2, 0, 1);
    }
}

/* ---- mixture of experts ------------------------------------------------------------- */

/* Passes of at least this many tokens choose their experts on all threads (a
 * barrier more); smaller ones on thread 0 while it groups them. */
#define MOE_SELECT_SHARED_MIN 32

/* Tokens [t0, t1): experts and weights from their router logits (moe_select,
 * model/moe.h). */
static void moe_select_rows(fwd_ctx *f, const layer_weights *L, int64_t t0, int64_t t1) {
    const model_hparams *hp = &f->m->hp;
    const int64_t ne = hp->n_expert, k = hp->n_expert_used;
    for (int64_t t = t0; t < t1; t++) {
        float *p = f->router + t * ne;
        moe_select(p, L->router_b, ne, k, hp->gating, p, f->sel + t * k, f->sel_w + t * k);
    }
}

/* Thread 0, between barriers, once every token has its experts: the grouped
 * rows, each expert's tokens in token order, experts in index order, and the
 * experts with tokens by count, most first (the work items' order: the
 * longest first). */
static void moe_group(fwd_ctx *f, int64_t T) {
    const model_hparams *hp = &f->m->hp;
    const int64_t ne = hp->n_expert, k = hp->n_expert_used;
    for (int64_t e = 0; e < ne; e++) f->exp_fill[e] = 0;
    for (int64_t i = 0; i < T * k; i++) f->exp_fill[f->sel[i]]++;
    f->exp_off[0] = 0;
    f->n_active = 0;
    f->gather = false;
    for (int64_t e = 0; e < ne; e++) {
        f->exp_off[e + 1] = f->exp_off[e] + f->exp_fill[e];
        if (f->exp_fill[e] > 1) f->gather = true;
        if (f->exp_fill[e] == 0) continue;
        /* insertion into exp_order by count (descending), index ascending on ties */
        int64_t i = f->n_active++;
        while (i > 0 && f->exp_fill[f->exp_order[i - 1]] < f->exp_fill[e]) {
            f->exp_order[i] = f->exp_order[i - 1];
            i--;
        }
        f->exp_order[i] = (int32_t)e;
        f->exp_fill[e] = 0;
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < k; j++) {
            const int32_t e = f->sel[t * k + j];
            const int64_t r = f->exp_off[e] + f->exp_fill[e]++;
            f->row_tok[r] = (int32_t)t;
            f->slot[t * k + j] = (int32_t)r;
        }
}

/* The input rows of expert e: its grouped rows in xe, or for a lone token its
 * row of xq. */
static const uint8_t *moe_input(const fwd_ctx *f, int32_t e, size_t x_stride) {
    const int64_t r0 = f->exp_off[e];
    if (f->exp_off[e + 1] - r0 == 1) return f->xq + (size_t)f->row_tok[r0] * x_stride;
    return f->xe + (size_t)r0 * x_stride;
}

/* Gate/up item i: slice s of expert e, h = SiLU(x Wg^T) * (x Wu^T) for the
 * expert's tokens, quantized into its columns of their grouped rows of he.
 * One token, or one slice per expert, writes there directly; otherwise the
 * rows go through the thread's hs and are copied (whole activation blocks). */
static void moe_gate_up_item(fwd_ctx *f, const layer_weights *L, int64_t i, int ith) {
    const model *m = f->m;
    const int64_t nf = m->moe_n_ff_slices;
    const int32_t e = f->exp_order[i / nf];
    const int64_t s = i % nf, r0 = f->exp_off[e], n = f->exp_off[e + 1] - r0;
    const mm_weight *g = &L->exp_gate[e * nf + s], *u = &L->exp_up[e * nf + s];
    const vt_dtype down = L->exp_down[0].type;
    const quant_traits *ht = quant_traits_get(quant_traits_get(down)->dot_type);
    const size_t col_off = (size_t)(s * m->moe_ff_slice / ht->block_elems) * ht->block_bytes;
    const uint8_t *x = moe_input(f, e, mm_act_row_bytes(g->type, g->n_in));
    const size_t he_stride = mm_act_row_bytes(down, m->hp.n_ff_exp);
    uint8_t *he = f->he + (size_t)r0 * he_stride + col_off;
    if (n == 1 || nf == 1) {
        mm_compute_glu(g, u, down, x, n, he, f->one, 0);
        return;
    }
    uint8_t *hs = f->hs + (size_t)ith * (size_t)f->max_tokens * f->hs_stride;
    mm_compute_glu(g, u, down, x, n, hs, f->one, 0);
    const size_t stride = mm_act_row_bytes(down, g->n_out),
                 bytes = (size_t)(g->n_out / ht->block_elems) * ht->block_bytes;
    for (int64_t t = 0; t < n; t++) memcpy(he + (size_t)t * he_stride, hs + (size_t)t * stride, bytes);
}

/* Gate/up item i where the layer has expert biases or another activation
 * (layer_kind's moe_split): gate and up of slice s for the expert's tokens as floats into
 * the thread's gu, the biases added, activated, each row quantized into its
 * columns of he. */
static void moe_gate_up_item_split(fwd_ctx *f, const layer_weights *L, int64_t i, int ith) {
    const model *m = f->m;
    const model_hparams *hp = &m->hp;
    const int64_t nf = m->moe_n_ff_slices, fs = m->moe_ff_slice;
    const int32_t e = f->exp_order[i / nf];
    const int64_t s = i % nf, r0 = f->exp_off[e], n = f->exp_off[e + 1] - r0;
    const mm_weight *g = &L->exp_gate[e * nf + s], *u = &L->exp_up[e * nf + s];
    const int64_t ns = g->n_out, c0 = s * fs;
    const vt_dtype down = L->exp_down[0].type;
    const quant_traits *ht = quant_traits_get(quant_traits_get(down)->dot_type);
    const size_t col_off = (size_t)(c0 / ht->block_elems) * ht->block_bytes;
    const size_t he_stride = mm_act_row_bytes(down, hp->n_ff_exp);
    const size_t buf = (size_t)f->max_tokens * (size_t)fs;
    float *bg = f->gu + (size_t)ith * 2 * buf, *bu = bg + buf;
    const mm_weight *ws[2] = {g, u};
    float *ys[2] = {bg, bu};
    const int64_t ld[2] = {ns, ns};
    mm_compute_multi(ws, ys, ld, 2, moe_input(f, e, mm_act_row_bytes(g->type, g->n_in)), n, f->one, 0);
    const float *gb = L->exp_gate_b ? L->exp_gate_b + e * hp->n_ff_exp + c0 : NULL;
    const float *ub = L->exp_up_b ? L->exp_up_b + e * hp->n_ff_exp + c0 : NULL;
    void (*silu_mul)(float *, const float *, int64_t) = cpu_kernels_get()->silu_mul;
    for (int64_t t = 0; t < n; t++) {
        float *gr = bg + t * ns, *ur = bu + t * ns;
        for (int64_t j = 0; gb && j < ns; j++) gr[j] += gb[j];
        for (int64_t j = 0; ub && j < ns; j++) ur[j] += ub[j];
        if (hp->act == MOE_ACT_SWIGLU_OAI) moe_swiglu_oai(gr, ur, ns, MOE_OAI_ALPHA, MOE_OAI_LIMIT);
        else silu_mul(gr, ur, ns);
        mm_quantize(down, gr, ns, 1, ns, f->he + (size_t)(r0 + t) * he_stride + col_off, 0, 1);
    }
}

/* Down item i: slice s (rows of n_embd) of expert e for its tokens into ye,
 * plus the expert's down bias where the layer has one. */
static void moe_down_item(fwd_ctx *f, const layer_weights *L, int64_t i) {
    const model *m = f->m;
    const int64_t nd = m->moe_n_down_slices, d = m->hp.n_embd;
    const int32_t e = f->exp_order[i / nd];
    const int64_t s = i % nd, r0 = f->exp_off[e], n = f->exp_off[e + 1] - r0;
    const mm_weight *w = &L->exp_down[e * nd + s];
    float *y = f->ye + r0 * d + s * m->moe_down_slice;
    mm_compute(w, f->he + (size_t)r0 * mm_act_row_bytes(w->type, w->n_in), n, y, d, f->one, 0);
    if (L->exp_down_b) {
        const float *b = L->exp_down_b + e * d + s * m->moe_down_slice;
        for (int64_t t = 0; t < n; t++)
            for (int64_t j = 0; j < w->n_out; j++) y[t * d + j] += b[j];
    }
}

/* qwen35moe's shared expert gate of tokens [this thread's share of T): each token's
 * normed row again from x (the same bits as step 7's), sigmoid(row . shexp_gate_inp)
 * into shg (a float dot, as llama.cpp's F32 mat-vec). In the router's step. */
static void shexp_gates(fwd_ctx *f, const layer_weights *L, int64_t T, int ith, int nth) {
    const model_hparams *hp = &f->m->hp;
    const int64_t d = hp->n_embd;
    float *scratch = f->norm + (size_t)ith * (size_t)(d > hp->head_dim ? d : hp->head_dim);
    int64_t i0, i1;
    tp_range(T, 1, ith, nth, &i0, &i1);
    for (int64_t t = i0; t < i1; t++) {
        f->rms_norm(f->x + t * d, L->ffn_norm, d, hp->rms_eps, scratch);
        float g = 0.0f;
        for (int64_t j = 0; j < d; j++) g += scratch[j] * L->shexp_gate_inp[j];
        f->shg[t] = 1.0f / (1.0f + expf(-g));
    }
}

/* The shared expert as one more expert of every token, beside the routed ones (its input
 * is xq: the experts' activation type, layer_kind's shexp_apart false). Gate/up item i:
 * columns [i, i + 1) x moe_ff_slice of SiLU(gate) * up for all T tokens, quantized into
 * hq; down item i: rows [i, i + 1) x moe_down_slice of its output into tmp, which the
 * next step_norm_quant scales by shg and adds after the routed sum (LAYER_OUT_MOE_SHARED).
 * The same bytes as the whole matrices on the pool (cpu/matmul.h). */
static void shexp_gate_up_item(fwd_ctx *f, const layer_weights *L, int64_t i, int64_t T) {
    const int64_t n = f->m->hp.n_ff_shexp, c0 = i * f->m->moe_ff_slice;
    const int64_t c1 = c0 + f->m->moe_ff_slice < n ? c0 + f->m->moe_ff_slice : n;
    mm_compute_glu_act_cols(&L->shexp_gate, &L->shexp_up, cpu_kernels_get()->silu_mul, L->shexp_down.type, f->xq, T,
                            f->hq, c0, c1);
}

static void shexp_down_item(fwd_ctx *f, const layer_weights *L, int64_t i, int64_t T) {
    const int64_t d = f->m->hp.n_embd, r0 = i * f->m->moe_down_slice;
    const int64_t r1 = r0 + f->m->moe_down_slice < d ? r0 + f->m->moe_down_slice : d;
    mm_compute_rows(&L->shexp_down, f->hq, T, f->tmp, d, r0, r1);
}

/* The MoE FFN of layer L for the T tokens whose normed rows are in xq (for
 * the experts) and xr (for the router): router, routing, the grouped inputs,
 * gate/up items, down items, each step ending in a barrier; the weighted sum
 * is left to the next step_norm_quant (LAYER_OUT_MOE). Items are claimed one at a
 * time, so a thread never waits for a pool wake-up, and which thread runs an
 * item changes nothing in its bits: each output row is computed by one mm_*
 * call on one thread whatever the split. */
static void moe_ffn(fwd_ctx *f, const layer_weights *L, const uint8_t *xr, int64_t T, int ith, int nth) {
    const model *m = f->m;
    const int64_t ne = m->hp.n_expert;
    mm_compute(&L->router, xr, T, f->router, ne, f->pool, ith);
    if (L->kind.ffn == LAYER_FFN_MOE_SHARED) shexp_gates(f, L, T, ith, nth);
    tp_barrier(f->pool);
    if (T >= MOE_SELECT_SHARED_MIN && nth > 1) {
        int64_t t0, t1;
        tp_range(T, 1, ith, nth, &t0, &t1);
        moe_select_rows(f, L, t0, t1);
        tp_barrier(f->pool);
    } else if (ith == 0) {
        moe_select_rows(f, L, 0, T);
    }
    if (ith == 0) {
        moe_group(f, T);
        /* the experts this pass reads in this layer, each once (fwd_stats) */
        const size_t expert = (L->exp_gate[0].row_bytes + L->exp_up[0].row_bytes) * (size_t)m->hp.n_ff_exp +
                              L->exp_down[0].row_bytes * (size_t)m->hp.n_embd;
        f->st.moe_layer_passes++;
        f->st.moe_experts_read += f->n_active;
        f->st.weight_bytes += (uint64_t)f->n_active * expert;
    }
    tp_barrier(f->pool);
    if (f->gather) {
        const size_t xs = mm_act_row_bytes(L->exp_gate[0].type, m->hp.n_embd);
        int64_t r0, r1;
        tp_range(T * m->hp.n_expert_used, 1, ith, nth, &r0, &r1);
        for (int64_t r = r0; r < r1; r++)
            memcpy(f->xe + (size_t)r * xs, f->xq + (size_t)f->row_tok[r] * xs, xs);
        tp_barrier(f->pool);
    }
    /* the shared expert's slices (layer_kind's shexp_apart false) first: the most tokens */
    const bool sh = L->kind.ffn == LAYER_FFN_MOE_SHARED && !L->kind.shexp_apart;
    const int64_t n_sh_ff = sh ? (m->hp.n_ff_shexp + m->moe_ff_slice - 1) / m->moe_ff_slice : 0;
    const int64_t n_sh_down = sh ? m->moe_n_down_slices : 0;
    const int64_t n_ff_items = n_sh_ff + f->n_active * m->moe_n_ff_slices;
    void (*gate_up)(fwd_ctx *, const layer_weights *, int64_t, int) =
        L->kind.moe_split ? moe_gate_up_item_split : moe_gate_up_item;
    for (int64_t i = nth > 1 ? tp_claim(f->pool, 1) : 0; i < n_ff_items; i = nth > 1 ? tp_claim(f->pool, 1) : i + 1)
        if (i < n_sh_ff) shexp_gate_up_item(f, L, i, T);
        else gate_up(f, L, i - n_sh_ff, ith);
    tp_barrier(f->pool);
    const int64_t n_down_items = n_sh_down + f->n_active * m->moe_n_down_slices;
    for (int64_t i = nth > 1 ? tp_claim(f->pool, 1) : 0; i < n_down_items; i = nth > 1 ? tp_claim(f->pool, 1) : i + 1)
        if (i < n_sh_down) shexp_down_item(f, L, i, T);
        else moe_down_item(f, L, i - n_sh_down);
    tp_barrier(f->pool);
}

/* qwen35moe's shared expert of layer L for the T tokens where its activation type is
 * not the experts' (layer_kind's shexp_apart), once moe_ffn is done (xq and hq are
 * free again; shg holds its gates): each token's normed row again from x (the same
 * bits as step 7's), quantized for shexp_gate; then SiLU(gate) * up and down into tmp,
 * which the next step_norm_quant scales by shg and adds beside the routed sum
 * (LAYER_OUT_MOE_SHARED). Three barriers. */
static void shexp_ffn(fwd_ctx *f, const layer_weights *L, int64_t T, int ith, int nth) {
    const model_hparams *hp = &f->m->hp;
    const int64_t d = hp->n_embd;
    const size_t rb = mm_act_row_bytes(L->shexp_gate.type, d);
    float *scratch = f->norm + (size_t)ith * (size_t)(d > hp->head_dim ? d : hp->head_dim);
    int64_t i0, i1;
    tp_range(T, 1, ith, nth, &i0, &i1);
    for (int64_t t = i0; t < i1; t++) {
        f->rms_norm(f->x + t * d, L->ffn_norm, d, hp->rms_eps, scratch);
        mm_quantize(L->shexp_gate.type, scratch, d, 1, d, f->xq + (size_t)t * rb, 0, 1);
    }
    tp_barrier(f->pool);
    mm_compute_glu_act(&L->shexp_gate, &L->shexp_up, cpu_kernels_get()->silu_mul, L->shexp_down.type, f->xq, T,
                       f->hq, f->pool, ith);
    tp_barrier(f->pool);
    mm_compute(&L->shexp_down, f->hq, T, f->tmp, d, f->pool, ith);
    tp_barrier(f->pool);
}

static void forward_worker(void *arg, int ith, int nth) {
    fwd_ctx *f = arg;
    const fwd_batch *b = f->batch;
    const model *m = f->m;
    const model_hparams *hp = &m->hp;
    const int64_t T = b->n_tokens, d = hp->n_embd, hd = hp->head_dim, n_head = hp->n_head,
                  n_kv = hp->n_head_kv, n_rep = n_head / n_kv, qd = n_head * hd, kvd = n_kv * hd,
                  bs = f->kv->block_size, pf = attn_part_floats(hd);
    const float scale = hp->attn_scale;
    int64_t i0, i1;
    double t_prof = PROF_START(ith);

    /* Step 0: embeddings and rope tables, by token. */
    tp_range(T, 1, ith, nth, &i0, &i1);
    if (i1 > i0) model_embed_rows(m, b->token + i0, i1 - i0, f->x + i0 * d);
    if (hp->embd_scale != 1.0f)
        for (int64_t j = i0 * d; j < i1 * d; j++) f->x[j] *= hp->embd_scale;
    if (m->embd_norm) { /* muse-glimmer: RMSNorm without a weight (times ones) */
        float *scratch = f->norm + (size_t)ith * (size_t)(d > hp->head_dim ? d : hp->head_dim);
        for (int64_t t = i0; t < i1; t++) {
            f->rms_norm(f->x + t * d, m->embd_norm, d, hp->rms_eps, scratch);
            memcpy(f->x + t * d, scratch, sizeof(float) * (size_t)d);
        }
    }
    for (int64_t t = i0; t < i1; t++) {
        rope_table(hp, f->rope_factors, false, b->pos[t], f->rope + t * hp->n_rot);
        if (f->rope_swa) rope_table(hp, f->rope_factors, true, b->pos[t], f->rope_swa + t * hp->n_rot);
    }
    tp_barrier(f->pool);
    PROF_MARK(f, ith, 0, t_prof);

    /* This thread's attention units of each plan, the same in every layer. */
    int64_t u0s[KV_MAX_GROUPS], u1s[KV_MAX_GROUPS];
    for (int p = 0; p < f->n_plans; p++)
        split_by_cost(f->plans[p].cost_off, f->plans[p].n_items, n_kv, ith, nth, &u0s[p], &u1s[p]);

    for (int64_t il = 0; il < hp->n_layer; il++) {
        const layer_weights *L = &m->layers[il];
        const layer_kind *K = &L->kind;

        /* 1: residual (the previous layer's FFN output) + norm + quantize */
        const layer_out prev = il == 0 ? LAYER_OUT_NONE : m->layers[il - 1].kind.ffn_out;
        const float *prev_post = il == 0 ? NULL : m->layers[il - 1].ffn_post_norm;
        if (K->mixer == LAYER_MIXER_DELTANET) { /* qwen35: steps 2-6 in model/qwen35.c */
            const bool own = quant_traits_get(L->lin->walpha.type)->dot_type !=
                             quant_traits_get(L->lin->wqkv.type)->dot_type;
            step_norm_quant(f, T, prev, prev_post, NULL, L->attn_norm, L->lin->wqkv.type, L->lin->walpha.type,
                            own ? f->hy->xq2 : NULL, NULL, ith, nth);
            tp_barrier(f->pool);
            PROF_MARK(f, ith, 1, t_prof);
            q35_fwd_linear(f->hy, m, L, il, b, f->kv, f->xq, f->tmp, f->pool, ith, nth);
            PROF_MARK(f, ith, 4, t_prof);
            goto ffn;
        }
        const kv_layer *lv = &f->lv[il];
        const attn_plan *plan = &f->plans[f->layer_plan[il]];
        const int64_t u0 = u0s[f->layer_plan[il]], u1 = u1s[f->layer_plan[il]];
        step_norm_quant(f, T, prev, prev_post, NULL, L->attn_norm, L->wq.type, VT_DTYPE_COUNT, NULL, NULL, ith, nth);
        tp_barrier(f->pool);
        PROF_MARK(f, ith, 1, t_prof);

        /* 2: Q, K, V (LAYER_GATE_IN_Q: Q with each head's gate after its query;
         * LAYER_GATE_MATRIX: attn_gate as a fourth matrix on the same input) */
        const bool gate_in_q = K->gate == LAYER_GATE_IN_Q;
        {
            const mm_weight *ws[4] = {&L->wq, &L->wk, &L->wv, &L->wg};
            float *ys[4] = {gate_in_q ? f->hy->qg : f->q, f->k, f->v, f->gate};
            const int64_t ld[4] = {gate_in_q ? 2 * qd : qd, kvd, kvd, qd};
            mm_compute_multi(ws, ys, ld, K->gate == LAYER_GATE_MATRIX ? 4 : 3, f->xq, T, f->pool, ith);
        }
        tp_barrier(f->pool);
        PROF_MARK(f, ith, 2, t_prof);

        /* 3: bias, QK-norm, rope; store K and V. Items: (token, kv head). */
        const float *rope = K->rope == LAYER_ROPE_SWA ? f->rope_swa : f->rope;
        const bool rotate = K->rope != LAYER_ROPE_NONE, head_norm = K->qk_norm == LAYER_QK_NORM_HEAD;
        /* olmo2's QK-norm spans a token's rows: items are then whole tokens */
        const bool row_norm = K->qk_norm == LAYER_QK_NORM_ROW;
        tp_range(row_norm ? T : T * n_kv, 1, ith, nth, &i0, &i1);
        for (int64_t it = i0; it < i1; it++) {
            const int64_t g_end = row_norm ? n_kv : it % n_kv + 1;
            if (row_norm) { /* qd == n_embd (olmo2_hparams): the row fits the scratch */
                float *scratch = f->norm + (size_t)ith * (size_t)(d > hd ? d : hd);
                f->rms_norm(f->q + it * qd, L->q_norm_row, qd, hp->rms_eps, scratch);
                memcpy(f->q + it * qd, scratch, sizeof(float) * (size_t)qd);
                f->rms_norm(f->k + it * kvd, L->k_norm_row, kvd, hp->rms_eps, scratch);
                memcpy(f->k + it * kvd, scratch, sizeof(float) * (size_t)kvd);
            }
            for (int64_t g = row_norm ? 0 : it % n_kv; g < g_end; g++) {
                const int64_t t = row_norm ? it : it / n_kv;
                const int32_t pos = b->pos[t];
                const fwd_seq *sq = &b->seqs[b->seq[t]];
                const float *cs = rope + t * hp->n_rot;
                float *kr = f->k + t * kvd + g * hd, *vr = f->v + t * kvd + g * hd;
                float *scratch = f->norm + (size_t)ith * (size_t)(d > hd ? d : hd);
                if (K->qkv_bias)
                    for (int64_t j = 0; j < hd; j++) {
                        kr[j] += L->bk[g * hd + j];
                        vr[j] += L->bv[g * hd + j];
                    }
                if (head_norm) {
                    f->rms_norm(kr, L->k_norm, hd, hp->rms_eps, scratch);
                    memcpy(kr, scratch, sizeof(float) * (size_t)hd);
                }
                if (rotate) rope_apply(kr, cs, hp->n_rot, hp->rope);
                const int32_t blk = sq->blocks[lv->group][pos / bs];
                f->kops->store_k(kv_k_head(lv, blk, g), bs, pos % bs, kr, hd);
                f->vops->store_v(kv_v_row(lv, blk, g, pos % bs), vr, hd);
                for (int64_t r = 0; r < n_rep; r++) {
                    const int64_t h = g * n_rep + r;
                    float *qr = f->q + t * qd + h * hd;
                    if (gate_in_q) {
                        const float *qg = f->hy->qg + t * 2 * qd + h * 2 * hd;
                        memcpy(qr, qg, sizeof(float) * (size_t)hd);
                        memcpy(f->hy->gate + t * qd + h * hd, qg + hd, sizeof(float) * (size_t)hd);
                    }
                    if (K->qkv_bias)
                        for (int64_t j = 0; j < hd; j++) qr[j] += L->bq[h * hd + j];
                    if (head_norm) {
                        f->rms_norm(qr, L->q_norm, hd, hp->rms_eps, scratch);
                        memcpy(qr, scratch, sizeof(float) * (size_t)hd);
                    }
                    if (rotate) rope_apply(qr, cs, hp->n_rot, hp->rope);
                    if (K->q_temp) { /* llama.cpp's llm_graph_input_attn_temp, in its double steps */
                        const float ts = (float)(log(floorf((float)pos / (float)hp->n_ctx_orig) + 1.0) *
                                                     hp->attn_temp_scale + 1.0);
                        for (int64_t j = 0; j < hd; j++) qr[j] *= ts;
                    }
                }
            }
        }
        tp_barrier(f->pool);
        PROF_MARK(f, ith, 3, t_prof);

        /* 4: attention partials. Work units: (kv head, item), split by cost;
         * each thread takes its share unit by unit, then, out of work, the
         * last units of the others' (tp_take), so one that loses its core for
         * a while does not hold the step. A unit writes its own partial rows:
         * which thread runs it changes no bit. */
        for (int d = 0; d < (nth > 1 ? nth : 1); d++) {
            const int owner = (ith + d) % nth;
            int64_t o0 = u0, o1 = u1;
            if (d > 0) split_by_cost(plan->cost_off, plan->n_items, n_kv, owner, nth, &o0, &o1);
            const int64_t C = f->chunk_off[T];
            for (int64_t k = 0;; k++) {
                const int64_t i = nth > 1 ? tp_take(f->pool, owner, o1 - o0, d > 0) : k < o1 - o0 ? k : -1;
                if (i < 0) break;
                const int64_t u = o0 + i;
                const attn_item *item = &plan->items[u % plan->n_items];
                const attn_group *gr = &f->groups[item->group];
                const int64_t g = u / plan->n_items, t0 = gr->t0, nch = gr->n_chunks;
                const int64_t row0 = part_row(C, f->chunk_off[t0], g, 0, n_rep, nch) + item->chunk;
                const attn_query aq = {
                    .q = f->q + t0 * qd + g * n_rep * hd,
                    .q_tok_stride = qd,
                    .n_tok = gr->n_tok,
                    .n_rep = n_rep,
                    .pos0 = b->pos[t0],
                    .part = f->parts + row0 * pf,
                    .part_stride = nch * pf,
                };
                attn_partial(lv, f->kops, f->vops, b->seqs[b->seq[t0]].blocks[lv->group], g, &aq,
                             (int64_t)item->chunk * ATTN_CHUNK, scale, &L->attn);
            }
        }
        tp_barrier(f->pool);
        PROF_MARK(f, ith, 4, t_prof);

        /* 5: combine chunks per head (those the token's window reaches; the sink
         * of the head, if any); quantize the row for the output projection. */
        {
            const size_t rb = mm_act_row_bytes(L->wo.type, qd);
            tp_range(T, 1, ith, nth, &i0, &i1);
            for (int64_t t = i0; t < i1; t++) {
                const int64_t nch = f->chunk_off[t + 1] - f->chunk_off[t];
                const int64_t c0 = attn_first_chunk(b->pos[t], L->attn.window);
                for (int64_t h = 0; h < n_head; h++)
                    attn_combine(f->parts + (part_row(f->chunk_off[T], f->chunk_off[t], h / n_rep,
                                                      h % n_rep, n_rep, nch) + c0) * pf,
                                 nch - c0, pf, hd, L->attn.sinks ? &L->attn.sinks[h] : NULL,
                                 f->attn + t * qd + h * hd);
                if (K->gate != LAYER_GATE_NONE) /* qwen35, muse-glimmer: the output times sigmoid(gate) */
                    for (int64_t j = 0; j < qd; j++) {
                        const float gt = gate_in_q ? f->hy->gate[t * qd + j] : f->gate[t * qd + j];
                        f->attn[t * qd + j] *= 1.0f / (1.0f + expf(-gt));
                    }
                mm_quantize(L->wo.type, f->attn + t * qd, qd, 1, qd, f->xq + (size_t)t * rb, 0, 1);
            }
        }
        tp_barrier(f->pool);
        PROF_MARK(f, ith, 5, t_prof);

        /* 6: attention output projection */
        mm_compute(&L->wo, f->xq, T, f->tmp, d, f->pool, ith);
        tp_barrier(f->pool);
        PROF_MARK(f, ith, 6, t_prof);
    ffn:

        if (K->ffn != LAYER_FFN_DENSE) {
            /* 7: residual + norm + quantize, for the experts and (in its own
             * activation type, where that differs) the router; 8, 9: the experts */
            const bool own = quant_traits_get(L->router.type)->dot_type !=
                             quant_traits_get(L->exp_gate[0].type)->dot_type;
            step_norm_quant(f, T, K->attn_out, L->attn_post_norm, L->bo, L->ffn_norm, L->exp_gate[0].type,
                            L->router.type, own ? f->hq : NULL, NULL, ith, nth);
            tp_barrier(f->pool);
            PROF_MARK(f, ith, 7, t_prof);
            moe_ffn(f, L, own ? f->hq : f->xq, T, ith, nth);
            PROF_MARK(f, ith, 8, t_prof);
            if (K->ffn == LAYER_FFN_MOE_SHARED && K->shexp_apart) shexp_ffn(f, L, T, ith, nth);
            PROF_MARK(f, ith, 9, t_prof);
            continue;
        }

        /* 7: residual + norm + quantize */
        step_norm_quant(f, T, K->attn_out, L->attn_post_norm, L->bo, L->ffn_norm, L->w_gate.type, VT_DTYPE_COUNT, NULL,
                        NULL, ith, nth);
        tp_barrier(f->pool);
        PROF_MARK(f, ith, 7, t_prof);

        /* 8: gate and up, act(gate) * up quantized for the down projection */
        mm_compute_glu_act(&L->w_gate, &L->w_up, f->ffn_act_mul, L->w_down.type, f->xq, T, f->hq, f->pool, ith);
        tp_barrier(f->pool);
        PROF_MARK(f, ith, 8, t_prof);

        /* 9: down projection */
        mm_compute(&L->w_down, f->hq, T, f->tmp, d, f->pool, ith);
        tp_barrier(f->pool);
        PROF_MARK(f, ith, 9, t_prof);
    }

    /* Embeddings: the last residual add for their rows (quantized unnormed into
     * xq, unused), then the output norm into b->embd in float. */
    const layer_out last = hp->n_layer > 0 ? m->layers[hp->n_layer - 1].kind.ffn_out : LAYER_OUT_NONE;
    const float *last_post = hp->n_layer > 0 ? m->layers[hp->n_layer - 1].ffn_post_norm : NULL;
    if (b->n_embd_rows > 0) {
        step_norm_quant(f, b->n_embd_rows, last, last_post, NULL, NULL, m->output.type, VT_DTYPE_COUNT, NULL,
                        b->embd_rows, ith, nth);
        tp_range(b->n_embd_rows, 1, ith, nth, &i0, &i1); /* the same rows as above: no barrier needed */
        for (int64_t i = i0; i < i1; i++) {
            const float *x = f->x + (int64_t)b->embd_rows[i] * hp->n_embd;
            float *out = b->embd + i * hp->n_embd;
            if (m->output_norm) f->rms_norm(x, m->output_norm, hp->n_embd, hp->rms_eps, out);
            else memcpy(out, x, sizeof(float) * (size_t)hp->n_embd);
        }
        tp_barrier(f->pool); /* xq is the logits' next */
    }

    /* Output: the last residual add and norm only for the rows that want logits. */
    if (b->n_logits > 0) {
        step_norm_quant(f, b->n_logits, last, last_post, NULL, m->output_norm, m->output.type, VT_DTYPE_COUNT, NULL,
                        b->logit_rows, ith, nth);
        tp_barrier(f->pool);
        PROF_MARK(f, ith, 10, t_prof);
        mm_compute(&m->output, f->xq, b->n_logits, b->logits, hp->n_vocab, f->pool, ith);
        if (hp->final_softcap > 0 || hp->logit_mul != 1.0f) { /* gemma2: the logits soft-capped, row by row;
                                                                muse-glimmer: scaled first */
            tp_barrier(f->pool);
            tp_range(b->n_logits, 1, ith, nth, &i0, &i1);
            for (int64_t r = i0; r < i1; r++) {
                float *row = b->logits + r * hp->n_vocab;
                if (hp->logit_mul != 1.0f)
                    for (int64_t j = 0; j < hp->n_vocab; j++) row[j] *= hp->logit_mul;
                if (hp->final_softcap > 0) cpu_kernels_get()->softcap(row, hp->n_vocab, hp->final_softcap);
            }
        } else if (hp->logit_scale != 1.0f) { /* granite: divided, as ggml_scale by the inverse */
            tp_barrier(f->pool);
            tp_range(b->n_logits * hp->n_vocab, 1, ith, nth, &i0, &i1);
            const float inv = 1.0f / hp->logit_scale;
            for (int64_t j = i0; j < i1; j++) b->logits[j] *= inv;
        }
    }
    PROF_MARK(f, ith, 10, t_prof);
}

void fwd_set_n_ctx(fwd_ctx *f, int64_t n_ctx_seq) {
    const model *m = f->m;
    if (!m->rope_freqs && m->rope_long)
        f->rope_factors = n_ctx_seq > m->hp.n_ctx_orig ? m->rope_long : m->rope_short;
}

vt_status fwd_run(fwd_ctx *f, const fwd_batch *b) {
    const model_hparams *hp = &f->m->hp;
    VT_ASSERT(b->n_tokens > 0 && b->n_tokens <= f->max_tokens);
    /* Attention groups and items, and room for their partials. */
    const int64_t T = b->n_tokens, n_rep = hp->n_head / hp->n_head_kv;
    const int64_t max_tok = n_rep >= ATTN_ROWS ? 1 : ATTN_ROWS / n_rep;
    int64_t n_groups = 0;
    f->chunk_off[0] = 0;
    for (int64_t t = 0; t < T; t++) {
        const int64_t nch = n_chunks_for(b->pos[t]);
        f->chunk_off[t + 1] = f->chunk_off[t] + nch;
        attn_group *gr = n_groups ? &f->groups[n_groups - 1] : NULL;
        if (gr && gr->n_tok < max_tok && b->seq[t] == b->seq[t - 1] &&
            b->pos[t] == b->pos[t - 1] + 1 && b->pos[t] % ATTN_CHUNK != 0)
            gr->n_tok++;
        else
            f->groups[n_groups++] = (attn_group){(int32_t)t, 1, (int32_t)nch};
    }
    const int64_t n_items = f->chunk_off[T]; /* at most: one per chunk of each group */
    for (int p = 0; p < f->n_plans; p++) {
        attn_plan *pl = &f->plans[p];
        if (n_items > pl->items_cap) {
            attn_item *it = realloc(pl->items, (size_t)n_items * sizeof *it);
            if (it) pl->items = it;
            int64_t *co = realloc(pl->cost_off, (size_t)(n_items + 1) * sizeof *co);
            if (co) pl->cost_off = co;
            if (!it || !co)
                return vt_errorf(VT_E_NOMEM, "out of memory for %lld attention items", (long long)n_items);
            pl->items_cap = n_items;
        }
        pl->n_items = 0;
        pl->cost_off[0] = 0;
        for (int64_t i = 0; i < n_groups; i++) {
            const attn_group *gr = &f->groups[i];
            const int64_t p_first = b->pos[gr->t0], p_last = b->pos[gr->t0 + gr->n_tok - 1];
            const int64_t lo = pl->window > 0 ? p_first - pl->window + 1 : 0;
            for (int32_t c = (int32_t)attn_first_chunk(p_first, pl->window); c < gr->n_chunks; c++) {
                const int64_t p0 = (int64_t)c * ATTN_CHUNK;
                const int64_t p1 = p_last + 1 < p0 + ATTN_CHUNK ? p_last + 1 : p0 + ATTN_CHUNK;
                pl->items[pl->n_items] = (attn_item){(int32_t)i, c};
                /* keys x tokens, plus a fixed cost per item */
                pl->cost_off[pl->n_items + 1] =
                    pl->cost_off[pl->n_items] + (p1 - (lo > p0 ? lo : p0)) * gr->n_tok + 32;
                pl->n_items++;
            }
        }
    }
    const size_t need = (size_t)f->chunk_off[b->n_tokens] * (size_t)hp->n_head *
                        (size_t)attn_part_floats(hp->head_dim);
    if (need > f->parts_cap) { /* scratch of one pass: nothing to keep */
        float *p = hugemem_alloc(need * sizeof(float));
        if (!p)
            return vt_errorf(VT_E_NOMEM, "out of memory for attention scratch (%.1f MiB)",
                             (double)need * sizeof(float) / (1024.0 * 1024.0));
        hugemem_free(f->parts, f->parts_cap * sizeof(float));
        f->parts = p;
        f->parts_cap = need;
    }
    f->batch = b;
    if (f->layer_bytes * (size_t)T < f->solo_bytes) {
        /* too small to share: the caller alone, the pool not woken; not an
         * elastic pass (no choice of count was made) */
        tp_run_n(f->pool, 1, forward_worker, f);
    } else {
        tp_run_n(f->pool, tp_elastic_pick(&f->elastic, T), forward_worker, f);
        const tp_run_stats rs = tp_last_run(f->pool);
        if (rs.n_active < f->nth_max) f->st.elastic_passes++;
        if (tp_elastic_record(&f->elastic, T, &rs))
            log_debug("decode passes of %lld tokens now on %d of %d threads", (long long)T,
                      tp_elastic_pick(&f->elastic, T), f->nth_max);
    }
    /* fwd_stats: the weights of the pass besides the experts (moe_ffn counted those) */
    const bool tied = f->m->output.data == f->m->embd;
    f->st.passes++;
    f->st.tokens += T;
    f->st.weight_bytes += f->trunk_bytes + (b->n_logits > 0 ? f->head_bytes : 0) +
                          (tied && b->n_logits > 0 ? 0 : (size_t)T * f->m->embd_row_bytes);
#ifdef VT_FWD_PROFILE
    f->prof_tokens[T > 1] += T;
    f->prof_passes[T > 1]++;
#endif
    f->batch = NULL;
    return VT_OK;
}

bool fwd_logits_finite(const float *row, int64_t n) {
    /* a float is NaN or infinite exactly when its exponent bits are all ones;
     * four independent maxima keep the loop from waiting on one chain */
    uint32_t mx[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        for (int k = 0; k < 4; k++) {
            uint32_t b;
            memcpy(&b, row + i + k, 4);
            b &= 0x7f800000u;
            mx[k] = b > mx[k] ? b : mx[k];
        }
    }
    for (; i < n; i++) {
        uint32_t b;
        memcpy(&b, row + i, 4);
        b &= 0x7f800000u;
        mx[0] = b > mx[0] ? b : mx[0];
    }
    const uint32_t m01 = mx[0] > mx[1] ? mx[0] : mx[1], m23 = mx[2] > mx[3] ? mx[2] : mx[3];
    return (m01 > m23 ? m01 : m23) != 0x7f800000u;
}
