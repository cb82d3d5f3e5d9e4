/* vt: the command-line front end. `vt <command> [options]`. */
#include "base/log.h"
#include "cmds.h"
#include "opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Commands are weak so a build without a component (e.g. the server without
 * libmicrohttpd) still links and says what is missing. */
#pragma weak cmd_run
#pragma weak cmd_inspect
#pragma weak cmd_quantize
#pragma weak cmd_synth
#pragma weak cmd_bench
#pragma weak cmd_serve
#pragma weak cmd_tokenize
#pragma weak cmd_template
#pragma weak cmd_chat

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;

static void usage(const command *cmds, int n) {
    fprintf(stderr, "usage: vt <command> [options]\n\ncommands:\n");
    for (int i = 0; i < n; i++) fprintf(stderr, "  %-10s %s\n", cmds[i].name, cmds[i].help);
    fprintf(stderr, "\n`vt <command> --help` for the options of one command; `vt --version`.\n"
                    "Environment: VT_LOG=debug|info|warn|error|none, VT_ISA, VT_AMX, VT_PREFETCH\n"
                    "(README.md says what each does).\n");
}

int main(int argc, char **argv) {
    const command cmds[] = {
        {"run", cmd_run, "generate text from a prompt"},
        {"chat", cmd_chat, "interactive chat with the model's template"},
        {"serve", cmd_serve, "OpenAI-compatible HTTP server"},
        {"bench", cmd_bench, "benchmark against the reference llama.cpp"},
        {"inspect", cmd_inspect, "print a GGUF file's metadata and tensors"},
        {"quantize", cmd_quantize, "convert a GGUF to another weight type"},
        {"synth", cmd_synth, "write a synthetic GGUF with random weights"},
        {"tokenize", cmd_tokenize, "print the token ids of a text"},
        {"template", cmd_template, "render a Jinja chat template with JSON variables"},
    };
    const int n = (int)(sizeof cmds / sizeof cmds[0]);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(cmds, n);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        opts_print_version(stdout);
        return 0;
    }
    /* a misspelt level would silently keep the default: refuse it here */
    log_level level;
    const char *env_log = getenv("VT_LOG");
    if (env_log && !log_level_parse(env_log, &level)) {
        fprintf(stderr, "vt: VT_LOG='%s': expected debug, info, warn, error or none\n", env_log);
        return 2;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(argv[1], cmds[i].name) != 0) continue;
        if (!cmds[i].fn) {
            fprintf(stderr, "vt: '%s' is not part of this build\n", argv[1]);
            return 2;
        }
        return cmds[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "vt: unknown command '%s'\n\n", argv[1]);
    usage(cmds, n);
    return 2;
}
