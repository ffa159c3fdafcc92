/* pass_expand.c — helpers shared by the expansion passes (pass_expand.h):
 * which ops they remove, and which graph inputs a refused expansion needs. */
#include "ir/passes/pass_expand.h"

#include <stdlib.h>
#include <string.h>

bool kn_expand_is_composite(kn_op op) {
  switch (op) {
  case KN_OP_IF: case KN_OP_LOOP: case KN_OP_SCAN: case KN_OP_RNN: case KN_OP_LSTM:
  case KN_OP_GRU: case KN_OP_DFT: case KN_OP_STFT:
    return true;
  default:
    return false;
  }
}

/* Marks the graph inputs without data that v's value derives from (through
 * live producers; Shape / Size read only a shape); true if there are any. */
static bool need_walk(const kn_graph *g, bool *needed, bool *seen, int v) {
  if (v < 0 || seen[v] || g->values[v].data) return false;
  seen[v] = true;
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i] == v) {
      if (needed) needed[v] = true;
      return true;
    }
  int p = g->values[v].producer;
  if (p < 0 || g->nodes[p].dead) return false;
  const kn_node *n = &g->nodes[p];
  bool shape_only = n->op == KN_OP_SHAPE || n->op == KN_OP_SIZE, any = false;
  for (int k = shape_only ? 1 : 0; k < n->n_in; k++) any |= need_walk(g, needed, seen, n->in[k]);
  return any;
}

const char *kn_expand_need(const kn_graph *g, bool *needed, int v) {
  if (v < 0) return "";
  bool direct = false;
  for (int i = 0; i < g->n_inputs; i++) direct |= g->inputs[i] == v;
  bool *seen = calloc((size_t)g->n_values + 1, sizeof *seen);
  KN_ASSERT(seen, "out of memory");
  bool any = need_walk(g, needed, seen, v);
  free(seen);
  if (!any) return "";
  return direct ? "; it is a graph input, which can be bound at compile time"
                : "; it depends on graph inputs, which can be bound at compile time";
}
