/* llama.cpp's rope flags, one parse for every command that loads a model (vt
 * run, chat, serve, bench): --rope-scaling {none,linear,yarn}, --rope-scale N,
 * --rope-freq-scale N, --rope-freq-base N, --yarn-orig-ctx N, --yarn-ext-factor N,
 * --yarn-attn-factor N, --yarn-beta-fast N, --yarn-beta-slow N. Their values fill
 * a vt_rope_params (vt.h), which vt_model_load applies over the file's rope.
 *
 * A command appends the rows to its own option table in one line
 * (ROPE_OPTS_TABLE), so the shared parser and --help see them like its other
 * rows, then calls rope_opts_finish after parsing. Values are checked as they are parsed (a
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
    const vt_rope_params *params; /* after rope_opts_finish: &p when any rope flag was
                                     given, else NULL (the file's rope) */
} rope_opts;

/* r reset to "no flag given"; out[0..n) = table[0..n), then the ROPE_OPTS_N rope
 * rows storing into r; returns n + ROPE_OPTS_N. out must hold that many rows. */
int rope_opts_table(const opt *table, int n, rope_opts *r, opt *out);

/* Declares `opt all[]`, the rows of the array `table` then the rope rows storing
 * into the rope_opts at r, and `const int all_n`, their count: one line in each
 * command's parser (its opts_cmd takes .opts = all, .n_opts = all_n). */
#define ROPE_OPTS_TABLE(all, table, r)                                \
    opt all[sizeof(table) / sizeof((table)[0]) + ROPE_OPTS_N];        \
    const int all##_n = rope_opts_table(table, (int)(sizeof(table) / sizeof((table)[0])), r, all)

/* After opts_parse: the scale into r->p and r->params set (false after a message
 * on stderr naming the command, when --rope-scale and --rope-freq-scale were
 * both given). */
bool rope_opts_finish(const char *cmd, rope_opts *r);

#endif
