/* KV cache memory per token of a Gemma-3-4B-shaped model, vt against llama.cpp,
 * at 8k and 32k context (issue 28): bytes, never time.
 *
 * The shape is Gemma 3 4B's attention (llama.cpp's gemma3 loader: 34 layers is
 * its LLM_TYPE_4B; the GGUF keys of google/gemma-3-4b-it): 34 layers, 8 query
 * and 4 KV heads of 256, a sliding window of 1024 on 5 of every 6 layers
 * (sliding_window_pattern 6: layers 5, 11, 17, 23, 29 attend fully), context
 * 131072. The KV cache depends on nothing else, so the file has an embedding of
 * 64, an FFN of 64 and a generated vocabulary of 512 (a few MiB).
 *
 * llama.cpp keeps, by default (swa_full off), n_ctx cells for the full layers
 * and pad(window + n_ubatch, 256) cells for the sliding ones; its cache logs
 * "size = ... (N cells, L layers, ...)" for each part, which this test reads
 * through llama_log_set (the context opened as llama-cli and llama-server open
 * it: swa_full off, n_ubatch 512, one sequence). vt_context (what `vt run` uses) with passes of 512
 * tokens keeps n_ctx tokens of blocks for the full layers and one window and
 * one pass for the sliding ones (kv_swa_pool_blocks), and so does the serving
 * engine with one sequence and steps of 512 tokens. Both in F16. vt must be no
 * larger. */
#include "llama_ref.h"
#include "engine/context.h"
#include "model/synth.h"
#include "test.h"
#include "vt.h"

#include "llama.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { N_LAYER = 34, N_HEAD_KV = 4, HEAD_DIM = 256, WINDOW = 1024, PATTERN = 6, N_UBATCH = 512 };

typedef struct kv_log {
    int n;
    unsigned cells[4];
    int layers[4];
    double mib[4];
} kv_log;

