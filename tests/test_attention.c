/* cpu/attention over kvcache/kv_cache: paged attention equals a contiguous f32
 * reference for every KV dtype, with a shuffled block table and contexts that
 * span several chunks; sliding windows and sinks against a dense masked softmax,
 * every SIMD tier against the scalar one.
 *
 * Bounds (NMSE over a head's outputs):
 *  - against a dense f64 softmax: per KV dtype (kv_types), the rounding of the
 *    stored K and V: f32 1e-10, f16 1e-6, bf16 and q8_0 1e-4;
 *  - every SIMD tier (cpu/attention_impl.h as x86/attn_avx2.c, x86/attn_avx512.c
 *    and arm/attn_neon.c instantiate it) against the scalar tier, its _ref twin:
 *    1e-11 (TIER_NMSE) for every dtype, window, sink, soft-cap and GQA ratio:
 *    both read the same stored values, and differ only in the order of the
 *    sums and in exp's and tanh's polynomials (a few ulp);
 *  - an item of several tokens gives each token the bits it gets alone (exact). */
#include "cpu/attention.h"
#include "kvcache/kv_cache.h"
#include "test.h"

#include <math.h>
#include <string.h>

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

/* NMSE bounds against the f32 reference, per KV dtype. */
static const struct { vt_dtype type; double bound; } kv_types[] = {
    {VT_DTYPE_F32, 1e-10}, {VT_DTYPE_F16, 1e-6}, {VT_DTYPE_BF16, 1e-4}, {VT_DTYPE_Q8_0, 1e-4}};

static void run_case(vt_dtype type, double bound, const attn_kv_ops *ops, int64_t n_ctx, int64_t n_rep,
                     int64_t hd, int64_t bs) {
    const int64_t n_kv = 2, n_blocks = (n_ctx + bs - 1) / bs + 3;
    kv_cache kv;
    CHECK_OK(kv_cache_init(&kv, type, type, 1, n_kv, hd, bs, n_blocks));
    const kv_layer lv = kv_layer_of(&kv, 0);
    /* A scrambled block table, as after many allocations and frees. */
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    uint64_t shuffle = (uint64_t)n_blocks;
    for (int64_t i = 0; i < n_blocks; i++) table[i] = (int32_t)i;
    for (int64_t i = n_blocks - 1; i > 0; i--) { /* Fisher-Yates */
        shuffle = shuffle * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t j = (int64_t)((shuffle >> 33) % (uint64_t)(i + 1));
        const int32_t tmp = table[i];
        table[i] = table[j];
        table[j] = tmp;
    }
    float *K = malloc(sizeof(float) * (size_t)(n_ctx * n_kv * hd));
    float *V = malloc(sizeof(float) * (size_t)(n_ctx * n_kv * hd));
    float *q = malloc(sizeof(float) * (size_t)(n_rep * hd));
    uint64_t seed = (uint64_t)n_ctx * 31 + (uint64_t)type;
    for (int64_t i = 0; i < n_ctx * n_kv * hd; i++) {
        K[i] = frand(&seed);
        V[i] = frand(&seed);
    }
    for (int64_t i = 0; i < n_rep * hd; i++) q[i] = frand(&seed) * 2;
    for (int64_t p = 0; p < n_ctx; p++)
        for (int64_t g = 0; g < n_kv; g++) {
            ops->store_k(kv_k_head(&lv, table[p / bs], g), bs, p % bs, K + (p * n_kv + g) * hd, hd);
            ops->store_v(kv_v_row(&lv, table[p / bs], g, p % bs), V + (p * n_kv + g) * hd, hd);
        }
    const float scale = 1.0f / sqrtf((float)hd);
    const int64_t n_ch = (n_ctx + ATTN_CHUNK - 1) / ATTN_CHUNK, pf = attn_part_floats(hd);
    float *parts = malloc(sizeof(float) * (size_t)(n_rep * n_ch * pf));
    float *out = malloc(sizeof(float) * (size_t)hd), *ref = malloc(sizeof(float) * (size_t)hd);
    double *s = malloc(sizeof(double) * (size_t)n_ctx);
    double worst = 0;
    for (int64_t g = 0; g < n_kv; g++) {
        for (int64_t c = 0; c < n_ch; c++) {
            const attn_query aq = {.q = q, .q_tok_stride = n_rep * hd, .n_tok = 1, .n_rep = n_rep,
                                   .pos0 = n_ctx - 1, .part = parts + c * pf, .part_stride = n_ch * pf};
            attn_partial(&lv, ops, ops, table, g, &aq, c * ATTN_CHUNK, scale, NULL);
        }
        for (int64_t r = 0; r < n_rep; r++) {
            attn_combine(parts + r * n_ch * pf, n_ch, pf, hd, NULL, out);
            double mx = -1e300, sum = 0;
            for (int64_t p = 0; p < n_ctx; p++) {
                double d = 0;
                for (int64_t j = 0; j < hd; j++) d += (double)q[r * hd + j] * K[(p * n_kv + g) * hd + j];
                s[p] = d * scale;
                mx = s[p] > mx ? s[p] : mx;
            }
            for (int64_t p = 0; p < n_ctx; p++) sum += (s[p] = exp(s[p] - mx));
            for (int64_t j = 0; j < hd; j++) {
                double a = 0;
                for (int64_t p = 0; p < n_ctx; p++) a += s[p] * V[(p * n_kv + g) * hd + j];
                ref[j] = (float)(a / sum);
            }
            double e = test_nmse(out, ref, hd);
            worst = e > worst ? e : worst;
        }
    }
    CHECK_MSG(worst < bound, "%s n_ctx %lld n_rep %lld head %lld block %lld: NMSE %.3g >= %.3g",
              quant_traits_get(type)->name, (long long)n_ctx, (long long)n_rep, (long long)hd,
              (long long)bs, worst, bound);
    kv_cache_free(&kv);
    free(table);
    free(K);
    free(V);
    free(q);
    free(parts);
    free(out);
    free(ref);
    free(s);
}

