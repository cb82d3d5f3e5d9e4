/* Contexts past the training context (model.h, model_check_n_ctx): a
 * vt_context or vt_engine of n_ctx past the file's context_length is refused
 * with VT_E_RANGE and a message naming n_ctx, the keys, the largest context
 * allowed and the flags that would extend it, unless the rope scaling reaches
 * that far: the file's (linear or YaRN, factor x rope.scaling.original_context_length)
 * or the caller's override (vt_model_params.rope, llama.cpp's --rope-scaling,
 * --rope-scale, --yarn-orig-ctx, ...: factor x the original context). n_ctx 0
 * is the training context. One table of cases on small synthetic llama files
 * (context_length 64) and rewrites of their rope keys:
 *   - no scaling: 64 and 0 accepted, 65 refused naming the flags;
 *   - YaRN x4 from 64: 256 accepted, 257 refused naming the reach; from 16: 64;
 *   - linear x4 from 64: 256; without the original length, context_length is
 *     the scaled context already (65 refused) unless --yarn-orig-ctx gives it;
 *   - type none with a factor: no scaling;
 *   - overrides on the unscaled file: YaRN x4 (from 64, and from 16), a scale
 *     alone (linear), type none with a scale, a type or a base alone (no reach);
 *     type none over the YaRN file; linear and YaRN over a sliding-window llama
 *     (its window layers keep the file's rope, and under YaRN take their ramp
 *     and magnitude from it);
 *   - bad overrides, each refused by vt_model_load with VT_E_INVALID naming the
 *     field and its flag: an unknown type, a scale <= 0 or NaN, an infinite
 *     base, a negative original context, a NaN mix, a magnitude 0, beta_fast
 *     below beta_slow.
 * And a sequence decodes past position 64 with finite logits under the file's
 * YaRN and under the override. vt_model_n_ctx_default (the tools' context
 * without -c) is the training context, or with an override's scale or
 * original context what they reach: 64, YaRN x4 256, from 16 64, a type or a
 * base alone 64, the file's YaRN 64, an original context over the linear file
 * without one 256. */
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

/* A synthetic llama of context_length CTX_LEN; yarn_factor > 0 adds YaRN from orig
 * (0: CTX_LEN); n_swa > 0 a sliding window on every layer. */
static bool write_synth(const char *path, float yarn_factor, int64_t orig, int64_t n_swa) {
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
    sp.n_swa = n_swa;
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
        ok = ok && gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->bytes) == VT_OK;
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

/* One sequence of n tokens decoded in one batch in a context of n_ctx: the last
 * position's logits are finite. */
static void check_decode(vt_model *m, const char *label, int32_t n_ctx, int32_t n) {
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
    CHECK_MSG(finite, "%s: logits at position %d of a context of %d are not finite", label, n - 1, n_ctx);
    vt_context_free(c);
}

enum { F_PLAIN, F_YARN, F_YARN16, F_LINEAR, F_LINEAR_NO_ORIG, F_NONE, F_SWA, F_COUNT };
static const char *const file_names[F_COUNT] = {"plain", "yarn", "yarn16", "linear", "linear_no_orig", "none", "swa"};

/* A rope override: the fields set over vt_rope_default_params() (0 or NULL: not
 * set; has_ext, has_attn: yarn_ext_factor, yarn_attn_factor are set). */
typedef struct rope_spec {
    const char *type; /* "none", "linear", "yarn", or "bogus" (scaling_type 7) */
    float freq_scale, freq_base, beta_fast;
    int32_t orig;
    bool has_ext, has_attn;
    float ext, attn;
} rope_spec;

typedef struct nctx_case {
    const char *label;
    int file;
    rope_spec rope; /* all zero: no override (vt_model_params.rope NULL) */
    int32_t n_ctx;
    const char *want;      /* NULL: accepted; else refused (VT_E_RANGE) with this in the message */
    vt_status load;        /* != VT_OK: vt_model_load refuses the override with it */
    int32_t decode;        /* > 0: also decode this many positions in a context of n_ctx */
} nctx_case;

