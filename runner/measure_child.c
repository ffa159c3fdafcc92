/* measure_child.c — what kiln-runner does with one uploaded candidate, in a
 * forked child: load it through the artifact ABI (rt/loader.c), fill its
 * inputs with seeded random values, run it once, write the output as the
 * reference or compare it with the uploaded one (`wrong` beyond
 * 1e-4 x max(1, max|ref|), as autotune/measure.c), then time the median of
 * `samples` samples of at least `repeat` seconds each. The child reports
 * one fixed-size kn_runner_outcome through a pipe and leaves with _exit; a
 * crash or a hang is the parent's to notice. */
#include "runner/measure_child.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt/measure_util.h"
#include "rt/loader.h"
#include "runner/elf_load.h"

#ifdef KN_RUNNER_STATIC
#define KN_CHILD_DLOPEN_NOTE " on one thread"
#else
#define KN_CHILD_DLOPEN_NOTE ""
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static _Noreturn void report(int fd, kn_runner_outcome *o) {
  ssize_t w = write(fd, o, sizeof *o);
  _exit(w == (ssize_t)sizeof *o ? 0 : 3);
}

static _Noreturn void fail(int fd, kn_runner_outcome *o, const char *code, const char *msg) {
  snprintf(o->code, sizeof o->code, "%s", code);
  snprintf(o->message, sizeof o->message, "%s", msg);
  report(fd, o);
}


_Noreturn void kn_runner_measure_child(int fd, const char *so_path, const unsigned char *so,
                                       const kn_runner_run_req *rq, const void *ref, const char *out_path) {
  kn_runner_outcome o;
  memset(&o, 0, sizeof o);
  /* a candidate's fault is a plain signal the parent reports, even when the
   * runner is built with sanitizers that would catch it */
  static const int faults[] = {SIGPIPE, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) signal(faults[i], SIG_DFL);
  kn_diag d;
  kn_diag_init(&d);
  kn_loader l;
  memset(&l, 0, sizeof l);
  int threads = rq->threads;
  kn_elf_image img;
  char why[200];
  setenv("KILN_SPIN", "always", 1); /* measure_util.h, KN_AT_SETTLE_S */
  if (rq->self_load && kn_runner_elf_load(so, (size_t)rq->so_bytes, &img, why, sizeof why) == 0) {
    l.art = img.art;
    if (l.art->abi_version != KILN_ABI_VERSION) fail(fd, &o, "load", "another artifact ABI version");
  } else {
    if (rq->self_load) {
      fprintf(stderr, "kiln-runner: own loader: %s; using dlopen%s\n", why, KN_CHILD_DLOPEN_NOTE);
      fflush(stderr);
    }
    if (kn_loader_open(so_path, &l, &d) < 0) fail(fd, &o, "load", d.count ? d.lines[0] : "cannot load the library");
#ifdef KN_RUNNER_STATIC
    threads = 1; /* threads of a dlopened libc crash in a static program */
#endif
  }
  const kiln_artifact *a = l.art;
  if (threads > 0 && kn_loader_set_threads(&l, threads, &d) < 0)
    fail(fd, &o, "load", d.count ? d.lines[0] : "set_threads failed");
  int64_t batch = a->max_batch;
  if (a->n_inputs < 0 || a->n_inputs > 64 || a->n_outputs != 1 || batch < 1)
    fail(fd, &o, "load", "unexpected artifact interface (want one output, at most 64 inputs)");
  void *ins[64], *outs[1];
  for (int i = 0; i < a->n_inputs; i++) {
    int64_t bytes = kn_loader_bytes(&a->inputs[i], batch), n = kn_loader_numel(&a->inputs[i], batch);
    if (bytes < 0 || n < 0 || bytes > ((int64_t)1 << 34)) fail(fd, &o, "load", "an input has a bad size");
    ins[i] = aligned_alloc(64, (size_t)((bytes + 64) & ~63));
    if (!ins[i]) fail(fd, &o, "internal", "out of memory for the inputs");
    kn_rt_fill_input(ins[i], kn_loader_dtype(&a->inputs[i]), n, rq->seed + (uint64_t)i + 1);
  }
  int64_t out_bytes = kn_loader_bytes(&a->outputs[0], batch), out_n = kn_loader_numel(&a->outputs[0], batch);
  if (out_bytes < 0 || out_bytes > ((int64_t)1 << 34)) fail(fd, &o, "load", "the output has a bad size");
  outs[0] = aligned_alloc(64, (size_t)((out_bytes + 64) & ~63));
  if (!outs[0]) fail(fd, &o, "internal", "out of memory for the output");
  memset(outs[0], 0, (size_t)out_bytes);
  void *ws = kn_loader_workspace_new(a, &d);
  if (!ws) fail(fd, &o, "load", d.count ? d.lines[0] : "no workspace");
  if (kn_loader_run(&l, (const void *const *)ins, outs, ws, batch, &d) < 0)
    fail(fd, &o, "crash", d.count ? d.lines[0] : "run failed");
  if (!strcmp(rq->fault, "crash")) raise(SIGSEGV);
  if (!strcmp(rq->fault, "hang"))
    for (;;) pause();
  if (!strcmp(rq->fault, "wrong")) {
    if (kn_loader_dtype(&a->outputs[0]) == KN_DT_F32)
      ((float *)outs[0])[0] += 1.0f + fabsf(((float *)outs[0])[0]);
    else
      ((unsigned char *)outs[0])[0] ^= 0x40;
  }
  if (rq->want_out) {
    int of = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = of >= 0 && write(of, outs[0], (size_t)out_bytes) == (ssize_t)out_bytes;
    if (of >= 0) ok &= close(of) == 0;
    if (!ok) fail(fd, &o, "internal", "cannot write the output file");
    o.out_bytes = out_bytes;
  } else {
    if (rq->ref_bytes != out_bytes) {
      char msg[160];
      snprintf(msg, sizeof msg, "the reference has %lld bytes, the output %lld", (long long)rq->ref_bytes,
               (long long)out_bytes);
      fail(fd, &o, "wrong", msg);
    }
    o.max_error = kn_rt_compare(outs[0], ref, kn_loader_dtype(&a->outputs[0]), out_n, (size_t)out_bytes);
    if (!(o.max_error <= 1e-4)) {
      char msg[160];
      snprintf(msg, sizeof msg, "differs from the default schedule: error %.3g", o.max_error);
      fail(fd, &o, "wrong", msg);
    }
  }
  /* timing: settle (kn_rt_settle, which calibrates the repeats per sample),
   * then the median of the undisturbed samples (kn_rt_time) */
  pid_t busy[KN_RT_MAX_BUSY];
  int n_busy = strcmp(rq->fault, "busy") ? 0 : kn_rt_busy_start(busy);
  double once = kn_rt_settle(&l, (const void *const *)ins, outs, ws, batch, &d, now_s);
  long reps = once > 0 ? (long)(rq->repeat_s / once) + 1 : 1000;
  if (reps > 100000) reps = 100000;
  kn_rt_timing tm;
  kn_rt_time(&l, (const void *const *)ins, outs, ws, batch, &d, now_s, reps, rq->repeat_s, rq->samples, true, NULL,
             NULL, &tm);
  kn_rt_busy_stop(busy, n_busy);
  o.seconds = tm.seconds;
  o.noisy = tm.noisy;
  o.samples = tm.samples;
  o.disturbed = tm.disturbed;
  o.spread = tm.spread;
  snprintf(o.code, sizeof o.code, "ok");
  report(fd, &o);
}
