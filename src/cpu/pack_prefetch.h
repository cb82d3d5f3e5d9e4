/* Software prefetch of the packed groups whose blocks are split into regions:
 * Q6_K (cpu/pack.h), three (scales, sub-block scales, quants). A kernel reads
 * every region in step, block by block, so a group is consumed as three
 * streams at once. One linear prefetch stream over the group, which suits the
 * layouts that keep scales beside their quants (the K-quant tiles, the Q4_0 /
 * Q8_0 pairs), runs behind the quants wherever the regions before them are
 * longer than its lead: with Q8_0's old layout, rows of 8192 had 8 KiB of
 * scales before the quants, so the quants of the first 60% of each group went
 * unprefetched, and a decode GEMM of such rows read 16-18% slower (the Zen 5
 * VM, 16384 x 8192 and 256 MiB of groups, in one process alternating the two
 * kernels).
 *
 * So every region is its own stream: while it computes block b, a kernel
 * prefetches block b + lead of each region, and past the group's last block
 * the first blocks of the next group (whose regions start group_bytes further
 * on), which the same call, or the next call of the step, reads next. The
 * prefetch is a hint: past the end of the weights it reads nothing that
 * matters and cannot fault.
 *
 * Lines are handed out by where they start: part k of block j of a region
 * covers the lines that start in its bytes, so consecutive parts prefetch every
 * line once, however the region's bytes fall on lines. */
#ifndef VT_CPU_PACK_PREFETCH_H
#define VT_CPU_PACK_PREFETCH_H

#include "cpu/pack.h"
#include "quant/blocks.h"

#include <stddef.h>
#include <stdint.h>

#ifndef VT_INLINE
#define VT_INLINE static inline __attribute__((always_inline))
#endif

#define PACK_PF_LINE 64

/* Leads: the fewest units of `unit` bytes that cover `dist` bytes of a group;
 * in blocks of a Q6_K group (16 rows of blk a block), and in quarters of a
 * Q6_K super-block (840 bytes). */
#define PACK_PF_LEAD(dist, unit) (((dist) + (unit) - 1) / (unit))
#define PACK_PF_BLOCKS(dist, blk) PACK_PF_LEAD(dist, PACK_ROWS * sizeof(blk))
#define PACK_PF_QUARTERS_Q6_K(dist) PACK_PF_LEAD(dist, PACK_ROWS * sizeof(block_q6_K) / 4)

/* The lines that start in bytes [lo, hi) after `base`. */
VT_INLINE void pack_prefetch_span(const uint8_t *base, size_t lo, size_t hi) {
    const uintptr_t a = (uintptr_t)base;
    for (uintptr_t p = (a + lo + PACK_PF_LINE - 1) & ~(uintptr_t)(PACK_PF_LINE - 1); p < a + hi;
         p += PACK_PF_LINE)
        __builtin_prefetch((const void *)p, 0, 3);
}

/* Part `part` of `parts` of block j of a region of `per_block` bytes per block
 * at `region` (per_block a multiple of parts). */
VT_INLINE void pack_prefetch_part(const uint8_t *region, size_t per_block, int64_t j, int part,
                                  int parts) {
    const size_t lo = (size_t)j * per_block + (size_t)part * (per_block / (size_t)parts);
    pack_prefetch_span(region, lo, lo + per_block / (size_t)parts);
}

/* Quarter k of super-block j of a Q6_K group of nb super-blocks at g; j >= nb:
 * super-block j - nb of the next group, and so on. Regions per super-block:
 * 16 f16 scales, 16 x 16 sub-block scales, the quants (ql, qh) of 16 rows. */
#define PACK_Q6_K_D (PACK_ROWS * 2)
#define PACK_Q6_K_SC (PACK_ROWS * 16)
#define PACK_Q6_K_Q (PACK_ROWS * (sizeof(block_q6_K) - 2 - 16))
VT_INLINE void pack_prefetch_q6_K(const uint8_t *g, int64_t nb, int64_t j, int k) {
    while (j >= nb) {
        g += (size_t)nb * (PACK_Q6_K_D + PACK_Q6_K_SC + PACK_Q6_K_Q);
        j -= nb;
    }
    if (k == 0) pack_prefetch_part(g, PACK_Q6_K_D, j, 0, 1);
    pack_prefetch_part(g + (size_t)nb * PACK_Q6_K_D, PACK_Q6_K_SC, j, k, 4);
    pack_prefetch_part(g + (size_t)nb * (PACK_Q6_K_D + PACK_Q6_K_SC), PACK_Q6_K_Q, j, k, 4);
}

#endif
