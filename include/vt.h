/* vt: a CPU LLM inference engine for GGUF models.
 *
 * Public C API. All handles are opaque; every function that can fail returns a
 * vt_status and, on failure, leaves a message for vt_last_error(). The library
 * never exits or aborts on bad input. */
#ifndef VT_H
#define VT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vt_status {
    VT_OK = 0,
    VT_E_IO,          /* the OS refused a read, write, open or map */
    VT_E_FORMAT,      /* a file or a request is malformed */
    VT_E_NOMEM,       /* an allocation failed, or a budget is exhausted */
    VT_E_RANGE,       /* a number is outside what is allowed */
    VT_E_UNSUPPORTED, /* well-formed, but vt does not implement it */
    VT_E_BUSY,        /* try again later (queue full, resources in use) */
    VT_E_INVALID,     /* an argument from the caller is invalid */
    VT_E_NOT_FOUND,   /* a named thing (key, tensor, request id) does not exist */
    VT_E_ABORTED,     /* the operation was cancelled */
} vt_status;

/* The message of the last failure on this thread. Never NULL. */
const char *vt_last_error(void);
/* A short fixed name for a status ("bad format"). */
const char *vt_status_str(vt_status s);

#ifdef __cplusplus
}
#endif

#endif
