/* The vt subcommands. Each lives in tools/<name>.c and returns a process exit code. */
#ifndef VT_TOOLS_CMDS_H
#define VT_TOOLS_CMDS_H

int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_chat(int argc, char **argv);

#endif
