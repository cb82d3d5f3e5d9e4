/* Qwen3.5/3.6 hybrids: hyperparameters and the linear layer's core (qwen35.h). */
#include "model/qwen35.h"

#include "base/status.h"
#include "cpu/deltanet.h"
#include "cpu/kernels.h"
#include "model/forward.h"
#include "model/model.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *key_of(char *buf, size_t cap, const char *arch, const char *suffix) {
    snprintf(buf, cap, "%s.%s", arch, suffix);
    return buf;
}

/* A required integer key in [lo, hi]. */
static vt_status get_req(const gguf_file *g, const char *arch, const char *suffix, int64_t lo,
                         int64_t hi, int64_t *out) {
    char key[128];
    key_of(key, sizeof key, arch, suffix);
    const vt_status s = gguf_get_i64(g, key, out);
    if (s == VT_E_NOT_FOUND) return vt_errorf(VT_E_FORMAT, "required key '%s' is missing", key);
    if (s != VT_OK) return s;
    if (*out < lo || *out > hi)
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld is out of range [%lld, %lld]", key, (long long)*out,
                         (long long)lo, (long long)hi);
    return VT_OK;
}

vt_status q35_hparams_load(const gguf_file *g, const char *arch, int64_t block_count,
                           int64_t n_ctx_train, q35_hparams *out) {
    memset(out, 0, sizeof *out);
    q35_hparams hp = {0};
    char key[128];
    vt_status s;
    if ((s = get_req(g, arch, "ssm.conv_kernel", 1, Q35_MAX_CONV_KERNEL, &hp.conv_kernel)) != VT_OK ||
        (s = get_req(g, arch, "ssm.state_size", 1, Q35_MAX_STATE, &hp.d_state)) != VT_OK ||
        (s = get_req(g, arch, "ssm.group_count", 1, Q35_MAX_HEADS, &hp.n_k_heads)) != VT_OK ||
        (s = get_req(g, arch, "ssm.time_step_rank", 1, Q35_MAX_HEADS, &hp.n_v_heads)) != VT_OK ||
        (s = get_req(g, arch, "ssm.inner_size", 1, (int64_t)Q35_MAX_HEADS * Q35_MAX_STATE, &hp.d_inner)) != VT_OK)
        return s;
    if (hp.conv_kernel > n_ctx_train)
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld: the conv kernel is longer than the context (%lld)",
                         key_of(key, sizeof key, arch, "ssm.conv_kernel"), (long long)hp.conv_kernel,
                         (long long)n_ctx_train);
    if (hp.n_v_heads % hp.n_k_heads != 0)
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld is not a multiple of '%s.ssm.group_count' = %lld",
                         key_of(key, sizeof key, arch, "ssm.time_step_rank"), (long long)hp.n_v_heads, arch,
                         (long long)hp.n_k_heads);
    if (hp.d_inner != hp.n_v_heads * hp.d_state)
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld is not ssm.time_step_rank x ssm.state_size = %lld",
                         key_of(key, sizeof key, arch, "ssm.inner_size"), (long long)hp.d_inner,
                         (long long)(hp.n_v_heads * hp.d_state));
    hp.key_dim = hp.n_k_heads * hp.d_state;
    hp.conv_ch = 2 * hp.key_dim + hp.d_inner;

    s = gguf_get_i64(g, key_of(key, sizeof key, arch, "nextn_predict_layers"), &hp.n_nextn);
    if (s == VT_E_NOT_FOUND) hp.n_nextn = 0;
    else if (s != VT_OK) return s;
    if (hp.n_nextn < 0 || hp.n_nextn >= block_count)
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld leaves no trunk layers of %lld", key, (long long)hp.n_nextn,
                         (long long)block_count);
    hp.n_layer = block_count - hp.n_nextn;

    /* sections: read for the record; text positions make them plain NeoX rope */
    const gguf_kv *arr = NULL;
    if (gguf_get_arr(g, key_of(key, sizeof key, arch, "rope.dimension_sections"), GGUF_TYPE_COUNT, &arr) == VT_OK) {
        if (arr->v.arr.n > 4 || arr->v.arr.type == GGUF_TYPE_STRING || arr->v.arr.type == GGUF_TYPE_ARRAY ||
            arr->v.arr.type == GGUF_TYPE_FLOAT32 || arr->v.arr.type == GGUF_TYPE_FLOAT64)
            return vt_errorf(VT_E_FORMAT, "key '%s' is not an array of at most 4 integers", key);
        for (uint64_t i = 0; i < arr->v.arr.n; i++) hp.rope_sections[i] = gguf_arr_int(arr, i);
    }

    hp.is_linear = calloc((size_t)hp.n_layer, sizeof(bool));
    if (!hp.is_linear) return vt_errorf(VT_E_NOMEM, "out of memory");
    const gguf_kv *rk = gguf_find(g, key_of(key, sizeof key, arch, "attention.recurrent_layers"));
    if (rk && rk->type != GGUF_TYPE_ARRAY) { /* llama.cpp's get_key_or_arr: one value for every layer */
        int64_t v = 0;
        s = gguf_get_i64(g, key, &v);
        if (s != VT_OK) {
            free(hp.is_linear);
            return s;
        }
        for (int64_t il = 0; il < hp.n_layer; il++) hp.is_linear[il] = v != 0;
    } else if (gguf_get_arr(g, key, GGUF_TYPE_COUNT, &arr) == VT_OK) {
        /* llama.cpp's get_arr takes bool, i32 and u32 elements, no other type */
        const gguf_type et = arr->v.arr.type;
        if ((int64_t)arr->v.arr.n != block_count ||
            (et != GGUF_TYPE_BOOL && et != GGUF_TYPE_INT32 && et != GGUF_TYPE_UINT32)) {
            free(hp.is_linear);
            return vt_errorf(VT_E_FORMAT,
                             "key '%s' has %llu elements of type %s; want %lld booleans (block_count; or i32, u32)",
                             key, (unsigned long long)arr->v.arr.n, gguf_type_name(arr->v.arr.type),
                             (long long)block_count);
        }
        for (int64_t il = 0; il < hp.n_layer; il++) hp.is_linear[il] = gguf_arr_int(arr, (uint64_t)il) != 0;
    } else {
        int64_t interval = 4;
        s = gguf_get_i64(g, key_of(key, sizeof key, arch, "full_attention_interval"), &interval);
        if (s != VT_OK && s != VT_E_NOT_FOUND) {
            free(hp.is_linear);
            return s;
        }
        if (interval < 1 || interval > (1 << 20)) {
            free(hp.is_linear);
            return vt_errorf(VT_E_RANGE, "key '%s' = %lld is out of range", key, (long long)interval);
        }
        for (int64_t il = 0; il < hp.n_layer; il++) hp.is_linear[il] = (il + 1) % interval != 0;
    }
    *out = hp;
    return VT_OK;
}

