/* Overflow-checked size arithmetic. Every number read from a file or a request
 * goes through these before it sizes an allocation or an offset. */
#ifndef VT_BASE_SIZE_H
#define VT_BASE_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Each returns false (and leaves *out unspecified) on overflow. */
static inline bool size_add(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool size_mul(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool i64_mul(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline size_t size_align_up(size_t n, size_t align) {
    return (n + align - 1) / align * align;
}

#endif