static void capture(enum ggml_log_level level, const char *text, void *user) {
    kv_log *l = user;
    const char *p = strstr(text, "llama_kv_cache: size = ");
    if (p && l->n < 4 &&
        sscanf(p, "llama_kv_cache: size = %lf MiB (%u cells, %d layers", &l->mib[l->n], &l->cells[l->n],
               &l->layers[l->n]) == 3)
        l->n++;
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static size_t cache_bytes(const kv_cache *kv) {
    size_t n = 0;
    for (int32_t g = 0; g < kv->n_groups; g++) n += kv->groups[g].k_bytes + kv->groups[g].v_bytes;
    return n;
}

int main(void) {
    if (!llama_ref_init()) {
        CHECK(0);
        return test_finish();
    }
    char path[] = "/tmp/vt_test_kv_memory_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return test_finish();
    close(fd);
    synth_params sp = synth_default_params();
    sp.arch = "gemma3";
    sp.n_layer = N_LAYER;
    sp.n_embd = 64;
    sp.n_head = 8;
    sp.n_head_kv = N_HEAD_KV;
    sp.head_dim = HEAD_DIM;
    sp.n_ff = 64;
    sp.n_ctx = 131072;
    sp.n_swa = WINDOW;
    sp.swa_pattern = PATTERN;
    sp.rope_freq_base = 1e6f;
    sp.rope_freq_base_swa = 10000.0f;
    sp.type = VT_DTYPE_Q8_0;
    sp.n_threads = 1;
    CHECK_OK(synth_write(&sp, path));
    vt_model *m = NULL;
    CHECK_OK(vt_model_load(path, NULL, &m));
    if (!m) {
        unlink(path);
        return test_finish();
    }
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *lm = llama_model_load_from_file(path, mp);
    CHECK(lm != NULL);
    /* F16 K and V: one token of one layer */
    const size_t per_layer = 2 * (size_t)N_HEAD_KV * HEAD_DIM * 2;
    const int n_full = N_LAYER / PATTERN, n_swa = N_LAYER - n_full;

    printf("KV cache bytes per token, Gemma-3-4B shape (34 layers, 29 sliding of 1024, 4 KV heads of 256, F16):\n");
    printf("%8s %12s %12s %12s %14s %10s\n", "n_ctx", "vt run", "llama.cpp", "vt serve", "full attention",
           "vt / full");
    const int32_t ctxs[2] = {8192, 32768};
    for (int i = 0; i < 2; i++) {
        const int32_t n_ctx = ctxs[i];
        kv_log log = {0};
        llama_log_set(capture, &log);
        /* as llama-cli and llama-server open it (common_params: swa_full off;
         * the C API's default is on) */
        struct llama_context_params lp = llama_context_default_params();
        lp.n_ctx = (uint32_t)n_ctx;
        lp.n_batch = lp.n_ubatch = N_UBATCH;
        lp.n_seq_max = 1;
        lp.n_threads = lp.n_threads_batch = 1;
        lp.swa_full = false;
        lp.no_perf = true;
        struct llama_context *lc = lm ? llama_init_from_model(lm, lp) : NULL;
        static kv_log ignored;
        llama_log_set(capture, &ignored); /* later lines land there */
        CHECK(lc != NULL);
        if (lc) llama_free(lc);
        /* the full layers' cache, then the sliding ones' */
        CHECK_EQ_INT(log.n, 2);
        if (log.n != 2) continue;
        CHECK(log.cells[0] == (unsigned)n_ctx && log.layers[0] == n_full);
        CHECK(log.cells[1] == WINDOW + N_UBATCH && log.layers[1] == n_swa);
        size_t llama_bytes = 0;
        double llama_mib = 0;
        for (int k = 0; k < 2; k++) {
            llama_bytes += (size_t)log.cells[k] * (size_t)log.layers[k] * per_layer;
            llama_mib += log.mib[k];
        }
        CHECK(llama_mib > llama_bytes / 1048576.0 - 0.02 && llama_mib < llama_bytes / 1048576.0 + 0.02);

        vt_context_params cp = vt_context_default_params();
        cp.n_ctx = n_ctx;
        cp.n_batch = N_UBATCH;
        cp.n_threads = 1;
        vt_context *c = NULL;
        CHECK_OK(vt_context_create(m, &cp, &c));
        const size_t vt_bytes = c ? cache_bytes(context_kv(c)) : 0;
        vt_context_free(c);

        vt_engine_params ep = vt_engine_default_params();
        ep.n_ctx = n_ctx;
        ep.max_seqs = 1;
        ep.max_batch_tokens = N_UBATCH;
        ep.n_threads = 1;
        vt_engine *e = NULL;
        CHECK_OK(vt_engine_create(m, &ep, &e));
        /* its groups' blocks: the full group's n_ctx tokens, the rest sliding */
        vt_engine_stats st = {0};
        if (e) vt_engine_stats_get(e, &st);
        vt_engine_free(e);
        const int64_t full_blocks = n_ctx / 16, swa_blocks = st.kv_blocks_total - full_blocks;
        const size_t serve_bytes = (size_t)(full_blocks * n_full + swa_blocks * n_swa) * 16 * per_layer;

        const size_t full = (size_t)N_LAYER * per_layer;
        CHECK_MSG(vt_bytes > 0 && vt_bytes <= llama_bytes, "n_ctx %d: vt's KV cache %zu bytes, llama.cpp's %zu",
                  n_ctx, vt_bytes, llama_bytes);
        CHECK_MSG(serve_bytes > 0 && serve_bytes <= llama_bytes,
                  "n_ctx %d: vt serve's KV cache %zu bytes, llama.cpp's %zu", n_ctx, serve_bytes, llama_bytes);
        printf("%8d %12.0f %12.0f %12.0f %14zu %10.3f\n", n_ctx, (double)vt_bytes / n_ctx,
               (double)llama_bytes / n_ctx, (double)serve_bytes / n_ctx, full,
               (double)vt_bytes / n_ctx / (double)full);
    }
    vt_model_free(m);
    if (lm) llama_model_free(lm);
    unlink(path);
    return test_finish();
}
