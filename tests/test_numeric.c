/* Non-finite values (issue 30, item 9): fwd_logits_finite, the check every
 * logits row passes before it is sampled, and quant_count_nonfinite, the scan
 * behind vt inspect --check and the tensor named in a VT_E_NUMERIC message.
 * End to end (vt run, the server, vt inspect) is tests/test_nonfinite.sh. */
#include "base/fp16.h"
#include "model/forward.h"
#include "quant/quant.h"
#include "test.h"

#include <float.h>
#include <math.h>

static void test_logits_finite(void) {
    float row[1003];
    for (int i = 0; i < 1003; i++) row[i] = (float)(i % 17) - 8.0f;
    CHECK(fwd_logits_finite(row, 1003));
    row[5] = FLT_MAX, row[6] = -FLT_MAX, row[7] = FLT_MIN / 4; /* huge and subnormal are finite */
    CHECK(fwd_logits_finite(row, 1003));
    CHECK(fwd_logits_finite(row, 0));
    const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
    const int at[] = {0, 1, 2, 3, 500, 999, 1000, 1001, 1002}; /* the 4-wide body and the tail */
    int missed = 0;
    for (size_t b = 0; b < 4; b++)
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
            const float keep = row[at[k]];
            row[at[k]] = bad[b];
            missed += fwd_logits_finite(row, 1003);
            missed += !fwd_logits_finite(row, at[k]); /* a row that ends before it is fine */
            row[at[k]] = keep;
        }
    CHECK_EQ_INT(missed, 0);
}

static void test_count_nonfinite(void) {
    float x[512];
    for (int i = 0; i < 512; i++) x[i] = sinf((float)i);
    int64_t first = -1;
    float v = 0;
    CHECK(quant_count_nonfinite(VT_DTYPE_F32, x, 512, &first, &v) == 0);
    x[17] = NAN, x[300] = -INFINITY;
    CHECK(quant_count_nonfinite(VT_DTYPE_F32, x, 512, &first, &v) == 2);
    CHECK(first == 17 && isnan(v));
    /* F16: an infinity */
    vt_f16 h[512];
    for (int i = 0; i < 512; i++) h[i] = f32_to_f16(sinf((float)i));
    CHECK(quant_count_nonfinite(VT_DTYPE_F16, h, 512, NULL, NULL) == 0);
    h[400] = f32_to_f16(INFINITY);
    CHECK(quant_count_nonfinite(VT_DTYPE_F16, h, 512, &first, &v) == 1);
    CHECK(first == 400 && isinf(v) && v > 0);
    /* Q8_0: a NaN scale poisons its whole block of 32 */
    const quant_traits *q8 = quant_traits_get(VT_DTYPE_Q8_0);
    uint8_t q[16 * 34];
    for (int i = 0; i < 512; i++) x[i] = sinf((float)i);
    q8->quant_ref(x, q, 512);
    CHECK(quant_count_nonfinite(VT_DTYPE_Q8_0, q, 512, NULL, NULL) == 0);
    const vt_f16 nan16 = f32_to_f16(NAN);
    memcpy(q + 3 * 34, &nan16, 2); /* block 3's d */
    CHECK(quant_count_nonfinite(VT_DTYPE_Q8_0, q, 512, &first, &v) == 32);
    CHECK(first == 96 && isnan(v));
    /* a type vt cannot read, a length that is not whole blocks */
    CHECK(quant_traits_get((vt_dtype)4) == NULL); /* ggml's retired Q4_2 */
    CHECK(quant_count_nonfinite((vt_dtype)4, q, 32, NULL, NULL) == -1);
    CHECK(quant_count_nonfinite(VT_DTYPE_Q8_0, q, 33, NULL, NULL) == -1);
}

int main(void) {
    test_logits_finite();
    test_count_nonfinite();
    return test_finish();
}
