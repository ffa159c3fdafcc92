/* tuned.h — what `kiln compile --tuning-log` adds to the pipeline: the log,
 * the convolution algorithms its records chose, the provider that gives each
 * kernel its best record, the row pipes that keep their defaults,
 * and the report of which step got which schedule. pipeline.c calls these
 * from its steps; without a tuning log none of them runs. */
#ifndef KN_TUNED_H
#define KN_TUNED_H

#include "autotune/autotune.h"
#include "codegen/plan.h"
#include "tools/pipeline.h"

typedef struct kn_tuned {
  kn_at_log log;
  kn_conv_algo_choice choice;     /* filled by kn_tuned_choose_convs */
  kn_at_replay replay;       /* the provider's state: counts, and per kernel its key and traces */
  kn_sched_provider provider;
  const kn_kernel **tuned;   /* per group: the kernel the log gave it, before kn_tuned_keep_pipes */
} kn_tuned;

/* Loads o->tuning_log's records for `target` (a notice counts the others). */
int kn_tuned_open(kn_tuned *t, const kn_compile_opts *o, const kn_target *target, kn_diag *d);
void kn_tuned_close(kn_tuned *t);

/* Each Winograd-eligible conv takes the algorithm whose kernels measured
 * faster (conv_algo.c). Returns the choice, or NULL when --conv-algo fixed
 * the algorithm; *failed on error. */
const kn_conv_algo_choice *kn_tuned_choose_convs(kn_tuned *t, const kn_compile_opts *o, kn_arena *A, bool *failed,
                                            kn_diag *d);

/* Starts the replay of the log over n_groups kernels; returns its provider. */
const kn_sched_provider *kn_tuned_provider(kn_tuned *t, const kn_compile_opts *o, int n_groups, kn_arena *A);

/* A tuning record measured a kernel alone, where a row pipe
 * (docs/abi.md) is not: a tuned schedule that does not run one row per task
 * (kn_kernel.rows) drops the pipe its default would have formed. Such
 * kernels whose default does (kn_kernel_build.default_rows) are rebuilt with
 * it; the plan of that mix says which pipes form, and their members keep the
 * defaults, the others their tuned schedules. Returns how many kept their
 * defaults, or -1. */
int kn_tuned_keep_pipes(kn_tuned *t, kn_graph *g, const kn_groups *groups, const kn_target *target,
                        kn_expr_ctx *ec, const kn_compile_opts *o, kn_arena *A, kn_kernel_build *kernels,
                        kn_diag *d);

/* Whether kernel i runs the schedule the log gave it (not a default kept for a pipe). */
bool kn_tuned_runs_record(const kn_tuned *t, const kn_kernel_build *kernels, int i);

/* Fills o->report per plan step from the kernels' replay records. */
int kn_tuned_report(const kn_tuned *t, kn_compile_report *r, const kn_plan *plan, const kn_kernel_build *kernels,
                    int n_groups, kn_diag *d);

#endif
