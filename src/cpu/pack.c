/* Packed layouts and the scalar GEMM twins (see pack.h). The twins read the
 * packed bytes directly, element by element, so they also pin down what each
 * byte of a group means; tests check them against the quant module's dots. */
#include "cpu/pack.h"

#include "base/fp16.h"
#include "quant/blocks.h"

#include <math.h>
#include <string.h>

#define CHUNK_VEC (4 * PACK_ROWS) /* bytes of one chunk vector */

/* The K-quant tiles hold 16 file blocks exactly (d, dmin | scales | ql [| qh]). */
_Static_assert(4 * PACK_ROWS + 35 * CHUNK_VEC == PACK_ROWS * sizeof(block_q4_K), "Q4_K tile");
_Static_assert(4 * PACK_ROWS + 43 * CHUNK_VEC == PACK_ROWS * sizeof(block_q5_K), "Q5_K tile");
/* A Q6_K super-block of 16 rows is its 16 f16 scales and its tile; pairs fill whole lines */
_Static_assert(2 * PACK_ROWS + PACK_Q6_K_TILE == PACK_ROWS * sizeof(block_q6_K), "Q6_K tile");
_Static_assert(PACK_Q6_K_PAIR % 64 == 0 && PACK_Q6_K_QUARTER % 64 == 0, "Q6_K pairs and quarters in lines");
/* Q4_0 / Q8_0 blocks of 16 rows (scales | quants), and pairs of them whole lines */
_Static_assert(2 * PACK_ROWS + PACK_QB_Q4_0 == PACK_ROWS * sizeof(block_q4_0), "Q4_0 block");
_Static_assert(2 * PACK_ROWS + PACK_QB_Q8_0 == PACK_ROWS * sizeof(block_q8_0), "Q8_0 block");
_Static_assert((4 * PACK_ROWS + 2 * PACK_QB_Q4_0) % 64 == 0 && (4 * PACK_ROWS + 2 * PACK_QB_Q8_0) % 64 == 0,
               "pairs of blocks fill whole cache lines");

/* Q5_0: 16 f16 scales and 5 chunk vectors per block, pairs whole lines; Q4_1 /
 * Q5_1: 16 d, 16 m and 4 / 5 chunk vectors per block, each block whole lines */
_Static_assert(2 * PACK_ROWS + PACK_QB_Q5_0 == PACK_ROWS * sizeof(block_q5_0), "Q5_0 block");
_Static_assert((4 * PACK_ROWS + 2 * PACK_QB_Q5_0) % 64 == 0, "pairs of Q5_0 blocks fill whole cache lines");
_Static_assert(4 * PACK_ROWS + PACK_QB_Q4_0 == PACK_ROWS * sizeof(block_q4_1), "Q4_1 block");
_Static_assert(4 * PACK_ROWS + PACK_QB_Q5_0 == PACK_ROWS * sizeof(block_q5_1), "Q5_1 block");
_Static_assert((4 * PACK_ROWS + PACK_QB_Q4_0) % 64 == 0 && (4 * PACK_ROWS + PACK_QB_Q5_0) % 64 == 0,
               "Q4_1 / Q5_1 blocks fill whole cache lines");

/* MXFP4: 16 scale bytes and 16 x 16 quant bytes per block of a group, quads whole lines */
_Static_assert(PACK_ROWS + PACK_QB_MXFP4 == PACK_ROWS * sizeof(block_mxfp4), "MXFP4 block");
_Static_assert(PACK_MXFP4_QUAD % 64 == 0, "quads of MXFP4 blocks fill whole cache lines");

