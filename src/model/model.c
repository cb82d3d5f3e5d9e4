/* Model loading: hyperparameters from GGUF metadata, weights as views into the
 * mapping. A missing required key, a tensor of the wrong shape or an unsupported
 * architecture is an error that names the key or tensor, never a guess. */
#include "model/model.h"

#include "base/log.h"
#include "base/size.h"
#include "cpu/attention.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>

static vt_status model_own(model *m, void *p) {
    if (m->n_owned == m->cap_owned) {
        int64_t cap = m->cap_owned ? m->cap_owned * 2 : 16;
        void **o = realloc(m->owned, (size_t)cap * sizeof *o);
        if (!o) return vt_errorf(VT_E_NOMEM, "out of memory");
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return VT_OK;
}

static const char *const arch_names[] = {
    [MODEL_ARCH_LLAMA] = "llama",
    [MODEL_ARCH_QWEN2] = "qwen2",
    [MODEL_ARCH_QWEN3] = "qwen3",
    [MODEL_ARCH_QWEN3MOE] = "qwen3moe",
    [MODEL_ARCH_GEMMA2] = "gemma2",
    [MODEL_ARCH_GEMMA3] = "gemma3",
    [MODEL_ARCH_OLMO2] = "olmo2",
    [MODEL_ARCH_SMOLLM3] = "smollm3",
    [MODEL_ARCH_GRANITE] = "granite",
    [MODEL_ARCH_QWEN35] = "qwen35",
    [MODEL_ARCH_GPT_OSS] = "gpt-oss",
    [MODEL_ARCH_QWEN35MOE] = "qwen35moe",
    [MODEL_ARCH_PHI3] = "phi3",
    [MODEL_ARCH_GLM4] = "glm4",
    [MODEL_ARCH_MISTRAL3] = "mistral3",
    [MODEL_ARCH_MUSE_GLIMMER] = "muse-glimmer",
};

/* Expert gate/up and down rows per slice (model.h): a multiple of every
 * activation block (at most 256 elements), so each slice's share of a token's
 * quantized h is whole blocks, and of the 16-row packed groups. */
#define MOE_FF_SLICE 256
#define MOE_DOWN_SLICE 256

/* "<arch>.<suffix>", in the next of ARCH_KEY_BUFS thread-local buffers, so that
 * one message may name several keys: a result stays valid for the thread's next
 * ARCH_KEY_BUFS - 1 calls. */
#define ARCH_KEY_BUFS 4
static const char *arch_key(const model *m, const char *suffix) {
    static _Thread_local char bufs[ARCH_KEY_BUFS][256];
    static _Thread_local unsigned next;
    char *buf = bufs[next++ % ARCH_KEY_BUFS];
    snprintf(buf, sizeof bufs[0], "%s.%s", arch_names[m->hp.arch], suffix);
    return buf;
}

static vt_status get_i64_req(const model *m, const char *suffix, int64_t *out) {
    const char *key = arch_key(m, suffix);
    vt_status s = gguf_get_i64(&m->gguf, key, out);
    if (s == VT_E_NOT_FOUND)
        return vt_errorf(VT_E_FORMAT, "required key '%s' is missing", key);
    if (s != VT_OK) return s;
    if (*out <= 0 || *out > ((int64_t)1 << 31))
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld is out of range", key, (long long)*out);
    return VT_OK;
}

static vt_status get_i64_opt(const model *m, const char *suffix, int64_t dflt, int64_t *out) {
    vt_status s = gguf_get_i64(&m->gguf, arch_key(m, suffix), out);
    if (s == VT_E_NOT_FOUND) {
        *out = dflt;
        return VT_OK;
    }
    if (s != VT_OK) return s;
    if (*out <= 0 || *out > ((int64_t)1 << 31))
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld is out of range", arch_key(m, suffix),
                         (long long)*out);
    return VT_OK;
}

static vt_status get_f32_opt(const model *m, const char *suffix, float dflt, float *out) {
    vt_status s = gguf_get_f32(&m->gguf, arch_key(m, suffix), out);
    if (s == VT_E_NOT_FOUND) {
        *out = dflt;
        return VT_OK;
    }
    return s;
}

/* expert_count and expert_used_count: required by qwen3moe and gpt-oss,
 * optional (0: a dense FFN) for llama, absent elsewhere. */
static vt_status load_experts_hparams(model *m) {
    model_hparams *hp = &m->hp;
    hp->n_expert = hp->n_expert_used = 0;
    if (hp->arch == MODEL_ARCH_QWEN3MOE || hp->arch == MODEL_ARCH_GPT_OSS || hp->arch == MODEL_ARCH_QWEN35MOE) {
        VT_TRY(get_i64_req(m, "expert_count", &hp->n_expert));
    } else if (hp->arch == MODEL_ARCH_LLAMA) {
        int64_t n = 0;
        vt_status s = gguf_get_i64(&m->gguf, arch_key(m, "expert_count"), &n);
        if (s == VT_E_NOT_FOUND || (s == VT_OK && n == 0)) return VT_OK; /* llama.cpp: 0 is dense */
        VT_TRY(s);
        VT_TRY(get_i64_req(m, "expert_count", &hp->n_expert));
    } else {
        return VT_OK;
    }
    if (hp->n_expert > MODEL_MAX_EXPERTS)
        return vt_errorf(VT_E_RANGE,
                         "key '%s' = %lld: mixture-of-experts layers of more than %d experts are not supported",
                         arch_key(m, "expert_count"), (long long)hp->n_expert, MODEL_MAX_EXPERTS);
    vt_status s = get_i64_req(m, "expert_used_count", &hp->n_expert_used);
    if (s != VT_OK) return s;
    if (hp->n_expert_used > hp->n_expert)
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld is more than expert_count %lld",
                         arch_key(m, "expert_used_count"), (long long)hp->n_expert_used, (long long)hp->n_expert);
    hp->gating = MOE_GATING_SOFTMAX; /* qwen3moe and llama: norm_w */
    hp->act = MOE_ACT_SILU;
    if (hp->arch == MODEL_ARCH_GPT_OSS) { /* LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT, SWIGLU_OAI */
        hp->gating = MOE_GATING_SOFTMAX_WEIGHT;
        hp->act = MOE_ACT_SWIGLU_OAI;
    }
    return VT_OK;
}

/* mistral3's YaRN keys: rope.scaling.yarn_beta_fast / _slow (32 and 1 where
 * absent; positive, fast above slow) and yarn_log_multiplier (0: none; finite,
 * >= 0). */
static vt_status yarn_mistral3_keys(model *m, float beta[2], float *log_mul) {
    static const char *const keys[2] = {"rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow"};
    for (int i = 0; i < 2; i++) {
        VT_TRY(get_f32_opt(m, keys[i], beta[i], &beta[i]));
        if (!(beta[i] > 0.0f && beta[i] < 1e6f))
            return vt_errorf(VT_E_RANGE, "key '%s' = %g is out of range (0, 1e6)", arch_key(m, keys[i]), beta[i]);
    }
    if (!(beta[0] > beta[1]))
        return vt_errorf(VT_E_RANGE, "key '%s' = %g is not above '%s' = %g", arch_key(m, keys[0]), beta[0],
                         arch_key(m, keys[1]), beta[1]);
    VT_TRY(get_f32_opt(m, "rope.scaling.yarn_log_multiplier", 0.0f, log_mul));
    if (!(*log_mul >= 0.0f && *log_mul < 1e3f))
        return vt_errorf(VT_E_RANGE, "key '%s' = %g is out of range [0, 1000)",
                         arch_key(m, "rope.scaling.yarn_log_multiplier"), *log_mul);
    return VT_OK;
}

/* ggml_rope_yarn_corr_dims: the ends of YaRN's ramp for the rope base `base`,
 * in the same float steps. */
static void yarn_corr_dims(const model_hparams *hp, float base, const float beta[2], float *low, float *high) {
    const int n_dims = (int)hp->n_rot, n_ctx_orig = (int)hp->n_ctx_orig_yarn;
    float corr[2];
    for (int i = 0; i < 2; i++)
        corr[i] = n_dims * logf(n_ctx_orig / (beta[i] * 2 * (float)M_PI)) / (2 * logf(base));
    *low = fmaxf(0.0f, floorf(corr[0]));
    *high = fminf((float)(n_dims - 1), ceilf(corr[1]));
}

/* YaRN as llama.cpp sets it up (llama_context's cparams, ggml's
 * ggml_rope_yarn_corr_dims and rope_yarn), in the same float steps: the ramp's
 * ends from the original context and the rope base, and the magnitude
 * correction mscale = attn_factor * get_mscale(factor) / (1 + 0.1 ln factor)
 * * (1 + 0.1 ln(1 / freq_scale)). */
static vt_status yarn_params(model *m, const vt_rope_params *rp) {
    model_hparams *hp = &m->hp;
    const float freq_scale = hp->rope_freq_scale, factor = 1.0f / freq_scale;
    float beta[2] = {32.0f, 1.0f}; /* beta_fast, beta_slow */
    float log_mul = 0.0f;
    if (hp->arch == MODEL_ARCH_MISTRAL3) VT_TRY(yarn_mistral3_keys(m, beta, &log_mul));
    if (rp && rp->yarn_beta_fast >= 0.0f) beta[0] = rp->yarn_beta_fast; /* the override's, as llama.cpp's cparams */
    if (rp && rp->yarn_beta_slow >= 0.0f) beta[1] = rp->yarn_beta_slow;
    if (!(beta[0] > beta[1]))
        return vt_errorf(VT_E_INVALID, "rope override: yarn_beta_fast %g is not above yarn_beta_slow %g "
                                       "(--yarn-beta-fast, --yarn-beta-slow)",
                         beta[0], beta[1]);
    float attn = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
    if (log_mul != 0.0f) /* llama.cpp: get_mscale(factor, 1) / get_mscale(factor, log_mul) */
        attn /= factor <= 1.0f ? 1.0f : 0.1f * log_mul * logf(factor) + 1.0f;
    attn *= 1.0f / (1.0f + 0.1f * logf(factor));
    attn *= hp->rope_mscale;
    /* ggml's rope takes each layer's own base and scale (llama.cpp's
     * get_rope_freq_base/scale): the sliding-window layers' ramp and magnitude
     * come from theirs */
    hp->rope_mscale = attn * (1.0f + 0.1f * logf(1.0f / freq_scale));
    hp->rope_mscale_swa = attn * (1.0f + 0.1f * logf(1.0f / hp->rope_freq_scale_swa));
    yarn_corr_dims(hp, hp->rope_freq_base, beta, &hp->yarn_low, &hp->yarn_high);
    yarn_corr_dims(hp, hp->rope_freq_base_swa, beta, &hp->yarn_low_swa, &hp->yarn_high_swa);
    return VT_OK;
}

