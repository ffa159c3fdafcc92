/* measure.h — builds and runs of candidates in child processes (measure.c),
 * used by the tuning session (tune.c). A job is one child; the parent never
 * builds a kernel itself, so the graph it tunes is never modified and a
 * compiler assert in a candidate costs one trial. */
#ifndef KN_AT_MEASURE_H
#define KN_AT_MEASURE_H

#include <sys/types.h>

#include "autotune/autotune.h"

#define KN_AT_INTERRUPTED KN_AT_STATUS_COUNT /* result status: stopped by the user, not recorded */

typedef struct kn_at_job {
  pid_t pid;
  int fd;
  double start, timeout;
  bool running;
  kn_at_result result;
  bool has_shape;
  kn_at_task_shape shape; /* build jobs: the task as the child saw it */
} kn_at_job;

/* Forks a child that builds group `grp` of g with schedule `s` (NULL: the
 * default) into the one-kernel artifact `so_path`: its external non-constant
 * inputs become the artifact's inputs, its constants stay constants. */
void kn_at_build_start(kn_at_job *job, const kn_graph *g, const kn_group *grp, const kn_target *t,
                       const kn_schedule *s, const char *so_path, double timeout);
/* Forks a child that loads `so_path`, runs it on seeded random inputs and
 * either writes its output to `ref_path` (write_ref) or compares it with
 * that file, then times it. */
void kn_at_run_start(kn_at_job *job, const char *so_path, const char *ref_path, bool write_ref,
                     const kn_at_measure_opts *o, kn_at_fault fault);
/* Waits for the running jobs among jobs[0..n) to end (or time out, or be
 * stopped by *stop); at most `max_running` run at once is the caller's
 * business. Returns when every job has ended. */
void kn_at_jobs_wait(kn_at_job *jobs, int n, volatile sig_atomic_t *stop);
/* Bytes of the last-level cache (sysconf; 32 MiB when it does not say). */
long kn_at_llc_bytes(void);
/* Seconds on the monotonic clock. */
double kn_at_now(void);

#endif
