/* quantize_llama: quantize a GGUF with the reference llama.cpp's own
 * llama_model_quantize (the code llama-quantize runs), from the prebuilt
 * libraries of .cache/llama, so that benchmark files are the ones users have
 * without building llama-quantize (about 6 minutes on 2 cores).
 *
 *   quantize_llama IN.gguf OUT.gguf TYPE [THREADS]
 *
 * TYPE is one of llama-quantize's names listed below. */
#include "../tests/llama/llama_ref.h"

#include <llama.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    enum llama_ftype ftype;
} types[] = {
    {"F16", LLAMA_FTYPE_MOSTLY_F16},       {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},     {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
    {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
    {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
};

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: %s IN.gguf OUT.gguf TYPE [THREADS]\n", argv[0]);
        return 2;
    }
    const char *type = argv[3];
    int ti = -1;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcasecmp(type, types[i].name)) ti = (int)i;
    if (ti < 0) {
        fprintf(stderr, "%s: unknown type '%s' (one of:", argv[0], type);
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) fprintf(stderr, " %s", types[i].name);
        fprintf(stderr, ")\n");
        return 2;
    }
    if (!llama_ref_init()) return 1;
    llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = types[ti].ftype;
    p.nthread = argc == 5 ? atoi(argv[4]) : 0;
    if (llama_model_quantize(argv[1], argv[2], &p) != 0) {
        fprintf(stderr, "%s: llama_model_quantize %s -> %s (%s) failed\n", argv[0], argv[1], argv[2], type);
        return 1;
    }
    return 0;
}
