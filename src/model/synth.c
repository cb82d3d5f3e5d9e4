/* Synthetic GGUF models: see synth.h. */
#include "model/synth.h"

#include "base/mapfile.h"
#include "base/outfile.h"
#include "base/size.h"
#include "cpu/threadpool.h"
#include "gguf/gguf.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SYNTH_STD 0.02f
#define SYNTH_MAX_TENSORS_PER_LAYER 24
#define SYNTH_MAX_DIM ((int64_t)1 << 20)

synth_params synth_default_params(void) {
    return (synth_params){
        .arch = "llama",
        .n_layer = 2,
        .n_embd = 256,
        .n_head = 4,
        .n_head_kv = 2,
        .n_ff = 512,
        .n_expert_used = 2,
        .n_ctx = 256,
        .n_vocab = 512,
        .type = VT_DTYPE_F32,
        .embd_type = VT_DTYPE_COUNT,
        .output_type = VT_DTYPE_COUNT,
        .exp_type = VT_DTYPE_COUNT,
        .seed = 1,
    };
}

int synth_file_type(vt_dtype type) {
    switch (type) {
    case VT_DTYPE_F32: return 0;
    case VT_DTYPE_F16: return 1;
    case VT_DTYPE_Q4_0: return 2;
    case VT_DTYPE_Q4_1: return 3;
    case VT_DTYPE_Q8_0: return 7;
    case VT_DTYPE_Q5_0: return 8;
    case VT_DTYPE_Q5_1: return 9;
    case VT_DTYPE_Q2_K: return 10;
    case VT_DTYPE_Q3_K: return 11; /* Q3_K_S */
    case VT_DTYPE_Q4_K: return 14; /* Q4_K_S */
    case VT_DTYPE_Q5_K: return 16; /* Q5_K_S */
    case VT_DTYPE_Q6_K: return 18;
    case VT_DTYPE_IQ4_NL: return 25;
    case VT_DTYPE_IQ4_XS: return 30;
    case VT_DTYPE_BF16: return 32;
    case VT_DTYPE_MXFP4: return 38; /* MXFP4_MOE */
    default: return -1;
    }
}

/* ---- random numbers ------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* n values N(0, std) for one row; the stream depends on (key, row) only. */
static void fill_normal(float *x, int64_t n, uint64_t key, int64_t row, float std) {
    uint64_t s = key ^ ((uint64_t)row * 0xD1B54A32D192ED03ull);
    splitmix64(&s);
    for (int64_t i = 0; i < n; i += 2) {
        /* Box-Muller on two 24-bit uniforms in (0, 1] and [0, 1) */
        uint64_t r = splitmix64(&s);
        float u1 = (float)((r >> 40) + 1) * (1.0f / 16777216.0f);
        float u2 = (float)((r >> 8) & 0xFFFFFF) * (1.0f / 16777216.0f);
        float mag = std * sqrtf(-2.0f * logf(u1));
        x[i] = mag * cosf(6.28318530718f * u2);
        if (i + 1 < n) x[i + 1] = mag * sinf(6.28318530718f * u2);
    }
}

/* ---- the tensor plan ------------------------------------------------------------- */

/* FILL_RAMP: element i of n is 1 + std * (i / (n - 1))^2 (LongRoPE's factors:
 * 1 on the fast pairs, growing towards the slow ones, as in Phi-3's) */
typedef enum { FILL_NORMAL, FILL_ONES, FILL_NEG_EXP, FILL_RAMP } fill_kind;

typedef struct synth_tensor {
    char name[64];
    int64_t ne0, ne1;   /* row length, rows (ne1 == 1 for vectors; all rows of a 3-D tensor) */
    int64_t ne2;        /* 3-D tensors: the outer dimension (ne1 counts ne2 x its rows) */
    float std;          /* FILL_NORMAL's deviation */
    uint32_t n_dims;
    vt_dtype type;
    fill_kind fill;
    size_t row_bytes;
    size_t bytes;
    uint8_t *data;      /* (ne1, row_bytes) */
    uint64_t key;       /* seed mixed with the name hash */
} synth_tensor;

typedef struct synth_job {
    synth_tensor *tensors;
    int n_tensors;
    int64_t chunk_rows_elems; /* elements per work chunk (whole rows) */
    /* chunk c of tensor t covers rows [first_row[t] + ...); chunks are numbered
     * across all tensors in order */
    int64_t *chunk_start;     /* (n_tensors + 1) first global chunk of each tensor */
    int64_t *rows_per_chunk;  /* (n_tensors) */
    atomic_int_fast64_t next_chunk;
    atomic_int_fast64_t done_elems;
    int64_t total_elems;
    bool progress;
    double t0;
} synth_job;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void synth_worker(void *ctx, int ith, int nth) {
    (void)nth;
    synth_job *job = ctx;
    float *scratch = NULL;
    int64_t scratch_n = 0;
    double last_print = 0;
    int t = 0;
    for (;;) {
        int64_t c = atomic_fetch_add(&job->next_chunk, 1);
        if (c >= job->chunk_start[job->n_tensors]) break;
        while (job->chunk_start[t + 1] <= c) t++;
        while (job->chunk_start[t] > c) t--;
        synth_tensor *st = &job->tensors[t];
        int64_t r0 = (c - job->chunk_start[t]) * job->rows_per_chunk[t];
        int64_t r1 = r0 + job->rows_per_chunk[t];
        if (r1 > st->ne1) r1 = st->ne1;
        if (st->ne0 > scratch_n) {
            free(scratch);
            scratch = malloc((size_t)st->ne0 * sizeof(float));
            scratch_n = scratch ? st->ne0 : 0;
            VT_ASSERT(scratch); /* a row of at most SYNTH_MAX_DIM floats */
        }
        const quant_traits *tr = quant_traits_get(st->type);
        for (int64_t r = r0; r < r1; r++) {
            if (st->fill == FILL_ONES) {
                for (int64_t i = 0; i < st->ne0; i++) scratch[i] = 1.0f;
            } else if (st->fill == FILL_RAMP) {
                for (int64_t i = 0; i < st->ne0; i++) {
                    const float x = st->ne0 > 1 ? (float)i / (float)(st->ne0 - 1) : 0.0f;
                    scratch[i] = 1.0f + st->std * x * x;
                }
            } else {
                fill_normal(scratch, st->ne0, st->key, r, st->std);
                if (st->fill == FILL_NEG_EXP)
                    for (int64_t i = 0; i < st->ne0; i++) scratch[i] = -expf(scratch[i]);
            }
            tr->quant_ref(scratch, st->data + (size_t)r * st->row_bytes, st->ne0);
        }
        int64_t done = atomic_fetch_add(&job->done_elems, (r1 - r0) * st->ne0) + (r1 - r0) * st->ne0;
        if (job->progress && ith == 0) {
            double t_now = now_s();
            if (t_now - last_print > 0.5) {
                last_print = t_now;
                fprintf(stderr, "\rsynth: %5.1f%% of %.1f M weights, %.1f s", 100.0 * (double)done / (double)job->total_elems,
                        (double)job->total_elems / 1e6, t_now - job->t0);
            }
        }
    }
    free(scratch);
}

