/* measure.c — candidates built and run in child processes.
 *
 * Build child: TE + candidate schedule -> loop IR -> a one-step plan ->
 * kn_cg_package, i.e. the real code generator and packager; a schedule the
 * kernel's shape rejects, or a lowering/codegen error, reports INVALID; an
 * assert or signal is a CRASH. Run child: dlopen through the loader, seeded
 * random inputs (floats in [-1, 1), integers 0), one checked run against
 * the default schedule's output (WRONG beyond 1e-4 x max(1, max|ref|)),
 * then the timing. Warm (the default): `samples` samples of at least
 * `min_repeat_s` each, the median per run. Cold: 3 x `samples` single
 * runs, each in the cache state of cache_state.c, the median.
 * Each child reports one fixed-size message through a pipe and leaves with
 * _exit, never touching the parent's stdio buffers. */
#include "autotune/measure.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "autotune/cache_state.h"
#include "rt/measure_util.h"
#include "codegen/codegen.h"
#include "rt/loader.h"
#include "runner/client.h"

typedef struct message {
  kn_at_result result;
  bool has_shape;
  kn_at_task_shape shape;
} message;

double kn_at_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static _Noreturn void child_exit(int fd, const message *m) {
  ssize_t w = write(fd, m, sizeof *m);
  _exit(w == (ssize_t)sizeof *m ? 0 : 3);
}

static void set_detail(kn_at_result *r, const kn_diag *d, const char *dflt) {
  snprintf(r->detail, sizeof r->detail, "%s", d->count ? d->lines[0] : dflt);
}

/* ---- build ---- */

typedef struct build_ctx {
  const kn_schedule *want;
  message *m;
  kn_diag *d;
  bool rejected;
} build_ctx;

static void build_choose(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  build_ctx *b = ctx;
  kn_at_task_shape_of(task, s, &b->m->shape);
  b->m->has_shape = true;
  if (!b->want) return;
  if (kn_at_sched_validate(b->want, &b->m->shape, b->d) < 0)
    b->rejected = true;
  else
    *s = *b->want;
}

static void build_child(int fd, const kn_graph *g0, const kn_group *grp, const kn_target *t, const kn_schedule *s,
                        const char *so_path) {
  message m;
  memset(&m, 0, sizeof m);
  kn_graph *g = (kn_graph *)g0; /* this process's own copy: repacked weights stay here */
  kn_arena arena;
  kn_arena_init(&arena);
  kn_expr_ctx ec = {.arena = &arena};
  kn_diag d;
  kn_diag_init(&d);
  build_ctx b = {.want = s, .m = &m, .d = &d};
  kn_sched_provider p = {.choose = build_choose, .ctx = &b};
  kn_kernel_build kb;
  m.result.status = KN_AT_INVALID;
  if (kn_sched_build_kernel_with(g, grp, t, &ec, "tk", &p, &kb, NULL, NULL, &d) < 0 || b.rejected) {
    set_detail(&m.result, &d, "the kernel does not build");
    child_exit(fd, &m);
  }
  kn_plan plan = {.arena = &arena, .prefix = "tk", .max_batch = g->max_batch, .workspace_bytes = 64};
  plan.inputs = KN_NEW_ARRAY(&arena, kn_plan_tensor, kb.n_inputs + 1);
  plan.consts = KN_NEW_ARRAY(&arena, kn_plan_const, kb.n_inputs + 1);
  plan.outputs = KN_NEW_ARRAY(&arena, kn_plan_tensor, 1);
  plan.steps = KN_NEW_ARRAY(&arena, kn_plan_step, 1);
  kn_plan_step *st = &plan.steps[plan.n_steps++];
  st->kernel = kb.kernel;
  st->n_args = kb.n_inputs + 1;
  st->args = KN_NEW_ARRAY(&arena, kn_plan_arg, st->n_args);
  const kn_value *ov = &g->values[kb.output];
  plan.outputs[plan.n_outputs++] = (kn_plan_tensor){"out", ov->dtype, ov->shape};
  st->args[0] = (kn_plan_arg){KILN_ARG_OUTPUT, 0, 0};
  for (int i = 0; i < kb.n_inputs; i++) {
    const kn_value *v = &g->values[kb.inputs[i]];
    if (v->data) {
      int64_t bytes = kn_value_numel(g, kb.inputs[i]) * (int64_t)kn_dtype_size(v->dtype);
      plan.consts[plan.n_consts] = (kn_plan_const){kn_arena_printf(&arena, "c%d", plan.n_consts), bytes, v->data};
      st->args[i + 1] = (kn_plan_arg){KILN_ARG_CONST, plan.n_consts++, 0};
    } else {
      /* the model's own inputs are named so: cold timing leaves them out of
       * the caches (cache_state.c) */
      const char *fmt = v->producer < 0 ? KN_AT_MODEL_INPUT_PREFIX "%d" : "in%d";
      plan.inputs[plan.n_inputs] = (kn_plan_tensor){kn_arena_printf(&arena, fmt, plan.n_inputs), v->dtype, v->shape};
      st->args[i + 1] = (kn_plan_arg){KILN_ARG_INPUT, plan.n_inputs++, 0};
    }
  }
  if (kn_cg_package(&plan, t, so_path, NULL, &d) < 0) {
    set_detail(&m.result, &d, "packaging failed");
    child_exit(fd, &m);
  }
  m.result.status = KN_AT_OK;
  child_exit(fd, &m);
}

