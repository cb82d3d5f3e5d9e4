/* The Gated DeltaNet kernels (cpu/deltanet.h) written once over a handful of float-vector
 * primitives, included by one file per ISA: x86/deltanet_avx2.c, x86/deltanet_avx512.c,
 * arm/deltanet_neon.c. The including file defines, before the include:
 *
 *   DN_SFX                  the tier suffix (avx2, avx512, neon)
 *   vf, VF_W                the vector type and its float lanes
 *   vf_load(p) vf_store(p, v) vf_set1(x) vf_zero()
 *   vf_add(a, b) vf_sub(a, b) vf_mul(a, b) vf_div(a, b)
 *   vf_fma(a, b, c)         a * b + c, fused
 *   vf_hsum(v)              the sum of the lanes (a fixed order)
 *   vf_hsum4(a, b, c, d, s) s[0..3] = the sums of a, b, c, d (a fixed order; one reduction
 *                           for four rows instead of four)
 *   vf_exp_neg(v)           exp for v <= 0 (the Cephes polynomial, about 1 ulp)
 *   vf_silu(v)              v / (1 + exp(-v)), from vf_exp_neg
 *
 * Every loop over a vector dimension has a tail, so any d_k, d_v and channel count
 * works; the tails compute the same formula lane by lane (the conv's runs the vector
 * formula itself on padded lanes, so that callers may split the channels anywhere).
 *
 * Recurrent rule (dn_delta_rule_<sfx>). Rows of S are independent: row j (value j) needs
 * only itself, k_t, q_t, v_t[j], g_t and beta_t. So the kernel walks the state once per
 * tile of DN_TILE tokens, DN_ROWS rows at a time, and runs the tile's tokens on those rows
 * while they sit in L1, instead of sweeping the whole state per token; k_t and q_t loads
 * are shared by the rows of the block. The decay is folded into the passes: sk = exp(g) *
 * (S_j . k), then S_j = exp(g) S_j + u_j k (two passes over the row instead of four). The
 * per-row arithmetic is the same whatever the tile or the split of the tokens across calls
 * (which lane reduction a row gets depends on j and d_v only), so results are
 * bit-identical however a run is split.
 *
 * Chunked rule (dn_delta_rule_chunked_<sfx>): the ref's WY form (deltanet.h), with every
 * product of matrices done by one register-tiled kernel (mm_acc below: C += A B, A read as
 * broadcast scalars, B and C as rows of vectors), the state transposed once per chunk so
 * the state products are row-major too, and the decay factors exp(G_t - G_s) computed a
 * vector at a time. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef DN_SFX
#error "define DN_SFX and the vf primitives before including deltanet_impl.h"
#endif

#define DN_CAT_(a, b) a##_##b
#define DN_CAT(a, b) DN_CAT_(a, b)
#define DN_FN(name) DN_CAT(name, DN_SFX)

#define DN_ROWS 8  /* state rows per block of the recurrent kernel */
#define DN_TILE 32 /* tokens per pass over the state */

static inline float dn_silu_f(float x) { return x / (1.0f + expf(-x)); }

/* ---- conv1d + silu ------------------------------------------------------------------- */

#define DN_CONV_REG 8 /* kernels of up to this many taps keep their window in registers */

/* Channels [0, VF_W) of the pointers through all tokens, the window of the last NS
 * inputs and the NS + 1 taps in registers (NS a constant after inlining for the usual
 * kernel of 4, NS < DN_CONV_REG): per token the sum oldest first, one fma per tap, as
 * the ref; the state written back once at the end. */
