/* vt_status and the error convention.
 *
 * A function that can fail returns vt_status and writes its results through
 * out-pointers. On failure it records one human-readable message that says what
 * was wrong and where (file, field, numbers) with vt_errorf(); the caller reads it
 * with vt_last_error(). The message lives in thread-local storage, so threads do
 * not clobber each other's errors.
 *
 * VT_E_NUMERIC is for results that are not numbers: a logits row with a NaN or an
 * infinity is never sampled from; its message names the step (which batch token,
 * sequence, position or request) and, when one is found, the weight tensor that
 * holds a non-finite value ("tensor 'blk.0.attn_q.weight': element 17 is nan"). */
#ifndef VT_BASE_STATUS_H
#define VT_BASE_STATUS_H

#include "vt.h"

#include <stdio.h>
#include <stdlib.h>

/* Record a message for status `code` and return `code`, so a failure path reads
 * `return vt_errorf(VT_E_FORMAT, "%s: bad magic", path);`. */
vt_status vt_errorf(vt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix the current message with "prefix: " (e.g. the file name), keep code. */
vt_status vt_error_prefix(vt_status code, const char *prefix);

/* Internal invariants only, never input validation. Stays on in release builds. */
#define VT_ASSERT(cond)                                                          \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "vt: internal error: %s:%d: %s\n", __FILE__,         \
                    __LINE__, #cond);                                            \
            abort();                                                             \
        }                                                                        \
    } while (0)

#define VT_TRY(expr)                                                             \
    do {                                                                         \
        vt_status vt_try_s_ = (expr);                                            \
        if (vt_try_s_ != VT_OK) return vt_try_s_;                                \
    } while (0)

#endif