void pack_xblocks(vt_dtype type, const void *x, size_t x_stride, int64_t n_tok, int64_t nb,
                  pack_xblock *out) {
    VT_ASSERT(pack_needs_xblocks(type));
    if (type == VT_DTYPE_Q4_1 || type == VT_DTYPE_Q5_1) { /* Q8_1 activations: d and s */
        for (int64_t t = 0; t < n_tok; t++) {
            const block_q8_1 *xb = (const block_q8_1 *)((const uint8_t *)x + (size_t)t * x_stride);
            for (int64_t b = 0; b < nb; b++)
                out[t * nb + b] = (pack_xblock){.d = f16_to_f32(xb[b].d), .s = f16_to_f32(xb[b].s)};
        }
        return;
    }
    const int32_t offset = type == VT_DTYPE_Q4_0 ? 8 : type == VT_DTYPE_Q5_0 ? 16 : type == VT_DTYPE_MXFP4 ? 12 : 128;
    for (int64_t t = 0; t < n_tok; t++) {
        const block_q8_0 *xb = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride);
        for (int64_t b = 0; b < nb; b++) {
            int32_t s = 0;
            for (int i = 0; i < QK8_0; i++) s += xb[b].qs[i];
            out[t * nb + b] = (pack_xblock){.d = f16_to_f32(xb[b].d), .bias = -offset * s};
        }
    }
}

/* Copy `len` bytes (a multiple of 4) of one row into chunk vectors: 4 bytes
 * each, at dst + chunk * CHUNK_VEC + 4 * r. */
static void scatter_strided(const uint8_t *src, size_t len, int r, uint8_t *dst, size_t stride) {
    for (size_t c = 0; c < len / 4; c++) memcpy(dst + c * stride + 4 * (size_t)r, src + 4 * c, 4);
}
static void scatter_chunks(const uint8_t *src, size_t len, int r, uint8_t *dst) {
    scatter_strided(src, len, r, dst, CHUNK_VEC);
}

/* The packers: row r of a group (nb blocks of the file layout at src) into its
 * lanes of the group at g, one per type, in the layouts of pack.h. */
static void q4_0_pack(uint8_t *g, int64_t nb, const void *src, int r) {
    const block_q4_0 *row = src;
    for (int64_t b = 0; b < nb; b++) {
        memcpy(g + pack_pair_d(b, PACK_QB_Q4_0) + 2 * (size_t)r, &row[b].d, 2);
        scatter_chunks(row[b].qs, sizeof row[b].qs, r, g + pack_pair_qs(nb, b, PACK_QB_Q4_0));
    }
}

/* Q4_0's pairs, each block's nibbles then its fifth bits (pack_q5_high_bits) */
static void q5_0_pack(uint8_t *g, int64_t nb, const void *src, int r) {
    const block_q5_0 *row = src;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t hb[4];
        uint8_t *v = g + pack_pair_qs(nb, b, PACK_QB_Q5_0);
        memcpy(g + pack_pair_d(b, PACK_QB_Q5_0) + 2 * (size_t)r, &row[b].d, 2);
        scatter_chunks(row[b].qs, sizeof row[b].qs, r, v);
        pack_q5_high_bits(row[b].qh, hb);
        scatter_chunks(hb, 4, r, v + 4 * CHUNK_VEC);
    }
}

/* A Q4_1 / Q5_1 block's tile t: d, m | nibbles, then Q5_1's fifth bits (qh;
 * NULL for Q4_1). */
static void dm_tile_pack(uint8_t *t, int r, const vt_f16 *d, const vt_f16 *m, const uint8_t qs[16],
                         const uint8_t *qh) {
    memcpy(t + 2 * (size_t)r, d, 2);
    memcpy(t + 2 * PACK_ROWS + 2 * (size_t)r, m, 2);
    scatter_chunks(qs, 16, r, t + 4 * PACK_ROWS);
    if (qh) {
        uint8_t hb[4];
        pack_q5_high_bits(qh, hb);
        scatter_chunks(hb, 4, r, t + 4 * PACK_ROWS + 4 * CHUNK_VEC);
    }
}
static void q4_1_pack(uint8_t *g, int64_t nb, const void *src, int r) {
    const block_q4_1 *row = src;
    for (int64_t b = 0; b < nb; b++)
        dm_tile_pack(g + pack_dm_tile(b, PACK_QB_Q4_0), r, &row[b].d, &row[b].m, row[b].qs, NULL);
}
static void q5_1_pack(uint8_t *g, int64_t nb, const void *src, int r) {
    const block_q5_1 *row = src;
    for (int64_t b = 0; b < nb; b++)
        dm_tile_pack(g + pack_dm_tile(b, PACK_QB_Q5_0), r, &row[b].d, &row[b].m, row[b].qs, row[b].qh);
}