/* An item of several tokens gives each token the bits it gets alone: n_tok
 * tokens ending at position n_ctx - 1 (inside one chunk), q rows a token stride
 * apart, against one-token items at each position. */
static void run_group_case(vt_dtype type, const attn_kv_ops *ops, int64_t n_ctx, int64_t n_tok,
                           int64_t n_rep, int64_t hd, int64_t bs) {
    const int64_t n_blocks = (n_ctx + bs - 1) / bs, pos0 = n_ctx - n_tok;
    VT_ASSERT(pos0 / ATTN_CHUNK == (n_ctx - 1) / ATTN_CHUNK);
    kv_cache kv;
    CHECK_OK(kv_cache_init(&kv, type, type, 1, 1, hd, bs, n_blocks));
    const kv_layer lv = kv_layer_of(&kv, 0);
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    for (int64_t i = 0; i < n_blocks; i++) table[i] = (int32_t)(n_blocks - 1 - i);
    uint64_t seed = (uint64_t)(n_ctx * 7 + n_tok);
    float *row = malloc(sizeof(float) * (size_t)hd);
    for (int64_t p = 0; p < n_ctx; p++) {
        for (int64_t j = 0; j < hd; j++) row[j] = frand(&seed);
        ops->store_k(kv_k_head(&lv, table[p / bs], 0), bs, p % bs, row, hd);
        for (int64_t j = 0; j < hd; j++) row[j] = frand(&seed);
        ops->store_v(kv_v_row(&lv, table[p / bs], 0, p % bs), row, hd);
    }
    const int64_t q_stride = n_rep * hd + 5, pf = attn_part_floats(hd);
    const int64_t n_ch = (n_ctx - 1) / ATTN_CHUNK + 1;
    float *q = malloc(sizeof(float) * (size_t)(n_tok * q_stride));
    for (int64_t i = 0; i < n_tok * q_stride; i++) q[i] = frand(&seed) * 2;
    float *grp = malloc(sizeof(float) * (size_t)(n_tok * n_rep * pf));
    float *one = malloc(sizeof(float) * (size_t)(n_rep * pf));
    const float scale = 1.0f / sqrtf((float)hd);
    int64_t bad = 0;
    for (int64_t c = 0; c < n_ch; c++) {
        const attn_query aq = {.q = q, .q_tok_stride = q_stride, .n_tok = n_tok, .n_rep = n_rep,
                               .pos0 = pos0, .part = grp, .part_stride = pf};
        attn_partial(&lv, ops, ops, table, 0, &aq, c * ATTN_CHUNK, scale, NULL);
        for (int64_t i = 0; i < n_tok; i++) {
            const attn_query a1 = {.q = q + i * q_stride, .q_tok_stride = q_stride, .n_tok = 1,
                                   .n_rep = n_rep, .pos0 = pos0 + i, .part = one, .part_stride = pf};
            attn_partial(&lv, ops, ops, table, 0, &a1, c * ATTN_CHUNK, scale, NULL);
            bad += memcmp(one, grp + i * n_rep * pf, sizeof(float) * (size_t)(n_rep * pf)) != 0;
        }
    }
    CHECK_MSG(bad == 0, "%s n_ctx %lld n_tok %lld n_rep %lld head %lld block %lld: %lld tokens differ",
              quant_traits_get(type)->name, (long long)n_ctx, (long long)n_tok, (long long)n_rep,
              (long long)hd, (long long)bs, (long long)bad);
    kv_cache_free(&kv);
    free(table);
    free(row);
    free(q);
    free(grp);
    free(one);
}

