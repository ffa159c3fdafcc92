/* model_check.c — a session's schedules timed inside the model.
 *
 * The search times each kernel alone (autotune/measure.c), in a cache state
 * made to resemble the model's; what it cannot copy is the rest of the
 * model: which core wrote which part of an input, what the kernels around it
 * left in the caches, the barrier each parallel step ends in. So at the end
 * of `kiln tune` the model is compiled with the log as `kiln compile
 * --tuning-log` would (same convs' algorithms, same kernels), once with
 * every kernel at its default and once per rank: each kernel at its best
 * schedule timed alone, then at its first and second runner-up. The
 * artifacts run in turns under the profiler (`rounds` times `runs` runs
 * each, the first of a round rotating), and each step's time is the median
 * over rounds of its per-round median. Per workload key, every schedule it
 * ran gets a "cache":"model" record of its mean time per kernel; compile
 * takes the fastest (kn_at_log_best), so a schedule that won alone but
 * loses in the model gives way to its default or to a runner-up.
 *
 * Why: a tuned log that is faster in the model as a whole can still hold
 * kernels slower there than their defaults, which no single-kernel timing
 * shows (docs/autotune.md, "Model check"). */
#include "tools/model_check.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "autotune/autotune.h"
#include "rt/measure_util.h"
#include "rt/loader.h"

#define MAX_IO 64      /* inputs / outputs of the model */
#define MAX_POOL 256   /* pool threads (P_set_threads accepts at most this) */

