/* tune.c — a tuning session.
 *
 * 1. Tasks: groups with equal workload keys are one task (weight = count),
 *    over the alternatives (kn_at_tune_alternatives: the model with its
 *    3x3 convs direct and as Winograd F(2x2) and F(4x4)), whose end-to-end estimates are
 *    those of the fastest alternative.
 * 2. Defaults: each task's default schedule is built and run first; its
 *    output is the task's reference and its time the task's baseline (a
 *    task whose default fails is left out with a warning).
 * 3. Budget: `--trials` candidates beyond the defaults, over all tasks;
 *    records already in the log for this target count against it (resume)
 *    and are handed to the strategy's `observe` first.
 * 4. Task scheduler: a warm-up round gives every task one small batch
 *    (one candidate per build worker; largest count x default time first); after it, each batch goes to the task
 *    with the largest expected gain per trial,
 *      count x ((best[k-w] - best[k]) / w + 0.05 x best[k] / (k + 1)),
 *    k the task's trials this session, w = min(k, 8): its recent
 *    improvement (the gradient of the end-to-end estimate) plus an
 *    optimistic term that decays with the trials it got.
 * 5. Search: the strategy proposes the task's next candidates (evolve.c),
 *    or ranks its space once (random); each batch is built by
 *    `build_workers` children at once, then run alone.
 * 6. End: the budget is spent, --time-budget passed, every task's candidates
 *    are exhausted, Ctrl-C, or early stop: no task's best time improved by
 *    more than 1% over the last K trials of the session (K = --early-stop,
 *    default max(64, 4 x tasks); --no-early-stop turns it off).
 * 7. Confirm (confirm_rounds > 0, `kiln tune --confirm R`): each task whose
 *    search found something faster than its default builds both again and
 *    times them in turns, R times each, appending "confirm" records. The
 *    search's best is the lowest of many single timings, the default was
 *    timed once at the start, and on a shared machine a burst of load
 *    inflates either; compile then takes the faster by these timings
 *    (kn_at_log_best). This runs after --time-budget, a few seconds a task.
 * Every measured candidate is appended to the log at once (flushed), so an
 * interrupted session loses nothing; *stop (SIGINT) ends it cleanly. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autotune/measure.h"
#include "autotune/search.h"

typedef struct task {
  const char *key;
  int graph; /* the alternative graph of the representative group */
  int group; /* representative group */
  int count; /* kernels with this workload: the most in one alternative */
  int count_in[KN_AT_MAX_ALTS]; /* ... in each alternative */
  bool ok;   /* default built and ran */
  bool have_ref;
  kn_at_task_shape shape;
  double default_s, best_s;
  kn_schedule *space;
  const char **traces;
  int n_space;
  int *order, next; /* strategy's order (rank), next index to consider */
  bool exhausted;   /* nothing left to propose */
  int trials;       /* measured this session */
  double *hist;     /* best time after each trial of this session; [0]: at its start */
  int hist_cap;
} task;

typedef struct session {
  const kn_graph *const *gs; /* the alternatives: the same model compiled different ways */
  const kn_groups *const *grs;
  int n_alts;
  const kn_target *t;
  const kn_at_options *o;
  kn_at_summary *sum;
  char target[800];
  kn_at_log log;
  FILE *out;
  char dir[256];
  task *tasks;
  int n_tasks;
  int budget, done; /* trials */
  int last_improved; /* `done` when some task last improved by > 1% */
  double start, last_progress;
  double search_start; /* 0 until the defaults are timed */
  bool tty;
  bool warm; /* how this session times: warm (--cache warm, or on a runner) or cold */
  kn_at_measure_opts measure; /* the options', with the cold sweep buffer */
} session;

/* ---- the random strategy ---- */

static uint64_t rand_next(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static void random_rank(void *state, int task_index, const kn_schedule *space, int n, int *order) {
  (void)task_index;
  (void)space;
  uint64_t *seed = state;
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(rand_next(seed) % (uint64_t)(i + 1)), tmp = order[i];
    order[i] = order[j];
    order[j] = tmp;
  }
}

static void random_observe(void *state, int task_index, const kn_schedule *s, const kn_at_result *r) {
  (void)state;
  (void)task_index;
  (void)s;
  (void)r;
}

