/* What this CPU can run, detected once at first use.
 *
 * x86: cpuid leaves 1 and 7 for the instruction sets, xgetbv for the register
 * state the OS saves (an AVX instruction faults if the OS does not save YMM, and
 * AVX-512 needs the opmask and ZMM state too). aarch64: getauxval(AT_HWCAP /
 * AT_HWCAP2). The result is then capped by the environment:
 *
 *   VT_ISA=ref      scalar reference kernels only
 *   VT_ISA=avx2     at most AVX2 (+FMA, F16C); never AVX-512
 *   VT_ISA=avx512   at most AVX-512 (the default on x86: the best detected)
 *   VT_AMX=0        no AMX tile kernels (which need the AVX-512 tier)
 *   VT_ISA=neon     at most plain NEON (aarch64), =neon_dot caps at dotprod
 *
 * An unknown VT_ISA value is ignored with a warning on stderr. Capping only ever
 * removes features: asking for avx512 on a CPU without it gives what the CPU has. */
#ifndef VT_CPU_CPU_FEATURES_H
#define VT_CPU_CPU_FEATURES_H

#include <stdbool.h>

/* The kernel tier the dispatch table is built for, ordered within each arch. */
typedef enum cpu_isa {
    CPU_ISA_REF = 0,   /* portable C (the quant module's _ref kernels) */
    CPU_ISA_AVX2,      /* x86: AVX2 + FMA + F16C */
    CPU_ISA_AVX512,    /* x86: AVX-512 F/BW/VL (+ VNNI where present) */
    CPU_ISA_NEON,      /* aarch64: ASIMD */
    CPU_ISA_NEON_DOT,  /* aarch64: + sdot/udot */
    CPU_ISA_NEON_I8MM, /* aarch64: + smmla */
} cpu_isa;

typedef struct cpu_features {
    /* x86 */
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16;
    bool avx_vnni;
    bool amx_int8; /* AMX tiles + INT8, with the OS permission for the tile state */
    /* aarch64 */
    bool asimd, asimddp, i8mm, fphp, asimdhp, sve;
    /* the tier after the VT_ISA cap */
    cpu_isa isa;
} cpu_features;

/* The features of this CPU after the VT_ISA cap. Thread-safe; detection runs
 * once. Never NULL. */
const cpu_features *cpu_features_get(void);

/* The best tier the hardware supports, ignoring VT_ISA. */
cpu_isa cpu_isa_detected(void);

/* Name of a tier: "ref", "avx2", "avx512", "neon", "neon_dot", "neon_i8mm". */
const char *cpu_isa_str(cpu_isa isa);

#endif
