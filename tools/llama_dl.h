/* llama_dl: the reference llama.cpp, loaded at run time for `vt bench`.
 *
 * vt itself never links llama.cpp: this module dlopens <dir>/libllama.so (whose
 * $ORIGIN runpath brings libggml and libggml-base), resolves the dozen functions
 * it needs with dlsym, loads the CPU backends of <dir> (so the best
 * libggml-cpu-<arch> variant is picked) and drives one model on one sequence.
 * The llama.h types are used only when the build found them (VT_HAVE_LLAMA_H);
 * otherwise every open fails with a message that says so.
 *
 * Not thread-safe; one model per process is the intended use (vt bench forks a
 * child per measurement). */
#ifndef VT_TOOLS_LLAMA_DL_H
#define VT_TOOLS_LLAMA_DL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vt.h"

typedef struct llama_dl llama_dl;

/* The default library directory (compile-time VT_LLAMA_DEFAULT_DIR), or NULL. */
const char *llama_dl_default_dir(void);

/* Whether dir holds a loadable libllama.so; on false, why (in buf). */
bool llama_dl_probe(const char *dir, char *why, size_t why_len);

/* Load the library and the model; create a context of n_ctx tokens, n_batch
 * (= n_ubatch) tokens per decode, n_threads threads. flash_attn: -1 auto (the
 * llama.cpp default), 0 off, 1 on. use_mmap: weights read through a map of the
 * file (the llama.cpp default), or read into memory of its own. rope: the
 * context's rope overrides (vt_rope_params mirrors llama_context_params' fields),
 * NULL for the file's. NULL on failure, reason in err. */
llama_dl *llama_dl_open(const char *dir, const char *model, int32_t n_ctx, int32_t n_batch,
                        int32_t n_threads, int flash_attn, bool use_mmap, const vt_rope_params *rope, char *err,
                        size_t err_len);
void llama_dl_close(llama_dl *l);

int32_t llama_dl_n_vocab(const llama_dl *l);
uint64_t llama_dl_model_bytes(const llama_dl *l); /* llama_model_size */
/* llama_model_desc, e.g. "llama 1B Q4_0". */
const char *llama_dl_desc(const llama_dl *l);

/* Empty the cache of sequence 0. */
void llama_dl_clear(llama_dl *l);
/* Decode tokens at positions pos0.. of sequence 0 (n <= n_batch), logits for the
 * last one only. False on failure. */
bool llama_dl_decode(llama_dl *l, const int32_t *tokens, int32_t n, int32_t pos0);

/* Sequence 0's state (llama_state_seq_*): its size in bytes, a copy of it into
 * buf, and a copy of one back in place of what the sequence holds. */
size_t llama_dl_state_size(llama_dl *l);
bool llama_dl_state_get(llama_dl *l, void *buf, size_t size);
bool llama_dl_state_set(llama_dl *l, const void *buf, size_t size);

#endif
