/* One option table per command, read by both the parser and --help.
 *
 * Each row names every spelling of one option, its kind and where its value
 * goes; opts_parse walks argv against the table, and opts_usage prints the
 * table, so an option cannot be accepted without being listed (tests/
 * test_cli_help.sh reads the tables' spellings from the sources and checks each
 * against the binary). Rules shared by every command:
 *   - an option that takes one value may be given once: a second occurrence,
 *     under any of its spellings, is refused with a message naming both;
 *     rows marked .repeat collect every occurrence (vt bench -m);
 *   - numbers are checked against [lo, hi] and the message names the option;
 *   - -h/--help prints the table to stdout and exits 0, --version prints the
 *     version and exits 0;
 *   - a row with a .note prints it once on stderr when used (llama.cpp flags
 *     that mean nothing on the CPU: accepted, not an error). */
#ifndef VT_TOOLS_OPTS_H
#define VT_TOOLS_OPTS_H

#include <stdbool.h>
#include <stdio.h>

typedef enum opt_kind {
    OPT_FLAG,  /* no value: *(bool *)dst = !.clear */
    OPT_STR,   /* *(const char **)dst = value */
    OPT_INT,   /* *(long long *)dst, an integer in [lo, hi] */
    OPT_FLOAT, /* *(double *)dst, a number in [flo, fhi] */
    OPT_FN,    /* fn(spelling, value, dst) checks and stores; false: it said why */
    OPT_MAYBE, /* a flag whose value is optional: the next argument is taken only
                  when it is one of .choices; fn(spelling, value or NULL, dst) */
} opt_kind;

typedef bool (*opt_fn)(const char *spelling, const char *value, void *dst);

typedef struct opt {
    const char *name[4]; /* spellings, short first: {"-m", "--model"} */
    opt_kind kind;
    void *dst;           /* NULL: accepted and ignored (after its note) */
    const char *arg;     /* the value's name in --help: "FILE", "N" */
    const char *help;    /* one or more lines ('\n' continues the text) */
    long long lo, hi;    /* OPT_INT */
    double flo, fhi;     /* OPT_FLOAT */
    opt_fn fn;           /* OPT_FN, OPT_MAYBE */
    const char *const *choices; /* OPT_MAYBE: NULL-terminated */
    bool clear;          /* OPT_FLAG: store false instead of true */
    bool repeat;         /* may be given more than once */
    const char *note;    /* printed once on stderr when the option is used */
} opt;

typedef struct opts_cmd {
    const char *name;   /* "run": messages say "vt run: ..." */
    const char *usage;  /* "vt run -m MODEL [options]" */
    const char *intro;  /* printed between the usage line and the options, or NULL */
    const opt *opts;
    int n_opts;
    int max_pos;        /* positional arguments allowed */
    void (*more)(FILE *f); /* printed after the options, or NULL */
} opts_cmd;

/* Parse argv[1..argc) against cmd. Positional arguments go to pos[0..*n_pos)
 * (pos may be NULL when max_pos is 0); counts, when not NULL, gets per row how
 * often it was given. Returns -1 to go on, or the exit code to return now: 0
 * after --help or --version, 2 after a message on stderr. */
int opts_parse(const opts_cmd *cmd, int argc, char **argv, const char **pos, int *n_pos, int *counts);

/* The --help text: usage, intro, every option with all its spellings. */
void opts_usage(const opts_cmd *cmd, FILE *f);

/* vt's version line ("vt 0.1 (commit abc1234, gcc 12.2.0)"). */
void opts_print_version(FILE *f);

/* Shared value parsers for OPT_FN / OPT_MAYBE rows. */
bool opt_on_off(const char *spelling, const char *value, void *dst); /* bool: on/off/auto/... */

#endif
