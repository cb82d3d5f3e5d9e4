#include "base/hugemem.h"

#include "base/size.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#ifdef __SANITIZE_ADDRESS__

void *hugemem_alloc(size_t bytes) { return calloc(1, bytes ? bytes : 1); }
void hugemem_free(void *p, size_t bytes) {
    (void)bytes;
    free(p);
}

#else

/* Whole pages of the mapping: huge ones from 2 MiB up, base ones below. */
static size_t map_len(size_t bytes) {
    return bytes >= HUGEMEM_PAGE ? size_align_up(bytes, HUGEMEM_PAGE) : size_align_up(bytes ? bytes : 1, 4096);
}

void *hugemem_alloc(size_t bytes) {
    const size_t len = map_len(bytes);
    if (len < HUGEMEM_PAGE) {
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    /* map a huge page more than needed, keep the aligned len bytes */
    uint8_t *p = mmap(NULL, len + HUGEMEM_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)size_align_up((size_t)p, HUGEMEM_PAGE);
    if (a > p) munmap(p, (size_t)(a - p));
    munmap(a + len, (size_t)(p + HUGEMEM_PAGE - a));
    madvise(a, len, MADV_HUGEPAGE); /* advice: without THP the pages stay small */
    return a;
}

void hugemem_free(void *p, size_t bytes) {
    if (p) munmap(p, map_len(bytes));
}

#endif
