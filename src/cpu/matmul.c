/* Matrix multiplication in the quantized domain (see matmul.h).
 *
 * Layouts. Where the dispatch table has a packed GEMM for the weight type
 * (cpu/pack.h), mm_weight_prepare copies the rows into groups of 16 rows
 * interleaved in 4-byte chunks; a group is one sequential stream, so decode
 * runs at memory bandwidth, and the GEMM keeps one accumulator lane per row
 * for up to PACK_TOK_MAX tokens at a time (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4,
 * Q4_K, Q5_K, Q6_K on AVX2, AVX-512 and NEON dotprod; pack.h lists the kernels). Other types, and those
 * tiers without a packed kernel (ref, plain NEON), keep the file layout and the
 * dot_rows kernels.
 *
 * Work split. Outputs are cut among threads in units of 16 rows (a packed group
 * or a file-layout tile); with several weights (mm_compute_multi) their units
 * are concatenated first, so one split and one barrier cover Q/K/V together.
 * Each thread owns a static share (tp_range), taken item by item: front to back
 * by its owner, from the back by a thread out of work (tp_take), so a thread
 * that loses its core for a while does not hold the step. In decode a share's
 * items are a few contiguous runs of units that halve toward its end (see
 * split_units): the owner streams long runs of weights, a thief takes small
 * last pieces. In prefill an item is a chunk of units against a token block
 * (see take_items).
 * Packed prefill is blocked for the caches: a block of tokens (its activation
 * rows and their pack_xblocks stay in L2) against a chunk of groups (~160 KiB of
 * weights, reused from L2 by every 4-token tile). mm_compute_glu runs gate and up
 * that way span by span into two small buffers and finishes h there (SiLU, then
 * the quantization for the down projection): the split it replaced wrote both
 * outputs to memory (32 MiB a layer at 512 tokens) for a second step to read.
 * File-layout tiles are MM_ROW_TILE rows x MM_TOK_TILE tokens; within a tile, groups of
 * CPU_DOT_ROWS_MAX weight rows share each activation load (dot_rows).
 *
 * Determinism. Every output is computed by one kernel whose float steps do not
 * depend on the tile, the chunk or the thread (packed: per-row lanes, blocks in
 * order; file layout: dot_rows is bit-identical with dot), and which kernel
 * computes a row depends only on the weight, so results are the same for any
 * thread count and any number of tokens in the step. The kernel is looked up
 * once per call, outside all loops. */
#include "cpu/matmul.h"

#include "base/hugemem.h"
#include "base/log.h"
#include "base/size.h"
#include "cpu/kernels.h"
#include "cpu/pack.h"
#include "cpu/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MM_ROW_TILE 16
#define MM_TOK_TILE 4
/* Activation rows are padded to a cache line so rows never share one. */
#define MM_ACT_ALIGN 64
/* Packed prefill blocking: weight bytes per chunk of groups, activation bytes
 * and pack_xblocks per token block. The token block is small (64 tokens of a
 * 2048-wide Q8_K row): with 160-token blocks (384 KiB) a 512-token AMX GEMM ran
 * 2-8% slower (bench_matmul, SPR; 128 tokens the same either way). Why is not
 * settled: the output stores cost 7-15% of that GEMM, and padding ldy, prefetchw
 * of the output lines and huge pages for y each changed nothing. */
#ifndef MM_CHUNK_BYTES
#define MM_CHUNK_BYTES (160 << 10)
#endif
/* Decode: the last item of a thread's share holds about MM_STEAL_BYTES of
 * weights, the one before it twice that, and so on; the first item the rest
 * (split_units). Each item is a kernel call of its own and starts new prefetch
 * streams, so none is smaller: the claimed tail that came before this split was
 * slower with 64 KiB pieces than with 256 KiB ones (BENCHMARKS.md, "decode
 * balance"). Prefill does not cut its items by bytes: a piece that cut a token
 * block repeated its pack_xblocks and lost; it takes whole items (take_items). */
#define MM_STEAL_BYTES (256 << 10)
#ifndef MM_ACT_BLOCK_BYTES
#define MM_ACT_BLOCK_BYTES (160 << 10)
#endif
/* Fewest tokens of a packed prefill token block, whatever MM_ACT_BLOCK_BYTES
 * says: each token block streams the weights from memory once, so a long row
 * (an FFN down projection of n_in 16384 and more, whose activation rows are
 * 17-21 KiB in Q8) held to MM_ACT_BLOCK_BYTES got blocks of 4 to 8 tokens and
 * ran at the memory's speed, not the kernels' (BENCHMARKS.md, "Long rows").
 * Its activations then outgrow the budget, but they are read once per group
 * and the group's tile stays in L1 / L2 across the block's tiles. */
#ifndef MM_TOK_BLOCK_MIN
#define MM_TOK_BLOCK_MIN 48
#endif
/* pack_xblocks of a token block's narrow rows (on the stack): MM_TOK_BLOCK_MIN
 * tokens of rows up to 21845 wide. */
#ifndef MM_XBLOCKS_MAX
#define MM_XBLOCKS_MAX 32768
#endif
/* Decode's xblocks, made once per mm_compute_multi call: PACK_TOK_MAX tokens of
 * rows up to 65536 wide. Its own bound, so that every decode call does not
 * reserve (and, under ASan, poison) a prefill-sized buffer. */
#define MM_DECODE_XBLOCKS_MAX (PACK_TOK_MAX * 2048)
/* Floats in each of the two buffers of a fused gate/up block (on the stack):
 * 64 tokens x 256 columns; 128 KiB together, in L2 beside a chunk of weights. */
#define MM_GLU_TILE 16384
/* Fewest tokens a wide (tile) call pays for. */
#define MM_WIDE_MIN 8
#define MM_PACKED 1 /* packed_kind: cpu/pack.h groups of PACK_ROWS rows */
#define MM_PACK_THREADS 8

vt_status mm_weight_init(mm_weight *w, vt_dtype type, int64_t n_in, int64_t n_out,
                         const void *data) {
    memset(w, 0, sizeof *w);
    const quant_traits *tr = quant_traits_get(type);
    if (!tr) return vt_errorf(VT_E_UNSUPPORTED, "matmul: weight type %d is unknown", (int)type);
    if (!tr->dot_ref)
        return vt_errorf(VT_E_UNSUPPORTED, "matmul: type %s cannot be a weight (activation type only)",
                         tr->name);
    if (n_in <= 0 || n_out <= 0)
        return vt_errorf(VT_E_RANGE, "matmul: shape (%lld, %lld) must be positive", (long long)n_out,
                         (long long)n_in);
    if (n_in % tr->block_elems != 0)
        return vt_errorf(VT_E_FORMAT, "matmul: row length %lld is not a multiple of the %s block (%lld)",
                         (long long)n_in, tr->name, (long long)tr->block_elems);
    size_t row_bytes, total;
    if (!quant_row_bytes(type, n_in, &row_bytes) || !size_mul(row_bytes, (size_t)n_out, &total))
        return vt_errorf(VT_E_RANGE, "matmul: %s weight (%lld, %lld) overflows size_t", tr->name,
                         (long long)n_out, (long long)n_in);
    w->type = type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->data = data;
    w->row_bytes = row_bytes;
    return VT_OK;
}