/* A sliding window and a sink: n_tok tokens ending at n_ctx - 1, each through
 * the items the forward pass would make (chunks from the first the group's first
 * token sees, combined from each token's own first chunk), against a dense f64
 * softmax over the keys in (p - window, p] with the sink in the denominator;
 * and the tier's outputs against the scalar tier's, which must agree within
 * the same bound (scores of f32 keys in another summation order). */
static void run_window_case(vt_dtype type, double bound, const attn_kv_ops *ops, int64_t n_ctx,
                            int64_t n_tok, int64_t window, bool with_sink, float softcap, int64_t n_rep,
                            int64_t hd, int64_t bs, float *out_tier /* (n_tok, n_rep, hd) */) {
    const int64_t n_blocks = (n_ctx + bs - 1) / bs, pos0 = n_ctx - n_tok;
    kv_cache kv;
    CHECK_OK(kv_cache_init(&kv, type, type, 1, 1, hd, bs, n_blocks));
    const kv_layer lv = kv_layer_of(&kv, 0);
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    /* blocks wholly before every token's window are released (-1): never read */
    const int64_t first_blk = window > 0 && pos0 - window + 1 > 0 ? (pos0 - window + 1) / bs : 0;
    for (int64_t i = 0; i < n_blocks; i++) table[i] = i < first_blk ? -1 : (int32_t)(n_blocks - 1 - i);
    float *K = malloc(sizeof(float) * (size_t)(n_ctx * hd)), *V = malloc(sizeof(float) * (size_t)(n_ctx * hd));
    uint64_t seed = (uint64_t)(n_ctx * 13 + n_tok);
    for (int64_t i = 0; i < n_ctx * hd; i++) {
        K[i] = frand(&seed);
        V[i] = frand(&seed);
    }
    for (int64_t p = first_blk * bs; p < n_ctx; p++) {
        ops->store_k(kv_k_head(&lv, table[p / bs], 0), bs, p % bs, K + p * hd, hd);
        ops->store_v(kv_v_row(&lv, table[p / bs], 0, p % bs), V + p * hd, hd);
    }
    float sinks[8];
    for (int64_t r = 0; r < n_rep; r++) sinks[r] = 1.5f * frand(&seed) + 0.5f;
    const int64_t pf = attn_part_floats(hd), n_ch = (n_ctx - 1) / ATTN_CHUNK + 1;
    float *q = malloc(sizeof(float) * (size_t)(n_tok * n_rep * hd));
    for (int64_t i = 0; i < n_tok * n_rep * hd; i++) q[i] = frand(&seed) * 2;
    float *parts = malloc(sizeof(float) * (size_t)(n_tok * n_rep * n_ch * pf));
    float *ref = malloc(sizeof(float) * (size_t)hd);
    double *sc = malloc(sizeof(double) * (size_t)n_ctx);
    const float scale = 1.0f / sqrtf((float)hd);
    const attn_layer_cfg cfg = {.window = window, .softcap = softcap};
    /* items of tokens inside one chunk, as fwd_run groups them */
    for (int64_t t0 = 0; t0 < n_tok;) {
        const int64_t p_first = pos0 + t0, chunk_end = (p_first / ATTN_CHUNK + 1) * ATTN_CHUNK;
        int64_t nt = n_tok - t0 < 8 ? n_tok - t0 : 8;
        if (p_first + nt > chunk_end) nt = chunk_end - p_first;
        for (int64_t c = attn_first_chunk(p_first, window); c <= p_first / ATTN_CHUNK; c++) {
            const attn_query aq = {.q = q + t0 * n_rep * hd, .q_tok_stride = n_rep * hd, .n_tok = nt,
                                   .n_rep = n_rep, .pos0 = p_first,
                                   .part = parts + (t0 * n_rep * n_ch + c) * pf, .part_stride = n_ch * pf};
            attn_partial(&lv, ops, ops, table, 0, &aq, c * ATTN_CHUNK, scale, &cfg);
        }
        t0 += nt;
    }
    double worst = 0;
    for (int64_t i = 0; i < n_tok; i++) {
        const int64_t p = pos0 + i, lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        const int64_t c0 = attn_first_chunk(p, window), nch = p / ATTN_CHUNK + 1;
        for (int64_t r = 0; r < n_rep; r++) {
            float *out = out_tier + (i * n_rep + r) * hd;
            attn_combine(parts + ((i * n_rep + r) * n_ch + c0) * pf, nch - c0, pf, hd,
                         with_sink ? &sinks[r] : NULL, out);
            double mx = with_sink ? sinks[r] : -1e300, sum = 0;
            for (int64_t k = lo; k <= p; k++) {
                double d = 0;
                for (int64_t j = 0; j < hd; j++) d += (double)q[(i * n_rep + r) * hd + j] * K[k * hd + j];
                sc[k] = softcap > 0 ? softcap * tanh(d * scale / softcap) : d * scale;
                mx = sc[k] > mx ? sc[k] : mx;
            }
            for (int64_t k = lo; k <= p; k++) sum += (sc[k] = exp(sc[k] - mx));
            if (with_sink) sum += exp(sinks[r] - mx);
            for (int64_t j = 0; j < hd; j++) {
                double a = 0;
                for (int64_t k = lo; k <= p; k++) a += sc[k] * V[k * hd + j];
                ref[j] = (float)(a / sum);
            }
            const double e = test_nmse(out, ref, hd);
            worst = e > worst ? e : worst;
        }
    }
    CHECK_MSG(worst < bound, "%s window %lld sink %d softcap %g n_ctx %lld n_tok %lld: NMSE %.3g >= %.3g",
              quant_traits_get(type)->name, (long long)window, with_sink, softcap, (long long)n_ctx,
              (long long)n_tok, worst, bound);
    kv_cache_free(&kv);
    free(table);
    free(K);
    free(V);
    free(q);
    free(parts);
    free(ref);
    free(sc);
}