#define YARN_X4 {.type = "yarn", .freq_scale = 0.25f}
static const nctx_case cases[] = {
    {"no scaling", F_PLAIN, {0}, CTX_LEN, NULL},
    {"no scaling", F_PLAIN, {0}, 0, NULL},
    {"no scaling", F_PLAIN, {0}, CTX_LEN + 1,
     "n_ctx 65 is past the model's training context (llama.context_length = 64) and the model declares no rope "
     "scaling that extends it"},
    {"no scaling", F_PLAIN, {0}, CTX_LEN + 1, "use a context of at most 64 (-c 64)"},
    {"no scaling", F_PLAIN, {0}, CTX_LEN + 1, "(--rope-scaling yarn --rope-scale 2, or linear)"},
    {"no scaling", F_PLAIN, {0}, 1 << 20, "n_ctx 1048576 is past"},
    {"yarn x4 from 64", F_YARN, {0}, 4 * CTX_LEN, NULL, VT_OK, 100},
    {"yarn x4 from 64", F_YARN, {0}, 0, NULL},
    {"yarn x4 from 64", F_YARN, {0}, 4 * CTX_LEN + 1,
     "n_ctx 257 is past what the model's rope scaling reaches (llama.rope.scaling.original_context_length 64 x "
     "factor 4 = 256 tokens; llama.context_length = 64): use a context of at most 256 (-c 256), or scale further "
     "(--rope-scale 5)"},
    {"yarn x4 from 16", F_YARN16, {0}, CTX_LEN, NULL},
    {"yarn x4 from 16", F_YARN16, {0}, CTX_LEN + 1,
     "original_context_length 16 x factor 4 = 64 tokens; llama.context_length = 64): use a context of at most 64"},
    {"linear x4 from 64", F_LINEAR, {0}, 4 * CTX_LEN, NULL},
    {"linear x4 from 64", F_LINEAR, {0}, 4 * CTX_LEN + 1, "at most 256 (-c 256)"},
    {"linear x4, no original length", F_LINEAR_NO_ORIG, {0}, CTX_LEN, NULL},
    {"linear x4, no original length", F_LINEAR_NO_ORIG, {0}, CTX_LEN + 1,
     "n_ctx 65 is past the model's training context (llama.context_length = 64): its rope scaling (factor 4) has "
     "no 'llama.rope.scaling.original_context_length'"},
    {"linear x4, no original length", F_LINEAR_NO_ORIG, {0}, CTX_LEN + 1, "(--yarn-orig-ctx N)"},
    {"type none", F_NONE, {0}, CTX_LEN, NULL},
    {"type none", F_NONE, {0}, CTX_LEN + 1, "declares no rope scaling that extends it"},
    /* overrides */
    {"override yarn x4", F_PLAIN, YARN_X4, 4 * CTX_LEN, NULL, VT_OK, 100},
    {"override yarn x4", F_PLAIN, YARN_X4, 4 * CTX_LEN + 1,
     "n_ctx 257 is past what the overridden rope scaling reaches (llama.context_length 64 x factor 4 "
     "(--rope-scale) = 256 tokens; llama.context_length = 64): use a context of at most 256 (-c 256)"},
    {"override yarn x4 from 16", F_PLAIN, {.type = "yarn", .freq_scale = 0.25f, .orig = 16}, CTX_LEN, NULL},
    {"override yarn x4 from 16", F_PLAIN, {.type = "yarn", .freq_scale = 0.25f, .orig = 16}, CTX_LEN + 1,
     "(--yarn-orig-ctx 16 x factor 4 (--rope-scale) = 64 tokens"},
    {"override scale alone (linear)", F_PLAIN, {.freq_scale = 0.25f}, 4 * CTX_LEN, NULL},
    {"override type none with a scale", F_PLAIN, {.type = "none", .freq_scale = 0.25f}, CTX_LEN + 1,
     "declares no rope scaling that extends it"},
    {"override type yarn alone", F_PLAIN, {.type = "yarn"}, CTX_LEN + 1, "declares no rope scaling"},
    {"override base alone", F_PLAIN, {.freq_base = 5e5f}, CTX_LEN, NULL},
    {"override base alone", F_PLAIN, {.freq_base = 5e5f}, CTX_LEN + 1, "declares no rope scaling"},
    {"override original length", F_LINEAR_NO_ORIG, {.orig = 64}, 4 * CTX_LEN, NULL},
    {"override none over yarn", F_YARN, {.type = "none"}, CTX_LEN + 1, "declares no rope scaling"},
    {"override linear x4 with a window", F_SWA, {.type = "linear", .freq_scale = 0.25f}, 4 * CTX_LEN, NULL, VT_OK,
     100},
    {"override yarn x4 with a window", F_SWA, YARN_X4, 4 * CTX_LEN, NULL, VT_OK, 100},
    {"override mix 0 (yarn as linear)", F_PLAIN, {.type = "yarn", .freq_scale = 0.25f, .has_ext = true, .ext = 0},
     4 * CTX_LEN, NULL, VT_OK, 100},
    /* bad overrides */
    {"bad type", F_PLAIN, {.type = "bogus"}, 0, "scaling_type 7 is not none, linear or yarn (--rope-scaling)",
     VT_E_INVALID},
    {"bad scale", F_PLAIN, {.freq_scale = -1}, 0, "freq_scale = -1 is not a positive number (--rope-freq-scale",
     VT_E_INVALID},
    {"NaN scale", F_PLAIN, {.freq_scale = NAN}, 0, "freq_scale = nan", VT_E_INVALID},
    {"infinite base", F_PLAIN, {.freq_base = INFINITY}, 0, "freq_base = inf is not a positive number",
     VT_E_INVALID},
    {"negative original length", F_PLAIN, {.type = "yarn", .orig = -5}, 0, "yarn_orig_ctx -5 is outside",
     VT_E_INVALID},
    {"NaN mix", F_PLAIN, {.type = "yarn", .has_ext = true, .ext = NAN}, 0,
     "yarn_ext_factor = nan is not a finite non-negative number", VT_E_INVALID},
    {"magnitude 0", F_PLAIN, {.has_attn = true, .attn = 0}, 0, "yarn_attn_factor = 0 is not a positive number",
     VT_E_INVALID},
    {"beta_fast below beta_slow", F_PLAIN, {.type = "yarn", .freq_scale = 0.25f, .beta_fast = 0.5f}, 0,
     "yarn_beta_fast 0.5 is not above yarn_beta_slow 1", VT_E_INVALID},
};