void q35_hparams_free(q35_hparams *hp) {
    free(hp->is_linear);
    hp->is_linear = NULL;
}

size_t q35_state_bytes(const q35_hparams *hp) {
    return sizeof(float) * (size_t)((hp->conv_kernel - 1) * hp->conv_ch + hp->n_v_heads * hp->d_state * hp->d_state);
}

int64_t q35_n_linear(const q35_hparams *hp) {
    int64_t n = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) n += hp->is_linear[il];
    return n;
}

int64_t q35_core_scratch_floats(const q35_hparams *hp) {
    return dn_chunk_scratch_floats(hp->d_state, hp->d_state);
}

void q35_linear_head(const q35_hparams *hp, const q35_linear_weights *w, float eps, int64_t h, int64_t n_tokens,
                     const float *qkv, int64_t qkv_stride, const float *z, int64_t z_stride, const float *alpha,
                     const float *beta, int64_t ab_stride, float *state, float *out, int64_t out_stride, bool chunked,
                     float *scratch) {
    const int64_t ds = hp->d_state, nk = hp->n_k_heads;
    const float scale = 1.0f / sqrtf((float)ds);
    /* v-head h reads k-head h % nk (ggml_repeat_4d tiles the k heads) */
    const float *q = qkv + (h % nk) * ds, *k = qkv + hp->key_dim + (h % nk) * ds;
    const float *v = qkv + 2 * hp->key_dim + h * ds;
    float *S = state + (hp->conv_kernel - 1) * hp->conv_ch + h * ds * ds, *o = out + h * ds;
    const dn_kernels *dk = &cpu_kernels_get()->dn;
    if (chunked)
        dk->delta_rule_chunked(n_tokens, ds, ds, q, qkv_stride, k, qkv_stride, v, qkv_stride, alpha + h, beta + h,
                               ab_stride, scale, S, o, out_stride, scratch);
    else
        dk->delta_rule(n_tokens, ds, ds, q, qkv_stride, k, qkv_stride, v, qkv_stride, alpha + h, beta + h, ab_stride,
                       scale, S, o, out_stride);
    for (int64_t t = 0; t < n_tokens; t++) {
        float *ot = out + t * out_stride + h * ds;
        dk->gated_norm(ot, z + t * z_stride + h * ds, w->norm_w, ds, eps, ot);
    }
}

