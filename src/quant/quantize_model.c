/* Whole-model quantization with llama.cpp's per-tensor type rules (see
 * quantize_model.h). The rules follow llama-quant.cpp (llama_tensor_get_type and
 * its helpers) for the file types vt writes; the branches for the IQ1/IQ2/IQ3
 * and TQ file types are left out because those types cannot be chosen. */
#include "quant/quantize_model.h"

#include "base/mapfile.h"
#include "base/outfile.h"
#include "base/size.h"

#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- file types ------------------------------------------------------------------- */

static const struct {
    quant_ftype ftype;
    const char *name;
    vt_dtype default_type;
} ftype_table[] = {
    {QUANT_FTYPE_ALL_F32, "F32", VT_DTYPE_F32},   {QUANT_FTYPE_F16, "F16", VT_DTYPE_F16},
    {QUANT_FTYPE_BF16, "BF16", VT_DTYPE_BF16},    {QUANT_FTYPE_Q4_0, "Q4_0", VT_DTYPE_Q4_0},
    {QUANT_FTYPE_Q4_1, "Q4_1", VT_DTYPE_Q4_1},    {QUANT_FTYPE_Q5_0, "Q5_0", VT_DTYPE_Q5_0},
    {QUANT_FTYPE_Q5_1, "Q5_1", VT_DTYPE_Q5_1},    {QUANT_FTYPE_Q8_0, "Q8_0", VT_DTYPE_Q8_0},
    {QUANT_FTYPE_Q2_K, "Q2_K", VT_DTYPE_Q2_K},    {QUANT_FTYPE_Q3_K_S, "Q3_K_S", VT_DTYPE_Q3_K},
    {QUANT_FTYPE_Q3_K_M, "Q3_K_M", VT_DTYPE_Q3_K}, {QUANT_FTYPE_Q3_K_L, "Q3_K_L", VT_DTYPE_Q3_K},
    {QUANT_FTYPE_Q4_K_S, "Q4_K_S", VT_DTYPE_Q4_K}, {QUANT_FTYPE_Q4_K_M, "Q4_K_M", VT_DTYPE_Q4_K},
    {QUANT_FTYPE_Q5_K_S, "Q5_K_S", VT_DTYPE_Q5_K}, {QUANT_FTYPE_Q5_K_M, "Q5_K_M", VT_DTYPE_Q5_K},
    {QUANT_FTYPE_Q6_K, "Q6_K", VT_DTYPE_Q6_K},    {QUANT_FTYPE_IQ4_NL, "IQ4_NL", VT_DTYPE_IQ4_NL},
    {QUANT_FTYPE_IQ4_XS, "IQ4_XS", VT_DTYPE_IQ4_XS}, {QUANT_FTYPE_MXFP4_MOE, "MXFP4_MOE", VT_DTYPE_MXFP4},
};
#define N_FTYPES ((int)(sizeof ftype_table / sizeof ftype_table[0]))

bool quant_ftype_parse(const char *name, quant_ftype *out) {
    if (!name) return false;
    for (int i = 0; i < N_FTYPES; i++) {
        if (!strcasecmp(name, ftype_table[i].name)) {
            *out = ftype_table[i].ftype;
            return true;
        }
    }
    /* llama-quantize also takes Q4_K / Q5_K / Q3_K for the _M mixes */
    if (!strcasecmp(name, "Q3_K")) return *out = QUANT_FTYPE_Q3_K_M, true;
    if (!strcasecmp(name, "Q4_K")) return *out = QUANT_FTYPE_Q4_K_M, true;
    if (!strcasecmp(name, "Q5_K")) return *out = QUANT_FTYPE_Q5_K_M, true;
    return false;
}

const char *quant_ftype_name(quant_ftype ftype) {
    for (int i = 0; i < N_FTYPES; i++) {
        if (ftype_table[i].ftype == ftype) return ftype_table[i].name;
    }
    return NULL;
}

vt_dtype quant_ftype_default_type(quant_ftype ftype) {
    for (int i = 0; i < N_FTYPES; i++) {
        if (ftype_table[i].ftype == ftype) return ftype_table[i].default_type;
    }
    return VT_DTYPE_COUNT;
}

/* ---- tensor names ------------------------------------------------------------------- */

