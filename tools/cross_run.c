/* cross_run.c — runs foreign-architecture artifacts under user-mode
 * emulation (see cross_run.h).
 *
 * The ELF header's e_machine decides; nothing else of the file is read, so a
 * foreign file that is not a valid artifact gets the runner's own loader
 * diagnostic, exactly as a host file gets kiln's. The runner is a separate
 * program because an aarch64 library can only be dlopen'ed by an aarch64
 * process; it is spawned without a shell and inherits stdout, stderr and the
 * environment (KILN_NUM_THREADS), so its output is what `kiln run` prints. */
#include "tools/cross_run.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef KN_AARCH64_SYSROOT
#define KN_AARCH64_SYSROOT "/usr/aarch64-linux-gnu"
#endif

#ifndef KN_HELPER_DIR
#define KN_HELPER_DIR "../libexec/kiln"
#endif

#if defined(__aarch64__)
/* An aarch64 host runs aarch64 artifacts itself. */
const char *kn_cross_runner_path(char *buf, size_t cap) {
  (void)buf, (void)cap;
  return NULL;
}

int kn_cross_run(const char *artifact, int argc, char **argv, int *status, kn_diag *d) {
  (void)artifact, (void)argc, (void)argv, (void)status, (void)d;
  return 0;
}
#else

#define EM_AARCH64_MACHINE 183

/* e_machine of a 64-bit little-endian ELF file, or -1. */
static int elf_machine(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return -1;
  unsigned char h[20];
  size_t n = fread(h, 1, sizeof h, fp);
  fclose(fp);
  if (n < sizeof h || memcmp(h, "\x7f" "ELF", 4) != 0 || h[4] != 2 || h[5] != 1) return -1;
  return h[18] | h[19] << 8;
}

static const char *env_or(const char *name, const char *fallback) {
  const char *v = getenv(name);
  return v && *v ? v : fallback;
}

/* kiln-run-aarch64, found relative to the running kiln binary (never the
 * working folder or PATH, so an installed kiln runs its own): in
 * KN_HELPER_DIR from the binary's folder (../libexec/kiln from bin/, the
 * installed layout, README.md), else beside it (the build tree). */
const char *kn_cross_runner_path(char *buf, size_t cap) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return NULL;
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (!slash) return NULL;
  *slash = 0;
  const char *dirs[] = {KN_HELPER_DIR, "."};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    int k = snprintf(buf, cap, "%s/%s/kiln-run-aarch64", self, dirs[i]);
    char real[PATH_MAX];
    if (k > 0 && (size_t)k < cap && access(buf, R_OK) == 0) {
      if (realpath(buf, real) && strlen(real) < cap) strcpy(buf, real); /* no "bin/../" shown */
      return buf;
    }
  }
  return NULL;
}

int kn_cross_run(const char *artifact, int argc, char **argv, int *status, kn_diag *d) {
  if (elf_machine(artifact) != EM_AARCH64_MACHINE) return 0;
  char runner_buf[PATH_MAX + 32];
  const char *runner = getenv("KILN_AARCH64_RUNNER");
  bool given = runner && *runner;
  if (!given) runner = kn_cross_runner_path(runner_buf, sizeof runner_buf);
  if (!runner || access(runner, R_OK) != 0)
    return kn_diag_error(d,
                         "'%s' is an aarch64 artifact: running it here needs kiln-run-aarch64 (%s%s%s), "
                         "which is built with kiln when the aarch64 cross compiler is installed "
                         "(apt-get install gcc-aarch64-linux-gnu qemu-user, then rebuild and install kiln)",
                         artifact, given ? "KILN_AARCH64_RUNNER '" : "looked for in " KN_HELPER_DIR,
                         given ? runner : " from the kiln binary's folder and beside it", given ? "'" : "");
  const char *qemu = env_or("KILN_QEMU_AARCH64", "qemu-aarch64");
  const char *sysroot = env_or("KILN_AARCH64_SYSROOT", KN_AARCH64_SYSROOT);
  struct stat st;
  if (stat(sysroot, &st) != 0 || !S_ISDIR(st.st_mode))
    return kn_diag_error(d,
                         "'%s' is an aarch64 artifact: running it needs the aarch64 libraries in "
                         "'%s' (apt-get install libc6-dev-arm64-cross, or set KILN_AARCH64_SYSROOT)",
                         artifact, sysroot);
  char **args = calloc((size_t)argc + 5, sizeof *args);
  KN_ASSERT(args, "out of memory");
  int n = 0;
  args[n++] = (char *)qemu;
  args[n++] = "-L";
  args[n++] = (char *)sysroot;
  args[n++] = (char *)runner;
  for (int i = 1; i < argc; i++) args[n++] = argv[i];
  args[n] = NULL;
  fflush(stdout);
  fflush(stderr);
  pid_t pid;
  int err = posix_spawnp(&pid, qemu, NULL, NULL, args, environ);
  free(args);
  if (err)
    return kn_diag_error(d,
                         "'%s' is an aarch64 artifact: cannot run '%s' to emulate it: %s "
                         "(apt-get install qemu-user, or set KILN_QEMU_AARCH64)",
                         artifact, qemu, strerror(err));
  int ws;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR) return kn_diag_error(d, "waiting for '%s': %s", qemu, strerror(errno));
  if (WIFSIGNALED(ws))
    return kn_diag_error(d, "'%s' running '%s' under %s died of signal %d (%s)", runner, artifact,
                         qemu, WTERMSIG(ws), strsignal(WTERMSIG(ws)));
  *status = WEXITSTATUS(ws);
  return 1;
}
#endif
