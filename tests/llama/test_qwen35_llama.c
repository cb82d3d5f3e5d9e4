/* qwen35 against the reference llama.cpp: the file vt synth --arch qwen35 writes (4 layers,
 * 3 linear and 1 full attention, a generated vocabulary) loads in llama.cpp and
 * its logits are finite, for a prompt that crosses llama.cpp's 64-token chunks (its
 * chunked delta rule) and one decoded token by token (its recurrent step), and both
 * paths give the same logits within 1e-6 NMSE (llama.cpp with itself: the bound vt's
 * parity will be held to next; vt does not run qwen35 end to end yet). */
#include "llama_ref.h"
#include "model/synth.h"
#include "test.h"

#include <unistd.h>

static double nmse(const float *x, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]), den += (double)ref[i] * ref[i];
    return den > 0 ? num / den : num;
}

int main(void) {
    if (!llama_ref_init()) {
        fprintf(stderr, "no llama.cpp CPU backend\n");
        return 1;
    }
    synth_params sp = synth_default_params();
    sp.arch = "qwen35";
    sp.n_layer = 4; /* 3 linear, 1 full */
    sp.n_embd = 128;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.head_dim = 32;
    sp.n_ff = 256;
    sp.n_ctx = 512;
    sp.n_vocab = 512;
    sp.n_threads = 1;
    char path[] = "/tmp/vt_qwen35_llama_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(synth_write(&sp, path));
    llama_ref *r = llama_ref_open(path, 256, 1);
    CHECK_MSG(r != NULL, "llama.cpp refused vt's qwen35 file");
    if (r) {
        const int32_t n = 100, nv = llama_ref_n_vocab(r);
        int32_t toks[100];
        for (int i = 0; i < n; i++) toks[i] = 3 + (i * 37) % 500;
        float *batch = malloc(sizeof(float) * (size_t)n * (size_t)nv);
        float *steps = malloc(sizeof(float) * (size_t)n * (size_t)nv);
        CHECK(llama_ref_eval(r, toks, n, batch));
        CHECK(llama_ref_eval_steps(r, toks, n, steps));
        int finite = 1;
        for (int64_t i = 0; i < (int64_t)n * nv; i++) finite &= isfinite(batch[i]) && isfinite(steps[i]);
        CHECK(finite);
        const double e = nmse(steps, batch, (int64_t)n * nv);
        printf("llama.cpp qwen35: chunked vs recurrent nmse %.3g\n", e);
        CHECK_MSG(e <= 1e-6, "chunked vs recurrent nmse %g", e);
        free(batch), free(steps);
        llama_ref_close(r);
    }
    unlink(path);
    return test_finish();
}