typedef struct build {
  kn_compile_report rep;
  char path[4200];
  kn_loader l;
  bool open;
  void *ins[MAX_IO], *outs[MAX_IO], *ws;
  kiln_prof_event *events;
  int64_t cap;
  double *step_ms;  /* [step][run] of one round */
  double *round_ms; /* [step][round]: per-round medians */
} build;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* j = 0: every kernel at its default; j > 0: at the (j-1)-th ranked schedule
 * timed alone; j < 0: as `kiln compile --tuning-log` picks (the log's best) */
static int compile_one(const kn_model_check_opts *o, build *b, int j, kn_arena *A, kn_diag *d) {
  kn_compile_opts co = *o->compile;
  co.output = b->path;
  co.tuning_log = o->log_path;
  co.replay_defaults = j == 0;
  co.replay_alone = j >= 0;
  co.replay_rank = j > 0 ? j - 1 : 0;
  co.dump_after = NULL;
  co.stop_after = NULL;
  co.verbose = false;
  b->rep = (kn_compile_report){.arena = A};
  co.report = &b->rep;
  return kn_compile(&co, d);
}

static int open_one(const kn_model_check_opts *o, build *b, int64_t batch, kn_diag *d) {
  if (kn_loader_open(b->path, &b->l, d) < 0) return -1;
  b->open = true;
  const kiln_artifact *a = b->l.art;
  if (a->n_inputs > MAX_IO || a->n_outputs > MAX_IO)
    return kn_diag_error(d, "model check: %d inputs, %d outputs: too many", a->n_inputs, a->n_outputs);
  if (a->n_steps != b->rep.n_steps)
    return kn_diag_error(d, "model check: the artifact has %d steps, the compile reported %d", a->n_steps,
                         b->rep.n_steps);
  if (o->threads > 0 && kn_loader_set_threads(&b->l, o->threads, d) < 0) return -1;
  for (int i = 0; i < a->n_inputs; i++) {
    int64_t bytes = kn_loader_bytes(&a->inputs[i], batch);
    b->ins[i] = aligned_alloc(64, (size_t)((bytes + 64) & ~63));
    if (!b->ins[i]) return kn_diag_error(d, "model check: out of memory");
    kn_rt_fill_input(b->ins[i], kn_loader_dtype(&a->inputs[i]), kn_loader_numel(&a->inputs[i], batch),
                     (uint64_t)i + 1);
  }
  for (int i = 0; i < a->n_outputs; i++) {
    int64_t bytes = kn_loader_bytes(&a->outputs[i], batch);
    b->outs[i] = aligned_alloc(64, (size_t)((bytes + 64) & ~63));
    if (!b->outs[i]) return kn_diag_error(d, "model check: out of memory");
  }
  b->ws = kn_loader_workspace_new(a, d);
  int threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  b->cap = KILN_PROF_EVENTS(a->n_steps, threads > MAX_POOL ? MAX_POOL : threads);
  b->events = calloc((size_t)b->cap, sizeof *b->events);
  b->step_ms = calloc((size_t)a->n_steps * (size_t)o->runs + 1, sizeof(double));
  b->round_ms = calloc((size_t)a->n_steps * (size_t)o->rounds + 1, sizeof(double));
  if (!b->ws || !b->events || !b->step_ms || !b->round_ms)
    return kn_diag_error(d, "model check: out of memory");
  return 0;
}

/* The header the compile wrote beside PATH.so. */
static void unlink_header(const char *so_path) {
  size_t len = strlen(so_path);
  if (len <= 3) return;
  char h[4300];
  snprintf(h, sizeof h, "%.*s.h", (int)(len - 3), so_path);
  unlink(h);
}

static void close_one(build *b) {
  if (b->open) {
    for (int i = 0; i < b->l.art->n_inputs; i++) free(b->ins[i]);
    for (int i = 0; i < b->l.art->n_outputs; i++) free(b->outs[i]);
    kn_loader_workspace_free(b->ws);
    kn_loader_close(&b->l);
  }
  free(b->events);
  free(b->step_ms);
  free(b->round_ms);
  if (b->path[0]) unlink(b->path);
}

/* One round of b: a few plain runs (its pool wakes up, the other's idles),
 * then o->runs profiled ones; per step the median into round_ms[s][r]. */
static int round_of(const kn_model_check_opts *o, build *b, int r, int64_t batch, kn_model_check_summary *sum,
                    kn_diag *d) {
  const kiln_artifact *a = b->l.art;
  for (int k = 0; k < 3; k++)
    if (kn_loader_run(&b->l, (const void *const *)b->ins, b->outs, b->ws, batch, d) < 0) return -1;
  for (int run = 0; run < o->runs; run++) {
    int64_t n = 0;
    kn_rt_mark mark = kn_rt_mark_now();
    double t0 = now_s();
    if (kn_loader_run_profiled(&b->l, (const void *const *)b->ins, b->outs, b->ws, batch, b->events, b->cap, &n,
                               d) < 0)
      return -1;
    double wall = now_s() - t0;
    sum->runs++;
    if (kn_rt_disturbed(&mark, wall)) sum->disturbed++;
    for (int64_t e = 0; e < n; e++) {
      const kiln_prof_event *ev = &b->events[e];
      if (ev->task < 0 && ev->step >= 0 && ev->step < a->n_steps)
        b->step_ms[(size_t)ev->step * (size_t)o->runs + (size_t)run] = (double)(ev->end_ns - ev->begin_ns) / 1e6;
    }
  }
  for (int s = 0; s < a->n_steps; s++)
    b->round_ms[(size_t)s * (size_t)o->rounds + (size_t)r] = kn_rt_median(b->step_ms + (size_t)s * (size_t)o->runs, o->runs);
  return 0;
}

/* Appends (when `append`), per key whose steps run another schedule than the
 * default in some build, one record per build that runs one schedule on
 * all of them; counts in sum what won. */
static int write_records(const kn_model_check_opts *o, build *b, int nb, double *const *ms, bool append,
                         kn_model_check_summary *sum, kn_diag *d) {
  int n = b[0].rep.n_steps;
  bool *done = calloc((size_t)n + 1, 1);
  FILE *f = append ? fopen(o->log_path, "a") : NULL;
  if (!done || (append && !f)) {
    free(done);
    if (f) fclose(f);
    return kn_diag_error(d, "tuning log '%s': cannot open it for appending", o->log_path);
  }
  int rc = 0;
  for (int s = 0; s < n && rc == 0; s++) {
    if (done[s]) continue;
    const char *key = b[0].rep.keys[s];
    double t[KN_CHECK_RANKS + 1] = {0};
    bool one_trace[KN_CHECK_RANKS + 1], tuned = false;
    int count = 0;
    for (int j = 0; j < nb; j++) one_trace[j] = true;
    for (int k = s; k < n; k++) {
      if (done[k] || strcmp(b[0].rep.keys[k], key)) continue;
      done[k] = true;
      count++;
      for (int j = 0; j < nb; j++) {
        t[j] += ms[j][k];
        one_trace[j] &= !strcmp(b[j].rep.traces[k], b[j].rep.traces[s]);
        tuned |= b[j].rep.tuned[k];
      }
    }
    int fastest = 0;
    for (int j = 1; j < nb; j++)
      if (one_trace[j] && t[j] < t[fastest]) fastest = j;
    sum->chosen_ms += tuned ? t[fastest] : t[0];
    if (!tuned) continue;
    sum->keys++;
    sum->won[fastest]++;
    for (int j = 0; j < nb && rc == 0 && append; j++) {
      if (!one_trace[j]) continue;
      kn_at_record r = {.target = o->target_string, .key = key, .trace = b[j].rep.traces[s],
                        .seconds = t[j] / count / 1e3, .status = KN_AT_OK, .in_model = true, .noisy = sum->noisy,
                        .is_default = !strcmp(b[j].rep.traces[s], b[0].rep.traces[s])};
      rc = kn_at_log_append(f, &r, d);
    }
  }
  if (f && fclose(f) != 0 && rc == 0) rc = kn_diag_error(d, "tuning log '%s': write failed", o->log_path);
  free(done);
  return rc;
}

int kn_model_check(const kn_model_check_opts *o, kn_model_check_summary *sum, kn_diag *d) {
  enum { NB = KN_CHECK_RANKS + 1 };
  memset(sum, 0, sizeof *sum);
  kn_arena A;
  kn_arena_init(&A);
  build b[NB];
  double *ms[NB] = {NULL};
  memset(b, 0, sizeof b);
  const char *tmp = o->workdir ? o->workdir : getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/kiln-check.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int rc = -1;
  if (!mkdtemp(dir)) {
    kn_arena_free(&A);
    return kn_diag_error(d, "model check: cannot create a temporary folder under %s", tmp && *tmp ? tmp : "/tmp");
  }
  for (int j = 0; j < NB; j++) {
    snprintf(b[j].path, sizeof b[j].path, "%s/b%d.so", dir, j);
    if (compile_one(o, &b[j], j, &A, d) < 0) goto done;
  }
  int n = b[0].rep.n_steps;
  for (int j = 1; j < NB; j++) {
    if (b[j].rep.n_steps != n) {
      kn_diag_error(d, "model check: the builds have %d and %d steps", n, b[j].rep.n_steps);
      goto done;
    }
    for (int s = 0; s < n; s++)
      if (strcmp(b[0].rep.keys[s], b[j].rep.keys[s])) {
        kn_diag_error(d, "model check: step %d runs different workloads in two builds", s);
        goto done;
      }
  }
  int64_t batch = 1;
  int rc_rounds = 0;
  for (int j = 0; j < NB; j++)
    if (open_one(o, &b[j], batch, d) < 0) goto done;
  pid_t busy[KN_RT_MAX_BUSY];
  int n_busy = o->plant_busy ? kn_rt_busy_start(busy) : 0;
  for (int r = 0; r < o->rounds && rc_rounds == 0; r++)
    for (int k = 0; k < NB && rc_rounds == 0; k++) /* in turns, the first rotating, so a slow phase falls on all */
      rc_rounds = round_of(o, &b[(k + r) % NB], r, batch, sum, d);
  kn_rt_busy_stop(busy, n_busy);
  if (rc_rounds < 0) goto done;
  for (int j = 0; j < NB; j++) {
    ms[j] = calloc((size_t)n + 1, sizeof(double));
    if (!ms[j]) {
      kn_diag_error(d, "model check: out of memory");
      goto done;
    }
    for (int s = 0; s < n; s++) ms[j][s] = kn_rt_median(b[j].round_ms + (size_t)s * (size_t)o->rounds, o->rounds);
  }
  for (int s = 0; s < n; s++) {
    sum->tuned_steps += b[1].rep.tuned[s];
    sum->default_ms += ms[0][s];
    sum->tuned_ms += ms[1][s];
  }
  sum->steps = n;
  sum->noisy = sum->disturbed > sum->runs / 2;
  rc = write_records(o, b, NB, ms, !sum->noisy || o->keep_noisy, sum, d);
  if (rc == 0) { /* what compile makes of the log now: the same count as its -v */
    build final = {0};
    snprintf(final.path, sizeof final.path, "%s/final.so", dir);
    rc = compile_one(o, &final, -1, &A, d);
    for (int s = 0; rc == 0 && s < final.rep.n_steps; s++) sum->compile_tuned += final.rep.tuned[s];
    close_one(&final);
    unlink_header(final.path);
  }
done:
  for (int j = 0; j < NB; j++) {
    free(ms[j]);
    close_one(&b[j]);
    unlink_header(b[j].path);
  }
  rmdir(dir);
  kn_arena_free(&A);
  return rc;
}
