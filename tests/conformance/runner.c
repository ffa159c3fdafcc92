/* runner.c — kn_conformance: runs the ONNX backend node tests shipped with
 * the onnx Python package through Kiln and checks the committed list of
 * tests expected to pass.
 *
 *   kn_conformance --node-dir DIR [--expected FILE] [--write-expected FILE]
 *                  [--report FILE] [--onnx-version V] [-j N] [--timeout S]
 *                  [--threads N] [--skip-reason TEXT] [--gpu-interp]
 *                  [--cpu-expected FILE] [TEST_NAME_SUBSTRING...]
 *
 * --gpu-interp: each model is compiled for `cuda` and its plan's kernels run
 * in the GPU interpreter (run_gpu.c) instead of an artifact on the CPU; the
 * lines and the checks are the same. --cpu-expected (with --report): the
 * report also lists the tests of that (CPU) list that did not pass here.
 *
 * Each test runs in a forked child (its own process group, scratch folder
 * and time limit), so a crash or hang costs one line: "FAIL name: crashed
 * (signal N)" or "FAIL name: timed out". Up to -j children run at once;
 * lines are printed in test-name order, then "N passed, N failed, N skipped;
 * passed with inputs bound at compile time: N". A model Kiln refuses because
 * some graph inputs must be constants is run again with those inputs bound
 * to each data set's values (run_test.c); such a pass is printed
 * "PASS-BOUND name: inputs bound at compile time: a, b" and never counted
 * among the plain passes.
 *
 * Exit status: 0 unless a test named in --expected did not pass (each such
 * test is printed as "REGRESSION name"; a line "NAME bound" in the list
 * accepts a pass with inputs bound, a plain line does not); tests passing but
 * not listed are printed as "NEWLY PASSING name" without failing. 2 on usage errors; 77
 * (ctest's skip code) with --skip-reason, which prints the reason and runs
 * nothing (used when the installed onnx is not the pinned version). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "tests/conformance/conformance.h"

#define KN_CONF_MAX_JOBS 16

typedef struct options {
  const char *node_dir, *expected, *write_expected, *report, *onnx_version, *skip_reason, *cpu_expected;
  int jobs, threads;
  bool gpu_interp;
  double timeout;
  char **filters;
  int n_filters;
} options;

/* A running child. */
typedef struct slot {
  pid_t pid; /* 0 = free */
  int fd;    /* read end of the result pipe */
  int test;
  double deadline;
  char buf[sizeof(((kn_conf_result *)0)->detail) + 16];
  size_t len;
} slot;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage(const char *msg) {
  fprintf(stderr,
          "kn_conformance: %s\nusage: kn_conformance --node-dir DIR [--expected FILE] "
          "[--write-expected FILE] [--report FILE] [--onnx-version V] [-j N] [--timeout S] "
          "[--threads N] [--skip-reason TEXT] [--gpu-interp] [--cpu-expected FILE] [TEST_SUBSTRING...]\n",
          msg);
  return 2;
}

static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.jobs = 2, .threads = 1, .timeout = 10, .onnx_version = "unknown"};
  o->filters = calloc((size_t)argc, sizeof *o->filters);
  KN_ASSERT(o->filters, "out of memory");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--gpu-interp")) {
      o->gpu_interp = true;
      continue;
    }
    bool takes = a[0] == '-';
    if (takes && !next) return usage("an option lacks its value");
    if (!strcmp(a, "--node-dir")) o->node_dir = next;
    else if (!strcmp(a, "--expected")) o->expected = next;
    else if (!strcmp(a, "--write-expected")) o->write_expected = next;
    else if (!strcmp(a, "--report")) o->report = next;
    else if (!strcmp(a, "--onnx-version")) o->onnx_version = next;
    else if (!strcmp(a, "--skip-reason")) o->skip_reason = next;
    else if (!strcmp(a, "--cpu-expected")) o->cpu_expected = next;
    else if (!strcmp(a, "-j")) o->jobs = atoi(next);
    else if (!strcmp(a, "--threads")) o->threads = atoi(next);
    else if (!strcmp(a, "--timeout")) o->timeout = atof(next);
    else if (takes) return usage("unknown option");
    else {
      o->filters[o->n_filters++] = argv[i];
      continue;
    }
    i++;
  }
  if (o->skip_reason) return 0;
  if (!o->node_dir) return usage("--node-dir is required");
  if (o->jobs < 1 || o->jobs > KN_CONF_MAX_JOBS) return usage("-j must be in 1..16");
  if (o->threads < 1 || o->threads > 256) return usage("--threads must be in 1..256");
  if (!(o->timeout > 0)) return usage("--timeout must be positive");
  return 0;
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool selected(const options *o, const char *name) {
  if (o->n_filters == 0) return true;
  for (int i = 0; i < o->n_filters; i++)
    if (strstr(name, o->filters[i])) return true;
  return false;
}

