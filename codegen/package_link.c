/* package_link.c — temp files and the external link step of packaging.
 *
 * Every intermediate file lives in a private directory created next to the
 * output (so the final rename(2) stays on one file system and is atomic) and
 * removed whatever happens. Tools run through posix_spawnp (no shell, so
 * paths need no quoting); their output goes to a log whose first line is
 * quoted in the diagnostic when they fail.
 *   .so: $KILN_CC (default cc) -shared ... -lm -lpthread, noexecstack, now;
 *        for aarch64 on another host, $KILN_AARCH64_CC (default the cross gcc
 *        found when kiln was built, KN_AARCH64_CC) with the same flags, so the
 *        .so needs only the board's libc, libm and libpthread
 *   .o:  ld.lld -r, then llvm-objcopy --localize-hidden so the runtime's
 *        hidden symbols become local and two artifacts link into one program.
 * The LLVM tools are looked up in LLVM's bindir first (KN_LLVM_BIN_DIR). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/package.h"

extern char **environ;

int kn_cg_tmpdir_create(kn_cg_tmpdir *t, const char *output_path, kn_diag *d) {
  const char *slash = strrchr(output_path, '/');
  char dir[4096];
  if (!slash)
    strcpy(dir, ".");
  else if (slash == output_path)
    strcpy(dir, "/");
  else
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - output_path), output_path);
  int n = snprintf(t->path, sizeof t->path, "%s/.kiln-tmp-XXXXXX", dir);
  if (n < 0 || (size_t)n >= sizeof t->path - 64) {
    t->path[0] = 0;
    return kn_diag_error(d, "output path '%s' is too long", output_path);
  }
  if (!mkdtemp(t->path)) {
    int err = errno;
    t->path[0] = 0;
    return kn_diag_error(d, "cannot write to directory '%s': %s", dir, strerror(err));
  }
  return 0;
}

void kn_cg_tmpdir_remove(kn_cg_tmpdir *t) {
  if (!t->path[0]) return;
  DIR *dir = opendir(t->path);
  if (dir) {
    struct dirent *e;
    char file[4400];
    while ((e = readdir(dir))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      snprintf(file, sizeof file, "%s/%s", t->path, e->d_name);
      unlink(file);
    }
    closedir(dir);
  }
  rmdir(t->path);
  t->path[0] = 0;
}

const char *kn_cg_tmpdir_file(const kn_cg_tmpdir *t, const char *name, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s/%s", t->path, name);
  KN_ASSERT(n > 0 && (size_t)n < cap, "temp path too long");
  return buf;
}

int kn_cg_write_file(const char *path, const void *data, size_t n, kn_diag *d) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return kn_diag_error(d, "cannot create '%s': %s", path, strerror(errno));
  bool ok = fwrite(data, 1, n, fp) == n;
  ok = (fclose(fp) == 0) && ok;
  if (!ok) return kn_diag_error(d, "cannot write '%s': %s", path, strerror(errno));
  return 0;
}

static const char *llvm_tool(const char *name, char *buf, size_t cap) {
#ifdef KN_LLVM_BIN_DIR
  snprintf(buf, cap, "%s/%s", KN_LLVM_BIN_DIR, name);
  if (access(buf, X_OK) == 0) return buf;
#else
  (void)buf;
  (void)cap;
#endif
  return name;
}

/* Runs argv; stdout and stderr go to `log`. `hint` (or NULL) is appended
 * to the diagnostic when the tool cannot be started. */
static int run_tool(char *const argv[], const char *log, const char *hint, kn_diag *d) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err)
    return kn_diag_error(d, "cannot run '%s': %s%s", argv[0], strerror(err), hint ? hint : "");
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return kn_diag_error(d, "waiting for '%s': %s", argv[0], strerror(errno));
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  char line[512] = "";
  FILE *fp = fopen(log, "r");
  if (fp) {
    if (!fgets(line, sizeof line, fp)) line[0] = 0;
    fclose(fp);
    line[strcspn(line, "\n")] = 0;
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && !line[0])
    return kn_diag_error(d, "cannot run '%s'%s", argv[0], hint ? hint : "");
  return kn_diag_error(d, "'%s' failed (%s %d)%s%s", argv[0],
                       WIFEXITED(st) ? "exit status" : "signal",
                       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), line[0] ? ": " : "", line);
}

#ifndef KN_AARCH64_CC
#define KN_AARCH64_CC "aarch64-linux-gnu-gcc"
#endif

int kn_cg_link(const kn_cg_tmpdir *t, const char *kernels_obj, const char *rt_obj,
               const char *out, bool shared, bool cross, kn_diag *d) {
  char log[4200], merged[4200], tool[4200];
  kn_cg_tmpdir_file(t, "link.log", log, sizeof log);
  if (shared) {
    const char *cc = getenv(cross ? "KILN_AARCH64_CC" : "KILN_CC");
    if (!cc || !*cc) cc = cross ? KN_AARCH64_CC : "cc";
    const char *hint = cross ? " (it links aarch64 .so artifacts: apt-get install "
                               "gcc-aarch64-linux-gnu, or set KILN_AARCH64_CC)"
                             : NULL;
    char *argv[] = {(char *)cc,
                    "-shared",
                    "-o",
                    (char *)out,
                    (char *)kernels_obj,
                    (char *)rt_obj,
                    "-Wl,-z,noexecstack",
                    "-Wl,-z,relro",
                    "-Wl,-z,now",
                    "-Wl,--no-undefined",
                    "-Wl,--as-needed",
                    "-lm",
                    "-lpthread",
                    NULL};
    return run_tool(argv, log, hint, d);
  }
  kn_cg_tmpdir_file(t, "merged.o", merged, sizeof merged);
  char *ld[] = {(char *)llvm_tool("ld.lld", tool, sizeof tool), "-r", "-o", merged,
                (char *)kernels_obj, (char *)rt_obj, NULL};
  if (run_tool(ld, log, NULL, d)) return -1;
  char *objcopy[] = {(char *)llvm_tool("llvm-objcopy", tool, sizeof tool), "--localize-hidden",
                     merged, (char *)out, NULL};
  return run_tool(objcopy, log, NULL, d);
}