static inline __attribute__((always_inline)) void DN_FN(dn_conv_lanes)(const int NS, const float *x, int64_t x_stride,
                                                                       int64_t n_tokens, const float *w, float *state,
                                                                       int64_t ld, float *out, int64_t out_stride) {
    vf wv[DN_CONV_REG], win[DN_CONV_REG];
    for (int i = 0; i <= NS; i++) wv[i] = vf_load(w + i * ld);
    for (int i = 0; i < NS; i++) win[i] = vf_load(state + i * ld);
    for (int64_t t = 0; t < n_tokens; t++) {
        const vf xc = vf_load(x + t * x_stride); /* read before out (which may be x) is written */
        vf sum = vf_zero();
        for (int i = 0; i < NS; i++) sum = vf_fma(win[i], wv[i], sum);
        sum = vf_fma(xc, wv[NS], sum);
        for (int i = 0; i + 1 < NS; i++) win[i] = win[i + 1];
        if (NS > 0) win[NS - 1] = xc;
        vf_store(out + t * out_stride, vf_silu(sum));
    }
    for (int i = 0; i < NS; i++) vf_store(state + i * ld, win[i]);
}

/* The first n < VF_W floats at p as a vector (zeros above), and back. */
static inline vf DN_FN(dn_load_part)(const float *p, int64_t n) {
    float b[VF_W] = {0};
    memcpy(b, p, sizeof(float) * (size_t)n);
    return vf_load(b);
}
static inline void DN_FN(dn_store_part)(float *p, vf v, int64_t n) {
    float b[VF_W];
    vf_store(b, v);
    memcpy(p, b, sizeof(float) * (size_t)n);
}

void DN_FN(dn_conv1d_silu)(const float *x, int64_t x_stride, int64_t n_tokens, int64_t n_ch, const float *w,
                           int64_t kernel, float *state, int64_t ld, float *out, int64_t out_stride) {
    const int64_t ns = kernel - 1;
    int64_t c = 0;
    /* a channel vector at a time, through all tokens */
    for (; c + VF_W <= n_ch; c += VF_W) {
        if (ns == 3)
            DN_FN(dn_conv_lanes)(3, x + c, x_stride, n_tokens, w + c, state + c, ld, out + c, out_stride);
        else if (ns < DN_CONV_REG)
            DN_FN(dn_conv_lanes)((int)ns, x + c, x_stride, n_tokens, w + c, state + c, ld, out + c, out_stride);
        else
            for (int64_t t = 0; t < n_tokens; t++) {
                const vf xc = vf_load(x + t * x_stride + c);
                vf sum = vf_zero();
                for (int64_t i = 0; i < ns; i++) sum = vf_fma(vf_load(state + i * ld + c), vf_load(w + i * ld + c), sum);
                sum = vf_fma(xc, vf_load(w + ns * ld + c), sum);
                for (int64_t i = 0; i + 1 < ns; i++) vf_store(state + i * ld + c, vf_load(state + (i + 1) * ld + c));
                vf_store(state + (ns - 1) * ld + c, xc);
                vf_store(out + t * out_stride + c, vf_silu(sum));
            }
    }
    /* the tail: the same vector formula on padded lanes, so that a channel's bits do
     * not depend on where it falls in the call (callers split the channels) */
    const int64_t nt = n_ch - c;
    if (nt == 0) return;
    for (int64_t t = 0; t < n_tokens; t++) {
        const vf xc = DN_FN(dn_load_part)(x + t * x_stride + c, nt);
        vf sum = vf_zero();
        for (int64_t i = 0; i < ns; i++)
            sum = vf_fma(DN_FN(dn_load_part)(state + i * ld + c, nt), DN_FN(dn_load_part)(w + i * ld + c, nt), sum);
        sum = vf_fma(xc, DN_FN(dn_load_part)(w + ns * ld + c, nt), sum);
        for (int64_t i = 0; i + 1 < ns; i++)
            memcpy(state + i * ld + c, state + (i + 1) * ld + c, sizeof(float) * (size_t)nt);
        if (ns > 0) DN_FN(dn_store_part)(state + (ns - 1) * ld + c, xc, nt);
        DN_FN(dn_store_part)(out + t * out_stride + c, vf_silu(sum), nt);
    }
}

/* ---- small ops ----------------------------------------------------------------------- */

