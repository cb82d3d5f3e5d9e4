/* Contexts past the training context (model.h, model_check_n_ctx): a
 * vt_context or vt_engine of n_ctx past the file's context_length is refused
 * with VT_E_RANGE and a message naming n_ctx, the keys and the largest context
 * allowed, unless the file's rope scaling reaches that far (linear or YaRN,
 * factor x rope.scaling.original_context_length); n_ctx 0 is the training
 * context. On small synthetic llama files (context_length 64) and rewrites of
 * their rope keys:
 *   - no scaling: 64 and 0 are accepted, 65 refused (context and engine);
 *   - YaRN, factor 4 from 64: 256 accepted, and a sequence decodes past
 *     position 64 with finite logits; 257 refused naming the reach;
 *   - YaRN, factor 4 from 16: it reaches 64 only, so 65 is refused;
 *   - linear, factor 4 from 64: 256 accepted; without the original length,
 *     context_length is the scaled context already and 65 is refused;
 *   - type none with a factor: no scaling, 65 refused. */
#include "test.h"
#include "vt.h"

#include "base/mapfile.h"
#include "gguf/gguf.h"
#include "model/synth.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CTX_LEN 64

static char g_dir[] = "/tmp/vt_test_n_ctx_XXXXXX";

/* A synthetic llama of context_length CTX_LEN; yarn_factor > 0 adds YaRN from orig (0: CTX_LEN). */
static bool write_synth(const char *path, float yarn_factor, int64_t orig) {
    synth_params sp = synth_default_params();
    sp.n_layer = 1;
    sp.n_embd = 64;
    sp.n_head = 2;
    sp.n_head_kv = 2;
    sp.n_ff = 64;
    sp.n_vocab = 300;
    sp.n_ctx = CTX_LEN;
    sp.yarn_factor = yarn_factor;
    sp.yarn_orig_ctx = orig;
    sp.n_threads = 1;
    const vt_status s = synth_write(&sp, path);
    CHECK_MSG(s == VT_OK, "synth: %s", vt_last_error());
    return s == VT_OK;
}

/* src rewritten to dst with llama.rope.scaling.type = type and, unless keep_orig,
 * no llama.rope.scaling.original_context_length. */
static bool rewrite(const char *src, const char *dst, const char *type, bool keep_orig) {
    mapfile mf;
    gguf_file f;
    if (mapfile_open(src, &mf) != VT_OK) return false;
    bool ok = gguf_parse(mf.data, mf.size, src, &f) == VT_OK;
    gguf_writer *w = NULL;
    ok = ok && gguf_writer_create(&w) == VT_OK;
    for (int64_t i = 0; ok && i < f.n_kv; i++) {
        if (gguf_str_eq(f.kv[i].key, "llama.rope.scaling.type")) continue;
        if (!keep_orig && gguf_str_eq(f.kv[i].key, "llama.rope.scaling.original_context_length")) continue;
        ok = gguf_writer_copy_kv(w, &f.kv[i]) == VT_OK;
    }
    ok = ok && gguf_writer_set_str(w, "llama.rope.scaling.type", type) == VT_OK;
    for (int64_t i = 0; ok && i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        ok = gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->bytes) == VT_OK;
    }
    ok = ok && gguf_writer_write(w, dst) == VT_OK;
    gguf_writer_destroy(w);
    gguf_free(&f);
    mapfile_close(&mf);
    CHECK_MSG(ok, "rewrite %s: %s", dst, vt_last_error());
    return ok;
}

/* A context and an engine of n_ctx: both accepted (want NULL) or both refused
 * with VT_E_RANGE and a message that contains want. */
static void check_n_ctx(vt_model *m, const char *label, int32_t n_ctx, const char *want) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    vt_context *c = NULL;
    vt_status s = vt_context_create(m, &cp, &c);
    if (!want) {
        CHECK_MSG(s == VT_OK && c, "%s: context of %d refused: %s", label, n_ctx, vt_last_error());
    } else {
        CHECK_MSG(s == VT_E_RANGE && !c, "%s: context of %d: status %d", label, n_ctx, (int)s);
        CHECK_MSG(strstr(vt_last_error(), want) != NULL, "%s: '%s' not in '%s'", label, want, vt_last_error());
    }
    vt_context_free(c);
    vt_engine_params ep = vt_engine_default_params();
    ep.n_ctx = n_ctx;
    ep.n_threads = 1;
    ep.max_seqs = 2;
    vt_engine *e = NULL;
    s = vt_engine_create(m, &ep, &e);
    if (!want) {
        CHECK_MSG(s == VT_OK && e, "%s: engine of %d refused: %s", label, n_ctx, vt_last_error());
    } else {
        CHECK_MSG(s == VT_E_RANGE && !e, "%s: engine of %d: status %d", label, n_ctx, (int)s);
        CHECK_MSG(strstr(vt_last_error(), want) != NULL, "%s: engine: '%s' not in '%s'", label, want,
                  vt_last_error());
    }
    vt_engine_free(e);
}

