/* bench/amx_emu/run.sh: the AMX GEMMs against their _ref twins through emu_amx.h. */
#include "cpu/pack.h"
#include "quant/quant.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define DECL(f) void f(int64_t n_in, const void *w, int64_t n_groups, const void *x, size_t x_stride, \
                       const pack_xblock *xs, int n_tok, float *y, int64_t ldy);
DECL(emu_gemm_q4_0_amx) DECL(emu_gemm_q8_0_amx) DECL(emu_gemm_q4_K_amx) DECL(emu_gemm_q5_K_amx) DECL(emu_gemm_q6_K_amx)
DECL(emu_gemm_mxfp4_amx)
static uint64_t s = 88172645463325252ull;
static float rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return ((s >> 40) & 0xffffff) / 16777216.0f * 2 - 1; }
int main(void) {
    struct { vt_dtype t; pack_gemm_fn f; const char *name; } ks[] = {
        {VT_DTYPE_Q4_0, emu_gemm_q4_0_amx, "q4_0"}, {VT_DTYPE_Q8_0, emu_gemm_q8_0_amx, "q8_0"},
        {VT_DTYPE_Q4_K, emu_gemm_q4_K_amx, "q4_K"}, {VT_DTYPE_Q5_K, emu_gemm_q5_K_amx, "q5_K"},
        {VT_DTYPE_Q6_K, emu_gemm_q6_K_amx, "q6_K"}, {VT_DTYPE_MXFP4, emu_gemm_mxfp4_amx, "mxfp4"}};
    int fails = 0;
    for (int ki = 0; ki < (int)(sizeof ks / sizeof ks[0]); ki++) {
        const vt_dtype t = ks[ki].t;
        const quant_traits *tr = quant_traits_get(t), *dt = quant_traits_get(tr->dot_type);
        const pack_gemm_fn ref = pack_gemm_ref(t);
        int cases = 0, bad = 0;
        static const int nbs[] = {1, 2, 3, 7, 16};
        static const int64_t n_outs[] = {5, 16, 37};
        for (int bi = 0; bi < 5; bi++) for (int oi = 0; oi < 3; oi++) {
            const int64_t n = nbs[bi] * tr->block_elems, n_out = n_outs[oi], ng = (n_out + 15) / 16;
            size_t wrow, xrow;
            quant_row_bytes(t, n, &wrow); quant_row_bytes(tr->dot_type, n, &xrow);
            const size_t xst = xrow + 8;
            uint8_t *w = malloc(wrow * n_out), *wp = calloc(ng * 16, wrow), *x = calloc(32, xst);
            float *f = malloc(n * 4);
            for (int64_t r = 0; r < n_out; r++) { for (int64_t i = 0; i < n; i++) f[i] = rnd() * (1 + r % 5); tr->quant_ref(f, w + r * wrow, n); }
            for (int64_t g = 0; g < ng; g++) pack_group(t, n, w + g * 16 * wrow, wrow, (int)(n_out - g * 16 < 16 ? n_out - g * 16 : 16), wp + g * 16 * wrow);
            for (int tk = 0; tk < 32; tk++) { for (int64_t i = 0; i < n; i++) f[i] = rnd() * 3; dt->quant_ref(f, x + tk * xst, n); }
            pack_xblock *xs = malloc(sizeof(pack_xblock) * 32 * (n / 32 + 1));
            if (pack_needs_xblocks(t)) pack_xblocks(t, x, xst, 32, n / 32, xs);
            const int64_t ldy = ng * 16 + 3;
            float *ya = malloc(4 * ldy * 32), *ye = malloc(4 * ldy * 32);
            for (int nt = 1; nt <= 32; nt++) {
                memset(ya, 0, 4 * ldy * 32); memset(ye, 0, 4 * ldy * 32);
                ks[ki].f(n, wp, ng, x, xst, xs, nt, ya, ldy);
                ref(n, wp, ng, x, xst, xs, nt, ye, ldy);
                cases++;
                if (memcmp(ya, ye, 4 * ldy * 32)) { if (bad < 3) printf("  %s n=%lld n_out=%lld nt=%d differs (y0 %g vs %g)\n", ks[ki].name, (long long)n, (long long)n_out, nt, ya[0], ye[0]); bad++; }
            }
            free(w), free(wp), free(x), free(f), free(xs), free(ya), free(ye);
        }
        printf("%s: %d of %d cases bit-identical with the ref twin\n", ks[ki].name, cases - bad, cases);
        fails += bad;
    }
    return fails != 0;
}
