/* The CPU kernel dispatch table: one typed kernel per weight type and per
 * activation type, chosen once for this CPU.
 *
 *   const cpu_kernels *k = cpu_kernels_get();          // once per call, not per row
 *   quant_dot_fn dot = k->dot[w->type];                 // row of W . row of xq
 *   quant_quant_fn q = k->quantize_act[quant_traits_get(w->type)->dot_type];
 *
 * The table is built at first use from cpu_features_get() (so VT_ISA=ref gives
 * the quant module's scalar _ref kernels everywhere, VT_ISA=avx2 never picks an
 * AVX-512 kernel), out of one row per (type, tier) (cpu_type_row below) by one
 * rule (kernels.c apply_rows). Each entry is the best kernel this CPU has for that type;
 * types without a SIMD kernel keep the _ref one, so every entry the quant
 * module can compute is non-NULL.
 *
 * Contracts shared by every tier:
 *  - dot[t](n, w, x): n a multiple of t's block size; w a row of type t, x a row
 *    of t's dot_type (quant_traits). Integer-domain kernels do the same integer
 *    math as the _ref twin and differ only in float summation order (~1e-6
 *    relative); the float types (F32/F16/BF16) accumulate in float, the _ref in
 *    double (tests/test_kernels.c states the bounds).
 *  - dot_rows[t](n, w, w_stride, x, s, nr): s[r] = dot[t](n, w + r * w_stride, x)
 *    for r < nr <= CPU_DOT_ROWS_MAX, each result bit-identical to the single-row
 *    kernel, so callers may mix the two freely (matmul relies on this for results
 *    that do not depend on the thread count). Never NULL where dot[t] is not:
 *    types without a multi-row kernel get a loop over dot[t].
 *  - quantize_act[d](x, y, n): quantize n floats (a multiple of d's block size)
 *    to type d; bit-identical with the quant module's quant_row_*_ref.
 *  - gemm[t]: the packed-layout GEMM of cpu/pack.h for weight type t, bit-identical
 *    with its pack_gemm_ref twin; NULL where this tier has none (then matmul keeps
 *    the file layout and dot_rows). The ref tier has none.
 *  - gemm_cached[t]: as gemm[t] (same bits), for prefill's token blocks, whose
 *    tiles find the weights in cache: no software prefetch. NULL: gemm[t] serves.
 *  - gemm_nopf[t]: as gemm[t] (same bits) without software prefetch, for decode
 *    on a machine whose hardware prefetcher streams the weights faster alone
 *    (mm_weight_prefetch in cpu/matmul.h). NULL: gemm[t] serves.
 *  - gemm_wide[t]: as gemm[t] for up to PACK_TOK_WIDE tokens per call and
 *    n_in <= PACK_WIDE_N_IN_MAX, also bit-identical with the ref twin; where the CPU has a tile unit (AMX) that
 *    prefill's token tiles use. NULL elsewhere.
 *
 * An ISA backend (x86/, arm/) provides kernels named <op>_<type>_<isa> and lists
 * them in its rows (cpu_type_row below), which kernels.c applies; kernels.c and
 * the row files are compiled without ISA flags, so building the table never
 * executes an instruction the CPU lacks. */
#ifndef VT_CPU_KERNELS_H
#define VT_CPU_KERNELS_H

#include "base/fp16.h"
#include "cpu/cpu_features.h"
#include "cpu/deltanet.h"
#include "cpu/pack.h"
#include "quant/quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CPU_DOT_ROWS_MAX 4

typedef void (*cpu_dot_rows_fn)(int64_t n, const void *w, size_t w_stride, const void *x,
                                float *s, int nr);

