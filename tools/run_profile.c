/* run_profile.c — `kiln run --profile [--trace FILE.json] [--peak GFLOPS]`.
 *
 * Every profiled run calls the artifact's P_run_profiled, which records, per
 * plan step, the step as the calling thread saw it (task -1) and each of its
 * tasks on the pool. The table gives per step (one row per kernel call of the
 * plan): the median over the runs of the step's time, its share of the sum of
 * those medians (so the shares add up to 100%), GFLOP/s from the descriptor's
 * per-kernel FLOPs times the batch, and that rate as a fraction of the fp32
 * FMA peak (--peak, or measured here on the same thread count with
 * bench/peak.c for ~0.2 s), and the share of the pool's time in the step
 * that its threads spent waiting (idle: 1 - the sum of the step's task
 * times / (tasks x the step's time), the median over the runs; an
 * unbalanced split or a late start shows there, "-" for a step that ran no
 * tasks on the pool); rows sorted by time. The total line adds the
 * medians; the run line gives the median wall time of a whole
 * P_run_profiled call and the median of its part outside every step
 * (argument checks, taking the pool, the timer reads).
 *
 * The trace is Chrome's Trace Event Format (JSON object, "traceEvents"): one
 * "X" event per run (cat "run"), one per kernel per run (cat "kernel", on the
 * calling thread, tid 0), and one per task of a kernel that ran on the pool
 * (cat "task", tid = pool thread); a pipe that ran as one is one slice (cat
 * "pipe", tid 0) with one task slice per task, since its tasks interleave
 * the two kernels; every slice of a track nests in those it overlaps. ts /
 * dur in microseconds from the first run's start; thread names as "M"
 * metadata events. It is written to a new file beside FILE (mode 0666 less
 * the umask) and renamed into place. */
#include "tools/run_profile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt/measure_util.h"
#include "bench/peak.h"
#include "tools/json_out.h"
#include "tools/npy.h"

#define PEAK_SECONDS 0.2

typedef struct step_stat {
  int step;
  double median_ms;
  double flops; /* at this batch */
  double idle;  /* median share of the tasks' threads' time spent waiting; < 0: no tasks */
} step_stat;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_stat_desc(const void *a, const void *b) {
  const step_stat *x = a, *y = b;
  if (x->median_ms != y->median_ms) return x->median_ms < y->median_ms ? 1 : -1;
  return x->step - y->step;
}

typedef struct run_record {
  int64_t begin_ns, end_ns; /* wall time of the P_run_profiled call */
  int64_t n_events;
  const kiln_prof_event *events;
} run_record;

static void trace_event(FILE *fp, const char *name, const char *cat, int64_t t0, int64_t begin,
                        int64_t end, int tid) {
  fputs(",\n{\"name\": ", fp);
  kn_jw_write_string(fp, name);
  fprintf(fp, ", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": 1, \"tid\": %d",
          cat, (double)(begin - t0) / 1e3, (double)(end - begin) / 1e3, tid);
}

/* One step's events in a run: its whole-step event, then those of its tasks. */
typedef struct step_events {
  const kiln_prof_event *whole, *tasks;
  int64_t n_tasks;
} step_events;

/* The step whose whole-step event is events[e]; returns the index after its
 * task events. */
static int64_t step_at(const kiln_prof_event *events, int64_t n, int64_t e, step_events *out) {
  int64_t t = e + 1;
  while (t < n && events[t].task >= 0) t++;
  *out = (step_events){&events[e], &events[e + 1], t - e - 1};
  return t;
}

/* Whether x and y ran as one of the artifact's pipes. The runtime then lays
 * their events so that they meet exactly: y's whole-step event starts at the
 * nanosecond x's ends, and so does each of y's task events at the end of x's
 * on the same thread (docs/abi.md, Row pipes); two steps run one after the
 * other read the clock afresh for each event. */
static bool ran_as_pipe(const kiln_artifact *a, const step_events *x, const step_events *y) {
  bool listed = false;
  for (int i = 0; a->abi_minor >= 3 && i < a->n_pipes; i++)
    listed |= a->pipes[i].first == x->whole->step;
  if (!listed || y->whole->step != x->whole->step + 1 || x->whole->end_ns != y->whole->begin_ns ||
      x->n_tasks != y->n_tasks)
    return false;
  for (int64_t t = 0; t < x->n_tasks; t++)
    if (x->tasks[t].thread != y->tasks[t].thread || x->tasks[t].end_ns != y->tasks[t].begin_ns)
      return false;
  return true;
}