/* vt_rope_params' ranges (vt.h); VT_E_INVALID naming the field and its flag. */
static vt_status rope_check(const vt_rope_params *rp) {
    if (rp->scaling_type < VT_ROPE_SCALING_UNSPECIFIED || rp->scaling_type > VT_ROPE_SCALING_YARN)
        return vt_errorf(VT_E_INVALID, "rope override: scaling_type %d is not none, linear or yarn (--rope-scaling)",
                         (int)rp->scaling_type);
    static const struct {
        const char *field, *flag;
        bool unset_below_zero; /* < 0 means the default; else 0 does */
        bool zero_ok;
    } rows[] = {
        {"freq_base", "--rope-freq-base", false, false},
        {"freq_scale", "--rope-freq-scale, or --rope-scale as its inverse", false, false},
        {"yarn_ext_factor", "--yarn-ext-factor", true, true},
        {"yarn_attn_factor", "--yarn-attn-factor", true, false},
        {"yarn_beta_fast", "--yarn-beta-fast", true, false},
        {"yarn_beta_slow", "--yarn-beta-slow", true, false},
    };
    const float v[] = {rp->freq_base, rp->freq_scale, rp->yarn_ext_factor, rp->yarn_attn_factor, rp->yarn_beta_fast,
                       rp->yarn_beta_slow};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (rows[i].unset_below_zero ? v[i] < 0.0f : v[i] == 0.0f) continue; /* the file's */
        if (!(isfinite(v[i]) && v[i] < 1e30f && (v[i] > 0.0f || (rows[i].zero_ok && v[i] == 0.0f))))
            return vt_errorf(VT_E_INVALID, "rope override: %s = %g is not a %s number (%s)", rows[i].field,
                             (double)v[i], rows[i].zero_ok ? "finite non-negative" : "positive", rows[i].flag);
    }
    if (rp->yarn_orig_ctx < 0 || rp->yarn_orig_ctx > MODEL_MAX_CTX)
        return vt_errorf(VT_E_INVALID, "rope override: yarn_orig_ctx %d is outside 1..%d (--yarn-orig-ctx)",
                         (int)rp->yarn_orig_ctx, MODEL_MAX_CTX);
    return VT_OK;
}

/* The caller's rope override (vt_model_params.rope) over the file's hparams, as
 * llama.cpp's llama_context sets its cparams: the scaling type (the file's where
 * unspecified, linear where the file has none; none never scales), the base, the
 * scale (the file's factor where not given), the extrapolation mix (1 under
 * YaRN, else 0: rope_yarn is a non-zero mix), YaRN's original context, the
 * magnitude where the mix is 0 (times the file's attn_factor). The sliding-window
 * layers keep the file's base and scale (llama.cpp's get_rope_freq_base/scale;
 * under YaRN their ramp and magnitude follow from those, yarn_params). Without
 * an override: the file's YaRN (mix 1), its original context, and a reach
 * declared where the file names that context. */
static vt_status rope_override(model *m, const vt_rope_params *rp) {
    model_hparams *hp = &m->hp;
    hp->yarn_ext = hp->rope_yarn ? 1.0f : 0.0f;
    hp->n_ctx_orig_yarn = hp->n_ctx_orig;
    hp->rope_reach_declared = gguf_find(&m->gguf, arch_key(m, "rope.scaling.original_context_length")) != NULL;
    hp->rope_scale_given = hp->rope_orig_given = false;
    if (!rp) return VT_OK;
    VT_TRY(rope_check(rp));
    const bool any = rp->scaling_type != VT_ROPE_SCALING_UNSPECIFIED || rp->freq_base != 0.0f ||
                     rp->freq_scale != 0.0f || rp->yarn_orig_ctx != 0 || rp->yarn_ext_factor >= 0.0f ||
                     rp->yarn_attn_factor >= 0.0f || rp->yarn_beta_fast >= 0.0f || rp->yarn_beta_slow >= 0.0f;
    if (!any) return VT_OK;
    vt_rope_scaling type = rp->scaling_type;
    gguf_str stype;
    const bool has_type = gguf_get_str(&m->gguf, arch_key(m, "rope.scaling.type"), &stype) == VT_OK;
    if (type == VT_ROPE_SCALING_UNSPECIFIED)
        type = has_type && gguf_str_eq(stype, "none")   ? VT_ROPE_SCALING_NONE
               : has_type && gguf_str_eq(stype, "yarn") ? VT_ROPE_SCALING_YARN
                                                        : VT_ROPE_SCALING_LINEAR; /* linear, longrope, absent */
    if (rp->freq_base != 0.0f) hp->rope_freq_base = rp->freq_base;
    if (rp->freq_scale != 0.0f || rp->scaling_type != VT_ROPE_SCALING_UNSPECIFIED) {
        float factor = 0.0f; /* the file's rope_freq_scale_train, whatever its type */
        VT_TRY(get_f32_opt(m, "rope.scaling.factor", 0.0f, &factor));
        if (factor == 0.0f) VT_TRY(get_f32_opt(m, "rope.scale_linear", 0.0f, &factor));
        hp->rope_freq_scale = rp->freq_scale != 0.0f ? rp->freq_scale : factor == 0.0f ? 1.0f : 1.0f / factor;
        if (type == VT_ROPE_SCALING_NONE) hp->rope_freq_scale = 1.0f;
    }
    hp->yarn_ext = rp->yarn_ext_factor >= 0.0f ? rp->yarn_ext_factor : type == VT_ROPE_SCALING_YARN ? 1.0f : 0.0f;
    hp->rope_yarn = hp->yarn_ext != 0.0f;
    if (!hp->rope_yarn && rp->yarn_attn_factor >= 0.0f) hp->rope_mscale *= rp->yarn_attn_factor;
    if (rp->yarn_orig_ctx > 0) hp->n_ctx_orig_yarn = rp->yarn_orig_ctx;
    hp->rope_scale_given = rp->freq_scale != 0.0f;
    hp->rope_orig_given = rp->yarn_orig_ctx > 0;
    hp->rope_reach_declared = hp->rope_reach_declared || hp->rope_scale_given || hp->rope_orig_given;
    return VT_OK;
}

/* A soft-cap key: absent, dflt; present, a positive finite number. */
static vt_status get_softcap(const model *m, const char *suffix, float dflt, float *out) {
    VT_TRY(get_f32_opt(m, suffix, dflt, out));
    if (!(*out > 0.0f && isfinite(*out)))
        return vt_errorf(VT_E_RANGE, "key '%s' = %g is not a positive number", arch_key(m, suffix), *out);
    return VT_OK;
}

static vt_status swa_pattern_read(model *m, int64_t dflt);

/* gemma2 and gemma3 as llama.cpp's load_arch_hparams reads them: the window and
 * its pattern (gemma2: always sliding, 4096 every other layer by default;
 * gemma3: sliding only where the file sets a window, 5 of every 6 layers by
 * default), the sliding layers' rope base (gemma2: the global one by default,
 * gemma3: 10000), the soft-caps (gemma2: 50 on the scores and 30 on the
 * logits by default; gemma3: logits only, where set), the embedding scale and
 * the attention scale (1 / sqrt(n_embd / n_head) for the 27B models, whose
 * layer counts llama.cpp keys it on; 1 / sqrt(head_dim) otherwise). */
static vt_status gemma_hparams(model *m) {
    model_hparams *hp = &m->hp;
    const bool g2 = hp->arch == MODEL_ARCH_GEMMA2;
    const char *kw = "attention.sliding_window";
    hp->ffn_act = MODEL_FFN_GELU;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    const bool big = hp->n_layer == (g2 ? 46 : 62);
    hp->attn_scale = 1.0f / sqrtf((float)(big ? hp->n_embd / hp->n_head : hp->head_dim));
    hp->n_swa = 0;
    if (g2 || gguf_find(&m->gguf, arch_key(m, kw))) {
        int64_t w = 4096;
        if (gguf_find(&m->gguf, arch_key(m, kw))) {
            VT_TRY(get_i64_req(m, kw, &w));
            if (w > hp->n_ctx_train)
                return vt_errorf(VT_E_RANGE, "key '%s' = %lld is larger than the context_length %lld",
                                 arch_key(m, kw), (long long)w, (long long)hp->n_ctx_train);
        }
        hp->n_swa = w;
        VT_TRY(swa_pattern_read(m, g2 ? 2 : 6));
        VT_TRY(get_f32_opt(m, "rope.freq_base_swa", g2 ? hp->rope_freq_base : 10000.0f, &hp->rope_freq_base_swa));
        if (!(hp->rope_freq_base_swa > 0.0f && isfinite(hp->rope_freq_base_swa)))
            return vt_errorf(VT_E_RANGE, "key '%s' = %g is not a positive number",
                             arch_key(m, "rope.freq_base_swa"), hp->rope_freq_base_swa);
        if (!g2) hp->rope_freq_scale_swa = 1.0f;
    }
    if (g2) VT_TRY(get_softcap(m, "attn_logit_softcapping", 50.0f, &hp->attn_softcap));
    if (g2 || gguf_find(&m->gguf, arch_key(m, "final_logit_softcapping")))
        VT_TRY(get_softcap(m, "final_logit_softcapping", 30.0f, &hp->final_softcap));
    return VT_OK;
}

/* llama.cpp's set_swa_pattern: with a period n > 0 layer il slides where
 * il % n < n - 1 (the last of each period attends fully); n 0: all slide. */
static bool swa_period_slides(int64_t n, int64_t il) { return n == 0 || il % n < n - 1; }

/* A per-layer attention.sliding_window_pattern (the OLMo 3 and Muse Glimmer
 * converters write one bool per layer, true where the layer slides) as
 * llama.cpp reads it. Its get_arr takes bool, i32 and u32 elements and refuses
 * any other type; a layer slides where its entry is not 0; block_count
 * entries. muse-glimmer's llama.cpp reads the array layer by layer
 * (hp->swa_layers). gemma2, gemma3, olmo2 and gpt-oss read the key only as a
 * number (get_key_or_arr into a uint32_t returns false on an array), so
 * llama.cpp ignores the array there and keeps the default period dflt: vt
 * takes an array that names that period's layers and refuses any other,
 * naming the first layer that differs. */
static vt_status swa_pattern_array(model *m, const gguf_kv *pk, int64_t dflt) {
    model_hparams *hp = &m->hp;
    const char *kp = arch_key(m, "attention.sliding_window_pattern");
    const gguf_type et = pk->v.arr.type;
    if (et != GGUF_TYPE_BOOL && et != GGUF_TYPE_INT32 && et != GGUF_TYPE_UINT32)
        return vt_errorf(VT_E_FORMAT,
                         "key '%s' is an array of %s: a per-layer pattern is one bool, i32 or u32 per layer "
                         "(llama.cpp's get_arr takes no other type)",
                         kp, gguf_type_name(et));
    if (pk->v.arr.n != (uint64_t)hp->n_layer)
        return vt_errorf(VT_E_FORMAT, "key '%s' has %llu entries, block_count is %lld", kp,
                         (unsigned long long)pk->v.arr.n, (long long)hp->n_layer);
    if (hp->arch == MODEL_ARCH_MUSE_GLIMMER) {
        uint8_t *slides = malloc((size_t)hp->n_layer);
        if (!slides || model_own(m, slides) != VT_OK) {
            free(slides);
            return vt_errorf(VT_E_NOMEM, "out of memory");
        }
        for (int64_t il = 0; il < hp->n_layer; il++) slides[il] = gguf_arr_int(pk, (uint64_t)il) != 0;
        hp->swa_layers = slides;
        hp->swa_pattern = 0;
        return VT_OK;
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const bool slides = gguf_arr_int(pk, (uint64_t)il) != 0;
        if (slides == swa_period_slides(dflt, il)) continue;
        return vt_errorf(VT_E_UNSUPPORTED,
                         "key '%s': layer %lld %s, where llama.cpp's %s ignores the array and keeps its default "
                         "period of %lld (layers %lld, %lld, ... attend fully, the others slide)",
                         kp, (long long)il, slides ? "slides" : "attends fully", arch_names[hp->arch],
                         (long long)dflt, (long long)(dflt - 1), (long long)(2 * dflt - 1));
    }
    hp->swa_pattern = dflt;
    return VT_OK;
}

/* attention.sliding_window_pattern of gemma2, gemma3, olmo2 and muse-glimmer:
 * a per-layer array (swa_pattern_array), or a period as llama.cpp's
 * set_swa_pattern takes it (0: every layer slides; at most block_count here),
 * or absent: the arch's default dflt, which may be more than the layers (then
 * all of them slide, as in llama.cpp). */
