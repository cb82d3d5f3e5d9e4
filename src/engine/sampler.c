#include "engine/sampler.h"

#include "base/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The fast chains bucket a softmax numerator e = expf((logit - max) / temp), in
 * [0, 1], by the top bits of its float (exponent and 5 mantissa bits: 32 buckets
 * an octave). The bucket is monotone in e, and e in the logit, so the buckets
 * taken from the top cut the sorted candidates into consecutive runs. */
#define EB_SHIFT 18
#define EB_N ((0x3f800000u >> EB_SHIFT) + 1)

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
    double emass[EB_N];       /* the fast chains' sums of softmax numerators, by e_bucket */
    int64_t n_fast, n_sorted; /* draws the fast chains decided, draws through the full sort */
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

/* The softmax numerator of a logit; the fast chains and the sorted one share it
 * so that they compute the same floats. */
static inline float soft_num(float logit, float mx, float temp) { return expf((logit - mx) / temp); }

/* c[i].p = the numerator of each of c[0..n) (max logit mx); returns their sum,
 * added in c's order. */
static double soft_nums(cand *c, int32_t n, float mx, float temp) {
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        c[i].p = soft_num(c[i].logit, mx, temp);
        sum += c[i].p;
    }
    return sum;
}

/* The first i where the running sum of c[0..n).p (in c's order) passes u; n - 1
 * where rounding leaves the total at or below u. */
static int32_t cum_pick(const cand *c, int32_t n, double u) {
    double cum = 0;
    for (int32_t i = 0; i < n; i++) {
        cum += c[i].p;
        if (u < cum) return i;
    }
    return n - 1;
}

