/* model_check.h — the end of `kiln tune`: the tuned schedules timed inside the
 * whole model against the defaults (model_check.c). */
#ifndef KN_TOOLS_MODEL_CHECK_H
#define KN_TOOLS_MODEL_CHECK_H

#include <stdio.h>

#include "pipeline.h"

typedef struct kn_model_check_opts {
  const kn_compile_opts *compile; /* the model, target, batch, bindings, --conv-algo of the session */
  const char *log_path;           /* the session's log: read, and appended to */
  const char *target_string;      /* the records' "target" */
  int threads;                    /* the pool size (0: the CPUs) */
  int rounds;                     /* alternations of the two builds (>= 1) */
  int runs;                       /* profiled runs per build and round */
  const char *workdir;            /* temporary artifacts (NULL: $TMPDIR or /tmp) */
} kn_model_check_opts;

typedef struct kn_model_check_summary {
  int steps, tuned_steps, keys; /* keys: tasks with a tuned schedule in the model */
  int kept, reverted;           /* of those keys: tuned faster in the model / default faster */
  double default_ms, tuned_ms;  /* sums over the steps of their medians, the two builds */
  double chosen_ms;             /* the same with the faster schedule per key (an estimate) */
} kn_model_check_summary;

/* Compiles the model with the log twice, with its tuned schedules and with
 * every kernel at its default, runs the two artifacts in turns with the
 * profiler and appends, per workload key that has a tuned schedule, two
 * "cache":"model" records: each schedule's median time per kernel inside the
 * model. `kiln compile --tuning-log` then takes the faster (kn_at_log_best).
 * Returns 0, or -1 with a diagnostic; nothing is appended on failure. */
int kn_model_check(const kn_model_check_opts *o, kn_model_check_summary *sum, kn_diag *d);

#endif