static inline float DN_FN(dn_sumsq)(const float *x, int64_t n) {
    vf acc = vf_zero();
    int64_t i = 0;
    for (; i + VF_W <= n; i += VF_W) {
        const vf v = vf_load(x + i);
        acc = vf_fma(v, v, acc);
    }
    float s = vf_hsum(acc);
    for (; i < n; i++) s = fmaf(x[i], x[i], s);
    return s;
}

void DN_FN(dn_l2_norm)(float *x, int64_t n, float eps) {
    const float scale = 1.0f / fmaxf(sqrtf(DN_FN(dn_sumsq)(x, n)), eps);
    const vf s = vf_set1(scale);
    int64_t i = 0;
    for (; i + VF_W <= n; i += VF_W) vf_store(x + i, vf_mul(vf_load(x + i), s));
    for (; i < n; i++) x[i] *= scale;
}

void DN_FN(dn_gated_norm)(const float *x, const float *z, const float *w, int64_t n, float eps, float *out) {
    const float r = 1.0f / sqrtf(DN_FN(dn_sumsq)(x, n) / (float)n + eps);
    const vf rv = vf_set1(r);
    int64_t i = 0;
    for (; i + VF_W <= n; i += VF_W)
        vf_store(out + i, vf_mul(vf_mul(vf_mul(vf_load(x + i), rv), vf_load(w + i)), vf_silu(vf_load(z + i))));
    for (; i < n; i++) out[i] = ((x[i] * r) * w[i]) * dn_silu_f(z[i]);
}

/* ---- the recurrent rule -------------------------------------------------------------- */

/* sums[r] = the lanes of acc[r] summed, four rows a reduction */
static inline __attribute__((always_inline)) void DN_FN(dn_sums)(const int R, const vf *acc, float *sums) {
    int r = 0;
    for (; r + 4 <= R; r += 4) vf_hsum4(acc[r], acc[r + 1], acc[r + 2], acc[r + 3], sums + r);
    for (; r < R; r++) sums[r] = vf_hsum(acc[r]);
}

/* Tokens [t0, t1) on the R rows j0.. of the state (R a constant after inlining). */
static inline __attribute__((always_inline)) void DN_FN(dn_rule_rows)(
    const int R, int64_t t0, int64_t t1, int64_t j0, int64_t d_k, const float *q, int64_t q_stride, const float *k,
    int64_t k_stride, const float *v, int64_t v_stride, const float *decays, const float *beta, int64_t gb_stride,
    float scale, float *state, float *out, int64_t out_stride) {
    const int64_t nv = d_k / VF_W * VF_W;
    float *row[DN_ROWS];
    for (int r = 0; r < R; r++) row[r] = state + (j0 + r) * d_k;
    for (int64_t t = t0; t < t1; t++) {
        const float *qt = q + t * q_stride, *kt = k + t * k_stride, *vt = v + t * v_stride;
        const float decay = decays[t - t0], b = beta[t * gb_stride];
        vf acc[DN_ROWS];
        for (int r = 0; r < R; r++) acc[r] = vf_zero();
        for (int64_t i = 0; i < nv; i += VF_W) {
            const vf kv = vf_load(kt + i);
            for (int r = 0; r < R; r++) acc[r] = vf_fma(vf_load(row[r] + i), kv, acc[r]);
        }
        float u[DN_ROWS], sums[DN_ROWS];
        vf uv[DN_ROWS];
        DN_FN(dn_sums)(R, acc, sums);
        for (int r = 0; r < R; r++) {
            float sk = sums[r];
            for (int64_t i = nv; i < d_k; i++) sk = fmaf(row[r][i], kt[i], sk);
            u[r] = (vt[j0 + r] - decay * sk) * b;
            uv[r] = vf_set1(u[r]);
            acc[r] = vf_zero();
        }
        const vf dv = vf_set1(decay);
        for (int64_t i = 0; i < nv; i += VF_W) {
            const vf kv = vf_load(kt + i), qv = vf_load(qt + i);
            for (int r = 0; r < R; r++) {
                const vf s = vf_fma(uv[r], kv, vf_mul(vf_load(row[r] + i), dv));
                vf_store(row[r] + i, s);
                acc[r] = vf_fma(s, qv, acc[r]);
            }
        }
        float *ot = out + t * out_stride;
        DN_FN(dn_sums)(R, acc, sums);
        for (int r = 0; r < R; r++) {
            float sq = sums[r];
            for (int64_t i = nv; i < d_k; i++) {
                const float s = fmaf(u[r], kt[i], row[r][i] * decay);
                row[r][i] = s;
                sq = fmaf(s, qt[i], sq);
            }
            ot[j0 + r] = sq * scale; /* vt[j0 + r] was read above: ot may be vt */
        }
    }
}

