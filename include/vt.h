/* vt: a CPU LLM inference engine for GGUF models.
 *
 * Public C API. All handles are opaque; every function that can fail returns a
 * vt_status and, on failure, leaves a message for vt_last_error(). The library
 * never exits or aborts on bad input. */
#ifndef VT_H
#define VT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vt_status {
    VT_OK = 0,
    VT_E_IO,          /* the OS refused a read, write, open or map */
    VT_E_FORMAT,      /* a file or a request is malformed */
    VT_E_NOMEM,       /* an allocation failed, or a budget is exhausted */
    VT_E_RANGE,       /* a number is outside what is allowed */
    VT_E_UNSUPPORTED, /* well-formed, but vt does not implement it */
    VT_E_BUSY,        /* try again later (queue full, resources in use) */
    VT_E_INVALID,     /* an argument from the caller is invalid */
    VT_E_NOT_FOUND,   /* a named thing (key, tensor, request id) does not exist */
    VT_E_ABORTED,     /* the operation was cancelled */
    VT_E_NUMERIC,     /* a computation gave NaN or infinity (e.g. a logits row, from
                         non-finite weights); the message names the step and, when
                         known, the tensor */
} vt_status;

/* The message of the last failure on this thread. Never NULL. */
const char *vt_last_error(void);
/* A short fixed name for a status ("bad format"). */
const char *vt_status_str(vt_status s);

/* ---- models ------------------------------------------------------------------ */

typedef struct vt_model vt_model;

/* Rope scaling types: llama.cpp's llama_rope_scaling_type, same values. */
typedef enum vt_rope_scaling {
    VT_ROPE_SCALING_UNSPECIFIED = -1, /* the file's rope.scaling.type (linear where absent) */
    VT_ROPE_SCALING_NONE = 0,         /* never scaled, whatever the factor */
    VT_ROPE_SCALING_LINEAR = 1,       /* positions times freq_scale */
    VT_ROPE_SCALING_YARN = 2,         /* YaRN: the low-frequency pairs interpolated, the high ones
                                         kept, a ramp between, and its magnitude correction */
} vt_rope_scaling;

/* Overrides of the file's rope, as llama.cpp's llama_context_params fields of the
 * same names override its hparams (src/llama-context.cpp), and as its flags set
 * them: --rope-scaling (scaling_type), --rope-scale N (freq_scale = 1 / N),
 * --rope-freq-scale, --rope-freq-base, --yarn-orig-ctx, --yarn-ext-factor,
 * --yarn-attn-factor, --yarn-beta-fast, --yarn-beta-slow (vt's run, chat, serve and
 * bench take the same flags). Start from vt_rope_default_params(), where every
 * field means "the file's". vt applies them when the model loads (one rope per
 * model: its contexts and engines share it), to the layers with global attention;
 * sliding-window layers keep the file's base and scale, as in llama.cpp (under
 * YaRN, with the ramp and magnitude those give).
 *
 * A context past the training context (vt_context_params.n_ctx) is allowed as far
 * as the scaling reaches: the original context times 1 / freq_scale, where the
 * file declares rope.scaling.original_context_length or the override gives
 * freq_scale or yarn_orig_ctx (the original context is then yarn_orig_ctx, the
 * file's original_context_length, or its context_length). vt_model_load refuses
 * a value out of range with VT_E_INVALID naming the field. */
typedef struct vt_rope_params {
    vt_rope_scaling scaling_type; /* UNSPECIFIED: the file's; NONE makes freq_scale 1 */
    float freq_base;        /* 0: the file's rope.freq_base; else > 0 */
    float freq_scale;       /* 1 / the context scale factor; 0: the file's (1 / rope.scaling.factor) */
    int32_t yarn_orig_ctx;  /* YaRN's original context; 0: rope.scaling.original_context_length,
                               else context_length; else 1..2^24 */
    float yarn_ext_factor;  /* YaRN's extrapolation mix, >= 0 (0: full interpolation); < 0:
                               1 under YaRN, 0 otherwise */
    float yarn_attn_factor; /* > 0, the rope's magnitude where the mix is 0 (with a mix, llama.cpp
                               computes it from the scale and ignores this); < 0: 1 */
    float yarn_beta_fast;   /* > 0, the ramp's low correction dimension; < 0: the file's or 32 */
    float yarn_beta_slow;   /* > 0, below beta_fast, its high end; < 0: the file's or 1 */
} vt_rope_params;

