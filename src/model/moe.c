/* Mixture-of-experts routing and activations: see moe.h. */
#include "model/moe.h"

#include <math.h>
#include <stdbool.h>

/* sel[0..k): the k largest of p[0..n), largest first, lower index on a tie. */
static void top_k(const float *p, int64_t n, int64_t k, int32_t *sel) {
    for (int64_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int64_t e = 0; e < n; e++) {
            bool taken = false;
            for (int64_t i = 0; i < j && !taken; i++) taken = sel[i] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = (int32_t)e;
        }
        sel[j] = best;
    }
}

/* y = softmax(x) over n (ggml_soft_max: max subtracted, sum in double, then
 * scaled by the float 1/sum); y may be x. */
static void softmax(const float *x, int64_t n, float *y) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - mx);
        sum += (double)y[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i] *= inv;
}

void moe_select(const float *logits, const float *bias, int64_t n, int64_t k, moe_gating gating,
                float *scratch, int32_t *sel, float *w) {
    float *p = scratch;
    for (int64_t e = 0; e < n; e++) p[e] = bias ? logits[e] + bias[e] : logits[e];
    if (gating == MOE_GATING_SOFTMAX_WEIGHT) {
        top_k(p, n, k, sel);
        for (int64_t j = 0; j < k; j++) w[j] = p[sel[j]];
        softmax(w, k, w);
        return;
    }
    softmax(p, n, p);
    top_k(p, n, k, sel);
    double sum = 0;
    for (int64_t j = 0; j < k; j++) {
        w[j] = p[sel[j]];
        sum += (double)w[j];
    }
    float s = (float)sum;
    if (s < 6.103515625e-5f) s = 6.103515625e-5f;
    for (int64_t j = 0; j < k; j++) w[j] /= s;
}

void moe_swiglu_oai(float *g, const float *u, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i] < limit ? g[i] : limit;
        const float y = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        const float glu = x / (1.f + expf(alpha * (-x)));
        g[i] = glu * (y + 1.f);
    }
}
