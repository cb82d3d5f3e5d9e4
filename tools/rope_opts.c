/* llama.cpp's rope flags for run, chat, serve and bench (rope_opts.h). */
#include "rope_opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void rope_opts_init(rope_opts *r) {
    memset(r, 0, sizeof *r);
    r->p = vt_rope_default_params();
}

static bool parse_type(const char *spelling, const char *v, void *dst) {
    static const struct {
        const char *name;
        vt_rope_scaling t;
    } types[] = {{"none", VT_ROPE_SCALING_NONE}, {"linear", VT_ROPE_SCALING_LINEAR}, {"yarn", VT_ROPE_SCALING_YARN}};
    for (size_t i = 0; v && i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(v, types[i].name)) {
            *(vt_rope_scaling *)dst = types[i].t;
            return true;
        }
    fprintf(stderr, "vt: %s: unknown rope scaling type '%s' (none, linear, yarn)\n", spelling, v ? v : "");
    return false;
}

/* A finite number, > 0 (or >= 0 where dst is the extrapolation mix: 0 is full
 * interpolation), below 1e30, into the float or double at dst. */
static bool parse_number(const char *spelling, const char *v, double *out, bool zero_ok) {
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x >= 1e30 || !(x > 0 || (zero_ok && x == 0))) {
        fprintf(stderr, "vt: %s: '%s' is not a %s number\n", spelling, v, zero_ok ? "finite non-negative" : "positive");
        return false;
    }
    *out = x;
    return true;
}

static bool parse_positive_f(const char *spelling, const char *v, void *dst) {
    double x;
    if (!parse_number(spelling, v, &x, false)) return false;
    if ((float)x == 0.0f) { /* below a float's range: it would read as "the model's" */
        fprintf(stderr, "vt: %s: '%s' is too small\n", spelling, v);
        return false;
    }
    *(float *)dst = (float)x;
    return true;
}

static bool parse_positive_d(const char *spelling, const char *v, void *dst) {
    return parse_number(spelling, v, dst, false);
}

static bool parse_mix(const char *spelling, const char *v, void *dst) {
    double x;
    if (!parse_number(spelling, v, &x, true)) return false;
    *(float *)dst = (float)x;
    return true;
}

int rope_opts_table(const opt *table, int n, rope_opts *r, opt *out) {
    rope_opts_init(r);
    for (int i = 0; i < n; i++) out[i] = table[i];
    const opt rows[ROPE_OPTS_N] = {
        {.name = {"--rope-scaling"}, .kind = OPT_FN, .fn = parse_type, .dst = &r->p.scaling_type,
         .arg = "{none,linear,yarn}",
         .help = "rope scaling, as llama.cpp's (default: the model's; linear where\n"
                 "it declares none); needed past the training context"},
        {.name = {"--rope-scale"}, .kind = OPT_FN, .fn = parse_positive_d, .dst = &r->scale, .arg = "N",
         .help = "rope context scaling factor: the context reaches N x the\n"
                 "original one (--yarn-orig-ctx)"},
        {.name = {"--rope-freq-scale"}, .kind = OPT_FN, .fn = parse_positive_d, .dst = &r->freq_scale, .arg = "N",
         .help = "rope frequency scaling factor, 1 / --rope-scale"},
        {.name = {"--rope-freq-base"}, .kind = OPT_FN, .fn = parse_positive_f, .dst = &r->p.freq_base, .arg = "N",
         .help = "rope base frequency (default: the model's)"},
        {.name = {"--yarn-orig-ctx"}, .kind = OPT_INT, .dst = &r->orig_ctx, .arg = "N", .lo = 1, .hi = 1 << 24,
         .help = "YaRN: the original context (default: the model's\n"
                 "rope.scaling.original_context_length, else its context_length)"},
        {.name = {"--yarn-ext-factor"}, .kind = OPT_FN, .fn = parse_mix, .dst = &r->p.yarn_ext_factor, .arg = "N",
         .help = "YaRN: extrapolation mix factor (default 1 under YaRN, else 0;\n0: full interpolation)"},
        {.name = {"--yarn-attn-factor"}, .kind = OPT_FN, .fn = parse_positive_f, .dst = &r->p.yarn_attn_factor,
         .arg = "N",
         .help = "YaRN: rope magnitude (default 1; used where the mix is 0,\n"
                 "else computed from the scale, as llama.cpp does)"},
        {.name = {"--yarn-beta-fast"}, .kind = OPT_FN, .fn = parse_positive_f, .dst = &r->p.yarn_beta_fast,
         .arg = "N", .help = "YaRN: low correction dimension (default: the model's or 32)"},
        {.name = {"--yarn-beta-slow"}, .kind = OPT_FN, .fn = parse_positive_f, .dst = &r->p.yarn_beta_slow,
         .arg = "N", .help = "YaRN: high correction dimension (default: the model's or 1)"},
    };
    for (int i = 0; i < ROPE_OPTS_N; i++) out[n + i] = rows[i];
    return n + ROPE_OPTS_N;
}

bool rope_opts_finish(const char *cmd, rope_opts *r) {
    if (r->scale > 0 && r->freq_scale > 0) {
        fprintf(stderr, "vt %s: --rope-scale and --rope-freq-scale both set the rope scale (one is the other's "
                        "inverse): give one\n", cmd);
        return false;
    }
    if (r->scale > 0 || r->freq_scale > 0) {
        const double fs = r->scale > 0 ? 1.0 / r->scale : r->freq_scale;
        if (!(fs >= 1e-30 && fs <= 1e30)) { /* as a float, never 0 or infinite */
            fprintf(stderr, "vt %s: the rope frequency scale %g is out of range [1e-30, 1e30]\n", cmd, fs);
            return false;
        }
        /* llama.cpp's float steps: 1.0f / stof(value) */
        r->p.freq_scale = r->scale > 0 ? 1.0f / (float)r->scale : (float)r->freq_scale;
    }
    r->p.yarn_orig_ctx = (int32_t)r->orig_ctx;
    const vt_rope_params d = vt_rope_default_params();
    const bool any = r->p.scaling_type != d.scaling_type || r->p.freq_base != d.freq_base ||
                     r->p.freq_scale != d.freq_scale || r->p.yarn_orig_ctx != d.yarn_orig_ctx ||
                     r->p.yarn_ext_factor != d.yarn_ext_factor || r->p.yarn_attn_factor != d.yarn_attn_factor ||
                     r->p.yarn_beta_fast != d.yarn_beta_fast || r->p.yarn_beta_slow != d.yarn_beta_slow;
    r->params = any ? &r->p : NULL;
    return true;
}
