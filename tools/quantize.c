/* vt quantize IN OUT TYPE: convert a GGUF's weights to a llama.cpp file type. */
#include "base/outfile.h"
#include "cmds.h"
#include "opts.h"

#include "quant/quantize_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void more_help(FILE *f) {
    fprintf(f, "TYPE (as llama-quantize): F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M\n"
               "      Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS MXFP4_MOE\n\n"
               "OUT is written to a temporary file next to it and renamed into place when\n"
               "complete; an OUT that is IN (under any name or link) is refused.\n");
}

int cmd_quantize(int argc, char **argv) {
    quant_model_opts opts = {.verbose = true};
    long long n_threads = 0;
    bool quiet = false;
    const opt table[] = {
        {.name = {"-t", "--threads"}, .kind = OPT_INT, .dst = &n_threads, .arg = "N", .lo = 1, .hi = 1024,
         .help = "worker threads (default: online CPUs)"},
        {.name = {"--allow-requantize"}, .kind = OPT_FLAG, .dst = &opts.allow_requantize,
         .help = "convert tensors that are already quantized"},
        {.name = {"-q", "--quiet"}, .kind = OPT_FLAG, .dst = &quiet, .help = "no per-tensor lines"},
    };
    const opts_cmd cmd = {.name = "quantize", .usage = "vt quantize [options] IN.gguf OUT.gguf TYPE", .opts = table,
                          .n_opts = (int)(sizeof table / sizeof table[0]), .max_pos = 3, .more = more_help};
    const char *pos[3];
    int n_pos = 0;
    const int prc = opts_parse(&cmd, argc, argv, pos, &n_pos, NULL);
    if (prc >= 0) return prc;
    opts.n_threads = (int)n_threads;
    opts.verbose = !quiet;
    if (n_pos != 3) {
        fprintf(stderr, "vt quantize: IN, OUT and TYPE are required\n\n");
        opts_usage(&cmd, stderr);
        return 2;
    }
    if (!quant_ftype_parse(pos[2], &opts.ftype)) {
        fprintf(stderr, "vt quantize: unknown or unsupported type '%s'\n\n", pos[2]);
        opts_usage(&cmd, stderr);
        return 2;
    }
    outfile_cleanup_on_signals(); /* Ctrl-C while writing leaves no temporary file */
    vt_status st = quant_model_file(pos[0], pos[1], &opts);
    if (st != VT_OK) {
        fprintf(stderr, "vt quantize: %s\n", vt_last_error());
        return 1;
    }
    return 0;
}
