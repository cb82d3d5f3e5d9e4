/* Prefill attention of one layer, one thread: attn_partial over every item of
 * an n_ctx-token prompt (the forward pass's step 4, head-major) and
 * attn_combine (step 5), with random K and V in a paged cache. Variants are
 * token counts per item (at most ATTN_ROWS / n_rep, or past it: the heap path);
 * every round runs each variant once, in turn, so a machine whose speed drifts
 * moves them alike. Prints per variant the median and range of us per token
 * and GFLOP/s (2 x 2 x keys x head_dim per query row), and the median of the
 * per-round ratios to the first variant. Never asserts on time.
 *
 *   bench_attention [-n 512] [-T f16] [-k 8] [-r 4] [-d 64] [-b 16] [-R 15] [-v 4,8]
 *                   [-D LAYERS [-e MIB]]
 *
 * -n prompt tokens, -T KV type (f32, f16, bf16, q8_0), -k kv heads, -r query
 * heads per kv head, -d head size, -b KV block size, -R rounds, -v variants.
 * -D: decode instead (decode_bench): one token against the -n others, over
 * LAYERS layers of cache, in cache and after streaming -e MiB (default 64). */
#include "cpu/attention.h"
#include "kvcache/kv_cache.h"

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

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    const kv_cache *kv;
    const attn_kv_ops *ops;
    const int32_t *table;
    const float *q; /* (n_ctx, n_kv * n_rep * hd) */
    float *parts;   /* per kv head: tokens x heads x chunks partials */
    float *out;     /* (n_ctx, n_kv * n_rep * hd) */
    int64_t n_ctx, n_kv, n_rep, hd;
    int64_t layer;
} bench_layer;

/* Decode: the last token's attention, every kv head and chunk, as a decode
 * step runs it. */
static void run_decode(const bench_layer *L) {
    const int64_t hd = L->hd, n_rep = L->n_rep, qd = L->n_kv * n_rep * hd, pf = attn_part_floats(hd);
    const int64_t n_ch = (L->n_ctx + ATTN_CHUNK - 1) / ATTN_CHUNK, t = L->n_ctx - 1;
    const float scale = 1.0f / sqrtf((float)hd);
    const kv_layer lv = kv_layer_of(L->kv, L->layer);
    for (int64_t g = 0; g < L->n_kv; g++)
        for (int64_t c = 0; c < n_ch; c++) {
            const attn_query aq = {
                .q = L->q + t * qd + g * n_rep * hd,
                .q_tok_stride = qd,
                .n_tok = 1,
                .n_rep = n_rep,
                .pos0 = t,
                .part = L->parts + (g * n_rep * n_ch + c) * pf,
                .part_stride = n_ch * pf,
            };
            attn_partial(&lv, L->ops, L->ops, L->table, g, &aq, c * ATTN_CHUNK, scale, NULL);
        }
    for (int64_t h = 0; h < L->n_kv * n_rep; h++)
        attn_combine(L->parts + h * n_ch * pf, n_ch, pf, hd, NULL, L->out + h * hd);
}

/* One layer's attention with items of up to `tpi` tokens. Partials of token t,
 * head h, chunk c at ((g * n_ctx + t) * n_rep + r) * n_ch + c, n_ch chunks per
 * token at most (a fixed stride: simpler than the pass's packing, same work). */
static void run_layer(const bench_layer *L, int64_t tpi) {
    const int64_t hd = L->hd, n_rep = L->n_rep, qd = L->n_kv * n_rep * hd, pf = attn_part_floats(hd);
    const int64_t n_ch = (L->n_ctx + ATTN_CHUNK - 1) / ATTN_CHUNK;
    const float scale = 1.0f / sqrtf((float)hd);
    const kv_layer lv = kv_layer_of(L->kv, L->layer);
    for (int64_t g = 0; g < L->n_kv; g++)
        for (int64_t t0 = 0; t0 < L->n_ctx;) {
            /* a group: consecutive tokens inside one chunk */
            const int64_t chunk_end = (t0 / ATTN_CHUNK + 1) * ATTN_CHUNK;
            int64_t nt = tpi < L->n_ctx - t0 ? tpi : L->n_ctx - t0;
            if (t0 + nt > chunk_end) nt = chunk_end - t0;
            for (int64_t c = 0; c <= t0 / ATTN_CHUNK; c++) {
                const attn_query aq = {
                    .q = L->q + t0 * qd + g * n_rep * hd,
                    .q_tok_stride = qd,
                    .n_tok = nt,
                    .n_rep = n_rep,
                    .pos0 = t0,
                    .part = L->parts + ((g * L->n_ctx + t0) * n_rep * n_ch + c) * pf,
                    .part_stride = n_ch * pf,
                };
                attn_partial(&lv, L->ops, L->ops, L->table, g, &aq, c * ATTN_CHUNK, scale, NULL);
            }
            t0 += nt;
        }
    for (int64_t t = 0; t < L->n_ctx; t++)
        for (int64_t h = 0; h < L->n_kv * n_rep; h++)
            attn_combine(L->parts + ((h / n_rep * L->n_ctx + t) * n_rep + h % n_rep) * n_ch * pf,
                         t / ATTN_CHUNK + 1, pf, hd, NULL, L->out + t * qd + h * hd);
}

