/* The vt subcommands. Each lives in tools/<name>.c and returns a process exit code. */
#ifndef VT_TOOLS_CMDS_H
#define VT_TOOLS_CMDS_H

#include <stdbool.h>
#include <stddef.h>

int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_chat(int argc, char **argv);

/* The whole of PATH ("-" or NULL: stdin), NUL-terminated, its length in *len;
 * NULL after a message on stderr naming the command ("vt CMD: PATH: ...") when
 * it cannot be opened or read, or holds more than max bytes. */
char *cmd_read_file(const char *cmd, const char *path, size_t max, size_t *len);

#endif