static vt_status swa_pattern_read(model *m, int64_t dflt) {
    model_hparams *hp = &m->hp;
    const char *kp = arch_key(m, "attention.sliding_window_pattern");
    const gguf_kv *pk = gguf_find(&m->gguf, kp);
    hp->swa_pattern = dflt;
    if (!pk) return VT_OK;
    if (pk->type == GGUF_TYPE_ARRAY) return swa_pattern_array(m, pk, dflt);
    VT_TRY(gguf_get_i64(&m->gguf, kp, &hp->swa_pattern));
    if (hp->swa_pattern < 0)
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld is negative", kp, (long long)hp->swa_pattern);
    if (hp->swa_pattern > hp->n_layer)
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld is more than block_count (%lld)", kp,
                         (long long)hp->swa_pattern, (long long)hp->n_layer);
    return VT_OK;
}

/* The sliding window (attention.sliding_window, required here, at most the
 * context) and its pattern (swa_pattern_read, default period 4) of olmo2 and
 * muse-glimmer. */
static vt_status swa_window_and_pattern(model *m) {
    model_hparams *hp = &m->hp;
    const char *kw = "attention.sliding_window";
    VT_TRY(get_i64_req(m, kw, &hp->n_swa));
    if (hp->n_swa > hp->n_ctx_train)
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld is larger than the context_length %lld", arch_key(m, kw),
                         (long long)hp->n_swa, (long long)hp->n_ctx_train);
    return swa_pattern_read(m, 4);
}

/* olmo2 as llama.cpp reads it: sliding windows only where the file sets one
 * (OLMo 3), 3 of every 4 layers by default, those layers on the global rope
 * base and never scaled (under YaRN too: olmo2_plain_swa_rope). Q and K are
 * normed as whole rows,
 * so a token's Q row must be n_embd wide, as llama.cpp's tensor shapes say. */
static vt_status olmo2_hparams(model *m) {
    model_hparams *hp = &m->hp;
    const char *kw = "attention.sliding_window";
    if (hp->n_head * hp->head_dim != hp->n_embd)
        return vt_errorf(VT_E_FORMAT, "olmo2: head_count %lld x key_length %lld is not embedding_length %lld",
                         (long long)hp->n_head, (long long)hp->head_dim, (long long)hp->n_embd);
    hp->n_swa = 0;
    if (!gguf_find(&m->gguf, arch_key(m, kw))) return VT_OK;
    VT_TRY(swa_window_and_pattern(m));
    /* llama.cpp reads rope.freq_base_swa here but its olmo2 graph ropes the
     * sliding layers on the global base, unscaled */
    hp->rope_freq_scale_swa = 1.0f;
    return VT_OK;
}

/* OLMo 3's sliding layers after the rope override and YaRN: llama.cpp's olmo2
 * graph ropes them on the context's base (the override's, where given) with
 * scale 1, ext_factor 0 and attn_factor 1, so no YaRN ramp and no magnitude
 * (not even rope.scaling.attn_factor's) reach them; the full layers take the
 * context's YaRN as every other arch. */
static void olmo2_plain_swa_rope(model_hparams *hp) {
    hp->rope_freq_base_swa = hp->rope_freq_base;
    hp->rope_freq_scale_swa = 1.0f;
    hp->yarn_ext_swa = 0.0f;
    hp->rope_mscale_swa = 1.0f;
}

/* A multiplier key: absent, dflt; 0 (llama.cpp: unset), dflt; else a positive
 * finite number. */
static vt_status get_multiplier(const model *m, const char *suffix, bool required, float dflt, float *out) {
    vt_status s = gguf_get_f32(&m->gguf, arch_key(m, suffix), out);
    if (s == VT_E_NOT_FOUND && required)
        return vt_errorf(VT_E_FORMAT, "required key '%s' is missing", arch_key(m, suffix));
    if (s == VT_E_NOT_FOUND || (s == VT_OK && *out == 0.0f && !required)) {
        *out = dflt;
        return VT_OK;
    }
    VT_TRY(s);
    if (!(*out > 0.0f && isfinite(*out)))
        return vt_errorf(VT_E_RANGE, "key '%s' = %g is not a positive number", arch_key(m, suffix), *out);
    return VT_OK;
}

/* granite as llama.cpp reads it: logit_scale (required; the logits are
 * divided by it), residual_scale, embedding_scale, attention.scale (0 or
 * absent: none, 1 / sqrt(head_dim)); rope.scaling.finetuned false turns rope
 * off on every layer. */
static vt_status granite_hparams(model *m) {
    model_hparams *hp = &m->hp;
    VT_TRY(get_multiplier(m, "logit_scale", true, 1.0f, &hp->logit_scale));
    VT_TRY(get_multiplier(m, "residual_scale", false, 1.0f, &hp->residual_scale));
    VT_TRY(get_multiplier(m, "embedding_scale", false, 1.0f, &hp->embd_scale));
    VT_TRY(get_multiplier(m, "attention.scale", false, hp->attn_scale, &hp->attn_scale));
    return VT_OK;
}

/* phi3, glm4 and mistral3 as llama.cpp's load_arch_hparams reads them. phi3:
 * a sliding_window key is ignored (llama.cpp turns Phi's SWA off). glm4:
 * rope.dimension_sections with two non-zero sections means M-RoPE (GLM-4V),
 * which vt does not run. mistral3: attention.temperature_scale (0 or absent:
 * none; else finite, scaled per rope.scaling.original_context_length). */
static vt_status dense3_hparams(model *m) {
    model_hparams *hp = &m->hp;
    if (hp->arch == MODEL_ARCH_GLM4) {
        const gguf_kv *sk = NULL;
        if (gguf_get_arr(&m->gguf, arch_key(m, "rope.dimension_sections"), GGUF_TYPE_INT32, &sk) == VT_OK &&
            sk->v.arr.n >= 2) {
            if (gguf_arr_int(sk, 0) > 0 && gguf_arr_int(sk, 1) > 0)
                return vt_errorf(VT_E_UNSUPPORTED, "key '%s': M-RoPE (GLM-4V) is not supported",
                                 arch_key(m, "rope.dimension_sections"));
        }
    }
    if (hp->arch == MODEL_ARCH_MISTRAL3) {
        VT_TRY(get_f32_opt(m, "attention.temperature_scale", 0.0f, &hp->attn_temp_scale));
        if (!(isfinite(hp->attn_temp_scale) && fabsf(hp->attn_temp_scale) < 1e3f))
            return vt_errorf(VT_E_RANGE, "key '%s' = %g is out of range (-1000, 1000)",
                             arch_key(m, "attention.temperature_scale"), hp->attn_temp_scale);
    }
    return VT_OK;
}

/* muse-glimmer as llama.cpp reads it: attention.sliding_window (required),
 * on the layers sliding_window_pattern names (required: llama.cpp's default
 * period 4 is never used, as an absent key fails its read of an array; a
 * period, or one entry per layer, read layer by layer: swa_pattern_read),
 * those layers on rope.freq_base_swa (the global base where absent), never
 * scaled, and the others without rope; logit_scale (required, multiplies the
 * logits), final_logit_softcapping where set; the
 * post-norms' epsilon 1e-8. Under YaRN the sliding layers take the ramp and
 * magnitude of their own base and scale 1 (yarn_params), as ggml's rope on
 * llama.cpp's get_rope_freq_base/scale: the ramp mixes two equal angles and
 * YaRN's magnitude (1 + 0.1 ln factor) cancels against llama.cpp's 1 / (1 +
 * 0.1 ln factor), so YaRN changes the rounding there and the context reached. */
static vt_status muse_hparams(model *m) {
    model_hparams *hp = &m->hp;
    const char *kp = arch_key(m, "attention.sliding_window_pattern");
    if (!gguf_find(&m->gguf, kp)) /* its llama.cpp reads it as an array where it is not a number */
        return vt_errorf(VT_E_FORMAT, "required key '%s' is missing", kp);
    VT_TRY(swa_window_and_pattern(m));
    VT_TRY(get_f32_opt(m, "rope.freq_base_swa", hp->rope_freq_base, &hp->rope_freq_base_swa));
    if (!(hp->rope_freq_base_swa > 0.0f && isfinite(hp->rope_freq_base_swa)))
        return vt_errorf(VT_E_RANGE, "key '%s' = %g is not a positive number", arch_key(m, "rope.freq_base_swa"),
                         hp->rope_freq_base_swa);
    hp->rope_freq_scale_swa = 1.0f;
    VT_TRY(get_multiplier(m, "logit_scale", true, 1.0f, &hp->logit_mul));
    if (gguf_find(&m->gguf, arch_key(m, "final_logit_softcapping")))
        VT_TRY(get_softcap(m, "final_logit_softcapping", 0.0f, &hp->final_softcap));
    hp->post_norm_eps = 1e-8f;
    return VT_OK;
}