/* A tensor name as a NUL-terminated copy (names are short; GGUF caps them at 64). */
typedef struct { char s[256]; } tname;

static tname name_of(const gguf_tensor *t) {
    tname n;
    size_t len = t->name.len < sizeof n.s - 1 ? (size_t)t->name.len : sizeof n.s - 1;
    memcpy(n.s, t->name.ptr, len);
    n.s[len] = 0;
    return n;
}

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !memcmp(s + n - m, suffix, m);
}

/* Layer number of "blk.N....", or -1. */
static int layer_of(const char *name) {
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1) return -1;
    return layer;
}

typedef enum category {
    CAT_TOKEN_EMBD,
    CAT_ATTN_Q,
    CAT_ATTN_V,
    CAT_ATTN_K,
    CAT_ATTN_QKV,
    CAT_ATTN_KV_B,
    CAT_ATTN_OUTPUT,
    CAT_FFN_UP,
    CAT_FFN_GATE,
    CAT_FFN_DOWN,
    CAT_OUTPUT,
    CAT_OTHER
} category;

static bool is_token_embd(const char *n) {
    return !strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight");
}

static category category_of(const char *n) {
    if (!strcmp(n, "output.weight")) return CAT_OUTPUT;
    if (is_token_embd(n)) return CAT_TOKEN_EMBD;
    if (has(n, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (has(n, "attn_kv_b.weight")) return CAT_ATTN_KV_B;
    if (has(n, "attn_v.weight")) return CAT_ATTN_V;
    if (has(n, "attn_k.weight")) return CAT_ATTN_K;
    if (has(n, "attn_q.weight")) return CAT_ATTN_Q;
    if (has(n, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (has(n, "ffn_up")) return CAT_FFN_UP;
    if (has(n, "ffn_gate")) return CAT_FFN_GATE;
    if (has(n, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

static bool is_attn_v_like(category c) {
    return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B;
}

/* ggml_n_dims: trailing dimensions of 1 do not count. */
static int n_dims_of(const gguf_tensor *t) {
    for (int i = GGUF_MAX_DIMS - 1; i >= 1; i--) {
        if (t->ne[i] > 1) return i + 1;
    }
    return 1;
}

/* llama.cpp's tensor_allows_quantization with default parameters. */
static bool allows_quantization(const gguf_tensor *t, const char *n) {
    if (n_dims_of(t) < 2) return false;
    if (!ends_with(n, "weight")) return false;
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
        "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
        ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        if (has(n, never[i])) return false;
    }
    if (!strcmp(n, "position_embd.weight") || !strcmp(n, "token_types.weight")) return false;
    return true;
}

/* ---- model facts the rules use ---------------------------------------------------------- */

typedef struct model_facts {
    char arch[64];
    bool falcon;
    bool is_70b;
    int64_t n_layer;
    int64_t n_head, n_head_kv, n_expert;
} model_facts;

/* "{arch}.suffix" as an integer; a per-layer array gives its first element. */
static vt_status arch_int(const gguf_file *f, const char *arch, const char *suffix, bool required,
                          int64_t dflt, int64_t *out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) {
        if (required) return vt_errorf(VT_E_FORMAT, "key '%s' missing", key);
        *out = dflt;
        return VT_OK;
    }
    if (kv->type == GGUF_TYPE_ARRAY) {
        if (kv->v.arr.n == 0) return vt_errorf(VT_E_FORMAT, "key '%s': empty array", key);
        const uint8_t *p = kv->v.arr.data;
        switch (kv->v.arr.type) {
        case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); *out = v; return VT_OK; }
        case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); *out = v; return VT_OK; }
        case GGUF_TYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); *out = (int64_t)v; return VT_OK; }
        case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, p, 8); *out = v; return VT_OK; }
        default: return vt_errorf(VT_E_FORMAT, "key '%s': array of %s, expected integers", key,
                                  gguf_type_name(kv->v.arr.type));
        }
    }
    return gguf_get_i64(f, key, out);
}

