/* kiln.c — the `kiln` command: dispatches to one subcommand. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "tools/cmds.h"
#include "tools/cross_run.h"

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

/* The version, and what the kiln found on this machine depends on: the LLVM
 * it was built with, the NVRTC it opens at run time (GPU targets) and the
 * runner of aarch64 artifacts, so a bug report names them. */
static void print_version(void) {
  printf("kiln %s\n", KILN_VERSION);
  printf("LLVM: %s (built with)\n", kn_cg_llvm_version());
  int major, minor;
  if (kn_nvrtc_version(&major, &minor))
    printf("NVRTC: %d.%d (found at run time)\n", major, minor);
  else
    printf("NVRTC: not found\n");
#if !defined(__aarch64__)
  char runner[PATH_MAX + 32];
  const char *path = kn_cross_runner_path(runner, sizeof runner);
  printf("kiln-run-aarch64: %s\n", path ? path : "not found");
#endif
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
    print_version();
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "kiln: error: unknown command '%s' (try 'kiln --help')\n", argv[1]);
  return 2;
}