/* -D: a decode step's attention over n_layer layers (rounds of them), each
 * layer after streaming evict_mib MiB of other memory, as a decode step's
 * weights stream between its layers' attention; the same without. */
static int decode_bench(const bench_layer *L0, int64_t n_layer, int rounds, int evict_mib,
                        const char *type_name, int64_t bs) {
    const size_t ev_bytes = (size_t)evict_mib << 20;
    uint8_t *ev = ev_bytes ? malloc(ev_bytes) : NULL;
    if (ev_bytes && !ev) return 1;
    if (ev) memset(ev, 1, ev_bytes);
    double t_cold = 0, t_warm = 0, sink = 0;
    for (int r = 0; r < rounds; r++)
        for (int cold = 0; cold < 2; cold++)
            for (int64_t il = 0; il < n_layer; il++) {
                if (cold && ev)
                    for (size_t i = 0; i < ev_bytes; i += 64) sink += ev[i];
                bench_layer L = *L0;
                L.layer = il;
                const double t0 = now_s();
                run_decode(&L);
                *(cold ? &t_cold : &t_warm) += now_s() - t0;
            }
    const kv_cache *kv = L0->kv;
    const double kv_bytes = (double)((L0->n_ctx + bs - 1) / bs * bs) * (double)L0->n_kv *
                            (double)(kv->row_bytes_k + kv->row_bytes_v) * (double)n_layer;
    printf("decode attention, 1 thread: context %lld, %s KV, %lld kv heads x %lld, head %lld, block %lld, "
           "%lld layers, %d rounds (sink %g)\n",
           (long long)L0->n_ctx, type_name, (long long)L0->n_kv, (long long)L0->n_rep, (long long)L0->hd,
           (long long)bs, (long long)n_layer, rounds, sink > 0 ? 1.0 : 0.0);
    printf("| KV | us/token (all layers) | KV GB/s |\n|---|---:|---:|\n");
    printf("| warm (in cache) | %.1f | %.1f |\n", t_warm / rounds * 1e6, kv_bytes * rounds / t_warm * 1e-9);
    printf("| cold (%d MiB streamed before each layer) | %.1f | %.1f |\n", evict_mib,
           t_cold / rounds * 1e6, kv_bytes * rounds / t_cold * 1e-9);
    free(ev);
    return 0;
}

