/* Working memory in transparent huge pages.
 *
 * Large buffers that every pass sweeps (the KV cache, the forward pass's
 * activations) are anonymous mappings aligned to 2 MiB and advised with
 * MADV_HUGEPAGE, so they take huge pages where the kernel's policy is
 * "madvise" (a common default) as well as "always". In 4 KiB pages a sweep
 * walks the page tables for most pages it touches once the weights have
 * flushed the TLB, and under a VM each walk is two-dimensional. Measured on
 * the Zen 5 VM (1B Q4_0, 1 thread, -DVT_FWD_PROFILE, alternated runs):
 * decode attention at depth 512 -30..40% with the KV cache in huge pages, a
 * 512-token prefill -15..25% (every step) with the activations in them.
 *
 * The memory is zero and committed on first touch, as calloc's. Under
 * AddressSanitizer the functions are calloc and free, so bounds stay checked. */
#ifndef VT_BASE_HUGEMEM_H
#define VT_BASE_HUGEMEM_H

#include <stddef.h>

#define HUGEMEM_PAGE ((size_t)2 << 20)

/* bytes of zeroed memory, 2 MiB-aligned when bytes >= 2 MiB; NULL if there is
 * none (errno from mmap). */
void *hugemem_alloc(size_t bytes);
/* Release p from hugemem_alloc(bytes) (the same bytes); NULL is a no-op. */
void hugemem_free(void *p, size_t bytes);

#endif
