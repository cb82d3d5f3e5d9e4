/* A loaded model: hyperparameters, weights (views into the mmap'd GGUF) and the
 * tokenizer. Architectures: llama (Llama 2/3, Mistral, TinyLlama, SmolLM), qwen2
 * (Q/K/V biases, NeoX rope) and qwen3 (per-head Q/K RMSNorm, NeoX rope). They
 * differ only in the flags below, so one forward pass serves all three. */
#ifndef VT_MODEL_MODEL_H
#define VT_MODEL_MODEL_H

#include "base/mapfile.h"
#include "cpu/matmul.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "vt.h"

#include <pthread.h>

typedef enum model_arch { MODEL_ARCH_LLAMA, MODEL_ARCH_QWEN2, MODEL_ARCH_QWEN3 } model_arch;

typedef enum model_rope {
    MODEL_ROPE_NORM, /* rotate adjacent pairs (x[2i], x[2i+1]): llama */
    MODEL_ROPE_NEOX, /* rotate halves (x[i], x[i + n_rot/2]): qwen2, qwen3 */
} model_rope;

/* The largest training context vt_model_load accepts (the contexts' n_ctx limit too). */
#define MODEL_MAX_CTX (1 << 24)

typedef struct model_hparams {
    model_arch arch;
    int64_t n_vocab;
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;   /* per head, for Q and K and V */
    int64_t n_ff;
    int64_t n_ctx_train;
    int64_t n_rot;      /* rotated dimensions per head (<= head_dim) */
    model_rope rope;
    float rope_freq_base;
    float rope_freq_scale; /* 1 / linear scaling factor */
    float rms_eps;
} model_hparams;

typedef struct layer_weights {
    const float *attn_norm;        /* (n_embd) */
    mm_weight wq;                  /* (n_head * head_dim, n_embd) */
    mm_weight wk, wv;              /* (n_head_kv * head_dim, n_embd) */
    mm_weight wo;                  /* (n_embd, n_head * head_dim) */
    const float *bq, *bk, *bv;     /* qwen2 biases, or NULL */
    const float *q_norm, *k_norm;  /* qwen3 per-head norms (head_dim), or NULL */
    const float *ffn_norm;         /* (n_embd) */
    mm_weight w_gate, w_up;        /* (n_ff, n_embd) */
    mm_weight w_down;              /* (n_embd, n_ff) */
} layer_weights;

struct vt_model {
    char *path;
    mapfile map;
    gguf_file gguf;
    model_hparams hp;
    tokenizer *tok;

    vt_dtype embd_type;            /* token_embd rows, dequantized on lookup */
    const uint8_t *embd;           /* (n_vocab, embd_row_bytes) */
    size_t embd_row_bytes;
    const float *output_norm;      /* (n_embd) */
    mm_weight output;              /* (n_vocab, n_embd), token_embd when tied */
    const float *rope_freqs;       /* (n_rot / 2) llama3 frequency factors, or NULL */
    layer_weights *layers;         /* (n_layer) */
    mm_arena arena;                /* the packed copies of the matrices, in forward order */

    void **owned;                  /* buffers the model allocated (converted norms) */
    int64_t n_owned, cap_owned;
    size_t weight_bytes;
    size_t step_bytes;             /* read by one decode step (vt_model_step_bytes) */
    char desc[256];

    /* model_nonfinite_error's scan of the weights, done once, on the first error */
    pthread_mutex_t scan_mu;
    bool scan_done;
    char scan_result[256];         /* "tensor '...': element N is nan", or "" */
};

typedef struct vt_model model;

/* VT_E_NUMERIC for a logits row with a NaN or an infinity, produced at `step`
 * (a phrase for the message: "decode of batch token 3 (sequence 0, position 7)").
 * The message also names the first weight tensor of the file that holds a
 * non-finite value, or says that all are finite (then the activations
 * overflowed). The weights are scanned once per model, on the first such error;
 * thread-safe. */
vt_status model_nonfinite_error(vt_model *m, const char *step);

/* Rows of token_embd for tokens[0..n) into out (n, n_embd). Ids are checked by
 * the caller. */
void model_embed_rows(const model *m, const int32_t *tokens, int64_t n, float *out);

#endif
