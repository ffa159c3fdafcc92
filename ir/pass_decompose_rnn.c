/* pass_decompose_rnn.c — RNN / LSTM / GRU unrolled into MatMul + elementwise
 * ops per time step (see kn_expand_rnn). */
#include "pass_expand.h"

int kn_expand_rnn(kn_graph *g, int node, kn_diag *d) {
  const kn_node *n = &g->nodes[node];
  return kn_diag_error(d, "node '%s' (%s): not supported yet", n->name, n->op_type);
}
