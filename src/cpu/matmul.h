/* Matrix multiplication in the quantized domain.
 *
 *   y (n_tok, n_out) = x (n_tok, n_in) . W^T      W: (n_out, n_in) rows of w->type
 *
 * A step quantizes its activations once to the weight's dot type (mm_quantize),
 * then every thread computes a disjoint share of the outputs (mm_compute). Each
 * output element is produced by exactly one thread with a fixed reduction order
 * that does not depend on which thread it is, so results are bit-identical for
 * any thread count and any split. The kernel for (type, ISA)
 * is resolved once per call, never per element.
 *
 * Both functions are called by all nth threads of a threadpool step; the caller
 * puts a tp_barrier() between mm_quantize and mm_compute. A compute call on a
 * pool of several threads hands out work through the pool's per-step counters
 * (tp_claim, tp_take), so it is a step of its own: the next mm_compute* call on
 * that pool comes after a tp_barrier(). */
#ifndef VT_CPU_MATMUL_H
#define VT_CPU_MATMUL_H

#include "cpu/threadpool.h"
#include "quant/quant.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mm_weight {
    vt_dtype type;
    int64_t n_in;      /* row length (elements) */
    int64_t n_out;     /* number of rows */
    const void *data;  /* (n_out, row_bytes), usually inside the mmap'd file */
    size_t row_bytes;
    void *packed;      /* optional repacked copy made at load, or NULL */
    int packed_kind;   /* layout tag of `packed`, 0 = none */
    bool packed_owned; /* `packed` is w's own mapping (not an mm_arena's) */
    /* Decode GEMMs with or without software prefetch (MM_PREFETCH_*): the
     * weight's own choice, set by mm_probe_prefetch or mm_weight_set_prefetch;
     * the same bits either way. Atomic: a probe may set it while another
     * context computes with the weight. */
    _Atomic uint8_t prefetch;
} mm_weight;

enum {
    MM_PREFETCH_UNSET = 0, /* not probed yet: with software prefetch */
    MM_PREFETCH_SW = 1,
    MM_PREFETCH_HW = 2, /* without: the hardware prefetcher streams the weight alone */
};

/* One huge-page mapping (base/hugemem.h) that holds the packed copies of many
 * weights back to back, carved in the order they are prepared. A model packs
 * its weights into one in the order a forward pass reads them, so decode
 * streams one run of memory per token: no weight is left in base pages, none
 * rounds its mapping up to a whole huge page. */
typedef struct mm_arena {
    uint8_t *base;
    size_t cap, used;
} mm_arena;

/* Map an arena of `bytes` (sum of mm_weight_packed_size). VT_E_NOMEM if it
 * cannot be mapped. */
vt_status mm_arena_init(mm_arena *a, size_t bytes);
/* Unmap a's memory; a zeroed or freed arena is a no-op. Every weight prepared
 * in it must be out of use. */
void mm_arena_free(mm_arena *a);

/* Fill *w for a weight of `type` with shape (n_out, n_in). VT_E_FORMAT if n_in
 * is not a multiple of the type's block size. */
vt_status mm_weight_init(mm_weight *w, vt_dtype type, int64_t n_in, int64_t n_out,
                         const void *data);
/* Repack into an interleaved layout where that pays on this CPU (optional):
 * where the dispatch table has a packed GEMM for w->type, w->packed becomes a
 * copy in cpu/pack.h groups (owned; the kernels read only it afterwards, w->data
 * stays valid). VT_E_NOMEM if the copy cannot be allocated. */
vt_status mm_weight_prepare(mm_weight *w);
/* Bytes of the packed copy mm_weight_prepare makes of w on this CPU, in whole
 * cache lines; 0 where w keeps the file layout. */
size_t mm_weight_packed_size(const mm_weight *w);
/* mm_weight_prepare with the copy carved from arena a (its next
 * mm_weight_packed_size(w) bytes) instead of a mapping of its own; a NULL is
 * mm_weight_prepare. VT_E_NOMEM if a has too little room left. */
vt_status mm_weight_prepare_in(mm_weight *w, mm_arena *a);
/* After a successful mm_weight_prepare that packed w: drop the pages of w->data
 * (its page-aligned interior) from the resident set with MADV_DONTNEED, so a
 * model keeps one copy of its weights in memory. Only for data inside a
 * read-only MAP_PRIVATE file mapping that is never written (reading it again
 * re-faults the file pages); never for heap memory. No-op when not packed. */
void mm_weight_release_source(const mm_weight *w);
/* Release w's own packed copy (one in an arena stays for mm_arena_free). */
void mm_weight_free(mm_weight *w);

/* Bytes of scratch for n_tok activation rows of n_in quantized for weights of
 * type w_type; and the byte stride between those rows. */
size_t mm_act_row_bytes(vt_dtype w_type, int64_t n_in);

/* Quantize n_tok rows of x (row stride ldx floats) into xq (rows of
 * mm_act_row_bytes). Rows are split among threads. */
void mm_quantize(vt_dtype w_type, const float *x, int64_t ldx, int64_t n_tok, int64_t n_in,
                 void *xq, int ith, int nth);

