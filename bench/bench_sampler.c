/* The sampler's cost per draw at large vocabularies: the fast chains
 * (sampler_sample) against the sorted chain (sampler_sample_ref, a sort of the
 * whole vocabulary), alternated in one process on the same logits, for the
 * vocabulary sizes of Qwen3 (151936), gpt-oss (201088) and Qwen3.5 (248320),
 * settings without top-k (temperature alone, top-p, min-p, both) and with it,
 * and two shapes of logits: "peaked" (a few tokens far above a bulk, as a
 * model's usually are) and "flat" (the bulk alone: high entropy).
 *
 *   bench_sampler [-r ROUNDS] [-d DRAWS]
 *
 * Prints a table (microseconds per draw, the median over rounds) and one JSON
 * line per row. Both chains give the same tokens (test_sampler checks it). */
#include "engine/sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float uni(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) * 0x1p-24f;
}

static void fill(float *l, int32_t nv, bool peaked) {
    for (int32_t i = 0; i < nv; i++) l[i] = (uni() + uni() + uni() - 1.5f) * 4.0f; /* sd 2 */
    if (peaked)
        for (int k = 0; k < 50; k++) l[(int32_t)(uni() * (float)nv)] = 8.0f + 10.0f * uni();
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct cfg {
    const char *name;
    float temperature, top_p, min_p;
    int32_t top_k;
} cfg;

int main(int argc, char **argv) {
    int rounds = 5, draws = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-d") && i + 1 < argc) draws = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_sampler [-r ROUNDS] [-d DRAWS]\n");
            return 2;
        }
    }
    if (rounds <= 0 || rounds > 100 || draws <= 0) {
        fprintf(stderr, "bench_sampler: -r in [1, 100], -d positive\n");
        return 2;
    }
    static const int32_t vocabs[] = {151936, 201088, 248320};
    static const cfg cfgs[] = {
        {"temp 1", 1.0f, 1.0f, 0.0f, 0},
        {"top_p 0.9", 0.7f, 0.9f, 0.0f, 0},
        {"min_p 0.05", 1.0f, 1.0f, 0.05f, 0},
        {"top_p 0.95 min_p 0.05", 0.8f, 0.95f, 0.05f, 0},
        {"top_k 40 top_p 0.95", 0.8f, 0.95f, 0.05f, 40},
    };
    printf("%-8s %-7s %-22s %12s %12s %8s\n", "vocab", "shape", "settings", "fast us", "sorted us", "x");
    for (size_t v = 0; v < sizeof vocabs / sizeof *vocabs; v++) {
        const int32_t nv = vocabs[v];
        float *l = malloc(sizeof(float) * (size_t)nv);
        if (!l) return 1;
        for (int peaked = 1; peaked >= 0; peaked--) {
            fill(l, nv, peaked);
            for (size_t k = 0; k < sizeof cfgs / sizeof *cfgs; k++) {
                sampler_params p = sampler_default_params();
                p.temperature = cfgs[k].temperature;
                p.top_p = cfgs[k].top_p;
                p.min_p = cfgs[k].min_p;
                p.top_k = cfgs[k].top_k;
                sampler *a = NULL, *b = NULL;
                if (sampler_create(&p, nv, &a) != VT_OK || sampler_create(&p, nv, &b) != VT_OK) return 1;
                double tf[100], ts[100];
                volatile int32_t sink = 0;
                for (int r = 0; r < rounds; r++) {
                    double t0 = now_s();
                    for (int d = 0; d < draws; d++) sink += sampler_sample(a, l, NULL);
                    tf[r] = (now_s() - t0) / draws * 1e6;
                    t0 = now_s();
                    for (int d = 0; d < draws; d++) sink += sampler_sample_ref(b, l, NULL, NULL);
                    ts[r] = (now_s() - t0) / draws * 1e6;
                }
                qsort(tf, (size_t)rounds, sizeof(double), cmp_double);
                qsort(ts, (size_t)rounds, sizeof(double), cmp_double);
                const double f = tf[rounds / 2], s = ts[rounds / 2];
                printf("%-8d %-7s %-22s %12.1f %12.1f %8.1f\n", nv, peaked ? "peaked" : "flat", cfgs[k].name, f, s,
                       s / f);
                printf("{\"vocab\": %d, \"shape\": \"%s\", \"settings\": \"%s\", \"fast_us\": %.1f, \"sorted_us\": %.1f}\n",
                       nv, peaked ? "peaked" : "flat", cfgs[k].name, f, s);
                sampler_free(a);
                sampler_free(b);
            }
        }
        free(l);
    }
    return 0;
}
