/* model/qwen35: the hybrids' keys (layer pattern, the linear layers' shapes, bad values)
 * and the linear layer's core against a naive float64 layer.
 *
 * The core runs 150 tokens of one sequence (2 k-heads tiled over 4 v-heads, d_state 16,
 * conv kernel 4) in runs of 1, 7, 80 and 62 tokens, once with the recurrent delta rule,
 * once with the chunked form, from a zero state (a new sequence). Bounds as NMSE against
 * float64 over the outputs and the final state: recurrent <= 1e-10, chunked <= 1e-9
 * (tests/test_deltanet.c says why the chunked form is looser).
 *
 * In a context, qwen35 and qwen35moe (8 experts, 2 per token, a shared expert, one MTP
 * layer that is skipped; once more with Q8_0 experts beside the F32 shared expert, which
 * then runs apart from them): the same bits in one chunk, in chunks of 5 or token by
 * token on 2 threads (every pass on both threads: VT_SOLO_KIB=0, so the linear layers'
 * (sequence, k-head group) items and the shared expert's slices among the experts' items
 * are claimed by both), and with two sequences interleaved as each alone. */
#include "base/status.h"
#include "engine_util.h"
#include "gguf/gguf.h"
#include "model/qwen35.h"
#include "model/synth.h"
#include "test.h"
#include "vt.h"

#include <stdint.h>
#include <unistd.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rng_uniform(void) { return (rng_u32() & 0xffffff) / 16777216.0f * 2.0f - 1.0f; }

/* ---- keys ---- */

typedef struct {
    int64_t conv, state, groups, rank, inner, interval, nextn, ctx;
    const uint8_t *recurrent; /* NULL: no array */
    uint64_t n_recurrent;
    bool recurrent_u8;        /* written as u8, not bool */
    int64_t recurrent_all;    /* >= 0: recurrent_layers as one u32 of this value (no array) */
} keys;

static keys good_keys(void) {
    return (keys){.conv = 4, .state = 16, .groups = 2, .rank = 4, .inner = 64, .interval = 4, .nextn = 0, .ctx = 4096,
                  .recurrent_all = -1};
}

/* Write the keys (a value < 0: the key left out) to a temp file, parse, load 8 blocks. */
static vt_status load_keys(const keys *k, q35_hparams *hp) {
    gguf_writer *w = NULL;
    CHECK_OK(gguf_writer_create(&w));
    if (k->conv >= 0) gguf_writer_set_u32(w, "qwen35.ssm.conv_kernel", (uint32_t)k->conv);
    if (k->state >= 0) gguf_writer_set_u32(w, "qwen35.ssm.state_size", (uint32_t)k->state);
    if (k->groups >= 0) gguf_writer_set_u32(w, "qwen35.ssm.group_count", (uint32_t)k->groups);
    if (k->rank >= 0) gguf_writer_set_u32(w, "qwen35.ssm.time_step_rank", (uint32_t)k->rank);
    if (k->inner >= 0) gguf_writer_set_u32(w, "qwen35.ssm.inner_size", (uint32_t)k->inner);
    if (k->interval >= 0) gguf_writer_set_u32(w, "qwen35.full_attention_interval", (uint32_t)k->interval);
    if (k->nextn > 0) gguf_writer_set_u32(w, "qwen35.nextn_predict_layers", (uint32_t)k->nextn);
    if (k->recurrent_all >= 0)
        gguf_writer_set_u32(w, "qwen35.attention.recurrent_layers", (uint32_t)k->recurrent_all);
    if (k->recurrent)
        gguf_writer_set_arr(w, "qwen35.attention.recurrent_layers", k->recurrent_u8 ? GGUF_TYPE_UINT8 : GGUF_TYPE_BOOL,
                            k->recurrent, k->n_recurrent);
    const int32_t sections[4] = {11, 11, 10, 0};
    gguf_writer_set_arr(w, "qwen35.rope.dimension_sections", GGUF_TYPE_INT32, sections, 4);
    char path[] = "/tmp/vt_qwen35_keys_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_destroy(w);

    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    const long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    void *buf = malloc((size_t)size);
    CHECK(fread(buf, 1, (size_t)size, fp) == (size_t)size);
    fclose(fp);
    unlink(path);
    gguf_file g;
    CHECK_OK(gguf_parse(buf, (size_t)size, "keys.gguf", &g));
    const vt_status s = q35_hparams_load(&g, "qwen35", 8, k->ctx, hp);
    gguf_free(&g);
    free(buf);
    return s;
}