vt_rope_params vt_rope_default_params(void);

typedef struct vt_model_params {
    bool progress;  /* draw a load progress bar on stderr */
    bool use_mlock; /* lock the weights in memory */
    const vt_rope_params *rope; /* NULL: the file's rope as it is (read during vt_model_load only) */
} vt_model_params;

vt_model_params vt_model_default_params(void);
/* Load a GGUF model (llama, qwen2, qwen3 architectures). The file is mmap'd; the
 * model owns the mapping. Errors name the file and the offending key or tensor. */
vt_status vt_model_load(const char *path, const vt_model_params *params, vt_model **out);
void vt_model_free(vt_model *model);

int32_t vt_model_n_vocab(const vt_model *model);
int32_t vt_model_n_ctx_train(const vt_model *model);
/* The largest n_ctx its contexts and engines accept: the training context, or as
 * far as its rope scaling (the file's, or vt_model_params.rope's) reaches. */
int32_t vt_model_n_ctx_max(const vt_model *model);
/* The context a tool takes when none is asked for (vt run, chat, serve without
 * -c; they cap it at 4096): the training context, or, where vt_model_params.rope
 * gives a scale or an original context (--rope-scale, --yarn-orig-ctx: asking to
 * extend the context), vt_model_n_ctx_max. */
int32_t vt_model_n_ctx_default(const vt_model *model);
/* vt_model_n_ctx_max of the file at path under rope (NULL: the file's), from
 * its header alone: no weight is read. Errors as vt_model_load's for the header. */
vt_status vt_model_probe_n_ctx_max(const char *path, const vt_rope_params *rope, int32_t *n_ctx_max);
int32_t vt_model_bos(const vt_model *model); /* -1 if none */
int32_t vt_model_eos(const vt_model *model);
bool vt_model_is_eog(const vt_model *model, int32_t token);
/* A one-line description: "llama 5L d64 h8/4 q4_0 ..." */
const char *vt_model_desc(const vt_model *model);
/* Bytes of weight data. */
size_t vt_model_weight_bytes(const vt_model *model);
/* Bytes of weights one decode step of one token reads: all of them but the
 * token embedding table, of which it reads one row (unless the table is also
 * the output head), and of the expert tensors only the share of the experts a
 * token uses. Read bandwidth / this = the decode bound. */
size_t vt_model_step_bytes(const vt_model *model);

/* Encode text; *ids is malloc'd (caller frees). add_special adds BOS as the
 * vocabulary asks; parse_special recognises control-token texts. */
vt_status vt_tokenize(const vt_model *model, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t **ids, int64_t *n_ids);
/* The bytes of one token; returns the byte count (may exceed cap) or -1. */
int64_t vt_token_piece(const vt_model *model, int32_t token, char *buf, size_t cap);

/* ---- low-level evaluation (the shape of llama_decode) -------------------------
 * A context owns a paged KV cache for up to n_seq sequences and evaluates batches
 * of tokens from any of them in one forward pass. The serving engine (below) is
 * built on the same forward pass; this API is for benchmarks, tests and tools. */

typedef enum vt_kv_type {
    VT_KV_F16 = 0, /* default */
    VT_KV_BF16,
    VT_KV_F32,
    VT_KV_Q8_0,
} vt_kv_type;

typedef struct vt_context_params {
    int32_t n_ctx;      /* max tokens per sequence (0: the model's training context; past
                           it only as far as the model's rope scaling reaches, the
                           file's or vt_model_params.rope's (vt_model_n_ctx_max), else
                           VT_E_RANGE from vt_context_create, naming the keys and flags) */
    int32_t n_seq;      /* max concurrent sequences (default 1) */
    int32_t n_batch;    /* max tokens per vt_decode call (default 512) */
    int32_t n_threads;  /* 0: physical cores */
    int32_t kv_block;   /* tokens per KV block (default 16) */
    vt_kv_type type_k, type_v;
} vt_context_params;

typedef struct vt_context vt_context;

typedef struct vt_batch {
    int32_t n_tokens;
    const int32_t *token;  /* (n_tokens) */
    const int32_t *pos;    /* (n_tokens) position of each token in its sequence */
    const int32_t *seq;    /* (n_tokens) sequence id, 0 <= seq < n_seq */
    const int8_t *logits;  /* (n_tokens) nonzero: return logits for this token;
                              NULL: only for the last token */
} vt_batch;

