/* pass_decompose_dft.c — DFT and STFT as contractions with constant DFT
 * matrices (see kn_expand_dft). */
#include "pass_expand.h"

int kn_expand_dft(kn_graph *g, int node, kn_diag *d) {
  const kn_node *n = &g->nodes[node];
  return kn_diag_error(d, "node '%s' (%s): not supported yet", n->name, n->op_type);
}