static vt_status read_facts(const gguf_file *f, model_facts *m) {
    memset(m, 0, sizeof *m);
    gguf_str arch;
    VT_TRY(gguf_get_str(f, "general.architecture", &arch));
    if (arch.len >= sizeof m->arch) return vt_errorf(VT_E_FORMAT, "general.architecture too long");
    memcpy(m->arch, arch.ptr, arch.len);
    m->arch[arch.len] = 0;
    VT_TRY(arch_int(f, m->arch, "block_count", true, 0, &m->n_layer));
    if (m->n_layer <= 0 || m->n_layer > 512) {
        return vt_errorf(VT_E_FORMAT, "%s.block_count %lld out of range", m->arch, (long long)m->n_layer);
    }
    VT_TRY(arch_int(f, m->arch, "attention.head_count", false, 0, &m->n_head));
    VT_TRY(arch_int(f, m->arch, "attention.head_count_kv", false, m->n_head, &m->n_head_kv));
    VT_TRY(arch_int(f, m->arch, "expert_count", false, 0, &m->n_expert));
    m->falcon = !strcmp(m->arch, "falcon");
    /* llama.cpp's LLM_TYPE_70B (attn_v gets Q5_K instead of Q3_K/Q4_K) */
    const char *a = m->arch;
    m->is_70b = (!strcmp(a, "llama") && m->n_layer == 80 && m->n_head != m->n_head_kv) ||
                ((!strcmp(a, "deci") || !strcmp(a, "olmo") || !strcmp(a, "qwen2")) && m->n_layer == 80) ||
                (!strcmp(a, "jais2") && m->n_layer == 68);
    return VT_OK;
}

/* ---- the rules ---------------------------------------------------------------------------- */

typedef struct plan_state {
    const model_facts *m;
    quant_ftype ftype;
    int64_t n_attention_wv, i_attention_wv;
    int64_t n_ffn_down, i_ffn_down, n_ffn_gate, i_ffn_gate, n_ffn_up, i_ffn_up;
    bool tied_embeddings;
} plan_state;

