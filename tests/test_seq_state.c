/* vt_seq_state_{size,get,set} (vt.h): a sequence's state saved after a prompt
 * and restored continues bit for bit as the original does, on every kind of
 * cache a model has:
 *   - llama (one full-attention group), F16 and Q8_0 K/V;
 *   - gemma3 with a sliding window of W (a full group and a SWA group whose
 *     early blocks the window has released: they are not in the state, and
 *     restoring does not need them);
 *   - qwen35 and qwen35moe (full attention and the recurrent state of the
 *     linear layers, which vt_seq_keep cannot take back).
 * For each: the logits of the next tokens after a restore, into another
 * sequence of another context and into the same sequence (a rewind), equal
 * those of the original continuation (memcmp); a restored state saves to the
 * same bytes; the cache holds no block after the sequences are cleared.
 * Bad states: a truncated or foreign buffer, another model's, another
 * kv_block's, a buffer too small to save into, a sequence out of range; each a
 * clear error that leaves the sequence as it was. */
#include "engine_util.h"
#include "test.h"
#include "vt.h"

#include "engine/context.h"
#include "kvcache/kv_cache.h"
#include "model/synth.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_PROMPT = 100, N_NEXT = 12, N_CTX = 256, BS = 16, W = 32 };

/* head_dim: Q8_0 K/V rows are whole blocks of 32 */
static synth_params small_params(const char *arch, int64_t head_dim) {
    synth_params sp = synth_default_params();
    sp.arch = arch;
    sp.n_layer = 4;
    sp.n_embd = 64;
    sp.n_head = 4;
    sp.n_head_kv = 2;
    sp.head_dim = head_dim;
    sp.n_ff = 96;
    sp.n_ctx = N_CTX;
    sp.n_threads = 1;
    sp.seed = 11;
    if (!strcmp(arch, "gemma3")) { /* 5 sliding layers to 1 global */
        sp.n_layer = 6;
        sp.n_swa = W;
        sp.swa_pattern = 6;
        sp.rope_freq_base = 1e6f;
        sp.rope_freq_base_swa = 10000.0f;
    }
    if (!strcmp(arch, "qwen35") || !strcmp(arch, "qwen35moe")) sp.full_attn_interval = 2;
    if (!strcmp(arch, "qwen35moe")) {
        sp.n_expert = 8;
        sp.n_expert_used = 2;
        sp.n_ff_exp = 32;
        sp.n_ff_shexp = 64;
    }
    return sp;
}

static vt_context *make_context(vt_model *m, int32_t n_seq, int32_t kv_block, vt_kv_type kv) {
    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_seq = n_seq;
    cp.n_batch = 48; /* the prompt in three passes */
    cp.n_threads = 2;
    cp.kv_block = kv_block;
    cp.type_k = cp.type_v = kv;
    vt_context *c = NULL;
    CHECK_OK(vt_context_create(m, &cp, &c));
    return c;
}

/* Tokens toks[0..n) into sequence seq of c, from position pos on, one batch. */
static void feed(vt_context *c, int32_t seq, const int32_t *toks, int32_t n, int32_t pos) {
    int32_t p[N_PROMPT], s[N_PROMPT];
    for (int32_t i = 0; i < n; i++) p[i] = pos + i, s[i] = seq;
    vt_batch b = {.n_tokens = n, .token = toks, .pos = p, .seq = s};
    CHECK_OK(vt_decode(c, &b));
}

/* The logits of next[0..N_NEXT), one token a call, sequence seq from position pos. */
static void continue_logits(vt_context *c, int32_t seq, const int32_t *next, int32_t pos, int32_t nv, float *out) {
    for (int32_t i = 0; i < N_NEXT; i++) {
        feed(c, seq, next + i, 1, pos + i);
        const float *l = vt_get_logits(c, 0);
        CHECK(l != NULL);
        if (l) memcpy(out + (size_t)i * (size_t)nv, l, sizeof(float) * (size_t)nv);
    }
}

static void check_all_free(vt_context *c) {
    const kv_cache *kv = context_kv(c);
    for (int32_t g = 0; g < kv->n_groups; g++)
        if (kv->groups[g].spec.kind != KV_GROUP_STATE)
            CHECK_EQ_INT(kv->groups[g].pool.n_free, kv->groups[g].pool.n_blocks);
}

