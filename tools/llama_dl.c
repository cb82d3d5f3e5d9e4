/* llama_dl: see llama_dl.h. */
#include "llama_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef VT_HAVE_LLAMA_H
#include "llama.h"
#include "llama_rope.h"
#endif

const char *llama_dl_default_dir(void) {
#ifdef VT_LLAMA_DEFAULT_DIR
    return VT_LLAMA_DEFAULT_DIR;
#else
    return NULL;
#endif
}

bool llama_dl_probe(const char *dir, char *why, size_t why_len) {
#ifndef VT_HAVE_LLAMA_H
    (void)dir;
    snprintf(why, why_len, "this vt was built without llama.h (no .cache/llama at configure time)");
    return false;
#else
    char path[4096];
    if (!dir) {
        snprintf(why, why_len, "no llama.cpp directory given (--llama-dir)");
        return false;
    }
    snprintf(path, sizeof path, "%s/libllama.so", dir);
    if (access(path, R_OK) != 0) {
        snprintf(why, why_len, "%s not found", path);
        return false;
    }
    return true;
#endif
}

#ifndef VT_HAVE_LLAMA_H

llama_dl *llama_dl_open(const char *dir, const char *model, int32_t n_ctx, int32_t n_batch,
                        int32_t n_threads, int flash_attn, bool use_mmap, const vt_rope_params *rope, char *err,
                        size_t err_len) {
    (void)dir, (void)model, (void)n_ctx, (void)n_batch, (void)n_threads, (void)flash_attn, (void)use_mmap, (void)rope;
    llama_dl_probe(dir, err, err_len);
    return NULL;
}
void llama_dl_close(llama_dl *l) { (void)l; }
int32_t llama_dl_n_vocab(const llama_dl *l) { (void)l; return 0; }
uint64_t llama_dl_model_bytes(const llama_dl *l) { (void)l; return 0; }
const char *llama_dl_desc(const llama_dl *l) { (void)l; return ""; }
void llama_dl_clear(llama_dl *l) { (void)l; }
bool llama_dl_decode(llama_dl *l, const int32_t *tokens, int32_t n, int32_t pos0) {
    (void)l, (void)tokens, (void)n, (void)pos0;
    return false;
}
size_t llama_dl_state_size(llama_dl *l) { (void)l; return 0; }
bool llama_dl_state_get(llama_dl *l, void *buf, size_t size) {
    (void)l, (void)buf, (void)size;
    return false;
}
bool llama_dl_state_set(llama_dl *l, const void *buf, size_t size) {
    (void)l, (void)buf, (void)size;
    return false;
}

#else

/* The functions used, typed from llama.h's own prototypes. */
#define LLAMA_DL_FUNCS(X)                                                                          \
    X(llama_log_set)                                                                               \
    X(llama_backend_init)                                                                          \
    X(llama_model_default_params)                                                                  \
    X(llama_context_default_params)                                                                \
    X(llama_model_load_from_file)                                                                  \
    X(llama_model_free)                                                                            \
    X(llama_init_from_model)                                                                       \
    X(llama_free)                                                                                  \
    X(llama_model_get_vocab)                                                                       \
    X(llama_vocab_n_tokens)                                                                        \
    X(llama_model_size)                                                                            \
    X(llama_model_desc)                                                                            \
    X(llama_batch_init)                                                                            \
    X(llama_batch_free)                                                                            \
    X(llama_decode)                                                                                \
    X(llama_get_memory)                                                                            \
    X(llama_memory_clear)                                                                          \
    X(llama_state_seq_get_size)                                                                    \
    X(llama_state_seq_get_data)                                                                    \
    X(llama_state_seq_set_data)