kn_at_strategy kn_at_strategy_random(uint64_t *seed) {
  if (!*seed) *seed = 0x2545f4914f6cdd1dull;
  return (kn_at_strategy){.state = seed, .rank = random_rank, .observe = random_observe};
}

/* ---- helpers ---- */

static void path_of(const session *S, int task_index, int slot, const char *ext, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/t%d_%d.%s", S->dir, task_index, slot, ext);
}

/* The end-to-end estimate: Σ count × time over the kernels of the fastest
 * alternative (with best times) or of the first one (default times). */
static double e2e(const session *S, bool best) {
  double lowest = 0;
  for (int a = 0; a < (best ? S->n_alts : 1); a++) {
    double sum = 0;
    for (int i = 0; i < S->n_tasks; i++)
      if (S->tasks[i].ok) sum += S->tasks[i].count_in[a] * (best ? S->tasks[i].best_s : S->tasks[i].default_s);
    if (a == 0 || sum < lowest) lowest = sum;
  }
  return lowest;
}

/* One progress line: refreshed in place (\r) on a TTY at every trial,
 * otherwise a line every progress_interval seconds, and the final one. */
static void progress(session *S, bool final) {
  if (!S->out) return;
  double now = kn_at_now(), el = now - S->start;
  double interval = S->o->progress_interval > 0 ? S->o->progress_interval : 5;
  if (!S->tty && !final && now - S->last_progress < interval) return;
  S->last_progress = now;
  int new_done = S->done - S->sum->resumed;
  int left = S->budget - S->done;
  /* a trial costs what this session's trials cost so far, or before the
   * first one what a default did; the confirm phase times about
   * confirm_rounds + 1 candidates' worth per task that improved */
  double per_trial = new_done > 0 && S->search_start > 0 ? (now - S->search_start) / new_done
                     : S->search_start > 0 && S->n_tasks > 0 ? (S->search_start - S->start) / S->n_tasks
                                                             : 0;
  int improved = 0;
  for (int i = 0; i < S->n_tasks; i++) improved += S->tasks[i].ok && S->tasks[i].best_s < S->tasks[i].default_s;
  double eta = per_trial * ((left > 0 ? left : 0) + (double)improved * (S->o->confirm_rounds > 0 ? S->o->confirm_rounds + 1 : 0));
  if (S->o->time_budget > 0 && eta > S->o->time_budget - el) eta = S->o->time_budget - el;
  if (final || eta < 0) eta = 0;
  double best = e2e(S, true), dflt = e2e(S, false);
  char noisy[48] = "";
  if (S->sum->noisy_timings) snprintf(noisy, sizeof noisy, "  noisy timings %d", S->sum->noisy_timings);
  fprintf(S->out,
          "%skiln tune: trials %d/%d  tasks %d  best %.3f ms (default %.3f ms, %.2fx)%s  elapsed %.0f s  ETA %.0f s%s",
          S->tty ? "\r" : "", S->done, S->budget, S->n_tasks, best * 1e3, dflt * 1e3, best > 0 ? dflt / best : 1.0,
          noisy, el, eta, S->tty && !final ? "   " : "\n");
  fflush(S->out);
}

static int record_as(session *S, task *T, const kn_schedule *s, const kn_at_result *r, bool is_default, bool confirm,
                     kn_diag *d) {
  char trace[4096];
  kn_at_trace_write(s, trace, sizeof trace);
  bool noisy = r->status == KN_AT_OK && r->noisy;
  kn_at_record rec = {.target = S->target, .key = T->key, .trace = trace, .seconds = r->seconds,
                      .status = noisy && !S->o->keep_noisy ? KN_AT_NOISY : r->status, .is_default = is_default,
                      .warm = S->warm, .confirm = confirm, .noisy = noisy && S->o->keep_noisy};
  if (noisy) S->sum->noisy_timings++;
  kn_at_log_add(&S->log, &rec);
  if (!is_default && !confirm) S->sum->by_status[rec.status]++;
  FILE *f = fopen(S->o->log_path, "a");
  if (!f) return kn_diag_error(d, "tuning log '%s': cannot append to it", S->o->log_path);
  int rc = kn_at_log_append(f, &rec, d);
  if (fclose(f) != 0 && rc == 0) rc = kn_diag_error(d, "tuning log '%s': write failed", S->o->log_path);
  return rc;
}
static int record(session *S, task *T, const kn_schedule *s, const kn_at_result *r, bool is_default, kn_diag *d) {
  return record_as(S, T, s, r, is_default, false, d);
}

