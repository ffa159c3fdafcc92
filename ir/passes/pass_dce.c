/* pass_dce.c — dead-code elimination.
 *
 * Requires: nothing beyond a well-formed graph (it toposorts first).
 * Guarantees: every remaining node has an output that a graph output depends
 * on; nodes are toposorted with dead ones dropped; shapes are untouched (and
 * so stay valid). Values that become unused stay in g->values (indices are
 * stable) but nothing refers to them. */
#include <stdlib.h>

#include "ir/passes/passes.h"

int kn_pass_dce(kn_graph *g, kn_diag *d) {
  if (kn_graph_toposort(g, d) < 0) return -1;
  bool *needed = calloc((size_t)g->n_values + 1, sizeof(bool));
  KN_ASSERT(needed, "out of memory");
  for (int i = 0; i < g->n_outputs; i++) needed[g->outputs[i]] = true;
  /* Reverse topological order: all consumers are seen before a producer. */
  for (int i = g->n_nodes - 1; i >= 0; i--) {
    kn_node *n = &g->nodes[i];
    bool live = false;
    for (int k = 0; k < n->n_out; k++) live |= needed[n->out[k]];
    if (!live) {
      kn_pass_kill_node(g, i);
      continue;
    }
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) needed[n->in[k]] = true;
  }
  free(needed);
  return kn_graph_toposort(g, d);
}