static void q8_0_pack(uint8_t *g, int64_t nb, const void *src, int r) {
    const block_q8_0 *row = src;
    for (int64_t b = 0; b < nb; b++) {
        memcpy(g + pack_pair_d(b, PACK_QB_Q8_0) + 2 * (size_t)r, &row[b].d, 2);
        scatter_chunks((const uint8_t *)row[b].qs, sizeof row[b].qs, r, g + pack_pair_qs(nb, b, PACK_QB_Q8_0));
    }
}

static void mxfp4_pack(uint8_t *g, int64_t nb, const void *src, int r) {
    const block_mxfp4 *row = src;
    for (int64_t b = 0; b < nb; b++) {
        g[pack_mxfp4_e(b) + (size_t)r] = row[b].e;
        scatter_chunks(row[b].qs, sizeof row[b].qs, r, g + pack_mxfp4_qs(nb, b));
    }
}

/* A Q4_K / Q5_K super-block's tile t: d[16], dmin[16] | 3 scale vectors | 32
 * quant vectors, then Q5_K's 8 qh vectors (qh; NULL for Q4_K). */
static void k_tile_pack(uint8_t *t, int r, const vt_f16 *d, const vt_f16 *dmin, const uint8_t scales[K_SCALE_SIZE],
                        const uint8_t qs[QK_K / 2], const uint8_t *qh) {
    memcpy(t + 2 * r, d, 2);
    memcpy(t + 2 * PACK_ROWS + 2 * r, dmin, 2);
    scatter_chunks(scales, K_SCALE_SIZE, r, t + 4 * PACK_ROWS);
    scatter_chunks(qs, QK_K / 2, r, t + 4 * PACK_ROWS + 3 * CHUNK_VEC);
    if (qh) scatter_chunks(qh, QK_K / 8, r, t + 4 * PACK_ROWS + 35 * CHUNK_VEC);
}
static void q4_K_pack(uint8_t *g, int64_t nb, const void *src, int r) {
    const block_q4_K *row = src;
    for (int64_t b = 0; b < nb; b++)
        k_tile_pack(g + (size_t)b * PACK_ROWS * sizeof(block_q4_K), r, &row[b].d, &row[b].dmin, row[b].scales,
                    row[b].qs, NULL);
}
static void q5_K_pack(uint8_t *g, int64_t nb, const void *src, int r) {
    const block_q5_K *row = src;
    for (int64_t b = 0; b < nb; b++)
        k_tile_pack(g + (size_t)b * PACK_ROWS * sizeof(block_q5_K), r, &row[b].d, &row[b].dmin, row[b].scales,
                    row[b].qs, row[b].qh);
}

static void q6_K_pack(uint8_t *g, int64_t nb, const void *src, int r) {
    const block_q6_K *row = src;
    for (int64_t b = 0; b < nb; b++) {
        memcpy(g + pack_q6_K_d(nb, b) + 2 * (size_t)r, &row[b].d, 2);
        for (int q = 0; q < 4; q++) {
            const int h = q >> 1, u = q & 1;
            uint8_t *qt = g + pack_q6_K_tile(nb, b) + (size_t)q * PACK_Q6_K_QUARTER;
            for (int m = 0; m < 4; m++) qt[PACK_Q6_K_SC(m) + r] = (uint8_t)row[b].scales[8 * h + 2 * m + u];
            const size_t stride = PACK_Q6_K_VEC(0, 1) - PACK_Q6_K_VEC(0, 0);
            scatter_strided(row[b].ql + 64 * h + 16 * u, 16, r, qt + PACK_Q6_K_VEC(0, 0), stride);
            scatter_strided(row[b].ql + 64 * h + 32 + 16 * u, 16, r, qt + PACK_Q6_K_VEC(1, 0), stride);
            scatter_strided(row[b].qh + 32 * h + 16 * u, 16, r, qt + PACK_Q6_K_VEC(2, 0), stride);
        }
    }
}

