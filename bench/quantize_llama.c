/* quantize_llama: quantize a GGUF with the reference llama.cpp's own
 * llama_model_quantize (the code llama-quantize runs), from the prebuilt
 * libraries of .cache/llama, so that benchmark files are the ones users have
 * without building llama-quantize (about 6 minutes on 2 cores).
 *
 *   quantize_llama IN.gguf OUT.gguf TYPE [THREADS]
 *
 * TYPE is one of llama-quantize's names (Q4_K_M, Q8_0, ...). */
#include "../tests/llama/llama_ref.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: %s IN.gguf OUT.gguf TYPE [THREADS]\n", argv[0]);
        return 2;
    }
    enum llama_ftype ftype;
    if (!llama_ref_ftype(argv[3], &ftype)) {
        fprintf(stderr, "%s: unknown type '%s' (one of: ", argv[0], argv[3]);
        llama_ref_print_ftypes(stderr);
        fprintf(stderr, ")\n");
        return 2;
    }
    if (!llama_ref_init()) return 1;
    llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = ftype;
    p.nthread = argc == 5 ? atoi(argv[4]) : 0;
    if (llama_model_quantize(argv[1], argv[2], &p) != 0) {
        fprintf(stderr, "%s: llama_model_quantize %s -> %s (%s) failed\n", argv[0], argv[1], argv[2], argv[3]);
        return 1;
    }
    return 0;
}