/* Times the built candidate so_path (writing its output to ref_path when
 * write_ref, else comparing with it) in a run child; a timing that comes
 * back noisy is taken once more, and the second stands. With --keep-noisy
 * the first stands: the user keeps noise rather than wait for a machine
 * that will not get quieter, and a second child would double the time. */
static kn_at_result time_candidate(session *S, const char *so, const char *ref, bool write_ref, kn_at_fault fault) {
  kn_at_job run;
  kn_at_run_start(&run, so, ref, write_ref, &S->measure, fault);
  kn_at_jobs_wait(&run, 1, S->o->stop);
  if (run.result.status == KN_AT_OK && run.result.noisy && !S->o->keep_noisy && !(S->o->stop && *S->o->stop)) {
    S->sum->remeasured++;
    kn_at_run_start(&run, so, ref, false, &S->measure, fault);
    kn_at_jobs_wait(&run, 1, S->o->stop);
  }
  if (run.result.status == KN_AT_OK) S->sum->timings++;
  return run.result;
}

/* ---- phase 1: tasks and their defaults ---- */

static void make_tasks(session *S, kn_arena *A) {
  int total = 0;
  for (int a = 0; a < S->n_alts; a++) total += S->grs[a]->n;
  S->tasks = KN_NEW_ARRAY(A, task, total + 1);
  for (int a = 0; a < S->n_alts; a++)
    for (int i = 0; i < S->grs[a]->n; i++) {
      const char *key = kn_at_log_key(&S->log, S->gs[a], &S->grs[a]->groups[i], A);
      int k = 0;
      while (k < S->n_tasks && strcmp(S->tasks[k].key, key)) k++;
      if (k == S->n_tasks) S->tasks[S->n_tasks++] = (task){.key = key, .graph = a, .group = i};
      if (++S->tasks[k].count_in[a] > S->tasks[k].count) S->tasks[k].count = S->tasks[k].count_in[a];
    }
}

static const kn_graph *graph_of(const session *S, const task *T) { return S->gs[T->graph]; }
static const kn_group *group_of(const session *S, const task *T) { return &S->grs[T->graph]->groups[T->group]; }

/* Builds and runs every task's default: reference output, baseline time. */
static int run_defaults(session *S, kn_arena *A, kn_diag *d) {
  int W = S->o->build_workers > 0 ? S->o->build_workers : 1;
  kn_at_job *jobs = KN_NEW_ARRAY(A, kn_at_job, S->n_tasks + 1);
  for (int base = 0; base < S->n_tasks; base += W) {
    int n = base + W <= S->n_tasks ? W : S->n_tasks - base;
    for (int k = 0; k < n; k++) {
      char so[320];
      path_of(S, base + k, 0, "so", so, sizeof so);
      kn_at_build_start(&jobs[base + k], graph_of(S, &S->tasks[base + k]), group_of(S, &S->tasks[base + k]), S->t, NULL, so,
                        S->o->measure.build_timeout);
    }
    kn_at_jobs_wait(&jobs[base], n, S->o->stop);
    if (S->o->stop && *S->o->stop) return 0;
  }
  for (int i = 0; i < S->n_tasks && !(S->o->stop && *S->o->stop); i++) {
    task *T = &S->tasks[i];
    if (jobs[i].result.status != KN_AT_OK || !jobs[i].has_shape) {
      if (S->out)
        fprintf(S->out, "kiln: warning: tune: task %d (%s) left out: its default schedule does not build: %s\n", i,
                T->key, jobs[i].result.detail);
      continue;
    }
    T->shape = jobs[i].shape;
    char so[320], ref[320];
    path_of(S, i, 0, "so", so, sizeof so);
    path_of(S, i, 0, "ref", ref, sizeof ref);
    kn_at_job run;
    run.result = time_candidate(S, so, ref, true, KN_AT_FAULT_NONE);
    unlink(so);
    if ((int)run.result.status == KN_AT_INTERRUPTED) return 0;
    if (run.result.status != KN_AT_OK) {
      if (S->out)
        fprintf(S->out, "kiln: warning: tune: task %d (%s) left out: its default schedule does not run: %s\n", i,
                T->key, run.result.detail);
      continue;
    }
    T->ok = T->have_ref = true;
    T->default_s = T->best_s = run.result.seconds;
    char trace[4096];
    kn_at_trace_write(&T->shape.dflt, trace, sizeof trace);
    /* resume: the baseline of the first session keeps the budget split stable */
    for (int r = 0; r < S->log.n; r++) {
      const kn_at_record *rec = &S->log.records[r];
      if (rec->status == KN_AT_OK && rec->is_default && !rec->confirm && !strcmp(rec->key, T->key) &&
          !strcmp(rec->trace, trace))
        T->default_s = rec->seconds;
    }
    if (!kn_at_log_has(&S->log, T->key, trace)) {
      if (record(S, T, &T->shape.dflt, &run.result, true, d) < 0) return -1;
    }
    const kn_at_record *best = kn_at_log_best(&S->log, T->key);
    if (best && best->seconds < T->best_s) T->best_s = best->seconds;
  }
  return 0;
}