/* A window that reaches position 0 gives the bits of no window: what a SWA
 * layer with a window as long as the context relies on. */
static void check_window_neutral(const attn_kv_ops *ops) {
    const int64_t n_ctx = ATTN_CHUNK + 40, hd = 64, n_rep = 2, n_tok = 3;
    float *a = malloc(sizeof(float) * (size_t)(n_tok * n_rep * hd));
    float *b = malloc(sizeof(float) * (size_t)(n_tok * n_rep * hd));
    run_window_case(VT_DTYPE_F16, 1e-6, ops, n_ctx, n_tok, 0, false, 0.0f, n_rep, hd, 16, a);
    run_window_case(VT_DTYPE_F16, 1e-6, ops, n_ctx, n_tok, n_ctx, false, 0.0f, n_rep, hd, 16, b);
    CHECK(memcmp(a, b, sizeof(float) * (size_t)(n_tok * n_rep * hd)) == 0);
    free(a);
    free(b);
}

/* Every SIMD tier against the scalar tier (their _ref twin), output for output:
 * GQA ratios 1 to 8, head sizes with and without vector tails (odd ones for the
 * float types, 128: the constant-size paths), 24-slot blocks (keys a vector
 * cannot reach without leaving the block: the partial vectors), windows that
 * start inside a block, a sink and a soft-cap alone and together (each case
 * one of the four, in turn), one token and items of several. Bound: TIER_NMSE. */
#define TIER_NMSE 1e-11
static double worst_tier_nmse;