static void expect_error(const keys *k, vt_status code, const char *what, const char *msg) {
    q35_hparams hp;
    const vt_status s = load_keys(k, &hp);
    CHECK_MSG(s == code, "%s: got %s (%s)", what, vt_status_str(s), vt_last_error());
    CHECK_MSG(strstr(vt_last_error(), msg) != NULL, "%s: '%s' not in '%s'", what, msg, vt_last_error());
    if (s == VT_OK) q35_hparams_free(&hp);
}

static void test_keys(void) {
    q35_hparams hp;
    keys k = good_keys();
    CHECK_OK(load_keys(&k, &hp));
    CHECK_EQ_INT(hp.n_layer, 8);
    CHECK_EQ_INT(hp.conv_ch, 2 * 2 * 16 + 64);
    CHECK_EQ_INT(hp.key_dim, 32);
    CHECK_EQ_INT(hp.rope_sections[0], 11);
    CHECK_EQ_INT(hp.rope_sections[2], 10);
    for (int il = 0; il < 8; il++) CHECK_EQ_INT(hp.is_linear[il], il != 3 && il != 7);
    CHECK_EQ_INT(q35_n_linear(&hp), 6);
    CHECK_EQ_INT(q35_state_bytes(&hp), 4 * (3 * 128 + 4 * 16 * 16));
    q35_hparams_free(&hp);

    /* the interval defaults to 4; 2: every other layer attends fully */
    k.interval = -1;
    CHECK_OK(load_keys(&k, &hp));
    CHECK_EQ_INT(q35_n_linear(&hp), 6);
    q35_hparams_free(&hp);
    k.interval = 2;
    CHECK_OK(load_keys(&k, &hp));
    for (int il = 0; il < 8; il++) CHECK_EQ_INT(hp.is_linear[il], il % 2 == 0);
    q35_hparams_free(&hp);

    /* the per-layer array wins over the interval; MTP layers leave the trunk */
    const uint8_t rec[8] = {1, 0, 0, 1, 1, 1, 0, 1};
    k = good_keys();
    k.recurrent = rec;
    k.n_recurrent = 8;
    k.nextn = 1;
    CHECK_OK(load_keys(&k, &hp));
    CHECK_EQ_INT(hp.n_layer, 7);
    CHECK_EQ_INT(hp.n_nextn, 1);
    for (int il = 0; il < 7; il++) CHECK_EQ_INT(hp.is_linear[il], rec[il]);
    q35_hparams_free(&hp);

    /* one number instead of the array: every layer of that kind (llama.cpp's
     * get_key_or_arr), whatever the interval says */
    k = good_keys();
    k.recurrent_all = 1;
    CHECK_OK(load_keys(&k, &hp));
    CHECK_EQ_INT(q35_n_linear(&hp), 8);
    q35_hparams_free(&hp);
    k.recurrent_all = 0;
    CHECK_OK(load_keys(&k, &hp));
    CHECK_EQ_INT(q35_n_linear(&hp), 0);
    q35_hparams_free(&hp);

    /* bad input: each a clear error naming the key */
    k = good_keys();
    k.state = 0;
    expect_error(&k, VT_E_RANGE, "state size 0", "'qwen35.ssm.state_size' = 0");
    k = good_keys();
    k.conv = 9;
    k.ctx = 8;
    expect_error(&k, VT_E_RANGE, "conv kernel > context", "longer than the context");
    k = good_keys();
    k.conv = 0;
    expect_error(&k, VT_E_RANGE, "conv kernel 0", "'qwen35.ssm.conv_kernel' = 0");
    k = good_keys();
    k.rank = 3;
    k.inner = 48;
    expect_error(&k, VT_E_RANGE, "heads do not divide", "not a multiple");
    k = good_keys();
    k.inner = 60;
    expect_error(&k, VT_E_RANGE, "inner size", "'qwen35.ssm.inner_size' = 60");
    k = good_keys();
    k.state = -1;
    expect_error(&k, VT_E_FORMAT, "missing key", "'qwen35.ssm.state_size' is missing");
    k = good_keys();
    k.recurrent = rec;
    k.n_recurrent = 5;
    expect_error(&k, VT_E_FORMAT, "short array", "recurrent_layers' has 5 elements");
    k.n_recurrent = 8;
    k.recurrent_u8 = true; /* llama.cpp's get_arr: bool, i32 or u32 only */
    expect_error(&k, VT_E_FORMAT, "u8 array", "recurrent_layers' has 8 elements of type u8");
    k = good_keys();
    k.nextn = 8;
    expect_error(&k, VT_E_RANGE, "all layers MTP", "leaves no trunk layers");
    k = good_keys();
    k.interval = 0;
    expect_error(&k, VT_E_RANGE, "interval 0", "full_attention_interval' = 0");
}