/* The sorted test_* folders of the node directory; -1 if unreadable. */
static int list_tests(const options *o, char ***out) {
  DIR *dp = opendir(o->node_dir);
  if (!dp) {
    fprintf(stderr, "kn_conformance: cannot read '%s': %s\n", o->node_dir, strerror(errno));
    return -1;
  }
  int n = 0, cap = 2048;
  char **names = malloc(sizeof *names * (size_t)cap);
  KN_ASSERT(names, "out of memory");
  for (struct dirent *e; (e = readdir(dp));) {
    if (strncmp(e->d_name, "test_", 5) != 0 || !selected(o, e->d_name)) continue;
    if (n == cap) {
      cap *= 2;
      names = realloc(names, sizeof *names * (size_t)cap);
      KN_ASSERT(names, "out of memory");
    }
    names[n] = strdup(e->d_name);
    KN_ASSERT(names[n], "out of memory");
    n++;
  }
  closedir(dp);
  qsort(names, (size_t)n, sizeof *names, name_cmp);
  *out = names;
  return n;
}

/* Child: runs one test and writes "<status letter><detail>" to fd. stderr
 * goes to work/stderr.txt so a crash can be explained by its last line. */
static _Noreturn void child_main(const options *o, const char *test, const char *work, int fd) {
  setpgid(0, 0);
  char path[4096];
  int err = -1;
  if (snprintf(path, sizeof path, "%s/stderr.txt", work) < (int)sizeof path)
    err = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (err >= 0) dup2(err, 2);
  snprintf(path, sizeof path, "%s/%s", o->node_dir, test);
  kn_conf_result r = {.name = test};
  kn_conf_run_test(path, work, o->threads, o->gpu_interp, &r);
  char line[sizeof r.detail + 2];
  int n = snprintf(line, sizeof line, "%c%s", "PFSB"[r.status], r.detail);
  if (write(fd, line, (size_t)n) != n) _exit(3);
  _exit(0);
}

