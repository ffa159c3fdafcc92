/* model_check.c — a session's tuned schedules timed inside the model.
 *
 * The search times each kernel alone (autotune/measure.c), in a cache state
 * made to resemble the model's; what it cannot copy is the rest of the
 * model: which core wrote which part of an input, what the kernels around it
 * left in the caches, the barrier each parallel step ends in. So at the end
 * of `kiln tune` the model is compiled twice with the log, as `kiln compile
 * --tuning-log` would (same convs' algorithms, same kernels), once with the
 * tuned schedules and once with every kernel at its default; the two
 * artifacts run in turns under the profiler (`rounds` times `runs` runs
 * each), and each step's time is the median over rounds of its per-round
 * median. Per workload key with a tuned schedule, the mean over its steps
 * of either build becomes a "cache":"model" record of that schedule; compile
 * takes the faster (kn_at_log_best), so a schedule that won alone but loses
 * in the model goes back to its default.
 *
 * Measured on the 2-core Xeon (efficientnet_b0, 2026-12-06): a cold-tuned
 * log whose kernels summed 4.03 ms in the model against the defaults' 4.11
 * had kernels 0.02 ms slower each (the NCHW -> NHWC transpose on one thread,
 * 0.043 against 0.022 ms; some squeeze-and-excitation fc2s, 0.007 against
 * 0.005 ms) that no single-kernel timing showed. */