/* ---- phase 2: spaces, the budget, earlier records ---- */

static bool env_measured(void *session_, int task_index, const kn_schedule *sch) {
  session *S = session_;
  char trace[4096];
  kn_at_trace_write(sch, trace, sizeof trace);
  return kn_at_log_has(&S->log, S->tasks[task_index].key, trace);
}

static void env_featurize(void *session_, int task_index, const kn_schedule *sch, int n, float *feats, bool *ok) {
  session *S = session_;
  int threads = S->o->measure.threads > 0 ? S->o->measure.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  kn_at_featurize(graph_of(S, &S->tasks[task_index]), group_of(S, &S->tasks[task_index]), S->t, sch, n,
                  S->o->build_workers > 0 ? S->o->build_workers : 1, threads, S->o->stop, feats, ok);
}

static void push_hist(task *T) {
  if (T->trials + 1 >= T->hist_cap) {
    int cap = T->hist_cap ? 2 * T->hist_cap : 64;
    double *h = realloc(T->hist, sizeof(double) * (size_t)cap);
    KN_ASSERT(h, "out of memory");
    T->hist = h;
    T->hist_cap = cap;
  }
  T->hist[T->trials] = T->best_s;
}

static void plan_budget(session *S, kn_arena *A) {
  bool proposes = S->o->strategy.propose != NULL;
  int total_cap = 0;
  for (int i = 0; i < S->n_tasks; i++) {
    task *T = &S->tasks[i];
    if (!T->ok) continue;
    T->n_space = kn_at_space_generate(&T->shape, S->t, A, &T->space);
    T->traces = KN_NEW_ARRAY(A, const char *, T->n_space + 1);
    for (int k = 0; k < T->n_space; k++) {
      char trace[4096];
      kn_at_trace_write(&T->space[k], trace, sizeof trace);
      T->traces[k] = kn_arena_strdup(A, trace);
    }
    T->order = KN_NEW_ARRAY(A, int, T->n_space + 1);
    if (!proposes) S->o->strategy.rank(S->o->strategy.state, i, T->space, T->n_space, T->order);
    total_cap += T->n_space > 0 ? T->n_space - 1 : 0; /* the default is measured already */
    push_hist(T);
  }
  S->budget = proposes || S->o->trials < total_cap ? S->o->trials : total_cap;
  /* earlier sessions' records: counted against the budget, shown to the strategy */
  int resumed = 0;
  for (int r = 0; r < S->log.n; r++) {
    const kn_at_record *rec = &S->log.records[r];
    for (int i = 0; i < S->n_tasks; i++) {
      task *T = &S->tasks[i];
      if (!T->ok || strcmp(rec->key, T->key) || rec->confirm) continue; /* confirm records are no trials */
      if (!rec->is_default) resumed++;
      kn_schedule sch;
      kn_diag d;
      kn_diag_init(&d);
      if (kn_at_trace_parse(rec->trace, &sch, &d) == 0) {
        kn_at_result res = {.status = rec->status, .seconds = rec->seconds};
        S->o->strategy.observe(S->o->strategy.state, i, &sch, &res);
      }
      kn_diag_free(&d);
      break;
    }
  }
  if (resumed > S->budget) resumed = S->budget;
  S->sum->resumed = resumed;
  S->done = S->last_improved = resumed;
}