/* A tier's pair of dot kernels for type t, dot_<t>_<isa> and dot_rows_<t>_<isa>,
 * declared (the backends' kernel lists) and defined (in an ISA file) alike on
 * every ISA; isa may be a macro (the arm files' ARM_SFX). CPU_DEFINE_DOT makes
 * both out of one always-inline routine t##_rows(n, w, ws, x, s, nr) over nr
 * weight rows that share the activation loads: dot is its one-row instance,
 * dot_rows switches to one instance per nr (a constant inside, so the row loops
 * unroll and the accumulators stay in registers). One routine serves both, so
 * they agree bit for bit, as the contract above asks. */
#define CPU_DECLARE_DOT(t, isa) CPU_DECLARE_DOT_(t, isa)
#define CPU_DECLARE_DOT_(t, isa)                                                           \
    float dot_##t##_##isa(int64_t n, const void *w, const void *x);                        \
    void dot_rows_##t##_##isa(int64_t n, const void *w, size_t w_stride, const void *x,    \
                              float *s, int nr);
#define CPU_DEFINE_DOT(t, isa) CPU_DEFINE_DOT_(t, isa)
#define CPU_DEFINE_DOT_(t, isa)                                                            \
    float dot_##t##_##isa(int64_t n, const void *w, const void *x) {                       \
        float s;                                                                           \
        t##_rows(n, w, 0, x, &s, 1);                                                       \
        return s;                                                                          \
    }                                                                                      \
    void dot_rows_##t##_##isa(int64_t n, const void *w, size_t ws, const void *x,          \
                              float *s, int nr) {                                          \
        switch (nr) {                                                                      \
        case 4: t##_rows(n, w, ws, x, s, 4); break;                                        \
        case 3: t##_rows(n, w, ws, x, s, 3); break;                                        \
        case 2: t##_rows(n, w, ws, x, s, 2); break;                                        \
        default: t##_rows(n, w, ws, x, s, 1); break;                                       \
        }                                                                                  \
    }
_Static_assert(CPU_DOT_ROWS_MAX == 4, "CPU_DEFINE_DOT has one instance per nr = 1..4");

/* A tier's packed GEMM of type t, gemm_<t>_<isa>: a pack_gemm_fn (cpu/pack.h). */
#define CPU_DECLARE_GEMM(t, isa)                                                           \
    void gemm_##t##_##isa(int64_t n_in, const void *w, int64_t n_groups, const void *x,    \
                          size_t x_stride, const pack_xblock *xs, int n_tok, float *y,     \
                          int64_t ldy);

typedef struct cpu_kernels {
    cpu_isa isa;                              /* the tier the table was built for */
    const char *isa_name;                     /* cpu_isa_str(isa) */
    quant_dot_fn dot[VT_DTYPE_COUNT];         /* by weight type; NULL: not computable */
    cpu_dot_rows_fn dot_rows[VT_DTYPE_COUNT]; /* by weight type; NULL iff dot is */
    quant_quant_fn quantize_act[VT_DTYPE_COUNT]; /* by activation (dot) type */
    cpu_isa dot_isa[VT_DTYPE_COUNT];          /* tier each dot entry came from */
    cpu_isa quantize_isa[VT_DTYPE_COUNT];     /* tier each quantize entry came from */
    pack_gemm_fn gemm[VT_DTYPE_COUNT];        /* packed GEMM by weight type, or NULL */
    pack_gemm_fn gemm_cached[VT_DTYPE_COUNT]; /* the same for prefill blocks, or NULL */
    pack_gemm_fn gemm_nopf[VT_DTYPE_COUNT];   /* the same, no software prefetch, or NULL */
    pack_gemm_fn gemm_wide[VT_DTYPE_COUNT];   /* the same for n_tok <= PACK_TOK_WIDE, or NULL */
    cpu_isa gemm_isa[VT_DTYPE_COUNT];         /* tier each gemm entry came from */
    /* g[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i]; SIMD tiers use a
     * polynomial exp (about 1 ulp), so they differ from the ref in the last bits. */
    void (*silu_mul)(float *g, const float *u, int64_t n);
    /* g[i] = gelu(g[i]) * u[i], GELU's tanh form (0.5 x (1 + tanh(sqrt(2/pi) (x +
     * 0.044715 x^3)))) through ggml's f16 table (cpu_gelu_table), as llama.cpp's
     * CPU backend; a table lookup, the same bits on every tier (SIMD tiers convert
     * and clamp in vectors, cpu/attention_impl.h). */
    void (*gelu_mul)(float *g, const float *u, int64_t n);
    /* s[i] = cap * tanh(s[i] / cap), cap > 0: soft-capped logits (gemma2). SIMD
     * tiers: Cephes' tanhf in vectors (cpu/attention_impl.h), within a few ulp
     * of the ref's tanhf. */
    void (*softcap)(float *s, int64_t n, float cap);
    /* out[i] = (x[i] * s) * w[i], s = 1 / sqrtf(mean(x^2) + eps), the mean as
     * ggml takes it: float squares summed in double. The ref sums them in order;
     * SIMD tiers in a fixed number of double lanes, so s can differ by an ulp
     * (about once in 10^5 rows of 2048; never in the test models' outputs), and
     * out then by the same. */
    void (*rms_norm)(const float *x, const float *w, int64_t n, float eps, float *out);
    /* The Gated DeltaNet kernels (cpu/deltanet.h: contracts and bounds). */
    dn_kernels dn;
} cpu_kernels;