static void test_roundtrip(const char *arch, vt_kv_type kv) {
    printf("%s, K/V type %d\n", arch, (int)kv);
    const synth_params sp = small_params(arch, kv == VT_KV_Q8_0 ? 32 : 16);
    vt_model *m = test_synth_load(&sp, NULL);
    if (!m) return;
    const int32_t nv = vt_model_n_vocab(m);
    int32_t toks[N_PROMPT + N_NEXT];
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (int32_t i = 0; i < N_PROMPT + N_NEXT; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((r >> 33) % (uint64_t)nv);
    }
    const int32_t *next = toks + N_PROMPT;
    float *want = malloc(sizeof(float) * (size_t)N_NEXT * (size_t)nv);
    float *got = malloc(sizeof(float) * (size_t)N_NEXT * (size_t)nv);

    vt_context *a = make_context(m, 1, BS, kv), *b = make_context(m, 2, BS, kv);
    if (!a || !b) goto done;
    feed(a, 0, toks, N_PROMPT, 0);
    const size_t size = vt_seq_state_size(a, 0);
    CHECK(size > 0);
    uint8_t *state = malloc(size), *again = malloc(size);
    CHECK_OK(vt_seq_state_get(a, 0, state, size));
    continue_logits(a, 0, next, N_PROMPT, nv, want);

    /* into sequence 1 of another context, whose sequence 0 holds another prompt */
    feed(b, 0, toks + 7, 60, 0);
    CHECK_OK(vt_seq_state_set(b, 1, state, size));
    CHECK_EQ_INT(vt_seq_len(b, 1), N_PROMPT);
    CHECK(vt_seq_state_size(b, 1) == size);
    CHECK_OK(vt_seq_state_get(b, 1, again, size));
    CHECK_MSG(memcmp(state, again, size) == 0, "%s: a restored state saves to other bytes", arch);
    continue_logits(b, 1, next, N_PROMPT, nv, got);
    CHECK_MSG(memcmp(want, got, sizeof(float) * (size_t)N_NEXT * (size_t)nv) == 0,
              "%s: logits after a restore into another context differ", arch);

    /* back into the sequence it came from: a rewind past the continuation */
    CHECK_OK(vt_seq_state_set(a, 0, state, size));
    CHECK_EQ_INT(vt_seq_len(a, 0), N_PROMPT);
    continue_logits(a, 0, next, N_PROMPT, nv, got);
    CHECK_MSG(memcmp(want, got, sizeof(float) * (size_t)N_NEXT * (size_t)nv) == 0,
              "%s: logits after a rewind by state differ", arch);

    /* bad states leave the sequence as it was */
    const int32_t len = vt_seq_len(a, 0);
    CHECK_EQ_INT(vt_seq_state_set(a, 0, state, size - 1), VT_E_FORMAT);
    CHECK_EQ_INT(vt_seq_state_set(a, 0, state, 16), VT_E_FORMAT);
    uint8_t bad[64] = {0};
    CHECK_EQ_INT(vt_seq_state_set(a, 0, bad, sizeof bad), VT_E_FORMAT);
    CHECK_EQ_INT(vt_seq_state_get(a, 0, again, vt_seq_state_size(a, 0) - 1), VT_E_RANGE);
    CHECK_EQ_INT(vt_seq_state_set(a, 1, state, size), VT_E_RANGE);
    CHECK_EQ_INT(vt_seq_state_size(a, 1), 0);
    CHECK_EQ_INT(vt_seq_len(a, 0), len);
    vt_context *other_block = make_context(m, 1, 2 * BS, kv);
    if (other_block) {
        CHECK_EQ_INT(vt_seq_state_set(other_block, 0, state, size), VT_E_INVALID);
        CHECK_EQ_INT(vt_seq_len(other_block, 0), 0);
        vt_context_free(other_block);
    }
    synth_params sp2 = sp;
    sp2.n_layer += 2; /* the same family, two more layers */
    vt_model *m2 = test_synth_load(&sp2, NULL);
    vt_context *other_model = m2 ? make_context(m2, 1, BS, kv) : NULL;
    if (other_model) {
        CHECK_EQ_INT(vt_seq_state_set(other_model, 0, state, size), VT_E_INVALID);
        vt_context_free(other_model);
    }
    vt_model_free(m2);

    vt_seq_clear(a, 0);
    vt_seq_clear(b, 0);
    vt_seq_clear(b, 1);
    check_all_free(a);
    check_all_free(b);
    free(state), free(again);
done:
    vt_context_free(a);
    vt_context_free(b);
    free(want), free(got);
    vt_model_free(m);
}

int main(void) {
    test_roundtrip("llama", VT_KV_F16);
    test_roundtrip("llama", VT_KV_Q8_0);
    test_roundtrip("gemma3", VT_KV_F16);
    test_roundtrip("qwen35", VT_KV_F16);
    test_roundtrip("qwen35moe", VT_KV_Q8_0);
    return test_finish();
}
