/* cross_run.h — `kiln run` on an artifact built for another architecture:
 * an aarch64 .so on an x86-64 workstation runs under qemu-aarch64 through
 * kiln-run-aarch64 (tools/kiln_runner.c, cross-built with kiln). */
#ifndef KN_CROSS_RUN_H
#define KN_CROSS_RUN_H

#include "base/base.h"

/* If `artifact` is an ELF file for aarch64 and this host is not, runs
 * `qemu-aarch64 -L SYSROOT kiln-run-aarch64 argv[1..argc-1]` (the runner
 * takes the arguments of `kiln run` and writes the same outputs and lines),
 * waits for it and stores its exit status in *status: returns 1. Returns 0
 * when the artifact is for this host or not recognisable (the native path
 * then runs or reports it), -1 with a one-line diagnostic when the runner,
 * qemu-aarch64 or the sysroot is missing (saying what to install) or the
 * runner died. Environment: KILN_QEMU_AARCH64 (default qemu-aarch64),
 * KILN_AARCH64_SYSROOT (default: the one kiln was built with),
 * KILN_AARCH64_RUNNER (default: kn_cross_runner_path). */
int kn_cross_run(const char *artifact, int argc, char **argv, int *status, kn_diag *d);

/* The kiln-run-aarch64 this kiln runs, into buf: in ../libexec/kiln from
 * the kiln binary's own folder (the installed layout), else beside it (the
 * build tree); NULL when neither exists or on an aarch64 host. */
const char *kn_cross_runner_path(char *buf, size_t cap);

#endif
