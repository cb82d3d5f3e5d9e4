/* Layer kinds (layer_kind.h): the forward pass's per-layer branches, decided
 * once from what the loader found. */
#include "model/layer_kind.h"

#include "model/model.h"
#include "quant/quant.h"

#include <stdio.h>

/* How a sublayer's output joins x where it is one float row (not experts):
 * the post-norm first (gemma), else the residual scale (granite), else the
 * bias (gpt-oss), as the forward pass has always taken them. */
static layer_out out_of(const model_hparams *hp, const float *post, const float *bias) {
    if (post) return LAYER_OUT_POST_NORM;
    if (hp->residual_scale != 1.0f) return LAYER_OUT_SCALED;
    if (bias) return LAYER_OUT_BIAS;
    return LAYER_OUT_ADD;
}

vt_status layer_kind_decide(const model *m, int64_t il, layer_kind *out) {
    const model_hparams *hp = &m->hp;
    const layer_weights *L = &m->layers[il];
    layer_kind k = {.mixer = L->lin ? LAYER_MIXER_DELTANET : LAYER_MIXER_ATTN};
    if ((L->attn_norm != NULL) != (L->ffn_norm != NULL))
        return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: a norm before %s but none before %s is not supported",
                         (long long)il, L->attn_norm ? "attention" : "the FFN", L->attn_norm ? "the FFN" : "attention");
    k.pre_norm = L->attn_norm != NULL;
    if (k.mixer == LAYER_MIXER_ATTN) {
        const bool swa_rope = hp->rope_freq_base_swa != hp->rope_freq_base ||
                              hp->rope_freq_scale_swa != hp->rope_freq_scale ||
                              hp->rope_mscale_swa != hp->rope_mscale || hp->yarn_ext_swa != hp->yarn_ext;
        k.rope = L->no_rope                          ? LAYER_ROPE_NONE
                 : L->attn.window > 0 && swa_rope    ? LAYER_ROPE_SWA
                                                     : LAYER_ROPE_BASE;
        if ((L->q_norm != NULL) != (L->k_norm != NULL) || (L->q_norm_row != NULL) != (L->k_norm_row != NULL) ||
            (L->q_norm && L->q_norm_row))
            return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: attn_q_norm and attn_k_norm must be both present or "
                                               "both absent, per head or per row",
                             (long long)il);
        k.qk_norm = L->q_norm_row ? LAYER_QK_NORM_ROW : L->q_norm ? LAYER_QK_NORM_HEAD : LAYER_QK_NORM_NONE;
        if (L->attn_gated && L->wg.data)
            return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: a gated attn_q and an attn_gate together", (long long)il);
        k.gate = L->attn_gated ? LAYER_GATE_IN_Q : L->wg.data ? LAYER_GATE_MATRIX : LAYER_GATE_NONE;
        k.qkv_bias = L->bk != NULL; /* the loaders take Q, K, V biases all three or none */
        k.q_temp = hp->attn_temp_scale != 0.0f;
    }
    k.attn_out = out_of(hp, L->attn_post_norm, L->bo);
    k.ffn = hp->n_expert == 0    ? LAYER_FFN_DENSE
            : hp->n_ff_shexp > 0 ? LAYER_FFN_MOE_SHARED
                                 : LAYER_FFN_MOE;
    if (k.ffn != LAYER_FFN_DENSE)
        k.moe_split = hp->act != MOE_ACT_SILU || L->exp_gate_b != NULL || L->exp_up_b != NULL;
    if (k.ffn == LAYER_FFN_MOE_SHARED)
        k.shexp_apart = quant_traits_get(L->shexp_gate.type)->dot_type != quant_traits_get(L->exp_gate[0].type)->dot_type;
    k.ffn_out = k.ffn == LAYER_FFN_MOE          ? LAYER_OUT_MOE
                : k.ffn == LAYER_FFN_MOE_SHARED ? LAYER_OUT_MOE_SHARED
                                                : out_of(hp, L->ffn_post_norm, NULL);
    *out = k;
    return VT_OK;
}

vt_status layer_kind_fill(model *m) {
    for (int64_t il = 0; il < m->hp.n_layer; il++) VT_TRY(layer_kind_decide(m, il, &m->layers[il].kind));
    return VT_OK;
}

static const char *const out_names[] = {
    [LAYER_OUT_NONE] = "none",     [LAYER_OUT_ADD] = "add",   [LAYER_OUT_POST_NORM] = "post_norm",
    [LAYER_OUT_SCALED] = "scaled", [LAYER_OUT_BIAS] = "bias", [LAYER_OUT_MOE] = "moe",
    [LAYER_OUT_MOE_SHARED] = "moe_shared",
};

const char *layer_kind_str(const layer_kind *k, char *out, size_t cap) {
    static const char *const rope[] = {[LAYER_ROPE_NONE] = "none", [LAYER_ROPE_BASE] = "base",
                                       [LAYER_ROPE_SWA] = "swa"};
    static const char *const qk[] = {[LAYER_QK_NORM_NONE] = "none", [LAYER_QK_NORM_HEAD] = "head",
                                     [LAYER_QK_NORM_ROW] = "row"};
    static const char *const gate[] = {[LAYER_GATE_NONE] = "none", [LAYER_GATE_IN_Q] = "in_q",
                                       [LAYER_GATE_MATRIX] = "matrix"};
    static const char *const ffn[] = {[LAYER_FFN_DENSE] = "dense", [LAYER_FFN_MOE] = "moe",
                                      [LAYER_FFN_MOE_SHARED] = "moe_shared"};
    const bool post = k->attn_out == LAYER_OUT_POST_NORM || k->ffn_out == LAYER_OUT_POST_NORM;
    const char *norms = k->pre_norm ? (post ? "sandwich" : "pre") : (post ? "post" : "none");
    char attn[96] = "";
    if (k->mixer == LAYER_MIXER_ATTN)
        snprintf(attn, sizeof attn, " rope=%s qk=%s gate=%s%s%s", rope[k->rope], qk[k->qk_norm], gate[k->gate],
                 k->qkv_bias ? " qkv_bias" : "", k->q_temp ? " q_temp" : "");
    snprintf(out, cap, "%s%s norms=%s ffn=%s%s%s out=%s/%s", k->mixer == LAYER_MIXER_ATTN ? "attn" : "deltanet",
             attn, norms, ffn[k->ffn], k->moe_split ? " split" : "", k->shexp_apart ? " apart" : "",
             out_names[k->attn_out], out_names[k->ffn_out]);
    return out;
}