/* Byte i (< 4 * n_chunks) of row r from a run of chunk vectors. */
static inline uint8_t chunk_byte(const uint8_t *v, int r, int i) {
    return v[(size_t)(i / 4) * CHUNK_VEC + 4 * (size_t)r + (size_t)(i % 4)];
}

/* Row r's scale of block b of a Q4_0 / Q8_0 group. */
static inline vt_f16 pair_scale(const uint8_t *g, int64_t b, size_t qb, int r) {
    vt_f16 d;
    memcpy(&d, g + pack_pair_d(b, qb) + 2 * (size_t)r, 2);
    return d;
}

/* The ref steps: acc after block b of row r of the group at g (nb blocks a
 * row), x the token's activation row. Each keeps its type's float operations
 * and their order (an fmaf per block where the SIMD kernels fuse,
 * quant_dot_*_ref's steps where they do not): the SIMD kernels are tested
 * against these bits. */
typedef float (*ref_step_fn)(const uint8_t *g, int64_t nb, int64_t b, int r, const void *x, float acc);

/* The integer dot of row r's nibbles (Q4_0's 4 chunk vectors at v) as the
 * values grid[nibble] with the 32 activation quants xq. */
static int32_t nibble_isum(const uint8_t *v, int r, const int8_t grid[16], const int8_t *xq) {
    int32_t isum = 0;
    for (int i = 0; i < 16; i++) {
        const uint8_t q = chunk_byte(v, r, i);
        isum += grid[q & 0x0f] * xq[i] + grid[q >> 4] * xq[16 + i];
    }
    return isum;
}
static const int8_t q4_0_values[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

static float q4_0_step(const uint8_t *g, int64_t nb, int64_t b, int r, const void *x, float acc) {
    const block_q8_0 *xb = (const block_q8_0 *)x + b;
    const int32_t isum = nibble_isum(g + pack_pair_qs(nb, b, PACK_QB_Q4_0), r, q4_0_values, xb->qs);
    const float s = f16_to_f32(pair_scale(g, b, PACK_QB_Q4_0, r)) * f16_to_f32(xb->d);
    return fmaf(s, (float)isum, acc);
}

/* Quant i (0..31) of row r of a Q4_0-style block whose nibble vectors start at
 * v, with its fifth bit from the high-bit vector hv (NULL: none). */
static inline int leg_quant(const uint8_t *v, const uint8_t *hv, int r, int i) {
    const int k = (i % 16) / 4, hi = i >= 16;
    const uint8_t q = chunk_byte(v, r, i % 16);
    const int nib = hi ? q >> 4 : q & 0x0f;
    return hv ? nib | ((chunk_byte(hv, r, i % 4) >> (2 * k + hi)) & 1) << 4 : nib;
}

static float q5_0_step(const uint8_t *g, int64_t nb, int64_t b, int r, const void *x, float acc) {
    const block_q8_0 *xb = (const block_q8_0 *)x + b;
    const uint8_t *v = g + pack_pair_qs(nb, b, PACK_QB_Q5_0);
    int32_t isum = 0;
    for (int i = 0; i < 32; i++) isum += (leg_quant(v, v + 4 * CHUNK_VEC, r, i) - 16) * xb->qs[i];
    const float s = f16_to_f32(pair_scale(g, b, PACK_QB_Q5_0, r)) * f16_to_f32(xb->d);
    return acc + s * (float)isum; /* quant_dot_q5_0_ref's steps (built without contraction) */
}

/* Q4_1 (q5 false) and Q5_1 against Q8_1 activations. */
static inline float dm_step(bool q5, const uint8_t *g, int64_t b, int r, const void *x, float acc) {
    const block_q8_1 *xb = (const block_q8_1 *)x + b;
    const uint8_t *tb = g + pack_dm_tile(b, q5 ? PACK_QB_Q5_0 : PACK_QB_Q4_0), *v = tb + 4 * PACK_ROWS;
    int32_t isum = 0;
    for (int i = 0; i < 32; i++) isum += leg_quant(v, q5 ? v + 4 * CHUNK_VEC : NULL, r, i) * xb->qs[i];
    vt_f16 d, m;
    memcpy(&d, tb + 2 * (size_t)r, 2);
    memcpy(&m, tb + 2 * PACK_ROWS + 2 * (size_t)r, 2);
    /* quant_dot_q4_1_ref's / _q5_1_ref's steps */
    return acc + ((f16_to_f32(d) * f16_to_f32(xb->d)) * (float)isum + f16_to_f32(m) * f16_to_f32(xb->s));
}
/* The steps of the two types of a shared routine (dm_step, k45_step below). */
#define PAIR_STEP(name, routine, q5)                                                                     \
    static float name##_step(const uint8_t *g, int64_t nb, int64_t b, int r, const void *x, float acc) { \
        return routine(q5, g, b, r, x, acc);                                                            \
    }