static bool use_more_bits(int64_t i_layer, int64_t n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

static int64_t gqa(const model_facts *m) { return m->n_head_kv ? m->n_head / m->n_head_kv : 0; }

/* The (layer, n_layer) the ffn rules use: the running counter, or with experts
 * the layer parsed from the name. */
static vt_status layer_info(const plan_state *s, int64_t counter, int64_t n, const char *name,
                            int64_t *i_layer) {
    *i_layer = counter;
    if (s->m->n_expert > 1) {
        const int layer = layer_of(name);
        if (layer < 0) return vt_errorf(VT_E_FORMAT, "tensor '%s': cannot determine its layer", name);
        if (layer >= n) {
            return vt_errorf(VT_E_FORMAT, "tensor '%s': layer %d past block_count %lld", name, layer,
                             (long long)n);
        }
        *i_layer = layer;
    }
    return VT_OK;
}

static vt_status type_by_rules(plan_state *s, const gguf_tensor *t, const char *name, category cat,
                               vt_dtype *type) {
    const quant_ftype ft = s->ftype;
    const model_facts *m = s->m;
    vt_dtype nt = *type;

    if (cat == CAT_OUTPUT || (s->tied_embeddings && cat == CAT_TOKEN_EMBD)) {
        const int64_t qk = quant_traits_get(nt)->block_elems;
        if (ft == QUANT_FTYPE_MXFP4_MOE || m->falcon || t->ne[0] % qk != 0) nt = VT_DTYPE_Q8_0;
        else if (nt != VT_DTYPE_Q8_0) nt = VT_DTYPE_Q6_K;
    } else if (ft == QUANT_FTYPE_MXFP4_MOE) {
        /* the experts (3-D) MXFP4, every other matrix Q8_0; bailingmoe3's MLA
         * projections are 3-D too, so there only the ffn experts qualify */
        const bool ffn = cat == CAT_FFN_UP || cat == CAT_FFN_GATE || cat == CAT_FFN_DOWN;
        nt = t->ne[2] > 1 && (strcmp(m->arch, "bailingmoe3") || ffn) ? VT_DTYPE_MXFP4 : VT_DTYPE_Q8_0;
    } else if (cat == CAT_TOKEN_EMBD) {
        /* only the IQ1/IQ2/IQ3/TQ file types change it */
    } else if (is_attn_v_like(cat)) {
        if (ft == QUANT_FTYPE_Q2_K) {
            nt = gqa(m) >= 4 ? VT_DTYPE_Q4_K : VT_DTYPE_Q3_K;
        } else if (ft == QUANT_FTYPE_Q3_K_M) {
            nt = s->i_attention_wv < 2 ? VT_DTYPE_Q5_K : VT_DTYPE_Q4_K;
        } else if (ft == QUANT_FTYPE_Q3_K_L) {
            nt = VT_DTYPE_Q5_K;
        } else if ((ft == QUANT_FTYPE_IQ4_NL || ft == QUANT_FTYPE_IQ4_XS) && gqa(m) >= 4) {
            nt = VT_DTYPE_Q5_K;
        } else if ((ft == QUANT_FTYPE_Q4_K_M || ft == QUANT_FTYPE_Q5_K_M) &&
                   use_more_bits(s->i_attention_wv, s->n_attention_wv)) {
            nt = VT_DTYPE_Q6_K;
        } else if (ft == QUANT_FTYPE_Q4_K_S && s->i_attention_wv < 4) {
            nt = VT_DTYPE_Q5_K;
        }
        if (m->is_70b && (nt == VT_DTYPE_Q3_K || nt == VT_DTYPE_Q4_K)) nt = VT_DTYPE_Q5_K;
        if (m->n_expert == 8) nt = VT_DTYPE_Q8_0;
        ++s->i_attention_wv;
    } else if (cat == CAT_ATTN_K) {
        if (m->n_expert == 8) nt = VT_DTYPE_Q8_0;
    } else if (cat == CAT_ATTN_Q) {
        /* only IQ3 file types */
    } else if (cat == CAT_FFN_DOWN) {
        int64_t il;
        VT_TRY(layer_info(s, s->i_ffn_down, s->n_ffn_down, name, &il));
        const int64_t nl = s->n_ffn_down;
        if (ft == QUANT_FTYPE_Q2_K) {
            nt = VT_DTYPE_Q3_K;
        } else if (ft == QUANT_FTYPE_Q3_K_M) {
            nt = il < nl / 16 ? VT_DTYPE_Q5_K
                 : !m->falcon || use_more_bits(il, nl) ? VT_DTYPE_Q4_K
                                                       : VT_DTYPE_Q3_K;
        } else if (ft == QUANT_FTYPE_Q3_K_L) {
            nt = m->falcon ? VT_DTYPE_Q4_K : VT_DTYPE_Q5_K;
        } else if (ft == QUANT_FTYPE_Q4_K_M) {
            if (m->falcon) {
                nt = il < nl / 16 ? VT_DTYPE_Q6_K : use_more_bits(il, nl) ? VT_DTYPE_Q5_K : VT_DTYPE_Q4_K;
            } else if (use_more_bits(il, nl)) {
                nt = VT_DTYPE_Q6_K;
            }
        } else if (il < nl / 8 && (ft == QUANT_FTYPE_IQ4_NL || ft == QUANT_FTYPE_IQ4_XS)) {
            nt = VT_DTYPE_Q5_K; /* (no importance matrix) */
        } else if (ft == QUANT_FTYPE_Q5_K_M && use_more_bits(il, nl)) {
            nt = VT_DTYPE_Q6_K;
        } else if (ft == QUANT_FTYPE_Q4_K_S && !m->falcon && il < nl / 8) {
            nt = VT_DTYPE_Q5_K;
        }
        ++s->i_ffn_down;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (!m->falcon) {
            if (m->n_expert == 8) {
                if (ft == QUANT_FTYPE_Q2_K || ft == QUANT_FTYPE_Q3_K_S || ft == QUANT_FTYPE_Q3_K_M ||
                    ft == QUANT_FTYPE_IQ4_NL || ft == QUANT_FTYPE_Q4_K_S || ft == QUANT_FTYPE_Q4_K_M ||
                    ft == QUANT_FTYPE_IQ4_XS) {
                    nt = VT_DTYPE_Q5_K;
                }
            } else {
                if (ft == QUANT_FTYPE_Q2_K) nt = VT_DTYPE_Q3_K;
                else if (ft == QUANT_FTYPE_Q3_K_M) nt = VT_DTYPE_Q4_K;
                else if (ft == QUANT_FTYPE_Q3_K_L) nt = VT_DTYPE_Q5_K;
            }
        } else if (ft == QUANT_FTYPE_Q3_K_L) {
            nt = VT_DTYPE_Q4_K;
        }
    } else if (cat == CAT_FFN_GATE) {
        int64_t il;
        VT_TRY(layer_info(s, s->i_ffn_gate, s->n_ffn_gate, name, &il));
        ++s->i_ffn_gate;
    } else if (cat == CAT_FFN_UP) {
        int64_t il;
        VT_TRY(layer_info(s, s->i_ffn_up, s->n_ffn_up, name, &il));
        ++s->i_ffn_up;
    }
    /* (attn_qkv is attn_v-like above, so llama.cpp's separate qkv branch never runs) */
    *type = nt;
    return VT_OK;
}

/* A type whose block does not divide the row length is replaced, as llama.cpp's
 * tensor_type_fallback does. */
static vt_dtype fallback(vt_dtype type, int64_t ncols) {
    if (ncols % quant_traits_get(type)->block_elems == 0) return type;
    vt_dtype r = type;
    switch (type) {
    case VT_DTYPE_IQ4_XS: r = VT_DTYPE_IQ4_NL; break;
    case VT_DTYPE_Q2_K:
    case VT_DTYPE_Q3_K: r = VT_DTYPE_Q4_0; break;
    case VT_DTYPE_Q4_K: r = VT_DTYPE_Q5_0; break;
    case VT_DTYPE_Q5_K: r = VT_DTYPE_Q5_1; break;
    case VT_DTYPE_Q6_K: r = VT_DTYPE_Q8_0; break;
    default: break;
    }
    if (ncols % quant_traits_get(r)->block_elems != 0) r = VT_DTYPE_F16;
    return r;
}

static const gguf_file *order_file; /* qsort has no context argument */

static int compare_tensors(const void *pa, const void *pb) {
    const gguf_tensor *a = &order_file->tensors[*(const int64_t *)pa];
    const gguf_tensor *b = &order_file->tensors[*(const int64_t *)pb];
    const tname na = name_of(a), nb = name_of(b);
    const int la = layer_of(na.s), lb = layer_of(nb.s);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(na.s, nb.s);
}

void quant_model_order(const gguf_file *f, int64_t *order) {
    for (int64_t i = 0; i < f->n_tensors; i++) order[i] = i;
    order_file = f;
    qsort(order, (size_t)f->n_tensors, sizeof *order, compare_tensors);
    order_file = NULL;
}

vt_status quant_model_plan(const gguf_file *f, quant_ftype ftype, vt_dtype *types) {
    const vt_dtype default_type = quant_ftype_default_type(ftype);
    if (default_type == VT_DTYPE_COUNT) {
        return vt_errorf(VT_E_UNSUPPORTED, "file type %d cannot be written", (int)ftype);
    }
    model_facts m;
    VT_TRY(read_facts(f, &m));
    plan_state s = {.m = &m, .ftype = ftype, .tied_embeddings = true};
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const tname n = name_of(&f->tensors[i]);
        const category c = category_of(n.s);
        if (is_attn_v_like(c)) s.n_attention_wv++;
        if (c == CAT_OUTPUT) s.tied_embeddings = false;
    }
    s.n_ffn_down = s.n_ffn_gate = s.n_ffn_up = m.n_layer;

    int64_t *order = malloc((size_t)(f->n_tensors ? f->n_tensors : 1) * sizeof *order);
    if (!order) return vt_errorf(VT_E_NOMEM, "quantize plan: %lld tensors", (long long)f->n_tensors);
    quant_model_order(f, order);
    const bool quantized_default = quant_traits_get(default_type)->quantized;
    vt_status st = VT_OK;
    for (int64_t k = 0; k < f->n_tensors && st == VT_OK; k++) {
        const gguf_tensor *t = &f->tensors[order[k]];
        const tname n = name_of(t);
        vt_dtype type = t->type;
        if (allows_quantization(t, n.s)) {
            type = default_type;
            if (quantized_default) {
                st = type_by_rules(&s, t, n.s, category_of(n.s), &type);
                type = fallback(type, t->ne[0]);
            }
        }
        types[order[k]] = type;
    }
    free(order);
    return st;
}

