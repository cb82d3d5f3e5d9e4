/* Gated DeltaNet scalar kernels: the definitions the SIMD forms are tested against.
 * The math and the layouts are in deltanet.h. */
#include "cpu/deltanet.h"

#include <math.h>
#include <string.h>

void dn_conv1d_silu_ref(const float *x, int64_t x_stride, int64_t n_tokens, int64_t n_ch,
                        const float *w, int64_t kernel, float *state, int64_t ld, float *out,
                        int64_t out_stride) {
    const int64_t n_state = kernel - 1;
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *xt = x + t * x_stride;
        float *ot = out + t * out_stride;
        for (int64_t c = 0; c < n_ch; c++) {
            const float xc = xt[c];
            /* ssm_conv sums the window oldest first, in float */
            float sum = 0.0f;
            for (int64_t i = 0; i < n_state; i++) sum += state[i * ld + c] * w[i * ld + c];
            sum += xc * w[n_state * ld + c];
            for (int64_t i = 0; i + 1 < n_state; i++) state[i * ld + c] = state[(i + 1) * ld + c];
            if (n_state > 0) state[(n_state - 1) * ld + c] = xc;
            ot[c] = sum / (1.0f + expf(-sum));
        }
    }
}

void dn_l2_norm_ref(float *x, int64_t n, float eps) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * x[i];
    const float scale = 1.0f / fmaxf(sqrtf(sum), eps);
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
}

void dn_gates_ref(const float *alpha, const float *beta_raw, const float *dt_bias,
                  const float *a, int64_t n_heads, float *g, float *beta) {
    for (int64_t h = 0; h < n_heads; h++) {
        const float x = alpha[h] + dt_bias[h];
        const float sp = x > 20.0f ? x : logf(1.0f + expf(x));
        g[h] = sp * a[h];
        beta[h] = 1.0f / (1.0f + expf(-beta_raw[h]));
    }
}

void dn_delta_rule_ref(int64_t n_tokens, int64_t d_k, int64_t d_v, const float *q,
                       int64_t q_stride, const float *k, int64_t k_stride, const float *v,
                       int64_t v_stride, const float *g, const float *beta, int64_t gb_stride,
                       float scale, float *state, float *out, int64_t out_stride) {
    for (int64_t t = 0; t < n_tokens; t++) {
        const float *qt = q + t * q_stride, *kt = k + t * k_stride, *vt = v + t * v_stride;
        const float decay = expf(g[t * gb_stride]), b = beta[t * gb_stride];
        float *ot = out + t * out_stride;
        for (int64_t j = 0; j < d_v; j++) {
            float *row = state + j * d_k;
            float sk = 0.0f;
            for (int64_t i = 0; i < d_k; i++) {
                row[i] *= decay;
                sk += row[i] * kt[i];
            }
            const float u = (vt[j] - sk) * b;
            float sq = 0.0f;
            for (int64_t i = 0; i < d_k; i++) {
                row[i] += u * kt[i];
                sq += row[i] * qt[i];
            }
            ot[j] = sq * scale; /* vt[j] was read above, so ot may be vt */
        }
    }
}

/* Scratch of the chunked form, in floats:
 *   L  (DN_CHUNK, DN_CHUNK)  beta_t (k_t . k_s) exp(G_t - G_s), s < t; then (q_t . k_s) ...
 *   U  (DN_CHUNK, d_v)       corrected values, then V'
 *   W  (DN_CHUNK, d_k)       decayed keys through (I + L)^-1
 *   G  (DN_CHUNK)            cumulative log decay */
int64_t dn_chunk_scratch_floats(int64_t d_k, int64_t d_v) {
    const int64_t ref = DN_CHUNK * DN_CHUNK + DN_CHUNK * d_v + DN_CHUNK * d_k + DN_CHUNK;
    /* the SIMD tiers' (cpu/deltanet_impl.h): KK, QK, U|W, S^T, A^T, K^T, G and a row of decays */
    const int64_t simd = 2 * DN_CHUNK * DN_CHUNK + DN_CHUNK * (d_v + d_k) + d_k * d_v + d_v * DN_CHUNK +
                         d_k * DN_CHUNK + 2 * DN_CHUNK;
    return ref > simd ? ref : simd;
}