void DN_FN(dn_delta_rule)(int64_t n_tokens, int64_t d_k, int64_t d_v, const float *q, int64_t q_stride,
                          const float *k, int64_t k_stride, const float *v, int64_t v_stride, const float *g,
                          const float *beta, int64_t gb_stride, float scale, float *state, float *out,
                          int64_t out_stride) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += DN_TILE) {
        const int64_t t1 = n_tokens - t0 < DN_TILE ? n_tokens : t0 + DN_TILE;
        float decays[DN_TILE]; /* exp(g) once per token, not per row block */
        for (int64_t t = t0; t < t1; t++) decays[t - t0] = expf(g[t * gb_stride]);
        int64_t j = 0;
        for (; j + DN_ROWS <= d_v; j += DN_ROWS)
            DN_FN(dn_rule_rows)(DN_ROWS, t0, t1, j, d_k, q, q_stride, k, k_stride, v, v_stride, decays, beta,
                                gb_stride, scale, state, out, out_stride);
        for (; j < d_v; j++)
            DN_FN(dn_rule_rows)(1, t0, t1, j, d_k, q, q_stride, k, k_stride, v, v_stride, decays, beta, gb_stride,
                                scale, state, out, out_stride);
    }
}

/* ---- the chunked rule ---------------------------------------------------------------- */

/* C[r][c] (+)= sum_p A[r * lda + p] B[p * ldb + c] for r < m, c < nc, p < kk; acc: add to
 * C, else overwrite it. Tiles of 2 rows x 4 vectors (8 accumulators, 4 B loads and 2
 * broadcasts per step), then single vectors, then scalar columns. Each C element's sum
 * runs over p in order, whatever the tile it falls in. */
static inline __attribute__((always_inline)) void DN_FN(dn_mm_tile)(const int RM, const int NV, int64_t r0,
                                                                    int64_t c0, int64_t kk, const float *A,
                                                                    int64_t lda, const float *B, int64_t ldb,
                                                                    float *C, int64_t ldc, int acc) {
    vf s[2][4];
    for (int r = 0; r < RM; r++)
        for (int c = 0; c < NV; c++) s[r][c] = acc ? vf_load(C + (r0 + r) * ldc + c0 + c * VF_W) : vf_zero();
    for (int64_t p = 0; p < kk; p++) {
        vf bv[4];
        for (int c = 0; c < NV; c++) bv[c] = vf_load(B + p * ldb + c0 + c * VF_W);
        for (int r = 0; r < RM; r++) {
            const vf a = vf_set1(A[(r0 + r) * lda + p]);
            for (int c = 0; c < NV; c++) s[r][c] = vf_fma(a, bv[c], s[r][c]);
        }
    }
    for (int r = 0; r < RM; r++)
        for (int c = 0; c < NV; c++) vf_store(C + (r0 + r) * ldc + c0 + c * VF_W, s[r][c]);
}