static vt_status load_hparams(model *m, const vt_rope_params *rope) {
    gguf_str arch;
    vt_status s = gguf_get_str(&m->gguf, "general.architecture", &arch);
    if (s == VT_E_NOT_FOUND)
        return vt_errorf(VT_E_FORMAT, "required key 'general.architecture' is missing");
    if (s != VT_OK) return s;
    model_hparams *hp = &m->hp;
    if (gguf_str_eq(arch, "llama")) {
        hp->arch = MODEL_ARCH_LLAMA;
        hp->rope = MODEL_ROPE_NORM;
    } else if (gguf_str_eq(arch, "qwen2")) {
        hp->arch = MODEL_ARCH_QWEN2;
        hp->rope = MODEL_ROPE_NEOX;
    } else if (gguf_str_eq(arch, "qwen3")) {
        hp->arch = MODEL_ARCH_QWEN3;
        hp->rope = MODEL_ROPE_NEOX;
    } else if (gguf_str_eq(arch, "qwen3moe")) {
        hp->arch = MODEL_ARCH_QWEN3MOE;
        hp->rope = MODEL_ROPE_NEOX;
    } else if (gguf_str_eq(arch, "gemma2")) {
        hp->arch = MODEL_ARCH_GEMMA2;
        hp->rope = MODEL_ROPE_NEOX;
    } else if (gguf_str_eq(arch, "gemma3")) {
        hp->arch = MODEL_ARCH_GEMMA3;
        hp->rope = MODEL_ROPE_NEOX;
    } else if (gguf_str_eq(arch, "olmo2")) {
        hp->arch = MODEL_ARCH_OLMO2;
        hp->rope = MODEL_ROPE_NEOX;
    } else if (gguf_str_eq(arch, "smollm3")) {
        hp->arch = MODEL_ARCH_SMOLLM3;
        hp->rope = MODEL_ROPE_NORM;
    } else if (gguf_str_eq(arch, "granite")) {
        hp->arch = MODEL_ARCH_GRANITE;
        hp->rope = MODEL_ROPE_NORM;
    } else if (gguf_str_eq(arch, "qwen35")) {
        hp->arch = MODEL_ARCH_QWEN35;
        hp->rope = MODEL_ROPE_NEOX; /* M-RoPE with every section at the text position */
    } else if (gguf_str_eq(arch, "gpt-oss")) {
        hp->arch = MODEL_ARCH_GPT_OSS;
        hp->rope = MODEL_ROPE_NEOX;
    } else if (gguf_str_eq(arch, "qwen35moe")) {
        hp->arch = MODEL_ARCH_QWEN35MOE;
        hp->rope = MODEL_ROPE_NEOX; /* as qwen35 */
    } else if (gguf_str_eq(arch, "phi3")) {
        hp->arch = MODEL_ARCH_PHI3;
        hp->rope = MODEL_ROPE_NEOX;
    } else if (gguf_str_eq(arch, "glm4")) {
        hp->arch = MODEL_ARCH_GLM4;
        hp->rope = MODEL_ROPE_NORM;
    } else if (gguf_str_eq(arch, "mistral3")) {
        hp->arch = MODEL_ARCH_MISTRAL3;
        hp->rope = MODEL_ROPE_NORM;
    } else if (gguf_str_eq(arch, "muse-glimmer")) {
        hp->arch = MODEL_ARCH_MUSE_GLIMMER;
        hp->rope = MODEL_ROPE_NORM;
    } else {
        return vt_errorf(VT_E_UNSUPPORTED,
                         "architecture '%.*s' is not supported (vt runs llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, olmo2, smollm3, granite, qwen35, qwen35moe, gpt-oss, phi3, glm4, mistral3, muse-glimmer)",
                         (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
    }
    VT_TRY(get_i64_req(m, "block_count", &hp->n_layer));
    VT_TRY(get_i64_req(m, "embedding_length", &hp->n_embd));
    VT_TRY(load_experts_hparams(m));
    if (hp->n_expert == 0 || gguf_find(&m->gguf, arch_key(m, "feed_forward_length")))
        VT_TRY(get_i64_req(m, "feed_forward_length", &hp->n_ff));
    if (hp->n_expert > 0) {
        /* qwen3moe: expert_feed_forward_length, else n_ff / n_expert_used (llama.cpp);
         * gpt-oss: expert_feed_forward_length, required; llama's experts are
         * feed_forward_length wide */
        if (hp->arch == MODEL_ARCH_GPT_OSS)
            VT_TRY(get_i64_req(m, "expert_feed_forward_length", &hp->n_ff_exp));
        else if (hp->arch == MODEL_ARCH_QWEN3MOE || hp->arch == MODEL_ARCH_QWEN35MOE)
            VT_TRY(get_i64_opt(m, "expert_feed_forward_length", hp->n_ff / hp->n_expert_used, &hp->n_ff_exp));
        else
            hp->n_ff_exp = hp->n_ff;
        if (hp->n_ff_exp <= 0)
            return vt_errorf(VT_E_FORMAT, "required key '%s' is missing",
                             arch_key(m, "expert_feed_forward_length"));
    }
    hp->n_ff_shexp = 0;
    if (hp->arch == MODEL_ARCH_QWEN35MOE) { /* llama.cpp: the shared expert is n_ff wide by default */
        VT_TRY(get_i64_opt(m, "expert_shared_feed_forward_length", hp->n_ff, &hp->n_ff_shexp));
        if (hp->n_ff_shexp <= 0)
            return vt_errorf(VT_E_FORMAT, "required key '%s' is missing",
                             arch_key(m, "expert_shared_feed_forward_length"));
    }
    VT_TRY(get_i64_req(m, "attention.head_count", &hp->n_head));
    VT_TRY(get_i64_opt(m, "attention.head_count_kv", hp->n_head, &hp->n_head_kv));
    VT_TRY(get_i64_opt(m, "context_length", 2048, &hp->n_ctx_train));
    /* contexts and the engine take n_ctx_train as an int32 context size, capped at 2^24 */
    if (hp->n_ctx_train > MODEL_MAX_CTX)
        return vt_errorf(VT_E_RANGE, "key '%s' = %lld is past vt's context limit of %d tokens",
                         arch_key(m, "context_length"), (long long)hp->n_ctx_train, MODEL_MAX_CTX);
    /* Every layer has at least 9 tensors (2 norms, q/k/v/o, gate/up/down; 6 where
     * q/k/v and gate/up may be fused: phi3, glm4): an absurd block_count is
     * refused here, before the layer table is allocated. */
    const int64_t per_layer = hp->arch == MODEL_ARCH_PHI3 || hp->arch == MODEL_ARCH_GLM4 ? 6 : 9;
    if (hp->n_layer > m->gguf.n_tensors / per_layer)
        return vt_errorf(VT_E_FORMAT, "block_count %lld needs at least %lld tensors, the file has %lld",
                         (long long)hp->n_layer, (long long)hp->n_layer * per_layer, (long long)m->gguf.n_tensors);
    if (hp->n_embd % hp->n_head != 0 && gguf_find(&m->gguf, arch_key(m, "attention.key_length")) == NULL)
        return vt_errorf(VT_E_FORMAT, "embedding_length %lld is not a multiple of head_count %lld",
                         (long long)hp->n_embd, (long long)hp->n_head);
    VT_TRY(get_i64_opt(m, "attention.key_length", hp->n_embd / hp->n_head, &hp->head_dim));
    int64_t v_len;
    VT_TRY(get_i64_opt(m, "attention.value_length", hp->head_dim, &v_len));
    if (v_len != hp->head_dim)
        return vt_errorf(VT_E_UNSUPPORTED, "attention.value_length %lld differs from key_length %lld",
                         (long long)v_len, (long long)hp->head_dim);
    if (hp->head_dim < 1 || hp->head_dim > ATTN_HEAD_DIM_MAX)
        return vt_errorf(VT_E_UNSUPPORTED, "attention.key_length %lld is outside 1..%d",
                         (long long)hp->head_dim, ATTN_HEAD_DIM_MAX);
    if (hp->n_head % hp->n_head_kv != 0)
        return vt_errorf(VT_E_FORMAT, "head_count %lld is not a multiple of head_count_kv %lld",
                         (long long)hp->n_head, (long long)hp->n_head_kv);
    VT_TRY(get_i64_opt(m, "rope.dimension_count", hp->head_dim, &hp->n_rot));
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return vt_errorf(VT_E_FORMAT, "rope.dimension_count %lld is invalid for head size %lld",
                         (long long)hp->n_rot, (long long)hp->head_dim);
    s = gguf_get_f32(&m->gguf, arch_key(m, "attention.layer_norm_rms_epsilon"), &hp->rms_eps);
    if (s == VT_E_NOT_FOUND)
        return vt_errorf(VT_E_FORMAT, "required key '%s' is missing",
                         arch_key(m, "attention.layer_norm_rms_epsilon"));
    VT_TRY(s);
    if (!(hp->rms_eps >= 0.0f && hp->rms_eps < 1.0f))
        return vt_errorf(VT_E_RANGE, "key '%s' = %g is out of range [0, 1)",
                         arch_key(m, "attention.layer_norm_rms_epsilon"), hp->rms_eps);
    VT_TRY(get_f32_opt(m, "rope.freq_base", 10000.0f, &hp->rope_freq_base));
    if (!(hp->rope_freq_base > 0.0f && isfinite(hp->rope_freq_base)))
        return vt_errorf(VT_E_RANGE, "key '%s' = %g is not a positive number", arch_key(m, "rope.freq_base"),
                         hp->rope_freq_base);
    float scale = 1.0f;
    gguf_str stype;
    bool none = false;
    if (gguf_get_str(&m->gguf, arch_key(m, "rope.scaling.type"), &stype) == VT_OK) {
        hp->rope_yarn = gguf_str_eq(stype, "yarn");
        none = gguf_str_eq(stype, "none");
        /* longrope: the factors are rope_factors_long / _short, which only phi3
         * and mistral3 read */
        const bool longrope = gguf_str_eq(stype, "longrope") &&
                              (hp->arch == MODEL_ARCH_PHI3 || hp->arch == MODEL_ARCH_MISTRAL3);
        if (!none && !hp->rope_yarn && !gguf_str_eq(stype, "linear") && !longrope)
            return vt_errorf(VT_E_UNSUPPORTED, "rope scaling type '%.*s' is not supported",
                             (int)(stype.len > 32 ? 32 : stype.len), stype.ptr);
    }
    const char *scale_key = "rope.scaling.factor";
    VT_TRY(get_f32_opt(m, scale_key, 0.0f, &scale));
    if (scale == 0.0f) VT_TRY(get_f32_opt(m, scale_key = "rope.scale_linear", 1.0f, &scale));
    if (!(scale > 0.0f && isfinite(scale)))
        return vt_errorf(VT_E_RANGE, "key '%s': rope scaling factor %g is invalid", arch_key(m, scale_key), scale);
    hp->rope_freq_scale = none ? 1.0f : 1.0f / scale; /* llama.cpp: type none never scales */
    const bool gpt_oss = hp->arch == MODEL_ARCH_GPT_OSS;
    if (gpt_oss && hp->n_rot != hp->head_dim)
        return vt_errorf(VT_E_UNSUPPORTED, "gpt-oss: rope.dimension_count %lld differs from key_length %lld",
                         (long long)hp->n_rot, (long long)hp->head_dim);
    if (gpt_oss || (hp->arch == MODEL_ARCH_LLAMA && gguf_find(&m->gguf, arch_key(m, "attention.sliding_window")))) {
        /* present (gpt-oss: required): a window of 0 is an error here, not "none" */
        VT_TRY(get_i64_req(m, "attention.sliding_window", &hp->n_swa));
        if (hp->n_swa > hp->n_ctx_train)
            return vt_errorf(VT_E_RANGE, "key '%s' = %lld is larger than the context_length %lld",
                             arch_key(m, "attention.sliding_window"), (long long)hp->n_swa,
                             (long long)hp->n_ctx_train);
        /* gpt-oss: llama.cpp ignores a per-layer array (swa_pattern_array); llama
         * (vt's own: llama.cpp's llama has no window) takes a number only */
        const gguf_kv *pk = gguf_find(&m->gguf, arch_key(m, "attention.sliding_window_pattern"));
        if (gpt_oss && pk && pk->type == GGUF_TYPE_ARRAY) {
            VT_TRY(swa_pattern_array(m, pk, 2));
        } else {
            s = gguf_get_i64(&m->gguf, arch_key(m, "attention.sliding_window_pattern"), &hp->swa_pattern);
            if (s == VT_E_NOT_FOUND) hp->swa_pattern = gpt_oss ? 2 : 0;
            else if (s != VT_OK) return s;
            else if (hp->swa_pattern < 0 || hp->swa_pattern > hp->n_layer)
                return vt_errorf(VT_E_RANGE, "key '%s' = %lld is outside 0..block_count (%lld)",
                                 arch_key(m, "attention.sliding_window_pattern"), (long long)hp->swa_pattern,
                                 (long long)hp->n_layer);
        }
    }
    VT_TRY(get_i64_opt(m, "rope.scaling.original_context_length", hp->n_ctx_train, &hp->n_ctx_orig));
    hp->rope_freq_base_swa = hp->rope_freq_base;
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
    /* gpt-oss's sliding-window layers rotate on rope.freq_base_swa where present
     * (the file's rope.freq_base where absent; never an override's) with the
     * file's scale, as llama.cpp's get_rope_freq_base/scale */
    if (gpt_oss) {
        VT_TRY(get_f32_opt(m, "rope.freq_base_swa", hp->rope_freq_base, &hp->rope_freq_base_swa));
        if (!(hp->rope_freq_base_swa > 0.0f && isfinite(hp->rope_freq_base_swa)))
            return vt_errorf(VT_E_RANGE, "key '%s' = %g is not a positive number",
                             arch_key(m, "rope.freq_base_swa"), hp->rope_freq_base_swa);
    }
    hp->ffn_act = MODEL_FFN_SILU;
    hp->embd_scale = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->attn_softcap = hp->final_softcap = 0.0f;
    if (hp->arch == MODEL_ARCH_GEMMA2 || hp->arch == MODEL_ARCH_GEMMA3) VT_TRY(gemma_hparams(m));
    if (hp->arch == MODEL_ARCH_OLMO2) VT_TRY(olmo2_hparams(m));
    hp->residual_scale = hp->logit_scale = 1.0f;
    if (hp->arch == MODEL_ARCH_GRANITE) VT_TRY(granite_hparams(m));
    hp->logit_mul = 1.0f;
    hp->post_norm_eps = hp->rms_eps;
    if (hp->arch == MODEL_ARCH_MUSE_GLIMMER) VT_TRY(muse_hparams(m));
    hp->attn_temp_scale = 0.0f;
    if (hp->arch == MODEL_ARCH_PHI3 || hp->arch == MODEL_ARCH_GLM4 || hp->arch == MODEL_ARCH_MISTRAL3)
        VT_TRY(dense3_hparams(m));
    float attn_factor;
    VT_TRY(get_f32_opt(m, "rope.scaling.attn_factor", 1.0f, &attn_factor));
    if (!(attn_factor > 0.0f && isfinite(attn_factor)))
        return vt_errorf(VT_E_RANGE, "key '%s' = %g is not a positive number", arch_key(m, "rope.scaling.attn_factor"),
                         attn_factor);
    hp->rope_mscale = attn_factor;
    VT_TRY(rope_override(m, rope));
    hp->rope_mscale_swa = hp->rope_mscale; /* yarn_params gives the sliding layers their own */
    hp->yarn_ext_swa = hp->yarn_ext;
    if (hp->rope_yarn) VT_TRY(yarn_params(m, rope));
    if (hp->arch == MODEL_ARCH_OLMO2 && hp->n_swa > 0) olmo2_plain_swa_rope(hp);
    /* after YaRN: nothing it reads enters yarn_params (n_rot is rope.dimension_count,
     * read above; the rope sections only pick each pair's position, all one for
     * text, as in ggml_rope_multi, whose ramp takes n_rot alone) */
    if (hp->arch == MODEL_ARCH_QWEN35 || hp->arch == MODEL_ARCH_QWEN35MOE) VT_TRY(q35_model_hparams(m));
    return VT_OK;
}

/* A tensor by name with an exact expected shape (ne[0] first). NULL `out` when
 * optional and absent. */
static vt_status find_tensor(model *m, const char *name, int n_dims, const int64_t *ne,
                             bool required, const gguf_tensor **out) {
    const gguf_tensor *t = gguf_find_tensor(&m->gguf, name);
    *out = t;
    if (!t) {
        if (!required) return VT_OK;
        return vt_errorf(VT_E_FORMAT, "required tensor '%s' is missing", name);
    }
    bool ok = true;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        int64_t want = d < n_dims ? ne[d] : 1;
        if (t->ne[d] != want) ok = false;
    }
    if (!ok && n_dims == 3)
        return vt_errorf(VT_E_FORMAT,
                         "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]", name,
                         (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                         (long long)ne[0], (long long)ne[1], (long long)ne[2]);
    if (!ok)
        return vt_errorf(VT_E_FORMAT,
                         "tensor '%s' has shape [%lld, %lld, %lld], expected [%lld, %lld]", name,
                         (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                         (long long)ne[0], (long long)(n_dims > 1 ? ne[1] : 1));
    return VT_OK;
}

/* A 1-D (or, with ne1 > 1, 2-D (n, ne1)) tensor as F32: a view when stored as
 * F32, else a converted copy. */
static vt_status load_vec2(model *m, const char *name, int64_t n0, int64_t ne1, bool required,
                           const float **out) {
    const gguf_tensor *t;
    const int64_t ne[2] = {n0, ne1};
    const int64_t n = n0 * ne1;
    *out = NULL;
    VT_TRY(find_tensor(m, name, ne1 > 1 ? 2 : 1, ne, required, &t));
    if (!t) return VT_OK;
    if (t->type == VT_DTYPE_F32) {
        *out = t->data;
        return VT_OK;
    }
    const quant_traits *tr = quant_traits_get(t->type);
    if (!tr || !tr->dequant_ref || n % tr->block_elems)
        return vt_errorf(VT_E_UNSUPPORTED, "tensor '%s': type %d not usable for a vector", name,
                         (int)t->type);
    float *buf = malloc((size_t)n * sizeof(float));
    if (!buf || model_own(m, buf) != VT_OK) {
        free(buf);
        return vt_errorf(VT_E_NOMEM, "out of memory converting '%s'", name);
    }
    tr->dequant_ref(t->data, buf, n);
    *out = buf;
    return VT_OK;
}

static vt_status load_vec(model *m, const char *name, int64_t n, bool required, const float **out) {
    return load_vec2(m, name, n, 1, required, out);
}

static vt_status load_mat(model *m, const char *name, int64_t n_in, int64_t n_out, bool required,
                          mm_weight *w) {
    const gguf_tensor *t;
    int64_t ne[2] = {n_in, n_out};
    memset(w, 0, sizeof *w);
    VT_TRY(find_tensor(m, name, 2, ne, required, &t));
    if (!t) return VT_OK;
    const quant_traits *tr = quant_traits_get(t->type);
    if (!tr || !tr->dot_ref || tr->dot_type == VT_DTYPE_COUNT)
        return vt_errorf(VT_E_UNSUPPORTED, "tensor '%s': weight type %s is not supported", name,
                         tr ? tr->name : "unknown");
    vt_status s = mm_weight_init(w, t->type, n_in, n_out, t->data);
    if (s != VT_OK) return vt_error_prefix(s, name);
    m->weight_bytes += t->bytes;
    return VT_OK;
}

/* A 3-D expert tensor (n_in, n_out, n_expert) as n_expert x ceil(n_out / slice)
 * row slices into *out (allocated here, owned by the layer). */
static vt_status load_experts(model *m, const char *name, int64_t n_in, int64_t n_out, int64_t slice,
                              mm_weight **out) {
    const int64_t n_exp = m->hp.n_expert, n_slices = (n_out + slice - 1) / slice;
    const gguf_tensor *t;
    const int64_t ne[3] = {n_in, n_out, n_exp};
    VT_TRY(find_tensor(m, name, 3, ne, true, &t));
    const quant_traits *tr = quant_traits_get(t->type);
    if (!tr || !tr->dot_ref || tr->dot_type == VT_DTYPE_COUNT)
        return vt_errorf(VT_E_UNSUPPORTED, "tensor '%s': weight type %s is not supported", name,
                         tr ? tr->name : "unknown");
    mm_weight *ws = calloc((size_t)(n_exp * n_slices), sizeof *ws);
    if (!ws) return vt_errorf(VT_E_NOMEM, "out of memory");
    *out = ws;
    size_t row_bytes;
    quant_row_bytes(t->type, n_in, &row_bytes); /* the tensor's size was checked by the parser */
    for (int64_t e = 0; e < n_exp; e++)
        for (int64_t s = 0; s < n_slices; s++) {
            const int64_t r0 = e * n_out + s * slice, rows = n_out - s * slice < slice ? n_out - s * slice : slice;
            vt_status st = mm_weight_init(&ws[e * n_slices + s], t->type, n_in, rows,
                                          (const uint8_t *)t->data + (size_t)r0 * row_bytes);
            if (st != VT_OK) return vt_error_prefix(st, name);
        }
    m->weight_bytes += t->bytes;
    m->expert_bytes += t->bytes;
    return VT_OK;
}

/* The layer's FFN: dense, or router and experts. A llama file with expert
 * tensors but no expert_count is refused as mixture-of-experts, not for a
 * missing ffn_gate. */
static vt_status load_ffn(model *m, int64_t il, layer_weights *L) {
    const model_hparams *hp = &m->hp;
    const int64_t d = hp->n_embd;
    char name[128];
#define LNAME(fmt) (snprintf(name, sizeof name, "blk.%lld." fmt, (long long)il), name)
#define DOT(w) (quant_traits_get((w).type)->dot_type)
    if (hp->n_expert == 0) {
        if (!gguf_find_tensor(&m->gguf, LNAME("ffn_gate.weight")) &&
            (gguf_find_tensor(&m->gguf, LNAME("ffn_up_exps.weight")) ||
             gguf_find_tensor(&m->gguf, LNAME("ffn_gate_inp.weight"))))
            return vt_errorf(VT_E_FORMAT,
                             "blk.%lld has mixture-of-experts tensors (ffn_*_exps) but key '%s' is missing",
                             (long long)il, arch_key(m, "expert_count"));
        VT_TRY(load_mat(m, LNAME("ffn_gate.weight"), d, hp->n_ff, true, &L->w_gate));
        VT_TRY(load_mat(m, LNAME("ffn_up.weight"), d, hp->n_ff, true, &L->w_up));
        VT_TRY(load_mat(m, LNAME("ffn_down.weight"), hp->n_ff, d, true, &L->w_down));
        /* gate/up share one quantized input: their types may differ (Q4_K_M
         * mixes q4_K and q6_K) as long as the activation type is the same. */
        if (DOT(L->w_gate) != DOT(L->w_up))
            return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: ffn_gate/up need one activation type (%s/%s)",
                             (long long)il, quant_traits_get(L->w_gate.type)->name,
                             quant_traits_get(L->w_up.type)->name);
        return VT_OK;
    }
    VT_TRY(load_mat(m, LNAME("ffn_gate_inp.weight"), d, hp->n_expert, true, &L->router));
    if (!gguf_find_tensor(&m->gguf, LNAME("ffn_gate_exps.weight")))
        return vt_errorf(VT_E_UNSUPPORTED,
                         "tensor '%s' is missing: mixture-of-experts FFNs without a gate are not supported",
                         name);
    VT_TRY(load_experts(m, LNAME("ffn_gate_exps.weight"), d, hp->n_ff_exp, m->moe_ff_slice, &L->exp_gate));
    VT_TRY(load_experts(m, LNAME("ffn_up_exps.weight"), d, hp->n_ff_exp, m->moe_ff_slice, &L->exp_up));
    VT_TRY(load_experts(m, LNAME("ffn_down_exps.weight"), hp->n_ff_exp, d, m->moe_down_slice, &L->exp_down));
    /* gpt-oss: the router's bias and each expert's biases, as 2-D (n_out, n_expert) */
    const bool bias = hp->arch == MODEL_ARCH_GPT_OSS;
    VT_TRY(load_vec(m, LNAME("ffn_gate_inp.bias"), hp->n_expert, bias, &L->router_b));
    VT_TRY(load_vec2(m, LNAME("ffn_gate_exps.bias"), hp->n_ff_exp, hp->n_expert, bias, &L->exp_gate_b));
    VT_TRY(load_vec2(m, LNAME("ffn_up_exps.bias"), hp->n_ff_exp, hp->n_expert, bias, &L->exp_up_b));
    VT_TRY(load_vec2(m, LNAME("ffn_down_exps.bias"), d, hp->n_expert, bias, &L->exp_down_b));
    if (DOT(L->exp_gate[0]) != DOT(L->exp_up[0]))
        return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: ffn_gate_exps/up_exps need one activation type (%s/%s)",
                         (long long)il, quant_traits_get(L->exp_gate[0].type)->name,
                         quant_traits_get(L->exp_up[0].type)->name);
    if (hp->n_ff_shexp > 0) { /* qwen35moe's shared expert and its gate (n_embd, or [n_embd, 1] as converted) */
        VT_TRY(load_vec(m, LNAME("ffn_gate_inp_shexp.weight"), d, true, &L->shexp_gate_inp));
        VT_TRY(load_mat(m, LNAME("ffn_gate_shexp.weight"), d, hp->n_ff_shexp, true, &L->shexp_gate));
        VT_TRY(load_mat(m, LNAME("ffn_up_shexp.weight"), d, hp->n_ff_shexp, true, &L->shexp_up));
        VT_TRY(load_mat(m, LNAME("ffn_down_shexp.weight"), hp->n_ff_shexp, d, true, &L->shexp_down));
        if (DOT(L->shexp_gate) != DOT(L->shexp_up))
            return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: ffn_gate_shexp/up_shexp need one activation type (%s/%s)",
                             (long long)il, quant_traits_get(L->shexp_gate.type)->name,
                             quant_traits_get(L->shexp_up.type)->name);
    }
#undef DOT
#undef LNAME
    return VT_OK;
}