static vt_rope_params rope_of(const rope_spec *r, bool *any) {
    vt_rope_params p = vt_rope_default_params();
    *any = r->type || r->freq_scale != 0 || r->freq_base != 0 || r->beta_fast != 0 || r->orig || r->has_ext ||
           r->has_attn;
    if (r->type)
        p.scaling_type = !strcmp(r->type, "none")     ? VT_ROPE_SCALING_NONE
                         : !strcmp(r->type, "linear") ? VT_ROPE_SCALING_LINEAR
                         : !strcmp(r->type, "yarn")   ? VT_ROPE_SCALING_YARN
                                                      : (vt_rope_scaling)7;
    p.freq_scale = r->freq_scale;
    p.freq_base = r->freq_base;
    if (r->has_attn) p.yarn_attn_factor = r->attn;
    if (r->beta_fast != 0) p.yarn_beta_fast = r->beta_fast;
    p.yarn_orig_ctx = r->orig;
    if (r->has_ext) p.yarn_ext_factor = r->ext;
    return p;
}

static void run_case(const nctx_case *c, char paths[F_COUNT][512]) {
    char label[160];
    snprintf(label, sizeof label, "%s (%s, n_ctx %d)", c->label, file_names[c->file], c->n_ctx);
    bool any;
    const vt_rope_params rp = rope_of(&c->rope, &any);
    vt_model_params mp = vt_model_default_params();
    mp.rope = any ? &rp : NULL;
    vt_model *m = NULL;
    const vt_status s = vt_model_load(paths[c->file], &mp, &m);
    if (c->load != VT_OK) {
        CHECK_MSG(s == c->load && !m, "%s: load status %d, wanted %d", label, (int)s, (int)c->load);
        CHECK_MSG(!c->want || strstr(vt_last_error(), c->want), "%s: '%s' not in '%s'", label, c->want,
                  vt_last_error());
        vt_model_free(m);
        return;
    }
    CHECK_MSG(s == VT_OK, "%s: %s", label, vt_last_error());
    if (s != VT_OK) return;
    CHECK_EQ_INT(vt_model_n_ctx_train(m), CTX_LEN);
    check_n_ctx(m, label, c->n_ctx, c->want);
    if (!c->want) /* the largest context allowed is at least this one */
        CHECK_MSG(vt_model_n_ctx_max(m) >= c->n_ctx, "%s: vt_model_n_ctx_max %d", label, vt_model_n_ctx_max(m));
    if (c->decode > 0) check_decode(m, label, c->n_ctx, c->decode);
    vt_model_free(m);
}

