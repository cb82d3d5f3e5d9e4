/* engine/sampler: greedy, filters, penalties, reproducibility. */
#include "engine/sampler.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NV 1000

static void fill(float *l, uint64_t seed) {
    for (int i = 0; i < NV; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        l[i] = (float)((seed >> 40) % 10000) / 1000.0f - 5.0f;
    }
}

static int argmax(const float *l) {
    int b = 0;
    for (int i = 1; i < NV; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static void test_greedy(void) {
    float l[NV];
    fill(l, 1);
    sampler_params p = sampler_default_params();
    p.temperature = 0;
    sampler *s;
    CHECK_OK(sampler_create(&p, NV, &s));
    float lp;
    CHECK_EQ_INT(sampler_sample(s, l, &lp), argmax(l));
    CHECK(lp < 0 && lp > -10);
    sampler_free(s);
}

static void test_top_k_one_is_greedy(void) {
    float l[NV];
    fill(l, 2);
    sampler_params p = sampler_default_params();
    p.temperature = 1.5f;
    p.top_k = 1;
    sampler *s;
    CHECK_OK(sampler_create(&p, NV, &s));
    for (int i = 0; i < 50; i++) CHECK_EQ_INT(sampler_sample(s, l, NULL), argmax(l));
    sampler_free(s);
}

static void test_seeded(void) {
    float l[NV];
    fill(l, 3);
    sampler_params p = sampler_default_params();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 42;
    sampler *a, *b;
    CHECK_OK(sampler_create(&p, NV, &a));
    CHECK_OK(sampler_create(&p, NV, &b));
    int same = 0, distinct = 0, seen[NV] = {0};
    for (int i = 0; i < 200; i++) {
        int x = sampler_sample(a, l, NULL), y = sampler_sample(b, l, NULL);
        same += x == y;
        if (!seen[x]++) distinct++;
    }
    CHECK_EQ_INT(same, 200);
    CHECK(distinct > 20); /* it really samples */
    sampler_reset(a, 43);
    sampler_reset(b, 42);
    int diff = 0;
    for (int i = 0; i < 50; i++) diff += sampler_sample(a, l, NULL) != sampler_sample(b, l, NULL);
    CHECK(diff > 0);
    sampler_free(a);
    sampler_free(b);
}

static void test_top_p_min_p(void) {
    /* Two dominant tokens: top_p 0.5 keeps only the first, min_p keeps both. */
    float l[NV];
    for (int i = 0; i < NV; i++) l[i] = -20;
    l[7] = 10;
    l[9] = 9.9f;
    sampler_params p = sampler_default_params();
    p.temperature = 1;
    p.top_k = 0;
    p.top_p = 0.5f;
    p.min_p = 0;
    sampler *s;
    CHECK_OK(sampler_create(&p, NV, &s));
    for (int i = 0; i < 100; i++) CHECK_EQ_INT(sampler_sample(s, l, NULL), 7);
    sampler_free(s);
    p.top_p = 1;
    p.min_p = 0.5f;
    CHECK_OK(sampler_create(&p, NV, &s));
    int n7 = 0, n9 = 0, other = 0;
    for (int i = 0; i < 400; i++) {
        int t = sampler_sample(s, l, NULL);
        n7 += t == 7;
        n9 += t == 9;
        other += t != 7 && t != 9;
    }
    CHECK(n7 > 100 && n9 > 100);
    CHECK_EQ_INT(other, 0);
    sampler_free(s);
}

static void test_penalties(void) {
    float l[NV];
    for (int i = 0; i < NV; i++) l[i] = 0;
    l[5] = 3.0f;
    l[6] = 2.0f;
    sampler_params p = sampler_default_params();
    p.temperature = 0;
    p.repeat_penalty = 2.0f; /* 3 / 2 = 1.5 < 2 */
    sampler *s;
    CHECK_OK(sampler_create(&p, NV, &s));
    CHECK_EQ_INT(sampler_sample(s, l, NULL), 5);
    sampler_accept(s, 5);
    CHECK_EQ_INT(sampler_sample(s, l, NULL), 6);
    sampler_free(s);

    p.repeat_penalty = 1.0f;
    p.frequency_penalty = 0.6f;
    p.penalty_last_n = 2;
    CHECK_OK(sampler_create(&p, NV, &s));
    sampler_accept(s, 5); /* 3 - 0.6 = 2.4 still wins */
    CHECK_EQ_INT(sampler_sample(s, l, NULL), 5);
    sampler_accept(s, 5); /* 3 - 1.2 = 1.8 loses to 2 */
    CHECK_EQ_INT(sampler_sample(s, l, NULL), 6);
    sampler_accept(s, 1);
    sampler_accept(s, 2); /* window of 2 forgets both 5s */
    CHECK_EQ_INT(sampler_sample(s, l, NULL), 5);
    sampler_free(s);

    p.frequency_penalty = 0;
    p.presence_penalty = 1.5f;
    p.penalty_last_n = 64;
    CHECK_OK(sampler_create(&p, NV, &s));
    sampler_accept(s, 5);
    CHECK_EQ_INT(sampler_sample(s, l, NULL), 6);
    sampler_free(s);
}

static void test_bad_params(void) {
    sampler_params p = sampler_default_params();
    sampler *s;
    p.top_p = 1.5f;
    CHECK(sampler_create(&p, NV, &s) == VT_E_RANGE);
    CHECK(strstr(vt_last_error(), "top_p") != NULL);
    p = sampler_default_params();
    p.temperature = NAN;
    CHECK(sampler_create(&p, NV, &s) == VT_E_RANGE);
}

/* logit_bias: +100 makes a token the pick, -100 bans one (also at temperature 1);
 * ids outside the vocabulary are ignored; the sampler keeps its own copy. */
static void test_logit_bias(void) {
    float l[NV];
    fill(l, 3);
    int32_t best = argmax(l);
    int32_t other = (best + 7) % NV;
    vt_logit_bias b[3] = {{.token = other, .bias = 100}, {.token = NV + 5, .bias = 100}, {.token = -1, .bias = 50}};
    sampler_params p = sampler_default_params();
    p.temperature = 0;
    p.bias = b;
    p.n_bias = 3;
    sampler *s;
    CHECK_OK(sampler_create(&p, NV, &s));
    b[0].token = best; /* the caller's array may change after create */
    CHECK_EQ_INT(sampler_sample(s, l, NULL), other);
    sampler_free(s);
    vt_logit_bias ban = {.token = best, .bias = -100};
    p.bias = &ban;
    p.n_bias = 1;
    CHECK_OK(sampler_create(&p, NV, &s));
    CHECK(sampler_sample(s, l, NULL) != best);
    sampler_free(s);
    p.temperature = 1;
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    p.seed = 9;
    CHECK_OK(sampler_create(&p, NV, &s));
    int banned = 0;
    for (int i = 0; i < 2000; i++) banned += sampler_sample(s, l, NULL) == best;
    CHECK_EQ_INT(banned, 0);
    sampler_free(s);
}

/* A mask (grammar): only allowed tokens come, greedy takes the best of them,
 * and without truncation the draw follows their renormalised probabilities. */
static void test_masked(void) {
    float l[NV];
    fill(l, 7);
    uint32_t allowed[(NV + 31) / 32] = {0};
    const int ids[4] = {3, 100, 517, 999};
    for (int k = 0; k < 4; k++) allowed[ids[k] >> 5] |= 1u << (ids[k] & 31);
    l[3] = 2.0f, l[100] = 1.0f, l[517] = 0.0f, l[999] = 1.0f;
    sampler_params p = sampler_default_params();
    p.temperature = 0;
    sampler *s;
    CHECK_OK(sampler_create(&p, NV, &s));
    CHECK_EQ_INT(sampler_sample_masked(s, l, allowed, NULL), 3);
    sampler_free(s);
    for (int trunc = 0; trunc < 2; trunc++) {
        p = sampler_default_params();
        p.temperature = 1.0f;
        p.top_k = trunc ? 2 : 0;
        p.top_p = 1.0f;
        p.min_p = 0.0f;
        CHECK_OK(sampler_create(&p, NV, &s));
        int count[NV] = {0};
        for (int i = 0; i < 20000; i++) count[sampler_sample_masked(s, l, allowed, NULL)]++;
        int others = 20000;
        for (int k = 0; k < 4; k++) others -= count[ids[k]];
        CHECK_EQ_INT(others, 0);
        const double z = exp(2) + 2 * exp(1) + 1;
        if (!trunc) { /* within 4 sigma of e^l / z */
            for (int k = 0; k < 4; k++) {
                const double q = exp(l[ids[k]]) / z, sd = sqrt(20000 * q * (1 - q));
                CHECK_MSG(fabs(count[ids[k]] - 20000 * q) < 4 * sd, "token %d: %d draws, want %.0f", ids[k],
                          count[ids[k]], 20000 * q);
            }
        } else { /* top-2 of the allowed: 3 and one of the two ties at 1.0 */
            CHECK(count[517] == 0 && count[3] > 0);
        }
        sampler_free(s);
    }
}

/* ---- the fast chains against the sorted one ------------------------------------ */

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}
static float rnd_f(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() >> 40) * 0x1p-24f; }