vt_context_params vt_context_default_params(void);
vt_status vt_context_create(vt_model *model, const vt_context_params *params, vt_context **out);
void vt_context_free(vt_context *ctx);
/* Evaluate a batch. Positions of a sequence must continue its cache (pos ==
 * current length, increasing). VT_E_RANGE when a sequence would pass n_ctx,
 * VT_E_NOMEM when the KV cache is full; the cache is unchanged on failure,
 * except for a model with sliding-window layers whose batch failed after its
 * first pass of n_batch tokens: the window has let go of blocks by then, so each
 * sequence keeps the tokens of the passes that completed (vt_seq_len says how
 * many). */
vt_status vt_decode(vt_context *ctx, const vt_batch *batch);
/* Logits (n_vocab floats) of the i-th token of the last batch that asked for them
 * (i counts only tokens with logits requested); NULL if out of range. Valid until
 * the next vt_decode. */
const float *vt_get_logits(vt_context *ctx, int32_t i);
/* Drop a sequence's cache. */
void vt_seq_clear(vt_context *ctx, int32_t seq);
/* Keep the first n tokens of a sequence's cache and drop the rest (llama.cpp's
 * llama_memory_seq_rm from position n on), so that the next batch continues at
 * position n: a conversation's next turn prefills only what differs from the
 * last. VT_E_RANGE for n outside [0, length]; VT_E_UNSUPPORTED where the model
 * keeps a recurrent state (qwen35's linear layers), which cannot go back, or
 * where a sliding-window layer has released blocks the window of position n
 * still reaches, and n is neither 0 nor the length. The cache is unchanged on
 * failure. */
vt_status vt_seq_keep(vt_context *ctx, int32_t seq, int32_t n);
int32_t vt_seq_len(const vt_context *ctx, int32_t seq);

/* A sequence's state, saved and restored (llama.cpp's llama_state_seq_*): its
 * length, the K/V rows of its positions in every attention layer (a
 * sliding-window layer: those its window still sees) and its recurrent state
 * (qwen35's linear layers), which vt_seq_keep cannot take back. A long prompt
 * is prefilled once and reused: a sequence restored from a state continues,
 * bit for bit, as the one it was saved from would have (the same logits for
 * the same next tokens), in this context or in another one of the same model
 * with the same kv_block, type_k and type_v. The bytes are vt's own (native
 * byte order, no compression); a restored sequence has no logits until its
 * next vt_decode.
 *
 * vt_seq_state_size: bytes of sequence seq's state now (0 for a bad seq).
 * vt_seq_state_get: writes it to buf; VT_E_RANGE where size is smaller.
 * vt_seq_state_set: replaces sequence seq's cache with the state in buf.
 *   VT_E_FORMAT for bytes that are not a whole state, VT_E_INVALID for a state
 *   of another model or cache layout (the message names what differs),
 *   VT_E_NOMEM where the cache has no room for its blocks; the sequence is
 *   unchanged on failure. */
size_t vt_seq_state_size(const vt_context *ctx, int32_t seq);
vt_status vt_seq_state_get(const vt_context *ctx, int32_t seq, void *buf, size_t size);
vt_status vt_seq_state_set(vt_context *ctx, int32_t seq, const void *buf, size_t size);

/* ---- the serving engine --------------------------------------------------------
 * Continuous batching over a paged KV cache with prefix caching. Requests are
 * added at any time; each vt_engine_step runs one batched forward pass over the
 * running decodes and prefill chunks of waiting requests (under a token budget),
 * samples, and reports new tokens and finished requests.
 *
 * Threads: vt_engine_add, vt_engine_abort and vt_engine_stats may be called from
 * any thread; vt_engine_step from one thread at a time (the engine loop). */

typedef struct vt_engine vt_engine;