static void check_tier_case(vt_dtype type, double bound, const attn_kv_ops *const *tiers, int n_tiers, int64_t n_ctx,
                            int64_t n_tok, int64_t window, bool sink, float softcap, int64_t n_rep, int64_t hd,
                            int64_t bs) {
    const size_t n_out = (size_t)(n_tok * n_rep * hd);
    float *ref_out = malloc(sizeof(float) * n_out), *tier_out = malloc(sizeof(float) * n_out);
    run_window_case(type, bound, tiers[0], n_ctx, n_tok, window, sink, softcap, n_rep, hd, bs, ref_out);
    for (int tier = 1; tier < n_tiers; tier++) {
        run_window_case(type, bound, tiers[tier], n_ctx, n_tok, window, sink, softcap, n_rep, hd, bs, tier_out);
        const double e = test_nmse(tier_out, ref_out, (int64_t)n_out);
        worst_tier_nmse = e > worst_tier_nmse ? e : worst_tier_nmse;
        CHECK_MSG(e < TIER_NMSE, "%s tier %d n_ctx %lld n_tok %lld window %lld sink %d softcap %g n_rep %lld head %lld "
                  "block %lld: NMSE %.3g against the scalar tier",
                  quant_traits_get(type)->name, tier, (long long)n_ctx, (long long)n_tok, (long long)window, sink,
                  softcap, (long long)n_rep, (long long)hd, (long long)bs, e);
    }
    free(ref_out);
    free(tier_out);
}

static void check_tiers(vt_dtype type, double bound, const attn_kv_ops *const *tiers, int n_tiers) {
    const bool q8 = type == VT_DTYPE_Q8_0;
    const int64_t heads[] = {64, 128, q8 ? 96 : 45};
    static const struct { int64_t n_ctx, n_tok, window; } shapes[] = {
        {1, 1, 0}, {50, 1, 0}, {ATTN_CHUNK + 21, 1, 0}, {ATTN_CHUNK + 21, 1, 29}, {70, 9, 0}, {90, 7, 21},
    };
    for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++)
        for (int64_t n_rep = 1; n_rep <= 8; n_rep *= 2)
            for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
                /* plain, sink, soft-cap, both: each shape and ratio one of them, in turn */
                const int variant = (int)((k + (size_t)n_rep + h) % 4);
                check_tier_case(type, bound, tiers, n_tiers, shapes[k].n_ctx, shapes[k].n_tok, shapes[k].window,
                                variant & 1, variant & 2 ? 0.7f : 0.0f, n_rep, heads[h], k % 2 ? 24 : 16);
            }
}

static void test_block_pool(void) {
    kv_cache kv;
    CHECK_OK(kv_cache_init(&kv, VT_DTYPE_F16, VT_DTYPE_F16, 2, 2, 64, 16, 4));
    int32_t a = kv_block_alloc(&kv), b = kv_block_alloc(&kv), c = kv_block_alloc(&kv), d = kv_block_alloc(&kv);
    CHECK(a >= 0 && b >= 0 && c >= 0 && d >= 0 && a != b && c != d);
    CHECK_EQ_INT(kv_block_alloc(&kv), -1);
    kv_block_retain(&kv, b);
    CHECK_EQ_INT(kv_block_release(&kv, b), 1);
    CHECK_EQ_INT(kv_pool0(&kv)->n_free, 0);
    CHECK_EQ_INT(kv_block_release(&kv, b), 0);
    CHECK_EQ_INT(kv_pool0(&kv)->n_free, 1);
    CHECK_EQ_INT(kv_block_alloc(&kv), b);
    kv_cache_free(&kv);
    /* Q8_0 needs head sizes in multiples of 32. */
    CHECK(kv_cache_init(&kv, VT_DTYPE_Q8_0, VT_DTYPE_Q8_0, 1, 1, 40, 16, 4) == VT_E_UNSUPPORTED);
}