static void start(kn_at_job *job, double timeout) {
  memset(job, 0, sizeof *job);
  job->timeout = timeout;
  job->start = kn_at_now();
  job->fd = -1;
}

static bool fork_child(kn_at_job *job, int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) {
    job->result.status = KN_AT_CRASH;
    snprintf(job->result.detail, sizeof job->result.detail, "pipe: %s", strerror(errno));
    return false;
  }
  fflush(NULL);
  job->pid = fork();
  if (job->pid < 0) {
    close(fds[0]);
    close(fds[1]);
    job->result.status = KN_AT_CRASH;
    snprintf(job->result.detail, sizeof job->result.detail, "fork: %s", strerror(errno));
    return false;
  }
  if (job->pid == 0) {
    close(fds[0]);
    signal(SIGINT, SIG_IGN); /* the parent decides; it kills us if it stops */
    return true;
  }
  close(fds[1]);
  job->fd = fds[0];
  job->running = true;
  return true;
}

void kn_at_build_start(kn_at_job *job, const kn_graph *g, const kn_group *grp, const kn_target *t,
                       const kn_schedule *s, const char *so_path, double timeout) {
  start(job, timeout);
  int fds[2];
  if (!fork_child(job, fds)) return;
  if (job->pid == 0) build_child(fds[1], g, grp, t, s, so_path);
}

/* ---- run ---- */


/* The run on a kiln-runner (--runner): the same checks and timing, done
 * there. A candidate's failure (crash, timeout, wrong, load) is recorded as
 * such; a failure of the session (token, busy, size, connection) leaves
 * the candidate unmeasured, with a warning. */
