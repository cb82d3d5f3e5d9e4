/* Qwen3.5/3.6 hybrids: hyperparameters and the linear layer's core (qwen35.h). */
#include "model/qwen35.h"

#include "base/status.h"
#include "cpu/deltanet.h"

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
    if (gguf_get_arr(g, key_of(key, sizeof key, arch, "attention.recurrent_layers"), GGUF_TYPE_COUNT, &arr) ==
        VT_OK) {
        if ((int64_t)arr->v.arr.n != block_count || arr->v.arr.type == GGUF_TYPE_STRING ||
            arr->v.arr.type == GGUF_TYPE_ARRAY || arr->v.arr.type == GGUF_TYPE_FLOAT32 ||
            arr->v.arr.type == GGUF_TYPE_FLOAT64) {
            free(hp.is_linear);
            return vt_errorf(VT_E_FORMAT, "key '%s' has %llu elements of type %s; want %lld booleans (block_count)",
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

void q35_linear_core(const q35_hparams *hp, const q35_linear_weights *w, float eps, int64_t n_tokens,
                     float *qkv, int64_t qkv_stride, const float *z, int64_t z_stride, float *alpha,
                     float *beta, int64_t ab_stride, float *state, float *out, int64_t out_stride,
                     bool chunked, float *scratch) {
    const int64_t ds = hp->d_state, nk = hp->n_k_heads, nv = hp->n_v_heads;
    float *conv_state = state, *dn_state = state + (hp->conv_kernel - 1) * hp->conv_ch;

    dn_conv1d_silu_ref(qkv, qkv_stride, n_tokens, hp->conv_ch, w->conv_w, hp->conv_kernel, conv_state, qkv,
                       qkv_stride);
    for (int64_t t = 0; t < n_tokens; t++) {
        float *row = qkv + t * qkv_stride;
        for (int64_t h = 0; h < 2 * nk; h++) dn_l2_norm_ref(row + h * ds, ds, eps); /* q heads, then k heads */
        dn_gates_ref(alpha + t * ab_stride, beta + t * ab_stride, w->dt_bias, w->a, nv, alpha + t * ab_stride,
                     beta + t * ab_stride);
    }
    const float scale = 1.0f / sqrtf((float)ds);
    for (int64_t h = 0; h < nv; h++) {
        /* v-head h reads k-head h % nk (ggml_repeat_4d tiles the k heads) */
        const float *q = qkv + (h % nk) * ds, *k = qkv + hp->key_dim + (h % nk) * ds;
        const float *v = qkv + 2 * hp->key_dim + h * ds;
        float *S = dn_state + h * ds * ds, *o = out + h * ds;
        if (chunked)
            dn_delta_rule_chunked_ref(n_tokens, ds, ds, q, qkv_stride, k, qkv_stride, v, qkv_stride, alpha + h,
                                      beta + h, ab_stride, scale, S, o, out_stride, scratch);
        else
            dn_delta_rule_ref(n_tokens, ds, ds, q, qkv_stride, k, qkv_stride, v, qkv_stride, alpha + h, beta + h,
                              ab_stride, scale, S, o, out_stride);
    }
    for (int64_t t = 0; t < n_tokens; t++)
        for (int64_t h = 0; h < nv; h++) {
            float *o = out + t * out_stride + h * ds;
            dn_gated_norm_ref(o, z + t * z_stride + h * ds, w->norm_w, ds, eps, o);
        }
}