/* Groups [g0, g1) of w into its packed copy p. */
typedef struct {
    const mm_weight *w;
    uint8_t *p;
    int64_t g0, g1;
} pack_job;

static void *pack_run(void *arg) {
    const pack_job *j = arg;
    const mm_weight *w = j->w;
    const size_t group_bytes = PACK_ROWS * w->row_bytes;
    const uint8_t *src = w->data;
    for (int64_t g = j->g0; g < j->g1; g++) {
        const int64_t r0 = g * PACK_ROWS;
        const int nr = (int)(w->n_out - r0 < PACK_ROWS ? w->n_out - r0 : PACK_ROWS);
        pack_group(w->type, w->n_in, src + (size_t)r0 * w->row_bytes, w->row_bytes, nr,
                   j->p + (size_t)g * group_bytes);
    }
    return NULL;
}

/* Whether w gets a packed copy on this CPU. */
static bool packs(const mm_weight *w) {
    const cpu_kernels *k = cpu_kernels_get();
    if (!k->gemm[w->type] || !pack_has_layout(w->type)) return false;
    /* rows too long for compute_packed's xblock buffer keep the file layout */
    return !(pack_needs_xblocks(w->type) && w->n_in / 32 * PACK_TOK_MAX > MM_XBLOCKS_MAX);
}

/* Bytes of w's packed copy: whole groups of PACK_ROWS rows (0 on overflow). */
static size_t packed_bytes(const mm_weight *w) {
    const int64_t n_groups = (w->n_out + PACK_ROWS - 1) / PACK_ROWS;
    size_t bytes;
    if (!size_mul(PACK_ROWS * w->row_bytes, (size_t)n_groups, &bytes)) return 0;
    return bytes;
}

size_t mm_weight_packed_size(const mm_weight *w) {
    return packs(w) ? size_align_up(packed_bytes(w), 64) : 0;
}

vt_status mm_arena_init(mm_arena *a, size_t bytes) {
    memset(a, 0, sizeof *a);
    if (bytes == 0) return VT_OK;
    if (!(a->base = hugemem_alloc(bytes)))
        return vt_errorf(VT_E_NOMEM, "matmul: out of memory for the packed weights (%zu MiB)",
                         bytes >> 20);
    a->cap = bytes;
    return VT_OK;
}

void mm_arena_free(mm_arena *a) {
    hugemem_free(a->base, a->cap);
    memset(a, 0, sizeof *a);
}

vt_status mm_weight_prepare(mm_weight *w) { return mm_weight_prepare_in(w, NULL); }

vt_status mm_weight_prepare_in(mm_weight *w, mm_arena *a) {
    if (w->packed || !packs(w)) return VT_OK;
    const int64_t n_groups = (w->n_out + PACK_ROWS - 1) / PACK_ROWS;
    const size_t bytes = packed_bytes(w);
    if (bytes == 0)
        return vt_errorf(VT_E_RANGE, "matmul: packed copy of (%lld, %lld) overflows size_t",
                         (long long)w->n_out, (long long)w->n_in);
    /* In huge pages (base/hugemem.h): the packed weights are streamed once per
     * token, and 4 KiB pages would cost a TLB miss every 4 KiB. */
    uint8_t *p;
    if (a) {
        const size_t take = mm_weight_packed_size(w); /* bytes, in whole cache lines */
        if (take > a->cap - a->used)
            return vt_errorf(VT_E_NOMEM, "matmul: the arena has %zu bytes left, the packed copy needs %zu",
                             a->cap - a->used, take);
        p = a->base + a->used;
        a->used += take;
    } else if (!(p = hugemem_alloc(bytes))) {
        return vt_errorf(VT_E_NOMEM, "matmul: out of memory for a packed copy (%zu bytes)", bytes);
    }
    /* Packing is memory-bound (and the first touch of every page of the copy):
     * large weights are split among a few short-lived threads. */
    pack_job jobs[MM_PACK_THREADS];
    pthread_t tids[MM_PACK_THREADS];
    int n_jobs = bytes >= ((size_t)8 << 20) ? tp_default_threads() : 1;
    if (n_jobs > MM_PACK_THREADS) n_jobs = MM_PACK_THREADS;
    if (n_jobs < 1) n_jobs = 1;
    int started = 0;
    for (int i = 0; i < n_jobs; i++) {
        jobs[i] = (pack_job){w, p, 0, 0};
        tp_range(n_groups, 1, i, n_jobs, &jobs[i].g0, &jobs[i].g1);
    }
    for (int i = 1; i < n_jobs; i++) {
        if (pthread_create(&tids[i], NULL, pack_run, &jobs[i]) != 0) break;
        started = i;
    }
    /* this thread takes job 0 and any job whose thread did not start */
    pack_run(&jobs[0]);
    for (int i = started + 1; i < n_jobs; i++) pack_run(&jobs[i]);
    for (int i = 1; i <= started; i++) pthread_join(tids[i], NULL);
    w->packed = p;
    w->packed_kind = MM_PACKED;
    w->packed_owned = a == NULL;
    return VT_OK;
}