/* The next unmeasured candidate of T in its ranked space (index), or -1. */
static int next_candidate(session *S, task *T) {
  while (T->next < T->n_space) {
    int k = T->order[T->next++];
    if (!kn_at_log_has(&S->log, T->key, T->traces[k])) return k;
  }
  return -1;
}

/* ---- phase 3: search ---- */

static bool out_of_time(session *S) {
  return (S->o->stop && *S->o->stop) || (S->o->time_budget > 0 && kn_at_now() - S->start >= S->o->time_budget);
}

/* The task the next batch goes to (the scheduler in the file comment), or -1. */
static int pick_task(session *S) {
  int best = -1;
  double best_score = -1;
  for (int i = 0; i < S->n_tasks; i++) { /* warm-up: every task once */
    task *T = &S->tasks[i];
    if (!T->ok || T->exhausted || T->trials > 0) continue;
    double w = T->count * T->default_s;
    if (w > best_score) best_score = w, best = i;
  }
  if (best >= 0) return best;
  for (int i = 0; i < S->n_tasks; i++) {
    task *T = &S->tasks[i];
    if (!T->ok || T->exhausted) continue;
    int k = T->trials, w = k < 8 ? k : 8;
    double recent = w > 0 ? (T->hist[k - w] - T->hist[k]) / w : 0;
    double score = T->count * (recent + 0.05 * T->best_s / (k + 1));
    if (score > best_score) best_score = score, best = i;
  }
  return best;
}

static int early_stop_window(const session *S) {
  if (S->o->early_stop > 0) return S->o->early_stop;
  return 4 * S->n_tasks > 64 ? 4 * S->n_tasks : 64;
}

/* Candidates for task ti into batch[0..max): proposed or next in rank order. */
static int candidates(session *S, int ti, kn_schedule *batch, int max) {
  task *T = &S->tasks[ti];
  if (S->o->strategy.propose) {
    kn_at_task_env env = {.task = ti, .shape = &T->shape, .t = S->t, .space = T->space, .n_space = T->n_space,
                          .default_s = T->default_s, .session = S, .measured = env_measured,
                          .featurize = env_featurize};
    double t0 = kn_at_now();
    int n = S->o->strategy.propose(S->o->strategy.state, &env, batch, max);
    S->sum->search_s += kn_at_now() - t0;
    /* never trust a strategy with validity or repeats */
    int m = 0;
    for (int i = 0; i < n; i++) {
      kn_diag d;
      kn_diag_init(&d);
      bool valid = kn_at_sched_validate(&batch[i], &T->shape, &d) == 0;
      kn_diag_free(&d);
      if (valid && !env_measured(S, ti, &batch[i])) batch[m++] = batch[i];
    }
    return m;
  }
  int n = 0;
  while (n < max) {
    int k = next_candidate(S, T);
    if (k < 0) break;
    batch[n++] = T->space[k];
  }
  return n;
}