void q35_linear_group_reset(const q35_hparams *hp, int64_t kh, float *state) {
    const int64_t ds = hp->d_state, nk = hp->n_k_heads, C = hp->conv_ch;
    for (int64_t i = 0; i + 1 < hp->conv_kernel; i++) {
        float *row = state + i * C;
        memset(row + kh * ds, 0, sizeof(float) * (size_t)ds);
        memset(row + hp->key_dim + kh * ds, 0, sizeof(float) * (size_t)ds);
        for (int64_t h = kh; h < hp->n_v_heads; h += nk)
            memset(row + 2 * hp->key_dim + h * ds, 0, sizeof(float) * (size_t)ds);
    }
    float *S = state + (hp->conv_kernel - 1) * C;
    for (int64_t h = kh; h < hp->n_v_heads; h += nk) memset(S + h * ds * ds, 0, sizeof(float) * (size_t)(ds * ds));
}

void q35_linear_group_copy(const q35_hparams *hp, int64_t kh, float *dst, const float *src) {
    const int64_t ds = hp->d_state, nk = hp->n_k_heads, C = hp->conv_ch;
    for (int64_t i = 0; i + 1 < hp->conv_kernel; i++) {
        const int64_t row = i * C;
        memcpy(dst + row + kh * ds, src + row + kh * ds, sizeof(float) * (size_t)ds);
        memcpy(dst + row + hp->key_dim + kh * ds, src + row + hp->key_dim + kh * ds, sizeof(float) * (size_t)ds);
        for (int64_t h = kh; h < hp->n_v_heads; h += nk)
            memcpy(dst + row + 2 * hp->key_dim + h * ds, src + row + 2 * hp->key_dim + h * ds,
                   sizeof(float) * (size_t)ds);
    }
    const int64_t s0 = (hp->conv_kernel - 1) * C;
    for (int64_t h = kh; h < hp->n_v_heads; h += nk)
        memcpy(dst + s0 + h * ds * ds, src + s0 + h * ds * ds, sizeof(float) * (size_t)(ds * ds));
}