#include "model_check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../autotune/autotune.h"
#include "../autotune/measure_util.h"
#include "../rt/loader.h"

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

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int compile_one(const kn_model_check_opts *o, build *b, bool defaults, kn_arena *A, kn_diag *d) {
  kn_compile_opts co = *o->compile;
  co.output = b->path;
  co.tuning_log = o->log_path;
  co.replay_defaults = defaults;
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
    kn_at_fill_input(b->ins[i], kn_loader_dtype(&a->inputs[i]), kn_loader_numel(&a->inputs[i], batch),
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
static int round_of(const kn_model_check_opts *o, build *b, int r, int64_t batch, kn_diag *d) {
  const kiln_artifact *a = b->l.art;
  for (int k = 0; k < 3; k++)
    if (kn_loader_run(&b->l, (const void *const *)b->ins, b->outs, b->ws, batch, d) < 0) return -1;
  for (int run = 0; run < o->runs; run++) {
    int64_t n = 0;
    if (kn_loader_run_profiled(&b->l, (const void *const *)b->ins, b->outs, b->ws, batch, b->events, b->cap, &n,
                               d) < 0)
      return -1;
    for (int64_t e = 0; e < n; e++) {
      const kiln_prof_event *ev = &b->events[e];
      if (ev->task < 0 && ev->step >= 0 && ev->step < a->n_steps)
        b->step_ms[(size_t)ev->step * (size_t)o->runs + (size_t)run] = (double)(ev->end_ns - ev->begin_ns) / 1e6;
    }
  }
  for (int s = 0; s < a->n_steps; s++)
    b->round_ms[(size_t)s * (size_t)o->rounds + (size_t)r] = median(b->step_ms + (size_t)s * (size_t)o->runs, o->runs);
  return 0;
}

/* Appends the two records of every key whose steps run a tuned schedule. */
static int write_records(const kn_model_check_opts *o, build *dflt, build *tuned, const double *t_ms,
                         const double *d_ms, kn_model_check_summary *sum, kn_diag *d) {
  int n = tuned->rep.n_steps;
  bool *done = calloc((size_t)n + 1, 1);
  FILE *f = fopen(o->log_path, "a");
  if (!done || !f) {
    free(done);
    if (f) fclose(f);
    return kn_diag_error(d, "tuning log '%s': cannot open it for appending", o->log_path);
  }
  int rc = 0;
  for (int s = 0; s < n && rc == 0; s++) {
    if (!tuned->rep.tuned[s]) sum->chosen_ms += t_ms[s];
    if (done[s] || !tuned->rep.tuned[s]) continue;
    const char *key = tuned->rep.keys[s];
    double ts = 0, ds = 0;
    int count = 0;
    for (int k = s; k < n; k++)
      if (!done[k] && tuned->rep.tuned[k] && !strcmp(tuned->rep.keys[k], key) &&
          !strcmp(tuned->rep.traces[k], tuned->rep.traces[s])) {
        done[k] = true;
        ts += t_ms[k];
        ds += d_ms[k];
        count++;
      }
    sum->keys++;
    if (ts <= ds) sum->kept++;
    else sum->reverted++;
    sum->chosen_ms += ts <= ds ? ts : ds;
    kn_at_record rt = {.target = o->target_string, .key = key, .trace = tuned->rep.traces[s],
                       .seconds = ts / count / 1e3, .status = KN_AT_OK, .in_model = true};
    kn_at_record rd = rt;
    rd.trace = dflt->rep.traces[s];
    rd.seconds = ds / count / 1e3;
    rd.is_default = true;
    rc = kn_at_log_append(f, &rt, d) < 0 || kn_at_log_append(f, &rd, d) < 0 ? -1 : 0;
  }
  if (fclose(f) != 0 && rc == 0) rc = kn_diag_error(d, "tuning log '%s': write failed", o->log_path);
  free(done);
  return rc;
}

int kn_model_check(const kn_model_check_opts *o, kn_model_check_summary *sum, kn_diag *d) {
  memset(sum, 0, sizeof *sum);
  kn_arena A;
  kn_arena_init(&A);
  build b[2];
  memset(b, 0, sizeof b);
  const char *tmp = o->workdir ? o->workdir : getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/kiln-check.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int rc = -1;
  if (!mkdtemp(dir)) {
    kn_arena_free(&A);
    return kn_diag_error(d, "model check: cannot create a temporary folder under %s", tmp && *tmp ? tmp : "/tmp");
  }
  /* b[0]: every kernel at its default; b[1]: the tuned schedules */
  for (int k = 0; k < 2; k++) {
    snprintf(b[k].path, sizeof b[k].path, "%s/%s.so", dir, k ? "tuned" : "default");
    if (compile_one(o, &b[k], k == 0, &A, d) < 0) goto done;
  }
  int n = b[1].rep.n_steps;
  if (b[0].rep.n_steps != n) {
    kn_diag_error(d, "model check: the two builds have %d and %d steps", b[0].rep.n_steps, n);
    goto done;
  }
  for (int s = 0; s < n; s++)
    if (strcmp(b[0].rep.keys[s], b[1].rep.keys[s])) {
      kn_diag_error(d, "model check: step %d runs different workloads in the two builds", s);
      goto done;
    }
  int64_t batch = 1;
  for (int k = 0; k < 2; k++)
    if (open_one(o, &b[k], batch, d) < 0) goto done;
  for (int r = 0; r < o->rounds; r++)
    for (int k = 0; k < 2; k++) /* in turns, the first alternating, so a slow phase falls on both */
      if (round_of(o, &b[(k + r) % 2], r, batch, d) < 0) goto done;
  double *t_ms = calloc((size_t)n + 1, sizeof(double)), *d_ms = calloc((size_t)n + 1, sizeof(double));
  if (!t_ms || !d_ms) {
    free(t_ms), free(d_ms);
    kn_diag_error(d, "model check: out of memory");
    goto done;
  }
  for (int s = 0; s < n; s++) {
    d_ms[s] = median(b[0].round_ms + (size_t)s * (size_t)o->rounds, o->rounds);
    t_ms[s] = median(b[1].round_ms + (size_t)s * (size_t)o->rounds, o->rounds);
    sum->tuned_steps += b[1].rep.tuned[s];
    sum->default_ms += d_ms[s];
    sum->tuned_ms += t_ms[s];
  }
  sum->steps = n;
  rc = write_records(o, &b[0], &b[1], t_ms, d_ms, sum, d);
  free(t_ms), free(d_ms);
done:
  for (int k = 0; k < 2; k++) close_one(&b[k]);
  for (int k = 0; k < 2; k++) {
    char h[4300];
    size_t len = strlen(b[k].path);
    if (len > 3) {
      snprintf(h, sizeof h, "%.*s.h", (int)(len - 3), b[k].path);
      unlink(h);
    }
  }
  rmdir(dir);
  kn_arena_free(&A);
  return rc;
}