/* ---- parameters ---------------------------------------------------------------- */

static vt_status check_type(vt_dtype type, const char *what, int64_t row, const char *row_name) {
    const quant_traits *tr = quant_traits_get(type);
    if (!tr || !tr->quant_ref || type == VT_DTYPE_Q8_1 || type == VT_DTYPE_Q8_K)
        return vt_errorf(VT_E_INVALID, "synth: %s type %d cannot be written", what, (int)type);
    if (row % tr->block_elems != 0)
        return vt_errorf(VT_E_INVALID,
                         "synth: %s type %s needs rows that are a multiple of %lld, but %s is %lld",
                         what, tr->name, (long long)tr->block_elems, row_name, (long long)row);
    return VT_OK;
}

static vt_status check_params(const synth_params *p, int64_t head_dim) {
    struct { const char *name; int64_t v; } dims[] = {
        {"n_layer", p->n_layer}, {"n_embd", p->n_embd}, {"n_head", p->n_head},
        {"n_head_kv", p->n_head_kv}, {"n_ff", p->n_ff}, {"n_ctx", p->n_ctx},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i].v < 1 || dims[i].v > SYNTH_MAX_DIM)
            return vt_errorf(VT_E_INVALID, "synth: %s = %lld (must be 1..%lld)", dims[i].name,
                             (long long)dims[i].v, (long long)SYNTH_MAX_DIM);
    }
    if (p->n_layer > 1024)
        return vt_errorf(VT_E_INVALID, "synth: n_layer = %lld (at most 1024)", (long long)p->n_layer);
    if (p->n_head % p->n_head_kv != 0)
        return vt_errorf(VT_E_INVALID, "synth: n_head %lld is not a multiple of n_head_kv %lld",
                         (long long)p->n_head, (long long)p->n_head_kv);
    if (p->head_dim == 0 && p->n_embd % p->n_head != 0)
        return vt_errorf(VT_E_INVALID, "synth: n_embd %lld is not a multiple of n_head %lld",
                         (long long)p->n_embd, (long long)p->n_head);
    if (head_dim < 2 || head_dim % 2 != 0 || head_dim * p->n_head > SYNTH_MAX_DIM)
        return vt_errorf(VT_E_INVALID, "synth: head_dim %lld must be even and >= 2",
                         (long long)head_dim);
    vt_dtype embd_type = p->embd_type == VT_DTYPE_COUNT ? p->type : p->embd_type;
    vt_dtype out_type = p->output_type == VT_DTYPE_COUNT ? p->type : p->output_type;
    VT_TRY(check_type(p->type, "weight", p->n_embd, "n_embd"));
    VT_TRY(check_type(p->type, "weight", p->n_ff, "n_ff"));
    VT_TRY(check_type(p->type, "weight", head_dim * p->n_head, "n_head * head_dim"));
    if (p->n_expert > 0) {
        const int64_t ff_exp = p->n_ff_exp ? p->n_ff_exp : p->n_ff;
        if (p->n_expert > 1024 || p->n_expert_used < 1 || p->n_expert_used > p->n_expert)
            return vt_errorf(VT_E_INVALID, "synth: %lld experts, %lld used (need 1 <= used <= experts <= 1024)",
                             (long long)p->n_expert, (long long)p->n_expert_used);
        if (ff_exp < 1 || ff_exp > SYNTH_MAX_DIM)
            return vt_errorf(VT_E_INVALID, "synth: n_ff_exp = %lld", (long long)ff_exp);
        const vt_dtype et = p->exp_type == VT_DTYPE_COUNT ? p->type : p->exp_type;
        VT_TRY(check_type(et, "expert", ff_exp, "n_ff_exp"));
        VT_TRY(check_type(et, "expert", p->n_embd, "n_embd"));
    }
    VT_TRY(check_type(embd_type, "token_embd", p->n_embd, "n_embd"));
    if (!p->tied) VT_TRY(check_type(out_type, "output", p->n_embd, "n_embd"));
    return VT_OK;
}

/* ---- the generated vocabulary ------------------------------------------------------ */

typedef struct gen_vocab {
    char **tokens;   /* (n) */
    float *scores;   /* (n) */
    int32_t *types;  /* (n) llama token types: 1 normal, 2 unknown, 3 control, 6 byte */
    int64_t n;
} gen_vocab;

static void gen_vocab_free(gen_vocab *v) {
    if (v->tokens)
        for (int64_t i = 0; i < v->n; i++) free(v->tokens[i]);
    free(v->tokens);
    free(v->scores);
    free(v->types);
    memset(v, 0, sizeof *v);
}