/* A kernel's step: one slice on the calling thread, and one per task on the
 * thread that ran it. */
static void trace_step(FILE *fp, const kiln_artifact *a, const step_events *x, long run, int64_t t0,
                       int64_t batch) {
  const kiln_step *st = &a->steps[x->whole->step];
  trace_event(fp, st->name, "kernel", t0, x->whole->begin_ns, x->whole->end_ns, 0);
  fprintf(fp, ", \"args\": {\"run\": %ld, \"step\": %d, \"tasks\": %d, \"gflop\": %.6g, \"nodes\": ", run,
          x->whole->step, x->whole->ntasks, st->flops * (double)batch * 1e-9);
  kn_jw_write_string(fp, st->nodes);
  fputs("}}", fp);
  for (int64_t t = 0; t < x->n_tasks; t++) {
    const kiln_prof_event *ev = &x->tasks[t];
    trace_event(fp, st->name, "task", t0, ev->begin_ns, ev->end_ns, ev->thread);
    fprintf(fp, ", \"args\": {\"run\": %ld, \"step\": %d, \"task\": %d, \"tasks\": %d}}", run, ev->step,
            ev->task, ev->ntasks);
  }
}

/* A pipe: its tasks ran both kernels band by band, so neither kernel has a
 * slice of its own on any thread. One slice on the calling thread spans the
 * pipe (its args keep the runtime's split of that time between the two
 * steps, the table's figures), and one per task starts where the task did
 * and lasts its two kernels' summed time, which args give apart. */
static void trace_pipe(FILE *fp, const kiln_artifact *a, const step_events *x, const step_events *y,
                       long run, int64_t t0, int64_t batch) {
  const kiln_step *s1 = &a->steps[x->whole->step], *s2 = &a->steps[y->whole->step];
  size_t len = strlen(s1->name) + strlen(s2->name) + 4;
  char *name = malloc(len);
  KN_ASSERT(name, "out of memory");
  snprintf(name, len, "%s + %s", s1->name, s2->name);
  trace_event(fp, name, "pipe", t0, x->whole->begin_ns, y->whole->end_ns, 0);
  fprintf(fp, ", \"args\": {\"run\": %ld, \"steps\": [%d, %d], \"tasks\": %d, \"gflop\": %.6g, "
              "\"ms\": [%.6f, %.6f], \"nodes\": [", run, x->whole->step, y->whole->step, x->whole->ntasks,
          (s1->flops + s2->flops) * (double)batch * 1e-9,
          (double)(x->whole->end_ns - x->whole->begin_ns) / 1e6,
          (double)(y->whole->end_ns - y->whole->begin_ns) / 1e6);
  kn_jw_write_string(fp, s1->nodes);
  fputs(", ", fp);
  kn_jw_write_string(fp, s2->nodes);
  fputs("]}}", fp);
  for (int64_t t = 0; t < x->n_tasks; t++) {
    const kiln_prof_event *e1 = &x->tasks[t], *e2 = &y->tasks[t];
    trace_event(fp, name, "task", t0, e1->begin_ns, e2->end_ns, e1->thread);
    fprintf(fp, ", \"args\": {\"run\": %ld, \"steps\": [%d, %d], \"task\": %d, \"tasks\": %d, "
                "\"ms\": [%.6f, %.6f]}}", run, e1->step, e2->step, e1->task, e1->ntasks,
            (double)(e1->end_ns - e1->begin_ns) / 1e6, (double)(e2->end_ns - e2->begin_ns) / 1e6);
  }
  free(name);
}

