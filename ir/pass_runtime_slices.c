/* pass_runtime_slices.c — see kn_pass_runtime_slices in passes.h. Not written yet: a no-op. */
#include "passes.h"

int kn_pass_runtime_slices(kn_graph *g, kn_diag *d) {
  (void)g;
  (void)d;
  return 0;
}