static _Noreturn void run_remote(int fd, const char *so_path, const char *ref_path, bool write_ref, const kn_at_measure_opts *o,
                       kn_at_fault fault, message *m) {
  static const char *const faults[] = {"none", "crash", "wrong", "hang", "busy"};
  kn_runner_req q = {.so_path = so_path, .ref_path = ref_path, .write_ref = write_ref, .threads = o->threads,
                     .samples = o->samples, .repeat_s = o->min_repeat_s, .timeout_s = o->run_timeout,
                     .fault = faults[fault]};
  kn_runner_reply r;
  kn_runner_measure(o->runner, o->runner_token ? o->runner_token : "", &q, &r);
  m->result.seconds = r.seconds;
  m->result.max_error = r.max_error;
  m->result.noisy = r.noisy;
  snprintf(m->result.detail, sizeof m->result.detail, "%.*s", (int)sizeof m->result.detail - 1, r.message);
  if (!strcmp(r.code, "ok")) m->result.status = KN_AT_OK;
  else if (!strcmp(r.code, "crash") || !strcmp(r.code, "load")) m->result.status = KN_AT_CRASH;
  else if (!strcmp(r.code, "timeout")) m->result.status = KN_AT_TIMEOUT;
  else if (!strcmp(r.code, "wrong")) m->result.status = KN_AT_WRONG;
  else {
    m->result.status = (kn_at_status)KN_AT_INTERRUPTED;
    char line[512];
    int n = snprintf(line, sizeof line, "kiln: warning: tune: runner %s: %s: %s (candidate not measured)\n",
                     o->runner, r.code, r.message);
    ssize_t w = write(2, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
    (void)w;
  }
  child_exit(fd, m);
}

/* The last-level cache of cpu0 as sysfs describes it (lscpu's source);
 * glibc's sysconf can report the host's whole L3 inside a VM, many times
 * the guest's, which made every cold sweep as many times too long. */
long kn_at_llc_bytes(void) {
  long best = 0;
  for (int i = 0; i < 8; i++) {
    char path[96], buf[32];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    FILE *f = fopen(path, "r");
    if (!f) break;
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    char *end = NULL;
    long v = ok ? strtol(buf, &end, 10) : 0;
    if (end && (*end == 'K' || *end == 'k')) v <<= 10;
    else if (end && (*end == 'M' || *end == 'm')) v <<= 20;
    if (v > best) best = v;
  }
  if (best <= 0) best = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (best <= 0) return 32l << 20;
  return best < (64l << 20) ? best : 64l << 20; /* the sweep is read before every timed run */
}

static void cold_prepare(void *cc) { kn_at_cold_prepare((const kn_at_cold *)cc); }

static void run_child(int fd, const char *so_path, const char *ref_path, bool write_ref, const kn_at_measure_opts *o,
                      kn_at_fault fault) {
  message m;
  memset(&m, 0, sizeof m);
  m.result.status = KN_AT_CRASH;
  if (o->runner) run_remote(fd, so_path, ref_path, write_ref, o, fault, &m);
  kn_diag d;
  kn_diag_init(&d);
  setenv("KILN_SPIN", "always", 1); /* measure_util.h, KN_AT_SETTLE_S */
  kn_loader l;
  if (kn_loader_open(so_path, &l, &d) < 0) {
    set_detail(&m.result, &d, "cannot load the artifact");
    child_exit(fd, &m);
  }
  const kiln_artifact *a = l.art;
  if (o->threads > 0) kn_loader_set_threads(&l, o->threads, &d);
  int64_t batch = a->max_batch;
  void *ins[64], *outs[1];
  if (a->n_inputs > 64 || a->n_outputs != 1) {
    snprintf(m.result.detail, sizeof m.result.detail, "unexpected artifact interface");
    child_exit(fd, &m);
  }
  for (int i = 0; i < a->n_inputs; i++) {
    int64_t bytes = kn_loader_bytes(&a->inputs[i], batch);
    ins[i] = aligned_alloc(64, (size_t)((bytes + 64) & ~63));
    kn_rt_fill_input(ins[i], kn_loader_dtype(&a->inputs[i]), kn_loader_numel(&a->inputs[i], batch), (uint64_t)i + 1);
  }
  int64_t out_bytes = kn_loader_bytes(&a->outputs[0], batch), out_n = kn_loader_numel(&a->outputs[0], batch);
  outs[0] = aligned_alloc(64, (size_t)((out_bytes + 64) & ~63));
  memset(outs[0], 0, (size_t)out_bytes);
  void *ws = kn_loader_workspace_new(a, &d);
  if (!ws || kn_loader_run(&l, (const void *const *)ins, outs, ws, batch, &d) < 0) {
    set_detail(&m.result, &d, "run failed");
    child_exit(fd, &m);
  }
  if (fault == KN_AT_FAULT_CRASH) raise(SIGSEGV);
  if (fault == KN_AT_FAULT_HANG)
    for (;;) pause();
  if (fault == KN_AT_FAULT_WRONG) {
    if (kn_loader_dtype(&a->outputs[0]) == KN_DT_F32)
      ((float *)outs[0])[0] += 1.0f + fabsf(((float *)outs[0])[0]);
    else
      ((unsigned char *)outs[0])[0] ^= 0x40;
  }
  if (write_ref) {
    FILE *f = fopen(ref_path, "wb");
    bool ok = f && fwrite(outs[0], 1, (size_t)out_bytes, f) == (size_t)out_bytes;
    if (f) ok &= fclose(f) == 0;
    if (!ok) {
      snprintf(m.result.detail, sizeof m.result.detail, "cannot write %s", ref_path);
      child_exit(fd, &m);
    }
  } else {
    void *ref = malloc((size_t)out_bytes + 1);
    FILE *f = fopen(ref_path, "rb");
    bool ok = ref && f && fread(ref, 1, (size_t)out_bytes, f) == (size_t)out_bytes;
    if (f) fclose(f);
    if (!ok) {
      snprintf(m.result.detail, sizeof m.result.detail, "cannot read the reference %s", ref_path);
      child_exit(fd, &m);
    }
    m.result.max_error = kn_rt_compare(outs[0], ref, kn_loader_dtype(&a->outputs[0]), out_n, (size_t)out_bytes);
    free(ref);
    if (!(m.result.max_error <= 1e-4)) {
      m.result.status = KN_AT_WRONG;
      snprintf(m.result.detail, sizeof m.result.detail, "differs from the default schedule: error %.3g",
               m.result.max_error);
      child_exit(fd, &m);
    }
  }
  /* timing, after KN_AT_SETTLE_S of runs (kn_rt_settle), by kn_rt_time:
   * the median per run of `ns` undisturbed samples of `reps` runs each.
   * Warm: reps calibrated by the settle runs to last min_repeat_s.
   * Cold: single runs, each in the cache state of cache_state.c (constants
   * evicted, inputs written back by the pool's threads' CPUs), and three
   * times the samples */
  static kn_at_cold cc; /* large; one per child */
  long reps = 1;
  int ns;
  pid_t busy[KN_RT_MAX_BUSY];
  int n_busy = fault == KN_AT_FAULT_BUSY ? kn_rt_busy_start(busy) : 0;
  double once = kn_rt_settle(&l, (const void *const *)ins, outs, ws, batch, &d, kn_at_now);
  if (o->warm) {
    reps = once > 0 ? (long)(o->min_repeat_s / once) + 1 : 1000;
    if (reps > 100000) reps = 100000;
    ns = o->samples < 1 ? 1 : o->samples;
  } else {
    kn_at_cold_init(&cc, o->sweep, o->sweep_bytes, o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN));
    for (int i = 0; i < a->n_inputs; i++)
      if (strncmp(a->inputs[i].name, KN_AT_MODEL_INPUT_PREFIX, strlen(KN_AT_MODEL_INPUT_PREFIX)) != 0)
        kn_at_cold_add(&cc, ins[i], (size_t)kn_loader_bytes(&a->inputs[i], batch));
    ns = o->samples < 1 ? 3 : 3 * o->samples;
  }
  kn_rt_timing tm;
  kn_rt_time(&l, (const void *const *)ins, outs, ws, batch, &d, kn_at_now, reps, o->warm ? o->min_repeat_s : 0, ns,
             !o->accept_noisy, o->warm ? NULL : cold_prepare, &cc, &tm);
  kn_rt_busy_stop(busy, n_busy);
  m.result.seconds = tm.seconds;
  m.result.noisy = tm.noisy;
  if (tm.noisy) kn_rt_timing_why(&tm, m.result.detail, sizeof m.result.detail);
  m.result.status = KN_AT_OK;
  child_exit(fd, &m);
}