void q35_linear_group(const q35_hparams *hp, const q35_linear_weights *w, float eps, int64_t kh, int64_t n_tokens,
                      float *qkv, int64_t qkv_stride, const float *z, int64_t z_stride, float *alpha, float *beta,
                      int64_t ab_stride, float *state, float *out, int64_t out_stride, bool chunked, float *scratch) {
    const dn_kernels *dk = &cpu_kernels_get()->dn;
    const int64_t ds = hp->d_state, C = hp->conv_ch, K = hp->conv_kernel;
    /* the conv of the group's q and k channels, then their L2 norms; the state's conv part
     * is (K - 1, conv_ch), row stride C like the weights */
    const int64_t cq = kh * ds, ck = hp->key_dim + kh * ds;
    dk->conv1d_silu(qkv + cq, qkv_stride, n_tokens, ds, w->conv_w + cq, K, state + cq, C, qkv + cq, qkv_stride);
    dk->conv1d_silu(qkv + ck, qkv_stride, n_tokens, ds, w->conv_w + ck, K, state + ck, C, qkv + ck, qkv_stride);
    for (int64_t t = 0; t < n_tokens; t++) {
        dk->l2_norm(qkv + t * qkv_stride + cq, ds, eps);
        dk->l2_norm(qkv + t * qkv_stride + ck, ds, eps);
    }
    for (int64_t h = kh; h < hp->n_v_heads; h += hp->n_k_heads) {
        const int64_t cv = 2 * hp->key_dim + h * ds;
        dk->conv1d_silu(qkv + cv, qkv_stride, n_tokens, ds, w->conv_w + cv, K, state + cv, C, qkv + cv, qkv_stride);
        for (int64_t t = 0; t < n_tokens; t++) {
            float *al = alpha + t * ab_stride + h, *be = beta + t * ab_stride + h;
            dn_gates_ref(al, be, w->dt_bias + h, w->a + h, 1, al, be);
        }
        q35_linear_head(hp, w, eps, h, n_tokens, qkv, qkv_stride, z, z_stride, alpha, beta, ab_stride, state, out,
                        out_stride, chunked, scratch);
    }
}

void q35_linear_core(const q35_hparams *hp, const q35_linear_weights *w, float eps, int64_t n_tokens,
                     float *qkv, int64_t qkv_stride, const float *z, int64_t z_stride, float *alpha,
                     float *beta, int64_t ab_stride, float *state, float *out, int64_t out_stride,
                     bool chunked, float *scratch) {
    for (int64_t kh = 0; kh < hp->n_k_heads; kh++)
        q35_linear_group(hp, w, eps, kh, n_tokens, qkv, qkv_stride, z, z_stride, alpha, beta, ab_stride, state, out,
                         out_stride, chunked, scratch);
}

/* ---- loading (model.c's hooks) ------------------------------------------------------ */

vt_status q35_model_hparams(model *m) {
    q35_hparams *hp = calloc(1, sizeof *hp);
    if (!hp) return vt_errorf(VT_E_NOMEM, "out of memory");
    const char *arch = m->hp.arch == MODEL_ARCH_QWEN35MOE ? "qwen35moe" : "qwen35";
    const vt_status s = q35_hparams_load(&m->gguf, arch, m->hp.n_layer, m->hp.n_ctx_train, hp);
    if (s != VT_OK) {
        free(hp);
        return s;
    }
    /* llama.cpp's converter can write the MTP layers alone (mtp-*.gguf, for a draft
     * context beside the trunk's file): nothing there for vt to run */
    if (hp->n_nextn > 0 && !gguf_find_tensor(&m->gguf, "blk.0.attn_norm.weight")) {
        const vt_status e = vt_errorf(VT_E_UNSUPPORTED,
                                      "required tensor 'blk.0.attn_norm.weight' is missing: the file holds only "
                                      "the %lld multi-token-prediction layers ('%s.nextn_predict_layers'), not the "
                                      "model",
                                      (long long)hp->n_nextn, arch);
        q35_hparams_free(hp);
        free(hp);
        return e;
    }
    m->q35 = hp;
    m->hp.n_layer = hp->n_layer;
    return VT_OK;
}

#define DOT(w) (quant_traits_get((w).type)->dot_type)

