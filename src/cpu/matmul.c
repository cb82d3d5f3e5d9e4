/* Matrix multiplication in the quantized domain (see matmul.h).
 *
 * Work split. The rows of W (outputs) are cut among threads with tp_range in
 * multiples of MM_ROW_TILE; with several weights (mm_compute_multi) their rows
 * are concatenated first, so one split and one barrier cover Q/K/V together.
 * Inside a thread's share, outputs are visited in tiles of MM_ROW_TILE rows x
 * MM_TOK_TILE tokens: the tile's weight rows (e.g. 16 x 1.1 KiB of Q4_0 at
 * n_in 2048) and activation rows stay in L1/L2 while every pair is computed, so
 * prefill reads each weight row from memory once per MM_TOK_TILE tokens instead
 * of once per token. Within a tile, groups of CPU_DOT_ROWS_MAX weight rows share
 * each activation load (dot_rows).
 *
 * Determinism. Every output is one call of the type's dot kernel (dot_rows is
 * bit-identical with dot, kernels.h), so its value does not depend on the tile,
 * the group or the thread that computes it: results are the same for any thread
 * count. The kernel is looked up once per call, outside all loops. */
#include "cpu/matmul.h"

#include "base/size.h"
#include "cpu/kernels.h"
#include "cpu/threadpool.h"

#include <stdlib.h>
#include <string.h>

#define MM_ROW_TILE 16
#define MM_TOK_TILE 4
/* Activation rows are padded to a cache line so rows never share one. */
#define MM_ACT_ALIGN 64

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

vt_status mm_weight_prepare(mm_weight *w) {
    /* No repacked layout yet: the row-major file layout is what the kernels read. */
    (void)w;
    return VT_OK;
}

void mm_weight_free(mm_weight *w) {
    free(w->packed);
    w->packed = NULL;
    w->packed_kind = 0;
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

/* Outputs [o0, o1) of one weight for all tokens. */
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
                    float *yt = y + t * ldy + o;
                    for (int r = 0; r < nr; r++) yt[r] = s[r];
                }
            }
        }
    }
}

void mm_compute_multi(const mm_weight *const *ws, float *const *ys, const int64_t *ldys, int n,
                      const void *xq, int64_t n_tok, int ith, int nth) {
    if (n <= 0 || n_tok <= 0) return;
    const vt_dtype type = ws[0]->type;
    const int64_t n_in = ws[0]->n_in;
    const cpu_dot_rows_fn dot_rows = cpu_kernels_get()->dot_rows[type];
    VT_ASSERT(dot_rows);
    const size_t x_stride = mm_act_row_bytes(type, n_in);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        VT_ASSERT(ws[i]->type == type && ws[i]->n_in == n_in);
        total += ws[i]->n_out;
    }
    int64_t r0, r1;
    tp_range(total, MM_ROW_TILE, ith, nth, &r0, &r1);
    int64_t base = 0;
    for (int i = 0; i < n && base < r1; i++) {
        const int64_t lo = r0 > base ? r0 : base;
        const int64_t end = base + ws[i]->n_out;
        const int64_t hi = r1 < end ? r1 : end;
        if (hi > lo) compute_rows(ws[i], dot_rows, lo - base, hi - base, xq, x_stride, n_tok, ys[i], ldys[i]);
        base = end;
    }
}

void mm_compute(const mm_weight *w, const void *xq, int64_t n_tok, float *y, int64_t ldy, int ith,
                int nth) {
    const mm_weight *ws[1] = {w};
    float *ys[1] = {y};
    const int64_t ldys[1] = {ldy};
    mm_compute_multi(ws, ys, ldys, 1, xq, n_tok, ith, nth);
}
