/* vt quantize IN OUT TYPE: convert a GGUF's weights to a llama.cpp file type. */
#include "base/outfile.h"
#include "cmds.h"

#include "quant/quantize_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quantize_usage(void) {
    fprintf(stderr,
            "usage: vt quantize [options] IN.gguf OUT.gguf TYPE\n\n"
            "TYPE (as llama-quantize): F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M\n"
            "      Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS\n\n"
            "options:\n"
            "  -t, --threads N       worker threads (default: online CPUs)\n"
            "  --allow-requantize    convert tensors that are already quantized\n"
            "  -q, --quiet           no per-tensor lines\n");
}

int cmd_quantize(int argc, char **argv) {
    quant_model_opts opts = {.verbose = true};
    const char *pos[3];
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            quantize_usage();
            return 0;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 1024) {
                fprintf(stderr, "vt quantize: bad thread count '%s'\n", argv[i]);
                return 2;
            }
            opts.n_threads = (int)v;
        } else if (!strcmp(a, "--allow-requantize")) {
            opts.allow_requantize = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            opts.verbose = false;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vt quantize: unknown option '%s'\n\n", a);
            quantize_usage();
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            quantize_usage();
            return 2;
        }
    }
    if (n_pos != 3) {
        quantize_usage();
        return 2;
    }
    if (!quant_ftype_parse(pos[2], &opts.ftype)) {
        fprintf(stderr, "vt quantize: unknown or unsupported type '%s'\n\n", pos[2]);
        quantize_usage();
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
