/* model/ + engine/context: real tiny models end to end.
 * - stories260K greedy from BOS matches the reference token ids (llama2.c);
 * - logits are bit-identical for 1, 2 and 3 threads and for every batch split,
 *   with every pass on all threads (VT_SOLO_KIB=0) and with the default, where
 *   these tiny models decode on the calling thread alone;
 * - a prompt evaluated in one batch gives the same logits as token by token
 *   (within a stated bound: the matmul tiles differ);
 * - bad models are refused with a message naming the key or tensor. */
#include "gguf/gguf.h"
#include "base/mapfile.h"
#include "test.h"
#include "vt.h"

#include <stdint.h>
#include <unistd.h>

static const int32_t stories_greedy_head[24] = {403, 407, 261, 378, 432, 383, 286, 261,
                                                376, 298, 315, 421, 395, 317, 426, 338,
                                                401, 396, 267, 337, 410, 408, 419, 292};

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* Greedy from BOS for n steps; logits of every step into all (n, n_vocab). */
static vt_status greedy(vt_model *m, int threads, int n, int32_t *toks, float *all) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = threads;
    vt_context *c;
    VT_TRY(vt_context_create(m, &cp, &c));
    int32_t tok = vt_model_bos(m), pos = 0, seq = 0;
    const int nv = vt_model_n_vocab(m);
    for (int i = 0; i < n; i++) {
        vt_batch b = {1, &tok, &pos, &seq, NULL};
        vt_status s = vt_decode(c, &b);
        if (s != VT_OK) {
            vt_context_free(c);
            return s;
        }
        const float *l = vt_get_logits(c, 0);
        if (all) memcpy(all + (size_t)i * nv, l, sizeof(float) * nv);
        toks[i] = tok = argmax(l, nv);
        pos++;
    }
    vt_context_free(c);
    return VT_OK;
}

static void test_stories_greedy(void) {
    const char *path = test_model_path("stories260K.gguf");
    if (!path) return;
    vt_model *m;
    CHECK_OK(vt_model_load(path, NULL, &m));
    if (!m) return;
    CHECK_EQ_INT(vt_model_n_vocab(m), 512);
    int32_t toks[24];
    CHECK_OK(greedy(m, 1, 24, toks, NULL));
    CHECK(!memcmp(toks, stories_greedy_head, sizeof toks));
    vt_model_free(m);
}

/* Logits bit-identical for 1, 2, 3 threads; batched prompt close to sequential. */
static void test_threads_and_batches(const char *name) {
    const char *path = test_model_path(name);
    if (!path) return;
    vt_model *m;
    CHECK_OK(vt_model_load(path, NULL, &m));
    if (!m) return;
    const int n = 40, nv = vt_model_n_vocab(m);
    float *ref = malloc(sizeof(float) * (size_t)n * nv), *got = malloc(sizeof(float) * (size_t)n * nv);
    int32_t toks[40], toks2[40];
    CHECK_OK(greedy(m, 1, n, toks, ref));
    /* VT_SOLO_KIB=0: every pass on all threads (a tiny model's decode would
     * otherwise run on the caller alone); then once with the default */
    setenv("VT_SOLO_KIB", "0", 1);
    for (int t = 2; t <= 3; t++) {
        CHECK_OK(greedy(m, t, n, toks2, got));
        CHECK_MSG(!memcmp(ref, got, sizeof(float) * (size_t)n * nv), "%s: logits differ at %d threads", name, t);
    }
    unsetenv("VT_SOLO_KIB");
    CHECK_OK(greedy(m, 2, n, toks2, got));
    CHECK_MSG(!memcmp(ref, got, sizeof(float) * (size_t)n * nv), "%s: logits differ at 2 threads (solo decode)",
              name);
    /* The same tokens as one prompt, in batches of 1, 7 and 40: logits of every row. */
    int32_t prompt[40], pos[40], seq[40] = {0};
    int8_t want[40];
    prompt[0] = vt_model_bos(m);
    for (int i = 1; i < n; i++) prompt[i] = toks[i - 1];
    for (int i = 0; i < n; i++) pos[i] = i, want[i] = 1;
    const int batches[] = {1, 7, 40};
    for (int bi = 0; bi < 3; bi++) {
        for (int threads = 1; threads <= 2; threads++) {
            vt_context_params cp = vt_context_default_params();
            cp.n_ctx = 512;
            cp.n_batch = batches[bi];
            cp.n_threads = threads;
            vt_context *c;
            CHECK_OK(vt_context_create(m, &cp, &c));
            vt_batch b = {n, prompt, pos, seq, want};
            CHECK_OK(vt_decode(c, &b));
            double worst = 0;
            for (int i = 0; i < n; i++) {
                const float *l = vt_get_logits(c, i);
                double e = test_nmse(l, ref + (size_t)i * nv, nv);
                worst = e > worst ? e : worst;
            }
            CHECK_MSG(worst < 1e-6, "%s: batch %d: NMSE %.3g vs token-by-token", name, batches[bi], worst);
            CHECK(vt_get_logits(c, n) == NULL);
            CHECK_EQ_INT(vt_seq_len(c, 0), n);
            vt_context_free(c);
        }
    }
    free(ref);
    free(got);
    vt_model_free(m);
}

