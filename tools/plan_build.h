/* plan_build.h — the static execution plan and memory plan of a model. */
#ifndef KN_PLAN_BUILD_H
#define KN_PLAN_BUILD_H

#include "../codegen/plan.h"
#include "../schedule/schedule.h"

/* Assigns storage to every value read or written by the kernels (graph
 * inputs and outputs, constants, one workspace for the rest, placed by
 * liveness) and fills `plan`, arena-allocated. */
int kn_plan_build(const kn_graph *g, const kn_kernel_build *kernels, int n_kernels,
                  const char *prefix, kn_arena *arena, kn_plan *plan, kn_diag *d);

#endif