static int search(session *S, kn_arena *A, kn_diag *d) {
  int W = S->o->build_workers > 0 ? S->o->build_workers : 1, B = 2 * W, fault_index = 0;
  kn_schedule *batch = KN_NEW_ARRAY(A, kn_schedule, B);
  kn_at_job *jobs = KN_NEW_ARRAY(A, kn_at_job, B);
  int window = early_stop_window(S);
  for (;;) {
    if (out_of_time(S)) {
      S->sum->out_of_time = !(S->o->stop && *S->o->stop);
      return 0;
    }
    if (S->done >= S->budget) return 0;
    if (!S->o->no_early_stop && S->done - S->last_improved >= window) {
      S->sum->early_stopped = true;
      return 0;
    }
    int ti = pick_task(S);
    if (ti < 0) return 0; /* every task exhausted */
    task *T = &S->tasks[ti];
    int want = T->trials == 0 ? W : B; /* warm-up: one build per worker */
    if (want > S->budget - S->done) want = S->budget - S->done;
    int n = candidates(S, ti, batch, want);
    if (n == 0) {
      T->exhausted = true;
      continue;
    }
    for (int base = 0; base < n; base += W) {
      int m = base + W <= n ? W : n - base;
      for (int j = base; j < base + m; j++) {
        char so[320];
        path_of(S, ti, j + 1, "so", so, sizeof so);
        kn_at_build_start(&jobs[j], graph_of(S, T), group_of(S, T), S->t, &batch[j], so,
                          S->o->measure.build_timeout);
      }
      kn_at_jobs_wait(&jobs[base], m, S->o->stop);
    }
    for (int j = 0; j < n; j++) {
      const kn_schedule *sch = &batch[j];
      char so[320], ref[320];
      path_of(S, ti, j + 1, "so", so, sizeof so);
      path_of(S, ti, 0, "ref", ref, sizeof ref);
      kn_at_result res = jobs[j].result;
      if (res.status == KN_AT_OK && !out_of_time(S)) {
        kn_at_fault fault = fault_index < S->o->n_plant ? S->o->plant[fault_index] : KN_AT_FAULT_NONE;
        fault_index++;
        res = time_candidate(S, so, ref, false, fault);
      } else if (res.status == KN_AT_OK) {
        res.status = (kn_at_status)KN_AT_INTERRUPTED;
      }
      unlink(so);
      if ((int)res.status == KN_AT_INTERRUPTED) continue; /* not measured: the next session retries it */
      bool trusted = res.status != KN_AT_OK || !res.noisy || S->o->keep_noisy;
      if (trusted) S->o->strategy.observe(S->o->strategy.state, ti, sch, &res); /* noise would mislead the model */
      if (record(S, T, sch, &res, false, d) < 0) return -1;
      S->sum->measured++;
      S->done++;
      if (trusted && res.status == KN_AT_OK && res.seconds < T->best_s) {
        if (res.seconds < 0.99 * T->best_s) S->last_improved = S->done;
        T->best_s = res.seconds;
      }
      T->trials++;
      push_hist(T);
      progress(S, false);
    }
  }
}

/* ---- phase 7: confirm ---- */

/* The search's best OK record of a key (confirm records left out), or NULL. */
static const kn_at_record *search_best(const session *S, const char *key) {
  const kn_at_record *best = NULL;
  for (int i = 0; i < S->log.n; i++) {
    const kn_at_record *r = &S->log.records[i];
    if (r->status == KN_AT_OK && !r->confirm && !strcmp(r->key, key) && (!best || r->seconds < best->seconds))
      best = r;
  }
  return best;
}

/* Times T's default and its search's best again, in turns; returns the
 * rounds done (both timed), 0 when the task has nothing to compare (its best
 * is its default) or a build fails. */
static int confirm_task(session *S, int ti, kn_at_job jobs[2], kn_diag *d, int *rc) {
  task *T = &S->tasks[ti];
  const kn_at_record *best = search_best(S, T->key);
  char dtrace[4096];
  kn_at_trace_write(&T->shape.dflt, dtrace, sizeof dtrace);
  if (!best || !strcmp(best->trace, dtrace)) return 0;
  kn_schedule sch[2] = {T->shape.dflt};
  kn_diag pd;
  kn_diag_init(&pd);
  bool parsed = kn_at_trace_parse(best->trace, &sch[1], &pd) == 0;
  kn_diag_free(&pd);
  if (!parsed) return 0;
  char so[2][320], ref[320];
  path_of(S, ti, 0, "ref", ref, sizeof ref);
  bool one_worker = S->o->build_workers <= 1;
  for (int k = 0; k < 2; k++) {
    path_of(S, ti, k + 1, "so", so[k], sizeof so[k]);
    kn_at_build_start(&jobs[k], graph_of(S, T), group_of(S, T), S->t, k ? &sch[1] : NULL, so[k],
                      S->o->measure.build_timeout);
    if (one_worker) kn_at_jobs_wait(&jobs[k], 1, S->o->stop);
  }
  if (!one_worker) kn_at_jobs_wait(jobs, 2, S->o->stop);
  int rounds = 0;
  bool go = jobs[0].result.status == KN_AT_OK && jobs[1].result.status == KN_AT_OK;
  while (go && rounds < S->o->confirm_rounds && !(S->o->stop && *S->o->stop) && *rc == 0) {
    /* a round is appended only whole, so that an interrupted one cannot
     * leave the default alone in the confirm records */
    kn_at_result res[2];
    for (int k = 0; k < 2 && go; k++) {
      res[k] = time_candidate(S, so[k], ref, false, KN_AT_FAULT_NONE);
      go = res[k].status == KN_AT_OK;
    }
    if (!go) break;
    for (int k = 0; k < 2 && *rc == 0; k++)
      if (record_as(S, T, &sch[k], &res[k], k == 0, true, d) < 0) *rc = -1;
    rounds++;
  }
  for (int k = 0; k < 2; k++) unlink(so[k]);
  return rounds;
}

