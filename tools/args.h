/* Small helpers for the subcommands' option parsing: numbers are checked, and a
 * bad value names the option. */
#ifndef VT_TOOLS_ARGS_H
#define VT_TOOLS_ARGS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value after option argv[*i], advancing *i; NULL (with a message) if missing. */
static inline const char *arg_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "vt: option %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

static inline bool arg_int(const char *opt, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "vt: %s: '%s' is not an integer in [%lld, %lld]\n", opt, s ? s : "", lo, hi);
        return false;
    }
    *out = v;
    return true;
}

static inline bool arg_float(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "vt: %s: '%s' is not a number in [%g, %g]\n", opt, s ? s : "", lo, hi);
        return false;
    }
    *out = v;
    return true;
}

#endif