/* Every matrix of layer il in the order a forward pass reads it, into out
 * where it is not NULL; returns how many. An expert's gate and up slices
 * alternate (the fused gate/up step reads them in pairs), then its down. */
static int64_t layer_order(const model *m, int64_t il, mm_weight **out) {
    layer_weights *L = &m->layers[il];
    int64_t n = 0;
#define PUT(w) (out ? (void)(out[n] = (w)) : (void)0, n++)
    if (L->lin) {
        n += q35_layer_order(L->lin, out ? out + n : NULL);
    } else {
        PUT(&L->wq);
        PUT(&L->wk);
        PUT(&L->wv);
        if (L->wg.data) PUT(&L->wg);
        PUT(&L->wo);
    }
    if (m->hp.n_expert == 0) {
        PUT(&L->w_gate);
        PUT(&L->w_up);
        PUT(&L->w_down);
        return n;
    }
    PUT(&L->router);
    const int64_t nf = m->moe_n_ff_slices, nd = m->moe_n_down_slices;
    for (int64_t e = 0; e < m->hp.n_expert; e++) {
        for (int64_t s = 0; s < nf; s++) {
            PUT(&L->exp_gate[e * nf + s]);
            PUT(&L->exp_up[e * nf + s]);
        }
        for (int64_t s = 0; s < nd; s++) PUT(&L->exp_down[e * nd + s]);
    }
    if (m->hp.n_ff_shexp > 0) {
        PUT(&L->shexp_gate);
        PUT(&L->shexp_up);
        PUT(&L->shexp_down);
    }
#undef PUT
    return n;
}