typedef struct vt_engine_params {
    int32_t n_threads;        /* 0: physical cores */
    int32_t n_ctx;            /* max tokens per sequence (0: the model's training context;
                                 past it as vt_context_params.n_ctx) */
    int32_t max_seqs;         /* max sequences running at once (default 16) */
    int32_t max_batch_tokens; /* token budget of one step (default 512) */
    int32_t kv_block;         /* tokens per KV block (default 16) */
    int64_t kv_tokens;        /* KV budget in tokens (0: from kv_bytes, or max_seqs * n_ctx) */
    size_t kv_bytes;          /* KV budget in bytes (0: unused) */
    vt_kv_type type_k, type_v;
    bool prefix_cache;        /* default true */
    int32_t max_queue;        /* waiting requests before vt_engine_add says VT_E_BUSY (default 256) */
    /* Hybrids (recurrent layers, e.g. qwen35): the prefix cache keeps snapshots of a
     * sequence's recurrent state at block boundaries of its prompt, each as large as
     * one sequence's state (vt_engine_stats.state_bytes_per_seq). */
    int32_t state_snapshots;  /* snapshots kept at most (0: 2 x max_seqs; < 0: none) */
    int32_t state_snapshot_interval; /* tokens between a prompt's snapshots, besides the one at
                                        its last block boundary (0: 256; rounded up to kv_block) */
} vt_engine_params;

/* A bias added to one token's logit before sampling (OpenAI's logit_bias): -100
 * or below bans the token. Ids outside the vocabulary are ignored. */
typedef struct vt_logit_bias {
    int32_t token;
    float bias;
} vt_logit_bias;

typedef struct vt_sampling {
    float temperature; /* <= 0: greedy */
    int32_t top_k;     /* <= 0: off */
    float top_p;       /* >= 1: off */
    float min_p;       /* <= 0: off */
    float repeat_penalty, presence_penalty, frequency_penalty;
    int32_t penalty_last_n;
    uint64_t seed;
    int32_t n_logprobs; /* top alternatives to report per token (0..20); -1: no logprobs at
                           all (vt_output.logprob is 0: the log-softmax is not computed) */
    const vt_logit_bias *logit_bias; /* (n_logit_bias), copied when the request is added */
    int32_t n_logit_bias;
} vt_sampling;

/* How an embedding request pools the final hidden states (after the output
 * norm) of its prompt's tokens into one vector; the values are llama.cpp's
 * llama_pooling_type and the GGUF's <arch>.pooling_type. */
typedef enum vt_pooling {
    VT_POOLING_NONE = 0, /* not an embedding request: it generates */
    VT_POOLING_MEAN = 1, /* the mean over the prompt's tokens */
    VT_POOLING_CLS = 2,  /* the first token's */
    VT_POOLING_LAST = 3, /* the last token's */
    /* no pooling, as an embedding (llama-server's --pooling none on /embedding):
     * every token's vector, in the prompt's order; not a llama.cpp value */
    VT_POOLING_TOKENS = 16,
} vt_pooling;

#define VT_MAX_PRESERVE 64 /* vt_request_params.n_preserve */

typedef struct vt_request_params {
    const int32_t *prompt;    /* prompt token ids, or NULL to tokenize prompt_text */
    int64_t n_prompt;
    const char *prompt_text;  /* used when prompt is NULL (BOS added as the model asks) */
    size_t prompt_text_len;
    vt_sampling sampling;
    int32_t max_tokens;       /* <= 0: until EOS or the context is full */
    const char *const *stop;  /* stop strings (the text before the match is kept) */
    int32_t n_stop;
    bool ignore_eos;
    /* GBNF (llama.cpp's syntax, start rule `root`) the generated text must match:
     * each step samples only among the tokens that can continue it, an
     * end-of-generation token only where the text is complete, and the request
     * finishes (VT_FINISH_STOP) once nothing more can follow. NULL: none. A
     * grammar that does not parse, or breaks a limit, fails vt_engine_add with
     * VT_E_INVALID naming the problem; with one, ignore_eos has no effect. */
    const char *grammar;
    size_t grammar_len;
    /* Control tokens whose text the output keeps (n_preserve ids, copied; at most
     * VT_MAX_PRESERVE): the markers of a chat format (<tool_call>, [TOOL_CALLS],
     * <think>, ...) that are single control tokens in the vocabulary, which the
     * server's parsers must see, as llama.cpp's preserved_tokens. Every other
     * control token gives no text. An id outside the vocabulary fails
     * vt_engine_add with VT_E_INVALID. */
    const int32_t *preserve;
    int32_t n_preserve;
    void *user;               /* handed back in every output of this request */
    vt_pooling pooling;       /* != VT_POOLING_NONE: an embedding request: the prompt is
                                 evaluated (no sampling; sampling, max_tokens and stop are
                                 ignored) and one output finishes it with the pooled vector */
} vt_request_params;