static void DN_FN(dn_mm_acc)(int64_t m, int64_t nc, int64_t kk, const float *A, int64_t lda, const float *B,
                             int64_t ldb, float *C, int64_t ldc, int acc) {
    int64_t c0 = 0;
    for (; c0 + 4 * VF_W <= nc; c0 += 4 * VF_W) {
        int64_t r = 0;
        for (; r + 2 <= m; r += 2) DN_FN(dn_mm_tile)(2, 4, r, c0, kk, A, lda, B, ldb, C, ldc, acc);
        if (r < m) DN_FN(dn_mm_tile)(1, 4, r, c0, kk, A, lda, B, ldb, C, ldc, acc);
    }
    for (; c0 + VF_W <= nc; c0 += VF_W) {
        int64_t r = 0;
        for (; r + 2 <= m; r += 2) DN_FN(dn_mm_tile)(2, 1, r, c0, kk, A, lda, B, ldb, C, ldc, acc);
        if (r < m) DN_FN(dn_mm_tile)(1, 1, r, c0, kk, A, lda, B, ldb, C, ldc, acc);
    }
    for (; c0 < nc; c0++)
        for (int64_t r = 0; r < m; r++) {
            float s = acc ? C[r * ldc + c0] : 0.0f;
            for (int64_t p = 0; p < kk; p++) s = fmaf(A[r * lda + p], B[p * ldb + c0], s);
            C[r * ldc + c0] = s;
        }
}

/* e[s] = exp(Gt - G[s]) for s < n (every argument <= 0: G does not increase). */
static void DN_FN(dn_decay_row)(float Gt, const float *G, int64_t n, float *e) {
    const vf gt = vf_set1(Gt);
    int64_t s = 0;
    for (; s + VF_W <= n; s += VF_W) vf_store(e + s, vf_exp_neg(vf_sub(gt, vf_load(G + s))));
    for (; s < n; s++) e[s] = expf(Gt - G[s]);
}