/* p = softmax(logit / temp) over c[0..n), returns nothing; c sorted desc. */
static void softmax(cand *c, int32_t n, float temp) {
    const double sum = soft_nums(c, n, c[0].logit, temp);
    for (int32_t i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
}

/* Draw with u in [0, 1) from softmax(logit / temp) over the sorted c[0..n). */
static int32_t draw_sorted(cand *c, int32_t n, float temp, double u, float *logprob) {
    softmax(c, n, temp);
    const int32_t pick = cum_pick(c, n, u);
    if (logprob) *logprob = logf(c[pick].p);
    return c[pick].id;
}

/* The chain as first written (the specification of the fast ones): sort the
 * candidates (the best n, n < n_c for top-k), top-p and min-p on their softmax,
 * then the draw over what is left. */
static int32_t chain_sorted(const sampler_params *p, cand *c, int32_t n_c, int32_t n, double u, float *logprob) {
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
    return draw_sorted(c, n, p->temperature, u, logprob);
}

/* ---- the fast chains -----------------------------------------------------------
 * Without top-k the sorted chain sorts every candidate (the whole vocabulary).
 * The fast chains get the same token, the same logprob, from O(n) passes and a
 * sort of only the candidates the draw can reach:
 *   1. one pass: the max logit; one pass: each numerator e (soft_num, as the
 *      sorted chain computes it), their sum S and the mass of each e_bucket;
 *   2. from the bucket masses, a cut: the buckets above it hold the tokens that
 *      can survive top-p / min-p, or (temperature alone) the run of buckets where
 *      the cumulative probability crosses u;
 *   3. those tokens are moved to the front and sorted; the sorted chain's
 *      decisions are replayed on them.
 * What keeps the result exact is S. The sorted chain sums the numerators in
 * sorted order, the fast one in id order: the two doubles can differ in their
 * last bits, and a probability (float)(e / S) by one float ulp. Both sums lie
 * within a relative 2 n 2^-53 of the true one, so the sorted chain's S lies in
 * [s_lo, s_hi] around ours. Every decision of the chain is monotone in S (a
 * larger S gives smaller probabilities, smaller cumulative sums: top-p keeps
 * more, the draw lands later; min-p with its floor fixed keeps fewer), so a
 * decision that comes out the same at s_lo and at s_hi is the sorted chain's.
 * Where it does not (about one draw in a thousand at the worst), or an
 * assumption below fails, the fast chain returns -1 and the sorted chain runs
 * on the same u: the tokens drawn are always the sorted chain's.
 * The temperature-only draw sums the probabilities of the tokens above the
 * crossing run in id order too: it asks that each of them be at least 2^-30 (a
 * float that is a multiple of 2^-53) and their total below 1, which makes every
 * partial sum exact in double, in any order. */

static inline uint32_t e_bucket(float e) {
    uint32_t b;
    memcpy(&b, &e, sizeof b);
    return b >> EB_SHIFT;
}

/* The smallest e of bucket b. */
static inline float e_bucket_floor(uint32_t b) {
    const uint32_t bits = b << EB_SHIFT;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Step 1 over c[0..n_c): c[i].p = e, *sum, s->emass. False (the sorted chain
 * then) for a NaN logit or a max that is not finite. */
static bool numerators(sampler *s, cand *c, int32_t n_c, float temp, double *sum) {
    float mx = -INFINITY;
    bool nan = false;
    for (int32_t i = 0; i < n_c; i++) {
        nan |= c[i].logit != c[i].logit;
        mx = c[i].logit > mx ? c[i].logit : mx;
    }
    if (nan || !isfinite(mx)) return false;
    memset(s->emass, 0, sizeof s->emass);
    double acc = 0;
    for (int32_t i = 0; i < n_c; i++) {
        const float e = soft_num(c[i].logit, mx, temp);
        c[i].p = e;
        acc += e;
        s->emass[e_bucket(e)] += e;
    }
    *sum = acc;
    return true;
}

/* [s_lo, s_hi] holds every order's double sum of the n_c numerators of sum. */
static void sum_bounds(double sum, int32_t n_c, double *s_lo, double *s_hi) {
    const double rel = 4.0 * ((double)n_c + 1.0) * 0x1p-53;
    *s_lo = sum * (1.0 - rel);
    *s_hi = sum * (1.0 + rel);
}

#define KEEP_PAST INT32_MAX /* the cut falls past the head: not decided within it */

typedef struct cut_eval {
    int32_t keep_p, keep_m; /* top-p's and min-p's counts, or KEEP_PAST */
    float floor_p;          /* min-p's floor */
} cut_eval;

/* The sorted chain's top-p and min-p over the sorted head c[0..n_h) (numerators
 * in p) under the normaliser S. below: every token past the head has e < below. */
static cut_eval cut_at(const sampler_params *p, const cand *c, int32_t n_h, float below, double S) {
    cut_eval r = {KEEP_PAST, KEEP_PAST, 0.0f};
    if (p->top_p < 1.0f) {
        double cum = 0;
        for (int32_t i = 0; i < n_h; i++) {
            cum += (float)(c[i].p / S);
            if (cum >= p->top_p) {
                r.keep_p = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) {
        r.floor_p = p->min_p * (float)(c[0].p / S);
        int32_t keep = 1;
        while (keep < n_h && (float)(c[keep].p / S) >= r.floor_p) keep++;
        if (keep < n_h) r.keep_m = keep;
        else if ((float)(below / S) < r.floor_p) r.keep_m = n_h; /* every token past the head fails */
    }
    return r;
}

/* Top-p and/or min-p (no top-k): the sorted chain's pick, or -1. */
static int32_t chain_cut_fast(sampler *s, cand *c, int32_t n_c, double u, float *logprob) {
    const sampler_params *p = &s->p;
    double sum, s_lo, s_hi;
    if (!numerators(s, c, n_c, 1.0f, &sum)) return -1;
    sum_bounds(sum, n_c, &s_lo, &s_hi);
    /* the cut: top-p's mass reached with a margin, or min-p's floor passed */
    const double need = p->top_p < 1.0f ? (double)p->top_p * sum * (1.0 + 1e-5) : INFINITY;
    const double floor_e = p->min_p > 0.0f ? (double)p->min_p * (1.0 - 1e-5) : -1.0;
    uint32_t cut = 0;
    double acc = 0;
    for (uint32_t b = EB_N; b-- > 0;) {
        acc += s->emass[b];
        if (acc >= need || (double)e_bucket_floor(b) < floor_e) {
            cut = b;
            break;
        }
    }
    if (cut == 0) return -1; /* everything: the sorted chain is as quick */
    int32_t n_h = 0;
    for (int32_t i = 0; i < n_c; i++) {
        if (e_bucket(c[i].p) >= cut) {
            const cand t = c[n_h];
            c[n_h++] = c[i];
            c[i] = t;
        }
    }
    if (n_h == n_c) return -1;
    qsort(c, (size_t)n_h, sizeof(cand), cand_desc);
    const float below = e_bucket_floor(cut);
    const cut_eval a = cut_at(p, c, n_h, below, s_lo), b = cut_at(p, c, n_h, below, s_hi);
    if (a.keep_p != b.keep_p || a.keep_m != b.keep_m || a.floor_p != b.floor_p) return -1;
    const int32_t n = a.keep_p < a.keep_m ? a.keep_p : a.keep_m;
    if (n > n_h) return -1;
    return draw_sorted(c, n, p->temperature, u, logprob);
}

/* The draw's position in the sorted run c[0..n_r) that follows tokens of total
 * probability head, under the normaliser S; -1 if it falls past the run. */
static int32_t run_pick(const cand *c, int32_t n_r, double head, double S, double u, float *p_pick) {
    double cum = head;
    for (int32_t k = 0; k < n_r; k++) {
        const float pk = (float)(c[k].p / S);
        cum += pk;
        if (u < cum) {
            *p_pick = pk;
            return k;
        }
    }
    return -1;
}

/* Temperature alone (no top-k, top-p, min-p): the sorted chain's pick, or -1. */
static int32_t draw_fast(sampler *s, cand *c, int32_t n_c, double u, float *logprob) {
    double sum, s_lo, s_hi;
    if (!numerators(s, c, n_c, s->p.temperature, &sum)) return -1;
    sum_bounds(sum, n_c, &s_lo, &s_hi);
    /* the run of buckets [b_lo, b_hi] where the cumulative probability crosses
     * u, with a margin for the float rounding of each probability */
    const double margin = 1e-6;
    uint32_t b_hi = EB_N, b_lo = 0;
    double acc = 0;
    for (uint32_t b = EB_N; b-- > 0;) {
        acc += s->emass[b];
        if (b_hi == EB_N && acc >= (u - margin) * sum) b_hi = b;
        if (acc > (u + margin) * sum) {
            b_lo = b;
            break;
        }
    }
    if (b_hi == EB_N) return -1;
    /* the tokens above the run must give exact sums (see above) */
    if (b_hi + 1 < EB_N && !((float)(e_bucket_floor(b_hi + 1) / s_hi) >= 0x1p-30f)) return -1;
    double head_lo = 0, head_hi = 0; /* their probabilities' total under s_lo, under s_hi */
    int32_t n_r = 0;
    for (int32_t i = 0; i < n_c; i++) {
        const uint32_t b = e_bucket(c[i].p);
        if (b > b_hi) {
            head_lo += (float)(c[i].p / s_lo);
            head_hi += (float)(c[i].p / s_hi);
        } else if (b >= b_lo) {
            const cand t = c[n_r];
            c[n_r++] = c[i];
            c[i] = t;
        }
    }
    if (!(head_lo < 1.0) || !(head_lo <= u)) return -1; /* inexact, or the pick may be above the run */
    qsort(c, (size_t)n_r, sizeof(cand), cand_desc);
    float p_lo = 0, p_hi = 0;
    const int32_t k = run_pick(c, n_r, head_lo, s_lo, u, &p_lo);
    if (k < 0 || run_pick(c, n_r, head_hi, s_hi, u, &p_hi) != k) return -1;
    if (logprob) {
        if (p_lo != p_hi) return -1;
        *logprob = logf(p_lo);
    }
    return c[k].id;
}

static int32_t sample_impl(sampler *s, const float *logits, const uint32_t *allowed, float *logprob, bool sorted);

int32_t sampler_sample(sampler *s, const float *logits, float *logprob) {
    return sample_impl(s, logits, NULL, logprob, false);
}

int32_t sampler_sample_masked(sampler *s, const float *logits, const uint32_t *allowed, float *logprob) {
    return sample_impl(s, logits, allowed, logprob, false);
}

int32_t sampler_sample_ref(sampler *s, const float *logits, const uint32_t *allowed, float *logprob) {
    return sample_impl(s, logits, allowed, logprob, true);
}

void sampler_draw_counts(const sampler *s, int64_t *n_fast, int64_t *n_sorted) {
    *n_fast = s->n_fast;
    *n_sorted = s->n_sorted;
}

static inline bool allowed_bit(const uint32_t *a, int32_t i) { return !a || ((a[i >> 5] >> (i & 31)) & 1); }

static int32_t sample_impl(sampler *s, const float *logits, const uint32_t *allowed, float *logprob, bool sorted) {
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
    /* the chain's one draw; nothing else reads the generator, so taking it first
     * changes no value */
    const double u = rng_uniform(s->rng);
    if (allowed && (p->top_k <= 0 || p->top_k >= n_c) && p->top_p >= 1.0f && p->min_p <= 0.0f) {
        /* nothing truncates: draw over the allowed tokens as they are, unsorted */
        float mx = c[0].logit;
        for (int32_t i = 1; i < n_c; i++) mx = c[i].logit > mx ? c[i].logit : mx;
        const double sum = soft_nums(c, n_c, mx, p->temperature);
        int32_t pick = cum_pick(c, n_c, u * sum);
        while (pick > 0 && c[pick].p == 0.0f) pick--; /* rounding past the end: never a zero */
        if (logprob) *logprob = logf((float)(c[pick].p / sum));
        return c[pick].id;
    }
    const int32_t n = p->top_k > 0 && p->top_k < n_c ? p->top_k : n_c;
    if (!sorted && n == n_c) {
        const int32_t pick = p->top_p < 1.0f || p->min_p > 0.0f ? chain_cut_fast(s, c, n_c, u, logprob)
                                                                 : draw_fast(s, c, n_c, u, logprob);
        if (pick >= 0) {
            s->n_fast++;
            return pick;
        }
    }
    if (n == n_c) s->n_sorted++;
    return chain_sorted(p, c, n_c, n, u, logprob);
}