/* ---- the core against float64 ---- */

static double silu_d(double x) { return x / (1 + exp(-x)); }

/* The layer of qwen35.cpp in float64 over the whole run, from a zero state. */
static void core_f64(const q35_hparams *hp, const q35_linear_weights *w, double eps, int64_t T, const float *qkv_in,
                     const float *z, const float *alpha, const float *beta, double *out, double *S_out) {
    const int64_t C = hp->conv_ch, K = hp->conv_kernel, ds = hp->d_state, nk = hp->n_k_heads, nv = hp->n_v_heads;
    double *x = calloc((size_t)(T * C), sizeof(double));
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) {
            double s = 0;
            for (int64_t i = 0; i < K; i++) {
                const int64_t src = t - (K - 1) + i;
                if (src >= 0) s += (double)qkv_in[src * C + c] * w->conv_w[i * C + c];
            }
            x[t * C + c] = silu_d(s);
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < 2 * nk; h++) {
            double *r = x + t * C + h * ds, ss = 0;
            for (int64_t i = 0; i < ds; i++) ss += r[i] * r[i];
            const double n = fmax(sqrt(ss), eps);
            for (int64_t i = 0; i < ds; i++) r[i] /= n;
        }
    double *S = calloc((size_t)(nv * ds * ds), sizeof(double));
    double *o = malloc(sizeof(double) * (size_t)ds);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < nv; h++) {
            const double *q = x + t * C + (h % nk) * ds, *k = x + t * C + hp->key_dim + (h % nk) * ds;
            const double *v = x + t * C + 2 * hp->key_dim + h * ds;
            const double a = (double)alpha[t * nv + h] + w->dt_bias[h];
            const double g = (a > 20 ? a : log1p(exp(a))) * w->a[h];
            const double b = 1 / (1 + exp(-(double)beta[t * nv + h]));
            double *Sh = S + h * ds * ds, ss = 0;
            for (int64_t j = 0; j < ds; j++) {
                double sk = 0, sq = 0;
                for (int64_t i = 0; i < ds; i++) Sh[j * ds + i] *= exp(g), sk += Sh[j * ds + i] * k[i];
                const double u = (v[j] - sk) * b;
                for (int64_t i = 0; i < ds; i++) Sh[j * ds + i] += u * k[i], sq += Sh[j * ds + i] * q[i];
                o[j] = sq / sqrt((double)ds);
                ss += o[j] * o[j];
            }
            const double r = 1 / sqrt(ss / ds + eps);
            for (int64_t j = 0; j < ds; j++)
                out[t * hp->d_inner + h * ds + j] = o[j] * r * w->norm_w[j] * silu_d(z[t * hp->d_inner + h * ds + j]);
        }
    memcpy(S_out, S, sizeof(double) * (size_t)(nv * ds * ds));
    free(x), free(S), free(o);
}

static double nmse(const float *x, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]), den += ref[i] * ref[i];
    return num / den;
}