vt_status q35_load_layer(model *m, int64_t il, layer_weights *L) {
    const model_hparams *hp = &m->hp;
    const q35_hparams *q = m->q35;
    const int64_t d = hp->n_embd, q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    char name[128];
#define LNAME(fmt) (snprintf(name, sizeof name, "blk.%lld." fmt, (long long)il), name)
    VT_TRY(model_load_vec(m, LNAME("attn_norm.weight"), d, true, &L->attn_norm));
    VT_TRY(model_load_vec(m, LNAME("post_attention_norm.weight"), d, true, &L->ffn_norm));
    if (q->is_linear[il]) {
        q35_layer *lin = calloc(1, sizeof *lin);
        if (!lin || model_own_buffer(m, lin) != VT_OK) {
            free(lin);
            return vt_errorf(VT_E_NOMEM, "out of memory");
        }
        L->lin = lin;
        if (!gguf_find_tensor(&m->gguf, LNAME("attn_qkv.weight")))
            return vt_errorf(VT_E_FORMAT,
                             "required tensor '%s' is missing (the layer pattern makes layer %lld a linear "
                             "attention layer)",
                             name, (long long)il);
        VT_TRY(model_load_mat(m, LNAME("attn_qkv.weight"), d, q->conv_ch, true, &lin->wqkv));
        VT_TRY(model_load_mat(m, LNAME("attn_gate.weight"), d, q->d_inner, true, &lin->wz));
        VT_TRY(model_load_mat(m, LNAME("ssm_alpha.weight"), d, q->n_v_heads, true, &lin->walpha));
        VT_TRY(model_load_mat(m, LNAME("ssm_beta.weight"), d, q->n_v_heads, true, &lin->wbeta));
        VT_TRY(model_load_mat(m, LNAME("ssm_out.weight"), q->d_inner, d, true, &lin->ssm_out));
        VT_TRY(model_load_vec(m, LNAME("ssm_dt.bias"), q->n_v_heads, true, &lin->w.dt_bias));
        VT_TRY(model_load_vec(m, LNAME("ssm_a"), q->n_v_heads, true, &lin->w.a));
        VT_TRY(model_load_vec(m, LNAME("ssm_norm.weight"), q->d_state, true, &lin->w.norm_w));
        const gguf_tensor *t = gguf_find_tensor(&m->gguf, LNAME("ssm_conv1d.weight"));
        if (!t) return vt_errorf(VT_E_FORMAT, "required tensor '%s' is missing", name);
        if (t->n_dims != 2 || t->ne[0] != q->conv_kernel || t->ne[1] != q->conv_ch || t->type != VT_DTYPE_F32)
            return vt_errorf(VT_E_FORMAT, "tensor '%s' has shape [%lld, %lld] of type %s, expected [%lld, %lld] F32",
                             name, (long long)t->ne[0], (long long)t->ne[1], quant_traits_get(t->type)->name,
                             (long long)q->conv_kernel, (long long)q->conv_ch);
        float *cw = malloc(sizeof(float) * (size_t)(q->conv_kernel * q->conv_ch));
        if (!cw || model_own_buffer(m, cw) != VT_OK) {
            free(cw);
            return vt_errorf(VT_E_NOMEM, "out of memory");
        }
        const float *src = t->data; /* (conv_ch, K): the file's rows are channels */
        for (int64_t c = 0; c < q->conv_ch; c++)
            for (int64_t i = 0; i < q->conv_kernel; i++) cw[i * q->conv_ch + c] = src[c * q->conv_kernel + i];
        lin->w.conv_w = cw;
        m->weight_bytes += t->bytes;
        if (DOT(lin->wqkv) != DOT(lin->wz) || DOT(lin->walpha) != DOT(lin->wbeta))
            return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: attn_qkv/attn_gate and ssm_alpha/ssm_beta need one "
                                               "activation type each",
                             (long long)il);
    } else {
        L->attn_gated = true;
        if (!gguf_find_tensor(&m->gguf, LNAME("attn_q.weight")))
            return vt_errorf(VT_E_FORMAT,
                             "required tensor '%s' is missing (the layer pattern makes layer %lld a full "
                             "attention layer)",
                             name, (long long)il);
        VT_TRY(model_load_mat(m, LNAME("attn_q.weight"), d, 2 * q_dim, true, &L->wq));
        VT_TRY(model_load_mat(m, LNAME("attn_k.weight"), d, kv_dim, true, &L->wk));
        VT_TRY(model_load_mat(m, LNAME("attn_v.weight"), d, kv_dim, true, &L->wv));
        VT_TRY(model_load_mat(m, LNAME("attn_output.weight"), q_dim, d, true, &L->wo));
        VT_TRY(model_load_vec(m, LNAME("attn_q_norm.weight"), hp->head_dim, true, &L->q_norm));
        VT_TRY(model_load_vec(m, LNAME("attn_k_norm.weight"), hp->head_dim, true, &L->k_norm));
        if (DOT(L->wq) != DOT(L->wk) || DOT(L->wq) != DOT(L->wv))
            return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: attn_q/k/v need one activation type", (long long)il);
    }