static float dot_f(const float *a, const float *b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void dn_delta_rule_chunked_ref(int64_t n_tokens, int64_t d_k, int64_t d_v, const float *q,
                               int64_t q_stride, const float *k, int64_t k_stride,
                               const float *v, int64_t v_stride, const float *g,
                               const float *beta, int64_t gb_stride, float scale, float *state,
                               float *out, int64_t out_stride, float *scratch) {
    float *L = scratch;
    float *U = L + DN_CHUNK * DN_CHUNK;
    float *W = U + DN_CHUNK * d_v;
    float *G = W + DN_CHUNK * d_k;

    for (int64_t t0 = 0; t0 < n_tokens; t0 += DN_CHUNK) {
        const int64_t n = n_tokens - t0 < DN_CHUNK ? n_tokens - t0 : DN_CHUNK;
        const float *qc = q + t0 * q_stride, *kc = k + t0 * k_stride, *vc = v + t0 * v_stride;
        const float *gc = g + t0 * gb_stride, *bc = beta + t0 * gb_stride;
        float *oc = out + t0 * out_stride;

        float acc = 0.0f;
        for (int64_t t = 0; t < n; t++) G[t] = acc += gc[t * gb_stride];

        /* U, W by forward substitution through (I + L) */
        for (int64_t t = 0; t < n; t++) {
            const float *kt = kc + t * k_stride;
            const float b = bc[t * gb_stride], eg = expf(G[t]);
            float *ut = U + t * d_v, *wt = W + t * d_k;
            for (int64_t j = 0; j < d_v; j++) ut[j] = b * vc[t * v_stride + j];
            for (int64_t i = 0; i < d_k; i++) wt[i] = b * eg * kt[i];
            for (int64_t s = 0; s < t; s++) {
                const float l = b * dot_f(kt, kc + s * k_stride, d_k) * expf(G[t] - G[s]);
                const float *us = U + s * d_v, *ws = W + s * d_k;
                for (int64_t j = 0; j < d_v; j++) ut[j] -= l * us[j];
                for (int64_t i = 0; i < d_k; i++) wt[i] -= l * ws[i];
            }
        }
        /* V' = U - W S^T, in place in U */
        for (int64_t t = 0; t < n; t++) {
            const float *wt = W + t * d_k;
            float *ut = U + t * d_v;
            for (int64_t j = 0; j < d_v; j++) ut[j] -= dot_f(state + j * d_k, wt, d_k);
        }
        /* outputs, from the state at the chunk's start and the chunk's own tokens */
        for (int64_t t = 0; t < n; t++) {
            const float *qt = qc + t * q_stride;
            const float eg = expf(G[t]);
            float *ot = oc + t * out_stride;
            float *qk = L + t * DN_CHUNK;
            for (int64_t s = 0; s <= t; s++)
                qk[s] = dot_f(qt, kc + s * k_stride, d_k) * expf(G[t] - G[s]);
            for (int64_t j = 0; j < d_v; j++) {
                float o = eg * dot_f(state + j * d_k, qt, d_k);
                for (int64_t s = 0; s <= t; s++) o += qk[s] * U[s * d_v + j];
                ot[j] = o * scale;
            }
        }
        /* the state at the chunk's end */
        const float g_last = G[n - 1], e_last = expf(g_last);
        for (int64_t s = 0; s < n; s++) G[s] = expf(g_last - G[s]);
        for (int64_t j = 0; j < d_v; j++) {
            float *row = state + j * d_k;
            for (int64_t i = 0; i < d_k; i++) row[i] *= e_last;
            for (int64_t s = 0; s < n; s++) {
                const float c = G[s] * U[s * d_v + j];
                const float *ks = kc + s * k_stride;
                for (int64_t i = 0; i < d_k; i++) row[i] += c * ks[i];
            }
        }
    }
}

void dn_gated_norm_ref(const float *x, const float *z, const float *w, int64_t n, float eps,
                       float *out) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float r = 1.0f / sqrtf((float)(sum / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) {
        const float zi = z[i];
        out[i] = ((x[i] * r) * w[i]) * (zi / (1.0f + expf(-zi)));
    }
}

const dn_kernels dn_kernels_ref = {
    .conv1d_silu = dn_conv1d_silu_ref,
    .l2_norm = dn_l2_norm_ref,
    .delta_rule = dn_delta_rule_ref,
    .delta_rule_chunked = dn_delta_rule_chunked_ref,
    .gated_norm = dn_gated_norm_ref,
};