/* Logits of several shapes over nv tokens: wide, a model's (a few far above a
 * bulk), coarse (many ties), -inf entries, very wide (probabilities far below
 * 2^-30), all equal, one finite. */
#define N_SHAPES 7
static void fill_shape(float *l, int32_t nv, int shape) {
    for (int32_t i = 0; i < nv; i++) {
        switch (shape) {
        case 0: l[i] = rnd_f(-5, 5); break;
        case 1: l[i] = rnd() % 200 ? rnd_f(-4, 4) + rnd_f(-4, 4) : rnd_f(8, 20); break;
        case 2: l[i] = (float)(rnd() % 8) * 0.5f; break;
        case 3: l[i] = rnd() % 3 ? rnd_f(-3, 3) : -INFINITY; break;
        case 4: l[i] = rnd_f(-80, 10); break;
        case 5: l[i] = 1.25f; break;
        default: l[i] = -INFINITY; break;
        }
    }
    if (shape == 6) l[rnd() % (uint64_t)nv] = 0.5f;
}

/* Random parameter sets (temperature, top-k off / past the candidates / set,
 * top-p, min-p, penalties, a bias), random logits, masks: sampler_sample and
 * sampler_sample_masked give the token and the logprob bits of
 * sampler_sample_ref, draw after draw, and the fast chains decide nearly all. */
