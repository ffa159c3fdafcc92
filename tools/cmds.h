/* cmds.h — the kiln subcommands; each lives in its own file and returns the
 * process exit status (0 ok, 1 bad input / failure, 2 usage error). */
#ifndef KN_CMDS_H
#define KN_CMDS_H

int kn_cmd_compile(int argc, char **argv); /* tools/cmd_compile.c */
int kn_cmd_run(int argc, char **argv);     /* tools/cmd_run.c */
int kn_cmd_tune(int argc, char **argv);    /* tools/cmd_tune.c */
int kn_cmd_inspect(int argc, char **argv); /* tools/cmd_inspect.c */

#endif
