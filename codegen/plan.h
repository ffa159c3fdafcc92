/* plan.h — the static execution plan: what codegen packages into an artifact.
 *
 * Built by kn_plan_build (tools/plan_build.c) from the scheduled kernels and the
 * memory plan; consumed by codegen/package.c. Every pointer is owned by the
 * plan's arena. Offsets and sizes are for N = max_batch. */
#ifndef KN_PLAN_H
#define KN_PLAN_H

#include "include/kiln/artifact.h"
#include "ir/graph/graph.h"
#include "ir/loop/loop.h"

typedef struct kn_plan_tensor {
  const char *name;
  kn_dtype dtype;
  kn_shape shape; /* per-batch-unit dims with batch_mask, as in the graph */
} kn_plan_tensor;

typedef struct kn_plan_const {
  const char *name;
  int64_t bytes;
  const void *data;
} kn_plan_const;

typedef struct kn_plan_arg {
  int kind; /* KILN_ARG_* */
  int index;
  int64_t offset; /* bytes */
} kn_plan_arg;

typedef struct kn_plan_step {
  kn_kernel *kernel;
  /* 0, or the run-time check it computes (a bool scalar in its output):
   * KILN_CHECK_VALUE or KILN_CHECK_INDEX, kiln_step.check's value */
  int check;
  int n_args; /* == kernel->n_params */
  kn_plan_arg *args;
} kn_plan_step;

/* steps first and first + 1 as one row pipe (kiln_pipe) */
typedef struct kn_plan_pipe {
  int first;
  bool batched;
  int rows1, rows2, stride, pad, window, band;
} kn_plan_pipe;

typedef struct kn_plan {
  kn_arena *arena;
  const char *prefix; /* C identifier for symbols: PREFIX_run ... */
  int n_inputs, n_outputs;
  kn_plan_tensor *inputs, *outputs;
  int n_consts;
  kn_plan_const *consts;
  int n_steps;
  kn_plan_step *steps;
  int n_pipes;
  kn_plan_pipe *pipes; /* by ascending first */
  int64_t workspace_bytes;
  int64_t max_batch;
} kn_plan;

/* The abi_minor an artifact of plan p says (docs/abi.md#versions): 5 when
 * a step checks indices (KILN_CHECK_INDEX), else 4 for GPU artifacts and 3
 * for CPU ones, whose bytes so stay what they were. */
static inline int kn_plan_abi_minor(const kn_plan *p, bool gpu) {
  for (int s = 0; s < p->n_steps; s++)
    if (p->steps[s].check == KILN_CHECK_INDEX) return 5;
  return gpu ? 4 : 3;
}

#endif
