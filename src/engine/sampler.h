/* Token sampling: greedy, temperature, top-k, top-p, min-p, and repetition /
 * presence / frequency penalties over a window of recent tokens. Seeded and
 * reproducible: the same seed, logits and history give the same tokens.
 *
 * The chain runs in llama.cpp's default order: penalties, top-k, top-p, min-p,
 * temperature, then a draw from the remaining distribution. temperature <= 0 is
 * greedy (argmax after penalties).
 *
 * Cost: O(n_vocab) passes, plus a sort of the top-k (O(n_vocab log k)), or
 * without top-k of only the tokens top-p / min-p can keep, or for temperature
 * alone of one small run of tokens around the draw; the tokens are the same as
 * a sort of the whole vocabulary gives (sampler.c: "the fast chains"). */
#ifndef VT_ENGINE_SAMPLER_H
#define VT_ENGINE_SAMPLER_H

#include "vt.h"

#include <stdint.h>

typedef struct sampler_params {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off; divides positive logits, multiplies negative */
    float presence_penalty;  /* 0: off; subtracted once per seen token */
    float frequency_penalty; /* 0: off; subtracted per occurrence */
    int32_t penalty_last_n;  /* window of recent tokens the penalties look at */
    uint64_t seed;
    const vt_logit_bias *bias; /* (n_bias) added to the logits first; copied by sampler_create */
    int32_t n_bias;
} sampler_params;

typedef struct sampler sampler;

sampler_params sampler_default_params(void);
/* VT_E_RANGE names the first out-of-range parameter. */
vt_status sampler_params_check(const sampler_params *p);
vt_status sampler_create(const sampler_params *p, int32_t n_vocab, sampler **out);
void sampler_free(sampler *s);

/* Pick the next token from logits (n_vocab); does not record it. If logprob is
 * not NULL it receives the log-probability of the pick under the final
 * distribution (greedy: the full softmax). */
int32_t sampler_sample(sampler *s, const float *logits, float *logprob);
/* The same over only the tokens whose bit is set in allowed (n_vocab bits, bit i
 * of word i / 32; at least one set): the chain runs on the allowed tokens alone,
 * so the draw is from the distribution restricted to them (grammar masks). */
int32_t sampler_sample_masked(sampler *s, const float *logits, const uint32_t *allowed, float *logprob);
/* The same draw (same token, same logprob, same generator step) through a sort
 * of all the candidates where the two above skip it (no top-k): the chain as
 * first written, which their O(n_vocab) paths are tested against. allowed may
 * be NULL (sampler_sample) or a mask (sampler_sample_masked). */
int32_t sampler_sample_ref(sampler *s, const float *logits, const uint32_t *allowed, float *logprob);
/* Draws so far decided by the fast paths, and by a sort of all the candidates
 * (sampler_sample_ref's too; greedy, top-k and the masked draw without
 * truncation count in neither). For tests. */
void sampler_draw_counts(const sampler *s, int64_t *n_fast, int64_t *n_sorted);
/* Record a token (prompt or generated) in the penalty window. */
void sampler_accept(sampler *s, int32_t token);
/* Forget the history and reseed. */
void sampler_reset(sampler *s, uint64_t seed);

#endif
