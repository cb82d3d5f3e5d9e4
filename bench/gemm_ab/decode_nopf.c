/* Experiment source for bench/gemm_ab/gemm_ab.sh (not built by CMake): a tier's
 * decode GEMMs without software prefetch (the _nopf kernels, which decode runs
 * where mm_probe_prefetch drops it) under the name gemm_ab.sh renames,
 * gemm_<type>_<isa>. It includes the tier's source, so with -iquote DIR, where
 * DIR/cpu/x86/ holds another commit's gemm_impl.h and ISA files, it measures
 * those (the other headers come from this tree). One of, at compile time:
 *   (nothing)  gemm_avx512.c: Q4_0, MXFP4, Q4_K, Q5_K, Q6_K, and Q8_0 for 3-4 tokens
 *   -DAB_Y     gemm8_avx512.c: the AVX-512 tier's Q8_0 for 1-2 tokens
 *   -DAB_AVX2  gemm_avx2.c (gemm_ab.sh -i avx2)
 * Example, one token, the kernels of commit REV against this tree's, MXFP4 rows
 * of 2880 (gpt-oss), 15 rounds:
 *   mkdir -p /tmp/old/cpu/x86 && for f in gemm_impl.h gemm_avx512.c gemm8_avx512.c gemm_avx2.c; do
 *     git show REV:src/cpu/x86/$f > /tmp/old/cpu/x86/$f; done
 *   bench/gemm_ab/gemm_ab.sh mxfp4 2880 15 old=bench/gemm_ab/decode_nopf.c:-iquote/tmp/old \
 *       new=bench/gemm_ab/decode_nopf.c
 *   bench/gemm_ab/gemm_ab.sh q8_0 2880 15 old=bench/gemm_ab/decode_nopf.c:"-DAB_Y -iquote/tmp/old" \
 *       new=bench/gemm_ab/decode_nopf.c:-DAB_Y
 * (bench/gemm_ab/decode_streams.c, which compared hand-written two-stream
 * kernels with the one-stream ones, was retired when gemm_impl.h took that form.) */
#define AB_ARGS                                                                                           \
    int64_t n_in, const void *w, int64_t n_groups, const void *x, size_t x_stride, const pack_xblock *xs, \
        int n_tok, float *y, int64_t ldy
#define AB_CALL n_in, w, n_groups, x, x_stride, xs, n_tok, y, ldy

#if defined(AB_Y)
#include "cpu/x86/gemm8_avx512.c"
void gemm_q8_0_avx512(AB_ARGS);
void gemm_q8_0_avx512(AB_ARGS) { gemm_q8_0_avx512_y_nopf(AB_CALL); }
#elif defined(AB_AVX2)
#define gemm_q4_0_avx2 gemm_q4_0_avx2_pf
#define gemm_q8_0_avx2 gemm_q8_0_avx2_pf
#define gemm_mxfp4_avx2 gemm_mxfp4_avx2_pf
#define gemm_q4_K_avx2 gemm_q4_K_avx2_pf
#define gemm_q5_K_avx2 gemm_q5_K_avx2_pf
#define gemm_q6_K_avx2 gemm_q6_K_avx2_pf
#include "cpu/x86/gemm_avx2.c"
#undef gemm_q4_0_avx2
#undef gemm_q8_0_avx2
#undef gemm_mxfp4_avx2
#undef gemm_q4_K_avx2
#undef gemm_q5_K_avx2
#undef gemm_q6_K_avx2
#define AB_NOPF(t)                   \
    void gemm_##t##_avx2(AB_ARGS);   \
    void gemm_##t##_avx2(AB_ARGS) { gemm_##t##_avx2_nopf(AB_CALL); }
AB_NOPF(q4_0)
AB_NOPF(q8_0)
AB_NOPF(mxfp4)
AB_NOPF(q4_K)
AB_NOPF(q5_K)
AB_NOPF(q6_K)
#else
#define gemm_q4_0_avx512 gemm_q4_0_avx512_pf
#define gemm_q8_0_avx512 gemm_q8_0_avx512_pf
#define gemm_mxfp4_avx512 gemm_mxfp4_avx512_pf
#define gemm_q4_K_avx512 gemm_q4_K_avx512_pf
#define gemm_q5_K_avx512 gemm_q5_K_avx512_pf
#define gemm_q6_K_avx512 gemm_q6_K_avx512_pf
#include "cpu/x86/gemm_avx512.c"
#undef gemm_q4_0_avx512
#undef gemm_q8_0_avx512
#undef gemm_mxfp4_avx512
#undef gemm_q4_K_avx512
#undef gemm_q5_K_avx512
#undef gemm_q6_K_avx512
#define AB_NOPF(t, nopf)               \
    void gemm_##t##_avx512(AB_ARGS);   \
    void gemm_##t##_avx512(AB_ARGS) { nopf(AB_CALL); }
AB_NOPF(q4_0, gemm_q4_0_avx512_cached) /* the tier's Q4_0 _nopf (x86_kernels.c) */
AB_NOPF(q8_0, gemm_q8_0_avx512_nopf)    /* 1-2 tokens: gemm8_avx512.c from libvt.a (-DAB_Y) */
AB_NOPF(mxfp4, gemm_mxfp4_avx512_nopf)
AB_NOPF(q4_K, gemm_q4_K_avx512_nopf)
AB_NOPF(q5_K, gemm_q5_K_avx512_nopf)
AB_NOPF(q6_K, gemm_q6_K_avx512_nopf)
#endif