static int write_trace(const char *path, const kiln_artifact *a, const run_record *runs, long n_runs,
                       int threads, int64_t batch, kn_diag *d) {
  size_t len = strlen(path) + 32;
  char *tmp = malloc(len);
  KN_ASSERT(tmp, "out of memory");
  int fd = kn_create_beside(path, tmp, len);
  if (fd < 0) {
    kn_diag_error(d, "cannot write trace '%s': %s", path, strerror(errno));
    free(tmp);
    return -1;
  }
  FILE *fp = fdopen(fd, "w");
  if (!fp) {
    kn_diag_error(d, "cannot write trace '%s': %s", path, strerror(errno));
    close(fd);
    unlink(tmp);
    free(tmp);
    return -1;
  }
  int64_t t0 = runs[0].begin_ns;
  fprintf(fp, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"artifact\": ");
  kn_jw_write_string(fp, a->prefix);
  fprintf(fp, ", \"target\": ");
  kn_jw_write_string(fp, a->target);
  fprintf(fp, ", \"batch\": %lld, \"threads\": %d, \"runs\": %ld},\n\"traceEvents\": [\n",
          (long long)batch, threads, n_runs);
  fprintf(fp, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, "
              "\"args\": {\"name\": ");
  kn_jw_write_string(fp, a->prefix);
  fputs("}}", fp);
  for (int t = 0; t < threads; t++)
    fprintf(fp, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                "\"args\": {\"name\": \"%s %d\"}}", t, t ? "worker" : "caller", t);
  for (long r = 0; r < n_runs; r++) {
    trace_event(fp, "run", "run", t0, runs[r].begin_ns, runs[r].end_ns, 0);
    fprintf(fp, ", \"args\": {\"run\": %ld}}", r);
    const kiln_prof_event *ev = runs[r].events;
    int64_t n = runs[r].n_events, e = 0;
    while (e < n) { /* the step indices are checked; a stray task event first passes as a step */
      step_events x, y;
      int64_t next = step_at(ev, n, e, &x), after = next < n ? step_at(ev, n, next, &y) : n;
      if (next < n && ran_as_pipe(a, &x, &y)) {
        trace_pipe(fp, a, &x, &y, r, t0, batch);
        e = after;
      } else {
        trace_step(fp, a, &x, r, t0, batch);
        e = next;
      }
    }
  }
  fputs("\n]}\n", fp);
  bool bad = ferror(fp) != 0;
  if (fclose(fp) != 0 || bad || rename(tmp, path) != 0) {
    kn_diag_error(d, "cannot write trace '%s': %s", path, strerror(errno ? errno : EIO));
    unlink(tmp);
    free(tmp);
    return -1;
  }
  free(tmp);
  return 0;
}

/* The median over the runs, of those where the step ran tasks on the pool,
 * of 1 - (their summed time) / (tasks x the step's time); -1 when it never
 * did. `scratch` holds `runs` values. */
static double step_idle(const double *step_ms, const double *busy_ms, const int *tasks, long runs,
                        double *scratch) {
  long n = 0;
  for (long r = 0; r < runs; r++)
    if (tasks[r] > 0 && step_ms[r] > 0) {
      double idle = 1 - busy_ms[r] / (tasks[r] * step_ms[r]);
      scratch[n++] = idle < 0 ? 0 : idle;
    }
  return n > 0 ? kn_rt_median(scratch, n) : -1;
}

static void print_table(FILE *out, const kiln_artifact *a, step_stat *stats, double run_ms,
                        double outside_ms, const kn_profile_opts *o, int64_t batch, double peak, bool peak_measured) {
  qsort(stats, (size_t)a->n_steps, sizeof *stats, cmp_stat_desc);
  double total_ms = 0, total_flops = 0;
  int name_w = 6;
  for (int i = 0; i < a->n_steps; i++) {
    total_ms += stats[i].median_ms;
    total_flops += stats[i].flops;
    int w = (int)strlen(a->steps[stats[i].step].name);
    if (w > name_w) name_w = w;
  }
  fprintf(out,
          "profile: %s, %d kernel calls, batch %lld, %d threads, %ld runs after %ld warm-up; "
          "time = median over the runs\n",
          a->prefix, a->n_steps, (long long)batch, o->threads, o->runs, o->warmup);
  if (peak > 0)
    fprintf(out, "peak: %.1f GFLOP/s fp32 on %d threads (%s)\n", peak, o->threads,
            peak_measured ? "measured now: FMA loop, bench/peak.c" : "--peak");
  else /* a GPU artifact: the CPU's FMA loop says nothing of the GPU */
    fprintf(out, "peak: unknown for a GPU artifact (give --peak GFLOPS); times from CUDA events\n");
  fprintf(out, "%4s  %-*s %10s %7s %9s %6s %6s  %s\n", "step", name_w, "kernel", "time ms", "share",
          "GFLOP/s", "%peak", "idle", "onnx nodes");
  for (int i = 0; i < a->n_steps; i++) {
    const kiln_step *st = &a->steps[stats[i].step];
    double ms = stats[i].median_ms;
    double gflops = ms > 0 ? stats[i].flops / (ms * 1e6) : 0;
    char idle[16] = "-";
    if (stats[i].idle >= 0) snprintf(idle, sizeof idle, "%.1f%%", 100 * stats[i].idle);
    char pct[16] = "-";
    if (peak > 0) snprintf(pct, sizeof pct, "%.1f%%", 100 * gflops / peak);
    fprintf(out, "%4d  %-*s %10.4f %6.2f%% %9.2f %6s %6s  %s\n", stats[i].step, name_w, st->name, ms,
            total_ms > 0 ? 100 * ms / total_ms : 0, gflops, pct, idle,
            st->nodes && *st->nodes ? st->nodes : "-");
  }
  double gflops = total_ms > 0 ? total_flops / (total_ms * 1e6) : 0;
  char pct[16] = "-";
  if (peak > 0) snprintf(pct, sizeof pct, "%.1f%%", 100 * gflops / peak);
  fprintf(out, "%4s  %-*s %10.4f %6.2f%% %9.2f %6s %6s  (%.4g GFLOP)\n", "", name_w, "total",
          total_ms, total_ms > 0 ? 100.0 : 0.0, gflops, pct, "", total_flops * 1e-9);
  fprintf(out, "run: median %.4f ms per P_run_profiled call, of which %.4f ms outside the kernels\n",
          run_ms, outside_ms);
}

