/* A JSON syntax check for tests (test_grammar, test_server_grammar): unlike
 * jansson it takes any number (json.gbnf allows exponents past a double's range)
 * and lone \uD800-style escapes. jcheck_document(s): s is one JSON value,
 * whitespace around it allowed. */
#ifndef VT_TESTS_JCHECK_H
#define VT_TESTS_JCHECK_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline void jcheck_ws(const char **p) {
    while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r') (*p)++;
}

/* The string at *p, advancing it past the closing quote. */
static inline bool jcheck_string(const char **p) {
    if (*(*p)++ != '"') return false;
    while (**p != '"') {
        const unsigned char c = (unsigned char)**p;
        if (c < 0x20) return false;
        if (c == '\\') {
            (*p)++;
            if (**p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!(*p)[i] || !strchr("0123456789abcdefABCDEF", (*p)[i])) return false;
                *p += 4;
            } else if (!**p || !strchr("\"\\/bfnrt", **p)) {
                return false;
            }
        }
        (*p)++;
    }
    (*p)++;
    return true;
}

/* The value at *p (after whitespace), nested at most 200 deep, advancing *p past it. */
static inline bool jcheck_value(const char **p, int depth) {
    if (depth > 200) return false;
    jcheck_ws(p);
    if (**p == '{' || **p == '[') {
        const char close = **p == '{' ? '}' : ']';
        (*p)++;
        jcheck_ws(p);
        if (**p == close) return (*p)++, true;
        for (;;) {
            if (close == '}') {
                jcheck_ws(p);
                if (!jcheck_string(p)) return false;
                jcheck_ws(p);
                if (*(*p)++ != ':') return false;
            }
            if (!jcheck_value(p, depth + 1)) return false;
            jcheck_ws(p);
            if (**p == ',') {
                (*p)++;
                continue;
            }
            if (**p != close) return false;
            return (*p)++, true;
        }
    }
    if (**p == '"') return jcheck_string(p);
    if (!strncmp(*p, "true", 4) || !strncmp(*p, "null", 4)) return *p += 4, true;
    if (!strncmp(*p, "false", 5)) return *p += 5, true;
    char *end;
    strtod(*p, &end);
    if (end == *p) return false;
    *p = end;
    return true;
}

static inline bool jcheck_document(const char *s) {
    const char *p = s;
    if (!jcheck_value(&p, 0)) return false;
    jcheck_ws(&p);
    return *p == 0;
}

#endif