/* Last non-empty line of work/stderr.txt (a crash's assert message), or "". */
static void last_stderr_line(const char *work, char *out, size_t cap) {
  char path[4096], buf[4096];
  out[0] = 0;
  if (snprintf(path, sizeof path, "%s/stderr.txt", work) >= (int)sizeof path) return;
  FILE *fp = fopen(path, "r");
  if (!fp) return;
  while (fgets(buf, sizeof buf, fp)) {
    size_t len = strcspn(buf, "\n");
    if (!len) continue;
    if (len >= cap) len = cap - 1;
    memcpy(out, buf, len);
    out[len] = 0;
  }
  fclose(fp);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static void rm_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Reads what the child wrote so far; closes the pipe at end of file. */
static void read_some(slot *s) {
  if (s->fd < 0) return;
  ssize_t k;
  do k = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
  while (k < 0 && errno == EINTR);
  if (k > 0) {
    s->len += (size_t)k;
    if (s->len < sizeof s->buf - 1) return;
  }
  close(s->fd); /* end of file, an error, or a full buffer */
  s->fd = -1;
}

/* Reaps a finished (or killed) child into results[s->test]. */
static void finish(slot *s, const char *work, int wstatus, bool timed_out, kn_conf_result *res) {
  kn_conf_result *r = &res[s->test];
  while (s->fd >= 0) read_some(s); /* the child has exited: this ends */
  s->buf[s->len] = 0;
  char why[400];
  if (timed_out) {
    r->status = KN_CONF_FAIL;
    snprintf(r->detail, sizeof r->detail, "timed out");
  } else if (WIFSIGNALED(wstatus)) {
    last_stderr_line(work, why, sizeof why);
    r->status = KN_CONF_FAIL;
    snprintf(r->detail, sizeof r->detail, "crashed (signal %d)%s%s", WTERMSIG(wstatus),
             why[0] ? ": " : "", why);
  } else if (s->len == 0 || !strchr("PFSB", s->buf[0])) {
    last_stderr_line(work, why, sizeof why);
    r->status = KN_CONF_FAIL;
    snprintf(r->detail, sizeof r->detail, "the test process exited with status %d and no result%s%s",
             WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, why[0] ? ": " : "", why);
  } else {
    r->status = s->buf[0] == 'P'   ? KN_CONF_PASS
                : s->buf[0] == 'F' ? KN_CONF_FAIL
                : s->buf[0] == 'B' ? KN_CONF_PASS_BOUND
                                   : KN_CONF_SKIP;
    snprintf(r->detail, sizeof r->detail, "%s", s->buf + 1);
  }
  rm_tree(work);
  s->pid = 0;
}

static void print_result(const kn_conf_result *r) {
  static const char *const words[] = {"PASS", "FAIL", "SKIP", "PASS-BOUND"};
  printf("%s %s%s%s\n", words[r->status], r->name, r->detail[0] ? ": " : "", r->detail);
  fflush(stdout);
}

/* Runs every test, o->jobs at a time; fills results. */
static void run_all(const options *o, const char *base, char **tests, int n, kn_conf_result *res) {
  slot slots[KN_CONF_MAX_JOBS] = {{0}};
  bool *done = calloc((size_t)n + 1, 1);
  KN_ASSERT(done, "out of memory");
  int next = 0, printed = 0, running = 0;
  char work[4096];
  while (printed < n) {
    for (int j = 0; j < o->jobs && next < n; j++) {
      if (slots[j].pid) continue;
      int fds[2];
      KN_ASSERT(pipe2(fds, O_CLOEXEC) == 0, "pipe failed");
      snprintf(work, sizeof work, "%s/%d", base, next);
      KN_ASSERT(mkdir(work, 0755) == 0, "cannot create a scratch folder");
      fflush(stdout);
      pid_t pid = fork();
      KN_ASSERT(pid >= 0, "fork failed");
      if (pid == 0) {
        close(fds[0]);
        child_main(o, tests[next], work, fds[1]);
      }
      setpgid(pid, pid); /* also in the parent: no race with kill(-pid) */
      close(fds[1]);
      slots[j] = (slot){.pid = pid, .fd = fds[0], .test = next, .deadline = now_s() + o->timeout};
      next++;
      running++;
    }
    struct pollfd pfd[KN_CONF_MAX_JOBS];
    slot *owner[KN_CONF_MAX_JOBS];
    int np = 0;
    for (int j = 0; j < o->jobs; j++)
      if (slots[j].pid && slots[j].fd >= 0) {
        owner[np] = &slots[j];
        pfd[np++] = (struct pollfd){.fd = slots[j].fd, .events = POLLIN};
      }
    if (np && poll(pfd, (nfds_t)np, 50) > 0) {
      for (int k = 0; k < np; k++) /* take what arrived, so poll does not spin on it */
        if (pfd[k].revents) read_some(owner[k]);
    } else if (!np && running) {
      poll(NULL, 0, 20); /* all pipes closed: children are exiting */
    }
    for (int j = 0; j < o->jobs; j++) {
      slot *s = &slots[j];
      if (!s->pid) continue;
      snprintf(work, sizeof work, "%s/%d", base, s->test);
      int wstatus = 0;
      pid_t got = waitpid(s->pid, &wstatus, WNOHANG);
      if (got == s->pid) {
        kill(-s->pid, SIGKILL); /* leftovers of its process group, if any */
        finish(s, work, wstatus, false, res);
      } else if (now_s() > s->deadline) {
        kill(-s->pid, SIGKILL);
        waitpid(s->pid, &wstatus, 0);
        finish(s, work, wstatus, true, res);
      } else {
        continue;
      }
      done[slots[j].test] = true;
      running--;
    }
    while (printed < n && done[printed]) print_result(&res[printed++]);
  }
  KN_ASSERT(running == 0, "children left running");
  free(done);
}

/* One line of the expected list: a test name, and whether it is expected to
 * pass only with inputs bound at compile time ("NAME bound"). */
typedef struct listed {
  char *name;
  bool bound;
} listed;

/* Reads the expected list (one test per line, optional word "bound" after
 * the name, '#' comments). */
static listed *read_list(const char *path, int *count) {
  FILE *fp = fopen(path, "r");
  if (!fp) return NULL;
  int n = 0, cap = 256;
  listed *list = malloc(sizeof *list * (size_t)cap);
  char line[512];
  KN_ASSERT(list, "out of memory");
  while (fgets(line, sizeof line, fp)) {
    line[strcspn(line, "#\r\n")] = 0;
    size_t len = strcspn(line, " \t");
    if (!len) continue;
    char *rest = line + len + strspn(line + len, " \t");
    line[len] = 0;
    if (n == cap) {
      cap *= 2;
      list = realloc(list, sizeof *list * (size_t)cap);
      KN_ASSERT(list, "out of memory");
    }
    list[n].name = strdup(line);
    KN_ASSERT(list[n].name, "out of memory");
    list[n].bound = !strncmp(rest, "bound", 5);
    n++;
  }
  fclose(fp);
  *count = n;
  return list;
}

static const kn_conf_result *find_result(const kn_conf_result *res, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(res[i].name, name)) return &res[i];
  return NULL;
}