static vt_status gen_vocab_make(int64_t n, gen_vocab *v) {
    memset(v, 0, sizeof *v);
    if (n < 259 || n > 1000000)
        return vt_errorf(VT_E_INVALID, "synth: generated vocabulary of %lld tokens (must be 259..1000000)",
                         (long long)n);
    v->tokens = calloc((size_t)n, sizeof *v->tokens);
    v->scores = calloc((size_t)n, sizeof *v->scores);
    v->types = calloc((size_t)n, sizeof *v->types);
    if (!v->tokens || !v->scores || !v->types) goto nomem;
    v->n = n;
    for (int64_t i = 0; i < n; i++) {
        char buf[32];
        if (i == 0) {
            snprintf(buf, sizeof buf, "<unk>");
            v->types[i] = 2;
        } else if (i == 1 || i == 2) {
            snprintf(buf, sizeof buf, i == 1 ? "<s>" : "</s>");
            v->types[i] = 3;
        } else if (i < 259) {
            snprintf(buf, sizeof buf, "<0x%02X>", (unsigned)(i - 3));
            v->types[i] = 6;
        } else {
            snprintf(buf, sizeof buf, "\xe2\x96\x81t%lld", (long long)(i - 259)); /* "▁t<i>" */
            v->types[i] = 1;
            v->scores[i] = -(float)(i - 259);
        }
        v->tokens[i] = strdup(buf);
        if (!v->tokens[i]) goto nomem;
    }
    return VT_OK;
nomem:
    gen_vocab_free(v);
    return vt_errorf(VT_E_NOMEM, "synth: out of memory for a vocabulary of %lld tokens", (long long)n);
}

static vt_status set_gen_vocab(gguf_writer *w, const gen_vocab *v) {
    VT_TRY(gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    VT_TRY(gguf_writer_set_str(w, "tokenizer.ggml.pre", "default"));
    VT_TRY(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens,
                                   (uint64_t)v->n));
    VT_TRY(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v->scores, (uint64_t)v->n));
    VT_TRY(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v->types, (uint64_t)v->n));
    VT_TRY(gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0));
    VT_TRY(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1));
    VT_TRY(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2));
    VT_TRY(gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true));
    VT_TRY(gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false));
    return VT_OK;
}

/* Copy every tokenizer.* key of a parsed vocabulary file; *n_vocab = its token count. */
static vt_status copy_vocab(gguf_writer *w, const gguf_file *f, const char *path, int64_t *n_vocab) {
    const gguf_kv *toks;
    vt_status s = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks);
    if (s != VT_OK) return vt_error_prefix(s, path);
    if (toks->v.arr.n < 1 || toks->v.arr.n > 10000000)
        return vt_errorf(VT_E_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries", path,
                         (unsigned long long)toks->v.arr.n);
    *n_vocab = (int64_t)toks->v.arr.n;
    for (int64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        if (kv->key.len >= 10 && !memcmp(kv->key.ptr, "tokenizer.", 10)) VT_TRY(gguf_writer_copy_kv(w, kv));
    }
    return VT_OK;
}

/* synth_params.control_tokens: the last tokens of the vocabulary (vf's, else
 * gv's) renamed to the given texts, as control tokens; the token and type
 * arrays are written anew (scores and merges stay: the renamed tokens are
 * padding, reserved or generated pieces that no merge makes). */
static vt_status set_control_tokens(gguf_writer *w, const char *list, const gguf_file *vf, const gen_vocab *gv,
                                    int64_t n) {
    char *texts[SYNTH_MAX_CONTROL];
    int k = 0;
    vt_status s = VT_OK;
    char **toks = NULL;
    int32_t *types = NULL;
    const gguf_kv *tk = NULL, *ty = NULL;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0 || k == SYNTH_MAX_CONTROL) {
            s = vt_errorf(VT_E_INVALID, "synth: control tokens '%s': empty texts, or more than %d", list,
                          SYNTH_MAX_CONTROL);
            goto done;
        }
        if (!(texts[k] = strndup(p, len))) goto nomem;
        k++;
        p += len + (e != NULL);
    }
    if (n - k < 259) {
        s = vt_errorf(VT_E_INVALID, "synth: %d control tokens in a vocabulary of %lld", k, (long long)n);
        goto done;
    }
    if (vf) {
        if ((s = gguf_get_arr(vf, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tk)) != VT_OK) goto done;
        if (gguf_get_arr(vf, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &ty) != VT_OK || ty->v.arr.n != (uint64_t)n)
            ty = NULL;
    }
    toks = calloc((size_t)n, sizeof *toks);
    types = malloc(sizeof(int32_t) * (size_t)n);
    if (!toks || !types) goto nomem;
    for (int64_t i = 0; i < n; i++) {
        toks[i] = vf ? strndup(tk->v.arr.strs[i].ptr, (size_t)tk->v.arr.strs[i].len) : strdup(gv->tokens[i]);
        if (!toks[i]) goto nomem;
        if (vf) {
            types[i] = 1;
            if (ty) memcpy(&types[i], (const char *)ty->v.arr.data + (size_t)i * 4, 4);
        } else {
            types[i] = gv->types[i];
        }
    }
    for (int j = 0; j < k; j++) {
        for (int64_t i = 0; i < n - k; i++) {
            if (!strcmp(toks[i], texts[j])) {
                s = vt_errorf(VT_E_INVALID, "synth: control token '%s' is token %lld of the vocabulary already",
                              texts[j], (long long)i);
                goto done;
            }
        }
        const int64_t at = n - k + j;
        free(toks[at]);
        toks[at] = texts[j];
        texts[j] = NULL;
        types[at] = 3;
    }
    if ((s = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n)) != VT_OK)
        goto done;
    s = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n);
    goto done;
nomem:
    s = vt_errorf(VT_E_NOMEM, "synth: out of memory renaming control tokens");
done:
    for (int j = 0; j < k; j++) free(texts[j]);
    for (int64_t i = 0; toks && i < n; i++) free(toks[i]);
    free(toks);
    free(types);
    return s;
}

/* ---- writing --------------------------------------------------------------------- */