static int confirm(session *S, kn_arena *A, kn_diag *d) {
  if (S->o->confirm_rounds <= 0) return 0;
  double t0 = kn_at_now();
  kn_at_job *jobs = KN_NEW_ARRAY(A, kn_at_job, 2);
  int rc = 0;
  for (int i = 0; i < S->n_tasks && rc == 0 && !(S->o->stop && *S->o->stop); i++) {
    task *T = &S->tasks[i];
    if (!T->ok || confirm_task(S, i, jobs, d, &rc) == 0) continue;
    S->sum->confirmed++;
    const kn_at_record *best = kn_at_log_best(&S->log, T->key);
    char dtrace[4096];
    kn_at_trace_write(&T->shape.dflt, dtrace, sizeof dtrace);
    if (best && !strcmp(best->trace, dtrace)) S->sum->confirmed_default++;
    /* the estimates from here on: the confirm timings */
    if (best) T->best_s = best->seconds;
    for (int r = 0; r < S->log.n; r++) {
      const kn_at_record *c = &S->log.records[r];
      if (c->confirm && c->is_default && c->status == KN_AT_OK && !strcmp(c->key, T->key) && c->seconds < T->default_s)
        T->default_s = c->seconds;
    }
    if (T->best_s > T->default_s) T->best_s = T->default_s;
    progress(S, false);
  }
  S->sum->confirm_s = kn_at_now() - t0;
  return rc;
}

/* Empties the session's private folder (candidates' .so/.h, references). */
static void remove_dir_files(const char *dir) {
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(dp);
}

/* Distinct bytes one inference touches: every constant a live node reads,
 * plus the peak of the values alive at once (the runtime's arena reuses the
 * rest), batch 1. A kernel's weights in a model were last read that many
 * bytes ago, so the cold sweep reads that much (at most twice the
 * last-level cache): where the last-level cache holds the whole model the
 * weights are in it, as in the model; a sweep of twice that cache would
 * leave them in memory and time small-weight kernels slower than they run
 * in the model (docs/autotune.md, "Cache state"). */
static size_t model_bytes(const kn_graph *g) {
  int nv = g->n_values, nn = g->n_nodes;
  int *last = malloc(sizeof(int) * (size_t)(nv + 1));
  int64_t *delta = calloc((size_t)nn + 2, sizeof(int64_t));
  size_t consts = 0;
  if (!last || !delta) {
    free(last), free(delta);
    return 0;
  }
  for (int v = 0; v < nv; v++) last[v] = -1;
  for (int i = 0; i < nn; i++)
    for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_in; k++)
      if (g->nodes[i].in[k] >= 0) last[g->nodes[i].in[k]] = i;
  for (int v = 0; v < nv; v++) {
    const kn_value *x = &g->values[v];
    int64_t numel = kn_shape_numel_max(&x->shape, 1);
    if (numel <= 0) continue;
    int64_t bytes = numel * (int64_t)kn_dtype_size(x->dtype);
    int p = x->producer;
    if (x->data) {
      if (last[v] >= 0) consts += (size_t)bytes;
    } else if (p >= 0 && !g->nodes[p].dead) {
      delta[p] += bytes;
      delta[(last[v] > p ? last[v] : nn) + 1] -= bytes;
    }
  }
  int64_t live = 0, peak = 0;
  for (int i = 0; i <= nn; i++) {
    live += delta[i];
    if (live > peak) peak = live;
  }
  free(last), free(delta);
  return consts + (size_t)peak;
}

int kn_at_tune(const kn_graph *g, const kn_groups *groups, const kn_target *t, const kn_at_options *o,
               kn_at_summary *sum, kn_diag *d) {
  return kn_at_tune_alternatives(&g, &groups, 1, t, o, sum, d);
}