/* Regressions and newly passing tests against the expected list; returns
 * the number of regressions (tests listed but not run count when no filter
 * narrowed the run). A test listed plainly must PASS; one listed "bound" must
 * PASS or PASS_BOUND. Newly passing: a PASS not listed plainly, or a
 * PASS_BOUND not listed at all. */
static int check_expected(const options *o, const kn_conf_result *res, int n) {
  int n_list = 0;
  listed *list = read_list(o->expected, &n_list);
  if (!list) {
    fprintf(stderr, "kn_conformance: cannot read expected list '%s'\n", o->expected);
    return 1;
  }
  int regressions = 0, newly = 0;
  for (int i = 0; i < n_list; i++) {
    const kn_conf_result *r = find_result(res, n, list[i].name);
    if (!r && o->n_filters) continue;
    bool ok = r && (r->status == KN_CONF_PASS || (list[i].bound && r->status == KN_CONF_PASS_BOUND));
    if (!ok) {
      printf("REGRESSION %s%s%s%s\n", list[i].name, r ? ": " : ": no such test",
             r && r->status == KN_CONF_PASS_BOUND ? "passes only with inputs bound at compile time; " : "",
             r ? (r->detail[0] ? r->detail : "did not pass") : "");
      regressions++;
    }
  }
  for (int i = 0; i < n; i++) {
    if (res[i].status != KN_CONF_PASS && res[i].status != KN_CONF_PASS_BOUND) continue;
    const listed *l = NULL;
    for (int k = 0; k < n_list && !l; k++)
      if (!strcmp(list[k].name, res[i].name)) l = &list[k];
    if (res[i].status == KN_CONF_PASS && (!l || l->bound)) {
      printf("NEWLY PASSING %s%s\n", res[i].name, l ? " (no longer needs inputs bound)" : "");
      newly++;
    } else if (res[i].status == KN_CONF_PASS_BOUND && !l) {
      printf("NEWLY PASSING WITH INPUTS BOUND %s: %s\n", res[i].name, res[i].detail);
      newly++;
    }
  }
  printf("expected list: %d listed, %d regressions, %d newly passing%s\n", n_list, regressions,
         newly, newly ? " (add them to the list)" : "");
  for (int i = 0; i < n_list; i++) free(list[i].name);
  free(list);
  return regressions;
}

