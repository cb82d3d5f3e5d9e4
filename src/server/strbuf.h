/* A growable byte string for the server: rendered prompts, SSE frames, metrics.
 * Appends never fail silently: on allocation failure the buffer is marked
 * failed (sb.failed) and later appends are ignored, so a caller checks once. */
#ifndef VT_SERVER_STRBUF_H
#define VT_SERVER_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct strbuf {
    char *ptr; /* NUL-terminated when len > 0 or after sb_reserve */
    size_t len, cap;
    bool failed;
} strbuf;

static inline bool sb_reserve(strbuf *sb, size_t extra) {
    if (sb->failed) return false;
    if (extra > ((size_t)1 << 40) - sb->len) {
        sb->failed = true;
        return false;
    }
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap) return true;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need) cap *= 2;
    char *p = (char *)realloc(sb->ptr, cap);
    if (!p) {
        sb->failed = true;
        return false;
    }
    sb->ptr = p;
    sb->cap = cap;
    sb->ptr[sb->len] = 0; /* the promise above: a reserved buffer is a string */
    return true;
}

static inline void sb_addn(strbuf *sb, const char *s, size_t n) {
    if (!sb_reserve(sb, n)) return;
    if (n) memcpy(sb->ptr + sb->len, s, n);
    sb->len += n;
    sb->ptr[sb->len] = 0;
}

static inline void sb_add(strbuf *sb, const char *s) { sb_addn(sb, s, strlen(s)); }

static inline void sb_printf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void sb_printf(strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !sb_reserve(sb, (size_t)n)) {
        sb->failed = true;
        va_end(ap2);
        return;
    }
    vsnprintf(sb->ptr + sb->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    sb->len += (size_t)n;
}

static inline void sb_free(strbuf *sb) {
    free(sb->ptr);
    memset(sb, 0, sizeof *sb);
}

#endif
