/* A tiny test harness: CHECK macros that count, and a closing line that CI reads.
 *
 *   int main(void) { CHECK(1 + 1 == 2); return test_finish(); }
 *
 * Each failed check prints file:line and the expression; the program exits 1 if
 * any check failed and prints "N passed, N failed". */
#ifndef VT_TESTS_TEST_H
#define VT_TESTS_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_passed_, test_failed_;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (cond) {                                                                     \
            test_passed_++;                                                             \
        } else {                                                                        \
            test_failed_++;                                                             \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                               \
    } while (0)

#define CHECK_MSG(cond, ...)                                                            \
    do {                                                                                \
        if (cond) {                                                                     \
            test_passed_++;                                                             \
        } else {                                                                        \
            test_failed_++;                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);             \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
        }                                                                               \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                              \
    do {                                                                                \
        long long ta_ = (long long)(a), tb_ = (long long)(b);                           \
        CHECK_MSG(ta_ == tb_, "%lld != %lld", ta_, tb_);                                \
    } while (0)

/* A vt_status call that must succeed; prints vt_last_error() otherwise. */
#define CHECK_OK(expr)                                                                  \
    do {                                                                                \
        vt_status ts_ = (expr);                                                         \
        CHECK_MSG(ts_ == VT_OK, "%s (%s)", vt_status_str(ts_), vt_last_error());        \
    } while (0)

static inline int test_finish(void) {
    printf("%d passed, %d failed\n", test_passed_, test_failed_);
    return test_failed_ ? 1 : 0;
}

/* Directory of the shared test models (VT_TEST_MODELS, default ../shared/models). */
static inline const char *test_models_dir(void) {
    const char *d = getenv("VT_TEST_MODELS");
    return d && *d ? d : "../shared/models";
}

/* Path of a shared model file in a static buffer; NULL (and a note, or a failure
 * when CI=true) if it is missing. */
static inline const char *test_model_path(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", test_models_dir(), name);
    FILE *f = fopen(buf, "rb");
    if (f) {
        fclose(f);
        return buf;
    }
    const char *ci = getenv("CI");
    if (ci && !strcmp(ci, "true")) {
        test_failed_++;
        fprintf(stderr, "FAIL: model %s missing under CI=true\n", buf);
    } else {
        fprintf(stderr, "skip: model %s missing\n", buf);
    }
    return NULL;
}

/* The whole file at path, NUL-terminated (caller frees), its length in *len
 * where len is not NULL; NULL if it cannot be read. */
static inline char *test_read_file(const char *path, size_t *len) {
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    if (len && buf) *len = (size_t)n;
    return buf;
}

/* The real chat templates: VT_TEST_TEMPLATES, else chat-templates beside
 * VT_TEST_MODELS, else ../shared/chat-templates. */
static inline const char *test_templates_dir(void) {
    static char buf[4096];
    const char *d = getenv("VT_TEST_TEMPLATES");
    if (d && *d) return d;
    const char *m = getenv("VT_TEST_MODELS");
    if (m && *m) {
        snprintf(buf, sizeof buf, "%.4000s/../chat-templates", m);
        return buf;
    }
    return "../shared/chat-templates";
}

/* Normalised mean squared error: sum (a-b)^2 / sum b^2, b the reference. */
static inline double test_nmse(const float *a, const float *ref, long long n) {
    double num = 0, den = 0;
    for (long long i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

#endif