/* A one-line progress bar on stderr: "loading model.gguf [#####.....]  50%". */
static void progress_draw(const model *m, int64_t done, int64_t total) {
    const int width = 30, filled = (int)(width * done / (total > 0 ? total : 1));
    char bar[32];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
    const char *name = strrchr(m->path, '/');
    fprintf(stderr, "\rloading %s [%s] %3d%%", name ? name + 1 : m->path, bar,
            (int)(100 * done / (total > 0 ? total : 1)));
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

int64_t model_matrices(model *m, mm_weight **out) {
    int64_t n = 0;
    for (int64_t il = 0; il < m->hp.n_layer; il++) n += layer_order(m, il, out ? out + n : NULL);
    if (out) out[n] = &m->output;
    return n + 1;
}

/* Repack the matrices into one arena (mm_arena) in forward order, a progress
 * bar over it. Each packed source's file pages are given back as soon as it is
 * copied, so RSS holds the weights once, and at most one matrix twice. (Not the
 * tied head's: token_embd rows are still read from the file for lookups.) */
static vt_status pack_weights(model *m, bool progress) {
    const int64_t n = model_matrices(m, NULL);
    mm_weight **ws = malloc((size_t)n * sizeof *ws);
    if (!ws) return vt_errorf(VT_E_NOMEM, "out of memory");
    model_matrices(m, ws);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total += mm_weight_packed_size(ws[i]);
    vt_status s = mm_arena_init(&m->arena, total);
    for (int64_t i = 0; s == VT_OK && i < n; i++) {
        if (progress) progress_draw(m, (int64_t)(m->arena.used >> 20), (int64_t)(total >> 20) + 1);
        s = mm_weight_prepare_in(ws[i], &m->arena);
        if (s == VT_OK && ws[i]->data != m->embd) mm_weight_release_source(ws[i]);
    }
    if (progress && s == VT_OK) progress_draw(m, 1, 1);
    free(ws);
    return s;
}

/* A fused matrix (n_in, sum of n_out[]) as row slices, one mm_weight each
 * (out[i] holds rows [n_out[0] + ... + n_out[i-1], +n_out[i])): phi3's and
 * glm4's attn_qkv (Q, K, V) and ffn_up (gate, up). */
static vt_status load_mat_split(model *m, const char *name, int64_t n_in, const int64_t *n_out, int n,
                                mm_weight **out) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += n_out[i];
    const gguf_tensor *t;
    const int64_t ne[2] = {n_in, total};
    VT_TRY(find_tensor(m, name, 2, ne, true, &t));
    const quant_traits *tr = quant_traits_get(t->type);
    if (!tr || !tr->dot_ref || tr->dot_type == VT_DTYPE_COUNT)
        return vt_errorf(VT_E_UNSUPPORTED, "tensor '%s': weight type %s is not supported", name,
                         tr ? tr->name : "unknown");
    size_t row_bytes;
    quant_row_bytes(t->type, n_in, &row_bytes); /* the tensor's size was checked by the parser */
    int64_t r0 = 0;
    for (int i = 0; i < n; i++) {
        memset(out[i], 0, sizeof *out[i]);
        vt_status st = mm_weight_init(out[i], t->type, n_in, n_out[i], (const uint8_t *)t->data + (size_t)r0 * row_bytes);
        if (st != VT_OK) return vt_error_prefix(st, name);
        r0 += n_out[i];
    }
    m->weight_bytes += t->bytes;
    return VT_OK;
}

/* Q, K, V of phi3, glm4 and mistral3 as llama.cpp's create_tensor_qkv: one
 * attn_qkv (with an optional attn_qkv.bias) where the file has it, else
 * attn_q/k/v (with optional biases). */
static vt_status load_qkv(model *m, int64_t il, layer_weights *L) {
    const model_hparams *hp = &m->hp;
    const int64_t d = hp->n_embd, q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    char name[128];
#define LNAME(fmt) (snprintf(name, sizeof name, "blk.%lld." fmt, (long long)il), name)
    if (gguf_find_tensor(&m->gguf, LNAME("attn_qkv.weight"))) {
        const int64_t n_out[3] = {q_dim, kv_dim, kv_dim};
        mm_weight *ws[3] = {&L->wq, &L->wk, &L->wv};
        VT_TRY(load_mat_split(m, name, d, n_out, 3, ws));
        const float *b;
        VT_TRY(load_vec(m, LNAME("attn_qkv.bias"), q_dim + 2 * kv_dim, false, &b));
        if (b) L->bq = b, L->bk = b + q_dim, L->bv = b + q_dim + kv_dim;
        return VT_OK;
    }
    VT_TRY(load_mat(m, LNAME("attn_q.weight"), d, q_dim, true, &L->wq));
    VT_TRY(load_mat(m, LNAME("attn_k.weight"), d, kv_dim, true, &L->wk));
    VT_TRY(load_mat(m, LNAME("attn_v.weight"), d, kv_dim, true, &L->wv));
    VT_TRY(load_vec(m, LNAME("attn_q.bias"), q_dim, false, &L->bq));
    VT_TRY(load_vec(m, LNAME("attn_k.bias"), kv_dim, false, &L->bk));
    VT_TRY(load_vec(m, LNAME("attn_v.bias"), kv_dim, false, &L->bv));
    if ((L->bq != NULL) != (L->bk != NULL) || (L->bk != NULL) != (L->bv != NULL))
        return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: attn_q/k/v biases must be all present or all absent",
                         (long long)il);
#undef LNAME
    return VT_OK;
}

/* A layer of phi3, glm4 or mistral3 (llama.cpp's load_arch_tensors): attention
 * norm, Q/K/V (load_qkv), output (with mistral3's optional bias), FFN norm;
 * glm4's post-norms; the FFN: phi3's and glm4's ffn_up of 2 x n_ff rows holds
 * gate then up (ggml_swiglu's halves), mistral3's is llama's. FFN biases are
 * refused. */