#undef LNAME
    return model_load_ffn(m, il, L);
}

int64_t q35_layer_order(const q35_layer *L, mm_weight **out) {
    mm_weight *ws[] = {(mm_weight *)&L->wqkv, (mm_weight *)&L->wz, (mm_weight *)&L->walpha,
                       (mm_weight *)&L->wbeta, (mm_weight *)&L->ssm_out};
    if (out)
        for (int i = 0; i < 5; i++) out[i] = ws[i];
    return 5;
}

/* ---- the forward pass's linear layers ------------------------------------------------- */

static size_t max_z(size_t a, size_t b) { return a > b ? a : b; }

vt_status q35_fwd_create(const model *m, int64_t max_tokens, int nth, q35_fwd **out) {
    const q35_hparams *q = m->q35;
    const model_hparams *hp = &m->hp;
    const size_t T = (size_t)max_tokens, qd = (size_t)(hp->n_head * hp->head_dim);
    q35_fwd *h = calloc(1, sizeof *h);
    if (!h) return vt_errorf(VT_E_NOMEM, "out of memory");
    size_t xs = 0, act = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const q35_layer *L = m->layers[il].lin;
        if (!L) continue;
        xs = max_z(xs, mm_act_row_bytes(L->walpha.type, hp->n_embd));
        act = max_z(act, mm_act_row_bytes(L->wqkv.type, hp->n_embd));
        act = max_z(act, mm_act_row_bytes(L->ssm_out.type, q->d_inner));
    }
    h->xq2_stride = (xs + 63) / 64 * 64;
    h->act_bytes = act;
    h->scratch_floats = q35_core_scratch_floats(q);
    h->qkv = malloc(sizeof(float) * T * (size_t)q->conv_ch);
    h->z = malloc(sizeof(float) * T * (size_t)q->d_inner);
    h->alpha = malloc(sizeof(float) * T * (size_t)q->n_v_heads);
    h->beta = malloc(sizeof(float) * T * (size_t)q->n_v_heads);
    h->out = malloc(sizeof(float) * T * (size_t)q->d_inner);
    h->qg = malloc(sizeof(float) * T * 2 * qd);
    h->gate = malloc(sizeof(float) * T * qd);
    h->xq2 = malloc(T * h->xq2_stride + 1);
    h->scratch = malloc(sizeof(float) * (size_t)nth * (size_t)h->scratch_floats);
    if (!h->qkv || !h->z || !h->alpha || !h->beta || !h->out || !h->qg || !h->gate || !h->xq2 || !h->scratch) {
        q35_fwd_destroy(h);
        return vt_errorf(VT_E_NOMEM, "out of memory for the linear layers' %lld-token workspace",
                         (long long)max_tokens);
    }
    *out = h;
    return VT_OK;
}

void q35_fwd_destroy(q35_fwd *h) {
    if (!h) return;
    free(h->qkv), free(h->z), free(h->alpha), free(h->beta), free(h->out);
    free(h->qg), free(h->gate), free(h->xq2), free(h->scratch);
    free(h);
}