static vt_status plan_add(synth_tensor *ts, int *n, uint64_t seed, const char *name, int64_t ne0,
                          int64_t ne1, uint32_t n_dims, vt_dtype type, fill_kind fill) {
    synth_tensor *t = &ts[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ne0 = ne0;
    t->ne1 = ne1;
    t->n_dims = n_dims;
    t->type = type;
    t->fill = fill;
    t->std = SYNTH_STD;
    t->ne2 = 1;
    t->key = seed ^ fnv1a(name);
    if (!quant_row_bytes(type, ne0, &t->row_bytes) || !size_mul(t->row_bytes, (size_t)ne1, &t->bytes))
        return vt_errorf(VT_E_INVALID, "synth: tensor '%s': %lld x %lld is too large", name,
                         (long long)ne0, (long long)ne1);
    t->data = malloc(t->bytes ? t->bytes : 1);
    if (!t->data)
        return vt_errorf(VT_E_NOMEM, "synth: tensor '%s': cannot allocate %zu bytes", name, t->bytes);
    return VT_OK;
}

vt_status synth_write(const synth_params *p, const char *path) {
    vt_status s = VT_OK;
    bool is_llama = p->arch && !strcmp(p->arch, "llama");
    bool is_qwen2 = p->arch && !strcmp(p->arch, "qwen2");
    bool is_qwen3moe = p->arch && !strcmp(p->arch, "qwen3moe");
    bool is_gemma2 = p->arch && !strcmp(p->arch, "gemma2");
    bool is_gemma3 = p->arch && !strcmp(p->arch, "gemma3");
    bool is_gemma = is_gemma2 || is_gemma3;
    bool is_olmo2 = p->arch && !strcmp(p->arch, "olmo2");
    bool is_smollm3 = p->arch && !strcmp(p->arch, "smollm3"); /* llama's tensors and keys */
    bool is_granite = p->arch && !strcmp(p->arch, "granite");  /* the same, plus multipliers */
    bool is_qwen35moe = p->arch && !strcmp(p->arch, "qwen35moe");
    bool is_qwen35 = (p->arch && !strcmp(p->arch, "qwen35")) || is_qwen35moe; /* the hybrid layers */
    bool is_qwen3 = (p->arch && !strcmp(p->arch, "qwen3")) || is_qwen3moe || is_qwen35;
    bool is_gpt_oss = p->arch && !strcmp(p->arch, "gpt-oss");
    bool is_phi3 = p->arch && !strcmp(p->arch, "phi3");
    bool is_glm4 = p->arch && !strcmp(p->arch, "glm4");
    bool is_mistral3 = p->arch && !strcmp(p->arch, "mistral3");
    bool is_muse = p->arch && !strcmp(p->arch, "muse-glimmer");
    const bool fused_up = is_phi3 || is_glm4; /* ffn_up holds gate and up */
    bool qk_norm = is_qwen3 || is_gemma3 || is_muse;
    if (!is_llama && !is_qwen2 && !is_qwen3 && !is_gemma && !is_olmo2 && !is_smollm3 && !is_granite && !is_gpt_oss &&
        !is_phi3 && !is_glm4 && !is_mistral3 && !is_muse)
        return vt_errorf(VT_E_INVALID,
                         "synth: unknown arch '%s' (llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, olmo2, smollm3, granite, "
                         "qwen35, qwen35moe, gpt-oss, phi3, glm4, mistral3, muse-glimmer)",
                         p->arch ? p->arch : "(null)");
    if ((is_qwen3moe || is_gpt_oss || is_qwen35moe) && p->n_expert < 1)
        return vt_errorf(VT_E_INVALID, "synth: %s needs n_expert >= 1", p->arch);
    if (p->n_expert != 0 && !is_llama && !is_qwen3moe && !is_gpt_oss && !is_qwen35moe)
        return vt_errorf(VT_E_INVALID, "synth: arch '%s' has no experts (llama, qwen3moe, qwen35moe or gpt-oss)",
                         p->arch);
    const int64_t ff_shexp = p->n_ff_shexp ? p->n_ff_shexp : p->n_ff;
    if (ff_shexp < 1 || ff_shexp > SYNTH_MAX_DIM || p->n_nextn < 0 || p->n_nextn > 16 || (p->n_nextn && !is_qwen35))
        return vt_errorf(VT_E_INVALID, "synth: n_ff_shexp %lld, n_nextn %lld (0..16, qwen35/qwen35moe only)",
                         (long long)ff_shexp, (long long)p->n_nextn);
    if (is_qwen35moe) VT_TRY(check_type(p->type, "weight", ff_shexp, "n_ff_shexp"));
    if (is_gpt_oss && p->tied)
        return vt_errorf(VT_E_INVALID, "synth: gpt-oss has no tied head (llama.cpp requires output.weight)");
    if (is_gpt_oss && p->n_swa < 1)
        return vt_errorf(VT_E_INVALID, "synth: gpt-oss needs a sliding window (n_swa >= 1)");
    if (is_muse && p->n_swa < 1)
        return vt_errorf(VT_E_INVALID, "synth: muse-glimmer needs a sliding window (n_swa >= 1)");
    if (is_muse && p->tied)
        return vt_errorf(VT_E_INVALID, "synth: muse-glimmer has no tied head (llama.cpp requires output.weight)");
    if (p->n_expert < 0) return vt_errorf(VT_E_INVALID, "synth: n_expert = %lld", (long long)p->n_expert);
    const bool moe = p->n_expert > 0;
    const int64_t ff_exp = is_llama || !p->n_ff_exp ? p->n_ff : p->n_ff_exp;
    if (p->n_head < 1) return vt_errorf(VT_E_INVALID, "synth: n_head = %lld", (long long)p->n_head);
    int64_t head_dim = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    VT_TRY(check_params(p, head_dim));
    /* qwen35's linear layers */
    const int64_t ssm_ds = p->ssm_d_state ? p->ssm_d_state : head_dim;
    const int64_t ssm_nk = p->ssm_n_k_heads ? p->ssm_n_k_heads : p->n_head_kv;
    const int64_t ssm_nv = p->ssm_n_v_heads ? p->ssm_n_v_heads : p->n_head;
    const int64_t ssm_conv = p->ssm_conv_kernel ? p->ssm_conv_kernel : 4;
    const int64_t interval = p->full_attn_interval ? p->full_attn_interval : 4;
    /* qwen35: a quarter of each head; glm4: half (partial_rotary_factor 0.5) */
    const int64_t n_rot = is_qwen35 ? head_dim / 4 : is_glm4 ? head_dim / 2 : head_dim;
    if (is_glm4 && head_dim % 4 != 0)
        return vt_errorf(VT_E_INVALID, "synth: glm4 head_dim %lld must be a multiple of 4 (rope over half)",
                         (long long)head_dim);
    if (is_qwen35) {
        if (ssm_ds < 1 || ssm_ds > 1024 || ssm_nk < 1 || ssm_nv < 1 || ssm_nv % ssm_nk != 0 ||
            ssm_nv * ssm_ds > SYNTH_MAX_DIM || ssm_conv < 1 || ssm_conv > 64 || interval < 1)
            return vt_errorf(VT_E_INVALID,
                             "synth: qwen35 linear layers: d_state %lld, %lld k heads, %lld v heads (a multiple), "
                             "conv kernel %lld (1..64), full attention every %lld layers",
                             (long long)ssm_ds, (long long)ssm_nk, (long long)ssm_nv, (long long)ssm_conv,
                             (long long)interval);
        if (head_dim % 8 != 0)
            return vt_errorf(VT_E_INVALID, "synth: qwen35 head_dim %lld must be a multiple of 8 (rope over a quarter)",
                             (long long)head_dim);
        VT_TRY(check_type(p->type, "weight", ssm_nv * ssm_ds, "ssm_n_v_heads * ssm_d_state"));
    }
    vt_dtype embd_type = p->embd_type == VT_DTYPE_COUNT ? p->type : p->embd_type;
    vt_dtype out_type = p->output_type == VT_DTYPE_COUNT ? p->type : p->output_type;
    vt_dtype exp_type = p->exp_type == VT_DTYPE_COUNT ? p->type : p->exp_type;
    float rope_base = p->rope_freq_base > 0 ? p->rope_freq_base
                                            : (is_llama || is_gemma || is_olmo2 || is_smollm3 || is_granite || is_phi3 ||
                                                       is_glm4 || is_mistral3 || is_muse
                                                   ? 10000.0f
                                                   : 1000000.0f);
    float rms_eps = p->rms_eps > 0 ? p->rms_eps : (is_llama ? 1e-5f : 1e-6f);
    const bool tied = (p->tied && !is_olmo2) || is_gemma2; /* olmo2's head is its own */
    if (is_olmo2 && head_dim * p->n_head != p->n_embd)
        return vt_errorf(VT_E_INVALID, "synth: olmo2 needs n_head * head_dim == n_embd");
    if (is_gemma2 && p->n_swa <= 0 && p->n_ctx < 4096)
        return vt_errorf(VT_E_INVALID, "synth: gemma2 needs n_swa (its default window 4096 is past n_ctx %lld)",
                         (long long)p->n_ctx);
    const bool swa_arr = p->swa_pattern_arr || p->swa_layers;
    if (swa_arr && (!(is_gemma || is_olmo2 || is_gpt_oss || is_muse) || p->n_swa < 1))
        return vt_errorf(VT_E_INVALID, "synth: a per-layer sliding_window_pattern needs a window (n_swa) and arch "
                                       "gemma2, gemma3, olmo2, gpt-oss or muse-glimmer");
    if (p->swa_layers && (strlen(p->swa_layers) != (size_t)p->n_layer ||
                          strspn(p->swa_layers, "01") != (size_t)p->n_layer))
        return vt_errorf(VT_E_INVALID, "synth: swa_layers '%.64s' is not one '0' or '1' per layer (%lld)",
                         p->swa_layers, (long long)p->n_layer);

    gguf_writer *w = NULL;
    mapfile vmap = {0};
    gguf_file vf = {0};
    bool vf_open = false;
    gen_vocab gv = {0};
    synth_tensor *ts = NULL;
    int n_t = 0;
    tp_pool *pool = NULL;
    synth_job job = {0};
    int64_t n_vocab = p->n_vocab;

    if ((s = gguf_writer_create(&w)) != VT_OK) goto done;

    /* tokenizer first: it fixes n_vocab */
    if (p->vocab_path) {
        if ((s = outfile_check_not_input(p->vocab_path, path)) != VT_OK) goto done;
        if ((s = mapfile_open(p->vocab_path, &vmap)) != VT_OK) goto done;
        if ((s = gguf_parse(vmap.data, vmap.size, p->vocab_path, &vf)) != VT_OK) goto done;
        vf_open = true;
        if ((s = copy_vocab(w, &vf, p->vocab_path, &n_vocab)) != VT_OK) goto done;
    } else {
        if ((s = gen_vocab_make(n_vocab, &gv)) != VT_OK) goto done;
        if ((s = set_gen_vocab(w, &gv)) != VT_OK) goto done;
    }
    if (p->control_tokens && *p->control_tokens &&
        (s = set_control_tokens(w, p->control_tokens, p->vocab_path ? &vf : NULL, &gv, n_vocab)) != VT_OK)
        goto done;

    /* metadata */
    char key[128];
    const char *a = p->arch;
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        if ((s = (expr)) != VT_OK) goto done;                                                      \
    } while (0)
    TRY(gguf_writer_set_str(w, "general.architecture", a));
    TRY(gguf_writer_set_str(w, "general.name", "vt-synth"));
    int ftype = synth_file_type(moe && exp_type == VT_DTYPE_MXFP4 ? VT_DTYPE_MXFP4 : p->type);
    if (ftype >= 0) TRY(gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype));
    TRY(gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)(p->n_layer + p->n_nextn)));
    if (p->n_nextn > 0) TRY(gguf_writer_set_u32(w, KEY("nextn_predict_layers"), (uint32_t)p->n_nextn));
    TRY(gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)p->n_ctx));
    TRY(gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)p->n_embd));
    TRY(gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)p->n_ff));
    if (moe) {
        TRY(gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)p->n_expert));
        TRY(gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)p->n_expert_used));
        if (is_qwen3moe || is_gpt_oss || is_qwen35moe)
            TRY(gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)ff_exp));
        if (is_qwen35moe)
            TRY(gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)ff_shexp));
    }
    TRY(gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)p->n_head));
    TRY(gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)p->n_head_kv));
    TRY(gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), rms_eps));
    if (!is_llama || head_dim * p->n_head != p->n_embd) {
        TRY(gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)head_dim));
        TRY(gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)head_dim));
    }
    TRY(gguf_writer_set_f32(w, KEY("rope.freq_base"), rope_base));
    TRY(gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)n_rot));
    if (is_qwen35) {
        const int32_t pairs = (int32_t)(n_rot / 2);
        const int32_t sections[4] = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0};
        TRY(gguf_writer_set_arr(w, KEY("rope.dimension_sections"), GGUF_TYPE_INT32, sections, 4));
        TRY(gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), (uint32_t)ssm_conv));
        TRY(gguf_writer_set_u32(w, KEY("ssm.state_size"), (uint32_t)ssm_ds));
        TRY(gguf_writer_set_u32(w, KEY("ssm.group_count"), (uint32_t)ssm_nk));
        TRY(gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)ssm_nv));
        TRY(gguf_writer_set_u32(w, KEY("ssm.inner_size"), (uint32_t)(ssm_nv * ssm_ds)));
        TRY(gguf_writer_set_u32(w, KEY("full_attention_interval"), (uint32_t)interval));
    }
    if (p->n_swa > 0) {
        TRY(gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)p->n_swa));
        if (swa_arr) {
            const int64_t n = is_gpt_oss && p->swa_pattern == 0 ? 2 : p->swa_pattern; /* gpt-oss's default */
            uint8_t slides[1024]; /* n_layer <= 1024 (checked above) */
            for (int64_t il = 0; il < p->n_layer; il++)
                slides[il] = p->swa_layers ? p->swa_layers[il] == '1' : n == 0 || il % n < n - 1;
            TRY(gguf_writer_set_arr(w, KEY("attention.sliding_window_pattern"), GGUF_TYPE_BOOL, slides,
                                    (uint64_t)p->n_layer));
        } else if (!is_gpt_oss || p->swa_pattern > 0) { /* gpt-oss without the key: period 2 */
            TRY(gguf_writer_set_u32(w, KEY("attention.sliding_window_pattern"), (uint32_t)p->swa_pattern));
        }
    }
    if (is_granite) { /* Granite 3's embedding, residual and logit multipliers; attention
                         sharper than 1 / sqrt(head_dim) so that its scale shows */
        TRY(gguf_writer_set_f32(w, KEY("embedding_scale"), 12.0f));
        TRY(gguf_writer_set_f32(w, KEY("residual_scale"), 0.22f));
        TRY(gguf_writer_set_f32(w, KEY("attention.scale"), 2.0f / sqrtf((float)head_dim)));
        TRY(gguf_writer_set_f32(w, KEY("logit_scale"), 8.0f));
    }
    if (is_muse) /* Muse Glimmer's output multiplier */
        TRY(gguf_writer_set_f32(w, KEY("logit_scale"), 2.0f));
    if (is_muse && p->final_softcap > 0)
        TRY(gguf_writer_set_f32(w, KEY("final_logit_softcapping"), p->final_softcap));
    if ((is_gemma || is_muse || is_gpt_oss) && p->rope_freq_base_swa > 0)
        TRY(gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), p->rope_freq_base_swa));
    if (is_gemma2 && p->attn_softcap > 0)
        TRY(gguf_writer_set_f32(w, KEY("attn_logit_softcapping"), p->attn_softcap));
    if (is_gemma && p->final_softcap > 0)
        TRY(gguf_writer_set_f32(w, KEY("final_logit_softcapping"), p->final_softcap));
    const int64_t orig_ctx = p->yarn_orig_ctx > 0 ? p->yarn_orig_ctx : p->n_ctx;
    if (p->yarn_factor > 0) {
        TRY(gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn"));
        TRY(gguf_writer_set_f32(w, KEY("rope.scaling.factor"), p->yarn_factor));
        TRY(gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)orig_ctx));
        if (is_mistral3) { /* Ministral 3's log multiplier; betas off their defaults so that they show */
            TRY(gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_fast"), 16.0f));
            TRY(gguf_writer_set_f32(w, KEY("rope.scaling.yarn_beta_slow"), 2.0f));
            TRY(gguf_writer_set_f32(w, KEY("rope.scaling.yarn_log_multiplier"), 1.0f));
        }
    }
    if (is_mistral3) TRY(gguf_writer_set_f32(w, KEY("attention.temperature_scale"), 0.1f));
    if (is_phi3) { /* LongRoPE as Phi-3's converter writes it: the original context and
                      the attention factor sqrt(1 + ln(n_ctx / orig) / ln(orig)) */
        const double sc = (double)p->n_ctx / (double)orig_ctx;
        const float af = sc > 1.0 ? (float)sqrt(1.0 + log(sc) / log((double)orig_ctx)) : 1.0f;
        TRY(gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), (uint32_t)orig_ctx));
        TRY(gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"), af));
    }
