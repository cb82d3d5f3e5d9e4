/* The option tables' parser and --help printer (opts.h). */
#include "opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifndef VT_VERSION
#define VT_VERSION "0.1"
#endif
#ifndef VT_GIT_COMMIT
#define VT_GIT_COMMIT "unknown"
#endif

void opts_print_version(FILE *f) {
#ifdef __VERSION__
    fprintf(f, "vt %s (configured at commit %s, built with %s %s)\n", VT_VERSION, VT_GIT_COMMIT,
#ifdef __clang__
            "clang",
#else
            "gcc",
#endif
            __VERSION__);
#else
    fprintf(f, "vt %s (configured at commit %s)\n", VT_VERSION, VT_GIT_COMMIT);
#endif
}

static const opt builtin[] = {
    {.name = {"-h", "--help"}, .kind = OPT_FLAG, .help = "print this help and exit"},
    {.name = {"--version"}, .kind = OPT_FLAG, .help = "print vt's version and exit"},
};

static int names_width(const opt *o) {
    int w = 2;
    for (int k = 0; k < 4 && o->name[k]; k++) w += (int)strlen(o->name[k]) + (k ? 2 : 0);
    if (o->arg) w += 1 + (int)strlen(o->arg) + (o->kind == OPT_MAYBE ? 2 : 0);
    return w;
}

static void print_row(const opt *o, FILE *f) {
    enum { COL = 30 };
    char head[160];
    int n = snprintf(head, sizeof head, "  ");
    for (int k = 0; k < 4 && o->name[k]; k++)
        n += snprintf(head + n, sizeof head - (size_t)n, "%s%s", k ? ", " : "", o->name[k]);
    if (o->arg)
        snprintf(head + n, sizeof head - (size_t)n, o->kind == OPT_MAYBE ? " [%s]" : " %s", o->arg);
    const char *h = o->help ? o->help : "";
    if (names_width(o) + 1 > COL) fprintf(f, "%s\n%*s", head, COL, "");
    else fprintf(f, "%-*s", COL, head);
    for (;;) {
        const char *nl = strchr(h, '\n');
        if (!nl) {
            fprintf(f, "%s\n", h);
            break;
        }
        fprintf(f, "%.*s\n%*s", (int)(nl - h), h, COL, "");
        h = nl + 1;
    }
}

void opts_usage(const opts_cmd *cmd, FILE *f) {
    fprintf(f, "usage: %s\n", cmd->usage);
    if (cmd->intro) fprintf(f, "\n%s", cmd->intro);
    fprintf(f, "\noptions:\n");
    for (int i = 0; i < cmd->n_opts; i++) print_row(&cmd->opts[i], f);
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) print_row(&builtin[i], f);
    if (cmd->more) {
        fputc('\n', f);
        cmd->more(f);
    }
}

static const opt *find(const opts_cmd *cmd, const char *a, int *row) {
    for (int i = 0; i < cmd->n_opts; i++)
        for (int k = 0; k < 4 && cmd->opts[i].name[k]; k++)
            if (!strcmp(a, cmd->opts[i].name[k])) {
                *row = i;
                return &cmd->opts[i];
            }
    return NULL;
}

static bool store(const opts_cmd *cmd, const opt *o, const char *a, const char *v) {
    switch (o->kind) {
    case OPT_FLAG:
        if (o->dst) *(bool *)o->dst = !o->clear;
        return true;
    case OPT_STR:
        if (o->dst) *(const char **)o->dst = v;
        return true;
    case OPT_INT: {
        char *end;
        errno = 0;
        const long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < o->lo || x > o->hi) {
            fprintf(stderr, "vt %s: %s: '%s' is not an integer in [%lld, %lld]\n", cmd->name, a, v, o->lo, o->hi);
            return false;
        }
        if (o->dst) *(long long *)o->dst = x;
        return true;
    }
    case OPT_FLOAT: {
        char *end;
        errno = 0;
        const double x = strtod(v, &end);
        if (errno || end == v || *end || !(x >= o->flo && x <= o->fhi)) {
            fprintf(stderr, "vt %s: %s: '%s' is not a number in [%g, %g]\n", cmd->name, a, v, o->flo, o->fhi);
            return false;
        }
        if (o->dst) *(double *)o->dst = x;
        return true;
    }
    case OPT_FN:
    case OPT_MAYBE: return o->fn(a, v, o->dst);
    }
    return false;
}

int opts_parse(const opts_cmd *cmd, int argc, char **argv, const char **pos, int *n_pos, int *counts) {
    int n_given[256] = {0};
    const char *first_spelling[256] = {0};
    if (cmd->n_opts > 256) return 2;
    if (n_pos) *n_pos = 0;
    bool noted[256] = {false};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            opts_usage(cmd, stdout);
            return 0;
        }
        if (!strcmp(a, "--version")) {
            opts_print_version(stdout);
            return 0;
        }
        int row = -1;
        const opt *o = a[0] == '-' && a[1] ? find(cmd, a, &row) : NULL;
        if (!o) {
            if (a[0] == '-' && a[1]) {
                fprintf(stderr, "vt %s: unknown option '%s' (vt %s --help lists them)\n", cmd->name, a, cmd->name);
                return 2;
            }
            if (!n_pos || *n_pos >= cmd->max_pos) {
                fprintf(stderr, "vt %s: unexpected argument '%s'%s\n", cmd->name, a,
                        cmd->max_pos ? " (too many)" : "");
                return 2;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        const bool takes = o->kind != OPT_FLAG && o->kind != OPT_MAYBE;
        if (n_given[row]++ && takes && !o->repeat) {
            if (strcmp(first_spelling[row], a))
                fprintf(stderr, "vt %s: %s given twice (first as %s): it takes one value; give it once\n", cmd->name,
                        a, first_spelling[row]);
            else
                fprintf(stderr, "vt %s: %s given twice: it takes one value; give it once\n", cmd->name, a);
            return 2;
        }
        if (!first_spelling[row]) first_spelling[row] = a;
        const char *v = NULL;
        if (takes) {
            if (i + 1 >= argc) {
                fprintf(stderr, "vt %s: %s needs a value (%s)\n", cmd->name, a, o->arg ? o->arg : "a value");
                return 2;
            }
            v = argv[++i];
        } else if (o->kind == OPT_MAYBE && i + 1 < argc) {
            for (const char *const *c = o->choices; c && *c; c++)
                if (!strcmp(argv[i + 1], *c)) {
                    v = argv[++i];
                    break;
                }
        }
        if (o->note && !noted[row]) {
            fprintf(stderr, "vt %s: %s: %s\n", cmd->name, a, o->note);
            noted[row] = true;
        }
        if (!store(cmd, o, a, v)) return 2;
    }
    if (counts)
        for (int i = 0; i < cmd->n_opts; i++) counts[i] = n_given[i];
    return -1;
}

bool opt_on_off(const char *spelling, const char *value, void *dst) {
    static const char *const on[] = {"on", "true", "1", "yes", "enabled"};
    static const char *const off[] = {"off", "false", "0", "no", "disabled"};
    int v = -1;
    if (!value) v = 1;
    for (size_t k = 0; value && k < 5; k++) {
        if (!strcmp(value, on[k])) v = 1;
        if (!strcmp(value, off[k])) v = 0;
    }
    if (value && !strcmp(value, "auto")) v = 2;
    if (v < 0) {
        fprintf(stderr, "vt: %s: '%s' is not on, off or auto\n", spelling, value);
        return false;
    }
    if (dst) *(int *)dst = v;
    return true;
}