void kn_at_run_start(kn_at_job *job, const char *so_path, const char *ref_path, bool write_ref,
                     const kn_at_measure_opts *o, kn_at_fault fault) {
  start(job, o->runner ? o->run_timeout + 120 : o->run_timeout); /* + upload, busy retries */
  int fds[2];
  if (!fork_child(job, fds)) return;
  if (job->pid == 0) run_child(fds[1], so_path, ref_path, write_ref, o, fault);
}

/* ---- waiting ---- */

static void finish(kn_at_job *job, int wstatus, kn_at_status forced) {
  job->running = false;
  message m;
  memset(&m, 0, sizeof m);
  ssize_t got = read(job->fd, &m, sizeof m);
  close(job->fd);
  job->fd = -1;
  if (forced != KN_AT_OK) {
    job->result.status = forced;
    snprintf(job->result.detail, sizeof job->result.detail, "%s",
             forced == KN_AT_TIMEOUT ? "timed out" : "interrupted");
    return;
  }
  if (got == (ssize_t)sizeof m && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
    job->result = m.result;
    job->has_shape = m.has_shape;
    job->shape = m.shape;
    return;
  }
  job->result.status = KN_AT_CRASH;
  if (WIFSIGNALED(wstatus))
    snprintf(job->result.detail, sizeof job->result.detail, "killed by signal %d (%s)", WTERMSIG(wstatus),
             strsignal(WTERMSIG(wstatus)));
  else
    snprintf(job->result.detail, sizeof job->result.detail, "exited with status %d", WEXITSTATUS(wstatus));
}

void kn_at_jobs_wait(kn_at_job *jobs, int n, volatile sig_atomic_t *stop) {
  for (;;) {
    struct pollfd fds[64];
    int map[64], nfds = 0;
    double wait_s = 0.1;
    for (int i = 0; i < n; i++) {
      kn_at_job *job = &jobs[i];
      if (!job->running) continue;
      bool timed_out = kn_at_now() - job->start > job->timeout, stopped = stop && *stop;
      if (timed_out || stopped) {
        int ws = 0;
        kill(job->pid, SIGKILL);
        waitpid(job->pid, &ws, 0);
        finish(job, ws, stopped ? (kn_at_status)KN_AT_INTERRUPTED : KN_AT_TIMEOUT);
        continue;
      }
      double left = job->timeout - (kn_at_now() - job->start);
      if (left < wait_s) wait_s = left;
      if (nfds < 64) {
        fds[nfds] = (struct pollfd){.fd = job->fd, .events = POLLIN};
        map[nfds++] = i;
      }
    }
    if (!nfds) return;
    /* the child writes its message just before it exits, so a readable
     * (or hung-up) pipe means it is done or dying; SIGINT ends the poll */
    int r = poll(fds, (nfds_t)nfds, (int)(wait_s * 1000) + 1);
    if (r <= 0) continue;
    for (int k = 0; k < nfds; k++) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      kn_at_job *job = &jobs[map[k]];
      int ws = 0;
      waitpid(job->pid, &ws, 0);
      finish(job, ws, KN_AT_OK);
    }
  }
}
