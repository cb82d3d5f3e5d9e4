/* engine/sampler: greedy, filters, penalties, reproducibility. */
#include "engine/sampler.h"
#include "test.h"

#include <math.h>

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

int main(void) {
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