static void test_core(void) {
    q35_hparams hp = {.n_layer = 1, .conv_kernel = 4, .d_state = 16, .n_k_heads = 2, .n_v_heads = 4};
    hp.d_inner = hp.n_v_heads * hp.d_state;
    hp.key_dim = hp.n_k_heads * hp.d_state;
    hp.conv_ch = 2 * hp.key_dim + hp.d_inner;
    const int64_t T = 150, C = hp.conv_ch, D = hp.d_inner, nv = hp.n_v_heads, K = hp.conv_kernel;
    float *conv_w = malloc(sizeof(float) * K * C), dt[4], a[4], norm_w[16];
    for (int64_t i = 0; i < K * C; i++) conv_w[i] = rng_uniform();
    for (int h = 0; h < 4; h++) dt[h] = 0.5f * rng_uniform(), a[h] = -expf(rng_uniform());
    for (int i = 0; i < 16; i++) norm_w[i] = 1 + 0.2f * rng_uniform();
    const q35_linear_weights w = {.conv_w = conv_w, .dt_bias = dt, .a = a, .norm_w = norm_w};
    float *qkv = malloc(sizeof(float) * T * C), *z = malloc(sizeof(float) * T * D);
    float *al = malloc(sizeof(float) * T * nv), *be = malloc(sizeof(float) * T * nv);
    for (int64_t i = 0; i < T * C; i++) qkv[i] = 2 * rng_uniform();
    for (int64_t i = 0; i < T * D; i++) z[i] = 2 * rng_uniform();
    for (int64_t i = 0; i < T * nv; i++) al[i] = 3 * rng_uniform(), be[i] = 3 * rng_uniform();
    const float eps = 1e-6f;
    double *ref = malloc(sizeof(double) * T * D), *S_ref = malloc(sizeof(double) * nv * 16 * 16);
    core_f64(&hp, &w, eps, T, qkv, z, al, be, ref, S_ref);

    const size_t sb = q35_state_bytes(&hp);
    float *state = malloc(sb), *out = malloc(sizeof(float) * T * D);
    float *q2 = malloc(sizeof(float) * T * C), *al2 = malloc(sizeof(float) * T * nv), *be2 = malloc(sizeof(float) * T * nv);
    float *scratch = malloc(sizeof(float) * (size_t)q35_core_scratch_floats(&hp));
    const int64_t runs[] = {1, 7, 80, 62};
    for (int chunked = 0; chunked < 2; chunked++) {
        memset(state, 0, sb); /* a new sequence */
        memcpy(q2, qkv, sizeof(float) * T * C);
        memcpy(al2, al, sizeof(float) * T * nv);
        memcpy(be2, be, sizeof(float) * T * nv);
        for (int64_t r = 0, t = 0; r < 4; t += runs[r++])
            q35_linear_core(&hp, &w, eps, runs[r], q2 + t * C, C, z + t * D, D, al2 + t * nv, be2 + t * nv, nv, state,
                            out + t * D, D, chunked, scratch);
        const double e_out = nmse(out, ref, T * D);
        const double e_st = nmse(state + (K - 1) * C, S_ref, nv * 16 * 16);
        const double bound = chunked ? 1e-9 : 1e-10;
        CHECK_MSG(e_out <= bound && e_st <= bound, "%s: nmse out %g state %g", chunked ? "chunked" : "recurrent",
                  e_out, e_st);
        /* the conv state holds the last K-1 raw projections */
        CHECK(memcmp(state, qkv + (T - K + 1) * C, sizeof(float) * (K - 1) * C) == 0);
    }
    free(conv_w), free(qkv), free(z), free(al), free(be), free(ref), free(S_ref);
    free(state), free(out), free(q2), free(al2), free(be2), free(scratch);
}

/* vt synth --arch qwen35: the keys load, every layer has its kind's tensors */
static void test_synth(void) {
    synth_params sp = synth_default_params();
    sp.arch = "qwen35";
    sp.n_layer = 5;
    sp.n_embd = 64;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.head_dim = 16;
    sp.n_ff = 96;
    sp.ssm_n_v_heads = 4;
    sp.ssm_n_k_heads = 2;
    sp.n_threads = 1;
    char path[] = "/tmp/vt_qwen35_synth_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_OK(synth_write(&sp, path));
    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    const long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    void *buf = malloc((size_t)size);
    CHECK(fread(buf, 1, (size_t)size, fp) == (size_t)size);
    fclose(fp);
    unlink(path);
    gguf_file g;
    CHECK_OK(gguf_parse(buf, (size_t)size, "synth.gguf", &g));
    q35_hparams hp;
    CHECK_OK(q35_hparams_load(&g, "qwen35", 5, 256, &hp));
    CHECK_EQ_INT(hp.n_layer, 5);
    CHECK_EQ_INT(hp.conv_ch, 2 * 2 * 16 + 4 * 16);
    int64_t rot = 0;
    CHECK_OK(gguf_get_i64(&g, "qwen35.rope.dimension_count", &rot));
    CHECK_EQ_INT(rot, 4);
    for (int il = 0; il < 5; il++) {
        CHECK_EQ_INT(hp.is_linear[il], il != 3);
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s", il, hp.is_linear[il] ? "attn_qkv.weight" : "attn_q.weight");
        const gguf_tensor *t = gguf_find_tensor(&g, name);
        CHECK_MSG(t != NULL, "%s missing", name);
        if (t) CHECK_EQ_INT(t->ne[1], hp.is_linear[il] ? hp.conv_ch : 2 * 4 * 16);
        snprintf(name, sizeof name, "blk.%d.%s", il, hp.is_linear[il] ? "ssm_a" : "attn_q_norm.weight");
        CHECK_MSG(gguf_find_tensor(&g, name) != NULL, "%s missing", name);
        snprintf(name, sizeof name, "blk.%d.post_attention_norm.weight", il);
        CHECK_MSG(gguf_find_tensor(&g, name) != NULL, "%s missing", name);
    }
    const gguf_tensor *a = gguf_find_tensor(&g, "blk.0.ssm_a");
    if (a) {
        const float *av = (const float *)(g.buf + g.data_offset + a->offset);
        for (int h = 0; h < 4; h++) CHECK_MSG(av[h] < 0, "ssm_a[%d] = %g is not a decay", h, av[h]);
    }
    q35_hparams_free(&hp);
    gguf_free(&g);
    free(buf);
}

