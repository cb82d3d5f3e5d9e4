/* The Gated DeltaNet kernels of one linear layer, one thread, per tier (ref and each SIMD
 * tier this CPU runs): the recurrent and the chunked delta rule over runs of n tokens for
 * `-H` heads of `-d` dims (each head its own state, as the cache holds them), and the
 * conv1d+silu and output gate of the layer. Every round runs each variant once, in turn;
 * prints the median and range of us per token (the rule: per token and head). Never
 * asserts on time.
 *
 *   bench_deltanet [-d 128] [-H 32] [-C 8192] [-R 7] [-n 1,16,64,128,512]
 *
 * -d head dim (d_k = d_v), -H v-heads, -C conv channels (2 * key_dim + d_inner; the
 * defaults are Qwen3.6-35B-A3B's linear layer), -R rounds, -n run lengths. */
#include "cpu/deltanet.h"
#include "cpu/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void l2(float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    for (int64_t i = 0; i < n; i++) x[i] = (float)(x[i] / sqrt(s));
}

int main(int argc, char **argv) {
    int64_t d = 128, H = 32, C = 8192, rounds = 7;
    int64_t lens[16] = {1, 16, 64, 128, 512};
    int n_lens = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-d")) d = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-H")) H = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-C")) C = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-R")) rounds = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) {
            n_lens = 0;
            for (char *p = argv[i + 1]; *p && n_lens < 16; p++) {
                lens[n_lens++] = strtoll(p, &p, 10);
                if (!*p) break;
            }
        } else {
            fprintf(stderr, "usage: %s [-d 128] [-H 32] [-C 8192] [-R 7] [-n 1,16,64,128,512]\n", argv[0]);
            return 2;
        }
    }
    int64_t n_max = 1;
    for (int i = 0; i < n_lens; i++) n_max = lens[i] > n_max ? lens[i] : n_max;
    uint64_t rs = 42;
    /* per token: q, k (d each, l2-normed), v (H * d), g, beta (H) */
    float *q = malloc(sizeof(float) * n_max * d), *k = malloc(sizeof(float) * n_max * d);
    float *v = malloc(sizeof(float) * n_max * H * d), *out = malloc(sizeof(float) * n_max * (C > H * d ? C : H * d));
    float *g = malloc(sizeof(float) * n_max * H), *beta = malloc(sizeof(float) * n_max * H);
    float *state = malloc(sizeof(float) * H * d * d), *scratch = malloc(sizeof(float) * dn_chunk_scratch_floats(d, d));
    for (int64_t t = 0; t < n_max; t++) {
        for (int64_t i = 0; i < d; i++) q[t * d + i] = frand(&rs), k[t * d + i] = frand(&rs);
        l2(q + t * d, d), l2(k + t * d, d);
        for (int64_t i = 0; i < H * d; i++) v[t * H * d + i] = frand(&rs);
        for (int64_t h = 0; h < H; h++) g[t * H + h] = -0.3f * (frand(&rs) + 1), beta[t * H + h] = 0.5f;
    }
    for (int64_t i = 0; i < H * d * d; i++) state[i] = 0.01f * frand(&rs);
    /* conv and gate inputs */
    float *x = malloc(sizeof(float) * n_max * C), *cw = malloc(sizeof(float) * 4 * C), *cst = calloc(3 * C, sizeof(float));
    float *z = malloc(sizeof(float) * n_max * H * d), *nw = malloc(sizeof(float) * d);
    for (int64_t i = 0; i < n_max * C; i++) x[i] = frand(&rs);
    for (int64_t i = 0; i < 4 * C; i++) cw[i] = frand(&rs);
    for (int64_t i = 0; i < n_max * H * d; i++) z[i] = frand(&rs);
    for (int64_t i = 0; i < d; i++) nw[i] = frand(&rs);

    const cpu_isa tiers[] = {CPU_ISA_REF, CPU_ISA_AVX2, CPU_ISA_AVX512, CPU_ISA_NEON};
    const void *seen[4] = {0};
    double *tm = malloc(sizeof(double) * (size_t)rounds);
    printf("d %lld, %lld heads, %lld conv channels, %lld rounds; us per token (rule: per token and head)\n",
           (long long)d, (long long)H, (long long)C, (long long)rounds);
    printf("%-8s %-10s %6s %10s %10s %10s\n", "tier", "kernel", "n", "median", "min", "max");
    for (int ti = 0; ti < 4; ti++) {
        cpu_kernels kt;
        cpu_kernels_build(tiers[ti], &kt);
        int dup = 0;
        for (int s = 0; s < ti; s++) dup |= seen[s] == (const void *)kt.dn.delta_rule;
        seen[ti] = (const void *)kt.dn.delta_rule;
        if (dup || kt.isa != tiers[ti]) continue;
        const dn_kernels *dk = &kt.dn;
        for (int li = 0; li < n_lens; li++) {
            const int64_t n = lens[li];
            for (int kind = 0; kind < 4; kind++) {
                static const char *names[] = {"recurrent", "chunked", "conv", "gate"};
                if (kind == 1 && n < 2) continue;
                for (int64_t r = 0; r < rounds; r++) {
                    const double t0 = now_s();
                    if (kind < 2)
                        for (int64_t h = 0; h < H; h++) {
                            if (kind == 0)
                                dk->delta_rule(n, d, d, q, d, k, d, v + h * d, H * d, g + h, beta + h, H, 0.1f,
                                               state + h * d * d, out + h * d, H * d);
                            else
                                dk->delta_rule_chunked(n, d, d, q, d, k, d, v + h * d, H * d, g + h, beta + h, H,
                                                       0.1f, state + h * d * d, out + h * d, H * d, scratch);
                        }
                    else if (kind == 2)
                        dk->conv1d_silu(x, C, n, C, cw, 4, cst, C, out, C);
                    else
                        for (int64_t t = 0; t < n; t++)
                            for (int64_t h = 0; h < H; h++)
                                dk->gated_norm(v + (t * H + h) * d, z + (t * H + h) * d, nw, d, 1e-6f,
                                               out + (t * H + h) * d);
                    tm[r] = (now_s() - t0) * 1e6 / (double)n / (kind < 2 ? (double)H : 1.0);
                }
                qsort(tm, (size_t)rounds, sizeof(double), cmp_double);
                printf("%-8s %-10s %6lld %10.3f %10.3f %10.3f\n", kt.isa_name, names[kind], (long long)n,
                       tm[rounds / 2], tm[0], tm[rounds - 1]);
            }
        }
        /* keep the states finite across rounds: the rule is stable (|decay| < 1, beta < 1) */
        for (int64_t i = 0; i < H * d * d; i++) state[i] = 0.01f * frand(&rs);
    }
    free(q), free(k), free(v), free(out), free(g), free(beta), free(state), free(scratch);
    free(x), free(cw), free(cst), free(z), free(nw), free(tm);
    return 0;
}