int main(int argc, char **argv) {
    int64_t n_ctx = 512, n_kv = 8, n_rep = 4, hd = 64, bs = 16;
    int rounds = 15, decode_layers = 0, evict_mib = 64;
    const char *type_name = "f16", *variants = "4,8";
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "-n")) n_ctx = atoll(v);
        else if (!strcmp(a, "-T")) type_name = v;
        else if (!strcmp(a, "-k")) n_kv = atoll(v);
        else if (!strcmp(a, "-r")) n_rep = atoll(v);
        else if (!strcmp(a, "-d")) hd = atoll(v);
        else if (!strcmp(a, "-b")) bs = atoll(v);
        else if (!strcmp(a, "-R")) rounds = atoi(v);
        else if (!strcmp(a, "-v")) variants = v;
        else if (!strcmp(a, "-D")) decode_layers = atoi(v);
        else if (!strcmp(a, "-e")) evict_mib = atoi(v);
        else {
            fprintf(stderr, "bench_attention: unknown option %s (the file's head says which)\n", a);
            return 2;
        }
    }
    vt_dtype type;
    if (!strcmp(type_name, "f32")) type = VT_DTYPE_F32;
    else if (!strcmp(type_name, "f16")) type = VT_DTYPE_F16;
    else if (!strcmp(type_name, "bf16")) type = VT_DTYPE_BF16;
    else if (!strcmp(type_name, "q8_0")) type = VT_DTYPE_Q8_0;
    else {
        fprintf(stderr, "bench_attention: -T f32, f16, bf16 or q8_0\n");
        return 2;
    }
    if (n_ctx < 1 || n_kv < 1 || n_rep < 1 || hd < 32 || hd % 32 || hd > ATTN_HEAD_DIM_MAX || bs < 1 || rounds < 1) {
        fprintf(stderr, "bench_attention: bad sizes\n");
        return 2;
    }
    int64_t tpi[16];
    int nv = 0;
    for (const char *p = variants; *p && nv < 16;) {
        tpi[nv] = atoll(p);
        if (tpi[nv] < 1) {
            fprintf(stderr, "bench_attention: -v wants token counts >= 1\n");
            return 2;
        }
        nv++;
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }

    const int64_t n_blocks = (n_ctx + bs - 1) / bs, qd = n_kv * n_rep * hd;
    const int64_t n_ch = (n_ctx + ATTN_CHUNK - 1) / ATTN_CHUNK;
    kv_cache kv;
    const int64_t n_layer = decode_layers > 0 ? decode_layers : 1;
    vt_status s = kv_cache_init(&kv, type, type, n_layer, n_kv, hd, bs, n_blocks);
    if (s) {
        fprintf(stderr, "bench_attention: %s\n", vt_last_error());
        return 1;
    }
    const attn_kv_ops *ops = attn_ops_get(type);
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    float *q = malloc(sizeof(float) * (size_t)(n_ctx * qd));
    float *row = malloc(sizeof(float) * (size_t)hd);
    float *parts = malloc(sizeof(float) * (size_t)(n_kv * n_ctx * n_rep * n_ch * attn_part_floats(hd)));
    float *out = malloc(sizeof(float) * (size_t)(n_ctx * qd));
    double *us = malloc(sizeof(double) * (size_t)(nv * rounds)), *ratio = malloc(sizeof(double) * (size_t)rounds);
    if (!table || !q || !row || !parts || !out || !us || !ratio) {
        fprintf(stderr, "bench_attention: out of memory\n");
        return 1;
    }
    uint64_t seed = 1;
    for (int64_t b = 0; b < n_blocks; b++) table[b] = (int32_t)b; /* a fresh cache's order */
    for (int64_t il = 0; il < n_layer; il++) {
        const kv_layer lv = kv_layer_of(&kv, il);
        for (int64_t p = 0; p < n_ctx; p++)
            for (int64_t g = 0; g < n_kv; g++) {
                for (int64_t j = 0; j < hd; j++) row[j] = frand(&seed);
                ops->store_k(kv_k_head(&lv, table[p / bs], g), bs, p % bs, row, hd);
                for (int64_t j = 0; j < hd; j++) row[j] = frand(&seed);
                ops->store_v(kv_v_row(&lv, table[p / bs], g, p % bs), row, hd);
            }
    }
    for (int64_t i = 0; i < n_ctx * qd; i++) q[i] = frand(&seed) * 2;
    const bench_layer L = {&kv, ops, table, q, parts, out, n_ctx, n_kv, n_rep, hd, 0};
    if (decode_layers > 0) return decode_bench(&L, n_layer, rounds, evict_mib, type_name, bs);

    for (int v = 0; v < nv; v++) run_layer(&L, tpi[v]); /* warm-up */
    for (int r = 0; r < rounds; r++)
        for (int v = 0; v < nv; v++) {
            const double t0 = now_s();
            run_layer(&L, tpi[v]);
            us[v * rounds + r] = (now_s() - t0) * 1e6 / (double)n_ctx;
        }
    /* query rows x keys seen, causal: sum over t of (t + 1) */
    const double flops = 4.0 * (double)hd * (double)(n_kv * n_rep) * (double)n_ctx * (double)(n_ctx + 1) / 2;
    printf("prefill attention, one layer, 1 thread: %lld tokens, %s KV, %lld kv heads x %lld, head %lld, "
           "block %lld, %d rounds\n",
           (long long)n_ctx, type_name, (long long)n_kv, (long long)n_rep, (long long)hd, (long long)bs, rounds);
    printf("| tokens/item | us/token median (min..max) | GFLOP/s | speed / first (median of rounds) |\n|---:|---|---:|---:|\n");
    for (int v = 0; v < nv; v++) {
        for (int r = 0; r < rounds; r++) ratio[r] = us[r] / us[v * rounds + r]; /* speed over the first */
        double lo = 1e300, hi = 0;
        for (int r = 0; r < rounds; r++) {
            const double x = us[v * rounds + r];
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
        }
        const double med = median(us + v * rounds, rounds);
        printf("| %lld | %.2f (%.2f..%.2f) | %.1f | %.3f |\n", (long long)tpi[v], med, lo, hi,
               flops / (med * 1e-6 * (double)n_ctx) * 1e-9, median(ratio, rounds));
    }
    kv_cache_free(&kv);
    free(table);
    free(q);
    free(row);
    free(parts);
    free(out);
    free(us);
    free(ratio);
    return 0;
}