/* ---- the model in a vt_context ---- */

/* The experts' type in the qwen35moe files (VT_DTYPE_COUNT: the file's). */
static vt_dtype exp_type = VT_DTYPE_COUNT;

/* A synthetic arch model of n_layer layers, every interval-th attending fully. */
static synth_params model_params(const char *arch, int64_t interval, int64_t n_layer) {
    synth_params sp = synth_default_params();
    sp.arch = arch;
    sp.exp_type = exp_type;
    if (!strcmp(arch, "qwen35moe")) { /* 8 experts of 32 rows, 2 per token, a shared expert of 64 */
        sp.n_expert = 8;
        sp.n_expert_used = 2;
        sp.n_ff_exp = 32;
        sp.n_ff_shexp = 64;
        sp.n_nextn = 1;
    }
    sp.n_layer = n_layer;
    sp.n_embd = 64;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.head_dim = 16;
    sp.n_ff = 96;
    sp.full_attn_interval = interval;
    sp.n_threads = 1;
    return sp;
}

/* Logits of every token of the batch (n_seq sequences, tokens interleaved as given). */
static void run_batches(vt_model *m, int n_seq, int n_threads, const int32_t *tok, const int32_t *seq, int32_t n,
                        int32_t per, float *out) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = 256;
    cp.n_seq = n_seq;
    cp.n_threads = n_threads;
    vt_context *c = NULL;
    CHECK_OK(vt_context_create(m, &cp, &c));
    if (!c) return;
    const int32_t nv = vt_model_n_vocab(m);
    int32_t len[8] = {0}, *pos = malloc(sizeof(int32_t) * (size_t)n);
    for (int32_t i = 0; i < n; i++) pos[i] = len[seq[i]]++;
    int8_t *want = malloc((size_t)n);
    memset(want, 1, (size_t)n);
    for (int32_t i0 = 0; i0 < n; i0 += per) {
        const int32_t k = n - i0 < per ? n - i0 : per;
        vt_batch b = {.n_tokens = k, .token = tok + i0, .pos = pos + i0, .seq = seq + i0, .logits = want + i0};
        CHECK_OK(vt_decode(c, &b));
        for (int32_t j = 0; j < k; j++) {
            const float *l = vt_get_logits(c, j);
            if (l) memcpy(out + (size_t)(i0 + j) * (size_t)nv, l, sizeof(float) * (size_t)nv);
        }
    }
    free(pos), free(want);
    vt_context_free(c);
}

