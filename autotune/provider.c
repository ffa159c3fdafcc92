/* provider.c — compile with a tuning log: a kn_sched_provider that replaces
 * the rule-based default of each kernel with the best OK record of its
 * workload, when that record's trace fits the kernel (validated here, so a
 * stale or foreign record can only be ignored, never break the lowering). */
#include <string.h>

#include "autotune/autotune.h"

static void replay_choose(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  kn_at_replay *r = ctx;
  int k = r->n_kernels++;
  const char *key = kn_at_log_key(r->log, task->g, task->grp, r->arena);
  const kn_at_record *best = r->rank > 0 || r->alone ? kn_at_log_ranked_alone(r->log, key, r->rank)
                                                      : kn_at_log_best(r->log, key);
  if (!best && k >= r->cap) return;
  char now[4096], want[4096];
  kn_at_trace_write(s, now, sizeof now);
  if (k < r->cap) {
    r->keys[k] = key;
    r->default_traces[k] = kn_arena_strdup(r->arena, now);
    r->tuned_traces[k] = NULL;
    r->outcomes[k] = best ? KN_AT_UNFIT : KN_AT_NO_RECORD;
    r->records[k] = best;
  }
  if (!best) return;
  kn_schedule tuned;
  kn_at_task_shape ts;
  kn_at_task_shape_of(task, s, &ts);
  kn_diag d;
  kn_diag_init(&d);
  if (kn_at_trace_parse(best->trace, &tuned, &d) == 0 && kn_at_sched_validate(&tuned, &ts, &d) == 0) {
    kn_at_trace_write(&tuned, want, sizeof want);
    bool differs = strcmp(now, want) != 0;
    if (k < r->cap) r->outcomes[k] = differs ? KN_AT_TUNED : KN_AT_BEST_DEFAULT;
    if (differs && !r->defaults_only) {
      r->n_tuned++;
      if (k < r->cap) r->tuned_traces[k] = kn_arena_strdup(r->arena, want);
      *s = tuned;
    }
  }
  kn_diag_free(&d);
}

kn_sched_provider kn_at_replay_provider(kn_at_replay *r) {
  return (kn_sched_provider){.choose = replay_choose, .ctx = r};
}
