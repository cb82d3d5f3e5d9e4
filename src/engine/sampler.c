#include "engine/sampler.h"

#include "base/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    int32_t id;
    float logit;
    float p;
} cand;

struct sampler {
    sampler_params p;
    int32_t n_vocab;
    cand *cands;     /* (n_vocab) */
    float *adjusted; /* (n_vocab) logits after penalties */
    int32_t *counts; /* (n_vocab) occurrences in the window */
    int32_t *ring;   /* (penalty_last_n) recent tokens */
    int32_t ring_len, ring_pos;
    uint64_t rng[4];
    vt_logit_bias *bias; /* (p.n_bias) the sampler's copy */
};

sampler_params sampler_default_params(void) {
    sampler_params p = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                        .repeat_penalty = 1.0f, .presence_penalty = 0.0f,
                        .frequency_penalty = 0.0f, .penalty_last_n = 64, .seed = 0};
    return p;
}

vt_status sampler_params_check(const sampler_params *p) {
    if (!(p->temperature >= 0.0f) || p->temperature > 100.0f)
        return vt_errorf(VT_E_RANGE, "temperature %g is outside [0, 100]", p->temperature);
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return vt_errorf(VT_E_RANGE, "top_p %g is outside [0, 1]", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return vt_errorf(VT_E_RANGE, "min_p %g is outside [0, 1]", p->min_p);
    if (!(p->repeat_penalty > 0.0f && p->repeat_penalty <= 100.0f))
        return vt_errorf(VT_E_RANGE, "repeat_penalty %g is outside (0, 100]", p->repeat_penalty);
    if (!(fabsf(p->presence_penalty) <= 100.0f))
        return vt_errorf(VT_E_RANGE, "presence_penalty %g is outside [-100, 100]", p->presence_penalty);
    if (!(fabsf(p->frequency_penalty) <= 100.0f))
        return vt_errorf(VT_E_RANGE, "frequency_penalty %g is outside [-100, 100]", p->frequency_penalty);
    if (p->penalty_last_n < 0 || p->penalty_last_n > (1 << 20))
        return vt_errorf(VT_E_RANGE, "penalty window %d is outside [0, 1048576]", p->penalty_last_n);
    return VT_OK;
}

/* xoshiro256** seeded through splitmix64. */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t rng_next(uint64_t *s) {
    const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}
static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

void sampler_reset(sampler *s, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    memset(s->counts, 0, sizeof(int32_t) * (size_t)s->n_vocab);
    s->ring_len = s->ring_pos = 0;
}

vt_status sampler_create(const sampler_params *p, int32_t n_vocab, sampler **out) {
    *out = NULL;
    VT_TRY(sampler_params_check(p));
    if (n_vocab <= 0) return vt_errorf(VT_E_INVALID, "sampler: n_vocab %d", n_vocab);
    sampler *s = calloc(1, sizeof *s);
    if (!s) return vt_errorf(VT_E_NOMEM, "out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cands = malloc(sizeof(cand) * (size_t)n_vocab);
    s->adjusted = malloc(sizeof(float) * (size_t)n_vocab);
    s->counts = calloc((size_t)n_vocab, sizeof(int32_t));
    s->ring = malloc(sizeof(int32_t) * (size_t)(p->penalty_last_n > 0 ? p->penalty_last_n : 1));
    if (p->n_bias > 0) {
        s->bias = malloc(sizeof *s->bias * (size_t)p->n_bias);
        if (s->bias) memcpy(s->bias, p->bias, sizeof *s->bias * (size_t)p->n_bias);
        s->p.bias = s->bias;
    } else {
        s->p.bias = NULL;
        s->p.n_bias = 0;
    }
    if (!s->cands || !s->adjusted || !s->counts || !s->ring || (p->n_bias > 0 && !s->bias)) {
        sampler_free(s);
        return vt_errorf(VT_E_NOMEM, "out of memory");
    }
    sampler_reset(s, p->seed);
    *out = s;
    return VT_OK;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->cands);
    free(s->adjusted);
    free(s->counts);
    free(s->ring);
    free(s->bias);
    free(s);
}

void sampler_accept(sampler *s, int32_t token) {
    const int32_t n = s->p.penalty_last_n;
    if (n <= 0 || token < 0 || token >= s->n_vocab) return;
    if (s->ring_len == n) {
        s->counts[s->ring[s->ring_pos]]--;
    } else {
        s->ring_len++;
    }
    s->ring[s->ring_pos] = token;
    s->counts[token]++;
    s->ring_pos = (s->ring_pos + 1) % n;
}

static int cand_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Keep c[0..k) a heap whose root ranks last (the worst of the k kept). */
static void sift_down(cand *c, int32_t k, int32_t i) {
    for (;;) {
        const int32_t l = 2 * i + 1, r = l + 1;
        int32_t w = i;
        if (l < k && cand_desc(&c[l], &c[w]) > 0) w = l;
        if (r < k && cand_desc(&c[r], &c[w]) > 0) w = r;
        if (w == i) return;
        const cand t = c[i];
        c[i] = c[w];
        c[w] = t;
        i = w;
    }
}

/* Move the k best candidates to the front, sorted best first: O(n log k). */
static void top_k_sort(cand *c, int32_t n, int32_t k) {
    if (k < n) {
        for (int32_t i = k / 2 - 1; i >= 0; i--) sift_down(c, k, i);
        for (int32_t i = k; i < n; i++) {
            if (cand_desc(&c[i], &c[0]) < 0) {
                const cand t = c[0];
                c[0] = c[i];
                c[i] = t;
                sift_down(c, k, 0);
            }
        }
    }
    qsort(c, (size_t)k, sizeof(cand), cand_desc);
}

/* p = softmax(logit / temp) over c[0..n), returns nothing; c sorted desc. */
static void softmax(cand *c, int32_t n, float temp) {
    const float mx = c[0].logit;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        c[i].p = expf((c[i].logit - mx) / temp);
        sum += c[i].p;
    }
    for (int32_t i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
}

static int32_t sample_impl(sampler *s, const float *logits, const uint32_t *allowed, float *logprob);

int32_t sampler_sample(sampler *s, const float *logits, float *logprob) {
    return sample_impl(s, logits, NULL, logprob);
}

int32_t sampler_sample_masked(sampler *s, const float *logits, const uint32_t *allowed, float *logprob) {
    return sample_impl(s, logits, allowed, logprob);
}

static inline bool allowed_bit(const uint32_t *a, int32_t i) { return !a || ((a[i >> 5] >> (i & 31)) & 1); }

static int32_t sample_impl(sampler *s, const float *logits, const uint32_t *allowed, float *logprob) {
    const sampler_params *p = &s->p;
    const int32_t nv = s->n_vocab;
    const float *l = logits;
    const bool penalize = s->ring_len > 0 && (p->repeat_penalty != 1.0f ||
                                              p->presence_penalty != 0.0f ||
                                              p->frequency_penalty != 0.0f);
    if (penalize) {
        memcpy(s->adjusted, logits, sizeof(float) * (size_t)nv);
        for (int32_t i = 0; i < s->ring_len; i++) {
            const int32_t t = s->ring[i];
            const int32_t cnt = s->counts[t];
            if (cnt <= 0) continue;
            float v = logits[t];
            if (p->repeat_penalty != 1.0f) v = v <= 0 ? v * p->repeat_penalty : v / p->repeat_penalty;
            v -= (float)cnt * p->frequency_penalty + p->presence_penalty;
            s->adjusted[t] = v; /* repeated ids write the same value */
        }
        l = s->adjusted;
    }
    if (p->n_bias > 0) {
        if (l != s->adjusted) memcpy(s->adjusted, logits, sizeof(float) * (size_t)nv);
        for (int32_t i = 0; i < p->n_bias; i++) {
            const int32_t t = p->bias[i].token;
            if (t < 0 || t >= nv) continue;
            s->adjusted[t] = p->bias[i].bias <= -100.0f ? -INFINITY : s->adjusted[t] + p->bias[i].bias;
        }
        l = s->adjusted;
    }

    if (p->temperature <= 0.0f) {
        int32_t best = -1;
        for (int32_t i = 0; i < nv; i++)
            if (allowed_bit(allowed, i) && (best < 0 || l[i] > l[best])) best = i;
        if (best < 0) best = 0; /* an empty mask: the caller's contract says it cannot be */
        if (logprob) {
            double sum = 0;
            for (int32_t i = 0; i < nv; i++)
                if (allowed_bit(allowed, i)) sum += exp((double)l[i] - l[best]);
            *logprob = (float)-log(sum);
        }
        return best;
    }

    cand *c = s->cands;
    int32_t n_c = 0;
    if (allowed) {
        for (int32_t w = 0; w < (nv + 31) / 32; w++) {
            for (uint32_t bits = allowed[w]; bits; bits &= bits - 1) {
                const int32_t i = w * 32 + __builtin_ctz(bits);
                if (i < nv) c[n_c++] = (cand){i, l[i], 0};
            }
        }
        if (n_c == 0) c[n_c++] = (cand){0, l[0], 0};
    } else {
        for (int32_t i = 0; i < nv; i++) c[i] = (cand){i, l[i], 0};
        n_c = nv;
    }
    if (allowed && (p->top_k <= 0 || p->top_k >= n_c) && p->top_p >= 1.0f && p->min_p <= 0.0f) {
        /* nothing truncates: draw over the allowed tokens as they are, unsorted */
        float mx = c[0].logit;
        for (int32_t i = 1; i < n_c; i++) mx = c[i].logit > mx ? c[i].logit : mx;
        double sum = 0;
        for (int32_t i = 0; i < n_c; i++) {
            c[i].p = expf((c[i].logit - mx) / p->temperature);
            sum += c[i].p;
        }
        const double u = rng_uniform(s->rng) * sum;
        double cum = 0;
        int32_t pick = n_c - 1;
        for (int32_t i = 0; i < n_c; i++) {
            cum += c[i].p;
            if (u < cum) {
                pick = i;
                break;
            }
        }
        while (pick > 0 && c[pick].p == 0.0f) pick--; /* rounding past the end: never a zero */
        if (logprob) *logprob = logf((float)(c[pick].p / sum));
        return c[pick].id;
    }
    int32_t n = n_c;
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    top_k_sort(c, n_c, n);

    if (p->top_p < 1.0f || p->min_p > 0.0f) {
        softmax(c, n, 1.0f);
        if (p->top_p < 1.0f) {
            double cum = 0;
            int32_t keep = n;
            for (int32_t i = 0; i < n; i++) {
                cum += c[i].p;
                if (cum >= p->top_p) {
                    keep = i + 1;
                    break;
                }
            }
            n = keep;
        }
        if (p->min_p > 0.0f) {
            const float floor_p = p->min_p * c[0].p;
            int32_t keep = 1;
            while (keep < n && c[keep].p >= floor_p) keep++;
            n = keep;
        }
    }
    softmax(c, n, p->temperature);
    const double u = rng_uniform(s->rng);
    double cum = 0;
    int32_t pick = n - 1;
    for (int32_t i = 0; i < n; i++) {
        cum += c[i].p;
        if (u < cum) {
            pick = i;
            break;
        }
    }
    if (logprob) *logprob = logf(c[pick].p);
    return c[pick].id;
}