int main(void) {
    test_block_pool();
    const int64_t ctxs[] = {1, 17, ATTN_CHUNK - 1, ATTN_CHUNK, ATTN_CHUNK + 1, 2 * ATTN_CHUNK + 188};
    for (size_t t = 0; t < sizeof kv_types / sizeof kv_types[0]; t++) {
        /* every tier this CPU has (x86: ref, avx2, avx512; aarch64: ref, neon) */
        const attn_kv_ops *tiers[8];
        int n_tiers = 0;
        tiers[n_tiers++] = attn_ops_get_ref(kv_types[t].type);
        for (int isa = CPU_ISA_AVX2; isa <= (int)cpu_isa_detected(); isa++) {
            const attn_kv_ops *o = attn_ops_get_isa(kv_types[t].type, (cpu_isa)isa);
            bool seen = false;
            for (int i = 0; i < n_tiers; i++) seen = seen || tiers[i] == o;
            if (!seen && n_tiers < 8) tiers[n_tiers++] = o;
        }
        CHECK(attn_ops_get(kv_types[t].type) == tiers[n_tiers - 1] || getenv("VT_ISA"));
        for (int tier = 0; tier < n_tiers; tier++)
            for (size_t c = 0; c < sizeof ctxs / sizeof ctxs[0]; c++)
                for (int64_t rep = 1; rep <= 4; rep *= 4) {
                    run_case(kv_types[t].type, kv_types[t].bound, tiers[tier], ctxs[c], rep, 64, 16);
                    /* blocks that chunks cut in the middle, odd head counts and (for
                     * the float types) a head size with a scalar tail */
                    const int64_t hd = kv_types[t].type == VT_DTYPE_Q8_0 ? 96 : 44;
                    run_case(kv_types[t].type, kv_types[t].bound, tiers[tier], ctxs[c], rep + 2, hd, 24);
                }
        /* groups of tokens: every tier, one and several chunks, ragged tails */
        for (int tier = 0; tier < n_tiers; tier++) {
            const int64_t hd = kv_types[t].type == VT_DTYPE_Q8_0 ? 96 : 44;
            run_group_case(kv_types[t].type, tiers[tier], 16, 16, 1, 64, 16);
            run_group_case(kv_types[t].type, tiers[tier], 37, 4, 4, 64, 16);
            run_group_case(kv_types[t].type, tiers[tier], ATTN_CHUNK + 44, 5, 3, hd, 24);
            run_group_case(kv_types[t].type, tiers[tier], 2 * ATTN_CHUNK + 88, 2, 8, 64, 16);
            run_group_case(kv_types[t].type, tiers[tier], 2 * ATTN_CHUNK + 28, 20, 1, hd, 16);
            /* more rows than ATTN_ROWS, q rows past the stack buffer: the heap paths */
            run_group_case(kv_types[t].type, tiers[tier], 2 * ATTN_CHUNK + 28, 20, 3, 96, 16);
        }
        /* sliding windows (inside a block, across blocks and chunks, past the
         * start), sinks and soft-capped scores: every tier against the dense reference and against
         * the scalar tier */
        {
            static const struct { int64_t n_ctx, n_tok, window, bs; } wc[] = {
                {40, 1, 1, 16},  {40, 4, 5, 16},   {100, 20, 17, 16},  {3 * ATTN_CHUNK + 7, 9, 300, 16},
                {ATTN_CHUNK + 5, 12, ATTN_CHUNK, 24}, {2 * ATTN_CHUNK + 3, 6, 64, 16}, {30, 30, 8, 16},
            };
            const int64_t hd = kv_types[t].type == VT_DTYPE_Q8_0 ? 96 : 44, n_rep = 3;
            for (size_t k = 0; k < sizeof wc / sizeof wc[0]; k++)
                for (int variant = 0; variant < 3; variant++) { /* plain, a sink, scores soft-capped at 0.5 */
                    const bool sink = variant == 1;
                    const float softcap = variant == 2 ? 0.5f : 0.0f;
                    const size_t n_out = (size_t)(wc[k].n_tok * n_rep * hd);
                    float *ref_out = malloc(sizeof(float) * n_out), *tier_out = malloc(sizeof(float) * n_out);
                    for (int tier = 0; tier < n_tiers; tier++) {
                        run_window_case(kv_types[t].type, kv_types[t].bound, tiers[tier], wc[k].n_ctx,
                                        wc[k].n_tok, wc[k].window, sink, softcap, n_rep, hd, wc[k].bs,
                                        tier ? tier_out : ref_out);
                        if (tier)
                            CHECK_MSG(test_nmse(tier_out, ref_out, (int64_t)n_out) < kv_types[t].bound,
                                      "%s tier %d window %lld: against the scalar tier",
                                      quant_traits_get(kv_types[t].type)->name, tier, (long long)wc[k].window);
                    }
                    free(ref_out);
                    free(tier_out);
                }
        }
        if (kv_types[t].type == VT_DTYPE_F16)
            for (int tier = 0; tier < n_tiers; tier++) check_window_neutral(tiers[tier]);
        check_tiers(kv_types[t].type, kv_types[t].bound, tiers, n_tiers);
    }
    printf("  every SIMD tier against the scalar tier: worst NMSE %.3g (bound %g)\n", worst_tier_nmse, TIER_NMSE);
    return test_finish();
}
