/* model_check.h — the end of `kiln tune`: the tuned schedules timed inside the
 * whole model against the defaults (model_check.c). */
#ifndef KN_TOOLS_MODEL_CHECK_H
#define KN_TOOLS_MODEL_CHECK_H

#include <stdio.h>

#include "tools/pipeline.h"

typedef struct kn_model_check_opts {
  const kn_compile_opts *compile; /* the model, target, batch, bindings, --conv-algo of the session */
  const char *log_path;           /* the session's log: read, and appended to */
  const char *target_string;      /* the records' "target" */
  int threads;                    /* the pool size (0: the CPUs) */
  int rounds;                     /* alternations of the two builds (>= 1) */
  int runs;                       /* profiled runs per build and round */
  const char *workdir;            /* temporary artifacts (NULL: $TMPDIR or /tmp) */
  bool keep_noisy;                /* append noisy times too, marked "noisy" (kiln tune --keep-noisy) */
  bool plant_busy;                /* tests: run under planted load (kn_rt_busy_start) */
} kn_model_check_opts;

#define KN_CHECK_RANKS 3 /* schedules per task tried in the model: the best alone and 2 runners-up */

typedef struct kn_model_check_summary {
  int steps, tuned_steps, keys; /* tuned_steps: of the best-alone build; keys: tasks with a schedule
                                 * other than the default in some build */
  int compile_tuned;            /* steps running tuned schedules when compiled with the log as it is now */
  int won[KN_CHECK_RANKS + 1];  /* of those keys, fastest in the model: [0] the default, [k] rank k-1 */
  double default_ms, tuned_ms;  /* sums over the steps of their medians: the defaults, the best alone */
  double chosen_ms;             /* the same with the fastest schedule per key (an estimate) */
  int runs, disturbed;          /* profiled runs; of them, disturbed by other processes (rt/measure_util.h) */
  bool noisy;                   /* most runs disturbed: nothing was appended to the log (with
                                 * keep_noisy: appended, marked "noisy") */
} kn_model_check_summary;

/* Compiles the model with the log KN_CHECK_RANKS + 1 times: every kernel at
 * its default, then at its best schedule timed alone, its first runner-up,
 * its second (kn_at_log_ranked_alone; a key without one keeps its default);
 * runs the artifacts in turns with the profiler and appends, per workload
 * key, one "cache":"model" record per schedule it ran: the median time per
 * kernel inside the model. `kiln compile --tuning-log` then takes the
 * fastest (kn_at_log_best). When other processes disturbed most of the
 * runs (their threads waited for the CPUs longer than KN_RT_MAX_WAIT of the
 * run), the times are noise: the summary is filled, sum->noisy set, and
 * nothing appended (o->keep_noisy: the records, marked "noisy"). Returns 0, or -1 with a diagnostic; nothing is appended
 * on failure. */
int kn_model_check(const kn_model_check_opts *o, kn_model_check_summary *sum, kn_diag *d);

#endif