typedef enum vt_finish {
    VT_FINISH_NONE = 0, /* still running */
    VT_FINISH_STOP,     /* EOS or a stop string */
    VT_FINISH_LENGTH,   /* max_tokens or the context */
    VT_FINISH_ABORT,    /* vt_engine_abort */
    VT_FINISH_ERROR,    /* see vt_output.error */
} vt_finish;

typedef struct vt_token_logprob {
    int32_t token;
    float logprob;
} vt_token_logprob;

typedef struct vt_output {
    uint64_t id;
    void *user;
    int32_t token;        /* the new token, or -1 when the output only finishes */
    const char *text;     /* new text (complete UTF-8, stop strings held back) */
    size_t text_len;
    float logprob;
    const vt_token_logprob *top; /* (n_top) alternatives, best first */
    int32_t n_top;
    vt_finish finish;
    const char *error;    /* when finish == VT_FINISH_ERROR */
    int32_t n_prompt;     /* prompt tokens */
    int32_t n_cached;     /* prompt tokens served from the prefix cache */
    int32_t n_generated;  /* tokens generated so far */
    const float *embd;    /* an embedding request's finishing output: the pooled
                             vector (n_embd floats, not normalised; VT_POOLING_TOKENS:
                             n_prompt vectors of the model's n_embd, one after
                             another); else NULL */
    int32_t n_embd;
} vt_output;

typedef struct vt_engine_stats {
    int32_t running, waiting;
    int64_t kv_blocks_total, kv_blocks_free, kv_blocks_cached; /* cached: free but reusable */
    int64_t prefix_queries, prefix_hits;   /* in blocks */
    int64_t preemptions;
    int64_t prompt_tokens, generated_tokens; /* totals */
    int64_t steps;
    /* hybrids (0 otherwise): recurrent-state slots, one per running sequence plus the
     * prefix cache's snapshots; free counts cached snapshots too */
    int64_t state_slots_total, state_slots_free;
    int64_t state_snapshots;     /* snapshots kept now */
    int64_t state_restores;      /* admissions that started from a snapshot (total) */
    size_t state_bytes_per_seq;  /* one sequence's state (= one snapshot), all recurrent layers */
    /* The weights the forward passes read (totals; a benchmark's bytes per token). Each
     * pass reads every weight but the expert tensors and the token embedding table; one
     * row of that table per token (all of it where it is also the head and the pass
     * wants logits); the head where the pass wants logits; and in each
     * mixture-of-experts layer the experts its tokens chose, each once however many
     * tokens chose it. A step of one decoding sequence reads vt_model_step_bytes. */
    uint64_t weight_bytes_read;
    int64_t moe_layer_passes;    /* mixture-of-experts layers evaluated, summed over passes */
    int64_t moe_experts_read;    /* the distinct experts those layers read, summed */
} vt_engine_stats;

vt_engine_params vt_engine_default_params(void);
vt_sampling vt_sampling_default(void); /* greedy */
vt_status vt_engine_create(vt_model *model, const vt_engine_params *params, vt_engine **out);
void vt_engine_free(vt_engine *engine);
/* Queue a request. VT_E_RANGE if the prompt does not fit the context (the message
 * gives both numbers), VT_E_BUSY if the queue is full, VT_E_INVALID for bad
 * sampling parameters. */
vt_status vt_engine_add(vt_engine *engine, const vt_request_params *req, uint64_t *id);
/* Abort a request; its blocks come back at the next step, which reports it with
 * VT_FINISH_ABORT. VT_E_NOT_FOUND if it is unknown or already finished. */
vt_status vt_engine_abort(vt_engine *engine, uint64_t id);
/* One step. *outs (n_outs entries) stays valid until the next call. Does nothing
 * and returns *n_outs = 0 when there is no work. VT_E_NOMEM (with *n_outs = 0)
 * when the room for the step's outputs cannot be had: nothing was done, no
 * request is lost, a later step goes on. */
vt_status vt_engine_step(vt_engine *engine, const vt_output **outs, int32_t *n_outs);
bool vt_engine_has_work(vt_engine *engine);
void vt_engine_stats_get(vt_engine *engine, vt_engine_stats *out);

#ifdef __cplusplus
}
#endif

#endif