void DN_FN(dn_delta_rule_chunked)(int64_t n_tokens, int64_t d_k, int64_t d_v, const float *q, int64_t q_stride,
                                  const float *k, int64_t k_stride, const float *v, int64_t v_stride,
                                  const float *g, const float *beta, int64_t gb_stride, float scale, float *state,
                                  float *out, int64_t out_stride, float *scratch) {
    const int64_t N = DN_CHUNK, duw = d_v + d_k;
    float *KK = scratch;             /* (N, N): k_t . k_s, then L */
    float *QK = KK + N * N;          /* (N, N): q_t . k_s, masked and decayed */
    float *UW = QK + N * N;          /* (N, d_v + d_k): U | -W per token, then V' | . */
    float *ST = UW + N * duw;        /* (d_k, d_v): the state transposed */
    float *AT = ST + d_k * d_v;      /* (d_v, N): exp(G_last - G_s) V'[s][j] */
    float *KT = AT + d_v * N;        /* (d_k, N): the chunk's keys transposed */
    float *G = KT + d_k * N;         /* (N): cumulative log decay */
    float *E = G + N;                /* (N): a row of decay factors */

    for (int64_t t0 = 0; t0 < n_tokens; t0 += N) {
        const int64_t n = n_tokens - t0 < N ? n_tokens - t0 : N;
        const float *qc = q + t0 * q_stride, *kc = k + t0 * k_stride, *vc = v + t0 * v_stride;
        const float *gc = g + t0 * gb_stride, *bc = beta + t0 * gb_stride;
        float *oc = out + t0 * out_stride;

        float cum = 0.0f;
        for (int64_t t = 0; t < n; t++) G[t] = cum += gc[t * gb_stride];
        for (int64_t s = 0; s < n; s++)
            for (int64_t i = 0; i < d_k; i++) KT[i * N + s] = kc[s * k_stride + i];
        for (int64_t j = 0; j < d_v; j++)
            for (int64_t i = 0; i < d_k; i++) ST[i * d_v + j] = state[j * d_k + i];

        /* K K^T and Q K^T, then L[t][s] = -beta_t (k_t . k_s) exp(G_t - G_s) for s < t and
         * QK[t][s] = (q_t . k_s) exp(G_t - G_s) for s <= t, zeros elsewhere */
        DN_FN(dn_mm_acc)(n, n, d_k, kc, k_stride, KT, N, KK, N, 0);
        DN_FN(dn_mm_acc)(n, n, d_k, qc, q_stride, KT, N, QK, N, 0);
        for (int64_t t = 0; t < n; t++) {
            const float b = bc[t * gb_stride];
            DN_FN(dn_decay_row)(G[t], G, t + 1, E);
            for (int64_t s = 0; s < t; s++) KK[t * N + s] *= -b * E[s];
            for (int64_t s = 0; s <= t; s++) QK[t * N + s] *= E[s];
            for (int64_t s = t + 1; s < n; s++) QK[t * N + s] = 0.0f;
        }

        /* (I + L) [U | -W] = [beta V | -beta exp(G) K], one token after the other */
        for (int64_t t = 0; t < n; t++) {
            const float b = bc[t * gb_stride], be = -b * expf(G[t]);
            float *uw = UW + t * duw;
            for (int64_t j = 0; j < d_v; j++) uw[j] = b * vc[t * v_stride + j];
            for (int64_t i = 0; i < d_k; i++) uw[d_v + i] = be * kc[t * k_stride + i];
            DN_FN(dn_mm_acc)(1, duw, t, KK + t * N, N, UW, duw, uw, duw, 1);
        }
        /* V' = U - W S^T = U + (-W) S^T, in the U columns */
        DN_FN(dn_mm_acc)(n, d_v, d_k, UW + d_v, duw, ST, d_v, UW, duw, 1);

        /* o_t = scale (exp(G_t) q_t S^T + sum_{s <= t} QK[t][s] V'_s) */
        DN_FN(dn_mm_acc)(n, d_v, d_k, qc, q_stride, ST, d_v, oc, out_stride, 0);
        for (int64_t t = 0; t < n; t++) {
            const vf e = vf_set1(expf(G[t]));
            float *ot = oc + t * out_stride;
            int64_t j = 0;
            for (; j + VF_W <= d_v; j += VF_W) vf_store(ot + j, vf_mul(vf_load(ot + j), e));
            for (; j < d_v; j++) ot[j] *= expf(G[t]);
        }
        DN_FN(dn_mm_acc)(n, d_v, n, QK, N, UW, duw, oc, out_stride, 1);
        for (int64_t t = 0; t < n; t++) {
            const vf sc = vf_set1(scale);
            float *ot = oc + t * out_stride;
            int64_t j = 0;
            for (; j + VF_W <= d_v; j += VF_W) vf_store(ot + j, vf_mul(vf_load(ot + j), sc));
            for (; j < d_v; j++) ot[j] *= scale;
        }

        /* S = exp(G_last) S + sum_s exp(G_last - G_s) V'_s k_s^T */
        const float g_last = G[n - 1];
        DN_FN(dn_decay_row)(g_last, G, n, E);
        for (int64_t j = 0; j < d_v; j++)
            for (int64_t s = 0; s < n; s++) AT[j * N + s] = E[s] * UW[s * duw + j];
        const vf el = vf_set1(expf(g_last));
        const int64_t sz = d_k * d_v;
        int64_t i = 0;
        for (; i + VF_W <= sz; i += VF_W) vf_store(state + i, vf_mul(vf_load(state + i), el));
        for (; i < sz; i++) state[i] *= expf(g_last);
        DN_FN(dn_mm_acc)(d_v, d_k, n, AT, N, kc, k_stride, state, d_k, 1);
    }
}

/* The tier's table (cpu/kernels.h's dn entry). */
const dn_kernels DN_CAT(dn_kernels, DN_SFX) = {
    .conv1d_silu = DN_FN(dn_conv1d_silu),
    .l2_norm = DN_FN(dn_l2_norm),
    .delta_rule = DN_FN(dn_delta_rule),
    .delta_rule_chunked = DN_FN(dn_delta_rule_chunked),
    .gated_norm = DN_FN(dn_gated_norm),
};
