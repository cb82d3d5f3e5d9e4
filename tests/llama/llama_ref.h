/* llama_ref: a small driver over the reference llama.cpp C API, for tests that
 * compare vt with llama.cpp (or llama.cpp with itself).
 *
 * It loads the CPU backends from VT_LLAMA_BINS (so the best libggml-cpu variant
 * for this machine is picked), silences llama.cpp's logging below warnings, and
 * runs token ids through llama_decode on one sequence, the same way vt's
 * vt_decode is driven: positions 0..n-1, logits for every position asked for.
 *
 * Linked only into tests/llama/ executables (CMake target llama_ref). */
#ifndef VT_TESTS_LLAMA_REF_H
#define VT_TESTS_LLAMA_REF_H

#include <llama.h>

#include "vt.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct llama_ref llama_ref;

/* The llama_ftype of a llama-quantize type name ("Q4_K_M"; case-insensitive).
 * false if the name is not one of them. */
bool llama_ref_ftype(const char *name, enum llama_ftype *out);
/* The names llama_ref_ftype knows, space-separated, on f. */
void llama_ref_print_ftypes(FILE *f);

/* Load the backends once per process (idempotent). Returns false if no CPU
 * backend could be loaded. */
bool llama_ref_init(void);

/* Load a model and create a context of n_ctx tokens (and n_batch = n_ctx) that
 * runs on n_threads threads. NULL on failure, with the reason on stderr. */
llama_ref *llama_ref_open(const char *path, int32_t n_ctx, int32_t n_threads);
/* The same with the context's rope overrides (llama_context_params' rope_scaling_type,
 * rope_freq_base, rope_freq_scale, yarn_*: vt_rope_params mirrors them), NULL: the file's. */
llama_ref *llama_ref_open_rope(const char *path, int32_t n_ctx, int32_t n_threads, const vt_rope_params *rope);
void llama_ref_close(llama_ref *r);

int32_t llama_ref_n_vocab(const llama_ref *r);

/* Mixture-of-experts models: from now on (until called with margins NULL), each
 * batch evaluated records into margins[i], for the token at batch index i < n,
 * the smallest gap over the layers between the log-probabilities of the k-th
 * and (k+1)-th best expert of llama.cpp's router (its ffn_moe_probs tensors):
 * how near its top-k came to another choice. INFINITY where no layer routed.
 * k: experts used per token. logits: the tensor holds the router's logits (plus
 * its bias: gpt-oss's SOFTMAX_WEIGHT gating), whose differences are already
 * log-probability gaps. Reads through llama.cpp's cb_eval, which observes
 * the graph without changing what it computes. */
void llama_ref_watch_router(llama_ref *r, int32_t k, bool logits, float *margins, int32_t n);
/* The underlying llama.cpp model, for metadata queries (llama_model_n_params...). */
struct llama_model *llama_ref_model(const llama_ref *r);
int32_t llama_ref_bos(const llama_ref *r); /* -1 if none */

/* Clear the cache, then evaluate tokens[0..n) at positions 0..n-1 in one batch.
 * Copies the logits of every position into logits (n * n_vocab floats, row i =
 * position i). Returns false on failure (message on stderr). */
bool llama_ref_eval(llama_ref *r, const int32_t *tokens, int32_t n, float *logits);

/* As llama_ref_eval, but one llama_decode call per token (the decode path). */
bool llama_ref_eval_steps(llama_ref *r, const int32_t *tokens, int32_t n, float *logits);

/* Clear the cache, evaluate the prompt, then greedily generate n_gen tokens one
 * decode step at a time (argmax, lowest id on ties; no EOS stop) into out. */
bool llama_ref_greedy(llama_ref *r, const int32_t *prompt, int32_t n_prompt, int32_t n_gen,
                      int32_t *out);

/* Argmax of n floats (lowest index on ties), and the gap between the largest
 * and the second largest value. */
int32_t llama_ref_argmax(const float *x, int32_t n, float *gap);

/* ggml's gguf_free, for a gguf_context that ggml's GGUF API (gguf.h) made. vt's
 * libvt also defines gguf_free (and gguf_find_tensor, gguf_type_name) with other
 * signatures; a direct call would link vt's object into the program, and the
 * dynamic linker would then bind libllama's own calls to vt's functions. So
 * ggml's is looked up at run time, and a test that uses ggml's GGUF API names
 * none of them. */
struct gguf_context;
void llama_ref_gguf_free(struct gguf_context *g);

#endif