void mm_weight_release_source(const mm_weight *w) {
    if (!w->packed) return;
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    const uintptr_t a = (uintptr_t)w->data, e = a + w->row_bytes * (size_t)w->n_out;
    const uintptr_t lo = (a + (uintptr_t)page - 1) & ~((uintptr_t)page - 1), hi = e & ~((uintptr_t)page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void mm_weight_free(mm_weight *w) {
    if (w->packed_owned) hugemem_free(w->packed, packed_bytes(w));
    w->packed = NULL;
    w->packed_kind = 0;
    w->packed_owned = false;
}

size_t mm_act_row_bytes(vt_dtype w_type, int64_t n_in) {
    const quant_traits *tr = quant_traits_get(w_type);
    size_t bytes;
    if (!tr || !quant_row_bytes(tr->dot_type, n_in, &bytes)) return 0;
    return size_align_up(bytes, MM_ACT_ALIGN);
}

void mm_quantize(vt_dtype w_type, const float *x, int64_t ldx, int64_t n_tok, int64_t n_in,
                 void *xq, int ith, int nth) {
    const quant_traits *wt = quant_traits_get(w_type);
    VT_ASSERT(wt);
    const quant_traits *at = quant_traits_get(wt->dot_type);
    const quant_quant_fn quantize = cpu_kernels_get()->quantize_act[wt->dot_type];
    VT_ASSERT(at && quantize);
    const size_t stride = mm_act_row_bytes(w_type, n_in);
    uint8_t *out = xq;
    if (n_tok >= nth) {
        int64_t t0, t1;
        tp_range(n_tok, 1, ith, nth, &t0, &t1);
        for (int64_t t = t0; t < t1; t++) quantize(x + t * ldx, out + (size_t)t * stride, n_in);
        return;
    }
    /* Fewer rows than threads (decode): split each row by blocks, which the
     * quantizers treat independently, so the bytes are the same either way. */
    const int64_t be = at->block_elems;
    const int64_t n_blocks = n_in / be;
    const int64_t grain = be >= 256 ? 1 : 256 / be;
    for (int64_t t = 0; t < n_tok; t++) {
        int64_t b0, b1;
        tp_range(n_blocks, grain, ith, nth, &b0, &b1);
        if (b1 > b0)
            quantize(x + t * ldx + b0 * be, out + (size_t)t * stride + (size_t)b0 * at->block_bytes,
                     (b1 - b0) * be);
    }
}

/* Outputs [o0, o1) of one weight for all tokens; y is output o0 of token 0. */
static void compute_rows(const mm_weight *w, cpu_dot_rows_fn dot_rows, int64_t o0, int64_t o1,
                         const uint8_t *xq, size_t x_stride, int64_t n_tok, float *y, int64_t ldy) {
    const uint8_t *wd = w->data;
    const size_t rb = w->row_bytes;
    for (int64_t ob = o0; ob < o1; ob += MM_ROW_TILE) {
        const int64_t oe = ob + MM_ROW_TILE < o1 ? ob + MM_ROW_TILE : o1;
        for (int64_t tb = 0; tb < n_tok; tb += MM_TOK_TILE) {
            const int64_t te = tb + MM_TOK_TILE < n_tok ? tb + MM_TOK_TILE : n_tok;
            for (int64_t o = ob; o < oe; o += CPU_DOT_ROWS_MAX) {
                const int nr = (int)(oe - o < CPU_DOT_ROWS_MAX ? oe - o : CPU_DOT_ROWS_MAX);
                for (int64_t t = tb; t < te; t++) {
                    float s[CPU_DOT_ROWS_MAX];
                    dot_rows(w->n_in, wd + (size_t)o * rb, rb, xq + (size_t)t * x_stride, s, nr);
                    float *yt = y + t * ldy + (o - o0);
                    for (int r = 0; r < nr; r++) yt[r] = s[r];
                }
            }
        }
    }
}

/* A block of tokens as one weight's kernels take it: rows [0, n_wide) through
 * wide tiles, the rest through narrow ones, which read xs (their pack_xblocks,
 * when the type has them). Without a packed GEMM, dot_rows over the file layout. */
typedef struct {
    pack_gemm_fn gemm, wide;
    cpu_dot_rows_fn dot_rows;
    const uint8_t *x;
    size_t x_stride;
    int64_t n_tok, n_wide;
    const pack_xblock *xs;
} tok_block;

void mm_weight_set_prefetch(mm_weight *w, bool software) {
    atomic_store_explicit(&w->prefetch, software ? MM_PREFETCH_SW : MM_PREFETCH_HW, memory_order_relaxed);
}
bool mm_weight_prefetch(const mm_weight *w) {
    return atomic_load_explicit(&w->prefetch, memory_order_relaxed) != MM_PREFETCH_HW;
}

/* The kernels of w for a step of n_tok tokens (wide tiles where there is a
 * kernel, enough tokens, and rows it takes; past one tile, the kernels for
 * weights in cache; in decode, without software prefetch where w says so), looked up
 * once per call. */
static tok_block tok_kernels(const mm_weight *w, size_t x_stride, int64_t n_tok) {
    const cpu_kernels *k = cpu_kernels_get();
    tok_block b = {.x_stride = x_stride};
    const vt_dtype t = w->type;
    if (w->packed && k->gemm[t]) {
        if (n_tok > PACK_TOK_MAX) b.gemm = k->gemm_cached[t] ? k->gemm_cached[t] : k->gemm[t];
        else b.gemm = k->gemm_nopf[t] && !mm_weight_prefetch(w) ? k->gemm_nopf[t] : k->gemm[t];
        if (n_tok >= MM_WIDE_MIN && w->n_in <= PACK_WIDE_N_IN_MAX) b.wide = k->gemm_wide[t];
    } else {
        b.dot_rows = k->dot_rows[t];
        VT_ASSERT(b.dot_rows);
    }
    return b;
}

/* Tokens per block: their activation rows (about act_bytes) and xblocks stay
 * in L2; a whole number of tiles, and at most cap where cap > 0 (but one tile
 * at least). */
static int64_t tok_block_size(const mm_weight *w, const tok_block *k, size_t act_bytes, int64_t cap) {
    const int64_t tok_max = k->wide ? PACK_TOK_WIDE : k->gemm ? PACK_TOK_MAX : MM_TOK_TILE;
    int64_t tb = (int64_t)(act_bytes / k->x_stride);
    if (tb < MM_TOK_BLOCK_MIN) tb = MM_TOK_BLOCK_MIN;
    if (cap > 0 && tb > cap) tb = cap;
    if (k->gemm && !k->wide && pack_needs_xblocks(w->type) && tb > MM_XBLOCKS_MAX / (w->n_in / 32))
        tb = MM_XBLOCKS_MAX / (w->n_in / 32);
    tb = tb / tok_max * tok_max;
    return tb < tok_max ? tok_max : tb;
}

/* Of a token block of n rows, the leading rows wide calls take: a wide call runs
 * while at least MM_WIDE_MIN rows are left, narrow tiles take the rest. */
static int64_t wide_rows(int64_t n) {
    const int64_t rem = n % PACK_TOK_WIDE;
    return rem > 0 && rem < MM_WIDE_MIN ? n - rem : n;
}

_Static_assert(PACK_WIDE_N_IN_MAX / 32 * (MM_WIDE_MIN - 1) <= MM_XBLOCKS_MAX,
               "the narrow rows beside wide tiles fit the xblock buffer");

/* Point b at n_tok rows from x, and compute the xblocks of its narrow rows into
 * xs (room for MM_XBLOCKS_MAX) where the type has them; where `made` is not
 * NULL, b takes those instead (the xblocks of all n_tok rows for w's type). */
static void tok_block_at(const mm_weight *w, tok_block *b, const uint8_t *x, int64_t n_tok,
                         pack_xblock *xs, const pack_xblock *made) {
    b->x = x;
    b->n_tok = n_tok;
    b->n_wide = b->wide ? wide_rows(n_tok) : 0;
    b->xs = NULL;
    if (b->gemm && pack_needs_xblocks(w->type) && b->n_wide < n_tok) {
        const int64_t nb = w->n_in / 32;
        VT_ASSERT((n_tok - b->n_wide) * nb <= MM_XBLOCKS_MAX); /* tok_block_size, mm_weight_prepare */
        if (made && b->n_wide == 0) {
            b->xs = made;
            return;
        }
        pack_xblocks(w->type, x + (size_t)b->n_wide * b->x_stride, b->x_stride, n_tok - b->n_wide, nb, xs);
        b->xs = xs;
    }
}

/* Units [u0, u1) of w (16 rows each: packed groups or file-layout tiles) for the
 * tokens of b, `chunk` groups at a time against every tile of tokens; y is the
 * first output of unit u0 for token 0. */
static void block_run(const mm_weight *w, const tok_block *b, int64_t u0, int64_t u1, int64_t chunk,
                      float *y, int64_t ldy) {
    if (!b->gemm) {
        const int64_t r1 = u1 * MM_ROW_TILE < w->n_out ? u1 * MM_ROW_TILE : w->n_out;
        compute_rows(w, b->dot_rows, u0 * MM_ROW_TILE, r1, b->x, b->x_stride, b->n_tok, y, ldy);
        return;
    }
    const size_t group_bytes = PACK_ROWS * w->row_bytes;
    const uint8_t *wp = w->packed;
    const int64_t nb = w->n_in / 32;
    /* the last group of a weight whose rows do not fill it goes through a buffer */
    const int64_t full_end = w->n_out % PACK_ROWS && u1 * PACK_ROWS > w->n_out ? u1 - 1 : u1;
    for (int64_t c0 = u0; c0 < u1; c0 += chunk) {
        const int64_t c1 = c0 + chunk < u1 ? c0 + chunk : u1;
        const int64_t f1 = c1 < full_end ? c1 : full_end;
        for (int64_t t = 0; t < b->n_tok;) {
            const bool use_wide = t < b->n_wide;
            const int64_t left = b->n_tok - t, cap = use_wide ? PACK_TOK_WIDE : PACK_TOK_MAX;
            const int nt = (int)(left < cap ? left : cap);
            const pack_gemm_fn kern = use_wide ? b->wide : b->gemm;
            const uint8_t *xt = b->x + (size_t)t * b->x_stride;
            const pack_xblock *st = b->xs && !use_wide ? b->xs + (t - b->n_wide) * nb : NULL;
            float *yt = y + t * ldy;
            if (f1 > c0)
                kern(w->n_in, wp + (size_t)c0 * group_bytes, f1 - c0, xt, b->x_stride, st, nt,
                     yt + (c0 - u0) * PACK_ROWS, ldy);
            if (c1 > f1) { /* the partial last group */
                float buf[PACK_TOK_WIDE * PACK_ROWS];
                kern(w->n_in, wp + (size_t)f1 * group_bytes, 1, xt, b->x_stride, st, nt, buf, PACK_ROWS);
                const int64_t nr = w->n_out - f1 * PACK_ROWS;
                for (int i = 0; i < nt; i++)
                    memcpy(yt + i * ldy + (f1 - u0) * PACK_ROWS, buf + i * PACK_ROWS,
                           (size_t)nr * sizeof(float));
            }
            t += nt;
        }
    }
}

/* Groups of a packed weight per chunk: in prefill ~MM_CHUNK_BYTES of weights,
 * reused from L2 by every tile of a token block, and an even count of at least
 * two, because the AVX-512 Q4_0 / Q8_0 / MXFP4 kernels take their tiles two
 * groups of a call at a time (x86/gemm_impl.h legacy_tiles); Q8_0 rows of 8192
 * (136 KiB groups) would otherwise never pair. Decode reads each group once, in
 * one chunk (one call: where the kernels pair groups, g with g + n/2 of it). */
static int64_t chunk_groups(const mm_weight *w, int64_t n_tok) {
    if (n_tok <= PACK_TOK_MAX) return INT64_MAX / 2;
    const int64_t c = (int64_t)(MM_CHUNK_BYTES / (PACK_ROWS * w->row_bytes));
    return c < 2 ? 2 : c & ~(int64_t)1;
}

/* Units [u0, u1) of one weight for n_tok tokens: blocks of tokens against
 * chunks of groups; y is the first output of unit u0 for token 0. `made`: the
 * xblocks of all n_tok rows for w's type, already computed (decode), or NULL. */
static void compute_span(const mm_weight *w, int64_t u0, int64_t u1, const uint8_t *xq,
                         size_t x_stride, int64_t n_tok, float *y, int64_t ldy, const pack_xblock *made) {
    tok_block b = tok_kernels(w, x_stride, n_tok);
    pack_xblock xs[MM_XBLOCKS_MAX]; /* of the block's narrow rows */
    const int64_t tb = b.gemm ? tok_block_size(w, &b, MM_ACT_BLOCK_BYTES, 0) : n_tok;
    const int64_t chunk = chunk_groups(w, n_tok);
    VT_ASSERT(!made || tb >= n_tok); /* one block: made covers it */
    for (int64_t t0 = 0; t0 < n_tok; t0 += tb) {
        tok_block_at(w, &b, xq + (size_t)t0 * x_stride, n_tok - t0 < tb ? n_tok - t0 : tb, xs, made);
        block_run(w, &b, u0, u1, chunk, y + t0 * ldy, ldy);
    }
}

/* A thread's share of a step's work units: run(ctx, u0, u1) for each piece. */
typedef void (*mm_units_fn)(const void *ctx, int64_t u0, int64_t u1);

/* Most items of one thread's share in decode: the sizes double from the back,
 * so 64 covers any share of fewer than 2^62 units. */
#define MM_DECODE_ITEMS_MAX 64

/* The decode items of the share [s0, s1): item i is units [end[i], end[i + 1]);
 * returns their count. From the back: `grain` units, then 2, 4, 8, ... times
 * that while what is left before them is more than twice the next; the first
 * item takes the rest (between 1 and 4 times the one after it). */
static int decode_items(int64_t s0, int64_t s1, int64_t grain, int64_t end[MM_DECODE_ITEMS_MAX + 1]) {
    int64_t size[MM_DECODE_ITEMS_MAX];
    int n = 0;
    int64_t left = s1 - s0;
    for (int64_t b = grain; left > 2 * b && n < MM_DECODE_ITEMS_MAX - 1; b *= 2) {
        size[n++] = b;
        left -= b;
    }
    if (left > 0) size[n++] = left; /* the first item */
    end[0] = s0;
    for (int i = 0; i < n; i++) end[i + 1] = end[i] + size[n - 1 - i];
    return n;
}

/* Split units [0, total) of unit_bytes of weights each among the threads of
 * pool. In decode (n_tok <= PACK_TOK_MAX) on several threads: each thread's
 * static share in decode_items, taken with tp_take, its own from the front, then
 * the others' from the back; else each its static share in one piece.
 *
 * Why this shape. A thread that runs evenly with the others takes only its own
 * items, in address order: its share as a few long runs, each one kernel call
 * (one stream, or two far ones where the kernels pair groups g and g + n/2 of
 * a call), about log2(share / grain) calls in all. A thread that streams more
 * slowly is, when the others run out, inside an item that held about half of
 * what was left of its share when it began it (the first item: up to about two
 * thirds), and they take the rest from the back, smallest first. A thread that
 * has lost its core has all but the item it is in taken from it; the split
 * before this one (a static 3/4 of the step, then a claimed tail) left such a
 * thread's whole static part to wait for it. Each item is one call of its own
 * span; which thread takes it does not move where it starts or ends, and a
 * row's bits do not depend on the span it is computed in (the kernels that
 * pair groups compute each row as its group alone; test_matmul's group pairs
 * check them against the _ref twins), so results are the same for any timing
 * and any thread count. */
static void split_units(int64_t total, size_t unit_bytes, int64_t n_tok, tp_pool *pool, int ith,
                        mm_units_fn run, const void *ctx) {
    const int nth = tp_run_threads(pool);
    if (nth == 1 || n_tok > PACK_TOK_MAX) {
        int64_t u0, u1;
        tp_range(total, 1, ith, nth, &u0, &u1);
        if (u1 > u0) run(ctx, u0, u1);
        return;
    }
    const int64_t grain = unit_bytes >= MM_STEAL_BYTES ? 1 : (int64_t)(MM_STEAL_BYTES / unit_bytes);
    for (int d = 0; d < nth; d++) {
        const int owner = (ith + d) % nth;
        int64_t s0, s1, end[MM_DECODE_ITEMS_MAX + 1];
        tp_range(total, 1, owner, nth, &s0, &s1);
        const int n = decode_items(s0, s1, grain, end);
        for (int64_t it; (it = tp_take(pool, owner, n, d > 0)) >= 0;) run(ctx, end[it], end[it + 1]);
    }
}

/* ---- prefill: static shares, taken item by item ------------------------------------------
 *
 * In prefill (more than PACK_TOK_MAX tokens, a pool of several threads) each
 * thread still owns the static share tp_range gives it, but as a list of items
 * in the order compute_span runs it: weight by weight (segments), token block by
 * token block, one chunk of units (chunk_groups; for the fused gate/up, one span)
 * each. The owner takes its items front to back and the others, once out of
 * work, take them from the back (tp_take). A thread prepares a token block (its
 * kernels' view of the activations, the pack_xblocks) when the next item it
 * takes is in another token block or segment than the last, which along one
 * share happens once per token block and segment, going forward or back.
 *
 * Why this shape and not a shared counter: a thread that loses its core for a
 * while (another process, an SMT sibling, a VM's neighbour) left its partner
 * idle at the static split's barrier; the first fix, claiming MM_STEAL_BYTES
 * pieces from one counter as decode then did, repeated a piece's token blocks'
 * pack_xblocks for every piece and lost at pp128. Here an item is a whole chunk
 * against a whole token block, so taking one repeats nothing; a thread that runs
 * evenly with the others takes only its own items, in the order and with the
 * memory streams of the static split, and the only cost is one uncontended
 * compare-and-swap per item. Stealing from the back keeps the thief off the
 * owner's stream, and the owner, if it comes back, finds the items it was going
 * to do next still there. No item is ever split or repeated, so each output is
 * computed by the same kernel calls whatever thread takes it. */
#define MM_SEGS_MAX 8 /* weights of one mm_compute_multi taken in items; more: the static split */

typedef struct {
    int n;                        /* segments: the weights of a multi step, 1 for gate/up */
    int64_t n_tok, total;         /* tokens; units of all segments */
    int64_t units[MM_SEGS_MAX];   /* units of each segment */
    int64_t piece[MM_SEGS_MAX];   /* units per item: a chunk, or a span of gate/up */
    int64_t tb[MM_SEGS_MAX];      /* tokens per block */
} item_plan;

/* One thread's share in items: the units [lo, hi) of each segment, items of it. */
typedef struct {
    int64_t lo[MM_SEGS_MAX], hi[MM_SEGS_MAX], items[MM_SEGS_MAX];
    int64_t n_items;
} item_share;

/* An item: units [u0, u1) of segment seg for tokens [t0, t0 + nt). */
typedef struct {
    int seg;
    int64_t t0, nt, u0, u1;
} mm_item;

static void share_of(const item_plan *p, int owner, int nth, item_share *s) {
    int64_t s0, s1;
    tp_range(p->total, 1, owner, nth, &s0, &s1);
    s->n_items = 0;
    for (int64_t i = 0, base = 0; i < p->n; base += p->units[i], i++) {
        s->lo[i] = s0 > base ? s0 - base : 0;
        s->hi[i] = s1 - base < p->units[i] ? s1 - base : p->units[i];
        s->items[i] = s->hi[i] > s->lo[i] ? (s->hi[i] - s->lo[i] + p->piece[i] - 1) / p->piece[i] *
                                                ((p->n_tok + p->tb[i] - 1) / p->tb[i])
                                          : 0;
        s->n_items += s->items[i];
    }
}

static mm_item item_at(const item_plan *p, const item_share *s, int64_t it) {
    int i = 0;
    while (it >= s->items[i]) it -= s->items[i++];
    const int64_t pieces = (s->hi[i] - s->lo[i] + p->piece[i] - 1) / p->piece[i];
    mm_item r = {.seg = i, .t0 = it / pieces * p->tb[i], .u0 = s->lo[i] + it % pieces * p->piece[i]};
    r.nt = p->n_tok - r.t0 < p->tb[i] ? p->n_tok - r.t0 : p->tb[i];
    r.u1 = r.u0 + p->piece[i] < s->hi[i] ? r.u0 + p->piece[i] : s->hi[i];
    return r;
}

typedef void (*mm_item_fn)(void *state, const mm_item *item);

/* Thread ith's part of a prefill step: its own items, then the others' from the
 * back, each by run(state, item). */
static void take_items(const item_plan *p, tp_pool *pool, int ith, mm_item_fn run, void *state) {
    const int nth = tp_run_threads(pool);
    for (int d = 0; d < nth; d++) {
        const int owner = (ith + d) % nth;
        item_share s;
        share_of(p, owner, nth, &s);
        for (int64_t it; (it = tp_take(pool, owner, s.n_items, d > 0)) >= 0;) {
            const mm_item item = item_at(p, &s, it);
            run(state, &item);
        }
    }
}

typedef struct {
    const mm_weight *const *ws;
    float *const *ys;
    const int64_t *ldys;
    int n;
    const uint8_t *xq;
    size_t x_stride;
    int64_t n_tok;
    const pack_xblock *xs; /* decode: the xblocks of xq for type xs_type, or NULL */
    vt_dtype xs_type;
} multi_job;

/* Units [u0, u1) of the concatenated outputs of job->ws. */
static void multi_units(const void *ctx, int64_t u0, int64_t u1) {
    const multi_job *j = ctx;
    int64_t base = 0;
    for (int i = 0; i < j->n && base < u1; i++) {
        const int64_t units = (j->ws[i]->n_out + MM_ROW_TILE - 1) / MM_ROW_TILE;
        const int64_t lo = u0 > base ? u0 - base : 0;
        const int64_t hi = u1 < base + units ? u1 - base : units;
        if (hi > lo)
            compute_span(j->ws[i], lo, hi, j->xq, j->x_stride, j->n_tok, j->ys[i] + lo * MM_ROW_TILE,
                         j->ldys[i], j->xs && j->ws[i]->type == j->xs_type ? j->xs : NULL);
        base += units;
    }
}

/* A thread's state in a prefill multi step: each weight's kernels, and the token
 * block last prepared (segment seg, from token t0) in b. */
typedef struct {
    const multi_job *j;
    tok_block k[MM_SEGS_MAX];
    int seg;
    int64_t t0;
    tok_block b;
    pack_xblock xs[MM_XBLOCKS_MAX];
} multi_state;

static void multi_item(void *vs, const mm_item *it) {
    multi_state *s = vs;
    const multi_job *j = s->j;
    const mm_weight *w = j->ws[it->seg];
    if (it->seg != s->seg || it->t0 != s->t0) {
        s->b = s->k[it->seg];
        tok_block_at(w, &s->b, j->xq + (size_t)it->t0 * j->x_stride, it->nt, s->xs, NULL);
        s->seg = it->seg;
        s->t0 = it->t0;
    }
    const int64_t ldy = j->ldys[it->seg];
    block_run(w, &s->b, it->u0, it->u1, it->u1 - it->u0, j->ys[it->seg] + it->t0 * ldy + it->u0 * MM_ROW_TILE,
              ldy);
}

/* mm_compute_multi's prefill on a pool of several threads (items, above). */
static void multi_prefill(const multi_job *j, tp_pool *pool, int ith) {
    multi_state s; /* not zeroed: the xblock buffer is written before it is read */
    s.j = j;
    s.seg = -1;
    s.t0 = 0;
    item_plan p = {.n = j->n, .n_tok = j->n_tok};
    for (int i = 0; i < j->n; i++) {
        const mm_weight *w = j->ws[i];
        s.k[i] = tok_kernels(w, j->x_stride, j->n_tok);
        p.units[i] = (w->n_out + MM_ROW_TILE - 1) / MM_ROW_TILE;
        p.piece[i] = chunk_groups(w, j->n_tok);
        p.tb[i] = s.k[i].gemm ? tok_block_size(w, &s.k[i], MM_ACT_BLOCK_BYTES, 0) : j->n_tok;
        p.total += p.units[i];
    }
    take_items(&p, pool, ith, multi_item, &s);
}

void mm_compute_multi(const mm_weight *const *ws, float *const *ys, const int64_t *ldys, int n,
                      const void *xq, int64_t n_tok, tp_pool *pool, int ith) {
    if (n <= 0 || n_tok <= 0) return;
    const vt_dtype type = ws[0]->type, dot_type = quant_traits_get(type)->dot_type;
    const int64_t n_in = ws[0]->n_in;
    /* units of 16 rows: packed groups or file-layout tiles */
    _Static_assert(MM_ROW_TILE == PACK_ROWS, "one work unit for both layouts");
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        VT_ASSERT(quant_traits_get(ws[i]->type)->dot_type == dot_type && ws[i]->n_in == n_in);
        total += (ws[i]->n_out + MM_ROW_TILE - 1) / MM_ROW_TILE;
    }
    multi_job job = {ws, ys, ldys, n, xq, mm_act_row_bytes(type, n_in), n_tok, NULL, type};
    if (n_tok > PACK_TOK_MAX && tp_run_threads(pool) > 1 && n <= MM_SEGS_MAX) {
        multi_prefill(&job, pool, ith);
        return;
    }
    /* Decode: the xblocks once per call (for the first weight's type), not per
     * weight and per item; the same values either way. */
    pack_xblock xs[MM_DECODE_XBLOCKS_MAX];
    if (n_tok <= PACK_TOK_MAX && cpu_kernels_get()->gemm[type] && pack_needs_xblocks(type) &&
        n_tok * (n_in / 32) <= MM_DECODE_XBLOCKS_MAX) {
        pack_xblocks(type, xq, job.x_stride, n_tok, n_in / 32, xs);
        job.xs = xs;
    }
    split_units(total, MM_ROW_TILE * ws[0]->row_bytes, n_tok, pool, ith, multi_units, &job);
}

typedef struct {
    const mm_weight *gate, *up;
    const uint8_t *xq;
    size_t x_stride;
    int64_t n_tok;
    int64_t unit_cols; /* columns per work unit: whole row groups and whole h blocks */
    uint8_t *hq;
    size_t hq_stride;
    const quant_traits *ht; /* the dot type of the down projection */
    quant_quant_fn quantize;
    void (*silu_mul)(float *g, const float *u, int64_t n);
} glu_job;

/* How a thread runs a gate/up job: the kernels of both weights, chunks of
 * groups, columns per span, tokens per block; and the token block last
 * prepared (from token t0, -1 for none) in kg / ku with the xblocks of its
 * narrow rows. */
typedef struct {
    tok_block kg, ku;
    bool shared; /* up takes gate's token blocks (one type, the same kernels) */
    int64_t chunk_g, chunk_u, span, tb;
    int64_t t0;
    pack_xblock xs_g[MM_XBLOCKS_MAX], xs_u[MM_XBLOCKS_MAX];
} glu_state;

/* Blocks of tokens (their activations and xblocks in L2, computed once for both
 * weights) against spans of columns: a chunk of gate rows (~MM_CHUNK_BYTES in
 * prefill; decode: all of them, one stream), then the same rows of up, into two
 * buffers, where each token's row of the span is activated and quantized. */
static void glu_setup(const glu_job *j, glu_state *s) {
    const int64_t uc = j->unit_cols, n_tok = j->n_tok;
    s->kg = tok_kernels(j->gate, j->x_stride, n_tok);
    s->ku = tok_kernels(j->up, j->x_stride, n_tok);
    s->shared = j->gate->type == j->up->type && s->kg.gemm == s->ku.gemm && s->kg.wide == s->ku.wide;
    s->chunk_g = chunk_groups(j->gate, n_tok);
    s->chunk_u = chunk_groups(j->up, n_tok);
    s->t0 = -1;
    if (n_tok <= PACK_TOK_MAX) {
        s->tb = n_tok;
        s->span = MM_GLU_TILE / n_tok / uc * uc;
    } else {
        const int64_t tile = s->kg.wide || s->ku.wide ? PACK_TOK_WIDE : PACK_TOK_MAX;
        const int64_t chunk = s->chunk_g * MM_ROW_TILE;
        const int64_t span_max = MM_GLU_TILE / tile / uc * uc;
        s->span = (chunk + uc - 1) / uc * uc;
        if (s->span > span_max) s->span = span_max;
        s->tb = tok_block_size(j->gate, &s->kg, MM_ACT_BLOCK_BYTES, MM_GLU_TILE / s->span);
        if (!s->shared) s->tb = tok_block_size(j->up, &s->ku, MM_ACT_BLOCK_BYTES, s->tb);
    }
    VT_ASSERT(s->span >= uc && s->span * s->tb <= MM_GLU_TILE);
}

/* Columns [c0, c0 + ns) of h (ns <= span) for tokens [t0, t0 + nt) (nt <= tb),
 * preparing that token block first unless it is the one s holds. */
static void glu_span(const glu_job *j, glu_state *s, int64_t t0, int64_t nt, int64_t c0, int64_t ns) {
    float bg[MM_GLU_TILE], bu[MM_GLU_TILE];
    if (t0 != s->t0) {
        const uint8_t *xb = j->xq + (size_t)t0 * j->x_stride;
        tok_block_at(j->gate, &s->kg, xb, nt, s->xs_g, NULL);
        if (s->shared) s->ku = s->kg;
        else tok_block_at(j->up, &s->ku, xb, nt, s->xs_u, NULL);
        s->t0 = t0;
    }
    const size_t hb = (size_t)j->ht->block_bytes;
    const int64_t he = j->ht->block_elems;
    const int64_t g0 = c0 / MM_ROW_TILE, g1 = (c0 + ns + MM_ROW_TILE - 1) / MM_ROW_TILE;
    block_run(j->gate, &s->kg, g0, g1, s->chunk_g, bg, ns);
    block_run(j->up, &s->ku, g0, g1, s->chunk_u, bu, ns);
    for (int64_t i = 0; i < nt; i++) {
        float *h = bg + i * ns;
        j->silu_mul(h, bu + i * ns, ns);
        j->quantize(h, j->hq + (size_t)(t0 + i) * j->hq_stride + (size_t)(c0 / he) * hb, ns);
    }
}

/* Columns [u0, u1) x unit_cols of h for every token: token blocks outside, spans
 * inside. */
static void glu_units(const void *ctx, int64_t u0, int64_t u1) {
    const glu_job *j = ctx;
    glu_state s;
    glu_setup(j, &s);
    const int64_t uc = j->unit_cols, n_out = j->gate->n_out, n_tok = j->n_tok;
    const int64_t c_lo = u0 * uc, c_hi = u1 * uc < n_out ? u1 * uc : n_out;
    for (int64_t t0 = 0; t0 < n_tok; t0 += s.tb) {
        const int64_t nt = t0 + s.tb < n_tok ? s.tb : n_tok - t0;
        for (int64_t c0 = c_lo; c0 < c_hi; c0 += s.span)
            glu_span(j, &s, t0, nt, c0, c0 + s.span < c_hi ? s.span : c_hi - c0);
    }
}

typedef struct {
    const glu_job *j;
    glu_state s;
} glu_items;

static void glu_item(void *vs, const mm_item *it) {
    glu_items *g = vs;
    const int64_t uc = g->j->unit_cols, n_out = g->j->gate->n_out;
    const int64_t c0 = it->u0 * uc, c1 = it->u1 * uc < n_out ? it->u1 * uc : n_out;
    glu_span(g->j, &g->s, it->t0, it->nt, c0, c1 - c0);
}

void mm_compute_glu(const mm_weight *gate, const mm_weight *up, vt_dtype down_type, const void *xq,
                    int64_t n_tok, void *hq, tp_pool *pool, int ith) {
    mm_compute_glu_act(gate, up, cpu_kernels_get()->silu_mul, down_type, xq, n_tok, hq, pool, ith);
}

int64_t mm_glu_unit(vt_dtype down_type) {
    const quant_traits *ht = quant_traits_get(quant_traits_get(down_type)->dot_type);
    return ht->block_elems > MM_ROW_TILE ? ht->block_elems : MM_ROW_TILE;
}

/* mm_compute_glu_act's job for these arguments. */
static glu_job glu_job_of(const mm_weight *gate, const mm_weight *up,
                          void (*act_mul)(float *g, const float *u, int64_t n), vt_dtype down_type,
                          const void *xq, int64_t n_tok, void *hq) {
    VT_ASSERT(quant_traits_get(up->type)->dot_type == quant_traits_get(gate->type)->dot_type &&
              gate->n_in == up->n_in && gate->n_out == up->n_out);
    const vt_dtype h_type = quant_traits_get(down_type)->dot_type;
    const quant_traits *ht = quant_traits_get(h_type);
    const cpu_kernels *k = cpu_kernels_get();
    VT_ASSERT(ht && k->quantize_act[h_type]);
    /* a unit: whole groups of rows and whole blocks of h; both are powers of two */
    const int64_t uc = mm_glu_unit(down_type);
    VT_ASSERT(uc % MM_ROW_TILE == 0 && uc % ht->block_elems == 0 && uc * PACK_TOK_WIDE <= MM_GLU_TILE);
    return (glu_job){
        .gate = gate,
        .up = up,
        .xq = xq,
        .x_stride = mm_act_row_bytes(gate->type, gate->n_in),
        .n_tok = n_tok,
        .unit_cols = uc,
        .hq = hq,
        .hq_stride = mm_act_row_bytes(down_type, gate->n_out),
        .ht = ht,
        .quantize = k->quantize_act[h_type],
        .silu_mul = act_mul,
    };
}

void mm_compute_glu_act(const mm_weight *gate, const mm_weight *up,
                        void (*act_mul)(float *g, const float *u, int64_t n), vt_dtype down_type,
                        const void *xq, int64_t n_tok, void *hq, tp_pool *pool, int ith) {
    if (n_tok <= 0) return;
    const glu_job job = glu_job_of(gate, up, act_mul, down_type, xq, n_tok, hq);
    const int64_t uc = job.unit_cols, units = (gate->n_out + uc - 1) / uc;
    if (n_tok > PACK_TOK_MAX && tp_run_threads(pool) > 1) { /* items of one span (see take_items) */
        glu_items g; /* not zeroed: glu_setup fills it but for the xblock buffers */
        g.j = &job;
        glu_setup(&job, &g.s);
        const item_plan p = {.n = 1, .n_tok = n_tok, .total = units, .units = {units},
                             .piece = {g.s.span / uc}, .tb = {g.s.tb}};
        take_items(&p, pool, ith, glu_item, &g);
        return;
    }
    split_units(units, (size_t)uc * (gate->row_bytes + up->row_bytes), n_tok, pool, ith, glu_units, &job);
}

void mm_compute_glu_act_cols(const mm_weight *gate, const mm_weight *up,
                             void (*act_mul)(float *g, const float *u, int64_t n), vt_dtype down_type,
                             const void *xq, int64_t n_tok, void *hq, int64_t c0, int64_t c1) {
    if (n_tok <= 0 || c1 <= c0) return;
    const glu_job job = glu_job_of(gate, up, act_mul, down_type, xq, n_tok, hq);
    const int64_t uc = job.unit_cols;
    VT_ASSERT(c0 % uc == 0 && (c1 % uc == 0 || c1 == gate->n_out) && c1 <= gate->n_out);
    glu_units(&job, c0 / uc, (c1 + uc - 1) / uc);
}

void mm_compute_rows(const mm_weight *w, const void *xq, int64_t n_tok, float *y, int64_t ldy, int64_t r0,
                     int64_t r1) {
    if (n_tok <= 0 || r1 <= r0) return;
    VT_ASSERT(r0 % MM_ROW_TILE == 0 && (r1 % MM_ROW_TILE == 0 || r1 == w->n_out) && r1 <= w->n_out);
    const mm_weight *ws[1] = {w};
    float *ys[1] = {y};
    const int64_t ldys[1] = {ldy};
    const multi_job job = {ws, ys, ldys, 1, xq, mm_act_row_bytes(w->type, w->n_in), n_tok, NULL, w->type};
    multi_units(&job, r0 / MM_ROW_TILE, (r1 + MM_ROW_TILE - 1) / MM_ROW_TILE);
}

void mm_compute(const mm_weight *w, const void *xq, int64_t n_tok, float *y, int64_t ldy,
                tp_pool *pool, int ith) {
    const mm_weight *ws[1] = {w};
    float *ys[1] = {y};
    const int64_t ldys[1] = {ldy};
    mm_compute_multi(ws, ys, ldys, 1, xq, n_tok, pool, ith);
}

/* ---- software prefetch or not (mm_probe_prefetch) ------------------------------------------- */

/* The probe times one-token GEMMs over a model's weights, type by type
 * (PREFETCH_PROBE_MIN..MAX bytes of each, far past any L3), alternating the
 * decode kernels with and without software prefetch, and keeps those without
 * for a type only when they were faster by more than PREFETCH_PROBE_MARGIN
 * (best of PREFETCH_PROBE_ROUNDS each): with the packed layouts read in
 * address order the hardware prefetcher may stream them alone, and on the Zen
 * 5 VM some days it streamed them faster that way and some days slower
 * (matmul.h); the AVX2 tier's Q6_K kernel, which reads each quarter of its tile
 * out of order, was 12% slower without on a day the others were 2-12% faster.
 * About 0.1 s for a 1B model. */
#define PREFETCH_PROBE_MIN ((size_t)64 << 20)
#define PREFETCH_PROBE_MAX ((size_t)256 << 20)
#define PREFETCH_PROBE_ROUNDS 3
#define PREFETCH_PROBE_MARGIN 0.97

typedef struct prefetch_probe {
    mm_weight **ws; /* the weights of one type, read in turn */
    int64_t n;
    tp_pool *pool;
    const void *xq; /* zero activations, as wide as the widest row */
    float *y;       /* as long as the longest column */
} prefetch_probe;

static double probe_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void prefetch_probe_worker(void *arg, int ith, int nth) {
    (void)nth;
    const prefetch_probe *p = arg;
    for (int64_t i = 0; i < p->n; i++) {
        mm_compute(p->ws[i], p->xq, 1, p->y, 0, p->pool, ith);
        tp_barrier(p->pool);
    }
}

/* Times p's weights (`bytes` of type t) with and without software prefetch;
 * true where software prefetch stays. */
static bool probe_type(prefetch_probe *p, vt_dtype t, size_t bytes) {
    double best[2] = {1e30, 1e30}; /* [software prefetch] */
    for (int r = 0; r < 2 * PREFETCH_PROBE_ROUNDS; r++) {
        const bool sw = (r % 2 == 0) == (r / 2 % 2 == 0); /* with, without, without, with, ... */
        for (int64_t i = 0; i < p->n; i++) mm_weight_set_prefetch(p->ws[i], sw);
        const double t0 = probe_now_s();
        tp_run(p->pool, prefetch_probe_worker, p);
        const double dt = probe_now_s() - t0;
        if (dt < best[sw]) best[sw] = dt;
    }
    const bool sw = !(best[0] < PREFETCH_PROBE_MARGIN * best[1]);
    const int nth = tp_n_threads(p->pool);
    log_info("decode GEMMs of %s %s software prefetch: %.1f GB/s with, %.1f without (%d thread%s)",
             quant_traits_get(t)->name, sw ? "with" : "without", (double)bytes / best[1] / 1e9,
             (double)bytes / best[0] / 1e9, nth, nth > 1 ? "s" : "");
    return sw;
}

static size_t weight_bytes(const mm_weight *w) { return w->row_bytes * (size_t)w->n_out; }

void mm_probe_prefetch(const mm_weight *const *ws_in, int64_t n_in, tp_pool *pool) {
    /* the undecided weights; the prefetch field is the one a const weight lets
     * change (matmul.h) */
    mm_weight **all = malloc(sizeof *all * (size_t)(n_in > 0 ? n_in : 1));
    mm_weight **ws = malloc(sizeof *ws * (size_t)(n_in > 0 ? n_in : 1));
    void *xq = NULL;
    float *y = NULL;
    if (!all || !ws) goto done;
    int64_t n = 0;
    for (int64_t i = 0; i < n_in; i++)
        if (atomic_load_explicit(&ws_in[i]->prefetch, memory_order_relaxed) == MM_PREFETCH_UNSET)
            all[n++] = (mm_weight *)ws_in[i];
    const char *env = getenv("VT_PREFETCH");
    if (env && (!strcmp(env, "sw") || !strcmp(env, "hw"))) {
        for (int64_t i = 0; i < n; i++) mm_weight_set_prefetch(all[i], !strcmp(env, "sw"));
        goto done;
    }
    const cpu_kernels *k = cpu_kernels_get();
    size_t x_bytes = 0, y_len = 0, type_bytes[VT_DTYPE_COUNT] = {0};
    for (int64_t i = 0; i < n; i++) {
        const mm_weight *w = all[i];
        if (!w->packed || !k->gemm_nopf[w->type]) continue;
        type_bytes[w->type] += weight_bytes(w);
        if (mm_act_row_bytes(w->type, w->n_in) > x_bytes) x_bytes = mm_act_row_bytes(w->type, w->n_in);
        if ((size_t)w->n_out > y_len) y_len = (size_t)w->n_out;
    }
    xq = calloc(1, x_bytes + 1);
    y = malloc(sizeof(float) * (y_len + 1));
    if (!xq || !y) goto done;
    prefetch_probe p = {.ws = ws, .pool = pool, .xq = xq, .y = y};
    bool sw_of[VT_DTYPE_COUNT];
    int most = -1; /* the probed type with the most bytes */
    for (int t = 0; t < VT_DTYPE_COUNT; t++) {
        if (type_bytes[t] < PREFETCH_PROBE_MIN) continue;
        size_t bytes = 0;
        p.n = 0;
        for (int64_t i = 0; i < n && bytes < PREFETCH_PROBE_MAX; i++)
            if (all[i]->type == (vt_dtype)t && all[i]->packed) {
                ws[p.n++] = all[i];
                bytes += weight_bytes(all[i]);
            }
        sw_of[t] = probe_type(&p, (vt_dtype)t, bytes);
        if (most < 0 || type_bytes[t] > type_bytes[most]) most = t;
    }
    for (int64_t i = 0; i < n; i++) {
        const vt_dtype t = all[i]->type;
        const bool sw = most < 0 ? true : type_bytes[t] >= PREFETCH_PROBE_MIN ? sw_of[t] : sw_of[most];
        mm_weight_set_prefetch(all[i], sw);
    }
done:
    free(xq);
    free(y);
    free(all);
    free(ws);
}