/* The table as the JSON member "profile" (rows in the table's order). */
static void json_table(kn_jw *j, const kiln_artifact *a, const step_stat *stats, double run_ms, double outside_ms,
                       const kn_profile_opts *o, double peak, bool peak_measured) {
  double total_ms = 0, total_flops = 0;
  for (int i = 0; i < a->n_steps; i++) {
    total_ms += stats[i].median_ms;
    total_flops += stats[i].flops;
  }
  kn_jw_object(j, "profile");
  kn_jw_int(j, "runs", o->runs);
  kn_jw_int(j, "warmup", o->warmup);
  if (peak > 0) kn_jw_num(j, "peak_gflops", peak);
  else kn_jw_null(j, "peak_gflops");
  kn_jw_str(j, "peak_source", peak <= 0 ? NULL : peak_measured ? "measured" : "--peak");
  kn_jw_num(j, "total_ms", total_ms);
  kn_jw_num(j, "total_gflop", total_flops * 1e-9);
  kn_jw_num(j, "run_ms", run_ms);
  kn_jw_num(j, "outside_ms", outside_ms);
  kn_jw_array(j, "kernels", false);
  for (int i = 0; i < a->n_steps; i++) {
    const kiln_step *st = &a->steps[stats[i].step];
    double ms = stats[i].median_ms, gflops = ms > 0 ? stats[i].flops / (ms * 1e6) : 0;
    kn_jw_object(j, NULL);
    kn_jw_int(j, "step", stats[i].step);
    kn_jw_str(j, "kernel", st->name);
    kn_jw_num(j, "median_ms", ms);
    kn_jw_num(j, "share", total_ms > 0 ? ms / total_ms : 0);
    kn_jw_num(j, "gflops", gflops);
    if (peak > 0) kn_jw_num(j, "peak_fraction", gflops / peak);
    else kn_jw_null(j, "peak_fraction");
    if (stats[i].idle >= 0) kn_jw_num(j, "idle", stats[i].idle);
    else kn_jw_null(j, "idle");
    kn_jw_str(j, "nodes", st->nodes ? st->nodes : "");
    kn_jw_end(j);
  }
  kn_jw_end(j);
  kn_jw_end(j);
}