static int write_expected(const char *path, bool gpu_interp, const kn_conf_result *res, int n) {
  FILE *fp = fopen(path, "w");
  if (!fp) {
    fprintf(stderr, "kn_conformance: cannot write '%s': %s\n", path, strerror(errno));
    return -1;
  }
  if (gpu_interp)
    fprintf(fp, "# On the GPU path: compiled for cuda, the plan's kernels run in the GPU interpreter\n"
                "# (kn_conformance --gpu-interp).\n");
  fprintf(fp, "# ONNX backend node tests expected to pass (tests/conformance); one per line.\n"
              "# \"NAME bound\": passes only with the inputs Kiln needs as constants bound at\n"
              "# compile time (kiln compile --bind), one compile per data set.\n");
  for (int i = 0; i < n; i++) {
    if (res[i].status == KN_CONF_PASS) fprintf(fp, "%s\n", res[i].name);
    if (res[i].status == KN_CONF_PASS_BOUND) fprintf(fp, "%s bound\n", res[i].name);
  }
  return fclose(fp) == 0 ? 0 : -1;
}

/* REPORT.md, with the tests of --cpu-expected that did not pass when set. */
static int write_report(const options *o, double seconds, const kn_conf_result *res, int n) {
  int n_cpu = 0;
  listed *cpu = NULL;
  if (o->cpu_expected && !(cpu = read_list(o->cpu_expected, &n_cpu))) {
    fprintf(stderr, "kn_conformance: cannot read expected list '%s'\n", o->cpu_expected);
    return -1;
  }
  const char **names = calloc((size_t)n_cpu + 1, sizeof *names);
  KN_ASSERT(names, "out of memory");
  for (int i = 0; i < n_cpu; i++) names[i] = cpu[i].name;
  int rc = kn_conf_write_report(o->report, o->onnx_version, seconds, o->gpu_interp, cpu ? names : NULL, n_cpu, res, n);
  for (int i = 0; i < n_cpu; i++) free(cpu[i].name);
  free(cpu);
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  options o;
  if (parse_args(argc, argv, &o)) return 2;
  if (o.skip_reason) {
    printf("conformance skipped: %s\n", o.skip_reason);
    return 77;
  }
  signal(SIGPIPE, SIG_IGN);
  char **tests = NULL;
  int n = list_tests(&o, &tests);
  if (n < 0) return 1;
  char base[] = "/tmp/kiln-conformance.XXXXXX";
  if (!mkdtemp(base)) {
    fprintf(stderr, "kn_conformance: cannot create a temporary folder: %s\n", strerror(errno));
    return 1;
  }
  kn_conf_result *res = calloc((size_t)n + 1, sizeof *res);
  KN_ASSERT(res, "out of memory");
  for (int i = 0; i < n; i++) res[i].name = tests[i];
  double start = now_s();
  run_all(&o, base, tests, n, res);
  double seconds = now_s() - start;
  rm_tree(base);

  int status = 0;
  if (o.expected && check_expected(&o, res, n) > 0) status = 1;
  if (o.write_expected && write_expected(o.write_expected, o.gpu_interp, res, n) < 0) status = 1;
  if (o.report && write_report(&o, seconds, res, n) < 0) status = 1;
  int count[KN_CONF_N_STATUS] = {0};
  for (int i = 0; i < n; i++) count[res[i].status]++;
  printf("%d tests in %.1f s (onnx %s, %d jobs)\n", n, seconds, o.onnx_version, o.jobs);
  printf("%d passed, %d failed, %d skipped; passed with inputs bound at compile time: %d\n",
         count[KN_CONF_PASS], count[KN_CONF_FAIL], count[KN_CONF_SKIP], count[KN_CONF_PASS_BOUND]);
  for (int i = 0; i < n; i++) free(tests[i]);
  free(tests);
  free(res);
  free(o.filters);
  return status;
}
