/* qwen35 against the reference llama.cpp: the file vt synth --arch qwen35 writes (4 layers,
 * 3 linear and 1 full attention, a generated vocabulary) loads in llama.cpp and
 * its logits are finite, for a prompt that crosses llama.cpp's 64-token chunks (its
 * chunked delta rule) and one decoded token by token (its recurrent step), and both
 * paths give the same logits within 1e-6 NMSE (llama.cpp with itself: the bound vt's
 * parity will be held to next; vt does not run qwen35 end to end yet). */
#include "llama_ref.h"
#include "model/synth.h"
#include "test.h"

#include "vt.h"

#include <unistd.h>

/* vt's logits of toks[0..n) (one sequence) in runs of `per` tokens into out (n, n_vocab). */
static bool vt_eval(const char *path, const int32_t *toks, int32_t n, int32_t per, int32_t n_threads, float *out) {
    vt_model *m = NULL;
    vt_context *ctx = NULL;
    bool ok = false;
    vt_model_params mp = vt_model_default_params();
    if (vt_model_load(path, &mp, &m) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        return false;
    }
    const int32_t nv = vt_model_n_vocab(m);
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = n_threads;
    if (vt_context_create(m, &cp, &ctx) != VT_OK) {
        fprintf(stderr, "vt: %s\n", vt_last_error());
        goto done;
    }
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n), *seq = calloc((size_t)n, sizeof(int32_t));
    int8_t *want = malloc((size_t)n);
    for (int32_t i = 0; i < n; i++) pos[i] = i, want[i] = 1;
    for (int32_t i0 = 0; i0 < n; i0 += per) {
        const int32_t k = n - i0 < per ? n - i0 : per;
        vt_batch b = {.n_tokens = k, .token = toks + i0, .pos = pos + i0, .seq = seq + i0, .logits = want + i0};
        if (vt_decode(ctx, &b) != VT_OK) {
            fprintf(stderr, "vt: decode at %d: %s\n", i0, vt_last_error());
            goto done2;
        }
        for (int32_t j = 0; j < k; j++)
            memcpy(out + (size_t)(i0 + j) * (size_t)nv, vt_get_logits(ctx, j), sizeof(float) * (size_t)nv);
    }
    ok = true;
done2:
    free(pos), free(seq), free(want);
done:
    vt_context_free(ctx);
    vt_model_free(m);
    return ok;
}

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

        /* vt: the whole prompt at once, in runs of 7, token by token */
        float *mine = malloc(sizeof(float) * (size_t)n * (size_t)nv);
        float *mine2 = malloc(sizeof(float) * (size_t)n * (size_t)nv);
        CHECK(vt_eval(path, toks, n, n, 1, mine));
        const double ev = nmse(mine, batch, (int64_t)n * nv);
        int agree = 0;
        for (int32_t i = 0; i < n; i++)
            agree += llama_ref_argmax(mine + (size_t)i * nv, nv, NULL) == llama_ref_argmax(batch + (size_t)i * nv, nv, NULL);
        printf("vt vs llama.cpp qwen35: nmse %.3g, argmax agrees at %d of %d positions\n", ev, agree, n);
        CHECK_MSG(ev <= 1e-6, "vt vs llama.cpp nmse %g", ev);
        CHECK(vt_eval(path, toks, n, 7, 2, mine2));
        CHECK_MSG(memcmp(mine, mine2, sizeof(float) * (size_t)n * (size_t)nv) == 0, "runs of 7 on 2 threads differ");
        CHECK(vt_eval(path, toks, n, 1, 1, mine2));
        CHECK_MSG(memcmp(mine, mine2, sizeof(float) * (size_t)n * (size_t)nv) == 0, "token by token differs");
        free(mine), free(mine2);
        free(batch), free(steps);
        llama_ref_close(r);
    }
    unlink(path);
    return test_finish();
}
