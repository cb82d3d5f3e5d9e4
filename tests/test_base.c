/* base/: status messages, checked size math, fp16/bf16 conversions. */
#include "base/fp16.h"
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

int main(void) {
    test_status();
    test_size();
    test_fp16();
    return test_finish();
}