int kn_run_profile(const kn_loader *l, const void *const *inputs, void *const *outputs,
                   void *workspace, int64_t batch, const kn_profile_opts *o, FILE *out,
                   kn_diag *d) {
  const kiln_artifact *a = l->art;
  int64_t cap = KILN_PROF_EVENTS(a->n_steps, o->threads);
  int status = -1;
  size_t total = (size_t)o->runs * (size_t)(cap > 0 ? cap : 1);
  kiln_prof_event *events = calloc(total, sizeof *events);
  run_record *runs = calloc((size_t)o->runs, sizeof *runs);
  double *samples = malloc(sizeof(double) * (size_t)o->runs);
  step_stat *stats = calloc((size_t)(a->n_steps > 0 ? a->n_steps : 1), sizeof *stats);
  /* step_ms[s * runs + r]: step s's time in run r */
  size_t cells = (size_t)(a->n_steps > 0 ? a->n_steps : 1) * (size_t)o->runs;
  double *step_ms = calloc(cells, sizeof(double));
  /* busy_ms / tasks[s * runs + r]: the summed time and count of step s's tasks in run r */
  double *busy_ms = calloc(cells, sizeof(double));
  int *tasks = calloc(cells, sizeof(int));
  if (!events || !runs || !samples || !stats || !step_ms || !busy_ms || !tasks) {
    kn_diag_error(d, "cannot allocate the profile of %ld runs (%zu events)", o->runs, total);
    goto done;
  }
  for (long r = 0; r < o->warmup; r++)
    if (kn_loader_run(l, inputs, outputs, workspace, batch, d)) goto done;
  for (long r = 0; r < o->runs; r++) {
    kiln_prof_event *ev = events + (size_t)r * (size_t)cap;
    runs[r].events = ev;
    runs[r].begin_ns = now_ns();
    if (kn_loader_run_profiled(l, inputs, outputs, workspace, batch, ev, cap, &runs[r].n_events, d))
      goto done;
    runs[r].end_ns = now_ns();
  }
  /* per step: the median of its whole-step events */
  for (long r = 0; r < o->runs; r++)
    for (int64_t e = 0; e < runs[r].n_events; e++) {
      const kiln_prof_event *ev = &runs[r].events[e];
      if (ev->step < 0 || ev->step >= a->n_steps) {
        kn_diag_error(d, "%s_run_profiled reported step %d of %d", a->prefix, ev->step, a->n_steps);
        goto done;
      }
      size_t cell = (size_t)ev->step * (size_t)o->runs + (size_t)r;
      double ms = (double)(ev->end_ns - ev->begin_ns) / 1e6;
      if (ev->task < 0) {
        step_ms[cell] = ms;
      } else {
        busy_ms[cell] += ms;
        tasks[cell]++;
      }
    }
  for (long r = 0; r < o->runs; r++) samples[r] = (double)(runs[r].end_ns - runs[r].begin_ns) / 1e6;
  double run_ms = kn_rt_median(samples, o->runs);
  for (long r = 0; r < o->runs; r++) { /* the wall time not inside any step, per run */
    samples[r] = (double)(runs[r].end_ns - runs[r].begin_ns) / 1e6;
    for (int s = 0; s < a->n_steps; s++) samples[r] -= step_ms[(size_t)s * (size_t)o->runs + (size_t)r];
  }
  double outside_ms = kn_rt_median(samples, o->runs);
  /* medians sort step_ms in place: after the per-run sums above, and each
   * step's idle share before its own median */
  for (int s = 0; s < a->n_steps; s++) {
    size_t row = (size_t)s * (size_t)o->runs;
    double idle = step_idle(step_ms + row, busy_ms + row, tasks + row, o->runs, samples);
    stats[s] = (step_stat){.step = s, .median_ms = kn_rt_median(step_ms + row, o->runs),
                           .flops = a->steps[s].flops * (double)batch, .idle = idle};
  }
  double peak = o->peak_gflops;
  bool gpu = a->abi_minor >= 4 && a->gpu;
  if (peak <= 0 && !gpu) {
    kn_peak_result pr;
    if (kn_peak_measure(o->threads, PEAK_SECONDS, &pr) || pr.gflops <= 0) {
      kn_diag_error(d, "could not measure the fp32 peak (give --peak GFLOPS)");
      goto done;
    }
    peak = pr.gflops;
  }
  if (o->trace_path &&
      write_trace(o->trace_path, a, runs, o->runs, o->threads, batch, d))
    goto done;
  print_table(out, a, stats, run_ms, outside_ms, o, batch, peak, o->peak_gflops <= 0);
  if (o->json) json_table(o->json, a, stats, run_ms, outside_ms, o, peak, o->peak_gflops <= 0);
  if (o->trace_path)
    fprintf(out, "trace: %s (%ld runs; open in https://ui.perfetto.dev or chrome://tracing)\n",
            o->trace_path, o->runs);
  status = 0;
done:
  free(events);
  free(runs);
  free(samples);
  free(stats);
  free(step_ms);
  free(busy_ms);
  free(tasks);
  return status;
}