/* ---- conversion ----------------------------------------------------------------------------- */

typedef struct convert_job {
    const quant_traits *src, *dst;
    bool src_is_f32;
    const uint8_t *in;
    uint8_t *out;
    int64_t n_per_row, n_rows;
    size_t in_row_bytes, out_row_bytes;
    float **scratch; /* one row of floats per thread */
} convert_job;

typedef struct convert_worker {
    const convert_job *job;
    int ith, nth;
} convert_worker;

/* Rows [n * ith / nth, n * (ith + 1) / nth) of the job. */
static void *convert_rows(void *arg) {
    const convert_worker *cw = arg;
    const convert_job *j = cw->job;
    const int64_t r0 = j->n_rows * cw->ith / cw->nth, r1 = j->n_rows * (cw->ith + 1) / cw->nth;
    float *buf = j->scratch[cw->ith];
    for (int64_t r = r0; r < r1; r++) {
        const void *in = j->in + (size_t)r * j->in_row_bytes;
        const float *x = in; /* f32 rows are used in place */
        if (!j->src_is_f32) {
            j->src->dequant_ref(in, buf, j->n_per_row);
            x = buf;
        }
        j->dst->quant_ref(x, j->out + (size_t)r * j->out_row_bytes, j->n_per_row);
    }
    return NULL;
}