#undef KEY

    /* tensors */
    int max_t = 5 + SYNTH_MAX_TENSORS_PER_LAYER * (int)(p->n_layer + p->n_nextn);
    ts = calloc((size_t)max_t, sizeof *ts);
    if (!ts) {
        s = vt_errorf(VT_E_NOMEM, "synth: out of memory");
        goto done;
    }
    int64_t q_dim = head_dim * p->n_head, kv_dim = head_dim * p->n_head_kv;
    TRY(plan_add(ts, &n_t, p->seed, "token_embd.weight", p->n_embd, n_vocab, 2, embd_type, FILL_NORMAL));
    TRY(plan_add(ts, &n_t, p->seed, "output_norm.weight", p->n_embd, 1, 1, VT_DTYPE_F32, FILL_ONES));
    if (!tied)
        TRY(plan_add(ts, &n_t, p->seed, "output.weight", p->n_embd, n_vocab, 2, out_type, FILL_NORMAL));
    if (is_phi3) { /* LongRoPE: short factors near 1, long ones up to 8 */
        TRY(plan_add(ts, &n_t, p->seed, "rope_factors_long.weight", n_rot / 2, 1, 1, VT_DTYPE_F32, FILL_RAMP));
        ts[n_t - 1].std = 7.0f;
        TRY(plan_add(ts, &n_t, p->seed, "rope_factors_short.weight", n_rot / 2, 1, 1, VT_DTYPE_F32, FILL_RAMP));
        ts[n_t - 1].std = 0.5f;
    }
    for (int64_t l = 0; l < p->n_layer + p->n_nextn; l++) {
        const bool mtp = l >= p->n_layer; /* a multi-token-prediction layer: full attention */
        char nm[64];
#define NAME(suffix) (snprintf(nm, sizeof nm, "blk.%lld.%s", (long long)l, suffix), nm)
        if (!is_olmo2)
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_norm.weight"), p->n_embd, 1, 1, VT_DTYPE_F32, FILL_ONES));
        if (is_qwen35 && !mtp && (l + 1) % interval != 0) { /* a Gated DeltaNet layer */
            const int64_t vd = ssm_nv * ssm_ds, conv_ch = 2 * ssm_nk * ssm_ds + vd;
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_qkv.weight"), p->n_embd, conv_ch, 2, p->type, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_gate.weight"), p->n_embd, vd, 2, p->type, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("ssm_conv1d.weight"), ssm_conv, conv_ch, 2, VT_DTYPE_F32, FILL_NORMAL));
            ts[n_t - 1].std = 0.3f;
            TRY(plan_add(ts, &n_t, p->seed, NAME("ssm_dt.bias"), ssm_nv, 1, 1, VT_DTYPE_F32, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("ssm_a"), ssm_nv, 1, 1, VT_DTYPE_F32, FILL_NEG_EXP));
            ts[n_t - 1].std = 1.0f;
            TRY(plan_add(ts, &n_t, p->seed, NAME("ssm_beta.weight"), p->n_embd, ssm_nv, 2, VT_DTYPE_F32, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("ssm_alpha.weight"), p->n_embd, ssm_nv, 2, VT_DTYPE_F32, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("ssm_norm.weight"), ssm_ds, 1, 1, VT_DTYPE_F32, FILL_ONES));
            TRY(plan_add(ts, &n_t, p->seed, NAME("ssm_out.weight"), vd, p->n_embd, 2, p->type, FILL_NORMAL));
            goto ffn;
        }
        if (is_phi3 || (is_glm4 && p->fused_qkv)) { /* one attn_qkv: Q, K, V rows */
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_qkv.weight"), p->n_embd, q_dim + 2 * kv_dim, 2, p->type,
                         FILL_NORMAL));
            if (p->qk_std > 0) ts[n_t - 1].std = p->qk_std; /* V's rows too */
            if (is_glm4)
                TRY(plan_add(ts, &n_t, p->seed, NAME("attn_qkv.bias"), q_dim + 2 * kv_dim, 1, 1, VT_DTYPE_F32,
                             FILL_NORMAL));
            if (is_phi3) goto attn_out;
            goto post_norms;
        }
        TRY(plan_add(ts, &n_t, p->seed, NAME("attn_q.weight"), p->n_embd, is_qwen35 ? 2 * q_dim : q_dim, 2, p->type,
                     FILL_NORMAL));
        if (p->qk_std > 0) ts[n_t - 1].std = p->qk_std;
        TRY(plan_add(ts, &n_t, p->seed, NAME("attn_k.weight"), p->n_embd, kv_dim, 2, p->type, FILL_NORMAL));
        if (p->qk_std > 0) ts[n_t - 1].std = p->qk_std;
        TRY(plan_add(ts, &n_t, p->seed, NAME("attn_v.weight"), p->n_embd, kv_dim, 2, p->type, FILL_NORMAL));
        if (is_qwen2 || is_gpt_oss || is_glm4) {
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_q.bias"), q_dim, 1, 1, VT_DTYPE_F32, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_k.bias"), kv_dim, 1, 1, VT_DTYPE_F32, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_v.bias"), kv_dim, 1, 1, VT_DTYPE_F32, FILL_NORMAL));
        }
        if (is_olmo2) { /* QK-norm over whole rows */
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_q_norm.weight"), q_dim, 1, 1, VT_DTYPE_F32, FILL_ONES));
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_k_norm.weight"), kv_dim, 1, 1, VT_DTYPE_F32, FILL_ONES));
        }
    post_norms:
        if (is_gemma || is_olmo2 || is_glm4 || is_muse) {
            TRY(plan_add(ts, &n_t, p->seed, NAME("post_attention_norm.weight"), p->n_embd, 1, 1, VT_DTYPE_F32, FILL_ONES));
            TRY(plan_add(ts, &n_t, p->seed, NAME("post_ffw_norm.weight"), p->n_embd, 1, 1, VT_DTYPE_F32, FILL_ONES));
        }
        if (qk_norm) {
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_q_norm.weight"), head_dim, 1, 1, VT_DTYPE_F32, FILL_ONES));
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_k_norm.weight"), head_dim, 1, 1, VT_DTYPE_F32, FILL_ONES));
        }
    attn_out:
        TRY(plan_add(ts, &n_t, p->seed, NAME("attn_output.weight"), q_dim, p->n_embd, 2, p->type, FILL_NORMAL));
        if (is_muse) { /* the attention output gate, N(0, 0.2): logits of spread ~3, so that
                          sigmoid(gate) varies (at 0.02 it would sit near 0.5) */
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_gate.weight"), p->n_embd, q_dim, 2, p->type, FILL_NORMAL));
            ts[n_t - 1].std = 0.2f;
        }
        if (is_gpt_oss) {
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_output.bias"), p->n_embd, 1, 1, VT_DTYPE_F32, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("attn_sinks.weight"), p->n_head, 1, 1, VT_DTYPE_F32, FILL_NORMAL));
            ts[n_t - 1].std = 1.0f;
        }
    ffn:
        if (!is_olmo2)
            TRY(plan_add(ts, &n_t, p->seed, NAME(is_qwen35 || is_gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"),
                         p->n_embd, 1, 1, VT_DTYPE_F32, FILL_ONES));
        if (moe) {
            const int64_t ne = p->n_expert;
            TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_gate_inp.weight"), p->n_embd, ne, 2, VT_DTYPE_F32, FILL_NORMAL));
            ts[n_t - 1].std = 3.0f / sqrtf((float)p->n_embd);
            /* 3-D: ne1 counts all experts' rows, ne2 the experts */
            TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_gate_exps.weight"), p->n_embd, ff_exp * ne, 3, exp_type,
                         FILL_NORMAL));
            ts[n_t - 1].ne2 = ne;
            TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_up_exps.weight"), p->n_embd, ff_exp * ne, 3, exp_type,
                         FILL_NORMAL));
            ts[n_t - 1].ne2 = ne;
            TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_down_exps.weight"), ff_exp, p->n_embd * ne, 3, exp_type,
                         FILL_NORMAL));
            ts[n_t - 1].ne2 = ne;
            if (is_qwen35moe) { /* the shared expert and its gate */
                TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_gate_inp_shexp.weight"), p->n_embd, 1, 2, VT_DTYPE_F32,
                             FILL_NORMAL));
                ts[n_t - 1].std = 1.0f / sqrtf((float)p->n_embd);
                TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_gate_shexp.weight"), p->n_embd, ff_shexp, 2, p->type,
                             FILL_NORMAL));
                TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_up_shexp.weight"), p->n_embd, ff_shexp, 2, p->type,
                             FILL_NORMAL));
                TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_down_shexp.weight"), ff_shexp, p->n_embd, 2, p->type,
                             FILL_NORMAL));
            }
            if (is_gpt_oss) { /* 2-D biases (n_out, n_expert): ne1 = ne2 rows of one */
                TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_gate_inp.bias"), ne, 1, 1, VT_DTYPE_F32, FILL_NORMAL));
                TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_gate_exps.bias"), ff_exp, ne, 2, VT_DTYPE_F32,
                             FILL_NORMAL));
                TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_up_exps.bias"), ff_exp, ne, 2, VT_DTYPE_F32, FILL_NORMAL));
                TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_down_exps.bias"), p->n_embd, ne, 2, VT_DTYPE_F32,
                             FILL_NORMAL));
            }
        } else if (fused_up) { /* gate rows, then up rows */
            TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_up.weight"), p->n_embd, 2 * p->n_ff, 2, p->type, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_down.weight"), p->n_ff, p->n_embd, 2, p->type, FILL_NORMAL));
        } else {
            TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_gate.weight"), p->n_embd, p->n_ff, 2, p->type, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_up.weight"), p->n_embd, p->n_ff, 2, p->type, FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("ffn_down.weight"), p->n_ff, p->n_embd, 2, p->type, FILL_NORMAL));
        }
        if (mtp) { /* what makes it an MTP block (llama.cpp's load_block_mtp) */
            TRY(plan_add(ts, &n_t, p->seed, NAME("nextn.eh_proj.weight"), 2 * p->n_embd, p->n_embd, 2, p->type,
                         FILL_NORMAL));
            TRY(plan_add(ts, &n_t, p->seed, NAME("nextn.enorm.weight"), p->n_embd, 1, 1, VT_DTYPE_F32, FILL_ONES));
            TRY(plan_add(ts, &n_t, p->seed, NAME("nextn.hnorm.weight"), p->n_embd, 1, 1, VT_DTYPE_F32, FILL_ONES));
            TRY(plan_add(ts, &n_t, p->seed, NAME("nextn.shared_head_norm.weight"), p->n_embd, 1, 1, VT_DTYPE_F32,
                         FILL_ONES));
        }
