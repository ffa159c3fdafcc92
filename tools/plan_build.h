/* plan_build.h — the static execution plan and memory plan of a model. */
#ifndef KN_PLAN_BUILD_H
#define KN_PLAN_BUILD_H

#include "codegen/plan.h"
#include "schedule/schedule.h"

/* The largest tensor an artifact may hold (graph input, output, constant or
 * intermediate, in bytes at N = max_batch): 16 GiB. Shape inference accepts
 * far more (KN_MAX_TENSOR_BYTES, a bound for overflow-free arithmetic), so
 * that `kiln inspect` can describe such a model; `kiln compile` refuses it
 * here, before code generation, naming the tensor and the node making it. */
#define KN_PLAN_MAX_TENSOR_BYTES ((int64_t)1 << 34)
/* The largest workspace (all intermediates live at once, placed): 1 TiB. */
#define KN_PLAN_MAX_WORKSPACE_BYTES ((int64_t)1 << 40)

/* A workspace buffer: its size and lifetime in steps [first, last] in,
 * its offset in the workspace out. */
typedef struct kn_plan_buffer {
  int64_t bytes, offset;
  int first, last;
} kn_plan_buffer;

/* Places n buffers so that two whose lifetimes intersect never overlap,
 * each centred on an anchor shared with the others placed there (see
 * plan_build.c); returns the workspace size, a multiple of 64, as are the
 * offsets. */
int64_t kn_plan_place(kn_plan_buffer *b, int n);

/* Assigns storage to every value read or written by the kernels (graph
 * inputs and outputs, constants, one workspace for the rest, placed by
 * liveness, kn_plan_place) and fills `plan`, arena-allocated. */
int kn_plan_build(const kn_graph *g, const kn_kernel_build *kernels, int n_kernels,
                  const char *prefix, kn_arena *arena, kn_plan *plan, kn_diag *d);

#endif