/* vt_model_n_ctx_default of the file at path under the override r. */
static void check_default(const char *path, const char *label, rope_spec r, int32_t want) {
    bool any;
    const vt_rope_params rp = rope_of(&r, &any);
    vt_model_params mp = vt_model_default_params();
    mp.rope = any ? &rp : NULL;
    vt_model *m = NULL;
    CHECK_MSG(vt_model_load(path, &mp, &m) == VT_OK, "%s: %s", label, vt_last_error());
    if (!m) return;
    CHECK_MSG(vt_model_n_ctx_default(m) == want, "%s: vt_model_n_ctx_default %d, want %d", label,
              vt_model_n_ctx_default(m), want);
    vt_model_free(m);
}

int main(void) {
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    char paths[F_COUNT][512];
    for (int f = 0; f < F_COUNT; f++) snprintf(paths[f], sizeof paths[f], "%s/%s.gguf", g_dir, file_names[f]);
    const bool ok = write_synth(paths[F_PLAIN], 0, 0, 0) && write_synth(paths[F_YARN], 4.0f, 0, 0) &&
                    write_synth(paths[F_YARN16], 4.0f, 16, 0) && write_synth(paths[F_SWA], 0, 0, 8) &&
                    rewrite(paths[F_YARN], paths[F_LINEAR], "linear", true) &&
                    rewrite(paths[F_YARN], paths[F_LINEAR_NO_ORIG], "linear", false) &&
                    rewrite(paths[F_YARN], paths[F_NONE], "none", true);
    for (size_t i = 0; ok && i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], paths);
    if (ok) {
        check_default(paths[F_PLAIN], "default: no override", (rope_spec){0}, CTX_LEN);
        check_default(paths[F_PLAIN], "default: yarn x4", (rope_spec)YARN_X4, 4 * CTX_LEN);
        check_default(paths[F_PLAIN], "default: yarn x4 from 16",
                      (rope_spec){.type = "yarn", .freq_scale = 0.25f, .orig = 16}, CTX_LEN);
        check_default(paths[F_PLAIN], "default: type alone", (rope_spec){.type = "yarn"}, CTX_LEN);
        check_default(paths[F_PLAIN], "default: base alone", (rope_spec){.freq_base = 5e5f}, CTX_LEN);
        check_default(paths[F_YARN], "default: the file's yarn", (rope_spec){0}, CTX_LEN);
        check_default(paths[F_LINEAR_NO_ORIG], "default: original length given", (rope_spec){.orig = 64},
                      4 * CTX_LEN);
    }
    for (int f = 0; f < F_COUNT; f++) unlink(paths[f]);
    rmdir(g_dir);
    return test_finish();
}
