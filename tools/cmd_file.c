/* Reading a whole input file for a subcommand (a template, a text to tokenize). */
#include "cmds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *cmd_read_file(const char *cmd, const char *path, size_t max, size_t *len) {
    const bool is_stdin = !path || !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "vt %s: %s: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    const char *name = is_stdin ? "stdin" : path;
    size_t cap = max < 65536 ? max + 1 : 65536, n = 0;
    char *p = malloc(cap + 1);
    const char *why = p ? NULL : "out of memory";
    while (!why) {
        const size_t k = fread(p + n, 1, cap - n, f);
        n += k;
        if (n > max) why = "too large";
        else if (k == 0) why = ferror(f) ? "read error" : NULL;
        else if (n == cap) {
            const size_t grown = cap <= max / 2 ? cap * 2 : max + 1; /* max + 1: room to see one byte too many */
            char *q = realloc(p, grown + 1);
            if (!q) why = "out of memory";
            else p = q, cap = grown;
        }
        if (k == 0) break;
    }
    if (why) {
        if (n > max) fprintf(stderr, "vt %s: %s: larger than %zu bytes\n", cmd, name, max);
        else fprintf(stderr, "vt %s: %s: %s\n", cmd, name, why);
        free(p);
        p = NULL;
    }
    if (!is_stdin) fclose(f);
    if (!p) return NULL;
    p[n] = '\0';
    *len = n;
    return p;
}
