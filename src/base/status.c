#include "base/status.h"

#include <stdarg.h>
#include <string.h>

static _Thread_local char error_buf[1024];

vt_status vt_errorf(vt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_buf, sizeof error_buf, fmt, ap);
    va_end(ap);
    return code;
}

vt_status vt_error_prefix(vt_status code, const char *prefix) {
    char tmp[sizeof error_buf];
    memcpy(tmp, error_buf, sizeof tmp);
    size_t n = strlen(prefix);
    if (n > sizeof error_buf - 3) n = sizeof error_buf - 3;
    memcpy(error_buf, prefix, n);
    memcpy(error_buf + n, ": ", 2);
    size_t rest = sizeof error_buf - n - 3;
    size_t m = strnlen(tmp, rest);
    memcpy(error_buf + n + 2, tmp, m);
    error_buf[n + 2 + m] = 0;
    return code;
}

const char *vt_last_error(void) { return error_buf; }

const char *vt_status_str(vt_status s) {
    switch (s) {
    case VT_OK: return "ok";
    case VT_E_IO: return "i/o error";
    case VT_E_FORMAT: return "bad format";
    case VT_E_NOMEM: return "out of memory";
    case VT_E_RANGE: return "out of range";
    case VT_E_UNSUPPORTED: return "unsupported";
    case VT_E_BUSY: return "busy";
    case VT_E_INVALID: return "invalid argument";
    case VT_E_NOT_FOUND: return "not found";
    case VT_E_ABORTED: return "aborted";
    case VT_E_NUMERIC: return "non-finite number";
    }
    return "unknown status";
}