int kn_at_tune_alternatives(const kn_graph *const *gs, const kn_groups *const *grs, int n_alts, const kn_target *t,
                            const kn_at_options *o, kn_at_summary *sum, kn_diag *d) {
  KN_ASSERT(n_alts >= 1 && n_alts <= KN_AT_MAX_ALTS, "alternatives");
  memset(sum, 0, sizeof *sum);
  session S = {.gs = gs, .grs = grs, .n_alts = n_alts, .t = t, .o = o, .sum = sum, .out = o->progress,
               .start = kn_at_now()};
  S.tty = S.out && isatty(fileno(S.out));
  kn_at_target_string(t, S.target, sizeof S.target);
  if (kn_at_log_load(o->log_path, S.target, true, o->progress, &S.log, d) < 0) return -1;
  if (S.log.other_target && S.out)
    fprintf(S.out, "kiln: note: %s: %d records for other targets ignored (this target: %s)\n", o->log_path,
            S.log.other_target, S.target);
  /* times taken with warm and with cold caches do not compare: the
   * session resumes only from records timed its own way */
  S.warm = o->measure.warm || o->measure.runner;
  int kept = 0, other_cache = 0;
  for (int i = 0; i < S.log.n; i++) {
    if (S.log.records[i].in_model) continue; /* model checks' records: for compile, not the search */
    if (S.log.records[i].warm == S.warm) S.log.records[kept++] = S.log.records[i];
    else other_cache++;
  }
  S.log.n = kept;
  if (other_cache && S.out)
    fprintf(S.out, "kiln: note: %s: %d records timed with %s caches ignored (this session times with %s caches)\n",
            o->log_path, other_cache, S.warm ? "cold" : "warm", S.warm ? "warm" : "cold");
  FILE *probe = fopen(o->log_path, "a");
  if (!probe) {
    kn_at_log_free(&S.log);
    return kn_diag_error(d, "tuning log '%s': cannot open it for appending", o->log_path);
  }
  fclose(probe);
  const char *tmp = o->measure.workdir ? o->measure.workdir : getenv("TMPDIR");
  snprintf(S.dir, sizeof S.dir, "%s/kiln-tune.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(S.dir)) {
    kn_at_log_free(&S.log);
    return kn_diag_error(d, "tune: cannot create a temporary folder under %s", tmp && *tmp ? tmp : "/tmp");
  }
  S.measure = o->measure;
  S.measure.accept_noisy = o->keep_noisy;
  unsigned char *sweep = NULL;
  if (!S.warm) {
    size_t model = model_bytes(gs[0]), cap = 2 * (size_t)kn_at_llc_bytes();
    S.measure.sweep_bytes = model < cap ? model : cap;
    if (S.out)
      fprintf(S.out, "kiln: note: cold caches: %.1f MiB read through before each timed run (%s)\n",
              (double)S.measure.sweep_bytes / 1048576.0,
              model < cap ? "the model's constants and its peak of live values" : "twice the last-level cache");
    sweep = malloc(S.measure.sweep_bytes);
    if (sweep) memset(sweep, 1, S.measure.sweep_bytes); /* fault every page in before the children fork */
    S.measure.sweep = sweep;
  }
  kn_arena A;
  kn_arena_init(&A);
  make_tasks(&S, &A);
  sum->tasks = S.n_tasks;
  sum->kernels = grs[0]->n;
  if (S.out) {
    fprintf(S.out, "kiln tune: %d kernels in %d tasks; building and timing each task's default first\n", sum->kernels,
            sum->tasks);
    fflush(S.out);
  }
  int rc = run_defaults(&S, &A, d);
  if (rc == 0 && !(o->stop && *o->stop)) {
    S.search_start = kn_at_now();
    plan_budget(&S, &A);
    progress(&S, false);
    rc = search(&S, &A, d);
    if (rc == 0) rc = confirm(&S, &A, d);
  }
  sum->interrupted = o->stop && *o->stop;
  sum->elapsed = kn_at_now() - S.start;
  for (int i = 0; i < S.n_tasks; i++) free(S.tasks[i].hist);
  sum->default_e2e = e2e(&S, false);
  sum->best_e2e = e2e(&S, true);
  if (rc == 0) progress(&S, true);
  remove_dir_files(S.dir);
  rmdir(S.dir);
  kn_arena_free(&A);
  kn_at_log_free(&S.log);
  free(sweep);
  return rc;
}
