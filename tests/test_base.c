/* base/: status messages, checked size math, fp16/bf16 conversions, hugemem. */
#include "base/fp16.h"
#include "base/hugemem.h"
#include "base/size.h"
#include "base/status.h"
#include "test.h"

static void test_status(void) {
    CHECK(vt_errorf(VT_E_FORMAT, "tensor '%s': %d", "x", 3) == VT_E_FORMAT);
    CHECK(!strcmp(vt_last_error(), "tensor 'x': 3"));
    vt_error_prefix(VT_E_FORMAT, "model.gguf");
    CHECK(!strcmp(vt_last_error(), "model.gguf: tensor 'x': 3"));
    CHECK(!strcmp(vt_status_str(VT_E_NOMEM), "out of memory"));
}

static void test_size(void) {
    size_t r;
    CHECK(size_add(1, 2, &r) && r == 3);
    CHECK(!size_add(SIZE_MAX, 1, &r));
    CHECK(!size_mul(SIZE_MAX / 2 + 1, 2, &r));
    int64_t q;
    CHECK(!i64_mul(INT64_MAX / 3 + 1, 3, &q));
    CHECK(size_align_up(33, 32) == 64);
}

static void test_fp16(void) {
    /* Every finite half round-trips exactly through float. */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00) continue; /* inf/nan */
        if (f32_to_f16(f16_to_f32((vt_f16)h)) != h) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(f16_to_f32(0x3c00) == 1.0f);
    CHECK(f32_to_f16(65520.0f) == 0x7c00);       /* rounds to +inf */
    CHECK(f32_to_f16(1.0f + 1.0f / 4096) == 0x3c00); /* ties to even */
    CHECK(bf16_to_f32(f32_to_bf16(1.5f)) == 1.5f);
    CHECK(f32_to_bf16(1.00390625f) == 0x3f80); /* tie rounds to even */
}

/* Zeroed, writable to the last byte, 2 MiB-aligned from 2 MiB up (except under
 * ASan, where it is calloc), and freed without error for every size class. */
static void test_hugemem(void) {
    static const size_t sizes[] = {0, 1, 4095, 4097, HUGEMEM_PAGE - 1, HUGEMEM_PAGE, 3 * HUGEMEM_PAGE + 5};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const size_t n = sizes[i];
        unsigned char *p = hugemem_alloc(n);
        CHECK(p != NULL);
        if (!p) continue;
        int nonzero = 0;
        for (size_t k = 0; k < n; k += 511) nonzero += p[k] != 0;
        if (n) nonzero += p[n - 1] != 0;
        CHECK_MSG(nonzero == 0, "hugemem_alloc(%zu) not zeroed", n);
        if (n) memset(p, 0xab, n);
#ifndef __SANITIZE_ADDRESS__
        if (n >= HUGEMEM_PAGE) CHECK_MSG((uintptr_t)p % HUGEMEM_PAGE == 0, "hugemem_alloc(%zu) unaligned", n);
#endif
        hugemem_free(p, n);
    }
    hugemem_free(NULL, 123);
}

int main(void) {
    test_status();
    test_size();
    test_fp16();
    test_hugemem();
    return test_finish();
}