/* arch: qwen35, or qwen35moe (experts, a shared expert, an MTP layer that is skipped) */
static void test_context(const char *arch) {
    const synth_params sp = model_params(arch, 4, 4);
    vt_model *m = test_synth_load(&sp, NULL);
    setenv("VT_SOLO_KIB", "0", 1);
    if (m) {
        const int32_t nv = vt_model_n_vocab(m), n = 40;
        int32_t tok[80], seq[80], seq0[40] = {0};
        for (int i = 0; i < n; i++) tok[i] = 3 + (i * 131) % 500, tok[n + i] = 3 + (i * 71 + 5) % 500;
        float *alone0 = malloc(sizeof(float) * 80 * (size_t)nv), *alone1 = malloc(sizeof(float) * 40 * (size_t)nv);
        float *mixed = malloc(sizeof(float) * 80 * (size_t)nv), *again = malloc(sizeof(float) * 40 * (size_t)nv);
        run_batches(m, 1, 1, tok, seq0, n, n, alone0);
        run_batches(m, 1, 1, tok + n, seq0, n, n, alone1);
        /* one chunk, chunks of 5, token by token on 2 threads: the same bits */
        run_batches(m, 1, 2, tok, seq0, n, 5, again);
        CHECK(memcmp(again, alone0, sizeof(float) * 40 * (size_t)nv) == 0);
        run_batches(m, 1, 2, tok, seq0, n, 1, again);
        CHECK(memcmp(again, alone0, sizeof(float) * 40 * (size_t)nv) == 0);
        /* two sequences interleaved in batches of 6: each as alone (its own state slot) */
        int32_t t2[80];
        for (int i = 0; i < n; i++) t2[2 * i] = tok[i], seq[2 * i] = 0, t2[2 * i + 1] = tok[n + i], seq[2 * i + 1] = 1;
        run_batches(m, 2, 2, t2, seq, 2 * n, 6, mixed);
        int same = 1;
        for (int i = 0; i < n; i++) {
            same &= !memcmp(mixed + (size_t)(2 * i) * nv, alone0 + (size_t)i * nv, sizeof(float) * (size_t)nv);
            same &= !memcmp(mixed + (size_t)(2 * i + 1) * nv, alone1 + (size_t)i * nv, sizeof(float) * (size_t)nv);
        }
        CHECK_MSG(same, "two sequences batched differ from each alone");
        /* a sequence cleared and run again starts from a zero state */
        vt_context_params cp = vt_context_default_params();
        cp.n_ctx = 256;
        cp.n_threads = 1;
        vt_context *c = NULL;
        CHECK_OK(vt_context_create(m, &cp, &c));
        int32_t pos[40];
        for (int i = 0; i < n; i++) pos[i] = i;
        for (int round = 0; c && round < 2; round++) {
            vt_batch b = {.n_tokens = round ? n : 10, .token = round ? tok : tok + n, .pos = pos, .seq = seq0};
            CHECK_OK(vt_decode(c, &b));
            vt_seq_clear(c, 0);
        }
        vt_batch b = {.n_tokens = n, .token = tok, .pos = pos, .seq = seq0};
        if (c) {
            CHECK_OK(vt_decode(c, &b));
            CHECK(memcmp(vt_get_logits(c, 0), alone0 + (size_t)(n - 1) * nv, sizeof(float) * (size_t)nv) == 0);
        }
        vt_context_free(c);
        free(alone0), free(alone1), free(mixed), free(again);
    }
    unsetenv("VT_SOLO_KIB");
    vt_model_free(m);
}

/* A layer pattern that makes a layer linear whose file has attention tensors there. */
static void test_bad_pattern(void) {
    char path[] = "/tmp/vt_qwen35_bad_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    const synth_params sp = model_params("qwen35", 2, 4); /* layers 1 and 3 attend fully */
    CHECK_OK(synth_write(&sp, path));
    /* rewrite the interval: 4 makes layer 1 linear, and it has no attn_qkv */
    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    const long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)size);
    CHECK(fread(buf, 1, (size_t)size, fp) == (size_t)size);
    fclose(fp);
    gguf_file g;
    CHECK_OK(gguf_parse(buf, (size_t)size, path, &g));
    const gguf_kv *kv = gguf_find(&g, "qwen35.full_attention_interval");
    CHECK(kv != NULL);
    /* the u32 value sits right before the next key: find it by value in the kv region */
    uint8_t *p = buf;
    for (long i = 0; kv && i + 4 < (long)g.data_offset; i++) {
        static const char key[] = "qwen35.full_attention_interval";
        if (memcmp(buf + i, key, sizeof key - 1) == 0) {
            p = buf + i + sizeof key - 1 + 4; /* past the key and its u32 type */
            uint32_t v = 4;
            memcpy(p, &v, 4);
            break;
        }
    }
    gguf_free(&g);
    fp = fopen(path, "wb");
    fwrite(buf, 1, (size_t)size, fp);
    fclose(fp);
    free(buf);
    vt_model *m = NULL;
    const vt_status s = vt_model_load(path, NULL, &m);
    CHECK_MSG(s == VT_E_FORMAT && m == NULL, "loaded: %s", vt_status_str(s));
    CHECK_MSG(strstr(vt_last_error(), "'blk.1.attn_qkv.weight' is missing") &&
                  strstr(vt_last_error(), "layer pattern"),
              "message: %s", vt_last_error());
    vt_model_free(m);
    unlink(path);
}

int main(void) {
    test_keys();
    test_synth();
    test_context("qwen35");
    test_context("qwen35moe");
    exp_type = VT_DTYPE_Q8_0;
    test_context("qwen35moe");
    exp_type = VT_DTYPE_COUNT;
    test_bad_pattern();
    test_core();
    return test_finish();
}