PAIR_STEP(q4_1, dm_step, false)
PAIR_STEP(q5_1, dm_step, true)

static float q8_0_step(const uint8_t *g, int64_t nb, int64_t b, int r, const void *x, float acc) {
    const block_q8_0 *xb = (const block_q8_0 *)x + b;
    const uint8_t *v = g + pack_pair_qs(nb, b, PACK_QB_Q8_0);
    int32_t isum = 0;
    for (int i = 0; i < 32; i++) isum += (int8_t)chunk_byte(v, r, i) * xb->qs[i];
    const float s = f16_to_f32(pair_scale(g, b, PACK_QB_Q8_0, r)) * f16_to_f32(xb->d);
    return fmaf(s, (float)isum, acc);
}

static float mxfp4_step(const uint8_t *g, int64_t nb, int64_t b, int r, const void *x, float acc) {
    const block_q8_0 *xb = (const block_q8_0 *)x + b;
    const int32_t isum = nibble_isum(g + pack_mxfp4_qs(nb, b), r, mxfp4_values, xb->qs);
    const float s = mxfp4_e8m0_half(g[pack_mxfp4_e(b) + (size_t)r]) * f16_to_f32(xb->d);
    return fmaf(s, (float)isum, acc);
}

/* The 8 scales and 8 mins of a Q4_K super-block from its 12 scale bytes. */
static void q4_K_scales_mins(const uint8_t *p, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = p[j] & 63;
        mn[j] = p[j + 4] & 63;
        sc[j + 4] = (uint8_t)((p[j + 8] & 0x0f) | ((p[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((p[j + 8] >> 4) | ((p[j + 4] >> 6) << 4));
    }
}

/* Q4_K (q5 false) and Q5_K: the Q4_K tile, and for Q5_K its 8 fifth-bit vectors. */
static inline float k45_step(bool q5, const uint8_t *g, int64_t b, int r, const void *x, float acc) {
    const block_q8_K *xb = (const block_q8_K *)x + b;
    const uint8_t *tb = g + (size_t)b * PACK_ROWS * (q5 ? sizeof(block_q5_K) : sizeof(block_q4_K));
    uint8_t packed[12], sc[8], mn[8];
    vt_f16 d, dmin;
    memcpy(&d, tb + 2 * r, 2);
    memcpy(&dmin, tb + 2 * PACK_ROWS + 2 * r, 2);
    for (int i = 0; i < 12; i++) packed[i] = chunk_byte(tb + 4 * PACK_ROWS, r, i);
    q4_K_scales_mins(packed, sc, mn);
    const uint8_t *v = tb + 4 * PACK_ROWS + 3 * CHUNK_VEC, *vh = v + 32 * CHUNK_VEC;
    int32_t isum = 0, imin = 0;
    for (int j = 0; j < 4; j++) {
        int32_t lo = 0, hi = 0;
        for (int l = 0; l < 32; l++) {
            const uint8_t q = chunk_byte(v, r, 32 * j + l), h = q5 ? chunk_byte(vh, r, l) : 0;
            lo += ((q & 0x0f) | ((h >> (2 * j) & 1) << 4)) * xb->qs[64 * j + l];
            hi += ((q >> 4) | ((h >> (2 * j + 1) & 1) << 4)) * xb->qs[64 * j + 32 + l];
        }
        isum += sc[2 * j] * lo + sc[2 * j + 1] * hi;
    }
    for (int j = 0; j < 8; j++) imin += mn[j] * (xb->bsums[2 * j] + xb->bsums[2 * j + 1]);
    const float s = f16_to_f32(d) * xb->d;
    const float sm = f16_to_f32(dmin) * xb->d;
    acc = fmaf(s, (float)isum, acc);
    return fmaf(-sm, (float)imin, acc);
}
PAIR_STEP(q4_K, k45_step, false)
PAIR_STEP(q5_K, k45_step, true)
#undef PAIR_STEP

static float q6_K_step(const uint8_t *g, int64_t nb, int64_t b, int r, const void *x, float acc) {
    const block_q8_K *xb = (const block_q8_K *)x + b;
    int8_t q[QK_K], sc[16];
    for (int qi = 0; qi < 4; qi++) {
        const int h = qi >> 1, u = qi & 1;
        const uint8_t *qt = g + pack_q6_K_tile(nb, b) + (size_t)qi * PACK_Q6_K_QUARTER;
        for (int m = 0; m < 4; m++) sc[8 * h + 2 * m + u] = (int8_t)qt[PACK_Q6_K_SC(m) + r];
        for (int l = 0; l < 16; l++) {
            const size_t at = 4 * (size_t)r + (size_t)(l % 4); /* byte of row r */
            const uint8_t la = qt[PACK_Q6_K_VEC(0, l / 4) + at];
            const uint8_t lb = qt[PACK_Q6_K_VEC(1, l / 4) + at];
            const uint8_t hb = qt[PACK_Q6_K_VEC(2, l / 4) + at];
            const int e = 128 * h + 16 * u + l; /* element of m = 0 */
            q[e] = (int8_t)((la & 0x0f) | ((hb & 3) << 4));
            q[e + 32] = (int8_t)((lb & 0x0f) | (((hb >> 2) & 3) << 4));
            q[e + 64] = (int8_t)((la >> 4) | (((hb >> 4) & 3) << 4));
            q[e + 96] = (int8_t)((lb >> 4) | (((hb >> 6) & 3) << 4));
        }
    }
    int32_t isum = 0;
    for (int j = 0; j < 16; j++) {
        int32_t sj = 0;
        for (int l = 0; l < 16; l++) sj += (q[16 * j + l] - 32) * xb->qs[16 * j + l];
        isum += sc[j] * sj;
    }
    vt_f16 d;
    memcpy(&d, g + pack_q6_K_d(nb, b) + 2 * (size_t)r, 2);
    const float s = f16_to_f32(d) * xb->d;
    return fmaf(s, (float)isum, acc);
}

/* One row per type with a packed layout: its block, its packer, its ref step
 * and the pack_gemm_fn over that step (layouts below, indexed by type). */
typedef struct {
    int64_t block;          /* elements per block */
    size_t row_block_bytes; /* bytes of one row's block; a group's block is PACK_ROWS of them */
    bool xblocks;           /* its gemm reads pack_xblocks */
    void (*pack)(uint8_t *g, int64_t nb, const void *src, int r);
    ref_step_fn step;
    pack_gemm_fn ref;
} pack_layout;

/* The row of `type`, NULL without a packed layout (defined below the table,
 * whose ref gemms read their own row through it). */
static const pack_layout *layout_of(vt_dtype type);

/* The scalar twins share one driver: per group, token and row of the group,
 * acc starts at 0 and takes the type's step once per block in block order,
 * then y[t * ldy + 16 g + r] = acc. One indirect call per block is noise next
 * to the step's scalar loop. */
static void gemm_ref(const pack_layout *l, int64_t n_in, const void *w, int64_t n_groups, const void *x,
                     size_t x_stride, int n_tok, float *y, int64_t ldy) {
    const int64_t nb = n_in / l->block;
    const size_t group_bytes = (size_t)nb * PACK_ROWS * l->row_block_bytes;
    for (int64_t gi = 0; gi < n_groups; gi++) {
        const uint8_t *g = (const uint8_t *)w + (size_t)gi * group_bytes;
        for (int t = 0; t < n_tok; t++) {
            const void *xr = (const uint8_t *)x + (size_t)t * x_stride;
            for (int r = 0; r < PACK_ROWS; r++) {
                float acc = 0.0f;
                for (int64_t b = 0; b < nb; b++) acc = l->step(g, nb, b, r, xr, acc);
                y[t * ldy + gi * PACK_ROWS + r] = acc;
            }
        }
    }
}

/* The pack_gemm_fn of each type: gemm_ref over its row. xs is not read: x
 * itself gives the same values. */
#define REF_GEMM(name, TYPE)                                                                             \
    static void gemm_##name##_ref(int64_t n_in, const void *w, int64_t n_groups, const void *x,          \
                                  size_t x_stride, const pack_xblock *xs, int n_tok, float *y,          \
                                  int64_t ldy) {                                                        \
        (void)xs;                                                                                       \
        gemm_ref(layout_of(VT_DTYPE_##TYPE), n_in, w, n_groups, x, x_stride, n_tok, y, ldy);             \
    }
REF_GEMM(q4_0, Q4_0)
REF_GEMM(q4_1, Q4_1)
REF_GEMM(q5_0, Q5_0)
REF_GEMM(q5_1, Q5_1)
REF_GEMM(q8_0, Q8_0)
REF_GEMM(q4_K, Q4_K)
REF_GEMM(q5_K, Q5_K)
REF_GEMM(q6_K, Q6_K)
REF_GEMM(mxfp4, MXFP4)
#undef REF_GEMM

static const pack_layout layouts[VT_DTYPE_COUNT] = {
    [VT_DTYPE_Q4_0] = {QK4_0, sizeof(block_q4_0), true, q4_0_pack, q4_0_step, gemm_q4_0_ref},
    [VT_DTYPE_Q4_1] = {QK4_1, sizeof(block_q4_1), true, q4_1_pack, q4_1_step, gemm_q4_1_ref},
    [VT_DTYPE_Q5_0] = {QK5_0, sizeof(block_q5_0), true, q5_0_pack, q5_0_step, gemm_q5_0_ref},
    [VT_DTYPE_Q5_1] = {QK5_1, sizeof(block_q5_1), true, q5_1_pack, q5_1_step, gemm_q5_1_ref},
    [VT_DTYPE_Q8_0] = {QK8_0, sizeof(block_q8_0), true, q8_0_pack, q8_0_step, gemm_q8_0_ref},
    [VT_DTYPE_Q4_K] = {QK_K, sizeof(block_q4_K), false, q4_K_pack, q4_K_step, gemm_q4_K_ref},
    [VT_DTYPE_Q5_K] = {QK_K, sizeof(block_q5_K), false, q5_K_pack, q5_K_step, gemm_q5_K_ref},
    [VT_DTYPE_Q6_K] = {QK_K, sizeof(block_q6_K), false, q6_K_pack, q6_K_step, gemm_q6_K_ref},
    [VT_DTYPE_MXFP4] = {QK_MXFP4, sizeof(block_mxfp4), true, mxfp4_pack, mxfp4_step, gemm_mxfp4_ref},
};

static const pack_layout *layout_of(vt_dtype type) {
    return (unsigned)type < (unsigned)VT_DTYPE_COUNT && layouts[type].pack ? &layouts[type] : NULL;
}

bool pack_has_layout(vt_dtype type) { return layout_of(type) != NULL; }

bool pack_needs_xblocks(vt_dtype type) {
    const pack_layout *l = layout_of(type);
    return l && l->xblocks;
}

void pack_group(vt_dtype type, int64_t n_in, const void *src, size_t row_bytes, int nr, void *dst) {
    const pack_layout *l = layout_of(type);
    VT_ASSERT(l && "pack_group: type without a packed layout");
    memset(dst, 0, PACK_ROWS * row_bytes);
    for (int r = 0; r < nr; r++) l->pack(dst, n_in / l->block, (const uint8_t *)src + (size_t)r * row_bytes, r);
}

pack_gemm_fn pack_gemm_ref(vt_dtype type) {
    const pack_layout *l = layout_of(type);
    return l ? l->ref : NULL;
}