static void test_decode_errors(void) {
    const char *path = test_model_path("stories260K.gguf");
    if (!path) return;
    vt_model *m;
    CHECK_OK(vt_model_load(path, NULL, &m));
    if (!m) return;
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 8;
    cp.n_seq = 2;
    cp.n_threads = 1;
    vt_context *c;
    CHECK_OK(vt_context_create(m, &cp, &c));
    int32_t tok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, pos[9], seq[9] = {0};
    for (int i = 0; i < 9; i++) pos[i] = i;
    vt_batch b = {9, tok, pos, seq, NULL};
    CHECK(vt_decode(c, &b) == VT_E_RANGE); /* past n_ctx */
    CHECK(strstr(vt_last_error(), "context of 8") != NULL);
    CHECK_EQ_INT(vt_seq_len(c, 0), 0); /* unchanged */
    b.n_tokens = 2;
    pos[1] = 5;
    CHECK(vt_decode(c, &b) == VT_E_INVALID); /* gap in positions */
    pos[1] = 1;
    tok[1] = 512;
    CHECK(vt_decode(c, &b) == VT_E_INVALID); /* id out of range */
    CHECK(strstr(vt_last_error(), "512") != NULL);
    tok[1] = 2;
    seq[1] = 2;
    CHECK(vt_decode(c, &b) == VT_E_INVALID); /* sequence out of range */
    seq[1] = 1;
    pos[1] = 0;
    CHECK_OK(vt_decode(c, &b)); /* two sequences in one batch */
    CHECK_EQ_INT(vt_seq_len(c, 0), 1);
    CHECK_EQ_INT(vt_seq_len(c, 1), 1);
    vt_seq_clear(c, 0);
    CHECK_EQ_INT(vt_seq_len(c, 0), 0);
    vt_context_free(c);
    vt_model_free(m);
}

/* Rewrite stories260K with one key dropped or changed; loading must fail with
 * a message that names it. */
static void check_bad_model(const gguf_file *src, const char *drop_key, const char *arch,
                            const char *drop_tensor, const char *expect) {
    gguf_writer *w;
    CHECK_OK(gguf_writer_create(&w));
    for (int64_t i = 0; i < src->n_kv; i++) {
        const gguf_kv *kv = &src->kv[i];
        if (drop_key && gguf_str_eq(kv->key, drop_key)) continue;
        if (arch && gguf_str_eq(kv->key, "general.architecture")) {
            CHECK_OK(gguf_writer_set_str(w, "general.architecture", arch));
            continue;
        }
        CHECK_OK(gguf_writer_copy_kv(w, kv));
    }
    for (int64_t i = 0; i < src->n_tensors; i++) {
        const gguf_tensor *t = &src->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        if (drop_tensor && !strcmp(name, drop_tensor)) continue;
        CHECK_OK(gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->bytes));
    }
    char path[] = "/tmp/vt_bad_model_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_destroy(w);
    vt_model *m = NULL;
    vt_status s = vt_model_load(path, NULL, &m);
    CHECK(s != VT_OK && m == NULL);
    CHECK_MSG(strstr(vt_last_error(), expect) != NULL, "'%s' not in '%s'", expect, vt_last_error());
    CHECK_MSG(strstr(vt_last_error(), path) != NULL, "path not in '%s'", vt_last_error());
    unlink(path);
}

/* vt_model_step_bytes: all weights but the embedding table's other rows, or all
 * of them when the table is also the output head. */
static void test_step_bytes(const char *name) {
    const char *path = test_model_path(name);
    if (!path) return;
    mapfile mf;
    gguf_file f;
    CHECK_OK(mapfile_open(path, &mf));
    CHECK_OK(gguf_parse(mf.data, mf.size, path, &f));
    const gguf_tensor *embd = gguf_find_tensor(&f, "token_embd.weight");
    const bool tied = gguf_find_tensor(&f, "output.weight") == NULL;
    vt_model *m = NULL;
    CHECK_OK(vt_model_load(path, NULL, &m));
    if (m && embd) {
        const size_t all = vt_model_weight_bytes(m);
        const size_t want = tied ? all : all - embd->bytes + embd->bytes / (size_t)embd->ne[1];
        CHECK_MSG(vt_model_step_bytes(m) == want, "%s: step bytes %zu, want %zu (tied %d)", name,
                  vt_model_step_bytes(m), want, tied);
    }
    vt_model_free(m);
    gguf_free(&f);
    mapfile_close(&mf);
}

static void test_bad_models(void) {
    const char *path = test_model_path("stories260K.gguf");
    if (!path) return;
    mapfile mf;
    gguf_file f;
    CHECK_OK(mapfile_open(path, &mf));
    CHECK_OK(gguf_parse(mf.data, mf.size, path, &f));
    check_bad_model(&f, "llama.block_count", NULL, NULL, "'llama.block_count' is missing");
    check_bad_model(&f, "llama.attention.layer_norm_rms_epsilon", NULL, NULL, "layer_norm_rms_epsilon");
    check_bad_model(&f, "general.architecture", NULL, NULL, "general.architecture");
    check_bad_model(&f, NULL, "mamba", NULL, "architecture 'mamba' is not supported");
    check_bad_model(&f, NULL, NULL, "blk.2.ffn_down.weight", "'blk.2.ffn_down.weight' is missing");
    check_bad_model(&f, NULL, NULL, "output_norm.weight", "'output_norm.weight' is missing");
    gguf_free(&f);
    mapfile_close(&mf);
    vt_model *m = NULL;
    CHECK(vt_model_load("/nonexistent/model.gguf", NULL, &m) == VT_E_IO);
    CHECK(strstr(vt_last_error(), "/nonexistent/model.gguf") != NULL);
}

int main(void) {
    test_stories_greedy();
    test_threads_and_batches("stories260K.gguf");
    test_step_bytes("stories260K.gguf");
    test_step_bytes("TinyStories-656K-Q8_0.gguf");
    test_step_bytes("llama-2-tiny-random.gguf");
    test_threads_and_batches("TinyStories-656K-Q8_0.gguf");
    test_threads_and_batches("TinyStories-656K-Q2_K.gguf");
    test_threads_and_batches("llama-2-tiny-random.gguf");
    test_decode_errors();
    test_bad_models();
    return test_finish();
}