static void test_fast_equals_sorted(void) {
    static const float temps[] = {0.05f, 0.3f, 0.7f, 1.0f, 1.5f, 4.0f, 100.0f};
    static const float top_ps[] = {1.0f, 1.0f, 0.95f, 0.9f, 0.5f, 0.1f, 0.0f, 0.999999f};
    static const float min_ps[] = {0.0f, 0.0f, 0.05f, 0.1f, 0.5f, 1.0f, 1e-6f};
    enum { NV_MAX = 3000 };
    static float l[NV_MAX];
    static uint32_t mask[(NV_MAX + 31) / 32];
    int64_t fast = 0, sorted = 0;
    int mismatches = 0;
    for (int set = 0; set < 250; set++) {
        const int32_t nv = set % 10 == 0 ? 1 + (int32_t)(rnd() % 40) : 500 + (int32_t)(rnd() % 2500);
        sampler_params p = sampler_default_params();
        p.temperature = temps[rnd() % (sizeof temps / sizeof *temps)];
        const int tk = (int)(rnd() % 6);
        p.top_k = tk == 4 ? nv + 3 : tk == 5 ? 1 + (int32_t)(rnd() % 60) : 0;
        p.top_p = top_ps[rnd() % (sizeof top_ps / sizeof *top_ps)];
        p.min_p = min_ps[rnd() % (sizeof min_ps / sizeof *min_ps)];
        if (rnd() % 4 == 0) {
            p.repeat_penalty = 1.3f;
            p.presence_penalty = 0.2f;
            p.frequency_penalty = 0.1f;
        }
        vt_logit_bias bias[2] = {{.token = (int32_t)(rnd() % (uint64_t)nv), .bias = 3.0f},
                                 {.token = (int32_t)(rnd() % (uint64_t)nv), .bias = -100.0f}};
        if (rnd() % 5 == 0) p.bias = bias, p.n_bias = 2;
        p.seed = rnd();
        sampler *a, *b;
        CHECK_OK(sampler_create(&p, nv, &a));
        CHECK_OK(sampler_create(&p, nv, &b));
        const int shape = (int)(rnd() % N_SHAPES);
        const int masked = (int)(rnd() % 3) == 0;
        for (int d = 0; d < 10; d++) {
            fill_shape(l, nv, d % 4 == 3 ? (int)(rnd() % N_SHAPES) : shape);
            if (masked) {
                const uint64_t density = 1 + rnd() % 8; /* 1/8 .. all */
                for (int32_t w = 0; w < (nv + 31) / 32; w++) mask[w] = 0;
                for (int32_t i = 0; i < nv; i++)
                    if (rnd() % 8 < density) mask[i >> 5] |= 1u << (i & 31);
                mask[0] |= 1u; /* at least one */
            }
            const bool want_lp = rnd() % 2;
            float lpa = 0, lpb = 0;
            const int32_t ta = masked ? sampler_sample_masked(a, l, mask, want_lp ? &lpa : NULL)
                                      : sampler_sample(a, l, want_lp ? &lpa : NULL);
            const int32_t tb = sampler_sample_ref(b, l, masked ? mask : NULL, want_lp ? &lpb : NULL);
            if (ta != tb || memcmp(&lpa, &lpb, sizeof lpa)) {
                if (mismatches++ < 10)
                    CHECK_MSG(0, "set %d draw %d (nv %d shape %d masked %d T %g top_k %d top_p %g min_p %g): "
                              "fast %d (%a), sorted %d (%a)", set, d, nv, shape, masked, p.temperature, p.top_k,
                              p.top_p, p.min_p, ta, lpa, tb, lpb);
            }
            sampler_accept(a, ta);
            sampler_accept(b, tb);
        }
        int64_t f, s0, f1, s1;
        sampler_draw_counts(a, &f, &s0);
        sampler_draw_counts(b, &f1, &s1);
        CHECK(f1 == 0);
        fast += f;
        sorted += s0;
        sampler_free(a);
        sampler_free(b);
    }
    CHECK_EQ_INT(mismatches, 0);
    /* the wide, the tied and the one-finite shapes fall back now and then */
    CHECK_MSG(fast > 4 * sorted, "fast %lld, sorted %lld", (long long)fast, (long long)sorted);
}

