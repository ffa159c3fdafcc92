/* kiln.c — the `kiln` command: dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>

#include "tools/cmds.h"

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} commands[] = {
    {"compile", kn_cmd_compile, "compile an ONNX model into a .so / .o artifact and header"},
    {"tune", kn_cmd_tune, "search schedules on this machine, append the measurements to a tuning log"},
    {"run", kn_cmd_run, "run an artifact on .npy inputs, optionally benchmark it"},
    {"inspect", kn_cmd_inspect, "print an ONNX model's op census, parameters, FLOPs, unsupported ops"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: kiln <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
  fprintf(out, "\n'kiln <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("kiln %s\n", KILN_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "kiln: error: unknown command '%s' (try 'kiln --help')\n", argv[1]);
  return 2;
}