static vt_status load_dense3_layer(model *m, int64_t il, layer_weights *L) {
    const model_hparams *hp = &m->hp;
    const int64_t d = hp->n_embd, q_dim = hp->n_head * hp->head_dim;
    char name[128];
#define LNAME(fmt) (snprintf(name, sizeof name, "blk.%lld." fmt, (long long)il), name)
    VT_TRY(load_vec(m, LNAME("attn_norm.weight"), d, true, &L->attn_norm));
    VT_TRY(load_qkv(m, il, L));
    VT_TRY(load_mat(m, LNAME("attn_output.weight"), q_dim, d, true, &L->wo));
    if (hp->arch == MODEL_ARCH_MISTRAL3) VT_TRY(load_vec(m, LNAME("attn_output.bias"), d, false, &L->bo));
    VT_TRY(load_vec(m, LNAME("ffn_norm.weight"), d, true, &L->ffn_norm));
    const bool muse = hp->arch == MODEL_ARCH_MUSE_GLIMMER;
    if (muse) { /* QK-norm, the output gate; rope on the sliding layers only */
        VT_TRY(load_vec(m, LNAME("attn_q_norm.weight"), hp->head_dim, true, &L->q_norm));
        VT_TRY(load_vec(m, LNAME("attn_k_norm.weight"), hp->head_dim, true, &L->k_norm));
        VT_TRY(load_mat(m, LNAME("attn_gate.weight"), d, q_dim, true, &L->wg));
        L->no_rope = L->attn.window == 0;
    }
    if (hp->arch == MODEL_ARCH_GLM4 || muse) {
        VT_TRY(load_vec(m, LNAME("post_attention_norm.weight"), d, true, &L->attn_post_norm));
        VT_TRY(load_vec(m, LNAME("post_ffw_norm.weight"), d, true, &L->ffn_post_norm));
    }
    static const char *const biases[] = {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"};
    for (size_t i = 0; i < sizeof biases / sizeof biases[0]; i++) {
        char bn[128];
        snprintf(bn, sizeof bn, "blk.%lld.%s", (long long)il, biases[i]);
        if (gguf_find_tensor(&m->gguf, bn))
            return vt_errorf(VT_E_UNSUPPORTED, "tensor '%s': FFN biases are not supported", bn);
    }
    if (hp->arch == MODEL_ARCH_MISTRAL3 || muse) {
        VT_TRY(load_ffn(m, il, L));
    } else {
        const int64_t n_out[2] = {hp->n_ff, hp->n_ff};
        mm_weight *ws[2] = {&L->w_gate, &L->w_up};
        VT_TRY(load_mat_split(m, LNAME("ffn_up.weight"), d, n_out, 2, ws));
        VT_TRY(load_mat(m, LNAME("ffn_down.weight"), hp->n_ff, d, true, &L->w_down));
    }
#undef LNAME
    return VT_OK;
}

/* phi3's LongRoPE factors (rope_factors_long / _short, n_rot / 2 each: both or
 * neither; mistral3's with rope.scaling.type longrope): every factor finite
 * and positive (the angle is divided by it). */
static vt_status load_rope_factors(model *m) {
    const int64_t n = m->hp.n_rot / 2;
    VT_TRY(load_vec(m, "rope_factors_long.weight", n, false, &m->rope_long));
    VT_TRY(load_vec(m, "rope_factors_short.weight", n, false, &m->rope_short));
    if ((m->rope_long != NULL) != (m->rope_short != NULL))
        return vt_errorf(VT_E_FORMAT, "tensor '%s' is missing (LongRoPE needs both rope_factors_long and _short)",
                         m->rope_long ? "rope_factors_short.weight" : "rope_factors_long.weight");
    for (int k = 0; m->rope_long && k < 2; k++) {
        const float *f = k ? m->rope_short : m->rope_long;
        for (int64_t i = 0; i < n; i++)
            if (!(f[i] > 0.0f && f[i] < 1e6f))
                return vt_errorf(VT_E_RANGE, "tensor '%s': factor %lld = %g is out of range (0, 1e6)",
                                 k ? "rope_factors_short.weight" : "rope_factors_long.weight", (long long)i, f[i]);
    }
    return VT_OK;
}

static vt_status load_weights(model *m, bool progress) {
    model_hparams *hp = &m->hp;
    const int64_t d = hp->n_embd, q_dim = hp->n_head * hp->head_dim,
                  kv_dim = hp->n_head_kv * hp->head_dim;
    const gguf_tensor *embd = gguf_find_tensor(&m->gguf, "token_embd.weight");
    if (!embd) return vt_errorf(VT_E_FORMAT, "required tensor 'token_embd.weight' is missing");
    if (embd->n_dims != 2 || embd->ne[0] != d || embd->ne[1] <= 0)
        return vt_errorf(VT_E_FORMAT, "tensor 'token_embd.weight' has shape [%lld, %lld], expected [%lld, n_vocab]",
                         (long long)embd->ne[0], (long long)embd->ne[1], (long long)d);
    const quant_traits *et = quant_traits_get(embd->type);
    if (!et || !et->dequant_ref)
        return vt_errorf(VT_E_UNSUPPORTED, "token_embd.weight: type %d is not supported", (int)embd->type);
    hp->n_vocab = embd->ne[1];
    m->embd_type = embd->type;
    m->embd = embd->data;
    quant_row_bytes(embd->type, d, &m->embd_row_bytes);
    m->weight_bytes += embd->bytes;

    VT_TRY(load_vec(m, "output_norm.weight", d, true, &m->output_norm));
    /* gemma2's head is always token_embd (llama.cpp never reads output.weight there) */
    if (hp->arch != MODEL_ARCH_GEMMA2)
        VT_TRY(load_mat(m, "output.weight", d, hp->n_vocab,
                        hp->arch == MODEL_ARCH_OLMO2 || hp->arch == MODEL_ARCH_MUSE_GLIMMER, &m->output));
    if (!m->output.data) { /* tied head */
        if (!et->dot_ref)
            return vt_errorf(VT_E_UNSUPPORTED, "tied output head of type %s is not supported", et->name);
        VT_TRY(mm_weight_init(&m->output, embd->type, d, hp->n_vocab, embd->data));
    }
    VT_TRY(load_vec(m, "rope_freqs.weight", hp->n_rot / 2, false, &m->rope_freqs));
    for (int64_t i = 0; m->rope_freqs && i < hp->n_rot / 2; i++) /* llama 3's factors divide the angle */
        if (!(m->rope_freqs[i] > 0.0f && m->rope_freqs[i] < 1e6f))
            return vt_errorf(VT_E_RANGE, "tensor 'rope_freqs.weight': factor %lld = %g is out of range (0, 1e6)",
                             (long long)i, m->rope_freqs[i]);
    const bool dense3 = hp->arch == MODEL_ARCH_PHI3 || hp->arch == MODEL_ARCH_GLM4 ||
                        hp->arch == MODEL_ARCH_MISTRAL3 || hp->arch == MODEL_ARCH_MUSE_GLIMMER;
    if (hp->arch == MODEL_ARCH_MUSE_GLIMMER) { /* the embeddings' RMSNorm has no weight */
        float *ones = malloc((size_t)d * sizeof(float));
        if (!ones || model_own(m, ones) != VT_OK) {
            free(ones);
            return vt_errorf(VT_E_NOMEM, "out of memory");
        }
        for (int64_t i = 0; i < d; i++) ones[i] = 1.0f;
        m->embd_norm = ones;
    }
    if (hp->arch == MODEL_ARCH_PHI3 || hp->arch == MODEL_ARCH_MISTRAL3) VT_TRY(load_rope_factors(m));

    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return vt_errorf(VT_E_NOMEM, "out of memory");
    m->moe_ff_slice = MOE_FF_SLICE;
    m->moe_down_slice = MOE_DOWN_SLICE;
    m->moe_n_ff_slices = (hp->n_ff_exp + MOE_FF_SLICE - 1) / MOE_FF_SLICE;
    m->moe_n_down_slices = (d + MOE_DOWN_SLICE - 1) / MOE_DOWN_SLICE;
    char name[128];
#define LNAME(fmt) (snprintf(name, sizeof name, "blk.%lld." fmt, (long long)il), name)
    for (int64_t il = 0; il < hp->n_layer; il++) {
        layer_weights *L = &m->layers[il];
        const bool slides = hp->swa_layers ? hp->swa_layers[il] : swa_period_slides(hp->swa_pattern, il);
        L->attn.window = hp->n_swa > 0 && slides ? hp->n_swa : 0;
        if (m->q35) {
            VT_TRY(q35_load_layer(m, il, L));
            continue;
        }
        if (dense3) {
            VT_TRY(load_dense3_layer(m, il, L));
            goto check_types;
        }
        const bool olmo2 = hp->arch == MODEL_ARCH_OLMO2;
        /* llama.cpp's n_no_rope_layer_step, 4 for smollm3 */
        L->no_rope = hp->arch == MODEL_ARCH_SMOLLM3 && (il + 1) % 4 == 0;
        if (hp->arch == MODEL_ARCH_GRANITE) {
            const gguf_kv *ft = gguf_find(&m->gguf, arch_key(m, "rope.scaling.finetuned"));
            L->no_rope = ft && ft->type == GGUF_TYPE_BOOL && !ft->v.u64;
            static const char *const biases[] = {"attn_output.bias", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"};
            for (size_t i = 0; i < sizeof biases / sizeof biases[0]; i++) {
                char bn[128];
                snprintf(bn, sizeof bn, "blk.%lld.%s", (long long)il, biases[i]);
                if (gguf_find_tensor(&m->gguf, bn))
                    return vt_errorf(VT_E_UNSUPPORTED, "tensor '%s': granite's optional biases are not supported", bn);
            }
        }
        if (!olmo2) VT_TRY(load_vec(m, LNAME("attn_norm.weight"), d, true, &L->attn_norm));
        VT_TRY(load_mat(m, LNAME("attn_q.weight"), d, q_dim, true, &L->wq));
        VT_TRY(load_mat(m, LNAME("attn_k.weight"), d, kv_dim, true, &L->wk));
        VT_TRY(load_mat(m, LNAME("attn_v.weight"), d, kv_dim, true, &L->wv));
        VT_TRY(load_mat(m, LNAME("attn_output.weight"), q_dim, d, true, &L->wo));
        const bool bias = hp->arch == MODEL_ARCH_QWEN2, gpt_oss = hp->arch == MODEL_ARCH_GPT_OSS;
        VT_TRY(load_vec(m, LNAME("attn_q.bias"), q_dim, bias, &L->bq));
        VT_TRY(load_vec(m, LNAME("attn_k.bias"), kv_dim, bias, &L->bk));
        VT_TRY(load_vec(m, LNAME("attn_v.bias"), kv_dim, bias, &L->bv));
        if ((L->bq != NULL) != (L->bk != NULL) || (L->bk != NULL) != (L->bv != NULL))
            return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: attn_q/k/v biases must be all present or all absent",
                             (long long)il);
        VT_TRY(load_vec(m, LNAME("attn_output.bias"), d, gpt_oss, &L->bo));
        if (gpt_oss) VT_TRY(load_vec(m, LNAME("attn_sinks.weight"), hp->n_head, true, &L->attn.sinks));
        const bool gemma = hp->arch == MODEL_ARCH_GEMMA2 || hp->arch == MODEL_ARCH_GEMMA3;
        L->attn.softcap = hp->attn_softcap;
        if (!gpt_oss) /* gpt-oss's post_attention_norm is its FFN norm */
            VT_TRY(load_vec(m, LNAME("post_attention_norm.weight"), d, gemma || olmo2, &L->attn_post_norm));
        VT_TRY(load_vec(m, LNAME("post_ffw_norm.weight"), d, gemma || olmo2, &L->ffn_post_norm));
        const bool qk_norm = hp->arch == MODEL_ARCH_QWEN3 || hp->arch == MODEL_ARCH_QWEN3MOE ||
                             hp->arch == MODEL_ARCH_GEMMA3;
        if (olmo2) {
            VT_TRY(load_vec(m, LNAME("attn_q_norm.weight"), q_dim, true, &L->q_norm_row));
            VT_TRY(load_vec(m, LNAME("attn_k_norm.weight"), kv_dim, true, &L->k_norm_row));
        } else {
            VT_TRY(load_vec(m, LNAME("attn_q_norm.weight"), hp->head_dim, qk_norm, &L->q_norm));
            VT_TRY(load_vec(m, LNAME("attn_k_norm.weight"), hp->head_dim, qk_norm, &L->k_norm));
            VT_TRY(load_vec(m, gpt_oss ? LNAME("post_attention_norm.weight") : LNAME("ffn_norm.weight"), d, true,
                            &L->ffn_norm));
        }
        VT_TRY(load_ffn(m, il, L));
    check_types:
        /* Q/K/V share one quantized input: their types may differ (Q4_K_M mixes
         * q4_K and q6_K) as long as the activation type is the same. */
#define DOT(w) (quant_traits_get((w).type)->dot_type)
        if (DOT(L->wq) != DOT(L->wk) || DOT(L->wq) != DOT(L->wv) || (L->wg.data && DOT(L->wg) != DOT(L->wq)))
            return vt_errorf(VT_E_UNSUPPORTED, "blk.%lld: attn_q/k/v need one activation type (%s/%s/%s)",
                             (long long)il, quant_traits_get(L->wq.type)->name,
                             quant_traits_get(L->wk.type)->name, quant_traits_get(L->wv.type)->name);
    }
#undef DOT
#undef LNAME
    return pack_weights(m, progress);
}

vt_status model_load_vec(model *m, const char *name, int64_t n, bool required, const float **out) {
    return load_vec(m, name, n, required, out);
}
vt_status model_load_mat(model *m, const char *name, int64_t n_in, int64_t n_out, bool required,
                         mm_weight *w) {
    return load_mat(m, name, n_in, n_out, required, w);
}
vt_status model_load_ffn(model *m, int64_t il, layer_weights *L) { return load_ffn(m, il, L); }
vt_status model_own_buffer(model *m, void *p) { return model_own(m, p); }

vt_rope_params vt_rope_default_params(void) {
    return (vt_rope_params){.scaling_type = VT_ROPE_SCALING_UNSPECIFIED,
                            .yarn_ext_factor = -1.0f,
                            .yarn_attn_factor = -1.0f,
                            .yarn_beta_fast = -1.0f,
                            .yarn_beta_slow = -1.0f};
}

vt_model_params vt_model_default_params(void) {
    vt_model_params p = {.progress = false, .use_mlock = false};
    return p;
}

/* The file at path mapped, its header parsed and its hyperparameters read under
 * rope into a new model (no weights yet), or an error naming the file. */
static vt_status model_open_hparams(const char *path, const vt_rope_params *rope, model **out) {
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m) return vt_errorf(VT_E_NOMEM, "out of memory");
    pthread_mutex_init(&m->scan_mu, NULL);
    vt_status s = mapfile_open(path, &m->map);
    if (s != VT_OK) goto fail;
    s = gguf_parse(m->map.data, m->map.size, path, &m->gguf);
    if (s != VT_OK) goto fail;
    m->path = strdup(path);
    if ((s = load_hparams(m, rope)) != VT_OK) {
        vt_error_prefix(s, path);
        goto fail;
    }
    *out = m;
    return VT_OK;
fail:
    vt_model_free(m);
    return s;
}