#undef NAME
    }

    /* fill: chunks of whole rows, about 256K elements each, handed out in order */
    job.tensors = ts;
    job.n_tensors = n_t;
    job.chunk_start = calloc((size_t)n_t + 1, sizeof *job.chunk_start);
    job.rows_per_chunk = calloc((size_t)n_t, sizeof *job.rows_per_chunk);
    if (!job.chunk_start || !job.rows_per_chunk) {
        s = vt_errorf(VT_E_NOMEM, "synth: out of memory");
        goto done;
    }
    for (int i = 0; i < n_t; i++) {
        int64_t rows = ((int64_t)1 << 18) / ts[i].ne0;
        job.rows_per_chunk[i] = rows < 1 ? 1 : rows;
        job.chunk_start[i + 1] =
            job.chunk_start[i] + (ts[i].ne1 + job.rows_per_chunk[i] - 1) / job.rows_per_chunk[i];
        job.total_elems += ts[i].ne0 * ts[i].ne1;
    }
    atomic_init(&job.next_chunk, 0);
    atomic_init(&job.done_elems, 0);
    job.progress = p->progress;
    job.t0 = now_s();
    int nth = p->n_threads > 0 ? p->n_threads : tp_default_threads();
    if ((s = tp_create(nth, &pool)) != VT_OK) goto done;
    tp_run(pool, synth_worker, &job);
    if (p->progress)
        fprintf(stderr, "\rsynth: 100.0%% of %.1f M weights, %.1f s\n", (double)job.total_elems / 1e6,
                now_s() - job.t0);

    for (int i = 0; i < n_t; i++) {
        int64_t ne[3] = {ts[i].ne0, ts[i].ne1 / ts[i].ne2, ts[i].ne2};
        TRY(gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ne, ts[i].data, ts[i].bytes));
    }
    TRY(gguf_writer_write(w, path));
#undef TRY

done:
    if (pool) tp_destroy(pool);
    free(job.chunk_start);
    free(job.rows_per_chunk);
    if (ts)
        for (int i = 0; i < n_t; i++) free(ts[i].data);
    free(ts);
    gen_vocab_free(&gv);
    if (vf_open) gguf_free(&vf);
    mapfile_close(&vmap);
    gguf_writer_destroy(w);
    return s;
}