/* q35_linear_group on tokens [t0, t0 + n) of the forward pass's buffers. */
static void fwd_group(q35_fwd *h, const q35_hparams *q, const q35_linear_weights *w, float eps, int64_t kh, int64_t t0,
                      int64_t n, float *state, float *scratch) {
    const int64_t C = q->conv_ch, D = q->d_inner, nv = q->n_v_heads;
    q35_linear_group(q, w, eps, kh, n, h->qkv + t0 * C, C, h->z + t0 * D, D, h->alpha + t0 * nv, h->beta + t0 * nv, nv,
                     state, h->out + t0 * D, D, false, scratch);
}

void q35_fwd_linear(q35_fwd *h, const model *m, const layer_weights *L, int64_t il, const fwd_batch *b,
                    kv_cache *kv, uint8_t *xq, float *tmp, tp_pool *run, int ith, int nth) {
    const q35_hparams *q = m->q35;
    const q35_layer *lin = L->lin;
    const int64_t T = b->n_tokens, C = q->conv_ch, D = q->d_inner, nv = q->n_v_heads, d = m->hp.n_embd;
    /* the input projections: one step where alpha/beta read xq too */
    const bool one_input = DOT(lin->walpha) == DOT(lin->wqkv);
    {
        const mm_weight *ws[4] = {&lin->wqkv, &lin->wz, &lin->walpha, &lin->wbeta};
        float *ys[4] = {h->qkv, h->z, h->alpha, h->beta};
        const int64_t ld[4] = {C, D, nv, nv};
        mm_compute_multi(ws, ys, ld, one_input ? 4 : 2, xq, T, run, ith);
        if (!one_input) {
            tp_barrier(run);
            mm_compute_multi(ws + 2, ys + 2, ld + 2, 2, h->xq2, T, run, ith);
        }
    }
    tp_barrier(run);
    /* The core: items (sequence, k-head group), claimed one at a time (a prefill chunk's
     * groups beside a batch's decodes: a static split would leave one thread all the
     * prefill), each doing its sequence's runs of consecutive tokens in batch order: the
     * conv of the group's channels, norms, gates, delta rule and output gate. Which thread
     * runs an item changes nothing in its bits. The recurrent form whatever the run's
     * length, so a prompt gives the same bits prefilled in one chunk or in many. */
    const int32_t grp = kv->layer_group[il];
    const int64_t nk = q->n_k_heads, n_items = b->n_seqs * nk;
    float *scratch = h->scratch + (size_t)ith * (size_t)h->scratch_floats;
    for (int64_t it = nth > 1 ? tp_claim(run, 1) : 0; it < n_items; it = nth > 1 ? tp_claim(run, 1) : it + 1) {
        const int32_t s = (int32_t)(it / nk);
        const int64_t kh = it % nk;
        const fwd_seq *sq = &b->seqs[s];
        float *state = (float *)kv_state_slot(kv, il, sq->blocks[grp][0]);
        for (int64_t t0 = 0, t1; t0 < T; t0 = t1) {
            for (t1 = t0 + 1; t1 < T && b->seq[t1] == b->seq[t0]; t1++) {}
            if (b->seq[t0] != s) continue;
            if (b->pos[t0] == 0) q35_linear_group_reset(q, kh, state);
            /* a snapshot inside the run (fwd_seq): the run in two pieces, which give the
             * bits of one (cpu/deltanet.h), the state copied between */
            const int64_t p0 = b->pos[t0], n = t1 - t0;
            const bool snap = sq->snap_pos > p0 && sq->snap_pos <= p0 + n;
            const int64_t cut = snap ? sq->snap_pos - p0 : n;
            fwd_group(h, q, &lin->w, m->hp.rms_eps, kh, t0, cut, state, scratch);
            if (snap) q35_linear_group_copy(q, kh, (float *)kv_state_slot(kv, il, sq->snap_slot), state);
            if (cut < n) fwd_group(h, q, &lin->w, m->hp.rms_eps, kh, t0 + cut, n - cut, state, scratch);
        }
    }
    tp_barrier(run);
    mm_quantize(lin->ssm_out.type, h->out, D, T, D, xq, ith, nth);
    tp_barrier(run);
    mm_compute(&lin->ssm_out, xq, T, tmp, d, run, ith);
    tp_barrier(run);
}
#undef DOT