vt_status vt_model_load(const char *path, const vt_model_params *params, vt_model **out) {
    *out = NULL;
    model *m = NULL;
    vt_status s = model_open_hparams(path, params ? params->rope : NULL, &m);
    if (s != VT_OK) return s;
    if ((s = load_weights(m, params && params->progress)) != VT_OK) goto fail;
    if ((s = layer_kind_fill(m)) != VT_OK) goto fail;
    if ((s = tok_load(&m->gguf, &m->tok)) != VT_OK) goto fail;
    if (tok_n_vocab(m->tok) > m->hp.n_vocab) {
        s = vt_errorf(VT_E_FORMAT, "tokenizer has %d tokens but token_embd only %lld rows",
                      tok_n_vocab(m->tok), (long long)m->hp.n_vocab);
        goto fail;
    }
    /* a step reads one row of the embedding table, unless it is the head, and
     * of the experts the share a token routes to */
    m->step_bytes = m->weight_bytes;
    if (m->hp.n_expert > 0)
        m->step_bytes -= (size_t)((double)m->expert_bytes *
                                  (1.0 - (double)m->hp.n_expert_used / (double)m->hp.n_expert));
    if (m->output.data != m->embd)
        m->step_bytes -= m->embd_row_bytes * (size_t)(m->hp.n_vocab - 1);
    char ffn[64];
    if (m->hp.n_expert > 0)
        snprintf(ffn, sizeof ffn, "experts %lld/%lld ff%lld", (long long)m->hp.n_expert_used,
                 (long long)m->hp.n_expert, (long long)m->hp.n_ff_exp);
    else
        snprintf(ffn, sizeof ffn, "ff%lld", (long long)m->hp.n_ff);
    snprintf(m->desc, sizeof m->desc,
             "%s %lldL d%lld h%lld/%lld hd%lld %s vocab %lld, %s weights, %.1f MiB",
             arch_names[m->hp.arch], (long long)m->hp.n_layer, (long long)m->hp.n_embd,
             (long long)m->hp.n_head, (long long)m->hp.n_head_kv, (long long)m->hp.head_dim, ffn,
             (long long)m->hp.n_vocab,
             quant_traits_get(m->hp.n_expert ? m->layers[0].exp_gate[0].type : m->layers[0].w_gate.type)->name,
             (double)m->weight_bytes / (1024.0 * 1024.0));
    if (params && params->use_mlock && m->arena.base && m->arena.used > 0 &&
        mlock(m->arena.base, m->arena.used) != 0) {
        /* best effort, as llama.cpp's --mlock: the model works unlocked */
        log_warn("%s: mlock of %.1f MiB of weights failed: %s (see ulimit -l)", path,
                 (double)m->arena.used / (1024.0 * 1024.0), strerror(errno));
    }
    *out = m;
    return VT_OK;
fail:
    vt_error_prefix(s, path);
    vt_model_free(m);
    return s;
}

vt_status vt_model_probe_n_ctx_max(const char *path, const vt_rope_params *rope, int32_t *n_ctx_max) {
    *n_ctx_max = 0;
    model *m = NULL;
    VT_TRY(model_open_hparams(path, rope, &m));
    *n_ctx_max = (int32_t)model_n_ctx_max(m);
    vt_model_free(m);
    return VT_OK;
}

void vt_model_free(vt_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int64_t il = 0; il < m->hp.n_layer; il++) {
            layer_weights *L = &m->layers[il];
            mm_weight *ws[] = {&L->wq,       &L->wk,       &L->wv,      &L->wg,     &L->wo,
                               &L->w_gate,   &L->w_up,     &L->w_down,  &L->router, &L->shexp_gate,
                               &L->shexp_up, &L->shexp_down};
            for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) mm_weight_free(ws[i]);
            if (L->lin) {
                mm_weight *lw[] = {&L->lin->wqkv, &L->lin->wz, &L->lin->walpha, &L->lin->wbeta, &L->lin->ssm_out};
                for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++) mm_weight_free(lw[i]);
            }
            mm_weight *exps[] = {L->exp_gate, L->exp_up, L->exp_down};
            const int64_t n_sl[] = {m->moe_n_ff_slices, m->moe_n_ff_slices, m->moe_n_down_slices};
            for (int k = 0; k < 3; k++) {
                for (int64_t i = 0; exps[k] && i < m->hp.n_expert * n_sl[k]; i++) mm_weight_free(&exps[k][i]);
                free(exps[k]);
            }
        }
    }
    mm_weight_free(&m->output);
    mm_arena_free(&m->arena);
    if (m->q35) {
        q35_hparams_free(m->q35);
        free(m->q35);
    }
    free(m->layers);
    for (int64_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    if (m->tok) tok_free(m->tok);
    gguf_free(&m->gguf);
    mapfile_close(&m->map);
    free(m->path);
    pthread_mutex_destroy(&m->scan_mu);
    free(m);
}

vt_status model_nonfinite_error(vt_model *m, const char *step) {
    pthread_mutex_lock(&m->scan_mu);
    if (!m->scan_done) {
        m->scan_result[0] = 0;
        for (int64_t i = 0; i < m->gguf.n_tensors && !m->scan_result[0]; i++) {
            const gguf_tensor *t = &m->gguf.tensors[i];
            int64_t n = 1;
            for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) n *= t->ne[d];
            float v = 0;
            int64_t at = 0;
            if (quant_count_nonfinite(t->type, t->data, n, &at, &v) > 0) {
                char name[160];
                gguf_str_escape(t->name, name, sizeof name, 120);
                snprintf(m->scan_result, sizeof m->scan_result, "tensor '%s': element %lld is %s", name,
                         (long long)at, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
            }
        }
        m->scan_done = true;
    }
    vt_status s = m->scan_result[0]
                      ? vt_errorf(VT_E_NUMERIC, "%s: %s: the logits are not finite; %s", m->path, step,
                                  m->scan_result)
                      : vt_errorf(VT_E_NUMERIC,
                                  "%s: %s: the logits are not finite (every weight is finite: the "
                                  "activations overflowed)",
                                  m->path, step);
    pthread_mutex_unlock(&m->scan_mu);
    return s;
}

void model_embed_rows(const model *m, const int32_t *tokens, int64_t n, float *out) {
    const quant_traits *tr = quant_traits_get(m->embd_type);
    for (int64_t i = 0; i < n; i++)
        tr->dequant_ref(m->embd + (size_t)tokens[i] * m->embd_row_bytes, out + i * m->hp.n_embd,
                        m->hp.n_embd);
}

/* The scaled reach (model.h): the original context / freq_scale, where the file
 * declares both or the rope override gives the scale or the original context;
 * 0 otherwise. */
static int64_t rope_scaled_ctx(const model *m) {
    const model_hparams *hp = &m->hp;
    if (!(hp->rope_freq_scale < 1.0f) || !hp->rope_reach_declared) return 0;
    const double reach = (double)hp->n_ctx_orig_yarn / (double)hp->rope_freq_scale + 0.5;
    return reach >= (double)MODEL_MAX_CTX ? MODEL_MAX_CTX : (int64_t)reach;
}

int64_t model_n_ctx_max(const model *m) {
    const int64_t ext = rope_scaled_ctx(m);
    return ext > m->hp.n_ctx_train ? ext : m->hp.n_ctx_train;
}

vt_status model_check_n_ctx(const model *m, int64_t n_ctx) {
    const model_hparams *hp = &m->hp;
    const int64_t max = model_n_ctx_max(m), ext = rope_scaled_ctx(m);
    if (n_ctx <= max) return VT_OK;
    char ctx_key[256], orig_key[256];
    snprintf(ctx_key, sizeof ctx_key, "%s", arch_key(m, "context_length"));
    snprintf(orig_key, sizeof orig_key, "%s", arch_key(m, "rope.scaling.original_context_length"));
    /* the factor that would reach n_ctx from the original context, for the hint */
    const long long need = (long long)((n_ctx + hp->n_ctx_orig_yarn - 1) / hp->n_ctx_orig_yarn);
    if (ext > 0) {
        const bool file_orig = !hp->rope_orig_given && gguf_find(&m->gguf, orig_key);
        return vt_errorf(VT_E_RANGE,
                         "n_ctx %lld is past what the %s rope scaling reaches (%s %lld x factor %g%s = %lld "
                         "tokens; %s = %lld): use a context of at most %lld (-c %lld), or scale further "
                         "(--rope-scale %lld)",
                         (long long)n_ctx, hp->rope_scale_given || hp->rope_orig_given ? "overridden" : "model's",
                         hp->rope_orig_given ? "--yarn-orig-ctx" : file_orig ? orig_key : ctx_key,
                         (long long)hp->n_ctx_orig_yarn, 1.0 / hp->rope_freq_scale,
                         hp->rope_scale_given ? " (--rope-scale)" : "", (long long)ext, ctx_key,
                         (long long)hp->n_ctx_train, (long long)max, (long long)max, need);
    }
    if (hp->rope_freq_scale < 1.0f)
        return vt_errorf(VT_E_RANGE,
                         "n_ctx %lld is past the model's training context (%s = %lld): its rope scaling (factor %g) "
                         "has no '%s', so the context_length is the scaled context; use a context of at most %lld "
                         "(-c %lld), or give the original context it scales (--yarn-orig-ctx N)",
                         (long long)n_ctx, ctx_key, (long long)hp->n_ctx_train, 1.0 / hp->rope_freq_scale, orig_key,
                         (long long)max, (long long)max);
    return vt_errorf(VT_E_RANGE,
                     "n_ctx %lld is past the model's training context (%s = %lld) and the model declares no rope "
                     "scaling that extends it (rope.scaling.type yarn or linear, with a factor and "
                     "original_context_length); vt does not extrapolate: use a context of at most %lld (-c %lld), "
                     "or ask for rope scaling as llama.cpp does (--rope-scaling yarn --rope-scale %lld, or linear)",
                     (long long)n_ctx, ctx_key, (long long)hp->n_ctx_train, (long long)max, (long long)max, need);
}

int32_t vt_model_n_vocab(const vt_model *m) { return (int32_t)m->hp.n_vocab; }
int32_t vt_model_n_ctx_train(const vt_model *m) { return (int32_t)m->hp.n_ctx_train; }
int32_t vt_model_n_ctx_max(const vt_model *m) { return (int32_t)model_n_ctx_max(m); }
int32_t vt_model_n_ctx_default(const vt_model *m) {
    const model_hparams *hp = &m->hp;
    return (int32_t)(hp->rope_scale_given || hp->rope_orig_given ? model_n_ctx_max(m) : hp->n_ctx_train);
}
int32_t vt_model_bos(const vt_model *m) { return tok_bos(m->tok); }
int32_t vt_model_eos(const vt_model *m) { return tok_eos(m->tok); }
bool vt_model_is_eog(const vt_model *m, int32_t t) { return tok_is_eog(m->tok, t); }
const char *vt_model_desc(const vt_model *m) { return m->desc; }
size_t vt_model_weight_bytes(const vt_model *m) { return m->weight_bytes; }
size_t vt_model_step_bytes(const vt_model *m) { return m->step_bytes; }

vt_status vt_tokenize(const vt_model *m, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t **ids, int64_t *n_ids) {
    return tok_encode(m->tok, text, len, add_special, parse_special, ids, n_ids);
}

int64_t vt_token_piece(const vt_model *m, int32_t token, char *buf, size_t cap) {
    return tok_piece(m->tok, token, false, buf, cap);
}
