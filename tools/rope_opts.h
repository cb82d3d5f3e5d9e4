/* llama.cpp's rope flags, one parse for every command that loads a model (vt
 * run, chat, serve, bench): --rope-scaling {none,linear,yarn}, --rope-scale N,
 * --rope-freq-scale N, --rope-freq-base N, --yarn-orig-ctx N, --yarn-ext-factor N,
 * --yarn-attn-factor N, --yarn-beta-fast N, --yarn-beta-slow N. Their values fill
 * a vt_rope_params (vt.h), which vt_model_load applies over the file's rope.
 *
 * A command appends the rows to its own option table (rope_opts_table), so the
 * shared parser and --help see them like its other rows, then calls
 * rope_opts_finish after parsing. Values are checked as they are parsed (a
 * factor or base <= 0, NaN or infinite, an unknown type, an original context 0
 * are refused naming the flag); --rope-scale and --rope-freq-scale set the same
 * value (one is the other's inverse), so giving both is refused too. */
#ifndef VT_TOOLS_ROPE_OPTS_H
#define VT_TOOLS_ROPE_OPTS_H

#include "opts.h"
#include "vt.h"

#include <stdbool.h>

/* The rows rope_opts_table appends. */
#define ROPE_OPTS_N 9

typedef struct rope_opts {
    vt_rope_params p;  /* from vt_rope_default_params() */
    double scale;      /* --rope-scale (0: not given) */
    double freq_scale; /* --rope-freq-scale (0: not given) */
    long long orig_ctx;
} rope_opts;

void rope_opts_init(rope_opts *r);

/* out[0..n) = table[0..n), then the ROPE_OPTS_N rope rows storing into r; returns
 * n + ROPE_OPTS_N. out must hold that many rows. */
int rope_opts_table(const opt *table, int n, rope_opts *r, opt *out);

/* After opts_parse: the scale into r->p (false after a message on stderr naming
 * the command, when --rope-scale and --rope-freq-scale were both given). Returns
 * &r->p when any rope flag was given, else NULL (the file's rope) in *params. */
bool rope_opts_finish(const char *cmd, rope_opts *r, const vt_rope_params **params);

#endif