/* The rows the table is built from, as ggml's type_traits_cpu[]: one
 * designated-initializer row per (type, ISA tier) that has kernels of its own,
 * in x86/x86_kernels.c and arm/arm_kernels.c, tiers ascending. A row fills
 * what its tier adds for the type; kernels.c (apply_rows) states the one rule
 * that picks among them: the highest tier this CPU runs wins, group of fields
 * by group ({dot, dot_rows}, {quantize_act}, {gemm, gemm_cached, gemm_nopf},
 * {gemm_wide}); the ref entries (the quant module's _ref kernels) stay where no
 * row fills a group. */
typedef struct cpu_type_row {
    vt_dtype type;
    cpu_isa isa; /* the tier that runs the row's kernels */
    bool amx;    /* only where the CPU has AMX-INT8 (cpu_features.amx_int8) */
    quant_dot_fn dot;             /* file-layout dot, with its multi-row form */
    cpu_dot_rows_fn dot_rows;
    quant_quant_fn quantize_act;  /* where `type` is an activation (dot) type */
    pack_gemm_fn gemm, gemm_cached, gemm_nopf; /* packed GEMMs: one set per tier */
    pack_gemm_fn gemm_wide;
} cpu_type_row;

/* The type-independent kernels of a tier; as for the type rows, the highest tier this CPU
 * runs wins, group by group ({silu_mul, rms_norm}, {dn}), and a row fills only its groups. */
typedef struct cpu_tier_row {
    cpu_isa isa;
    void (*silu_mul)(float *g, const float *u, int64_t n);
    void (*rms_norm)(const float *x, const float *w, int64_t n, float eps, float *out);
    void (*gelu_mul)(float *g, const float *u, int64_t n);
    void (*softcap)(float *s, int64_t n, float cap);
    const dn_kernels *dn;
} cpu_tier_row;

/* gelu(x) of every f16 x, rounded to f16 (ggml's table; kernels.c fills it once
 * before any cpu_kernels table is returned): the SIMD gelu_mul look up in it. */
extern vt_f16 cpu_gelu_table[1 << 16];

/* The table for this CPU (after VT_ISA). Built once, thread-safe, never NULL. */
const cpu_kernels *cpu_kernels_get(void);

/* Name of the selected tier for logs: "avx2", "ref", ... */
const char *cpu_isa_name(void);

/* Fill *out with the table for tier `isa`, capped at what this CPU supports
 * (cpu_isa_detected(), ignoring VT_ISA). For tests and benchmarks that compare
 * tiers; the engine uses cpu_kernels_get(). */
void cpu_kernels_build(cpu_isa isa, cpu_kernels *out);

#endif
