/* CPU feature detection (see cpu_features.h). */
#include "cpu/cpu_features.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#endif

static cpu_features detected;  /* hardware, no cap */
static cpu_features effective; /* after VT_ISA */
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static bool request_amx_permission(void) {
#if defined(__linux__) && defined(__x86_64__)
    const long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
#else
    return false;
#endif
}

static void detect_x86(cpu_features *f) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
    const bool fma = c & (1u << 12), f16c = c & (1u << 29);
    if (!osxsave || !avx) return;
    const uint64_t xcr0 = read_xcr0();
    const bool ymm_os = (xcr0 & 0x6) == 0x6;    /* SSE + AVX state */
    const bool zmm_os = (xcr0 & 0xe6) == 0xe6;  /* + opmask, ZMM_Hi256, Hi16_ZMM */
    if (!ymm_os) return;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = b & (1u << 5);
    f->fma = fma;
    f->f16c = f16c;
    if (zmm_os) {
        f->avx512f = b & (1u << 16);
        f->avx512bw = b & (1u << 30);
        f->avx512vl = b & (1u << 31);
        f->avx512vnni = c & (1u << 11);
    }
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f->avx_vnni = a1 & (1u << 4);
    if (zmm_os) f->avx512bf16 = a1 & (1u << 5);
    (void)d1;
    (void)b1;
    (void)c1;

    /* AMX: tile and int8 (cpuid 7.0 edx 24, 25), XTILECFG + XTILEDATA in XCR0
     * (bits 17, 18), and Linux's per-process permission for the 8 KiB tile state
     * (without it the first tile instruction faults). */
    const bool amx_hw = (d & (1u << 24)) && (d & (1u << 25)) && (xcr0 & 0x60000) == 0x60000;
    f->amx_int8 = amx_hw && zmm_os && request_amx_permission();

    f->isa = CPU_ISA_REF;
    if (f->avx2 && f->fma && f->f16c) f->isa = CPU_ISA_AVX2;
    if (f->isa == CPU_ISA_AVX2 && f->avx512f && f->avx512bw && f->avx512vl) f->isa = CPU_ISA_AVX512;
}
#endif

#if defined(__aarch64__)
/* Bits of AT_HWCAP / AT_HWCAP2 (linux/arch/arm64/include/uapi/asm/hwcap.h). */
#define HWCAP_FPHP_ (1ul << 9)
#define HWCAP_ASIMDHP_ (1ul << 10)
#define HWCAP_ASIMD_ (1ul << 1)
#define HWCAP_ASIMDDP_ (1ul << 20)
#define HWCAP_SVE_ (1ul << 22)
#define HWCAP2_I8MM_ (1ul << 13)

static void detect_arm(cpu_features *f) {
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f->asimd = hw & HWCAP_ASIMD_;
    f->fphp = hw & HWCAP_FPHP_;
    f->asimdhp = hw & HWCAP_ASIMDHP_;
    f->asimddp = hw & HWCAP_ASIMDDP_;
    f->sve = hw & HWCAP_SVE_;
    f->i8mm = hw2 & HWCAP2_I8MM_;
    f->isa = CPU_ISA_REF;
    if (f->asimd) f->isa = CPU_ISA_NEON;
    if (f->asimd && f->asimddp) f->isa = CPU_ISA_NEON_DOT;
    if (f->isa == CPU_ISA_NEON_DOT && f->i8mm) f->isa = CPU_ISA_NEON_I8MM;
}
#endif

/* Clear every feature above `cap` so that kernels keyed on single features
 * (not on the tier) also respect VT_ISA. */
static bool isa_is_arm(cpu_isa isa) { return isa >= CPU_ISA_NEON; }

static void apply_cap(cpu_features *f, cpu_isa cap) {
    /* a cap for the other architecture (VT_ISA=avx2 on arm) means nothing here */
    if (cap != CPU_ISA_REF && f->isa != CPU_ISA_REF && isa_is_arm(cap) != isa_is_arm(f->isa))
        return;
    if (f->isa <= cap) return;
    f->isa = cap;
    switch (cap) {
    case CPU_ISA_REF:
        *f = (cpu_features){.isa = CPU_ISA_REF};
        break;
    case CPU_ISA_AVX2:
        f->avx512f = f->avx512bw = f->avx512vl = f->avx512vnni = f->avx512bf16 = false;
        f->amx_int8 = false;
        break;
    case CPU_ISA_NEON:
        f->asimddp = false;
        f->i8mm = false;
        f->sve = false;
        break;
    case CPU_ISA_NEON_DOT:
        f->i8mm = false;
        f->sve = false;
        break;
    default:
        break;
    }
}

static void detect_once(void) {
    memset(&detected, 0, sizeof detected);
#if defined(__x86_64__) || defined(__i386__)
    detect_x86(&detected);
#elif defined(__aarch64__)
    detect_arm(&detected);
#endif
    effective = detected;
    const char *amx = getenv("VT_AMX");
    if (amx && !strcmp(amx, "0")) effective.amx_int8 = false;
    const char *env = getenv("VT_ISA");
    if (!env || !*env) return;
    static const struct { const char *name; cpu_isa isa; } caps[] = {
        {"ref", CPU_ISA_REF},       {"scalar", CPU_ISA_REF},          {"avx2", CPU_ISA_AVX2},
        {"avx512", CPU_ISA_AVX512}, {"neon", CPU_ISA_NEON},           {"neon_dot", CPU_ISA_NEON_DOT},
        {"neon_i8mm", CPU_ISA_NEON_I8MM},
    };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        if (!strcmp(env, caps[i].name)) {
            apply_cap(&effective, caps[i].isa);
            return;
        }
    }
    fprintf(stderr, "vt: VT_ISA='%s' not recognised (ref, avx2, avx512, neon, neon_dot, "
                    "neon_i8mm); using the detected ISA\n", env);
}

const cpu_features *cpu_features_get(void) {
    pthread_once(&once, detect_once);
    return &effective;
}

cpu_isa cpu_isa_detected(void) {
    pthread_once(&once, detect_once);
    return detected.isa;
}

const char *cpu_isa_str(cpu_isa isa) {
    switch (isa) {
    case CPU_ISA_REF: return "ref";
    case CPU_ISA_AVX2: return "avx2";
    case CPU_ISA_AVX512: return "avx512";
    case CPU_ISA_NEON: return "neon";
    case CPU_ISA_NEON_DOT: return "neon_dot";
    case CPU_ISA_NEON_I8MM: return "neon_i8mm";
    }
    return "?";
}