/* Run the job on nth threads (the caller is one); rows are independent, so the
 * bytes do not depend on nth. */
static void convert_parallel(const convert_job *job, int nth) {
    pthread_t tids[64];
    convert_worker ws[64];
    if (nth > 64) nth = 64;
    if (job->n_rows < nth) nth = job->n_rows > 0 ? (int)job->n_rows : 1;
    int started = 1;
    for (int i = 0; i < nth; i++) ws[i] = (convert_worker){job, i, nth};
    for (int i = 1; i < nth; i++) {
        if (pthread_create(&tids[i], NULL, convert_rows, &ws[i]) != 0) break;
        started++;
    }
    if (started < nth) { /* could not start them all: redo the split on fewer threads */
        for (int i = 1; i < started; i++) pthread_join(tids[i], NULL);
        convert_worker one = {job, 0, 1};
        convert_rows(&one);
        return;
    }
    convert_rows(&ws[0]);
    for (int i = 1; i < nth; i++) pthread_join(tids[i], NULL);
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

vt_status quant_model_file(const char *in_path, const char *out_path, const quant_model_opts *opts) {
    mapfile map = {0};
    gguf_file f;
    bool parsed = false;
    gguf_writer *w = NULL;
    vt_dtype *types = NULL;
    int64_t *order = NULL;
    void **owned = NULL;
    float **scratch = NULL;
    int nth = opts->n_threads > 0 ? opts->n_threads : default_threads();
    if (nth > 64) nth = 64;
    vt_status st;

    if ((st = outfile_check_not_input(in_path, out_path)) != VT_OK) goto fail;
    if ((st = mapfile_open(in_path, &map)) != VT_OK) goto fail;
    if ((st = gguf_parse(map.data, map.size, in_path, &f)) != VT_OK) goto fail;
    parsed = true;
    const size_t n_t = (size_t)(f.n_tensors ? f.n_tensors : 1);
    types = calloc(n_t, sizeof *types);
    order = calloc(n_t, sizeof *order);
    owned = calloc(n_t, sizeof *owned);
    scratch = calloc((size_t)nth, sizeof *scratch);
    if (!types || !order || !owned || !scratch) {
        st = vt_errorf(VT_E_NOMEM, "%s: quantize bookkeeping", in_path);
        goto fail;
    }
    if ((st = quant_model_plan(&f, opts->ftype, types)) != VT_OK) {
        st = vt_error_prefix(st, in_path);
        goto fail;
    }
    quant_model_order(&f, order);
    if ((st = gguf_writer_create(&w)) != VT_OK) goto fail;

    for (int64_t i = 0; i < f.n_kv; i++) {
        const gguf_kv *kv = &f.kv[i];
        if (gguf_str_eq(kv->key, "split.no") || gguf_str_eq(kv->key, "split.count") ||
            gguf_str_eq(kv->key, "split.tensors.count")) {
            continue;
        }
        if ((st = gguf_writer_copy_kv(w, kv)) != VT_OK) goto fail;
    }
    if ((st = gguf_writer_set_u32(w, "general.quantization_version", 2)) != VT_OK) goto fail;
    if ((st = gguf_writer_set_u32(w, "general.file_type", (uint32_t)opts->ftype)) != VT_OK) goto fail;

    size_t total_in = 0, total_out = 0;
    for (int64_t k = 0; k < f.n_tensors; k++) {
        const int64_t ti = order[k];
        const gguf_tensor *t = &f.tensors[ti];
        const tname n = name_of(t);
        if (t->name.len >= sizeof n.s) {
            st = vt_errorf(VT_E_FORMAT, "%s: tensor name of %llu bytes is too long", in_path,
                           (unsigned long long)t->name.len);
            goto fail;
        }
        const vt_dtype to = types[ti];
        int64_t n_rows = 1;
        for (int d = 1; d < GGUF_MAX_DIMS; d++) n_rows *= t->ne[d];
        const void *data = t->data;
        size_t bytes = t->bytes;
        if (to != t->type) {
            const quant_traits *src = quant_traits_get(t->type), *dst = quant_traits_get(to);
            if (!src || !src->dequant_ref) {
                st = vt_errorf(VT_E_UNSUPPORTED, "%s: tensor '%s': cannot read type %d", in_path, n.s,
                               (int)t->type);
                goto fail;
            }
            if (src->quantized && !opts->allow_requantize) {
                st = vt_errorf(VT_E_UNSUPPORTED,
                               "%s: tensor '%s' is already %s; requantizing needs --allow-requantize",
                               in_path, n.s, src->name);
                goto fail;
            }
            size_t in_row, out_row;
            if (!quant_row_bytes(t->type, t->ne[0], &in_row) || !quant_row_bytes(to, t->ne[0], &out_row) ||
                !size_mul(out_row, (size_t)n_rows, &bytes)) {
                st = vt_errorf(VT_E_FORMAT, "%s: tensor '%s': row of %lld does not fit %s", in_path, n.s,
                               (long long)t->ne[0], dst->name);
                goto fail;
            }
            uint8_t *out = malloc(bytes ? bytes : 1);
            if (!out) {
                st = vt_errorf(VT_E_NOMEM, "%s: tensor '%s': %zu bytes", in_path, n.s, bytes);
                goto fail;
            }
            owned[ti] = out;
            for (int i = 0; i < nth; i++) {
                free(scratch[i]);
                scratch[i] = malloc((size_t)t->ne[0] * sizeof(float));
                if (!scratch[i]) {
                    st = vt_errorf(VT_E_NOMEM, "%s: tensor '%s': scratch row", in_path, n.s);
                    goto fail;
                }
            }
            convert_job job = {.src = src, .dst = dst, .src_is_f32 = t->type == VT_DTYPE_F32, .in = t->data, .out = out,
                               .n_per_row = t->ne[0], .n_rows = n_rows, .in_row_bytes = in_row,
                               .out_row_bytes = out_row, .scratch = scratch};
            convert_parallel(&job, nth);
            data = out;
        }
        if (opts->verbose) {
            fprintf(stderr, "[%4lld/%4lld] %-36s %6s -> %-6s %10.3f MiB -> %10.3f MiB\n",
                    (long long)k + 1, (long long)f.n_tensors, n.s,
                    quant_traits_get(t->type) ? quant_traits_get(t->type)->name : "?",
                    quant_traits_get(to) ? quant_traits_get(to)->name : "?", t->bytes / 1048576.0,
                    bytes / 1048576.0);
        }
        total_in += t->bytes;
        total_out += bytes;
        if ((st = gguf_writer_add_tensor(w, n.s, to, t->n_dims, t->ne, data, bytes)) != VT_OK) goto fail;
    }
    if ((st = gguf_writer_write(w, out_path)) != VT_OK) goto fail;
    if (opts->verbose) {
        fprintf(stderr, "%s: %.2f MiB -> %.2f MiB (%s)\n", out_path, total_in / 1048576.0,
                total_out / 1048576.0, quant_ftype_name(opts->ftype));
    }
    st = VT_OK;

fail:
    if (w) gguf_writer_destroy(w);
    if (owned) {
        for (size_t i = 0; parsed && i < (size_t)f.n_tensors; i++) free(owned[i]);
    }
    if (scratch) {
        for (int i = 0; i < nth; i++) free(scratch[i]);
    }
    free(scratch);
    free(owned);
    free(order);
    free(types);
    if (parsed) gguf_free(&f);
    mapfile_close(&map);
    return st;
}