struct llama_dl {
    void *lib_llama, *lib_ggml;
#define X(f) __typeof__(f) *f;
    LLAMA_DL_FUNCS(X)
#undef X
    void (*load_backends)(const char *dir);
    struct llama_model *model;
    struct llama_context *ctx;
    struct llama_batch batch;
    bool has_batch;
    int32_t n_batch, n_vocab;
    char desc[128];
};

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    static enum ggml_log_level last = GGML_LOG_LEVEL_INFO;
    (void)user;
    if (level != GGML_LOG_LEVEL_CONT) last = level;
    if (last == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static void *open_lib(const char *dir, const char *name, char *err, size_t err_len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    /* RTLD_LOCAL keeps llama.cpp's names (its gguf_* among them) out of vt's way;
     * vt_cli exports none of its own, so llama.cpp binds to itself. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) snprintf(err, err_len, "dlopen %s: %s", path, dlerror());
    return h;
}

_Static_assert((int)VT_ROPE_SCALING_UNSPECIFIED == (int)LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED &&
                   (int)VT_ROPE_SCALING_NONE == (int)LLAMA_ROPE_SCALING_TYPE_NONE &&
                   (int)VT_ROPE_SCALING_LINEAR == (int)LLAMA_ROPE_SCALING_TYPE_LINEAR &&
                   (int)VT_ROPE_SCALING_YARN == (int)LLAMA_ROPE_SCALING_TYPE_YARN,
               "vt_rope_scaling mirrors llama_rope_scaling_type");

llama_dl *llama_dl_open(const char *dir, const char *model, int32_t n_ctx, int32_t n_batch,
                        int32_t n_threads, int flash_attn, bool use_mmap, const vt_rope_params *rope, char *err,
                        size_t err_len) {
    if (!llama_dl_probe(dir, err, err_len)) return NULL;
    llama_dl *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    l->lib_llama = open_lib(dir, "libllama.so", err, err_len);
    if (!l->lib_llama) goto fail;
    l->lib_ggml = open_lib(dir, "libggml.so", err, err_len);
    if (!l->lib_ggml) goto fail;
#define X(f)                                                                                       \
    *(void **)&l->f = dlsym(l->lib_llama, #f);                                                     \
    if (!l->f) {                                                                                   \
        snprintf(err, err_len, "%s/libllama.so: no symbol %s", dir, #f);                           \
        goto fail;                                                                                 \
    }
    LLAMA_DL_FUNCS(X)
#undef X
    *(void **)&l->load_backends = dlsym(l->lib_ggml, "ggml_backend_load_all_from_path");
    if (!l->load_backends) {
        snprintf(err, err_len, "%s/libggml.so: no symbol ggml_backend_load_all_from_path", dir);
        goto fail;
    }
    l->llama_log_set(getenv("VT_LLAMA_VERBOSE") ? NULL : quiet_log, NULL);
    l->load_backends(dir);
    l->llama_backend_init();

    struct llama_model_params mp = l->llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mode = use_mmap ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
    l->model = l->llama_model_load_from_file(model, mp);
    if (!l->model) {
        snprintf(err, err_len, "%s: llama.cpp could not load the model", model);
        goto fail;
    }
    struct llama_context_params cp = l->llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_batch;
    cp.n_ubatch = (uint32_t)n_batch;
    cp.n_seq_max = 1;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.no_perf = true;
    if (flash_attn == 0) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (flash_attn == 1) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    llama_cparams_rope(&cp, rope);
    l->ctx = l->llama_init_from_model(l->model, cp);
    if (!l->ctx) {
        snprintf(err, err_len, "%s: llama.cpp could not create a context of %d tokens", model, n_ctx);
        goto fail;
    }
    l->n_vocab = l->llama_vocab_n_tokens(l->llama_model_get_vocab(l->model));
    l->n_batch = n_batch;
    l->batch = l->llama_batch_init(n_batch, 0, 1);
    l->has_batch = true;
    l->llama_model_desc(l->model, l->desc, sizeof l->desc);
    return l;
fail:
    llama_dl_close(l);
    return NULL;
}

void llama_dl_close(llama_dl *l) {
    if (!l) return;
    if (l->has_batch) l->llama_batch_free(l->batch);
    if (l->ctx) l->llama_free(l->ctx);
    if (l->model) l->llama_model_free(l->model);
    /* The libraries stay loaded: ggml keeps threads and atexit state that
     * must not outlive its code. */
    free(l);
}

int32_t llama_dl_n_vocab(const llama_dl *l) { return l->n_vocab; }
uint64_t llama_dl_model_bytes(const llama_dl *l) { return l->llama_model_size(l->model); }
const char *llama_dl_desc(const llama_dl *l) { return l->desc; }

void llama_dl_clear(llama_dl *l) { l->llama_memory_clear(l->llama_get_memory(l->ctx), true); }

bool llama_dl_decode(llama_dl *l, const int32_t *tokens, int32_t n, int32_t pos0) {
    if (n < 1 || n > l->n_batch) return false;
    for (int32_t i = 0; i < n; i++) {
        l->batch.token[i] = tokens[i];
        l->batch.pos[i] = pos0 + i;
        l->batch.n_seq_id[i] = 1;
        l->batch.seq_id[i][0] = 0;
        l->batch.logits[i] = (int8_t)(i == n - 1);
    }
    l->batch.n_tokens = n;
    return l->llama_decode(l->ctx, l->batch) == 0;
}

size_t llama_dl_state_size(llama_dl *l) { return l->llama_state_seq_get_size(l->ctx, 0); }

bool llama_dl_state_get(llama_dl *l, void *buf, size_t size) {
    return l->llama_state_seq_get_data(l->ctx, buf, size, 0) == size;
}

bool llama_dl_state_set(llama_dl *l, const void *buf, size_t size) {
    return l->llama_state_seq_set_data(l->ctx, buf, size, 0) != 0; /* 0: failed to load */
}

#endif