/* A vocabulary of Qwen3's size, a model-like shape, the common settings. */
static void test_fast_large_vocab(void) {
    enum { NV_QWEN3 = 151936 };
    float *l = malloc(sizeof(float) * NV_QWEN3);
    CHECK(l != NULL);
    const float cfg[4][3] = {{0.7f, 0.8f, 0.0f}, {1.0f, 1.0f, 0.0f}, {0.6f, 0.95f, 0.05f}, {1.0f, 1.0f, 0.1f}};
    for (int k = 0; k < 4; k++) {
        sampler_params p = sampler_default_params();
        p.temperature = cfg[k][0];
        p.top_k = 0;
        p.top_p = cfg[k][1];
        p.min_p = cfg[k][2];
        p.seed = 1234 + (uint64_t)k;
        sampler *a, *b;
        CHECK_OK(sampler_create(&p, NV_QWEN3, &a));
        CHECK_OK(sampler_create(&p, NV_QWEN3, &b));
        for (int d = 0; d < 3; d++) {
            fill_shape(l, NV_QWEN3, 1);
            float lpa, lpb;
            const int32_t ta = sampler_sample(a, l, &lpa), tb = sampler_sample_ref(b, l, NULL, &lpb);
            CHECK_MSG(ta == tb && !memcmp(&lpa, &lpb, sizeof lpa), "config %d draw %d: fast %d, sorted %d", k, d,
                      ta, tb);
        }
        int64_t f, s0;
        sampler_draw_counts(a, &f, &s0);
        CHECK_MSG(f + s0 == 3 && f >= 2, "config %d: fast %lld, sorted %lld", k, (long long)f, (long long)s0);
        sampler_free(a);
        sampler_free(b);
    }
    free(l);
}

int main(void) {
    test_fast_equals_sorted();
    test_fast_large_vocab();
    test_greedy();
    test_masked();
    test_logit_bias();
    test_top_k_one_is_greedy();
    test_seeded();
    test_top_p_min_p();
    test_penalties();
    test_bad_params();
    return test_finish();
}