static vt_model *load(const char *path) {
    vt_model *m = NULL;
    CHECK_MSG(vt_model_load(path, NULL, &m) == VT_OK, "%s: %s", path, vt_last_error());
    return m;
}

/* One sequence of n tokens decoded in one batch in a context of n_ctx: the last
 * position's logits are finite. */
static void check_decode(vt_model *m, int32_t n_ctx, int32_t n) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    vt_context *c = NULL;
    CHECK_OK(vt_context_create(m, &cp, &c));
    if (!c) return;
    int32_t tok[256], pos[256], seq[256] = {0};
    for (int32_t i = 0; i < n; i++) tok[i] = 3 + (i * 37) % 290, pos[i] = i;
    CHECK_OK(vt_decode(c, &(vt_batch){.n_tokens = n, .token = tok, .pos = pos, .seq = seq}));
    const float *l = vt_get_logits(c, 0);
    bool finite = l != NULL;
    for (int32_t i = 0; l && i < vt_model_n_vocab(m); i++) finite &= isfinite(l[i]) != 0;
    CHECK_MSG(finite, "logits at position %d of a context of %d are not finite", n - 1, n_ctx);
    vt_context_free(c);
}

int main(void) {
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    char plain[512], yarn[512], yarn16[512], linear[512], linear_no_orig[512], none[512];
    snprintf(plain, sizeof plain, "%s/plain.gguf", g_dir);
    snprintf(yarn, sizeof yarn, "%s/yarn.gguf", g_dir);
    snprintf(yarn16, sizeof yarn16, "%s/yarn16.gguf", g_dir);
    snprintf(linear, sizeof linear, "%s/linear.gguf", g_dir);
    snprintf(linear_no_orig, sizeof linear_no_orig, "%s/linear_no_orig.gguf", g_dir);
    snprintf(none, sizeof none, "%s/none.gguf", g_dir);
    const bool ok = write_synth(plain, 0, 0) && write_synth(yarn, 4.0f, 0) && write_synth(yarn16, 4.0f, 16) &&
                    rewrite(yarn, linear, "linear", true) && rewrite(yarn, linear_no_orig, "linear", false) &&
                    rewrite(yarn, none, "none", true);
    if (ok) {
        vt_model *m = load(plain);
        if (m) {
            CHECK_EQ_INT(vt_model_n_ctx_train(m), CTX_LEN);
            check_n_ctx(m, "no scaling", CTX_LEN, NULL);
            check_n_ctx(m, "no scaling", 0, NULL);
            check_n_ctx(m, "no scaling", CTX_LEN + 1,
                        "n_ctx 65 is past the model's training context (llama.context_length = 64) and the model "
                        "declares no rope scaling that extends it");
            check_n_ctx(m, "no scaling", CTX_LEN + 1, "use a context of at most 64 (-c 64)");
            check_n_ctx(m, "no scaling", 1 << 20, "n_ctx 1048576 is past");
        }
        vt_model_free(m);

        m = load(yarn);
        if (m) {
            check_n_ctx(m, "yarn x4 from 64", 4 * CTX_LEN, NULL);
            check_n_ctx(m, "yarn x4 from 64", 0, NULL);
            check_n_ctx(m, "yarn x4 from 64", 4 * CTX_LEN + 1,
                        "n_ctx 257 is past what the model's rope scaling reaches "
                        "(llama.rope.scaling.original_context_length 64 x factor 4 = 256 tokens; "
                        "llama.context_length = 64): use a context of at most 256 (-c 256)");
            check_decode(m, 4 * CTX_LEN, 100); /* positions past context_length */
        }
        vt_model_free(m);

        m = load(yarn16);
        if (m) {
            check_n_ctx(m, "yarn x4 from 16", CTX_LEN, NULL);
            check_n_ctx(m, "yarn x4 from 16", CTX_LEN + 1,
                        "original_context_length 16 x factor 4 = 64 tokens; llama.context_length = 64): use a "
                        "context of at most 64");
        }
        vt_model_free(m);

        m = load(linear);
        if (m) {
            check_n_ctx(m, "linear x4 from 64", 4 * CTX_LEN, NULL);
            check_n_ctx(m, "linear x4 from 64", 4 * CTX_LEN + 1, "at most 256 (-c 256)");
        }
        vt_model_free(m);

        m = load(linear_no_orig);
        if (m) {
            check_n_ctx(m, "linear x4, no original length", CTX_LEN, NULL);
            check_n_ctx(m, "linear x4, no original length", CTX_LEN + 1,
                        "n_ctx 65 is past the model's training context (llama.context_length = 64): its rope "
                        "scaling (factor 4) has no 'llama.rope.scaling.original_context_length'");
        }
        vt_model_free(m);

        m = load(none);
        if (m) {
            check_n_ctx(m, "type none", CTX_LEN, NULL);
            check_n_ctx(m, "type none", CTX_LEN + 1, "declares no rope scaling that extends it");
        }
        vt_model_free(m);
    }
    const char *files[] = {plain, yarn, yarn16, linear, linear_no_orig, none};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(files[i]);
    rmdir(g_dir);
    return test_finish();
}