/* y[t * ldy + o] = dot(W row o, xq row t) for all t < n_tok, o < n_out; thread
 * ith of the run in flight on pool (its tp_run_threads threads; a pool of one
 * outside any run) computes its share: its static share item by item (decode, up to
 * PACK_TOK_MAX tokens: a few runs of rows that shrink toward its end; prefill:
 * chunks of rows against blocks of tokens), then, out of work, other threads'
 * items from the back (tp_take; matmul.c). */
void mm_compute(const mm_weight *w, const void *xq, int64_t n_tok, float *y, int64_t ldy,
                tp_pool *pool, int ith);

/* Several weights that share one input (Q/K/V, gate/up) in one step: the outputs
 * of all n weights are split among threads together, so one barrier covers all.
 * All ws[i] must have the same n_in and the same activation (dot) type, e.g.
 * Q4_K beside Q6_K (both Q8_K) as in Q4_K_M files; xq is quantized for ws[0]. */
void mm_compute_multi(const mm_weight *const *ws, float *const *ys, const int64_t *ldys, int n,
                      const void *xq, int64_t n_tok, tp_pool *pool, int ith);

/* The gated FFN's first half in one step: h = SiLU(x . Wg^T) * (x . Wu^T),
 * quantized for weights of down_type into hq (rows of mm_act_row_bytes(down_type,
 * gate->n_out)). Threads split h by columns; each tile of h lives in two small
 * buffers, is activated and quantized there, and never goes to memory as
 * floats. The bytes are those of mm_compute_multi on {gate, up}, then
 * kernels->silu_mul and mm_quantize. gate and up have the same shape and dot
 * type; xq is quantized for gate. */
void mm_compute_glu(const mm_weight *gate, const mm_weight *up, vt_dtype down_type, const void *xq,
                    int64_t n_tok, void *hq, tp_pool *pool, int ith);
/* The same with another activation: act_mul(g, u, n) sets g[i] = act(g[i]) * u[i]
 * (cpu_kernels' silu_mul, gelu_mul). */
void mm_compute_glu_act(const mm_weight *gate, const mm_weight *up,
                        void (*act_mul)(float *g, const float *u, int64_t n), vt_dtype down_type,
                        const void *xq, int64_t n_tok, void *hq, tp_pool *pool, int ith);

/* Pieces of the calls above, computed by the calling thread alone, for callers
 * that hand out their own work items (the forward pass's MoE step runs a shared
 * expert's slices among the routed experts' items). The same bytes as the whole
 * call gives for those outputs. mm_compute_rows: rows [r0, r1) of w into y (the
 * whole output: row o of token t at y[t * ldy + o]); r0 a multiple of 16, r1 too
 * or w->n_out. mm_compute_glu_act_cols: columns [c0, c1) of h into hq (whole rows
 * of mm_act_row_bytes(down_type, gate->n_out)); c0 a multiple of
 * mm_glu_unit(down_type), c1 too or gate->n_out. */
void mm_compute_rows(const mm_weight *w, const void *xq, int64_t n_tok, float *y, int64_t ldy, int64_t r0,
                     int64_t r1);
void mm_compute_glu_act_cols(const mm_weight *gate, const mm_weight *up,
                             void (*act_mul)(float *g, const float *u, int64_t n), vt_dtype down_type,
                             const void *xq, int64_t n_tok, void *hq, int64_t c0, int64_t c1);
/* The columns of h per work unit of mm_compute_glu_act for down projections of
 * down_type: whole 16-row groups and whole activation blocks (a power of two). */
int64_t mm_glu_unit(vt_dtype down_type);

/* Whether decode steps (up to PACK_TOK_MAX tokens) with w use the GEMMs with
 * software prefetch (true, the default) or, where the tier has them
 * (cpu/kernels.h gemm_nopf), those that leave the streaming to the hardware
 * prefetcher. The same bits either way. Which is faster depends on the machine,
 * and on a VM on the hour: on the Zen 5 VM software prefetch once made the
 * kernels stream 4-114% faster (the layouts of several regions then), and on
 * another day the address-ordered layouts streamed 8-18% faster without it at
 * one thread, and the same at two (cpu/x86/gemm_avx512.c, BENCHMARKS.md). The
 * choice belongs to the weight, so two models in one process never disturb
 * each other. */
void mm_weight_set_prefetch(mm_weight *w, bool software);
bool mm_weight_prefetch(const mm_weight *w);

/* The load-time probe behind that choice, for the weights ws[0..n) of one
 * model (those already decided, by an earlier probe or by
 * mm_weight_set_prefetch, are left alone, so a model's second context probes
 * nothing): it times one-token GEMMs over the weights, type by type, with and
 * without software prefetch on `pool` (at its thread count), and sets each
 * weight of a type to the faster; types with too few bytes to time follow the
 * type with the most. VT_PREFETCH=sw or hw sets every weight instead. Called
 * outside the pool's steps (it runs its own). Weights are taken const because
 * only their `prefetch` field, which never changes a result, is written; they
 * must not live in const-defined storage. Needs no memory it cannot do without:
 * if its buffers cannot be allocated, the weights keep software prefetch. */
void mm_probe_prefetch(const mm_weight *const *ws, int64_t n, tp_pool *pool);

#endif
