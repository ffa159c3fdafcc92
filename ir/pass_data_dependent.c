/* pass_data_dependent.c — see kn_pass_data_dependent in passes.h. Not written yet: a no-op. */
#include "passes.h"

int kn_pass_data_dependent(kn_graph *g, kn_diag *d) {
  (void)g;
  (void)d;
  return 0;
}
